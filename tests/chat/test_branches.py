"""Edit and branch over the real websocket consumer against the scripted model: what the
model receives is the selected path only, and every tab of the conversation follows."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.test import Client

from sessions_app import turn_claim
from sessions_app.compression import session_compress
from sessions_app.models import Message, Session
from tests.chat.conftest import events_until, settle
from tests.factories import conversation_with

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro):
    return asyncio.run(coro)


def sent_texts(body: dict) -> list[tuple[str, str]]:
    """(role, content) of what the scripted server received, system prompt left out."""
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


def path_of(session_id: str) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(session_id=session_id, active=True)
        .order_by("id")
        .values_list("role", "content")
    )


async def turn(ws, message: dict) -> list[dict]:
    await ws.send_json_to(message)
    return await events_until(ws, "assistant.done")


def test_regenerate_keeps_the_earlier_answer_as_an_alternative(owner, scripted, sockets):
    scripted.enqueue(reply="First try.")
    scripted.enqueue(reply="Second try.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        first = await turn(ws, {"type": "chat.send", "session": None, "text": "Say something"})
        second = await turn(ws, {"type": "chat.regenerate", "session": first[0]["session"]})
        await ws.disconnect()
        await settle()
        return first[0]["session"], second

    session_id, second = run(scenario())
    user, old, new = Message.objects.filter(session_id=session_id).order_by("id")
    assert (old.content, old.active, old.parent_id) == ("First try.", False, user.pk)
    assert (new.content, new.active, new.parent_id) == ("Second try.", True, user.pk)
    changed = next(e for e in second if e["type"] == "branch.changed")
    assert changed == {
        "type": "branch.changed",
        "session": session_id,
        "after": user.pk,
        "message_id": new.pk,
    }
    # The regenerated request is the same conversation without the old answer.
    assert scripted.requests[1]["messages"] == scripted.requests[0]["messages"]
    # Counters count every stored message, on every branch.
    assert Session.objects.get(pk=session_id).message_count == 3


def test_edit_resends_and_the_model_sees_only_the_selected_path(owner, scripted, sockets):
    for reply in ("Answer one.", "Answer two.", "Answer uno.", "Answer three."):
        scripted.enqueue(reply=reply)
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        events = await turn(ws, {"type": "chat.send", "session": None, "text": "one"})
        sid = events[0]["session"]
        await turn(ws, {"type": "chat.send", "session": sid, "text": "two"})
        first = await Message.objects.filter(session_id=sid, content="one").afirst()
        edited = await turn(
            ws, {"type": "chat.edit", "session": sid, "message_id": first.pk, "text": "uno"}
        )
        # Back to the original message: its whole continuation comes back.
        await ws.send_json_to({"type": "chat.branch", "session": sid, "message_id": first.pk})
        switched = await ws.receive_json_from(timeout=10)
        await turn(ws, {"type": "chat.send", "session": sid, "text": "three"})
        await ws.disconnect()
        await settle()
        return sid, first.pk, edited, switched

    sid, first_id, edited, switched = run(scenario())
    # The edit's request: the edited message alone, nothing of the path it replaced.
    assert sent_texts(scripted.requests[2]) == [("user", "uno")]
    uno = Message.objects.get(session_id=sid, content="uno")
    assert uno.parent_id is None and uno.active is False
    assert next(e for e in edited if e["type"] == "branch.changed")["message_id"] == uno.pk
    assert switched == {
        "type": "branch.changed",
        "session": sid,
        "after": 0,
        "message_id": first_id,
    }
    # The next message continued from the selected (original) path.
    assert sent_texts(scripted.requests[3]) == [
        ("user", "one"),
        ("assistant", "Answer one."),
        ("user", "two"),
        ("assistant", "Answer two."),
        ("user", "three"),
    ]
    assert path_of(sid) == [
        ("user", "one"),
        ("assistant", "Answer one."),
        ("user", "two"),
        ("assistant", "Answer two."),
        ("user", "three"),
        ("assistant", "Answer three."),
    ]
    assert not Message.objects.filter(session_id=sid, content="Answer uno.", active=True).exists()


def test_switching_is_heard_by_every_tab_of_the_conversation(owner, scripted, sockets):
    scripted.enqueue(reply="A.")
    scripted.enqueue(reply="B.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        events = await turn(ws, {"type": "chat.send", "session": None, "text": "hi"})
        sid = events[0]["session"]
        await turn(ws, {"type": "chat.regenerate", "session": sid})
        other = await sockets.open(owner)
        await other.send_json_to({"type": "chat.subscribe", "session": sid})
        # Following an idle conversation is answered with session.idle; then the switch.
        assert (await other.receive_json_from(timeout=5))["type"] == "session.idle"
        old = await Message.objects.filter(session_id=sid, content="A.").afirst()
        await ws.send_json_to({"type": "chat.branch", "session": sid, "message_id": old.pk})
        seen = [await t.receive_json_from(timeout=10) for t in (ws, other)]
        await ws.disconnect()
        await other.disconnect()
        return sid, old.pk, seen

    sid, old_id, seen = run(scenario())
    for event in seen:
        assert event["type"] == "branch.changed" and event["message_id"] == old_id
    assert path_of(sid) == [("user", "hi"), ("assistant", "A.")]


def test_no_edit_or_switch_while_a_turn_runs(owner, scripted, sockets):
    session = conversation_with(owner, "hello")
    user_message = session.messages.get(role="user")
    lease = turn_claim.acquire_for_turn(session_id=session.pk)
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        replies = []
        for message in (
            {"type": "chat.edit", "message_id": user_message.pk, "text": "changed"},
            {"type": "chat.regenerate"},
            {"type": "chat.branch", "message_id": user_message.pk},
        ):
            await ws.send_json_to({**message, "session": session.pk})
            replies.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return replies

    for reply in run(scenario()):
        assert reply["type"] == "error" and reply["code"] == "turn_in_progress"
        assert "still answering" in reply["message"]
    lease.release()
    assert session.messages.count() == 2 and not session.messages.filter(active=False).exists()
    assert scripted.requests == []


def test_another_persons_message_id_is_an_error_never_data(owner, outsider, scripted, sockets):
    mine = conversation_with(owner, "mine")
    theirs = conversation_with(outsider, "secret plans")
    their_message = theirs.messages.get(role="user")
    their_answer = theirs.messages.get(role="assistant")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        replies = []
        for session_id in (mine.pk, theirs.pk):
            for message in (
                {"type": "chat.edit", "message_id": their_message.pk, "text": "x"},
                {"type": "chat.regenerate", "message_id": their_answer.pk},
                {"type": "chat.branch", "message_id": their_message.pk},
            ):
                await ws.send_json_to({**message, "session": session_id})
                replies.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return replies

    replies = run(scenario())
    assert len(replies) == 6
    for reply in replies:
        assert reply["type"] == "error" and reply["code"] == "not_found"
        assert "secret" not in json.dumps(reply)
    assert theirs.messages.count() == 2 and mine.messages.count() == 2
    assert not Message.objects.filter(active=False).exists()
    assert scripted.requests == []

    client = Client()
    client.force_login(owner)
    for session_id in (mine.pk, theirs.pk):
        url = f"/api/sessions/{session_id}/messages/{their_message.pk}/select/"
        response = client.post(url)
        assert response.status_code == 404 and b"secret" not in response.content
        listing = client.get(f"/api/sessions/{session_id}/messages/?branches=all")
        assert b"secret" not in listing.content


def test_edit_refuses_answers_and_bad_ids_with_clear_errors(owner, scripted, sockets):
    session = conversation_with(owner, "hello")
    answer = session.messages.get(role="assistant")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        replies = []
        for message_id, text in ((answer.pk, "x"), ("12", "x"), (None, "x"), (answer.pk, "")):
            await ws.send_json_to(
                {"type": "chat.edit", "session": session.pk, "message_id": message_id, "text": text}
            )
            replies.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return [r["code"] for r in replies]

    assert run(scenario()) == ["not_editable", "bad_request", "bad_request", "empty_message"]
    assert session.messages.count() == 2


def test_a_temporary_chat_can_be_edited_too(owner, scripted, sockets):
    scripted.enqueue(reply="Temp one.")
    scripted.enqueue(reply="Temp two.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        events = await turn(
            ws, {"type": "chat.send", "session": None, "text": "draft", "temporary": True}
        )
        sid = events[0]["session"]
        first = await Message.objects.filter(session_id=sid, role="user").afirst()
        await turn(
            ws, {"type": "chat.edit", "session": sid, "message_id": first.pk, "text": "final"}
        )
        await ws.disconnect()
        await settle()
        return sid

    sid = run(scenario())
    assert Session.objects.get(pk=sid).temporary is True
    assert path_of(sid) == [("user", "final"), ("assistant", "Temp two.")]
    assert sent_texts(scripted.requests[1]) == [("user", "final")]


def test_messages_api_gives_the_path_by_default_and_every_branch_on_request(owner, scripted):
    session = conversation_with(owner, "hello")
    user = session.messages.get(role="user")
    old = session.messages.get(role="assistant")
    Message.objects.filter(pk=old.pk).update(active=False)
    new = Message.objects.create(
        session=session, role="assistant", status="complete", content="New.", parent=user
    )
    client = Client()
    client.force_login(owner)
    base = f"/api/sessions/{session.pk}/messages/"

    def ids(response):
        data = response.json()
        return [m["id"] for m in data.get("results", data)]

    assert ids(client.get(base)) == [user.pk, new.pk]
    every = client.get(base + "?branches=all").json()
    rows = {m["id"]: m for m in every.get("results", every)}
    assert rows[old.pk]["active"] is False and rows[old.pk]["parent"] == user.pk
    assert client.post(f"{base}{old.pk}/select/").json() == {"path": [old.pk]}
    assert ids(client.get(base)) == [user.pk, old.pk]


def test_compression_summarises_and_carries_only_the_selected_path(owner, scripted, settings):
    settings.HERMES_CONTEXT_LENGTH = 2400
    settings.HERMES_REPLY_MAX_TOKENS = 200
    long = " ".join(["the deploy script copies artifacts to staging"] * 12)
    scripted.add_rule(lambda b: b["messages"][-1]["role"] == "tool", reply="Saved.")
    scripted.add_rule("[Memory flush before compaction]", reply="Nothing to save.")
    scripted.add_rule("You are a summarisation agent", reply="## Goal\nShip it.")
    session = conversation_with(owner, *[f"Turn {i} {long}" for i in range(8)])
    # Abandoned branches early on: an edit of the third message and an earlier answer.
    third = session.messages.get(content__startswith="Turn 2 ")
    edited = Message.objects.create(
        session=session,
        role="user",
        content=f"Turn 2 EDITED {long}",
        parent_id=third.parent_id,
        active=False,
    )
    Message.objects.create(
        session=session,
        role="assistant",
        status="complete",
        content="ABANDONED answer",
        parent=third,
        active=False,
    )
    assert edited.pk and "EDITED" not in json.dumps(path_of(session.pk))

    child = session_compress(session_id=session.pk)
    assert child is not None
    sent = json.dumps([r["messages"] for r in scripted.requests])
    assert "EDITED" not in sent and "ABANDONED" not in sent
    carried = list(Message.objects.filter(session_id=child).order_by("id"))
    assert not any("EDITED" in m.content for m in carried)
    # The continuation is one path: each message follows the one before it.
    assert [m.parent_id for m in carried] == [None, *[m.pk for m in carried[:-1]]]
    assert all(m.active for m in carried)
