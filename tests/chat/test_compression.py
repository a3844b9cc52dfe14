"""Context compression and session split, driven through real chat turns against the
scripted model (summary and flush calls included)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading

import pytest
from django.test import Client

from core.leases import LeaseBusy
from devtools.scripted_llm import Fault
from memory.models import MemoryEntry
from sessions_app.agent.tools import ToolContext, registry
from sessions_app.compression import next_title_in_lineage, plan_compression, session_compress
from sessions_app.lineage import compression_chain
from sessions_app.models import Message, Session
from tests.chat.conftest import events_until, settle
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LONG = " ".join(["the deploy script copies artifacts to staging before the release"] * 12)


@pytest.fixture
def small_window(settings):
    settings.HERMES_CONTEXT_LENGTH = 2400
    settings.HERMES_REPLY_MAX_TOKENS = 200
    settings.HERMES_COMPRESSION_THRESHOLD = 0.75


def script_compression(scripted, *, summary_fault=None):
    flushes = itertools.count(1)
    summaries: list[str] = []

    def summary(body):
        n = len(summaries) + 1
        text = f"## Goal\nShip the deploy script (summary v{n}).\n## Completed Actions\n{n}. DONE"
        summaries.append(text)
        return text

    scripted.add_rule(lambda b: b["messages"][-1]["role"] == "tool", reply="Saved.")
    scripted.add_rule(
        "[Memory flush before compaction]",
        tool_calls=lambda b: [
            {
                "name": "memory",
                "arguments": {
                    "action": "add",
                    "target": "user",
                    "content": f"Flushed fact {next(flushes)}",
                },
            }
        ],
    )
    scripted.add_rule("You are a summarisation agent", reply=summary, fault=summary_fault)
    scripted.add_rule("Turn", reply=LONG)
    return summaries


async def send_turns(sockets, user, texts, session=None):
    ws = await sockets.open(user)
    seen = []
    for text in texts:
        await ws.send_json_to({"type": "chat.send", "session": session, "text": text})
        events = await events_until(ws, "assistant.done", timeout=30)
        session = session or events[0]["session"]
        seen.append(events)
    await ws.disconnect()
    await settle()
    return session, seen


def test_three_compressions_give_numbered_parts_that_read_as_one_conversation(
    owner, scripted, sockets, small_window
):
    summaries = script_compression(scripted)
    sockets.login(owner)
    texts = ["Turn zero: remember the zanzibar release codename"] + [
        f"Turn {i}: next step" for i in range(1, 40)
    ]

    async def until_three_splits():
        first, _ = await send_turns(sockets, owner, texts[:1])
        for text in texts[1:]:
            await send_turns(sockets, owner, [text], session=first)
            chain = await asyncio.to_thread(
                lambda: compression_chain(Session.objects.get(pk=first))
            )
            if len(chain) >= 4:
                return first
        raise AssertionError("never compressed three times")

    first_id = asyncio.run(until_three_splits())
    chain = compression_chain(Session.objects.get(pk=first_id))
    assert [s.title for s in chain[:4]] == [
        "Turn zero: remember the zanzibar release codename",
        "Turn zero: remember the zanzibar release codename #2",
        "Turn zero: remember the zanzibar release codename #3",
        "Turn zero: remember the zanzibar release codename #4",
    ]
    assert all(s.end_reason == "compression" for s in chain[:3])

    # Each summary builds on the last.
    summary_requests = [
        r["messages"][0]["content"]
        for r in scripted.requests
        if r["messages"][0]["content"].startswith("You are a summarisation agent")
    ]
    assert "PREVIOUS SUMMARY" not in summary_requests[0]
    assert summaries[0] in summary_requests[1] and summaries[1] in summary_requests[2]

    # Tool calls and their results were never separated in anything sent to the model.
    for request in scripted.requests:
        calls = {c["id"] for m in request["messages"] for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in request["messages"] if m["role"] == "tool"}
        assert calls == results

    # The flush saved durable facts, and the next part's frozen prompt has them.
    assert MemoryEntry.objects.filter(owner=owner, content="Flushed fact 1").exists()
    assert "Flushed fact 1" in chain[1].system_prompt.prompt
    assert chain[1].messages.filter(kind="summary").count() == 1

    # One row in the list, under the original title; the old id leads to the newest part.
    client = Client()
    client.force_login(owner)
    page = client.get(f"/chat/{first_id}/", follow=True)
    assert page.redirect_chain[-1][0] == f"/chat/{chain[-1].pk}/"
    body = page.content.decode()
    assert body.count('<li class="conv') == 1
    assert "Turn zero: remember the zanzibar release codename</a>" in body
    assert "zanzibar" in body and "Earlier messages were compressed here" in body

    # Search finds the first part, once, and the agent's own tool skips the current chain.
    results = client.get("/api/search/", {"q": "zanzibar"}).json()["results"]
    assert len(results) == 1 and results[0]["session_id"] in {s.pk for s in chain}
    tool = registry.dispatch(
        ToolContext(user=owner, session_id=chain[-1].pk),
        "session_search",
        {"query": "zanzibar"},
        allowed={"session_search"},
    )
    assert "zanzibar" not in json.dumps(tool.payload).lower() or not tool.payload.get("results")


def test_duplicate_delivery_compresses_once(owner, scripted, small_window):
    script_compression(scripted)
    session = Session.objects.create(owner=owner, title="Dup")
    for i in range(8):
        Message.objects.create(session=session, role="user", content=f"Turn {i} {LONG}")
        Message.objects.create(session=session, role="assistant", status="complete", content=LONG)
    results = []

    def deliver() -> None:
        try:
            results.append(session_compress(session_id=session.pk))
        except LeaseBusy:  # the task comes back later: someone else is on it
            results.append("busy")

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [r for r in results if r not in (None, "busy")]
    assert len(done) == 1 and len(results) == 2
    assert Session.objects.filter(parent=session).count() == 1
    assert session_compress(session_id=session.pk) is None


def test_summary_failure_keeps_the_conversation_going_uncompressed(
    owner, scripted, sockets, small_window
):
    script_compression(scripted, summary_fault=Fault.server_error(retry_after=0.05))
    sockets.login(owner)

    async def scenario():
        return await send_turns(sockets, owner, [f"Turn {i}" for i in range(6)])

    session_id, events = asyncio.run(scenario())
    session = Session.objects.get(pk=session_id)
    assert session.ended_at is None and session.compression_cooldown_until is not None
    assert not Session.objects.filter(parent=session).exists()
    assert session.messages.filter(role="user").count() == 6
    assert all(e[-1]["status"] == "complete" for e in events)


def test_a_message_sent_during_compression_waits_and_lands_in_the_new_part(
    owner, scripted, sockets, settings
):
    script_compression(scripted)
    scripted.add_rule(
        "You are a summarisation agent", reply="## Goal\nslow", fault=Fault(latency=1.5)
    )
    session = Session.objects.create(owner=owner, title="Busy")
    for i in range(8):
        Message.objects.create(session=session, role="user", content=f"Turn {i} {LONG}")
        Message.objects.create(session=session, role="assistant", status="complete", content=LONG)
    sockets.login(owner)
    worker = threading.Thread(target=lambda: session_compress(session_id=session.pk))

    async def scenario():
        ws = await sockets.open(owner)
        worker.start()
        await asyncio.sleep(0.3)
        await ws.send_json_to(
            {"type": "chat.send", "session": session.pk, "text": "Turn late: are you there?"}
        )
        events = await events_until(ws, "assistant.done", timeout=30)
        await ws.disconnect()
        await settle()
        return events

    events = asyncio.run(scenario())
    worker.join()
    child = Session.objects.get(parent=session)
    assert any(e["type"] == "notice" and e.get("new_session") == child.pk for e in events)
    late = Message.objects.get(content="Turn late: are you there?")
    assert late.session_id == child.pk
    assert events[-1]["status"] == "complete"


def test_titles_are_numbered_along_the_lineage(owner):
    Session.objects.create(owner=owner, title="Plan")
    assert next_title_in_lineage(owner=owner, title="Plan") == "Plan #2"
    Session.objects.create(owner=owner, title="Plan #2")
    assert next_title_in_lineage(owner=owner, title="Plan #2") == "Plan #3"


def test_plan_never_starts_the_tail_inside_a_tool_group():
    def msg(role, **kw):
        return {"role": role, "content": kw.pop("content", role), **kw}

    call = {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": "{}"}}
    messages = [
        msg("user"),
        msg("assistant"),
        msg("user"),
        msg("assistant"),
        msg("user"),
        msg("assistant", tool_calls=[call]),
        msg("tool", tool_call_id="c1"),
        msg("assistant"),
        msg("user", content="last"),
        msg("assistant"),
    ]
    plan = plan_compression(messages, tail_budget=35)
    assert plan is not None
    assert plan.tail[0]["role"] != "tool"
    assert any(m["content"] == "last" for m in plan.tail)
    kept = plan.head + plan.middle + plan.tail
    assert kept == messages


def test_a_compression_that_lost_its_lease_stops_and_writes_nothing(
    owner, scripted, small_window, settings
):
    # This process stalls past its lease; another takes the compression over. The stalled
    # one's heartbeat finds out, and it stops before writing its summary, bill or split.
    settings.HERMES_LEASE_HEARTBEAT = 0.1
    script_compression(scripted, summary_fault=Fault(latency=1.5))
    session = Session.objects.create(owner=owner, title="Lost")
    for i in range(8):
        Message.objects.create(session=session, role="user", content=f"Turn {i} {LONG}")
        Message.objects.create(session=session, role="assistant", status="complete", content=LONG)
    results = []
    loser = threading.Thread(target=lambda: results.append(session_compress(session_id=session.pk)))
    loser.start()
    wait_for(
        lambda: any("summarisation agent" in json.dumps(b) for b in scripted.requests),
        timeout=20,
        what="the summary call",
    )
    taker = "compress@elsewhere:1#taker"
    Session.objects.filter(pk=session.pk).update(lease_owner=taker)
    loser.join(timeout=30)
    assert results == [None]
    session.refresh_from_db()
    assert (session.lease_owner, session.ended_at, session.end_reason) == (taker, None, "")
    assert session.compression_cooldown_until is None and session.compression_failure_error == ""
    assert not Session.objects.filter(parent=session).exists()
    assert session.input_tokens == 0  # the summary call was not billed by the loser
