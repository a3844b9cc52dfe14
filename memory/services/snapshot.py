"""The frozen MEMORY / USER PROFILE blocks of a session's system prompt.

Rendered once when a session's prompt is built (and again when compression rebuilds it),
never refreshed mid-session: writes during the session show up in the tool's results and in
the next session. Each entry is sanitised for the prompt only — the stored text is untouched
— so an entry that fails today's scan becomes a `[BLOCKED: …]` line here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from accounts.models import Profile
from sessions_app.models import Session

from .. import scanner
from ..models import ENTRY_DELIMITER, MemoryEntry, SessionMemorySnapshot, Target
from ..selectors import Usage, memory_prefs, usage_of

RULE = "═" * 46
HEADERS = {
    Target.MEMORY: "MEMORY (your personal notes)",
    Target.USER: "USER PROFILE (who the user is)",
}
FILE_LABELS = {Target.MEMORY: "MEMORY.md", Target.USER: "USER.md"}


@dataclass
class Snapshot:
    text: str = ""
    #: Ids of the entries whose text (at least part of it) the prompt shows.
    entry_ids: list[int] = field(default_factory=list)


def render_cap(limit: int) -> int:
    return max(2 * limit, 4000)


def _truncate(content: str, cap: int, usage: Usage) -> tuple[str, list[tuple[int, int]]]:
    """Keep the first 70% and last 20% of the cap around a marker; return the text and
    the kept (start, end) ranges of `content`."""
    if len(content) <= cap:
        return content, [(0, len(content))]
    head, tail = int(cap * 0.7), int(cap * 0.2)
    omitted = len(content) - head - tail
    marker = (
        f"\n\n[... {omitted:,} chars truncated — memory over budget "
        f"({usage.current:,}/{usage.limit:,}); consolidate via memory(action=remove/replace) "
        "...]\n\n"
    )
    kept = [(0, head), (len(content) - tail, len(content))]
    return content[:head] + marker + content[len(content) - tail :], kept


def render_block(target: str, entries: list[MemoryEntry], limit: int) -> tuple[str, list[int]]:
    """One block (rules, header, entries) and the ids of the entries it shows."""
    if not entries:
        return "", []
    raw = [e.content for e in entries]
    usage = Usage(usage_of(raw), limit, len(raw))
    shown = [scanner.sanitize_for_prompt(c, label=FILE_LABELS[Target(target)]) for c in raw]
    content = ENTRY_DELIMITER.join(shown)
    content, kept = _truncate(content, render_cap(limit), usage)
    seen: list[int] = []
    offset = 0
    for entry, text, original in zip(entries, shown, raw, strict=True):
        start, end = offset, offset + len(text)
        offset = end + len(ENTRY_DELIMITER)
        if text != original:
            continue  # the prompt shows a [BLOCKED: …] line, not this entry
        if any(start < k_end and end > k_start for k_start, k_end in kept):
            seen.append(entry.pk)
    over = " ⚠ OVER BUDGET" if usage.over else ""
    header = f"{HEADERS[Target(target)]} [{usage.pct}% — {usage.current:,}/{limit:,} chars{over}]"
    return f"{RULE}\n{header}\n{RULE}\n{content}", seen


def memory_snapshot(*, user: AbstractBaseUser, profile: Profile | None = None) -> Snapshot:
    """Both blocks for `user` as the prompt would show them now ('' when memory is off);
    `profile`: the user's, when the caller has just read it."""
    prefs = memory_prefs(user=user, profile=profile)
    if not prefs.enabled:
        return Snapshot()
    entries = list(MemoryEntry.objects.active().filter(owner=user).order_by("order", "id"))
    blocks: list[str] = []
    ids: list[int] = []
    for target in (Target.MEMORY, Target.USER):
        mine = [e for e in entries if e.target == target]
        block, seen = render_block(target, mine, prefs.limit(target))
        if block:
            blocks.append(block)
            ids.extend(seen)
    return Snapshot("\n\n".join(blocks), ids)


def memory_snapshot_freeze(*, session: Session, profile: Profile | None = None) -> str:
    """Render the owner's MEMORY and USER blocks for the session's frozen system prompt
    (Hermes headers and ═ rules, entries sanitised for the prompt only, render cap), record
    which entries (ids) this session included, and return the text ('' when both are empty
    or the owner's memory is off). Called once when a session's prompt is built and again
    when compression rebuilds it."""
    snapshot = memory_snapshot(user=session.owner, profile=profile)
    if not snapshot.entry_ids:  # one INSERT: no transaction of its own
        SessionMemorySnapshot.objects.create(session=session, rendered=snapshot.text)
        return snapshot.text
    with transaction.atomic():
        row = SessionMemorySnapshot.objects.create(session=session, rendered=snapshot.text)
        # Entries deleted since the read simply drop out (the FK would refuse them).
        live = MemoryEntry.objects.filter(
            pk__in=snapshot.entry_ids, owner_id=session.owner_id
        ).values_list("pk", flat=True)
        row.entries.add(*live)
    return snapshot.text
