"""L2 session search at scale: index build, size overhead, retrieval latency, recall@3.

Generates BENCH_SEARCH_MESSAGES messages (default 1,000,000) in conversations of 100
messages (so 10,000 at full size): English, Chinese and mixed conversations drawn from a
Zipf-distributed vocabulary with topic words, tool output and a few planted "needle"
conversations for the labelled queries. Almost all belong to one user (the worst case for
that user's searches); a second user owns the rest, so the owner filter is really applied.

Figures:
- index build time: SQLite — the FTS5 tables (unicode61, porter, trigram, CJK grams,
  titles) built after a trigger-less bulk load; PostgreSQL — the generated tsvector
  columns ('simple', 'english' and the CJK grams), their GIN indexes, the title index and
  the pg_trgm index, created after COPY;
- the stemmed and the CJK index's own sizes (`stem_index_bytes`, `cjk_index_bytes`,
  SQLite; `stem_gin_index_bytes`, `cjk_gin_index_bytes` and `cjk_column_bytes`);
- database size before/after the indexes (overhead);
- p50/p95 per typical query of the retrieval stage (`find_hits`) and of the whole search
  without summaries (`search_conversations`: retrieval + grouping + snippets), side by
  side with a LIKE scan of the same terms over the same rows in the same run;
- recall@3 on the labelled queries (query → the conversation that must be in the top 3);
- for the plain-word queries, the bare word index of the same rows in the same run (one
  BM25-ranked MATCH, or ts_rank over the 'simple' tsvector: no owner, no stems, no
  grouping) and the ratios of retrieval and whole search to it.

    BENCH_SEARCH_MESSAGES=100000 python -m bench search --vendor sqlite
"""

from __future__ import annotations

import json
import os
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from bench.harness import percentiles
from bench.search_corpus import (
    ENGLISH,
    MESSAGES,
    PER_CONVERSATION,
    TYPICAL,
    Generator,
    generate,
    message_columns,
    session_columns,
)

REPEAT = int(os.environ.get("BENCH_SEARCH_REPEAT", 20))
LIKE_REPEAT = int(os.environ.get("BENCH_SEARCH_LIKE_REPEAT", 3))
TARGET_P95_MS = 50.0

# --- loading and indexing per vendor ---------------------------------------------------------


def _sqlite_size() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return pages * cursor.fetchone()[0]


def _sqlite_table_bytes(prefix: str) -> int:
    """Bytes of an FTS5 table's shadow tables (needs the dbstat virtual table)."""
    from django.db import DatabaseError, connection

    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE %s", [prefix + "_%"]
            )
            return int(cursor.fetchone()[0])
    except DatabaseError:
        return -1


def _pg_size() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size('sessions_app_message'),"
            " pg_relation_size('sessions_app_message')"
        )
        total, heap = cursor.fetchone()
    return {"total": total, "heap": heap}


