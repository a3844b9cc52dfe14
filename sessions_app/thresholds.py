"""When a conversation needs compressing: the model's window, the threshold, the estimate of
the next prompt, and queuing the compression (the turn's preflight and after-turn hook).
Apart from compression.py so the turn's services can ask without importing the agent."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Subquery
from django.utils import timezone

from core.queue import task_send
from model_catalog.selectors import env_context_length

from .models import Message, Session
from .selectors import api_messages
from .session_model import session_model_choice


def context_length(session: Session) -> int:
    """The window of the session's model (its catalog entry, or for the environment's model
    HERMES_CONTEXT_LENGTH / the longest matching key of HERMES_CONTEXT_OVERRIDES)."""
    choice = session_model_choice(session)
    return choice.context_length if choice is not None else env_context_length(session.model)


def threshold_tokens(session: Session, *, window: int | None = None) -> int:
    """The compression threshold in tokens; `window`: the model's, when the caller knows it."""
    usable = (window or context_length(session)) - settings.HERMES_REPLY_MAX_TOKENS
    return max(1000, int(usable * settings.HERMES_COMPRESSION_THRESHOLD))


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """chars/4 plus 10 per message, counting tool calls (Hermes' rough estimate)."""
    total = 0
    for m in messages:
        total += len(str(m.get("content") or "")) // 4 + 10
        for call in m.get("tool_calls") or []:
            total += len(str(call.get("function", {}).get("arguments", ""))) // 4
    return total


def estimated_next_prompt(session: Session, *, after: Message | None = None) -> int:
    """Tokens the next call will send: the last real usage (prompt + reply), plus chars/4
    for anything written after that call (one query: the measured answer and what follows).

    `after`: the message about to be written at the tip of the selected path (or just
    written), its parent as read in this transaction; when that parent is the measured
    answer (a plain next message), no query."""
    parent = after.parent if after is not None else None
    if parent is not None and parent.role == Message.Role.ASSISTANT and parent.prompt_tokens > 0:
        newer = [{"content": after.content, "tool_calls": after.tool_calls}]
        return parent.prompt_tokens + parent.completion_tokens + estimate_tokens(newer)
    # A message not written yet is not in the rows read below: counted on its own.
    unsaved = estimate_tokens(
        [{"content": after.content, "tool_calls": after.tool_calls}]
        if after is not None and after._state.adding
        else []
    )
    measured = (
        session.messages.filter(role=Message.Role.ASSISTANT, prompt_tokens__gt=0, active=True)
        .order_by("-id")
        .values("id")[:1]
    )
    rows = list(
        Message.objects.filter(session_id=session.pk, active=True, id__gte=Subquery(measured))
        .order_by("id")
        .values("prompt_tokens", "completion_tokens", "content", "tool_calls")
    )
    if not rows:  # no call measured yet
        return estimate_tokens(api_messages(session_id=session.pk, system_prompt="")) + unsaved
    last, newer = rows[0], rows[1:]
    return last["prompt_tokens"] + last["completion_tokens"] + estimate_tokens(newer) + unsaved


def needs_compression(
    session: Session,
    *,
    after: Message | None = None,
    next_prompt: int | None = None,
    window: int | None = None,
) -> bool:
    if session.ended_at is not None:
        return False
    if session.compression_cooldown_until and session.compression_cooldown_until > timezone.now():
        return False
    if next_prompt is None:
        next_prompt = estimated_next_prompt(session, after=after)
    return next_prompt >= threshold_tokens(session, window=window)


def compression_schedule(
    *,
    session_id: str,
    session: Session | None = None,
    after: Message | None = None,
    next_prompt: int | None = None,
    window: int | None = None,
) -> bool:
    """Queue compression when the next prompt would pass the threshold. `session` and
    `after`: the conversation and the message just written, as already read and written in
    this transaction (the turn's preflight; see estimated_next_prompt). `next_prompt` and
    `window`: that prompt's size and the model's window, when the caller knows them (a turn
    that just saved its answer: no query at all)."""
    if session is None:
        session = Session.objects.filter(pk=session_id).first()
    if session is None or not needs_compression(
        session, after=after, next_prompt=next_prompt, window=window
    ):
        return False
    transaction.on_commit(lambda: task_send("sessions_app.compress_session", session_id))
    return True
