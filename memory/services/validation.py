"""Checks every memory write passes before any lock is taken: target, text, operations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from core.exceptions import ServiceError

from .. import scanner
from ..models import Source, Target

ACTIONS = ("add", "replace", "remove")
MAX_BATCH_OPERATIONS = 50
PREVIEW_CHARS = 80


@dataclass(frozen=True)
class Provenance:
    """Where a write comes from. `actor` is the person acting (the owner, or an
    administrator); session and message ids are checked against the owner before use.
    `client` names the MCP client (its API token's name) for source "mcp"."""

    source: str = Source.MANUAL
    session_id: str | None = None
    message_id: int | None = None
    actor: AbstractBaseUser | None = None
    client: str = ""


@dataclass(frozen=True)
class Op:
    """One operation. Id-based ops (`entry_id`) come from pages, the API and the admin;
    the model names entries by `old_text`."""

    action: str
    content: str = ""
    old_text: str = ""
    entry_id: int | None = None


def check_target(target: Any) -> str:
    if target is None or target == "":
        raise ServiceError("invalid_target", "Missing target. Use 'memory' or 'user'.")
    if not isinstance(target, str) or target not in Target.values:
        shown = target if isinstance(target, str) else type(target).__name__
        raise ServiceError("invalid_target", f"Invalid target '{shown}'. Use 'memory' or 'user'.")
    return target


def clean_text(value: Any, *, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ServiceError("invalid", f"{what} must be a string (got {type(value).__name__}).")
    # Browsers send textarea newlines as CRLF; stored entries use plain newlines.
    return value.replace("\r\n", "\n").replace("\r", "\n").strip()


def check_content(value: Any, *, what: str = "Content") -> str:
    """Normalise entry text and refuse what could never be stored safely."""
    text = clean_text(value, what=what)
    if not text:
        raise ServiceError("empty", f"{what} cannot be empty.")
    if "\x00" in text:
        raise ServiceError("invalid", f"{what} contains a NUL character.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ServiceError(
            "invalid", f"{what} contains an unpaired surrogate and is not valid text."
        ) from None
    if any(line.strip() == "§" for line in text.split("\n")):
        raise ServiceError(
            "invalid",
            f"{what} contains a line with only '§', which separates entries in MEMORY.md.",
        )
    if len(text) > scanner.MAX_SCAN_CHARS:
        raise ServiceError(
            "too_large",
            f"{what} is too large ({len(text):,} chars); entries are at most "
            f"{scanner.MAX_SCAN_CHARS:,} characters and must fit the memory limit.",
        )
    return text


def with_content_alias(item: dict[str, Any]) -> dict[str, Any]:
    """`item` with Hermes' `new_text` alias folded into `content` (add, replace and batch
    operations accept either; `content` wins when both are given)."""
    if item.get("content") not in (None, "") or item.get("new_text") is None:
        return item
    return {**item, "content": item["new_text"]}


def parse_operations(raw: Any) -> list[Op]:
    """Turn the tool's `operations` argument into ops, refusing malformed items."""
    if not isinstance(raw, list):
        raise ServiceError("invalid", "operations must be a list of objects.")
    if not raw:
        raise ServiceError("invalid", "operations is empty; give at least one operation.")
    if len(raw) > MAX_BATCH_OPERATIONS:
        raise ServiceError(
            "invalid", f"At most {MAX_BATCH_OPERATIONS} operations per call (got {len(raw)})."
        )
    ops = []
    for i, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise ServiceError("invalid", f"Operation {i}: must be an object.")
        ops.append(
            Op(
                action=item.get("action"),
                content=item.get("content"),
                old_text=item.get("old_text"),
            )
        )
    return ops


def sanitized(contents: Sequence[str]) -> list[str]:
    # Entries echoed to the model are rendered like the prompt renders them.
    return [scanner.sanitize_for_prompt(c) for c in contents]


def preview(text: str) -> str:
    text = scanner.sanitize_for_prompt(text)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."
