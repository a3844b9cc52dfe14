"""Shared plumbing for benchmarks: a throwaway database per vendor, timing helpers and
a JSON report per benchmark under bench/results/.

Each benchmark module exposes `run(vendor: str) -> dict` and is executed in its own process
per vendor (settings are fixed per process), via `python -m bench` or
`python -m bench <module> [--vendor sqlite|postgresql]`.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
POSTGRES_ADMIN_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")


def configure(vendor: str) -> None:
    """Point this process at a fresh database of `vendor`, migrate it, set up Django.

    Call before importing any model.
    """
    var = Path(tempfile.mkdtemp(prefix=f"hermes-bench-{vendor}-"))
    os.environ["HERMES_VAR_DIR"] = str(var)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
    if vendor == "sqlite":
        os.environ["DATABASE_URL"] = f"sqlite:///{var / 'bench.sqlite3'}"
    elif vendor == "postgresql":
        import psycopg

        name = f"hermes_bench_{os.getpid()}"
        with psycopg.connect(f"{POSTGRES_ADMIN_URL}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = f"{POSTGRES_ADMIN_URL}/{name}"
    else:
        raise SystemExit(f"unknown vendor {vendor!r}")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def teardown(vendor: str) -> None:
    from django.db import connections

    connections.close_all()
    if vendor == "postgresql":
        import psycopg

        name = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
        with psycopg.connect(f"{POSTGRES_ADMIN_URL}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    if not samples_ms:
        return {"n": 0}
    ordered = sorted(samples_ms)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 3)

    return {
        "n": len(ordered),
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """`with stopwatch() as elapsed: …; elapsed()` gives milliseconds."""
    start = time.perf_counter()
    yield lambda: (time.perf_counter() - start) * 1000


def write_report(name: str, vendor: str, figures: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{vendor}.json"
    path.write_text(json.dumps(figures, indent=2, default=str))
    return path
