"""Writes for inferences: storing what the extractor found (merging duplicates, marking
contradictions, quarantining imperative text), the person's corrections, feedback and
deletions, consent, and mirroring built-in memory writes.

Every function filters on the owner it is given; ids from elsewhere (the model, a URL)
only ever select among that owner's rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from core.exceptions import NotFound, ServiceError
from sessions_app.models import Message

from ..models import (
    Inference,
    InferenceCategory,
    InferenceSettings,
    InferenceState,
    InferenceTombstone,
)
from .guard import (
    MAX_STATEMENT_CHARS,
    clean_statement,
    normalise,
    quarantine_reason,
    reason_shown,
    statement_digest,
)
from .selectors import inference_allowed, user_id_of

logger = logging.getLogger(__name__)

HELPFUL = Decimal("0.05")
UNHELPFUL = Decimal("0.10")
ZERO, ONE = Decimal("0"), Decimal("1")
MERGE_BUMP = Decimal("0.05")
# A merged duplicate never reaches certainty on the extractor's word alone; only the
# person's own correction is 1.0.
MERGE_CEILING = Decimal("0.990")
MIRROR_CONFIDENCE = Decimal("0.900")


def _clamp(value: Decimal) -> Decimal:
    return min(ONE, max(ZERO, value)).quantize(Decimal("0.001"))


@dataclass(frozen=True)
class Candidate:
    """One validated item of the extractor's output (see extraction.parse_candidates)."""

    statement: str
    category: str
    confidence: Decimal
    evidence: tuple[int, ...]
    same_as: int | None = None
    contradicts: int | None = None


@dataclass
class StoreResult:
    created: list[Inference] = field(default_factory=list)
    merged: list[Inference] = field(default_factory=list)
    quarantined: list[Inference] = field(default_factory=list)
    skipped: int = 0


def recall_invalidate(*, user: Any) -> None:
    """Drop the precomputed recall of all the person's conversations (after a delete or
    consent change); the next message recomputes it from live rows."""
    InferenceState.objects.filter(owner_id=user_id_of(user)).exclude(recall_at=None).update(
        recall_ids=[], recall_at=None
    )


def _tombstone(uid: int, digests: list[str]) -> None:
    InferenceTombstone.objects.bulk_create(
        [InferenceTombstone(owner_id=uid, digest=d) for d in set(digests)],
        ignore_conflicts=True,
    )


def _merge(existing: Inference, candidate: Candidate, reason: str) -> Inference:
    bumped = max(existing.confidence, candidate.confidence) + MERGE_BUMP
    existing.confidence = max(existing.confidence, min(MERGE_CEILING, bumped))
    existing.updated_at = timezone.now()
    fields = ["confidence", "updated_at"]
    if existing.status == Inference.Status.CONTRADICTED and not reason:
        # Derived again after being contradicted: the newer evidence wins again.
        existing.status = Inference.Status.ACTIVE
        existing.contradicted_by = None
        fields += ["status", "contradicted_by"]
    existing.save(update_fields=fields)
    if candidate.evidence:
        existing.evidence.add(*candidate.evidence)
    return existing


def inferences_store(
    *,
    user: Any,
    candidates: list[Candidate],
    session_id: str | None,
    origin: str = Inference.Origin.EXTRACTED,
    extractor_version: str = "",
) -> StoreResult:
    """Store validated candidates for `user`. Precondition: evidence ids were checked to be
    the user's own messages (extraction.parse_candidates does). Same normalised statement
    (or the extractor's `same_as`) → merged: evidence added, confidence bumped. A
    `contradicts` reference marks the older inference contradicted. Imperative or
    suspicious statements are stored quarantined; statements the person deleted before are
    skipped."""
    uid = user_id_of(user)
    result = StoreResult()
    with transaction.atomic():
        tombstones = set(
            InferenceTombstone.objects.filter(
                owner_id=uid, digest__in=[statement_digest(c.statement) for c in candidates]
            ).values_list("digest", flat=True)
        )
        for candidate in candidates:
            digest = statement_digest(candidate.statement)
            if digest in tombstones:
                result.skipped += 1
                continue
            reason = quarantine_reason(candidate.statement)
            existing = (
                Inference.objects.select_for_update().filter(owner_id=uid, statement_hash=digest)
            ).first()
            if existing is None and candidate.same_as and not reason:
                existing = (
                    Inference.objects.select_for_update()
                    .filter(owner_id=uid, pk=candidate.same_as, status=Inference.Status.ACTIVE)
                    .first()
                )
            if existing is not None:
                result.merged.append(_merge(existing, candidate, reason))
                continue
            try:
                # A savepoint: another conversation's extraction may store the same
                # statement at this moment (PostgreSQL; SQLite serialises writers).
                with transaction.atomic():
                    inference = Inference.objects.create(
                        owner_id=uid,
                        statement=candidate.statement,
                        statement_hash=digest,
                        category=candidate.category,
                        confidence=candidate.confidence,
                        origin=origin,
                        status=Inference.Status.QUARANTINED if reason else Inference.Status.ACTIVE,
                        quarantine_reason=reason[:300],
                        source_session_id=session_id,
                        extractor_version=extractor_version,
                    )
            except IntegrityError:
                existing = Inference.objects.select_for_update().get(
                    owner_id=uid, statement_hash=digest
                )
                result.merged.append(_merge(existing, candidate, reason))
                continue
            if candidate.evidence:
                inference.evidence.add(*candidate.evidence)
            (result.quarantined if reason else result.created).append(inference)
            if candidate.contradicts and not reason:
                Inference.objects.filter(
                    owner_id=uid, pk=candidate.contradicts, status=Inference.Status.ACTIVE
                ).exclude(pk=inference.pk).update(
                    status=Inference.Status.CONTRADICTED,
                    contradicted_by=inference,
                    updated_at=timezone.now(),
                )
    if result.quarantined:
        logger.warning(
            "quarantined %d inference(s) for user %s: %s",
            len(result.quarantined),
            uid,
            "; ".join(i.quarantine_reason for i in result.quarantined),
        )
    return result


