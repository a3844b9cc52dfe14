"""Writes to a user's skills. The pages, the REST API, the admin, the agent's tools and the
background reviewer all come through here.

Every write happens in one transaction holding the skill's row lock (concurrent patches
must not lose each other's changes), validates the result as a whole SKILL.md, runs the
shared threat scanner over the new text, and records a revision with the full text. A
refused write raises ServiceError before anything is saved, so the previous revision stays
exactly as it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from core.exceptions import ServiceError
from memory.scanner import scan

from .. import skillmd
from ..models import Skill, SkillFile, SkillRevision
from ..selectors import no_such_skill, read_only

Author = SkillRevision.Author
Action = SkillRevision.Action
PREVIEW_CHARS = 500


@dataclass(frozen=True)
class PatchOutcome:
    skill: Skill
    replacements: int
    document: str


# --- helpers ----------------------------------------------------------------------------------


def _scan_or_refuse(text: str, *, document: str) -> None:
    findings = scan(text, scope="strict")
    if findings:
        raise ServiceError(
            "blocked",
            f"{findings[0].message} ({document}) Nothing was changed; the previous version stays.",
            findings=[f.id for f in findings],
        )


def _lock_own(*, user: AbstractBaseUser, name: str) -> Skill:
    """The user's skill, row-locked. Call inside a transaction."""
    if not isinstance(name, str) or not name:
        raise ServiceError("invalid_name", "The skill name is required.")
    skill = Skill.objects.select_for_update().filter(owner=user, name=name).first()
    if skill is not None:
        return skill
    if Skill.objects.filter(is_team=True, name=name).exists():
        raise read_only(name)
    raise no_such_skill(name)


def _guard_reviewer(skill: Skill, author: str) -> None:
    if author == Author.REVIEW and skill.pinned:
        raise ServiceError(
            "protected",
            f"Skill {skill.name!r} is pinned by the user; the background review leaves it alone.",
            status=403,
        )


def _apply_parsed(skill: Skill, parsed: skillmd.ParsedSkill, content: str) -> None:
    skill.description = parsed.description
    skill.body = parsed.body
    skill.frontmatter = parsed.frontmatter
    skill.tags = parsed.tags
    skill.content = content
    skill.updated_at = timezone.now()


def _revision(
    skill: Skill,
    *,
    action: str,
    author: str,
    actor: AbstractBaseUser | None,
    session_id: str | None,
    content: str | None,
    file_path: str = "",
    summary: str = "",
) -> SkillRevision:
    last = skill.revisions.aggregate(n=Max("number"))["n"] or 0
    return SkillRevision.objects.create(
        skill=skill,
        number=last + 1,
        action=action,
        author=author,
        actor=actor,
        source_session_id=_existing_session(session_id, actor),
        file_path=file_path,
        content=content,
        summary=summary[:300],
    )


def _existing_session(session_id: str | None, actor: AbstractBaseUser | None) -> str | None:
    # A revision points at its source conversation only when that conversation is the
    # actor's own — a tool never attributes a change to someone else's session.
    if not session_id or actor is None:
        return None
    from sessions_app.models import Session

    return session_id if Session.objects.filter(pk=session_id, owner=actor).exists() else None


def _parse_named(content: Any, name: str | None) -> skillmd.ParsedSkill:
    parsed = skillmd.parse(content)
    if name is not None and parsed.name != name:
        raise ServiceError(
            "invalid_skill",
            f"The frontmatter name {parsed.name!r} does not match the skill name {name!r}; "
            "they must be the same.",
        )
    return parsed


def _preview(text: str) -> str:
    return text[:PREVIEW_CHARS]


# --- create / edit / patch / delete -----------------------------------------------------------


def skill_create(
    *,
    user: AbstractBaseUser,
    content: str,
    name: str | None = None,
    category: str = "",
    author: str = Author.USER,
    session_id: str | None = None,
    action: str = Action.CREATE,
) -> Skill:
    """Create the user's skill from a whole SKILL.md. `name`, when given, must equal the
    frontmatter name. A team skill's name cannot be reused."""
    if name is not None:
        skillmd.check_name(name)
    category = skillmd.check_category(category)
    parsed = _parse_named(content, name)
    _scan_or_refuse(content, document="SKILL.md")
    try:
        with transaction.atomic():
            if Skill.objects.filter(is_team=True, name=parsed.name).exists():
                raise ServiceError(
                    "exists",
                    f"{parsed.name!r} is the name of a team skill; choose another name.",
                )
            existing = Skill.objects.filter(owner=user, name=parsed.name).first()
            if existing is not None:
                hint = "" if existing.enabled else " (it is disabled; enable it on the Skills page)"
                raise ServiceError(
                    "exists",
                    f"Skill {parsed.name!r} already exists{hint}. Use edit or patch to change it.",
                )
            skill = Skill(
                owner=user, name=parsed.name, category=category, created_at=timezone.now()
            )
            _apply_parsed(skill, parsed, content)
            skill.save()
            _revision(
                skill,
                action=action,
                author=author,
                actor=user,
                session_id=session_id,
                content=content,
                summary=f"created {parsed.name}",
            )
    except IntegrityError:
        # Two creates raced; the unique constraint kept one.
        raise ServiceError("exists", f"Skill {parsed.name!r} already exists.") from None
    return skill


