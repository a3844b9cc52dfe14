"""The agent's `session_search` tool: recall earlier conversations with this user.

Modes, chosen from the arguments in this order (reference §6):
1. scroll — `session_id` + `around_message_id`: the messages around one message;
2. read — `session_id`: a conversation (all of it, or its start and end when long);
3. browse — no query: recent conversations with previews, no model cost;
4. discover — `query`: the best conversations (default 3, at most 5), each with a focused
   summary (or, when the summariser fails or is slow, the matching snippets), title,
   date and link.

The current conversation's lineage is never a search result. The handler acts as
`ctx.user` only; a session id from another user reads as "no such conversation".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy, ngettext

from core.exceptions import NotFound, ServiceError, lazy_format

from ..agent.tools import Tool, ToolContext, ToolResult
from ..models import Message, Session
from ..services import access_session
from .service import (
    check_roles,
    recent_conversations,
    search_conversations,
    search_summaries_wait,
)

logger = logging.getLogger(__name__)

NAME = "session_search"
READ_ALL_UP_TO = 30
READ_HEAD, READ_TAIL = 20, 10
MESSAGE_CHARS = 4000
DEFAULT_WINDOW, MAX_WINDOW = 5, 20

DESCRIPTION = """\
Search and read your earlier conversations with this user (not the current one). \
Use it when the user refers to something from before ("what did we decide about…", \
"like last time") or when past context would help.

- query: keyword search over messages and titles. Returns the best conversations \
(default 3, at most 5) with a summary focused on the query, the title, date and a link.
  Write a WIDE query: the words the user might have used back then, joined with OR, \
with variants and synonyms — not the user's question as a sentence. Space-separated \
words must ALL match; OR means any. Example: for "what did we settle about the \
Lisbon trip?" search `Lisbon OR trip OR travel OR flight OR hotel OR itinerary`. \
Word forms match each other (camping ~ camped, trams ~ tram); names, numbers and \
identifiers match exactly. Also: NOT word, "exact phrase", prefix*. Chinese, \
Japanese and Korean: use terms of 3 or more characters when you can. If nothing \
comes back, try other words once before saying you do not remember.
- no arguments: the most recent conversations with previews (cheap).
- session_id: read that conversation. Add around_message_id (from a result) to read the \
messages around it (window, default 5).
Results come from the user's own history only."""

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "Keywords joined with OR, with variants and synonyms "
            "(e.g. `deploy OR deployment OR release OR rollout`).",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 5,
            "description": "Conversations to return for a query (default 3, max 5); for "
            "browsing, how many recent ones (default 10, max 20).",
        },
        "role": {
            "type": "string",
            "description": "Only match messages from these roles: user, assistant, tool "
            "(comma-separated). Default: all.",
        },
        "summaries": {
            "type": "boolean",
            "description": "With a query: summarise each conversation (default true); false "
            "returns the matching snippets at once, without a model call.",
        },
        "session_id": {"type": "string", "description": "A conversation to read."},
        "around_message_id": {
            "type": "integer",
            "description": "With session_id: read the messages around this message.",
        },
        "window": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_WINDOW,
            "description": "Messages before and after around_message_id (default 5).",
        },
    },
    "additionalProperties": False,
}


