"""The chaos suite: the real stack (`manage.py serve`: daphne, a Celery worker with one pool
child, the embedded Valkey — or, when REDIS_URL is set, a private redis-server of our own, so
the machine's shared Redis is never killed) on the test database, chatting with the scripted
model while chat turns, compressions, exports, search summaries, memory writes and background
reviews run. Each run kills every process once (ASGI server, worker child, worker parent,
Valkey/Redis) with SIGKILL, in a seeded random order at seeded random moments; `serve`
restarts what it supervises and we restart our own Redis. Afterwards:

- every user message the server acknowledged is stored, exactly once;
- every answer is `complete`, or `interrupted` with the text it had streamed (a prefix of
  the scripted reply), or `failed` with no text at all; none is left `streaming`;
- no lease is held once the stack is idle (recovery and expiry released them all);
- every export is done with exactly one archive, or failed and a new request succeeds;
  every search summary and review finished or failed (a new request succeeds); every
  compression made exactly one continuation;
- the memory entries are what the audit log's accepted writes replay to.

Seeds: HERMES_CHAOS_SEEDS (comma-separated) or HERMES_CHAOS_RUNS=N (seeds 1..N) for a
longer local campaign; CI runs the fixed DEFAULT_SEEDS. The kill points exercised are
printed (and recorded as the test's `kill_points` property)."""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings
from websockets.sync.client import connect

from accounts.services import api_token_create
from core.leases import leases_held
from devtools.scripted_llm import Fault
from memory.models import MemoryEntry, MemoryEvent
from privacy.jobs import exports_expire
from privacy.models import ExportJob
from sessions_app.models import Message, SearchSummary, Session
from skills_app.models import ReviewRun
from tests.chaos.stack import LEASE_SECONDS, PrivateRedis, Stack
from tests.conftest import ROOT, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.chaos,
    pytest.mark.django_db(transaction=True),
]

DEFAULT_SEEDS = (7, 1234)
TARGETS = ("web", "worker-child", "worker-parent", "redis")
#: Kinds of work each target may be caught in the middle of.
WORK_OF = {
    "web": {"turn"},
    "worker-child": {"compress", "export", "summary", "review"},
    "worker-parent": {"compress", "export", "summary", "review"},
    "redis": {"turn", "compress", "export", "summary", "review"},
}
REPLY = " ".join(
    f"Step {n}: check the deploy notes, the rollout plan and the health checks." for n in range(8)
)
SUMMARY = "## Goal\nKeep the deploy on track.\n## Progress\nSteps discussed."


def chaos_seeds() -> list[int]:
    if os.environ.get("HERMES_CHAOS_SEEDS"):
        return [int(s) for s in os.environ["HERMES_CHAOS_SEEDS"].split(",") if s.strip()]
    if os.environ.get("HERMES_CHAOS_RUNS"):
        return list(range(1, int(os.environ["HERMES_CHAOS_RUNS"]) + 1))
    return list(DEFAULT_SEEDS)


# --- the stack ------------------------------------------------------------------------------


