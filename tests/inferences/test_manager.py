"""The memory manager over real chat turns: lifecycle order, the single-external rule,
protected tool names, discovery, and isolation of providers that raise or hang."""

from __future__ import annotations

import asyncio
import json
import logging
import textwrap

import pytest

from memory.providers import MemoryManager
from memory.providers.local import LocalProvider
from memory.providers.manager import drain_background, is_trivial, provider_classes
from sessions_app.agent.fence import OPEN_TAG
from sessions_app.models import Message
from tests.chat.conftest import events_until, settle

from . import providers
from .providers import PROVIDERS, RecordingProvider, SecondProvider

pytestmark = pytest.mark.django_db(transaction=True)


async def _chat(sockets, user, texts, session_id=None):
    """Send `texts` one turn at a time; after each turn wait for its background hooks."""
    ws = await sockets.open(user)
    all_events = []
    for text in texts:
        await ws.send_json_to({"type": "chat.send", "session": session_id, "text": text})
        events = await events_until(ws, "assistant.done")
        session_id = events[0]["session"]
        all_events.append(events)
        await settle()
        assert await asyncio.to_thread(drain_background, 10)
    await ws.disconnect()
    return session_id, all_events


def chat(sockets, user, texts, session_id=None):
    sockets.login(user)
    return asyncio.run(_chat(sockets, user, texts, session_id))


@pytest.fixture
def recording(settings):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    settings.HERMES_MEMORY_PROVIDER = "recording"
    providers.CALLS.clear()
    return providers.CALLS


def test_lifecycle_hooks_run_in_order_over_a_scripted_chat(owner, scripted, sockets, recording):
    scripted.enqueue(tool_calls=[{"name": "recording_lookup", "arguments": {"q": "life"}}])
    scripted.enqueue(reply="It is 42.")
    scripted.enqueue(reply="Nobody knows.")
    session_id, _ = chat(sockets, owner, ["What is the answer to life?"])
    chat(sockets, owner, ["And what was the question?"], session_id)

    calls = [(name, arg) for name, arg in recording if name != "is_available"]
    first, second = Message.objects.filter(session_id=session_id, role="user").order_by("id")
    assert calls == [
        ("initialize", (owner.pk, "primary")),
        ("system_prompt_block", None),
        ("on_turn_start", (1, "What is the answer to life?", first.pk)),
        ("prefetch", "What is the answer to life?"),
        ("handle_tool_call", ("recording_lookup", {"q": "life"})),
        ("sync_turn", ("What is the answer to life?", "It is 42.")),
        ("queue_prefetch", "What is the answer to life?"),
        # The prompt is frozen: the provider block is not asked for again.
        ("initialize", (owner.pk, "primary")),
        ("on_turn_start", (2, "And what was the question?", second.pk)),
        ("prefetch", "And what was the question?"),
        ("sync_turn", ("And what was the question?", "Nobody knows.")),
        ("queue_prefetch", "And what was the question?"),
    ]
    request = scripted.requests[0]
    assert "This block comes from the recording provider." in request["messages"][0]["content"]
    assert request["messages"][-1]["content"].startswith(
        "What is the answer to life?\n\n" + OPEN_TAG
    )
    offered = {t["function"]["name"]: t["function"] for t in request["tools"]}
    assert "recording_lookup" in offered
    # The provider's schema named `memory` did not replace the core tool.
    assert offered["memory"]["description"] != "hijack"
    tool = Message.objects.get(session_id=session_id, role="tool")
    assert json.loads(tool.content) == {"result": '{"success": true, "found": "42"}'}


def test_only_one_external_provider_is_accepted(caplog):
    manager = MemoryManager()
    assert manager.add_provider(RecordingProvider())
    with caplog.at_level(logging.WARNING, logger="memory.providers.manager"):
        assert not manager.add_provider(SecondProvider())
    assert [p.name for p in manager.providers] == ["builtin", "recording"]
    assert "'second' refused: 'recording' is already active" in caplog.text


def test_builtin_is_first_and_its_name_cannot_be_taken(caplog):
    class Impostor(RecordingProvider):
        name = "builtin"

    manager = MemoryManager()
    with caplog.at_level(logging.WARNING):
        assert not manager.add_provider(Impostor())
    assert len(manager.providers) == 1 and manager.providers[0].name == "builtin"
    assert manager.external is None


def test_core_tool_names_are_protected_and_nameless_schemas_dropped():
    manager = MemoryManager()
    manager.add_provider(RecordingProvider())
    names = [s["function"]["name"] for s in manager.tool_schemas()]
    assert names == ["recording_lookup"]
    assert not manager.handles_tool("memory")


