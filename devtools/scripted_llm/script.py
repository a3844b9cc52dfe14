"""The scripted model's vocabulary: pseudo-tokens, prompt serialization, faults and scripts."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

JSONDict = dict[str, Any]
Matcher = str | re.Pattern[str] | Callable[[JSONDict], bool]
ReplySource = str | Callable[[JSONDict], str]
ToolCallSpec = Mapping[str, Any]
ToolCallSource = Sequence[ToolCallSpec] | Callable[[JSONDict], Sequence[ToolCallSpec]]

MODEL_IDS: tuple[str, ...] = ("scripted", "scripted-small")
CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
CONTEXT_WINDOW = 8192  # only used to phrase the context-length error like a real provider

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
# Word-ish pieces that keep their trailing whitespace, so the deltas concatenate back exactly.
_PIECE_RE = re.compile(r"\s*\S+\s*|\s+")
_ARGUMENT_PIECE = 8  # characters per streamed tool-argument delta; small to force accumulation
# Bounds memory of the prompt-cache simulation during long benchmarks; the cache is simply reset.
_MAX_CACHED_PREFIXES = 5_000_000
_POLL = 0.05


# --------------------------------------------------------------------------------------------
# Tokenizer and prompt serialization
# --------------------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Split text into deterministic pseudo-tokens (words and single punctuation marks)."""
    return _TOKEN_RE.findall(text)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, Mapping):
                if part.get("type") == "text" or "text" in part:
                    parts.append(str(part.get("text", "")))
                else:
                    parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return str(content)


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def prompt_tokens(body: Mapping[str, Any]) -> list[str]:
    """Pseudo-tokens of a chat request's prompt (tools first, then messages in order).

    Tools go first because real providers render tool definitions ahead of the conversation, so
    a stable tool list is part of the cacheable prefix.
    """
    tokens: list[str] = []
    tools = body.get("tools")
    if tools:
        tokens.extend(tokenize(json.dumps(tools, ensure_ascii=False, sort_keys=True)))
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        tokens.extend(tokenize(str(message.get("role", ""))))
        tokens.extend(tokenize(_content_text(message.get("content"))))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            tokens.extend(tokenize(str(call.get("id", ""))))
            tokens.extend(tokenize(str(function.get("name", ""))))
            tokens.extend(tokenize(_arguments_text(function.get("arguments", ""))))
        if message.get("tool_call_id"):
            tokens.extend(tokenize(str(message["tool_call_id"])))
    return tokens


def count_prompt_tokens(body: Mapping[str, Any]) -> int:
    """The ``prompt_tokens`` the server reports for this request body."""
    return len(prompt_tokens(body))


def _last_message(body: Mapping[str, Any]) -> Mapping[str, Any]:
    messages = body.get("messages") or []
    if messages and isinstance(messages[-1], Mapping):
        return messages[-1]
    return {}


def _last_message_text(body: Mapping[str, Any]) -> str:
    return _content_text(_last_message(body).get("content"))


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _new_id(prefix: str, nbytes: int = 12) -> str:
    return f"{prefix}{secrets.token_hex(nbytes)}"


def _nothing() -> None:
    pass


# --------------------------------------------------------------------------------------------
# Script model
# --------------------------------------------------------------------------------------------


@dataclass
class Fault:
    """Misbehaviour applied to a response.

    ``times`` limits how many requests the fault affects (None = every one); afterwards the
    request is answered normally, which is what makes "429 twice, then success" scriptable.
    Chunk counts (``cut_after``, ``stall_after``, ``stream_error_after``) index the SSE events
    of the response: event 0 is the role chunk, then reasoning/text/tool pieces, the finish
    chunk, the usage chunk (if requested) and ``[DONE]``.
    """

    latency: float = 0.0  # seconds to wait before the first byte (before headers)
    status: int | None = None  # reject with this HTTP status and an OpenAI-style error body
    retry_after: float | str | None = None  # value of the Retry-After header
    error_message: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    cut_after: int | None = None  # send N events, then drop the connection mid-body
    stall_after: int | None = None  # send N events, then go silent for stall_seconds
    stall_seconds: float = 3600.0
    stream_error_after: int | None = None  # send N events, then an in-stream error event
    times: int | None = None
    used: int = field(default=0, init=False, compare=False)

    @property
    def active(self) -> bool:
        return self.times is None or self.used < self.times

    @property
    def rejects(self) -> bool:
        return self.status is not None

    @classmethod
    def rate_limited(
        cls, *, retry_after: float | str | None = 0.05, times: int | None = None
    ) -> Fault:
        return cls(status=429, retry_after=retry_after, times=times)

    @classmethod
    def server_error(
        cls, status: int = 500, *, retry_after: float | str | None = None, times: int | None = None
    ) -> Fault:
        return cls(status=status, retry_after=retry_after, times=times)

    @classmethod
    def context_length_exceeded(cls, *, times: int | None = None) -> Fault:
        return cls(status=400, error_code="context_length_exceeded", times=times)

    @classmethod
    def auth_failed(cls, *, times: int | None = None) -> Fault:
        return cls(status=401, times=times)


@dataclass
class Script:
    """What the scripted model answers; None fields fall back to the default reply."""

    reply: ReplySource | None = None
    tool_calls: ToolCallSource | None = None
    reasoning: str | None = None
    fault: Fault | None = None


@dataclass
class Rule:
    """A content-matched script. ``times`` counts answers; rejected (faulted) requests don't."""

    match: Matcher
    script: Script
    times: int | None = None
    hits: int = 0

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times

    def hit(self) -> None:
        self.hits += 1

    def matches(self, body: JSONDict) -> bool:
        if isinstance(self.match, re.Pattern):
            return self.match.search(_last_message_text(body)) is not None
        if isinstance(self.match, str):
            return self.match in _last_message_text(body)
        return bool(self.match(body))


@dataclass
class _QueuedScript:
    script: Script
    remaining: int


@dataclass
class _Plan:
    fault: Fault | None
    script: Script | None


@dataclass
class _Answer:
    text: str | None
    reasoning: str
    tool_calls: list[JSONDict]
    finish_reason: str


def _coerce_fault(fault: Fault | Mapping[str, Any] | None) -> Fault | None:
    if fault is None:
        return None
    # Copy (which also zeroes ``used``) so a Fault reused across rules keeps its own counter.
    if isinstance(fault, Fault):
        return replace(fault)
    return Fault(**dict(fault))
