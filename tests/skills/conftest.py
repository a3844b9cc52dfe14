"""Fixtures for the skills tests: SKILL.md texts, conversations, and the scripted model's
settings (the model and worker fixtures are shared, in tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from sessions_app.models import Session
from tests.factories import MessageFactory, SessionFactory, skill_md  # noqa: F401 (skill_md is shared)


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def make_conversation(owner, *, turns: int = 1, title: str = "Storage work") -> Session:
    """A session whose turns each used a tool, as the chat turn loop persists them."""
    session = SessionFactory(owner=owner, title=title)
    for i in range(turns):
        MessageFactory(session=session, content=f"Turn {i}: why is my PVC stuck in Pending?")
        call_id = f"call_{session.pk}_{i}"
        MessageFactory(
            session=session,
            role="assistant",
            content="",
            tool_calls=[
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "session_search", "arguments": '{"query": "pvc"}'},
                }
            ],
        )
        MessageFactory(
            session=session,
            role="tool",
            tool_call_id=call_id,
            tool_name="session_search",
            content='{"results": []}',
        )
        MessageFactory(
            session=session,
            role="assistant",
            content="The StorageClass had no provisioner; setting one fixed it.",
        )
    return session


@pytest.fixture
def scripted_settings() -> dict[str, Any]:
    return {"OPENAI_API_KEY": "x", "HERMES_LLM_READ_TIMEOUT": 10.0}
