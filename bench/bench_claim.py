"""A later chat turn's claim and setup reads (`turn_open`) on a quiet machine: what a person's
next message costs the database thread before its model call. Each turn comes after a
pause, as a person's do (an idle database backend is slower to answer its first statement:
see docs/capacity.md); beside the claim's time, the time of its statements (COMMIT aside)
and how many it sends.

    python -m bench claim                      # SQLite and PostgreSQL
    python -m bench claim --vendor postgresql
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench.harness import percentiles, stopwatch

TURNS = int(os.environ.get("BENCH_CLAIM_TURNS", 200))
WARMUP = 10
PAUSE_S = 0.15


def run(vendor: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from accounts.services import profile_get
    from sessions_app.agent.prepare import turn_open
    from sessions_app.models import Message

    user = get_user_model().objects.create_user(username="bench-claim", password="x")
    profile_get(user=user)  # made when the person signed up

    def answered(start: Any) -> None:
        Message.objects.filter(pk=start.assistant_message.pk).update(
            status="complete", content="Noted.", prompt_tokens=40, completion_tokens=5
        )
        start.lease.release()

    first = turn_open(user=user, session_id=None, text="Hello")
    answered(first)
    statements: list[float] = []

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements.append((time.perf_counter() - began) * 1000)

    claims, sql_ms, counts = [], [], []
    for n in range(WARMUP + TURNS):
        time.sleep(PAUSE_S)
        statements.clear()
        with connection.execute_wrapper(timed), stopwatch() as elapsed:
            start = turn_open(user=user, session_id=first.session.pk, text=f"And {n}?")
        if n >= WARMUP:
            claims.append(elapsed())
            sql_ms.append(sum(statements))
            counts.append(len(statements))
        answered(start)
    return {
        "turns": TURNS,
        "pause_ms": PAUSE_S * 1000,
        "turn_open_ms": percentiles(claims),
        "statements_ms": percentiles(sql_ms),
        "python_ms": percentiles([c - s for c, s in zip(claims, sql_ms, strict=True)]),
        "statements": max(counts),
    }
