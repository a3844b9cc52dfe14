"""A parsed query as PostgreSQL text search expressions, for the word indexes: the exact
('simple') and stemmed ('english') tsvector columns. Every value is bound as a parameter;
prefixes are rebuilt from letter and digit runs, so no expression can be malformed."""

from __future__ import annotations

from .sanitize import ParsedQuery, Term


def _prefix_tsquery(term: Term) -> str:
    """A to_tsquery text for a prefix term built only from letter/digit runs, so it cannot
    be malformed: 'dep':* or 'chat' <-> 'se':*."""
    runs = "".join(c if c.isalnum() else " " for c in term.text).split()
    if not runs:
        return ""
    quoted = [f"'{r}'" for r in runs]
    return " <-> ".join(quoted[:-1] + [quoted[-1] + ":*"])


def pg_term(term: Term, config: str) -> tuple[str, str] | None:
    """One term as a tsquery expression and its one parameter (None: nothing to match)."""
    if term.prefix:
        text = _prefix_tsquery(term)
        return (f"to_tsquery('{config}', %s)", text) if text else None
    # Quoted, websearch_to_tsquery reads the term as a phrase and nothing else.
    return f"websearch_to_tsquery('{config}', %s)", '"' + term.text.replace('"', " ") + '"'


def pg_tsquery(query: ParsedQuery, config: str = "simple") -> tuple[str, list[object]]:
    """A SQL expression of type tsquery: OR of AND groups, each term its own safe call.
    `config` is one of the two text search configurations the indexes use."""
    assert config in ("simple", "english")
    groups_sql = []
    params: list[object] = []
    for group in query.groups:
        parts = []
        for term in group:
            compiled = pg_term(term, config)
            if compiled is None:
                continue
            parts.append(f"!!{compiled[0]}" if term.negated else compiled[0])
            params.append(compiled[1])
        if parts:
            groups_sql.append("(" + " && ".join(parts) + ")")
    if not groups_sql:
        return "", []
    return "(" + " || ".join(groups_sql) + ")", params


def stem_covers(query: ParsedQuery) -> bool:
    """True when every exact match of `query` is also a stemmed match: the two indexes
    tokenize alike and the stemmed one holds the stem of every word the exact one holds,
    so this holds for words and phrases, but not past a NOT (a stem excludes more) or for a
    prefix (it can run past a stem: "deploym*" misses the stem "deploy")."""
    return not any(t.negated or t.prefix for g in query.groups for t in g)


def pg_stem_or_exact(query: ParsedQuery) -> tuple[str, list[object]]:
    """A condition on `m` that finds every exact and stemmed match of `query` (which the
    stemmed index covers, see _stem_covers) through the stemmed index alone: one GIN lookup
    and one tsvector recheck per candidate instead of two. A group of stop words only has
    no stems ('english' drops them, 'simple' keeps them); it is matched on the exact index,
    and for every other group the planner folds that branch away (numnode of a constant)."""
    stem, params = pg_tsquery(query, "english")
    branches = [f"m.stem_vector @@ {stem}"]
    for group in query.groups:
        part = ParsedQuery.of_groups([group])
        group_stem, group_stem_params = pg_tsquery(part, "english")
        group_exact, group_exact_params = pg_tsquery(part)
        branches.append(f"(numnode({group_stem}) = 0 AND m.search_vector @@ {group_exact})")
        params += [*group_stem_params, *group_exact_params]
    return "(" + " OR ".join(branches) + ")", params
