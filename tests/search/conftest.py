"""Fixtures for L2 search: conversations built in the real database, the scripted model
server, and a real Celery worker that can reach it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devtools.scripted_llm import ScriptedLLM
from sessions_app.models import Message, Session
from sessions_app.search import summarise

API_KEY = "sk-search-test-key-0123456789"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    """A fixed point in time, `minutes` after T0 (tests never depend on the clock)."""
    return T0 + timedelta(minutes=minutes)


def make_chat(
    owner: Any,
    messages: list[tuple[str, str]] | list[tuple[str, str, dict[str, Any]]],
    *,
    title: str | None = None,
    start: float = 0,
    parent: Session | None = None,
    ended: float | None = None,
    end_reason: str = "",
) -> Session:
    """A conversation with `messages` [(role, content[, extra fields])], one minute apart."""
    session = Session.objects.create(
        owner=owner,
        title=title,
        parent=parent,
        started_at=at(start),
        last_activity_at=at(start + len(messages)),
        ended_at=at(ended) if ended is not None else None,
        end_reason=end_reason,
    )
    for i, item in enumerate(messages):
        role, content = item[0], item[1]
        extra: dict[str, Any] = dict(item[2]) if len(item) > 2 else {}  # type: ignore[misc]
        if role == "tool":
            extra.setdefault("tool_call_id", f"call_{i}")
            extra.setdefault("tool_name", "terminal")
        if role == "assistant":
            extra.setdefault("status", "complete")
        Message.objects.create(
            session=session, role=role, content=content, timestamp=at(start + i), **extra
        )
    return session


def compress(parent: Session, owner: Any, messages: list[tuple[str, str]], **kw: Any) -> Session:
    """End `parent` by compression and start its continuation."""
    end = (parent.last_activity_at - at(0)).total_seconds() / 60
    parent.end_reason = Session.EndReason.COMPRESSION
    parent.ended_at = at(end)
    parent.save(update_fields=["end_reason", "ended_at"])
    return make_chat(owner, messages, parent=parent, start=end, **kw)


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def scripted(llm_server: ScriptedLLM, settings: Any) -> Iterator[ScriptedLLM]:
    """The scripted model, configured as chat and summary model, fast timeouts."""
    llm_server.reset()
    settings.OPENAI_BASE_URL = llm_server.base_url
    settings.OPENAI_API_KEY = API_KEY
    settings.HERMES_MODEL = "scripted"
    settings.HERMES_SUMMARY_MODEL = ""
    settings.HERMES_LLM_CONNECT_TIMEOUT = 2.0
    settings.HERMES_LLM_READ_TIMEOUT = 8.0
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_SEARCH_SUMMARY_TIMEOUT = 30.0
    settings.HERMES_SEARCH_SUMMARY_CONCURRENCY = 3
    yield llm_server
    # Summaries left running past a test's timeout must not outlive the test.
    summarise.join_background(timeout=15)


@pytest.fixture
def no_llm(settings: Any) -> None:
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    settings.HERMES_MODEL = ""
    settings.HERMES_SUMMARY_MODEL = ""


def summary_requests(server: ScriptedLLM) -> list[dict[str, Any]]:
    """Requests the summariser sent (they carry the search-topic prompt)."""
    return [
        r
        for r in server.requests
        if any("Search topic:" in str(m.get("content", "")) for m in r.get("messages", []))
    ]


@pytest.fixture
def summary_worker(llm_server, monkeypatch, request, transactional_db):  # type: ignore[no-untyped-def]
    """The shared real `celery_worker`, started with the scripted model in its environment
    (tests.conftest.subprocess_env copies os.environ when the worker starts).

    `transactional_db` is named here, not only inside celery_worker: requested dynamically it
    would come after `db` had already opened the test transaction the worker cannot see."""
    llm_server.reset()
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("HERMES_MODEL", "scripted")
    monkeypatch.setenv("HERMES_SUMMARY_MODEL", "")
    monkeypatch.setenv("HERMES_LLM_MAX_RETRIES", "0")
    return request.getfixturevalue("celery_worker")
