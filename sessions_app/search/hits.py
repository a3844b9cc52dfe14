"""What the retrieval stage returns: message hits with highlighted snippets.

Highlights travel as character ranges, never as markup. The database marks matches with two
private-use characters that we choose; `parse_marked` turns those into ranges and drops any
stray marker. Renderers escape the text and wrap only the ranges, so message text can never
become HTML, whatever it contains.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime

MARK_START = "\ue000"
MARK_END = "\ue001"
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Snippet:
    text: str
    highlights: tuple[tuple[int, int], ...] = ()

    def segments(self) -> list[tuple[str, bool]]:
        """(text, highlighted) pieces in order, for templates."""
        out: list[tuple[str, bool]] = []
        pos = 0
        for start, end in self.highlights:
            if start > pos:
                out.append((self.text[pos:start], False))
            out.append((self.text[start:end], True))
            pos = end
        if pos < len(self.text):
            out.append((self.text[pos:], False))
        return out

    def marked(self, start: str = ">>>", end: str = "<<<") -> str:
        """The text with matches wrapped in plain-text markers (for the model)."""
        return "".join(f"{start}{t}{end}" if hit else t for t, hit in self.segments())

    def as_dict(self) -> dict[str, object]:
        return {"text": self.text, "highlights": [list(h) for h in self.highlights]}


# Markdown syntax a snippet shows as text once rendered: the markers go, the words stay.
# Applied to fragments cut anywhere, so each rule is local (no multi-line constructs).
_MARKDOWN_RULES = (
    (re.compile(r"```[\w+-]*"), " "),  # code fences, with their language
    # [text](url) and images, also when the snippet ends inside the url
    (re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)?"), r"\1"),
    (re.compile(r"(?m)^[ \t]*(?:#{1,6}|>+|[-*+]|\d{1,3}[.)])[ \t]+"), ""),  # heads, quotes, lists
    (
        re.compile(r"(?m)^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*:?-*:?[ \t]*$"),
        " ",
    ),  # table rules
    (re.compile(r"\*\*|__|~~|`"), ""),  # bold, strike, inline code
    (re.compile(r"(?<![\w*])\*(?=[^\s*])|(?<=[^\s*])\*(?![\w*])"), ""),  # *emphasis*
    (re.compile(r"(?<!\w)_(?=[^\s_])|(?<=[^\s_])_(?!\w)"), ""),  # _emphasis_, not snake_case
    (re.compile(r"\s*\|\s*"), " "),  # table cells
)


def plain_text(text: str) -> str:
    """`text` without Markdown syntax and with runs of whitespace as one space. Keeps
    MARK_START/MARK_END where they are (they are neither syntax nor space)."""
    for pattern, replacement in _MARKDOWN_RULES:
        text = pattern.sub(replacement, text)
    return _whitespace(text).strip()


def tool_calls_text(raw: object) -> str:
    """Tool calls (stored JSON, as text or parsed) as a line a person can read:
    `name: value, value` per call, never the JSON with its ids and quoting."""
    calls = raw
    if isinstance(raw, str):
        try:
            calls = json.loads(raw)
        except ValueError:
            return ""
    if not isinstance(calls, list):
        return ""
    parts = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        values = arguments.values() if isinstance(arguments, dict) else [arguments or ""]
        shown = ", ".join(str(v) for v in values if v not in (None, "", [], {}))
        parts.append(f"{function.get('name') or 'tool'}: {shown}".strip(" :"))
    return " · ".join(parts)


def parse_marked(raw: str) -> Snippet:
    """Split text carrying MARK_START/MARK_END into plain text (Markdown syntax removed)
    and highlight ranges."""
    raw = plain_text(raw)
    text: list[str] = []
    highlights: list[tuple[int, int]] = []
    length = 0
    open_at: int | None = None
    for char in raw:
        if char == MARK_START:
            if open_at is None:
                open_at = length
        elif char == MARK_END:
            if open_at is not None:
                if length > open_at:
                    highlights.append((open_at, length))
                open_at = None
        else:
            text.append(char)
            length += 1
    return Snippet("".join(text), tuple(_merge(highlights)))


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def strip_markers(text: str) -> str:
    return text.replace(MARK_START, "").replace(MARK_END, "")


def _whitespace(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def substring_snippet(
    text: str,
    terms: list[str],
    *,
    whole_words: bool = False,
    prefixes: frozenset[str] = frozenset(),
    before: int = 40,
    width: int = 120,
) -> Snippet:
    """A snippet found in Python: `width` chars from `before` chars ahead of the first match,
    with every term occurrence inside highlighted (case-insensitive).

    `whole_words` matches terms only between word boundaries (a term in `prefixes` may run
    on), which is what a word index matched; substring routes leave it off.
    """
    text = plain_text(strip_markers(text))
    patterns = []
    for term in terms:
        if not term:
            continue
        pattern = re.escape(term)
        if whole_words:
            pattern = r"(?<!\w)" + pattern + (r"\w*" if term in prefixes else r"(?!\w)")
        patterns.append(pattern)
    matcher = re.compile("|".join(patterns), re.IGNORECASE) if patterns else None
    first = matcher.search(text) if matcher else None
    start = max(0, first.start() - before) if first else 0
    end = min(len(text), start + width)
    window = text[start:end]
    ranges = [m.span() for m in matcher.finditer(window) if m.end() > m.start()] if matcher else []
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS if end < len(text) else ""
    shift = len(prefix)
    return Snippet(
        prefix + window + suffix,
        tuple((s + shift, e + shift) for s, e in _merge(ranges)),
    )


def as_datetime(value: object) -> datetime:
    """Raw cursors on SQLite hand back timestamps as text; make them aware datetimes."""
    if isinstance(value, datetime):
        result = value
    else:
        parsed = parse_datetime(str(value))
        if parsed is None:
            raise ValueError(f"not a timestamp: {value!r}")
        result = parsed
    if result.tzinfo is None:
        result = result.replace(tzinfo=UTC)
    return result


@dataclass(slots=True)
class Hit:
    """One matching message. `score`: higher is better, comparable within one route only."""

    message_id: int
    session_id: str
    role: str
    timestamp: datetime
    score: float = 0.0
    snippet: Snippet | None = None
    #: False for a message on a branch that is not selected (an edited message's original,
    #: an earlier answer): every branch is searchable, the chat shows the selected one.
    on_path: bool = True


@dataclass(slots=True)
class HitPage:
    route: str  # "words", "cjk", "trigram", "like", "words+trigram" (retry) or "none"
    hits: list[Hit] = field(default_factory=list)
