"""The provider's people, from `directory.json` (see the package docstring): the login
backend, and the claims its ID tokens and userinfo carry."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.backends import BaseBackend
from django.contrib.auth.models import User
from oauth2_provider.oauth2_validators import OAuth2Validator


def people() -> dict[str, dict[str, Any]]:
    path = settings.DATA / "directory.json"
    return json.loads(path.read_text()) if path.exists() else {}


class DirectoryBackend(BaseBackend):
    def authenticate(self, request: Any, username: str | None = None, password: str | None = None):
        entry = people().get(username or "")
        if entry is None or entry.get("password") != password:
            return None
        user, _ = User.objects.get_or_create(username=username)
        return user

    def get_user(self, user_id: int) -> User | None:
        return User.objects.filter(pk=user_id).first()


class DirectoryValidator(OAuth2Validator):
    # Groups come with every token, as most providers' group mappers send them.
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "openid"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        username = request.user.username
        entry = people().get(username, {})
        claims: dict[str, Any] = {
            "preferred_username": entry.get("preferred_username", username),
            "name": entry.get("name", username),
        }
        for name in ("sub", "email", "email_verified", "groups"):
            if name in entry:
                claims[name] = entry[name]
        return claims

    def get_oidc_claims(self, token: Any, token_handler: Any, request: Any) -> dict[str, Any]:
        # The standard claims by scope, then an entry's own `claims` whatever the scopes.
        claims = super().get_oidc_claims(token, token_handler, request)
        claims.update(people().get(request.user.username, {}).get("claims", {}))
        return claims
