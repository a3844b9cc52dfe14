"""Fixtures for the skills tests: SKILL.md texts, conversations, the scripted model, and a
real Celery worker that talks to that model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from devtools.scripted_llm import ScriptedLLM
from sessions_app.models import Message, Session
from tests.conftest import RUN_ID, WorkerHandle, running_worker


def skill_md(
    name: str,
    description: str = "How to do the thing, step by step.",
    body: str = "# Steps\n\n1. Check the state.\n2. Do the thing.\n3. Verify it worked.",
    extra: str = "",
) -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n"


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def make_conversation(owner, *, turns: int = 1, title: str = "Storage work") -> Session:  # type: ignore[no-untyped-def]
    """A session whose turns each used a tool, as the chat turn loop persists them."""
    session = Session.objects.create(owner=owner, title=title)
    for i in range(turns):
        Message.objects.create(
            session=session, role="user", content=f"Turn {i}: why is my PVC stuck in Pending?"
        )
        call_id = f"call_{session.pk}_{i}"
        Message.objects.create(
            session=session,
            role="assistant",
            content="",
            status="complete",
            tool_calls=[
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "session_search", "arguments": '{"query": "pvc"}'},
                }
            ],
        )
        Message.objects.create(
            session=session,
            role="tool",
            tool_call_id=call_id,
            tool_name="session_search",
            content='{"results": []}',
        )
        Message.objects.create(
            session=session,
            role="assistant",
            status="complete",
            content="The StorageClass had no provisioner; setting one fixed it.",
        )
    return session


@pytest.fixture(scope="module")
def llm_server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def scripted(llm_server: ScriptedLLM, settings: Any) -> ScriptedLLM:
    """The scripted model, reset, with this process's settings pointing at it."""
    llm_server.reset()
    settings.OPENAI_BASE_URL = llm_server.base_url
    settings.OPENAI_API_KEY = "x"
    settings.HERMES_MODEL = "scripted"
    settings.HERMES_SUMMARY_MODEL = ""
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_READ_TIMEOUT = 10.0
    return llm_server


@pytest.fixture(scope="module")
def review_worker(
    llm_server: ScriptedLLM, redis_url: str, django_db_setup, tmp_path_factory
) -> Iterator[WorkerHandle]:  # type: ignore[no-untyped-def]
    """A real `celery worker` process on the test database and a real broker, whose model
    is the module's scripted server. Module-scoped: one start for all review tests."""
    log = tmp_path_factory.mktemp("review-worker") / "worker.log"
    with running_worker(
        redis_url,
        log,
        queue=f"{RUN_ID}-skills",
        OPENAI_BASE_URL=llm_server.base_url,
        OPENAI_API_KEY="x",
        HERMES_MODEL="scripted",
        HERMES_SUMMARY_MODEL="",
        HERMES_LLM_MAX_RETRIES="0",
    ) as handle:
        yield handle
