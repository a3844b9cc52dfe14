"""Threat scanner for text that ends up inside an agent's system prompt.

Memory entries and skills are rendered verbatim into the system prompt, so anything written
there is effectively a standing instruction to the model. This module flags prompt-injection,
exfiltration and command-and-control payloads before they are stored or rendered.

It is deliberately free of Django imports so the memory store, the skills app and plain
scripts can all share one implementation.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .patterns import EXTRA_PATTERNS, HERMES_PATTERNS, SCOPE_RANK, SCOPES, Scope, ThreatPattern
from .unicode import (
    INVISIBLE_CHARS,
    INVISIBLE_RE,
    TAG_RE,
    confusable_examples,
    has_confusables,
    is_format,
    normal_forms,
    smuggled_ascii,
    without_flags,
)

__all__ = [
    "HERMES_PATTERN_IDS",
    "INVISIBLE_CHARS",
    "MAX_SCAN_CHARS",
    "PATTERNS",
    "PATTERN_IDS",
    "SCOPES",
    "Finding",
    "Scope",
    "ThreatPattern",
    "blocked_reason",
    "check_content",
    "sanitize_for_prompt",
    "scan",
]

# Bounding the scan keeps the cost of one write predictable; callers that must not let an
# unscanned tail through (sanitize_for_prompt) reject oversized text outright instead.
MAX_SCAN_CHARS = 65_536

#: Hermes' 36 patterns first, in Hermes' order, then this project's additions.
PATTERNS: tuple[ThreatPattern, ...] = HERMES_PATTERNS + EXTRA_PATTERNS
PATTERN_IDS: tuple[str, ...] = tuple(p.id for p in PATTERNS)
HERMES_PATTERN_IDS: tuple[str, ...] = tuple(p.id for p in HERMES_PATTERNS)

_INVISIBLE_MESSAGE = (
    "Blocked: content contains invisible unicode character {codepoint} (possible injection)."
)
_FORMAT_MESSAGE = (
    "Blocked: content contains invisible format character {codepoint} ({name}), which can hide "
    "text or split a word so a filter misses it (possible injection)."
)
_TAGS_MESSAGE = (
    "Blocked: content contains {count} invisible Unicode tag character(s) (U+E0000-U+E007F) "
    "that spell hidden text the model reads but people do not see (ASCII smuggling): {hidden}."
)
_CONFUSABLE_MESSAGE = (
    "Blocked: content spells a blocked phrase with look-alike letters from other scripts "
    "({examples}); read as Latin it matches threat pattern(s) {ids}."
)
_PATTERN_MESSAGE = (
    "Blocked: content matches threat pattern '{id}'. Content is injected into the system "
    "prompt and must not contain injection or exfiltration payloads."
)
_DESCRIBED_MESSAGE = (
    "Blocked: content matches threat pattern '{id}' ({description}: {found}). Content is "
    "injected into the system prompt and must not contain injection or exfiltration payloads."
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason a piece of text was rejected."""

    id: str
    message: str


