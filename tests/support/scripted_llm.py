"""A scripted, OpenAI-compatible Chat Completions server for tests, benchmarks and demos.

It speaks real HTTP on 127.0.0.1 so the official ``openai`` client (and its retry, timeout and
SSE machinery) is exercised end to end instead of being mocked away. Standard library only, so it
can be imported without Django being configured.

Quick start::

    with ScriptedLLM() as llm:
        llm.add_rule("weather", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])
        llm.set_fault(Fault.rate_limited(retry_after=0.05, times=2))
        client = openai.OpenAI(base_url=llm.base_url, api_key="x")
        ...

How an incoming chat request is answered, in priority order:

1. the global fault from :meth:`ScriptedLLM.set_fault` (while it has ``times`` left);
2. the head of the queue filled by :meth:`ScriptedLLM.enqueue` ("the next N requests"),
   regardless of content;
3. the rules from :meth:`ScriptedLLM.add_rule`, checked **in the order they were added**; the first
   matching rule that still has ``times`` left wins;
4. the default reply (``default_reply`` or ``"Echo: <last user text>"``).

A fault with an HTTP ``status`` rejects the request *before* the model "runs", so it does not use
up the queued answer or the rule's ``times``: ``enqueue(reply="ok", fault=Fault(status=429,
times=2))`` answers 429, 429, then "ok".

Token accounting is deterministic: text is split with the regex ``\\w+|[^\\w\\s]``. The prompt is
the JSON of ``tools`` (sorted keys) followed by every message in order (role, content, tool calls
with their ids/names/arguments, tool_call_id). ``cached_tokens`` is the longest common token prefix
with any earlier *answered* request, which mimics provider prompt caching: appending to an unchanged
prompt is cheap, rebuilding it is not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import secrets
import select
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "MODEL_IDS",
    "Fault",
    "Rule",
    "ScriptedLLM",
    "build_demo",
    "count_prompt_tokens",
    "main",
    "prompt_tokens",
    "tokenize",
]

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


# --------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], llm: ScriptedLLM) -> None:
        self.llm = llm
        super().__init__(address, _Handler)


class _Aborted(Exception):
    """The response was deliberately cut, or the client went away."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # needed for keep-alive and chunked streaming
    server_version = "ScriptedLLM/1.0"
    server: _Server

    # -- lifecycle ---------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        # Without TCP_NODELAY small SSE chunks wait on delayed ACKs (~40 ms each).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.llm._register(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.llm._unregister(self.connection)

    def log_message(self, fmt: str, *args: Any) -> None:
        if self.server.llm.verbose:
            super().log_message(fmt, *args)

    def send_response(self, code: int, message: str | None = None) -> None:
        self._response_started = True
        super().send_response(code, message)

    # -- low-level writing -------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except OSError as exc:
            self.close_connection = True
            raise _Aborted from exc

    def _write_chunk(self, payload: bytes) -> None:
        self._write(b"%X\r\n%s\r\n" % (len(payload), payload))

    def _abort(self) -> None:
        # A FIN in the middle of a chunked body: clients see an incomplete message
        # (httpx: RemoteProtocolError) rather than a clean end of stream.
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _sleep(self, seconds: float, *, watch_client: bool = True) -> None:
        """Sleep, but give up as soon as the server stops or the client disconnects."""
        deadline = time.monotonic() + seconds
        stopping = self.server.llm._stopping
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if stopping.wait(min(_POLL, remaining)):
                raise _Aborted
            if watch_client and self._client_gone():
                raise _Aborted

    def _send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", _new_id("req_"))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._write(data)

    def _send_error(
        self,
        status: int,
        message: str,
        error_type: str,
        code: str | None = None,
        *,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        body = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
        self._send_json(status, body, headers)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    # -- routes ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        try:
            path = self.path.split("?", 1)[0].rstrip("/")
            created = self.server.llm.created
            if path in ("/v1/models", "/models"):
                data = [_model_object(model, created) for model in MODEL_IDS]
                self._send_json(200, {"object": "list", "data": data})
            elif path.startswith(("/v1/models/", "/models/")):
                model = path.rsplit("/", 1)[1]
                if model in MODEL_IDS:
                    self._send_json(200, _model_object(model, created))
                else:
                    self._send_error(
                        404,
                        f"The model `{model}` does not exist or you do not have access to it.",
                        "invalid_request_error",
                        "model_not_found",
                    )
            else:
                self._send_error(404, f"Unknown path {path!r}.", "invalid_request_error")
        except _Aborted:
            self.close_connection = True

    def do_POST(self) -> None:
        self._response_started = False
        try:
            self._handle_post()
        except _Aborted:
            self._abort()
        except Exception as exc:
            # A broken script (e.g. a reply callable raising) should fail loudly but politely.
            if self._response_started:
                self._abort()
                raise
            try:
                message = f"ScriptedLLM script error: {type(exc).__name__}: {exc}"
                self._send_error(500, message, "server_error")
            except _Aborted:
                self._abort()
            raise

    def _handle_post(self) -> None:
        llm = self.server.llm
        path = self.path.split("?", 1)[0].rstrip("/")
        raw = self._read_body()
        if path not in CHAT_PATHS:
            self._send_error(404, f"Unknown path {path!r}.", "invalid_request_error")
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send_error(400, "The request body is not valid JSON.", "invalid_request_error")
            return
        llm._record(body)

        if llm.require_api_key is not None:
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {llm.require_api_key}":
                self._send_fault_status(Fault(status=401), body, auth.removeprefix("Bearer "))
                return

        plan = llm._plan(body)
        fault = plan.fault
        if fault is not None and fault.latency > 0:
            self._sleep(fault.latency)
        if fault is not None and fault.rejects:
            presented = self.headers.get("Authorization", "").removeprefix("Bearer ")
            self._send_fault_status(fault, body, presented)
            return

        answer = llm._render(plan.script, body)
        usage = llm._usage(body, answer)
        if body.get("stream"):
            self._stream(body, answer, usage, fault)
        else:
            self._respond(body, answer, usage, fault)

    # -- responses ---------------------------------------------------------------------------

    def _send_fault_status(self, fault: Fault, body: JSONDict, presented_key: str) -> None:
        status = fault.status or 500
        message, error_type, code, param = _default_error(status, body, presented_key)
        if fault.error_code == "context_length_exceeded" and fault.error_message is None:
            message, error_type, code, param = _context_error(body)
        headers: dict[str, str] = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        self._send_error(
            status,
            fault.error_message or message,
            fault.error_type or error_type,
            fault.error_code or code,
            param=param,
            headers=headers,
        )

    def _respond(
        self, body: JSONDict, answer: _Answer, usage: JSONDict, fault: Fault | None
    ) -> None:
        llm = self.server.llm
        message: JSONDict = {"role": "assistant", "content": answer.text, "refusal": None}
        if answer.reasoning:
            message["reasoning_content"] = answer.reasoning
        if answer.tool_calls:
            message["tool_calls"] = answer.tool_calls
        payload = {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or MODEL_IDS[0],
            "system_fingerprint": "fp_scripted",
            "service_tier": "default",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": answer.finish_reason,
                }
            ],
            "usage": usage,
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", _new_id("req_"))
        self.end_headers()
        if fault is not None and fault.stall_after is not None:
            self._sleep(fault.stall_seconds)
        if fault is not None and fault.cut_after is not None:
            # No chunks in a plain body: deliver half of it, then drop the connection.
            self._write(data[: len(data) // 2])
            raise _Aborted
        if llm.chunk_delay:
            self._sleep(llm.chunk_delay, watch_client=False)
        self._write(data)

    def _stream(
        self, body: JSONDict, answer: _Answer, usage: JSONDict, fault: Fault | None
    ) -> None:
        llm = self.server.llm
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = _stream_events(body, answer, usage if include_usage else None)

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", _new_id("req_"))
        self.end_headers()

        for index, event in enumerate(events):
            if fault is not None:
                if fault.cut_after is not None and index >= fault.cut_after:
                    raise _Aborted
                if fault.stall_after is not None and index == fault.stall_after:
                    self._sleep(fault.stall_seconds)
                if fault.stream_error_after is not None and index == fault.stream_error_after:
                    error = {
                        "error": {
                            "message": fault.error_message or "The server had an error mid-stream.",
                            "type": fault.error_type or "server_error",
                            "param": None,
                            "code": fault.error_code,
                        }
                    }
                    self._write_chunk(b"data: " + json.dumps(error).encode() + b"\n\n")
                    break
            if index > 0 and llm.chunk_delay:
                self._sleep(llm.chunk_delay, watch_client=False)
            self._write_chunk(event)
        else:
            if fault is not None and fault.cut_after is not None:
                raise _Aborted  # "N chunks" ran past the end: still no clean terminator
        self._write(b"0\r\n\r\n")


def _model_object(model: str, created: int) -> JSONDict:
    return {"id": model, "object": "model", "created": created, "owned_by": "scripted-llm"}


def _default_error(
    status: int, body: JSONDict, presented_key: str
) -> tuple[str, str, str | None, str | None]:
    model = body.get("model") or MODEL_IDS[0]
    if status == 400:
        return "Invalid request.", "invalid_request_error", None, None
    if status == 401:
        # Mask like OpenAI does; clients must not leak even this partial key.
        masked = f"{presented_key[:8]}***{presented_key[-4:]}" if presented_key else "(none)"
        message = (
            f"Incorrect API key provided: {masked}. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        return message, "invalid_request_error", "invalid_api_key", None
    if status == 403:
        return "You are not allowed to use this model.", "invalid_request_error", "forbidden", None
    if status == 404:
        message = f"The model `{model}` does not exist or you do not have access to it."
        return message, "invalid_request_error", "model_not_found", None
    if status == 422:
        return "Unprocessable request.", "invalid_request_error", None, None
    if status == 429:
        message = f"Rate limit reached for {model} on requests per min (RPM). Please try again."
        return message, "requests", "rate_limit_exceeded", None
    if status >= 500:
        message = "The server had an error while processing your request. Sorry about that!"
        return message, "server_error", None, None
    return f"Request failed with status {status}.", "invalid_request_error", None, None


def _context_error(body: JSONDict) -> tuple[str, str, str | None, str | None]:
    message = (
        f"This model's maximum context length is {CONTEXT_WINDOW} tokens. However, your messages "
        f"resulted in {max(count_prompt_tokens(body), CONTEXT_WINDOW + 1)} tokens. "
        "Please reduce the length of the messages."
    )
    return message, "invalid_request_error", "context_length_exceeded", "messages"


def _pieces(text: str) -> list[str]:
    return _PIECE_RE.findall(text) or ([text] if text else [])


def _stream_events(body: JSONDict, answer: _Answer, usage: JSONDict | None) -> list[bytes]:
    completion_id = _new_id("chatcmpl-")
    created = int(time.time())
    model = body.get("model") or MODEL_IDS[0]

    def chunk(delta: JSONDict | None, finish_reason: str | None = None) -> bytes:
        payload: JSONDict = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_scripted",
            "service_tier": "default",
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if usage is not None:
            # With include_usage OpenAI sends "usage": null on every chunk but the last.
            payload["usage"] = usage if delta is None else None
        return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"

    events = [chunk({"role": "assistant", "content": "" if answer.text is not None else None})]
    events += [chunk({"reasoning_content": piece}) for piece in _pieces(answer.reasoning)]
    events += [chunk({"content": piece}) for piece in _pieces(answer.text or "")]
    for index, call in enumerate(answer.tool_calls):
        function = call["function"]
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        events.append(chunk({"tool_calls": [head]}))
        arguments = function["arguments"]
        for start in range(0, len(arguments), _ARGUMENT_PIECE):
            piece = arguments[start : start + _ARGUMENT_PIECE]
            delta = {"index": index, "function": {"arguments": piece}}
            events.append(chunk({"tool_calls": [delta]}))
    events.append(chunk({}, answer.finish_reason))
    if usage is not None:
        events.append(chunk(None))
    events.append(b"data: [DONE]\n\n")
    return events


# --------------------------------------------------------------------------------------------
# The server object
# --------------------------------------------------------------------------------------------


class ScriptedLLM:
    """An OpenAI-compatible chat server answering from a script. See the module docstring."""

    def __init__(
        self,
        port: int = 0,
        *,
        default_reply: ReplySource | None = None,
        chunk_delay: float = 0.0,
        host: str = "127.0.0.1",
        require_api_key: str | None = None,
        verbose: bool = False,
    ) -> None:
        self.host = host
        self.default_reply = default_reply
        self.chunk_delay = chunk_delay
        # When set, requests must carry "Authorization: Bearer <key>" or get a 401.
        self.require_api_key = require_api_key
        self.verbose = verbose
        self.created = int(time.time())
        self._requested_port = port
        # Re-entrant: callable matchers run under it and may inspect the server.
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._handler_threads: set[threading.Thread] = set()
        self._requests: list[JSONDict] = []
        self._usages: list[JSONDict] = []
        self._rules: list[Rule] = []
        self._queue: deque[_QueuedScript] = deque()
        self._global_fault: Fault | None = None
        self._prefixes: set[int] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedLLM:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _POLL},
            name=f"ScriptedLLM:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving; wakes stalled handlers and drops open connections."""
        server = self._server
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
            handlers = list(self._handler_threads)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in handlers:
            thread.join(max(0.0, deadline - time.monotonic()))
        server.server_close()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        self._server = None
        self._thread = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            return self._requested_port
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"http://{host}:{self.port}/v1"

    def _register(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)
            self._handler_threads.add(threading.current_thread())

    def _unregister(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)
            self._handler_threads.discard(threading.current_thread())

    # -- inspection --------------------------------------------------------------------------

    @property
    def requests(self) -> list[JSONDict]:
        """JSON bodies of all chat requests received so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def usages(self) -> list[JSONDict]:
        """The usage objects reported for answered requests, oldest first."""
        with self._lock:
            return list(self._usages)

    def reset(self) -> None:
        """Forget requests, rules, queue, faults and the prompt cache."""
        with self._lock:
            self._requests.clear()
            self._usages.clear()
            self._rules.clear()
            self._queue.clear()
            self._global_fault = None
            self._prefixes.clear()

    # -- scripting ---------------------------------------------------------------------------

    def add_rule(
        self,
        match: Matcher,
        *,
        reply: ReplySource | None = None,
        tool_calls: ToolCallSource | None = None,
        reasoning: str | None = None,
        fault: Fault | Mapping[str, Any] | None = None,
        times: int | None = None,
    ) -> Rule:
        """Answer requests whose last message matches.

        ``match`` is a substring or compiled regex searched in the last message's text, or a
        callable receiving the whole request body. Rules are checked in insertion order.
        ``tool_calls`` items look like ``{"name": "memory", "arguments": {...} or "json"}``
        (an ``id`` is generated unless given).
        """
        script = Script(reply, tool_calls, reasoning, _coerce_fault(fault))
        rule = Rule(match=match, script=script, times=times)
        with self._lock:
            self._rules.append(rule)
        return rule

    def enqueue(
        self,
        *,
        reply: ReplySource | None = None,
        tool_calls: ToolCallSource | None = None,
        reasoning: str | None = None,
        fault: Fault | Mapping[str, Any] | None = None,
        count: int = 1,
    ) -> None:
        """Answer the next ``count`` requests like this, whatever they contain (FIFO)."""
        script = Script(reply, tool_calls, reasoning, _coerce_fault(fault))
        with self._lock:
            self._queue.append(_QueuedScript(script, count))

    def set_fault(self, fault: Fault | Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Apply a fault to every request (or the next ``times``); None clears it."""
        if fault is None and kwargs:
            fault = Fault(**kwargs)
        with self._lock:
            self._global_fault = _coerce_fault(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._global_fault = None

    # -- request processing (called from handler threads) -------------------------------------

    def _record(self, body: JSONDict) -> None:
        with self._lock:
            self._requests.append(body)

    def _plan(self, body: JSONDict) -> _Plan:
        # Picks and consumes script state atomically so concurrent requests never share a "times".
        with self._lock:
            fault: Fault | None = None
            global_fault = self._global_fault
            if global_fault is not None and global_fault.active:
                global_fault.used += 1
                if global_fault.rejects:
                    return _Plan(global_fault, None)
                fault = global_fault

            script: Script | None = None
            consume: Callable[[], None] = _nothing
            if self._queue:
                head = self._queue[0]
                script = head.script
                consume = self._pop_queue
            else:
                for rule in self._rules:
                    if not rule.exhausted and rule.matches(body):
                        script = rule.script
                        consume = rule.hit
                        break

            # A rejecting fault fires before the "model" runs, so the answer stays available.
            script_fault = script.fault if script is not None else None
            if fault is None and script_fault is not None and script_fault.active:
                script_fault.used += 1
                if script_fault.rejects:
                    return _Plan(script_fault, None)
                fault = script_fault
            consume()
            return _Plan(fault, script)

    def _pop_queue(self) -> None:
        head = self._queue[0]
        head.remaining -= 1
        if head.remaining <= 0:
            self._queue.popleft()

    def _render(self, script: Script | None, body: JSONDict) -> _Answer:
        script = script or Script()
        specs = script.tool_calls
        if callable(specs):
            specs = specs(body)
        tool_calls = [_tool_call(spec) for spec in specs or ()]

        reply = script.reply
        if reply is None and not tool_calls:
            reply = self.default_reply if self.default_reply is not None else _echo
        text = reply(body) if callable(reply) else reply

        finish_reason = "tool_calls" if tool_calls else "stop"
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if text and not tool_calls and isinstance(limit, int) and limit > 0:
            matches = list(_TOKEN_RE.finditer(text))
            if len(matches) > limit:
                text = text[: matches[limit - 1].end()]
                finish_reason = "length"
        return _Answer(text, script.reasoning or "", tool_calls, finish_reason)

    def _usage(self, body: JSONDict, answer: _Answer) -> JSONDict:
        tokens = prompt_tokens(body)
        hashes: list[int] = []
        running = 0
        for token in tokens:
            running = hash((running, token))
            hashes.append(running)
        reasoning_tokens = len(tokenize(answer.reasoning))
        completion = len(tokenize(answer.text or "")) + reasoning_tokens
        for call in answer.tool_calls:
            completion += len(tokenize(call["function"]["name"]))
            completion += len(tokenize(call["function"]["arguments"]))
        with self._lock:
            cached = 0
            for value in hashes:
                if value not in self._prefixes:
                    break
                cached += 1
            if len(self._prefixes) + len(hashes) > _MAX_CACHED_PREFIXES:
                self._prefixes.clear()
            self._prefixes.update(hashes)
            usage = {
                "prompt_tokens": len(tokens),
                "completion_tokens": completion,
                "total_tokens": len(tokens) + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": reasoning_tokens,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            }
            self._usages.append(usage)
        return usage


def _tool_call(spec: ToolCallSpec) -> JSONDict:
    return {
        "id": str(spec.get("id") or _new_id("call_")),
        "type": "function",
        "function": {
            "name": str(spec["name"]),
            "arguments": _arguments_text(spec.get("arguments", {})),
        },
    }


def _echo(body: JSONDict) -> str:
    return "Echo: " + _last_user_text(body)[:200]


# --------------------------------------------------------------------------------------------
# Demo
# --------------------------------------------------------------------------------------------

_REMEMBER_RE = re.compile(
    r"\bremember\b[\s:,-]*(?:that\s+)?(?P<rest>.*)", re.IGNORECASE | re.DOTALL
)


def _wants_memory(body: JSONDict) -> bool:
    last = _last_message(body)
    return last.get("role") == "user" and _REMEMBER_RE.search(_last_message_text(body)) is not None


def _memory_call(body: JSONDict) -> list[JSONDict]:
    found = _REMEMBER_RE.search(_last_message_text(body))
    content = found.group("rest").strip() if found else ""
    arguments = {"action": "add", "target": "user", "content": content.rstrip(".!") or content}
    return [{"name": "memory", "arguments": arguments}]


def _after_tool(body: JSONDict) -> bool:
    return _last_message(body).get("role") == "tool"


def _demo_reply(body: JSONDict) -> str:
    said = " ".join(_last_user_text(body).split())[:120] or "(nothing)"
    return (
        "Hello from the **scripted** model! You said:\n\n"
        f"> {said}\n\n"
        "Here is a tiny example:\n\n"
        "```python\n"
        "def greet(name: str) -> str:\n"
        '    return f"Hello, {name}!"\n'
        "```\n\n"
        "Say *remember …* and I will store it with the `memory` tool."
    )


def build_demo(port: int = 0, *, chunk_delay: float = 0.02, host: str = "127.0.0.1") -> ScriptedLLM:
    """A ScriptedLLM with the friendly demo script (not started)."""
    llm = ScriptedLLM(port, default_reply=_demo_reply, chunk_delay=chunk_delay, host=host)
    llm.add_rule(_after_tool, reply="Done — I've saved that to memory.")
    llm.add_rule(_wants_memory, tool_calls=_memory_call)
    return llm


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the demo script until interrupted (reusable from a management command)."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.scripted_llm",
        description="Serve a scripted OpenAI-compatible chat API for local demos.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--chunk-delay", type=float, default=0.02, help="seconds between chunks")
    parser.add_argument("--verbose", action="store_true", help="log every HTTP request")
    parser.add_argument("--reply", help="answer every request with this text (no demo script)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before first byte")
    args = parser.parse_args(argv)

    if args.reply is not None:
        llm = ScriptedLLM(
            args.port, default_reply=args.reply, chunk_delay=args.chunk_delay, host=args.host
        )
    else:
        llm = build_demo(args.port, chunk_delay=args.chunk_delay, host=args.host)
    if args.latency:
        llm.set_fault(Fault(latency=args.latency))
    llm.verbose = args.verbose
    llm.start()
    print(
        f"Scripted LLM serving {', '.join(MODEL_IDS)} at {llm.base_url} — press Ctrl+C to stop.",
        flush=True,
    )
    finished = threading.Event()
    previous: Any = None
    if threading.current_thread() is threading.main_thread():
        # Process managers and `docker stop` send SIGTERM; stop as cleanly as on Ctrl+C.
        previous = signal.signal(signal.SIGTERM, lambda *_: finished.set())
    try:
        while not finished.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        llm.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
