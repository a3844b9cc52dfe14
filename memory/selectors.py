"""Reads of L1 memory, always scoped to one owner."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet
from django.utils.translation import gettext_lazy

from accounts.models import Profile
from core.exceptions import NotFound
from sessions_app.models import Session

from .models import ENTRY_DELIMITER, MemoryEntry, MemoryEvent, SessionMemorySnapshot, Target

#: Hermes' display names, used in the prompt headers and in error messages.
TARGET_LABELS = {Target.MEMORY: "Memory", Target.USER: "User profile"}


@dataclass(frozen=True)
class Usage:
    current: int
    limit: int
    entry_count: int

    @property
    def pct(self) -> int:
        if self.limit <= 0:
            return 100 if self.current else 0
        return min(100, int(100 * self.current / self.limit))

    @property
    def over(self) -> bool:
        return self.current > self.limit

    @property
    def display(self) -> str:
        """For pages: "67% — 1,474/2,200"."""
        return self.text(unit=False)

    def text(self, *, unit: bool = True) -> str:
        """Hermes' usage string: "67% — 1,474/2,200 chars"."""
        suffix = " chars" if unit else ""
        return f"{self.pct}% — {self.current:,}/{self.limit:,}{suffix}"


@dataclass
class WriterCount:
    """How many of a person's entries one writer (source, client) wrote."""

    source: str
    source_client: str
    active: int
    pending: int

    @property
    def total(self) -> int:
        return self.active + self.pending


def usage_of(contents: list[str]) -> int:
    """Size of a list as Hermes stores it: the entries joined by the 3-character delimiter."""
    if not contents:
        return 0
    return sum(len(c) for c in contents) + len(ENTRY_DELIMITER) * (len(contents) - 1)


def _profile(user: AbstractBaseUser) -> Profile | None:
    # A read must not create the profile (that would be a write, and a lock on SQLite).
    return Profile.objects.filter(user=user).first()


@dataclass(frozen=True)
class MemoryPrefs:
    """A user's memory settings: their overrides on the Profile, else the deployment's."""

    enabled: bool
    approval: bool
    memory_limit: int
    user_limit: int

    def limit(self, target: str) -> int:
        return self.user_limit if target == Target.USER else self.memory_limit

    @classmethod
    def of(
        cls,
        enabled: bool | None,
        approval: bool | None,
        memory_limit: int | None,
        user_limit: int | None,
    ) -> MemoryPrefs:
        """From the Profile's columns; None (no profile, or no override) is the default."""
        return cls(
            enabled=True if enabled is None else bool(enabled),
            approval=bool(approval),
            memory_limit=settings.HERMES_MEMORY_CHAR_LIMIT
            if memory_limit is None
            else memory_limit,
            user_limit=settings.HERMES_USER_CHAR_LIMIT if user_limit is None else user_limit,
        )


def memory_prefs(*, user: AbstractBaseUser, profile: Profile | None = None) -> MemoryPrefs:
    """`profile`: the user's, when the caller has just read it."""
    profile = profile or _profile(user)
    if profile is None:
        return MemoryPrefs.of(None, None, None, None)
    return MemoryPrefs.of(
        profile.memory_enabled,
        profile.memory_write_approval,
        profile.memory_char_limit,
        profile.user_char_limit,
    )


def memory_limit(*, user: AbstractBaseUser, target: str) -> int:
    """The user's character budget for `target`."""
    return memory_prefs(user=user).limit(target)


def memory_settings(*, user: AbstractBaseUser) -> tuple[bool, bool]:
    """(memory enabled, write approval on) for the user."""
    prefs = memory_prefs(user=user)
    return prefs.enabled, prefs.approval


def memory_entries(
    *,
    user: AbstractBaseUser,
    target: str | None = None,
    status: str | None = "active",
    source: str | None = None,
    client: str | None = None,
) -> QuerySet[MemoryEntry]:
    """The user's entries; `source` and `client` keep those one writer wrote (`client`: the
    MCP token's name, the chat import's id)."""
    qs = MemoryEntry.objects.filter(owner=user)
    if target is not None:
        qs = qs.filter(target=target)
    if status is not None:
        qs = qs.filter(status=status)
    if source is not None:
        qs = qs.filter(source=source)
    if client is not None:
        qs = qs.filter(source_client=client)
    return qs.order_by("target", "order", "id")


def memory_writers(*, user: AbstractBaseUser) -> list[WriterCount]:
    """Who wrote the user's entries (active and waiting), with how many each: one row per
    (source, client), most first."""
    rows = (
        MemoryEntry.objects.filter(owner=user)
        .values("source", "source_client")
        .annotate(active=Count("id", filter=Q(status=MemoryEntry.Status.ACTIVE)), n=Count("id"))
        .order_by("-n", "source", "source_client")
    )
    return [
        WriterCount(r["source"], r["source_client"], r["active"], r["n"] - r["active"])
        for r in rows
    ]


def memory_contents(*, user: AbstractBaseUser, target: str) -> list[str]:
    return list(memory_entries(user=user, target=target).values_list("content", flat=True))


def memory_usage(*, user: AbstractBaseUser, target: str) -> Usage:
    contents = memory_contents(user=user, target=target)
    return Usage(usage_of(contents), memory_limit(user=user, target=target), len(contents))


def memory_export(*, user: AbstractBaseUser, target: str) -> str:
    """The list as Hermes' MEMORY.md / USER.md: entries joined by "\\n§\\n", no trailing
    newline; an empty list is an empty file."""
    return ENTRY_DELIMITER.join(memory_contents(user=user, target=target))


def access_memory_entry(
    *, user: AbstractBaseUser, entry_id: int, status: str | None = None
) -> MemoryEntry:
    """The user's entry with this id; another user's id is indistinguishable from none."""
    qs = MemoryEntry.objects.filter(owner=user, pk=entry_id)
    if status is not None:
        qs = qs.filter(status=status)
    entry = qs.select_related("source_session", "pending_of").first()
    if entry is None:
        raise NotFound(gettext_lazy("memory entry"))
    return entry


def memory_events(*, user: AbstractBaseUser) -> QuerySet[MemoryEvent]:
    return (
        MemoryEvent.objects.filter(owner=user)
        .select_related("session", "actor")
        .order_by("-created_at", "-id")
    )


def sessions_that_saw_entry(*, entry: MemoryEntry) -> QuerySet[Session]:
    """Sessions whose frozen system prompt showed this entry (owner-scoped: snapshots only
    ever hold the session owner's own entries, and the filter says so again)."""
    return (
        Session.objects.filter(owner_id=entry.owner_id, memory_snapshots__entries=entry)
        .distinct()
        .order_by("-started_at")
    )


def memory_entries_included(*, session: Session) -> QuerySet[MemoryEntry]:
    """Entries the session's latest memory snapshot showed (after compression rebuilt the
    prompt, that is the rebuilt one)."""
    latest = (
        SessionMemorySnapshot.objects.filter(session=session)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
        .first()
    )
    if latest is None:
        return MemoryEntry.objects.none()
    return MemoryEntry.objects.filter(owner_id=session.owner_id, snapshots__pk=latest).order_by(
        "target", "order", "id"
    )
