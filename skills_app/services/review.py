"""The background review: after a busy turn, a fresh model context looks back over the
conversation and decides whether it taught something worth keeping as a skill or a memory.

Flow: the chat turn runs `review_after_turn` after each final answer (an after-turn job this
app registers, sessions_app/agent/extensions.py). It counts tool
iterations (for skills) and user turns (for memory) per session; when either passes its
setting it records a `ReviewRun` keyed by (session, last message) and queues the Celery
task on commit. The task (`review_run_execute`) claims the run with a conditional UPDATE,
builds the reviewer's messages from the persisted conversation, and runs the offline tool
loop with only the memory and skill tools. Nothing the reviewer says is stored in the
transcript; its changes are skill revisions authored "review" and memory writes, each
announced to the user's open tabs as a `notice`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts.language import speaking_to
from core.leases import (
    Lease,
    lease_acquire,
    lease_heartbeat,
    raise_if_held,
)
from core.queue import task_send
from core.realtime import notice_to_user
from model_catalog.selectors import ENV_REF
from sessions_app.agent import llm
from sessions_app.agent.offline_loop import OfflineLoopResult, run_offline_loop
from sessions_app.agent.tools import ToolContext, registry
from sessions_app.models import Message, Session
from sessions_app.session_model import session_entry

from ..models import ReviewRun, SessionSkillState

logger = logging.getLogger(__name__)

REVIEW_TOOLS = ("memory", "skills_list", "skill_view", "skill_manage")
RECENT_MESSAGES = 24
DIGEST_USER_CHARS = 300
DIGEST_ASSISTANT_CHARS = 200
TOOL_RESULT_CHARS = 2000

SKILL_PROMPT_START = "Review the conversation above and update the skill library"
MEMORY_PROMPT_START = "Review the conversation above and consider saving to memory"

SKILL_PROMPT = (
    SKILL_PROMPT_START + ". Be ACTIVE: most busy conversations teach something reusable.\n\n"
    "What counts: a correction of your style or workflow by the user, a technique or "
    "sequence of steps that worked, or a skill you loaded that turned out wrong or "
    "incomplete.\n\n"
    "In order of preference:\n"
    "1. Patch a skill that was used in this conversation (skill_manage action=patch).\n"
    "2. Patch a broader umbrella skill that covers the topic.\n"
    "3. Add a supporting file (references/, templates/, scripts/) to an existing skill and "
    "point to it from its SKILL.md.\n"
    "4. Create a new skill — class-level and reusable (e.g. 'k8s-storage', not named after "
    "one ticket, pull request, error message or task).\n\n"
    "Always skill_view a skill before changing it. Pinned and team skills are not yours to "
    "change.\n\n"
    "Do NOT capture: environment or network failures, claims that a tool does not work, "
    "transient errors, a narrative of this one task, or problems that were never "
    "solved.\n\n"
    "If nothing is worth keeping, reply exactly 'Nothing to save.'"
)
MEMORY_PROMPT = (
    MEMORY_PROMPT_START + " if appropriate.\n\n"
    "Focus on:\n"
    "1. Who the user is: persona, preferences, personal details that matter in future "
    "sessions.\n"
    "2. How the user wants you to work: behaviour and work-style expectations they stated "
    "or corrected.\n\n"
    "Write declarative facts ('User prefers concise answers'), only what stays true across "
    "sessions; consolidate related entries instead of adding near-duplicates. Procedures "
    "belong in skills, not memory.\n\n"
    "If nothing qualifies, reply 'Nothing to save.'"
)
TOOLS_SUFFIX = (
    "You can only call memory and skill management tools. Other tools will be denied at "
    "runtime — do not attempt them."
)
REVIEWER_SYSTEM = (
    "You are the background reviewer of a personal assistant called Hermes. You look back "
    "over a finished conversation and keep what is worth keeping in the assistant's skill "
    "library and memory. You do not talk to the user."
)


def review_prompt(kind: str) -> str:
    if kind == ReviewRun.Kind.COMBINED:
        body = SKILL_PROMPT + "\n\nAlso: " + MEMORY_PROMPT
    elif kind == ReviewRun.Kind.MEMORY:
        body = MEMORY_PROMPT
    else:
        body = SKILL_PROMPT
    return body + "\n\n" + TOOLS_SUFFIX


# --- triggering -------------------------------------------------------------------------------


def _memory_enabled(session_id: str) -> bool | None:
    """Whether the conversation's owner keeps memory on (no profile: on); None when the
    conversation is gone."""
    row = (
        Session.objects.filter(pk=session_id)
        .values_list("pk", "owner__hermes_profile__memory_enabled")
        .first()
    )
    return None if row is None else row[1] is not False


def _counted(session_id: str, *, iterations: int, turns: int) -> SessionSkillState | None:
    """Add to the conversation's review counters and return them as they are now (None when
    the conversation is gone)."""
    counters = SessionSkillState.objects.filter(session_id=session_id)
    change = {
        "iterations_since_skill_review": F("iterations_since_skill_review") + iterations,
        "turns_since_memory_review": F("turns_since_memory_review") + turns,
        "updated_at": timezone.now(),
    }
    if not counters.update(**change):
        if not Session.objects.filter(pk=session_id).exists():
            return None  # deleted meanwhile: nothing to count
        # The first count of a conversation whose prompt was frozen without the skills
        # index (which makes the row): make it, then count.
        SessionSkillState.objects.get_or_create(session_id=session_id)
        counters.update(**change)
    return counters.only("iterations_since_skill_review", "turns_since_memory_review").get()


def _review_kind(*, skill_due: bool, memory_due: bool) -> str:
    if skill_due and memory_due:
        return ReviewRun.Kind.COMBINED
    return ReviewRun.Kind.MEMORY if memory_due else ReviewRun.Kind.SKILL


def review_after_turn(
    *, session_id: str, tool_iterations: int, memory_enabled: bool | None = None
) -> None:
    """Called by the chat turn loop after a final, uninterrupted answer was saved (outside any
    transaction). Counts tool-loop iterations and user turns per session (a user turn = one
    call of this function); when iterations since the last skill review >= setting (10) or
    user turns since the last memory review >= setting (10), enqueue the review Celery task
    (on commit) with the right prompt kind (skill / memory / combined) and reset the counters.

    `memory_enabled`: the owner's memory switch, when the caller read it (the chat turn
    did); else it is read here (nothing is counted for a conversation that is gone).

    A turn that is not due costs two statements (the counting UPDATE, the counters' read;
    three when the switch is read here); only a due one takes the row lock.
    """
    if not settings.HERMES_REVIEW_ENABLED:
        return
    if memory_enabled is None:
        memory_enabled = _memory_enabled(session_id)
        if memory_enabled is None:
            return
    skills_on = registry.get("skill_manage") is not None
    memory_on = registry.get("memory") is not None and memory_enabled
    state = _counted(
        session_id,
        iterations=max(0, int(tool_iterations)) if skills_on else 0,
        turns=1 if memory_on else 0,
    )
    if state is not None and any(_due(state, skills_on=skills_on, memory_on=memory_on)):
        _queue_review(session_id, skills_on=skills_on, memory_on=memory_on)


def _due(state: SessionSkillState, *, skills_on: bool, memory_on: bool) -> tuple[bool, bool]:
    """(skill review due, memory review due) by the counters of `state`."""
    return (
        skills_on
        and state.iterations_since_skill_review >= settings.HERMES_SKILL_REVIEW_ITERATIONS,
        memory_on and state.turns_since_memory_review >= settings.HERMES_MEMORY_REVIEW_TURNS,
    )


def _queue_review(session_id: str, *, skills_on: bool, memory_on: bool) -> None:
    """Record the review of the conversation up to its last message and reset the counters
    that made it due; queued on commit."""
    with transaction.atomic():
        # The row lock serialises two turns of one session that both counted past the
        # threshold: the second sees the counters the first reset, and only one enqueues.
        state = SessionSkillState.objects.select_for_update().get(session_id=session_id)
        skill_due, memory_due = _due(state, skills_on=skills_on, memory_on=memory_on)
        last_id = Message.objects.filter(session_id=session_id).aggregate(n=Max("id"))["n"]
        if not (skill_due or memory_due) or last_id is None:
            return
        run, created = ReviewRun.objects.get_or_create(
            session_id=session_id,
            last_message_id=last_id,
            defaults={"kind": _review_kind(skill_due=skill_due, memory_due=memory_due)},
        )
        if not created:
            return  # this very turn was already recorded; the counters stay for the next
        if skill_due:
            state.iterations_since_skill_review = 0
        if memory_due:
            state.turns_since_memory_review = 0
        state.updated_at = timezone.now()
        state.save(
            update_fields=[
                "iterations_since_skill_review",
                "turns_since_memory_review",
                "updated_at",
            ]
        )
        transaction.on_commit(lambda: task_send("skills_app.review_session", run.pk))


# --- the reviewer's context -------------------------------------------------------------------


def _calls(raw: Any) -> list[dict[str, Any]]:
    """Stored tool calls in the wire shape, whatever shape they were saved in."""
    calls = []
    for call in raw or []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else call
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(
            {
                "id": str(call.get("id") or ""),
                "type": "function",
                "function": {"name": str(function.get("name") or ""), "arguments": arguments},
            }
        )
    return [c for c in calls if c["id"] and c["function"]["name"]]


def _wire(message: Message) -> dict[str, Any] | None:
    if message.role == Message.Role.USER:
        return {"role": "user", "content": message.content}
    if message.role == Message.Role.ASSISTANT:
        if message.status in (Message.Status.FAILED, Message.Status.STREAMING) and not (
            message.content
        ):
            return None
        wire: dict[str, Any] = {"role": "assistant", "content": message.content or None}
        calls = _calls(message.tool_calls)
        if calls:
            wire["tool_calls"] = calls
        return wire
    if message.role == Message.Role.TOOL:
        content = message.content
        if len(content) > TOOL_RESULT_CHARS:
            content = content[:TOOL_RESULT_CHARS] + " …[truncated for the review]"
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    return None


def _strip_harness(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop any review prompt (and the reply to it) that ever reached a transcript."""
    kept: list[dict[str, Any]] = []
    skipping = False
    for message in messages:
        if message["role"] == "user":
            text = str(message.get("content") or "")
            skipping = text.startswith((SKILL_PROMPT_START, MEMORY_PROMPT_START))
        if not skipping:
            kept.append(message)
    return kept


