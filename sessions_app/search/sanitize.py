"""Turning what a person (or the model) typed into a query the indexes cannot choke on.

`sanitize_fts5_query` follows Hermes' rules (reference §5): balanced phrases are kept, FTS5
special characters become spaces, dotted/hyphenated/underscored words are quoted, dangling
AND/OR/NOT are dropped and the length is capped. A final pass rebuilds the result token by
token from a whitelist, so whatever comes out is a valid FTS5 expression: no column filter,
no NEAR group, no unbalanced quote, no operator without operands. Only OR / NOT / "phrases"
and prefix* survive as syntax.

`parse_query` turns the sanitised text into a small structure (OR of AND groups, NOT terms)
that the LIKE and PostgreSQL paths compile themselves, so they never see raw syntax either.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_QUERY_CHARS = 2048
#: Terms beyond this are dropped: each one costs an index lookup and the gain is nil.
MAX_TERMS = 16
OPERATORS = frozenset({"AND", "OR", "NOT"})

# Characters that mean something to FTS5 (or to a shell-happy user) and nothing to a search.
_SPECIALS = "+{}():\"^@/#&|~[]<>,;!?$=\\'"
_SPECIALS_RE = re.compile("[" + re.escape(_SPECIALS) + "%]")
_SPECIALS_CJK_RE = re.compile("[" + re.escape(_SPECIALS) + "]")
_PHRASE_RE = re.compile(r'"([^"]*)"(\*?)')
_PLACEHOLDER_RE = re.compile(r"\x00(\d+)\x00")
_JOINED_RE = re.compile(r"(?<![\w\x00])(\w+(?:[._-]\w+)+)(\*?)(?![\w\x00])")
_LEADING_OP_RE = re.compile(r"^\s*(?:AND|OR|NOT)(?:\s+|$)")
_TRAILING_OP_RE = re.compile(r"(?:^|\s+)(?:AND|OR|NOT)\s*$")

_CJK_RANGES = (
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0x3400, 0x4DBF),  # extension A
    (0x20000, 0x2A6DF),  # extension B
    (0x3000, 0x303F),  # CJK punctuation
    (0x3040, 0x309F),  # hiragana
    (0x30A0, 0x30FF),  # katakana
    (0xAC00, 0xD7AF),  # hangul syllables
)


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def contains_cjk(text: str) -> bool:
    return any(is_cjk(c) for c in text)


def cjk_count(text: str) -> int:
    return sum(1 for c in text if is_cjk(c))


def clean_text(text: str) -> str:
    """Control and invisible format characters (NUL, zero-width, bidi marks) become spaces.

    PostgreSQL refuses NUL in text; zero-width and direction marks split nothing visible
    but would glue or break terms in the substring (LIKE/trigram) paths.
    """
    out = []
    for char in text:
        category = unicodedata.category(char)
        out.append(" " if category in ("Cc", "Cf", "Cs") else char)
    return "".join(out)


def _is_token_char(char: str) -> bool:
    """Characters unicode61 indexes: letters, digits and private-use characters."""
    return unicodedata.category(char)[0] in "LN" or unicodedata.category(char) == "Co"


def _is_bareword(text: str) -> bool:
    """FTS5 barewords: ASCII letters/digits, '_', U+001A and anything non-ASCII."""
    return bool(text) and all(
        c.isascii() and (c.isalnum() or c in "_\x1a") or not c.isascii() for c in text
    )


def _has_token_chars(text: str) -> bool:
    return any(_is_token_char(c) for c in text)


def is_symbol_term(text: str) -> bool:
    """A term of symbols only (emoji, ©, →): no word index holds it, a substring scan does."""
    return not _has_token_chars(text) and any(unicodedata.category(c) == "So" for c in text)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def sanitize_fts5_query(text: str) -> str:
    """Return a safe FTS5 MATCH expression for `text`, or "" when nothing searchable is left."""
    if not isinstance(text, str):
        return ""
    query = clean_text(text[:MAX_QUERY_CHARS])

    # 1. Protect balanced phrases; any quote left over is unbalanced and goes.
    phrases: list[str] = []

    def protect(match: re.Match[str]) -> str:
        phrases.append(match.group(0))
        return f" \x00{len(phrases) - 1}\x00 "

    query = _PHRASE_RE.sub(protect, query)
    query = query.replace('"', " ")

    # 2. Special characters become spaces ('%' is kept for CJK, where LIKE escapes it).
    specials = _SPECIALS_RE if not contains_cjk(query) else _SPECIALS_CJK_RE
    query = specials.sub(" ", query)

    # 3. One '*' at most, and only as a suffix.
    query = re.sub(r"\*+", "*", query)
    query = re.sub(r"(^|\s)\*", r"\1", query)

    # 4. Dangling boolean operators.
    query = _strip_dangling_operators(query)

    # 5. Words joined by '.', '_' or '-' are one phrase ("my-app.config.ts").
    query = _JOINED_RE.sub(lambda m: _quote(m.group(1)) + m.group(2), query)

    # 6. Restore phrases, then rebuild the whole expression from whitelisted tokens.
    query = _PLACEHOLDER_RE.sub(lambda m: phrases[int(m.group(1))], query)
    return _rebuild(query)


def _strip_dangling_operators(query: str) -> str:
    previous = None
    while previous != query:
        previous = query
        query = _LEADING_OP_RE.sub("", query)
        query = _TRAILING_OP_RE.sub("", query)
    return query.strip()


_TOKEN_RE = re.compile(r'"(?:[^"]|"")*"\*?|[^\s"]+')


def _rebuild(query: str) -> str:
    """Whitelist pass: every token becomes an operator, a bareword(*) or a quoted phrase(*).

    Operator words not in capitals ("or", "Not") are dropped, as Hermes does: in a typed
    question they are filler, not words to require. Symbol-only terms (an emoji) count
    only in a query that has no word at all ("🦆"); beside words they are ignored.
    """
    tokens = _TOKEN_RE.findall(query)
    symbols_only = not any(_has_token_chars(t) for t in tokens if t.upper() not in OPERATORS)
    out: list[str] = []
    terms = 0
    for raw in tokens:
        if raw in OPERATORS:
            out.append(raw)
            continue
        if raw.upper() in OPERATORS:
            continue
        prefix = raw.endswith("*")
        body = raw[:-1] if prefix else raw
        if body.startswith('"') and body.endswith('"') and len(body) >= 2:
            inner = body[1:-1].replace('""', '"')
        else:
            # Edge hyphens and dots ("-foo", "foo.") join nothing.
            inner = body.replace("*", " ").strip(" .-")
        if not (_has_token_chars(inner) or symbols_only and is_symbol_term(inner)):
            continue
        if terms >= MAX_TERMS:
            break
        terms += 1
        is_phrase = body.startswith('"')
        # An operator word with a prefix star ("AND*") is still the operator to FTS5: quote it.
        bare = (
            not is_phrase
            and _is_bareword(inner)
            and inner not in OPERATORS
            and _has_token_chars(inner)
        )
        token = inner if bare else _quote(inner)
        out.append(token + ("*" if prefix else ""))
    return " ".join(_fix_operators(out))


def _fix_operators(tokens: list[str]) -> list[str]:
    """Drop operators with a missing operand; of adjacent operators keep the last."""
    fixed: list[str] = []
    for token in tokens:
        if token in OPERATORS:
            if not fixed:
                continue
            if fixed[-1] in OPERATORS:
                fixed[-1] = token
                continue
        fixed.append(token)
    while fixed and fixed[-1] in OPERATORS:
        fixed.pop()
    return fixed


# --- structure for the non-FTS5 paths ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    text: str  # the words, unquoted, without '*'
    phrase: bool = False
    prefix: bool = False
    negated: bool = False


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """A sanitised query: `fts` for FTS5, and OR-of-AND `groups` for everything else."""

    fts: str
    groups: tuple[tuple[Term, ...], ...]

    def __bool__(self) -> bool:
        return bool(self.groups)

    @property
    def positive_terms(self) -> list[str]:
        seen: dict[str, None] = {}
        for group in self.groups:
            for term in group:
                if not term.negated:
                    seen.setdefault(term.text, None)
        return list(seen)

    @property
    def has_cjk(self) -> bool:
        return contains_cjk(self.fts)

    @property
    def has_prefix(self) -> bool:
        return any(t.prefix for g in self.groups for t in g)

    @property
    def has_symbols(self) -> bool:
        return any(is_symbol_term(t.text) for g in self.groups for t in g)

    def all_terms_at_least(self, length: int) -> bool:
        return all(len(t.text) >= length for g in self.groups for t in g)

    @classmethod
    def of_groups(cls, groups: list[tuple[Term, ...]]) -> ParsedQuery:
        """The query made of some of another query's groups (each with a positive term)."""
        fts = " OR ".join(
            " ".join(_term_fts(t) for t in sorted(g, key=lambda t: t.negated)) for g in groups
        )
        return cls(fts=fts, groups=tuple(groups))


