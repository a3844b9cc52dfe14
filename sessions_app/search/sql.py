"""The SQL every search route shares: the tables, the filters applied inside each
statement (owner first), reading rows into hits, and reads that never fail a request."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DatabaseError, connection, transaction

from .hits import Hit, as_datetime

logger = logging.getLogger(__name__)

MESSAGE = "sessions_app_message"
SESSION = "sessions_app_session"


@dataclass(frozen=True, slots=True)
class Filters:
    """Restrictions applied inside the SQL. `until` is exclusive."""

    roles: tuple[str, ...] = ()  # empty: every role but system
    since: datetime | None = None
    until: datetime | None = None
    exclude_session_ids: frozenset[str] = field(default_factory=frozenset)


def filter_sql(owner_id: int, filters: Filters) -> tuple[str, list[object]]:
    # Messages carried into a compression continuation are copies of the parent's; the
    # originals are found, so a chain never shows the same text twice.
    sql = [" AND s.owner_id = %s AND s.end_reason <> 'deleted' AND m.kind <> 'carried'"]
    params: list[object] = [owner_id]
    if filters.roles:
        sql.append(f" AND m.role IN ({', '.join(['%s'] * len(filters.roles))})")
        params.extend(filters.roles)
    else:
        sql.append(" AND m.role <> 'system'")
    if filters.since is not None:
        sql.append(" AND m.timestamp >= %s")
        params.append(filters.since)
    if filters.until is not None:
        sql.append(" AND m.timestamp < %s")
        params.append(filters.until)
    if filters.exclude_session_ids:
        ids = sorted(filters.exclude_session_ids)
        sql.append(f" AND m.session_id NOT IN ({', '.join(['%s'] * len(ids))})")
        params.extend(ids)
    return "".join(sql), params


def rows_to_hits(rows: list[tuple]) -> list[Hit]:
    return [
        Hit(
            message_id=row[0],
            session_id=row[1],
            role=row[2],
            timestamp=as_datetime(row[3]),
            score=float(row[4] or 0.0),
            on_path=bool(row[5]),
        )
        for row in rows
    ]


def run_read(sql: str, params: list[object]) -> list[tuple]:
    """Execute a read; a database refusal becomes "no hits" instead of a failed request.

    The sanitiser makes refusals impossible for FTS5 syntax; this is the last line of
    defence (e.g. a corrupted index), inside a savepoint so PostgreSQL's transaction
    survives it.
    """
    # A savepoint only on PostgreSQL: on SQLite (IMMEDIATE mode) atomic() would take the
    # write lock for a plain read.
    postgres = connection.vendor == "postgresql"
    # Search statements are LIMIT queries that stop early; PostgreSQL's parallel workers
    # cost more to start than they save and split a backward index scan badly. Only in a
    # transaction of our own, so the setting cannot leak into a caller's.
    serial = postgres and not connection.in_atomic_block
    guard = transaction.atomic() if postgres else nullcontext()
    try:
        with guard, connection.cursor() as cursor:
            if serial:
                cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            cursor.execute(sql, params)
            return cursor.fetchall()
    except DatabaseError as exc:
        # The type only: the message could quote the user's search text.
        logger.warning("search query refused by the database: %s", type(exc).__name__)
        return []
