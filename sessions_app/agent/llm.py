"""The single place where Hermes talks to the language model.

Everything goes through the official ``openai`` SDK against an OpenAI-compatible Chat Completions
endpoint (OpenAI itself, or a local Ollama/vLLM/llama.cpp server via ``OPENAI_BASE_URL``). Callers
only ever see the small typed surface below: stream events, a :class:`Completed` result and a
single :class:`LLMError` whose ``code`` is one of :data:`ERROR_CODES`.

Settings read (``django.conf.settings``): ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``HERMES_MODEL``, ``HERMES_SUMMARY_MODEL``, ``HERMES_LLM_CONNECT_TIMEOUT``,
``HERMES_LLM_READ_TIMEOUT``, ``HERMES_LLM_MAX_RETRIES``, ``HERMES_MODEL_PRICES``.

Each call uses a fresh client that is closed afterwards, unless the caller passes its own
``client=`` (e.g. to reuse one connection across the steps of a tool loop). A process-wide cached
async client would be bound to whichever event loop first used it, which breaks under
``asyncio.run``/``async_to_sync`` (a new loop per call) as used by workers and tests.
"""

from __future__ import annotations

import email.utils
import functools
import logging
import re
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx
import openai
from django.conf import settings
from openai import AsyncOpenAI

try:  # openai>=3 runs on httpx2; older SDKs on httpx. Catch raw errors from both.
    import httpx2

    _RAW_HTTP_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx2.HTTPError)
    _RAW_TIMEOUTS: tuple[type[Exception], ...] = (httpx.TimeoutException, httpx2.TimeoutException)
except ImportError:  # pragma: no cover - depends on the installed SDK
    _RAW_HTTP_ERRORS = (httpx.HTTPError,)
    _RAW_TIMEOUTS = (httpx.TimeoutException,)

__all__ = [
    "ERROR_CODES",
    "Completed",
    "LLMError",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "Usage",
    "build_client",
    "complete",
    "estimate_cost",
    "is_configured",
    "model_name",
    "stream_chat",
]

logger = logging.getLogger(__name__)

ErrorCode = Literal[
    "llm_unavailable",
    "rate_limited",
    "bad_request",
    "context_too_long",
    "auth_failed",
    "interrupted",
]
ERROR_CODES: Final[frozenset[str]] = frozenset(
    {
        "llm_unavailable",
        "rate_limited",
        "bad_request",
        "context_too_long",
        "auth_failed",
        "interrupted",
    }
)
ModelKind = Literal["chat", "summary"]
Message = Mapping[str, Any]

# Local servers accept any key, but the SDK insists on one being present.
_PLACEHOLDER_KEY: Final = "not-needed"
_MAX_DETAIL = 300
_ONE_MILLION: Final = Decimal(1_000_000)
_CONTEXT_RE = re.compile(
    r"context[_ ]length|context window|context size|maximum context|too many tokens"
    r"|prompt is too long|exceed_context_size|reduce the length",
    re.IGNORECASE,
)
_SECRET_RE = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{4,}")


# --------------------------------------------------------------------------------------------
# Results and events
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # part of prompt_tokens served from the provider's prompt cache
    reasoning_tokens: int = 0  # part of completion_tokens spent on hidden reasoning

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text exactly as the model produced it (may be invalid JSON)

    def to_message(self) -> dict[str, Any]:
        """The wire shape used inside an assistant message's ``tool_calls``."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Completed:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None  # None if the stream ended without saying why
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    reasoning: str = ""

    def assistant_message(self) -> dict[str, Any]:
        """The assistant message to append to the history before sending tool results."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


StreamEvent = TextDelta | ReasoningDelta | Completed


