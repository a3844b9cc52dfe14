"""Housekeeping run by the periodic tasks in hermes_site/tasks.py (scheduled by Celery beat,
see CELERY_BEAT_SCHEDULE). Every function is idempotent: running it twice, or on two
workers at once, does no harm."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

logger = logging.getLogger(__name__)


def sessions_expire() -> int:
    """Delete expired login sessions (what `manage.py clearsessions` does); returns how
    many."""
    from django.contrib.sessions.models import Session as LoginSession

    deleted, _ = LoginSession.objects.filter(expire_date__lt=timezone.now()).delete()
    return deleted


def streams_close_orphaned(*, now: datetime | None = None) -> int:
    """Answers left "streaming" by a process that died mid-turn become "interrupted", with
    the text saved so far. A message counts as orphaned once it is older than
    HERMES_TURN_STALE_SECONDS and nobody holds a fresh claim on its conversation (the same
    test `turn_begin` uses before taking a conversation over)."""
    from sessions_app.models import Message

    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.HERMES_TURN_STALE_SECONDS)
    return Message.objects.filter(
        Q(session__turn_token="") | Q(session__turn_started_at__lt=stale),
        status=Message.Status.STREAMING,
        timestamp__lt=stale,
    ).update(status=Message.Status.INTERRUPTED, finish_reason="orphaned")


def audit_prune(*, now: datetime | None = None) -> int:
    """Delete memory audit events older than HERMES_AUDIT_RETENTION_DAYS (0 keeps all)."""
    days = settings.HERMES_AUDIT_RETENTION_DAYS
    if days <= 0:
        return 0
    from memory.models import MemoryEvent

    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = MemoryEvent.objects.filter(created_at__lt=cutoff).delete()
    return deleted


def _sqlite_fts_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%' AND lower(sql) LIKE '%using fts5%'"
        )
        return [row[0] for row in cursor.fetchall()]


def database_optimize() -> list[str]:
    """Keep the database fast: on SQLite, merge the FTS5 index segments, refresh the query
    planner's statistics and truncate the WAL; on PostgreSQL, VACUUM (ANALYZE). Returns
    what it did. Call outside any transaction (both engines refuse these inside one)."""
    if connection.in_atomic_block:
        raise RuntimeError("database_optimize must run outside a transaction")
    done: list[str] = []
    if connection.vendor == "sqlite":
        for table in _sqlite_fts_tables():
            quoted = '"' + table.replace('"', '""') + '"'
            with connection.cursor() as cursor:
                # FTS5's 'optimize' command; the table name comes from sqlite_master.
                cursor.execute(f"INSERT INTO {quoted}({quoted}) VALUES ('optimize')")  # noqa: S608
            done.append(f"fts5 optimize {table}")
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA optimize")
            done.append("PRAGMA optimize")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            done.append("PRAGMA wal_checkpoint(TRUNCATE)")
    elif connection.vendor == "postgresql":
        # VACUUM cannot run inside a transaction block; Django is in autocommit here.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE)")
        done.append("VACUUM (ANALYZE)")
    return done
