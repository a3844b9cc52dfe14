"""Fixtures for L2 search: conversations built in the real database and the scripted
model's settings (the model and worker fixtures are shared, in tests/conftest.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devtools.scripted_llm import ScriptedLLM
from sessions_app.models import Session
from tests.factories import MessageFactory, SessionFactory

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
    session = SessionFactory(
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
        extra: dict[str, Any] = dict(item[2]) if len(item) > 2 else {}
        if role == "tool":
            extra.setdefault("tool_call_id", f"call_{i}")
            extra.setdefault("tool_name", "terminal")
        MessageFactory(
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


@pytest.fixture
def scripted_settings() -> dict[str, Any]:
    """The scripted model is the chat and the summary model."""
    return {
        "OPENAI_API_KEY": API_KEY,
        "HERMES_LLM_READ_TIMEOUT": 8.0,
        "HERMES_SEARCH_SUMMARY_TIMEOUT": 30.0,
        "HERMES_SEARCH_SUMMARY_CONCURRENCY": 3,
    }


@pytest.fixture(scope="module")
def scripted_worker_env() -> dict[str, str]:
    return {"OPENAI_API_KEY": API_KEY}


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
