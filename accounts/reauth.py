"""Confirming a lasting action (deleting the account) for someone who has no password here
because they sign in through single sign-on or an auth proxy.

A password confirms it is really the person and not someone at an unlocked screen; without
one, a recent sign-in does: within RECENT_SECONDS, by the provider's own `auth_time` when it
sends one (a sign-in with `reauth` asks the provider to check the person again), and the
person types their username. A session of the auth proxy's header is vouched for by the
proxy at every request, so it counts as recent.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy

from core.exceptions import ServiceError, lazy_format

from .oidc import BACKEND as OIDC_BACKEND
from .oidc import oidc_enabled
from .proxy_auth import BACKEND as PROXY_BACKEND

#: Session key: when this session's person last proved who they are (seconds since epoch).
SIGNED_IN_AT = "hermes_signed_in_at"
RECENT_SECONDS = 600

Confirmation = Literal["password", "username", "sign_in_again", "admin"]


def signed_in_mark(request: HttpRequest | None, at: float | None = None) -> None:
    if request is not None and hasattr(request, "session"):
        now = time.time()
        request.session[SIGNED_IN_AT] = int(min(at or now, now))


def signed_in_recently(request: HttpRequest | None) -> bool:
    session = getattr(request, "session", None)
    if session is None:
        return False
    if session.get(BACKEND_SESSION_KEY) == PROXY_BACKEND:
        return True
    at = session.get(SIGNED_IN_AT)
    return isinstance(at, int) and time.time() - at <= RECENT_SECONDS


def _can_sign_in_again(request: HttpRequest) -> bool:
    return oidc_enabled() and request.session.get(BACKEND_SESSION_KEY) == OIDC_BACKEND


def confirmation_for(request: HttpRequest, user: AbstractBaseUser) -> Confirmation:
    """What the Account page asks for before deleting the account."""
    if user.has_usable_password():
        return "password"
    if signed_in_recently(request):
        return "username"
    return "sign_in_again" if _can_sign_in_again(request) else "admin"


def sign_in_again_url(next_path: str) -> str:
    return f"{reverse('oidc_login')}?{urlencode({'reauth': 1, 'next': next_path})}"


def confirm_without_password(
    *, request: HttpRequest | None, user: AbstractBaseUser, confirm: Any
) -> None:
    """Refuse unless this session signed in recently and `confirm` is the username."""
    if not signed_in_recently(request):
        values = {"name": settings.HERMES_OIDC_NAME, "minutes": RECENT_SECONDS // 60}
        if request is not None and _can_sign_in_again(request):
            message = gettext_lazy(
                "You have no password here: sign in again with %(name)s on the Account page, "
                "then delete your account within %(minutes)s minutes."
            )
        else:
            message = gettext_lazy(
                "You have no password here: sign in again on the Account page, then delete "
                "your account within %(minutes)s minutes."
            )
        raise ServiceError("sign_in_again", lazy_format(message, **values), status=403)
    if not isinstance(confirm, str) or confirm.strip() != user.get_username():
        raise ServiceError(
            "confirm_required",
            lazy_format(
                gettext_lazy("Type your username, %(username)s, to confirm."),
                username=user.get_username(),
            ),
        )
