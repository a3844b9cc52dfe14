"""sessions_app.agent.llm against the scripted server: real openai client, real HTTP, no mocks."""

from __future__ import annotations

import asyncio
import json
import pickle
import time
from decimal import Decimal
from typing import Any

import pytest
from django.utils import translation
from django.utils.translation import gettext_lazy

from core.exceptions import lazy_format
from devtools.scripted_llm import Fault, ScriptedLLM, count_prompt_tokens
from model_catalog.selectors import env_choice
from sessions_app.agent import llm
from sessions_app.agent.llm import (
    Completed,
    LLMError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)
from sessions_app.agent.llm import client as llm_client
from sessions_app.agent.llm.cost import estimate_cost
from tests.conftest import wait_for

API_KEY = "sk-test-very-secret-key-0123456789"
SYSTEM = {"role": "system", "content": "You are Hermes, a helpful assistant. Be concise."}
USER = {"role": "user", "content": "What is the capital of France?"}
FAST_RETRY = 0.05  # Retry-After seconds; keeps SDK retries out of the test's runtime


@pytest.fixture
def scripted_settings() -> dict[str, Any]:
    # A key worth leaking (the tests check it never is); the SDK's retries are under test.
    return {"OPENAI_API_KEY": API_KEY, "HERMES_LLM_MAX_RETRIES": 2, "HERMES_MODEL_PRICES": {}}


async def _collect(**kwargs: Any) -> tuple[list[StreamEvent], LLMError | None]:
    events: list[StreamEvent] = []
    try:
        async for event in llm.stream_chat(**kwargs):
            events.append(event)
    except LLMError as exc:
        return events, exc
    return events, None


def collect(**kwargs: Any) -> tuple[list[StreamEvent], LLMError | None]:
    return asyncio.run(_collect(**kwargs))


def stream_ok(**kwargs: Any) -> tuple[list[StreamEvent], Completed]:
    events, error = collect(**kwargs)
    assert error is None, error
    final = events[-1]
    assert isinstance(final, Completed)
    assert not any(isinstance(e, Completed) for e in events[:-1])
    return events, final


def stream_error(**kwargs: Any) -> LLMError:
    _, error = collect(**kwargs)
    assert error is not None
    return error


def complete(**kwargs: Any) -> Completed:
    return asyncio.run(llm.complete(**kwargs))


# -- configuration ---------------------------------------------------------------------------


def test_configuration_helpers(scripted: ScriptedLLM, settings: Any, db: None) -> None:
    assert llm.is_configured()
    assert llm.model_name() == "scripted"
    assert llm.model_name("summary") == "scripted"
    settings.HERMES_SUMMARY_MODEL = "scripted-small"
    assert llm.model_name("summary") == "scripted-small"
    with pytest.raises(ValueError):
        llm.model_name("other")

    settings.HERMES_MODEL = ""
    assert not llm.is_configured()
    settings.HERMES_MODEL = "scripted"
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    assert not llm.is_configured()


def test_build_client_reads_settings(scripted: ScriptedLLM, settings: Any) -> None:
    settings.HERMES_LLM_CONNECT_TIMEOUT = 1.5
    settings.HERMES_LLM_READ_TIMEOUT = 12.0
    settings.HERMES_LLM_MAX_RETRIES = 4
    settings.OPENAI_API_KEY = ""

    async def inspect() -> None:
        async with llm.build_client() as client:
            assert str(client.base_url).rstrip("/") == scripted.base_url
            assert client.api_key == "not-needed"
            assert client.max_retries == 4
            assert client.timeout.connect == 1.5
            assert client.timeout.read == 12.0

    asyncio.run(inspect())


def test_not_configured_is_unavailable_without_any_request(
    scripted: ScriptedLLM, settings: Any
) -> None:
    settings.HERMES_MODEL = ""
    error = stream_error(messages=[USER])
    assert error.code == "llm_unavailable"
    assert "HERMES_MODEL" in error.message
    with pytest.raises(LLMError) as caught:
        complete(messages=[USER])
    assert caught.value.code == "llm_unavailable"
    assert scripted.requests == []


