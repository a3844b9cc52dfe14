"""The scripted model server object: rules, queue, faults, recorded requests and usage."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from devtools.scripted_llm.script import (
    _MAX_CACHED_PREFIXES,
    _POLL,
    _TOKEN_RE,
    Fault,
    JSONDict,
    Matcher,
    ReplySource,
    Rule,
    Script,
    ToolCallSource,
    ToolCallSpec,
    _Answer,
    _arguments_text,
    _coerce_fault,
    _last_user_text,
    _new_id,
    _nothing,
    _Plan,
    _QueuedScript,
    prompt_tokens,
    tokenize,
)
from devtools.scripted_llm.wire import _Server


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
        record_to: Path | None = None,
    ) -> None:
        self.host = host
        self.default_reply = default_reply
        self.chunk_delay = chunk_delay
        # When set, requests must carry "Authorization: Bearer <key>" or get a 401.
        self.require_api_key = require_api_key
        self.verbose = verbose
        # When set, the body of each chat request is written there (the last one stays): a
        # benchmark in another process replays it straight at the model.
        self.record_to = record_to
        self.created = int(time.time())
        self._requested_port = port
        # Re-entrant: callable matchers run under it and may inspect the server.
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._accepted = 0
        self._handler_threads: set[threading.Thread] = set()
        self._requests: list[JSONDict] = []
        self._bearers: list[str] = []
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
            self._accepted += 1
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
    def connections(self) -> tuple[int, int]:
        """(connections accepted so far, connections open now)."""
        with self._lock:
            return self._accepted, len(self._connections)

    @property
    def bearer_tokens(self) -> list[str]:
        """The bearer token of each chat request in :attr:`requests` ("" for none)."""
        with self._lock:
            return list(self._bearers)

    @property
    def usages(self) -> list[JSONDict]:
        """The usage objects reported for answered requests, oldest first."""
        with self._lock:
            return list(self._usages)

    def reset(self) -> None:
        """Forget requests, rules, queue, faults and the prompt cache."""
        with self._lock:
            self._requests.clear()
            self._bearers.clear()
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

    def _record(self, body: JSONDict, authorization: str = "") -> None:
        with self._lock:
            self._requests.append(body)
            self._bearers.append(authorization.removeprefix("Bearer "))
            if self.record_to is not None:
                partial = self.record_to.with_name(self.record_to.name + ".partial")
                partial.write_text(json.dumps(body))
                partial.replace(self.record_to)

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
