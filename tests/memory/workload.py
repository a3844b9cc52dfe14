"""A concurrent write workload on one user's memory, and the checks that prove nothing was
lost and the limit held.

Each worker owns the entries it writes (their text starts with its id), so after the run
the database must hold exactly the union of what each worker believes it has: an update
lost to a race shows up as a missing or stale entry, a phantom as an extra one. Workers
write through the three real entry points — the services, the `memory` tool through the
registry, and the REST API — so two tabs, the agent and a script racing is what is tested.

Also runnable as a process: `python -m tests.memory.workload USER_ID WORKER OPS LIMIT
[via]` prints one JSON report (used by the multi-process test).
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any


class Refused(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class WorkerReport:
    worker: int
    expected: list[str] = field(default_factory=list)
    succeeded: int = 0
    over_limit: int = 0
    #: Anything other than a clean success or an over-limit refusal ("database is locked"…).
    errors: list[str] = field(default_factory=list)


class _Via:
    def add(self, text: str) -> None: ...
    def replace(self, old: str, new: str) -> None: ...
    def remove(self, old: str) -> None: ...


class ViaService(_Via):
    def __init__(self, user: Any) -> None:
        from memory import services

        self.user, self.services = user, services

    def _call(self, fn: Any, **kwargs: Any) -> None:
        from core.exceptions import ServiceError

        try:
            fn(user=self.user, target="memory", **kwargs)
        except ServiceError as exc:
            raise Refused(exc.code) from None

    def add(self, text: str) -> None:
        self._call(self.services.memory_add, content=text)

    def replace(self, old: str, new: str) -> None:
        self._call(self.services.memory_replace, old_text=old, content=new)

    def remove(self, old: str) -> None:
        self._call(self.services.memory_remove, old_text=old)


class ViaTool(_Via):
    def __init__(self, user: Any) -> None:
        from sessions_app.agent.tools import ToolContext, registry

        self.user, self.registry, self.ToolContext = user, registry, ToolContext

    def _call(self, **args: Any) -> None:
        # A fresh turn per call: the failure cap is per turn and not what is tested here.
        ctx = self.ToolContext(user=self.user)
        result = self.registry.dispatch(
            ctx, "memory", json.dumps({"target": "memory", **args}), allowed={"memory"}
        )
        if not result.ok:
            raise Refused(result.payload.get("code", "error"))

    def add(self, text: str) -> None:
        self._call(action="add", content=text)

    def replace(self, old: str, new: str) -> None:
        self._call(action="replace", old_text=old, content=new)

    def remove(self, old: str) -> None:
        self._call(action="remove", old_text=old)


class ViaApi(_Via):
    def __init__(self, user: Any) -> None:
        from rest_framework.test import APIClient

        self.client = APIClient()
        self.client.force_authenticate(user)
        self.ids: dict[str, int] = {}

    def _check(self, response: Any) -> Any:
        if response.status_code >= 400:
            try:
                raise Refused(response.json()["error"]["code"])
            except (ValueError, KeyError, TypeError):
                raise Refused(f"http {response.status_code}") from None
        return response

    def add(self, text: str) -> None:
        body = self._check(
            self.client.post("/api/memory/", {"target": "memory", "content": text}, format="json")
        ).json()
        self.ids[text] = body["id"]

    def replace(self, old: str, new: str) -> None:
        pk = self.ids.pop(old)
        try:
            body = self._check(
                self.client.patch(f"/api/memory/{pk}/", {"content": new}, format="json")
            ).json()
        except Refused:
            self.ids[old] = pk
            raise
        self.ids[new] = body["id"]

    def remove(self, old: str) -> None:
        pk = self.ids.pop(old)
        try:
            self._check(self.client.delete(f"/api/memory/{pk}/"))
        except Refused:
            self.ids[old] = pk
            raise


VIAS = {"service": ViaService, "tool": ViaTool, "api": ViaApi}


@contextmanager
def _read_first(user: Any) -> Iterator[None]:
    """A caller's transaction that reads the list, then writes (through the block)."""
    from django.db import transaction

    from memory.selectors import memory_contents

    with transaction.atomic():
        memory_contents(user=user, target="memory")
        yield


