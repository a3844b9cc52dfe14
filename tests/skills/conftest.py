"""Fixtures for the skills tests: SKILL.md texts, conversations, and the scripted model's
settings (the model and worker fixtures are shared, in tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from sessions_app.models import Message, Session


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


@pytest.fixture
def scripted_settings() -> dict[str, Any]:
    return {"OPENAI_API_KEY": "x", "HERMES_LLM_READ_TIMEOUT": 10.0}
