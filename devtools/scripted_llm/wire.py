"""HTTP plumbing of the scripted model: the request handler and the SSE stream it writes."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devtools.scripted_llm.script import (
    _ARGUMENT_PIECE,
    _PIECE_RE,
    _POLL,
    CHAT_PATHS,
    CONTEXT_WINDOW,
    MODEL_IDS,
    Fault,
    JSONDict,
    _Answer,
    _new_id,
    count_prompt_tokens,
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    # `llm` is the ScriptedLLM (devtools.scripted_llm.server) that owns this server; not
    # imported here, since that module imports this one.
    def __init__(self, address: tuple[str, int], llm: Any) -> None:
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
            llm = self.server.llm
            created = llm.created
            auth = self.headers.get("Authorization", "")
            if llm.require_api_key is not None and auth != f"Bearer {llm.require_api_key}":
                self._send_error(401, "Incorrect API key provided.", "invalid_request_error")
            elif path in ("/v1/models", "/models"):
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
        llm._record(body, self.headers.get("Authorization", ""))

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
