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

from django.utils.translation import gettext_lazy

from core.exceptions import Text, english, lazy_format

#: Longer export ids are kept as their digest (see stored_id).
ID_MAX = 200


class BadExport(ValueError):
    """A conversation that does not have the published shape of its format; `text` says
    where and what is wrong, marked for translation."""

    def __init__(self, text: Text) -> None:
        super().__init__(english(text))
        self.text = text


def at(where: Text, part: str) -> Text:
    """A place in the export, as a refusal names it: "conversation 3 ('Trip'): message 7:
    content" (the export's own field names after the conversation)."""
    return lazy_format("%(where)s: %(part)s", where=where, part=part)


def fault(template: Text, where: Text, **values: Any) -> BadExport:
    """The refusal `template` ("%(where)s is not text") at `where`."""
    return BadExport(lazy_format(template, where=where, **values))


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
    #: What was left out or replaced by a placeholder (a `lazy_format` message, see
    #: `skipped_kind`) → how many times.
    skipped: Counter[Text] = field(default_factory=Counter)


#: Refusals both formats make.
CYCLE = gettext_lazy("%(where)s: its message tree has a cycle")
NOT_A_LIST = gettext_lazy("%(where)s: %(field)s is not a list")
NO_ID = gettext_lazy("%(where)s: it has no %(field)s")
EMPTY_MESSAGES = gettext_lazy("empty messages")

#: The longest name of a kind of content the export made up (a placeholder, a report line).
NAME_MAX = 40


def kind_name(kind: str, known: dict[str, str], default: str) -> str:
    """What a placeholder and the report call a kind of content: its known name, else the
    export's own word for it, cut to NAME_MAX."""
    return known.get(kind) or (kind.replace("_", " ")[:NAME_MAX].strip() or default)


def placeholder(what: str) -> str:
    """The text that stands for content left out, in the conversation itself (English, as
    the agent reads it later)."""
    return f"[{what} not imported]"


def skipped_kind(template: Text, **values: Any) -> Text:
    """A kind of content the report counts as skipped ("empty messages")."""
    return lazy_format(template, **values)


def placeheld(name: str) -> Text:
    """What the report counts for a placeholder: "image (a placeholder names it)"; a known
    name (marked with gettext_noop) in the reader's language, the export's own word as is."""
    return skipped_kind(gettext_lazy("%(name)s (a placeholder names it)"), name=gettext_lazy(name))


def stored_id(text: str) -> str:
    """An export's id as the import keeps it (`Session.model_config`): as is up to ID_MAX
    characters, else its digest — an export is data, its ids may be any length."""
    if len(text) <= ID_MAX:
        return text
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def text_of(value: Any, where: Text) -> str:
    """A string field (None is empty); anything else is a wrong shape."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise fault(gettext_lazy("%(where)s is not text"), where)
    return value.replace("\x00", "")


def object_of(value: Any, where: Text) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fault(gettext_lazy("%(where)s is not an object"), where)
    return value


def _tree_order(parents: dict[str, str | None], where: Text) -> list[str]:
    """Every node id, each after its parent (siblings in the export's order). A parent that
    is not a node, or a node no root leads to (a cycle), is a broken tree."""
    children: dict[str, list[str]] = {}
    roots = []
    for node_id, parent in parents.items():
        if parent is None:
            roots.append(node_id)
        elif parent not in parents:
            raise fault(
                gettext_lazy("%(where)s: the parent of node %(node)s is missing"),
                where,
                node=node_id[:40],
            )
        else:
            children.setdefault(parent, []).append(node_id)
    order: list[str] = []
    stack = list(reversed(roots))
    while stack:
        node_id = stack.pop()
        order.append(node_id)
        stack.extend(reversed(children.get(node_id, [])))
    if len(order) != len(parents):
        raise fault(CYCLE, where)
    return order


def _path(parents: dict[str, str | None], current: str, where: Text) -> set[str]:
    """The node ids from the root to `current`."""
    path: set[str] = set()
    node_id: str | None = current
    while node_id is not None:
        if node_id in path:
            raise fault(
                gettext_lazy("%(where)s: its message tree has a cycle (at node %(node)s)"),
                where,
                node=node_id[:40],
            )
        if node_id not in parents:
            raise fault(
                gettext_lazy("%(where)s: node %(node)s is missing from its tree"),
                where,
                node=node_id[:40],
            )
        path.add(node_id)
        node_id = parents[node_id]
    return path


def tree_split(
    out: Imported,
    *,
    parents: dict[str, str | None],
    messages: dict[str, ImportedMessage | None],
    current: str,
    where: Text,
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