# -- streaming -------------------------------------------------------------------------------


def test_stream_text_deltas_concatenate_to_the_reply(scripted: ScriptedLLM) -> None:
    reply = "Paris is the capital of France. It sits on the Seine, famous for its bridges."
    scripted.add_rule("capital", reply=reply)
    events, final = stream_ok(messages=[SYSTEM, USER], temperature=0.3, max_tokens=200)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 5
    assert "".join(deltas) == reply == final.text
    assert final.finish_reason == "stop"
    assert final.tool_calls == ()
    assert final.model == "scripted"
    request = scripted.requests[-1]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["temperature"] == 0.3
    assert request["max_tokens"] == 200


def test_calls_on_one_event_loop_share_a_connection_closed_with_the_loop(
    scripted: ScriptedLLM,
) -> None:
    async def three_calls() -> list[str]:
        answers = [(await llm.complete(messages=[USER], kind="chat")).text]
        for _ in range(2):
            async for event in llm.stream_chat(messages=[SYSTEM, USER]):
                if isinstance(event, Completed):
                    answers.append(event.text)
        return answers

    scripted.add_rule("capital", reply="Paris.")
    accepted_before, open_before = scripted.connections  # the server is shared by tests
    assert asyncio.run(three_calls()) == ["Paris."] * 3
    # The server's one loop keeps its connection to the model from call to call...
    assert scripted.connections[0] == accepted_before + 1
    # ...and closes it with the loop.
    wait_for(
        lambda: scripted.connections[1] <= open_before, timeout=10, what="the connection closed"
    )
    asyncio.run(three_calls())
    assert scripted.connections[0] == accepted_before + 2  # a new loop, a new connection


def test_stream_usage(scripted: ScriptedLLM) -> None:
    _, final = stream_ok(messages=[SYSTEM, USER])
    assert final.usage.prompt_tokens == count_prompt_tokens({"messages": [SYSTEM, USER]})
    assert final.usage.completion_tokens > 0
    assert final.usage.cached_tokens == 0
    assert final.usage.reasoning_tokens == 0


def test_stream_tool_calls_are_reassembled(scripted: ScriptedLLM) -> None:
    memory_args = {"action": "add", "target": "user", "content": "Prefers metric units and tea"}
    scripted.add_rule(
        "remember",
        reply="Saving that.",
        tool_calls=[
            {"name": "memory", "arguments": memory_args},
            {"name": "search_sessions", "arguments": {"query": "units", "limit": 5}},
        ],
    )
    tools = [
        {"type": "function", "function": {"name": "memory", "parameters": {"type": "object"}}},
        {
            "type": "function",
            "function": {"name": "search_sessions", "parameters": {"type": "object"}},
        },
    ]
    message = {"role": "user", "content": "remember I like metric units"}
    _, final = stream_ok(messages=[SYSTEM, message], tools=tools)
    assert final.finish_reason == "tool_calls"
    assert final.text == "Saving that."
    assert [c.name for c in final.tool_calls] == ["memory", "search_sessions"]
    assert json.loads(final.tool_calls[0].arguments) == memory_args
    assert json.loads(final.tool_calls[1].arguments) == {"query": "units", "limit": 5}
    assert all(c.id.startswith("call_") for c in final.tool_calls)
    assert scripted.requests[-1]["tools"] == tools

    # The assembled calls round-trip into the next request of a tool loop.
    assistant = final.assistant_message()
    assert assistant["tool_calls"][0]["function"]["arguments"] == final.tool_calls[0].arguments
    follow_up = [
        SYSTEM,
        message,
        assistant,
        {"role": "tool", "tool_call_id": final.tool_calls[0].id, "content": "saved"},
        {"role": "tool", "tool_call_id": final.tool_calls[1].id, "content": "[]"},
    ]
    scripted.enqueue(reply="Done.")
    _, after = stream_ok(messages=follow_up, tools=tools)
    assert after.text == "Done."
    assert after.usage.cached_tokens == final.usage.prompt_tokens


