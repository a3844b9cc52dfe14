"""Housekeeping of conversations, run by periodic tasks: `prune` (registered in
SessionsAppConfig.ready) and `expire_temporary_chats`."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import turn_claim
from .models import Session


def streams_close_orphaned() -> int:
    """Answers left "streaming" by a process that died mid-turn become "interrupted", with
    the text saved so far: any streaming answer whose conversation no live turn lease holds
    (see turn_claim)."""
    return turn_claim.answers_close_abandoned()


def temporary_sessions_expire() -> int:
    """Delete temporary conversations past their retention; returns how many."""
    cutoff = timezone.now() - timedelta(days=settings.HERMES_TEMPORARY_CHAT_DAYS)
    expired = Session.objects.filter(temporary=True, started_at__lt=cutoff)
    count = expired.count()
    with transaction.atomic():
        expired.delete()
    return count
