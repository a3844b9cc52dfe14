"""Hermes Web as a model: the official `openai` client over real HTTP against daphne (a
subprocess on the test database), which answers with the scripted model as its upstream."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from django.test import Client

from accounts.models import Membership
from accounts.services import api_token_create
from devtools.scripted_llm import Fault, ScriptedLLM
from memory.models import MemoryEntry
from model_catalog.models import ModelEntry
from sessions_app.lineage import conversation_tips
from sessions_app.models import API_SOURCE, Message, Session
from tests.conftest import free_port, start_daphne, stop_process, wait_for
from tests.factories import PASSWORD

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HEADER = "X-Hermes-Conversation"


@pytest.fixture(scope="module")
def live_server_url(
    django_db_setup, django_db_blocker, llm_server: ScriptedLLM, tmp_path_factory
) -> Iterator[str]:
    """One daphne for the module; each test's rows are committed, so it sees them."""
    env = {
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": "sk-test",
        "HERMES_MODEL": "scripted",
        "HERMES_REVIEW_ENABLED": "false",
        "HERMES_STREAM_SAVE_INTERVAL": "0.05",
        "HERMES_STREAM_COALESCE_MS": "0",
        "HERMES_MAX_MESSAGE_CHARS": "2000",
        "HERMES_LLM_MAX_RETRIES": "0",
    }
    port = free_port()
    # No broker: background work runs inline in the server, as under `runserver`.
    with pytest.MonkeyPatch.context() as patch, django_db_blocker.unblock():
        patch.delenv("REDIS_URL", raising=False)
        proc = start_daphne(port, tmp_path_factory.mktemp("daphne") / "daphne.log", env)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


@pytest.fixture
def llm(llm_server: ScriptedLLM) -> ScriptedLLM:
    llm_server.reset()
    llm_server.chunk_delay = 0.0
    return llm_server


def client_for(url: str, user: Any, name: str = "cli") -> openai.OpenAI:
    _token, key = api_token_create(user=user, name=name)
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=30)


@pytest.fixture
def olivia(live_server_url, owner) -> openai.OpenAI:
    return client_for(live_server_url, owner)


