"""L2 session search: the operations the tool, the API and the Sessions page share.

Reads (`search_conversations`, `recent_conversations`, `access_search_summary`) and the two
summary operations (`search_summaries_wait`, `search_summary_start`). Every function takes
the acting user as `owner` and never returns another user's data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Max, OuterRef, Subquery
from django.db.models.functions import Substr
from django.utils.translation import gettext_lazy

from core.db.rows import marks
from core.exceptions import NotFound, ServiceError, lazy_format

from ..lineage import (
    ConversationRow,
    compression_chains,
    compression_roots,
    conversation_rows,
    conversation_tips,
    lineage_ids,
    owned_sessions,
)
from ..models import Message, SearchSummary, Session
from .backends import SEARCHABLE_ROLES, add_snippets, find_hits
from .hits import Hit
from .sanitize import parse_query
from .sql import Filters
from .summarise import (
    Outcome,
    query_hash,
    summaries_available,
    summaries_wait,
    summary_request,
    summary_start,
)
from .titles import TITLE_BOOST, title_only_hits, title_scores

SNIPPETS_PER_CONVERSATION = 3
#: Matching messages retrieved per search before grouping them into conversations.
DEFAULT_ROWS = 200
PREVIEW_CHARS = 200


def chat_link(session_id: str) -> str:
    return f"/chat/{session_id}/"


@dataclass
class ConversationHit:
    """One conversation (a compression chain) among the results, shown at its tip."""

    root_id: str
    session_id: str  # the chain's tip: where the conversation carries on
    title: str | None
    started_at: datetime
    last_activity_at: datetime
    last_message_id: int
    hits: list[Hit]  # the best few, best first
    hit_count: int  # hits among the rows retrieved (a lower bound)
    summary: str | None = None
    summary_status: str = "none"  # none|cached|done|failed|timeout|unavailable
    summary_id: int | None = None

    @property
    def link(self) -> str:
        return chat_link(self.session_id)

    @property
    def best(self) -> Hit:
        return self.hits[0]


@dataclass
class SearchResult:
    query: str  # the sanitised query that ran ("" when nothing searchable was left)
    route: str
    conversations: list[ConversationHit] = field(default_factory=list)


def check_roles(roles: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Parse a role filter ("user,assistant" or a list); refuse unknown roles."""
    if roles is None or roles == "":
        return ()
    items = roles.split(",") if isinstance(roles, str) else list(roles)
    cleaned = tuple(dict.fromkeys(r.strip().lower() for r in items if r and r.strip()))
    unknown = [r for r in cleaned if r not in SEARCHABLE_ROLES]
    if unknown:
        raise ServiceError(
            "invalid_role",
            lazy_format(
                gettext_lazy("Unknown role %(role)s; use %(roles)s (comma-separated)."),
                role=repr(unknown[0]),
                roles=", ".join(SEARCHABLE_ROLES),
            ),
        )
    return cleaned


def _excluded(owner: AbstractBaseUser, session_id: str | None) -> frozenset[str]:
    if not session_id:
        return frozenset()
    current = Session.objects.filter(id=session_id, owner=owner).first()
    return frozenset(lineage_ids(current)) if current is not None else frozenset()


def group_hits(
    hits: list[Hit],
    *,
    roots: dict[str, str],
    limit: int,
    boosts: dict[str, float] | None = None,
) -> dict[str, list[Hit]]:
    """Hits grouped by conversation (compression chain root), best conversations first.

    A conversation scores the sum of its three best hits, so one that keeps coming back to
    the topic beats a single lucky message, plus its boost (a matching title); with
    unranked hits (substring scans) the number of hits counts. Ties keep the order in
    which conversations first appeared.
    """
    boosts = boosts or {}
    grouped: dict[str, list[Hit]] = {}
    for hit in hits:
        grouped.setdefault(roots.get(hit.session_id, hit.session_id), []).append(hit)
    ranked = any(h.score for h in hits)

    def strength(item: tuple[int, tuple[str, list[Hit]]]) -> tuple[float, int]:
        position, (root, members) = item
        value = sum(h.score for h in members[:3]) if ranked else float(len(members))
        return (-value - boosts.get(root, 0.0), position)

    order = sorted(enumerate(grouped.items()), key=strength)
    return dict(entry for _, entry in order[: max(1, limit)])


