"""L1 hot memory: the curated MEMORY/USER entries the agent sees in every session.

Mirrors Hermes' MEMORY.md / USER.md (entries joined by "\\n§\\n") as rows, so each entry
carries provenance and every change leaves an audit event. All writes go through
`memory.services`; nothing here validates or enforces limits on its own.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

ENTRY_DELIMITER = "\n§\n"


class Target(models.TextChoices):
    MEMORY = "memory", "Agent notes"
    USER = "user", "About you"


class Source(models.TextChoices):
    """Who wrote an entry: the chat's tool call, the background review, the
    pre-compression flush, the Memory page, an import, the REST API or the admin."""

    TOOL = "tool", "Chat"
    REVIEW = "review", "Background review"
    FLUSH = "flush", "Compression flush"
    MANUAL = "manual", "Memory page"
    IMPORT = "import", "Import"
    API = "api", "REST API"
    ADMIN = "admin", "Admin"


#: Sources that are the agent acting on its own; approval mode stages their writes.
AGENT_SOURCES = frozenset({Source.TOOL, Source.REVIEW, Source.FLUSH})


def content_digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class MemoryEntryQuerySet(models.QuerySet["MemoryEntry"]):
    def active(self) -> MemoryEntryQuerySet:
        return self.filter(status=MemoryEntry.Status.ACTIVE)

    def pending(self) -> MemoryEntryQuerySet:
        return self.filter(status=MemoryEntry.Status.PENDING)


class MemoryEntry(models.Model):
    """One entry of a user's MEMORY (agent notes) or USER (about the user) list.

    A *pending* entry is a write the agent proposed while approval mode was on; it is not
    part of the list (no usage, not in any prompt) until the user approves it. For a
    proposed replace/remove, `pending_of` is the active entry it would change.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        PENDING = "pending", "Waiting for approval"

    class PendingAction(models.TextChoices):
        NONE = "", "—"
        ADD = "add", "Add"
        REPLACE = "replace", "Replace"
        REMOVE = "remove", "Remove"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_entries"
    )
    target = models.CharField(max_length=8, choices=Target.choices)
    content = models.TextField()
    # Uniqueness of an active entry's text is enforced on this digest: PostgreSQL cannot
    # index arbitrarily long text in a btree.
    content_hash = models.CharField(max_length=64, editable=False)
    order = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    pending_action = models.CharField(
        max_length=8, choices=PendingAction.choices, blank=True, default=""
    )
    pending_of = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="proposals",
        help_text="The entry a proposed replace/remove would change.",
    )
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.MANUAL)
    source_session = models.ForeignKey(
        "sessions_app.Session",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_entries",
    )
    source_message = models.ForeignKey(
        "sessions_app.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_entries",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = MemoryEntryQuerySet.as_manager()

    class Meta:
        ordering = ["target", "order", "id"]
        verbose_name = "memory entry"
        verbose_name_plural = "memory entries"
        indexes = [
            models.Index(
                fields=["owner", "target", "status", "order"], name="memory_entry_list_idx"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "target", "content_hash"],
                condition=Q(status="active"),
                name="memory_entry_unique_active_text",
            ),
            models.CheckConstraint(
                condition=Q(target__in=["memory", "user"]), name="memory_entry_target_valid"
            ),
            models.CheckConstraint(condition=~Q(content=""), name="memory_entry_not_empty"),
            models.CheckConstraint(
                condition=Q(status="active", pending_action="", pending_of__isnull=True)
                | Q(status="pending", pending_action__in=["add", "replace", "remove"]),
                name="memory_entry_pending_has_action",
            ),
        ]

    def __str__(self) -> str:
        text = self.content if len(self.content) <= 60 else self.content[:59] + "…"
        return f"{self.get_target_display()}: {text}"

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING


class MemoryAnchor(models.Model):
    """One row per (user, target), locked by every write to that list.

    PostgreSQL serialises writers with `SELECT … FOR UPDATE` on this row: locking the
    entries themselves would not stop two concurrent *adds* (no row to lock yet) from both
    passing the budget check. On SQLite the IMMEDIATE transaction already serialises
    writers; `version` is bumped either way so readers can tell the list changed.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_anchors"
    )
    target = models.CharField(max_length=8, choices=Target.choices)
    version = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "target"], name="memory_anchor_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.owner} / {self.target} v{self.version}"


class MemoryEvent(models.Model):
    """The audit log: every accepted, staged, refused or blocked memory write."""

    class Action(models.TextChoices):
        ADD = "add", "Add"
        REPLACE = "replace", "Replace"
        REMOVE = "remove", "Remove"
        IMPORT = "import", "Import"
        APPROVE = "approve", "Approve"
        REJECT = "reject", "Reject"

    class Verdict(models.TextChoices):
        ACCEPTED = "accepted", "Saved"
        STAGED = "staged", "Waiting for approval"
        REJECTED = "rejected", "Rejected by you"
        REFUSED = "refused", "Refused"
        BLOCKED = "blocked", "Blocked by the scanner"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_events"
    )
    #: The person who made the change (the owner, or an administrator in the admin).
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    source = models.CharField(max_length=8, choices=Source.choices)
    action = models.CharField(max_length=8, choices=Action.choices)
    target = models.CharField(max_length=8, choices=Target.choices)
    entry = models.ForeignKey(
        MemoryEntry, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )
    before = models.TextField(blank=True, default="")
    after = models.TextField(blank=True, default="")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    detail = models.TextField(blank=True, default="")
    #: Scanner finding ids, comma-separated, for blocked writes.
    findings = models.CharField(max_length=500, blank=True, default="")
    session = models.ForeignKey(
        "sessions_app.Session",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_events",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="memory_event_owner_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.target} ({self.verdict})"

    @property
    def finding_ids(self) -> list[str]:
        return [f for f in self.findings.split(", ") if f]


class SessionMemorySnapshot(models.Model):
    """The MEMORY/USER text frozen into a session's system prompt, and which entries it
    showed, so "which sessions saw this entry" has an answer after the fact."""

    session = models.ForeignKey(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="memory_snapshots"
    )
    rendered = models.TextField(blank=True, default="")
    entries = models.ManyToManyField(MemoryEntry, blank=True, related_name="snapshots")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["session", "-created_at"], name="memory_snapshot_session_idx"),
        ]

    def __str__(self) -> str:
        return f"memory snapshot of {self.session_id}"