@dataclass
class Workload:
    """Drives one user's chat over real websockets, plus exports and search summaries over
    the API, while processes die underneath; remembers what the server acknowledged."""

    stack: Stack
    cookie: str
    token: str
    seed: int
    turns: int
    acked: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def api(self, method: str, path: str) -> dict[str, Any] | None:
        request = urllib.request.Request(
            f"{self.stack.base}{path}",
            method=method,
            headers={"Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return json.load(response)
        except (OSError, ValueError) as exc:
            self.errors[f"api {type(exc).__name__}"] += 1
            return None

    def side_work(self) -> None:
        self.api("POST", "/api/me/exports/")
        self.api("GET", "/api/search/?q=deploy&summarise=true")

    def chat(self) -> None:
        session: str | None = None
        for n in range(self.turns):
            if n in (1, 4):
                threading.Thread(target=self.side_work, daemon=True).start()
            text = f"Seed {self.seed} turn {n}: how is the deploy going?"
            if n % 3 == 2:
                text = f"Remember: seed {self.seed} turn {n} deploys on Fridays."
            session = self.turn(session, text)

    def turn(self, session: str | None, text: str) -> str | None:
        """Send `text`; returns the conversation to continue in."""
        self.sent.append(text)
        headers = {"Cookie": self.cookie, "Origin": self.stack.base}
        acked = False
        try:
            with connect(
                f"ws://127.0.0.1:{self.stack.port}/ws/chat/",
                additional_headers=headers,
                open_timeout=10,
            ) as ws:
                ws.send(json.dumps({"type": "chat.send", "session": session, "text": text}))
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    event = json.loads(ws.recv(timeout=deadline - time.monotonic()))
                    # A compression moves the conversation on to its continuation.
                    session = event.get("new_session") or event.get("session") or session
                    if event["type"] in ("session.started", "assistant.delta", "turn.alive"):
                        acked = True
                    if event["type"] == "error":
                        self.errors[event["code"]] += 1
                        # "compressing": the message is saved and says so.
                        acked = acked or event["code"] == "compressing"
                        time.sleep(0.5)  # as the page does before it tries again
                        break
                    if event["type"] == "assistant.done":
                        break
        except Exception as exc:  # noqa: BLE001 - a process died under the socket
            status = getattr(getattr(exc, "response", None), "status_code", "")
            self.errors[f"socket {type(exc).__name__}{status}"] += 1
            time.sleep(0.5)
        if acked:
            self.acked.append(text)
        return session


def memory_tool_call(body: dict[str, Any]) -> bool:
    """A chat call (it offers the memory tool) answering a "Remember:" message; a summary of
    a transcript quoting one offers no tools."""
    offered = {tool["function"]["name"] for tool in body.get("tools") or ()}
    last = body["messages"][-1]
    return (
        "memory" in offered and last.get("role") == "user" and "Remember:" in str(last["content"])
    )


def remembered(body: dict[str, Any]) -> list[dict[str, Any]]:
    text = str(body["messages"][-1]["content"])
    fact = text.split("Remember:", 1)[1].strip().split("\n", 1)[0][:120]
    return [{"name": "memory", "arguments": {"action": "add", "target": "memory", "content": fact}}]


def script_model(llm: Any) -> None:
    llm.reset()
    llm.chunk_delay = 0.01
    llm.add_rule(memory_tool_call, tool_calls=remembered)
    # Background calls (a compression's or a search hit's summary) take a moment: a window
    # for the worker to be killed in.
    llm.add_rule("summarisation agent", reply=SUMMARY, fault=Fault(latency=1.0))
    llm.add_rule(lambda body: not body.get("tools"), reply=SUMMARY, fault=Fault(latency=1.0))
    llm.add_rule(lambda body: True, reply=REPLY)


# --- the checks -----------------------------------------------------------------------------


def unfinished_work() -> dict[str, list[Any]]:
    """Leases held, answers streaming, and background work not finished yet."""
    return {
        "leases": leases_held(),
        "streaming": list(Message.objects.filter(status="streaming").values_list("pk", flat=True)),
        "exports": list(
            ExportJob.objects.filter(status__in=["queued", "running"]).values_list("pk", "status")
        ),
        "summaries": list(
            SearchSummary.objects.filter(status__in=["pending", "running"]).values_list(
                "pk", "status"
            )
        ),
        "reviews": list(
            ReviewRun.objects.filter(status__in=["queued", "running"]).values_list("pk", "status")
        ),
    }


def wait_until_idle() -> None:
    """Until no lease is held, no answer streams and no background work waits: what was cut
    off is recovered, taken over after its lease expired, or sent again (work whose task the
    broker lost) by then."""
    try:
        wait_for(
            lambda: not any(unfinished_work().values()),
            timeout=6 * LEASE_SECONDS + 20,
            interval=0.3,
            what="the stack to be idle",
        )
    except AssertionError:
        raise AssertionError(f"still unfinished: {unfinished_work()}") from None


def replay_audit(owner: Any) -> Counter[tuple[str, str]]:
    """The active memory entries the accepted writes of the audit log add up to."""
    entries: Counter[tuple[str, str]] = Counter()
    for event in MemoryEvent.objects.filter(owner=owner, verdict="accepted").order_by("id"):
        if event.action in ("add", "import", "approve") and event.after:
            entries[(event.target, event.after)] += 1
        if event.action in ("replace", "remove") and event.before:
            entries[(event.target, event.before)] -= 1
        if event.action == "replace" and event.after:
            entries[(event.target, event.after)] += 1
    return +entries


def check_invariants(owner: Any, workloads: list[Workload], stack: Stack) -> None:
    users = Counter(
        Message.objects.filter(session__owner=owner, role="user").values_list("content", flat=True)
    )
    sent = Counter(text for w in workloads for text in w.sent)
    for w in workloads:
        for text in w.acked:
            assert users[text] >= 1, f"acknowledged but lost: {text!r}"
    # A compression copies the recent tail into its continuation: count per conversation.
    per_session = Counter(
        Message.objects.filter(session__owner=owner, role="user").values_list(
            "session_id", "content"
        )
    )
    duplicated = [text for (_s, text), n in per_session.items() if n > sent[text]]
    assert not duplicated, f"stored more often than sent: {duplicated}"

    for status, content in Message.objects.filter(
        session__owner=owner, role="assistant", tool_calls__isnull=True
    ).values_list("status", "content"):
        if status == "complete":
            assert content, "a complete answer without text"
        elif status == "interrupted":
            assert content and REPLY.startswith(content), (status, content)
        else:
            assert (status, content) == ("failed", ""), (status, content)

    assert leases_held() == []

    for job in ExportJob.objects.filter(owner=owner):
        assert job.status in ("done", "failed"), (job.pk, job.status, job.stage)
    done = sorted(
        ExportJob.objects.filter(owner=owner, status="done").values_list("file_name", flat=True)
    )
    assert set(done) <= {p.name for p in stack.exports.glob("*.zip")}
    # A build killed after writing its archive but before marking the job done leaves a
    # file no job points to; the periodic sweep removes it once no build can be that old.
    for leftover in stack.exports.iterdir():
        if leftover.name not in done:
            os.utime(leftover, (1, 1))
    with override_settings(HERMES_EXPORT_DIR=str(stack.exports)):
        exports_expire()
    assert sorted(p.name for p in stack.exports.iterdir()) == done

    for row in SearchSummary.objects.filter(owner=owner):
        assert row.status in ("done", "failed"), (row.pk, row.status)
    for run in ReviewRun.objects.filter(session__owner=owner):
        assert run.status in ("done", "failed"), (run.pk, run.status)
    for parent in Session.objects.filter(owner=owner, end_reason="compression"):
        assert Session.objects.filter(parent=parent).count() == 1, parent.pk

    active = Counter(
        MemoryEntry.objects.filter(owner=owner, status="active").values_list("target", "content")
    )
    assert active == replay_audit(owner)


def check_retryable(workload: Workload) -> None:
    """A failed export or summary is not a dead end: asking again succeeds."""
    job = workload.api("POST", "/api/me/exports/")
    assert job is not None
    wait_for(
        lambda: ExportJob.objects.get(pk=job["id"]).status == "done",
        timeout=30,
        what="a new export after the chaos",
    )
    result = workload.api("GET", "/api/search/?q=deploy&summarise=true")
    assert result is not None and result["results"], result
    # Summaries still running at the request's deadline land in the cache.
    ids = [hit["summary_id"] for hit in result["results"]]
    assert all(ids), result
    finished = SearchSummary.objects.filter(pk__in=ids, status__in=["done", "failed"])
    wait_for(lambda: finished.count() == len(ids), timeout=30, what="the summaries")
    assert list(finished.values_list("status", "error")) == [("done", "")] * len(ids)


# --- the test -------------------------------------------------------------------------------


def test_every_process_killed_at_random_points_loses_nothing(
    owner, llm_server, tmp_path, record_property
):
    script_model(llm_server)
    redis = None
    if settings.REDIS_URL:
        (tmp_path / "redis").mkdir()
        redis = PrivateRedis(tmp_path / "redis")
        redis.start()
    stack = Stack(tmp_path, llm_server, redis)
    client = Client()
    client.force_login(owner)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    _token, key = api_token_create(user=owner, name="chaos")
    kill_points: list[str] = []
    recovered: list[float] = []
    phases: Counter[str] = Counter()
    workloads: list[Workload] = []
    started = time.monotonic()
    try:
        stack.start()
        booted = time.monotonic() - started
        for seed in chaos_seeds():
            rng = random.Random(seed)
            workload = Workload(stack, cookie, key, seed, turns=5)
            workloads.append(workload)
            driver = threading.Thread(target=workload.chat, daemon=True)
            driver.start()
            for target in rng.sample(TARGETS, len(TARGETS)):
                # A seeded moment, preferably while the target works on something.
                time.sleep(rng.uniform(0.2, 0.8))
                deadline = time.monotonic() + 1.5
                busy: set[str] = set()
                while time.monotonic() < deadline:
                    busy = {h.kind for h in leases_held() if not h.expired} & WORK_OF[target]
                    if busy:
                        break
                    time.sleep(0.05)
                kill_points.append(f"{target}@{'+'.join(sorted(busy)) or 'idle'}")
                killed = time.monotonic()
                stack.kill(target)
                recovered.append(time.monotonic() - killed)
            joined = time.monotonic()
            driver.join(timeout=120)
            phases["driver"] += time.monotonic() - joined
            assert not driver.is_alive(), "the chat driver hung"
        idle = time.monotonic()
        wait_until_idle()
        phases["idle"] = time.monotonic() - idle
        check_invariants(owner, workloads, stack)
        retry = time.monotonic()
        check_retryable(workloads[-1])
        phases["retry"] = time.monotonic() - retry
    finally:
        stack.stop()
        if redis is not None:
            redis.stop()
    took = time.monotonic() - started
    summary = Counter(point.split("@")[0] for point in kill_points)
    busy_points = sum(1 for point in kill_points if not point.endswith("@idle"))
    record_property("kill_points", len(kill_points))
    report = (
        f"chaos: {len(chaos_seeds())} runs, {len(kill_points)} kill points "
        f"({busy_points} mid-work: {', '.join(kill_points)}); per process {dict(summary)}; "
        f"acknowledged messages {sum(len(w.acked) for w in workloads)}, "
        f"client-side errors {dict(sum((w.errors for w in workloads), Counter()))}; "
        f"{took:.0f} s ({booted:.0f} s to start the stack, recoveries "
        f"{' '.join(f'{r:.1f}' for r in recovered)} s, "
        f"{', '.join(f'{k} {v:.1f} s' for k, v in phases.items())})"
    )
    print(report)
    (ROOT / "var").mkdir(exist_ok=True)
    (ROOT / "var" / "chaos-last.txt").write_text(report + "\n")
    assert len(kill_points) == len(TARGETS) * len(chaos_seeds())