def load_and_index(vendor: str, owner_id: int, outsider_id: int) -> dict[str, Any]:
    from django.db import connection

    from sessions_app.migrations import _fts_sql as fts

    figures: dict[str, Any] = {}
    scols, mcols = session_columns(), message_columns()
    with connection.cursor() as cursor:
        reverse = fts.SQLITE_TITLE_REVERSE + fts.SQLITE_REVERSE
        for statement in reverse if vendor == "sqlite" else fts.POSTGRES_REVERSE:
            cursor.execute(statement)

    connection.ensure_connection()
    if vendor == "sqlite":
        raw = connection.connection
        s_sql = f"INSERT INTO sessions_app_session ({', '.join(scols)}) VALUES ({', '.join('?' * len(scols))})"  # noqa: E501, S608
        m_sql = f"INSERT INTO sessions_app_message ({', '.join(mcols)}) VALUES ({', '.join('?' * len(mcols))})"  # noqa: E501, S608

        # A throwaway database: durability does not matter while loading.
        raw.execute("PRAGMA synchronous=OFF")

        def emit(kind: str, rows: list[tuple]) -> None:
            raw.execute("BEGIN")
            raw.executemany(s_sql if kind == "sessions" else m_sql, rows)
            raw.execute("COMMIT")

    else:
        raw_cursor = connection.cursor().cursor

        def emit(kind: str, rows: list[tuple]) -> None:
            table, cols = (
                ("sessions_app_session", scols)
                if kind == "sessions"
                else ("sessions_app_message", mcols)
            )
            with raw_cursor.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    started = time.perf_counter()
    labels = generate(owner_id, outsider_id, emit)
    figures["load_s"] = round(time.perf_counter() - started, 1)

    with connection.cursor() as cursor:
        if vendor == "sqlite":
            cursor.execute("ANALYZE")
            before = _sqlite_size()
            started = time.perf_counter()
            for statement in fts.SQLITE_FORWARD + fts.SQLITE_TITLE_FORWARD:
                cursor.execute(statement)
            figures["index_build_s"] = round(time.perf_counter() - started, 1)
            cursor.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            for table in ("messages_fts_trigram", "messages_fts_stem", "messages_fts_cjk"):
                cursor.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")  # noqa: S608
            figures["stem_index_bytes"] = _sqlite_table_bytes("messages_fts_stem")
            figures["cjk_index_bytes"] = _sqlite_table_bytes("messages_fts_cjk")
            cursor.execute("ANALYZE")
            after = _sqlite_size()
            figures["db_bytes_before_index"] = before
            figures["db_bytes_after_index"] = after
        else:
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence('sessions_app_message', 'id'),"
                " (SELECT max(id) FROM sessions_app_message))"
            )
            # Fresh statistics for every table, as autovacuum would have by now.
            cursor.execute("VACUUM ANALYZE")
            before = _pg_size()
            started = time.perf_counter()
            for statement in fts.POSTGRES_FORWARD:
                cursor.execute(statement)
            figures["index_build_s"] = round(time.perf_counter() - started, 1)
            cursor.execute("VACUUM ANALYZE sessions_app_message")
            after = _pg_size()
            cursor.execute(
                "SELECT pg_relation_size('message_search_vector_idx'),"
                " pg_relation_size('message_content_trgm_idx'),"
                " pg_relation_size('message_stem_vector_idx'),"
                " pg_relation_size('message_cjk_vector_idx'),"
                " (SELECT sum(pg_column_size(cjk_vector)) FROM sessions_app_message)"
            )
            gin, trgm, stem_gin, cjk_gin, cjk_column = cursor.fetchone()
            figures["stem_gin_index_bytes"] = stem_gin
            figures["cjk_gin_index_bytes"] = cjk_gin
            figures["cjk_column_bytes"] = int(cjk_column or 0)
            figures["db_bytes_before_index"] = before["total"]
            figures["db_bytes_after_index"] = after["total"]
            figures["tsvector_column_bytes"] = after["heap"] - before["heap"]
            figures["gin_index_bytes"] = gin
            figures["trgm_index_bytes"] = trgm
    figures["index_overhead_bytes"] = (
        figures["db_bytes_after_index"] - figures["db_bytes_before_index"]
    )
    figures["index_overhead_ratio"] = round(
        figures["db_bytes_after_index"] / max(1, figures["db_bytes_before_index"]), 2
    )
    figures["labels"] = labels
    return figures


# --- measurements ----------------------------------------------------------------------------


def _like_scan(owner_id: int, query: str) -> int:
    """The naive alternative: LIKE over message text for every term, owner-scoped,
    newest first, 50 rows."""
    from django.db import connection

    from sessions_app.search.backends import _like_condition
    from sessions_app.search.sanitize import parse_query
    from sessions_app.search.sql import filter_sql

    parsed = parse_query(query)
    if not parsed:
        return 0
    operator = "ILIKE" if connection.vendor == "postgresql" else "LIKE"
    condition, params = _like_condition(parsed, columns=("m.content",), operator=operator)
    where, fparams = filter_sql(owner_id, _no_filters())
    sql = f"""SELECT m.id FROM sessions_app_message m
              JOIN sessions_app_session s ON s.id = m.session_id
              WHERE {condition} {where} ORDER BY m.id DESC LIMIT 50"""  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *fparams])
        return len(cursor.fetchall())


