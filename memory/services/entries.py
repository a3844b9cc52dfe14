"""The write services callers use: add, replace, remove, batches, id-based edits from the
pages/API/admin, and approving or rejecting the agent's staged writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy, ngettext

from core.exceptions import NotFound, ServiceError

from ..models import MemoryEntry, MemoryEvent, Target
from ..selectors import access_memory_entry
from .anchor import lock_anchor
from .store import WriteResult, log_events, write
from .validation import Op, Provenance


def memory_add(
    *,
    user: AbstractBaseUser,
    target: str,
    content: str,
    provenance: Provenance | None = None,
) -> WriteResult:
    return write(
        user=user, target=target, ops=[Op("add", content)], provenance=provenance or Provenance()
    )


def memory_replace(
    *,
    user: AbstractBaseUser,
    target: str,
    old_text: str,
    content: str,
    provenance: Provenance | None = None,
) -> WriteResult:
    return write(
        user=user,
        target=target,
        ops=[Op("replace", content, old_text)],
        provenance=provenance or Provenance(),
    )


def memory_remove(
    *,
    user: AbstractBaseUser,
    target: str,
    old_text: str,
    provenance: Provenance | None = None,
) -> WriteResult:
    return write(
        user=user,
        target=target,
        ops=[Op("remove", "", old_text)],
        provenance=provenance or Provenance(),
    )


def memory_apply_batch(
    *,
    user: AbstractBaseUser,
    target: str,
    operations: Sequence[Op],
    provenance: Provenance | None = None,
) -> WriteResult:
    """All-or-nothing: every operation applies, or none does. The budget is checked on
    the final state only, so a batch may remove first and add after."""
    if not operations:
        raise ServiceError("invalid", "operations is empty; give at least one operation.")
    return write(
        user=user,
        target=target,
        ops=list(operations),
        provenance=provenance or Provenance(),
        kind="batch",
    )


def memory_entry_update(
    *,
    user: AbstractBaseUser,
    entry_id: int,
    content: str,
    provenance: Provenance | None = None,
) -> WriteResult:
    """Replace the text of one of the user's active entries, named by id (pages, API,
    admin). Never staged: approval mode is about the agent's writes."""
    entry = access_memory_entry(user=user, entry_id=entry_id, status=MemoryEntry.Status.ACTIVE)
    return write(
        user=user,
        target=entry.target,
        ops=[Op("replace", content, "", entry_id=entry.pk)],
        provenance=provenance or Provenance(),
        stage=False,
    )


def memory_entry_delete(
    *, user: AbstractBaseUser, entry_id: int, provenance: Provenance | None = None
) -> WriteResult:
    entry = access_memory_entry(user=user, entry_id=entry_id, status=MemoryEntry.Status.ACTIVE)
    return write(
        user=user,
        target=entry.target,
        ops=[Op("remove", "", "", entry_id=entry.pk)],
        provenance=provenance or Provenance(),
        stage=False,
    )


def memory_pending_approve(
    *, user: AbstractBaseUser, entry_id: int, provenance: Provenance | None = None
) -> WriteResult:
    """Apply a staged write with the same checks as any write (scan, matching, budget).

    The entry keeps the provenance of the agent's proposal (its chat and source); the
    audit event records the approval and who gave it.
    """
    provenance = provenance or Provenance()
    pending = access_memory_entry(user=user, entry_id=entry_id, status=MemoryEntry.Status.PENDING)
    if pending.pending_action == MemoryEntry.PendingAction.ADD:
        op = Op("add", pending.content)
    elif pending.pending_of_id is None:
        raise ServiceError(
            "not_found", "The entry this change would modify no longer exists; reject it."
        )
    else:
        op = Op(pending.pending_action, pending.content, "", entry_id=pending.pending_of_id)

    def done() -> None:
        # Under the same lock and transaction as the write: the proposal is used up.
        MemoryEntry.objects.filter(pk=pending.pk).delete()

    return write(
        user=user,
        target=pending.target,
        ops=[op],
        provenance=Provenance(
            source=pending.source,
            client=pending.source_client,
            session_id=pending.source_session_id,
            message_id=pending.source_message_id,
            actor=provenance.actor or user,
        ),
        stage=False,
        event_action=MemoryEvent.Action.APPROVE,
        on_success=done,
    )