def test_stream_reasoning_deltas(scripted: ScriptedLLM) -> None:
    scripted.enqueue(reply="42.", reasoning="Six times seven is forty-two.")
    events, final = stream_ok(messages=[USER])
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == final.reasoning == "Six times seven is forty-two."
    assert final.text == "42."
    assert final.usage.reasoning_tokens > 0


def test_cached_tokens_reward_a_stable_prefix(scripted: ScriptedLLM) -> None:
    _, first = stream_ok(messages=[SYSTEM, USER])
    extended = [
        SYSTEM,
        USER,
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "And Spain?"},
    ]
    _, second = stream_ok(messages=extended)
    assert second.usage.cached_tokens == first.usage.prompt_tokens

    rebuilt_system = {"role": "system", "content": "Time is 10:42. You are Hermes."}
    _, third = stream_ok(messages=[rebuilt_system, *extended[1:]])
    assert third.usage.cached_tokens <= 1
    assert third.usage.prompt_tokens > 10


def test_early_close_releases_the_stream(scripted: ScriptedLLM) -> None:
    scripted.chunk_delay = 0.01
    scripted.enqueue(reply="word " * 200)

    async def first_two() -> list[str]:
        texts: list[str] = []
        stream = llm.stream_chat(messages=[USER])
        async for event in stream:
            if isinstance(event, TextDelta):
                texts.append(event.text)
            if len(texts) == 2:
                break
        await stream.aclose()
        return texts

    try:
        started = time.monotonic()
        assert asyncio.run(first_two()) == ["word ", "word "]
        assert time.monotonic() - started < 1.5
    finally:
        scripted.chunk_delay = 0.0


# -- non-streaming ---------------------------------------------------------------------------


def test_complete_text_and_usage(scripted: ScriptedLLM, settings: Any) -> None:
    settings.HERMES_SUMMARY_MODEL = "scripted-small"
    scripted.add_rule("Summarize", reply="A short summary.")
    result = complete(messages=[SYSTEM, {"role": "user", "content": "Summarize this."}])
    assert result.text == "A short summary."
    assert result.finish_reason == "stop"
    assert result.model == "scripted-small"  # complete() defaults to the summary model
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens == 4
    assert "stream" not in scripted.requests[-1]


def test_complete_tool_calls(scripted: ScriptedLLM) -> None:
    scripted.enqueue(tool_calls=[{"name": "memory", "arguments": {"action": "add"}}])
    result = complete(messages=[USER], model="scripted", tools=[])
    assert result.finish_reason == "tool_calls"
    assert len(result.tool_calls) == 1
    call = result.tool_calls[0]
    assert isinstance(call, ToolCall) and call.name == "memory"
    assert json.loads(call.arguments) == {"action": "add"}


def test_shared_client_is_left_open(scripted: ScriptedLLM) -> None:
    async def two_calls() -> tuple[str, str]:
        async with llm.build_client() as client:
            first = await llm.complete(messages=[USER], client=client)
            events = [e async for e in llm.stream_chat(messages=[USER], client=client)]
            assert isinstance(events[-1], Completed)
            assert not client.is_closed()  # the caller owns it
            return first.text, events[-1].text

    assert asyncio.run(two_calls()) == (f"Echo: {USER['content']}",) * 2


# -- errors ----------------------------------------------------------------------------------


def test_rate_limited_twice_then_success(scripted: ScriptedLLM) -> None:
    scripted.set_fault(Fault.rate_limited(retry_after=FAST_RETRY, times=2))
    started = time.monotonic()
    _, final = stream_ok(messages=[USER])
    assert final.text == f"Echo: {USER['content']}"
    assert len(scripted.requests) == 3
    assert time.monotonic() - started < 2


