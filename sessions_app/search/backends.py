"""The retrieval stage: which index answers a query, and the SQL for each vendor.

Routing (reference §5, the same on both vendors):

- Latin text → the word indexes, exact and stemmed, fused: FTS5 `unicode61` and
  `porter unicode61` (BM25), on PostgreSQL the 'simple' and 'english' tsvector columns
  (`ts_rank`). A message scores its stemmed score plus EXACT_WEIGHT times its exact one, so
  "camping" finds "camped" while a message with the very words typed still comes first.
- CJK (Chinese, Japanese, Korean words) → the CJK gram index, ranked (FTS5 BM25 over
  `messages_fts_cjk`; PostgreSQL `ts_rank` over `cjk_vector`): every CJK term, whatever
  its length, is looked up by its character bigrams (search/cjk.py), Latin words as words,
  and the candidates are rechecked for the exact substrings. That index holds only
  messages with CJK text: groups of Latin words only in such a query ("kafka OR 部署") are
  ranked by the word indexes too, and a message found by both keeps its better score.
- A query of symbols only (an emoji: "🦆") → the trigram index (FTS5 trigram; on
  PostgreSQL `ILIKE` served by the pg_trgm index) when it has at least 3 characters, else
  an escaped LIKE scan; so does CJK punctuation with no CJK word.
- A Latin query with no hits is retried on the trigram index (every term ≥3 characters),
  which finds substrings the tokenizer split differently ("websocket" in "websockets").

Ranking cost grows with the number of matches, so very common queries rank only their
newest matches (SQLite: the newest RANK_WINDOW matches of each index, found on the index
alone, grown while they hold too few of the owner's; PostgreSQL: a recent slice sized
from an upper bound of the matches built from the planner's estimate of each term, grown
likewise). Specific queries are ranked in full.

Every statement filters by owner inside the SQL, binds every value, and excludes deleted
sessions. Nothing raw from the user reaches the SQL text: queries are sanitised and
rebuilt by `sanitize.parse_query` first.
"""

from __future__ import annotations

import logging

from django.db import connection

from core.db.rows import marks

from ..selectors import escape_like
from .cjk import GramQuery, split_for_grams
from .hits import (
    MARK_END,
    MARK_START,
    Hit,
    HitPage,
    parse_marked,
    substring_snippet,
    tool_calls_text,
)
from .sanitize import ParsedQuery, cjk_count, contains_cjk, is_symbol_term
from .sql import (
    MESSAGE,
    RANK_WINDOW_GROWTH,
    SESSION,
    Filters,
    filter_sql,
    pg_bound,
    pg_ranked,
    rows_to_hits,
    run_read,
)
from .tsquery import pg_stem_or_exact, pg_term, pg_tsquery, stem_covers

logger = logging.getLogger(__name__)

SNIPPET_TOKENS = 24
SEARCHABLE_ROLES = ("user", "assistant", "tool")
#: Matches ranked per query and index on SQLite (the newest); fewer matches are all ranked.
RANK_WINDOW = 2000
#: Substring scans (LIKE; PostgreSQL's trigram path) stop after this many rows.
UNRANKED_ROWS = 100
#: Weight of the exact index's score beside the stemmed one's (both word routes).
EXACT_WEIGHT = 0.5


# --- query compilers -----------------------------------------------------------------------


def _fts_phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def trigram_match(query: ParsedQuery) -> str:
    """An FTS5 expression for the trigram table: every term quoted, prefixes dropped
    (a trigram index matches substrings anyway)."""
    groups = []
    for group in query.groups:
        positive = [_fts_phrase(t.text) for t in group if not t.negated]
        negative = [f"NOT {_fts_phrase(t.text)}" for t in group if t.negated]
        groups.append(" ".join(positive + negative))
    return " OR ".join(groups)


def _like_condition(
    query: ParsedQuery, *, columns: tuple[str, ...], operator: str
) -> tuple[str, list[object]]:
    """(group1) OR (group2) …, each group an AND of (col LIKE %term% OR …) / NOT (…)."""
    groups_sql = []
    params: list[object] = []
    for group in query.groups:
        terms_sql = []
        for term in group:
            pattern = f"%{escape_like(term.text)}%"
            ors = " OR ".join(f"{col} {operator} %s ESCAPE '\\'" for col in columns)
            params.extend([pattern] * len(columns))
            terms_sql.append(("NOT " if term.negated else "") + f"({ors})")
        groups_sql.append("(" + " AND ".join(terms_sql) + ")")
    return "(" + " OR ".join(groups_sql) + ")", params


# --- SQLite ---------------------------------------------------------------------------------


