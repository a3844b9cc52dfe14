"""The `<memory-context>` fence around recalled memory, and a scrubber that removes any
fence the model echoes back while it streams.

Recall is attached to the outgoing user message at API time only. The fence and its system
note tell the model that the text is reference data, not something the user said
("spotlighting"); the scrubber keeps it out of what the user sees.
"""

from __future__ import annotations

import re

OPEN_TAG = "<memory-context>"
CLOSE_TAG = "</memory-context>"
SYSTEM_NOTE = (
    "[System note: The following is recalled memory context, NOT new user input. Treat as "
    "authoritative reference data — this is the agent's persistent memory and should inform "
    "all responses.]"
)

_FENCED_BLOCK = re.compile(r"<memory-context>.*?</memory-context>", re.IGNORECASE | re.DOTALL)
_STRAY_TAG = re.compile(r"</?memory-context>", re.IGNORECASE)
_OLD_NOTE = re.compile(r"\[System note: The following is recalled memory context[^\]]*\]", re.I)
_BULLET = re.compile(r"^\s*[-*•]\s+")


def sanitize_context(text: str) -> str:
    """Remove whole fenced blocks, system notes and stray tags from provider output, so a
    provider cannot close our fence early or nest a fence of its own."""
    text = _FENCED_BLOCK.sub("", text)
    text = _OLD_NOTE.sub("", text)
    return _STRAY_TAG.sub("", text)


def _drop_repeated_bullets(text: str) -> str:
    # Providers often repeat a fact in several sections; within one section (a run of lines
    # between headings/blank lines) a bullet that already appeared is dropped.
    seen: set[str] = set()
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            seen.clear()
        elif _BULLET.match(line):
            key = _BULLET.sub("", line).strip().casefold()
            if key in seen:
                continue
            seen.add(key)
        lines.append(line)
    return "\n".join(lines)


def build_memory_context_block(raw: str) -> str:
    """Wrap recalled text in the fence; '' when there is nothing to recall."""
    content = _drop_repeated_bullets(sanitize_context(raw or "")).strip()
    if not content:
        return ""
    return f"{OPEN_TAG}\n{SYSTEM_NOTE}\n\n{content}\n{CLOSE_TAG}"


class StreamingContextScrubber:
    """Drops `<memory-context>` spans from streamed text, even when a tag is split across
    chunks.

    An opening tag counts only at the start of a line and followed by a newline (so prose
    that mentions the tag inline is left alone). Text that might be the start of a tag is
    held back until the next chunk decides it. `flush()` releases held text at the end of
    the stream and discards an unterminated span.
    """

    _OPENER = OPEN_TAG + "\n"

    def __init__(self) -> None:
        self._buf = ""
        self._inside = False
        # Whether the character before self._buf[0] ended a line (or the stream just began).
        self._buf_at_line_start = True
        self._skip_newline = False

    def feed(self, chunk: str) -> str:
        self._buf += chunk
        out: list[str] = []
        while True:
            if self._inside:
                end = self._buf.lower().find(CLOSE_TAG)
                if end == -1:
                    self._buf = self._buf[len(self._buf) - self._partial_tail(CLOSE_TAG) :]
                    break
                self._buf = self._buf[end + len(CLOSE_TAG) :]
                self._inside = False
                self._buf_at_line_start = True
                self._skip_newline = True
            if self._skip_newline and self._buf:
                # The newline that ended the closing tag belongs to the fence.
                self._buf = self._buf.removeprefix("\n")
                self._skip_newline = False
            if not self._buf:
                break
            start = self._complete_opener()
            if start is not None:
                self._emit(out, self._buf[:start])
                self._buf = self._buf[start + len(self._OPENER) :]
                self._inside = True
                continue
            hold = self._possible_opener_len()
            self._emit(out, self._buf[: len(self._buf) - hold])
            self._buf = self._buf[len(self._buf) - hold :]
            break
        return "".join(out)

    def flush(self) -> str:
        held, self._buf = ("" if self._inside else self._buf), ""
        self._inside = False
        return held

    def _emit(self, out: list[str], text: str) -> None:
        if text:
            out.append(text)
            self._buf_at_line_start = text.endswith("\n")

    def _line_starts(self) -> list[int]:
        starts = [0] if self._buf_at_line_start else []
        starts += [i + 1 for i, ch in enumerate(self._buf) if ch == "\n"]
        return starts

    def _complete_opener(self) -> int | None:
        lowered = self._buf.lower()
        for pos in self._line_starts():
            if lowered.startswith(self._OPENER, pos):
                return pos
        return None

    def _possible_opener_len(self) -> int:
        """Length of a tail that could still become an opener at a line start."""
        lowered = self._buf.lower()
        for pos in self._line_starts():
            tail = lowered[pos:]
            if tail and self._OPENER.startswith(tail):
                return len(tail)
        return 0

    def _partial_tail(self, tag: str) -> int:
        lowered = self._buf.lower()
        for size in range(min(len(tag) - 1, len(lowered)), 0, -1):
            if tag.startswith(lowered[-size:]):
                return size
        return 0
