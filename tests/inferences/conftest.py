"""Fixtures for the inference tests: conversations, inferences, the scripted model (real
HTTP) with an extractor rule, websockets, and a real Celery worker that talks to the
scripted model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from devtools.scripted_llm import ScriptedLLM
from memory.inferences.extraction import SYSTEM_PROMPT
from memory.inferences.guard import statement_digest
from memory.models import Inference
from sessions_app.models import Message, Session
from tests.chat.conftest import Sockets
from tests.conftest import ROOT, RUN_ID, WorkerHandle, subprocess_env, wait_for

_LINE = re.compile(r"^\[(\d+)\] (USER|ASSISTANT): ", re.MULTILINE)


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def conversation(owner, *texts: str, temporary: bool = False, title: str | None = None) -> Session:  # type: ignore[no-untyped-def]
    """A session with alternating user/assistant messages (`texts` are the user's)."""
    session = Session.objects.create(owner=owner, title=title, temporary=temporary)
    for i, text in enumerate(texts):
        Message.objects.create(session=session, role="user", content=text)
        Message.objects.create(
            session=session, role="assistant", status="complete", content=f"Answer {i}."
        )
    return session


def make_inference(owner, statement: str, **fields: Any) -> Inference:  # type: ignore[no-untyped-def]
    fields.setdefault("confidence", Decimal("0.800"))
    return Inference.objects.create(
        owner=owner, statement=statement, statement_hash=statement_digest(statement), **fields
    )


def is_extraction(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("content") == SYSTEM_PROMPT


def window_ids(body: dict[str, Any]) -> list[tuple[int, str]]:
    """(message id, speaker) of the conversation lines the extractor was shown."""
    return [(int(m.group(1)), m.group(2)) for m in _LINE.finditer(body["messages"][1]["content"])]


class Extractor:
    """Answers extraction requests with the `items` set by the test; an item's evidence
    defaults to the first USER message of the window shown."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.raw: str | None = None

    def reply(self, body: dict[str, Any]) -> str:
        if self.raw is not None:
            return self.raw
        users = [pk for pk, who in window_ids(body) if who == "USER"]
        items = []
        for item in self.items:
            item = dict(item)
            if "evidence" not in item:
                item["evidence"] = users[:1]
            elif callable(item["evidence"]):
                item["evidence"] = item["evidence"](body)
            item.setdefault("category", "preference")
            item.setdefault("confidence", 0.8)
            items.append(item)
        return json.dumps({"inferences": items})


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def scripted(llm_server: ScriptedLLM, settings: Any) -> ScriptedLLM:
    llm_server.reset()
    llm_server.chunk_delay = 0.0
    settings.OPENAI_BASE_URL = llm_server.base_url
    settings.OPENAI_API_KEY = "sk-test"
    settings.HERMES_MODEL = "scripted"
    settings.HERMES_SUMMARY_MODEL = ""
    settings.HERMES_LLM_CONNECT_TIMEOUT = 2.0
    settings.HERMES_LLM_READ_TIMEOUT = 5.0
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_STREAM_SAVE_INTERVAL = 0.05
    settings.HERMES_STREAM_COALESCE_MS = 0
    settings.HERMES_REVIEW_ENABLED = False
    return llm_server


@pytest.fixture
def extractor(scripted: ScriptedLLM) -> Extractor:
    """The scripted model answers extraction requests from this object's `items`."""
    ex = Extractor()
    scripted.add_rule(is_extraction, reply=ex.reply)
    return ex


@pytest.fixture
def local_provider(settings: Any) -> None:
    settings.HERMES_MEMORY_PROVIDER = "local"
    settings.HERMES_MEMORY_PROVIDERS = {}


@pytest.fixture
def sockets(transactional_db) -> Sockets:  # type: ignore[no-untyped-def]
    return Sockets()


def extraction_requests(server: ScriptedLLM) -> list[dict[str, Any]]:
    return [r for r in server.requests if is_extraction(r)]


@pytest.fixture(scope="module")
def inference_worker(
    llm_server: ScriptedLLM, redis_url: str, django_db_setup, django_db_blocker, tmp_path_factory
) -> Iterator[WorkerHandle]:  # type: ignore[no-untyped-def]
    """A real `celery worker` process on the test database and a real broker, whose model
    is the scripted server."""
    log = tmp_path_factory.mktemp("inference-worker") / "worker.log"
    with django_db_blocker.unblock():
        env = subprocess_env(
            REDIS_URL=redis_url,
            HERMES_CELERY_EAGER="0",
            HERMES_CHANNEL_PREFIX=RUN_ID,
            OPENAI_BASE_URL=llm_server.base_url,
            OPENAI_API_KEY="x",
            HERMES_MODEL="scripted",
            HERMES_SUMMARY_MODEL="",
            HERMES_LLM_MAX_RETRIES="0",
            HERMES_MEMORY_PROVIDER="local",
        )
    queue = f"{RUN_ID}-inferences"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "hermes_site",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "1",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-Q",
                queue,
                "-n",
                f"{queue}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: b"ready." in log.read_bytes() or proc.poll() is not None,
            timeout=60,
            what="the Celery worker to start",
        )
        assert proc.poll() is None, log.read_text()
        yield WorkerHandle(redis_url=redis_url, queue=queue, log=log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
