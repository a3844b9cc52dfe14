"""What the conversation inspector (sessions_app/inspector.py) shows of memory: the entries
and snapshots the frozen prompt included, what the agent wrote during the conversation, what
the compression flush saved, and which inferences each user message recalled. Registered as
an inspector section from the app's ready()."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils.translation import gettext as _

from sessions_app.models import Session

from .inferences.selectors import inference_uses_for_messages
from .models import MemoryEntry, MemoryEvent, SessionMemorySnapshot, Source
from .provenance import writers_attach
from .selectors import memory_entries_included


def memory_inspector_context(
    *, user: AbstractBaseUser, session: Session, turns: list[Any]
) -> dict[str, Any]:
    """Context for the inspector's memory parts; sets `recalled_inferences` on each turn's
    user message (the inferences the local provider fenced into it)."""
    recalled = inference_uses_for_messages(
        user=user, message_ids=[t.user.pk for t in turns if t.user]
    )
    for turn in turns:
        if turn.user:
            turn.user.recalled_inferences = recalled.get(turn.user.pk, [])
    snapshots = list(
        SessionMemorySnapshot.objects.filter(session=session)
        .prefetch_related("entries")
        .order_by("created_at", "id")
    )
    events = list(
        MemoryEvent.objects.filter(owner=user, session=session).order_by("created_at", "id")
    )
    flushed = list(
        MemoryEntry.objects.filter(owner=user, source=Source.FLUSH, source_session=session)
    )
    provider = settings.HERMES_MEMORY_PROVIDER
    entries = list(memory_entries_included(session=session))
    writers_attach(user=user, rows=entries)
    return {
        "entries": entries,
        "snapshots": snapshots,
        "events": [e for e in events if e.source != Source.FLUSH],
        "flush_events": [e for e in events if e.source == Source.FLUSH],
        "flushed": flushed,
        "recall_source": (
            _("the memory provider “%(provider)s” (HERMES_MEMORY_PROVIDER)")
            % {"provider": provider}
            if provider
            else _("no external memory provider (none is configured now)")
        ),
    }
