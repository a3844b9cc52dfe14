"""Reads of skills, always for one user: their own skills plus the team's.

Name lookups prefer the user's own skill; a team skill is found when the user has none of
that name (a user cannot create a skill with a team skill's name, but a team skill
published later may share a name with an older personal one — the personal one wins for
its owner).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from core.exceptions import ServiceError

from .models import SessionSkillState, Skill, SkillFile, SkillRevision


def no_such_skill(name: str) -> ServiceError:
    return ServiceError(
        "not_found",
        f"No skill named {name!r}. Use skills_list to see the available skills.",
        status=404,
    )


def skills_visible(*, user: AbstractBaseUser, enabled_only: bool = False) -> QuerySet[Skill]:
    """The user's own skills and the team's, own first within a name, by category and name."""
    qs = Skill.objects.filter(Q(owner=user) | Q(is_team=True))
    if enabled_only:
        qs = qs.filter(enabled=True)
    return qs.order_by("category", "name", "is_team")


def skills_for_agent(*, user: AbstractBaseUser, category: str | None = None) -> list[Skill]:
    """Enabled skills the agent may use, one per name (the user's own shadows the team's),
    sorted by (category, name)."""
    qs = skills_visible(user=user, enabled_only=True).defer("content", "body", "frontmatter")
    if category:
        qs = qs.filter(category=category)
    seen: set[str] = set()
    result: list[Skill] = []
    for skill in qs:
        if skill.name in seen:
            continue
        seen.add(skill.name)
        result.append(skill)
    return result


def skill_get(*, user: AbstractBaseUser, name: str, enabled_only: bool = False) -> Skill:
    """The skill called `name` that the user can read (own first, then team), or 404."""
    if not isinstance(name, str) or not name:
        raise no_such_skill(str(name))
    for skill in skills_visible(user=user, enabled_only=enabled_only).filter(name=name):
        return skill
    raise no_such_skill(name)


def skill_get_own(*, user: AbstractBaseUser, name: str) -> Skill:
    """The user's own skill for a change; a team skill of that name is refused as read-only."""
    skill = Skill.objects.filter(owner=user, name=name).first()
    if skill is not None:
        return skill
    if Skill.objects.filter(is_team=True, name=name).exists():
        raise read_only(name)
    raise no_such_skill(name)


def read_only(name: str) -> ServiceError:
    return ServiceError(
        "read_only",
        f"Skill {name!r} is a team skill and is read-only for users and the agent. "
        "Create your own skill under another name, or ask an administrator to change it.",
        status=403,
    )


def skill_files(*, skill: Skill) -> QuerySet[SkillFile]:
    return skill.files.defer("data").order_by("path")


def skill_file_get(*, skill: Skill, path: str) -> SkillFile:
    found = skill.files.filter(path=path).first()
    if found is None:
        raise ServiceError("not_found", f"Skill {skill.name!r} has no file {path!r}.", status=404)
    return found


def skill_revisions(*, skill: Skill) -> QuerySet[SkillRevision]:
    return skill.revisions.select_related("source_session").order_by("-number")


def skill_revision_get(*, skill: Skill, number: int) -> SkillRevision:
    found = skill.revisions.filter(number=number).first()
    if found is None:
        raise ServiceError(
            "not_found", f"Skill {skill.name!r} has no revision {number}.", status=404
        )
    return found


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add" | "del" | "hunk" | "same" | "meta"
    text: str


def revision_diff(*, revision: SkillRevision) -> list[DiffLine]:
    """Unified diff of a revision against the previous version of the same document."""
    previous = (
        SkillRevision.objects.filter(
            skill_id=revision.skill_id, file_path=revision.file_path, number__lt=revision.number
        )
        .order_by("-number")
        .first()
    )
    before = (previous.content or "") if previous is not None else ""
    after = revision.content or ""
    document = revision.document
    lines = difflib.unified_diff(
        before.splitlines(),
        after.splitlines(),
        fromfile=f"{document} (r{previous.number})" if previous else f"{document} (none)",
        tofile=f"{document} (r{revision.number})",
        lineterm="",
        n=3,
    )
    result = []
    for line in lines:
        if line.startswith(("---", "+++")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        result.append(DiffLine(kind, line))
    return result


def skills_inspector_context(*, user: Any, session: Any, turns: list[Any]) -> dict[str, Any]:
    """The conversation inspector's skills part (registered from the app's ready())."""
    return {"skills": skills_included(session=session)}


def skills_included(*, session: Any) -> list[dict[str, Any]]:
    """The skills the session's frozen system prompt lists (for the prompt inspector):
    [{"id", "name", "category", "team"}], in prompt order; [] when none were listed."""
    state = SessionSkillState.objects.filter(session_id=session.pk).only("included_skills").first()
    return list(state.included_skills) if state is not None else []
