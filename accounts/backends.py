"""The authentication backend: Django's ModelBackend behind the login throttle.

Every password check goes through `authenticate()`, so the lockout covers the login page,
the admin's login page and anything else that checks passwords this way.
"""

from __future__ import annotations

from typing import Any

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
