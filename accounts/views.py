from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from core.exceptions import ServiceError
from core.middleware import errors_back_to

from . import reauth, services, throttle
from .account_page import account_sections_context
from .forms import (
    PasswordResetMailForm,
    ProfileForm,
    SignupForm,
    ThrottledPasswordChangeForm,
    TokenCreateForm,
)
from .mail import SITE_NAME, mail_enabled, site_origin


def passwords_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A page about passwords (change, forgot, choose one, sign up): it does not exist
    while HERMES_PASSWORD_LOGIN is off."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not settings.HERMES_PASSWORD_LOGIN:
            raise Http404
        return view(request, *args, **kwargs)

    return wrapped


class LoginView(auth_views.LoginView):
    """The login page: "Sign in with <provider>" when single sign-on is on, and the
    password form unless HERMES_PASSWORD_LOGIN is off (a password posted anyway is refused
    with 403 and the page again)."""

    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if settings.HERMES_PASSWORD_LOGIN:
            return super().post(request, *args, **kwargs)
        response = self.render_to_response(self.get_context_data(password_refused=True))
        response.status_code = 403
        return response


class PasswordChangeView(auth_views.PasswordChangeView):
    """Changing the password: wrong old passwords count against the login throttle; past its
    limit the form says so, with status 429."""

    form_class = ThrottledPasswordChangeForm

    def get_form_kwargs(self) -> dict:
        return {**super().get_form_kwargs(), "request": self.request}

    def form_invalid(self, form: ThrottledPasswordChangeForm) -> HttpResponse:
        response = super().form_invalid(form)
        if form.has_error("old_password", "too_many_attempts"):
            response.status_code = 429
        return response


class PasswordResetView(auth_views.PasswordResetView):
    """ "Forgot password": mails a link to choose a new password to the active accounts with
    that address. The answer is the same page whether or not an account has it. Requests
    count against limits per client address and per e-mail address (429 past them). Without
    a mail server the page says to ask the team's administrator."""

    template_name = "registration/password_reset_form.html"
    form_class = PasswordResetMailForm
    subject_template_name = "mail/password_reset_subject.txt"
    email_template_name = "mail/password_reset.txt"
    success_url = reverse_lazy("password_reset_done")

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not mail_enabled():
            return self.get(request, *args, **kwargs)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs) -> dict:
        return {**super().get_context_data(**kwargs), "mail_enabled": mail_enabled()}

    def form_valid(self, form) -> HttpResponse:
        limits = throttle.reset_limits_for(self.request, form.cleaned_data["email"])
        retry_after = throttle.attempt_begin(limits)
        if retry_after:
            response = render(
                self.request,
                "registration/login_throttled.html",
                {"wait": throttle.wait_in_words(retry_after), "reset": True},
                status=429,
            )
            response["Retry-After"] = str(retry_after)
            return response
        self.extra_email_context = {"origin": site_origin(self.request), "site_name": SITE_NAME}
        return super().form_valid(form)


@login_required
def account(request: HttpRequest) -> HttpResponse:
    profile = services.profile_get(user=request.user)
    form = ProfileForm(request.POST or None, instance=profile)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, _("Settings saved."))
        return redirect("account")
    return render(
        request,
        "accounts/account.html",
        {
            "form": form,
            "token_form": TokenCreateForm(),
            "tokens": request.user.api_tokens.all(),
            "new_token": request.session.pop("new_api_token", None),
            # What "Delete my account" asks for (a password, or a recent sign-in without one).
            "delete_confirm": reauth.confirmation_for(request, request.user),
            "sign_in_again_url": reauth.sign_in_again_url(reverse("account") + "#delete"),
            # Download my data, import, forget memory, delete account (privacy/).
            **account_sections_context(request.user),
        },
    )


@login_required
@require_POST
def theme_set(request: HttpRequest) -> HttpResponse:
    """The System / Light / Dark switch in the top bar. theme.js posts it and repaints the
    page itself (204); without a script the form posts and comes back to the page."""
    try:
        services.profile_set_theme(user=request.user, theme=request.POST.get("theme", ""))
    except ServiceError as exc:
        return HttpResponse(exc.text, status=400, content_type="text/plain")
    if request.headers.get("X-Requested-With") == "fetch":
        return HttpResponse(status=204)
    # Back to the page it was chosen on (the Referer: a "next" field in the form would make
    # every page differ by its own address, which a 404 must not).
    back = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = "/"
    return redirect(back)


@login_required
@require_POST
@errors_back_to("account")
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST)
    if form.is_valid():
        _token, key = services.api_token_create(
            user=request.user,
            name=form.cleaned_data["name"],
            scopes=form.cleaned_data["scopes"],
        )
        # Shown once on the next page, then gone from the session.
        request.session["new_api_token"] = key
    elif "name" in form.errors:
        messages.error(request, _("Give the token a name (at most 100 characters)."))
    else:
        messages.error(request, form.errors["scopes"][0])
    return redirect("account")


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    services.api_token_revoke(user=request.user, token_id=token_id)
    messages.success(request, _("Token revoked."))
    return redirect("account")


def signup(request: HttpRequest) -> HttpResponse:
    if not settings.HERMES_ALLOW_SIGNUP:
        raise Http404
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        # The configured backend: a path missing from AUTHENTICATION_BACKENDS logs out.
        login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
        return redirect("dashboard")
    return render(request, "registration/signup.html", {"form": form})
