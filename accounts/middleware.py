"""Turns a throttled login attempt into a clear 429 page; speaks the language the signed-in
person chose."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils import translation

from .backends import THROTTLED_ATTR
from .models import Profile
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


class PersonLanguageMiddleware:
    """After django's LocaleMiddleware (the browser's choice: the login page's switch, else
    Accept-Language): a signed-in person's language from the Account page wins. Empty there
    means "as my browser says", and what the browser asked for is remembered
    (accounts.language) for what is said outside a page: mail, notices of background work."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.user.is_authenticated:
            # One read of the profile per request: the theme rides along for the page frame
            # (accounts.context_processors reads it from the request).
            chosen, seen, request.person_theme = Profile.objects.filter(
                user=request.user
            ).values_list("language", "browser_language", "theme").first() or ("", "", "")
            if chosen:
                translation.activate(chosen)
                request.LANGUAGE_CODE = chosen
            elif seen != request.LANGUAGE_CODE:
                # Remembered (written only when it changes) for mail and background notices.
                Profile.objects.update_or_create(
                    user=request.user, defaults={"browser_language": request.LANGUAGE_CODE}
                )
        return self.get_response(request)
