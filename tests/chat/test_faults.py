"""Provider faults, Stop, closed tabs and second tabs: the user's message is always kept and
the UI is always told what happened."""

from __future__ import annotations

import asyncio

import pytest

from devtools.scripted_llm import Fault
from sessions_app.models import Message
from tests.chat.conftest import events_until, settle

pytestmark = pytest.mark.django_db(transaction=True)


async def one_turn(sockets, user, text="Hello model"):
    ws = await sockets.open(user)
    await ws.send_json_to({"type": "chat.send", "session": None, "text": text})
    events = await events_until(ws, "assistant.done", timeout=30)
    tail = []
    if not await ws.receive_nothing(timeout=0.3):
        tail.append(await ws.receive_json_from())
    await ws.disconnect()
    await settle()
    return events + tail


def messages_of(events):
    return list(Message.objects.filter(session_id=events[0]["session"]).order_by("id"))


def test_rate_limit_is_retried_then_answered(owner, scripted, sockets):
    scripted.enqueue(reply="Worth the wait.", fault=Fault.rate_limited(retry_after=0.05, times=2))
    sockets.login(owner)
    events = asyncio.run(one_turn(sockets, owner))
    assert events[-1]["type"] == "assistant.done" and events[-1]["status"] == "complete"
    assert len(scripted.requests) == 3
    assert messages_of(events)[1].content == "Worth the wait."


def test_rate_limit_that_persists_ends_as_rate_limited_and_keeps_the_message(
    owner, scripted, sockets
):
    scripted.set_fault(Fault.rate_limited(retry_after=0.05))
    sockets.login(owner)
    events = asyncio.run(one_turn(sockets, owner))
    error = next(e for e in events if e["type"] == "error")
    assert error["code"] == "rate_limited"
    user_msg, answer = messages_of(events)
    assert user_msg.content == "Hello model"
    assert (answer.status, answer.finish_reason) == ("failed", "rate_limited")


def test_server_errors_three_times_give_a_clean_server_error(owner, scripted, sockets):
    scripted.set_fault(Fault.server_error(retry_after=0.05))
    sockets.login(owner)
    events = asyncio.run(one_turn(sockets, owner))
    error = next(e for e in events if e["type"] == "error")
    assert error["code"] == "llm_server_error"
    assert "HTTP 500" in error["message"]
    assert "Traceback" not in error["message"]
    assert len(scripted.requests) == 3  # one try and two retries, no more
    assert messages_of(events)[0].content == "Hello model"


def test_a_cut_stream_saves_the_partial_answer_as_interrupted(owner, scripted, sockets):
    scripted.enqueue(
        reply="This answer will be cut off somewhere in the middle of it.", fault=Fault(cut_after=5)
    )
    sockets.login(owner)
    events = asyncio.run(one_turn(sockets, owner))
    streamed = "".join(e["text"] for e in events if e["type"] == "assistant.delta")
    error = next(e for e in events if e["type"] == "error")
    assert error["code"] == "interrupted"
    answer = messages_of(events)[1]
    assert answer.status == "interrupted"
    assert streamed and answer.content == streamed
    assert "This answer".startswith(streamed[:5])


def test_a_stalled_model_times_out(owner, scripted, sockets, settings):
    settings.HERMES_LLM_READ_TIMEOUT = 0.5
    scripted.enqueue(
        reply="Never finishes because the model stalls.",
        fault=Fault(stall_after=3, stall_seconds=30),
    )
    sockets.login(owner)
    events = asyncio.run(one_turn(sockets, owner))
    error = next(e for e in events if e["type"] == "error")
    assert error["code"] == "llm_timeout"
    answer = messages_of(events)[1]
    assert answer.status in {"interrupted", "failed"}


def test_bad_api_key_is_reported_as_auth_failed(owner, scripted, sockets):
    scripted.set_fault(Fault.auth_failed())
    sockets.login(owner)
    events = asyncio.run(one_turn(sockets, owner))
    assert next(e for e in events if e["type"] == "error")["code"] == "auth_failed"
    assert "sk-test" not in str(events)


def test_stop_interrupts_and_keeps_the_text_so_far(owner, scripted, sockets):
    scripted.chunk_delay = 0.05
    scripted.enqueue(reply=" ".join(f"word{i}" for i in range(200)))
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Talk a lot"})
        events = [await ws.receive_json_from(timeout=10)]
        while sum(e["type"] == "assistant.delta" for e in events) < 5:
            events.append(await ws.receive_json_from(timeout=10))
        await ws.send_json_to({"type": "chat.stop", "session": events[0]["session"]})
        events += await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = asyncio.run(scenario())
    assert events[-1]["status"] == "interrupted"
    answer = messages_of(events)[1]
    assert answer.status == "interrupted" and answer.finish_reason == "stopped"
    streamed = "".join(e["text"] for e in events if e["type"] == "assistant.delta")
    assert answer.content == streamed
    assert "word199" not in answer.content


def test_closing_the_tab_mid_answer_loses_nothing(owner, scripted, sockets):
    scripted.chunk_delay = 0.01
    reply = " ".join(f"token{i}" for i in range(60))
    scripted.enqueue(reply=reply)
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Long answer"})
        started = await ws.receive_json_from(timeout=10)
        await ws.receive_json_from(timeout=10)  # first delta
        await ws.disconnect()  # the tab is gone
        await settle()
        return started["session"]

    session_id = asyncio.run(scenario())
    answer = Message.objects.get(session_id=session_id, role="assistant")
    assert answer.status == "complete"
    assert answer.content == reply


def test_a_second_tab_follows_the_same_stream(owner, scripted, sockets):
    scripted.chunk_delay = 0.02
    reply = " ".join(f"piece{i}" for i in range(40))
    scripted.enqueue(reply=reply)
    sockets.login(owner)

    async def scenario():
        first = await sockets.open(owner)
        await first.send_json_to({"type": "chat.send", "session": None, "text": "Stream it"})
        started = await first.receive_json_from(timeout=10)
        for _ in range(3):
            await first.receive_json_from(timeout=10)
        second = await sockets.open(owner)
        await second.send_json_to({"type": "chat.subscribe", "session": started["session"]})
        seen = await events_until(second, "assistant.done")
        await events_until(first, "assistant.done")
        await first.disconnect()
        await second.disconnect()
        await settle()
        return seen

    seen = asyncio.run(scenario())
    snapshot = next(e for e in seen if e["type"] == "session.snapshot")
    text = snapshot["text"] + "".join(
        e["text"] for e in seen if e["type"] == "assistant.delta" and e["seq"] > snapshot["seq"]
    )
    assert text == reply


def test_logout_closes_the_open_socket(owner, sockets, transactional_db):
    from django.test import Client

    client = Client()
    client.force_login(owner)
    sockets.cookies[owner.pk] = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def scenario():
        ws = await sockets.open(owner)
        from asgiref.sync import sync_to_async

        await sync_to_async(client.post)("/accounts/logout/")
        output = await ws.receive_output(timeout=5)
        return output

    output = asyncio.run(scenario())
    assert output["type"] == "websocket.close" and output["code"] == 4401


def test_deactivating_an_account_closes_its_sockets(owner, sockets):
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        from asgiref.sync import sync_to_async

        def deactivate() -> None:
            owner.is_active = False
            owner.save()

        await sync_to_async(deactivate)()
        return await ws.receive_output(timeout=5)

    output = asyncio.run(scenario())
    assert output["type"] == "websocket.close"
