"""The end of a conversation, as memory providers hear of it (Hermes' `on_session_end`)."""

from __future__ import annotations

from typing import Any

from accounts.services import profile_get

from .agent.extensions import memory_providers_for
from .models import Session
from .selectors import api_messages


def session_end_notify(*, session: Session, messages: list[dict[str, Any]] | None = None) -> None:
    """Tell the owner's memory provider that the conversation ended (Hermes'
    `on_session_end`: compression split, deletion), off the request path. Temporary chats
    and people with memory off tell it nothing."""
    if session.temporary or not profile_get(user=session.owner).memory_enabled:
        return
    manager = memory_providers_for(session.owner)
    if manager.external is None:
        return
    if messages is None:
        messages = api_messages(session_id=session.pk, system_prompt="")[1:]
    manager.in_background(
        "initialize",
        session.pk,
        user=session.owner,
        user_id=session.owner_id,
        platform="web",
        agent_context="primary",
    )
    manager.in_background("on_session_end", messages)