def _sqlite_match(
    table: str,
    match: str,
    owner_id: int,
    filters: Filters,
    limit: int,
    recheck: tuple[str, list[object]] = ("", []),
) -> list[Hit]:
    """BM25-ranked matches. Ranking costs several microseconds per matching row (a document
    size lookup each) and the owner filter a message and a session lookup, so a common query
    (say 50,000 matches) ranks only a window of the newest matches: the first statement
    finds the rowid where the newest RANK_WINDOW matches start, on the index alone (no
    join, no ranking), the second ranks the owner's matches from there on. A window holding
    fewer than `limit` of the owner's matches (they are a small share of the index) grows
    RANK_WINDOW_GROWTH times, until it covers every match. `recheck`: an extra condition
    on the message row `m`, and its parameters."""
    where, params = filter_sql(owner_id, filters)
    if recheck[0]:
        where = f" AND {recheck[0]}{where}"
        params = [*recheck[1], *params]
    sql = f"""
        SELECT m.id, m.session_id, m.role, m.timestamp, -f.rank, m.active
        FROM {table} f
        JOIN {MESSAGE} m ON m.id = f.rowid
        JOIN {SESSION} s ON s.id = m.session_id
        WHERE {table} MATCH %s AND f.rowid >= %s {where}
        ORDER BY f.rank LIMIT %s"""  # noqa: S608 - table is one of our constants
    start = (
        f"SELECT rowid FROM {table} WHERE {table} MATCH %s ORDER BY rowid DESC LIMIT 1 OFFSET %s"  # noqa: E501, S608
    )
    window = RANK_WINDOW
    while True:
        found = run_read(start, [match, window - 1])
        lowest = found[0][0] if found else 0
        rows = run_read(sql, [match, lowest, *params, limit])
        if len(rows) >= limit or not lowest:
            return rows_to_hits(rows)
        window *= RANK_WINDOW_GROWTH


def _sqlite_words(query: ParsedQuery, owner_id: int, filters: Filters, limit: int) -> list[Hit]:
    """The stemmed and the exact index, each BM25-scored, fused (module docstring).

    When every exact match is also a stemmed one (words and phrases; see stem_covers) and
    the stemmed ranking holds all of the owner's matches (fewer than `limit`), those are
    every candidate there is: the exact index only scores them, in one pass over its
    matches between the lowest and the highest, BM25 computed for them alone (a third of
    ranking the index), and each gets its whole fused score. Otherwise the exact index is
    ranked too and the two rankings fused, so that a message with the very words typed is
    found even where more than `limit` messages hold other forms of them, and past a NOT
    or a prefix ("deploym*" misses the stem "deploy"), where it has matches of its own."""
    stemmed = _sqlite_match("messages_fts_stem", query.fts, owner_id, filters, limit)
    if len(stemmed) < limit and stem_covers(query):
        exact_scores = _sqlite_scores("messages_fts", query.fts, stemmed)
        for hit in stemmed:
            hit.score += EXACT_WEIGHT * exact_scores.get(hit.message_id, 0.0)
        return sorted(stemmed, key=lambda h: (-h.score, -h.message_id))
    exact = _sqlite_match("messages_fts", query.fts, owner_id, filters, limit)
    fused = {h.message_id: h for h in stemmed}
    for hit in exact:
        hit.score *= EXACT_WEIGHT
        if hit.message_id in fused:
            fused[hit.message_id].score += hit.score
        else:
            fused[hit.message_id] = hit
    return sorted(fused.values(), key=lambda h: (-h.score, -h.message_id))[:limit]


def _sqlite_scores(table: str, match: str, hits: list[Hit]) -> dict[int, float]:
    """`table`'s BM25 score (higher is better) of each of `hits` it matches."""
    if not hits:
        return {}
    among, params = _among([h.message_id for h in hits])
    sql = f"SELECT rowid, -rank FROM {table} WHERE {table} MATCH %s AND {among}"  # noqa: S608
    return dict(run_read(sql, [match, *params]))


def _among(ids: list[int]) -> tuple[str, list[object]]:
    """A condition on an FTS5 table's rowid for "one of `ids`": FTS5 answers `rowid IN
    (…)` with one lookup of the whole MATCH per id, so the matches between the lowest and
    the highest id are read once and the ids tested on the rows (`+rowid` keeps the IN
    list out of FTS5's hands)."""
    return f"rowid BETWEEN %s AND %s AND +rowid IN ({marks(ids)})", [min(ids), max(ids), *ids]


