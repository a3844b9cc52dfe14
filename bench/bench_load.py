"""Load on the team deployment: BENCH_LOAD_USERS (200) people chatting at once for
BENCH_LOAD_SECONDS (60) through nginx (TLS) → two ASGI processes (`make serve`) → PostgreSQL
and the Redis channel layer, against the scripted model in its own process.

Each simulated person keeps one websocket open and loops: send a message, read the
streamed answer to `assistant.done`, think BENCH_LOAD_THINK seconds (±50%), repeat. The
client follows the protocol like chat.js: a gap in `seq` means events were dropped, and it
resyncs with `chat.subscribe` (the running turn answers with `session.snapshot`).

Figures: errors (must be 0: refused sockets, error events, timeouts), lost deltas (must
be 0: answers whose text is not exactly the model's, seq gaps, and channel-layer "over
capacity" drops logged by the servers), turn time and time to first delta through our
stack against the same stream read straight from the model (their difference is the
overhead our stack adds), and CPU and memory of every process of the stack.

The same load runs once per variant of the stack (a fresh stack each, one after the
other), so the figures of the channel layers and coalescing windows compare within one run:
by default channels_redis' core layer at the old 100 ms window (before), the same layer at
50 ms, its pub/sub layer at 50 ms, and the local-first layer (core/channel_layer.py) at
100 ms and at the default 50 ms (after). BENCH_LOAD_VARIANTS (a JSON list of {"name": …,
"env": {…}}, with "asgi": the number of ASGI processes, else BENCH_LOAD_ASGI) replaces
them; BENCH_LOAD_ENV (a JSON object) is added to every variant's environment. PostgreSQL's
and Redis' CPU are machine-wide.

    BENCH_LOAD_USERS=200 BENCH_LOAD_SECONDS=60 .venv/bin/python -m bench load
    BENCH_LOAD_ASGI=4 .venv/bin/python -m bench load     # four ASGI processes
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import percentiles

VENDORS = ("postgresql",)
USERS = int(os.environ.get("BENCH_LOAD_USERS", 200))
SECONDS = float(os.environ.get("BENCH_LOAD_SECONDS", 60))
THINK = float(os.environ.get("BENCH_LOAD_THINK", 8.0))
ASGI = int(os.environ.get("BENCH_LOAD_ASGI", 2))
TURN_TIMEOUT = 60.0
LATENCY = 0.2  # seconds the scripted model waits before its first byte
CHUNK_DELAY = 0.02  # seconds between its chunks
REPLY = " ".join(f"word{i}" for i in range(60)) + "."
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """CPU time of the process and of its children that have ended (PostgreSQL's backends
    end with their connections, a worker's pool children when they are replaced)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / CLOCK_TICKS  # utime, stime, cutime, cstime


def _memory_kb(pid: int) -> dict[str, int]:
    out = {"rss_kb": 0, "peak_rss_kb": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_kb"] = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                out["peak_rss_kb"] = int(line.split()[1])
    except OSError:
        pass
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _process_groups(stack: Any) -> dict[str, list[int]]:
    """Our processes by role (make's own shell and wrappers left out)."""
    from tests.deploy.stack import descendants

    groups: dict[str, list[int]] = {}
    for name, proc in stack.procs.items():
        pids = [proc.popen.pid, *descendants(proc.popen.pid)]
        real = [p for p in pids if not _cmdline(p).startswith(("make ", "/bin/sh "))]
        groups[name] = real
    groups["load client (this process)"] = [os.getpid()]
    # Redis and PostgreSQL are shared with anything else on the machine: their figures are
    # machine-wide (PostgreSQL: every backend and its background processes).
    for label, comm in (
        ("redis (machine-wide)", "redis-server"),
        ("postgresql (machine-wide)", "postgres"),
    ):
        groups[label] = [
            int(d.name)
            for d in Path("/proc").iterdir()
            if d.name.isdigit() and _comm(int(d.name)) == comm
        ]
    return groups


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _snapshot(groups: dict[str, list[int]]) -> dict[str, dict[int, float]]:
    return {name: {p: _cpu_seconds(p) for p in pids} for name, pids in groups.items()}


def _cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    # A process that appeared meanwhile (a new PostgreSQL backend) counts from zero; one
    # that ended meanwhile is in its parent's children's time (the parent is in the same
    # group) with its whole life: what it had used before is taken off with `before`.
    return sum(after.values()) - sum(before.values())


def _cookies(n: int) -> list[str]:
    """n people with a logged-in session each (no password hashing: sessions are made the
    way Django's login() makes them)."""
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.auth.hashers import make_password
    from django.contrib.sessions.backends.db import SessionStore

    User = get_user_model()
    User.objects.bulk_create(
        [User(username=f"load{i}", password=make_password(None)) for i in range(n)]
    )
    cookies = []
    for user in User.objects.filter(username__startswith="load").order_by("pk"):
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "accounts.backends.ThrottledModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        cookies.append(f"sessionid={session.session_key}")
    return cookies


class Person:
    """One simulated person: a socket, a conversation, and what happened to it."""

    def __init__(self, stack: Any, cookie: str) -> None:
        self.stack = stack
        self.cookie = cookie
        self.session: str | None = None
        self.turns: list[dict[str, float]] = []
        self.errors: list[str] = []
        self.lost = 0  # answers whose final text differs from the model's
        self.gaps = 0  # seq gaps seen (each resynced)
        self.events = 0

    async def run(self, start_at: float, stop_at: float) -> None:
        import websockets

        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        try:
            ws = await websockets.connect(
                f"wss://hermes.test:{self.stack.nginx_port}/ws/chat/",
                host="127.0.0.1",
                port=self.stack.nginx_port,
                ssl=self.stack.ssl_context(),
                origin=self.stack.origin,
                additional_headers={"Cookie": self.cookie},
                max_size=2**22,
                open_timeout=30,
            )
        except Exception as exc:  # noqa: BLE001 — every failure is an error figure
            self.errors.append(f"connect: {type(exc).__name__}: {exc}")
            return
        try:
            # People do not all press Enter at once: the first message comes at a random
            # moment of one think time, which makes the load steady from the start.
            await asyncio.sleep(random.uniform(0, THINK))
            while time.monotonic() < stop_at:
                try:
                    await asyncio.wait_for(self.turn(ws), TURN_TIMEOUT)
                except TimeoutError:
                    self.errors.append("turn timed out")
                    return
                await asyncio.sleep(THINK * random.uniform(0.5, 1.5))
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            await ws.close()

    async def turn(self, ws: Any) -> None:
        sent = time.perf_counter()
        await ws.send(
            json.dumps({"type": "chat.send", "session": self.session, "text": "load turn"})
        )
        text, last_seq, first, message = "", 0, None, None
        while True:
            event = json.loads(await ws.recv())
            self.events += 1
            kind = event["type"]
            seq = event.get("seq")
            if kind == "session.snapshot":
                text, last_seq = event["text"], event["seq"]
                continue
            if isinstance(seq, int):
                if seq <= last_seq:
                    continue  # already contained in a snapshot
                if seq > last_seq + 1:
                    self.gaps += 1
                    await ws.send(json.dumps({"type": "chat.subscribe", "session": self.session}))
                last_seq = seq
            if kind == "session.started":
                self.session = event["session"]
            elif kind == "assistant.delta":
                first = first or time.perf_counter()
                message = event.get("message_id", message)
                text += event["text"]
            elif kind == "error":
                self.errors.append(f"{event.get('code')}: {event.get('message')}")
                return
            elif kind == "assistant.done":
                done = time.perf_counter()
                if event.get("status") != "complete":
                    self.errors.append(f"answer {event.get('status')}")
                if text != REPLY:
                    self.lost += 1
                self.turns.append(
                    {
                        "total": done - sent,
                        "ttft": (first or done) - sent,
                        "first": not self.turns,
                    }
                )
                return


async def _direct(base_url: str, n: int) -> list[dict[str, float]]:
    """The same stream read straight from the model with the openai client, one at a time:
    the floor the overhead is measured against."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="bench")
    samples = []
    for _ in range(n):
        sent = time.perf_counter()
        first = None
        stream = await client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "load turn"}], stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content and first is None:
                first = time.perf_counter()
        done = time.perf_counter()
        samples.append({"total": done - sent, "ttft": (first or done) - sent})
    await client.close()
    return samples


async def _load(stack: Any, cookies: list[str]) -> tuple[list[Person], float]:
    people = [Person(stack, c) for c in cookies]
    # Everyone connects within the first 5 s, then chats until the end.
    ramp = min(5.0, SECONDS / 4)
    begin = time.monotonic()
    stop_at = begin + SECONDS
    await asyncio.gather(
        *(p.run(begin + ramp * i / len(people), stop_at) for i, p in enumerate(people))
    )
    return people, time.monotonic() - begin


DEFAULT_VARIANTS = [
    {
        "name": "before: channels_redis core layer, 100 ms coalescing",
        "env": {"HERMES_CHANNEL_LAYER": "redis", "HERMES_STREAM_COALESCE_MS": "100"},
    },
    {
        "name": "channels_redis core layer, 50 ms",
        "env": {"HERMES_CHANNEL_LAYER": "redis", "HERMES_STREAM_COALESCE_MS": "50"},
    },
    {
        "name": "channels_redis pub/sub layer, 50 ms",
        "env": {"HERMES_CHANNEL_LAYER": "redis-pubsub", "HERMES_STREAM_COALESCE_MS": "50"},
    },
    {
        "name": "local-first layer, 100 ms",
        "env": {"HERMES_CHANNEL_LAYER": "local-first", "HERMES_STREAM_COALESCE_MS": "100"},
    },
    {
        "name": "local-first layer, 50 ms, Python's 5 ms switch interval",
        "env": {
            "HERMES_CHANNEL_LAYER": "local-first",
            "HERMES_STREAM_COALESCE_MS": "50",
            "HERMES_ASGI_SWITCH_INTERVAL_MS": "5",
        },
    },
    {
        "name": "after: local-first layer, 50 ms (the default)",
        "env": {"HERMES_CHANNEL_LAYER": "local-first", "HERMES_STREAM_COALESCE_MS": "50"},
    },
]


def _variants() -> list[dict[str, Any]]:
    every = {k: str(v) for k, v in json.loads(os.environ.get("BENCH_LOAD_ENV") or "{}").items()}
    chosen = json.loads(os.environ.get("BENCH_LOAD_VARIANTS") or "null") or DEFAULT_VARIANTS
    return [
        {
            "name": v["name"],
            "asgi": int(v.get("asgi", ASGI)),
            "env": {**{k: str(x) for k, x in v["env"].items()}, **every},
        }
        for v in chosen
    ]


def run(vendor: str) -> dict[str, Any]:
    from django.db import connections

    from tests.deploy.stack import missing_prerequisites

    why = missing_prerequisites()
    if why:
        return {"skipped": why}
    cookies = _cookies(USERS)
    connections.close_all()
    return {
        "users": USERS,
        "seconds": SECONDS,
        "think_seconds": THINK,
        "scripted_latency_ms": LATENCY * 1000,
        "chunk_delay_ms": CHUNK_DELAY * 1000,
        "variants": [_run_variant(v, cookies) for v in _variants()],
    }


def _run_variant(variant: dict[str, Any], cookies: list[str]) -> dict[str, Any]:
    from django.conf import settings

    from tests.deploy.stack import running_stack

    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-load-"))
    with running_stack(
        tmp,
        model_reply=REPLY,
        model_latency=LATENCY,
        model_chunk_delay=CHUNK_DELAY,
        nginx_workers="auto",
        asgi_processes=variant["asgi"],
        # The database bench.harness made and migrated for this run.
        database_url=os.environ["DATABASE_URL"],
        extra_env={"SECRET_KEY": settings.SECRET_KEY, **variant["env"]},
    ) as stack:
        model_url = stack.env["OPENAI_BASE_URL"]
        direct = asyncio.run(_direct(model_url, 20))
        groups = _process_groups(stack)
        cpu_before = _snapshot(groups)
        wall_started = time.monotonic()
        people, wall = asyncio.run(_load(stack, cookies))
        groups = _process_groups(stack)  # again: backends and pool children come and go
        cpu_after = _snapshot(groups)
        memory = {
            name: {
                "processes": len(pids),
                **{key: sum(_memory_kb(p)[key] for p in pids) for key in ("rss_kb", "peak_rss_kb")},
            }
            for name, pids in groups.items()
            # Its processes share their buffers: a sum of their RSS would count them each time.
            if name != "postgresql (machine-wide)"
        }
        elapsed = time.monotonic() - wall_started
        over_capacity = sum(
            len(re.findall(r"over capacity", p.text())) for p in stack.procs.values()
        )
        server_errors = sum(p.text().count('"level": "ERROR"') for name, p in stack.procs.items())
    turns = [t for p in people for t in p.turns]
    errors = [e for p in people for e in p.errors]
    direct_total = statistics.median(d["total"] for d in direct)
    direct_ttft = statistics.median(d["ttft"] for d in direct)
    totals = percentiles([t["total"] * 1000 for t in turns]) if turns else {}
    ttfts = percentiles([t["ttft"] * 1000 for t in turns]) if turns else {}
    return {
        "name": variant["name"],
        "env": variant["env"],
        "asgi_processes": len(stack.asgi_ports),
        "wall_seconds": round(wall, 1),
        "turns": len(turns),
        "turns_per_second": round(len(turns) / wall, 1),
        "events_received": sum(p.events for p in people),
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:5],
        "server_error_log_lines": server_errors,
        "lost_deltas": {
            "answers_with_wrong_text": sum(p.lost for p in people),
            "seq_gaps_resynced": sum(p.gaps for p in people),
            "channel_layer_over_capacity_logs": over_capacity,
        },
        "turn_ms_through_stack": totals,
        # A person's first turn also freezes the system prompt of a new conversation.
        "ttft_ms_first_turns": percentiles([t["ttft"] * 1000 for t in turns if t["first"]]),
        "ttft_ms_later_turns": percentiles([t["ttft"] * 1000 for t in turns if not t["first"]]),
        "ttft_ms_through_stack": ttfts,
        "turn_ms_direct_from_model_median": round(direct_total * 1000, 1),
        "ttft_ms_direct_from_model_median": round(direct_ttft * 1000, 1),
        "overhead_ms": {
            "turn_p50": round(totals["p50_ms"] - direct_total * 1000, 1) if turns else None,
            "turn_p95": round(totals["p95_ms"] - direct_total * 1000, 1) if turns else None,
            "ttft_p95": round(ttfts["p95_ms"] - direct_ttft * 1000, 1) if turns else None,
        },
        "cpu_percent_of_one_core": {
            name: round(_cpu_used(cpu_before.get(name, {}), cpu_after[name]) / elapsed * 100, 1)
            for name in groups
        },
        "memory": memory,
    }
