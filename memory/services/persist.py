"""Writing a list's difference under its anchor lock (see `store.write`): deletes,
rewrites and inserts of entries; on PostgreSQL a one-entry difference and its audit row
go in one statement (a data-modifying CTE)."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, models
from django.db.models import Q
from django.utils import timezone

from ..models import MemoryEntry, MemoryEvent, content_digest
from .engine import Slot
from .validation import Provenance


def _diff(loaded: list[MemoryEntry], slots: list[Slot]) -> tuple[list[int], list[Slot], list[Slot]]:
    """What writing `slots` over `loaded` takes: entry ids to delete, slots whose entry
    changed text, new slots."""
    kept = {s.entry.pk for s in slots if s.entry is not None}
    gone = [e.pk for e in loaded if e.pk not in kept]
    updated = [s for s in slots if s.entry is not None and s.changed]
    return gone, updated, [s for s in slots if s.entry is None]


#: What an entry's rewrite sets: the text, and its provenance (it follows the text).
_REWRITTEN = [
    "content",
    "content_hash",
    "updated_at",
    "source",
    "source_client",
    "source_session",
    "source_message",
]


def _rewrite(
    entry: MemoryEntry,
    content: str,
    provenance: Provenance,
    session_id: str | None,
    message_id: int | None,
) -> None:
    """Set `_REWRITTEN` on `entry` (not saved): the entry now says what this writer wrote."""
    entry.content = content
    entry.content_hash = content_digest(content)
    entry.updated_at = timezone.now()
    entry.source = provenance.source
    entry.source_client = provenance.client
    entry.source_session_id = session_id
    entry.source_message_id = message_id


def _new_entry(
    user: AbstractBaseUser,
    target: str,
    content: str,
    order: int,
    provenance: Provenance,
    session_id: str | None,
    message_id: int | None,
) -> MemoryEntry:
    entry = MemoryEntry(owner=user, target=target, order=order)
    _rewrite(entry, content, provenance, session_id, message_id)
    entry.created_at = entry.updated_at
    return entry


def persist(
    user: AbstractBaseUser,
    target: str,
    loaded: list[MemoryEntry],
    slots: list[Slot],
    provenance: Provenance,
    session_id: str | None,
    message_id: int | None,
) -> None:
    """Write the difference between `loaded` and `slots`. Call holding the anchor lock."""
    gone, updated, new = _diff(loaded, slots)
    if gone:
        # One statement, not Django's collector (a SELECT per related model): the entries'
        # pending proposals go with them, and the database's trigger (migration
        # 0004_entry_release) unlinks their snapshot rows and audit events.
        doomed = MemoryEntry.objects.filter(Q(pk__in=gone) | Q(pending_of__in=gone))
        doomed._raw_delete(doomed.db)
    if len(updated) > 1:
        # Two entries may swap texts; park their digests first so the partial unique
        # index never sees a transient duplicate.
        for s in updated:
            MemoryEntry.objects.filter(pk=s.entry.pk).update(content_hash=f"moving:{s.entry.pk}")
    for s in updated:
        _rewrite(s.entry, s.content, provenance, session_id, message_id)
        s.entry.save(update_fields=_REWRITTEN)
    top = max((e.order for e in loaded), default=0)
    for offset, s in enumerate(new, start=1):
        s.entry = _new_entry(
            user, target, s.content, top + offset, provenance, session_id, message_id
        )
        s.entry.save(force_insert=True)


def _columns(obj: models.Model, names: Sequence[str] | None = None) -> tuple[list[str], list]:
    """Quoted columns and database values of `obj`'s fields (`names`, else all but the
    primary key), as Django's own INSERT/UPDATE would send them."""
    fields = [
        f
        for f in obj._meta.concrete_fields
        if (f.name in names if names is not None else not f.primary_key)
    ]
    quote = connection.ops.quote_name
    values = [f.get_db_prep_save(getattr(obj, f.attname), connection) for f in fields]
    return [quote(f.column) for f in fields], values


def persist_logged(
    user: AbstractBaseUser,
    target: str,
    loaded: list[MemoryEntry],
    slots: list[Slot],
    event: MemoryEvent,
    provenance: Provenance,
    session_id: str | None,
    message_id: int | None,
) -> bool:
    """PostgreSQL: write a one-row difference and its audit row `event` in one statement
    (a data-modifying CTE). False, having written nothing, if the difference is larger.
    Call holding the anchor lock."""
    gone, updated, new = _diff(loaded, slots)
    if len(gone) + len(updated) + len(new) != 1:
        return False
    event_columns, event_values = _columns(
        event, [f.name for f in MemoryEvent._meta.concrete_fields if f.name not in ("id", "entry")]
    )
    insert_event = f"INSERT INTO memory_memoryevent ({', '.join(event_columns)}, entry_id)"
    marks = ", ".join(["%s"] * len(event_values))
    if gone:
        sql = (
            "WITH gone AS (DELETE FROM memory_memoryentry WHERE id = %s OR pending_of_id = %s) "  # noqa: S608
            f"{insert_event} VALUES ({marks}, NULL) RETURNING entry_id"
        )
        params = [gone[0], gone[0], *event_values]
    else:
        if new:
            slot = new[0]
            top = max((e.order for e in loaded), default=0)
            slot.entry = _new_entry(
                user, target, slot.content, top + 1, provenance, session_id, message_id
            )
            columns, values = _columns(slot.entry)
            written = (
                f"INSERT INTO memory_memoryentry ({', '.join(columns)}) "  # noqa: S608
                f"VALUES ({', '.join(['%s'] * len(values))}) RETURNING id"
            )
            params = values
        else:
            slot = updated[0]
            _rewrite(slot.entry, slot.content, provenance, session_id, message_id)
            columns, values = _columns(slot.entry, _REWRITTEN)
            written = (
                f"UPDATE memory_memoryentry SET {', '.join(f'{c} = %s' for c in columns)} "  # noqa: S608
                "WHERE id = %s RETURNING id"
            )
            params = [*values, slot.entry.pk]
        sql = (
            f"WITH written AS ({written}) {insert_event} "  # noqa: S608
            f"VALUES ({marks}, (SELECT id FROM written)) RETURNING entry_id"
        )
        params = [*params, *event_values]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        (entry_id,) = cursor.fetchone()
    if new:
        slot.entry.pk = entry_id
        slot.entry._state.adding = False
        slot.entry._state.db = connection.alias
    return True
