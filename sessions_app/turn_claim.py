"""The conversation lease: at most one turn, or one compression, works on a conversation at
a time, across processes.

It is the session's lease (core/leases.py) of kind :data:`TURN` or :data:`COMPRESS`: taken
with a conditional UPDATE that must change exactly one row (a new chat's conversation is
INSERTed leased for its first turn: :func:`open_for_turn`), renewed by the holder's
heartbeat, released with an UPDATE conditional on the owner. A holder that dies stops
renewing: its lease expires after ``HERMES_LEASE_SECONDS`` (at once when it was a process
of this host) and the next turn or compression takes the conversation over. A turn's answer
left ``streaming`` by a dead holder becomes ``interrupted`` with its text
(:func:`answers_interrupt`), at takeover and when a process starts.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Case, Q, Value, When
from django.utils import timezone

from core.leases import Lease, lease_acquire, lease_insert, lease_is_live, owner_kind

from .models import Message, Session

TURN = "turn"
COMPRESS = "compress"
#: refusal_kind: a compression ended this part; the chat goes on in its continuation.
SPLIT = "split"
#: A part a compression has not ended (a turn's lease's condition, built once).
_OPEN = ~Q(end_reason=Session.EndReason.COMPRESSION)


def acquire_for_turn(
    *,
    session_id: str,
    values: dict[str, Any] | None = None,
    increments: dict[str, int] | None = None,
) -> Lease | None:
    """Lease the conversation for a chat turn (or a change to its messages); None while a
    live turn or compression holds it, and for a part a compression ended: the UPDATE sees
    the row as committed when it runs, so a split committed after the caller read the
    conversation (PostgreSQL reads each statement's own snapshot) refuses it here.
    `values` are written to the conversation in the same UPDATE, `increments` added to its
    counters."""
    return lease_acquire(
        Session,
        session_id,
        kind=TURN,
        when=_OPEN,
        values=values,
        increments=increments,
    )


def open_for_turn(**fields: Any) -> tuple[Session, Lease]:
    """A new conversation with `fields`, leased for its first turn by its INSERT."""
    return lease_insert(Session, kind=TURN, **fields)


def acquire_for_compression(*, session_id: str) -> Lease | None:
    """Lease a still open conversation for compression; None if busy or ended."""
    return lease_acquire(Session, session_id, kind=COMPRESS, when=Q(ended_at__isnull=True))


def holder_kind(*, session_id: str) -> str:
    """The kind of the live lease on the conversation ("turn", "compress"), or ""."""
    row = Session.objects.filter(pk=session_id).values_list("lease_owner", "lease_expires_at")
    current = row.first()
    return "" if current is None else _live_kind(*current)


def refusal_kind(*, session_id: str) -> str:
    """Why `acquire_for_turn` refused the conversation: SPLIT for a part a compression
    ended (since the caller read it), else `holder_kind`'s answer, in the same read."""
    row = Session.objects.filter(pk=session_id).values_list(
        "end_reason", "lease_owner", "lease_expires_at"
    )
    current = row.first()
    if current is None:
        return ""
    end_reason, *lease = current
    return SPLIT if end_reason == Session.EndReason.COMPRESSION else _live_kind(*lease)


def _live_kind(owner: str, expires: Any) -> str:
    return owner_kind(owner) if lease_is_live(owner, expires) else ""


def is_compressing(*, session_id: str) -> bool:
    return holder_kind(session_id=session_id) == COMPRESS


def _status_of_abandoned() -> Case:
    """What an answer left "streaming" by a dead holder becomes: "interrupted" when it has
    text (kept), "failed" when nothing had been streamed yet (as a live turn decides)."""
    return Case(
        When(content="", then=Value(Message.Status.FAILED)),
        default=Value(Message.Status.INTERRUPTED),
    )


def answers_interrupt(session_ids: list[Any]) -> int:
    """Answers left "streaming" in these conversations by a holder that died become
    "interrupted", keeping the text saved so far ("failed" when there was none)."""
    return Message.objects.filter(
        session_id__in=session_ids, status=Message.Status.STREAMING
    ).update(status=_status_of_abandoned(), finish_reason="process_died")


def answers_close_abandoned(*, session_id: str | None = None) -> int:
    """Answers still "streaming" where no live turn holds the conversation (its holder died
    and nobody took over yet) become "interrupted", text kept ("failed" without). One
    UPDATE, so a turn that takes the conversation meanwhile keeps its own answer."""
    rows = Message.objects.filter(status=Message.Status.STREAMING)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    live = Q(
        session__lease_owner__startswith=f"{TURN}@", session__lease_expires_at__gt=timezone.now()
    )
    return rows.exclude(live).update(status=_status_of_abandoned(), finish_reason="process_died")