def _term_fts(term: Term) -> str:
    bare = not term.phrase and _is_bareword(term.text) and term.text not in OPERATORS
    text = term.text if bare else _quote(term.text)
    return ("NOT " if term.negated else "") + text + ("*" if term.prefix else "")


def parse_query(text: str) -> ParsedQuery:
    """Sanitise `text` and split it into groups: OR separates groups, NOT negates the next
    term, AND is implicit. A group needs at least one positive term to mean anything."""
    fts = sanitize_fts5_query(text)
    groups: list[tuple[Term, ...]] = []
    current: list[Term] = []
    negate = False
    for raw in _TOKEN_RE.findall(fts):
        if raw == "OR":
            groups.append(tuple(current))
            current, negate = [], False
            continue
        if raw == "AND":
            continue
        if raw == "NOT":
            negate = True
            continue
        prefix = raw.endswith("*")
        body = raw[:-1] if prefix else raw
        phrase = body.startswith('"')
        inner = body[1:-1].replace('""', '"') if phrase else body
        inner = " ".join(inner.split())
        if inner:
            current.append(Term(inner, phrase=phrase, prefix=prefix, negated=negate))
        negate = False
    groups.append(tuple(current))
    kept = tuple(g for g in groups if any(not t.negated for t in g))
    return ParsedQuery(fts=fts if kept else "", groups=kept)
