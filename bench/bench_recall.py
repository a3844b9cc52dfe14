"""Recall of earlier conversations: does the right conversation come back for a question?

Data: bench/recall_corpus.py (its docstring says how the conversations and the labelled
questions are generated: 96 threads told over 291 long conversations, 17k messages, 516
questions of five kinds — paraphrase, morphology, exact, typo, Chinese/mixed — each
labelled with the conversations holding its fact). Everything is seeded: the same data on
SQLite and PostgreSQL and in every run.

For each question a keyword OR query is built from its content words (stop words out; no
LLM, no synonyms: what a model writes may be better), then three rankers answer it in the
same run:
- `project`: the search service as it ships (`search_conversations`: exact and stemmed
  indexes fused, titles boosted, CJK routed to trigram/LIKE);
- `previous`: the ranking before issue 16 — the exact word index alone (FTS5 unicode61 /
  'simple' tsvector), no titles, same grouping of messages into conversations, same
  CJK routes;
- `bm25`: rank-bm25's BM25Okapi over whole conversations (titles and messages as one
  document; lowercased words, Chinese as character bigrams, no stemming).

Figures per ranker (overall and per question kind): hit@1/3/5 (at least one labelled
conversation in the top k) and all@3 (every labelled conversation in the top 3), as
percentages, plus the project's margin over BM25.

    python -m bench recall --vendor sqlite
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from bench.recall_corpus import Conversation, Question, generate, keyword_query

KINDS = ("paraphrase", "morphology", "exact", "typo", "chinese")
_WORD_RE = re.compile(r"[^\W_]+")
_CJK_RE = re.compile(r"[\u3400-\u9fff]+")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    for word in _WORD_RE.findall(text.lower()):
        runs = _CJK_RE.findall(word)
        if not runs:
            out.append(word)
            continue
        out.extend(_CJK_RE.sub(" ", word).split())
        for run in runs:
            out.extend(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return out


def load(conversations: list[Conversation]) -> tuple[Any, dict[str, str]]:
    """The owner (and an outsider with a copy of a few conversations) and {session id: key}."""
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model

    from sessions_app.models import Message, Session

    user_model = get_user_model()
    owner = user_model.objects.create_user(username="recall-owner", password="x")
    outsider = user_model.objects.create_user(username="recall-outsider", password="x")
    start = datetime(2025, 1, 1, tzinfo=UTC)
    keys: dict[str, str] = {}
    for number, conv in enumerate(conversations):
        when = start + timedelta(days=number)
        for person in (owner, outsider) if number % 10 == 0 else (owner,):
            session = Session.objects.create(
                owner=person, title=conv.title, started_at=when, last_activity_at=when
            )
            Message.objects.bulk_create(
                Message(
                    session=session,
                    role=role,
                    content=content,
                    timestamp=when + timedelta(minutes=i),
                )
                for i, (role, content) in enumerate(conv.messages)
            )
            if person == owner:
                keys[session.id] = conv.key
    return owner, keys


def project_ranking(owner: Any, query: str) -> list[str]:
    from sessions_app.search.service import search_conversations

    result = search_conversations(owner=owner, query=query, limit=5)
    return [c.root_id for c in result.conversations]


def previous_ranking(owner: Any, query: str) -> list[str]:
    """The ranking before the stemmed index and titles: the exact word index only."""
    from django.db import connection

    from sessions_app.lineage import compression_roots
    from sessions_app.search import backends, sql
    from sessions_app.search.sanitize import parse_query
    from sessions_app.search.service import DEFAULT_ROWS, group_hits

    parsed = parse_query(query)
    filters = sql.Filters()
    if not parsed:
        return []
    if backends.choose_route(parsed, filters) != "words":
        hits = backends.find_hits(owner_id=owner.pk, query=parsed, limit=DEFAULT_ROWS).hits
    elif connection.vendor == "sqlite":
        hits = backends._sqlite_match("messages_fts", parsed.fts, owner.pk, filters, DEFAULT_ROWS)
    else:
        hits = _pg_exact(parsed, owner.pk, filters)
    if (
        not hits
        and parsed.all_terms_at_least(3)
        and backends.choose_route(parsed, filters) == "words"
    ):
        hits = backends._trigram(parsed, owner.pk, filters, DEFAULT_ROWS)
    roots = compression_roots({h.session_id for h in hits}, owner_id=owner.pk)
    return list(group_hits(hits, roots=roots, limit=5))


def _pg_exact(parsed: Any, owner_id: int, filters: Any) -> list[Any]:
    from sessions_app.search.service import DEFAULT_ROWS
    from sessions_app.search.sql import filter_sql, rows_to_hits, run_read
    from sessions_app.search.tsquery import pg_tsquery

    expr, qparams = pg_tsquery(parsed)
    where, params = filter_sql(owner_id, filters)
    statement = f"""
        SELECT m.id, m.session_id, m.role, m.timestamp, ts_rank(m.search_vector, q.query),
               m.active
        FROM sessions_app_message m JOIN sessions_app_session s ON s.id = m.session_id
        CROSS JOIN (SELECT {expr} AS query) q
        WHERE m.search_vector @@ q.query {where}
        ORDER BY 5 DESC, m.id DESC LIMIT %s"""  # noqa: S608 - placeholders only
    return rows_to_hits(run_read(statement, [*qparams, *params, DEFAULT_ROWS]))


def bm25_ranker(conversations: list[Conversation], keys: dict[str, str]) -> Any:
    from rank_bm25 import BM25Okapi

    ids = list(keys)
    by_key = {c.key: c for c in conversations}
    documents = []
    for session_id in ids:
        conv = by_key[keys[session_id]]
        documents.append(_tokens(conv.title + " " + " ".join(t for _, t in conv.messages)))
    bm25 = BM25Okapi(documents)

    def rank(query: str) -> list[str]:
        terms = _tokens(query.replace(" OR ", " "))
        scores = bm25.get_scores(terms)
        order = sorted(range(len(ids)), key=lambda i: -scores[i])
        return [ids[i] for i in order[:5] if scores[i] > 0]

    return rank


def score(rankings: list[tuple[Question, list[str]]]) -> dict[str, float]:
    n = max(1, len(rankings))

    def share(test: Any) -> float:
        return round(100 * sum(1 for q, r in rankings if test(q, r)) / n, 1)

    return {
        "n": len(rankings),
        "hit@1": share(lambda q, r: bool(set(r[:1]) & set(q.evidence))),
        "hit@3": share(lambda q, r: bool(set(r[:3]) & set(q.evidence))),
        "hit@5": share(lambda q, r: bool(set(r[:5]) & set(q.evidence))),
        "all@3": share(lambda q, r: set(q.evidence) <= set(r[:3])),
    }


def run(vendor: str) -> dict[str, Any]:
    conversations, questions = generate()
    owner, keys = load(conversations)
    bm25 = bm25_ranker(conversations, keys)
    rankers = {
        "project": lambda q: project_ranking(owner, q),
        "previous": lambda q: previous_ranking(owner, q),
        "bm25": bm25,
    }
    results: dict[str, Any] = {
        "conversations": len(conversations),
        "messages": sum(len(c.messages) for c in conversations),
        "questions": len(questions),
    }
    for name, rank in rankers.items():
        rows: list[tuple[Question, list[str]]] = []
        per_kind: dict[str, list[tuple[Question, list[str]]]] = defaultdict(list)
        for question in questions:
            ranked = [keys.get(sid, "other") for sid in rank(keyword_query(question.text))]
            rows.append((question, ranked))
            per_kind[question.kind].append((question, ranked))
        results[name] = {"overall": score(rows), **{k: score(per_kind[k]) for k in KINDS}}
        overall = results[name]["overall"]
        print(f"  {vendor:10} {name:9} " + "  ".join(f"{k} {v}" for k, v in overall.items()))
    for metric in ("hit@3", "all@3"):
        margin = results["project"]["overall"][metric] - results["bm25"]["overall"][metric]
        results[f"project_minus_bm25_{metric}"] = round(margin, 1)
    print(
        f"  project − bm25: hit@3 {results['project_minus_bm25_hit@3']:+.1f}, "
        f"all@3 {results['project_minus_bm25_all@3']:+.1f} points",
        flush=True,
    )
    return results
