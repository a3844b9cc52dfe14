"""A real OpenID Connect provider for the single sign-on tests: a small Django project on
django-oauth-toolkit's OIDC provider, run as a process of its own (`python -m
tests.support.oidc_provider`) on a free port, with its own SQLite database, an RSA signing
key, discovery, userinfo, RP-initiated logout and PKCE required.

The people it signs in are read from `directory.json` in its data folder at every login and
token (so a test changes someone's groups or address between two sign-ins by rewriting the
file): `{"alice": {"password": …, "email": …, "email_verified": true, "groups": [...],
"name": …, "preferred_username": …, "sub": …, "claims": {…}}}` — each key but the password
optional, `claims` added to the ID token and userinfo as they are.

The tests drive it through `handle.OIDCProvider` (which imports nothing of Django); the
modules here besides that one run only in the provider's process.
"""