def _sqlite_snippets(table: str, match: str, hits: list[Hit], *, prefix: bool = False) -> None:
    """Snippets of the content column (never the tool-call JSON beside it).

    A few snippets are looked up one id at a time (`rowid IN (…)`), except for a prefix
    query (`prefix`), where each lookup would first merge the doclists of every indexed
    word with that prefix (4 ms for "kuber*" at 1,000,000 messages, nine times for nine
    snippets): there the matches are read once (`_among`)."""
    if not hits:
        return
    ids = [h.message_id for h in hits]
    if prefix:
        among, params = _among(ids)
    else:
        among, params = f"rowid IN ({marks(ids)})", ids
    sql = f"""
        SELECT rowid, snippet({table}, 0, %s, %s, %s, {SNIPPET_TOKENS})
        FROM {table} WHERE {table} MATCH %s AND {among}"""  # noqa: S608
    rows = dict(run_read(sql, [MARK_START, MARK_END, "…", match, *params]))
    for hit in hits:
        if rows.get(hit.message_id):
            hit.snippet = parse_marked(rows[hit.message_id])


# --- PostgreSQL --------------------------------------------------------------------------


# ts_headline drops whatever its parser takes for a tag ("<b>"); hiding angle brackets as
# private-use characters keeps the text whole, and they are put back afterwards.
# Content only: a match in tool-call arguments gets a readable snippet from add_snippets.
_PG_TEXT = (
    "translate(coalesce(CASE WHEN m.role = 'tool' THEN left(m.content, 8192) ELSE m.content END,"
    " ''), '<>', chr(57346) || chr(57347))"
)
_PG_HEADLINE_OPTIONS = (
    f'StartSel="{MARK_START}", StopSel="{MARK_END}", MaxWords=28, MinWords=10, '
    'ShortWord=1, MaxFragments=2, FragmentDelimiter=" … "'
)


def _pg_words(query: ParsedQuery, owner_id: int, filters: Filters, limit: int) -> list[Hit]:
    """Matches of either tsvector, ranked by the fused ts_rank (see the module docstring),
    over a recent slice when the query is common (sql.pg_ranked)."""
    exact, exact_params = pg_tsquery(query)
    if not exact:
        return []
    stem, stem_params = pg_tsquery(query, "english")
    covered = stem_covers(query)
    if covered:
        match, match_params = pg_stem_or_exact(query)
    else:
        match, match_params = "(m.search_vector @@ q.exact OR m.stem_vector @@ q.stem)", []
    where, params = filter_sql(owner_id, filters)
    sql = f"""
        SELECT m.id, m.session_id, m.role, m.timestamp,
               ts_rank(m.stem_vector, q.stem) + %s * ts_rank(m.search_vector, q.exact),
               m.active
        FROM {MESSAGE} m
        JOIN {SESSION} s ON s.id = m.session_id
        CROSS JOIN (SELECT {exact} AS exact, {stem} AS stem) q
        WHERE {match} {where} {{window}}
        ORDER BY 5 DESC, m.id DESC LIMIT %s"""  # noqa: S608 - expr holds placeholders only
    conditions = []
    for group in query.groups:
        conditions.append([])
        for term in group:
            compiled = [pg_term(term, "simple"), pg_term(term, "english")]
            if term.negated or None in compiled:
                continue
            if covered:
                term_sql, term_params = pg_stem_or_exact(ParsedQuery.of_groups([(term,)]))
                conditions[-1].append((term_sql, tuple(term_params)))
                continue
            (exact_term, exact_param), (stem_term, stem_param) = compiled
            conditions[-1].append(
                (
                    f"(m.search_vector @@ {exact_term} OR m.stem_vector @@ {stem_term})",
                    (exact_param, stem_param),
                )
            )
    head = [EXACT_WEIGHT, *exact_params, *stem_params, *match_params, *params]
    return rows_to_hits(pg_ranked(sql, head, limit, pg_bound(conditions)))


def _pg_headlines(query: ParsedQuery, hits: list[Hit]) -> None:
    # The 'english' configuration highlights stemmed matches and exact ones alike.
    expr, qparams = pg_tsquery(query, "english")
    if not hits or not expr:
        return
    sql = f"""
        SELECT m.id, ts_headline('english', {_PG_TEXT}, q.query, %s)
        FROM {MESSAGE} m CROSS JOIN (SELECT {expr} AS query) q
        WHERE m.id = ANY(%s)"""  # noqa: S608 - expr holds placeholders only
    # Placeholders in text order: the options come before the subquery's.
    ids = [h.message_id for h in hits]
    rows = dict(run_read(sql, [_PG_HEADLINE_OPTIONS, *qparams, ids], scan=False))
    for hit in hits:
        text = rows.get(hit.message_id)
        if text:
            text = text.replace("\ue002", "<").replace("\ue003", ">")
            hit.snippet = parse_marked(text)


