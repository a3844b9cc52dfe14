"""Periodic housekeeping: a registry each app fills from its `ready()` with what expires
or needs pruning, and the database optimisation every vendor needs. The periodic tasks in
core/tasks.py (scheduled by Celery beat, see CELERY_BEAT_SCHEDULE) run what is registered.
Every registered job must be idempotent: running it twice, or on two workers at once, does
no harm."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Literal

from django.db import connection

logger = logging.getLogger(__name__)

Kind = Literal["expire", "prune"]
#: kind -> {result key -> job}; a job returns how many rows it removed or changed.
_JOBS: dict[str, dict[str, Callable[[], int]]] = {"expire": {}, "prune": {}}


def housekeeping_register(kind: Kind, key: str, job: Callable[[], int]) -> None:
    """Run `job` in the periodic `kind` task, reporting its count under `key`. Call from an
    app's `ready()`; registering the same key twice keeps the last job."""
    _JOBS[kind][key] = job


def housekeeping_run(kind: Kind) -> dict[str, int]:
    """Run every job of `kind`; returns their counts by key."""
    return {key: job() for key, job in _JOBS[kind].items()}


def _sqlite_fts_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%' AND lower(sql) LIKE '%using fts5%'"
        )
        return [row[0] for row in cursor.fetchall()]


def _wal_truncate(*, tries: int = 50) -> None:
    """Copy the whole WAL into the database file and empty it (what an erasure relies on to
    leave no deleted row in the WAL). Another connection's checkpoint running at that moment
    (the ASGI process's thread, core/db/checkpoint.py) makes SQLite answer "busy" at once,
    without waiting: tried again for up to `tries` tenths of a second."""
    for _ in range(tries):
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            busy, _frames, _copied = cursor.fetchone()
        if not busy:
            return
        time.sleep(0.1)
    raise RuntimeError("the WAL could not be truncated: another connection kept it busy")


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
        _wal_truncate()
        done.append("PRAGMA wal_checkpoint(TRUNCATE)")
    elif connection.vendor == "postgresql":
        # VACUUM cannot run inside a transaction block; Django is in autocommit here.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE)")
        done.append("VACUUM (ANALYZE)")
    return done
