"""ChatGPT's `conversations.json`: a list of conversations, each a tree of messages.

    {"id" | "conversation_id", "title", "create_time": <epoch>, "current_node": <node id>,
     "mapping": {<node id>: {"id", "parent": <node id> | null, "children": [<node id>],
                             "message": null | {"id", "author": {"role", "name"},
                                                "create_time": <epoch> | null,
                                                "content": {"content_type", "parts" | "text"},
                                                "metadata": {...}}}}}

The conversation is the path from the root to `current_node`; messages on other branches
(edited prompts, regenerated answers) become its alternatives. Nodes without a message (the
root, deleted nodes) are passed over: a message follows its nearest imported ancestor.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy, gettext_noop

from core.exceptions import Text
from privacy.statedb import from_epoch

from . import (
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

SOURCE = "chatgpt"

#: Parts of a multimodal message that are not text → what the placeholder calls them.
PART_NAMES = {
    "image_asset_pointer": gettext_noop("image"),
    "audio_asset_pointer": gettext_noop("audio"),
    "real_time_user_audio_video_asset_pointer": gettext_noop("audio/video"),
    "audio_transcription": gettext_noop("audio"),
    "video_container_asset_pointer": gettext_noop("video"),
}
#: Whole messages that are not text → what the placeholder calls them.
CONTENT_NAMES = {
    "code": gettext_noop("code interpreter input"),
    "execution_output": gettext_noop("code interpreter output"),
    "tether_browsing_display": gettext_noop("web browsing result"),
    "tether_quote": gettext_noop("web quote"),
    "system_error": gettext_noop("tool error"),
}
TEXT_TYPES = {"text", "multimodal_text"}


def looks_like(conversation: dict[str, Any]) -> bool:
    return "mapping" in conversation


def _content(message: dict[str, Any], out: Imported, where: Text) -> str:
    content = object_of(message.get("content") or {}, at(where, "content"))
    kind = text_of(content.get("content_type"), at(where, "content_type")) or "text"
    if kind not in TEXT_TYPES:
        name = kind_name(kind, CONTENT_NAMES, "content")
        out.skipped[placeheld(name)] += 1
        return placeholder(name)
    parts = content.get("parts") or []
    if not isinstance(parts, list):
        raise fault(NOT_A_LIST, where, field="parts")
    texts = []
    for part in parts:
        if isinstance(part, str):
            if part:
                texts.append(part.replace("\x00", ""))
            continue
        if not isinstance(part, dict):
            raise fault(gettext_lazy("%(where)s: a part is neither text nor an object"), where)
        kind = text_of(part.get("content_type"), at(where, "part type")) or "attachment"
        name = kind_name(kind, PART_NAMES, "attachment")
        out.skipped[placeheld(name)] += 1
        texts.append(placeholder(name))
    return "\n\n".join(texts)


def _newest_leaf(mapping: dict[str, Any], where: Text) -> str:
    """When `current_node` is absent: the most recent message of the tree."""
    best, best_time = "", -1.0
    for node_id, node in mapping.items():
        node = object_of(node, at(where, f"node {str(node_id)[:40]}"))
        if node.get("children"):
            continue
        message = node.get("message") or {}
        stamp = message.get("create_time") if isinstance(message, dict) else None
        stamp = float(stamp) if isinstance(stamp, int | float) else 0.0
        if stamp > best_time:
            best, best_time = node_id, stamp
    if not best:
        raise fault(gettext_lazy("%(where)s: it has no messages"), where)
    return best


def _parents(mapping: dict[str, Any], where: Text) -> dict[str, str | None]:
    parents: dict[str, str | None] = {}
    for node_id, node in mapping.items():
        parent = object_of(node, at(where, f"node {str(node_id)[:40]}")).get("parent")
        if parent is not None and not isinstance(parent, str):
            raise fault(
                gettext_lazy("%(where)s: the parent of node %(node)s is not a node id"),
                where,
                node=str(node_id)[:40],
            )
        parents[node_id] = parent
    return parents


def _message(node_id: str, message: Any, out: Imported, where: Text) -> ImportedMessage | None:
    """The message of a node, or None when it is not imported (counted why)."""
    if message is None:
        return None  # the root, or a deleted node
    place = at(where, f"message {node_id[:40]}")
    message = object_of(message, place)
    author = object_of(message.get("author") or {}, at(where, "author"))
    role = text_of(author.get("role"), at(where, "author.role"))
    metadata = message.get("metadata") or {}
    if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        out.skipped[skipped_kind(gettext_lazy("hidden system context"))] += 1
        return None
    if role == "tool":
        # A tool's result without the call that asked for it cannot be replayed.
        out.skipped[
            skipped_kind(gettext_lazy("tool results (browsing, plugins, code interpreter)"))
        ] += 1
        return None
    if role not in ("user", "assistant", "system"):
        out.skipped[
            skipped_kind(
                gettext_lazy("messages from an unknown author (%(role)s)"),
                role=role[:20] or "none",
            )
        ] += 1
        return None
    content = _content(message, out, place)
    if not content.strip():
        out.skipped[skipped_kind(EMPTY_MESSAGES)] += 1
        return None
    return ImportedMessage(
        ext_id=node_id,
        role=role,
        content=content,
        timestamp=from_epoch(message.get("create_time")),
    )


def parse(conversation: dict[str, Any], where: Text) -> Imported:
    ext_id = text_of(conversation.get("conversation_id") or conversation.get("id"), where)
    if not ext_id:
        raise fault(NO_ID, where, field="id")
    mapping = object_of(conversation.get("mapping"), at(where, "mapping"))
    out = Imported(
        source=SOURCE,
        ext_id=ext_id,
        title=text_of(conversation.get("title"), at(where, "title")).strip(),
        created=from_epoch(conversation.get("create_time")),
    )
    if not mapping:
        return out
    parents = _parents(mapping, where)
    current = conversation.get("current_node") or _newest_leaf(mapping, where)
    if not isinstance(current, str):
        raise fault(
            gettext_lazy("%(where)s: %(field)s is not a node id"), where, field="current_node"
        )
    tree_split(
        out,
        parents=parents,
        messages={
            node_id: _message(node_id, mapping[node_id].get("message"), out, where)
            for node_id in parents
        },
        current=current,
        where=where,
    )
    return out
