"""One chat turn over the real websocket consumer against the scripted model."""

from __future__ import annotations

import asyncio
import json

import pytest

from sessions_app.models import Message, Session
from tests.chat.conftest import events_until, settle

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro):
    return asyncio.run(coro)


def test_a_new_chat_streams_the_answer_and_saves_both_messages(owner, scripted, sockets):
    scripted.enqueue(reply="Paris is the capital of France, famous for its museums.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Capital of France?"})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = run(scenario())
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.started"
    assert events[0]["temporary"] is False
    assert kinds[-1] == "assistant.done"
    deltas = [e["text"] for e in events if e["type"] == "assistant.delta"]
    assert len(deltas) > 3
    assert "".join(deltas) == "Paris is the capital of France, famous for its museums."
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    session_id = events[0]["session"]
    assert all(e["session"] == session_id for e in events)

    session = Session.objects.get(pk=session_id)
    assert session.owner == owner
    assert session.title == "Capital of France?"
    user_msg, answer = session.messages.order_by("id")
    assert (user_msg.role, user_msg.content) == ("user", "Capital of France?")
    assert answer.status == "complete"
    assert answer.content == "Paris is the capital of France, famous for its museums."
    done = events[-1]
    assert done["message_id"] == answer.id and done["status"] == "complete"
    assert done["usage"]["prompt_tokens"] == answer.prompt_tokens > 0
    assert session.api_call_count == 1
    assert session.input_tokens == answer.prompt_tokens
    assert session.system_prompt is not None


def test_tool_calls_run_as_the_owner_and_are_shown_and_saved(owner, outsider, scripted, sockets):
    scripted.enqueue(
        tool_calls=[
            {
                "name": "memory",
                "arguments": {
                    "action": "add",
                    "target": "user",
                    "content": "Olivia deploys with Ansible",
                    "user_id": outsider.pk,
                },
            }
        ]
    )
    scripted.enqueue(reply="Noted — I'll remember that.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to(
            {"type": "chat.send", "session": None, "text": "I deploy with Ansible."}
        )
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = run(scenario())
    call = next(e for e in events if e["type"] == "tool.call")
    result = next(e for e in events if e["type"] == "tool.result")
    assert call["name"] == "memory" and "Ansible" in call["arguments"]
    session = Session.objects.get(pk=events[0]["session"])
    # The chip's answer: the assistant message that asked for the call.
    assert session.messages.get(pk=call["message_id"]).tool_calls[0]["id"] == call["call_id"]
    assert result["ok"] is True
    assert any(e["type"] == "notice" and e["kind"] == "memory_saved" for e in events)

    from memory.models import MemoryEntry

    assert MemoryEntry.objects.filter(owner=owner, content="Olivia deploys with Ansible").exists()
    assert not MemoryEntry.objects.filter(owner=outsider).exists()
    session = Session.objects.get(pk=events[0]["session"])
    roles = list(session.messages.order_by("id").values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool_msg = session.messages.get(role="tool")
    assert tool_msg.tool_name == "memory" and tool_msg.tool_call_id
    assert json.loads(tool_msg.content)["success"] is True
    # The second request carried the tool result back to the model.
    second = scripted.requests[1]["messages"]
    assert second[-1]["role"] == "tool" and second[-2]["tool_calls"]


def test_another_users_session_id_is_refused_and_reveals_nothing(
    owner, outsider, scripted, sockets
):
    theirs = Session.objects.create(owner=outsider, title="Oscar's secret plans")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        replies = []
        for kind in ("chat.send", "chat.subscribe", "chat.stop", "chat.regenerate"):
            await ws.send_json_to({"type": kind, "session": theirs.pk, "text": "hi"})
            replies.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return replies

    for reply in run(scenario()):
        assert reply["type"] == "error" and reply["code"] == "not_found"
        assert "secret" not in json.dumps(reply)
    assert not theirs.messages.exists()
    assert scripted.requests == []


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", "empty_message"),
        ("   \n ", "empty_message"),
        ("x" * 40000, "message_too_long"),
        (12, "bad_request"),
    ],
)
def test_bad_messages_get_a_clear_error_and_nothing_is_stored(owner, scripted, sockets, text, code):
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": text})
        reply = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return reply

    reply = run(scenario())
    assert reply["type"] == "error" and reply["code"] == code
    assert not Message.objects.exists()


def test_malformed_frames_get_errors_not_disconnects(owner, sockets):
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_to(text_data="not json")
        first = await ws.receive_json_from(timeout=5)
        await ws.send_json_to(["a", "list"])
        second = await ws.receive_json_from(timeout=5)
        await ws.send_json_to({"type": "chat.dance"})
        third = await ws.receive_json_from(timeout=5)
        await ws.send_to(text_data="x" * 300_000)
        fourth = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return first, second, third, fourth

    replies = run(scenario())
    assert [r["code"] for r in replies] == [
        "bad_request",
        "bad_request",
        "bad_request",
        "message_too_large",
    ]


def test_sending_while_a_turn_runs_is_refused_not_interleaved(owner, scripted, sockets):
    scripted.chunk_delay = 0.05
    scripted.enqueue(reply="one two three four five six seven eight nine ten eleven twelve")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "first"})
        started = await ws.receive_json_from(timeout=5)
        await ws.send_json_to(
            {"type": "chat.send", "session": started["session"], "text": "second"}
        )
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return started, events

    started, events = run(scenario())
    refusal = next(e for e in events if e["type"] == "error")
    assert refusal["code"] == "turn_in_progress"
    contents = list(
        Message.objects.filter(session_id=started["session"], role="user").values_list(
            "content", flat=True
        )
    )
    assert contents == ["first"]
    assert len(scripted.requests) == 1


def test_tool_loop_stops_after_the_configured_number_of_rounds(owner, scripted, sockets, settings):
    settings.HERMES_MAX_TOOL_ITERATIONS = 3
    for _ in range(5):
        scripted.enqueue(tool_calls=[{"name": "session_search", "arguments": {}}])
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Loop forever"})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = run(scenario())
    assert sum(e["type"] == "tool.call" for e in events) == 3
    assert len(scripted.requests) == 3
    final = Message.objects.filter(session_id=events[0]["session"], role="assistant").last()
    assert "stopped after 3 rounds of tool calls" in final.content
    assert final.status == "complete"


def test_unknown_tools_are_refused_to_the_model_not_run(owner, scripted, sockets):
    scripted.enqueue(tool_calls=[{"name": "shell_exec", "arguments": {"cmd": "rm -rf /"}}])
    scripted.enqueue(reply="I can't do that here.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Run a command"})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = run(scenario())
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["ok"] is False and "not available" in result["summary"]
    assert "tool_not_available" in scripted.requests[1]["messages"][-1]["content"]