def _balance(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep tool calls and results paired: the API rejects a result without its call and a
    call without its result (a cut-off window, an interrupted turn)."""
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    announced: set[str] = set()
    result: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = [c for c in message["tool_calls"] if c["id"] in answered]
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            if calls:
                message["tool_calls"] = calls
                announced.update(c["id"] for c in calls)
            elif not message.get("content"):
                continue
        elif message["role"] == "tool" and message["tool_call_id"] not in announced:
            continue
        elif message["role"] == "assistant" and not message.get("content"):
            continue
        result.append(message)
    return result


def _digest(messages: list[dict[str, Any]]) -> str:
    lines = []
    for message in messages:
        text = " ".join(str(message.get("content") or "").split())
        if message["role"] == "user" and text:
            lines.append("USER: " + text[:DIGEST_USER_CHARS])
        elif message["role"] == "assistant":
            if text:
                lines.append("ASSISTANT: " + text[:DIGEST_ASSISTANT_CHARS])
            elif message.get("tool_calls"):
                names = ", ".join(c["function"]["name"] for c in message["tool_calls"])
                lines.append(f"ASSISTANT: [called {names}]")
    return "\n".join(lines)


def review_messages(*, session: Session, kind: str) -> list[dict[str, Any]]:
    """The reviewer's request: the session's system prompt, the conversation (whole, or the
    last 24 messages after a digest of older turns), then the review prompt."""
    rows = (
        session.messages.filter(active=True)
        .order_by("id")
        .only("role", "content", "tool_calls", "tool_call_id", "status")
    )
    conversation = _strip_harness([w for w in (_wire(m) for m in rows) if w is not None])
    size = sum(len(str(m.get("content") or "")) for m in conversation)
    # Same model as the chat: replaying the whole conversation after the cached system
    # prompt reuses the provider's prompt cache. A different (summary) model, or a
    # conversation too long to replay cheaply, gets the recent tail and a digest instead.
    summary_model = llm.model_for("summary")
    same_model = summary_model.model_id == session.model and summary_model.ref == (
        session_entry(session) or ENV_REF
    )
    budget_chars = summary_model.context_length * 2
    if (same_model and size <= budget_chars) or len(conversation) <= RECENT_MESSAGES:
        history = _balance(conversation)
    else:
        older, recent = conversation[:-RECENT_MESSAGES], conversation[-RECENT_MESSAGES:]
        digest = _digest(older)
        history = _balance(recent)
        if digest:
            history.insert(
                0,
                {
                    "role": "user",
                    "content": "[Digest of the earlier part of this conversation, for "
                    "context only]\n" + digest,
                },
            )
    system = session.system_prompt.prompt if session.system_prompt_id else REVIEWER_SYSTEM
    return [
        {"role": "system", "content": system},
        *history,
        {"role": "user", "content": review_prompt(kind)},
    ]


# --- running a review -------------------------------------------------------------------------


def _link(name: str, *args: Any) -> str:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


#: Said to the person when a memory call of the review changed nothing it could name.
MEMORY_NOTICE = _("Memory updated")


def _announce(run: ReviewRun, result: OfflineLoopResult) -> list[tuple[str, str]]:
    """One notice per changed skill (a skill created and then patched in the same run is
    announced once, as created) and one for memory."""
    notices: list[tuple[str, str]] = []
    seen: set[str] = set()
    memory_done = False
    for outcome in result.tool_results:
        if not outcome.ok:
            continue
        if outcome.name == "skill_manage" and outcome.notice is not None:
            name = str(outcome.payload.get("name") or "")
            if name in seen:
                continue
            seen.add(name)
            notices.append(outcome.notice)
        elif outcome.name == "memory" and not memory_done:
            action = outcome.arguments.get("action") if isinstance(outcome.arguments, dict) else ""
            if outcome.notice is None and action not in ("add", "replace", "remove"):
                continue
            memory_done = True
            if outcome.notice is not None:
                kind, text = outcome.notice  # already in the person's language (memory.tools)
            else:
                with speaking_to(run.session.owner_id):
                    kind, text = "memory_saved", str(MEMORY_NOTICE)
            url = _link("memory_page")
            notices.append((kind, f"{text} — {url}" if url else text))
    for kind, text in notices:
        notice_to_user(
            user_id=run.session.owner_id, kind=kind, text=text, session_id=run.session_id
        )
    return notices


def reviewer_run(
    *, messages: list[dict[str, Any]], ctx: ToolContext, allowed: set[str], max_iterations: int
) -> OfflineLoopResult:
    """The reviewer's tool loop on the summary model, within HERMES_REVIEW_TIME_LIMIT (our
    own deadline: Celery's time limits are not enforced by every pool, solo). Raises
    llm.LLMError and TimeoutError; the tools that ran before either have committed. Never
    call inside a transaction."""
    entry = llm.model_for("summary")  # may read the model catalog: resolved here, in sync

    async def bounded() -> OfflineLoopResult:
        return await asyncio.wait_for(
            run_offline_loop(
                messages=messages,
                ctx=ctx,
                allowed_tools=allowed,
                max_iterations=max_iterations,
                entry=entry,
            ),
            timeout=settings.HERMES_REVIEW_TIME_LIMIT,
        )

    return async_to_sync(bounded)()


def _finish(lease: Lease, **fields: Any) -> None:
    """Close the run and free its lease (a no-op if it was taken over)."""
    lease.release(finished_at=timezone.now(), **fields)


def review_run_execute(*, run_id: int) -> str:
    """Run one queued review. Safe to call twice: only the holder of the run's lease works;
    a redelivery takes over the lease of a run whose process died; raises LeaseBusy while
    a live run holds it. Never call inside a transaction (it talks to the model)."""
    statuses = [ReviewRun.Status.QUEUED, ReviewRun.Status.RUNNING]
    lease = lease_acquire(
        ReviewRun,
        run_id,
        kind="review",
        when=Q(status__in=statuses),
        values={"status": ReviewRun.Status.RUNNING, "started_at": timezone.now()},
    )
    if lease is None:
        raise_if_held(ReviewRun, run_id, working=Q(status=ReviewRun.Status.RUNNING))
        return "skipped"
    with lease_heartbeat(lease):
        return _review_holding(lease)


def _review_holding(lease: Lease) -> str:
    run_id = lease.pk
    run = ReviewRun.objects.select_related("session__owner", "session__system_prompt").get(
        pk=run_id
    )
    owner = run.session.owner
    if not owner.is_active:
        _finish(lease, status=ReviewRun.Status.DONE, outcome="Owner inactive; nothing reviewed.")
        return "done"
    if not llm.is_configured():
        _finish(lease, status=ReviewRun.Status.FAILED, error="No model is configured.")
        return "failed"
    allowed = {name for name in REVIEW_TOOLS if registry.get(name) is not None}
    if not _memory_enabled(run.session_id):
        allowed.discard("memory")
    messages = review_messages(session=run.session, kind=run.kind)
    ctx = ToolContext(user=owner, session_id=run.session_id, origin="review")
    try:
        result = reviewer_run(
            messages=messages,
            ctx=ctx,
            allowed=allowed,
            max_iterations=settings.HERMES_REVIEW_MAX_ITERATIONS,
        )
    except llm.LLMError as exc:
        _finish(lease, status=ReviewRun.Status.FAILED, error=f"{exc.code}: {exc.message}")
        return "failed"
    except TimeoutError:
        _finish(
            lease,
            status=ReviewRun.Status.FAILED,
            error=f"Stopped after the {settings.HERMES_REVIEW_TIME_LIMIT}s time limit.",
        )
        return "failed"
    _finish(
        lease,
        status=ReviewRun.Status.DONE,
        outcome=result.text[:4000]
        or ("Stopped after the iteration limit." if result.stopped == "max_iterations" else ""),
        actions=[{"name": o.name, "ok": o.ok, "summary": o.summary} for o in result.tool_results],
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
    )
    try:
        _announce(run, result)
    except Exception:  # noqa: BLE001 - a closed channel layer must not fail a saved review
        logger.exception("could not announce review %s", run_id)
    return "done"