def check_statement(text: Any) -> str:
    """A statement the person typed, cleaned, or a ServiceError saying what to change."""
    # What the person typed is refused in their language (pages, the admin and the API).
    if not isinstance(text, str):
        raise ServiceError("invalid", gettext("The statement must be text."))
    cleaned = clean_statement(text)
    if not cleaned:
        raise ServiceError("invalid", gettext("The statement cannot be empty."))
    if len(cleaned) > MAX_STATEMENT_CHARS:
        raise ServiceError(
            "too_long",
            gettext("The statement is %(size)s characters; the limit is %(limit)s.")
            % {"size": f"{len(cleaned):,}", "limit": MAX_STATEMENT_CHARS},
        )
    reason = quarantine_reason(cleaned)
    if reason:
        raise ServiceError(
            "refused",
            gettext(
                "Not saved: this %(reason)s. Inferences are facts about you, such as "
                "“Prefers short answers”; instructions for the assistant belong in your "
                "custom instructions on the Account page."
            )
            % {"reason": reason_shown(reason)},
            reason=reason,
        )
    return cleaned


def inference_correct(*, user: Any, inference_id: Any, statement: Any) -> Inference:
    """The person's correction: the new text (checked like any other), fully trusted as
    theirs; the old statement is not derived again."""
    uid = user_id_of(user)
    text = check_statement(statement)
    digest = statement_digest(text)
    with transaction.atomic():
        inference = (
            Inference.objects.select_for_update().filter(owner_id=uid, pk=inference_id).first()
        )
        if inference is None:
            raise NotFound(gettext_lazy("inference"))
        if (
            Inference.objects.filter(owner_id=uid, statement_hash=digest)
            .exclude(pk=inference.pk)
            .exists()
        ):
            raise ServiceError(
                "duplicate",
                gettext("Another inference already says this; delete one of them instead."),
            )
        if inference.statement_hash != digest:
            _tombstone(uid, [inference.statement_hash])
        inference.statement = text
        inference.statement_hash = digest
        inference.origin = Inference.Origin.CORRECTED
        inference.status = Inference.Status.ACTIVE
        inference.quarantine_reason = ""
        inference.contradicted_by = None
        inference.confidence = ONE
        inference.updated_at = timezone.now()
        inference.save()
    return inference


def inference_feedback(
    *, user: Any, inference_id: Any, helpful: bool, active_only: bool = False
) -> Inference:
    """Trust +0.05 (helpful) or −0.10 (not helpful), clamped to 0..1. `active_only` for the
    agent, which must not learn that quarantined or contradicted rows exist."""
    uid = user_id_of(user)
    try:
        pk = int(inference_id)
    except (TypeError, ValueError):
        raise NotFound(gettext_lazy("inference")) from None
    with transaction.atomic():
        # Locked: two feedback clicks at once must both count.
        qs = Inference.objects.select_for_update().filter(owner_id=uid, pk=pk)
        if active_only:
            qs = qs.filter(status=Inference.Status.ACTIVE)
        inference = qs.first()
        if inference is None:
            raise NotFound(gettext_lazy("inference"))
        if helpful:
            inference.trust = _clamp(inference.trust + HELPFUL)
            inference.helpful_count += 1
        else:
            inference.trust = _clamp(inference.trust - UNHELPFUL)
            inference.unhelpful_count += 1
        inference.save(update_fields=["trust", "helpful_count", "unhelpful_count"])
    return inference


