"""Single sign-on with an OpenID Connect provider (Keycloak, Authentik, Azure AD / Entra ID,
Google, GitLab, …), on mozilla-django-oidc: it runs the authorization-code flow with state,
nonce and PKCE (S256) kept per flow in the session; this package adds discovery, the ID
token's full checks, the site's account rules and readable error pages.

- `provider`: the discovery document (cached) and the provider's signing keys.
- `backend`: the authentication backend (token exchange, ID token and userinfo checks).
- `people`: who the verified claims are here: the account rules (link, create, refuse).
- `views`: start, callback, logout (ending the provider's session too), error pages.
"""

from __future__ import annotations

from django.conf import settings

#: The backend's path, as Django stores it in the session.
BACKEND = "accounts.oidc.backend.OIDCBackend"


def oidc_enabled() -> bool:
    return bool(settings.HERMES_OIDC_ISSUER)