def memory_pending_reject(
    *, user: AbstractBaseUser, entry_id: int, provenance: Provenance | None = None
) -> None:
    provenance = provenance or Provenance()
    pending = access_memory_entry(user=user, entry_id=entry_id, status=MemoryEntry.Status.PENDING)
    with transaction.atomic():
        deleted, _ = MemoryEntry.objects.filter(pk=pending.pk, status="pending").delete()
        if not deleted:
            raise NotFound(gettext_lazy("memory entry"))
        log_events(
            user,
            pending.target,
            provenance,
            pending.source_session_id,
            [
                {
                    "action": MemoryEvent.Action.REJECT,
                    "before": pending.pending_of.content if pending.pending_of else "",
                    "after": pending.content,
                    "verdict": MemoryEvent.Verdict.REJECTED,
                    "detail": f"Proposed {pending.pending_action} rejected.",
                }
            ],
        )


@dataclass(frozen=True)
class Removed:
    """What a removal by writer did: active entries removed, proposals rejected."""

    removed: int = 0
    rejected: int = 0

    @property
    def total(self) -> int:
        return self.removed + self.rejected

    def message(self) -> str:
        """What the person reads, in the active language."""
        if not self.total:
            return gettext("There was nothing to remove: those notes are gone already.")
        values = {"removed": self.removed, "rejected": self.rejected}
        if self.rejected:
            return (
                ngettext(
                    "Removed %(removed)d note and rejected %(rejected)d waiting for your approval.",
                    "Removed %(removed)d notes and rejected %(rejected)d waiting for your "
                    "approval.",
                    self.removed,
                )
                % values
            )
        return ngettext("Removed %(removed)d note.", "Removed %(removed)d notes.", self.removed) % (
            values
        )


def memory_entries_remove_by_writer(
    *, user: AbstractBaseUser, source: str, client: str, provenance: Provenance
) -> Removed:
    """Remove every entry of `user`'s that `source`/`client` wrote (e.g. all the notes
    learned from one chat import): its proposals waiting for approval are rejected, its
    active entries removed, each change audited as the person's own (`provenance`), all in
    one transaction. The lists are locked before the entries are chosen, so an entry the
    person edits meanwhile (and so makes theirs) is not taken."""
    rejected = removed = 0
    with transaction.atomic():
        for target in Target.values:
            lock_anchor(user, target)
        waiting = MemoryEntry.objects.pending().filter(
            owner=user, source=source, source_client=client
        )
        for entry_id in waiting.order_by("id").values_list("pk", flat=True):
            memory_pending_reject(user=user, entry_id=entry_id, provenance=provenance)
            rejected += 1
        for target in Target.values:
            ids = list(
                MemoryEntry.objects.active()
                .filter(owner=user, target=target, source=source, source_client=client)
                .order_by("order", "id")
                .values_list("pk", flat=True)
            )
            if ids:
                result = write(
                    user=user,
                    target=target,
                    ops=[Op("remove", "", "", entry_id=pk) for pk in ids],
                    provenance=provenance,
                    kind="batch",
                    stage=False,
                )
                removed += result.applied
    return Removed(removed=removed, rejected=rejected)


def audit_prune(*, now: datetime | None = None) -> int:
    """Delete memory audit events older than HERMES_AUDIT_RETENTION_DAYS (0 keeps all)."""
    days = settings.HERMES_AUDIT_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = MemoryEvent.objects.filter(created_at__lt=cutoff).delete()
    return deleted
