"""The conversation tables in the privacy registry (core/privacy/registry.py)."""

from __future__ import annotations

from core.privacy import registry

from .models import Message, SearchSummary, Session, StateMeta, SystemPrompt


def register() -> None:
    """Called from the app's ready()."""
    registry.register(
        Session,
        owner_path="owner",
        section="conversations",
        category="Conversations (titles, settings, usage counters)",
        erase_order=50,
    )
    # Nested inside each conversation in export.json; deleted with it (CASCADE).
    registry.register(
        Message,
        owner_path="session__owner",
        section="",
        category="Messages, tool calls and recalled memory sent with them",
        erase_order=40,
    )
    registry.register(
        SystemPrompt,
        owner_path="sessions__owner",
        section="system_prompts",
        category="Frozen system prompts (with the memory and skills they showed)",
        provided=False,
        # Shared by hash between people whose prompts are identical: erase.py deletes the
        # ones nobody else's conversation uses.
        on_erase="custom",
    )
    registry.register(
        SearchSummary,
        owner_path="owner",
        section="search_summaries",
        category="Cached summaries of your conversations for searches",
        provided=False,
        erase_order=30,
    )
    registry.not_personal(StateMeta, reason="facts about the store itself (schema, FTS state)")
