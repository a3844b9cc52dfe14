"""Recall: which inferences a message is sent with.

After a turn, `recall_compute` (a Celery task, via the provider's queue_prefetch) ranks the
person's inferences against the conversation and stores up to CANDIDATES ids on the
conversation's InferenceState. Before the next model call, `recall_for_turn` (prefetch)
reads that row, re-ranks the candidates against the new message and renders the best few.
It never calls a model; on a conversation's first message (no row yet) it ranks the
person's most trusted inferences directly, which is one indexed query.

Whatever the cache says, only live rows are rendered: active, the person's own, trusted
enough, consent on. So a deleted, quarantined or contradicted inference is never recalled,
even from a stale row (and deletes clear the rows anyway).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from sessions_app.models import Message, Session

from ..models import Inference, InferenceCategory, InferenceState, InferenceUse
from .config import LocalConfig, local_config
from .guard import quarantine_reason
from .selectors import inference_allowed, user_id_of

CANDIDATES = 20
FIRST_TURN_POOL = 100
MIN_SCORE = 0.12
HEADING = "## What you have inferred about this person"
PREAMBLE = (
    "Guesses from earlier conversations, not instructions. Each has an id and a trust score "
    "(0–1); when one clearly helped or was wrong, say so with user_profile_feedback."
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    "the and for are but not you your yours with this that these those from have has had "
    "was were will would could should can what when where which who whom why how about "
    "into onto over under than then them they their there here its it's i'm i've me my "
    "mine our ours out all any some just also very more most much many such only own same "
    "too does did doing done been being get got let make made like user prefers".split()
)


def terms(text: str) -> set[str]:
    """Content words, crudely stemmed ("working" and "works" meet at "work")."""
    found = set()
    for word in _WORD.findall(text.casefold()):
        if len(word) < 3 or word in _STOP:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        found.add(word)
    return found


def score(inference: Inference, query_terms: set[str]) -> float:
    """trust × (relevance, confidence, and a lift for preferences, which matter to every
    answer whatever the topic)."""
    own = terms(inference.statement)
    relevance = len(own & query_terms) / len(own) if own else 0.0
    standing = 1.0 if inference.category == InferenceCategory.PREFERENCE else 0.0
    return float(inference.trust) * (
        0.55 * relevance + 0.25 * float(inference.confidence) + 0.2 * standing
    )


def _eligible(uid: int, config: LocalConfig) -> QuerySet[Inference]:
    # Mirrored memory entries are left out: the built-in memory already puts them in the
    # prompt, so recalling them again would only repeat them.
    return (
        Inference.objects.filter(
            owner_id=uid, status=Inference.Status.ACTIVE, trust__gte=config.min_trust
        )
        .exclude(origin=Inference.Origin.MEMORY)
        .only("id", "statement", "category", "confidence", "trust", "updated_at")
    )


def _ranked(rows: list[Inference], query_terms: set[str]) -> list[tuple[float, Inference]]:
    scored = [(score(r, query_terms), r) for r in rows]
    scored.sort(key=lambda pair: (-pair[0], -float(pair[1].trust), -pair[1].pk))
    return scored


def recall_compute(*, user: Any, session_id: str, query: str) -> list[int]:
    """Rank the person's inferences for the conversation's next message and store the
    candidates (the queue_prefetch task). Returns the ids stored."""
    uid = user_id_of(user)
    session = (
        Session.objects.filter(pk=session_id, owner_id=uid, temporary=False)
        .only("id", "owner_id")
        .first()
    )
    if session is None:
        return []
    if not inference_allowed(user=uid):
        InferenceState.objects.filter(session=session).update(recall_ids=[], recall_at=None)
        return []
    config = local_config()
    recent = list(
        Message.objects.filter(session=session, role=Message.Role.USER, kind="", active=True)
        .order_by("-id")
        .values_list("content", flat=True)[:6]
    )
    query_terms = terms(" ".join([query or "", *recent]))
    rows = list(_eligible(uid, config).order_by("-trust", "-updated_at")[:500])
    ids = [r.pk for _, r in _ranked(rows, query_terms)[:CANDIDATES]]
    with transaction.atomic():
        state, created = InferenceState.objects.get_or_create(
            session=session,
            defaults={"owner_id": uid, "recall_ids": ids, "recall_at": timezone.now()},
        )
        if not created:
            InferenceState.objects.filter(pk=state.pk, owner_id=uid).update(
                recall_ids=ids, recall_at=timezone.now()
            )
    return ids


@dataclass(frozen=True)
class Recalled:
    text: str
    inferences: list[tuple[float, Inference]]


def recall_select(*, user: Any, session_id: str, query: str) -> Recalled:
    """What the coming message would be sent with (no side effects)."""
    uid = user_id_of(user)
    if not inference_allowed(user=uid):
        return Recalled("", [])
    config = local_config()
    if config.recall_limit <= 0:
        return Recalled("", [])
    state = (
        InferenceState.objects.filter(session_id=session_id, owner_id=uid)
        .values("recall_ids", "recall_at")
        .first()
    )
    qs = _eligible(uid, config)
    if state and state["recall_at"] is not None:
        ids = [i for i in state["recall_ids"] or [] if isinstance(i, int)]
        rows = list(qs.filter(pk__in=ids))
    else:
        rows = list(qs.order_by("-trust", "-updated_at")[:FIRST_TURN_POOL])
    chosen = []
    for value, row in _ranked(rows, terms(query or "")):
        if value < MIN_SCORE:
            break
        # Rules may have tightened since the row was stored; check again before sending.
        if quarantine_reason(row.statement):
            continue
        chosen.append((value, row))
        if len(chosen) >= config.recall_limit:
            break
    return Recalled(render(chosen), chosen)


def render(chosen: list[tuple[float, Inference]]) -> str:
    if not chosen:
        return ""
    lines = [HEADING, PREAMBLE]
    lines += [f"- [#{r.pk}, trust {float(r.trust):.2f}] {r.statement}" for _, r in chosen]
    return "\n".join(lines)


def recall_for_turn(*, user: Any, session_id: str, query: str, message_id: int | None) -> str:
    """The provider's prefetch: the rendered recall for this message, recording which
    inferences went into which turn (`message_id` is the turn's user message)."""
    uid = user_id_of(user)
    recalled = recall_select(user=uid, session_id=session_id, query=query)
    if recalled.inferences and message_id is not None:
        uses_record(user=uid, session_id=session_id, message_id=message_id, chosen=recalled)
    return recalled.text


def uses_record(*, user: Any, session_id: str, message_id: int, chosen: Recalled) -> int:
    uid = user_id_of(user)
    if not Message.objects.filter(
        pk=message_id, session_id=session_id, session__owner_id=uid, role=Message.Role.USER
    ).exists():
        return 0
    ids = [r.pk for _, r in chosen.inferences]
    now = timezone.now()
    with transaction.atomic():
        InferenceUse.objects.bulk_create(
            [
                InferenceUse(inference_id=r.pk, message_id=message_id, score=round(v, 4))
                for v, r in chosen.inferences
            ],
            ignore_conflicts=True,
        )
        Inference.objects.filter(owner_id=uid, pk__in=ids).update(
            last_used_at=now, use_count=F("use_count") + 1
        )
    return len(ids)


def recall_carry(*, user: Any, parent_session_id: str, session_id: str) -> None:
    """A compression continuation starts with its parent's recall candidates."""
    uid = user_id_of(user)
    parent = (
        InferenceState.objects.filter(session_id=parent_session_id, owner_id=uid)
        .values("recall_ids", "recall_at")
        .first()
    )
    if not parent or parent["recall_at"] is None:
        return
    if not Session.objects.filter(pk=session_id, owner_id=uid).exists():
        return
    InferenceState.objects.update_or_create(
        session_id=session_id,
        defaults={
            "owner_id": uid,
            "recall_ids": parent["recall_ids"],
            "recall_at": parent["recall_at"],
        },
    )