def ask(client: openai.OpenAI, messages: list[dict[str, str]], **kwargs: Any) -> Any:
    """A non-streaming completion with its raw response (for the conversation header)."""
    raw = client.chat.completions.with_raw_response.create(model="env", messages=messages, **kwargs)
    return raw.parse(), raw.headers[HEADER]


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_models_lists_the_catalog_and_refuses_bad_tokens(live_server_url, olivia, owner):
    ModelEntry.objects.create(name="Big model", model_id="big", base_url="http://127.0.0.1:9/v1")
    row = ModelEntry.objects.get(name="Big model")
    ModelEntry.objects.create(
        name="Old model", model_id="old", base_url="http://127.0.0.1:9/v1", enabled=False
    )
    models = {m.id: m for m in olivia.models.list().data}
    assert set(models) == {"env", str(row.pk)}
    assert models[str(row.pk)].model_extra["name"] == "Big model"
    assert olivia.models.retrieve("env").id == "env"

    stranger = openai.OpenAI(base_url=f"{live_server_url}/v1", api_key="hw_nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as exc:
        stranger.models.list()
    assert exc.value.status_code == 401 and exc.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        stranger.chat.completions.create(model="env", messages=[user("hi")])
    # A token made for MCP clients and the REST API only cannot chat through /v1/.
    _token, key = api_token_create(user=owner, name="no chat", scopes=["api", "memory:read"])
    scoped = openai.OpenAI(base_url=f"{live_server_url}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as denied:
        scoped.chat.completions.create(model="env", messages=[user("hi")])
    assert denied.value.status_code == 403 and denied.value.body["code"] == "insufficient_scope"
    assert "'chat' scope" in denied.value.body["message"]
    assert not Session.objects.filter(owner=owner).exists()
    owner.is_active = False
    owner.save()
    with pytest.raises(openai.AuthenticationError):
        olivia.models.list()


def test_a_completion_is_an_ordinary_conversation(live_server_url, olivia, owner, llm):
    llm.enqueue(reply="Tram 7 goes to the harbour.")
    completion, conversation = ask(olivia, [user("Which tram goes to the harbour?")])

    assert completion.choices[0].message.content == "Tram 7 goes to the harbour."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "env" and completion.model_extra["conversation_id"] == conversation
    session = Session.objects.get(pk=conversation)
    assert session.owner == owner and session.source == API_SOURCE
    answer = session.messages.get(role="assistant")
    assert answer.status == "complete" and answer.content == "Tram 7 goes to the harbour."
    assert completion.usage.prompt_tokens == answer.prompt_tokens > 0
    assert completion.usage.completion_tokens == answer.completion_tokens > 0
    # The agent's frozen prompt went to the model, saying where it is used.
    sent = llm.requests[-1]["messages"]
    assert sent[0]["role"] == "system" and "OpenAI-compatible API" in sent[0]["content"]
    assert session.system_prompt.prompt == sent[0]["content"]
    # The sidebar lists it and search finds it, like any chat.
    assert [s.pk for s in conversation_tips(owner=owner)] == [conversation]
    found = httpx.get(
        f"{live_server_url}/api/search/",
        params={"q": "harbour"},
        headers={"Authorization": f"Bearer {olivia.api_key}"},
    ).json()
    assert [r["session_id"] for r in found["results"]] == [conversation]
    page = Client()
    page.force_login(owner)
    assert "Held through the API" in page.get(f"/chat/{conversation}/").content.decode()


def test_api_conversations_are_exported_and_erased(live_server_url, olivia, owner, llm):
    llm.enqueue(reply="Noted.")
    _completion, conversation = ask(olivia, [user("Export me")])
    auth = {"Authorization": f"Bearer {olivia.api_key}"}
    archive = httpx.get(f"{live_server_url}/api/me/export/", headers=auth, timeout=30)
    assert archive.status_code == 200
    with zipfile.ZipFile(io.BytesIO(archive.content)) as zf:
        exported = json.loads(zf.read("export.json"))["conversations"]
    assert [(c["id"], c["source"]) for c in exported] == [(conversation, API_SOURCE)]
    assert [m["content"] for m in exported[0]["messages"]] == ["Export me", "Noted."]
    erased = httpx.request(
        "DELETE", f"{live_server_url}/api/me/", json={"password": PASSWORD}, headers=auth
    )
    assert erased.status_code in (200, 204)
    assert not Session.objects.filter(pk=conversation).exists()
    assert not Message.objects.filter(session_id=conversation).exists()


def test_streaming_sends_chunks_and_usage_last(olivia, llm):
    llm.enqueue(reply="One, two, three, four.")
    stream = olivia.chat.completions.create(
        model="env",
        messages=[user("Count to four")],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "One, two, three, four."
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert chunks[0].object == "chat.completion.chunk"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(c.usage is None for c in chunks[:-1])
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    answer = Message.objects.get(session_id=last.model_extra["conversation_id"], role="assistant")
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (
        answer.prompt_tokens,
        answer.completion_tokens,
    )


def test_the_memory_tool_runs_on_the_server(olivia, owner, llm):
    llm.enqueue(
        reply="Noting that.",
        tool_calls=[
            {
                "name": "memory",
                "arguments": {"action": "add", "target": "user", "content": "Drinks green tea"},
            }
        ],
    )
    llm.enqueue(reply="I will remember you drink green tea.")
    completion, conversation = ask(olivia, [user("Remember that I drink green tea")])

    assert completion.choices[0].message.content == (
        "Noting that.\n\nI will remember you drink green tea."
    )
    assert MemoryEntry.objects.filter(owner=owner, content="Drinks green tea").exists()
    roles = list(
        Message.objects.filter(session_id=conversation)
        .order_by("id")
        .values_list("role", flat=True)
    )
    assert roles == ["user", "assistant", "tool", "assistant"]
    # Usage covers both model calls of the turn.
    calls = llm.usages
    assert completion.usage.prompt_tokens == sum(u["prompt_tokens"] for u in calls[-2:])

    # The client resends the answer as it got it: the same conversation goes on.
    llm.enqueue(reply="Green tea, yes.")
    again, same = ask(
        olivia,
        [
            user("Remember that I drink green tea"),
            assistant(completion.choices[0].message.content),
            user("What do I drink?"),
        ],
    )
    assert same == conversation and again.choices[0].message.content == "Green tea, yes."


def test_a_stateless_client_resending_history_stays_in_one_conversation(olivia, owner, llm):
    llm.enqueue(reply="Hello Olivia.")
    first, conversation = ask(olivia, [user("Hi, I am Olivia")])
    history = [user("Hi, I am Olivia"), assistant(first.choices[0].message.content)]
    llm.enqueue(reply="You are Olivia.")
    second, same = ask(olivia, [*history, user("Who am I?")])
    assert same == conversation
    # The model saw the stored conversation, with its own frozen prompt first.
    sent = [(m["role"], m["content"]) for m in llm.requests[-1]["messages"][1:]]
    assert sent == [
        ("user", "Hi, I am Olivia"),
        ("assistant", "Hello Olivia."),
        ("user", "Who am I?"),
    ]
    # A regeneration on the client's side (the same last message again) is a new version.
    llm.enqueue(reply="Olivia, of course.")
    third, same = ask(olivia, [*history, user("Who am I?")])
    assert same == conversation and third.choices[0].message.content == "Olivia, of course."
    # An edit of the last message is a new version of it.
    llm.enqueue(reply="Tuesday.")
    _fourth, same = ask(olivia, [*history, user("What day is it?")])
    assert same == conversation
    assert Session.objects.filter(owner=owner).count() == 1
    path = Message.objects.filter(session_id=conversation, active=True).order_by("id")
    assert [m.content for m in path] == [
        "Hi, I am Olivia",
        "Hello Olivia.",
        "What day is it?",
        "Tuesday.",
    ]
    assert Message.objects.filter(session_id=conversation, content="Olivia, of course.").exists()


def test_the_conversation_id_continues_a_conversation(olivia, llm):
    llm.enqueue(reply="Noted: blue.")
    _first, conversation = ask(olivia, [user("My favourite colour is blue")])
    llm.enqueue(reply="Blue.")
    by_header = olivia.chat.completions.with_raw_response.create(
        model="env",
        messages=[user("What is my favourite colour?")],
        extra_headers={HEADER: conversation},
    )
    assert by_header.headers[HEADER] == conversation
    llm.enqueue(reply="Still blue.")
    by_metadata = olivia.chat.completions.create(
        model="env",
        messages=[user("And now?")],
        metadata={"conversation_id": conversation},
    )
    assert by_metadata.model_extra["conversation_id"] == conversation
    texts = list(
        Message.objects.filter(session_id=conversation, role="user").values_list(
            "content", flat=True
        )
    )
    assert texts == ["My favourite colour is blue", "What is my favourite colour?", "And now?"]
    assert llm.requests[-1]["messages"][-2]["content"] == "Blue."


def test_history_from_elsewhere_starts_a_conversation_holding_it(olivia, owner, llm):
    llm.enqueue(reply="You asked about Oslo.")
    messages = [
        user("Weather in Oslo?"),
        assistant("Cold (said another model)."),
        user("What did I ask?"),
    ]
    completion, conversation = ask(olivia, messages)
    assert completion.choices[0].message.content == "You asked about Oslo."
    sent = [(m["role"], m["content"]) for m in llm.requests[-1]["messages"][1:]]
    assert sent == [(m["role"], m["content"]) for m in messages]
    session = Session.objects.get(pk=conversation)
    assert session.title == "Weather in Oslo?" and session.source == API_SOURCE
    # Resent with the answer, it continues there.
    llm.enqueue(reply="Oslo, again.")
    _again, same = ask(olivia, [*messages, assistant("You asked about Oslo."), user("Again?")])
    assert same == conversation and Session.objects.filter(owner=owner).count() == 1


BAD_REQUESTS = [
    ({"model": "nope", "messages": [user("hi")]}, 404, "model_not_found", "model"),
    ({"model": "env", "messages": []}, 400, "empty_messages", "messages"),
    (
        {"model": "env", "messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]},
        400,
        "invalid_role",
        "messages[0].role",
    ),
    (
        {"model": "env", "messages": [{"role": "wizard", "content": "x"}]},
        400,
        "invalid_role",
        "messages[0].role",
    ),
    (
        {"model": "env", "messages": [user("x" * 2001)]},
        400,
        "message_too_long",
        "messages[0].content",
    ),
    (
        {"model": "env", "messages": [user("hi"), assistant("Hi!")]},
        400,
        "empty_message",
        "messages",
    ),
    ({"model": "env", "messages": [user("   ")]}, 400, "empty_message", "messages"),
    (
        {"model": "env", "messages": [user("hi")], "tools": [{"type": "function"}]},
        400,
        "unsupported_parameter",
        "tools",
    ),
    ({"model": "env", "messages": [user("hi")], "n": 2}, 400, "unsupported_parameter", "n"),
]


def test_bad_requests_get_openai_errors(live_server_url, olivia, owner, llm):
    for body, status, code, param in BAD_REQUESTS:
        response = httpx.post(
            f"{live_server_url}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {olivia.api_key}"},
        )
        assert response.status_code == status, body
        error = response.json()["error"]
        assert error["code"] == code and error["message"] and error["type"], body
        assert error["param"] == param, body
    too_big = httpx.post(
        f"{live_server_url}/v1/chat/completions",
        content=b'{"model": "env", "messages": [], "pad": "' + b"x" * 2_700_000 + b'"}',
        headers={"Authorization": f"Bearer {olivia.api_key}"},
    )
    assert too_big.status_code == 400
    assert too_big.json()["error"]["code"] == "request_too_large"
    not_json = httpx.post(
        f"{live_server_url}/v1/chat/completions",
        content=b"{",
        headers={"Authorization": f"Bearer {olivia.api_key}"},
    )
    assert not_json.status_code == 400 and not_json.json()["error"]["param"] == "body"
    # The official client raises its own exception types with the code.
    with pytest.raises(openai.NotFoundError) as missing:
        olivia.chat.completions.create(model="gpt-9", messages=[user("hi")])
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as empty:
        olivia.chat.completions.create(model="env", messages=[])
    assert empty.value.code == "empty_messages"
    # Nothing was stored and the model was never asked.
    assert not Session.objects.filter(owner=owner).exists() and llm.requests == []


def test_a_failing_model_is_an_error_and_the_message_stays(olivia, owner, llm):
    llm.set_fault(Fault.server_error(times=1))
    with pytest.raises(openai.InternalServerError) as exc:
        olivia.chat.completions.create(model="env", messages=[user("Are you there?")])
    assert exc.value.status_code == 502 and exc.value.code == "llm_server_error"
    saved = Message.objects.get(session__owner=owner, content="Are you there?")
    assert exc.value.response.headers[HEADER] == saved.session_id

    llm.enqueue(reply="one two three four five six seven", fault=Fault(stream_error_after=4))
    stream = olivia.chat.completions.create(
        model="env", messages=[user("Stream please")], stream=True
    )
    received = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    answer = Message.objects.get(session__owner=owner, role="assistant", status="interrupted")
    assert answer.content and answer.content == "".join(received)


def test_the_daily_quota_answers_429(olivia, owner, llm):
    Membership.objects.create(user=owner, daily_message_limit=1)
    llm.enqueue(reply="First and last.")
    ask(olivia, [user("One")])
    with pytest.raises(openai.RateLimitError) as exc:
        olivia.chat.completions.create(model="env", messages=[user("Two")], stream=True)
    assert exc.value.status_code == 429 and exc.value.code == "quota_exceeded"
    assert "daily limit is 1" in exc.value.message
    assert Session.objects.filter(owner=owner).count() == 1


def test_two_people_never_share_a_conversation(live_server_url, olivia, owner, outsider, llm):
    llm.enqueue(reply="Your secret is safe.")
    first, conversation = ask(olivia, [user("My secret is 4711")])
    oscar = client_for(live_server_url, outsider, "oscar's")
    with pytest.raises(openai.NotFoundError):
        oscar.chat.completions.create(
            model="env",
            messages=[user("What is the secret?")],
            extra_headers={HEADER: conversation},
        )
    # The same history from Oscar starts his own conversation, which holds only his copy.
    llm.enqueue(reply="I cannot know.")
    _reply, his = ask(
        oscar,
        [user("My secret is 4711"), assistant("Your secret is safe."), user("Tell me more")],
    )
    assert his != conversation and Session.objects.get(pk=his).owner == outsider
    assert Session.objects.get(pk=conversation).messages.count() == 2


def test_a_client_that_disconnects_mid_stream_loses_nothing(olivia, llm):
    llm.chunk_delay = 0.05
    words = " ".join(f"word{i}" for i in range(40))
    llm.enqueue(reply=words)
    raw = olivia.chat.completions.with_raw_response.create(
        model="env", messages=[user("Say forty words")], stream=True
    )
    conversation = raw.headers[HEADER]
    stream = raw.parse()
    chunks = iter(stream)
    next(chunks)
    assert next(chunks).choices[0].delta.content
    # Chunks arrive as the model writes (daphne does not hold the body back): the answer is
    # still being written when the client goes away.
    answer = Message.objects.get(session_id=conversation, role="assistant")
    assert answer.status == "streaming"
    # Meanwhile the conversation is busy: another message to it is a conflict.
    with pytest.raises(openai.ConflictError) as busy:
        olivia.chat.completions.create(
            model="env", messages=[user("Hurry up")], extra_headers={HEADER: conversation}
        )
    assert busy.value.code == "turn_in_progress"
    stream.close()

    def saved() -> bool:
        answer = Message.objects.filter(session_id=conversation, role="assistant").first()
        return answer is not None and answer.status == "complete"

    wait_for(saved, timeout=20, what="the answer to be finished and saved")
    assert Message.objects.get(session_id=conversation, role="assistant").content == words