def test_rate_limited_when_retries_run_out(scripted: ScriptedLLM, settings: Any) -> None:
    settings.HERMES_LLM_MAX_RETRIES = 1
    scripted.set_fault(Fault.rate_limited(retry_after=FAST_RETRY, times=5))
    error = stream_error(messages=[USER])
    assert error.code == "rate_limited"
    assert error.status == 429
    assert error.retry_after == pytest.approx(FAST_RETRY)
    assert len(scripted.requests) == 2
    with pytest.raises(LLMError) as caught:
        complete(messages=[USER])
    assert caught.value.code == "rate_limited"


def test_server_errors_end_as_server_error_quickly(scripted: ScriptedLLM) -> None:
    scripted.set_fault(Fault.server_error(500, retry_after=FAST_RETRY, times=3))
    started = time.monotonic()
    error = stream_error(messages=[USER])
    assert error.code == "llm_server_error"
    assert error.status == 500
    assert len(scripted.requests) == 3  # first try + HERMES_LLM_MAX_RETRIES
    assert time.monotonic() - started < 2


def test_auth_failure_never_leaks_the_key(scripted: ScriptedLLM) -> None:
    scripted.set_fault(Fault.auth_failed())
    error = stream_error(messages=[USER])
    assert error.code == "auth_failed"
    assert error.status == 401
    assert len(scripted.requests) == 1  # 401 is not retried
    for leak in (API_KEY, API_KEY[:8], API_KEY[-4:]):
        assert leak not in error.message
        assert leak not in str(error) and leak not in repr(error)


def test_context_length_exceeded(scripted: ScriptedLLM) -> None:
    scripted.set_fault(Fault.context_length_exceeded())
    error = stream_error(messages=[USER])
    assert error.code == "context_too_long"
    assert error.status == 400
    with pytest.raises(LLMError) as caught:
        complete(messages=[USER])
    assert caught.value.code == "context_too_long"


def test_context_length_detected_from_message_only(scripted: ScriptedLLM) -> None:
    # e.g. llama.cpp/vLLM wording without OpenAI's error code
    message = "the request exceeds the available context size, try increasing it"
    scripted.set_fault(Fault(status=400, error_message=message, error_type="invalid_request"))
    assert stream_error(messages=[USER]).code == "context_too_long"


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_client_errors_are_bad_requests(scripted: ScriptedLLM, status: int) -> None:
    scripted.set_fault(Fault(status=status))
    error = stream_error(messages=[USER])
    assert error.code == "bad_request"
    assert error.status == status


def test_forbidden_is_auth_failed(scripted: ScriptedLLM) -> None:
    scripted.set_fault(Fault(status=403))
    assert stream_error(messages=[USER]).code == "auth_failed"


def test_cut_stream_is_interrupted_with_partial_text(scripted: ScriptedLLM) -> None:
    reply = "One two three four five six seven eight nine ten."
    scripted.enqueue(reply=reply, fault=Fault(cut_after=5))
    events, error = collect(messages=[USER])
    assert error is not None
    assert error.code == "interrupted"
    received = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert received == "One two three four "  # role chunk + 4 text chunks
    assert error.partial_text == received
    assert len(scripted.requests) == 1  # a broken stream is not retried


def test_in_stream_error_event_is_interrupted(scripted: ScriptedLLM) -> None:
    scripted.enqueue(reply="alpha beta gamma", fault=Fault(stream_error_after=2))
    error = stream_error(messages=[USER])
    assert error.code == "interrupted"
    assert error.partial_text == "alpha "


def test_stalled_stream_times_out(scripted: ScriptedLLM, settings: Any) -> None:
    settings.HERMES_LLM_READ_TIMEOUT = 0.5
    scripted.enqueue(reply="slow and steady", fault=Fault(stall_after=2, stall_seconds=30))
    started = time.monotonic()
    error = stream_error(messages=[USER])
    elapsed = time.monotonic() - started
    assert error.code == "llm_timeout"
    assert "mid-answer within 0.5 s" in error.message
    assert error.partial_text == "slow "
    assert 0.4 < elapsed < 2.0


def test_llm_error_pickles() -> None:
    error = LLMError("interrupted", "dropped", retry_after=1.5, status=None, partial_text="Hel")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.message, copy.retry_after, copy.partial_text) == (
        "interrupted",
        "dropped",
        1.5,
        "Hel",
    )


