"""Runs chat turns in the web process, independently of any socket.

A turn is an asyncio task keyed by session id. It publishes every event to the session's
channel group, so any number of tabs (on any process) follow it, and a closed tab changes
nothing: the answer finishes and is saved. Stop requests and resync requests reach the
task through a per-session control group (see control.py), so they work across processes.

One turn is three steps: prepare (prepare.py: the claim with the setup's reads, then
announce, memory providers, the frozen prompt, recall, the tools on offer), loop (stream a
model call; run its tool calls; again, until an answer without tool calls or the
tool-round limit) and finish (save the answer and free the conversation in one trip to the
database thread, with the after-turn checks; the providers learn the turn afterwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from accounts.language import asaid_to, aspeaking_to
from core.db.renew import renew_ageing
from core.exceptions import ServiceError, english, lazy_format
from core.leases import LeaseLost, lease_heartbeat_async
from core.logs import request_id_var
from core.realtime import RealtimeUnavailable

from .. import answers, selectors, services
from ..thresholds import compression_schedule
from . import llm
from .control import TurnControl, control_group, request_stop, request_sync, stop_when_lost
from .extensions import AfterTurn, after_turn_jobs
from .llm.cost import CallUsage
from .prepare import prepare, turn_open, turn_warm
from .stream import StreamState, TurnEvents, done_event, stream_call
from .tools import registry
from .turn import Setup, Turn

__all__ = [
    "begin_turn",
    "control_group",
    "launch_turn",
    "request_stop",
    "request_sync",
    "running_turns",
]

logger = logging.getLogger(__name__)

_running: dict[str, asyncio.Task[None]] = {}

#: The answer in place of one at the tool-round limit. Saved in English (the model reads it
#: back as its own words); the chat shows it in the person's language (views).
STOPPED_AFTER_TOOLS = _(
    "I stopped after %(rounds)s rounds of tool calls without reaching an answer. "
    "Tell me to continue if you want me to keep going."
)
INTERNAL_ERROR = _("Something went wrong on our side. Your message is saved; try again.")


def running_turns() -> dict[str, asyncio.Task[None]]:
    return dict(_running)


async def begin_turn(
    *,
    user: Any,
    session_id: str | None,
    text: str | None,
    regenerate: bool = False,
    temporary: bool = False,
    model: str | None = None,
    message_id: Any = None,
    on_wait: Callable[[], Awaitable[None]] | None = None,
) -> services.TurnStart:
    """Persist the user's message, then lease the conversation. Raises ServiceError on bad
    input, someone else's session or a turn already running.

    While the conversation is being compressed (or is compressed first because this message
    takes it past the threshold) the message is already saved: we wait for the compression
    (calling `on_wait` once), then answer it in the new continuation. After
    HERMES_COMPRESSION_WAIT the message stays saved and the error says so.
    """
    start = await database_sync_to_async(turn_open)(
        user=user,
        session_id=session_id,
        text=text,
        regenerate=regenerate,
        temporary=temporary,
        model=model,
        message_id=message_id,
    )
    if start.lease is not None:
        return start
    if on_wait is not None:
        await on_wait()
    deadline = time.monotonic() + settings.HERMES_COMPRESSION_WAIT
    while True:
        await asyncio.sleep(0.2)
        try:
            pending = await database_sync_to_async(turn_open)(
                user=user, session_id=start.session.pk, text=None, pending=True
            )
        except ServiceError as exc:
            if exc.code != "compressing":
                raise
            if time.monotonic() < deadline:
                continue
            raise ServiceError(
                "compressing",
                _(
                    "Earlier messages are still being compressed. Your message is saved: press "
                    "Regenerate in a moment to get the answer."
                ),
                session=start.session.pk,
            ) from None
        switched = session_id if session_id and session_id != pending.session.pk else None
        return dataclasses.replace(pending, created=start.created, switched_from=switched)


def launch_turn(
    start: services.TurnStart,
    *,
    user: Any,
    listener: Callable[[dict[str, Any]], None] | None = None,
) -> asyncio.Task[None]:
    """Run the turn as a task of its own (a closed socket or request does not stop it);
    `listener` hears each of its events in this process (see TurnEvents)."""
    # A context of its own, keeping only the log's request id: a turn started by an HTTP
    # request (openai_api) must not inherit the request's thread-sensitive context, whose
    # executor ends with the request while the turn goes on (asgiref refuses it then); so
    # its database work runs on the shared sync thread, as a websocket turn's does.
    context = contextvars.Context()
    context.run(request_id_var.set, request_id_var.get())
    task = asyncio.get_running_loop().create_task(
        _run_turn(start, user=user, listener=listener),
        name=f"turn:{start.session.pk}",
        context=context,
    )
    _running[start.session.pk] = task
    task.add_done_callback(lambda _t, sid=start.session.pk: _running.pop(sid, None))
    return task


async def _run_turn(
    start: services.TurnStart,
    *,
    user: Any,
    listener: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    events = TurnEvents(start.session.pk, listener=listener)
    control = TurnControl(start.session.pk, start.token)
    turn = Turn(start, user, events, StreamState(start.assistant_message.id), control)
    control.start(asyncio.current_task(), turn.events, lambda: turn.state)
    assert start.lease is not None
    heartbeat = turn.heartbeat = asyncio.get_running_loop().create_task(
        lease_heartbeat_async(start.lease, on_beat=lambda: turn.events.alive(turn.state.message_id))
    )
    heartbeat.add_done_callback(stop_when_lost(start.lease, asyncio.current_task()))
    setup: Setup | None = None
    answered = False
    try:
        setup = await prepare(turn)
        await control.listening()  # before the first delta a tab could stop
        answered = await _loop(turn, setup)
    except (asyncio.CancelledError, LeaseLost) as exc:
        # Lost: another process took the conversation over (this one stalled past the
        # lease), and its answer is the new holder's to close; write nothing more. The
        # heartbeat cancels the turn, and the turn checks the lease between its steps too, as
        # a cancellation can be absorbed on its way through the HTTP and database stacks.
        if start.lease.lost.is_set():
            logger.warning("turn in session %s stopped: its lease was lost", turn.session_id)
        else:
            await _close_unfinished(turn, status="interrupted", reason="stopped")
        if isinstance(exc, asyncio.CancelledError):
            raise
    except llm.LLMError as exc:
        await _close_unfinished(turn, status=_unfinished(turn), reason=exc.code.value)
        with contextlib.suppress(RealtimeUnavailable):
            with await aspeaking_to(turn.user.pk):
                said = exc.text
            await turn.events.emit({"type": "error", "code": exc.code.value, "message": said})
    except RealtimeUnavailable:
        # The channel layer (Valkey/Redis) went away: the tabs learn it from their socket
        # (see consumers), the answer keeps its text.
        logger.warning("channel layer lost during the turn in session %s", turn.session_id)
        await _close_unfinished(turn, status=_unfinished(turn), reason="realtime_unavailable")
    except Exception:
        logger.exception("chat turn failed in session %s", turn.session_id)
        if not turn.closed:  # else the answer is saved and only telling the tabs failed
            await _close_unfinished(turn, status=_unfinished(turn), reason="internal_error")
            with contextlib.suppress(RealtimeUnavailable):
                await turn.events.emit(
                    {
                        "type": "error",
                        "code": "internal_error",
                        "message": await asaid_to(turn.user.pk, INTERNAL_ERROR),
                    }
                )
    finally:
        heartbeat.cancel()
        await _release(turn, control, keep_listening=answered)
    try:
        if turn.closed and setup is not None:
            await _after_turn(turn, setup)
    finally:
        # After the hooks, which must not wait for it (they claim the conversation for
        # compression before a next turn does); meanwhile it ignores stop and sync.
        await control.stop()


def _unfinished(turn: Turn) -> str:
    """A broken-off answer with text is "interrupted" (the text stays), without "failed"."""
    return "interrupted" if turn.state.text else "failed"


# --- loop -------------------------------------------------------------------------------------


async def _loop(turn: Turn, setup: Setup) -> bool:
    """Model calls and tool rounds until a final answer (True) or the tool-round limit."""
    messages = setup.messages
    while True:
        if messages is None:
            messages = await database_sync_to_async(selectors.api_messages)(
                session_id=turn.session_id, system_prompt=setup.prompt
            )
        result = await stream_call(
            messages,
            setup.tools,
            turn.events,
            turn.state,
            entry=setup.model,
            lease=turn.start.lease,
        )
        turn.start.lease.check()  # nothing is written once another process holds the turn
        messages = None  # a next call sends what this one added: read again
        if not result.tool_calls:
            await _close(turn, setup, result)
            return True
        turn.tool_iterations += 1
        await _run_tools(turn, setup, result)
        turn.state = StreamState(await _next_message(turn, setup))
        if turn.tool_iterations >= settings.HERMES_MAX_TOOL_ITERATIONS:
            await _stop_after_tools(turn)
            return False


async def _run_tools(turn: Turn, setup: Setup, result: llm.Completed) -> None:
    """Save the assistant message that asked for the calls, then run each call in order,
    saving its result as a tool message and telling the tabs."""
    events, ctx = turn.events, setup.ctx
    await _finish_message(turn, setup, result, default_reason="tool_calls")
    ctx.message_id = turn.state.message_id
    for call in result.tool_calls:
        await events.emit(
            {
                "type": "tool.call",
                "name": call.name,
                "arguments": call.arguments,
                "call_id": call.id,
                # The answer the chip belongs under (it may have no text to stream).
                "message_id": turn.state.message_id,
            }
        )
        # Off the shared sync thread: a tool may wait (session_search waits for summaries) and
        # must not hold up every other turn's database work in this process meanwhile.
        outcome = await database_sync_to_async(registry.dispatch, thread_sensitive=False)(
            ctx, call.name, call.arguments, allowed=setup.allowed
        )
        message = await database_sync_to_async(answers.tool_message_add)(
            session_id=turn.session_id,
            tool_call_id=call.id,
            tool_name=call.name,
            content=outcome.content(),
        )
        with await aspeaking_to(turn.user.pk):
            # Said from the payload, as the stored chip is on a reload (views).
            chip = registry.chip_text(call.name, outcome.payload, call.arguments)
        await events.emit(
            {
                "type": "tool.result",
                "name": call.name,
                "ok": outcome.ok,
                "summary": chip,
                "call_id": call.id,
                "message_id": message.id,
            }
        )
        if outcome.notice:
            kind, text = outcome.notice
            await events.emit({"type": "notice", "kind": kind, "text": text})


async def _stop_after_tools(turn: Turn) -> None:
    """The tool-round limit: a short note in place of an answer (no model call)."""
    state = turn.state
    note = lazy_format(STOPPED_AFTER_TOOLS, rounds=turn.tool_iterations)
    state.text = english(note)
    await turn.events.emit({"type": "assistant.delta", "text": await asaid_to(turn.user.pk, note)})
    await database_sync_to_async(answers.assistant_finish)(
        message_id=state.message_id,
        content=state.text,
        status="complete",
        usage=None,
        finish_reason="tool_limit",
    )
    await turn.events.emit(done_event(state, None, "complete"))


async def _next_message(turn: Turn, setup: Setup) -> int:
    message = await database_sync_to_async(answers.assistant_continue)(
        session_id=turn.session_id, model=setup.model.model_id
    )
    return message.id


async def _finish_message(
    turn: Turn, setup: Setup, result: llm.Completed, *, default_reason: str = "stop"
) -> None:
    """Close the streamed message with the call's usage (and its tool calls, if any)."""
    await database_sync_to_async(answers.assistant_finish)(
        **_finished(turn, setup, result, default_reason=default_reason)
    )


