"""Celery tasks of the sessions app. They take ids, re-fetch, and are safe to run twice."""

from __future__ import annotations

from celery import Task, shared_task
from django.conf import settings

from core.leases import run_leased

from .compression import session_compress
from .search.summarise import summary_run


@shared_task(
    name="sessions_app.summarise_search_hit",
    bind=True,
    # The model call is bounded by the client's timeouts and retries; these limits are the
    # backstop. A dead run's lease is taken over by the next delivery (see summary_run).
    soft_time_limit=settings.HERMES_SEARCH_SUMMARY_TASK_LIMIT,
    time_limit=settings.HERMES_SEARCH_SUMMARY_TASK_LIMIT + 30,
    acks_late=True,
)
def summarise_search_hit(self: Task, summary_id: int) -> str:
    """Summarise the conversation of SearchSummary `summary_id` for its query; returns the
    row's final status ("done", "failed", or the status another run left it in)."""
    return run_leased(self, lambda: summary_run(summary_id=summary_id))


@shared_task(
    name="sessions_app.compress_session",
    bind=True,
    soft_time_limit=settings.HERMES_COMPRESSION_TASK_LIMIT,
    time_limit=settings.HERMES_COMPRESSION_TASK_LIMIT + 30,
    acks_late=True,
)
def compress_session(self: Task, session_id: str) -> str | None:
    """Flush memory, summarise and split the session; safe to deliver twice: only the
    holder of the conversation's lease works, and a redelivery takes over the lease of a
    dead run (or comes back when a live one would have finished)."""
    return run_leased(self, lambda: session_compress(session_id=session_id))


@shared_task(name="sessions_app.expire_temporary_chats", time_limit=300)
def expire_temporary_chats() -> int:
    """Delete temporary chats older than HERMES_TEMPORARY_CHAT_DAYS (periodic)."""
    from .maintenance import temporary_sessions_expire

    return temporary_sessions_expire()
