"""The `memory` tool: the agent's way to curate its L1 memory (Hermes' memory tool).

Registered (``TOOLS``) from MemoryConfig.ready(). The handler acts as `ctx.user` only and calls the
same services as the Memory page and the API.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from accounts.language import speaking_to
from core.exceptions import ServiceError
from sessions_app.agent.tools import Tool, ToolContext, ToolResult, error_result

from . import page_text
from .models import Target
from .selectors import memory_settings
from .services import (
    Provenance,
    check_target,
    memory_add,
    memory_apply_batch,
    memory_remove,
    memory_replace,
    parse_operations,
    with_content_alias,
)

#: Failed memory calls allowed per turn; a failing call after them gets the terminal
#: "stop retrying" result (#42405). A valid call is still applied and resets the count.
FAILURE_CAP = 3

DESCRIPTION = """\
Save durable facts to your persistent memory. It is shown to you at the start of every \
future session; this session's prompt does not change, so rely on this tool's result \
for the live usage.

Two targets:
- "user": who the user is — name, role, preferences, communication style, standing \
constraints.
- "memory": your own notes — facts about their environment and projects, conventions, \
tool quirks, lessons learned.

What belongs here: facts that will still be true next week. Save proactively when you \
learn one, in this order: user preferences and corrections, then environment facts, then \
conventions. Write declarative facts ("User prefers concise answers"), not commands \
("Always answer concisely").
What does not: task progress, temporary state, anything only this conversation needs \
(past conversations are searchable). Step-by-step procedures belong in skills, not here.

Memory has a hard size limit (shown in its header). When it is full, consolidate — merge, \
shorten or remove stale entries — instead of skipping the fact. Make several changes in \
one call with `operations` (all-or-nothing). replace and remove find the entry by \
`old_text`, a short substring unique to it; replace swaps the whole entry for `content` \
(`new_text` is accepted as another name for it)."""

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["add", "replace", "remove"],
            "description": "What to do (omit when you give `operations`).",
        },
        "target": {
            "type": "string",
            "enum": ["memory", "user"],
            "description": "'user' for facts about the user, 'memory' for your own notes.",
        },
        "content": {
            "type": "string",
            "description": "The entry text (add), or the new text of the whole entry (replace).",
        },
        "new_text": {
            "type": "string",
            "description": "Another name for `content` (used when `content` is not given).",
        },
        "old_text": {
            "type": "string",
            "description": "For replace/remove: a short substring unique to the entry.",
        },
        "operations": {
            "type": "array",
            "description": "Several changes to one target in one all-or-nothing call.",
            "items": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["add", "replace", "remove"]},
                    "content": {"type": "string"},
                    "new_text": {"type": "string"},
                    "old_text": {"type": "string"},
                },
                "required": ["action"],
            },
        },
    },
    "required": ["target"],
}

#: What the person reads in the chat when the agent changed their memory (in their language;
#: the tool result for the model stays English).
NOTICES = {Target.MEMORY: _("Memory updated"), Target.USER: _("User profile updated")}
WAITING_NOTICE = _("Memory change waiting for your approval")


def _stop_result(failures: int) -> ToolResult:
    message = (
        f"Memory consolidation failed {failures} times this turn. Stop retrying memory calls "
        "in this turn: continue with the user's request, and tell them briefly what could "
        "not be saved (they can edit memory on the Memory page)."
    )
    return ToolResult(
        ok=False,
        payload={"success": False, "done": True, "error": message},
        summary="stopped after repeated failures",
    )


def _run(ctx: ToolContext, args: dict[str, Any]):
    enabled, _approval = memory_settings(user=ctx.user)
    if not enabled:
        raise ServiceError(
            "memory_off",
            "Memory is not available: the user has turned memory off. Do not retry.",
        )
    target = check_target(args.get("target"))
    provenance = Provenance(
        source=ctx.origin,
        session_id=ctx.session_id,
        message_id=ctx.message_id,
        actor=ctx.user,
        client=ctx.client,
    )
    if args.get("operations") is not None:
        ops = parse_operations(args["operations"])
        return memory_apply_batch(
            user=ctx.user, target=target, operations=ops, provenance=provenance
        )
    action = args.get("action")
    content = args.get("content")
    old_text = args.get("old_text")
    if action == "add":
        return memory_add(user=ctx.user, target=target, content=content, provenance=provenance)
    if action == "replace":
        return memory_replace(
            user=ctx.user,
            target=target,
            old_text=old_text,
            content=content,
            provenance=provenance,
        )
    if action == "remove":
        return memory_remove(user=ctx.user, target=target, old_text=old_text, provenance=provenance)
    if action is None:
        raise ServiceError(
            "invalid", "Give an action (add, replace or remove) or a list of operations."
        )
    shown = action if isinstance(action, str) else type(action).__name__
    raise ServiceError("unknown_action", f"Unknown action '{shown}'. Use: add, replace, remove")


def _said_to(ctx: ToolContext, text: object) -> str:
    """`text` (a lazy translation) as the person the tool acts for reads it."""
    with speaking_to(ctx.user.pk):
        return str(text)


def _with_aliases(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments with `new_text` folded into `content`, in batch operations too, so the
    services and the provider mirror see one name."""
    args = with_content_alias(args)
    operations = args.get("operations")
    if isinstance(operations, list):
        args = {
            **args,
            "operations": [
                with_content_alias(op) if isinstance(op, dict) else op for op in operations
            ],
        }
    return args


