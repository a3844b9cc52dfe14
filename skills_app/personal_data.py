"""The skill tables in the privacy registry (core/privacy/registry.py)."""

from __future__ import annotations

from core.privacy import registry

from .models import ReviewRun, SessionSkillState, Skill, SkillFile, SkillRevision


def register() -> None:
    """Called from the app's ready()."""
    registry.register(
        Skill, owner_path="owner", section="skills", category="Skills", erase_order=60
    )
    registry.register(
        SkillFile, owner_path="skill__owner", section="", category="Skill files", erase_order=55
    )
    registry.register(
        SkillRevision,
        owner_path="skill__owner",
        section="",
        category="Skill revision history",
        erase_order=55,
    )
    registry.register(
        SessionSkillState,
        owner_path="session__owner",
        section="skill_sessions",
        category="Which skills each conversation's prompt listed",
        provided=False,
        erase_order=35,
    )
    registry.register(
        ReviewRun,
        owner_path="session__owner",
        section="review_runs",
        category="Background reviews of your conversations",
        provided=False,
        erase_order=35,
    )
