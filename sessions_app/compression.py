"""Context compression and session split.

Near the context limit a conversation is compressed in three steps, all outside any
database transaction except the final split:

1. memory flush — one model call that sees the conversation with only the `memory` tool
   and saves durable facts (through the normal memory services, audit source `flush`);
2. summary — the middle of the conversation (between the protected head and the recent
   tail, never separating a tool call from its results) is summarised by the summary model
   into a structured handoff, updating the previous summary when there is one;
3. split — the old session ends with `end_reason='compression'` and a child session
   continues it: numbered title, a freshly frozen system prompt (so the flushed memory is
   in it), and the compressed message list (head and tail carried over, summary between).

A failure before the split changes nothing: the conversation goes on uncompressed, with a
notice and a cooldown. The task is idempotent: a session is claimed with a conditional
UPDATE and compresses at most once.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone
from django.utils.translation import gettext_lazy, ngettext

from accounts.language import speaking_to
from accounts.services import profile_get
from core.leases import Lease, LeaseBusy, LeaseLost, lease_heartbeat, lease_remaining
from core.realtime import notice_to_user, publish, session_group

from . import turn_claim
from .agent import llm
from .agent.extensions import memory_providers_for
from .agent.llm.cost import CallUsage
from .agent.offline_loop import run_offline_loop
from .agent.prompt import session_freeze_prompt
from .agent.tools import ToolContext, registry
from .billing import session_bill
from .branches import path_link_new_session
from .ending import session_end_notify
from .models import Message, Session
from .selectors import api_messages
from .thresholds import estimate_tokens, threshold_tokens

logger = logging.getLogger(__name__)

PROTECT_FIRST = 3
PROTECT_LAST = 6
MIN_TAIL = 2
FLUSH_MIN_USER_TURNS = 3
SUMMARY_PREFIX = (
    "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns of this conversation were compacted "
    "into the summary below. Use it as background only: answer the latest message after it; "
    "later messages win over anything here; your memory (MEMORY and USER PROFILE) remains "
    "authoritative; your tools still work."
)
SUMMARY_SUFFIX = (
    "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
)
FLUSH_INSTRUCTION = (
    "[Memory flush before compaction] The conversation above is about to be compacted. "
    "Save to memory, with the memory tool, anything durable you learned about this person "
    "that is not already there: preferences, corrections of your behaviour, personal "
    "details, their environment. Do not save task progress or details of the current task. "
    "If there is nothing worth keeping, reply 'Nothing to save.'"
)
#: What the tabs of a compressed conversation read (in the owner's language).
COMPRESSED_NOTICE = gettext_lazy("Earlier messages were compressed; the conversation continues.")
COMPRESSING_NOTICE = gettext_lazy("Compressing earlier messages…")
FAILED_NOTICE = gettext_lazy(
    "Couldn't compress earlier messages; the conversation continues uncompressed."
)
SUMMARY_SECTIONS = (
    "## Goal",
    "## Constraints & Preferences",
    "## Completed Actions",
    "## Active State",
    "## Key Decisions",
    "## Open Questions",
    "## Critical Context",
)


# --- choosing what to keep ------------------------------------------------------------------


@dataclass
class Plan:
    head: list[dict[str, Any]]
    middle: list[dict[str, Any]]
    tail: list[dict[str, Any]]
    previous_summary: str


def _is_summary(message: dict[str, Any]) -> bool:
    return str(message.get("content") or "").startswith(SUMMARY_PREFIX)


def plan_compression(messages: list[dict[str, Any]], *, tail_budget: int) -> Plan | None:
    """Split the conversation (without its system message) into head, middle and tail.

    The head is the first 3 messages, or nothing once the conversation has been compacted
    before (its previous summary seeds the new one). The tail is up to 6 recent messages
    within `tail_budget` tokens, always including the last user message and its reply, and
    never starting inside a tool-call group. None when there is nothing to compress.
    """
    previous = ""
    rest = list(messages)
    if rest and _is_summary(rest[0]):
        previous = summary_text(str(rest[0]["content"]))
        head: list[dict[str, Any]] = []
        rest = rest[1:]
    else:
        head = rest[:PROTECT_FIRST]
        rest = rest[PROTECT_FIRST:]
        # A head never ends inside a tool group: its results move along with it.
        while rest and rest[0]["role"] == "tool":
            head.append(rest.pop(0))

    start = len(rest)
    used = 0
    while start > 0 and len(rest) - start < PROTECT_LAST:
        cost = estimate_tokens([rest[start - 1]])
        if len(rest) - start >= MIN_TAIL and used + cost > tail_budget:
            break
        used += cost
        start -= 1
    last_user = max((i for i, m in enumerate(rest) if m["role"] == "user"), default=None)
    if last_user is not None:
        start = min(start, last_user)
    # Never begin the tail with tool results: include the call that produced them.
    while 0 < start < len(rest) and rest[start]["role"] == "tool":
        start -= 1
    middle, tail = rest[:start], rest[start:]
    if len(middle) < 2:
        return None
    return Plan(head=head, middle=middle, tail=tail, previous_summary=previous)


def repair_tool_pairs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool results without their call and calls without their results."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    out: list[dict[str, Any]] = []
    called: set[str] = set()
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = [c for c in m["tool_calls"] if c.get("id") in answered]
            m = (
                {**m, "tool_calls": calls}
                if calls
                else {k: v for k, v in m.items() if k != "tool_calls"}
            )
            if not calls and not m.get("content"):
                m["content"] = "(tool call removed)"
            called.update(c["id"] for c in calls)
        elif m["role"] == "tool" and m.get("tool_call_id") not in called:
            continue
        out.append(m)
    return out


# --- the summary ------------------------------------------------------------------------


def summary_text(text: str) -> str:
    """The summary without the handoff framing around it."""
    text = text.removeprefix(SUMMARY_PREFIX).strip()
    return text.removesuffix(SUMMARY_SUFFIX).strip()


def summary_content(summary: str) -> str:
    """A summary message's text: the summary inside the handoff framing (the inverse of
    summary_text)."""
    return f"{SUMMARY_PREFIX}\n\n{summary}\n\n{SUMMARY_SUFFIX}"


def _transcript(messages: list[dict[str, Any]]) -> str:
    lines = []
    for m in messages:
        content = str(m.get("content") or "")
        if len(content) > 6000:
            content = content[:4000] + "\n…[truncated]…\n" + content[-1500:]
        if m["role"] == "tool":
            lines.append(f"[TOOL RESULT {m.get('tool_call_id', '')}]: {content}")
        elif m["role"] == "assistant":
            calls = ", ".join(
                f"{c['function']['name']}({c['function']['arguments'][:1500]})"
                for c in m.get("tool_calls") or []
            )
            lines.append(f"[ASSISTANT]: {content}" + (f" [Tool calls: {calls}]" if calls else ""))
        else:
            lines.append(f"[{m['role'].upper()}]: {content}")
    return "\n\n".join(lines)[:160_000]


def summary_prompt(plan: Plan, *, provider_context: str) -> str:
    turns = _transcript(plan.middle)
    today = timezone.localdate().isoformat()
    parts = [
        "You are a summarisation agent. Write only the summary, in the language the user "
        "writes in. Replace any secret (API keys, passwords, tokens) with [REDACTED]. "
        f"Today is {today}; state finished actions in the past tense.",
    ]
    if plan.previous_summary:
        parts.append(
            "PREVIOUS SUMMARY:\n"
            + plan.previous_summary
            + "\n\nNEW TURNS TO INCORPORATE:\n"
            + turns
            + "\n\nUpdate the previous summary: keep what is still true, continue "
            "the numbering of completed actions, move finished items to done, and update "
            "the active task."
        )
    else:
        parts.append("TURNS TO SUMMARIZE:\n" + turns)
    if provider_context:
        parts.append(f"<memory-provider-context>\n{provider_context}\n</memory-provider-context>")
    parts.append(
        "Use exactly these headings, in order: " + ", ".join(SUMMARY_SECTIONS) + ". Under "
        "Completed Actions write numbered lines like '1. ACTION target — outcome [tool: "
        "name]'. Be concrete: names, paths, commands, numbers and decisions, not vague "
        "descriptions."
    )
    return "\n\n".join(parts)


def _summarise(
    plan: Plan, *, provider_context: str, entry: llm.ModelChoice
) -> tuple[str, llm.Usage]:
    completed = async_to_sync(llm.complete)(
        entry=entry,
        messages=[
            {"role": "user", "content": summary_prompt(plan, provider_context=provider_context)}
        ],
        temperature=0.2,
    )
    text = (completed.text or "").strip()
    if not text:
        raise llm.LLMError("bad_request", "The summary model returned an empty summary.")
    return text, completed.usage


def _flush_memory(
    session: Session, conversation: list[dict[str, Any]], *, entry: llm.ModelChoice
) -> tuple[list[str], llm.Usage]:
    """The pre-compression memory flush: what it saved, and what the call cost."""
    user_turns = sum(1 for m in conversation if m["role"] == "user")
    if user_turns < FLUSH_MIN_USER_TURNS or "memory" not in registry.names(["memory"]):
        return [], llm.Usage()
    if session.temporary or not profile_get(user=session.owner).memory_enabled:
        return [], llm.Usage()
    ctx = ToolContext(user=session.owner, session_id=session.pk, origin="flush")
    result = async_to_sync(run_offline_loop)(
        messages=[*conversation, {"role": "user", "content": FLUSH_INSTRUCTION}],
        ctx=ctx,
        allowed_tools={"memory"},
        max_iterations=4,
        entry=entry,
    )
    return [o.summary for o in result.tool_results if o.ok], result.usage


# --- the task body ------------------------------------------------------------------------


def next_title_in_lineage(*, owner: Any, title: str | None) -> str | None:
    """`Title` → `Title #2` → `Title #3`: the next free number among the owner's sessions."""
    if not title:
        return None
    base = re.sub(r" #\d+$", "", title)[:95]
    numbers = [1]
    for existing in Session.objects.filter(owner=owner, title__startswith=base).values_list(
        "title", flat=True
    ):
        if existing == base:
            continue
        found = re.fullmatch(re.escape(base) + r" #(\d+)", existing)
        if found:
            numbers.append(int(found.group(1)))
    return f"{base} #{max(numbers) + 1}"


