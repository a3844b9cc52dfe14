"""Chat tests talk to the real websocket consumer and the scripted model over real HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from hermes_site.asgi import application

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")


# A chat turn's settings on top of tests.conftest.SCRIPTED_SETTINGS.
CHAT_TURN_SETTINGS: dict[str, Any] = {
    "HERMES_STREAM_SAVE_INTERVAL": 0.05,
    "HERMES_STREAM_COALESCE_MS": 0,  # one event per model chunk, deterministic
    # Reviews would run inline (eager Celery) and consume the script; tests/skills cover them.
    "HERMES_REVIEW_ENABLED": False,
}


@pytest.fixture
def scripted_settings() -> dict[str, Any]:
    # The SDK's retries are part of what the fault tests check.
    return {**CHAT_TURN_SETTINGS, "HERMES_LLM_MAX_RETRIES": 2}


def cookie_for(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


class Sockets:
    """Websocket clients for users. Log a user in (sync, before the event loop runs), then
    `await sockets.open(user)` inside it."""

    def __init__(self) -> None:
        self.cookies: dict[int, bytes] = {}

    def login(self, user: Any) -> None:
        self.cookies[user.pk] = cookie_for(user)

    async def open(self, user: Any) -> WebsocketCommunicator:
        ws = WebsocketCommunicator(
            application, "/ws/chat/", headers=[ORIGIN, HOST, (b"cookie", self.cookies[user.pk])]
        )
        connected, _ = await ws.connect()
        assert connected
        return ws


@pytest.fixture
def sockets(transactional_db) -> Sockets:
    return Sockets()


async def events_until(
    ws: WebsocketCommunicator, last_type: str, *, timeout: float = 20, limit: int = 2000
) -> list[dict[str, Any]]:
    """Receive events until one of `last_type` arrives (inclusive)."""
    events = []
    for _ in range(limit):
        event = await ws.receive_json_from(timeout=timeout)
        events.append(event)
        if event["type"] == last_type:
            return events
    raise AssertionError(f"no {last_type} within {limit} events: {events[-5:]}")


async def settle() -> None:
    """Let background turn tasks finish before the loop closes."""
    from sessions_app.agent.runner import running_turns

    for _ in range(200):
        tasks = [t for t in running_turns().values() if not t.done()]
        if not tasks:
            return
        await asyncio.sleep(0.05)
