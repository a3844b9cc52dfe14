"""Sign-in by an auth proxy (oauth2-proxy, Authelia, Authentik's outpost) in front of the site.

The proxy signs people in and names them in a header (HERMES_AUTH_HEADER, e.g.
`Remote-User`), optionally with their e-mail and groups. That header is believed only on a
connection from HERMES_TRUSTED_PROXIES (TrustedProxyMiddleware already removed it from
anyone else's request; `from_trusted_proxy` checks again for requests that did not come
through it). The semantics are Django's RemoteUserMiddleware's: the named person is logged
in to a session (so websockets and the API follow the session cookie), a different name
logs the previous person out, a missing header ends a session the header started. First
sign-in creates the account unless HERMES_AUTH_HEADER_CREATE is off; deactivated people and
unknown ones (creation off) get a 403 page that says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import RemoteUserBackend
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.translation import gettext as _

from core.proxy import from_trusted_proxy

from .models import Membership

BACKEND = "accounts.proxy_auth.ProxyHeaderBackend"


def _meta_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


def _header(request: HttpRequest, header: str) -> str | None:
    """The header's value (stripped), or None when it is not configured or not sent."""
    if not header:
        return None
    value = request.META.get(_meta_key(header))
    return None if value is None else value.strip()


def groups_of(value: str) -> set[str]:
    """`admins, staff` (oauth2-proxy, Authelia) or `admins|staff` (Authentik)."""
    return {group.strip() for group in re.split(r"[,|]", value) if group.strip()}


class ProxyHeaderBackend(RemoteUserBackend):
    """RemoteUserBackend with the site's rules: usernames match case-insensitively (as
    accounts made on the Team page do), new accounts get no password and a membership, the
    e-mail and admin role follow the proxy's headers at every sign-in."""

    @property
    def create_unknown_user(self) -> bool:
        return settings.HERMES_AUTH_HEADER_CREATE

    def clean_username(self, username: str) -> str:
        existing = (
            get_user_model()
            .objects.filter(username__iexact=username)
            .values_list("username", flat=True)
            .first()
        )
        return existing or username

    def authenticate(self, request: HttpRequest | None, remote_user: str | None) -> Any:
        with transaction.atomic():
            return super().authenticate(request, remote_user)

    def configure_user(self, request: HttpRequest | None, user: Any, created: bool = True) -> Any:
        if user is None or request is None:
            return user
        changed: list[str] = []
        if created:
            user.set_unusable_password()
            changed.append("password")
        email = _header(request, settings.HERMES_AUTH_EMAIL_HEADER)
        if email and email != user.email:
            try:
                validate_email(email)
            except ValidationError:
                email = None
            if email:
                user.email = email
                changed.append("email")
        if changed:
            user.save(update_fields=changed)
        membership, _created = Membership.objects.get_or_create(user=user)
        groups = _header(request, settings.HERMES_AUTH_GROUPS_HEADER)
        if settings.HERMES_AUTH_ADMIN_GROUP and groups is not None:
            admin = settings.HERMES_AUTH_ADMIN_GROUP in groups_of(groups)
            role = Membership.Role.ADMIN if admin else Membership.Role.MEMBER
            if membership.role != role:
                membership.role = role
                membership.save(update_fields=["role", "updated_at"])
        return user

    def get_user(self, user_id: Any) -> Any:
        # Turning header sign-in off ends the sessions it started.
        if not settings.HERMES_AUTH_HEADER:
            return None
        return super().get_user(user_id)


def _refused(request: HttpRequest, status: int, reason: str) -> HttpResponse:
    body = render_to_string(
        "_error_page.html",
        {"code": status, "heading": _("Cannot sign you in"), "reason": reason},
        request=request,
    )
    return HttpResponse(body, status=status)


class ProxyHeaderMiddleware:
    """Logs in whoever a trusted auth proxy names in HERMES_AUTH_HEADER (see the module
    docstring). Does nothing while the setting is empty."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refused = self.sign_in(request) if settings.HERMES_AUTH_HEADER else None
        return refused or self.get_response(request)

    def sign_in(self, request: HttpRequest) -> HttpResponse | None:
        name = (
            _header(request, settings.HERMES_AUTH_HEADER) if from_trusted_proxy(request) else None
        )
        user = request.user
        if not name:
            # The proxy no longer vouches for anyone: end a session that it started.
            if user.is_authenticated and request.session.get(auth.BACKEND_SESSION_KEY) == BACKEND:
                auth.logout(request)
            return None
        if user.is_authenticated:
            if user.get_username().lower() == name.lower():
                return None
            # Someone else signed in at the proxy: the previous person is logged out.
            auth.logout(request)
        if len(name) > 150:
            return _refused(
                request, 400, _("The sign-in name from the proxy is over 150 characters.")
            )
        try:
            UnicodeUsernameValidator()(name)
        except ValidationError:
            return _refused(
                request,
                400,
                _(
                    "The proxy signed you in as %(name)s, which is not a username here "
                    "(letters, digits and @ . + - _ only). Ask your administrator to send "
                    "another claim in the header."
                )
                % {"name": repr(name)},
            )
        user = ProxyHeaderBackend().authenticate(request, remote_user=name)
        if user is None:
            existing = get_user_model().objects.filter(username__iexact=name).first()
            if existing is not None:
                reason = _("The account %(name)s is deactivated. Ask a team admin.") % {
                    "name": repr(existing.get_username())
                }
            else:
                reason = _(
                    "There is no account called %(name)s here, and new accounts are not made "
                    "at sign-in. Ask a team admin."
                ) % {"name": repr(name)}
            return _refused(request, 403, reason)
        auth.login(request, user, backend=BACKEND)
        return None
