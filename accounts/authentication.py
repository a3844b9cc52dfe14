"""DRF authentication with personal API tokens: `Authorization: Bearer <key>`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from .models import ApiToken, TokenScope
from .services import api_token_use


class ScopeMissing(exceptions.AuthenticationFailed):
    """A valid token without the scope the endpoint needs."""


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """A token that has `scope` (the REST API's by default; `/v1/` asks for `chat`)."""

    keywords = ("bearer", "token")
    scope = TokenScope.API

    def __init__(self, scope: str | None = None) -> None:
        self.scope = scope or self.scope

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        token = api_token_use(key=header[1])
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        if not token.has_scope(self.scope):
            # Refused before any view sees the person.
            raise ScopeMissing(
                f"This token has no '{self.scope}' scope; a token's scopes are chosen when it "
                "is made on the Account page."
            )
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Describes personal API tokens in the OpenAPI schema (bearer tokens)."""

    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A personal API token."}