def _finished(
    turn: Turn, setup: Setup, result: llm.Completed, *, default_reason: str = "stop"
) -> dict[str, Any]:
    """`answers.assistant_finish`'s arguments for the message a model call completed."""
    return {
        "message_id": turn.state.message_id,
        "content": turn.state.text,
        "status": "complete",
        "usage": CallUsage.of(
            result.model or setup.model.model_id, result.usage, prices=setup.model.prices
        ),
        "finish_reason": result.finish_reason or default_reason,
        "tool_calls": [call.to_message() for call in result.tool_calls] or None,
        "reasoning": result.reasoning,
    }


async def _close(turn: Turn, setup: Setup, result: llm.Completed) -> None:
    """The final answer: one trip to the database thread saves it and frees the conversation
    in the same transaction; then the tabs hear `assistant.done` (a tab that sends at once
    finds the conversation free). The heartbeat and the stop and sync requests stand down
    first: from here on they are the next turn's (a tab whose sync goes unanswered meanwhile
    hears `assistant.done`, or `session.idle` when it asks again)."""
    assert turn.heartbeat is not None and turn.start.lease is not None
    turn.heartbeat.cancel()
    turn.control.hand_over()
    await database_sync_to_async(answers.assistant_finish)(
        **_finished(turn, setup, result), lease=turn.start.lease
    )
    turn.closed = True
    turn.final_usage = result.usage
    await turn.events.emit(done_event(turn.state, result, "complete"))