# --- CJK grams -------------------------------------------------------------------------------


def _cjk(query: ParsedQuery, owner_id: int, filters: Filters, limit: int) -> list[Hit]:
    """Ranked matches of the CJK gram index, rechecked for the exact substrings, fused
    with the word indexes' matches of the query's Latin-only groups (module docstring)."""
    split = split_for_grams(query)
    postgres = connection.vendor == "postgresql"
    recheck = _like_condition(
        split.query, columns=("m.content",), operator=_like_operator(split.query)
    )
    if postgres:
        hits = _pg_grams(split, recheck, owner_id, filters, limit)
    else:
        hits = _sqlite_match("messages_fts_cjk", split.fts5(), owner_id, filters, limit, recheck)
    if not split.latin_part:
        return hits
    words = (_pg_words if postgres else _sqlite_words)(split.latin_part, owner_id, filters, limit)
    if postgres:
        # ts_rank divides by the number of distinct terms in its query (BM25 sums over
        # them): undone, so that the two queries' scores compare.
        for hit in hits:
            hit.score *= len({p[0] for g in split.pieces for p in g})
        for hit in words:
            hit.score *= len(split.latin_part.positive_terms)
    best = {h.message_id: h for h in hits}
    for hit in words:
        if hit.message_id not in best or hit.score > best[hit.message_id].score:
            best[hit.message_id] = hit
    return sorted(best.values(), key=lambda h: (-h.score, -h.message_id))[:limit]


def _pg_grams(
    split: GramQuery,
    recheck: tuple[str, list[object]],
    owner_id: int,
    filters: Filters,
    limit: int,
) -> list[Hit]:
    """Matches of `cjk_vector`, ranked by ts_rank, over a recent slice when the query is
    common (sql.pg_ranked)."""
    tsquery = split.tsquery()
    conditions = [
        [
            ("m.cjk_vector @@ to_tsquery('simple', %s)", (f"'{token}'" + (":*" if prefix else ""),))
            for token, prefix, _ in group
        ]
        for group in split.pieces
    ]
    where, params = filter_sql(owner_id, filters)
    sql = f"""
        SELECT m.id, m.session_id, m.role, m.timestamp, ts_rank(m.cjk_vector, q.query), m.active
        FROM {MESSAGE} m
        JOIN {SESSION} s ON s.id = m.session_id
        CROSS JOIN (SELECT to_tsquery('simple', %s) AS query) q
        WHERE m.cjk_vector @@ q.query AND {recheck[0]} {where} {{window}}
        ORDER BY 5 DESC, m.id DESC LIMIT %s"""  # noqa: S608 - placeholders only
    head = [tsquery, *recheck[1], *params]
    return rows_to_hits(pg_ranked(sql, head, limit, pg_bound(conditions)))


# --- substring scans (LIKE, and PostgreSQL's trigram path) --------------------------------


def _like_operator(query: ParsedQuery) -> str:
    """SQLite's LIKE already ignores ASCII case. On PostgreSQL ILIKE is needed for cased
    scripts (and pg_trgm serves both); text without case (CJK) takes the cheaper LIKE."""
    if connection.vendor != "postgresql":
        return "LIKE"
    caseless = all(t.text.lower() == t.text.upper() for g in query.groups for t in g)
    return "LIKE" if caseless else "ILIKE"


def _like(
    query: ParsedQuery, owner_id: int, filters: Filters, limit: int, *, content_only: bool
) -> list[Hit]:
    # Unranked, newest first: each extra row means scanning further back in time.
    limit = min(limit, UNRANKED_ROWS)
    postgres = connection.vendor == "postgresql"
    if content_only:
        columns: tuple[str, ...] = ("m.content",)
    elif postgres:
        columns = ("m.content", "m.tool_name", "coalesce(m.tool_calls::text, '')")
    else:
        columns = ("m.content", "m.tool_name", "coalesce(m.tool_calls, '')")
    condition, cparams = _like_condition(query, columns=columns, operator=_like_operator(query))
    where, params = filter_sql(owner_id, filters)
    # The literal role test lets PostgreSQL use the partial trigram index.
    extra = " AND m.role <> 'tool'" if content_only else ""
    sql = f"""
        SELECT m.id, m.session_id, m.role, m.timestamp, 0, m.active
        FROM {MESSAGE} m
        JOIN {SESSION} s ON s.id = m.session_id
        WHERE {condition}{extra} {where}
        ORDER BY m.id DESC LIMIT %s"""  # noqa: S608 - condition holds placeholders only
    return rows_to_hits(run_read(sql, [*cparams, *params, limit]))


