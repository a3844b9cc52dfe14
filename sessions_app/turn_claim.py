"""The conversation claim: at most one turn, or one compression, works on a conversation at
a time, across processes.

The claim is ``Session.turn_token`` with ``turn_started_at``: "" means free, a random hex
token means a chat turn holds it, :data:`COMPRESS_TOKEN` means compression does. Every
claim is taken with a conditional UPDATE that must change exactly one row, so two
processes racing for a conversation cannot both win, and released with an UPDATE
conditional on the holder's token, so a late release never frees someone else's claim.

A holder that dies leaves its claim behind: a turn's claim older than
``HERMES_TURN_STALE_SECONDS`` counts as abandoned (see :func:`stale_cutoff`) and the next
turn takes it over. Compression ends by ending the session, or releases on failure.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from .models import Session

COMPRESS_TOKEN = "compress"


def stale_cutoff(now: datetime | None = None) -> datetime:
    """Claims taken before this moment belong to a process that died."""
    return (now or timezone.now()) - timedelta(seconds=settings.HERMES_TURN_STALE_SECONDS)


def acquire_for_turn(*, session_id: str) -> str:
    """Claim the conversation for a chat turn: the new token, or "" if it is busy.

    A free conversation is taken; a stale claim (of a turn or a compression) is taken over.
    """
    token = secrets.token_hex(8)
    now = timezone.now()
    changed = Session.objects.filter(pk=session_id, turn_token="").update(
        turn_token=token, turn_started_at=now
    ) or Session.objects.filter(pk=session_id, turn_started_at__lt=stale_cutoff(now)).update(
        turn_token=token, turn_started_at=now
    )
    return token if changed == 1 else ""


def acquire_for_compression(*, session_id: str) -> bool:
    """Claim a free, still open conversation for compression; False if busy or ended."""
    changed = Session.objects.filter(pk=session_id, turn_token="", ended_at__isnull=True).update(
        turn_token=COMPRESS_TOKEN, turn_started_at=timezone.now()
    )
    return changed == 1


def release(*, session_id: str, token: str) -> None:
    """Free the claim if ``token`` still holds it (a no-op after a takeover)."""
    Session.objects.filter(pk=session_id, turn_token=token).update(
        turn_token="", turn_started_at=None
    )


def is_compressing(*, session_id: str) -> bool:
    return Session.objects.filter(pk=session_id, turn_token=COMPRESS_TOKEN).exists()
