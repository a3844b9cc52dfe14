"""Housekeeping of conversations, run by the periodic `prune` task (registered in
SessionsAppConfig.ready)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from . import turn_claim
from .models import Message


def streams_close_orphaned(*, now: datetime | None = None) -> int:
    """Answers left "streaming" by a process that died mid-turn become "interrupted", with
    the text saved so far. A message counts as orphaned once it is older than
    HERMES_TURN_STALE_SECONDS and nobody holds a fresh claim on its conversation (the same
    test a turn uses before taking a conversation over, see turn_claim)."""
    stale = turn_claim.stale_cutoff(now or timezone.now())
    return Message.objects.filter(
        Q(session__turn_token="") | Q(session__turn_started_at__lt=stale),
        status=Message.Status.STREAMING,
        timestamp__lt=stale,
    ).update(status=Message.Status.INTERRUPTED, finish_reason="orphaned")
