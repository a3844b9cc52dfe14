"""The websocket Origin check: a handshake is accepted only from the site's own origin
(scheme, host and port, as the browser reached it) or from an origin CSRF_TRUSTED_ORIGINS
(which holds HERMES_PUBLIC_URL) trusts — by the rule Django's CSRF check applies to form
posts, so the two never disagree: an entry matches the Origin header exactly, or
`scheme://*.example.com` matches that domain and its subdomains on that scheme (without a
port, unless the entry names it). Malformed entries are refused when settings load.

Channels' AllowedHostsOriginValidator compares host names only, so a page served from
another port or scheme of an allowed host (`http://localhost:9999`, `https://127.0.0.1`
for a site at http://127.0.0.1:8000) could open sockets with the person's cookies.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_origin(value: str) -> str | None:
    """`scheme://host:port` in lower case with the port always spelled out, or None if
    `value` is not an http(s) origin."""
    try:
        parts = urlsplit(value.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port or DEFAULT_PORTS[parts.scheme]}"


def _header(scope: dict[str, Any], name: bytes) -> str:
    values = [v for k, v in scope.get("headers") or [] if k.lower() == name]
    return values[-1].decode("latin-1") if len(values) == 1 else ""


def own_origin(scope: dict[str, Any]) -> str | None:
    """The origin the browser reached this websocket on: the scheme (made `wss` by
    TrustedProxyMiddleware behind a TLS proxy) and the Host header (X-Forwarded-Host when
    Django is told to use it; only a trusted proxy's reaches here), if the host is allowed."""
    host = ""
    if settings.USE_X_FORWARDED_HOST:
        host = _header(scope, b"x-forwarded-host").split(",")[0].strip()
    host = host or _header(scope, b"host")
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return normalize_origin(f"{scheme}://{host}")


def origin_trusted(origin: str) -> bool:
    """True when CSRF_TRUSTED_ORIGINS trusts the Origin header `origin`, exactly as Django's
    CsrfViewMiddleware decides it (an exact entry, or a wildcard subdomain entry)."""
    entries = settings.CSRF_TRUSTED_ORIGINS
    if origin in {entry for entry in entries if "*" not in entry}:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    for entry in entries:
        if "*" in entry:
            pattern = urlsplit(entry)
            if pattern.scheme == parts.scheme and is_same_domain(
                parts.netloc, pattern.netloc.lstrip("*")
            ):
                return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    header = _header(scope, b"origin")
    origin = normalize_origin(header)
    if origin is None:
        return False
    return origin == own_origin(scope) or origin_trusted(header)


class SameOriginValidator:
    """ASGI middleware for websocket scopes: refuse the handshake from any other origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
