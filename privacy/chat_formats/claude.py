"""Claude's `conversations.json`: a list of conversations, each a list of messages.

    {"uuid", "name", "created_at": <ISO 8601>, "updated_at",
     "chat_messages": [{"uuid", "sender": "human" | "assistant", "created_at",
                        "text", "content": [{"type": "text", "text"} | {"type": ...}],
                        "attachments": [{"file_name", ...}], "files": [{"file_name"}]}]}

The text is the message's `text` blocks of `content` (or its `text` when it has no
blocks); other blocks (tool use, tool results, images) and files become placeholders.

Messages that name their `parent_message_uuid` (exports that keep edits and retries, with
the conversation's `current_leaf_message_uuid`) form a tree: the path to the current leaf
is the conversation, the other branches its alternatives, as for ChatGPT. Without it the
list is one path, in order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext_lazy, gettext_noop

from core.exceptions import Text

from . import (
    CYCLE,
    EMPTY_MESSAGES,
    NO_ID,
    NOT_A_LIST,
    Imported,
    ImportedMessage,
    at,
    fault,
    kind_name,
    object_of,
    placeheld,
    placeholder,
    skipped_kind,
    text_of,
    tree_split,
)

SOURCE = "claude"
ROLES = {"human": "user", "assistant": "assistant"}
BLOCK_NAMES = {
    "tool_use": gettext_noop("tool call"),
    "tool_result": gettext_noop("tool result"),
    "image": gettext_noop("image"),
}
#: The parent Claude gives a conversation's first message.
ROOT_PARENT = "00000000-0000-4000-8000-000000000000"


def looks_like(conversation: dict[str, Any]) -> bool:
    return "chat_messages" in conversation


def _time(value: Any, where: Text) -> datetime | None:
    text = text_of(value, where)
    try:
        parsed = parse_datetime(text) if text else None
    except ValueError:
        return None
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)  # the export writes UTC
    return parsed


def _content(message: dict[str, Any], out: Imported, where: Text) -> str:
    blocks = message.get("content")
    texts = []
    if blocks:
        if not isinstance(blocks, list):
            raise fault(NOT_A_LIST, where, field="content")
        for block in blocks:
            block = object_of(block, at(where, "a content block"))
            kind = text_of(block.get("type"), at(where, "block type"))
            if kind == "text":
                texts.append(text_of(block.get("text"), at(where, "text")))
            elif kind not in ("thinking", "redacted_thinking"):
                name = kind_name(kind, BLOCK_NAMES, "block")
                out.skipped[placeheld(name)] += 1
                texts.append(placeholder(name))
            else:
                out.skipped[skipped_kind(gettext_lazy("thinking blocks"))] += 1
    else:
        texts.append(text_of(message.get("text"), at(where, "text")))
    for key in ("attachments", "files"):
        files = message.get(key) or []
        if not isinstance(files, list):
            raise fault(NOT_A_LIST, where, field=key)
        for item in files:
            name = text_of(object_of(item, at(where, "a file")).get("file_name"), where)
            out.skipped[
                skipped_kind(gettext_lazy("attached files (a placeholder names them)"))
            ] += 1
            texts.append(placeholder(f"file {name[:100]}" if name else "file"))
    return "\n\n".join(t for t in texts if t)


def parse(conversation: dict[str, Any], where: Text) -> Imported:
    ext_id = text_of(conversation.get("uuid"), at(where, "uuid"))
    if not ext_id:
        raise fault(NO_ID, where, field="uuid")
    messages = conversation.get("chat_messages") or []
    if not isinstance(messages, list):
        raise fault(NOT_A_LIST, where, field="chat_messages")
    out = Imported(
        source=SOURCE,
        ext_id=ext_id,
        title=text_of(conversation.get("name"), at(where, "name")).strip(),
        created=_time(conversation.get("created_at"), at(where, "created_at")),
    )
    tree = any(isinstance(m, dict) and "parent_message_uuid" in m for m in messages)
    parents: dict[str, str | None] = {}
    found: dict[str, ImportedMessage | None] = {}
    times: dict[str, float] = {}
    previous: str | None = None
    for i, message in enumerate(messages, start=1):
        place = at(where, f"message {i}")
        message = object_of(message, place)
        node_id = text_of(message.get("uuid"), at(place, "uuid")) or f"{ext_id}:{i}"
        if node_id in parents:
            if tree:
                raise fault(gettext_lazy("%(where)s: its uuid is used twice"), place)
            node_id = f"{node_id}:{i}"
        if tree:
            parent = text_of(message.get("parent_message_uuid"), at(place, "parent_message_uuid"))
            parents[node_id] = parent if parent and parent != ROOT_PARENT else None
        else:
            parents[node_id] = previous  # one path, in list order
        previous = node_id
        found[node_id] = _message(node_id, message, out, place)
        stamp = found[node_id].timestamp if found[node_id] is not None else None
        times[node_id] = stamp.timestamp() if stamp is not None else float(i)
    if not parents:
        return out
    current = text_of(conversation.get("current_leaf_message_uuid"), at(where, "current leaf"))
    if not tree or not current:
        # The newest message that nothing follows.
        followed = {p for p in parents.values() if p is not None}
        leaves = [n for n in parents if n not in followed]
        if not leaves:
            raise fault(CYCLE, where)
        current = max(leaves, key=lambda n: times[n])
    tree_split(out, parents=parents, messages=found, current=current, where=where)
    return out


def _message(
    node_id: str, message: dict[str, Any], out: Imported, place: Text
) -> ImportedMessage | None:
    """The message, or None when it is not imported (counted why)."""
    sender = text_of(message.get("sender"), at(place, "sender"))
    if sender not in ROLES:
        out.skipped[
            skipped_kind(
                gettext_lazy("messages from an unknown sender (%(sender)s)"),
                sender=sender[:20] or "none",
            )
        ] += 1
        return None
    content = _content(message, out, place)
    if not content.strip():
        out.skipped[skipped_kind(EMPTY_MESSAGES)] += 1
        return None
    return ImportedMessage(
        ext_id=node_id,
        role=ROLES[sender],
        content=content,
        timestamp=_time(message.get("created_at"), at(place, "created_at")),
    )
