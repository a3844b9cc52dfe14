"""Import of Hermes' MEMORY.md / USER.md files (export is a selector)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from core.exceptions import ServiceError

from ..models import ENTRY_DELIMITER, MemoryEntry, Source
from .store import WriteResult, write
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
    return result
