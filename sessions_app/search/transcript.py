"""Conversation transcripts for the summariser, cut to a window around the matches.

Format (reference §6, [classic] summary mode): one block per message —
`[USER]: …`, `[ASSISTANT]: …` (with `[Called: a, b]` for tool calls), `[TOOL:name]: …` —
with long tool output cut in the middle. The window logic works on the lowercased text:
all occurrences of the full phrase, else the rarest term's occurrences that have every other
term within 200 characters, else every occurrence of every term; the window keeps the most
matches and starts 25% of its width before the match it was built from.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

TOOL_OUTPUT_LIMIT = 500
TOOL_OUTPUT_KEEP = 250
TOOL_CUT_MARK = "\n...[truncated]...\n"
EARLIER_MARK = "...[earlier conversation truncated]...\n\n"
LATER_MARK = "\n\n...[later conversation truncated]..."
NEARBY = 200


def _tool_names(tool_calls: Any) -> list[str]:
    names = []
    if isinstance(tool_calls, list):
        for call in tool_calls:
            if isinstance(call, dict):
                function = call.get("function")
                name = function.get("name") if isinstance(function, dict) else call.get("name")
                if isinstance(name, str) and name:
                    names.append(name)
    return names


def _cut_middle(text: str) -> str:
    if len(text) <= TOOL_OUTPUT_LIMIT:
        return text
    return text[:TOOL_OUTPUT_KEEP] + TOOL_CUT_MARK + text[-TOOL_OUTPUT_KEEP:]


def format_message(role: str, content: str, *, tool_name: str = "", tool_calls: Any = None) -> str:
    """One transcript block, or "" for messages a reader would not see (system, empty)."""
    content = content or ""
    if role == "user":
        return f"[USER]: {content}"
    if role == "assistant":
        names = _tool_names(tool_calls)
        called = f"[Called: {', '.join(names)}]" if names else ""
        body = " ".join(part for part in (called, content) if part)
        return f"[ASSISTANT]: {body}" if body else ""
    if role == "tool":
        return f"[TOOL:{tool_name or 'tool'}]: {_cut_middle(content)}"
    return ""


def format_transcript(messages: Iterable[Any]) -> str:
    """Blocks for Message-like objects (role, content, tool_name, tool_calls), blank-line
    separated, oldest first."""
    blocks = (
        format_message(
            m.role,
            m.content,
            tool_name=m.tool_name or "",
            tool_calls=getattr(m, "tool_calls", None),
        )
        for m in messages
    )
    return "\n\n".join(b for b in blocks if b)


def _occurrences(haystack: str, needle: str) -> list[int]:
    found = []
    if not needle:
        return found
    pos = haystack.find(needle)
    while pos >= 0:
        found.append(pos)
        pos = haystack.find(needle, pos + 1)
    return found


def _near(positions: list[int], center: int, distance: int) -> bool:
    i = bisect.bisect_left(positions, center - distance)
    return i < len(positions) and positions[i] <= center + distance


def match_positions(text: str, terms: list[str], phrase: str = "") -> list[int]:
    """Where the query matters in `text` (lowercased), by the first rule that finds any."""
    lowered = text.lower()
    terms = [t.lower() for t in dict.fromkeys(terms) if t.strip()]
    phrase = (phrase or " ".join(terms)).lower().strip()
    if phrase:
        hits = _occurrences(lowered, phrase)
        if hits:
            return hits
    where = {t: _occurrences(lowered, t) for t in terms}
    present = {t: p for t, p in where.items() if p}
    if len(terms) > 1 and len(present) == len(terms):
        rarest = min(present, key=lambda t: (len(present[t]), terms.index(t)))
        others = [present[t] for t in terms if t != rarest]
        clustered = [c for c in present[rarest] if all(_near(o, c, NEARBY) for o in others)]
        if clustered:
            return clustered
    return sorted(p for positions in present.values() for p in positions)


def truncate_around_matches(
    text: str, terms: list[str], *, max_chars: int = 100_000, phrase: str = ""
) -> str:
    """`text` cut to `max_chars` around the densest cluster of matches (see module doc)."""
    if len(text) <= max_chars:
        return text
    matches = match_positions(text, terms, phrase)
    if not matches:
        return text[:max_chars] + LATER_MARK
    lead = max_chars // 4
    latest_start = len(text) - max_chars
    best_start, best_count = 0, -1
    for c in matches:
        start = min(max(0, c - lead), latest_start)
        count = bisect.bisect_left(matches, start + max_chars) - bisect.bisect_left(matches, start)
        # Strictly more wins, so on a tie the earliest window stays.
        if count > best_count:
            best_start, best_count = start, count
    end = best_start + max_chars
    return (
        (EARLIER_MARK if best_start > 0 else "")
        + text[best_start:end]
        + (LATER_MARK if end < len(text) else "")
    )
