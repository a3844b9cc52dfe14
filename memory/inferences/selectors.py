"""Reads for inferences. Every query is filtered on the owner; another person's inference
is a NotFound exactly like a missing one."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import OuterRef, Prefetch, QuerySet, Subquery
from django.utils.translation import gettext_lazy

from core.exceptions import NotFound
from sessions_app.models import Message

from ..models import Inference, InferenceSettings, InferenceUse


def user_id_of(user: Any) -> int:
    """Services take a user or a user id (Celery tasks and providers hold ids)."""
    return int(user if isinstance(user, int) else user.pk)


def inference_consent(*, user: Any) -> bool:
    """Whether the person lets the agent infer things about them (and recall them)."""
    enabled = (
        InferenceSettings.objects.filter(user_id=user_id_of(user))
        .values_list("enabled", flat=True)
        .first()
    )
    return settings.HERMES_INFERENCE_DEFAULT_ENABLED if enabled is None else enabled


def memory_on(*, user: Any) -> bool:
    """Memory as a whole (Account page); off means no extraction and no recall either."""
    from accounts.models import Profile

    enabled = (
        Profile.objects.filter(user_id=user_id_of(user))
        .values_list("memory_enabled", flat=True)
        .first()
    )
    return True if enabled is None else enabled


def inference_allowed(*, user: Any) -> bool:
    return memory_on(user=user) and inference_consent(user=user)


def inferences(*, user: Any, status: str | None = None) -> QuerySet[Inference]:
    qs = Inference.objects.filter(owner_id=user_id_of(user))
    if status is not None:
        qs = qs.filter(status=status)
    return qs.order_by("-updated_at", "-id")


def access_inference(*, user: Any, inference_id: Any) -> Inference:
    try:
        pk = int(inference_id)
    except (TypeError, ValueError):
        raise NotFound(gettext_lazy("inference")) from None
    found = Inference.objects.filter(owner_id=user_id_of(user), pk=pk).first()
    if found is None:
        raise NotFound(gettext_lazy("inference"))
    return found


def active_inferences(*, user: Any) -> QuerySet[Inference]:
    """What the agent may see (search tool, recall): active rows only."""
    return inferences(user=user, status=Inference.Status.ACTIVE)


@dataclass
class PageInference:
    """An inference as the Inferences page shows it."""

    inference: Inference
    evidence: list[Message]
    last_use: InferenceUse | None
    contradicts: list[Inference] = field(default_factory=list)


def inferences_for_page(*, user: Any) -> dict[str, list[PageInference]]:
    """The person's inferences grouped by status, each with its evidence messages (and their
    conversations) and where it was last used; a fixed number of queries."""
    uid = user_id_of(user)
    latest_use = (
        InferenceUse.objects.filter(inference=OuterRef("pk"))
        .order_by("-created_at", "-id")
        .values("id")[:1]
    )
    rows = list(
        Inference.objects.filter(owner_id=uid)
        .select_related("contradicted_by", "source_session")
        .prefetch_related(
            Prefetch(
                "evidence",
                # Evidence is validated on write; the filter keeps the page honest anyway.
                queryset=Message.objects.filter(session__owner_id=uid)
                .select_related("session")
                .order_by("id"),
            ),
            Prefetch(
                "contradicts",
                queryset=Inference.objects.filter(owner_id=uid).order_by("-updated_at"),
            ),
        )
        .annotate(last_use_id=Subquery(latest_use))
        .order_by("-updated_at", "-id")
    )
    use_ids = [r.last_use_id for r in rows if r.last_use_id]
    last_uses = {
        use.inference_id: use
        for use in InferenceUse.objects.filter(
            pk__in=use_ids, message__session__owner_id=uid
        ).select_related("message__session")
    }
    grouped: dict[str, list[PageInference]] = defaultdict(list)
    for row in rows:
        grouped[row.status].append(
            PageInference(
                inference=row,
                evidence=list(row.evidence.all()),
                last_use=last_uses.get(row.pk),
                contradicts=list(row.contradicts.all()),
            )
        )
    return grouped


def inference_uses_for_messages(*, user: Any, message_ids: list[int]) -> dict[int, list[Inference]]:
    """For the conversation inspector: which inferences were recalled into which user
    message (only the person's own)."""
    uid = user_id_of(user)
    found: dict[int, list[Inference]] = defaultdict(list)
    uses = (
        InferenceUse.objects.filter(
            message_id__in=message_ids,
            inference__owner_id=uid,
            message__session__owner_id=uid,
        )
        .select_related("inference")
        .order_by("message_id", "-score", "id")
    )
    for use in uses:
        found[use.message_id].append(use.inference)
    return dict(found)
