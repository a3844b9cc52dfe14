"""The frozen system prompt (every request identical, append-only) and the recall fence."""

from __future__ import annotations

import asyncio

import pytest

from sessions_app.agent.fence import OPEN_TAG
from sessions_app.models import Message, Session
from tests.chat import providers
from tests.chat.conftest import events_until, settle

pytestmark = pytest.mark.django_db(transaction=True)

PROVIDERS = {
    "recall": "tests.chat.providers:RecallProvider",
    "failing": "tests.chat.providers:FailingProvider",
    "hanging": "tests.chat.providers:HangingProvider",
}


async def chat_turns(sockets, user, texts):
    ws = await sockets.open(user)
    session_id = None
    all_events = []
    for text in texts:
        await ws.send_json_to({"type": "chat.send", "session": session_id, "text": text})
        events = await events_until(ws, "assistant.done")
        session_id = events[0]["session"]
        all_events.append(events)
    await ws.disconnect()
    await settle()
    return session_id, all_events


def test_thirty_turns_with_memory_writes_keep_one_prompt_and_only_append(owner, scripted, sockets):
    # Every fifth turn the model saves a memory entry mid-session.
    for turn in range(30):
        if turn % 5 == 2:
            scripted.enqueue(
                tool_calls=[
                    {
                        "name": "memory",
                        "arguments": {
                            "action": "add",
                            "target": "memory",
                            "content": f"Fact number {turn}",
                        },
                    }
                ]
            )
        scripted.enqueue(reply=f"Answer {turn}: noted.")
    sockets.login(owner)
    session_id, _ = asyncio.run(
        chat_turns(sockets, owner, [f"Turn {i} question" for i in range(30)])
    )

    requests = [r["messages"] for r in scripted.requests]
    assert len(requests) == 36
    system = requests[0][0]
    assert system["role"] == "system"
    assert all(r[0] == system for r in requests), "system prompt changed mid-session"
    for earlier, later in zip(requests, requests[1:], strict=False):
        assert later[: len(earlier)] == earlier, "a request did not extend the previous one"
    # Writes persisted but did not leak into the frozen prompt.
    from memory.models import MemoryEntry

    assert MemoryEntry.objects.filter(owner=owner).count() == 6
    assert "Fact number" not in system["content"]
    # The provider's prefix cache saw it: most prompt tokens were cached after turn one.
    usages = scripted.usages
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    prompt = sum(u["prompt_tokens"] for u in usages)
    assert cached / prompt > 0.8
    session = Session.objects.get(pk=session_id)
    assert session.cache_read_tokens == cached


def test_next_session_sees_memory_written_in_the_previous_one(owner, scripted, sockets):
    scripted.enqueue(
        tool_calls=[
            {
                "name": "memory",
                "arguments": {
                    "action": "add",
                    "target": "user",
                    "content": "Olivia prefers terse answers",
                },
            }
        ]
    )
    scripted.enqueue(reply="Saved.")
    scripted.enqueue(reply="Hi again.")
    sockets.login(owner)
    asyncio.run(chat_turns(sockets, owner, ["I like terse answers"]))
    asyncio.run(chat_turns(sockets, owner, ["New chat"]))
    first_system = scripted.requests[0]["messages"][0]["content"]
    second_system = scripted.requests[-1]["messages"][0]["content"]
    assert "Olivia prefers terse answers" not in first_system
    assert "Olivia prefers terse answers" in second_system
    assert "USER PROFILE (who the user is)" in second_system


def test_recall_is_fenced_into_the_outgoing_message_only(owner, scripted, sockets, settings):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    settings.HERMES_MEMORY_PROVIDER = "recall"
    providers.CALLS.clear()
    # The model echoes a fence back; the user must not see it.
    scripted.enqueue(reply="Sure.\n<memory-context>\nledger\n</memory-context>\nLet's go.")
    scripted.enqueue(reply="Second answer.")
    sockets.login(owner)
    session_id, events = asyncio.run(
        chat_turns(sockets, owner, ["What am I working on?", "And next?"])
    )

    sent = scripted.requests[0]["messages"][-1]["content"]
    assert sent.startswith("What am I working on?\n\n" + OPEN_TAG)
    assert "Django project called ledger" in sent
    # Replayed byte-for-byte on the next call (append-only), never stored as what was said.
    assert scripted.requests[1]["messages"][1]["content"] == sent
    stored = Message.objects.filter(session_id=session_id, role="user").order_by("id")
    assert [m.content for m in stored] == ["What am I working on?", "And next?"]
    assert "memory-context" not in "".join(
        Message.objects.filter(session_id=session_id).values_list("content", flat=True)
    )
    streamed = "".join(e["text"] for e in events[0] if e["type"] == "assistant.delta")
    assert streamed == "Sure.\nLet's go."
    assert "memory-context" not in streamed
    assert ("prefetch", "What am I working on?") in providers.CALLS


def test_trivial_input_skips_recall(owner, scripted, sockets, settings):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    settings.HERMES_MEMORY_PROVIDER = "recall"
    providers.CALLS.clear()
    sockets.login(owner)
    asyncio.run(chat_turns(sockets, owner, ["thanks!"]))
    assert OPEN_TAG not in scripted.requests[0]["messages"][-1]["content"]
    assert not [c for c in providers.CALLS if c[0] == "prefetch"]


def test_a_failing_provider_never_breaks_the_turn(owner, scripted, sockets, settings):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    settings.HERMES_MEMORY_PROVIDER = "failing"
    scripted.enqueue(reply="Still here.")
    sockets.login(owner)
    session_id, events = asyncio.run(chat_turns(sockets, owner, ["Hello there friend"]))
    assert events[0][-1]["status"] == "complete"
    assert Message.objects.get(session_id=session_id, role="assistant").content == "Still here."


def test_a_hanging_provider_is_time_boxed(owner, scripted, sockets, settings):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    settings.HERMES_MEMORY_PROVIDER = "hanging"
    settings.HERMES_PROVIDER_PREFETCH_TIMEOUT = 0.3
    providers.RELEASE.clear()
    scripted.enqueue(reply="Answered without waiting.")
    sockets.login(owner)
    try:
        session_id, events = asyncio.run(chat_turns(sockets, owner, ["Tell me something"]))
    finally:
        providers.RELEASE.set()
    assert events[0][-1]["status"] == "complete"
    assert OPEN_TAG not in scripted.requests[0]["messages"][-1]["content"]
