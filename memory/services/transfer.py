"""Import of Hermes' MEMORY.md / USER.md files (export is a selector), and what happens to a
file over the person's limit: its entries are held (pending adds from the import, so nothing
is lost), and the person chooses to raise their limit to fit, import what fits, or discard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from core.exceptions import ServiceError

from ..models import ENTRY_DELIMITER, MemoryEntry, MemoryEvent, Source, Target, content_digest
from ..selectors import memory_limit, usage_of
from .anchor import lock_anchor
from .snapshot import FILE_LABELS
from .store import WriteResult, log_events, write
from .validation import Op, Provenance, check_target


def parse_memory_file(text: str) -> list[str]:
    """Hermes' parser: split on the full delimiter, strip, drop empties, dedupe (first
    occurrence wins)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
    if not text.strip():
        return []
    pieces = (p.strip() for p in text.split(ENTRY_DELIMITER))
    return list(dict.fromkeys(p for p in pieces if p))


def memory_import(
    *,
    user: AbstractBaseUser,
    target: str,
    text: Any,
    replace_all: bool = False,
    provenance: Provenance | None = None,
) -> WriteResult:
    """Import a MEMORY.md/USER.md file, all or nothing, with the same scan and budget as
    any write. Merge (default) adds the entries that are not there yet; `replace_all`
    makes the list exactly the file's entries (keeping those already present)."""
    provenance = provenance or Provenance(source=Source.IMPORT)
    target = check_target(target)
    if not isinstance(text, str):
        raise ServiceError("invalid", "The file must be text.")
    if "\x00" in text:
        raise ServiceError("invalid", "The file is not a text file (it contains NUL bytes).")
    entries = parse_memory_file(text)
    if not entries:
        # Refused even when replacing: an empty upload must not silently clear the list.
        raise ServiceError("empty", "The file has no entries; nothing to import.")
    # Adds first, in file order, so "Entry N" in an error is the file's N-th entry.
    ops = [Op("add", e) for e in entries]
    if replace_all:
        keep = set(entries)
        ops.extend(
            Op("remove", "", "", entry_id=pk)
            for pk, content in MemoryEntry.objects.active()
            .filter(owner=user, target=target)
            .values_list("pk", "content")
            if content not in keep
        )
    result = write(
        user=user, target=target, ops=ops, provenance=provenance, kind="import", stage=False
    )
    added = sum(1 for c in result.entries if c is not None)
    removed = result.applied - added
    parts = [f"Imported {added} new entr{'y' if added == 1 else 'ies'}."]
    if len(entries) > added:
        parts.append(f"{len(entries) - added} already existed.")
    if removed:
        parts.append(f"Removed {removed} not in the file.")
    result.message = " ".join(parts)
    result.imported = (added, len(entries) - added, removed)
    return result


# --- a file over the limit: held, then raised or cut to fit ----------------------------------

#: What a person may do with entries held back from an import that did not fit.
HELD_CHOICES = ("raise", "fit", "discard")


@dataclass(frozen=True)
class FitPlan:
    """How `new` entries (in file order) fit next to the `existing` ones under `limit`."""

    new: list[str]
    limit: int
    #: Size of the list with every new entry added.
    size_all: int
    #: How many of the first new entries fit (Hermes' order: the file's).
    fits: int

    @property
    def over(self) -> bool:
        return self.size_all > self.limit


def fit_plan(*, existing: Sequence[str], new: Sequence[str], limit: int) -> FitPlan:
    present = set(existing)
    fresh = [e for e in dict.fromkeys(new) if e not in present]
    taken = list(existing)
    fits = 0
    for entry in fresh:
        if usage_of([*taken, entry]) > limit:
            break
        taken.append(entry)
        fits += 1
    return FitPlan(new=fresh, limit=limit, size_all=usage_of([*existing, *fresh]), fits=fits)


@dataclass(frozen=True)
class HeldImport:
    """Entries of an imported file held back because they did not fit, waiting (as pending
    adds from the import) for the person's choice."""

    target: str
    entries: list[MemoryEntry]
    plan: FitPlan

    @property
    def file_name(self) -> str:
        return FILE_LABELS[Target(self.target)]

    @property
    def count(self) -> int:
        """Held entries not in the list yet (one may have been added meanwhile)."""
        return len(self.plan.new)

    def sizes(self) -> dict[str, str]:
        """The figures a page shows, formatted: size with all of them, limit."""
        return {"all": f"{self.plan.size_all:,}", "limit": f"{self.plan.limit:,}"}


def _held_rows(user: AbstractBaseUser, target: str) -> list[MemoryEntry]:
    return list(
        MemoryEntry.objects.pending()
        .filter(owner=user, target=target, source=Source.IMPORT, pending_action="add")
        .order_by("order", "id")
    )


def _active_contents(user: AbstractBaseUser, target: str) -> list[str]:
    return list(
        MemoryEntry.objects.active()
        .filter(owner=user, target=target)
        .order_by("order", "id")
        .values_list("content", flat=True)
    )


def memory_import_held(*, user: AbstractBaseUser) -> list[HeldImport]:
    """The user's held import entries per target, with how they would fit today."""
    held = []
    for target in Target.values:
        rows = _held_rows(user, target)
        if rows:
            plan = fit_plan(
                existing=_active_contents(user, target),
                new=[r.content for r in rows],
                limit=memory_limit(user=user, target=target),
            )
            held.append(HeldImport(target=target, entries=rows, plan=plan))
    return held


