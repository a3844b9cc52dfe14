"""The scripted server speaks the OpenAI wire format well enough for the real SDK.

Driven with the official ``openai`` client (sync) and raw ``httpx`` over real HTTP.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from devtools.scripted_llm import (
    Fault,
    ScriptedLLM,
    count_prompt_tokens,
    tokenize,
)

USER = [{"role": "user", "content": "Hello there, how are you?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


@pytest.fixture
def llm(server: ScriptedLLM) -> ScriptedLLM:
    server.reset()
    server.chunk_delay = 0.0
    return server


@pytest.fixture
def client(llm: ScriptedLLM) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=llm.base_url, api_key="test", max_retries=0, timeout=5) as c:
        yield c


def raw_stream(llm: ScriptedLLM, body: dict) -> list[dict]:
    """Every SSE payload (decoded JSON, or the string "[DONE]") of a streamed request."""
    events: list[dict] = []
    with httpx.stream("POST", f"{llm.base_url}/chat/completions", json=body, timeout=5) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_models_endpoint(client: openai.OpenAI) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids == ["scripted", "scripted-small"]


def test_base_url_and_context_manager() -> None:
    with ScriptedLLM() as llm:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", llm.base_url)
        assert httpx.get(f"{llm.base_url}/models", timeout=5).status_code == 200
        url = llm.base_url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", timeout=1)


def test_non_streaming_default_echo_with_usage(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    result = client.chat.completions.create(model="scripted", messages=USER)
    assert result.object == "chat.completion"
    assert result.model == "scripted"
    assert result.choices[0].message.content == "Echo: Hello there, how are you?"
    assert result.choices[0].finish_reason == "stop"
    usage = result.usage
    assert usage is not None
    assert usage.prompt_tokens == count_prompt_tokens({"messages": USER}) == 8
    assert usage.completion_tokens == len(tokenize("Echo: Hello there, how are you?"))
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert usage.completion_tokens_details.reasoning_tokens == 0
    assert llm.requests == [{"model": "scripted", "messages": USER}]


def test_streaming_text_in_many_chunks_with_usage(llm: ScriptedLLM) -> None:
    reply = "The quick brown fox jumps over the lazy dog."
    llm.add_rule("fox", reply=reply)
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "tell me about the fox"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = raw_stream(llm, body)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == reply
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) >= 9
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == "stop" and set(finish[:-1]) == {None}
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == len(tokenize(reply))
    assert all(c["usage"] is None for c in chunks[:-1])


def test_streaming_without_include_usage_has_no_usage_chunk(llm: ScriptedLLM) -> None:
    events = raw_stream(llm, {"model": "scripted", "messages": USER, "stream": True})
    assert events[-1] == "[DONE]"
    assert all(e["choices"] and "usage" not in e for e in events[:-1])


def test_streamed_tool_call_arguments_are_split(llm: ScriptedLLM) -> None:
    arguments = {"action": "add", "target": "user", "content": "likes green tea"}
    llm.add_rule("tea", tool_calls=[{"name": "memory", "arguments": arguments}])
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "I like tea"}],
        "stream": True,
    }
    chunks = [e for e in raw_stream(llm, body) if e != "[DONE]"]
    deltas = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    head, rest = deltas[0], deltas[1:]
    assert re.fullmatch(r"call_[0-9a-f]+", head["id"])
    assert head["type"] == "function" and head["function"]["name"] == "memory"
    assert len(rest) >= 3 and all(d["index"] == 0 and "id" not in d for d in rest)
    joined = head["function"]["arguments"] + "".join(d["function"]["arguments"] for d in rest)
    assert json.loads(joined) == arguments
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_non_streaming_tool_calls(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.add_rule(
        "weather",
        tool_calls=[
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
            {"name": "get_time", "arguments": '{"tz": "CET"}', "id": "call_fixed"},
        ],
    )
    result = client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "weather?"}]
    )
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"]
    assert json.loads(calls[0].function.arguments) == {"city": "Oslo"}
    assert calls[1].id == "call_fixed" and calls[1].function.arguments == '{"tz": "CET"}'
    assert choice.message.content is None


def test_rules_match_in_order_with_times(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.add_rule("apple", reply="first", times=1)
    llm.add_rule(re.compile(r"app\w+"), reply="second")
    llm.add_rule(lambda body: body.get("model") == "scripted-small", reply="small model")

    def ask(text: str, model: str = "scripted") -> str | None:
        messages = [{"role": "user", "content": text}]
        result = client.chat.completions.create(model=model, messages=messages)
        return result.choices[0].message.content

    assert ask("an apple") == "first"
    assert ask("an apple") == "second"  # rule 1 used up its single answer
    assert ask("applause") == "second"
    assert ask("pear", model="scripted-small") == "small model"
    assert ask("pear") == "Echo: pear"


def test_rule_matches_last_message_only(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.add_rule("secret", reply="matched")
    messages = [
        {"role": "user", "content": "secret"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "something else"},
    ]
    result = client.chat.completions.create(model="scripted", messages=messages)
    assert result.choices[0].message.content == "Echo: something else"


def test_queue_wins_over_rules_for_a_multi_step_loop(
    client: openai.OpenAI, llm: ScriptedLLM
) -> None:
    llm.add_rule("go", reply="rule reply")
    llm.enqueue(tool_calls=[{"name": "search", "arguments": {"q": "x"}}])
    llm.enqueue(reply=lambda body: f"saw {len(body['messages'])} messages", count=2)

    messages: list = [{"role": "user", "content": "go"}]
    first = client.chat.completions.create(model="scripted", messages=messages)
    call = first.choices[0].message.tool_calls[0]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "found it"},
    ]
    second = client.chat.completions.create(model="scripted", messages=messages)
    third = client.chat.completions.create(model="scripted", messages=messages)
    fourth = client.chat.completions.create(model="scripted", messages=messages[:1])
    assert second.choices[0].message.content == "saw 3 messages"
    assert third.choices[0].message.content == "saw 3 messages"
    assert fourth.choices[0].message.content == "rule reply"


def test_cached_tokens_track_the_longest_shared_prefix(client: openai.OpenAI) -> None:
    system = {"role": "system", "content": "You are Hermes, a careful and friendly assistant."}
    first = [system, {"role": "user", "content": "What is the capital of France?"}]
    r1 = client.chat.completions.create(model="scripted", messages=first)
    extended = [
        *first,
        {"role": "assistant", "content": r1.choices[0].message.content},
        {"role": "user", "content": "And of Spain?"},
    ]
    r2 = client.chat.completions.create(model="scripted", messages=extended)
    assert r2.usage.prompt_tokens_details.cached_tokens == r1.usage.prompt_tokens
    assert r2.usage.prompt_tokens > r1.usage.prompt_tokens

    rebuilt = [{"role": "system", "content": "Now: 12:01. You are Hermes."}, *extended[1:]]
    r3 = client.chat.completions.create(model="scripted", messages=rebuilt)
    assert r3.usage.prompt_tokens_details.cached_tokens <= 1  # only the "system" role word

    r4 = client.chat.completions.create(model="scripted", messages=extended)
    assert r4.usage.prompt_tokens_details.cached_tokens == r2.usage.prompt_tokens


def test_tools_are_part_of_the_prompt(client: openai.OpenAI) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "memory", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    plain = client.chat.completions.create(model="scripted", messages=USER)
    with_tools = client.chat.completions.create(model="scripted", messages=USER, tools=tools)
    assert with_tools.usage.prompt_tokens > plain.usage.prompt_tokens


def test_max_tokens_truncates_with_length_finish(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.add_rule("long", reply="one two three four five six")
    messages = [{"role": "user", "content": "long please"}]
    result = client.chat.completions.create(model="scripted", messages=messages, max_tokens=3)
    assert result.choices[0].message.content == "one two three"
    assert result.choices[0].finish_reason == "length"


def test_reasoning_is_streamed_as_reasoning_content(llm: ScriptedLLM) -> None:
    llm.enqueue(reply="42", reasoning="Let me think it through.")
    body = {"model": "scripted", "messages": USER, "stream": True}
    chunks = [e for e in raw_stream(llm, body) if e != "[DONE]"]
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
    assert reasoning == "Let me think it through."


def test_rate_limit_fault_with_retry_after_then_success(llm: ScriptedLLM) -> None:
    llm.set_fault(Fault.rate_limited(retry_after=0.05, times=2))
    first = httpx.post(f"{llm.base_url}/chat/completions", json={"messages": USER}, timeout=5)
    assert first.status_code == 429
    assert first.headers["retry-after"] == "0.05"
    error = first.json()["error"]
    assert error["type"] == "requests" and error["code"] == "rate_limit_exceeded"

    with openai.OpenAI(base_url=llm.base_url, api_key="k", max_retries=2, timeout=5) as client:
        started = time.monotonic()
        result = client.chat.completions.create(model="scripted", messages=USER)
    assert result.choices[0].message.content.startswith("Echo:")
    assert time.monotonic() - started < 2
    assert len(llm.requests) == 3  # one raw 429, one SDK attempt hit the second 429, one success


def test_rule_fault_does_not_use_up_the_answer(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.add_rule("hi", reply="finally", times=1, fault=Fault.server_error(503, times=2))
    messages = [{"role": "user", "content": "hi"}]
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="scripted", messages=messages)
    result = client.chat.completions.create(model="scripted", messages=messages)
    assert result.choices[0].message.content == "finally"


@pytest.mark.parametrize(
    ("fault", "error_type", "code"),
    [
        (Fault(status=401), openai.AuthenticationError, "invalid_api_key"),
        (Fault(status=500), openai.InternalServerError, None),
        (Fault.context_length_exceeded(), openai.BadRequestError, "context_length_exceeded"),
        (Fault(status=404), openai.NotFoundError, "model_not_found"),
    ],
)
def test_status_faults_use_openai_error_bodies(
    client: openai.OpenAI, llm: ScriptedLLM, fault: Fault, error_type: type, code: str | None
) -> None:
    llm.set_fault(fault)
    with pytest.raises(error_type) as caught:
        client.chat.completions.create(model="scripted", messages=USER)
    assert caught.value.code == code
    assert isinstance(caught.value.body, dict) and caught.value.body["message"]


def test_required_api_key(llm: ScriptedLLM) -> None:
    llm.require_api_key = "sk-right-key-000"
    try:
        with openai.OpenAI(base_url=llm.base_url, api_key="sk-wrong-key-123", max_retries=0) as c:
            with pytest.raises(openai.AuthenticationError) as caught:
                c.chat.completions.create(model="scripted", messages=USER)
            assert "sk-wrong***-123" in caught.value.message
        with openai.OpenAI(base_url=llm.base_url, api_key="sk-right-key-000", max_retries=0) as c:
            assert c.chat.completions.create(model="scripted", messages=USER).choices
    finally:
        llm.require_api_key = None


def test_models_listing_checks_the_key_and_chat_requests_record_their_bearer(
    llm: ScriptedLLM,
) -> None:
    llm.require_api_key = "sk-right-key-000"
    try:
        with openai.OpenAI(base_url=llm.base_url, api_key="sk-wrong-key-123", max_retries=0) as c:
            with pytest.raises(openai.AuthenticationError):
                c.models.list()
        with openai.OpenAI(base_url=llm.base_url, api_key="sk-right-key-000", max_retries=0) as c:
            assert "scripted" in [m.id for m in c.models.list()]
            c.chat.completions.create(model="scripted", messages=USER)
        assert llm.bearer_tokens[-1] == "sk-right-key-000"
        assert len(llm.bearer_tokens) == len(llm.requests)
    finally:
        llm.require_api_key = None


def test_cut_stream_raises_remote_protocol_error(llm: ScriptedLLM) -> None:
    llm.set_fault(cut_after=3, times=1)
    body = {"model": "scripted", "messages": USER, "stream": True}
    seen: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        with httpx.stream("POST", f"{llm.base_url}/chat/completions", json=body) as resp:
            for line in resp.iter_lines():
                seen.append(line)
    assert sum(1 for line in seen if line.startswith("data: ")) == 3
    # The fault was single-use: the next stream is complete.
    assert raw_stream(llm, body)[-1] == "[DONE]"


def test_cut_non_streaming_response(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.set_fault(cut_after=0, times=1)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="scripted", messages=USER)


def test_stall_is_a_read_timeout_and_stop_does_not_hang() -> None:
    llm = ScriptedLLM().start()
    try:
        llm.set_fault(stall_after=2)  # default stall is an hour
        body = {"model": "scripted", "messages": USER, "stream": True}
        timeout = httpx.Timeout(0.3, connect=2)
        with pytest.raises(httpx.ReadTimeout):
            with httpx.stream(
                "POST", f"{llm.base_url}/chat/completions", json=body, timeout=timeout
            ) as r:
                for _ in r.iter_lines():
                    pass

        # A client that is still waiting when the server stops gets a prompt error.
        outcome: list[BaseException] = []

        def wait_forever() -> None:
            try:
                with httpx.stream(
                    "POST", f"{llm.base_url}/chat/completions", json=body, timeout=60
                ) as r:
                    for _ in r.iter_lines():
                        pass
            except httpx.HTTPError as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=wait_forever)
        waiter.start()
        time.sleep(0.3)
    finally:
        started = time.monotonic()
        llm.stop()
    assert time.monotonic() - started < 2
    waiter.join(5)
    assert outcome and isinstance(outcome[0], httpx.RemoteProtocolError)


def test_latency_delays_the_first_byte(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.set_fault(latency=0.3, times=1)
    started = time.monotonic()
    client.chat.completions.create(model="scripted", messages=USER)
    assert time.monotonic() - started >= 0.3


def test_chunk_delay_spreads_the_stream(llm: ScriptedLLM) -> None:
    llm.chunk_delay = 0.02
    llm.enqueue(reply="a b c d e")
    started = time.monotonic()
    raw_stream(llm, {"model": "scripted", "messages": USER, "stream": True})
    assert time.monotonic() - started >= 0.02 * 6


def test_in_stream_error_event(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    llm.set_fault(stream_error_after=2, error_message="overloaded", times=1)
    stream = client.chat.completions.create(model="scripted", messages=USER, stream=True)
    with pytest.raises(openai.APIError, match="overloaded"):
        for _ in stream:
            pass


def test_requests_are_recorded_and_reset(client: openai.OpenAI, llm: ScriptedLLM) -> None:
    client.chat.completions.create(model="scripted", messages=USER, temperature=0.2)
    assert llm.requests[0]["temperature"] == 0.2
    assert len(llm.usages) == 1
    llm.reset()
    assert llm.requests == [] and llm.usages == []


def test_concurrent_requests(llm: ScriptedLLM) -> None:
    llm.chunk_delay = 0.01
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            body = {
                "model": "scripted",
                "messages": [{"role": "user", "content": f"n{i}"}],
                "stream": True,
            }
            events = raw_stream(llm, body)
            text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])
            assert text == f"Echo: n{i}"
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors
    assert len(llm.requests) == 8


def test_record_to_keeps_the_last_chat_request_for_a_replay(tmp_path) -> None:
    recorded = tmp_path / "request.json"
    with ScriptedLLM(record_to=recorded) as llm:
        with openai.OpenAI(base_url=llm.base_url, api_key="test", max_retries=0) as c:
            c.chat.completions.create(model="scripted", messages=USER)
            c.chat.completions.create(
                model="scripted", messages=[*USER, {"role": "user", "content": "Again"}]
            )
            body = json.loads(recorded.read_text())
            assert body["messages"][-1] == {"role": "user", "content": "Again"}
            # The body as it stands replays to the same answer.
            replayed = c.post("/chat/completions", body=body, cast_to=httpx.Response)
            assert replayed.json()["choices"][0]["message"]["content"] == (
                c.chat.completions.create(**body).choices[0].message.content
            )
    assert [p.name for p in tmp_path.iterdir()] == ["request.json"]
