"""Applying operations to an in-memory copy of a list, with Hermes' matching rules.

No database here: the caller loads the list under its lock, applies, checks the budget on
the result and writes the difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..models import MemoryEntry
from .validation import Op, preview, sanitized


@dataclass
class Slot:
    content: str
    entry: MemoryEntry | None = None  # None: new in this write

    @property
    def changed(self) -> bool:
        return self.entry is None or self.entry.content != self.content


class OpFailed(Exception):
    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details
        self.index = 0  # 1-based operation, set by apply_ops


@dataclass
class Change:
    index: int
    action: str
    before: str
    after: str
    slot: Slot | None


def _find(slots: list[Slot], old_text: str) -> int:
    exact = [i for i, s in enumerate(slots) if s.content == old_text]
    if exact:
        return exact[0]
    hits = [i for i, s in enumerate(slots) if old_text in s.content]
    if not hits:
        raise OpFailed(
            "no_match",
            f"No entry matched '{old_text}'.",
            current_entries=sanitized([s.content for s in slots]),
        )
    distinct = list(dict.fromkeys(slots[i].content for i in hits))
    if len(distinct) > 1:
        raise OpFailed(
            "ambiguous",
            f"Multiple entries matched '{old_text}'. Be more specific.",
            matches=[preview(c) for c in distinct],
        )
    return hits[0]


def _find_id(slots: list[Slot], entry_id: int) -> int:
    for i, s in enumerate(slots):
        if s.entry is not None and s.entry.pk == entry_id:
            return i
    raise OpFailed("not_found", "That entry no longer exists (it was changed or removed).")


def apply_ops(slots: list[Slot], ops: Sequence[Op]) -> tuple[list[Change], list[str]]:
    """Apply `ops` to `slots` in place; returns the changes and messages for no-ops."""
    changes: list[Change] = []
    notes: list[str] = []
    for index, op in enumerate(ops, start=1):
        try:
            _apply_one(slots, op, index, changes, notes)
        except OpFailed as exc:
            exc.index = index
            raise
    return changes, notes


def _apply_one(
    slots: list[Slot], op: Op, index: int, changes: list[Change], notes: list[str]
) -> None:
    if op.action == "add":
        if any(s.content == op.content for s in slots):
            notes.append("Entry already exists (no duplicate added).")
            return
        slot = Slot(op.content)
        slots.append(slot)
        changes.append(Change(index, "add", "", op.content, slot))
        return
    at = _find_id(slots, op.entry_id) if op.entry_id else _find(slots, op.old_text)
    before = slots[at].content
    if op.action == "remove":
        slots.pop(at)
        changes.append(Change(index, "remove", before, "", None))
    elif op.content == before:
        notes.append("Entry already has that text (nothing changed).")
    elif any(s.content == op.content for s in slots):
        # The new text is already another entry: keep that one, drop this one (Hermes
        # dedupes identical entries on every reload).
        slots.pop(at)
        changes.append(Change(index, "replace", before, op.content, None))
    else:
        slots[at].content = op.content
        changes.append(Change(index, "replace", before, op.content, slots[at]))
