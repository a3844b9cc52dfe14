"""Threat scanner for text that ends up inside an agent's system prompt.

Memory entries and skills are rendered verbatim into the system prompt, so anything written
there is effectively a standing instruction to the model. This module flags prompt-injection,
exfiltration and command-and-control payloads before they are stored or rendered.

It is deliberately free of Django imports so the memory store, the skills app and plain
scripts can all share one implementation.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
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

Scope = Literal["all", "context", "strict"]

# Scopes nest: a caller asking for "strict" also gets every "context" and "all" pattern.
# The tuple order is the nesting order, so a pattern applies when its rank <= the requested rank.
SCOPES: tuple[Scope, ...] = get_args(Scope)
_SCOPE_RANK: dict[str, int] = {name: rank for rank, name in enumerate(SCOPES)}

# Bounding the scan keeps the cost of one write predictable; callers that must not let an
# unscanned tail through (sanitize_for_prompt) reject oversized text outright instead.
MAX_SCAN_CHARS = 65_536

# Zero-width and bidi-control characters let an attacker hide or visually reorder text that
# the model still reads, so their mere presence is treated as a finding.
INVISIBLE_CHARS: tuple[str, ...] = (
    "\u200b",  # zero width space
    "\u200c",  # zero width non-joiner
    "\u200d",  # zero width joiner
    "\u2060",  # word joiner
    "\u2062",  # invisible times
    "\u2063",  # invisible separator
    "\u2064",  # invisible plus
    "\ufeff",  # zero width no-break space / BOM
    "\u202a",  # left-to-right embedding
    "\u202b",  # right-to-left embedding
    "\u202c",  # pop directional formatting
    "\u202d",  # left-to-right override
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u2067",  # right-to-left isolate
    "\u2068",  # first strong isolate
    "\u2069",  # pop directional isolate
)
_INVISIBLE_RE = re.compile("[" + "".join(INVISIBLE_CHARS) + "]")

_INVISIBLE_MESSAGE = (
    "Blocked: content contains invisible unicode character {codepoint} (possible injection)."
)
_PATTERN_MESSAGE = (
    "Blocked: content matches threat pattern '{id}'. Content is injected into the system "
    "prompt and must not contain injection or exfiltration payloads."
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason a piece of text was rejected."""

    id: str
    message: str


@dataclass(frozen=True, slots=True)
class ThreatPattern:
    id: str
    scope: Scope
    regex: re.Pattern[str]


# Attackers pad phrases with filler ("ignore ALL of the previous instructions"), so most
# patterns allow a short run of words between their keywords. The run is capped at eight
# words so ordinary prose with the keywords far apart is not flagged, and it is lazy with a
# fixed upper bound so matching stays linear in the number of keyword hits.
_GAP = r"\s+(?:\S+\s+){0,8}?"

# Verbs shared by the two "tamper with agent configuration" patterns.
_EDIT_VERBS = r"(?:update|modify|edit|write|change|append|add)"

# `$HOME`, `${HOME}` and `~` all name the same directory in the shells agents drive.
_HOME = r"(?:\$\{?HOME\}?|~)"

# Only variable names that end in a credential-ish word; the trailing \b rejects names such as
# API_KEY_ID that merely contain one.
_SECRET_VAR = r"\$\{?[A-Za-z0-9_]*?(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)\b"


def _p(pattern_id: str, scope: Scope, pattern: str) -> ThreatPattern:
    return ThreatPattern(pattern_id, scope, re.compile(pattern, re.IGNORECASE))


