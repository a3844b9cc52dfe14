"""CJK grams: how a query reaches the CJK index (built in migrations/_fts_sql.py).

The index holds every message with CJK text, each CJK character replaced by the pair it
starts (a bigram), or by the character alone where its run of CJK ends; Latin words stay
words. A query term is looked up the same way: a run of two or more CJK characters as the
AND of its bigrams, a single character as a prefix (it begins some gram wherever it
occurs), a Latin word as itself. That finds every message holding the term, and a few that
hold its pieces apart; the search rechecks the exact substrings on those candidates. A
group of Latin words only ("kafka" in "kafka OR 部署") is looked up in the word indexes too,
which hold the messages without CJK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sessions_app.migrations._fts_sql import CJK_CODE_RANGES

from .sanitize import ParsedQuery, Term

_WORD_RE = re.compile(r"[^\W_]+")


def is_gram_char(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in CJK_CODE_RANGES)


#: One lookup in the CJK index: (token, prefix, is a CJK gram).
Piece = tuple[str, bool, bool]


def term_pieces(term: Term) -> list[Piece]:
    """What every message holding `term` has in the CJK index."""
    pieces: dict[Piece, None] = {}
    run = ""
    latin = ""
    for char in [*term.text, " "]:
        if is_gram_char(char):
            run += char
            if latin:
                pieces.update(dict.fromkeys((w, False, False) for w in _WORD_RE.findall(latin)))
                latin = ""
            continue
        latin += char
        if len(run) == 1:
            pieces.setdefault((run, True, True), None)
        for i in range(len(run) - 1):
            pieces.setdefault((run[i : i + 2], False, True), None)
        run = ""
    words = _WORD_RE.findall(latin)
    for i, word in enumerate(words):
        # A prefix term ("kuber*") runs on after its last word only.
        pieces.setdefault((word, term.prefix and i == len(words) - 1, False), None)
    return list(pieces)


@dataclass(frozen=True, slots=True)
class GramQuery:
    """A query for the CJK index: `pieces`, one AND list per group, the query to recheck
    them with (`query`), and `latin_part`, the groups without a CJK term."""

    pieces: tuple[tuple[Piece, ...], ...]
    query: ParsedQuery
    latin_part: ParsedQuery

    @property
    def has_grams(self) -> bool:
        return any(is_gram for group in self.pieces for _, _, is_gram in group)

    def fts5(self) -> str:
        """An FTS5 expression: every token is letters and digits, quoted all the same."""
        return " OR ".join(
            "("
            + " AND ".join(f'"{token}"' + ("*" if prefix else "") for token, prefix, _ in g)
            + ")"
            for g in self.pieces
        )

    def tsquery(self) -> str:
        """A to_tsquery('simple', …) text (tokens are letters and digits: no escaping)."""
        return " | ".join(
            "("
            + " & ".join(f"'{token}'" + (":*" if prefix else "") for token, prefix, _ in g)
            + ")"
            for g in self.pieces
        )


def split_for_grams(query: ParsedQuery) -> GramQuery:
    pieces: list[tuple[Piece, ...]] = []
    groups: list[tuple[Term, ...]] = []
    latin_groups: list[tuple[Term, ...]] = []
    for group in query.groups:
        found: dict[Piece, None] = {}
        for term in group:
            if not term.negated:
                found.update(dict.fromkeys(term_pieces(term)))
        if not found:
            continue
        pieces.append(tuple(found))
        groups.append(group)
        if not any(is_gram for _, _, is_gram in found):
            latin_groups.append(group)
    return GramQuery(
        pieces=tuple(pieces),
        query=ParsedQuery.of_groups(groups),
        latin_part=ParsedQuery.of_groups(latin_groups),
    )