def _int(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = args.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ServiceError(
            "invalid_arguments",
            lazy_format(gettext_lazy("'%(name)s' must be a whole number."), name=name),
        ) from None
    return min(high, max(low, number))


def _when(value: Any) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M")


def _message_payload(message: Message) -> dict[str, Any]:
    content = message.content or ""
    item: dict[str, Any] = {
        "id": message.id,
        "role": message.role,
        "when": _when(message.timestamp),
        "content": content[:MESSAGE_CHARS],
    }
    if message.tool_name:
        item["tool_name"] = message.tool_name
    if message.role == Message.Role.ASSISTANT and message.tool_calls:
        names = [
            (c.get("function") or {}).get("name", "")
            for c in message.tool_calls
            if isinstance(c, dict)
        ]
        item["called"] = [n for n in names if n]
    if len(content) > MESSAGE_CHARS:
        item["content_truncated"] = True
        item["original_content_chars"] = len(content)
    return item


def _access_session(ctx: ToolContext, session_id: Any) -> Session:
    if not isinstance(session_id, str) or not session_id.strip():
        raise ServiceError(
            "invalid_arguments", gettext_lazy("'session_id' must be a conversation id.")
        )
    session = access_session(user=ctx.user, session_id=session_id.strip())
    if session.end_reason == Session.EndReason.DELETED:
        raise NotFound(gettext_lazy("conversation"))
    return session


def _visible(session: Session):
    # The selected path: the conversation as it stands (other branches are left out).
    return Message.objects.filter(session=session, active=True).exclude(role=Message.Role.SYSTEM)


def _session_header(session: Session) -> dict[str, Any]:
    return {
        "session_id": session.id,
        "title": session.title,
        "when": _when(session.started_at),
        "link": f"/chat/{session.id}/",
    }


def _scroll(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    session = _access_session(ctx, args.get("session_id"))
    anchor_id = _int(args, "around_message_id", 0, 0, 2**62)
    window = _int(args, "window", DEFAULT_WINDOW, 1, MAX_WINDOW)
    if not _visible(session).filter(id=anchor_id).exists():
        raise NotFound(gettext_lazy("message in that conversation"))
    before = list(_visible(session).filter(id__lt=anchor_id).order_by("-id")[:window])
    after = list(_visible(session).filter(id__gte=anchor_id).order_by("id")[: window + 1])
    messages = [*reversed(before), *after]
    payload = {
        "success": True,
        "mode": "scroll",
        **_session_header(session),
        "around_message_id": anchor_id,
        "messages": [_message_payload(m) for m in messages],
    }
    return ToolResult(True, payload, f"read {len(messages)} messages around #{anchor_id}")


def _read(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    session = _access_session(ctx, args.get("session_id"))
    total = _visible(session).count()
    if total > READ_ALL_UP_TO:
        head = list(_visible(session).order_by("id")[:READ_HEAD])
        tail = list(reversed(_visible(session).order_by("-id")[:READ_TAIL]))
        messages = [_message_payload(m) for m in head]
        messages.append({"omitted": total - READ_HEAD - READ_TAIL})
        messages += [_message_payload(m) for m in tail]
        hint = "Use around_message_id to read the middle."
    else:
        messages = [_message_payload(m) for m in _visible(session).order_by("id")]
        hint = ""
    payload = {
        "success": True,
        "mode": "read",
        **_session_header(session),
        "message_count": total,
        "messages": messages,
    }
    if hint:
        payload["hint"] = hint
    return ToolResult(True, payload, f"read conversation ({total} messages)")


def _browse(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    limit = _int(args, "limit", 10, 1, 20)
    items = recent_conversations(owner=ctx.user, limit=limit, exclude_lineage_of=ctx.session_id)
    results = [
        {
            "session_id": item.row.session_id,
            "title": item.row.title,
            "when": _when(item.row.started_at),
            "last_active": _when(item.row.last_activity_at),
            "message_count": item.row.message_count,
            "preview": item.preview,
            "link": item.link,
        }
        for item in items
    ]
    payload: dict[str, Any] = {"success": True, "mode": "recent", "results": results}
    if not results:
        payload["message"] = "No earlier conversations."
    return ToolResult(True, payload, f"listed {len(results)} recent conversations")


def _discover(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    query = args.get("query")
    if not isinstance(query, str):
        raise ServiceError("invalid_arguments", gettext_lazy("'query' must be text."))
    limit = _int(args, "limit", 3, 1, 5)
    summaries = args.get("summaries", True)
    if not isinstance(summaries, bool):
        raise ServiceError("invalid_arguments", gettext_lazy("'summaries' must be true or false."))
    roles = check_roles(args.get("role") if isinstance(args.get("role"), str) else None)
    result = search_conversations(
        owner=ctx.user, query=query, roles=roles, limit=limit, exclude_lineage_of=ctx.session_id
    )
    if result.conversations and summaries:
        try:
            search_summaries_wait(owner=ctx.user, query=query, result=result)
        except Exception:
            # The tool never fails because the summariser did: snippets stand in.
            logger.exception("search summaries failed; falling back to snippets")
    results = []
    for conv in result.conversations:
        item: dict[str, Any] = {
            "session_id": conv.session_id,
            "title": conv.title,
            "when": _when(conv.started_at),
            "last_active": _when(conv.last_activity_at),
            "link": conv.link,
            "match_message_id": conv.best.message_id,
            "matched_role": conv.best.role,
            "summary": conv.summary,
        }
        if conv.summary is None:
            item["summary_status"] = conv.summary_status
            item["snippets"] = [
                {
                    "message_id": h.message_id,
                    "role": h.role,
                    "text": h.snippet.marked() if h.snippet else "",
                }
                for h in conv.hits
            ]
        results.append(item)
    payload: dict[str, Any] = {
        "success": True,
        "mode": "search",
        "query": result.query,
        "results": results,
        "count": len(results),
    }
    if not results:
        payload["message"] = "No matching conversations found."
    summarised = sum(1 for r in results if r["summary"])
    summary = f"found {len(results)} conversation{'s' if len(results) != 1 else ''}"
    if results and summarised < len(results):
        summary += f" ({summarised} summarised)"
    return ToolResult(True, payload, summary)


def session_search_chip(payload: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    """The chat's chip for a session_search call, in the reader's language, by its mode:
    "found 2 conversations (1 summarised)"."""
    mode = payload.get("mode") if payload.get("success") is True else None
    if mode == "scroll":
        count = len(payload.get("messages") or ())
        return ngettext(
            "read %(count)d message around #%(id)s",
            "read %(count)d messages around #%(id)s",
            count,
        ) % {"count": count, "id": payload.get("around_message_id")}
    if mode == "read":
        count = int(payload.get("message_count") or 0)
        return ngettext(
            "read a conversation (%(count)d message)",
            "read a conversation (%(count)d messages)",
            count,
        ) % {"count": count}
    if mode == "recent":
        count = len(payload.get("results") or ())
        return ngettext(
            "listed %(count)d recent conversation", "listed %(count)d recent conversations", count
        ) % {"count": count}
    if mode != "search":
        return ""
    results = payload.get("results") or ()
    count = len(results)
    found = ngettext("found %(count)d conversation", "found %(count)d conversations", count) % {
        "count": count
    }
    summarised = sum(1 for r in results if isinstance(r, Mapping) and r.get("summary"))
    if not results or summarised == count:
        return found
    return ngettext(
        "%(found)s (%(count)d summarised)", "%(found)s (%(count)d summarised)", summarised
    ) % {"found": found, "count": summarised}


def session_search(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    if args.get("session_id") not in (None, ""):
        if args.get("around_message_id") not in (None, ""):
            return _scroll(ctx, args)
        return _read(ctx, args)
    query = args.get("query")
    if query is None or (isinstance(query, str) and not query.strip()):
        return _browse(ctx, args)
    return _discover(ctx, args)


TOOLS = (
    Tool(
        name=NAME,
        toolset="search",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        handler=session_search,
        chip=session_search_chip,
    ),
)