def skill_edit(
    *,
    user: AbstractBaseUser,
    name: str,
    content: str,
    category: str | None = None,
    author: str = Author.USER,
    session_id: str | None = None,
    action: str = Action.EDIT,
    summary: str = "",
) -> Skill:
    """Replace the whole SKILL.md (the name cannot change). `category=None` keeps it."""
    if category is not None:
        category = skillmd.check_category(category)
    parsed = _parse_named(content, name)
    _scan_or_refuse(content, document="SKILL.md")
    with transaction.atomic():
        skill = _lock_own(user=user, name=name)
        _guard_reviewer(skill, author)
        changed_category = category is not None and category != skill.category
        previous = skill.content
        if content == previous and not changed_category:
            return skill
        if changed_category:
            skill.category = category or ""
        _apply_parsed(skill, parsed, content)
        skill.save()
        if content != previous:
            _revision(
                skill,
                action=action,
                author=author,
                actor=user,
                session_id=session_id,
                content=content,
                summary=summary or "rewrote SKILL.md",
            )
    return skill


def _find_spans(haystack: str, needle: str) -> list[tuple[int, int]]:
    """Exact occurrences; failing that, occurrences with any run of whitespace treated as
    equal (models often re-indent or re-wrap the text they quote)."""
    exact = [m.span() for m in re.finditer(re.escape(needle), haystack)]
    if exact:
        return exact
    tokens = needle.split()
    if not tokens:
        return []
    pattern = r"\s+".join(re.escape(token) for token in tokens)
    return [m.span() for m in re.finditer(pattern, haystack)]


def skill_patch(
    *,
    user: AbstractBaseUser,
    name: str,
    old_string: str,
    new_string: str,
    replace_all: bool = False,
    file_path: str | None = None,
    author: str = Author.USER,
    session_id: str | None = None,
) -> PatchOutcome:
    """Replace `old_string` by `new_string` in SKILL.md or a text file of the skill.

    The match must be unique unless `replace_all`; a patched SKILL.md must still validate.
    Errors carry a `file_preview` of the document so the caller can retry precisely.
    """
    if not isinstance(old_string, str) or not old_string:
        raise ServiceError("invalid_patch", "old_string is required and cannot be empty.")
    if not isinstance(new_string, str):
        raise ServiceError("invalid_patch", "new_string must be a string ('' deletes the text).")
    document = "SKILL.md"
    if file_path and file_path != "SKILL.md":
        document = skillmd.check_file_path(file_path)
    with transaction.atomic():
        skill = _lock_own(user=user, name=name)
        _guard_reviewer(skill, author)
        if document == "SKILL.md":
            before = skill.content
        else:
            found = skill.files.select_for_update().filter(path=document).first()
            if found is None:
                raise ServiceError(
                    "not_found", f"Skill {name!r} has no file {document!r}.", status=404
                )
            text = found.text()
            if text is None:
                raise ServiceError("invalid_patch", f"{document} is not a text file.")
            before = text
        spans = _find_spans(before, old_string)
        if not spans:
            raise ServiceError(
                "no_match",
                f"old_string was not found in {document}. Copy it exactly from skill_view.",
                file_preview=_preview(before),
            )
        if len(spans) > 1 and not replace_all:
            raise ServiceError(
                "ambiguous",
                f"old_string matches {len(spans)} places in {document}; include more "
                "surrounding text to make it unique, or set replace_all.",
                matches=len(spans),
                file_preview=_preview(before),
            )
        after = before
        for start, end in reversed(spans):
            after = after[:start] + new_string + after[end:]
        summary = f"patched {document}: {old_string[:60]!r} → {new_string[:60]!r}"
        if document == "SKILL.md":
            try:
                parsed = _parse_named(after, name)
            except ServiceError as exc:
                raise ServiceError(
                    exc.code,
                    f"The patched SKILL.md would be invalid: {exc.message}",
                    file_preview=_preview(before),
                ) from None
            _scan_or_refuse(after, document=document)
            _apply_parsed(skill, parsed, after)
            skill.save()
            _revision(
                skill,
                action=Action.PATCH,
                author=author,
                actor=user,
                session_id=session_id,
                content=after,
                summary=summary,
            )
        else:
            data = after.encode("utf-8")
            skillmd.check_file_size(len(data), path=document)
            _scan_or_refuse(after, document=document)
            found.data = data
            found.size = len(data)
            found.updated_at = timezone.now()
            found.save(update_fields=["data", "size", "updated_at"])
            skill.updated_at = timezone.now()
            skill.save(update_fields=["updated_at"])
            _revision(
                skill,
                action=Action.PATCH,
                author=author,
                actor=user,
                session_id=session_id,
                content=after,
                file_path=document,
                summary=summary,
            )
    return PatchOutcome(skill=skill, replacements=len(spans), document=document)


