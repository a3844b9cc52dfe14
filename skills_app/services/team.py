"""Team skills: shared with everyone, read-only for users and the agent, published and
changed by administrators (superusers) through the same validation, scan and history as
personal skills."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from core.exceptions import ServiceError

from .. import skillmd
from ..models import Skill, SkillFile
from .skills import Action, Author, _apply_parsed, _parse_named, _revision, _scan_or_refuse


def _require_superuser(actor: AbstractBaseUser) -> None:
    if not getattr(actor, "is_superuser", False):
        raise ServiceError(
            "forbidden", "Only administrators can publish or change team skills.", status=403
        )


def team_skill_save(
    *,
    actor: AbstractBaseUser,
    content: str,
    category: str = "",
    skill: Skill | None = None,
    enabled: bool = True,
    pinned: bool = False,
) -> Skill:
    """Create or change a team skill (administrators only), scanned and versioned like any."""
    _require_superuser(actor)
    category = skillmd.check_category(category)
    parsed = _parse_named(content, skill.name if skill is not None else None)
    _scan_or_refuse(content, document="SKILL.md")
    try:
        with transaction.atomic():
            if skill is None:
                target = Skill(is_team=True, owner=None, name=parsed.name)
                changed = True
                action = Action.CREATE
            else:
                target = Skill.objects.select_for_update().get(pk=skill.pk, is_team=True)
                changed = content != target.content
                action = Action.EDIT
            target.category = category
            target.enabled = enabled
            target.pinned = pinned
            _apply_parsed(target, parsed, content)
            target.save()
            if changed:
                _revision(
                    target,
                    action=action,
                    author=Author.USER,
                    actor=actor,
                    session_id=None,
                    content=content,
                    summary="team skill " + ("published" if skill is None else "edited"),
                )
    except IntegrityError:
        raise ServiceError(
            "exists", f"A team skill named {parsed.name!r} already exists."
        ) from None
    return target


def team_skill_publish(*, actor: AbstractBaseUser, skill: Skill) -> Skill:
    """Copy a personal skill (with its files) into the team library."""
    _require_superuser(actor)
    if skill.is_team:
        raise ServiceError("invalid", f"{skill.name!r} is already a team skill.")
    with transaction.atomic():
        team = team_skill_save(actor=actor, content=skill.content, category=skill.category)
        for item in skill.files.all():
            SkillFile.objects.create(
                skill=team, path=item.path, data=bytes(item.data), size=item.size
            )
    return team