# The batch's result as the services write it (memory.services.store).
_APPLIED = re.compile(r"Applied (\d+) operation\(s\)\.(?: Skipped (\d+) that changed nothing\.)?")


def memory_chip(payload: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    """The chat's chip for a memory call, in the reader's language, from its (English)
    result: "About you: Entry added. (12% — 264/2,200)"."""
    target = str(payload.get("target") or args.get("target") or "")
    if payload.get("success") is False:
        if payload.get("done"):
            return gettext("stopped after repeated failures")
        details = {k: v for k, v in payload.items() if k not in ("success", "error", "code")}
        refusal = ServiceError(str(payload.get("code")), str(payload.get("error")), **details)
        return page_text.reworded(refusal, target) if target in Target.values else ""
    if target not in Target.values:
        return ""
    message = str(payload.get("message") or "")
    if payload.get("staged"):
        waiting = len(payload.get("pending_ids") or ())
        result = (
            ngettext(
                "%(count)d change waits for your approval.",
                "%(count)d changes wait for your approval.",
                waiting,
            )
            % {"count": waiting}
            if waiting
            else gettext("Already waiting for your approval.")
        )
    elif applied := _APPLIED.fullmatch(message):
        count, skipped = int(applied[1]), int(applied[2] or 0)
        result = ngettext("Applied %(count)d change.", "Applied %(count)d changes.", count) % {
            "count": count
        }
        if skipped:
            result = gettext("%(applied)s %(skipped)s") % {
                "applied": result,
                "skipped": ngettext(
                    "Skipped %(count)d that changed nothing.",
                    "Skipped %(count)d that changed nothing.",
                    skipped,
                )
                % {"count": skipped},
            }
    else:
        result = message
    usage = str(payload.get("usage") or "").removesuffix(" chars")
    return gettext("%(result)s (%(usage)s)") % {
        "result": page_text.result_message(target, result),
        "usage": usage,
    }


def handle_memory(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    # Every call is tried: only failures count, and only failing calls past the cap get the
    # terminal result (Hermes applies a valid call after failures and resets the count).
    args = _with_aliases(args)
    try:
        result = _run(ctx, args)
    except ServiceError as exc:
        failures = ctx.turn.failures.get("memory", 0) + 1
        ctx.turn.failures["memory"] = failures
        if failures > FAILURE_CAP:
            return _stop_result(failures)
        return error_result(exc.code, exc.message, **exc.details)
    ctx.turn.failures["memory"] = 0
    if result.changed and not result.staged:
        # Committed writes are mirrored to the external memory provider; never fails this.
        from .providers.manager import mirror_memory_write

        mirror_memory_write(
            user=ctx.user,
            session_id=ctx.session_id,
            origin=ctx.origin,
            message_id=ctx.message_id,
            target=result.target,
            operations=args["operations"] if args.get("operations") is not None else [args],
            replaced=result.replaced,
        )
    notice = None
    if result.staged and result.entries:
        notice = ("memory_saved", _said_to(ctx, WAITING_NOTICE))
    elif result.changed:
        notice = ("memory_saved", _said_to(ctx, NOTICES[Target(result.target)]))
    return ToolResult(
        ok=True,
        payload=result.tool_payload(),
        summary=f"{result.message} ({result.usage.text()})",
        notice=notice,
    )


TOOLS = (
    Tool(
        name="memory",
        toolset="memory",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        handler=handle_memory,
        chip=memory_chip,
    ),
)
