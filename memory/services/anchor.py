"""The (user, target) anchor row every write to a memory list locks first (see
`MemoryAnchor`): one statement locks it, bumps its version and reads the owner's limits;
on SQLite the same statement also returns the list (`lock_and_load`)."""

from __future__ import annotations

import datetime
import json
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from ..models import MemoryAnchor, MemoryEntry
from ..selectors import MemoryPrefs

#: Bump the anchor's version and read the owner's memory settings, in one statement (a
#: missing profile or override reads as NULL: the deployment's default).
_BUMP_ANCHOR = """
    UPDATE memory_memoryanchor SET version = version + 1, updated_at = %(now)s
    WHERE owner_id = %(user)s AND target = %(target)s
    RETURNING
        (SELECT memory_enabled FROM accounts_profile WHERE user_id = %(user)s),
        (SELECT memory_write_approval FROM accounts_profile WHERE user_id = %(user)s),
        (SELECT memory_char_limit FROM accounts_profile WHERE user_id = %(user)s),
        (SELECT user_char_limit FROM accounts_profile WHERE user_id = %(user)s){entries}
"""

_FIELDS = MemoryEntry._meta.concrete_fields
#: SQLite only: the owner's active entries of the list, as one JSON array of rows.
#: (Double-quoted: the entry's `order` column is a keyword.)
_ENTRIES_JSON = """,
        (SELECT json_group_array(json_array({columns})) FROM (
            SELECT * FROM memory_memoryentry
            WHERE owner_id = %(user)s AND target = %(target)s AND status = 'active'
            ORDER BY "order", id
        ))""".format(  # noqa: S608 - the model's own column names
    columns=", ".join(f'"{f.column}"' for f in _FIELDS)
)


def _bump_anchor(
    user: AbstractBaseUser, target: str, *, entries: bool = False
) -> tuple[Any, ...] | None:
    """The UPDATE takes the row lock a SELECT … FOR UPDATE would (PostgreSQL; on SQLite the
    IMMEDIATE transaction already holds the write lock). The entries must be read by a
    *later* statement: under READ COMMITTED a statement that waited for the lock still
    reads from the snapshot it started with, and would miss the previous writer's rows."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        sql = _BUMP_ANCHOR.format(entries=_ENTRIES_JSON if entries else "")
        cursor.execute(sql, {"now": now, "user": user.pk, "target": target})
        return cursor.fetchone()


def lock_anchor(user: AbstractBaseUser, target: str) -> MemoryPrefs:
    """Lock the (user, target) anchor row, bumping its version (it counts the writes that
    took the lock), and return the owner's memory settings read under it. Call inside
    transaction.atomic()."""
    return MemoryPrefs.of(*_locked_row(user, target)[:4])


def lock_and_load(user: AbstractBaseUser, target: str) -> tuple[MemoryPrefs, list[MemoryEntry]]:
    """`lock_anchor`, then the list's active entries in order, read under the lock. On
    SQLite one statement: the IMMEDIATE transaction took the write lock at BEGIN, so the
    UPDATE's own subquery already sees the last writer's rows. PostgreSQL needs the
    second statement (see `_bump_anchor`)."""
    if connection.vendor != "sqlite":
        prefs = lock_anchor(user, target)
        loaded = MemoryEntry.objects.active().filter(owner=user, target=target)
        return prefs, list(loaded.order_by("order", "id"))
    row = _locked_row(user, target, entries=True)
    loaded = [_entry_of(values) for values in json.loads(row[4])]
    # SQLite does not promise an aggregate keeps its subquery's order.
    return MemoryPrefs.of(*row[:4]), sorted(loaded, key=lambda e: (e.order, e.pk))


def _entry_of(values: list[Any]) -> MemoryEntry:
    """A MemoryEntry from one row of `_ENTRIES_JSON` (SQLite keeps datetimes as UTC text)."""
    row = []
    for field, value in zip(_FIELDS, values, strict=True):
        if isinstance(field, models.DateTimeField) and value is not None:
            value = datetime.datetime.fromisoformat(value)
            if settings.USE_TZ:
                value = value.replace(tzinfo=datetime.UTC)
        row.append(value)
    return MemoryEntry.from_db(connection.alias, [f.attname for f in _FIELDS], row)


def _locked_row(user: AbstractBaseUser, target: str, *, entries: bool = False) -> tuple:
    row = _bump_anchor(user, target, entries=entries)
    if row is None:
        try:
            with transaction.atomic():
                MemoryAnchor.objects.create(owner=user, target=target)
        except IntegrityError:
            # Another writer created it first; its row is committed (or we wait for it below).
            pass
        row = _bump_anchor(user, target, entries=entries)
    return row
