"""The conversation inspector (/chat/<session>/inspect/): "why did it say that?".

For one part of a conversation it shows the frozen system prompt and exactly which memory
entries and skills it included, then turn by turn the recalled memory that was fenced into
the user's message (and where recall comes from), the tool calls with their arguments and
results, the model and usage of every call, what the agent wrote to memory during the
conversation, and — around a compression — what the flush saved and the summary the next
part continues from. Owner-only: another person's conversation is a 404.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from . import services
from .agent.extensions import inspector_context
from .compression import summary_text
from .lineage import compression_chain
from .models import Message, Session

#: Tool results longer than this are cut in the page (the whole text is in the export).
RESULT_CHARS = 4000


@dataclass
class ToolCall:
    name: str
    arguments: str
    result: str
    truncated: bool
    ok: bool


@dataclass
class Step:
    """One model call's answer and the tool calls it made."""

    message: Message
    calls: list[ToolCall]


@dataclass
class Turn:
    user: Message | None
    steps: list[Step] = field(default_factory=list)


def _pretty(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except ValueError:
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)


def _turns(messages: list[Message]) -> tuple[list[Message], Message | None, list[Turn]]:
    """(carried messages, the summary message, turns) of one session's messages."""
    from .agent.tools import tool_failed

    results = {m.tool_call_id: m for m in messages if m.role == Message.Role.TOOL}
    carried = [m for m in messages if m.kind == Message.Kind.CARRIED]
    summary = next((m for m in messages if m.kind == Message.Kind.SUMMARY), None)
    turns: list[Turn] = []
    for m in messages:
        if m.kind in (Message.Kind.CARRIED, Message.Kind.SUMMARY):
            continue
        if m.role == Message.Role.USER:
            turns.append(Turn(user=m))
            continue
        if m.role in (Message.Role.TOOL, Message.Role.SYSTEM):
            continue
        if not turns:
            turns.append(Turn(user=None))
        calls = []
        for call in m.tool_calls or []:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            result = results.get(call.get("id")) if isinstance(call, dict) else None
            text = result.content if result else ""
            calls.append(
                ToolCall(
                    name=str(fn.get("name", "tool")),
                    arguments=_pretty(fn.get("arguments", "")),
                    result=text[:RESULT_CHARS],
                    truncated=len(text) > RESULT_CHARS,
                    ok=bool(result) and not tool_failed(text),
                )
            )
        turns[-1].steps.append(Step(m, calls))
    return carried, summary, turns


def inspect_context(*, user: Any, session: Session) -> dict[str, Any]:
    # The selected path: what the model saw for the answers shown in the chat.
    messages = list(session.messages.filter(active=True).order_by("id"))
    carried, summary, turns = _turns(messages)
    chain = compression_chain(session)
    index = next((i for i, s in enumerate(chain) if s.pk == session.pk), 0)
    continuation = chain[index + 1] if index + 1 < len(chain) else None
    next_summary = (
        continuation.messages.filter(kind=Message.Kind.SUMMARY).first() if continuation else None
    )
    return {
        # Memory (entries, snapshots, writes, flush, recall) and skills, from their apps.
        **inspector_context(user=user, session=session, turns=turns),
        "session": session,
        "chain": chain,
        "part": index + 1,
        "continuation": continuation,
        "previous": chain[index - 1] if index > 0 else None,
        "prompt": session.system_prompt.prompt if session.system_prompt_id else "",
        "prompt_hash": session.system_prompt_id or "",
        "shared_prompt": (
            Session.objects.filter(owner=user, system_prompt_id=session.system_prompt_id)
            .exclude(pk=session.pk)
            .count()
            if session.system_prompt_id
            else 0
        ),
        "turns": turns,
        "other_branches": session.messages.filter(active=False).count(),
        "carried": carried,
        "summary": summary_text(summary.content) if summary else "",
        "summary_message": summary,
        "next_summary": summary_text(next_summary.content) if next_summary else "",
        "recall_count": sum(1 for t in turns if t.user and t.user.context_block),
    }


@login_required
@require_GET
def session_inspect(request: HttpRequest, session_id: str) -> HttpResponse:
    session = services.access_session(user=request.user, session_id=session_id)
    return render(
        request, "chat/inspector.html", inspect_context(user=request.user, session=session)
    )
