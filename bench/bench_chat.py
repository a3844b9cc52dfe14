"""Chat streaming through our whole stack: daphne + the websocket consumer + the turn runner
+ the openai client, against the scripted model at a fixed latency.

Figures: time-to-first-token overhead and per-delta overhead added by our stack (p50/p95)
with 50 concurrent chats; one person's time-to-first-token overhead over ROUNDS (30)
interleaved rounds (a turn through the stack in a conversation already under way, then the
same request read straight from the model, so both see the same machine at the same moment;
also against a one-message request, the measure before 2026-12-04);
deltas lost (must be 0), memory per open socket, and the prefix-cache ratio (cached /
prompt tokens) of a 30-turn session against a baseline that rebuilds the system prompt
every turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness import ROOT, percentiles

CHATS = int(os.environ.get("BENCH_CHATS", 50))
LATENCY = 0.2  # seconds the scripted model waits before its first byte
CHUNK_DELAY = 0.01  # seconds between streamed chunks
REPLY = " ".join(f"word{i}" for i in range(120))
TURNS = 30
ROUNDS = int(os.environ.get("BENCH_CHAT_ROUNDS", 30))


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cookie(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def _origin(url: str) -> str:
    """The page origin a browser would send for this websocket URL (same scheme, host, port)."""
    return "http" + url.removeprefix("ws").split("/ws/", 1)[0]


async def _chat(url: str, cookie: str, texts: list[str]) -> list[dict[str, Any]]:
    import websockets

    results = []
    async with websockets.connect(
        url,
        additional_headers={"Cookie": cookie, "Origin": _origin(url)},
        max_size=2**22,
    ) as ws:
        session = None
        for text in texts:
            sent = time.perf_counter()
            await ws.send(json.dumps({"type": "chat.send", "session": session, "text": text}))
            first = None
            arrivals: list[float] = []
            deltas: list[str] = []
            seqs: list[int] = []
            while True:
                event = json.loads(await ws.recv())
                if "seq" in event:
                    seqs.append(event["seq"])
                if event["type"] == "session.started":
                    session = event["session"]
                elif event["type"] == "assistant.delta":
                    now = time.perf_counter()
                    first = first or now
                    arrivals.append(now)
                    deltas.append(event["text"])
                elif event["type"] in ("assistant.done", "error"):
                    break
            results.append(
                {
                    "ttft": (first or time.perf_counter()) - sent,
                    "arrivals": arrivals,
                    "text": "".join(deltas),
                    "status": event.get("status", event.get("code")),
                    "gaps": sum(1 for a, b in zip(seqs, seqs[1:], strict=False) if b != a + 1),
                }
            )
    return results


def _start_server(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    from tests.conftest import free_port

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "hermes_site.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("daphne did not start")


def _baseline_ratio(server: Any, transcript: list[dict[str, Any]]) -> float:
    """Replay the same conversation, but rebuild the system prompt each turn (a fresh
    memory snapshot and clock), as an app that does not freeze its prompt would."""
    from openai import OpenAI

    server.reset()
    client = OpenAI(base_url=server.base_url, api_key="bench")
    history: list[dict[str, Any]] = []
    for turn, message in enumerate(transcript):
        if message["role"] == "system":
            continue
        history.append(message)
        if message["role"] != "user":
            continue
        system = {
            "role": "system",
            "content": f"Now: turn {turn}, {time.time()}.\n" + transcript[0]["content"],
        }
        client.chat.completions.create(model="scripted", messages=[system, *history])
    usages = server.usages
    return sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages) / max(
        1, sum(u["prompt_tokens"] for u in usages)
    )


def _start_model(port: int, recorded: Path) -> subprocess.Popen[bytes]:
    """The scripted model in its own process, so its CPU is not charged to our stack; it
    writes the body of each request it gets to `recorded`."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devtools.scripted_llm",
            "--port",
            str(port),
            "--reply",
            REPLY,
            "--latency",
            str(LATENCY),
            "--chunk-delay",
            str(CHUNK_DELAY),
            "--record-to",
            str(recorded),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("scripted model did not start")


