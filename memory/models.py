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
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

# The inference models are defined by their sub-domain and found by Django here.
from .inferences.models import (  # noqa: F401
    Inference,
    InferenceCategory,
    InferenceSettings,
    InferenceState,
    InferenceTombstone,
    InferenceUse,
)

ENTRY_DELIMITER = "\n§\n"


class Target(models.TextChoices):
    MEMORY = "memory", _("Agent notes")
    USER = "user", _("About you")


class Source(models.TextChoices):
    """Who wrote an entry: the chat's tool call, the background review, the
    pre-compression flush, the Memory page, an import, the REST API, the admin, an MCP
    client (another agent holding one of the person's API tokens), or the review of an
    imported ChatGPT/Claude history (the import's "Let Hermes learn from this history")."""

    TOOL = "tool", _("Chat")
    REVIEW = "review", _("Background review")
    FLUSH = "flush", _("Compression flush")
    MANUAL = "manual", _("Memory page")
    IMPORT = "import", _("Import")
    API = "api", _("REST API")
    ADMIN = "admin", _("Admin")
    MCP = "mcp", _("MCP")
    IMPORT_REVIEW = "import_review", _("Learned from imported history")


#: Sources that are the agent acting on its own; approval mode stages their writes.
AGENT_SOURCES = frozenset(
    {Source.TOOL, Source.REVIEW, Source.FLUSH, Source.MCP, Source.IMPORT_REVIEW}
)
#: Room for the longest source value.
SOURCE_MAX_LENGTH = 16


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
        ACTIVE = "active", _("Active")
        PENDING = "pending", _("Waiting for approval")

    class PendingAction(models.TextChoices):
        NONE = "", "—"
        ADD = "add", _("Add")
        REPLACE = "replace", _("Replace")
        REMOVE = "remove", _("Remove")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="memory_entries",
    )
    target = models.CharField(verbose_name=_("target"), max_length=8, choices=Target.choices)
    content = models.TextField(verbose_name=_("content"))
    # Uniqueness of an active entry's text is enforced on this digest: PostgreSQL cannot
    # index arbitrarily long text in a btree.
    content_hash = models.CharField(verbose_name=_("content hash"), max_length=64, editable=False)
    order = models.PositiveIntegerField(verbose_name=_("order"), default=0)
    status = models.CharField(
        verbose_name=_("status"), max_length=8, choices=Status.choices, default=Status.ACTIVE
    )
    pending_action = models.CharField(
        verbose_name=_("pending action"),
        max_length=8,
        choices=PendingAction.choices,
        blank=True,
        default="",
    )
    pending_of = models.ForeignKey(
        "self",
        verbose_name=_("pending of"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="proposals",
        help_text=_("The entry a proposed replace/remove would change."),
    )
    source = models.CharField(
        verbose_name=_("source"),
        max_length=SOURCE_MAX_LENGTH,
        choices=Source.choices,
        default=Source.MANUAL,
    )
    #: Which writer of the source: with "mcp" the name of the API token the client used;
    #: with "import_review" the id of the chat import (privacy.ChatImportJob) whose learning
    #: wrote it (memory.provenance reads it).
    source_client = models.CharField(
        verbose_name=_("source client"), max_length=100, blank=True, default=""
    )
    source_session = models.ForeignKey(
        "sessions_app.Session",
        verbose_name=_("source session"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_entries",
    )
    source_message = models.ForeignKey(
        "sessions_app.Message",
        verbose_name=_("source message"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_entries",
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)

    objects = MemoryEntryQuerySet.as_manager()

    class Meta:
        ordering = ["target", "order", "id"]
        verbose_name = _("memory entry")
        verbose_name_plural = _("memory entries")
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

    A write's first statement bumps `version` (UPDATE … RETURNING the owner's limits),
    which on PostgreSQL locks this row until commit: locking the entries themselves would
    not stop two concurrent *adds* (no row to lock yet) from both passing the budget
    check. On SQLite the IMMEDIATE transaction already serialises writers. `version`
    counts the writes that took the lock, so readers can tell the list may have changed.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="memory_anchors",
    )
    target = models.CharField(verbose_name=_("target"), max_length=8, choices=Target.choices)
    version = models.PositiveBigIntegerField(verbose_name=_("version"), default=0)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)

    class Meta:
        verbose_name = _("memory anchor")
        verbose_name_plural = _("memory anchors")
        constraints = [
            models.UniqueConstraint(fields=["owner", "target"], name="memory_anchor_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.owner} / {self.get_target_display()} v{self.version}"


class MemoryEvent(models.Model):
    """The audit log: every accepted, staged, refused or blocked memory write."""

    class Action(models.TextChoices):
        ADD = "add", _("Add")
        REPLACE = "replace", _("Replace")
        REMOVE = "remove", _("Remove")
        IMPORT = "import", _("Import")
        APPROVE = "approve", _("Approve")
        REJECT = "reject", _("Reject")

    class Verdict(models.TextChoices):
        ACCEPTED = "accepted", _("Saved")
        STAGED = "staged", _("Waiting for approval")
        REJECTED = "rejected", _("Rejected by you")
        REFUSED = "refused", _("Refused")
        BLOCKED = "blocked", _("Blocked by the scanner")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="memory_events",
    )
    #: The person who made the change (the owner, or an administrator in the admin).
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("actor"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    source = models.CharField(
        verbose_name=_("source"), max_length=SOURCE_MAX_LENGTH, choices=Source.choices
    )
    #: As on MemoryEntry: the MCP token's name, or the chat import's id.
    source_client = models.CharField(
        verbose_name=_("source client"), max_length=100, blank=True, default=""
    )
    action = models.CharField(verbose_name=_("action"), max_length=8, choices=Action.choices)
    target = models.CharField(verbose_name=_("target"), max_length=8, choices=Target.choices)
    entry = models.ForeignKey(
        MemoryEntry,
        verbose_name=_("entry"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="events",
    )
    before = models.TextField(verbose_name=_("before"), blank=True, default="")
    after = models.TextField(verbose_name=_("after"), blank=True, default="")
    verdict = models.CharField(verbose_name=_("verdict"), max_length=8, choices=Verdict.choices)
    detail = models.TextField(verbose_name=_("detail"), blank=True, default="")
    #: Scanner finding ids, comma-separated, for blocked writes.
    findings = models.CharField(verbose_name=_("findings"), max_length=500, blank=True, default="")
    session = models.ForeignKey(
        "sessions_app.Session",
        verbose_name=_("session"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memory_events",
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("memory event")
        verbose_name_plural = _("memory events")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="memory_event_owner_time_idx"),
        ]

    def __str__(self) -> str:
        return gettext("%(action)s %(target)s (%(verdict)s)") % {
            "action": self.get_action_display(),
            "target": self.get_target_display(),
            "verdict": self.get_verdict_display(),
        }

    @property
    def finding_ids(self) -> list[str]:
        return [f for f in self.findings.split(", ") if f]


class SessionMemorySnapshot(models.Model):
    """The MEMORY/USER text frozen into a session's system prompt, and which entries it
    showed, so "which sessions saw this entry" has an answer after the fact."""

    session = models.ForeignKey(
        "sessions_app.Session",
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        related_name="memory_snapshots",
    )
    rendered = models.TextField(verbose_name=_("rendered"), blank=True, default="")
    entries = models.ManyToManyField(
        MemoryEntry, verbose_name=_("entries"), blank=True, related_name="snapshots"
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("session memory snapshot")
        verbose_name_plural = _("session memory snapshots")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["session", "-created_at"], name="memory_snapshot_session_idx"),
        ]

    def __str__(self) -> str:
        return gettext("memory snapshot of %(session)s") % {"session": self.session_id}


# --- Inferences: the local memory provider's model of the user (memory/inferences/) ---------


class ProviderConfig(models.Model):
    """Deployment settings of a memory provider, edited in the admin with a form built from
    the provider's `get_config_schema()`."""

    name = models.CharField(verbose_name=_("name"), max_length=100, unique=True)
    values = models.JSONField(verbose_name=_("values"), default=dict, blank=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)

    class Meta:
        verbose_name_plural = _("memory provider configurations")
        verbose_name = _("memory provider configuration")

    def __str__(self) -> str:
        return gettext("configuration of %(name)s") % {"name": self.name}
