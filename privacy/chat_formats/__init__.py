"""Chat histories exported by other assistants (ChatGPT, Claude), read one conversation at
a time: each format's module turns one conversation object of its `conversations.json` into
an `Imported` conversation, or refuses it with `BadExport` naming what is wrong.

Only text is kept. What is not text (an image, audio, a code interpreter's output, a file)
becomes a short placeholder naming what was there, and is counted for the report.

A conversation that is a tree (ChatGPT's `mapping`, Claude's `parent_message_uuid`) is split
by `tree_split`: the path from the root to the current message is the conversation, the
rest its alternatives.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: Longer export ids are kept as their digest (see stored_id).
ID_MAX = 200


class BadExport(ValueError):
    """A conversation that does not have the published shape of its format."""


@dataclass
class ImportedMessage:
    ext_id: str
    role: str
    content: str
    timestamp: datetime | None
    #: The export id of the message this one follows ("" for a first message).
    parent: str = ""


@dataclass
class Imported:
    source: str
    ext_id: str
    title: str
    created: datetime | None
    #: The selected path, in order.
    messages: list[ImportedMessage] = field(default_factory=list)
    #: Messages on other branches (edits, regenerations), each after its parent.
    branches: list[ImportedMessage] = field(default_factory=list)
    #: What was left out or replaced by a placeholder → how many times.
    skipped: Counter[str] = field(default_factory=Counter)


#: The longest name of a kind of content the export made up (a placeholder, a report line).
NAME_MAX = 40


def kind_name(kind: str, known: dict[str, str], default: str) -> str:
    """What a placeholder and the report call a kind of content: its known name, else the
    export's own word for it, cut to NAME_MAX."""
    return known.get(kind) or (kind.replace("_", " ")[:NAME_MAX].strip() or default)


def placeholder(what: str) -> str:
    return f"[{what} not imported]"


def stored_id(text: str) -> str:
    """An export's id as the import keeps it (`Session.model_config`): as is up to ID_MAX
    characters, else its digest — an export is data, its ids may be any length."""
    if len(text) <= ID_MAX:
        return text
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def text_of(value: Any, where: str) -> str:
    """A string field (None is empty); anything else is a wrong shape."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadExport(f"{where} is not text")
    return value.replace("\x00", "")


def object_of(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadExport(f"{where} is not an object")
    return value


def _tree_order(parents: dict[str, str | None], where: str) -> list[str]:
    """Every node id, each after its parent (siblings in the export's order). A parent that
    is not a node, or a node no root leads to (a cycle), is a broken tree."""
    children: dict[str, list[str]] = {}
    roots = []
    for node_id, parent in parents.items():
        if parent is None:
            roots.append(node_id)
        elif parent not in parents:
            raise BadExport(f"{where}: the parent of node {node_id[:40]} is missing")
        else:
            children.setdefault(parent, []).append(node_id)
    order: list[str] = []
    stack = list(reversed(roots))
    while stack:
        node_id = stack.pop()
        order.append(node_id)
        stack.extend(reversed(children.get(node_id, [])))
    if len(order) != len(parents):
        raise BadExport(f"{where}: its message tree has a cycle")
    return order


def _path(parents: dict[str, str | None], current: str, where: str) -> set[str]:
    """The node ids from the root to `current`."""
    path: set[str] = set()
    node_id: str | None = current
    while node_id is not None:
        if node_id in path:
            raise BadExport(f"{where}: its message tree has a cycle (at node {node_id[:40]})")
        if node_id not in parents:
            raise BadExport(f"{where}: node {node_id[:40]} is missing from its tree")
        path.add(node_id)
        node_id = parents[node_id]
    return path


def tree_split(
    out: Imported,
    *,
    parents: dict[str, str | None],
    messages: dict[str, ImportedMessage | None],
    current: str,
    where: str,
) -> None:
    """Fill `out.messages` (the path from the root to `current`, in order) and
    `out.branches` (every other message, each after its parent) from a tree given as node
    id → parent id (None for a root). Nodes without a message (`messages` maps them to None:
    a root, a deleted or skipped message) are passed over: a message follows its nearest
    imported ancestor."""
    order = _tree_order(parents, where)
    on_path = _path(parents, current, where)
    #: node id → the export id of its nearest imported ancestor-or-self ("" at the top).
    follows: dict[str, str] = {}
    for node_id in order:
        parent = parents[node_id]
        after = follows[parent] if parent is not None else ""
        imported = messages.get(node_id)
        if imported is None:
            follows[node_id] = after
            continue
        imported.parent = after
        follows[node_id] = node_id
        (out.messages if node_id in on_path else out.branches).append(imported)