def memory_import_hold(
    *,
    user: AbstractBaseUser,
    target: str,
    entries: Sequence[str],
    provenance: Provenance | None = None,
) -> int:
    """Keep `entries` (already scanned, in file order) as pending adds from an import, so a
    file over the limit loses nothing while its owner chooses. Entries already in the list or
    already held are skipped; returns how many are held now in all."""
    provenance = provenance or Provenance(source=Source.IMPORT)
    target = check_target(target)
    with transaction.atomic():
        lock_anchor(user, target)
        held = _held_rows(user, target)
        skip = set(_active_contents(user, target)) | {r.content for r in held}
        top = max((r.order for r in held), default=0)
        now = timezone.now()
        rows = [
            MemoryEntry(
                owner=user,
                target=target,
                content=text,
                content_hash=content_digest(text),
                order=top + i,
                status=MemoryEntry.Status.PENDING,
                pending_action=MemoryEntry.PendingAction.ADD,
                source=Source.IMPORT,
                created_at=now,
                updated_at=now,
            )
            for i, text in enumerate((e for e in dict.fromkeys(entries) if e not in skip), start=1)
        ]
        MemoryEntry.objects.bulk_create(rows)
        rows = _held_rows(user, target)[len(held) :]
        log_events(
            user,
            target,
            provenance,
            None,
            [
                {
                    "action": MemoryEvent.Action.IMPORT,
                    "entry": row,
                    "after": row.content,
                    "verdict": MemoryEvent.Verdict.STAGED,
                    "detail": "Held back from an import over the limit, for your choice.",
                }
                for row in rows
            ],
        )
        return len(held) + len(rows)


def memory_import_resolve(
    *,
    user: AbstractBaseUser,
    target: Any,
    choice: Any,
    provenance: Provenance | None = None,
) -> str:
    """Apply the person's choice to their held import entries for `target`:

    raise    raise their limit for `target` just enough, and import every held entry;
    fit      import the first held entries that fit, in file order; the rest stay held;
    discard  drop the held entries (each is logged as rejected).

    Returns what happened, in a sentence for the person."""
    provenance = provenance or Provenance(source=Source.IMPORT)
    target = check_target(target)
    if choice not in HELD_CHOICES:
        raise ServiceError(
            "invalid", gettext("Choose to raise the limit, import what fits, or discard.")
        )
    name = FILE_LABELS[Target(target)]
    with transaction.atomic():
        lock_anchor(user, target)
        rows = _held_rows(user, target)
        if not rows:
            raise ServiceError(
                "nothing_held",
                gettext("No entries from %(file)s are waiting any more.") % {"file": name},
            )
        if choice == "discard":
            MemoryEntry.objects.filter(pk__in=[r.pk for r in rows]).delete()
            log_events(
                user,
                target,
                provenance,
                None,
                [
                    {
                        "action": MemoryEvent.Action.REJECT,
                        "after": r.content,
                        "verdict": MemoryEvent.Verdict.REJECTED,
                        "detail": "Held import entry discarded.",
                    }
                    for r in rows
                ],
            )
            return ngettext(
                "%(file)s: discarded %(count)d entry that did not fit.",
                "%(file)s: discarded %(count)d entries that did not fit.",
                len(rows),
            ) % {"file": name, "count": len(rows)}
        existing = _active_contents(user, target)
        plan = fit_plan(
            existing=existing,
            new=[r.content for r in rows],
            limit=memory_limit(user=user, target=target),
        )
        raised = ""
        if choice == "raise":
            take = plan.new
            if plan.over:
                _set_limit(user, target, plan.size_all)
                raised = " " + gettext(
                    "Your limit was raised from %(before)s to %(after)s characters to fit them."
                ) % {"before": f"{plan.limit:,}", "after": f"{plan.size_all:,}"}
        else:
            take = plan.new[: plan.fits]
        if take:
            # Inside this transaction: the limit just raised is the one the write checks.
            write(
                user=user,
                target=target,
                ops=[Op("add", text) for text in take],
                provenance=provenance,
                kind="import",
                stage=False,
            )
        # Held rows now in the list (added here, or meanwhile) are used up.
        now_in = set(existing) | set(take)
        MemoryEntry.objects.filter(pk__in=[r.pk for r in rows if r.content in now_in]).delete()
        left = len(plan.new) - len(take)
    # What the person reads (the Account page), in their language.
    message = (
        ngettext(
            "%(file)s: imported %(count)d entry.",
            "%(file)s: imported %(count)d entries.",
            len(take),
        )
        % {"file": name, "count": len(take)}
        + raised
    )
    if left:
        message += " " + ngettext(
            "%(count)d entry did not fit and is still waiting for your choice.",
            "%(count)d entries did not fit and are still waiting for your choice.",
            left,
        ) % {"count": left}
    return message


def _set_limit(user: AbstractBaseUser, target: str, limit: int) -> None:
    from accounts.services import profile_get

    profile = profile_get(user=user)
    field_name = "user_char_limit" if target == Target.USER else "memory_char_limit"
    setattr(profile, field_name, limit)
    profile.save(update_fields=[field_name])
