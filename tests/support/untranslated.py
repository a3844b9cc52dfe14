"""Finds the English a page still shows to a person who reads 简体中文: runs of English words
in its visible text and in the attributes a person reads (placeholder, title, aria-label,
alt, a button's value), outside what people wrote themselves and outside names that stay
as they are (docs/glossary-zh-Hans.md).

What people wrote is recognised by the seed's markers (tests/privacy/conftest.py: every text
a person stored carries one): a text node holding a marker is theirs. Code, keyboard keys and
preformatted text are left alone, as is anything marked `translate="no"` (the HTML
attribute for "not to be translated": brand names, languages named in their own words)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Names that stay as they are in every language (the glossary's last line).
KEPT_NAMES = (
    "Hermes Web",
    "Hermes Agent",
    "Hermes",
    "MEMORY.md",
    "USER.md",
    "SKILL.md",
    "state.db",
    "OpenAI",
    "OpenRouter",
    "ChatGPT",
    "Claude",
    "Anthropic",
    "MCP",
    "API",
    "REST",
    "JSON",
    "YAML",
    "ZIP",
    "zip",
    "Markdown",
    "OpenID Connect",
    "OIDC",
    "SSO",
    "SMTP",
    "URL",
    "HTTP",
    "UTC",
    "English",
    "Django",
    "Celery",
    "Redis",
    "SQLite",
    "PostgreSQL",
)
MARKER = re.compile(r"mk[a-z0-9]+")
WORD = re.compile(r"[A-Za-z][A-Za-z'’]*[A-Za-z]")
# Paths, addresses and identifiers are not words a person reads as prose.
NOT_PROSE = re.compile(
    r"https?://\S+|[\w.+-]+@[\w-]+\.[\w.]+|(?<!\w)/[\w./<>?=&%-]*|\b\w+[_.]\w+(?:[_.]\w+)*\b"
    r"|\b[A-Za-z]*\d[\w-]*\b"
)
SKIPPED_TAGS = frozenset({"script", "style", "code", "pre", "kbd", "samp", "textarea", "template"})
VOID_TAGS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
READ_ATTRIBUTES = ("placeholder", "title", "aria-label", "alt")
_KEPT = re.compile("|".join(re.escape(name) for name in sorted(KEPT_NAMES, key=len, reverse=True)))


def english_in(text: str, *, also_kept: frozenset[str] = frozenset()) -> str:
    """The English words left in `text` once kept names and non-prose are taken out."""
    if MARKER.search(text):
        return ""
    text = _KEPT.sub(" ", " ".join(text.split()))
    # The page's own names that are more than a word go whole: "deploy-zh" is one name.
    for name in sorted(also_kept, key=len, reverse=True):
        if not WORD.fullmatch(name):
            text = text.replace(name, " ")
    text = NOT_PROSE.sub(" ", text)
    return " ".join(w for w in WORD.findall(text) if w not in also_kept)


class _Scanner(HTMLParser):
    def __init__(self, also_kept: frozenset[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.also_kept = also_kept
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.found: list[str] = []
        # Text read so far in one run: a search highlight (<mark>) does not end it, so the
        # words around a highlighted marker are known to be the person's too.
        self.run: list[str] = []

    @property
    def skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "mark":
            self._end_run()
        attributes = dict(attrs)
        skipped = (
            self.skipping
            or tag in SKIPPED_TAGS
            or attributes.get("translate") == "no"
            or "hidden" in attributes
            and tag != "input"
        )
        if not skipped:
            read = [attributes.get(name) or "" for name in READ_ATTRIBUTES]
            if tag == "input" and attributes.get("type") in {"submit", "button", "reset"}:
                read.append(attributes.get("value") or "")
            for value in read:
                self._note(value)
        if tag not in VOID_TAGS:
            self.stack.append((tag, skipped))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_TAGS:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag != "mark":
            self._end_run()
        # Browsers close what was left open; so does this.
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                return

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.run.append(data)

    def _end_run(self) -> None:
        if self.run:
            self._note("".join(self.run))
            self.run = []

    def _note(self, text: str) -> None:
        words = english_in(text, also_kept=self.also_kept)
        if words:
            self.found.append(" ".join(text.split()))


def untranslated(html: str, *, also_kept: frozenset[str] = frozenset()) -> list[str]:
    """The texts of `html` that still hold English words (each once, in page order).
    `also_kept`: words of this page's own data that are not prose (usernames, model ids)."""
    scanner = _Scanner(also_kept)
    scanner.feed(html)
    scanner.close()
    scanner._end_run()
    return list(dict.fromkeys(scanner.found))
