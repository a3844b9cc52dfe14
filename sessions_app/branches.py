"""Edit and branch: the messages of a conversation form a tree, one path of it selected.

`Message.parent` is the previous message on a message's path; messages that share a parent
are alternatives of each other (an edited user message beside the original, a regenerated
answer beside the earlier ones). `Message.active` marks the selected path: the messages the
chat shows, the model receives, compression summarises and a new message continues from.
The path is in id order (a message is always written after its parent), so "the path after
message X" is "the active messages with a larger id".

Every change of the selected path happens under the conversation claim (turn_claim), so it
never races a running turn, and tells the conversation's tabs with a `branch.changed` event
after commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import OuterRef, Subquery
from django.utils.translation import gettext_lazy

from core.db.rows import raw_first
from core.exceptions import NotFound, ServiceError
from core.realtime import publish, session_group

from .models import Message, Session
from .selectors import PathRow, path_rows


@dataclass(frozen=True, slots=True)
class Alternatives:
    """Where a message stands among its alternatives: `index` of `count` (1-based), and the
    ids of the previous and next ones (None at the ends)."""

    index: int
    count: int
    previous: int | None
    next: int | None


def path_tip(*, session_id: str) -> Message | None:
    """The last message of the selected path (the parent of the next one written).

    Every turn reads it: through `raw()`, which builds the same instance without compiling
    a query (a third of the time of `.filter().order_by().first()` here)."""
    return raw_first(
        Message,
        "FROM sessions_app_message WHERE session_id = %s AND active = %s ORDER BY id DESC LIMIT 1",
        [session_id, True],
    )


# The fields a path's tip is built with (role, status, its call's usage), in the model's order.
_TIP_FIELDS = [
    f.attname
    for f in Message._meta.concrete_fields
    if f.attname in ("id", "session_id", "role", "status", "prompt_tokens", "completion_tokens")
]


def path_with_tip(*, session_id: str) -> tuple[list[PathRow], Message | None]:
    """The selected path (selectors.path_rows) and its tip in one read: a new message's
    parent and the messages the model is sent, both. The tip has the fields read (id,
    session, role, status, its call's usage); the others load on access."""
    rows = path_rows(session_id=session_id)
    if not rows:
        return rows, None
    tip = rows[-1]
    read = {**tip._asdict(), "session_id": session_id}
    return rows, Message.from_db(connection.alias, _TIP_FIELDS, [read[n] for n in _TIP_FIELDS])


def path_link_new_session(*, session_id: str) -> None:
    """Chain the messages of a session written in bulk (a compression continuation, an
    import) into one path: each message's parent is the one before it.

    Precondition: every message of the session was written by the caller in order and
    none has a parent yet (it would relink the first messages of other branches)."""
    previous = (
        Message.objects.filter(session_id=OuterRef("session_id"), id__lt=OuterRef("id"))
        .order_by("-id")
        .values("id")[:1]
    )
    Message.objects.filter(session_id=session_id, parent__isnull=True).update(
        parent_id=Subquery(previous)
    )


def alternatives_of(session_ids: list[str]) -> dict[int, Alternatives]:
    """For every message of these sessions that has alternatives: its place among them."""
    siblings: dict[tuple[str, int | None], list[int]] = {}
    for mid, session_id, parent_id in (
        Message.objects.filter(session_id__in=session_ids)
        .order_by("id")
        .values_list("id", "session_id", "parent_id")
    ):
        siblings.setdefault((session_id, parent_id), []).append(mid)
    out: dict[int, Alternatives] = {}
    for ids in siblings.values():
        if len(ids) < 2:
            continue
        for i, mid in enumerate(ids):
            out[mid] = Alternatives(
                index=i + 1,
                count=len(ids),
                previous=ids[i - 1] if i > 0 else None,
                next=ids[i + 1] if i + 1 < len(ids) else None,
            )
    return out


def check_open_part(session: Session, message_id: Any) -> Message:
    """The message `message_id` of `session`, which must be a part still open for turns.

    NotFound for an id outside this (already owner-checked) session, so another person's
    message id reveals nothing."""
    if isinstance(message_id, bool) or not isinstance(message_id, int):
        raise ServiceError("bad_request", gettext_lazy('"message_id" must be a message id.'))
    message = Message.objects.filter(pk=message_id, session_id=session.pk).first()
    if message is None:
        raise NotFound(gettext_lazy("message"))
    if session.ended_at is not None:
        raise part_closed()
    return message


def part_closed() -> ServiceError:
    """The refusal of a change to a message of a part that has ended."""
    return ServiceError(
        "not_editable",
        gettext_lazy(
            "This message is in an earlier, compressed part of the conversation; "
            "it can no longer be changed."
        ),
    )


def branch_point(session: Session, *, regenerate: bool, message_id: Any) -> Message | None:
    """The parent of an edit's or a regeneration's first new message, after taking off the
    selected path what the new message replaces. Precondition: holding the claim, in a
    transaction."""
    if message_id is None:
        asked = session.messages.filter(role=Message.Role.USER, active=True).order_by("-id").first()
        if asked is None:
            raise ServiceError(
                "nothing_to_regenerate", gettext_lazy("There is no answer to regenerate.")
            )
    else:
        target = session.messages.get(pk=message_id)
        if not target.active:
            raise ServiceError(
                "not_on_path",
                gettext_lazy("That message is on another branch; switch to it first."),
            )
        if not regenerate:
            if target.role != Message.Role.USER or target.kind != Message.Kind.REGULAR:
                raise ServiceError(
                    "not_editable", gettext_lazy("Only your own messages can be edited.")
                )
            path_drop_from(session_id=session.pk, first_id=target.pk)
            return Message.objects.filter(pk=target.parent_id).first()
        if target.role == Message.Role.USER:
            raise ServiceError(
                "bad_request", gettext_lazy("Regenerate names an answer, not your message.")
            )
        asked = answered_user_message(target)
    # The answer after `asked` gives way to a new one.
    after = session.messages.filter(active=True, id__gt=asked.pk).order_by("id").first()
    if after is not None:
        path_drop_from(session_id=session.pk, first_id=after.pk)
    return asked


def path_drop_from(*, session_id: str, first_id: int) -> None:
    """Take message `first_id` and everything after it off the selected path.

    Precondition: inside the caller's transaction, holding the claim; `first_id` is on
    the path."""
    Message.objects.filter(session_id=session_id, active=True, id__gte=first_id).update(
        active=False
    )


def answered_user_message(message: Message) -> Message:
    """The user message that an answer (or a tool message of it) responds to."""
    current: Message | None = message
    while current is not None and current.role != Message.Role.USER:
        current = (
            Message.objects.filter(pk=current.parent_id).first() if current.parent_id else None
        )
    if current is None:
        raise ServiceError(
            "nothing_to_regenerate", gettext_lazy("There is no answer to regenerate.")
        )
    return current


def path_below(*, session_id: str, top: Message) -> list[int]:
    """`top` and its most recent continuation: the path down to the newest message in its
    subtree (children always have larger ids than their parent)."""
    parents = dict(
        Message.objects.filter(session_id=session_id, id__gte=top.pk)
        .order_by("id")
        .values_list("id", "parent_id")
    )
    subtree = {top.pk}
    for mid, parent_id in parents.items():
        if parent_id in subtree:
            subtree.add(mid)
    path, current = [], max(subtree)
    while current != top.pk:
        path.append(current)
        current = parents[current]
    return [top.pk, *reversed(path)]


def branch_changed_on_commit(*, session_id: str, after: int, message_id: int) -> None:
    """Tell the conversation's tabs, after commit, that the path after message `after`
    (0: from the start) changed and now goes through `message_id`."""
    event = {
        "type": "branch.changed",
        "session": session_id,
        "after": after,
        "message_id": message_id,
    }
    transaction.on_commit(lambda: publish(session_group(session_id), event))