def _codepoint(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def _quote(text: str, limit: int = 60) -> str:
    """A matched span as the person should see it: one line, visible, bounded."""
    shown = " ".join(text.split())
    shown = shown if len(shown) <= limit else shown[: limit - 1] + "…"
    return repr(shown)


def _unicode_findings(text: str) -> Iterator[Finding]:
    """Invisible characters, checked on the raw text: that is what the model will read, and
    the check must not depend on how a future Unicode version's NFKC treats them. Hermes' 17
    keep Hermes' message; every other format character (soft hyphen, bidi marks…) is named;
    tag characters are reported once, with the text they spell."""
    seen: set[str] = set()
    for match in INVISIBLE_RE.finditer(text):
        ch = match.group()
        if ch not in seen:
            seen.add(ch)
            codepoint = _codepoint(ch)
            yield Finding(
                id=f"invisible_unicode_{codepoint}",
                message=_INVISIBLE_MESSAGE.format(codepoint=codepoint),
            )
    text = without_flags(text)
    tags = TAG_RE.findall(text)
    for ch in text:
        if ch in seen or not is_format(ch) or TAG_RE.match(ch):
            continue
        seen.add(ch)
        codepoint = _codepoint(ch)
        yield Finding(
            id=f"invisible_unicode_{codepoint}",
            message=_FORMAT_MESSAGE.format(
                codepoint=codepoint, name=unicodedata.name(ch, "unnamed").title()
            ),
        )
    if tags:
        hidden = smuggled_ascii(text)
        yield Finding(
            id="unicode_tags",
            message=_TAGS_MESSAGE.format(
                count=len(tags), hidden=_quote(hidden) if hidden else "(no readable text)"
            ),
        )


def _pattern_finding(pattern: ThreatPattern, found: str) -> Finding:
    if not pattern.description:
        return Finding(id=pattern.id, message=_PATTERN_MESSAGE.format(id=pattern.id))
    message = _DESCRIBED_MESSAGE.format(
        id=pattern.id, description=pattern.description, found=_quote(found)
    )
    return Finding(id=pattern.id, message=message)


def _iter_findings(text: str, scope: str) -> Iterator[Finding]:
    try:
        max_rank = SCOPE_RANK[scope]
    except KeyError:
        raise ValueError(f"unknown scope {scope!r}; expected one of {SCOPES}") from None

    text = text[:MAX_SCAN_CHARS]
    yield from _unicode_findings(text)

    # NFKC folds fullwidth letters, ligatures and other compatibility forms onto plain ASCII,
    # so each pattern only has to be written once; format characters are dropped so they
    # cannot split a keyword. The folded form also reads look-alike letters of other scripts
    # as Latin and joins spaced-out letters; it only exists when it differs.
    plain, folded = normal_forms(text)
    hits: list[tuple[ThreatPattern, str]] = []
    via_folding: list[str] = []
    # One span, one finding: an addition is not reported where an earlier pattern already
    # matched ("ignore all previous instructions" is Hermes' prompt_injection, nothing more).
    spans: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
    for pattern in PATTERNS:
        if SCOPE_RANK[pattern.scope] > max_rank:
            continue
        match, on_folded = pattern.regex.search(plain), False
        if match is None and folded:
            match, on_folded = pattern.regex.search(folded), True
        if match is None:
            continue
        start, end = match.span()
        taken = spans[on_folded]
        if pattern.description and any(start < e and s < end for s, e in taken):
            continue
        taken.append((start, end))
        if on_folded:
            via_folding.append(pattern.id)
        hits.append((pattern, match.group()))
    if via_folding and has_confusables(plain):
        examples = "; ".join(confusable_examples(plain)) or "mixed scripts"
        yield Finding(
            id="confusable_letters",
            message=_CONFUSABLE_MESSAGE.format(examples=examples, ids=", ".join(via_folding)),
        )
    for pattern, found in hits:
        yield _pattern_finding(pattern, found)


def scan(text: str, *, scope: Scope = "strict") -> list[Finding]:
    """Return every finding for ``text``: invisible and format characters first, then look-alike
    spelling, then patterns in list order.

    Only the first ``MAX_SCAN_CHARS`` characters are examined.
    """
    return list(_iter_findings(text, scope))


def check_content(text: str, *, scope: Scope = "strict") -> Finding | None:
    """Return the first finding ``scan`` would report, or ``None`` if the text is clean."""
    # Lazily consumed so a rejected write does not pay for every invisible-character check.
    return next(_iter_findings(text, scope), None)


def blocked_reason(findings: Iterable[Finding]) -> str:
    """Summarise findings as a comma-separated list of their ids."""
    return ", ".join(finding.id for finding in findings)


def sanitize_for_prompt(entry: str, *, label: str = "MEMORY.md") -> str:
    """Return ``entry`` if it is safe to render into a system prompt, else a placeholder.

    Entries may have been stored before the scanner existed or been edited on disk, so they are
    checked again at render time.
    """
    # Already a placeholder; rescanning would only wrap it in another one.
    if entry.startswith("[BLOCKED:"):
        return entry
    # scan() would silently ignore the tail, which is exactly where a payload could hide.
    if len(entry) > MAX_SCAN_CHARS:
        return (
            f"[BLOCKED: {label} entry too large to scan ({len(entry):,} chars). "
            "Removed from system prompt; use memory(action=remove) to delete the original.]"
        )
    findings = scan(entry)
    if findings:
        return (
            f"[BLOCKED: {label} entry contained threat pattern(s): {blocked_reason(findings)}. "
            "Removed from system prompt; use memory(action=remove) to delete the original.]"
        )
    return entry
