"""The authentication backend: Django's ModelBackend behind the login throttle.

Every password check goes through `authenticate()`, so the lockout covers the login page,
the admin's login page and anything else that checks passwords this way. With
HERMES_PASSWORD_LOGIN off it signs nobody in, and the sessions it started end.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from . import throttle

#: Set on the request when an attempt was refused; LoginThrottleMiddleware answers 429.
THROTTLED_ATTR = "hermes_login_retry_after"


class ThrottledModelBackend(ModelBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if username is None:
            username = kwargs.get("username")
        if username is None or password is None or not settings.HERMES_PASSWORD_LOGIN:
            # Not a password check (single sign-on's callback passes other credentials):
            # nothing to count against the throttle.
            return None
        limits = throttle.limits_for(request, username)
        retry_after = throttle.attempt_begin(limits)
        if retry_after:
            if request is not None:
                setattr(request, THROTTLED_ATTR, retry_after)
            # PermissionDenied stops Django from trying any other backend.
            raise PermissionDenied("too many login attempts")
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None:
            throttle.attempt_succeeded(limits)
        return user

    def get_user(self, user_id: Any) -> Any:
        if not settings.HERMES_PASSWORD_LOGIN:
            return None
        return super().get_user(user_id)
