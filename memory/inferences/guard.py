"""The write-path gate for inferences.

The extractor reads conversations, which may carry text written by someone other than
the user (pasted pages, quoted mail). An inference is later fenced into prompts as reference
data, so an extractor tricked into "remembering" an instruction would turn it into a
standing order. Extracted statements therefore pass two checks before they can be
recalled: the threat scanner shared with memory and skills (strict scope), and a heuristic
for imperative content — instructions addressed to the assistant, links, addresses to send
things to, and tool names. Either sends the statement to quarantine: kept for the person to
review on the Inferences page, never recalled or shown to the agent.

The heuristic is a pre-filter, not a guarantee (OWASP LLM01); quarantine errs on the side
of asking the person.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from django.utils.translation import gettext, gettext_lazy

from ..scanner import blocked_reason, scan

MAX_STATEMENT_CHARS = 300

# Tools the agent can call; naming one in a "fact" is how an injected instruction would
# steer it. `memory` alone is an ordinary word, so only its tool-like uses count.
_TOOL_NAMES = re.compile(
    r"\b(session_search|skills_list|skill_view|skill_manage|user_profile_search|"
    r"user_profile_feedback)\b|\bmemory\s*(\(|tool\b)|`memory`",
    re.IGNORECASE,
)
_LINK = re.compile(r"\b(?:https?://|ftp://|www\.)\S+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b")
# Statements are written in the third person about the user; one that opens with a verb
# in the imperative is an order, not an observation ("Uses Django" is fine: \buse\b).
_IMPERATIVE_START = re.compile(
    r"^\s*(please\s+)?(always|never|do|don't|do not|must|send|post|upload|forward|email|"
    r"call|run|execute|use|include|ignore|disregard|forget|tell|reply|respond|answer|say|"
    r"output|print|write|save|store|remember|make sure|ensure|share|reveal|leak|visit|"
    r"click|fetch|download|install|delete|remove|obey|follow)\b",
    re.IGNORECASE,
)
_ADDRESSED = re.compile(
    r"\b(you|the assistant|assistant|the agent|agent|hermes|the ai|the model|ai)\s+"
    r"(must|should|shall|will|need to|needs to|has to|have to|are to|is to|always|never|"
    r"may not|cannot|can't)\b",
    re.IGNORECASE,
)
_STANDING_ORDER = re.compile(
    r"\b(always|never|every time|whenever)\b.{0,40}\b(send|post|upload|forward|share|include|"
    r"email|call|run|reply|respond|answer|mention|tell|say|output|reveal|use)\b",
    re.IGNORECASE,
)
_SEND_TO = re.compile(
    r"\b(send|post|upload|forward|transmit|exfiltrate|leak|report)\b.{0,80}\bto\b",
    re.IGNORECASE,
)
_PUNCT_END = re.compile(r"[\s.!?;:,]+$")
_SPACES = re.compile(r"\s+")


def clean_statement(text: str) -> str:
    """One line, single spaces, NFKC: how a statement is stored."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def normalise(text: str) -> str:
    """The comparison form: case-folded, trailing punctuation dropped."""
    return _PUNCT_END.sub("", clean_statement(text)).casefold()


def statement_digest(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def imperative_reason(text: str) -> str:
    """Why `text` reads as an instruction rather than a fact, or ''."""
    if _LINK.search(text):
        return "contains a link"
    if _EMAIL.search(text):
        return "contains an address to send things to"
    if _TOOL_NAMES.search(text):
        return "names one of the agent's tools"
    if _IMPERATIVE_START.search(text) or _ADDRESSED.search(text):
        return "is an instruction to the assistant, not a fact about you"
    if _STANDING_ORDER.search(text) or _SEND_TO.search(text):
        return "asks for something to be sent or done"
    return ""


#: The reasons above (kept in English with the inference) as the person reads them.
_REASONS_SHOWN = {
    "contains a link": gettext_lazy("contains a link"),
    "contains an address to send things to": gettext_lazy("contains an address to send things to"),
    "names one of the agent's tools": gettext_lazy("names one of the agent's tools"),
    "is an instruction to the assistant, not a fact about you": gettext_lazy(
        "is an instruction to the assistant, not a fact about you"
    ),
    "asks for something to be sent or done": gettext_lazy("asks for something to be sent or done"),
}
_THREAT_PREFIX = "matches threat pattern(s): "


def reason_shown(reason: str) -> str:
    """A stored quarantine reason ("contains a link") in the active language."""
    if reason in _REASONS_SHOWN:
        return str(_REASONS_SHOWN[reason])
    if reason.startswith(_THREAT_PREFIX):
        return gettext("matches threat pattern(s): %(patterns)s") % {
            "patterns": reason.removeprefix(_THREAT_PREFIX)
        }
    return reason


def quarantine_reason(text: str) -> str:
    """'' when `text` may be recalled; otherwise why it is held for the person's review."""
    findings = scan(text, scope="strict")
    if findings:
        return f"{_THREAT_PREFIX}{blocked_reason(findings)}"[:300]
    return imperative_reason(text)
