"""Housekeeping of conversations, run by the periodic `prune` task (registered in
SessionsAppConfig.ready)."""

from __future__ import annotations

from . import turn_claim


def streams_close_orphaned() -> int:
    """Answers left "streaming" by a process that died mid-turn become "interrupted", with
    the text saved so far: any streaming answer whose conversation no live turn lease holds
    (see turn_claim)."""
    return turn_claim.answers_close_abandoned()
