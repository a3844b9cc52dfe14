"""Streaming one model call of a chat turn to the session's tabs: numbered events, memory
fences scrubbed, deltas coalesced, and the text saved periodically while it grows."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from core.leases import Lease
from core.realtime import apublish, session_group
from sessions_app.agent.fence import StreamingContextScrubber

from .. import answers
from . import llm

logger = logging.getLogger(__name__)


@dataclass
class TurnEvents:
    """Numbers and publishes the events of one turn (clients detect gaps by `seq`).

    `listener`, when given, hears every event in this process first (the OpenAI-compatible
    endpoint answers its HTTP request from them), even if publishing then fails."""

    session_id: str
    listener: Callable[[dict[str, Any]], None] | None = None
    seq: itertools.count = field(default_factory=lambda: itertools.count(1))
    last_seq: int = 0

    async def emit(self, event: dict[str, Any]) -> None:
        self.last_seq = next(self.seq)
        event = {**event, "session": self.session_id, "seq": self.last_seq}
        if self.listener is not None:
            self.listener(event)
        await apublish(session_group(self.session_id), event)

    async def alive(self, message_id: int) -> None:
        """The heartbeat tabs watch: a tab that hears nothing for a while, or sees a `seq`
        past the last event it got (a lost `assistant.done`), asks for a snapshot."""
        await apublish(
            session_group(self.session_id),
            {
                "type": "turn.alive",
                "session": self.session_id,
                "seq": self.last_seq,
                "message_id": message_id,
            },
        )


@dataclass
class StreamState:
    """The assistant message being streamed: its id and the text so far."""

    message_id: int
    text: str = ""
    saved_at: float = field(default_factory=time.monotonic)
    #: The save of the text so far that is under way, if any (see _save_progress).
    saving: asyncio.Task[None] | None = None
    # Text received but not yet published: deltas that arrive within the coalescing window
    # go out as one event, which keeps a fast model from flooding sockets and the layer.
    unsent: str = ""
    sent_at: float = 0.0


def done_event(state: StreamState, result: llm.Completed | None, status: str) -> dict[str, Any]:
    """The `assistant.done` event; usage only when the message ends a model call."""
    usage = None
    if result is not None:
        u = result.usage
        usage = {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cached_tokens": u.cached_tokens,
            "reasoning_tokens": u.reasoning_tokens,
        }
    return {
        "type": "assistant.done",
        "message_id": state.message_id,
        "usage": usage,
        "status": status,
    }


async def stream_call(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    events: TurnEvents,
    state: StreamState,
    *,
    entry: llm.ModelChoice,
    lease: Lease,
) -> llm.Completed:
    """One streamed model call to ``entry`` into ``state``; raises LLMError (the text so far
    is kept), or LeaseLost as soon as another process holds ``lease``."""
    scrubber = StreamingContextScrubber()
    completed: llm.Completed | None = None
    stream = llm.stream_chat(
        messages=messages,
        tools=tools or None,
        max_tokens=settings.HERMES_REPLY_MAX_TOKENS,
        entry=entry,
    )
    try:
        async with contextlib.aclosing(stream):
            async for event in stream:
                lease.check()
                if isinstance(event, llm.TextDelta):
                    await _append(scrubber.feed(event.text), events, state)
                elif isinstance(event, llm.Completed):
                    completed = event
        await _append(scrubber.flush(), events, state, final=True)
        if state.saving is not None:
            # The close that follows comes after it on the database thread anyway.
            await asyncio.wait([state.saving])
    finally:
        # Whatever the user has not seen yet is still part of the answer (unless the answer
        # is now another process's).
        if not lease.lost.is_set():
            await _publish_unsent(events, state)
    assert completed is not None  # stream_chat always ends with Completed or raises
    return completed


async def _publish_unsent(events: TurnEvents, state: StreamState) -> None:
    if state.unsent:
        text, state.unsent = state.unsent, ""
        state.sent_at = time.monotonic()
        await events.emit({"type": "assistant.delta", "text": text, "message_id": state.message_id})


async def _append(
    text: str, events: TurnEvents, state: StreamState, *, final: bool = False
) -> None:
    if text:
        state.text += text
        state.unsent += text
    window = settings.HERMES_STREAM_COALESCE_MS / 1000
    if state.unsent and (final or time.monotonic() - state.sent_at >= window):
        await _publish_unsent(events, state)
    if text and time.monotonic() - state.saved_at >= settings.HERMES_STREAM_SAVE_INTERVAL:
        _save_progress(state)


def _save_progress(state: StreamState) -> None:
    """Save the text so far (what a crash would leave) without holding the stream up: the
    database thread works through every turn of the process in order, and a save queued
    behind other people's claims must not stall this person's answer. One save at a time
    per answer: while one is under way the next waits, and then takes all the text."""
    if state.saving is not None and not state.saving.done():
        return
    state.saved_at = time.monotonic()
    state.saving = asyncio.ensure_future(
        database_sync_to_async(answers.assistant_save_progress)(
            message_id=state.message_id, content=state.text
        )
    )
    state.saving.add_done_callback(_save_failed)


def _save_failed(task: asyncio.Task[None]) -> None:
    """A save that failed is logged; the answer goes on, and its close saves the text."""
    if not task.cancelled() and task.exception() is not None:
        logger.error("saving a streaming answer failed", exc_info=task.exception())
