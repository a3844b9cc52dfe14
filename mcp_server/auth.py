"""The front of /mcp/: the request's host must be one the site answers to, and it must
carry a personal API token (`Authorization: Bearer <token>`) of an active person with at
least one MCP scope. Django's middleware does not run here (the MCP app is beside Django in
the ASGI router), so these are the checks Django and the REST API would make."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from accounts.models import TokenScope
from accounts.services import api_token_use
from core.logs import access_logger, new_request_id, request_id_var
from core.proxy import is_trusted

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

#: Where the authenticated token travels to the tool handlers (an ASGI scope extension key).
TOKEN_KEY = "hermes.api_token"
MCP_SCOPES = frozenset(TokenScope.values) - {TokenScope.API}


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _host_allowed(scope: Scope) -> bool:
    host = _header(scope, b"host")
    if settings.USE_X_FORWARDED_HOST and _header(scope, b"x-forwarded-host"):
        # Only a trusted proxy's header gets this far (core.proxy removes the others).
        host = _header(scope, b"x-forwarded-host").split(",")[0].strip()
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


async def _refuse(send: Callable, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="hermes", error="invalid_token"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def token_required(app: ASGIApp) -> ASGIApp:
    """Wrap the MCP app: refuse bad hosts (400), missing or revoked tokens and deactivated
    people (401), tokens without any MCP scope (403); pass the token on in the scope. Each
    request gets a request id and one access-log line, as Django's requests do."""

    async def logged(scope: Scope, receive: Callable, send: Callable) -> None:
        client = (scope.get("client") or ("", 0))[0]
        offered = _header(scope, b"x-request-id") if is_trusted(client) else ""
        request_id = new_request_id(offered)
        reset = request_id_var.set(request_id)
        started = time.monotonic()
        seen: dict[str, Any] = {"status": None}

        async def noting_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", ()),
                        (b"x-request-id", request_id.encode()),
                    ],
                }
            await send(message)

        try:
            await guarded(scope, receive, noting_send, seen)
        finally:
            access_logger.info(
                "%s %s %s",
                scope["method"],
                scope["path"],
                seen["status"],
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": seen["status"],
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                    "client_ip": client,
                    "user_id": seen.get("user_id"),
                },
            )
            request_id_var.reset(reset)

    async def guarded(scope: Scope, receive: Callable, send: Callable, seen: dict) -> None:
        if not _host_allowed(scope):
            await _refuse(send, 400, "bad_host", "This host name is not served here.")
            return
        parts = _header(scope, b"authorization").split()
        if len(parts) != 2 or parts[0].lower() != "bearer":
            await _refuse(
                send,
                401,
                "not_authenticated",
                "Send a personal API token (Account page) as 'Authorization: Bearer <token>'.",
            )
            return
        token = await database_sync_to_async(api_token_use)(key=parts[1])
        if token is None:
            await _refuse(send, 401, "authentication_failed", "Invalid or revoked token.")
            return
        if not MCP_SCOPES & set(token.scope_list):
            await _refuse(
                send,
                403,
                "missing_scope",
                "This token has no MCP scope (memory:read, memory:write, search, skills:read, "
                "skills:write). Create one with the scopes the client needs on the Account page.",
            )
            return
        seen["user_id"] = token.user_id
        await app({**scope, TOKEN_KEY: token}, receive, send)

    return logged
