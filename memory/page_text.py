"""What the Memory page and its activity log say to people, in their language.

The memory services speak English: their results and refusals are what the agent reads
(the tool result stays English). The pages say the same things again here, translated; an
English page keeps the services' words, which name the exact finding.
"""

from __future__ import annotations

import re

from django.utils.translation import gettext, gettext_lazy, ngettext

from accounts.language import reads_english
from core.exceptions import ServiceError

from .models import MemoryEvent, Target
from .services import WriteResult

#: The services' results, which the agent reads in English, as the page says them.
RESULTS = {
    "Entry added.": gettext_lazy("Entry added."),
    "Entry replaced.": gettext_lazy("Entry replaced."),
    "Entry removed.": gettext_lazy("Entry removed."),
    "Nothing changed.": gettext_lazy("Nothing changed."),
    "Entry already exists (no duplicate added).": gettext_lazy(
        "Entry already exists (no duplicate added)."
    ),
    "Entry already has that text (nothing changed).": gettext_lazy(
        "Entry already has that text (nothing changed)."
    ),
}


def result_message(target: str, message: str) -> str:
    """What a write did ("Agent notes: Entry added.") in the reader's language."""
    return gettext("%(list)s: %(result)s") % {
        "list": Target(target).label,
        "result": RESULTS.get(message, message),
    }


def page_message(exc: ServiceError, target: str, *, where: str = "entry") -> str:
    """The service's reason, reworded where it speaks to the model rather than a person,
    in the reader's language. `where`: "entry", "import" or "pending"."""
    return reworded(exc, target, where=where) or exc.message


def reworded(exc: ServiceError, target: str, *, where: str = "entry") -> str:
    """The reason as :func:`page_message` says it; "" when a reader of another language
    than English has no wording of it here (the service's English is all there is)."""
    if exc.code == "over_limit":
        label = Target(target).label
        current, _, limit = str(exc.details.get("usage", "")).partition("/")
        size = exc.details.get("entry_size")
        if current.isdigit() and limit.isdigit():
            values = {
                "list": label,
                "current": f"{int(current):,}",
                "limit": f"{int(limit):,}",
                "size": f"{size:,}" if isinstance(size, int) else "",
            }
            if isinstance(size, int):
                text = gettext(
                    "Not saved: %(list)s is at %(current)s/%(limit)s characters and this text "
                    "(%(size)s characters) would go over the limit. Shorten it, or edit or "
                    "delete other entries first."
                )
            else:
                text = gettext(
                    "Not saved: %(list)s is at %(current)s/%(limit)s characters and this would "
                    "go over the limit. Shorten it, or edit or delete other entries first."
                )
            return text % values
    if reads_english():
        return exc.message
    return _translated_refusal(exc, where)


def _translated_refusal(exc: ServiceError, where: str) -> str:
    """A refusal of the services, said again for a page in another language than English."""
    message = exc.message
    if exc.code == "blocked":
        findings = ", ".join(exc.details.get("findings") or [exc.details.get("pattern", "")])
        return gettext(
            "Not saved: the safety scan blocked this text (%(findings)s). It reads like "
            "instructions for the agent or an attempt to send data elsewhere; write it as a "
            "plain fact instead."
        ) % {"findings": findings}
    if exc.code == "empty":
        if where == "import":
            return gettext("The file has no entries; nothing to import.")
        return gettext("Content cannot be empty.")
    if exc.code == "invalid":
        if "NUL" in message or "must be text" in message:
            return gettext("This is not text: it contains NUL characters.")
        if "surrogate" in message:
            return gettext("This text contains an unpaired surrogate and is not valid text.")
        if "§" in message:
            return gettext(
                "A line with only “§” separates entries in MEMORY.md; an entry cannot contain one."
            )
        if "too large" in message:
            return gettext("This text is too large to be one memory entry.")
    if exc.code == "not_found":
        if where == "pending":
            return gettext("The entry this change would modify no longer exists; reject it.")
        return gettext("That entry no longer exists (it was changed or removed).")
    return ""


_OVER_LIMIT_DETAIL = re.compile(
    r"^Over the limit: the change would have made (.+) ([\d,]+)/([\d,]+) characters\.$"
)
_REJECTED_DETAIL = re.compile(r"^Proposed (add|replace|remove) rejected\.$")
_LOG_DETAILS = {
    "Held back from an import over the limit, for your choice.": gettext_lazy(
        "Held back from an import over the limit, for your choice."
    ),
    "Held import entry discarded.": gettext_lazy("Held import entry discarded."),
}


def detail_shown(event: MemoryEvent) -> str:
    """An audit row's detail (written in English when it happened) as the reader reads it."""
    detail = event.detail
    if reads_english():
        return detail
    if detail in _LOG_DETAILS:
        return str(_LOG_DETAILS[detail])
    if event.verdict == MemoryEvent.Verdict.BLOCKED:
        return gettext("Blocked by the safety scan; never saved.")
    if match := _OVER_LIMIT_DETAIL.match(detail):
        return gettext(
            "Over the limit: the change would have made %(list)s %(size)s/%(limit)s characters."
        ) % {"list": event.get_target_display(), "size": match[2], "limit": match[3]}
    if _REJECTED_DETAIL.match(detail):
        return gettext("You rejected the proposed change.")
    return detail


def import_message(target: str, result: WriteResult) -> str:
    """What an import did, in the reader's language (the service's counts)."""
    added, existed, removed = result.imported or (0, 0, 0)
    parts = [
        ngettext("Imported %(count)d new entry.", "Imported %(count)d new entries.", added)
        % {"count": added}
    ]
    if existed:
        parts.append(
            ngettext("%(count)d already existed.", "%(count)d already existed.", existed)
            % {"count": existed}
        )
    if removed:
        parts.append(
            ngettext(
                "Removed %(count)d not in the file.", "Removed %(count)d not in the file.", removed
            )
            % {"count": removed}
        )
    return gettext("%(list)s: %(result)s") % {
        "list": Target(target).label,
        "result": " ".join(parts),
    }
