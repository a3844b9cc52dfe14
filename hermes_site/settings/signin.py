"""Signing in: the password form, single sign-on with an OpenID Connect provider
(accounts/oidc/), and an auth proxy's header (accounts/proxy_auth.py).

Every combination that would leave nobody able to sign in, or that names a provider badly,
stops the start with one message naming the variable: the provider itself is asked only
when someone signs in (a provider that is down must not keep the site from starting).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .declare import declare_bool, declare_int, declare_list, declare_str

HERMES_PASSWORD_LOGIN = declare_bool(
    "HERMES_PASSWORD_LOGIN",
    True,
    help="Let people sign in with a username and password (off: single sign-on or the "
    "auth proxy only).",
)

# --- Single sign-on: OpenID Connect (accounts/oidc/) ----------------------------------
HERMES_OIDC_ISSUER = declare_str(
    "HERMES_OIDC_ISSUER",
    "",
    help="The provider's issuer URL (or its /.well-known/openid-configuration); empty: off.",
)
HERMES_OIDC_CLIENT_ID = declare_str(
    "HERMES_OIDC_CLIENT_ID", "", help="The client id registered at the provider."
)
HERMES_OIDC_CLIENT_SECRET = declare_str(
    "HERMES_OIDC_CLIENT_SECRET", "", help="Its secret (empty: a public client, PKCE only)."
)
HERMES_OIDC_NAME = declare_str(
    "HERMES_OIDC_NAME", "SSO", help="The provider's name on the login button."
)
_scopes = declare_list(
    "HERMES_OIDC_SCOPES", ["openid", "email", "profile"], help="Scopes asked for."
)
HERMES_OIDC_USERNAME_CLAIM = declare_str(
    "HERMES_OIDC_USERNAME_CLAIM",
    "preferred_username",
    help="Claim a new account's username is taken from.",
)
HERMES_OIDC_EMAIL_CLAIM = declare_str(
    "HERMES_OIDC_EMAIL_CLAIM", "email", help="Claim with the person's e-mail address."
)
HERMES_OIDC_GROUPS_CLAIM = declare_str(
    "HERMES_OIDC_GROUPS_CLAIM", "groups", help="Claim with the person's groups."
)
HERMES_OIDC_ALLOWED_DOMAINS = [
    domain.strip().lower().removeprefix("@")
    for domain in declare_list(
        "HERMES_OIDC_ALLOWED_DOMAINS",
        [],
        help="Only verified e-mail addresses at these domains may sign in (empty: any).",
    )
]
HERMES_OIDC_ALLOWED_GROUPS = declare_list(
    "HERMES_OIDC_ALLOWED_GROUPS",
    [],
    help="Only members of one of these groups may sign in (empty: anyone).",
)
HERMES_OIDC_ADMIN_GROUP = declare_str(
    "HERMES_OIDC_ADMIN_GROUP", "", help="Group whose members are team admins."
)
HERMES_OIDC_CREATE_USERS = declare_bool(
    "HERMES_OIDC_CREATE_USERS", True, help="Create an account on someone's first sign-in."
)
HERMES_OIDC_LINK_BY_EMAIL = declare_bool(
    "HERMES_OIDC_LINK_BY_EMAIL",
    False,
    help="A first sign-in with a verified e-mail address takes over the account that has it.",
)
HERMES_OIDC_TRUST_EMAIL = declare_bool(
    "HERMES_OIDC_TRUST_EMAIL",
    False,
    help="Take e-mail addresses as verified without an email_verified claim (Azure AD).",
)
HERMES_OIDC_TIMEOUT = declare_int(
    "HERMES_OIDC_TIMEOUT", 10, min=1, max=120, help="Seconds to wait for the provider."
)
#: Space-separated, as OAuth sends them (each list item may itself hold several).
HERMES_OIDC_SCOPES = " ".join(dict.fromkeys(s for item in _scopes for s in item.split()))


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_issuer(issuer: str) -> None:
    try:
        parts = urlsplit(issuer)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(
            f"HERMES_OIDC_ISSUER must be the provider's URL, like https://sso.example.org/"
            f"realms/team (got {issuer!r})."
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ImproperlyConfigured(
            "HERMES_OIDC_ISSUER must be a plain URL without a query, fragment or user "
            f"(got {issuer!r})."
        )
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ImproperlyConfigured(
            "HERMES_OIDC_ISSUER must use https (plain http only for a provider on this "
            f"machine): the sign-in's tokens and keys travel on it (got {issuer!r})."
        )


if HERMES_OIDC_ISSUER:
    _check_issuer(HERMES_OIDC_ISSUER)
    if not HERMES_OIDC_CLIENT_ID:
        raise ImproperlyConfigured(
            "HERMES_OIDC_ISSUER is set but HERMES_OIDC_CLIENT_ID is empty: register Hermes "
            "as a client at the provider and give its client id."
        )
    if "openid" not in HERMES_OIDC_SCOPES.split():
        raise ImproperlyConfigured(
            f"HERMES_OIDC_SCOPES must include openid (got {HERMES_OIDC_SCOPES!r})."
        )
    for _name, _claim in (
        ("HERMES_OIDC_USERNAME_CLAIM", HERMES_OIDC_USERNAME_CLAIM),
        ("HERMES_OIDC_EMAIL_CLAIM", HERMES_OIDC_EMAIL_CLAIM),
        ("HERMES_OIDC_GROUPS_CLAIM", HERMES_OIDC_GROUPS_CLAIM),
    ):
        if not _claim.strip() or any(c.isspace() for c in _claim):
            raise ImproperlyConfigured(f"{_name} must be a claim name (got {_claim!r}).")
    for _domain in HERMES_OIDC_ALLOWED_DOMAINS:
        if not re.fullmatch(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", _domain) or "." not in _domain:
            raise ImproperlyConfigured(
                f"HERMES_OIDC_ALLOWED_DOMAINS: {_domain!r} is not a domain (write example.org, "
                "without the @)."
            )
elif HERMES_OIDC_CLIENT_ID or HERMES_OIDC_CLIENT_SECRET:
    raise ImproperlyConfigured(
        "HERMES_OIDC_CLIENT_ID or _SECRET is set but HERMES_OIDC_ISSUER is empty: give the "
        "provider's issuer URL (or unset both to turn single sign-on off)."
    )

# What mozilla-django-oidc reads (the endpoints come from the provider's discovery
# document, see accounts/oidc/provider.py). PKCE (S256) and the nonce are always on.
OIDC_RP_CLIENT_ID = HERMES_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = HERMES_OIDC_CLIENT_SECRET or None
OIDC_RP_SCOPES = HERMES_OIDC_SCOPES
OIDC_USE_PKCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_USE_NONCE = True
OIDC_TIMEOUT = HERMES_OIDC_TIMEOUT
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"

# --- Sign-in by an auth proxy (accounts/proxy_auth.py) ----------------------------------
# Headers an auth proxy (oauth2-proxy, Authelia, Authentik) sets after signing someone in;
# believed only from HERMES_TRUSTED_PROXIES and removed from anyone else's requests.
HERMES_AUTH_HEADER = declare_str(
    "HERMES_AUTH_HEADER",
    "",
    help="Header naming the signed-in user (e.g. Remote-User); empty: off.",
)
HERMES_AUTH_EMAIL_HEADER = declare_str(
    "HERMES_AUTH_EMAIL_HEADER", "", help="Header with that user's e-mail address."
)
HERMES_AUTH_GROUPS_HEADER = declare_str(
    "HERMES_AUTH_GROUPS_HEADER", "", help="Header with that user's groups (comma or |)."
)
HERMES_AUTH_ADMIN_GROUP = declare_str(
    "HERMES_AUTH_ADMIN_GROUP", "", help="Group whose members are team admins."
)
HERMES_AUTH_HEADER_CREATE = declare_bool(
    "HERMES_AUTH_HEADER_CREATE", True, help="Create an account on someone's first sign-in."
)
for _name, _header in (
    ("HERMES_AUTH_HEADER", HERMES_AUTH_HEADER),
    ("HERMES_AUTH_EMAIL_HEADER", HERMES_AUTH_EMAIL_HEADER),
    ("HERMES_AUTH_GROUPS_HEADER", HERMES_AUTH_GROUPS_HEADER),
):
    if _header and not re.fullmatch(r"[A-Za-z0-9-]+", _header):
        raise ImproperlyConfigured(
            f"{_name}: {_header!r} is not a header name; write it with letters, digits and "
            "dashes, like Remote-User or X-Forwarded-User."
        )
if HERMES_AUTH_ADMIN_GROUP and not HERMES_AUTH_GROUPS_HEADER:
    raise ImproperlyConfigured(
        "HERMES_AUTH_ADMIN_GROUP needs HERMES_AUTH_GROUPS_HEADER, the header it is read from."
    )

if not HERMES_PASSWORD_LOGIN and not (HERMES_OIDC_ISSUER or HERMES_AUTH_HEADER):
    raise ImproperlyConfigured(
        "HERMES_PASSWORD_LOGIN=false leaves no way to sign in: set HERMES_OIDC_ISSUER (single "
        "sign-on) or HERMES_AUTH_HEADER (an auth proxy) too."
    )
