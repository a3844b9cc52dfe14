"""Importing a ChatGPT export at scale: time and peak memory.

Writes a `conversations.json` of BENCH_CHAT_IMPORT_CONVERSATIONS conversations (default
10,000) of BENCH_CHAT_IMPORT_MESSAGES messages each (default 50: 500,000 in all), each a
ChatGPT message tree with a second branch at its last prompt (imported as an alternative:
one more message per conversation), then imports it for one user
with `privacy.chat_import.chat_import` (the checking pass and the import pass).

Figures: file size, import time, conversations and messages per second, the process's peak
resident memory before and after the import (`ru_maxrss`: a streamed import stays flat,
whatever the file size), and the Python heap's peak during a separate checking pass
(tracemalloc: what holding one conversation at a time costs). Then the same export imported
again (it must add nothing: each conversation's digest matches), and the plan of "Let Hermes
learn from this history" over all the conversations (`learn_plan`: the aggregate queries
that choose and batch them, no model call) with its bound on model calls.

    BENCH_CHAT_IMPORT_CONVERSATIONS=1000 python -m bench chat_import --vendor sqlite
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

CONVERSATIONS = int(os.environ.get("BENCH_CHAT_IMPORT_CONVERSATIONS", 10_000))
MESSAGES = int(os.environ.get("BENCH_CHAT_IMPORT_MESSAGES", 50))
T0 = 1_600_000_000.0
WORDS = (
    "memory search branch export import stream parser budget lease job progress summary "
    "conversation title timestamp 東京 καλημέρα кошка"
).split()


def _node(node_id: str, parent: str | None, children: list[str], role: str, text: str,
          t: float) -> dict[str, Any]:  # fmt: skip
    return {
        "id": node_id,
        "parent": parent,
        "children": children,
        "message": {
            "id": node_id,
            "author": {"role": role},
            "create_time": t,
            "content": {"content_type": "text", "parts": [text]},
        },
    }


def conversation(i: int) -> dict[str, Any]:
    base = T0 + i * 3600
    mapping: dict[str, Any] = {
        "root": {"id": "root", "parent": None, "children": ["n0"], "message": None}
    }
    parent = "root"
    for j in range(MESSAGES):
        node = f"n{j}"
        role = "user" if j % 2 == 0 else "assistant"
        words = " ".join(WORDS[(i + j + k) % len(WORDS)] for k in range(40))
        children = [f"n{j + 1}"] if j + 1 < MESSAGES else []
        mapping[node] = _node(node, parent, children, role, f"{i}/{j} {words}", base + j)
        parent = node
    # An edited last prompt: one more branch, counted but not imported.
    last_prompt = f"n{MESSAGES - 2}"
    alt = _node("alt", mapping[last_prompt]["parent"], [], "user", "edited", base + MESSAGES)
    mapping["alt"] = alt
    mapping[alt["parent"]]["children"].append("alt")
    return {
        "id": f"conv-{i:08d}",
        "title": f"Conversation {i}",
        "create_time": base,
        "mapping": mapping,
        "current_node": f"n{MESSAGES - 1}",
    }


def write_export(path: Path) -> int:
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for i in range(CONVERSATIONS):
            if i:
                out.write(",")
            json.dump(conversation(i), out, ensure_ascii=False)
        out.write("]")
    return path.stat().st_size


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(vendor: str) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from privacy.chat_import import chat_import, parsed
    from privacy.chat_learning import learn_plan
    from privacy.chat_learning.plan import BATCH_CALLS
    from sessions_app.models import Message, Session

    user = get_user_model().objects.create_user("bench", password="x")  # noqa: S106
    with tempfile.TemporaryDirectory(prefix="bench-chat-import-") as work:
        path = Path(work) / "conversations.json"
        size = write_export(path)
        settings.HERMES_IMPORT_MAX_MB = max(settings.HERMES_IMPORT_MAX_MB, size // 2**20 + 1)
        tracemalloc.start()
        for _ in parsed(path):
            pass
        _, heap_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss_before = _max_rss_mib()
        started = time.perf_counter()
        report = chat_import(user=user, path=path)
        seconds = time.perf_counter() - started
        rss_after = _max_rss_mib()
        started = time.perf_counter()
        again = chat_import(user=user, path=path)
        reimport_seconds = time.perf_counter() - started
    assert not again.added_anything and again.sessions_skipped == CONVERSATIONS
    started = time.perf_counter()
    plan = learn_plan(user=user, session_ids=report.session_ids)
    plan_seconds = time.perf_counter() - started
    messages = Message.objects.filter(session__owner=user, active=True).count()
    assert Session.objects.filter(owner=user).count() == CONVERSATIONS
    assert messages == CONVERSATIONS * MESSAGES == report.messages_created
    assert report.branch_messages == CONVERSATIONS
    return {
        "conversations": CONVERSATIONS,
        "messages": messages,
        "file_mib": round(size / 2**20, 1),
        "import_seconds": round(seconds, 1),
        "conversations_per_second": round(CONVERSATIONS / seconds, 1),
        "messages_per_second": round(messages / seconds),
        "checking_pass_heap_peak_mib": round(heap_peak / 2**20, 2),
        "max_rss_before_import_mib": round(rss_before, 1),
        "max_rss_after_import_mib": round(rss_after, 1),
        "reimport_unchanged_seconds": round(reimport_seconds, 1),
        "learn_plan_seconds": round(plan_seconds, 2),
        "learn_plan_conversations": plan["chosen"],
        "learn_plan_batches": len(plan["batches"]),
        "learn_max_model_calls": len(plan["batches"]) * BATCH_CALLS,
    }
