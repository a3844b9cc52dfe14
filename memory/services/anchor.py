"""The (user, target) anchor row every write to a memory list locks first (see
`MemoryAnchor`): one statement locks it, bumps its version and reads the owner's limits."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from ..models import MemoryAnchor
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
        (SELECT user_char_limit FROM accounts_profile WHERE user_id = %(user)s)
"""


def _bump_anchor(user: AbstractBaseUser, target: str) -> tuple[Any, ...] | None:
    """The UPDATE takes the row lock a SELECT … FOR UPDATE would (PostgreSQL; on SQLite the
    IMMEDIATE transaction already holds the write lock). The entries must be read by a
    *later* statement: under READ COMMITTED a statement that waited for the lock still
    reads from the snapshot it started with, and would miss the previous writer's rows."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_BUMP_ANCHOR, {"now": now, "user": user.pk, "target": target})
        return cursor.fetchone()


def lock_anchor(user: AbstractBaseUser, target: str) -> MemoryPrefs:
    """Lock the (user, target) anchor row, bumping its version (it counts the writes that
    took the lock), and return the owner's memory settings read under it. Call inside
    transaction.atomic()."""
    row = _bump_anchor(user, target)
    if row is None:
        try:
            with transaction.atomic():
                MemoryAnchor.objects.create(owner=user, target=target)
        except IntegrityError:
            # Another writer created it first; its row is committed (or we wait for it below).
            pass
        row = _bump_anchor(user, target)
    return MemoryPrefs.of(*row)
