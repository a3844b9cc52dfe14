"""Session lineage: how conversations are linked through `Session.parent`.

Two kinds of child exist. A *compression continuation* carries a conversation on after its
parent was compressed: the parent ended with `end_reason="compression"` and the child started
at or after the parent's `ended_at`. Any other child (for example one started while the parent
was still running, as a delegation does) is a separate conversation that merely remembers
where it came from.

- The *lineage* of a session is every session reachable through parent links in either
  direction from it: its ancestors and its descendants (siblings are not included).
- A *compression chain* is a run of continuations; users see it as one conversation, shown
  at its *tip* (the newest continuation) and identified by its *root* (the first session).

Walks are bounded (`MAX_HOPS`) so a corrupt parent cycle can never loop forever; every query
stays inside the session owner's rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Count, Exists, OuterRef, QuerySet

from core.db.rows import marks, raw_all

from .models import Message, Session

MAX_HOPS = 100

_LINK_FIELDS = ("id", "parent_id", "started_at", "ended_at", "end_reason")


@dataclass(frozen=True, slots=True)
class _Link:
    id: str
    parent_id: str | None
    started_at: datetime
    ended_at: datetime | None
    end_reason: str


def _link(session: Session) -> _Link:
    return _Link(
        session.id, session.parent_id, session.started_at, session.ended_at, session.end_reason
    )


def is_continuation(
    *, child_started_at: datetime, parent_end_reason: str, parent_ended_at: datetime | None
) -> bool:
    """True when a child with this start carries on a parent that ended like this."""
    return (
        parent_end_reason == Session.EndReason.COMPRESSION
        and parent_ended_at is not None
        and child_started_at >= parent_ended_at
    )


# --- single-session walks -------------------------------------------------------------


def lineage_root(session: Session) -> Session:
    """The topmost ancestor reachable through parent links (the session itself if none)."""
    current = session
    seen = {current.id}
    for _ in range(MAX_HOPS):
        if current.parent_id is None or current.parent_id in seen:
            break
        parent = Session.objects.filter(id=current.parent_id, owner_id=session.owner_id).first()
        if parent is None:
            break
        seen.add(parent.id)
        current = parent
    return current


def lineage_ids(session: Session) -> set[str]:
    """Ids of the session, its ancestors and its descendants via parent links."""
    ids = {session.id}
    # Ancestors: one small query per hop.
    parent_id = session.parent_id
    for _ in range(MAX_HOPS):
        if parent_id is None or parent_id in ids:
            break
        row = (
            Session.objects.filter(id=parent_id, owner_id=session.owner_id)
            .values_list("id", "parent_id")
            .first()
        )
        if row is None:
            break
        ids.add(row[0])
        parent_id = row[1]
    # Descendants: one query per generation.
    frontier = {session.id}
    for _ in range(MAX_HOPS):
        children = set(
            Session.objects.filter(parent_id__in=frontier, owner_id=session.owner_id)
            .exclude(id__in=ids)
            .values_list("id", flat=True)
        )
        if not children:
            break
        ids |= children
        frontier = children
    return ids


def _next_continuation(session: Session) -> Session | None:
    if session.end_reason != Session.EndReason.COMPRESSION or session.ended_at is None:
        return None
    return (
        Session.objects.filter(
            parent_id=session.id, owner_id=session.owner_id, started_at__gte=session.ended_at
        )
        .order_by("started_at", "id")
        .first()
    )


def compression_tip(session: Session) -> Session:
    """The newest continuation of `session`'s compression chain (walks forward only).

    Delegated children (started before the parent ended, or under a parent that did not end
    by compression) are not continuations and are never followed. At most `MAX_HOPS` hops.
    """
    current = session
    seen = {current.id}
    for _ in range(MAX_HOPS):
        child = _next_continuation(current)
        if child is None or child.id in seen:
            break
        seen.add(child.id)
        current = child
    return current


def compression_root(session: Session) -> Session:
    """The first session of `session`'s compression chain (walks back through continuations)."""
    current = session
    seen = {current.id}
    for _ in range(MAX_HOPS):
        if current.parent_id is None:
            break
        parent = Session.objects.filter(id=current.parent_id, owner_id=session.owner_id).first()
        if (
            parent is None
            or parent.id in seen
            or not is_continuation(
                child_started_at=current.started_at,
                parent_end_reason=parent.end_reason,
                parent_ended_at=parent.ended_at,
            )
        ):
            break
        seen.add(parent.id)
        current = parent
    return current


