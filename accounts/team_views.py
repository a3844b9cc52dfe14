"""The team page (/accounts/team/): team admins add people, send invitation and reset
links, deactivate accounts, set roles and daily quotas, and see usage. Everyone else gets
a 404: for them the page does not exist."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils import translation
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from core.exceptions import ServiceError
from core.middleware import errors_back_to

from . import selectors, services
from .forms import MemberCreateForm, MemberQuotaForm, MemberRoleForm
from .mail import mail_enabled, mail_send, site_origin
from .models import Profile

_LINK_KEY = "team_link"


def _require_admin(request: HttpRequest) -> None:
    if not selectors.is_team_admin(request.user):
        raise Http404


def _hand_out(request: HttpRequest, *, user, kind: str, path: str) -> None:
    """Mail the invitation or reset link to `user` when the site sends mail and they have an
    address, and keep it for the next page either way, with how the mail went (shown once,
    then gone from the session)."""
    url = site_origin(request) + path
    mailed = ""
    if mail_enabled() and user.email:
        sent = mail_send(
            to=user.email,
            recipient=user.pk,
            language=None if _language_known(user) else translation.get_language(),
            template=kind,
            context={
                "url": url,
                "username": user.get_username(),
                "inviter": request.user.get_username(),
                "link_days": _link_days(),
            },
        )
        mailed = "sent" if sent else "failed"
    request.session[_LINK_KEY] = {
        "user_id": user.pk,
        "kind": kind,
        "url": url,
        "mailed": mailed,
        "email": user.email,
    }


def _language_known(user) -> bool:
    """Whether the site knows what `user` reads (chosen, or seen from their browser). A
    person just added does not yet: their invitation is in the language of who adds them."""
    return Profile.objects.filter(user=user).exclude(language="", browser_language="").exists()


def _link_days() -> int:
    return max(1, settings.PASSWORD_RESET_TIMEOUT // 86400)


def _defaults() -> dict[str, int]:
    return {
        "messages": settings.HERMES_DAILY_MESSAGE_LIMIT,
        "tokens": settings.HERMES_DAILY_TOKEN_LIMIT,
    }


def _defaults_text() -> dict[str, str]:
    """The team defaults in words: "1,000 messages" / "no message limit"."""
    messages_limit, tokens_limit = (
        settings.HERMES_DAILY_MESSAGE_LIMIT,
        settings.HERMES_DAILY_TOKEN_LIMIT,
    )
    return {
        "messages": ngettext("%(n)s message", "%(n)s messages", messages_limit)
        % {"n": number_format(messages_limit, force_grouping=True)}
        if messages_limit
        else _("no message limit"),
        "tokens": ngettext("%(n)s token", "%(n)s tokens", tokens_limit)
        % {"n": number_format(tokens_limit, force_grouping=True)}
        if tokens_limit
        else _("no token limit"),
    }


@login_required
def team(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    form = MemberCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user, path = services.member_create(actor=request.user, **form.cleaned_data)
        except ServiceError as exc:
            form.add_error("username" if exc.code == "duplicate" else None, exc.text)
        else:
            _hand_out(request, user=user, kind="invitation", path=path)
            messages.success(request, _("%(name)s was added.") % {"name": user.get_username()})
            return redirect("team")
    members = selectors.team_members()
    return render(
        request,
        "team/team.html",
        {
            "form": form,
            "members": members,
            "active_count": sum(1 for m in members if m.user.is_active),
            "defaults": _defaults(),
            "defaults_text": _defaults_text(),
            "link": request.session.pop(_LINK_KEY, None),
            "link_days": _link_days(),
            "day_resets_at": selectors.day_bounds()[1],
        },
        status=400 if request.method == "POST" else 200,
    )


def _member_or_404(request: HttpRequest, user_id: int):
    _require_admin(request)
    row = selectors.team_member(user_id=user_id)
    if row is None:
        raise Http404
    return row


def _quota_form(row: selectors.MemberRow) -> MemberQuotaForm:
    form = MemberQuotaForm(
        initial={
            "daily_message_limit": row.custom_messages,
            "daily_token_limit": row.custom_tokens,
        }
    )
    # An empty box means the team default: say what that is.
    for name, default in (
        ("daily_message_limit", settings.HERMES_DAILY_MESSAGE_LIMIT),
        ("daily_token_limit", settings.HERMES_DAILY_TOKEN_LIMIT),
    ):
        shown = number_format(default, force_grouping=True) if default else _("no limit")
        form.fields[name].widget.attrs["placeholder"] = _("team default (%(shown)s)") % {
            "shown": shown
        }
    return form


@login_required
def member(request: HttpRequest, user_id: int) -> HttpResponse:
    row = _member_or_404(request, user_id)
    return render(
        request,
        "team/member.html",
        {
            "m": row,
            "is_self": row.user.pk == request.user.pk,
            "locked": row.user.is_superuser and not request.user.is_superuser,
            "role_form": MemberRoleForm(initial={"role": "admin" if row.is_admin else "member"}),
            "quota_form": _quota_form(row),
            "defaults": _defaults(),
            "defaults_text": _defaults_text(),
            "link": request.session.pop(_LINK_KEY, None),
            "link_days": _link_days(),
        },
    )


def _act(request: HttpRequest, user_id: int, action, success: str) -> HttpResponse:
    """Run a member action; its views are marked `errors_back_to` their member page, where
    ServiceErrorMiddleware flashes a refusal (and a NotFound is the 404 page)."""
    _require_admin(request)
    action()
    if success:
        messages.success(request, success)
    return redirect("team_member", user_id=user_id)


_back_to_member = errors_back_to("team_member", args=["user_id"])


@login_required
@require_POST
@_back_to_member
def member_role(request: HttpRequest, user_id: int) -> HttpResponse:
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        _require_admin(request)
        messages.error(request, _("Choose admin or member."))
        return redirect("team_member", user_id=user_id)
    role = form.cleaned_data["role"]
    return _act(
        request,
        user_id,
        lambda: services.member_set_role(actor=request.user, user_id=user_id, role=role),
        _("Role saved."),
    )


@login_required
@require_POST
@_back_to_member
def member_quota(request: HttpRequest, user_id: int) -> HttpResponse:
    form = MemberQuotaForm(request.POST)
    if not form.is_valid():
        _require_admin(request)
        messages.error(request, _("Limits are whole numbers, 0 or more (empty: team default)."))
        return redirect("team_member", user_id=user_id)
    data = form.cleaned_data
    return _act(
        request,
        user_id,
        lambda: services.member_set_quota(
            actor=request.user,
            user_id=user_id,
            daily_message_limit=data["daily_message_limit"],
            daily_token_limit=data["daily_token_limit"],
        ),
        _("Quotas saved."),
    )


@login_required
@require_POST
@_back_to_member
def member_active(request: HttpRequest, user_id: int) -> HttpResponse:
    active = request.POST.get("active") == "1"
    return _act(
        request,
        user_id,
        lambda: services.member_set_active(actor=request.user, user_id=user_id, active=active),
        _("Account reactivated.")
        if active
        else _("Account deactivated; their open tabs are closed."),
    )


@login_required
@require_POST
@_back_to_member
def member_reset(request: HttpRequest, user_id: int) -> HttpResponse:
    def reset() -> None:
        path = services.member_password_reset(actor=request.user, user_id=user_id)
        user = services.access_member(actor=request.user, user_id=user_id)
        _hand_out(request, user=user, kind="reset", path=path)

    return _act(request, user_id, reset, _("The old password no longer works."))


@login_required
@require_POST
@_back_to_member
def member_invite(request: HttpRequest, user_id: int) -> HttpResponse:
    def invite() -> None:
        path = services.member_invite_link(actor=request.user, user_id=user_id)
        user = services.access_member(actor=request.user, user_id=user_id)
        _hand_out(request, user=user, kind="invitation", path=path)

    return _act(request, user_id, invite, "")


class PasswordSetView(auth_views.PasswordResetConfirmView):
    """Where an invited person (or one whose password was reset) chooses a password; they
    are logged in and land on the dashboard."""

    template_name = "registration/password_set.html"
    post_reset_login = True
    # The password backend (there are several: the auth proxy's header is another).
    post_reset_login_backend = "accounts.backends.ThrottledModelBackend"
    success_url = reverse_lazy("dashboard")

    def form_valid(self, form):
        response = super().form_valid(form)
        messages.success(self.request, _("Your password is set. Welcome!"))
        return response
