"""Turns a throttled login attempt into a clear 429 page."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from .backends import THROTTLED_ATTR
from .throttle import wait_in_words


class LoginThrottleMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        retry_after = getattr(request, THROTTLED_ATTR, 0)
        if not retry_after:
            return response
        body = render_to_string(
            "registration/login_throttled.html",
            {"retry_after": retry_after, "wait": wait_in_words(retry_after)},
            request=request,
        )
        throttled = HttpResponse(body, status=429)
        throttled["Retry-After"] = str(retry_after)
        return throttled