def run_worker(
    *, user: Any, worker: int, ops: int, via: str = "service", deferred: bool = False
) -> WorkerReport:
    """Run `ops` random adds/replaces/removes of this worker's own entries."""
    from django.db import connection

    report = WorkerReport(worker)
    try:
        connection.ensure_connection()
        if deferred:
            # The bug the IMMEDIATE default prevents: read first, upgrade to a write later.
            # The write path's own first statement is a write, so each call here runs in a
            # transaction of its caller's that reads the list before the write.
            connection.transaction_mode = "DEFERRED"
        client = VIAS[via](user)
        rng = random.Random(worker)
        for j in range(ops):
            choice = rng.random()
            try:
                with _read_first(user) if deferred else nullcontext():
                    if not report.expected or choice < 0.5:
                        text = f"w{worker:02d}-{j:04d}"
                        client.add(text)
                        report.expected.append(text)
                    elif choice < 0.75:
                        old = rng.choice(report.expected)
                        new = f"w{worker:02d}-{j:04d}r"
                        client.replace(old, new)
                        report.expected[report.expected.index(old)] = new
                    else:
                        old = rng.choice(report.expected)
                        client.remove(old)
                        report.expected.remove(old)
                report.succeeded += 1
            except Refused as exc:
                if exc.code == "over_limit":
                    report.over_limit += 1
                else:
                    report.errors.append(f"refused: {exc.code}")
            except Exception as exc:  # noqa: BLE001 - every failure is part of the report
                report.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()
    return report


class UsageMonitor:
    """Samples the committed size of the list while writers run, from its own connection."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.max_seen = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from django.db import connection

        from memory.selectors import memory_contents, usage_of

        try:
            while not self._stop.is_set():
                size = usage_of(memory_contents(user=self.user, target="memory"))
                self.max_seen = max(self.max_seen, size)
                self.samples += 1
                time.sleep(0.01)
        finally:
            connection.close()

    def __enter__(self) -> UsageMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_threads(
    *, user: Any, threads: int, ops: int, deferred: bool = False
) -> tuple[list[WorkerReport], UsageMonitor]:
    # Each writer replaces its placeholder with its report; one that never did is an error.
    reports = [WorkerReport(i, errors=["writer never reported"]) for i in range(threads)]
    start = threading.Barrier(threads)

    def work(i: int) -> None:
        start.wait()
        try:
            reports[i] = run_worker(
                user=user, worker=i, ops=ops, via=list(VIAS)[i % len(VIAS)], deferred=deferred
            )
        except Exception as exc:  # noqa: BLE001 - a writer that died is a failed run
            reports[i] = WorkerReport(i, errors=[f"writer died: {type(exc).__name__}: {exc}"])

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    # A writer that holds the database lock needs the GIL back after every query; with 50
    # busy threads the default 5 ms switch interval makes it wait that long each time.
    # Real deployments run writers in separate processes, so shorten it for the run.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        with UsageMonitor(user) as monitor:
            for t in pool:
                t.start()
            for t in pool:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    return reports, monitor


def problems(*, user: Any, reports: list[WorkerReport], limit: int, max_seen: int) -> list[str]:
    """Everything that shows a lost update, an exceeded limit or a failed write."""
    from memory.models import MemoryEntry, MemoryEvent
    from memory.selectors import memory_contents, usage_of

    found: list[str] = []
    final = memory_contents(user=user, target="memory")
    expected = [text for r in reports for text in r.expected]
    missing = sorted(set(expected) - set(final))
    extra = sorted(set(final) - set(expected))
    if missing:
        found.append(f"{len(missing)} accepted writes lost, e.g. {missing[:3]}")
    if extra:
        found.append(f"{len(extra)} entries nobody holds, e.g. {extra[:3]}")
    if len(final) != len(set(final)):
        found.append("duplicate entries")
    size = usage_of(final)
    if size > limit:
        found.append(f"final size {size} over the limit {limit}")
    if max_seen > limit:
        found.append(f"size {max_seen} over the limit {limit} was committed during the run")
    succeeded = sum(r.succeeded for r in reports)
    logged = MemoryEvent.objects.filter(owner=user, verdict="accepted").count()
    if logged != succeeded:
        found.append(f"{succeeded} writes succeeded but {logged} were audit-logged")
    orders = list(
        MemoryEntry.objects.filter(owner=user, target="memory").values_list("order", flat=True)
    )
    if len(orders) != len(set(orders)):
        found.append("two entries share a position")
    errors = [e for r in reports for e in r.errors]
    if errors:
        locked = sum("locked" in e for e in errors)
        found.append(f"{len(errors)} failed writes ({locked} 'database is locked'): {errors[:3]}")
    return found


def _main(argv: list[str]) -> None:
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
    django.setup()
    from django.contrib.auth import get_user_model

    user_id, worker, ops = int(argv[0]), int(argv[1]), int(argv[2])
    via = argv[3] if len(argv) > 3 else "service"
    user = get_user_model().objects.get(pk=user_id)
    report = run_worker(user=user, worker=worker, ops=ops, via=via)
    print(json.dumps(asdict(report)))


if __name__ == "__main__":
    _main(sys.argv[1:])