class LLMError(Exception):
    """Any failure talking to the model; ``code`` is one of :data:`ERROR_CODES`.

    ``partial_text`` holds the text streamed before a mid-stream failure so it can be saved.
    ``retry_after`` is the server-suggested wait in seconds (rate limits), if any.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        partial_text: str = "",
    ) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.retry_after = retry_after
        self.status = status
        self.partial_text = partial_text

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments defeat default exception pickling (Celery results, channels).
        return (
            _rebuild_error,
            (self.code, self.message, self.retry_after, self.status, self.partial_text),
        )

    def __repr__(self) -> str:
        return f"LLMError(code={self.code!r}, message={self.message!r}, status={self.status!r})"


def _rebuild_error(
    code: ErrorCode, message: str, retry_after: float | None, status: int | None, partial: str
) -> LLMError:
    return LLMError(code, message, retry_after=retry_after, status=status, partial_text=partial)


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


def _setting_str(name: str) -> str:
    return str(getattr(settings, name, "") or "").strip()


def _setting_float(name: str, default: float) -> float:
    value = getattr(settings, name, None)
    return default if value in (None, "") else float(value)


def model_name(kind: ModelKind = "chat") -> str:
    """The configured model id for chat turns or summaries ("" when not configured)."""
    if kind == "chat":
        return _setting_str("HERMES_MODEL")
    if kind == "summary":
        return _setting_str("HERMES_SUMMARY_MODEL") or _setting_str("HERMES_MODEL")
    raise ValueError(f"Unknown model kind {kind!r}; expected 'chat' or 'summary'.")


def _endpoint_configured() -> bool:
    # An empty base URL means api.openai.com, which is only usable with a real key.
    return bool(_setting_str("OPENAI_BASE_URL") or _setting_str("OPENAI_API_KEY"))


def is_configured() -> bool:
    """True when a model is named and there is somewhere to send requests."""
    return bool(model_name("chat")) and _endpoint_configured()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle takes ~50 ms of CPU; doing it for every call (each call builds
    # its own client) stalled the event loop under concurrent chats. One context is shared.
    return ssl.create_default_context()


def build_client() -> AsyncOpenAI:
    """A new AsyncOpenAI client from settings; the caller owns it (``async with`` or close())."""
    connect = _setting_float("HERMES_LLM_CONNECT_TIMEOUT", 5.0)
    read = _setting_float("HERMES_LLM_READ_TIMEOUT", 30.0)
    # openai.Timeout is the SDK's own transport type (httpx2 in openai>=3), so nothing is converted.
    # "read" bounds the gap between bytes, i.e. a silent model, not the length of a whole answer.
    timeout = openai.Timeout(read, connect=connect, write=read, pool=connect)
    return AsyncOpenAI(
        base_url=_setting_str("OPENAI_BASE_URL") or None,
        api_key=_setting_str("OPENAI_API_KEY") or _PLACEHOLDER_KEY,
        timeout=timeout,
        http_client=openai.DefaultAsyncHttpxClient(verify=_tls_context(), timeout=timeout),
        # The SDK retries 408/409/429/5xx and connection errors itself, honouring Retry-After.
        max_retries=int(getattr(settings, "HERMES_LLM_MAX_RETRIES", 2)),
    )


def _resolve_model(model: str | None, kind: ModelKind) -> str:
    resolved = (model or "").strip() or model_name(kind)
    if not resolved or not _endpoint_configured():
        raise LLMError(
            "llm_unavailable",
            "The language model is not configured (set HERMES_MODEL and OPENAI_BASE_URL "
            "or OPENAI_API_KEY).",
        )
    return resolved


def _request_kwargs(
    *,
    model: str,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None,
    temperature: float | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
    if tools:
        kwargs["tools"] = [dict(t) for t in tools]
    if temperature is not None:
        kwargs["temperature"] = temperature
    if max_tokens is not None:
        # api.openai.com rejects max_tokens for reasoning models; many local servers only know
        # max_tokens. No base URL means OpenAI itself, so use its current name there.
        name = "max_tokens" if _setting_str("OPENAI_BASE_URL") else "max_completion_tokens"
        kwargs[name] = max_tokens
    return kwargs


# --------------------------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------------------------


async def stream_chat(
    *,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    client: AsyncOpenAI | None = None,
) -> AsyncIterator[StreamEvent]:
    """Stream a chat completion: Text/Reasoning deltas, then exactly one :class:`Completed`.

    Raises :class:`LLMError` (with ``partial_text`` when text had already arrived). To stop
    early, ``await stream.aclose()`` (or use ``contextlib.aclosing``): that releases the
    connection at once instead of whenever the generator is garbage-collected.
    """
    resolved = _resolve_model(model, "chat")
    kwargs = _request_kwargs(
        model=resolved,
        messages=messages,
        tools=tools,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    owned = client is None
    api = client if client is not None else build_client()
    text_parts: list[str] = []
    reasoning_parts: list[str] = []
    calls = _ToolCallAccumulator()
    usage = Usage()
    finish_reason: str | None = None
    response_model = resolved
    stream: Any = None
    try:
        try:
            stream = await api.chat.completions.create(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
        except (openai.OpenAIError, *_RAW_HTTP_ERRORS) as exc:
            raise _map_error(exc, api=api) from exc

        # Anything failing from here on happened mid-stream: the SDK does not retry it, and a
        # dropped connection may surface as a raw transport error rather than an APIError.
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = _usage_from(chunk.usage)
                if chunk.model:
                    response_model = chunk.model
                for choice in chunk.choices or ():
                    if choice.index not in (0, None):
                        continue
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    reasoning = _reasoning_of(delta)
                    if reasoning:
                        reasoning_parts.append(reasoning)
                        yield ReasoningDelta(reasoning)
                    if delta.content:
                        text_parts.append(delta.content)
                        yield TextDelta(delta.content)
                    for call_delta in delta.tool_calls or ():
                        calls.add(call_delta)
        except (openai.OpenAIError, *_RAW_HTTP_ERRORS) as exc:
            raise _map_error(
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
        if owned:
            await api.close()


async def complete(
    *,
    messages: Sequence[Message],
    tools: Sequence[Mapping[str, Any]] | None = None,
    model: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    client: AsyncOpenAI | None = None,
    kind: ModelKind = "summary",
) -> Completed:
    """A non-streaming completion (summaries, memory flush, extraction).

    Uses the summary model unless ``model`` is given; pass ``kind="chat"`` for the chat model.
    """
    resolved = _resolve_model(model, kind)
    kwargs = _request_kwargs(
        model=resolved,
        messages=messages,
        tools=tools,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    owned = client is None
    api = client if client is not None else build_client()
    try:
        try:
            response = await api.chat.completions.create(**kwargs)
        except (openai.OpenAIError, *_RAW_HTTP_ERRORS) as exc:
            raise _map_error(exc, api=api) from exc
    finally:
        if owned:
            await api.close()

    if not response.choices:
        raise LLMError("llm_unavailable", "The model returned an empty response.")
    choice = response.choices[0]
    message = choice.message
    tool_calls = tuple(
        ToolCall(
            id=call.id or _fallback_call_id(),
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
        usage=_usage_from(response.usage) if response.usage is not None else Usage(),
        model=response.model or resolved,
        reasoning=_reasoning_of(message),
    )


# --------------------------------------------------------------------------------------------
# Stream assembly helpers
# --------------------------------------------------------------------------------------------


def _fallback_call_id() -> str:
    # Some local servers omit ids, but the follow-up tool message must reference one.
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ToolCallAccumulator:
    """Reassembles streamed tool calls, keyed by their ``index``."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def add(self, delta: Any) -> None:
        index = getattr(delta, "index", None)
        call_id = getattr(delta, "id", None) or ""
        if index is None:
            # Not spec-compliant, but seen in the wild: locate the call by id, else the last one.
            index = next((i for i, c in self._calls.items() if call_id and c.id == call_id), None)
            if index is None:
                index = len(self._calls) if call_id or not self._calls else max(self._calls)
        current = self._calls.get(index)
        if current is not None and call_id and current.id and current.id != call_id:
            # A new id on a used index means a separate call from a server that reuses index 0.
            index = max(self._calls) + 1
            current = None
        if current is None:
            current = self._calls[index] = _PartialCall()
        if call_id and not current.id:
            current.id = call_id
        function = getattr(delta, "function", None)
        if function is not None:
            name = getattr(function, "name", None)
            if name and name != current.name:
                current.name = name if not current.name else current.name + name
            if function.arguments:
                current.arguments.append(function.arguments)

    def result(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                id=call.id or _fallback_call_id(), name=call.name, arguments="".join(call.arguments)
            )
            for _, call in sorted(self._calls.items())
        )