async def _direct(base_url: str) -> list[dict[str, Any]]:
    """The same 50 streams read straight from the model with the openai client: the
    floor our stack is measured against."""
    from openai import AsyncOpenAI

    async def one() -> dict[str, Any]:
        client = AsyncOpenAI(base_url=base_url, api_key="bench")
        sent = time.perf_counter()
        arrivals: list[float] = []
        stream = await client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "bench turn"}], stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.perf_counter())
        await client.close()
        return {"ttft": arrivals[0] - sent, "arrivals": arrivals}

    return await asyncio.gather(*(one() for _ in range(CHATS)))


async def _direct_ttft(client: Any, body: dict[str, Any] | None = None) -> float:
    """Time to the first token read straight from the model: `body` (a request our stack
    sent, posted as it is, as our client posts it) or a one-message request."""
    from openai import AsyncStream
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    sent = time.perf_counter()
    if body is None:
        stream = await client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "bench turn"}], stream=True
        )
    else:
        stream = await client.post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )
    first = None
    async for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
    return (first or time.perf_counter()) - sent


async def _single_user(
    url: str, cookie: str, model_url: str, recorded: Path
) -> list[dict[str, float]]:
    """One person, one socket, one conversation: a warm-up turn (it creates the conversation
    and freezes its prompt), then ROUNDS rounds of a turn through the stack and two direct
    streams, in alternating order so neither always goes first: the request our stack last
    sent (as the model recorded it; read after our turn, so in a round where the direct
    streams go first it is the previous turn's, two messages shorter), and a one-message
    request. The first is the fair floor: a longer prompt takes the model longer to read."""
    import websockets
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=model_url, api_key="bench")
    rounds = []
    async with websockets.connect(
        url, additional_headers={"Cookie": cookie, "Origin": _origin(url)}, max_size=2**22
    ) as ws:
        session = None
        body: dict[str, Any] = {}

        async def ours() -> float:
            nonlocal session, body
            sent = time.perf_counter()
            await ws.send(json.dumps({"type": "chat.send", "session": session, "text": "hi"}))
            first = None
            while True:
                event = json.loads(await ws.recv())
                if event["type"] == "session.started":
                    session = event["session"]
                elif event["type"] == "assistant.delta" and first is None:
                    first = time.perf_counter()
                elif event["type"] in ("assistant.done", "error"):
                    body = json.loads(recorded.read_text())
                    return (first or time.perf_counter()) - sent

        await ours()
        await _direct_ttft(client)
        for n in range(ROUNDS):
            if n % 2:
                same, one = await _direct_ttft(client, body), await _direct_ttft(client)
                through = await ours()
            else:
                through = await ours()
                same, one = await _direct_ttft(client, body), await _direct_ttft(client)
            rounds.append({"ours": through, "same": same, "one": one})
    await client.close()
    return rounds


def _mean_gap_ms(arrivals: list[float]) -> float:
    return (arrivals[-1] - arrivals[0]) / max(1, len(arrivals) - 1) * 1000


