"""L1 memory store: latency of add / replace / remove, and throughput with 50 concurrent
writers on one user's memory (the issue's 50 threads × 200 operations, correctness checked
as in tests/memory/test_concurrency.py); beside them the SQL statements each operation sends
and the floor any durable write has on this machine: one INSERT committed alone (on
PostgreSQL with synchronous_commit on, the WAL flush is nearly all of it).

    python -m bench memory_store                 # SQLite and PostgreSQL
    python -m bench memory_store --vendor sqlite
"""

from __future__ import annotations

import logging
import time
from typing import Any

from bench.harness import percentiles, stopwatch

ROUNDS = 300
LIST_SIZE = 15  # a realistic list: ~15 entries of ~100 characters
WRITERS, WRITER_OPS = 50, 200
CONTENDED_LIMIT = 600


def _latencies() -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from memory import services

    user = get_user_model().objects.create_user(username="bench-latency", password="x")
    for i in range(LIST_SIZE):
        services.memory_add(
            user=user, target="memory", content=f"Standing fact number {i:02d}: " + "x" * 80
        )
    samples: dict[str, list[float]] = {"add": [], "replace": [], "remove": []}
    for i in range(ROUNDS):
        text = f"Round {i:04d}: the user prefers concise answers with examples"
        with stopwatch() as elapsed:
            services.memory_add(user=user, target="memory", content=text)
        samples["add"].append(elapsed())
        with stopwatch() as elapsed:
            services.memory_replace(
                user=user, target="memory", old_text=f"Round {i:04d}:", content=text + "!"
            )
        samples["replace"].append(elapsed())
        with stopwatch() as elapsed:
            services.memory_remove(user=user, target="memory", old_text=f"Round {i:04d}:")
        samples["remove"].append(elapsed())
    figures = {name: percentiles(values) for name, values in samples.items()}
    figures["statements"] = _statements(user)
    return figures


def _statements(user) -> dict[str, int]:
    """SQL statements of one add, replace and remove (transaction control not counted)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory import services

    counted = {}
    operations = {
        "add": lambda: services.memory_add(user=user, target="memory", content="Counted entry"),
        "replace": lambda: services.memory_replace(
            user=user, target="memory", old_text="Counted entry", content="Counted entry!"
        ),
        "remove": lambda: services.memory_remove(
            user=user, target="memory", old_text="Counted entry"
        ),
    }
    for name, operation in operations.items():
        with CaptureQueriesContext(connection) as captured:
            operation()
        counted[name] = sum(
            not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT"))
            for q in captured.captured_queries
        )
    return counted


def _commit_floor() -> dict[str, float]:
    """One INSERT in its own transaction, committed: what any durable write costs here."""
    from django.db import connection, transaction

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bench_commit_floor (n integer)")
    samples = []
    try:
        for i in range(ROUNDS):
            with stopwatch() as elapsed, transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("INSERT INTO bench_commit_floor (n) VALUES (%s)", [i])
            samples.append(elapsed())
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bench_commit_floor")
    return percentiles(samples)


def _contended() -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from accounts.services import profile_get
    from tests.memory.workload import problems, run_threads

    user = get_user_model().objects.create_user(username="bench-racer", password="x")
    profile = profile_get(user=user)
    profile.memory_char_limit = CONTENDED_LIMIT
    profile.save()
    started = time.perf_counter()
    reports, monitor = run_threads(user=user, threads=WRITERS, ops=WRITER_OPS)
    seconds = time.perf_counter() - started
    ops = WRITERS * WRITER_OPS
    return {
        "writers": WRITERS,
        "ops_per_writer": WRITER_OPS,
        "entry_points": "services, memory tool, REST API (one third each)",
        "seconds": round(seconds, 2),
        "ops_per_second": round(ops / seconds, 1),
        "succeeded": sum(r.succeeded for r in reports),
        "refused_over_limit": sum(r.over_limit for r in reports),
        "problems": problems(
            user=user, reports=reports, limit=CONTENDED_LIMIT, max_seen=monitor.max_seen
        ),
    }


def run(vendor: str) -> dict[str, Any]:
    from django.conf import settings

    # Over-limit refusals are 400s by design; do not log thousands of them.
    logging.getLogger("django.request").setLevel(logging.ERROR)
    # The REST API workers use Django's test client (Host: testserver).
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    return {
        "latency_ms": _latencies(),
        "commit_floor_ms": _commit_floor(),
        "list_size": LIST_SIZE,
        "contended": _contended(),
    }