def inference_delete(*, user: Any, inference_id: Any) -> None:
    """Delete for good: the row, its evidence links and uses; its statement is not derived
    again and no cached recall still points at it."""
    uid = user_id_of(user)
    with transaction.atomic():
        inference = Inference.objects.filter(owner_id=uid, pk=inference_id).first()
        if inference is None:
            raise NotFound(gettext_lazy("inference"))
        _tombstone(uid, [inference.statement_hash])
        inference.delete()
        recall_invalidate(user=uid)


def inferences_delete_all(*, user: Any) -> int:
    uid = user_id_of(user)
    with transaction.atomic():
        qs = Inference.objects.filter(owner_id=uid)
        digests = list(qs.values_list("statement_hash", flat=True))
        _tombstone(uid, digests)
        qs.delete()
        recall_invalidate(user=uid)
    return len(digests)


def inference_settings_set(*, user: Any, enabled: bool) -> InferenceSettings:
    """Switch inference on or off for the person. Off stops extraction and recall at once
    (cached recall is dropped); existing inferences stay until they delete them."""
    uid = user_id_of(user)
    if not isinstance(enabled, bool):
        raise ServiceError("invalid", "enabled must be true or false.")
    with transaction.atomic():
        try:
            row, _ = InferenceSettings.objects.update_or_create(
                user_id=uid, defaults={"enabled": enabled, "updated_at": timezone.now()}
            )
        except IntegrityError:  # created concurrently: the row exists now
            row = InferenceSettings.objects.get(user_id=uid)
            row.enabled, row.updated_at = enabled, timezone.now()
            row.save(update_fields=["enabled", "updated_at"])
        if not enabled:
            recall_invalidate(user=uid)
    return row


# --- mirroring the built-in memory ---------------------------------------------------------


def _turn_user_message(uid: int, session_id: str | None, message_id: Any) -> int | None:
    """The user message that led to a memory write made while answering `message_id`."""
    if not session_id:
        return None
    # On the selected path: the turn that made the write answers it.
    qs = Message.objects.filter(
        session_id=session_id, session__owner_id=uid, role=Message.Role.USER, active=True
    )
    if isinstance(message_id, int):
        qs = qs.filter(id__lt=message_id)
    return qs.order_by("-id").values_list("id", flat=True).first()


def _mirrored(uid: int, old_text: str, previous: str) -> list[Inference]:
    """The mirrored inference a replace/remove refers to: the entry's previous text when
    the store reported it, else the entry whose text contains `old_text`."""
    rows = Inference.objects.filter(owner_id=uid, origin=Inference.Origin.MEMORY)
    if previous:
        exact = list(rows.filter(statement_hash=statement_digest(previous)))
        if exact:
            return exact
    needle = normalise(old_text)
    if not needle:
        return []
    return [r for r in rows if needle in normalise(r.statement)]


def inference_mirror_write(
    *, user: Any, action: str, target: str, content: str, metadata: dict[str, Any] | None
) -> Inference | None:
    """Mirror a committed built-in memory write (add/replace/remove) into the user model,
    so the profile search sees what the agent saved. Respects consent."""
    uid = user_id_of(user)
    if not inference_allowed(user=uid):
        return None
    meta = metadata or {}
    category = InferenceCategory.ABOUT if target == "user" else InferenceCategory.OTHER
    old_text = meta.get("old_text") if isinstance(meta.get("old_text"), str) else ""
    previous = meta.get("previous_content")
    previous = previous if isinstance(previous, str) else ""
    if action in ("replace", "remove") and (old_text or previous):
        matches = _mirrored(uid, old_text, previous)
        if len(matches) == 1:
            if action == "remove":
                matches[0].delete()
                recall_invalidate(user=uid)
                return None
            try:
                text = clean_statement(content or "")[:MAX_STATEMENT_CHARS]
                if not text:
                    return None
                inference = matches[0]
                inference.statement = text
                inference.statement_hash = statement_digest(text)
                reason = quarantine_reason(text)
                inference.status = (
                    Inference.Status.QUARANTINED if reason else Inference.Status.ACTIVE
                )
                inference.quarantine_reason = reason[:300]
                inference.updated_at = timezone.now()
                with transaction.atomic():
                    inference.save()
                return inference
            except IntegrityError:  # the new text is already an inference
                return None
        if action == "remove":
            return None
    if action not in ("add", "replace"):
        return None
    text = clean_statement(content or "")
    if not text or len(text) > MAX_STATEMENT_CHARS:
        return None
    session_id = meta.get("session_id") if isinstance(meta.get("session_id"), str) else None
    evidence = _turn_user_message(uid, session_id, meta.get("message_id"))
    stored = inferences_store(
        user=uid,
        candidates=[
            Candidate(
                statement=text,
                category=category,
                confidence=MIRROR_CONFIDENCE,
                evidence=(evidence,) if evidence else (),
            )
        ],
        session_id=session_id if evidence else None,
        origin=Inference.Origin.MEMORY,
    )
    made = stored.created + stored.quarantined + stored.merged
    return made[0] if made else None
