"""The pages of single sign-on: the start (off to the provider), the callback (back from
it), the logout that also ends the provider's session, and the error pages.

A failed sign-in is never a 500: each reason is a page that says what happened and what to
do (`sign_in_error`), with the status that fits — 400 for an answer that does not belong to
this browser's sign-in or a code the provider no longer accepts, 403 for someone the rules
keep out, 502 for a provider that refuses this client, 503 for one that does not answer.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render, resolve_url
from django.utils.translation import gettext
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from ..reauth import signed_in_mark
from . import BACKEND, oidc_enabled
from .backend import AUTH_TIME_ATTR, ID_TOKEN_ATTR
from .errors import (
    AnswerRejected,
    ProviderMisconfigured,
    ProviderUnavailable,
    SignInError,
    SignInRefused,
)
from .provider import end_session_url, provider, provider_name

logger = logging.getLogger(__name__)

#: The session key of the ID token a sign-in got (the logout's id_token_hint).
ID_TOKEN_KEY = "hermes_oidc_id_token"


def sign_in_error(request: HttpRequest, error: SignInError) -> HttpResponse:
    logger.warning("single sign-on failed: %s (%s)", error.code, type(error).__name__)
    if isinstance(error, ProviderUnavailable):
        heading = gettext("Cannot reach %(name)s") % {"name": provider_name()}
    elif isinstance(error, ProviderMisconfigured):
        heading = gettext("Single sign-on is not working")
    elif isinstance(error, SignInRefused):
        heading = gettext("Cannot sign you in")
    else:
        heading = gettext("The sign-in did not complete")
    response = render(
        request,
        "registration/sign_in_error.html",
        {
            "code": error.status,
            "heading": heading,
            "reason": error.reason,
            # Starting again helps unless the rules keep the person out.
            "retry": not isinstance(error, SignInRefused),
        },
        status=error.status,
    )
    if isinstance(error, ProviderUnavailable):
        response["Retry-After"] = "60"
    return response


class SignInView(OIDCAuthenticationRequestView):
    """`/accounts/oidc/login/?next=…`: off to the provider, with a fresh state, nonce and
    PKCE challenge kept in the session (several at once, for several tabs). With `reauth=1`
    the provider is asked to check the person again (`max_age=0`, and `prompt=login` where
    it supports it), to confirm deleting an account that has no password."""

    def __init__(self, **kwargs: Any) -> None:
        # The library's __init__ reads the endpoint from settings; here it is discovered.
        View.__init__(self, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404
        try:
            self.found = provider()
        except SignInError as exc:
            return sign_in_error(request, exc)
        self.OIDC_OP_AUTH_ENDPOINT = self.found.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = settings.HERMES_OIDC_CLIENT_ID
        return super().get(request)

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        params = dict(super().get_extra_params(request))
        if request.GET.get("reauth"):
            params["max_age"] = "0"
            if "login" in self.found.prompt_values:
                params["prompt"] = "login"
        return params


def _drop_state(request: HttpRequest, state: str) -> None:
    states = request.session.get("oidc_states")
    if isinstance(states, dict) and state in states:
        del states[state]
        request.session.modified = True


class CallbackView(OIDCAuthenticationCallbackView):
    """`/accounts/oidc/callback/`: where the provider sends the browser back (the redirect
    URI to register there)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404
        state = request.GET.get("state", "")
        error = request.GET.get("error")
        if error:
            # The provider ended the sign-in (the person cancelled, or is not allowed there).
            _drop_state(request, state)
            described = request.GET.get("error_description", "").strip()[:300]
            refused = error in ("access_denied", "login_required", "consent_required")
            kind = SignInRefused if refused else AnswerRejected
            return sign_in_error(
                request,
                kind(
                    gettext("%(name)s did not sign you in: %(reason)s.")
                    % {"name": provider_name(), "reason": described or error},
                    code=f"provider_{error[:40]}",
                ),
            )
        states = request.session.get("oidc_states")
        if not request.GET.get("code") or not state:
            return sign_in_error(
                request,
                AnswerRejected(
                    gettext(
                        "This is where %(name)s sends you back after you sign in, but it "
                        "brought nothing to sign in with. Start from the login page."
                    )
                    % {"name": provider_name()},
                    code="no_code",
                ),
            )
        if not isinstance(states, dict) or state not in states:
            return sign_in_error(
                request,
                AnswerRejected(
                    gettext(
                        "This answer does not belong to a sign-in started in this browser: it "
                        "was changed on the way, used already, or began in another browser or "
                        "before your session ended. Start again."
                    ),
                    code="state_unknown",
                ),
            )
        try:
            return super().get(request)
        except SignInError as exc:
            return sign_in_error(request, exc)
        except SuspiciousOperation as exc:
            logger.warning("single sign-on: %s", exc)
            return sign_in_error(
                request,
                AnswerRejected(
                    gettext("The answer from the provider did not pass its checks. Start again."),
                    code="suspicious",
                ),
            )

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        id_token = getattr(self.request, ID_TOKEN_ATTR, "")
        if id_token:
            self.request.session[ID_TOKEN_KEY] = id_token
        # The provider's word for when it last checked the person, else now.
        signed_in_mark(self.request, getattr(self.request, AUTH_TIME_ATTR, None))
        return response

    def login_failure(self) -> HttpResponse:
        return sign_in_error(
            self.request,
            SignInRefused(
                gettext("%(name)s did not sign you in here.") % {"name": provider_name()},
                code="no_user",
            ),
        )


class LogoutView(auth_views.LogoutView):
    """Logging out ends the session here; for a session single sign-on started it then
    ends the provider's session too when the provider publishes an end_session_endpoint
    (which sends the browser back to the login page).

    The way there is a page that forwards the browser (a meta refresh, and a link), not a
    redirect: every page's Content-Security-Policy allows forms to post to this site only
    (`form-action 'self'`), and browsers apply that to the redirects that follow a form."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        from_provider = oidc_enabled() and request.session.get(BACKEND_SESSION_KEY) == BACKEND
        id_token = request.session.get(ID_TOKEN_KEY, "")
        response = super().post(request, *args, **kwargs)
        if not from_provider:
            return response
        after = request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL))
        url = end_session_url(id_token=id_token, after=after)
        if not url:
            return response
        return render(
            request, "registration/signing_out.html", {"url": url, "name": provider_name()}
        )
