"""Celery tasks of the memory app. They take ids, re-fetch, and are safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings


@shared_task(
    name="memory.extract_inferences",
    # The model call is bounded by the client's timeouts and retries; these are backstops.
    soft_time_limit=settings.HERMES_INFERENCE_TASK_LIMIT,
    time_limit=settings.HERMES_INFERENCE_TASK_LIMIT + 30,
    acks_late=True,
)
def extract_inferences(user_id: int, session_id: str) -> str:
    """Derive inferences about user `user_id` from session `session_id`'s new messages."""
    from .inferences.extraction import extract_session

    return str(extract_session(user_id=user_id, session_id=session_id))


@shared_task(
    name="memory.compute_recall",
    soft_time_limit=settings.HERMES_INFERENCE_TASK_LIMIT,
    time_limit=settings.HERMES_INFERENCE_TASK_LIMIT + 30,
    acks_late=True,
)
def compute_recall(user_id: int, session_id: str, query: str) -> int:
    """Rank user `user_id`'s inferences for the next message of `session_id`."""
    from .inferences.recall import recall_compute

    return len(recall_compute(user=user_id, session_id=session_id, query=query))
