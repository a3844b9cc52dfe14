"""A chat's model: the turn goes to the chosen entry; a switch freezes a new prompt and
shows a marker; a disabled model falls back to the default; people see names only."""

from __future__ import annotations

import asyncio
import io
import zipfile

import pytest
from django.test import Client

from devtools.scripted_llm import ScriptedLLM
from model_catalog.models import ModelEntry
from model_catalog.services import model_entry_save
from privacy.export import build_export
from sessions_app.branches import alternatives_of
from sessions_app.models import Message, Session
from sessions_app.selectors import api_messages
from tests.chat.conftest import events_until, settle

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-second-endpoint-4242"


@pytest.fixture
def second():
    server = ScriptedLLM(require_api_key=KEY).start()
    yield server
    server.stop()


def add_entry(server: ScriptedLLM, **fields) -> ModelEntry:
    fields.setdefault("name", "Second model")
    row = ModelEntry(model_id="scripted", base_url=server.base_url, context_length=9000, **fields)
    return model_entry_save(entry=row, new_api_key=KEY)


def turn(sockets, user, **message) -> list[dict]:
    async def scenario():
        ws = await sockets.open(user)
        await ws.send_json_to({"type": "chat.send", "session": None, **message})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    return asyncio.run(scenario())


def test_a_new_chat_on_a_chosen_model_goes_to_its_endpoint_with_its_key(
    owner, scripted, second, sockets
):
    row = add_entry(second)
    second.enqueue(reply="From the second endpoint.")
    sockets.login(owner)
    events = turn(sockets, owner, text="Hello", model=str(row.pk))
    assert events[-1]["status"] == "complete"
    assert scripted.requests == []
    assert [r["model"] for r in second.requests] == ["scripted"]
    assert second.bearer_tokens == [KEY]
    session = Session.objects.get(pk=events[0]["session"])
    assert session.model_config == {"entry": str(row.pk), "entry_name": "Second model"}
    assert "context window: 9,000 tokens" in second.requests[0]["messages"][0]["content"]


def test_an_unknown_or_disabled_model_is_refused(owner, scripted, second, sockets):
    row = add_entry(second, enabled=False)
    sockets.login(owner)
    events = turn_error(sockets, owner, text="Hi", model=str(row.pk))
    assert events["code"] == "model_unavailable"
    assert Session.objects.count() == 0


def turn_error(sockets, user, **message) -> dict:
    async def scenario():
        ws = await sockets.open(user)
        await ws.send_json_to({"type": "chat.send", "session": None, **message})
        events = await events_until(ws, "error")
        await ws.disconnect()
        return events[-1]

    return asyncio.run(scenario())


def test_a_switch_freezes_a_new_prompt_and_shows_a_marker(owner, outsider, scripted, second):
    from tests.chat.conftest import Sockets

    sockets = Sockets()
    sockets.login(owner)
    row = add_entry(second)
    scripted.enqueue(reply="One.")
    scripted.enqueue(reply="Two.")
    first = turn(sockets, owner, text="First")
    session_id = first[0]["session"]

    async def more(text: str):
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": session_id, "text": text})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    asyncio.run(more("Second"))
    env_prompts = {r["messages"][0]["content"] for r in scripted.requests}
    assert len(env_prompts) == 1  # byte-identical within one model's stretch

    # Another person cannot switch it; the owner can, over the API.
    stranger = Client()
    stranger.force_login(outsider)
    url = f"/api/sessions/{session_id}/"
    assert stranger.patch(url, {"model": str(row.pk)}, "application/json").status_code == 404
    client = Client()
    client.force_login(owner)
    answer = client.patch(url, {"model": str(row.pk)}, "application/json")
    assert answer.status_code == 200
    assert answer.json()["model_choice"] == {"id": str(row.pk), "name": "Second model"}
    assert second.base_url not in answer.content.decode() and KEY not in answer.content.decode()

    marker = Message.objects.get(session_id=session_id, kind=Message.Kind.MODEL_SWITCH)
    assert (marker.role, marker.content) == ("system", "Switched to Second model")
    assert all(
        m["content"] != marker.content
        for m in api_messages(session_id=session_id, system_prompt="p")
    )
    second.enqueue(reply="Three.")
    asyncio.run(more("Third"))
    new_prompt = second.requests[0]["messages"][0]["content"]
    assert new_prompt not in env_prompts
    assert "context window: 9,000 tokens" in new_prompt
    assert second.bearer_tokens == [KEY]
    listed = client.get(f"/api/sessions/{session_id}/messages/").json()["results"]
    assert [m["content"] for m in listed if m["kind"] == "model_switch"] == [
        "Switched to Second model"
    ]
    # The marker sits on the conversation's path: the next message continues after it and
    # no message gains a ‹ 1/2 › of alternatives.
    assert [m["content"] for m in listed] == [
        "First",
        "One.",
        "Second",
        "Two.",
        "Switched to Second model",
        "Third",
        "Three.",
    ]
    assert alternatives_of([session_id]) == {}


def test_a_chat_whose_model_was_disabled_falls_back_to_the_default(
    owner, scripted, second, sockets
):
    row = add_entry(second)
    second.enqueue(reply="Before.")
    sockets.login(owner)
    session_id = turn(sockets, owner, text="Hi", model=str(row.pk))[0]["session"]
    row.enabled = False
    model_entry_save(entry=row)
    scripted.enqueue(reply="After, on the default.")

    async def again():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": session_id, "text": "Still there?"})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = asyncio.run(again())
    assert events[-1]["status"] == "complete"
    notices = [e for e in events if e["type"] == "notice" and e["kind"] == "model_switched"]
    assert notices and "Second model is no longer available" in notices[0]["text"]
    assert len(scripted.requests) == 1 and len(second.requests) == 1
    session = Session.objects.get(pk=session_id)
    assert session.model_config["entry"] == "env"


def test_people_see_enabled_names_only_and_exports_hold_no_key(
    owner, scripted, second, sockets, tmp_path
):
    row = add_entry(second)
    add_entry(second, name="Switched off", enabled=False)
    client = Client()
    client.force_login(owner)
    body = client.get("/api/models/")
    assert body.status_code == 200
    names = [m["name"] for m in body.json()["results"]]
    assert names == ["scripted", "Second model"]
    assert second.base_url not in body.content.decode() and KEY not in body.content.decode()
    assert Client().get("/api/models/").status_code in (401, 403)

    second.enqueue(reply="Exported.")
    sockets.login(owner)
    turn(sockets, owner, text="Export me", model=str(row.pk))
    target = tmp_path / "export.zip"
    build_export(user=owner, target=target)
    with zipfile.ZipFile(io.BytesIO(target.read_bytes())) as archive:
        blob = b"".join(archive.read(name) for name in archive.namelist())
    assert KEY.encode() not in blob and row.api_key_encrypted.encode() not in blob


def test_the_picker_shows_only_when_there_is_a_choice(owner, scripted, second):
    client = Client()
    client.force_login(owner)
    assert 'id="model-picker"' not in client.get("/chat/").content.decode()
    add_entry(second)
    page = client.get("/chat/").content.decode()
    assert 'id="model-picker"' in page and ">Second model</option>" in page
    assert KEY not in page and second.base_url not in page