def _substring_snippets(query: ParsedQuery, hits: list[Hit], *, whole_words: bool = False) -> None:
    if not hits:
        return
    ids = [h.message_id for h in hits]
    calls = "tool_calls::text" if connection.vendor == "postgresql" else "tool_calls"
    sql = f"""
        SELECT id, substr(content, 1, 20000), tool_name, substr({calls}, 1, 20000)
        FROM {MESSAGE} WHERE id IN ({marks(ids)})"""  # noqa: S608
    rows = {row[0]: row for row in run_read(sql, ids, scan=False)}
    terms = query.positive_terms
    prefixes = frozenset(t.text for g in query.groups for t in g if t.prefix)
    for hit in hits:
        row = rows.get(hit.message_id)
        if row is not None:
            # The first of content, tool calls (as text, not JSON) and tool name that holds
            # a term; else the first that is not empty.
            texts = [t for t in (row[1], tool_calls_text(row[3]), row[2]) if t and t.strip()]
            wanted = [x.lower() for x in terms]
            holder = next(
                (t for t in texts if any(x in t.lower() for x in wanted)),
                texts[0] if texts else "",
            )
            hit.snippet = substring_snippet(
                holder, terms, whole_words=whole_words, prefixes=prefixes
            )


# --- routing -------------------------------------------------------------------------------


def choose_route(query: ParsedQuery, filters: Filters) -> str:
    """ "words", "cjk", "trigram" or "like" for a non-empty query (module docstring)."""
    if not query.has_cjk and not query.has_symbols:
        return "words"
    if query.has_cjk and split_for_grams(query).has_grams:
        return "cjk"
    # Emoji and CJK punctuation: substrings, which no word index holds.
    terms = [t for g in query.groups for t in g if contains_cjk(t.text) or is_symbol_term(t.text)]
    trigram_ok = (
        sum(cjk_count(t.text) if contains_cjk(t.text) else len(t.text) for t in terms) >= 3
        and query.all_terms_at_least(3)
        # The trigram index leaves tool output out; an explicit tool search must scan.
        and "tool" not in filters.roles
    )
    return "trigram" if trigram_ok else "like"


def find_hits(
    *, owner_id: int, query: ParsedQuery, filters: Filters | None = None, limit: int = 50
) -> HitPage:
    """The owner's best matching messages for `query` (already parsed), best first.

    Snippets are not filled in; call `add_snippets` for the hits you will show.
    """
    filters = filters or Filters()
    if not query:
        return HitPage(route="none")
    route = choose_route(query, filters)
    postgres = connection.vendor == "postgresql"
    if route == "words":
        if postgres:
            hits = _pg_words(query, owner_id, filters, limit)
        else:
            hits = _sqlite_words(query, owner_id, filters, limit)
        if hits or not query.all_terms_at_least(3):
            return HitPage(route="words", hits=hits)
        route = "words+trigram"
        hits = _trigram(query, owner_id, filters, limit)
        return HitPage(route=route, hits=hits)
    if route == "cjk":
        return HitPage(route=route, hits=_cjk(query, owner_id, filters, limit))
    if route == "trigram":
        return HitPage(route=route, hits=_trigram(query, owner_id, filters, limit))
    return HitPage(route="like", hits=_like(query, owner_id, filters, limit, content_only=False))


def _trigram(query: ParsedQuery, owner_id: int, filters: Filters, limit: int) -> list[Hit]:
    if connection.vendor == "postgresql":
        return _like(query, owner_id, filters, limit, content_only=True)
    return _sqlite_match("messages_fts_trigram", trigram_match(query), owner_id, filters, limit)


def add_snippets(page: HitPage, query: ParsedQuery, hits: list[Hit]) -> None:
    """Fill `snippet` on `hits` (a subset of `page.hits`) the way their route found them."""
    postgres = connection.vendor == "postgresql"
    if page.route == "words":
        if postgres:
            _pg_headlines(query, hits)
        else:
            _sqlite_snippets("messages_fts_stem", query.fts, hits, prefix=query.has_prefix)
    elif page.route in ("trigram", "words+trigram") and not postgres:
        _sqlite_snippets("messages_fts_trigram", trigram_match(query), hits)
    else:
        _substring_snippets(query, hits)
    # A hit only in tool-call arguments or the tool name has no highlight in its content.
    missing = [h for h in hits if h.snippet is None or not h.snippet.highlights]
    if missing:
        _substring_snippets(query, missing)