PATTERNS: tuple[ThreatPattern, ...] = (
    # --- scope "all": unambiguous payloads, checked wherever untrusted text is accepted ---
    _p(
        "prompt_injection",
        "all",
        rf"\bignore{_GAP}(?:previous|all|above|prior){_GAP}instructions\b",
    ),
    _p("sys_prompt_override", "all", r"\bsystem\s+prompt\s+override\b"),
    _p(
        "disregard_rules",
        "all",
        rf"\bdisregard{_GAP}(?:your|all|any){_GAP}(?:instructions|rules|guidelines)\b",
    ),
    _p(
        "bypass_restrictions",
        "all",
        rf"\bact\s+as\s+(?:if|though){_GAP}you"
        rf"{_GAP}(?:have\s+no|(?:don['\u2019]?t|do\s+not)\s+have)"
        rf"{_GAP}(?:restrictions|limits|rules)\b",
    ),
    # Every span stops at the next "<!--": otherwise a flood of unclosed openers makes each
    # one rescan the rest of the text (quadratic). Comments do not nest, so a second opener is
    # still comment body; it is accepted as the end of the match, which keeps one payload
    # shape caught ("<!-- system: ... <!-- -->") at the price of also flagging a keyword
    # between two openers when no closer follows at all. The atomic group commits to the
    # first keyword: a later one would end at the same terminator.
    _p(
        "html_comment_injection",
        "all",
        r"<!--(?>(?:(?!-->|<!--)[\s\S])*?\b(?:ignore|override|system|secret|hidden)\b)"
        r"(?:(?!-->|<!--)[\s\S])*+(?:-->|<!--)",
    ),
    # Stopping at the next "<div" keeps unclosed tags linear; that div is tried on its own.
    _p(
        "hidden_div",
        "all",
        r"<div\b(?:(?!<div\b)[^>])*?\bstyle\s*=\s*[\"'][^\"'>]*?display\s*:\s*none\b",
    ),
    _p(
        "translate_execute",
        "all",
        rf"\btranslate{_GAP}into\s+\S+\s+and\s+(?:execute|run|eval)\b",
    ),
    _p(
        "deception_hide",
        "all",
        rf"\b(?:do\s+not|don['\u2019]?t){_GAP}tell{_GAP}the\s+user\b",
    ),
    # Confined to one line: a shell command that interpolates a secret into a request. The
    # span stops at the next curl/wget, which is tried on its own, so a line of repeated
    # commands is scanned once instead of once per command.
    _p("exfil_curl", "all", rf"\bcurl\b(?:(?!\bcurl\b)[^\n])*?{_SECRET_VAR}"),
    _p("exfil_wget", "all", rf"\bwget\b(?:(?!\bwget\b)[^\n])*?{_SECRET_VAR}"),
    # The file name is usually the tail of a path (~/.aws/credentials), hence the \S*? prefix.
    _p(
        "read_secrets",
        "all",
        r"\bcat\s+(?:\S+\s+){0,8}?\S*?"
        r"(?:\.env|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc)\b",
    ),
    # --- scope "context": identity and C2 phrasing that is suspicious in always-on context ---
    # Requiring an article after "now" is what lets "You are now ready to ..." through.
    _p(
        "role_hijack",
        "context",
        rf"\byou(?:\s+are|['\u2019]re){_GAP}now\s+(?:a|an|the)\b",
    ),
    _p(
        "role_pretend",
        "context",
        rf"\bpretend{_GAP}(?:you\s+are|you['\u2019]re|to\s+be)\b",
    ),
    _p(
        "leak_system_prompt",
        "context",
        rf"\boutput{_GAP}(?:system|initial)\s+prompt\b",
    ),
    _p(
        "remove_filters",
        "context",
        rf"\b(?:respond|answer|reply)\s+without{_GAP}"
        r"(?:restrictions|limitations|filters|safety)\b",
    ),
    _p(
        "fake_update",
        "context",
        rf"\byou\s+have\s+been{_GAP}(?:updated|upgraded|patched)\s+to\b",
    ),
    _p("identity_override", "context", r"\bname\s+yourself\s+\S+"),
    _p("c2_node_registration", "context", r"\bregister\s+(?:as\s+)?a\s+node\b"),
    _p("c2_heartbeat", "context", r"\b(?:heartbeat|beacon|check-in)\s+(?:to|with)\b"),
    _p("c2_task_pull", "context", r"\bpull\s+(?:down\s+)?(?:new\s+)?tasks?\b"),
    _p("c2_network_connect", "context", r"\bconnect\s+to\s+the\s+network\b"),
    _p(
        "forced_action",
        "context",
        r"\byou\s+must\s+(?:\S+\s+){0,3}?(?:register|connect|report|beacon)\b",
    ),
    _p("anti_forensic_oneliner", "context", r"\bonly\s+use\s+one[\s-]?liners?\b"),
    _p(
        "anti_forensic_disk",
        "context",
        rf"\bnever{_GAP}(?:create|write){_GAP}(?:script|file)s?{_GAP}disk\b",
    ),
    # Options and other variable names may precede the agent one on the same command line.
    _p(
        "env_var_unset_agent",
        "context",
        r"\bunset\s+(?:-[A-Za-z]+\s+)*(?:[A-Za-z_][A-Za-z0-9_]*[ \t]+){0,8}?"
        r"[A-Za-z0-9_]*(?:CLAUDE|CODEX|HERMES|AGENT|OPENAI|ANTHROPIC)",
    ),
    _p(
        "known_c2_framework",
        "context",
        r"\b(?:cobalt\s*strike|sliver|havoc|mythic|metasploit|brainworm)\b",
    ),
    _p(
        "c2_explicit",
        "context",
        r"\bc2[\s_-]*(?:server|channel|infrastructure|beacon)s?\b",
    ),
    _p("c2_explicit_long", "context", r"\bcommand[\s-]+(?:and|&)[\s-]+control\b"),
    # --- scope "strict": also blocks legitimate-looking asks; used for memory/skill writes ---
    _p(
        "send_to_url",
        "strict",
        rf"\b(?:send|post|upload|transmit){_GAP}(?:to|at)\s+https?://",
    ),
    _p(
        "context_exfil",
        "strict",
        rf"\b(?:include|output|print|share){_GAP}"
        r"(?:conversations?|chat\s+history|previous\s+messages|(?:full|entire)\s+context)\b",
    ),
    _p("ssh_backdoor", "strict", r"authorized_keys"),
    _p("ssh_access", "strict", rf"{_HOME}/\.ssh\b"),
    _p("hermes_env", "strict", rf"{_HOME}/\.hermes/\.env\b"),
    _p(
        "agent_config_mod",
        "strict",
        rf"\b{_EDIT_VERBS}{_GAP}\S*?(?:AGENTS\.md|CLAUDE\.md|\.cursorrules|\.clinerules)\b",
    ),
    _p(
        "hermes_config_mod",
        "strict",
        rf"\b{_EDIT_VERBS}{_GAP}\S*?\.hermes/(?:config\.yaml|SOUL\.md)\b",
    ),
    # No leading \b so prefixed names such as GITHUB_TOKEN or db_password are caught too.
    _p(
        "hardcoded_secret",
        "strict",
        r"(?:api[_-]?key|token|secret|password)\s*[=:]\s*[\"'][A-Za-z0-9+/=_-]{20,}",
    ),
)

