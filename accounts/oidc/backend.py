"""The authentication backend of single sign-on (mozilla-django-oidc's, with the checks it
leaves out).

mozilla-django-oidc exchanges the code (with the PKCE verifier) and checks the ID token's
signature and nonce. Here, in addition: the endpoints come from discovery; the ID token
must come from the configured issuer, be meant for this client (`aud`, and `azp` when it
names several audiences) and be unexpired; the signing algorithm is one the provider
announces and never `none`; userinfo is merged in only when it is about the same `sub`.
Every failure is an `errors.SignInError` with a sentence for the person.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest
from django.utils.translation import gettext
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from . import oidc_enabled
from .errors import AnswerRejected, CodeRejected, ProviderMisconfigured, ProviderUnavailable
from .people import oidc_sign_in
from .provider import Provider, answer_from, json_of, provider, provider_name, signing_key

logger = logging.getLogger(__name__)

#: Seconds of clock difference tolerated between the provider and this machine.
LEEWAY = 60
#: Where the callback finds the ID token after a sign-in (for the logout's id_token_hint),
#: and when the provider last checked who the person is (its `auth_time`, when sent).
ID_TOKEN_ATTR = "hermes_oidc_id_token"
AUTH_TIME_ATTR = "hermes_oidc_auth_time"


class OIDCBackend(OIDCAuthenticationBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django makes a backend for every request of a session it signed in (get_user):
        # nothing here may ask the provider. The endpoints are read when a sign-in needs them.
        self.UserModel = get_user_model()

    def get_settings(self, attr: str, *args: Any) -> Any:
        if attr == "OIDC_TOKEN_USE_BASIC_AUTH":
            return bool(settings.HERMES_OIDC_CLIENT_SECRET) and self.provider.basic_auth
        return import_from_settings(attr, *args)

    @cached_property
    def provider(self) -> Provider:
        return provider()

    # The library reads these attributes (set in its __init__, here from our settings).
    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return self.provider.token_endpoint

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return settings.HERMES_OIDC_CLIENT_ID

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str | None:
        return settings.HERMES_OIDC_CLIENT_SECRET or None

    def authenticate(self, request: HttpRequest | None, *, nonce: str, code_verifier: str) -> Any:
        """Only the callback's call (with its nonce and PKCE verifier) reaches this: a
        password check's credentials do not fit the signature, so Django skips it."""
        if request is None or not oidc_enabled():
            return None
        return super().authenticate(request, nonce=nonce, code_verifier=code_verifier)

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The token endpoint's answer for the code, or the reason it gave none."""
        try:
            return super().get_token(payload)
        except requests.HTTPError as exc:
            raise self._token_refusal(exc.response) from None
        except requests.RequestException as exc:
            logger.warning("single sign-on: token endpoint unreachable: %s", exc)
            raise ProviderUnavailable(
                gettext("%(name)s cannot be reached right now. Try again in a minute.")
                % {"name": provider_name()},
                code="token_unreachable",
            ) from None
        except ValueError:
            raise ProviderUnavailable(
                gettext(
                    "%(name)s sent something that is not a token answer. Try again in a minute."
                )
                % {"name": provider_name()},
                code="token_not_json",
            ) from None

    def _token_refusal(self, response: requests.Response | None) -> Exception:
        status = response.status_code if response is not None else 0
        try:
            error = str((response.json() if response is not None else {}).get("error", ""))
        except (ValueError, AttributeError):
            error = ""
        logger.warning("single sign-on: token endpoint answered %s %s", status, error)
        if status >= 500 or not status:
            return ProviderUnavailable(
                gettext(
                    "%(name)s failed to finish the sign-in (%(status)s). Try again in a minute."
                )
                % {"name": provider_name(), "status": status},
                code="token_http_5xx",
            )
        if error == "invalid_grant":
            return CodeRejected(
                gettext(
                    "%(name)s no longer accepts this sign-in: it took too long, or its "
                    "one-time code was already used. Start again."
                )
                % {"name": provider_name()},
                code="invalid_grant",
            )
        return ProviderMisconfigured(
            gettext(
                "%(name)s refused to finish the sign-in (%(error)s): single sign-on is not set "
                "up correctly (client id, secret or redirect address). Tell your administrator."
            )
            % {"name": provider_name(), "error": error or status},
            code=f"token_{error or status}",
        )

    def verify_token(self, token: Any, **kwargs: Any) -> dict[str, Any]:
        """The ID token's claims once its signature, issuer, audience, expiry and nonce hold."""
        if not isinstance(token, str) or not token:
            raise ProviderMisconfigured(
                gettext(
                    "%(name)s sent no ID token (is 'openid' among HERMES_OIDC_SCOPES?). Tell "
                    "your administrator."
                )
                % {"name": provider_name()},
                code="no_id_token",
            )
        claims = self._decode(token, require=["iss", "aud", "exp", "iat", "sub"])
        nonce = kwargs.get("nonce")
        if not nonce or claims.get("nonce") != nonce:
            raise AnswerRejected(
                gettext(
                    "This sign-in's token was made for another sign-in (its nonce does not "
                    "match). Start again."
                ),
                code="nonce_mismatch",
            )
        auth_time = claims.get("auth_time")
        if isinstance(auth_time, int | float) and not isinstance(auth_time, bool):
            setattr(self.request, AUTH_TIME_ATTR, float(auth_time))
        return claims

    def _decode(self, token: str, *, require: list[str]) -> dict[str, Any]:
        key = signing_key(token, self.provider)
        algorithm = jwt.get_unverified_header(token)["alg"]
        client_id = settings.HERMES_OIDC_CLIENT_ID
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=client_id,
                issuer=self.provider.issuer,
                leeway=LEEWAY,
                options={"require": require},
            )
        except jwt.ExpiredSignatureError:
            raise AnswerRejected(
                gettext(
                    "The token %(name)s sent has expired (is this machine's clock right?). "
                    "Start again."
                )
                % {"name": provider_name()},
                code="token_expired",
            ) from None
        except jwt.PyJWTError as exc:
            logger.warning("single sign-on: token refused: %s", exc)
            raise AnswerRejected(
                gettext("The token %(name)s sent failed its checks (%(error)s). Start again.")
                % {"name": provider_name(), "error": exc},
                code="token_invalid",
            ) from None
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != client_id:
            raise AnswerRejected(
                gettext("The token %(name)s sent was issued to another application.")
                % {"name": provider_name()},
                code="token_azp",
            )
        return claims

    def store_tokens(self, access_token: str, id_token: str) -> None:
        # Kept on the request, not the session: logging in may start a new session. The
        # callback view stores it after the login (views.CallbackView.login_success).
        setattr(self.request, ID_TOKEN_ATTR, id_token)

    def get_userinfo(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """The ID token's claims with the userinfo endpoint's on top (some providers put
        groups or e-mail only in one of them); userinfo about another `sub` is refused."""
        claims = dict(payload)
        endpoint = self.provider.userinfo_endpoint
        if not endpoint or not access_token:
            return claims
        response = answer_from(
            "GET", endpoint, what="user info", headers={"Authorization": f"Bearer {access_token}"}
        )
        if response.headers.get("content-type", "").lower().startswith("application/jwt"):
            info = self._decode(response.text, require=[])
        else:
            info = json_of(response, what="user info")
        if str(info.get("sub")) != str(payload.get("sub")):
            raise AnswerRejected(
                gettext("%(name)s described someone else than who signed in.")
                % {"name": provider_name()},
                code="userinfo_sub_mismatch",
            )
        claims.update(info)
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = self.get_userinfo(access_token, id_token, payload)
        return oidc_sign_in(issuer=self.provider.issuer, claims=claims)

    def get_user(self, user_id: Any) -> Any:
        # Turning single sign-on off ends the sessions it started; a deactivated account's
        # sessions end at its next request.
        if not oidc_enabled():
            return None
        return ModelBackend.get_user(self, user_id)
