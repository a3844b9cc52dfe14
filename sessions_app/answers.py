"""The writes of a running turn: the recall fenced onto the user's message, the answer as it
streams and when it closes (with the conversation's counters, and its release at the end of
the turn), and the messages of a tool round."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Subquery
from django.utils import timezone

from core.leases import Lease

from . import branches
from .agent.llm.cost import CallUsage
from .billing import session_counters
from .models import Message, Session


def answer_placeholder(session: Session, now: datetime, parent: Message | None = None) -> Message:
    """A turn's answer, not written yet: "streaming" until the model's last word."""
    return Message(
        session=session,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        model=session.model,
        timestamp=now,
        parent=parent,
    )


def user_message_set_context(*, message_id: int, context_block: str) -> None:
    Message.objects.filter(pk=message_id).update(context_block=context_block)


def assistant_save_progress(*, message_id: int, content: str) -> None:
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(content=content)


def assistant_finish(
    *,
    message_id: int,
    content: str,
    status: str,
    usage: CallUsage | None,
    finish_reason: str = "",
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str = "",
    lease: Lease | None = None,
    streaming_only: bool = False,
) -> None:
    """Close an assistant message and add its model call to the session's counters: two
    UPDATEs in one transaction. With `lease` (the turn's, its final answer) the same
    session UPDATE frees the conversation; a lease lost meanwhile is left to its holder
    and the counters are written apart. With `streaming_only` an answer that is no longer
    streaming (closed already) is left as it was saved."""
    fields: dict[str, Any] = {
        "content": content,
        "status": status,
        "finish_reason": finish_reason,
        "tool_calls": tool_calls or None,
        "reasoning": reasoning,
    }
    counters: dict[str, Any] = {"last_activity_at": timezone.now()}
    if usage is not None:
        fields.update(
            model=usage.model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cost_usd=usage.cost_usd,
            token_count=usage.completion_tokens,
        )
        counters.update(session_counters([usage]))
    if tool_calls:
        counters["tool_call_count"] = F("tool_call_count") + len(tool_calls)
    message = Message.objects.filter(pk=message_id)
    with transaction.atomic():
        closing = message.filter(status=Message.Status.STREAMING) if streaming_only else message
        if not closing.update(**fields) and streaming_only:
            return
        if lease is None or not lease.release(**counters):
            Session.objects.filter(pk=Subquery(message.values("session_id"))).update(**counters)


def assistant_continue(*, session_id: str, model: str) -> Message:
    """A fresh streaming assistant message (of ``model``) after a round of tool calls."""
    with transaction.atomic():
        message = Message.objects.create(
            session_id=session_id,
            role=Message.Role.ASSISTANT,
            status=Message.Status.STREAMING,
            model=model,
            parent=branches.path_tip(session_id=session_id),
        )
        Session.objects.filter(pk=session_id).update(message_count=F("message_count") + 1)
    return message


def tool_message_add(
    *, session_id: str, tool_call_id: str, tool_name: str, content: str
) -> Message:
    with transaction.atomic():
        message = Message.objects.create(
            session_id=session_id,
            role=Message.Role.TOOL,
            tool_call_id=tool_call_id or "missing",
            tool_name=tool_name,
            content=content,
            parent=branches.path_tip(session_id=session_id),
        )
        Session.objects.filter(pk=session_id).update(message_count=F("message_count") + 1)
    return message
