"""The SQL every search route shares: the tables, the filters applied inside each
statement (owner first), reading rows into hits, reads that never fail a request, and on
PostgreSQL the ranking of a common query's recent slice (the word and CJK gram routes)."""

from __future__ import annotations

import json
import logging
import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DatabaseError, connection, transaction

from core.db.rows import marks

from .hits import Hit, as_datetime

logger = logging.getLogger(__name__)

MESSAGE = "sessions_app_message"
SESSION = "sessions_app_session"

#: A ranking window with too few of the owner's matches grows this many times.
RANK_WINDOW_GROWTH = 8
#: PostgreSQL: a query with more matches than this (an upper bound from the planner's
#: estimates) ranks a recent slice expected to hold about PG_RANK_WINDOW (see pg_ranked).
PG_FULL_RANK = 4000
PG_RANK_WINDOW = 2000


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
        sql.append(f" AND m.role IN ({marks(filters.roles)})")
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
        sql.append(f" AND m.session_id NOT IN ({marks(ids)})")
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


def run_read(sql: str, params: list[object], *, scan: bool = True) -> list[tuple]:
    """Execute a read; a database refusal becomes "no hits" instead of a failed request.

    The sanitiser makes refusals impossible for FTS5 syntax; this is the last line of
    defence (e.g. a corrupted index), inside a savepoint when it runs in a caller's
    transaction, so PostgreSQL's transaction survives it.

    `scan`: a statement that may scan (a ranking, a substring search). PostgreSQL's
    parallel workers cost such a LIMIT query more to start than they save and split a
    backward index scan badly, so it runs with none, set in a transaction of its own so the
    setting cannot leak into a caller's: BEGIN, SET LOCAL, the statement and COMMIT, four
    round trips. A plan (EXPLAIN) or a read of rows by their ids or their conversations'
    ids passes `scan=False`: one.
    """
    postgres = connection.vendor == "postgresql"
    nested = postgres and connection.in_atomic_block
    serial = postgres and scan and not nested
    # No transaction on SQLite: in IMMEDIATE mode atomic() takes the write lock for a read.
    guard = transaction.atomic() if serial or nested else nullcontext()
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


# --- PostgreSQL: ranking a recent slice of a common query -------------------------------


def pg_bound(groups: list[list[tuple[str, tuple[object, ...]]]]) -> float:
    """An upper bound of the messages matching `groups`, OR of AND lists of conditions on
    the message row `m` (SQL, parameters): each group at most its rarest condition, as the
    planner estimates each alone, the groups summed. The planner's estimate of a whole group
    multiplies its terms as if they were independent, which the words of one topic are not
    ("deploy script": 2,115 estimated, 15,802 found among 1,000,000 messages)."""
    estimates: dict[tuple[str, tuple[object, ...]], float] = {}
    bound = 0.0
    for group in groups:
        if not group:
            return math.inf
        for condition in group:
            if condition not in estimates:
                estimates[condition] = _pg_estimate(*condition)
        bound += min(estimates[c] for c in group)
    return bound


def _pg_estimate(condition: str, params: tuple[object, ...]) -> float:
    plan = run_read(
        f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {MESSAGE} m WHERE {condition}",  # noqa: S608
        list(params),
        scan=False,
    )
    if not plan:
        return math.inf
    document = plan[0][0]
    if isinstance(document, str):
        document = json.loads(document)
    return float(document[0]["Plan"]["Plan Rows"])


def pg_ranked(sql: str, head: list[object], limit: int, bound: float) -> list[tuple]:
    """Run a ranking statement (its `{window}` slot, then LIMIT %s) so that its cost stays
    near PG_RANK_WINDOW ranked matches: every match costs a heap visit and a ts_rank. With
    at most PG_FULL_RANK matches (`bound`, an upper bound) everything is ranked; else the
    newest slice of messages expected to hold PG_RANK_WINDOW of them, grown
    RANK_WINDOW_GROWTH times while it holds fewer than `limit` of the owner's, until it
    covers every message (the bound overestimates, and the owner's share is unknown)."""
    if bound > PG_FULL_RANK:
        ids = run_read(f"SELECT min(id), max(id) FROM {MESSAGE}", [], scan=False)  # noqa: S608
        oldest, newest = ids[0] if ids else (None, None)
        if oldest is not None:
            span = max(PG_RANK_WINDOW, (newest - oldest) * PG_RANK_WINDOW / bound)
            while newest - span > oldest:
                rows = run_read(
                    sql.format(window="AND m.id >= %s"), [*head, int(newest - span), limit]
                )
                if len(rows) >= limit:
                    return rows
                span *= RANK_WINDOW_GROWTH
    return run_read(sql.format(window=""), [*head, limit])