def session_compress(*, session_id: str) -> str | None:
    """Compress and split the session; the continuation's id, or None if nothing was done.

    Safe to call twice: only the holder of the conversation's lease does the work, and a
    redelivered task takes over the lease of a compression whose process died. Raises
    LeaseBusy while another live compression holds it (the task retries after it).
    """
    session = Session.objects.select_related("owner", "system_prompt").filter(pk=session_id).first()
    if session is None or session.ended_at is not None:
        return None
    lease = turn_claim.acquire_for_compression(session_id=session_id)
    if lease is None:
        if turn_claim.is_compressing(session_id=session_id):
            raise LeaseBusy(lease_remaining(Session, session_id))
        return None  # a turn holds it: compression is scheduled again after that turn
    with lease_heartbeat(lease):
        return _compress_holding(session, lease)


def _compress_holding(session: Session, lease: Lease) -> str | None:
    """The compression proper. Call holding the conversation's compression lease."""
    # What the summary works on; messages saved while it runs (a user's message waits here)
    # move to the continuation at the split.
    upto = session.messages.aggregate(n=Max("id"))["n"] or 0
    try:
        prompt = session.system_prompt.prompt if session.system_prompt else ""
        conversation = api_messages(session_id=session.pk, system_prompt=prompt, upto=upto)[1:]
        tail_budget = int(threshold_tokens(session) * settings.HERMES_COMPRESSION_TAIL_RATIO)
        plan = plan_compression(conversation, tail_budget=tail_budget)
        if plan is None:  # too few messages between head and tail yet; try after next turn
            lease.release()
            return None
        with speaking_to(session.owner_id):
            text = str(COMPRESSING_NOTICE)
        publish(
            session_group(session.pk),
            {"type": "notice", "session": session.pk, "kind": "compressed", "text": text},
        )
        summary_model = llm.model_for("summary")
        # Each model call can take minutes: a holder that lost the lease meanwhile (another
        # process took the compression over) stops before writing anything more.
        lease.check()
        saved, flush_usage = _flush_memory(
            session, [{"role": "system", "content": prompt}, *conversation], entry=summary_model
        )
        lease.check()
        manager = memory_providers_for(session.owner)
        manager.initialize_all(
            session.pk,
            user=session.owner,
            user_id=session.owner_id,
            platform="web",
            agent_context="flush",
        )
        provider_context = manager.on_pre_compress(conversation)
        summary, usage = _summarise(plan, provider_context=provider_context, entry=summary_model)
        lease.check()
        # The flush and summary calls count toward the compressed conversation's usage.
        model, prices = summary_model.model_id, summary_model.prices
        session_bill(
            session_id=session.pk,
            calls=[
                CallUsage.of(model, flush_usage, prices=prices),
                CallUsage.of(model, usage, prices=prices),
            ],
        )
    except LeaseLost:
        logger.warning("compression of %s stopped: its lease was lost", session.pk)
        return None
    except llm.LLMError as exc:
        logger.warning("compression of %s failed: %s", session.pk, exc.message)
        _cooldown(lease, exc.message)
        with speaking_to(session.owner_id):
            text = str(FAILED_NOTICE)
        notice_to_user(
            user_id=session.owner_id, kind="compressed", session_id=session.pk, text=text
        )
        return None
    except Exception:
        logger.exception("compression of %s failed", session.pk)
        _cooldown(lease, "internal error")
        return None
    child = _split(
        session, plan, summary, usage, lease=lease, upto=upto, usage_model=summary_model.model_id
    )
    if child is None:
        return None
    session_freeze_prompt(session=child, provider_block=manager.system_prompt_block())
    manager.on_session_switch(child.pk, parent_session_id=session.pk)
    session_end_notify(session=session, messages=conversation)
    with speaking_to(session.owner_id):
        note = str(COMPRESSED_NOTICE)
        if saved:
            note = ngettext(
                "Earlier messages were compressed; the conversation continues. Saved to "
                "memory first: %(count)d entry.",
                "Earlier messages were compressed; the conversation continues. Saved to "
                "memory first: %(count)d entries.",
                len(saved),
            ) % {"count": len(saved)}
    publish(
        session_group(session.pk),
        {
            "type": "notice",
            "session": session.pk,
            "kind": "compressed",
            "text": note,
            "new_session": child.pk,
        },
    )
    return child.pk


