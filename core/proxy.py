"""Who is really asking, behind a reverse proxy.

The proxy (nginx) connects to the ASGI server and says who its client was in
`X-Forwarded-For`, and which scheme and host it answered on in `X-Forwarded-Proto` and
`X-Forwarded-Host`. Anyone can send those headers, so they are believed only when the
TCP peer is one of HERMES_TRUSTED_PROXIES; from any other peer they are removed before
Django (or the login throttle, or the access log) sees them. daphne's own
`--proxy-headers` would trust them from every peer, which is why it stays off.

The same goes for the headers an auth proxy signs people in with (HERMES_AUTH_HEADER and
its e-mail and groups headers, accounts/proxy_auth.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
ASGIApp = Any

FORWARDED_HEADERS = (b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"forwarded")
#: The TCP peer of the connection, kept in the scope before the client is rewritten.
PEER_KEY = "hermes.peer"


def identity_headers() -> tuple[bytes, ...]:
    """The auth proxy's headers (lower case), which only a trusted proxy may send."""
    names = (
        settings.HERMES_AUTH_HEADER,
        settings.HERMES_AUTH_EMAIL_HEADER,
        settings.HERMES_AUTH_GROUPS_HEADER,
    )
    return tuple(name.lower().encode("latin-1") for name in names if name)


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """`["127.0.0.1", "10.0.0.0/8", "::1"]` as networks; ImproperlyConfigured on a bad one."""
    networks = []
    for value in values:
        value = value.strip()
        if not value:
            continue
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"HERMES_TRUSTED_PROXIES: {value!r} is not an IP address or network "
                "(examples: 127.0.0.1, 10.0.0.0/8, ::1)."
            ) from None
    return tuple(networks)


@lru_cache(maxsize=8)
def _trusted(values: tuple[str, ...]) -> tuple[Network, ...]:
    return parse_networks(values)


def trusted_networks() -> tuple[Network, ...]:
    return _trusted(tuple(settings.HERMES_TRUSTED_PROXIES))


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[::1]:443"
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "1.2.3.4:5678"
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # An IPv4 client seen through a dual-stack socket: judge it as IPv4.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def is_trusted(peer: str, networks: tuple[Network, ...] | None = None) -> bool:
    address = _address(peer)
    if address is None:
        return False
    networks = trusted_networks() if networks is None else networks
    return any(address in network for network in networks)


def resolve_client(
    peer: str, forwarded_for: str, networks: tuple[Network, ...] | None = None
) -> str:
    """The client's address: walk `X-Forwarded-For` from the right (the hop nearest to us)
    while the hop we got it from is a trusted proxy. The first untrusted hop is the client;
    whatever it claims about hops before it is its own invention and ignored."""
    networks = trusted_networks() if networks is None else networks
    current = peer
    if not is_trusted(current, networks) or not forwarded_for:
        return current
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if _address(hop) is None:
            # Garbage in the chain: stop at the last hop we could vouch for.
            return current
        current = str(_address(hop))
        if not is_trusted(current, networks):
            return current
    return current


def from_trusted_proxy(request: HttpRequest) -> bool:
    """Whether the connection behind a Django request came from a trusted proxy: the peer
    TrustedProxyMiddleware saw (REMOTE_ADDR is the client by then), else REMOTE_ADDR."""
    scope = getattr(request, "scope", None) or {}
    return is_trusted(scope.get(PEER_KEY) or request.META.get("REMOTE_ADDR", "") or "")


def client_ip(request: HttpRequest) -> str:
    """The real client address of a Django request (see the module docstring)."""
    return resolve_client(
        request.META.get("REMOTE_ADDR", "") or "",
        request.META.get("HTTP_X_FORWARDED_FOR", ""),
    )


class TrustedProxyMiddleware:
    """ASGI middleware for http and websocket scopes: from a trusted proxy, take the client
    address and scheme from X-Forwarded-For/-Proto; from anyone else, drop those headers
    and the auth proxy's."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = self.rewrite(scope)
        await self.app(scope, receive, send)

    @staticmethod
    def rewrite(scope: dict[str, Any]) -> dict[str, Any]:
        client = scope.get("client") or ("", 0)
        peer = str(client[0] or "")
        headers = list(scope.get("headers") or [])
        if not is_trusted(peer):
            dropped = FORWARDED_HEADERS + identity_headers()
            cleaned = [(k, v) for k, v in headers if k.lower() not in dropped]
            return {**scope, "headers": cleaned, PEER_KEY: peer}
        values: dict[bytes, str] = {}
        for key, value in headers:
            key = key.lower()
            if key in (b"x-forwarded-for", b"x-forwarded-proto"):
                # Repeated headers are one comma-separated list (RFC 9110 §5.3).
                text = value.decode("latin-1")
                values[key] = f"{values[key]}, {text}" if key in values else text
        new = {**scope, PEER_KEY: peer}
        if b"x-forwarded-for" in values:
            new["client"] = (resolve_client(peer, values[b"x-forwarded-for"]), 0)
        proto = values.get(b"x-forwarded-proto", "").split(",")[0].strip().lower()
        if proto in ("http", "https"):
            secure = proto == "https"
            if scope["type"] == "websocket":
                new["scheme"] = "wss" if secure else "ws"
            else:
                new["scheme"] = proto
        return new