def compression_chain(session: Session) -> list[Session]:
    """The whole chain `session` belongs to, oldest first (root … tip)."""
    chain = [compression_root(session)]
    seen = {chain[0].id}
    for _ in range(MAX_HOPS):
        child = _next_continuation(chain[-1])
        if child is None or child.id in seen:
            break
        seen.add(child.id)
        chain.append(child)
    return chain


# --- batch walks (search grouping, lists) -----------------------------------------------


# Search walks these for up to 200 sessions per query: read without compiling a query.
_OWNED_AMONG = f"FROM {Session._meta.db_table} WHERE owner_id = %s AND id IN"


def owned_sessions(ids: list[str], *, owner_id: int, fields: tuple[str, ...]) -> list[Session]:
    """The owner's sessions among `ids` (not empty), with only `fields` read."""
    return raw_all(Session, f"{_OWNED_AMONG} ({marks(ids)})", [owner_id, *ids], fields=fields)


def _load_links(ids: Iterable[str], owner_id: int, cache: dict[str, _Link]) -> None:
    missing = [i for i in set(ids) if i not in cache]
    if not missing:
        return
    for s in owned_sessions(missing, owner_id=owner_id, fields=_LINK_FIELDS):
        cache[s.id] = _Link(s.id, s.parent_id, s.started_at, s.ended_at, s.end_reason)


def compression_roots(session_ids: Iterable[str], *, owner_id: int) -> dict[str, str]:
    """Map each of the owner's session ids to the id of its compression chain's root.

    One query for the ids, then one per generation walked from those that have a parent.
    Ids that are not the owner's are left out of the result.
    """
    ids = list(dict.fromkeys(session_ids))
    if not ids:
        return {}
    with connection.cursor() as db:
        db.execute(f"SELECT id, parent_id {_OWNED_AMONG} ({marks(ids)})", [owner_id, *ids])
        parent_of = dict(db.fetchall())
    cursor = {sid: sid for sid in ids if sid in parent_of}
    # A session without a parent is its own root; only the others are walked (a search's
    # 200 hits name up to 200 sessions, and few of them are continuations).
    active = {sid for sid in cursor if parent_of[sid] is not None}
    cache: dict[str, _Link] = {}
    _load_links(active, owner_id, cache)
    active &= set(cache)  # one deleted since the first read is left as it is
    for _ in range(MAX_HOPS):
        parents = {cache[cursor[s]].parent_id for s in active} - {None}
        if not parents:
            break
        _load_links(parents, owner_id, cache)
        moved = set()
        for sid in active:
            here = cache[cursor[sid]]
            parent = cache.get(here.parent_id) if here.parent_id else None
            if parent is not None and is_continuation(
                child_started_at=here.started_at,
                parent_end_reason=parent.end_reason,
                parent_ended_at=parent.ended_at,
            ):
                if parent.id == sid:  # a cycle back to where we started
                    continue
                cursor[sid] = parent.id
                moved.add(sid)
        active = moved
        if not active:
            break
    return cursor