# --- finish -----------------------------------------------------------------------------------


async def _close_unfinished(turn: Turn, *, status: str, reason: str) -> None:
    """Save what was streamed so far; never lose text the user already saw. A closed answer
    (see _close) stays as it was saved, also when the close's trip was still under way as
    the turn was cancelled (the database has the last word: only a streaming answer is
    written)."""
    if turn.closed:
        return
    state = turn.state
    try:
        await database_sync_to_async(answers.assistant_finish)(
            message_id=state.message_id,
            content=state.text,
            status=status,
            usage=None,
            finish_reason=reason,
            streaming_only=True,
        )
    except Exception:
        logger.exception("could not save the unfinished answer %s", state.message_id)
    with contextlib.suppress(RealtimeUnavailable):
        await turn.events.emit(done_event(state, None, status))


async def _release(turn: Turn, control: TurnControl, *, keep_listening: bool) -> None:
    """Free the conversation (unless the closed answer did); the listener stays for the
    after-turn hooks only if asked."""
    # Release first, before any other await: the next turn's claim (a tab that sends
    # as soon as it sees assistant.done) queues behind it on the database thread.
    control.hand_over()
    assert turn.start.lease is not None
    if not turn.closed:
        await database_sync_to_async(turn.start.lease.release)()
    if not keep_listening:
        await control.stop()


