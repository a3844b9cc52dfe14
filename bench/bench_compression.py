"""A scripted 300-turn conversation through the real turn runner: prompt tokens per call
before and after each compression, and what the summary and flush calls cost."""

from __future__ import annotations

import asyncio
import os
from typing import Any

TURNS = int(os.environ.get("BENCH_COMPRESSION_TURNS", 300))
VENDORS = ("sqlite", "postgresql")
ANSWER = " ".join(["the deploy pipeline builds, tests and ships the artifact"] * 8)


def run(vendor: str) -> dict[str, Any]:
    from channels.testing import WebsocketCommunicator
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from devtools.scripted_llm import ScriptedLLM
    from hermes_site.asgi import application
    from sessions_app.lineage import compression_chain
    from sessions_app.models import Session

    user = get_user_model().objects.create_user("bench", password="x" * 12)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    with ScriptedLLM() as server:
        server.add_rule(lambda b: b["messages"][-1]["role"] == "tool", reply="Saved.")
        server.add_rule(
            "[Memory flush before compaction]",
            tool_calls=[
                {
                    "name": "memory",
                    "arguments": {
                        "action": "add",
                        "target": "user",
                        "content": "Works on the deploy pipeline",
                    },
                }
            ],
        )
        server.add_rule(
            "You are a summarisation agent",
            reply="## Goal\nShip the pipeline.\n## Completed Actions\n1. Built it.",
        )
        server.add_rule("Turn", reply=ANSWER)
        settings.OPENAI_BASE_URL = server.base_url
        settings.OPENAI_API_KEY = "bench"
        settings.HERMES_MODEL = "scripted"
        settings.HERMES_REVIEW_ENABLED = False
        settings.HERMES_CONTEXT_LENGTH = 8192
        settings.HERMES_REPLY_MAX_TOKENS = 512
        settings.CELERY_TASK_ALWAYS_EAGER = True
        from hermes_site.celery import app

        app.conf.task_always_eager = True

        async def converse() -> str:
            ws = WebsocketCommunicator(
                application,
                "/ws/chat/",
                headers=[
                    (b"origin", b"http://127.0.0.1"),
                    (b"host", b"127.0.0.1"),
                    (b"cookie", cookie),
                ],
            )
            await ws.connect()
            session = None
            for turn in range(TURNS):
                await ws.send_json_to(
                    {
                        "type": "chat.send",
                        "session": session,
                        "text": f"Turn {turn}: what next for the pipeline?",
                    }
                )
                while True:
                    event = await ws.receive_json_from(timeout=60)
                    if event["type"] == "session.started":
                        session = event["session"]
                    if event["type"] in ("assistant.done", "error"):
                        break
            await ws.disconnect()
            return session

        first = asyncio.run(converse())
        requests, usages = server.requests, server.usages

    chat_calls = []
    summary_tokens = flush_tokens = 0
    for body, usage in zip(requests, usages, strict=False):
        head = str(body["messages"][0]["content"])
        last = str(body["messages"][-1]["content"])
        if head.startswith("You are a summarisation agent"):
            summary_tokens += usage["prompt_tokens"] + usage["completion_tokens"]
            chat_calls.append("S")
        elif "[Memory flush before compaction]" in last or (
            body["messages"][-1]["role"] == "tool" and "Memory flush" in str(body["messages"])
        ):
            flush_tokens += usage["prompt_tokens"] + usage["completion_tokens"]
            chat_calls.append("F")
        else:
            chat_calls.append(usage["prompt_tokens"])
    # Prompt size of the chat call just before and just after each compression.
    around = []
    for i, marker in enumerate(chat_calls):
        if marker == "S":
            before = next((c for c in reversed(chat_calls[:i]) if isinstance(c, int)), None)
            after = next((c for c in chat_calls[i + 1 :] if isinstance(c, int)), None)
            around.append({"before": before, "after": after})
    chain = compression_chain(Session.objects.get(pk=first))
    chat_prompts = [c for c in chat_calls if isinstance(c, int)]
    return {
        "turns": TURNS,
        "context_length": 8192,
        "compressions": len(around),
        "parts_in_chain": len(chain),
        "prompt_tokens_around_each_compression": around,
        "max_chat_prompt_tokens": max(chat_prompts),
        "mean_chat_prompt_tokens": round(sum(chat_prompts) / len(chat_prompts), 1),
        "summary_call_tokens_total": summary_tokens,
        "flush_call_tokens_total": flush_tokens,
        "chat_call_tokens_total": sum(u["prompt_tokens"] + u["completion_tokens"] for u in usages)
        - summary_tokens
        - flush_tokens,
    }