def compression_chains(root_ids: Iterable[str], *, owner_id: int) -> dict[str, list[str]]:
    """Map each chain root id to its chain's session ids, oldest first (root … tip)."""
    chains: dict[str, list[str]] = {}
    tails: dict[str, Session | _Link] = {}
    cache: dict[str, _Link] = {}
    roots = list(dict.fromkeys(root_ids))
    _load_links(roots, owner_id, cache)
    for rid in roots:
        if rid in cache:
            chains[rid] = [rid]
            tails[rid] = cache[rid]
    active = set(chains)
    for _ in range(MAX_HOPS):
        ended = {
            tails[r].id: r
            for r in active
            if tails[r].end_reason == Session.EndReason.COMPRESSION
            and tails[r].ended_at is not None
        }
        if not ended:
            break
        children = (
            Session.objects.filter(parent_id__in=list(ended), owner_id=owner_id)
            .order_by("started_at", "id")
            .values_list(*_LINK_FIELDS)
        )
        nxt: dict[str, _Link] = {}
        for row in children:
            link = _Link(*row)
            parent = tails[ended[link.parent_id]]
            root = ended[link.parent_id]
            if root in nxt or link.id in chains[root]:
                continue
            if is_continuation(
                child_started_at=link.started_at,
                parent_end_reason=parent.end_reason,
                parent_ended_at=parent.ended_at,
            ):
                nxt[root] = link
        for root, link in nxt.items():
            chains[root].append(link.id)
            tails[root] = link
        active = set(nxt)
        if not active:
            break
    return chains


# --- the conversation list -------------------------------------------------------------


def conversation_tips(*, owner: AbstractBaseUser, include_archived: bool = False) -> QuerySet:
    """The owner's conversations, each compression chain once, as its tip; newest first.

    A session is hidden when it has a continuation (it is then an inner link of a chain).
    Deleted sessions are hidden.
    """
    continued = Exists(
        Session.objects.filter(owner=owner, parent_id=OuterRef("pk")).filter(
            started_at__gte=OuterRef("ended_at")
        )
    )
    result = (
        Session.objects.filter(owner=owner)
        .exclude(end_reason=Session.EndReason.DELETED)
        .annotate(continued=continued)
        .exclude(end_reason=Session.EndReason.COMPRESSION, continued=True)
    )
    if not include_archived:
        result = result.filter(archived=False)
    return result.order_by("-pinned", "-last_activity_at", "-id")


@dataclass(frozen=True, slots=True)
class ConversationRow:
    """One line of the conversation list: a chain shown at its tip."""

    tip: Session
    root_id: str
    title: str | None
    started_at: datetime
    last_activity_at: datetime
    message_count: int
    chain_length: int

    @property
    def session_id(self) -> str:
        return self.tip.id


def conversation_rows(*, owner: AbstractBaseUser, tips: Iterable[Session]) -> list[ConversationRow]:
    """Decorate a page of tips with chain facts: title, first start, total messages.

    A few queries whatever the page size: one per generation walked back, one for counts.
    """
    tips = list(tips)
    roots = compression_roots([t.id for t in tips], owner_id=owner.pk)
    chains = compression_chains(set(roots.values()), owner_id=owner.pk)
    all_ids = {sid for chain in chains.values() for sid in chain} | {t.id for t in tips}
    facts = {
        row["id"]: row
        for row in Session.objects.filter(owner=owner, id__in=all_ids).values(
            "id", "title", "started_at"
        )
    }
    counts = dict(
        # The selected path (what the chat shows), not the other branches.
        Message.objects.filter(session_id__in=all_ids, active=True)
        .exclude(role=Message.Role.SYSTEM)
        .exclude(kind=Message.Kind.CARRIED)  # counted once, in the part they come from
        .values("session_id")
        .annotate(n=Count("id"))
        .values_list("session_id", "n")
    )
    rows = []
    for tip in tips:
        root_id = roots.get(tip.id, tip.id)
        chain = chains.get(root_id, [tip.id])
        # Only the part of the chain up to this tip counts.
        if tip.id in chain:
            chain = chain[: chain.index(tip.id) + 1]
        title = next((facts[s]["title"] for s in reversed(chain) if facts[s]["title"]), None)
        rows.append(
            ConversationRow(
                tip=tip,
                root_id=root_id,
                title=title,
                started_at=facts[chain[0]]["started_at"],
                last_activity_at=tip.last_activity_at,
                message_count=sum(counts.get(s, 0) for s in chain),
                chain_length=len(chain),
            )
        )
    return rows