def run(vendor: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from devtools.scripted_llm import ScriptedLLM
    from tests.conftest import free_port

    User = get_user_model()
    users = [User.objects.create_user(f"bench{i}", password="x" * 12) for i in range(CHATS)]
    cookies = [_cookie(u) for u in users]

    model_port = free_port()
    recorded = Path(os.environ["HERMES_VAR_DIR"]) / "bench-chat-request.json"
    model = _start_model(model_port, recorded)
    model_url = f"http://127.0.0.1:{model_port}/v1"
    env = dict(os.environ)
    env.update(
        OPENAI_BASE_URL=model_url,
        OPENAI_API_KEY="bench",
        HERMES_MODEL="scripted",
        HERMES_REVIEW_ENABLED="false",
        HERMES_CELERY_EAGER="1",
    )
    proc, port = _start_server(env)
    url = f"ws://127.0.0.1:{port}/ws/chat/"
    try:
        direct = asyncio.run(_direct(model_url))
        idle_kb = _rss_kb(proc.pid)
        per_socket_kb = asyncio.run(_socket_memory(url, cookies, proc.pid, idle_kb))
        single = asyncio.run(_single_user(url, cookies[0], model_url, recorded))
        started = time.perf_counter()
        runs = asyncio.run(_concurrent(url, cookies))
        wall = time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        model.terminate()
        model.wait(timeout=15)
    results = [r for chat in runs for r in chat]
    lost = sum(r["text"] != REPLY for r in results)
    ttft_ours = percentiles([r["ttft"] * 1000 for r in results])
    ttft_direct = percentiles([d["ttft"] * 1000 for d in direct])
    gap_ours = percentiles([_mean_gap_ms(r["arrivals"]) for r in results if len(r["arrivals"]) > 1])
    gap_direct = percentiles([_mean_gap_ms(d["arrivals"]) for d in direct])
    events_per_answer = sum(len(r["arrivals"]) for r in results) / len(results)
    chunks_per_answer = sum(len(d["arrivals"]) for d in direct) / len(direct)

    # Prefix cache over a 30-turn session through our stack (in-process model, for usages).
    with ScriptedLLM() as server:
        server.add_rule("bench turn", reply="Short answer for the cache benchmark.")
        env["OPENAI_BASE_URL"] = server.base_url
        proc, port = _start_server(env)
        try:
            asyncio.run(
                _chat(
                    f"ws://127.0.0.1:{port}/ws/chat/",
                    cookies[0],
                    [f"bench turn {i}" for i in range(TURNS)],
                )
            )
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        usages = server.usages
        ours = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages) / max(
            1, sum(u["prompt_tokens"] for u in usages)
        )
        baseline = _baseline_ratio(server, server.requests[-1]["messages"])

    return {
        "chats": CHATS,
        "scripted_latency_ms": LATENCY * 1000,
        "chunk_delay_ms": CHUNK_DELAY * 1000,
        "wall_seconds": round(wall, 2),
        "statuses": sorted({str(r["status"]) for r in results}),
        "ttft_ms_through_our_stack": ttft_ours,
        "ttft_ms_direct_from_model": ttft_direct,
        "ttft_overhead_ms": {
            "p50": round(ttft_ours["p50_ms"] - ttft_direct["p50_ms"], 1),
            "p95": round(ttft_ours["p95_ms"] - ttft_direct["p95_ms"], 1),
        },
        "single_user": {
            "rounds": len(single),
            "ttft_ms_through_our_stack": percentiles([r["ours"] * 1000 for r in single]),
            "ttft_ms_direct_same_request": percentiles([r["same"] * 1000 for r in single]),
            "ttft_ms_direct_one_message": percentiles([r["one"] * 1000 for r in single]),
            # Per round, so a slow moment of the machine counts against neither side.
            "ttft_overhead_ms": percentiles([(r["ours"] - r["same"]) * 1000 for r in single]),
            "ttft_overhead_ms_vs_one_message": percentiles(
                [(r["ours"] - r["one"]) * 1000 for r in single]
            ),
        },
        "mean_gap_between_events_ms_ours": gap_ours,
        "mean_gap_between_chunks_ms_direct": gap_direct,
        "events_per_answer_ours": round(events_per_answer, 1),
        "chunks_per_answer_direct": round(chunks_per_answer, 1),
        "answers_with_lost_text": lost,
        "seq_gaps": sum(r["gaps"] for r in results),
        "memory_per_open_socket_kb": per_socket_kb,
        "prefix_cache_ratio_frozen_prompt": round(ours, 4),
        "prefix_cache_ratio_rebuilt_prompt": round(baseline, 4),
    }


async def _concurrent(url: str, cookies: list[str]) -> list[list[dict[str, Any]]]:
    return await asyncio.gather(*(_chat(url, c, ["bench turn"]) for c in cookies))


async def _socket_memory(url: str, cookies: list[str], pid: int, idle_kb: int) -> float:
    import websockets

    sockets = [
        await websockets.connect(url, additional_headers={"Cookie": c, "Origin": _origin(url)})
        for c in cookies
    ]
    await asyncio.sleep(0.5)
    open_kb = _rss_kb(pid)
    for ws in sockets:
        await ws.close()
    return round((open_kb - idle_kb) / len(sockets), 1)
