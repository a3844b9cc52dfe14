"""X-Forwarded-* are believed only from HERMES_TRUSTED_PROXIES, at the ASGI layer (what
daphne hands Django and Channels) and in `client_ip` (what the login throttle keys on)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.testing import ApplicationCommunicator
from django.test import RequestFactory

from core.proxy import TrustedProxyMiddleware, client_ip, parse_networks, resolve_client

NETS = parse_networks(["127.0.0.1", "10.0.0.0/8", "::1"])


@pytest.mark.parametrize(
    ("peer", "xff", "expected"),
    [
        # Straight from a client: its header is its own invention.
        ("203.0.113.7", "1.2.3.4", "203.0.113.7"),
        # Through our proxy: the proxy's word is taken.
        ("127.0.0.1", "198.51.100.20", "198.51.100.20"),
        # Through two trusted hops; what the client put in front is ignored.
        ("127.0.0.1", "6.6.6.6, 198.51.100.20, 10.1.2.3", "198.51.100.20"),
        # A rotated header behind the proxy changes nothing but the ignored part.
        ("127.0.0.1", "7.7.7.7, 198.51.100.20", "198.51.100.20"),
        # Garbage stops the walk at the last hop we can vouch for.
        ("127.0.0.1", "not-an-ip", "127.0.0.1"),
        ("::1", "2001:db8::5", "2001:db8::5"),
        ("::ffff:127.0.0.1", "198.51.100.20", "198.51.100.20"),
        ("127.0.0.1", "", "127.0.0.1"),
    ],
)
def test_resolve_client_walks_only_through_trusted_hops(peer, xff, expected):
    assert resolve_client(peer, xff, NETS) == expected


def test_client_ip_of_a_django_request_uses_the_trusted_chain(settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    factory = RequestFactory()
    direct = factory.get("/", REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR="1.2.3.4")
    proxied = factory.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.20")
    assert client_ip(direct) == "203.0.113.7"
    assert client_ip(proxied) == "198.51.100.20"


def scope(peer: str, headers: list[tuple[bytes, bytes]], kind: str = "http") -> dict[str, Any]:
    return {
        "type": kind,
        "scheme": "ws" if kind == "websocket" else "http",
        "path": "/",
        "client": (peer, 50000),
        "headers": [(b"host", b"chat.example.org"), *headers],
    }


FORWARDED = [
    (b"x-forwarded-for", b"198.51.100.20"),
    (b"x-forwarded-proto", b"https"),
    (b"x-forwarded-host", b"chat.example.org"),
]


def test_middleware_takes_client_and_scheme_from_a_trusted_proxy(settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    seen = TrustedProxyMiddleware.rewrite(scope("127.0.0.1", FORWARDED))
    assert seen["client"][0] == "198.51.100.20"
    assert seen["scheme"] == "https"
    assert (b"x-forwarded-host", b"chat.example.org") in seen["headers"]
    ws = TrustedProxyMiddleware.rewrite(scope("127.0.0.1", FORWARDED, kind="websocket"))
    assert ws["scheme"] == "wss" and ws["client"][0] == "198.51.100.20"


def test_middleware_strips_forwarded_headers_from_anyone_else(settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    seen = TrustedProxyMiddleware.rewrite(
        scope("203.0.113.7", [*FORWARDED, (b"forwarded", b"for=1.2.3.4;proto=https")])
    )
    assert seen["client"][0] == "203.0.113.7"
    assert seen["scheme"] == "http"
    names = {name for name, _ in seen["headers"]}
    assert names == {b"host"}


def test_the_auth_proxy_headers_are_kept_from_a_trusted_proxy_only(settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    settings.HERMES_AUTH_HEADER = "Remote-User"
    settings.HERMES_AUTH_EMAIL_HEADER = "Remote-Email"
    identity = [(b"Remote-User", b"root"), (b"remote-email", b"root@example.org")]
    for kind in ("http", "websocket"):
        stranger = TrustedProxyMiddleware.rewrite(scope("203.0.113.7", identity, kind=kind))
        assert {name for name, _ in stranger["headers"]} == {b"host"}
        proxied = TrustedProxyMiddleware.rewrite(scope("127.0.0.1", identity, kind=kind))
        assert all(header in proxied["headers"] for header in identity)


def get(app: Any, request_scope: dict[str, Any]) -> tuple[int, dict[bytes, bytes]]:
    async def go() -> tuple[int, dict[bytes, bytes]]:
        comm = ApplicationCommunicator(app, {**request_scope, "method": "GET", "query_string": b""})
        await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await comm.receive_output(timeout=10)
        await comm.receive_output(timeout=10)  # the body
        await comm.wait(timeout=10)
        return start["status"], dict(start["headers"])

    return asyncio.run(go())


def django_behind_proxy_middleware() -> Any:
    """What hermes_site.asgi_proxy builds, with middleware loaded under the test's settings
    (Django reads SECURE_SSL_REDIRECT and friends once, when its handler is created)."""
    from django.core.handlers.asgi import ASGIHandler

    from core.logs import WebsocketLogMiddleware

    return TrustedProxyMiddleware(WebsocketLogMiddleware(ASGIHandler()))


@pytest.mark.django_db
def test_an_untrusted_client_cannot_claim_https_even_with_the_proxy_ssl_header_set(settings):
    """Django behind the middleware of `make serve`, with production's SSL settings: a
    direct client saying X-Forwarded-Proto: https is still redirected; the proxy is
    believed."""
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.USE_X_FORWARDED_HOST = True
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["chat.example.org"]
    application = django_behind_proxy_middleware()
    request = {**scope("203.0.113.7", FORWARDED), "path": "/accounts/login/"}
    status, headers = get(application, request)
    assert status == 301
    assert headers[b"Location"] == b"https://chat.example.org/accounts/login/"

    status, headers = get(application, {**request, "client": ("127.0.0.1", 40000)})
    assert status == 200
    assert b"X-Request-ID" in headers


@pytest.mark.django_db
def test_a_forged_host_from_an_untrusted_client_is_not_used(settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    settings.USE_X_FORWARDED_HOST = True
    settings.ALLOWED_HOSTS = ["chat.example.org"]
    application = django_behind_proxy_middleware()
    forged = scope("203.0.113.7", [(b"x-forwarded-host", b"evil.example")])
    status, _ = get(application, {**forged, "path": "/accounts/login/"})
    assert status == 200  # judged by its real Host header, which is ours
    bad_host = {**scope("203.0.113.7", []), "path": "/accounts/login/"}
    bad_host["headers"] = [(b"host", b"evil.example")]
    status, _ = get(application, bad_host)
    assert status == 400
