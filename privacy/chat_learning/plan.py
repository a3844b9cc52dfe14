"""Which imported conversations the learning review reads, in which batches, and what of
each it is shown (see the package docstring for the choices and why)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Max, Q, Sum, Value
from django.db.models.functions import Coalesce, Least, Length
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.exceptions import Text
from memory.inferences.config import local_config
from memory.inferences.selectors import inference_allowed
from memory.providers.manager import active_provider_name
from memory.selectors import memory_settings
from sessions_app.agent import llm
from sessions_app.models import Message, Session

#: Model calls of the reviewer per batch (the memory tool takes several changes in one call:
#: one to write, one to answer, one to spare for a refused write).
REVIEW_CALLS = 3
#: A batch's calls at most: the reviewer's and one extraction.
BATCH_CALLS = REVIEW_CALLS + 1
USER_CHARS = 1000
ANSWER_CHARS = 300
MIN_USER_CHARS = 40
HALF_LIFE_DAYS = 365.0
#: An excerpt is at most this part of a batch, so a batch shows several conversations.
SHARE = 3
#: What a line adds to an excerpt besides its text ("[12345] ASSISTANT: "), and a
#: conversation's heading.
LINE_CHARS = 20
HEADING_CHARS = 100
_CHUNK = 400


def learn_unavailable(*, user: AbstractBaseUser) -> Text:
    """Why the option cannot be used for `user` now ("" when it can), translated when
    shown."""
    if settings.HERMES_IMPORT_LEARN_CONVERSATIONS <= 0:
        return gettext_lazy("Learning from imports is turned off on this server.")
    if not llm.is_configured():
        return gettext_lazy(
            "No model is configured on this server, so there is nothing to learn with."
        )
    if not memory_settings(user=user)[0]:
        return gettext_lazy("Memory is off for your account: turn it on above to let Hermes learn.")
    return ""


def inferences_on(*, user: AbstractBaseUser) -> bool:
    """Whether the review also infers (the local provider, extraction on, consent given)."""
    return (
        active_provider_name() == "local"
        and local_config().extraction_enabled
        and inference_allowed(user=user)
    )


def batch_chars() -> int:
    return settings.HERMES_INFERENCE_TRANSCRIPT_CHARS


def learned_through(session: Session) -> int:
    config = session.model_config if isinstance(session.model_config, dict) else {}
    value = config.get("learned_through")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class _Measured:
    session_id: str
    started: datetime
    user_chars: int
    score: float
    size: int


def _unread(rows: list[tuple[str, Any, datetime]]) -> Q:
    """The messages of these sessions that no learning has read yet."""
    fresh = [pk for pk, config, _ in rows if not (config or {}).get("learned_through")]
    unread = Q(session_id__in=fresh)
    for pk, config, _ in rows:
        through = (config or {}).get("learned_through")
        if isinstance(through, int) and through:
            unread |= Q(session_id=pk, id__gt=through)
    return unread


def _measure(user: AbstractBaseUser, chunk: list[str], now: datetime) -> list[_Measured]:
    rows = list(
        Session.objects.filter(owner=user, pk__in=chunk).values_list(
            "pk", "model_config", "started_at"
        )
    )
    if not rows:
        return []
    started = {pk: at for pk, _, at in rows}
    share = batch_chars() // SHARE
    sizes = (
        Message.objects.filter(
            _unread(rows),
            active=True,
            kind=Message.Kind.REGULAR,
            role__in=[Message.Role.USER, Message.Role.ASSISTANT],
        )
        .exclude(content="")
        .values("session_id")
        .annotate(
            mine=Coalesce(
                Sum(Least(Length("content"), Value(USER_CHARS)), filter=Q(role="user")), 0
            ),
            answers=Coalesce(
                Sum(Least(Length("content"), Value(ANSWER_CHARS)), filter=Q(role="assistant")), 0
            ),
            lines=Count("id"),
            last=Max("timestamp"),
        )
    )
    found = []
    for row in sizes:
        age_days = max(0.0, (now - row["last"]).total_seconds() / 86400)
        found.append(
            _Measured(
                session_id=row["session_id"],
                started=started[row["session_id"]],
                user_chars=row["mine"],
                score=row["mine"] * 0.5 ** (age_days / HALF_LIFE_DAYS),
                size=min(
                    share, HEADING_CHARS + row["mine"] + row["answers"] + LINE_CHARS * row["lines"]
                ),
            )
        )
    return found


def _pack(chosen: list[_Measured]) -> list[list[str]]:
    batches: list[list[str]] = []
    used = batch_chars()
    for item in chosen:
        if used + item.size > batch_chars():
            batches.append([])
            used = 0
        batches[-1].append(item.session_id)
        used += item.size
    return batches


def learn_plan(*, user: AbstractBaseUser, session_ids: list[str]) -> dict[str, Any]:
    """The learning's starting state for the conversations of an import (`session_ids`,
    the import's order): which to read, in which batches (the job's `learning`)."""
    now = timezone.now()
    ids = list(dict.fromkeys(session_ids))
    measured: list[_Measured] = []
    for start in range(0, len(ids), _CHUNK):
        measured += _measure(user, ids[start : start + _CHUNK], now)
    eligible = sorted(
        (m for m in measured if m.user_chars >= MIN_USER_CHARS),
        key=lambda m: (-m.score, m.session_id),
    )
    max_batches = settings.HERMES_IMPORT_LEARN_MAX_CALLS // BATCH_CALLS
    room = max_batches * batch_chars()
    chosen: list[_Measured] = []
    for item in eligible[: settings.HERMES_IMPORT_LEARN_CONVERSATIONS]:
        if item.size > room:
            break
        chosen.append(item)
        room -= item.size
    chosen.sort(key=lambda m: (m.started, m.session_id))
    batches = _pack(chosen)
    # Packing leaves gaps: drop the batches past the cap (their conversations wait for the
    # next upload with the option on).
    batches = batches[:max_batches]
    return {
        "considered": len(ids),
        "eligible": len(eligible),
        "chosen": sum(len(b) for b in batches),
        "batches": batches,
        "batch": 0,
        "done": 0,
        "calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": "0",
        "inferences": 0,
        "progress": 0,
        "stage": "Waiting to start",
    }


def excerpts(
    *, user: AbstractBaseUser, session_ids: list[str]
) -> list[tuple[Session, list[Message]]]:
    """What the review is shown of each conversation of a batch (the user's own, in the
    batch's order): its unread messages in order, each cut to its cap (`content` holds the
    cut text: the objects are never saved), up to a share of the batch."""
    share = batch_chars() // SHARE
    sessions = Session.objects.filter(owner=user, pk__in=session_ids).in_bulk()
    out = []
    for session_id in session_ids:
        session = sessions.get(session_id)
        if session is None:
            continue  # deleted since the import
        rows = (
            Message.objects.filter(
                session=session,
                active=True,
                kind=Message.Kind.REGULAR,
                role__in=[Message.Role.USER, Message.Role.ASSISTANT],
                id__gt=learned_through(session),
            )
            .exclude(content="")
            .order_by("id")
            .only("id", "session_id", "role", "content", "timestamp")
        )
        kept: list[Message] = []
        used = HEADING_CHARS
        for message in rows.iterator():
            cap = USER_CHARS if message.role == Message.Role.USER else ANSWER_CHARS
            if len(message.content) > cap:
                message.content = message.content[:cap] + "…"
            size = len(message.content) + LINE_CHARS
            if kept and used + size > share:
                break
            kept.append(message)
            used += size
        if kept:
            out.append((session, kept))
    return out
