"""L1 hot memory: the curated MEMORY/USER entries the agent sees in every session.

Mirrors Hermes' MEMORY.md / USER.md (entries joined by "\\n§\\n") as rows, so each entry
carries provenance and every change leaves an audit event. All writes go through
`memory.services`; nothing here validates or enforces limits on its own.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal

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
    pre-compression flush, the Memory page, an import, the REST API, the admin, an MCP
    client (another agent holding one of the person's API tokens), or the review of an
    imported ChatGPT/Claude history (the import's "Let Hermes learn from this history")."""

    TOOL = "tool", "Chat"
    REVIEW = "review", "Background review"
    FLUSH = "flush", "Compression flush"
    MANUAL = "manual", "Memory page"
    IMPORT = "import", "Import"
    API = "api", "REST API"
    ADMIN = "admin", "Admin"
    MCP = "mcp", "MCP"
    IMPORT_REVIEW = "import_review", "Learned from imported history"


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
    source = models.CharField(
        max_length=SOURCE_MAX_LENGTH, choices=Source.choices, default=Source.MANUAL
    )
    #: Which writer of the source: with "mcp" the name of the API token the client used;
    #: with "import_review" the id of the chat import (privacy.ChatImportJob) whose learning
    #: wrote it (memory.provenance reads it).
    source_client = models.CharField(max_length=100, blank=True, default="")
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

    A write's first statement bumps `version` (UPDATE … RETURNING the owner's limits),
    which on PostgreSQL locks this row until commit: locking the entries themselves would
    not stop two concurrent *adds* (no row to lock yet) from both passing the budget
    check. On SQLite the IMMEDIATE transaction already serialises writers. `version`
    counts the writes that took the lock, so readers can tell the list may have changed.
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
    source = models.CharField(max_length=SOURCE_MAX_LENGTH, choices=Source.choices)
    #: As on MemoryEntry: the MCP token's name, or the chat import's id.
    source_client = models.CharField(max_length=100, blank=True, default="")
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


# --- Inferences: the local memory provider's model of the user (memory/inferences/) ---------


class InferenceCategory(models.TextChoices):
    PREFERENCE = "preference", "Preference"
    ABOUT = "about", "About you"
    PROJECT = "project", "Project"
    ENVIRONMENT = "environment", "Tools and environment"
    GOAL = "goal", "Goal"
    OTHER = "other", "Other"


class Inference(models.Model):
    """Something the agent inferred about its user, with the messages it came from.

    Only *active* inferences are ever recalled or searchable by the agent; quarantined ones
    (imperative or suspicious text from the extractor) wait for the person's review, and
    contradicted ones were replaced by a newer inference. Deleting one is a hard delete
    (plus an InferenceTombstone so the same statement is not derived again).
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        QUARANTINED = "quarantined", "Held for your review"
        CONTRADICTED = "contradicted", "Contradicted by a newer inference"

    class Origin(models.TextChoices):
        EXTRACTED = "extracted", "Inferred from a conversation"
        MEMORY = "memory", "Mirrored from memory"
        CORRECTED = "corrected", "Corrected by you"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inferences"
    )
    statement = models.TextField()
    # Duplicates are found by this digest of the normalised statement (see
    # memory.inferences.guard.statement_digest); PostgreSQL cannot btree-index long text.
    statement_hash = models.CharField(max_length=64, editable=False)
    category = models.CharField(
        max_length=16, choices=InferenceCategory.choices, default=InferenceCategory.OTHER
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.EXTRACTED)
    #: How sure the extractor was (merged duplicates raise it).
    confidence = models.DecimalField(max_digits=4, decimal_places=3, default=Decimal("0.500"))
    #: Feedback-driven: +0.05 helpful, −0.10 unhelpful, clamped to 0..1 (exact decimals).
    trust = models.DecimalField(max_digits=4, decimal_places=3, default=Decimal("0.500"))
    helpful_count = models.PositiveIntegerField(default=0)
    unhelpful_count = models.PositiveIntegerField(default=0)
    use_count = models.PositiveIntegerField(default=0)
    evidence = models.ManyToManyField("sessions_app.Message", blank=True, related_name="inferences")
    source_session = models.ForeignKey(
        "sessions_app.Session",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="inferences",
    )
    contradicted_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="contradicts"
    )
    quarantine_reason = models.CharField(max_length=300, blank=True, default="")
    extractor_version = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "status", "-trust"], name="inference_recall_idx"),
            models.Index(fields=["owner", "-updated_at"], name="inference_owner_recent_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "statement_hash"], name="inference_unique_statement"
            ),
            models.CheckConstraint(condition=~Q(statement=""), name="inference_not_empty"),
            models.CheckConstraint(
                condition=Q(trust__gte=0) & Q(trust__lte=1), name="inference_trust_range"
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                name="inference_confidence_range",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "quarantined", "contradicted"]),
                name="inference_status_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status="quarantined") | ~Q(quarantine_reason=""),
                name="inference_quarantine_has_reason",
            ),
        ]

    def __str__(self) -> str:
        text = self.statement if len(self.statement) <= 60 else self.statement[:59] + "…"
        return f"{text} ({self.get_status_display().lower()})"

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE


class InferenceUse(models.Model):
    """An inference recalled into a turn: `message` is the user message it was fenced into."""

    inference = models.ForeignKey(Inference, on_delete=models.CASCADE, related_name="uses")
    message = models.ForeignKey(
        "sessions_app.Message", on_delete=models.CASCADE, related_name="inference_uses"
    )
    score = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["message"], name="inference_use_message_idx")]
        constraints = [
            models.UniqueConstraint(fields=["inference", "message"], name="inference_use_unique"),
        ]

    def __str__(self) -> str:
        return f"inference {self.inference_id} in message {self.message_id}"


class InferenceState(models.Model):
    """Per conversation: how far extraction got (a watermark claimed with a conditional
    update, so a task delivered twice extracts once) and the recall candidates computed in
    the background for its next turn."""

    session = models.OneToOneField(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="inference_state"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inference_states"
    )
    extracted_through = models.BigIntegerField(default=0)
    extracted_at = models.DateTimeField(null=True, blank=True)
    recall_ids = models.JSONField(default=list, blank=True)
    recall_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner"], name="inference_state_owner_idx")]

    def __str__(self) -> str:
        return f"inference state of {self.session_id}"


class InferenceSettings(models.Model):
    """A person's consent to inference. No row: HERMES_INFERENCE_DEFAULT_ENABLED."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inference_settings"
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "inference settings"
        verbose_name_plural = "inference settings"

    def __str__(self) -> str:
        return f"inference {'on' if self.enabled else 'off'} for {self.user}"


class InferenceTombstone(models.Model):
    """The digest (not the text) of a statement the person deleted, so extraction does not
    derive it again."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inference_tombstones"
    )
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "digest"], name="inference_tombstone_unique"),
        ]

    def __str__(self) -> str:
        return f"deleted inference {self.digest[:12]}"


class ProviderConfig(models.Model):
    """Deployment settings of a memory provider, edited in the admin with a form built from
    the provider's `get_config_schema()`."""

    name = models.CharField(max_length=100, unique=True)
    values = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "memory provider configuration"

    def __str__(self) -> str:
        return f"configuration of {self.name}"