def _bare_index_query(query: str) -> int:
    """The floor for a plain-word query: the word index alone, BM25-ranked (FTS5's rank;
    ts_rank on PostgreSQL), the same number of rows, no owner, grouping or snippets."""
    from django.db import connection

    from sessions_app.search.service import DEFAULT_ROWS

    if connection.vendor == "postgresql":
        sql = """SELECT id, ts_rank(search_vector, q) FROM sessions_app_message,
                        plainto_tsquery('simple', %s) q
                 WHERE search_vector @@ q ORDER BY 2 DESC LIMIT %s"""
    else:
        sql = """SELECT rowid, rank FROM messages_fts WHERE messages_fts MATCH %s
                 ORDER BY rank LIMIT %s"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [query, DEFAULT_ROWS])
        return len(cursor.fetchall())


def _plain_words(query: str) -> bool:
    return all(word.isascii() and word.isalpha() and word.islower() for word in query.split())


def _no_filters() -> Any:
    from sessions_app.search.sql import Filters

    return Filters()


def _time(fn: Any, repeat: int) -> list[float]:
    fn()  # warm the cache: we measure steady-state lookups
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def measure(owner: Any, labels: dict[str, str]) -> dict[str, Any]:
    from sessions_app.search.backends import find_hits
    from sessions_app.search.sanitize import parse_query
    from sessions_app.search.service import DEFAULT_ROWS, search_conversations

    english = Generator().english
    rare = english[len(set(ENGLISH)) + 5000]  # a word from the long tail
    per_query = {}
    all_retrieval: list[float] = []
    all_search: list[float] = []
    all_like: list[float] = []
    plain: list[tuple[str, dict, dict, dict]] = []
    for query in [*TYPICAL, rare]:
        parsed = parse_query(query)
        # The same row count the search itself asks for.
        page = find_hits(owner_id=owner.pk, query=parsed, limit=DEFAULT_ROWS)
        retrieval = _time(
            lambda p=parsed: find_hits(owner_id=owner.pk, query=p, limit=DEFAULT_ROWS), REPEAT
        )
        search = _time(lambda q=query: search_conversations(owner=owner, query=q, limit=3), REPEAT)
        like = _time(lambda q=query: _like_scan(owner.pk, q), LIKE_REPEAT)
        if _plain_words(query) and _bare_index_query(query):  # words the index holds
            bare = _time(lambda q=query: _bare_index_query(q), REPEAT)
            plain.append((query, percentiles(retrieval), percentiles(search), percentiles(bare)))
        all_retrieval += retrieval
        all_search += search
        all_like += like
        per_query[query] = {
            "route": page.route,
            "hits": len(page.hits),
            "retrieval": percentiles(retrieval),
            "search": percentiles(search),
            "like_scan": percentiles(like),
        }
        print(
            f"  {query!r:28} {page.route:14} hits={len(page.hits):3} "
            f"retrieval p95={per_query[query]['retrieval']['p95_ms']:8.2f} ms  "
            f"search p95={per_query[query]['search']['p95_ms']:8.2f} ms  "
            f"LIKE p95={per_query[query]['like_scan']['p95_ms']:9.2f} ms",
            flush=True,
        )

    found = {}
    for query, target in labels.items():
        result = search_conversations(owner=owner, query=query, limit=3)
        found[query] = {
            "target": target,
            "top3": [c.root_id for c in result.conversations],
            "hit": target in [c.root_id for c in result.conversations],
            "route": result.route,
        }
    recall = statistics.fmean(1.0 if f["hit"] else 0.0 for f in found.values()) if found else 0
    against_bare = {
        query: {
            "bare_index": bare,
            "retrieval_to_bare_p50": round(retrieval["p50_ms"] / bare["p50_ms"], 2),
            "search_to_bare_p50": round(search["p50_ms"] / bare["p50_ms"], 2),
            "retrieval_to_bare_p95": round(retrieval["p95_ms"] / bare["p95_ms"], 2),
        }
        for query, retrieval, search, bare in plain
    }
    for query, ratios in against_bare.items():
        print(
            f"  {query!r:28} bare index p50={ratios['bare_index']['p50_ms']:8.2f} ms  "
            f"retrieval/bare p50 {ratios['retrieval_to_bare_p50']:.2f}  "
            f"search/bare p50 {ratios['search_to_bare_p50']:.2f}",
            flush=True,
        )
    return {
        "plain_words_against_bare_index": against_bare,
        "queries": per_query,
        "retrieval_overall": percentiles(all_retrieval),
        "search_overall": percentiles(all_search),
        "like_scan_overall": percentiles(all_like),
        "recall_at_3": round(recall, 3),
        "recall_detail": found,
    }


def run(vendor: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    User = get_user_model()
    owner = User.objects.create_user(username="bench-owner", password="x")
    outsider = User.objects.create_user(username="bench-outsider", password="x")
    print(f"search bench on {vendor}: {MESSAGES:,} messages", flush=True)
    figures = load_and_index(vendor, owner.pk, outsider.pk)
    labels = figures.pop("labels")
    print(
        f"  load {figures['load_s']} s, index build {figures['index_build_s']} s, "
        f"size {figures['db_bytes_before_index'] / 1e6:.0f} → "
        f"{figures['db_bytes_after_index'] / 1e6:.0f} MB",
        flush=True,
    )
    measured = measure(owner, labels)
    p95 = measured["search_overall"].get("p95_ms", 0)
    return {
        "messages": MESSAGES,
        "conversations": max(1, MESSAGES // PER_CONVERSATION),
        **figures,
        **measured,
        "target_p95_ms": TARGET_P95_MS,
        "meets_target": p95 <= TARGET_P95_MS,
        "recall_queries": len(labels),
        "generated_at": datetime.now(UTC).isoformat(),
        "settings": json.loads(json.dumps({"repeat": REPEAT, "like_repeat": LIKE_REPEAT})),
    }