def test_llm_error_pickles_still_marked_and_reads_english_for_logs() -> None:
    refused = gettext_lazy("The model server at %(server)s refused the connection: is it running?")
    error = LLMError("llm_refused", lazy_format(refused, server="127.0.0.1:9"), status=None)
    with translation.override("zh-hans"):
        copy = pickle.loads(pickle.dumps(error))
        # Pickled under another language, it is still English for logs and API clients...
        assert copy.message == str(copy) == error.message
        assert (
            copy.message == "The model server at 127.0.0.1:9 refused the connection: is it running?"
        )
        # ...and said to a person in theirs, wherever it is unpickled.
        assert copy.text == "位于 127.0.0.1:9 的模型服务器拒绝了连接：它在运行吗？"
    assert copy.text == copy.message


def test_max_tokens_parameter_name_for_openai_itself(scripted: ScriptedLLM, settings: Any) -> None:
    # No base URL means api.openai.com, which wants max_completion_tokens. Build the request
    # kwargs directly: nothing is sent to the real API.
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = "sk-test"
    kwargs = llm_client._request_kwargs(
        entry=env_choice("chat"),
        model="gpt-x",
        messages=[USER],
        tools=None,
        temperature=None,
        max_tokens=50,
    )
    assert kwargs["max_completion_tokens"] == 50 and "max_tokens" not in kwargs


# -- cost ------------------------------------------------------------------------------------


def test_estimate_cost(settings: Any) -> None:
    settings.HERMES_MODEL_PRICES = {
        "gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25},
        "local": {"input": "0.10", "output": "0.40"},
    }
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=100_000, cached_tokens=400_000)
    # 600k * 2.5 + 400k * 1.25 + 100k * 10, per million
    assert estimate_cost("gpt-4o", usage) == Decimal("3.0")
    assert estimate_cost("gpt-4o-2024-08-06", usage) == Decimal("3.0")
    assert estimate_cost("openai/gpt-4o", usage) == Decimal("3.0")
    # No cached price: cached tokens are billed as ordinary input.
    assert estimate_cost("local", usage) == Decimal("0.14")
    assert estimate_cost("unknown", usage) == 0
    assert estimate_cost("gpt-4o", Usage()) == 0


def test_stream_events_are_typed() -> None:
    completed = Completed(text="hi", tool_calls=(ToolCall("call_1", "memory", "{}"),))
    assert completed.assistant_message() == {
        "role": "assistant",
        "content": "hi",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "memory", "arguments": "{}"}}
        ],
    }
    assert Usage(3, 4).total_tokens == 7


def test_streamed_json_fragments_assemble_whatever_fields_a_server_leaves_out() -> None:
    from sessions_app.agent.llm.assembly import ToolCallAccumulator, reasoning_of, usage_from

    calls = ToolCallAccumulator()
    calls.add({"index": 0, "id": "call_a", "function": {"name": "memory", "arguments": None}})
    calls.add({"index": 0, "function": {"arguments": '{"q": '}})
    calls.add({"function": {"arguments": '"x"}'}})  # no index: it goes on the last call
    calls.add({"index": 1, "id": "call_b", "function": None})
    calls.add({"index": 1, "function": {"name": "search", "arguments": "{}"}})
    assert [(c.id, c.name, c.arguments) for c in calls.result()] == [
        ("call_a", "memory", '{"q": "x"}'),
        ("call_b", "search", "{}"),
    ]
    deepseek = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_cache_hit_tokens": 8}
    assert usage_from(deepseek) == Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=8)
    nulls = {
        "prompt_tokens": 10,
        "completion_tokens": None,
        "prompt_tokens_details": None,
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    assert usage_from(nulls) == Usage(prompt_tokens=10, reasoning_tokens=3)
    assert reasoning_of({"reasoning_content": "hm"}) == "hm"
    assert reasoning_of({"reasoning": None, "content": "x"}) == ""