def title_boosts(
    titles: dict[str, float], roots: dict[str, str], hits: list[Hit]
) -> dict[str, float]:
    """{root: boost} for conversations whose title matched: between half and all of
    TITLE_BOOST times the best message score of the page (scores differ in scale between
    vendors and queries; a title weighs about as much as the best single message)."""
    if not titles:
        return {}
    unit = TITLE_BOOST * max((h.score for h in hits), default=0.0) or 1.0
    top = max(titles.values())
    boosts: dict[str, float] = {}
    for session_id, score in titles.items():
        root = roots.get(session_id, session_id)
        boosts[root] = max(boosts.get(root, 0.0), unit * (0.5 + 0.5 * score / top))
    return boosts


def search_conversations(
    *,
    owner: AbstractBaseUser,
    query: str,
    roles: tuple[str, ...] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 3,
    exclude_lineage_of: str | None = None,
    rows: int | None = None,
) -> SearchResult:
    """The owner's conversations matching `query`, best first, at most `limit` of them.

    Hits are grouped by conversation (a compression chain counts once, shown at its tip);
    `exclude_lineage_of` (the current session) removes that session's whole lineage. Each
    result carries up to three highlighted snippets and a cached summary if one exists.
    Any string is acceptable as `query`; one with nothing searchable gives no results.
    """
    parsed = parse_query(query)
    limit = max(1, limit)
    if not parsed:
        return SearchResult(query="", route="none")
    filters = Filters(
        roles=roles,
        since=since,
        until=until,
        exclude_session_ids=_excluded(owner, exclude_lineage_of),
    )
    page = find_hits(owner_id=owner.pk, query=parsed, filters=filters, limit=rows or DEFAULT_ROWS)
    titles = title_scores(owner_id=owner.pk, query=parsed, filters=filters)
    roots = compression_roots({h.session_id for h in page.hits} | set(titles), owner_id=owner.pk)
    found = {roots[h.session_id] for h in page.hits}
    hits = page.hits + title_only_hits([s for s in titles if roots[s] not in found])
    groups = group_hits(
        hits, roots=roots, limit=limit, boosts=title_boosts(titles, roots, page.hits)
    )
    if not groups:
        return SearchResult(query=parsed.fts, route=page.route)
    counts = {root: len(hits) for root, hits in groups.items()}
    groups = {root: hits[:SNIPPETS_PER_CONVERSATION] for root, hits in groups.items()}

    add_snippets(page, parsed, [h for hits in groups.values() for h in hits])
    chains = compression_chains(groups, owner_id=owner.pk)
    chain_ids = {sid for chain in chains.values() for sid in chain}
    sessions, newest = _chain_sessions(owner, sorted(chain_ids))
    results = []
    for root, hits in groups.items():
        chain = [sid for sid in chains.get(root, [root]) if sid in sessions]
        if root not in sessions or not chain:
            continue  # deleted while we were looking
        tip = sessions[chain[-1]]
        results.append(
            ConversationHit(
                root_id=root,
                session_id=tip.id,
                title=next((sessions[s].title for s in reversed(chain) if sessions[s].title), None),
                started_at=sessions[root].started_at,
                last_activity_at=tip.last_activity_at,
                last_message_id=max((newest.get(s, 0) for s in chain), default=0),
                hits=hits,
                hit_count=counts[root],
            )
        )
    _attach_cached_summaries(owner, query, results)
    return SearchResult(query=parsed.fts, route=page.route, conversations=results)


def _chain_sessions(
    owner: AbstractBaseUser, chain_ids: list[str]
) -> tuple[dict[str, Session], dict[str, int]]:
    """The owner's sessions of the results' chains (title and times) and the newest message
    of each selected path, read without compiling a query (every search pays them). Empty
    when the results' conversations were deleted while the search was looking."""
    if not chain_ids:
        return {}, {}
    fields = ("id", "title", "started_at", "last_activity_at")
    sessions = {s.id: s for s in owned_sessions(chain_ids, owner_id=owner.pk, fields=fields)}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT session_id, MAX(id) FROM {Message._meta.db_table}"  # noqa: S608
            f" WHERE session_id IN ({marks(chain_ids)}) AND active = %s GROUP BY session_id",
            [*chain_ids, True],
        )
        newest = dict(cursor.fetchall())
    return sessions, newest


