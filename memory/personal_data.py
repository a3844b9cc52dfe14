"""The memory tables in the privacy registry (core/privacy/registry.py); the inference tables
register in memory/inferences/personal_data.py."""

from __future__ import annotations

from core.privacy import registry

from .models import MemoryAnchor, MemoryEntry, MemoryEvent, SessionMemorySnapshot


def register() -> None:
    """Called from the app's ready()."""
    registry.register(
        MemoryEntry,
        owner_path="owner",
        section="memory_entries",
        category="Memory: notes about you and for the agent, with provenance",
        memory=True,
        erase_order=20,
    )
    registry.register(
        MemoryEvent,
        owner_path="owner",
        section="memory_events",
        category="Memory audit log (every write, refusal and block)",
        provided=False,
        memory=True,
        erase_order=10,
    )
    registry.register(
        MemoryAnchor,
        owner_path="owner",
        section="memory_versions",
        category="Memory list versions",
        provided=False,
        content=False,
        memory=True,
        erase_order=25,
    )
    registry.register(
        SessionMemorySnapshot,
        owner_path="session__owner",
        section="memory_snapshots",
        category="Which memory entries each conversation's prompt showed",
        provided=False,
        memory=True,
        erase_order=15,
    )