PATTERN_IDS: tuple[str, ...] = tuple(p.id for p in PATTERNS)


def _codepoint(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def _iter_findings(text: str, scope: str) -> Iterator[Finding]:
    try:
        max_rank = _SCOPE_RANK[scope]
    except KeyError:
        raise ValueError(f"unknown scope {scope!r}; expected one of {SCOPES}") from None

    text = text[:MAX_SCAN_CHARS]

    # Checked on the raw text: that is what the model will read, and the check must not depend
    # on how a future Unicode version's NFKC treats these characters.
    seen: set[str] = set()
    for match in _INVISIBLE_RE.finditer(text):
        ch = match.group()
        if ch not in seen:
            seen.add(ch)
            codepoint = _codepoint(ch)
            yield Finding(
                id=f"invisible_unicode_{codepoint}",
                message=_INVISIBLE_MESSAGE.format(codepoint=codepoint),
            )

    # NFKC folds fullwidth letters, ligatures and other compatibility forms onto plain ASCII,
    # so each pattern only has to be written once.
    normalized = unicodedata.normalize("NFKC", text)
    for pattern in PATTERNS:
        if _SCOPE_RANK[pattern.scope] <= max_rank and pattern.regex.search(normalized):
            yield Finding(id=pattern.id, message=_PATTERN_MESSAGE.format(id=pattern.id))


def scan(text: str, *, scope: Scope = "strict") -> list[Finding]:
    """Return every finding for ``text``: invisible characters first, then patterns in order.

    Only the first ``MAX_SCAN_CHARS`` characters are examined.
    """
    return list(_iter_findings(text, scope))


def check_content(text: str, *, scope: Scope = "strict") -> Finding | None:
    """Return the first finding ``scan`` would report, or ``None`` if the text is clean."""
    # Lazily consumed so a rejected write does not pay for the remaining patterns.
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