def skill_delete(
    *,
    user: AbstractBaseUser,
    name: str,
    absorbed_into: str | None = None,
    author: str = Author.USER,
) -> str:
    """Delete the user's skill (and its files and history). Pinned skills are refused;
    `absorbed_into` names the skill that now covers it. Returns a message for the caller."""
    with transaction.atomic():
        skill = _lock_own(user=user, name=name)
        _guard_reviewer(skill, author)
        if skill.pinned:
            raise ServiceError(
                "protected", f"Skill {name!r} is pinned; unpin it before deleting.", status=403
            )
        if absorbed_into:
            if absorbed_into == name:
                raise ServiceError("invalid", "absorbed_into must name a different skill.")
            from ..selectors import skills_visible

            if not skills_visible(user=user).filter(name=absorbed_into).exists():
                raise ServiceError(
                    "not_found",
                    f"absorbed_into names no existing skill ({absorbed_into!r}).",
                    status=404,
                )
        skill.delete()
    if absorbed_into:
        return f"Skill {name!r} deleted (absorbed into {absorbed_into!r})."
    return f"Skill {name!r} deleted."


# --- files ------------------------------------------------------------------------------------


def skill_file_write(
    *,
    user: AbstractBaseUser,
    name: str,
    file_path: str,
    data: str | bytes,
    author: str = Author.USER,
    session_id: str | None = None,
    action: str = Action.WRITE_FILE,
) -> SkillFile:
    """Create or replace a supporting file (text or binary, ≤1 MiB). Text is scanned."""
    path = skillmd.check_file_path(file_path)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    skillmd.check_file_size(len(raw), path=path)
    try:
        text: str | None = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        _scan_or_refuse(text, document=path)
    with transaction.atomic():
        skill = _lock_own(user=user, name=name)
        _guard_reviewer(skill, author)
        existing = skill.files.filter(path=path).first()
        if existing is not None and bytes(existing.data) == raw:
            return existing
        now = timezone.now()
        if existing is None:
            existing = SkillFile(skill=skill, path=path)
        existing.data = raw
        existing.size = len(raw)
        existing.updated_at = now
        existing.save()
        skill.updated_at = now
        skill.save(update_fields=["updated_at"])
        _revision(
            skill,
            action=action,
            author=author,
            actor=user,
            session_id=session_id,
            content=text,
            file_path=path,
            summary=f"wrote {path} ({len(raw):,} bytes)",
        )
    return existing


def skill_file_remove(
    *,
    user: AbstractBaseUser,
    name: str,
    file_path: str,
    author: str = Author.USER,
    session_id: str | None = None,
) -> None:
    path = skillmd.check_file_path(file_path)
    with transaction.atomic():
        skill = _lock_own(user=user, name=name)
        _guard_reviewer(skill, author)
        deleted, _ = skill.files.filter(path=path).delete()
        if not deleted:
            raise ServiceError("not_found", f"Skill {name!r} has no file {path!r}.", status=404)
        skill.updated_at = timezone.now()
        skill.save(update_fields=["updated_at"])
        _revision(
            skill,
            action=Action.REMOVE_FILE,
            author=author,
            actor=user,
            session_id=session_id,
            content=None,
            file_path=path,
            summary=f"removed {path}",
        )


# --- history, flags ---------------------------------------------------------------------------


def skill_rollback(*, user: AbstractBaseUser, name: str, number: int) -> Skill:
    """Make an old revision's text current again, as a new revision (history is kept)."""
    found = SkillRevision.objects.filter(skill__owner=user, skill__name=name, number=number).first()
    if found is None:
        own = Skill.objects.filter(owner=user, name=name).exists()
        if not own and Skill.objects.filter(is_team=True, name=name).exists():
            raise read_only(name)
        raise ServiceError("not_found", f"Skill {name!r} has no revision {number}.", status=404)
    summary = f"rolled back {found.document} to r{number}"
    if not found.file_path:
        return skill_edit(
            user=user,
            name=name,
            content=found.content or "",
            action=Action.ROLLBACK,
            summary=summary,
        )
    if found.content is None:
        if found.action == Action.REMOVE_FILE:
            skill_file_remove(user=user, name=name, file_path=found.file_path)
            return Skill.objects.get(owner=user, name=name)
        raise ServiceError(
            "not_restorable",
            f"r{number} of {found.file_path} is a binary file; its bytes are not kept in history.",
        )
    skill_file_write(
        user=user,
        name=name,
        file_path=found.file_path,
        data=found.content,
        action=Action.ROLLBACK,
    )
    return Skill.objects.get(owner=user, name=name)


def skill_set_flags(
    *,
    user: AbstractBaseUser,
    name: str,
    enabled: bool | None = None,
    pinned: bool | None = None,
) -> Skill:
    with transaction.atomic():
        skill = _lock_own(user=user, name=name)
        fields = []
        if enabled is not None and skill.enabled != enabled:
            skill.enabled = enabled
            fields.append("enabled")
        if pinned is not None and skill.pinned != pinned:
            skill.pinned = pinned
            fields.append("pinned")
        if fields:
            skill.save(update_fields=fields)
    return skill
