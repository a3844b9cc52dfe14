"""Helpers for the memory tests: a tool context for a persona, a chat of theirs, and an
API client logged in as them."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.services import profile_get
from core.exceptions import ServiceError
from memory import selectors
from sessions_app.agent.tools import ToolContext
from sessions_app.models import Message, Session
from tests.factories import MessageFactory, SessionFactory


def contents(user, target: str = "memory") -> list[str]:
    return selectors.memory_contents(user=user, target=target)


def refused(call, **kwargs) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        call(**kwargs)
    return info.value


def chat_of(user: Any, title: str = "Planning the trip") -> Session:
    return SessionFactory(owner=user, title=title)


def message_in(session: Session, text: str = "Remember that I like trains") -> Message:
    return MessageFactory(session=session, content=text)


def tool_ctx(
    user, *, session: Session | None = None, message: Message | None = None, origin="tool"
):
    return ToolContext(
        user=user,
        session_id=session.pk if session else None,
        message_id=message.pk if message else None,
        origin=origin,
    )


def set_profile(user, **fields) -> None:
    profile = profile_get(user=user)
    for name, value in fields.items():
        setattr(profile, name, value)
    profile.save()


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def chat(owner) -> Session:
    return chat_of(owner)