def _reasoning_of(obj: Any) -> str:
    # Outside the OpenAI schema: DeepSeek/vLLM send reasoning_content, OpenRouter/Ollama reasoning.
    for attr in ("reasoning_content", "reasoning"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _usage_from(raw: Any) -> Usage:
    prompt_details = getattr(raw, "prompt_tokens_details", None)
    completion_details = getattr(raw, "completion_tokens_details", None)
    cached = getattr(prompt_details, "cached_tokens", None)
    if cached is None:
        cached = getattr(raw, "prompt_cache_hit_tokens", None)  # DeepSeek's spelling
    return Usage(
        prompt_tokens=int(getattr(raw, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cached_tokens=int(cached or 0),
        reasoning_tokens=int(getattr(completion_details, "reasoning_tokens", 0) or 0),
    )


# --------------------------------------------------------------------------------------------
# Error mapping
# --------------------------------------------------------------------------------------------


def _redact(text: str) -> str:
    key = _setting_str("OPENAI_API_KEY")
    if len(key) >= 4:
        text = text.replace(key, "***")
    # Providers echo a masked key ("sk-abc***xyz") on 401s; even that stays out of our messages.
    return _SECRET_RE.sub("***", text)


def _server_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    message: Any = None
    if isinstance(body, Mapping):
        message = body.get("message")
        if message is None and isinstance(body.get("error"), Mapping):
            message = body["error"].get("message")
    if not isinstance(message, str) or not message:
        message = exc.message or ""
    message = _redact(" ".join(message.split()))
    return message[:_MAX_DETAIL] + ("…" if len(message) > _MAX_DETAIL else "")


def _error_code_of(exc: openai.APIError) -> str:
    code = getattr(exc, "code", None)
    if code:
        return str(code)
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error") if isinstance(body.get("error"), Mapping) else body
        for key in ("code", "type"):
            value = inner.get(key)
            if value:
                return str(value)
    return ""


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def _server_label(api: AsyncOpenAI) -> str:
    # Host and port only: a base URL could carry credentials in its userinfo or query.
    try:
        parts = urlsplit(str(api.base_url))
        return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "?"
    except ValueError:
        return "the model server"


def _map_error(
    exc: BaseException, *, api: AsyncOpenAI, mid_stream: bool = False, partial_text: str = ""
) -> LLMError:
    error = _classify(exc, api=api, mid_stream=mid_stream)
    error.partial_text = partial_text
    logger.warning(
        "LLM call failed: %s (status=%s, mid_stream=%s, partial_chars=%d)",
        error.code,
        error.status,
        mid_stream,
        len(partial_text),
    )
    return error


def _classify(exc: BaseException, *, api: AsyncOpenAI, mid_stream: bool) -> LLMError:
    server = _server_label(api)
    if isinstance(exc, (openai.APITimeoutError, *_RAW_TIMEOUTS)):
        read = _setting_float("HERMES_LLM_READ_TIMEOUT", 30.0)
        return LLMError(
            "llm_unavailable",
            f"The model server at {server} did not respond in time (timeout {read:g} s).",
        )
    if isinstance(exc, openai.APIConnectionError):
        if mid_stream:
            return LLMError("interrupted", "The connection to the model dropped mid-answer.")
        return LLMError(
            "llm_unavailable",
            f"Could not reach the model server at {server} (connection failed or dropped).",
        )
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc, server)
    if isinstance(exc, openai.APIError):
        # An error event inside an otherwise healthy stream, or an unparseable response.
        detail = _redact(" ".join((exc.message or "").split()))[:_MAX_DETAIL]
        if mid_stream:
            return LLMError("interrupted", f"The model stopped mid-answer: {detail}")
        return LLMError("llm_unavailable", f"The model server at {server} failed: {detail}")
    if isinstance(exc, _RAW_HTTP_ERRORS):
        if mid_stream:
            return LLMError("interrupted", "The connection to the model dropped mid-answer.")
        return LLMError("llm_unavailable", f"Could not talk to the model server at {server}.")
    # Remaining OpenAIErrors are client-side set-up problems (e.g. a malformed base URL).
    return LLMError("llm_unavailable", f"The model client failed: {type(exc).__name__}.")


def _classify_status(exc: openai.APIStatusError, server: str) -> LLMError:
    status = exc.status_code
    detail = _server_detail(exc)
    if status == 429:
        return LLMError(
            "rate_limited",
            f"The model provider is rate limiting requests: {detail}",
            retry_after=_retry_after(exc.response),
            status=status,
        )
    if status in (401, 403):
        return LLMError(
            "auth_failed",
            f"The model server rejected our credentials (HTTP {status}): {detail}",
            status=status,
        )
    if status in (400, 404, 413, 422):
        if _CONTEXT_RE.search(_error_code_of(exc)) or _CONTEXT_RE.search(detail):
            return LLMError(
                "context_too_long",
                f"The conversation is too long for the model's context window: {detail}",
                status=status,
            )
        return LLMError(
            "bad_request", f"The model server rejected the request: {detail}", status=status
        )
    if status >= 500 or status in (408, 409):
        return LLMError(
            "llm_unavailable",
            f"The model server at {server} is failing (HTTP {status}): {detail}",
            status=status,
        )
    return LLMError(
        "bad_request",
        f"The model server rejected the request (HTTP {status}): {detail}",
        status=status,
    )


# --------------------------------------------------------------------------------------------
# Cost
# --------------------------------------------------------------------------------------------


def _price_entry(model: str) -> Mapping[str, Any] | None:
    prices = getattr(settings, "HERMES_MODEL_PRICES", None) or {}
    if model in prices:
        return prices[model]
    # Providers answer with dated snapshots ("gpt-4o-2024-08-06") or prefixed ids ("openai/x").
    base = model.rsplit("/", 1)[-1]
    if base in prices:
        return prices[base]
    candidates = [name for name in prices if base.startswith(f"{name}-")]
    return prices[max(candidates, key=len)] if candidates else None


def _price(entry: Mapping[str, Any], key: str) -> Decimal | None:
    value = entry.get(key)
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        logger.warning("Ignoring non-numeric HERMES_MODEL_PRICES value for %r", key)
        return None


def estimate_cost(model: str, usage: Usage) -> Decimal:
    """USD cost of one call from HERMES_MODEL_PRICES (per 1M tokens); 0 for unknown models.

    Cached prompt tokens are billed at ``cached_input`` when that price is given, otherwise at
    ``input``. The result is exact (not rounded); round when storing.
    """
    entry = _price_entry(model or "")
    if not entry:
        return Decimal(0)
    input_price = _price(entry, "input") or Decimal(0)
    output_price = _price(entry, "output") or Decimal(0)
    cached_price = _price(entry, "cached_input")
    cached = min(max(usage.cached_tokens, 0), usage.prompt_tokens)
    if cached_price is None:
        cached_price = input_price
    total = (
        Decimal(usage.prompt_tokens - cached) * input_price
        + Decimal(cached) * cached_price
        + Decimal(usage.completion_tokens) * output_price
    )
    return total / _ONE_MILLION
