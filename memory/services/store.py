"""Writes to L1 memory: add, replace, remove, all-or-nothing batches, import, approvals.

Every caller — the `memory` tool, the Memory page, the REST API, the admin and imports —
goes through `write`, which:

1. validates and threat-scans the new text *before* taking any lock (a blocked write is
   never stored, only audit-logged);
2. serialises writers per (user, target): SQLite's IMMEDIATE transactions take the write
   lock at BEGIN, and on PostgreSQL the first statement bumps the `MemoryAnchor` row's
   version, which locks it (the same statement reads the owner's limits);
3. reloads the list under that lock (on SQLite in that same statement), applies the
   operations to a copy, checks the budget on the final state and only then writes the
   difference and its audit rows (`persist`; on PostgreSQL one statement for one entry).

Semantics follow Hermes' memory tool (tools/memory_tool.py): empty content refused, exact
duplicates succeed without a new entry, replace/remove match a unique substring (an exact
whole-entry match wins), and errors list the current entries so the model can consolidate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from core.exceptions import ServiceError
from sessions_app.models import Message, Session

from .. import scanner
from ..models import AGENT_SOURCES, MemoryEntry, MemoryEvent, Target, content_digest
from ..selectors import (
    TARGET_LABELS,
    Usage,
    memory_contents,
    usage_of,
)
from .anchor import lock_and_load
from .engine import Change, OpFailed, Slot, apply_ops
from .persist import persist, persist_logged
from .validation import ACTIONS, Op, Provenance, check_content, check_target, clean_text, sanitized

logger = logging.getLogger(__name__)

SAVED_NOTE = "Write saved. This update is complete — do not repeat it."


@dataclass
class WriteResult:
    target: str
    usage: Usage
    message: str
    #: Entries created or changed by this write (approval mode: the pending entries).
    entries: list[MemoryEntry] = field(default_factory=list)
    #: 1-based operation index → the text the operation replaced.
    replaced: dict[int, str] = field(default_factory=dict)
    changed: bool = False
    staged: bool = False
    applied: int = 0
    #: An import's counts: (entries added, already there, removed as not in the file).
    imported: tuple[int, int, int] | None = None

    def tool_payload(self) -> dict[str, Any]:
        """Hermes' terminal success shape; entries are not echoed."""
        payload: dict[str, Any] = {
            "success": True,
            "done": True,
            "target": self.target,
            "usage": self.usage.text(),
            "entry_count": self.usage.entry_count,
            "message": self.message,
            "note": SAVED_NOTE,
        }
        if self.staged:
            payload["staged"] = True
            payload["pending_ids"] = [e.pk for e in self.entries]
            payload["note"] = (
                "Saved for the user's approval; do not repeat it. It becomes part of memory "
                "once they approve it on the Memory page."
            )
        if len(self.replaced) == 1 and 1 in self.replaced:
            payload["replaced_entry"] = self.replaced[1]
        elif self.replaced:
            payload["replaced_entries"] = {str(i): text for i, text in self.replaced.items()}
        return payload


def _resolve_provenance(
    user: AbstractBaseUser, provenance: Provenance
) -> tuple[str | None, int | None]:
    """The session/message ids if they are the owner's, else None (never another's)."""
    session_id = message_id = None
    if (
        provenance.session_id
        and Session.objects.filter(pk=provenance.session_id, owner=user).exists()
    ):
        session_id = provenance.session_id
    if (
        provenance.message_id
        and Message.objects.filter(pk=provenance.message_id, session__owner=user).exists()
    ):
        message_id = provenance.message_id
    return session_id, message_id


def log_events(
    user: AbstractBaseUser,
    target: str,
    provenance: Provenance,
    session_id: str | None,
    events: list[dict[str, Any]],
) -> None:
    MemoryEvent.objects.bulk_create(
        [_event(user, target, provenance, session_id, **event) for event in events]
    )


def _event(
    user: AbstractBaseUser,
    target: str,
    provenance: Provenance,
    session_id: str | None,
    **event: Any,
) -> MemoryEvent:
    return MemoryEvent(
        owner=user,
        actor=provenance.actor if provenance.actor is not None else user,
        source=provenance.source,
        source_client=provenance.client,
        target=target,
        session_id=session_id,
        **event,
    )


def _log_failure(
    user: AbstractBaseUser,
    target: str,
    provenance: Provenance,
    session_id: str | None,
    *,
    op: Op,
    verdict: str,
    detail: str,
    findings: str = "",
) -> None:
    try:
        with transaction.atomic():
            log_events(
                user,
                target,
                provenance,
                session_id,
                [
                    {
                        "action": op.action if op.action in ACTIONS else "add",
                        "before": op.old_text or "",
                        "after": op.content or "",
                        "verdict": verdict,
                        "detail": detail,
                        "findings": findings,
                    }
                ],
            )
    except Exception:  # noqa: BLE001 - the refusal itself must still reach the caller
        logger.exception("could not audit-log a refused memory write")


