"""Temporary chats neither read nor write memory and expire."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import MemoryEntry
from sessions_app.maintenance import temporary_sessions_expire
from sessions_app.models import Session
from tests.chat.conftest import events_until, settle

pytestmark = pytest.mark.django_db(transaction=True)


def test_temporary_chat_has_no_memory_in_prompt_or_tools(owner, scripted, sockets):
    MemoryEntry.objects.create(owner=owner, target="user", content="Olivia likes tea", order=0)
    scripted.enqueue(reply="Private answer.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to(
            {"type": "chat.send", "session": None, "text": "Secret question", "temporary": True}
        )
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = asyncio.run(scenario())
    assert (events[0]["type"], events[0]["temporary"]) == ("session.started", True)
    session = Session.objects.get(pk=events[0]["session"])
    assert session.temporary
    request = scripted.requests[0]
    assert "Olivia likes tea" not in request["messages"][0]["content"]
    tool_names = {t["function"]["name"] for t in request.get("tools") or []}
    assert "memory" not in tool_names and "session_search" not in tool_names


def test_a_normal_chat_does_get_memory(owner, scripted, sockets):
    MemoryEntry.objects.create(owner=owner, target="user", content="Olivia likes tea", order=0)
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Hello"})
        await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()

    asyncio.run(scenario())
    request = scripted.requests[0]
    assert "Olivia likes tea" in request["messages"][0]["content"]
    assert "memory" in {t["function"]["name"] for t in request["tools"]}


def test_temporary_chats_expire_after_the_retention(owner, settings):
    settings.HERMES_TEMPORARY_CHAT_DAYS = 7
    old = Session.objects.create(
        owner=owner, temporary=True, started_at=timezone.now() - timedelta(days=8)
    )
    fresh = Session.objects.create(owner=owner, temporary=True)
    kept = Session.objects.create(owner=owner, started_at=timezone.now() - timedelta(days=30))
    assert temporary_sessions_expire() == 1
    assert not Session.objects.filter(pk=old.pk).exists()
    assert Session.objects.filter(pk__in=[fresh.pk, kept.pk]).count() == 2
