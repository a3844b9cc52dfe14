"""Runs chat turns in the web process, independently of any socket.

A turn is an asyncio task keyed by session id. It publishes every event to the session's
channel group, so any number of tabs (on any process) follow it, and a closed tab changes
nothing: the answer finishes and is saved. Stop requests and resync requests reach the
task through a per-session control group, so they work across processes too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from accounts.services import profile_get
from core.exceptions import ServiceError
from core.realtime import apublish, session_group
from memory.fence import StreamingContextScrubber
from memory.providers import MemoryManager

from .. import selectors, services
from ..models import Message
from . import llm
from .prompt import session_freeze_prompt, tool_names_for, uses_memory
from .tools import ToolContext, ToolResult, TurnState, registry

logger = logging.getLogger(__name__)

_running: dict[str, asyncio.Task[None]] = {}

STOPPED_AFTER_TOOLS = (
    "I stopped after {n} rounds of tool calls without reaching an answer. "
    "Tell me to continue if you want me to keep going."
)


def control_group(session_id: str) -> str:
    """Where stop and resync requests for a running turn are sent."""
    return f"turnctl.{session_id}"


async def request_stop(session_id: str) -> None:
    await get_channel_layer().group_send(control_group(session_id), {"type": "turn.stop"})


async def request_sync(session_id: str, reply_channel: str) -> None:
    await get_channel_layer().group_send(
        control_group(session_id), {"type": "turn.sync", "reply_to": reply_channel}
    )


def running_turns() -> dict[str, asyncio.Task[None]]:
    return dict(_running)


@dataclass
class TurnEvents:
    """Numbers and publishes the events of one turn (clients detect gaps by `seq`)."""

    session_id: str
    seq: itertools.count = field(default_factory=lambda: itertools.count(1))
    last_seq: int = 0

    async def emit(self, event: dict[str, Any]) -> None:
        self.last_seq = next(self.seq)
        event = {**event, "session": self.session_id, "seq": self.last_seq}
        await apublish(session_group(self.session_id), event)


@dataclass
class StreamState:
    message_id: int
    text: str = ""
    saved_at: float = field(default_factory=time.monotonic)
    # Text received but not yet published: deltas that arrive within the coalescing window
    # go out as one event, which keeps a fast model from flooding sockets and the layer.
    unsent: str = ""
    sent_at: float = 0.0


async def begin_turn(
    *,
    user: Any,
    session_id: str | None,
    text: str | None,
    regenerate: bool = False,
    temporary: bool = False,
    on_wait: Callable[[], Awaitable[None]] | None = None,
) -> services.TurnStart:
    """Check and persist (the user's message first), claim the conversation. Raises
    ServiceError on bad input, someone else's session or a turn already running.

    While the conversation is being compressed the message waits (calling `on_wait` once)
    and then goes to the new continuation.
    """
    deadline = time.monotonic() + settings.HERMES_COMPRESSION_WAIT
    waited = False
    while True:
        try:
            return await database_sync_to_async(services.turn_begin)(
                user=user,
                session_id=session_id,
                text=text,
                regenerate=regenerate,
                temporary=temporary,
            )
        except ServiceError as exc:
            if exc.code != "compressing" or time.monotonic() > deadline:
                raise
            if on_wait is not None and not waited:
                await on_wait()
            waited = True
            await asyncio.sleep(0.5)


def launch_turn(start: services.TurnStart, *, user: Any) -> asyncio.Task[None]:
    task = asyncio.get_running_loop().create_task(
        _run_turn(start, user=user), name=f"turn:{start.session.pk}"
    )
    _running[start.session.pk] = task
    task.add_done_callback(lambda _t, sid=start.session.pk: _running.pop(sid, None))
    return task


async def _run_turn(start: services.TurnStart, *, user: Any) -> None:
    session = start.session
    events = TurnEvents(session.pk)
    state = StreamState(start.assistant_message.id)
    joined, ending = asyncio.Event(), asyncio.Event()
    control = asyncio.get_running_loop().create_task(
        _listen(
            session.pk, asyncio.current_task(), events, lambda: state, start.token, joined, ending
        )
    )
    manager = MemoryManager.for_user(user)
    completed = False
    user_text = start.user_message.content if start.user_message else ""
    tool_iterations = 0
    try:
        if start.created:
            await events.emit({"type": "session.started", "title": session.title})
        if start.switched_from:
            # The tab still shows the compressed part; tell it where the chat went on.
            await apublish(
                session_group(session.pk),
                {
                    "type": "notice",
                    "session": start.switched_from,
                    "kind": "compressed",
                    "text": "Earlier messages were compressed; the conversation continues.",
                    "new_session": session.pk,
                },
            )
        profile = await database_sync_to_async(profile_get)(user=user)
        await sync_to_async(manager.initialize_all, thread_sensitive=False)(
            session.pk,
            user=user,
            user_id=user.pk,
            platform="web",
            agent_context="primary",
            parent_session_id=session.parent_id or "",
        )
        prompt = await _frozen_prompt(session, manager)
        if start.user_message is not None and uses_memory(session, profile):
            # Time-boxed like prefetch; providers learn which message this turn answers.
            await manager.turn_start(
                await database_sync_to_async(
                    Message.objects.filter(session_id=session.pk, role=Message.Role.USER).count
                )(),
                user_text,
                message_id=start.user_message.id,
                session_id=session.pk,
            )
            fence, _sources = await manager.prefetch_context(user_text, session_id=session.pk)
            if fence:
                await database_sync_to_async(services.user_message_set_context)(
                    message_id=start.user_message.id, context_block=fence
                )
        tool_names = tool_names_for(session=session, profile=profile)
        tools = registry.schemas(tool_names) + (
            manager.tool_schemas() if uses_memory(session, profile) else []
        )
        ctx = ToolContext(user=user, session_id=session.pk, origin="tool", turn=TurnState())
        while True:
            messages = await database_sync_to_async(selectors.api_messages)(
                session_id=session.pk, system_prompt=prompt
            )
            result = await _stream_call(messages, tools, events, state)
            if not result.tool_calls:
                await database_sync_to_async(services.assistant_finish)(
                    message_id=state.message_id,
                    content=state.text,
                    status="complete",
                    usage=_usage(result),
                    finish_reason=result.finish_reason or "stop",
                    reasoning=result.reasoning,
                )
                await events.emit(_done(state, result, "complete"))
                completed = True
                break
            tool_iterations += 1
            await _run_tools(result, ctx, manager, set(tool_names), events, state)
            if tool_iterations >= settings.HERMES_MAX_TOOL_ITERATIONS:
                state.message_id = (
                    await database_sync_to_async(services.assistant_continue)(session_id=session.pk)
                ).id
                state.text = STOPPED_AFTER_TOOLS.format(n=tool_iterations)
                await events.emit({"type": "assistant.delta", "text": state.text})
                await database_sync_to_async(services.assistant_finish)(
                    message_id=state.message_id,
                    content=state.text,
                    status="complete",
                    usage=None,
                    finish_reason="tool_limit",
                )
                await events.emit(_done(state, None, "complete"))
                break
            state = StreamState(
                (
                    await database_sync_to_async(services.assistant_continue)(session_id=session.pk)
                ).id
            )
    except asyncio.CancelledError:
        await _close_unfinished(state, events, status="interrupted", reason="stopped")
        raise
    except llm.LLMError as exc:
        status = "interrupted" if state.text else "failed"
        await _close_unfinished(state, events, status=status, reason=exc.code)
        await events.emit({"type": "error", "code": exc.code, "message": exc.message})
    except Exception:
        logger.exception("chat turn failed in session %s", session.pk)
        await _close_unfinished(state, events, status="failed", reason="internal_error")
        await events.emit(
            {
                "type": "error",
                "code": "internal_error",
                "message": "Something went wrong on our side. Your message is saved; try again.",
            }
        )
    finally:
        # Release first, before any other await: the next turn's claim (a tab that sends
        # as soon as it sees assistant.done) queues behind it on the database thread.
        ending.set()
        await database_sync_to_async(services.turn_release)(
            session_id=session.pk, token=start.token
        )
        if not completed:
            await _stop_listening(session.pk, start.token, control, joined)
    try:
        if completed:
            await _after_turn(
                session.pk,
                user_text,
                state.text,
                manager if uses_memory(session, profile) else None,
                tool_iterations,
            )
    finally:
        # After the hooks, which must not wait for it (they claim the conversation for
        # compression before a next turn does); meanwhile it ignores stop and sync.
        await _stop_listening(session.pk, start.token, control, joined)


async def _frozen_prompt(session: Any, manager: MemoryManager) -> str:
    if session.system_prompt_id:
        prompt = await database_sync_to_async(lambda: session.system_prompt.prompt)()
        return prompt
    block = await sync_to_async(manager.system_prompt_block, thread_sensitive=False)()
    return await database_sync_to_async(session_freeze_prompt)(
        session=session, provider_block=block
    )


async def _stream_call(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    events: TurnEvents,
    state: StreamState,
) -> llm.Completed:
    scrubber = StreamingContextScrubber()
    completed: llm.Completed | None = None
    stream = llm.stream_chat(
        messages=messages, tools=tools or None, max_tokens=settings.HERMES_REPLY_MAX_TOKENS
    )
    try:
        async with contextlib.aclosing(stream):
            async for event in stream:
                if isinstance(event, llm.TextDelta):
                    await _append(scrubber.feed(event.text), events, state)
                elif isinstance(event, llm.Completed):
                    completed = event
        await _append(scrubber.flush(), events, state, final=True)
    finally:
        # Whatever the user has not seen yet is still part of the answer.
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
        state.saved_at = time.monotonic()
        await database_sync_to_async(services.assistant_save_progress)(
            message_id=state.message_id, content=state.text
        )


async def _run_tools(
    result: llm.Completed,
    ctx: ToolContext,
    manager: MemoryManager,
    allowed: set[str],
    events: TurnEvents,
    state: StreamState,
) -> None:
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in result.tool_calls
    ]
    await database_sync_to_async(services.assistant_finish)(
        message_id=state.message_id,
        content=state.text,
        status="complete",
        usage=_usage(result),
        finish_reason=result.finish_reason or "tool_calls",
        tool_calls=calls,
        reasoning=result.reasoning,
    )
    ctx.message_id = state.message_id
    for call in result.tool_calls:
        await events.emit(
            {
                "type": "tool.call",
                "name": call.name,
                "arguments": call.arguments,
                "call_id": call.id,
            }
        )
        outcome = await _dispatch(ctx, manager, allowed, call)
        message = await database_sync_to_async(services.tool_message_add)(
            session_id=ctx.session_id,
            tool_call_id=call.id,
            tool_name=call.name,
            content=outcome.content(),
        )
        await events.emit(
            {
                "type": "tool.result",
                "name": call.name,
                "ok": outcome.ok,
                "summary": outcome.summary,
                "call_id": call.id,
                "message_id": message.id,
            }
        )
        if outcome.notice:
            kind, text = outcome.notice
            await events.emit({"type": "notice", "kind": kind, "text": text})


async def _dispatch(
    ctx: ToolContext, manager: MemoryManager, allowed: set[str], call: llm.ToolCall
) -> ToolResult:
    if manager.handles_tool(call.name):
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            args = {}
        text = await sync_to_async(manager.handle_tool_call, thread_sensitive=False)(
            call.name, args if isinstance(args, dict) else {}
        )
        return ToolResult(ok=True, payload={"result": text}, summary=f"{call.name} answered")
    # Off the shared sync thread: a tool may wait (session_search waits for summaries) and
    # must not hold up every other turn's database work in this process meanwhile.
    return await database_sync_to_async(registry.dispatch, thread_sensitive=False)(
        ctx, call.name, call.arguments, allowed=allowed
    )


def _usage(result: llm.Completed | None) -> services.CallUsage | None:
    if result is None:
        return None
    u = result.usage
    return services.CallUsage(
        model=result.model or settings.HERMES_MODEL,
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        cached_tokens=u.cached_tokens,
        reasoning_tokens=u.reasoning_tokens,
        cost_usd=llm.estimate_cost(result.model or settings.HERMES_MODEL, u),
    )


def _done(state: StreamState, result: llm.Completed | None, status: str) -> dict[str, Any]:
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


async def _close_unfinished(
    state: StreamState, events: TurnEvents, *, status: str, reason: str
) -> None:
    """Save what was streamed so far; never lose text the user already saw."""
    try:
        await database_sync_to_async(services.assistant_finish)(
            message_id=state.message_id,
            content=state.text,
            status=status,
            usage=None,
            finish_reason=reason,
        )
        await events.emit(_done(state, None, status))
    except Exception:
        logger.exception("could not save the unfinished answer %s", state.message_id)


async def _stop_listening(
    session_id: str, token: str, control: asyncio.Task[None], joined: asyncio.Event
) -> None:
    """End the turn's control listener with a message instead of cancel() once it is
    waiting in receive(): channels_redis lets one waiter per process pop for all of the
    process's channels, and cancelling it mid-pop drops a message meant for another tab."""
    if joined.is_set() and not control.done():
        with contextlib.suppress(Exception):
            await get_channel_layer().group_send(
                control_group(session_id), {"type": "turn.end", "token": token}
            )
            await asyncio.wait_for(asyncio.shield(control), timeout=2)
    control.cancel()


async def _listen(
    session_id: str,
    turn: asyncio.Task[Any] | None,
    events: TurnEvents,
    current: Callable[[], StreamState],
    token: str = "",
    joined: asyncio.Event | None = None,
    ending: asyncio.Event | None = None,
) -> None:
    layer = get_channel_layer()
    # The default prefix, like the consumers' channels: channels_redis reads every
    # process-local channel through one lock, and a waiter on another prefix ("turn.")
    # holds it on a different Redis list, so this process's tabs got no deltas until the
    # turn ended.
    channel = await layer.new_channel()
    group = control_group(session_id)
    await layer.group_add(group, channel)
    if joined is not None:
        joined.set()
    try:
        while True:
            message = await layer.receive(channel)
            if message.get("type") == "turn.end":
                if message.get("token") == token:
                    return  # this turn is over (a later turn's listener ignores it)
            elif ending is not None and ending.is_set():
                continue  # stop and sync requests now belong to the next turn
            elif message.get("type") == "turn.stop" and turn is not None:
                turn.cancel()
            elif message.get("type") == "turn.sync" and message.get("reply_to"):
                state = current()
                await layer.send(
                    message["reply_to"],
                    {
                        "type": "client.event",
                        "event": {
                            "type": "session.snapshot",
                            "session": session_id,
                            "message_id": state.message_id,
                            # Unsent text follows as the next delta, after this seq.
                            "text": state.text[: len(state.text) - len(state.unsent)],
                            "seq": events.last_seq,
                            "status": Message.Status.STREAMING,
                        },
                    },
                )
    finally:
        with contextlib.suppress(Exception):
            await layer.group_discard(group, channel)


async def _after_turn(
    session_id: str,
    user_text: str,
    answer: str,
    manager: MemoryManager | None,
    tool_iterations: int,
) -> None:
    """Hooks after a final answer was saved; none of them delays the user. Without a
    manager (memory off, temporary chat) nothing learns from the turn."""
    from skills_app.services import review_after_turn

    try:
        await database_sync_to_async(services.compression_schedule)(session_id=session_id)
    except Exception:
        logger.exception("could not schedule compression for %s", session_id)

    if manager is None:
        return
    manager.in_background("sync_turn", user_text, answer, session_id=session_id)
    manager.in_background("queue_prefetch", user_text, session_id=session_id)
    try:
        await database_sync_to_async(review_after_turn)(
            session_id=session_id, tool_iterations=tool_iterations
        )
    except Exception:
        logger.exception("could not schedule the background review for %s", session_id)
