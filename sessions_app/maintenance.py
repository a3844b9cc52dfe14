"""Housekeeping of conversations, run by the periodic `prune` task (registered in
SessionsAppConfig.ready)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from .models import Message


def streams_close_orphaned(*, now: datetime | None = None) -> int:
    """Answers left "streaming" by a process that died mid-turn become "interrupted", with
    the text saved so far. A message counts as orphaned once it is older than
    HERMES_TURN_STALE_SECONDS and nobody holds a fresh claim on its conversation (the same
    test `turn_begin` uses before taking a conversation over)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.HERMES_TURN_STALE_SECONDS)
    return Message.objects.filter(
        Q(session__turn_token="") | Q(session__turn_started_at__lt=stale),
        status=Message.Status.STREAMING,
        timestamp__lt=stale,
    ).update(status=Message.Status.INTERRUPTED, finish_reason="orphaned")