def _over_budget_message(
    kind: str, label: str, ops: Sequence[Op], before: Usage, after: int
) -> str:
    if kind == "import":
        return (
            f"Importing would put {label.lower()} at {after:,}/{before.limit:,} chars. "
            "Nothing was imported: remove entries from the file or from the list first."
        )
    if kind == "single" and ops[0].action == "add":
        size = len(ops[0].content)
        return (
            f"{label} at {before.current:,}/{before.limit:,} chars. Adding this entry "
            f"({size:,} chars) would exceed the limit. Consolidate now: replace or remove "
            "stale, redundant or overlapping entries (one batched call with `operations` "
            "works), then retry this add — all in this turn."
        )
    if kind == "single":
        return (
            f"Replacement would put {label.lower()} at {after:,}/{before.limit:,} chars. "
            "Shorten the new text, or remove or shorten other entries first."
        )
    return (
        f"These operations would put {label.lower()} at {after:,}/{before.limit:,} chars, "
        "over the limit. Remove or shorten entries in the same batch. No operations were "
        "applied (batch is all-or-nothing)."
    )


#: kind → (prefix naming the failing item, sentence appended to its error).
_ITEM_ERRORS = {
    "batch": ("Operation", "No operations were applied (batch is all-or-nothing)."),
    "import": ("Entry", "Nothing was imported."),
}


def write(
    *,
    user: AbstractBaseUser,
    target: Any,
    ops: Sequence[Op],
    provenance: Provenance,
    kind: str = "single",
    stage: bool | None = None,
    event_action: str | None = None,
    on_success: Callable[[], None] | None = None,
) -> WriteResult:
    """Validate, scan, lock, apply and record `ops`. `kind` is "single", "batch" or
    "import" (how errors name the failing item); `stage` forces or forbids approval mode
    (None: the user's setting, for agent sources); `on_success` runs under the lock after
    the write, inside its transaction."""
    target = check_target(target)
    label = TARGET_LABELS[Target(target)]

    def failed(i: int, message: str) -> str:
        if kind not in _ITEM_ERRORS:
            return message
        noun, note = _ITEM_ERRORS[kind]
        return f"{noun} {i}: {message} {note}"

    # 1. Shape and text checks, before any lock.
    clean: list[Op] = []
    for i, op in enumerate(ops, start=1):
        if not isinstance(op.action, str) or op.action not in ACTIONS:
            shown = op.action if isinstance(op.action, str) else type(op.action).__name__
            raise ServiceError(
                "unknown_action", failed(i, f"Unknown action '{shown}'. Use: add, replace, remove")
            )
        try:
            content = check_content(op.content) if op.action != "remove" else ""
            old_text = clean_text(op.old_text, what="old_text")
        except ServiceError as exc:
            raise ServiceError(exc.code, failed(i, exc.message)) from None
        if op.action != "add" and not old_text and op.entry_id is None:
            raise ServiceError(
                "old_text_required",
                failed(
                    i,
                    f"old_text is required for {op.action}: give a unique part of the entry "
                    "to change.",
                ),
                current_entries=sanitized(memory_contents(user=user, target=target)),
            )
        clean.append(Op(op.action, content, old_text, op.entry_id))

    session_id, message_id = _resolve_provenance(user, provenance)

    # 2. Threat scan. Blocked text is audit-logged and never stored, not even as pending.
    for i, op in enumerate(clean, start=1):
        if op.action == "remove":
            continue
        findings = scanner.scan(op.content)
        if findings:
            first = findings[0]
            _log_failure(
                user,
                target,
                provenance,
                session_id,
                op=op,
                verdict=MemoryEvent.Verdict.BLOCKED,
                detail=first.message,
                findings=scanner.blocked_reason(findings),
            )
            raise ServiceError(
                "blocked",
                failed(i, first.message),
                pattern=first.id,
                findings=[f.id for f in findings],
            )

    # 3. Under the lock: reload, apply to a copy, check the budget, write the difference.
    failing = clean[0]
    try:
        with transaction.atomic():
            prefs, loaded = lock_and_load(user, target)
            if stage is None:
                stage = prefs.approval and provenance.source in AGENT_SOURCES
            limit = prefs.limit(target)
            before = Usage(usage_of([e.content for e in loaded]), limit, len(loaded))
            slots = [Slot(e.content, e) for e in loaded]
            try:
                changes, notes = apply_ops(slots, clean)
            except OpFailed as exc:
                failing = clean[exc.index - 1]
                raise ServiceError(
                    exc.code, failed(exc.index, exc.message), **exc.details
                ) from None
            after_size = usage_of([s.content for s in slots])
            # A list already over a (lowered) limit may still shrink.
            if after_size > limit and after_size > before.current:
                raise ServiceError(
                    "over_limit",
                    _over_budget_message(kind, label, clean, before, after_size),
                    current_entries=sanitized([e.content for e in loaded]),
                    usage=f"{before.current}/{limit}",
                    entry_size=sum(len(op.content) for op in clean if op.action != "remove"),
                    size_after=after_size,
                )
            if stage:
                return _stage(
                    user, target, loaded, changes, provenance, session_id, message_id, before
                )
            if changes:
                _record(
                    user,
                    target,
                    loaded,
                    slots,
                    changes,
                    provenance,
                    session_id,
                    message_id,
                    event_action,
                )
            if on_success is not None:
                on_success()
    except ServiceError as exc:
        detail = exc.message
        if exc.code == "over_limit":
            # The message coaches the model; the log says what happened, for people.
            detail = (
                f"Over the limit: the change would have made {label.lower()} "
                f"{exc.details['size_after']:,}/{limit:,} characters."
            )
        _log_failure(
            user,
            target,
            provenance,
            session_id,
            op=failing,
            verdict=MemoryEvent.Verdict.REFUSED,
            detail=detail,
        )
        raise
    usage = Usage(usage_of([s.content for s in slots]), limit, len(slots))
    return WriteResult(
        target=target,
        usage=usage,
        message=_success_message(changes, notes, batch=kind == "batch"),
        entries=[c.slot.entry for c in changes if c.slot is not None and c.slot.entry],
        replaced={c.index: c.before for c in changes if c.action == "replace"},
        changed=bool(changes),
        applied=len(changes),
    )