def _attach_cached_summaries(
    owner: AbstractBaseUser, query: str, results: list[ConversationHit]
) -> None:
    if not results:
        return
    keys = {(r.root_id, r.last_message_id): r for r in results}
    roots = [r.root_id for r in results]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, session_id, last_message_id, status, summary"  # noqa: S608
            f" FROM {SearchSummary._meta.db_table} WHERE owner_id = %s AND query_hash = %s"
            f" AND session_id IN ({marks(roots)})",
            [owner.pk, query_hash(query), *roots],
        )
        rows = cursor.fetchall()
    for summary_id, session_id, last_message_id, status, summary in rows:
        result = keys.get((session_id, last_message_id))
        if result is None:
            continue
        result.summary_id = summary_id
        if status == SearchSummary.Status.DONE:
            result.summary = summary
            result.summary_status = "cached"
        else:
            result.summary_status = status


def search_summaries_wait(
    *,
    owner: AbstractBaseUser,
    query: str,
    result: SearchResult,
    timeout: float | None = None,
    concurrency: int | None = None,
) -> None:
    """Fill in `summary` for every conversation of `result`, waiting at most `timeout`
    seconds with at most `concurrency` summaries at once. Never raises because of the
    summariser: failures and timeouts leave `summary` None with a status saying why.
    Call outside a transaction (see summarise.summaries_wait)."""
    todo = [c for c in result.conversations if c.summary_status != "cached"]
    outcomes: list[Outcome] = summaries_wait(
        owner=owner,
        query=query,
        requests=[(c.root_id, c.last_message_id) for c in todo],
        timeout=timeout,
        concurrency=concurrency,
    )
    for conversation, outcome in zip(todo, outcomes, strict=True):
        conversation.summary = outcome.summary
        conversation.summary_status = outcome.status
        conversation.summary_id = outcome.summary_id


def search_summary_start(*, owner: AbstractBaseUser, query: str, session_id: str) -> SearchSummary:
    """Ask for a background summary of the conversation holding `session_id` (any session
    of its compression chain) focused on `query`. Returns the cache row at once; the work
    runs as a Celery task after commit. Refuses empty queries and unknown sessions."""
    if not parse_query(query):
        raise ServiceError("empty_query", gettext_lazy("Type something to search for first."))
    if not summaries_available():
        raise ServiceError(
            "llm_unavailable",
            gettext_lazy(
                "Summaries need a model: add one in the admin or set HERMES_MODEL (see the README)."
            ),
            status=503,
        )
    session = Session.objects.filter(id=session_id, owner=owner).first()
    if session is None or session.end_reason == Session.EndReason.DELETED:
        raise NotFound(gettext_lazy("conversation"))
    root = compression_roots([session.id], owner_id=owner.pk)[session.id]
    chain = compression_chains([root], owner_id=owner.pk)[root]
    # The newest message of the selected path names the path: a branch switch makes a new key.
    last = Message.objects.filter(session_id__in=chain, active=True).aggregate(last=Max("id"))[
        "last"
    ]
    if last is None:
        raise ServiceError(
            "empty_conversation", gettext_lazy("That conversation has no messages yet.")
        )
    summary = summary_request(owner=owner, query=query, root_id=root, last_message_id=last)
    summary_start(summary=summary)
    return summary


def access_search_summary(*, owner: AbstractBaseUser, summary_id: int) -> SearchSummary:
    summary = SearchSummary.objects.filter(id=summary_id, owner=owner).first()
    if summary is None:
        raise NotFound(gettext_lazy("summary"))
    return summary


@dataclass(frozen=True, slots=True)
class RecentConversation:
    row: ConversationRow
    preview: str

    @property
    def link(self) -> str:
        return chat_link(self.row.session_id)


def recent_conversations(
    *, owner: AbstractBaseUser, limit: int = 10, exclude_lineage_of: str | None = None
) -> list[RecentConversation]:
    """The owner's latest conversations (each chain once, at its tip) with a preview of the
    first thing the user asked; no model cost."""
    tips = conversation_tips(owner=owner).exclude(id__in=_excluded(owner, exclude_lineage_of))
    rows = conversation_rows(owner=owner, tips=tips[: max(1, limit)])
    first_user = (
        Message.objects.filter(session_id=OuterRef("pk"), role=Message.Role.USER)
        .order_by("id")
        .annotate(head=Substr("content", 1, PREVIEW_CHARS))
        .values("head")[:1]
    )
    previews = dict(
        Session.objects.filter(owner=owner, id__in=[r.root_id for r in rows])
        .annotate(preview=Subquery(first_user))
        .values_list("id", "preview")
    )
    return [RecentConversation(r, " ".join((previews.get(r.root_id) or "").split())) for r in rows]
