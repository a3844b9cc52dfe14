from __future__ import annotations

from celery import shared_task

from .realtime import notice_to_user


@shared_task(name="hermes_site.deliver_notice", time_limit=30)
def deliver_notice(user_id: int, kind: str, text: str, session_id: str | None = None) -> None:
    """Show a notice in every open tab of the user (used by background work)."""
    notice_to_user(user_id=user_id, kind=kind, text=text, session_id=session_id)
