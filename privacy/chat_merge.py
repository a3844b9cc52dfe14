"""A newer export of a conversation imported before: what it has that we do not is added
to the conversation's message tree (sessions_app.branches), nothing is added twice.

The export's messages are matched to ours from the top of the tree down: a message is the
one we stored when its parent is and ours has the same role and text (the same
timestamp settles a tie), so no export id needs storing per message and a conversation
imported by an earlier version matches too. What is unmatched is new: a reply after the
last message, or a branch off an older one (an edited prompt, a regenerated answer).

The selected path follows the export's current message when the person has not moved
away in Hermes since the last import (their path still ends at the message that was the
export's current one then). Otherwise — they continued the conversation here, or picked
another branch — the new messages are added as alternatives and their path is left as it
is. The change is made holding the conversation's lease (as an edit or a branch switch
would), so it never races a running turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils.translation import gettext_lazy

from core.exceptions import Text, lazy_format
from sessions_app import branches, turn_claim
from sessions_app.models import IMPORT_SOURCES, Message, Session

from .chat_formats import Imported, ImportedMessage, stored_id


def tree_digest(conv: Imported) -> str:
    """A fingerprint of what an export holds of a conversation: its messages and its current
    one. The same digest as at the last import: nothing to do."""
    nodes = sorted(m.ext_id for m in (*conv.messages, *conv.branches))
    current = conv.messages[-1].ext_id if conv.messages else ""
    return hashlib.sha256("\n".join([current, *nodes]).encode()).hexdigest()[:32]


@dataclass
class Merged:
    #: New messages on the selected path, and new ones beside it.
    on_path: int = 0
    aside: int = 0
    #: The selected path moved to the export's current branch.
    followed: bool = False
    #: Why nothing was merged ("" when the merge ran), naming the conversation.
    note: Text = ""
    newest: datetime | None = None
    #: Message ids added, in order.
    added: list[int] = field(default_factory=list)
    #: Our message that is the export's current one now.
    tip: int | None = None


@dataclass
class _Node:
    id: int
    parent_id: int | None
    role: str
    content: str
    timestamp: datetime


def _match(
    items: list[ImportedMessage], stored: list[_Node], cap: Callable[[str], str]
) -> tuple[dict[str, int], list[ImportedMessage]]:
    """Export id → our message id for the messages we have, and the new ones in tree order
    (each after its parent)."""
    children: dict[int | None, list[_Node]] = {}
    for node in stored:
        children.setdefault(node.parent_id, []).append(node)
    taken: set[int] = set()
    matched: dict[str, int] = {}
    new: list[ImportedMessage] = []
    new_ids: set[str] = set()
    for item in items:
        if item.parent and item.parent in new_ids:
            new.append(item)
            new_ids.add(item.ext_id)
            continue
        parent = matched.get(item.parent) if item.parent else None
        text = cap(item.content)
        same = [
            n
            for n in children.get(parent, [])
            if n.id not in taken and n.role == item.role and n.content == text
        ]
        if not same:
            new.append(item)
            new_ids.add(item.ext_id)
            continue
        found = next((n for n in same if n.timestamp == item.timestamp), same[0])
        taken.add(found.id)
        matched[item.ext_id] = found.id
    return matched, new


def conversation_merge(
    *,
    session: Session,
    conv: Imported,
    config: dict[str, Any],
    cap: Callable[[str], str],
    count_cut: Callable[[str], str],
) -> Merged:
    """Add what `conv` has that `session` (imported from an earlier export of it) does not,
    and store `config` (the import's markers) in the session's `model_config` with it.
    `cap` cuts a text as the import does; `count_cut` does it and counts it for the report.
    Never called inside a transaction (it takes the conversation's lease)."""
    which = {
        "source": IMPORT_SOURCES.get(conv.source, conv.source),
        "title": repr((conv.title or "untitled")[:60]),
    }
    if session.ended_at is not None:
        return Merged(
            note=lazy_format(
                gettext_lazy(
                    "%(source)s conversation %(title)s was compressed in Hermes since it was "
                    "imported; what is new in it was not added."
                ),
                **which,
            )
        )
    lease = turn_claim.acquire_for_turn(session_id=session.pk)
    if lease is None:
        return Merged(
            note=lazy_format(
                gettext_lazy(
                    "%(source)s conversation %(title)s was in use while importing; import the "
                    "export again later to add what is new in it."
                ),
                **which,
            )
        )
    try:
        with transaction.atomic():
            merged = _merge_holding(session, conv, cap, count_cut)
            if merged.note:
                merged.note = lazy_format(merged.note, **which)
                return merged
            locked = Session.objects.select_for_update().get(pk=session.pk)
            changes: dict[str, Any] = {"model_config": {**(locked.model_config or {}), **config}}
            if merged.added:
                changes["message_count"] = F("message_count") + len(merged.added)
            if merged.newest is not None and merged.newest > locked.last_activity_at:
                changes["last_activity_at"] = merged.newest
            Session.objects.filter(pk=session.pk).update(**changes)
            return merged
    finally:
        lease.release()


def _merge_holding(
    session: Session,
    conv: Imported,
    cap: Callable[[str], str],
    count_cut: Callable[[str], str],
) -> Merged:
    stored = [
        _Node(*row)
        for row in Message.objects.filter(session=session)
        .order_by("id")
        .values_list("id", "parent_id", "role", "content", "timestamp")
    ]
    matched, new = _match([*conv.messages, *conv.branches], stored, cap)
    if stored and not matched:
        return Merged(
            # conversation_merge names the conversation (%(source)s, %(title)s).
            note=gettext_lazy(
                "%(source)s conversation %(title)s no longer matches what was imported of it "
                "before; it was left as it is."
            )
        )
    config = session.model_config or {}
    # Our message that was the export's current one at the last import (imports before
    # `external_tip` was kept: found by its export id).
    previous = config.get("external_tip")
    if previous is None:
        last = str(config.get("external_last") or "")
        previous = next((i for e, i in matched.items() if stored_id(e) == last), None)
    tip = branches.path_tip(session_id=session.pk)
    # The person is still where the last import left them: the path follows the export.
    follow = bool(conv.messages) and tip is not None and tip.pk == previous
    times = {n.id: n.timestamp for n in stored}
    ids = dict(matched)
    merged = Merged()
    for item in new:
        parent_id = ids[item.parent] if item.parent else None
        stamp = item.timestamp or times.get(parent_id) or session.started_at
        message = Message.objects.create(
            session=session,
            role=item.role,
            content=count_cut(item.content),
            timestamp=stamp,
            status="complete" if item.role == "assistant" else "",
            parent_id=parent_id,
            active=False,
        )
        ids[item.ext_id] = message.pk
        times[message.pk] = stamp
        merged.added.append(message.pk)
        merged.newest = max(merged.newest, stamp) if merged.newest else stamp
    if follow:
        path = [ids[m.ext_id] for m in conv.messages]
        merged.followed = _select_path(session, path)
        on_path = set(path)
        merged.on_path = sum(1 for i in merged.added if i in on_path)
    merged.aside = len(merged.added) - merged.on_path
    if conv.messages:
        merged.tip = ids[conv.messages[-1].ext_id]
    return merged


def _select_path(session: Session, path: list[int]) -> bool:
    """Make `path` (message ids from the top, in order) the selected one when it goes
    further than the selected one; True when that moved it off messages it had (to another
    branch), False when it only grew or nothing changed. Call holding the conversation's
    lease, in a transaction."""
    active = set(Message.objects.filter(session=session, active=True).values_list("id", flat=True))
    first = next((i for i, mid in enumerate(path) if mid not in active), None)
    if first is None:
        return False
    dropped = active - set(path)
    if dropped:
        Message.objects.filter(pk__in=dropped).update(active=False)
    Message.objects.filter(pk__in=path[first:]).update(active=True)
    branches.branch_changed_on_commit(
        session_id=session.pk, after=path[first - 1] if first else 0, message_id=path[first]
    )
    return bool(dropped)