async def _after_turn(turn: Turn, setup: Setup) -> None:
    """After a final answer was saved and the tabs told; none of it delays the user. With
    memory on the providers learn the turn in the background; then one trip to the database
    thread queues compression when the answer's call measured the conversation past the
    threshold and runs the after-turn jobs (those of a turn with memory on: the skill and
    memory review); last, a database connection near its age limit is replaced there,
    rather than at the start of the person's next turn (at most once per connection age:
    a claim that arrives meanwhile waits the few milliseconds of the new connection and
    its warm-up, as every turn after an ageing connection did before)."""
    if setup.memory_on:
        session_id, user_text = turn.session_id, turn.user_text
        manager = setup.manager
        manager.in_background("sync_turn", user_text, turn.state.text, session_id=session_id)
        manager.in_background("queue_prefetch", user_text, session_id=session_id)
    usage = turn.final_usage
    await database_sync_to_async(_after_turn_checks)(
        session=turn.start.session,
        # The answer's call measured the conversation so far: the next prompt is its prompt
        # and this answer (unless the model reported no usage: then it is estimated).
        next_prompt=usage.prompt_tokens + usage.completion_tokens
        if usage is not None and usage.prompt_tokens
        else None,
        window=setup.model.context_length,
        tool_iterations=turn.tool_iterations,
        jobs=after_turn_jobs() if setup.memory_on else [],
        user=turn.user,
    )


def _after_turn_checks(
    *,
    session: Any,
    next_prompt: int | None,
    window: int,
    tool_iterations: int,
    jobs: list[tuple[str, AfterTurn]],
    user: Any,
) -> None:
    """Queue the compression if the next prompt would pass the threshold (no query when the
    answer's usage says how big it is), then run the after-turn jobs; a failure of one is
    logged and does not stop the others. Then an ageing connection is renewed, warmed with
    the reads of this person's next turn (core.db.renew)."""
    try:
        compression_schedule(
            session_id=session.pk, session=session, next_prompt=next_prompt, window=window
        )
    except Exception:
        logger.exception("could not schedule compression for %s", session.pk)
    for name, job in jobs:
        try:
            job(session_id=session.pk, tool_iterations=tool_iterations, memory_enabled=True)
        except Exception:
            logger.exception("after-turn job %s failed for %s", name, session.pk)
    renew_ageing(warm=lambda: turn_warm(user=user, session_id=session.pk))
