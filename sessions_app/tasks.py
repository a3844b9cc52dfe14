"""Celery tasks of the sessions app. They take ids, re-fetch, and are safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from .compression import session_compress
from .search.summarise import summary_run


@shared_task(
    name="sessions_app.summarise_search_hit",
    # The model call is bounded by the client's timeouts and retries; these limits are the
    # backstop. A claim older than the limit counts as abandoned (see summary_run).
    soft_time_limit=settings.HERMES_SEARCH_SUMMARY_TASK_LIMIT,
    time_limit=settings.HERMES_SEARCH_SUMMARY_TASK_LIMIT + 30,
    acks_late=True,
)
def summarise_search_hit(summary_id: int) -> str:
    """Summarise the conversation of SearchSummary `summary_id` for its query; returns the
    row's final status ("done", "failed", or the status another run left it in)."""
    return summary_run(summary_id=summary_id)


@shared_task(
    name="sessions_app.compress_session",
    soft_time_limit=settings.HERMES_COMPRESSION_TASK_LIMIT,
    time_limit=settings.HERMES_COMPRESSION_TASK_LIMIT + 30,
    acks_late=True,
)
def compress_session(session_id: str) -> str | None:
    """Flush memory, summarise and split the session; safe to deliver twice (the session is
    claimed with a conditional update, so only one delivery does the work)."""
    return session_compress(session_id=session_id)


@shared_task(name="sessions_app.expire_temporary_chats", time_limit=300)
def expire_temporary_chats() -> int:
    """Delete temporary chats older than HERMES_TEMPORARY_CHAT_DAYS (periodic)."""
    from .services import temporary_sessions_expire

    return temporary_sessions_expire()
