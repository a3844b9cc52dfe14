"""Why a single sign-on did not sign someone in. Each failure is one exception with the
status and the sentence the person sees (`views.sign_in_error` renders it); `code` goes
to the log, never a token or a claim's value beyond the person's own name or address."""

from __future__ import annotations


class SignInError(Exception):
    status = 400

    def __init__(self, reason: str, *, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class ProviderUnavailable(SignInError):
    """The provider did not answer, or not with what OpenID Connect says it must."""

    status = 503


class ProviderMisconfigured(SignInError):
    """The provider answers but refuses this client, or its discovery document does not
    match HERMES_OIDC_ISSUER: something only the administrator can fix."""

    status = 502


class AnswerRejected(SignInError):
    """The answer coming back does not belong to a sign-in this browser started (unknown or
    changed state, wrong nonce, a token that fails its checks)."""


class CodeRejected(SignInError):
    """The provider refused to exchange the code: expired, already used, or not ours."""


class SignInRefused(SignInError):
    """The provider vouched for the person, but the site's rules keep them out."""

    status = 403
