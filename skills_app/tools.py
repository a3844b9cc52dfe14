"""The agent's skill tools: `skills_list`, `skill_view`, `skill_manage` (toolset "skills").

They call the same services as the Skills page and act as `ctx.user` only. Changes made in
the live chat are authored "agent", those of the background review "review".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.urls import reverse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from accounts.language import speaking_to
from core.exceptions import ServiceError
from sessions_app.agent.tools import Tool, ToolContext, ToolResult

from . import selectors, skillmd
from .models import SkillRevision
from .services import skills as svc

ACTIONS = ("create", "edit", "patch", "delete", "write_file", "remove_file")
#: The reviewer must have read a skill (skill_view) in the same run before changing it,
#: so it patches what is there instead of overwriting it blind.
_VIEWED_ATTR = "skills_viewed"


def _author(ctx: ToolContext) -> str:
    return SkillRevision.Author.REVIEW if ctx.origin == "review" else SkillRevision.Author.AGENT


def _viewed(ctx: ToolContext) -> set[str]:
    viewed = getattr(ctx.turn, _VIEWED_ATTR, None)
    if viewed is None:
        viewed = set()
        setattr(ctx.turn, _VIEWED_ATTR, viewed)
    return viewed


def skill_url(name: str) -> str:
    return reverse("skill_detail", args=[name])


def _str_arg(args: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        if required:
            raise ServiceError("invalid_arguments", f"'{key}' is required.")
        return None
    if not isinstance(value, str):
        raise ServiceError("invalid_arguments", f"'{key}' must be a string.")
    return value


# --- skills_list ------------------------------------------------------------------------------


def skills_list(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    category = _str_arg(args, "category")
    skills = selectors.skills_for_agent(user=ctx.user, category=category)
    items = [
        {
            "name": s.name,
            "description": s.description,
            "category": s.category,
            "team": s.is_team,
        }
        for s in skills
    ]
    where = f" in {category!r}" if category else ""
    return ToolResult(
        ok=True,
        payload={"success": True, "skills": items, "count": len(items)},
        summary=f"{len(items)} skill{'s' if len(items) != 1 else ''}{where}",
    )


def skills_list_chip(payload: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    """The chat's chip for skills_list, in the reader's language: "3 skills in 'devops'"."""
    if payload.get("success") is not True:
        return ""
    count, category = int(payload.get("count") or 0), args.get("category")
    if category:
        return ngettext(
            "%(count)d skill in %(category)s", "%(count)d skills in %(category)s", count
        ) % {"count": count, "category": category}
    return ngettext("%(count)d skill", "%(count)d skills", count) % {"count": count}


# --- skill_view -------------------------------------------------------------------------------


def skill_view(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    name = _str_arg(args, "name", required=True)
    file_path = _str_arg(args, "file_path") or _str_arg(args, "file")
    skill = selectors.skill_get(user=ctx.user, name=name or "", enabled_only=True)
    _viewed(ctx).add(skill.name)
    files = [f.path for f in selectors.skill_files(skill=skill)]
    if file_path and file_path != "SKILL.md":
        found = selectors.skill_file_get(skill=skill, path=file_path)
        text = found.text()
        if text is None:
            return ToolResult(
                ok=True,
                payload={
                    "success": True,
                    "name": skill.name,
                    "file_path": found.path,
                    "binary": True,
                    "size": found.size,
                    "content": f"(binary file, {found.size:,} bytes)",
                },
                summary=f"{skill.name}/{found.path} (binary)",
            )
        return ToolResult(
            ok=True,
            payload={
                "success": True,
                "name": skill.name,
                "file_path": found.path,
                "content": text,
            },
            summary=f"read {skill.name}/{found.path}",
        )
    return ToolResult(
        ok=True,
        payload={
            "success": True,
            "name": skill.name,
            "category": skill.category,
            "team": skill.is_team,
            "read_only": skill.is_team,
            "content": skill.content,
            "files": files,
        },
        summary=f"read {skill.name}",
    )


def skill_view_chip(payload: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    """The chat's chip for skill_view, in the reader's language: "read deploy"."""
    if payload.get("success") is not True:
        return ""
    name, path = payload.get("name"), payload.get("file_path")
    if not path:
        return gettext("read %(name)s") % {"name": name}
    if payload.get("binary"):
        return gettext("%(name)s/%(path)s (binary)") % {"name": name, "path": path}
    return gettext("read %(name)s/%(path)s") % {"name": name, "path": path}


# --- skill_manage -----------------------------------------------------------------------------


def _require_viewed(ctx: ToolContext, name: str) -> None:
    if ctx.origin == "review" and name not in _viewed(ctx):
        raise ServiceError(
            "read_first",
            f"Read the skill first with skill_view(name={name!r}), then change it.",
        )


#: What the person reads in the chat (in their language; `message`, for the model, stays English).
CREATED_NOTICE = _("Skill created: %(name)s — %(url)s")
UPDATED_NOTICE = _("Skill updated: %(name)s — %(url)s")
DELETED_NOTICE = _("Skill deleted: %(name)s")
ABSORBED_NOTICE = _("Skill deleted: %(name)s (absorbed into %(into)s)")


def _said_to(ctx: ToolContext, text: Any, **values: str) -> str:
    """`text` (a lazy translation) as the person the tool acts for reads it."""
    with speaking_to(ctx.user.pk):
        return str(text) % values


def _changed(
    ctx: ToolContext, name: str, message: str, *, created: bool = False, **extra: Any
) -> ToolResult:
    url = skill_url(name)
    kind = "skill_created" if created else "skill_updated"
    label = CREATED_NOTICE if created else UPDATED_NOTICE
    return ToolResult(
        ok=True,
        payload={"success": True, "message": message, "name": name, "url": url, **extra},
        summary=message,
        notice=(kind, _said_to(ctx, label, name=name, url=url)),
    )


def skill_manage_chip(payload: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    """The chat's chip for skill_manage, in the reader's language, by the action it took:
    "created skill deploy"."""
    if payload.get("success") is not True:
        return ""
    values = {
        "name": payload.get("name") or args.get("name"),
        "path": payload.get("file_path") or args.get("file_path"),
        "into": args.get("absorbed_into"),
    }
    action = args.get("action")
    if action == "patch":
        count = int(payload.get("replacements") or 1)
        return ngettext(
            "patched skill %(name)s", "patched skill %(name)s (%(count)d replacements)", count
        ) % {**values, "count": count}
    if action == "delete" and values["into"]:
        return gettext("deleted skill %(name)s (absorbed into %(into)s)") % values
    said = {
        "create": _("created skill %(name)s"),
        "edit": _("updated skill %(name)s"),
        "delete": _("deleted skill %(name)s"),
        "write_file": _("wrote %(path)s in skill %(name)s"),
        "remove_file": _("removed %(path)s from skill %(name)s"),
    }.get(str(action))
    return str(said) % values if said else ""


def skill_manage(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    action = _str_arg(args, "action", required=True)
    if action not in ACTIONS:
        raise ServiceError(
            "invalid_arguments", f"Unknown action {action!r}; use one of {', '.join(ACTIONS)}."
        )
    name = _str_arg(args, "name", required=True) or ""
    author = _author(ctx)
    common = {"user": ctx.user, "author": author}
    if action == "create":
        content = _str_arg(args, "content", required=True) or ""
        skill = svc.skill_create(
            name=name,
            content=content,
            category=_str_arg(args, "category") or "",
            session_id=ctx.session_id,
            **common,
        )
        _viewed(ctx).add(skill.name)
        return _changed(
            ctx,
            skill.name,
            f"Skill {skill.name!r} created.",
            created=True,
            hint="Add references/, templates/, scripts/ or assets/ files with write_file.",
        )
    _require_viewed(ctx, name)
    if action == "edit":
        content = _str_arg(args, "content", required=True) or ""
        category = _str_arg(args, "category")
        svc.skill_edit(
            name=name, content=content, category=category, session_id=ctx.session_id, **common
        )
        return _changed(ctx, name, f"Skill {name!r} updated.")
    if action == "patch":
        old = args.get("old_string")
        new = args.get("new_string", "")
        replace_all = bool(args.get("replace_all", False))
        outcome = svc.skill_patch(
            name=name,
            old_string=old,
            new_string=new,
            replace_all=replace_all,
            file_path=_str_arg(args, "file_path"),
            session_id=ctx.session_id,
            **common,
        )
        times = "" if outcome.replacements == 1 else f" ({outcome.replacements} replacements)"
        return _changed(
            ctx,
            name,
            f"Skill {name!r} patched{times}.",
            document=outcome.document,
            replacements=outcome.replacements,
        )
    if action == "delete":
        absorbed_into = _str_arg(args, "absorbed_into")
        message = svc.skill_delete(name=name, absorbed_into=absorbed_into, **common)
        if absorbed_into:
            notice = _said_to(ctx, ABSORBED_NOTICE, name=name, into=absorbed_into)
        else:
            notice = _said_to(ctx, DELETED_NOTICE, name=name)
        return ToolResult(
            ok=True,
            payload={"success": True, "message": message},
            summary=message,
            notice=("skill_updated", notice),
        )
    file_path = _str_arg(args, "file_path", required=True) or ""
    if action == "write_file":
        content = args.get("file_content", args.get("content"))
        if not isinstance(content, str):
            raise ServiceError("invalid_arguments", "'file_content' (text) is required.")
        if file_path == "SKILL.md":
            svc.skill_edit(name=name, content=content, session_id=ctx.session_id, **common)
        else:
            svc.skill_file_write(
                name=name,
                file_path=file_path,
                data=content,
                session_id=ctx.session_id,
                **common,
            )
        return _changed(ctx, name, f"Wrote {file_path} in skill {name!r}.", file_path=file_path)
    svc.skill_file_remove(name=name, file_path=file_path, session_id=ctx.session_id, **common)
    return _changed(ctx, name, f"Removed {file_path} from skill {name!r}.", file_path=file_path)


# --- registration -----------------------------------------------------------------------------

_NAME_HELP = (
    f"Skill name: lowercase letters, digits, '.', '_', '-'; at most {skillmd.NAME_MAX} chars."
)

SKILLS_LIST = Tool(
    name="skills_list",
    toolset="skills",
    description=(
        "List the skills (procedures learned earlier) you can use: name, description and "
        "category, sorted by category. Team skills are shared and read-only."
    ),
    parameters={
        "type": "object",
        "properties": {
            "category": {"type": "string", "description": "Only this category."},
        },
        "additionalProperties": False,
    },
    handler=skills_list,
    chip=skills_list_chip,
)

SKILL_VIEW = Tool(
    name="skill_view",
    toolset="skills",
    description=(
        "Load a skill's full SKILL.md and the list of its files, or one file with file_path "
        "(e.g. 'references/api.md'). Load a skill before following or changing it."
    ),
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": _NAME_HELP},
            "file_path": {
                "type": "string",
                "description": "A file of the skill under references/, templates/, scripts/ "
                "or assets/.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    handler=skill_view,
    chip=skill_view_chip,
)

SKILL_MANAGE = Tool(
    name="skill_manage",
    toolset="skills",
    description=(
        "Create or change the user's skills. A SKILL.md starts with YAML frontmatter "
        "('---', name: <name>, description: <when to use it, ≤1024 chars>, '---') followed "
        "by Markdown instructions. Actions: create(name, content, category?); "
        "edit(name, content) rewrites SKILL.md; patch(name, old_string, new_string, "
        "replace_all?, file_path?) replaces a unique string (prefer this for small changes); "
        "delete(name, absorbed_into?); write_file(name, file_path, file_content); "
        "remove_file(name, file_path). Files live under references/, templates/, scripts/, "
        "assets/. Team skills are read-only. Write class-level, reusable procedures, not "
        "one-off task logs."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS)},
            "name": {"type": "string", "description": _NAME_HELP},
            "content": {"type": "string", "description": "Whole SKILL.md (create, edit)."},
            "category": {"type": "string", "description": "Optional category (create, edit)."},
            "old_string": {"type": "string", "description": "Text to replace (patch)."},
            "new_string": {"type": "string", "description": "Replacement text (patch)."},
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence instead of requiring a unique match.",
            },
            "file_path": {
                "type": "string",
                "description": "File under references/, templates/, scripts/ or assets/ "
                "(write_file, remove_file; patch defaults to SKILL.md).",
            },
            "file_content": {"type": "string", "description": "File text (write_file)."},
            "absorbed_into": {
                "type": "string",
                "description": "The skill that now covers a deleted one (delete).",
            },
        },
        "required": ["action", "name"],
        "additionalProperties": False,
    },
    handler=skill_manage,
    chip=skill_manage_chip,
)


TOOLS = (SKILLS_LIST, SKILL_VIEW, SKILL_MANAGE)
