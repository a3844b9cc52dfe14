"""The websocket handshake checks Origin (scheme, host and port) and login; background
tasks reach open sockets."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from hermes_site.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def connect(headers):
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    connected, _ = await communicator.connect()
    return communicator, connected


def test_foreign_origin_is_refused_even_with_a_valid_login(owner):
    cookie = session_cookie(owner)

    async def run():
        communicator, connected = await connect(
            [(b"origin", b"http://evil.example"), (b"cookie", cookie), (b"host", b"127.0.0.1")]
        )
        await communicator.disconnect()
        return connected

    assert asyncio.run(run()) is False


SITE = (b"host", b"127.0.0.1:8000")


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:9999",  # an allowed host name on another port
        "https://127.0.0.1",  # the same host over another scheme (and port)
        "http://127.0.0.1:8001",
        "http://127.0.0.1",  # port 80
        "null",
        "http://127.0.0.1:8000/path",
    ],
)
def test_an_allowed_host_on_another_port_or_scheme_is_refused(owner, origin):
    cookie = session_cookie(owner)

    async def run():
        communicator, connected = await connect(
            [(b"origin", origin.encode()), (b"cookie", cookie), SITE]
        )
        await communicator.disconnect()
        return connected

    assert asyncio.run(run()) is False


@pytest.mark.parametrize(
    ("scheme", "host", "origin", "trusted"),
    [
        ("ws", "127.0.0.1:8000", "http://127.0.0.1:8000", []),
        ("ws", "LOCALHOST:8000", "http://localhost:8000", []),
        ("ws", "[::1]:8000", "http://[::1]:8000", []),
        ("ws", "127.0.0.1:80", "http://127.0.0.1", []),
        ("wss", "127.0.0.1", "https://127.0.0.1:443", []),  # behind a TLS proxy
        ("ws", "127.0.0.1:8001", "https://chat.example.org", ["https://chat.example.org"]),
    ],
)
def test_the_sites_own_or_a_trusted_origin_is_accepted(
    owner, settings, scheme, host, origin, trusted
):
    settings.CSRF_TRUSTED_ORIGINS = trusted
    cookie = session_cookie(owner)

    async def run():
        communicator = WebsocketCommunicator(
            application,
            "/ws/chat/",
            headers=[(b"origin", origin.encode()), (b"cookie", cookie), (b"host", host.encode())],
        )
        communicator.scope["scheme"] = scheme
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    assert asyncio.run(run()) is True


def test_a_host_outside_allowed_hosts_is_refused_even_with_a_matching_origin(owner):
    cookie = session_cookie(owner)

    async def run():
        communicator, connected = await connect(
            [(b"origin", b"http://evil.example"), (b"cookie", cookie), (b"host", b"evil.example")]
        )
        await communicator.disconnect()
        return connected

    assert asyncio.run(run()) is False


def test_missing_origin_is_refused(owner):
    cookie = session_cookie(owner)

    async def run():
        communicator, connected = await connect([(b"cookie", cookie)])
        await communicator.disconnect()
        return connected

    assert asyncio.run(run()) is False


def test_anonymous_handshake_is_refused():
    async def run():
        communicator, connected = await connect([(b"origin", b"http://127.0.0.1:8000"), SITE])
        await communicator.disconnect()
        return connected

    assert asyncio.run(run()) is False


def test_logged_in_same_origin_handshake_is_accepted(owner):
    cookie = session_cookie(owner)

    async def run():
        communicator, connected = await connect(
            [(b"origin", b"http://127.0.0.1:8000"), (b"cookie", cookie), SITE]
        )
        await communicator.disconnect()
        return connected

    assert asyncio.run(run()) is True


def test_a_socket_opened_while_the_channel_layer_is_down_says_so(owner, settings):
    # Found by the chaos suite: during a Valkey restart the handshake failed with a 500.
    from channels.layers import channel_layers

    from tests.conftest import free_port

    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "core.channel_layer.LocalFirstRedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]},  # nobody listens
        }
    }
    channel_layers.backends.clear()
    cookie = session_cookie(owner)

    async def run():
        communicator, connected = await connect(
            [(b"origin", b"http://127.0.0.1:8000"), (b"cookie", cookie), SITE]
        )
        event = await communicator.receive_json_from(timeout=10)
        closed = await communicator.receive_output(timeout=10)
        return connected, event, closed

    connected, event, closed = asyncio.run(run())
    assert connected is True
    assert (event["type"], event["code"]) == ("error", "realtime_unavailable")
    assert closed == {"type": "websocket.close", "code": 1013}


@pytest.mark.slow
def test_task_run_by_a_real_worker_reaches_the_open_socket(
    owner, outsider, redis_channel_layer, celery_worker
):
    """A Celery worker process publishes through Redis/Valkey; the socket receives it.

    Runs against the embedded Valkey by default and the machine's Redis when REDIS_URL is
    set, so both paths are exercised by CI's two runs.
    """
    owner_cookie = session_cookie(owner)
    outsider_cookie = session_cookie(outsider)

    async def run():
        origin = (b"origin", b"http://127.0.0.1:8000")
        mine, ok1 = await connect([origin, SITE, (b"cookie", owner_cookie)])
        theirs, ok2 = await connect([origin, SITE, (b"cookie", outsider_cookie)])
        assert ok1 and ok2
        await asyncio.to_thread(
            celery_worker.send,
            "hermes_site.deliver_notice",
            owner.pk,
            "memory_saved",
            "Memory updated",
        )
        event = await mine.receive_json_from(timeout=20)
        leaked = await theirs.receive_nothing(timeout=0.5)
        await mine.disconnect()
        await theirs.disconnect()
        return event, leaked

    event, nothing_for_outsider = asyncio.run(run())
    assert event == {
        "type": "notice",
        "session": None,
        "kind": "memory_saved",
        "text": "Memory updated",
    }
    assert nothing_for_outsider


TRUSTED = ["https://*.example.com", "https://chat.example.org", "http://10.0.0.5:8080"]


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("https://example.com", True),  # the wildcard's own domain
        ("https://a.example.com", True),
        ("https://a.b.example.com", True),
        ("http://a.example.com", False),  # another scheme
        ("https://a.example.com:8443", False),  # a port the entry does not name
        ("https://evilexample.com", False),
        ("https://example.com.evil.org", False),
        ("https://chat.example.org", True),
        ("https://chat.example.org:443", False),  # Django compares the header as sent
        ("https://sub.chat.example.org", False),
        ("http://10.0.0.5:8080", True),
        ("http://10.0.0.5", False),
        ("null", False),
    ],
)
def test_websockets_trust_the_origins_djangos_csrf_check_trusts(owner, settings, origin, expected):
    from django.middleware.csrf import CsrfViewMiddleware
    from django.test import RequestFactory

    settings.CSRF_TRUSTED_ORIGINS = TRUSTED
    # The reference: what Django's CSRF middleware decides for a form post from `origin`.
    request = RequestFactory().post("/", HTTP_ORIGIN=origin, HTTP_HOST="127.0.0.1:8000")
    django_trusts = CsrfViewMiddleware(lambda r: None)._origin_verified(request)
    cookie = session_cookie(owner)

    async def run():
        communicator, connected = await connect(
            [(b"origin", origin.encode()), (b"cookie", cookie), SITE]
        )
        await communicator.disconnect()
        return connected

    assert django_trusts is expected
    assert asyncio.run(run()) is expected
