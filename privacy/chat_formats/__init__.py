"""Chat histories exported by other assistants (ChatGPT, Claude), read one conversation at
a time: each format's module turns one conversation object of its `conversations.json` into
an `Imported` conversation, or refuses it with `BadExport` naming what is wrong.

Only text is kept. What is not text (an image, audio, a code interpreter's output, a file)
becomes a short placeholder naming what was there, and is counted for the report.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


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


def placeholder(what: str) -> str:
    return f"[{what} not imported]"


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
