"""Where an entry or an audit event came from, as a person reads it: the source's label, the
MCP client's token name, or — for a writer another app knows — what that app says about it.

The review of an imported ChatGPT/Claude history writes with source "import_review" and the
import's id as `source_client`; the privacy app, which owns the imports, registers (from its
ready()) a lookup that names them ("Learned from your ChatGPT import of 2024-05-01") and links
each to its panel on the Account page. Memory itself never reads the imports.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from django.contrib.auth.models import AbstractBaseUser

from .models import Source


@dataclass(frozen=True)
class Writer:
    """Who wrote a row: `label` for people, `url` to what wrote it (when there is a page),
    `import_id` the chat import (source "import_review")."""

    label: str
    url: str = ""
    import_id: int | None = None


class Written(Protocol):
    source: str
    source_client: str


#: (owner, the `source_client` values seen) → the writer of each one the app knows (another
#: person's, or a gone one, is left out: the row then reads as its source alone).
WriterLookup = Callable[[AbstractBaseUser, set[str]], dict[str, Writer]]

_lookups: dict[str, WriterLookup] = {}

LABELS = dict(Source.choices)


def writer_lookup_register(source: str, lookup: WriterLookup) -> None:
    """Name the writers of `source` with `lookup` (replacing an earlier one)."""
    _lookups[source] = lookup


def import_id_of(source: str, client: str) -> int | None:
    """The chat import that wrote a row of source "import_review" (None for any other)."""
    if source != Source.IMPORT_REVIEW or not client.isdigit():
        return None
    return int(client)


def default_writer(source: str, client: str) -> Writer:
    label = LABELS.get(source, source)
    if client and source == Source.MCP:
        label = f"{label} · {client}"
    return Writer(label=label, import_id=import_id_of(source, client))


def writer_of(*, user: AbstractBaseUser, source: str, client: str) -> Writer:
    """The writer of `user`'s rows from `source`/`client`."""
    lookup = _lookups.get(source)
    found = lookup(user, {client}).get(client) if lookup is not None and client else None
    return found or default_writer(source, client)


def writers_attach(*, user: AbstractBaseUser, rows: Iterable[Written]) -> None:
    """Set `writer` (a Writer) on each of `user`'s rows (entries or events): one lookup per
    source that has one, for all the rows at once."""
    rows = list(rows)
    clients: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.source in _lookups and row.source_client:
            clients[row.source].add(row.source_client)
    known = {source: _lookups[source](user, seen) for source, seen in clients.items()}
    for row in rows:
        found = known.get(row.source, {}).get(row.source_client)
        row.writer = found or default_writer(row.source, row.source_client)  # type: ignore[attr-defined]
