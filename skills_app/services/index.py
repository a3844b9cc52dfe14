"""The compact skills index that goes into a session's frozen system prompt.

Only names and descriptions, grouped by category: the full text costs tokens on every call
and is loaded on demand with `skill_view`. The index is built once per session (and again
when compression rebuilds the prompt); later skill changes show up in the next session.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from memory.scanner import check_content

from ..models import SessionSkillState
from ..selectors import skills_for_agent

#: Descriptions are cut in the index; the whole one is in skill_view.
INDEX_DESCRIPTION_CHARS = 200
#: An index past this many skills stops listing (and says so): a huge library must not
#: crowd out the conversation.
INDEX_MAX_SKILLS = 150
UNCATEGORISED = "general"

INDEX_HEADER = (
    "## Skills\n"
    "Your skill library: procedures learned in earlier work. Before a task, check the list "
    "below; when a skill matches, load it with skill_view(name) and follow it. After a "
    "non-trivial task, capture the reusable procedure with skill_manage (prefer patching an "
    "existing skill). Only names and descriptions are listed here."
)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    if len(line) > INDEX_DESCRIPTION_CHARS:
        line = line[: INDEX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return line


def skills_index_freeze(*, session: Any, profile: Any = None) -> str:
    """The compact skills index (name — description, grouped by category; the user's own
    enabled skills plus enabled team skills) for the session's frozen system prompt; records
    which skills it included for the inspector; '' when there are none. (A prompt section:
    the owner's `profile` changes nothing here.)"""
    skills = skills_for_agent(user=session.owner)
    included: list[dict[str, Any]] = []
    groups: dict[str, list[str]] = {}
    omitted = 0
    for skill in sorted(skills, key=lambda s: (s.category or UNCATEGORISED, s.name)):
        # Everything was scanned when written; checked again here because the prompt is the
        # one place a payload would act, and patterns may have been added since.
        if check_content(f"{skill.name} {skill.description}") is not None:
            continue
        if len(included) >= INDEX_MAX_SKILLS:
            omitted += 1
            continue
        category = skill.category or UNCATEGORISED
        suffix = " (team)" if skill.is_team else ""
        groups.setdefault(category, []).append(
            f"  - {skill.name}{suffix} — {_one_line(skill.description)}"
        )
        included.append(
            {"id": skill.pk, "name": skill.name, "category": skill.category, "team": skill.is_team}
        )
    now = timezone.now()
    # One upsert: a new conversation's row is made, compression's rebuild updates it (the
    # review counters stay as they are).
    SessionSkillState.objects.bulk_create(
        [
            SessionSkillState(
                session_id=session.pk,
                included_skills=included,
                index_frozen_at=now,
                updated_at=now,
            )
        ],
        update_conflicts=True,
        unique_fields=["session"],
        update_fields=["included_skills", "index_frozen_at", "updated_at"],
    )
    if not included:
        return ""
    lines = [INDEX_HEADER, "<available_skills>"]
    for category, entries in groups.items():
        lines.append(f"{category}:")
        lines.extend(entries)
    if omitted:
        lines.append(f"  … and {omitted} more (use skills_list to see them all)")
    lines.append("</available_skills>")
    return "\n".join(lines)