def _cooldown(lease: Lease, error: str) -> None:
    lease.release(
        compression_cooldown_until=timezone.now()
        + timedelta(seconds=settings.HERMES_COMPRESSION_COOLDOWN),
        compression_failure_error=error[:300],
    )


def _split(
    session: Session,
    plan: Plan,
    summary: str,
    usage: llm.Usage,
    *,
    lease: Lease,
    upto: int,
    usage_model: str,
) -> Session | None:
    """End the session and open its continuation; None when the lease was lost meanwhile
    (another process took the compression over and does the split)."""
    summary_role = "user" if not plan.head or plan.head[-1]["role"] != "user" else "assistant"
    carried_head = repair_tool_pairs(plan.head)
    carried_tail = repair_tool_pairs(plan.tail)
    now = timezone.now()
    with transaction.atomic():
        # Ending the session and freeing its lease is one conditional UPDATE: only the
        # holder splits, and the continuation starts free.
        if not lease.release(ended_at=now, end_reason=Session.EndReason.COMPRESSION):
            logger.warning("compression of %s lost its lease; not splitting", session.pk)
            return None
        child = Session.objects.create(
            owner=session.owner,
            parent=session,
            source=session.source,
            model=session.model,
            model_config=session.model_config,
            title=next_title_in_lineage(owner=session.owner, title=session.title),
            title_source=session.title_source,
            started_at=now,
            last_activity_at=now,
            pinned=session.pinned,
        )
        rows = [_carried(child, m) for m in carried_head]
        rows.append(
            Message(
                session=child,
                role=summary_role,
                kind=Message.Kind.SUMMARY,
                content=summary_content(summary),
                model=usage_model,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                status=Message.Status.COMPLETE if summary_role == "assistant" else "",
            )
        )
        rows += [_carried(child, m) for m in carried_tail]
        # Messages written while the summary was made (a message sent meanwhile) continue
        # the conversation in the continuation, after the carried ones (ids give the order).
        later = list(Message.objects.filter(session=session, id__gt=upto).order_by("id"))
        for message in later:
            message.pk, message.session, message.parent = None, child, None
        Message.objects.bulk_create([*rows, *later])
        path_link_new_session(session_id=child.pk)
        Message.objects.filter(session=session, id__gt=upto).delete()
        Session.objects.filter(pk=session.pk).update(message_count=F("message_count") - len(later))
        Session.objects.filter(pk=child.pk).update(
            message_count=F("message_count") + len(rows) + len(later)
        )
    return child


def _carried(child: Session, m: dict[str, Any]) -> Message:
    return Message(
        session=child,
        role=m["role"],
        kind=Message.Kind.CARRIED,
        content=m.get("content") or "",
        tool_calls=m.get("tool_calls"),
        tool_call_id=m.get("tool_call_id", ""),
        tool_name=m.get("tool_name", ""),
        status=Message.Status.COMPLETE if m["role"] == "assistant" else "",
    )
