"""Celery tasks of the skills app. They take ids, re-fetch, and are safe to run twice."""

from __future__ import annotations

from celery import Task, shared_task
from django.conf import settings

from core.leases import run_leased

from .services.review import review_run_execute


@shared_task(
    name="skills_app.review_session",
    # The service enforces HERMES_REVIEW_TIME_LIMIT itself (every pool); Celery's limits are
    # the backstop for a worker stuck outside the model call.
    soft_time_limit=settings.HERMES_REVIEW_TIME_LIMIT + 30,
    time_limit=settings.HERMES_REVIEW_TIME_LIMIT + 60,
    acks_late=True,
    bind=True,
)
def review_session(self: Task, run_id: int) -> str:
    """Run the background review recorded as ReviewRun `run_id` (see services.review); a
    redelivery takes over the lease of a run whose process died."""
    return run_leased(self, lambda: review_run_execute(run_id=run_id))