def test_an_unavailable_provider_is_not_added(caplog):
    manager = MemoryManager()
    with caplog.at_level(logging.WARNING):
        assert not manager.add_provider(providers.UnavailableProvider())
    assert "needs an API key" in caplog.text


@pytest.mark.parametrize(
    "text", ["", "  ", "/skill foo", "ok", "OK!", "thanks", "Thank you.", "lgtm", "k", "go ahead"]
)
def test_trivial_inputs_skip_recall(text):
    assert is_trivial(text)


@pytest.mark.parametrize(
    "text", ["k8s", "note", "ok so what about ledger?", "thanks for the fix, now"]
)
def test_real_questions_are_not_trivial(text):
    assert not is_trivial(text)


def test_local_provider_is_built_in(owner, settings):
    settings.HERMES_MEMORY_PROVIDERS = {}
    settings.HERMES_MEMORY_PROVIDER = "local"
    manager = MemoryManager.for_user(owner)
    assert isinstance(manager.external, LocalProvider)
    assert {s["function"]["name"] for s in manager.tool_schemas()} == {
        "user_profile_search",
        "user_profile_feedback",
    }


def test_providers_install_through_the_entry_point_group(owner, settings, tmp_path, monkeypatch):
    dist = tmp_path / "hermes_fake_provider-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hermes-fake-provider\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [hermes_web.memory_providers]
            packaged = tests.inferences.providers:RecordingProvider
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings.HERMES_MEMORY_PROVIDERS = {}
    assert provider_classes()["packaged"] is RecordingProvider
    settings.HERMES_MEMORY_PROVIDER = "packaged"
    assert isinstance(MemoryManager.for_user(owner).external, RecordingProvider)


def test_a_misconfigured_provider_leaves_the_builtin_memory_working(owner, settings, caplog):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    for name in ("broken", "not-installed"):
        settings.HERMES_MEMORY_PROVIDER = name
        with caplog.at_level(logging.WARNING):
            manager = MemoryManager.for_user(owner)
        assert [p.name for p in manager.providers] == ["builtin"]
    assert "not installed" in caplog.text


def test_a_provider_that_raises_everywhere_never_breaks_the_turn(
    owner, scripted, sockets, settings
):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    settings.HERMES_MEMORY_PROVIDER = "exploding"
    scripted.enqueue(tool_calls=[{"name": "recording_lookup", "arguments": {"q": "x"}}])
    scripted.enqueue(reply="Still answering.")
    session_id, events = chat(sockets, owner, ["Look something up for me"])

    assert events[0][-1]["status"] == "complete"
    assert Message.objects.get(session_id=session_id, role="assistant", content="Still answering.")
    tool = Message.objects.get(session_id=session_id, role="tool")
    assert "RuntimeError in recording_lookup" in tool.content
    user = Message.objects.get(session_id=session_id, role="user")
    assert user.context_block == ""


def test_a_provider_hanging_at_turn_start_is_time_boxed_and_then_skipped(
    owner, scripted, sockets, settings
):
    settings.HERMES_MEMORY_PROVIDERS = PROVIDERS
    settings.HERMES_MEMORY_PROVIDER = "stalling"
    settings.HERMES_PROVIDER_PREFETCH_TIMEOUT = 0.3
    providers.CALLS.clear()
    providers.RELEASE.clear()
    providers.STARTED.clear()
    scripted.enqueue(reply="Answered without waiting.")
    scripted.enqueue(reply="Still not waiting.")
    try:
        sockets.login(owner)

        async def scenario():
            ws = await sockets.open(owner)
            await ws.send_json_to({"type": "chat.send", "session": None, "text": "First question"})
            first = await events_until(ws, "assistant.done")
            await settle()  # the first turn releases the conversation after its last event
            await ws.send_json_to(
                {"type": "chat.send", "session": first[0]["session"], "text": "Second question"}
            )
            second = await events_until(ws, "assistant.done")
            await ws.disconnect()
            await settle()
            return first, second

        first, second = asyncio.run(scenario())
        assert providers.STARTED.is_set()
    finally:
        providers.RELEASE.set()
    assert first[-1]["status"] == "complete" and second[-1]["status"] == "complete"
    # While its turn_start call was stuck, the provider was skipped: no recall asked for.
    assert not [c for c in providers.CALLS if c[0] == "prefetch"]
    assert all(OPEN_TAG not in r["messages"][-1]["content"] for r in scripted.requests)
