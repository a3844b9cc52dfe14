"""The provider as its discovery document describes it, and the keys it signs with.

The document (`<issuer>/.well-known/openid-configuration`) is fetched when someone signs in,
not at start (a provider that is down must not stop the site), and kept for an hour per
process. Its `issuer` must be the configured one (OpenID Connect Discovery 1.0, 4.3): a
document for another issuer is refused rather than trusted. The signing keys are fetched at
each sign-in, so a provider's key rotation needs nothing here.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.core.cache import cache
from django.utils.translation import gettext, gettext_noop

from .errors import AnswerRejected, ProviderMisconfigured, ProviderUnavailable

logger = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
CACHE_SECONDS = 3600
#: Algorithms an ID token may be signed with here: asymmetric ones, and the HMAC ones
#: (keyed with the client secret) only for a client that has one. Never "none".
ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
HMAC = frozenset({"HS256", "HS384", "HS512"})


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    #: Empty when the provider publishes none.
    userinfo_endpoint: str
    end_session_endpoint: str
    signing_algorithms: tuple[str, ...]
    token_auth_methods: tuple[str, ...]
    prompt_values: tuple[str, ...]

    @property
    def basic_auth(self) -> bool:
        """Send the client secret as HTTP Basic (the default of OAuth 2.0) unless the
        provider says it takes it in the form body."""
        return "client_secret_post" not in self.token_auth_methods


def provider_name() -> str:
    return settings.HERMES_OIDC_NAME


#: What is asked of the provider (`what`), named in the messages people see.
ASKED_FOR = (
    gettext_noop("discovery document"),
    gettext_noop("signing keys"),
    gettext_noop("user info"),
)


def discovery_url(issuer: str) -> tuple[str, str]:
    """The discovery document's URL and the issuer it must name, for the configured
    HERMES_OIDC_ISSUER (an issuer URL, or the document's own URL)."""
    issuer = issuer.strip()
    if issuer.endswith(DISCOVERY_PATH):
        return issuer, issuer.removesuffix(DISCOVERY_PATH)
    return issuer.rstrip("/") + DISCOVERY_PATH, issuer


def answer_from(method: str, url: str, *, what: str, **kwargs: Any) -> requests.Response:
    """The provider's 200 answer to a request for its `what`; ProviderUnavailable when it
    does not answer or fails (5xx), ProviderMisconfigured when it refuses (4xx)."""
    try:
        response = requests.request(method, url, timeout=settings.HERMES_OIDC_TIMEOUT, **kwargs)
    except requests.RequestException as exc:
        logger.warning("single sign-on: %s at %s unreachable: %s", what, url, exc)
        raise ProviderUnavailable(
            gettext(
                "%(name)s cannot be reached right now. Try again in a minute; if it keeps "
                "happening, tell your administrator."
            )
            % {"name": provider_name()},
            code="unreachable",
        ) from None
    if response.status_code != 200:
        logger.warning("single sign-on: %s at %s answered %s", what, url, response.status_code)
        error = ProviderUnavailable if response.status_code >= 500 else ProviderMisconfigured
        raise error(
            gettext(
                "%(name)s answered %(status)s when asked for its %(what)s. Try again in a "
                "minute; if it keeps happening, tell your administrator."
            )
            % {"name": provider_name(), "status": response.status_code, "what": gettext(what)},
            code=f"{what.replace(' ', '_')}_http_{response.status_code}",
        )
    return response


def json_of(response: requests.Response, *, what: str) -> dict[str, Any]:
    try:
        document = response.json()
    except ValueError:
        document = None
    if not isinstance(document, dict):
        logger.warning("single sign-on: %s at %s is not a JSON object", what, response.url)
        raise ProviderUnavailable(
            gettext(
                "%(name)s sent something that is not its %(what)s. Try again in a minute; if "
                "it keeps happening, tell your administrator."
            )
            % {"name": provider_name(), "what": gettext(what)},
            code=f"{what.replace(' ', '_')}_not_json",
        )
    return document


def fetch_json(url: str, *, what: str, **kwargs: Any) -> dict[str, Any]:
    """GET `url` and its JSON object (see `answer_from` for the failures)."""
    return json_of(answer_from("GET", url, what=what, **kwargs), what=what)


def _misconfigured(detail: str, code: str) -> ProviderMisconfigured:
    logger.error("single sign-on is misconfigured: %s", detail)
    return ProviderMisconfigured(
        gettext(
            "Single sign-on with %(name)s is not set up correctly: %(detail)s Tell your "
            "administrator."
        )
        % {"name": provider_name(), "detail": detail},
        code=code,
    )


def _from_document(document: dict[str, Any], expected_issuer: str) -> Provider:
    issuer = document.get("issuer")
    if not isinstance(issuer, str) or issuer.rstrip("/") != expected_issuer.rstrip("/"):
        raise _misconfigured(
            gettext(
                "its discovery document is for the issuer %(issuer)s, not %(expected)s "
                "(HERMES_OIDC_ISSUER)."
            )
            % {"issuer": repr(issuer), "expected": repr(expected_issuer)},
            "issuer_mismatch",
        )
    endpoints = {}
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(name)
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise _misconfigured(
                gettext("its discovery document has no %(name)s.") % {"name": name}, f"no_{name}"
            )
        endpoints[name] = value
    algorithms = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    return Provider(
        issuer=issuer,
        userinfo_endpoint=str(document.get("userinfo_endpoint") or ""),
        end_session_endpoint=str(document.get("end_session_endpoint") or ""),
        signing_algorithms=tuple(str(a) for a in algorithms if isinstance(a, str)),
        token_auth_methods=tuple(str(m) for m in methods if isinstance(m, str)),
        prompt_values=tuple(
            str(p) for p in document.get("prompt_values_supported") or () if isinstance(p, str)
        ),
        **endpoints,
    )


def provider() -> Provider:
    """The configured provider, from its discovery document (cached for an hour)."""
    url, expected_issuer = discovery_url(settings.HERMES_OIDC_ISSUER)
    key = "hermes:oidc:provider:" + hashlib.sha256(url.encode()).hexdigest()[:32]
    cached = cache.get(key)
    if isinstance(cached, dict):
        try:
            return Provider(**cached)
        except TypeError:  # written by another version of this code
            cache.delete(key)
    found = _from_document(
        fetch_json(url, what="discovery document", headers={"Accept": "application/json"}),
        expected_issuer,
    )
    cache.set(key, asdict(found), CACHE_SECONDS)
    return found


def signing_key(token: str, found: Provider) -> Any:
    """The key `token` (an ID token or a signed userinfo answer) is verified with: the
    client secret for the HMAC algorithms, else the provider's published key with the
    token's `kid` (or its only key when the token names none)."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise AnswerRejected(
            gettext("%(name)s sent a token that is not a JWT.") % {"name": provider_name()},
            code="token_not_jwt",
        ) from None
    algorithm = header.get("alg")
    allowed = ASYMMETRIC | (HMAC if settings.HERMES_OIDC_CLIENT_SECRET else frozenset())
    if algorithm not in allowed or algorithm not in found.signing_algorithms:
        raise AnswerRejected(
            gettext("%(name)s signed its token with %(algorithm)s, which is not accepted.")
            % {"name": provider_name(), "algorithm": repr(algorithm)},
            code="token_algorithm",
        )
    if algorithm in HMAC:
        return settings.HERMES_OIDC_CLIENT_SECRET
    keys = fetch_json(found.jwks_uri, what="signing keys").get("keys")
    kid = header.get("kid")
    candidates = [
        jwk
        for jwk in (keys if isinstance(keys, list) else [])
        if isinstance(jwk, dict)
        and jwk.get("use", "sig") == "sig"
        and jwk.get("alg", algorithm) == algorithm
        and (kid is None or jwk.get("kid") == kid)
    ]
    if len(candidates) != 1:
        raise AnswerRejected(
            gettext("%(name)s signed its token with a key it does not publish.")
            % {"name": provider_name()},
            code="token_key_unknown",
        )
    try:
        return jwt.PyJWK(candidates[0], algorithm=algorithm)
    except jwt.PyJWTError:
        raise _misconfigured(
            gettext("one of its signing keys cannot be read."), "bad_jwk"
        ) from None


def end_session_url(*, id_token: str, after: str) -> str:
    """Where a browser ends its session at the provider (RP-Initiated Logout 1.0), coming
    back to `after`; empty when the provider publishes no end_session_endpoint or cannot
    be asked now (the local session ends anyway)."""
    try:
        endpoint = provider().end_session_endpoint
    except (ProviderUnavailable, ProviderMisconfigured):
        return ""
    if not endpoint:
        return ""
    params = {"post_logout_redirect_uri": after, "client_id": settings.HERMES_OIDC_CLIENT_ID}
    if id_token:
        params["id_token_hint"] = id_token
    return endpoint + ("&" if "?" in endpoint else "?") + urlencode(params)
