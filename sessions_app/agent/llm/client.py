"""The calls: :func:`stream_chat` for chat turns, :func:`complete` for everything else, and
:func:`build_client`, the one place an openai client is built (timeouts, retries, key).

A call without its own ``client=`` uses the running event loop's client for its endpoint and
key (:func:`loop_client`): the ASGI server's one loop keeps its connections to the model open
from turn to turn (no new client, TCP connection and TLS handshake per call: about 10 ms of a
turn's time to first token against a local server, more against a remote one). A client is
bound to the loop it first ran on, so each loop has its own, closed when the loop closes
(``asyncio.run`` and ``async_to_sync`` in workers and tests make a loop per call).

The entry (endpoint, key, model id) comes from the caller (see :mod:`.config`). Settings
read: ``HERMES_LLM_CONNECT_TIMEOUT``, ``HERMES_LLM_READ_TIMEOUT``, ``HERMES_LLM_MAX_RETRIES``.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final

import openai
from django.conf import settings
from django.utils.translation import gettext_lazy
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion

from .assembly import ToolCallAccumulator, fallback_call_id, reasoning_of, usage_from
from .config import ModelChoice, call_entry
from .errors import CALL_ERRORS, ErrorCode, LLMError, map_error, not_configured
from .types import (
    Completed,
    Message,
    ModelKind,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    Usage,
)

# Local servers accept any key, but the SDK insists on one being present.
_PLACEHOLDER_KEY: Final = "not-needed"


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle takes ~50 ms of CPU; doing it for every call (each call builds
    # its own client) stalled the event loop under concurrent chats. One context is shared.
    return ssl.create_default_context()


def build_client(entry: ModelChoice | None = None) -> AsyncOpenAI:
    """A new AsyncOpenAI client for ``entry`` (default: the environment's); the caller owns it
    (``async with`` or close())."""
    entry = call_entry(entry, "chat")
    connect = float(settings.HERMES_LLM_CONNECT_TIMEOUT)
    read = float(settings.HERMES_LLM_READ_TIMEOUT)
    # openai.Timeout is the SDK's own transport type (httpx2 in openai>=3), so nothing is converted.
    # "read" bounds the gap between bytes, i.e. a silent model, not the length of a whole answer.
    timeout = openai.Timeout(read, connect=connect, write=read, pool=connect)
    return AsyncOpenAI(
        base_url=entry.base_url or None,
        api_key=entry.api_key or _PLACEHOLDER_KEY,
        timeout=timeout,
        http_client=openai.DefaultAsyncHttpxClient(verify=_tls_context(), timeout=timeout),
        # The SDK retries 408/409/429/5xx and connection errors itself, honouring Retry-After.
        max_retries=int(settings.HERMES_LLM_MAX_RETRIES),
    )


#: The clients of each running event loop, by what build_client makes them from.
_LOOP_CLIENTS: dict[asyncio.AbstractEventLoop, dict[tuple[Any, ...], AsyncOpenAI]] = {}


def loop_client(entry: ModelChoice) -> AsyncOpenAI:
    """The running loop's client for ``entry``'s endpoint and key (built on first use, closed
    with the loop); not for the caller to close."""
    loop = asyncio.get_running_loop()
    key = (
        entry.base_url,
        entry.api_key,
        settings.HERMES_LLM_CONNECT_TIMEOUT,
        settings.HERMES_LLM_READ_TIMEOUT,
        settings.HERMES_LLM_MAX_RETRIES,
    )
    clients = _LOOP_CLIENTS.get(loop)
    if clients is None:
        clients = _LOOP_CLIENTS[loop] = {}
        _close_with(loop)
    client = clients.get(key)
    if client is None or client.is_closed():
        client = clients[key] = build_client(entry)
    return client


def _close_with(loop: asyncio.AbstractEventLoop) -> None:
    """Close `loop`'s clients when the loop is closed, on the loop itself (as a client's
    connections need): ``loop.close`` is wrapped for that one call."""
    close = loop.close

    def closing() -> None:
        clients = _LOOP_CLIENTS.pop(loop, {})
        del loop.close  # the class's own method again
        if clients and not loop.is_running():
            loop.run_until_complete(_close_all(list(clients.values())))
        close()

    loop.close = closing  # type: ignore[method-assign]


async def _close_all(clients: list[AsyncOpenAI]) -> None:
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


def _request_kwargs(
    *,
    entry: ModelChoice,
    model: str | None,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None,
    temperature: float | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    """The request for `model` (default: the entry's model id); raises when no model or
    endpoint is configured, or the entry's stored key cannot be decrypted."""
    if entry.key_error:
        raise LLMError(ErrorCode.AUTH_FAILED, f"{entry.name}: {entry.key_error}")
    resolved = (model or "").strip() or entry.model_id
    if not resolved or not entry.configured:
        raise not_configured()
    kwargs: dict[str, Any] = {"model": resolved, "messages": [dict(m) for m in messages]}
    if tools:
        kwargs["tools"] = [dict(t) for t in tools]
    if temperature is not None:
        kwargs["temperature"] = temperature
    if max_tokens is not None:
        # api.openai.com rejects max_tokens for reasoning models; many local servers only know
        # max_tokens. No base URL means OpenAI itself, so use its current name there.
        name = "max_tokens" if entry.base_url else "max_completion_tokens"
        kwargs[name] = max_tokens
    return kwargs


async def _chat_completion(api: AsyncOpenAI, body: dict[str, Any], *, stream: bool) -> Any:
    """POST /chat/completions with ``body`` as it is, through the client's generic ``post``:
    the body is plain JSON already (see _request_kwargs), so the SDK's parameter transform
    is skipped. That transform walks every message of the prompt on the event loop (~0.15 ms
    a message here: 9 ms of a 60-message conversation's time to first token). Retries,
    errors and the response type are the SDK's own; a stream's chunks come as the JSON
    objects the server sent (`object`): building an SDK model of each took a sixth of a busy
    process's event loop, for the three fields stream_chat reads."""
    if stream:
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    return await api.post(
        "/chat/completions",
        body=body,
        cast_to=ChatCompletion,
        stream=stream,
        stream_cls=AsyncStream[object],
    )


async def stream_chat(
    *,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    client: AsyncOpenAI | None = None,
    entry: ModelChoice | None = None,
) -> AsyncIterator[StreamEvent]:
    """Stream a chat completion: Text/Reasoning deltas, then exactly one :class:`Completed`.

    Raises :class:`LLMError` (with ``partial_text`` when text had already arrived). To stop
    early, ``await stream.aclose()`` (or use ``contextlib.aclosing``): that releases the
    connection at once instead of whenever the generator is garbage-collected.
    """
    entry = call_entry(entry, "chat")
    kwargs = _request_kwargs(
        entry=entry,
        model=model,
        messages=messages,
        tools=tools,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    api = client if client is not None else loop_client(entry)
    text_parts: list[str] = []
    reasoning_parts: list[str] = []
    calls = ToolCallAccumulator()
    usage = Usage()
    finish_reason: str | None = None
    response_model = kwargs["model"]
    stream: Any = None
    try:
        try:
            stream = await _chat_completion(api, kwargs, stream=True)
        except CALL_ERRORS as exc:
            raise map_error(exc, api=api) from exc

        # Anything failing from here on happened mid-stream: the SDK does not retry it, and a
        # dropped connection may surface as a raw transport error rather than an APIError.
        try:
            async for chunk in stream:
                if not isinstance(chunk, dict):
                    continue  # not a chunk of this API (a keep-alive, a stray value)
                if chunk.get("usage"):
                    usage = usage_from(chunk["usage"])
                if chunk.get("model"):
                    response_model = chunk["model"]
                for choice in chunk.get("choices") or ():
                    if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                        continue
                    if choice.get("finish_reason"):
                        finish_reason = choice["finish_reason"]
                    delta = choice.get("delta")
                    if not isinstance(delta, dict):
                        continue
                    reasoning = reasoning_of(delta)
                    if reasoning:
                        reasoning_parts.append(reasoning)
                        yield ReasoningDelta(reasoning)
                    content = delta.get("content")
                    if isinstance(content, str) and content:
                        text_parts.append(content)
                        yield TextDelta(content)
                    for call_delta in delta.get("tool_calls") or ():
                        calls.add(call_delta)
        except CALL_ERRORS as exc:
            raise map_error(
                exc, api=api, mid_stream=True, partial_text="".join(text_parts)
            ) from exc

        yield Completed(
            text="".join(text_parts),
            tool_calls=calls.result(),
            finish_reason=finish_reason,
            usage=usage,
            model=response_model,
            reasoning="".join(reasoning_parts),
        )
    finally:
        if stream is not None:
            await stream.close()


async def complete(
    *,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    client: AsyncOpenAI | None = None,
    kind: ModelKind = "summary",
    entry: ModelChoice | None = None,
) -> Completed:
    """A non-streaming completion (summaries, memory flush, extraction) with ``entry``
    (callers pass ``config.model_for("summary")``); without one, the environment's model of
    ``kind``. ``model`` overrides the entry's model id.
    """
    entry = call_entry(entry, kind)
    kwargs = _request_kwargs(
        entry=entry,
        model=model,
        messages=messages,
        tools=tools,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    api = client if client is not None else loop_client(entry)
    try:
        response = await _chat_completion(api, kwargs, stream=False)
    except CALL_ERRORS as exc:
        raise map_error(exc, api=api) from exc

    if not response.choices:
        raise LLMError(
            ErrorCode.LLM_UNAVAILABLE, gettext_lazy("The model returned an empty response.")
        )
    choice = response.choices[0]
    message = choice.message
    tool_calls = tuple(
        ToolCall(
            id=call.id or fallback_call_id(),
            name=call.function.name or "",
            arguments=call.function.arguments or "",
        )
        for call in (message.tool_calls or ())
        if getattr(call, "function", None) is not None  # skip non-function ("custom") tools
    )
    return Completed(
        text=message.content or "",
        tool_calls=tool_calls,
        finish_reason=choice.finish_reason,
        usage=usage_from(response.usage) if response.usage is not None else Usage(),
        model=response.model or kwargs["model"],
        reasoning=reasoning_of(message),
    )