def _record(
    user: AbstractBaseUser,
    target: str,
    loaded: list[MemoryEntry],
    slots: list[Slot],
    changes: list[Change],
    provenance: Provenance,
    session_id: str | None,
    message_id: int | None,
    event_action: str | None,
) -> None:
    """Write the changes and their audit rows. Call holding the anchor lock."""

    def accepted(c: Change) -> dict[str, Any]:
        return {
            "action": event_action or c.action,
            "entry": c.slot.entry if c.slot is not None else None,
            "before": c.before,
            "after": c.after,
            "verdict": MemoryEvent.Verdict.ACCEPTED,
        }

    if connection.vendor == "postgresql" and len(changes) == 1:
        event = _event(user, target, provenance, session_id, **accepted(changes[0]))
        if persist_logged(user, target, loaded, slots, event, provenance, session_id, message_id):
            return
    persist(user, target, loaded, slots, provenance, session_id, message_id)
    log_events(user, target, provenance, session_id, [accepted(c) for c in changes])


def _success_message(changes: list[Change], notes: list[str], *, batch: bool) -> str:
    if batch:
        message = f"Applied {len(changes)} operation(s)."
        if notes:
            message += f" Skipped {len(notes)} that changed nothing."
        return message
    if not changes:
        return notes[0] if notes else "Nothing changed."
    return {
        "add": "Entry added.",
        "replace": "Entry replaced.",
        "remove": "Entry removed.",
    }[changes[0].action]


def _stage(
    user: AbstractBaseUser,
    target: str,
    loaded: list[MemoryEntry],
    changes: list[Change],
    provenance: Provenance,
    session_id: str | None,
    message_id: int | None,
    before: Usage,
) -> WriteResult:
    """Record the changes as pending entries for the user to approve. Holding the lock."""
    by_content = {e.content: e for e in loaded}
    existing_pending = set(
        MemoryEntry.objects.pending()
        .filter(owner=user, target=target, pending_action="add")
        .values_list("content", flat=True)
    )
    now = timezone.now()
    pending: list[MemoryEntry] = []
    for change in changes:
        if change.action == "add":
            if change.after in existing_pending:
                continue
            row = MemoryEntry(content=change.after, pending_action="add")
        else:
            of = by_content.get(change.before)
            text = change.after if change.action == "replace" else change.before
            row = MemoryEntry(content=text, pending_action=change.action, pending_of=of)
        row.owner = user
        row.target = target
        row.status = MemoryEntry.Status.PENDING
        row.content_hash = content_digest(row.content)
        row.source = provenance.source
        row.source_client = provenance.client
        row.source_session_id = session_id
        row.source_message_id = message_id
        row.created_at = row.updated_at = now
        row.save()
        pending.append(row)
    log_events(
        user,
        target,
        provenance,
        session_id,
        [
            {
                "action": p.pending_action,
                "entry": p,
                "before": p.pending_of.content if p.pending_of else "",
                "after": p.content if p.pending_action != "remove" else "",
                "verdict": MemoryEvent.Verdict.STAGED,
            }
            for p in pending
        ],
    )
    count = len(pending)
    message = (
        f"Staged {count} change(s) for the user's approval."
        if count
        else "Already waiting for the user's approval (nothing new staged)."
    )
    return WriteResult(target=target, usage=before, message=message, entries=pending, staged=True)
