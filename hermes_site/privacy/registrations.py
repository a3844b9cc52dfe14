"""The registry entries of the apps that existed when the registry was written (see
registry.py for how a new table registers itself; the memory providers' inference tables
register themselves in memory/inferences/privacy.py). Loaded on first use of the registry;
an app's own registration of the same model, made in its ready(), wins."""

from __future__ import annotations

from . import registry
from .serialize import api_token_dict


def register_builtin() -> None:
    from accounts.models import (
        AdminContentAccess,
        ApiToken,
        ExportJob,
        LoginThrottle,
        Membership,
        Profile,
    )
    from memory.models import MemoryAnchor, MemoryEntry, MemoryEvent, SessionMemorySnapshot
    from sessions_app.models import Message, SearchSummary, Session, StateMeta, SystemPrompt
    from skills_app.models import (
        ReviewRun,
        SessionSkillState,
        Skill,
        SkillFile,
        SkillRevision,
    )

    def add(model, **kwargs) -> None:  # type: ignore[no-untyped-def]
        registry.register(model, replace=False, **kwargs)

    # --- accounts -----------------------------------------------------------------------
    add(Profile, owner_path="user", section="profile", category="Profile and agent settings")
    add(
        ApiToken,
        owner_path="user",
        section="api_tokens",
        category="API tokens (names and first characters only)",
        serialize=api_token_dict,
    )
    add(
        Membership,
        owner_path="user",
        section="membership",
        category="Team role and daily quotas",
        provided=False,
        content=False,
    )
    add(
        ExportJob,
        owner_path="owner",
        section="data_exports",
        category="Your data exports",
        provided=False,
        content=False,
    )
    add(
        AdminContentAccess,
        owner_path="subject",
        section="admin_content_access",
        category="Administrators who opened your content",
        provided=False,
        content=False,
        # Kept for accountability; erasing the account makes the rows anonymous (SET_NULL).
        on_erase="keep",
    )
    registry.not_personal(
        LoginThrottle,
        reason="keyed hashes of addresses and usernames, no link to an account; expires",
    )

    # --- conversations ------------------------------------------------------------------
    add(
        Session,
        owner_path="owner",
        section="conversations",
        category="Conversations (titles, settings, usage counters)",
        erase_order=50,
    )
    # Nested inside each conversation in export.json; deleted with it (CASCADE).
    add(
        Message,
        owner_path="session__owner",
        section="",
        category="Messages, tool calls and recalled memory sent with them",
        erase_order=40,
    )
    add(
        SystemPrompt,
        owner_path="sessions__owner",
        section="system_prompts",
        category="Frozen system prompts (with the memory and skills they showed)",
        provided=False,
        # Shared by hash between people whose prompts are identical: erase.py deletes the
        # ones nobody else's conversation uses.
        on_erase="custom",
    )
    add(
        SearchSummary,
        owner_path="owner",
        section="search_summaries",
        category="Cached summaries of your conversations for searches",
        provided=False,
        erase_order=30,
    )
    registry.not_personal(StateMeta, reason="facts about the store itself (schema, FTS state)")

    # --- memory -------------------------------------------------------------------------
    add(
        MemoryEntry,
        owner_path="owner",
        section="memory_entries",
        category="Memory: notes about you and for the agent, with provenance",
        memory=True,
        erase_order=20,
    )
    add(
        MemoryEvent,
        owner_path="owner",
        section="memory_events",
        category="Memory audit log (every write, refusal and block)",
        provided=False,
        memory=True,
        erase_order=10,
    )
    add(
        MemoryAnchor,
        owner_path="owner",
        section="memory_versions",
        category="Memory list versions",
        provided=False,
        content=False,
        memory=True,
        erase_order=25,
    )
    add(
        SessionMemorySnapshot,
        owner_path="session__owner",
        section="memory_snapshots",
        category="Which memory entries each conversation's prompt showed",
        provided=False,
        memory=True,
        erase_order=15,
    )

    # --- skills -------------------------------------------------------------------------
    add(Skill, owner_path="owner", section="skills", category="Skills", erase_order=60)
    add(SkillFile, owner_path="skill__owner", section="", category="Skill files", erase_order=55)
    add(
        SkillRevision,
        owner_path="skill__owner",
        section="",
        category="Skill revision history",
        erase_order=55,
    )
    add(
        SessionSkillState,
        owner_path="session__owner",
        section="skill_sessions",
        category="Which skills each conversation's prompt listed",
        provided=False,
        erase_order=35,
    )
    add(
        ReviewRun,
        owner_path="session__owner",
        section="review_runs",
        category="Background reviews of your conversations",
        provided=False,
        erase_order=35,
    )
