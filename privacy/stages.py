"""The stage a background job is at ("Counting", "Conversations 3/10"): the workers write it
in English, the pages and the API show it in the reader's language."""

from __future__ import annotations

import re

from django.utils.translation import gettext, gettext_noop

#: Every stage the export, the chat import and its learning write (for the catalog).
STAGES = (
    gettext_noop("Starting"),
    gettext_noop("Counting"),
    gettext_noop("Memory, skills and settings"),
    gettext_noop("Hermes files"),
    gettext_noop("Ready"),
    gettext_noop("Expired"),
    gettext_noop("Checking the file"),
    gettext_noop("Waiting to start"),
    gettext_noop("Done"),
    gettext_noop("Failed"),
)
_COUNTED = re.compile(r"Conversations(:)? ([\d,]+)(?:/([\d,]+))?")


def stage_text(stage: str) -> str:
    """`stage` in the active language (a stage it does not know stays as it is)."""
    counted = _COUNTED.fullmatch(stage or "")
    if counted is None:
        return gettext(stage) if stage else ""
    colon, done, total = counted.groups()
    if total is not None and not colon:
        return gettext("Conversations %(done)s/%(total)s") % {"done": done, "total": total}
    return gettext("Conversations: %(done)s") % {"done": done}
