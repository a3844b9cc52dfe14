"""Conversation titles as a search signal: "trams" finds the chat titled "Lisbon trams".

Titles are matched with stems (SQLite: the `sessions_title_fts` porter table; PostgreSQL:
`to_tsvector('english', title)`, served by an expression index), inside the SQL scoped to
one owner, deleted conversations excluded. A query with CJK words matches titles by
substring instead ("旅行" in "Granada旅行"), scored by how many of its terms a title holds:
a person has few enough conversations that their titles are scanned, not indexed. Emoji
queries do not look at titles.
"""

from __future__ import annotations

from django.db import connection

from core.db.rows import marks

from ..selectors import escape_like
from .hits import Hit, as_datetime
from .sanitize import ParsedQuery
from .sql import Filters, run_read
from .tsquery import pg_tsquery

#: Title matches looked at per query (the best ones).
TITLE_ROWS = 20
#: A title match adds this fraction of the page's best message score to its conversation.
TITLE_BOOST = 1.0


def title_scores(*, owner_id: int, query: ParsedQuery, filters: Filters) -> dict[str, float]:
    """{session id: relevance > 0} for the owner's sessions whose title matches `query`.

    A role filter means "messages by this role": titles do not apply then.
    """
    if not query or query.has_symbols or filters.roles:
        return {}
    exclude = sorted(filters.exclude_session_ids)
    not_in = f" AND s.id NOT IN ({marks(exclude)})" if exclude else ""
    if query.has_cjk:
        rows = _substring_titles(query, owner_id, not_in, exclude)
    elif connection.vendor == "postgresql":
        expr, params = pg_tsquery(query, "english")
        if not expr:
            return {}
        vector = "to_tsvector('english'::regconfig, coalesce(s.title, ''))"
        sql = f"""
            SELECT s.id, ts_rank({vector}, q.query) FROM sessions_app_session s
            CROSS JOIN (SELECT {expr} AS query) q
            WHERE {vector} @@ q.query AND s.owner_id = %s
              AND s.end_reason <> 'deleted'{not_in}
            ORDER BY 2 DESC LIMIT %s"""  # noqa: S608 - placeholders only
        rows = run_read(sql, [*params, owner_id, *exclude, TITLE_ROWS])
    else:
        sql = f"""
            SELECT s.id, -t.rank FROM sessions_title_fts t
            JOIN sessions_app_session s ON s.rowid = t.rowid
            WHERE sessions_title_fts MATCH %s AND s.owner_id = %s
              AND s.end_reason <> 'deleted'{not_in}
            ORDER BY t.rank LIMIT %s"""  # noqa: S608 - placeholders only
        rows = run_read(sql, [query.fts, owner_id, *exclude, TITLE_ROWS])
    return {row[0]: float(row[1] or 0.0) or 1e-6 for row in rows}


def _substring_titles(
    query: ParsedQuery, owner_id: int, not_in: str, exclude: list[str]
) -> list[tuple]:
    terms = query.positive_terms
    operator = "ILIKE" if connection.vendor == "postgresql" else "LIKE"
    test = f"s.title {operator} %s ESCAPE '\\'"
    patterns = [f"%{escape_like(t)}%" for t in terms]
    score = " + ".join(f"CASE WHEN {test} THEN 1 ELSE 0 END" for _ in terms)
    sql = f"""
        SELECT s.id, {score} FROM sessions_app_session s
        WHERE s.owner_id = %s AND s.end_reason <> 'deleted' AND s.title IS NOT NULL
          AND ({" OR ".join([test] * len(terms))}){not_in}
        ORDER BY 2 DESC, s.started_at DESC LIMIT %s"""  # noqa: S608 - placeholders only
    return run_read(sql, [*patterns, owner_id, *patterns, *exclude, TITLE_ROWS])


def title_only_hits(session_ids: list[str]) -> list[Hit]:
    """A stand-in hit per session — the first message from the person (else any) on its
    selected path — for a conversation found by its title alone."""
    if not session_ids:
        return []
    sql = f"""
        SELECT m.id, m.session_id, m.role, m.timestamp FROM sessions_app_message m
        WHERE m.id IN (
            SELECT coalesce(
                (SELECT min(u.id) FROM sessions_app_message u
                 WHERE u.session_id = x.session_id AND u.role = 'user' AND u.active),
                min(x.id))
            FROM sessions_app_message x
            WHERE x.session_id IN ({marks(session_ids)}) AND x.role <> 'system' AND x.active
            GROUP BY x.session_id)"""  # noqa: S608 - placeholders only
    return [
        Hit(message_id=r[0], session_id=r[1], role=r[2], timestamp=as_datetime(r[3]))
        for r in run_read(sql, list(session_ids), scan=False)
    ]
