"""Conversations and their messages, mirroring the `sessions`/`messages` tables of Hermes'
state.db so that data can move both ways (export to and import from a Hermes home)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from core.leases import LeaseFields

#: `Session.source` of conversations held through the OpenAI-compatible endpoint (openai_api);
#: the chat's own are "web", imported ones keep Hermes' value ("cli", "telegram", …).
API_SOURCE = "api"
#: `Session.source` of conversations imported from another assistant's data export
#: (privacy.chat_import) → the name the chat shows ("Imported from ChatGPT").
IMPORT_SOURCES = {"chatgpt": "ChatGPT", "claude": "Claude"}


def new_session_id() -> str:
    """Hermes' session id format: `YYYYMMDD_HHMMSS_<6 hex>` (UTC)."""
    now = datetime.now(UTC)
    return f"{now:%Y%m%d_%H%M%S}_{secrets.token_hex(3)}"


class SystemPrompt(models.Model):
    """A frozen system prompt, stored once per distinct text (Hermes' `system_prompts`).

    Many sessions of one user start from the same prompt; deduplicating by sha256 keeps
    the table small and lets the inspector show which sessions shared a prompt.
    """

    hash = models.CharField(verbose_name=_("hash"), max_length=64, primary_key=True)
    prompt = models.TextField(verbose_name=_("prompt"))

    class Meta:
        verbose_name = _("system prompt")
        verbose_name_plural = _("system prompts")

    def __str__(self) -> str:
        return self.hash[:12]

    @staticmethod
    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Session(LeaseFields):
    """A conversation. Its lease (kinds `turn` and `compress`, see sessions_app/turn_claim.py)
    lets one turn or one compression work on it at a time, across processes."""

    class EndReason(models.TextChoices):
        COMPRESSION = "compression", _("Compressed into a continuation")
        USER = "user", _("Ended by the user")
        DELETED = "deleted", _("Deleted")
        EXPIRED = "expired", _("Expired")

    class TitleSource(models.TextChoices):
        DERIVED = "derived", _("Derived from the first message")
        LLM = "llm", _("Written by the model")
        USER = "user", _("Set by the user")

    id = models.CharField(
        verbose_name=_("ID"),
        max_length=32,
        primary_key=True,
        default=new_session_id,
        editable=False,
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="chat_sessions",
    )
    source = models.CharField(verbose_name=_("source"), max_length=32, default="web")
    model = models.CharField(verbose_name=_("model"), max_length=200, blank=True, default="")
    model_config = models.JSONField(verbose_name=_("model config"), default=dict, blank=True)
    system_prompt = models.ForeignKey(
        SystemPrompt,
        verbose_name=_("system prompt"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="sessions",
    )
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="children",
    )
    started_at = models.DateTimeField(verbose_name=_("started at"), default=timezone.now)
    ended_at = models.DateTimeField(verbose_name=_("ended at"), null=True, blank=True)
    end_reason = models.CharField(
        verbose_name=_("end reason"),
        max_length=32,
        choices=EndReason.choices,
        blank=True,
        default="",
    )
    message_count = models.PositiveIntegerField(verbose_name=_("message count"), default=0)
    tool_call_count = models.PositiveIntegerField(verbose_name=_("tool call count"), default=0)
    api_call_count = models.PositiveIntegerField(verbose_name=_("API call count"), default=0)
    input_tokens = models.PositiveBigIntegerField(verbose_name=_("input tokens"), default=0)
    output_tokens = models.PositiveBigIntegerField(verbose_name=_("output tokens"), default=0)
    cache_read_tokens = models.PositiveBigIntegerField(
        verbose_name=_("cache read tokens"), default=0
    )
    cache_write_tokens = models.PositiveBigIntegerField(
        verbose_name=_("cache write tokens"), default=0
    )
    reasoning_tokens = models.PositiveBigIntegerField(verbose_name=_("reasoning tokens"), default=0)
    estimated_cost_usd = models.DecimalField(
        verbose_name=_("estimated cost (USD)"), max_digits=14, decimal_places=6, default=0
    )
    title = models.CharField(verbose_name=_("title"), max_length=100, null=True, blank=True)
    title_source = models.CharField(
        verbose_name=_("title source"),
        max_length=16,
        choices=TitleSource.choices,
        blank=True,
        default="",
    )
    last_activity_at = models.DateTimeField(
        verbose_name=_("last activity at"), default=timezone.now
    )
    archived = models.BooleanField(verbose_name=_("archived"), default=False)
    pinned = models.BooleanField(verbose_name=_("pinned"), default=False)
    # Temporary chats neither read nor write memory, are not searchable, and are deleted
    # after HERMES_TEMPORARY_CHAT_DAYS.
    temporary = models.BooleanField(verbose_name=_("temporary"), default=False)
    # After a failed compression the conversation goes on uncompressed until this time.
    compression_cooldown_until = models.DateTimeField(
        verbose_name=_("compression cooldown until"), null=True, blank=True
    )
    compression_failure_error = models.CharField(
        verbose_name=_("compression failure error"), max_length=300, blank=True, default=""
    )

    class Meta:
        verbose_name = _("session")
        verbose_name_plural = _("sessions")
        ordering = ["-last_activity_at"]
        indexes = [
            models.Index(fields=["parent"], name="session_parent_idx"),
            models.Index(fields=["-started_at"], name="session_started_desc_idx"),
            models.Index(fields=["owner", "-last_activity_at"], name="session_owner_activity_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "title"],
                condition=Q(title__isnull=False),
                name="session_unique_title_per_owner",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=models.F("started_at")),
                name="session_ends_after_start",
            ),
            models.CheckConstraint(
                condition=~Q(parent=models.F("id")), name="session_not_own_parent"
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.id

    @property
    def imported_from(self) -> str:
        """The assistant this conversation was imported from ("ChatGPT"), or ""."""
        return IMPORT_SOURCES.get(self.source, "")


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system", pgettext_lazy("message role", "System")
        USER = "user", pgettext_lazy("message role", "User")
        ASSISTANT = "assistant", pgettext_lazy("message role", "Assistant")
        TOOL = "tool", pgettext_lazy("message role", "Tool")

    class Kind(models.TextChoices):
        REGULAR = "", _("Regular")
        # The handoff summary that opens a compression continuation.
        SUMMARY = "summary", _("Compression summary")
        # A message copied from the parent into its continuation (shown only once).
        CARRIED = "carried", _("Carried over from the previous part")
        # A visible "Switched to <model>" line (role system: never sent to the model).
        MODEL_SWITCH = "model_switch", _("Model switch")

    class Status(models.TextChoices):
        STREAMING = "streaming", _("Streaming")
        COMPLETE = "complete", _("Complete")
        INTERRUPTED = "interrupted", _("Interrupted")
        FAILED = "failed", _("Failed")

    id = models.BigAutoField(verbose_name=_("ID"), primary_key=True)
    session = models.ForeignKey(
        Session, verbose_name=_("session"), on_delete=models.CASCADE, related_name="messages"
    )
    role = models.CharField(verbose_name=_("role"), max_length=16, choices=Role.choices)
    content = models.TextField(verbose_name=_("content"), blank=True, default="")
    tool_call_id = models.CharField(
        verbose_name=_("tool call ID"), max_length=200, blank=True, default=""
    )
    tool_calls = models.JSONField(verbose_name=_("tool calls"), null=True, blank=True)
    tool_name = models.CharField(
        verbose_name=_("tool name"), max_length=200, blank=True, default=""
    )
    timestamp = models.DateTimeField(verbose_name=_("timestamp"), default=timezone.now)
    token_count = models.PositiveIntegerField(verbose_name=_("token count"), null=True, blank=True)
    finish_reason = models.CharField(
        verbose_name=_("finish reason"), max_length=32, blank=True, default=""
    )
    reasoning = models.TextField(verbose_name=_("reasoning"), blank=True, default="")
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, blank=True, default=""
    )
    kind = models.CharField(
        verbose_name=_("kind"), max_length=16, choices=Kind.choices, blank=True, default=""
    )
    # Branches: the messages of a session form a tree. `parent` is the previous message on
    # this message's path (None for the first one); messages sharing a parent are
    # alternatives (an edited user message, a regenerated answer). `active` marks the
    # selected path — the conversation the model sees — and is Hermes' `messages.active`
    # (inactive rows are exported as rewound: active 0, compacted 0).
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    active = models.BooleanField(verbose_name=_("active"), default=True)
    # The recalled-memory fence sent with this user message (API time only). Kept apart
    # from `content` so it is never shown, searched or exported as something the user said,
    # yet replayed byte-for-byte so every request extends the previous one.
    context_block = models.TextField(verbose_name=_("context block"), blank=True, default="")
    # Usage of the model call that produced this assistant message.
    model = models.CharField(verbose_name=_("model"), max_length=200, blank=True, default="")
    prompt_tokens = models.PositiveIntegerField(verbose_name=_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(verbose_name=_("completion tokens"), default=0)
    cached_tokens = models.PositiveIntegerField(verbose_name=_("cached tokens"), default=0)
    reasoning_tokens = models.PositiveIntegerField(verbose_name=_("reasoning tokens"), default=0)
    cost_usd = models.DecimalField(
        verbose_name=_("cost (USD)"), max_digits=12, decimal_places=6, default=0
    )

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ["id"]
        indexes = [
            models.Index(fields=["session", "timestamp"], name="message_session_time_idx"),
            models.Index(fields=["session", "id"], name="message_session_id_idx"),
            models.Index(fields=["session", "active", "id"], name="message_session_path_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(role__in=["system", "user", "assistant", "tool"]),
                name="message_role_valid",
            ),
            models.CheckConstraint(
                condition=Q(status="")
                | Q(
                    role="assistant", status__in=["streaming", "complete", "interrupted", "failed"]
                ),
                name="message_status_only_for_assistant",
            ),
            models.CheckConstraint(
                condition=~Q(role="tool") | ~Q(tool_call_id=""),
                name="message_tool_has_call_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_role_display()}: {self.content[:60]}"


class StateMeta(models.Model):
    """Key/value facts about the store itself (Hermes' `state_meta`)."""

    key = models.CharField(verbose_name=_("key"), max_length=200, primary_key=True)
    value = models.TextField(verbose_name=_("value"), blank=True, default="")

    class Meta:
        verbose_name = _("state meta entry")
        verbose_name_plural = _("state meta")

    def __str__(self) -> str:
        return self.key


# ======================================================================================
# L2 search: cached query-focused summaries of conversations (sessions_app.search)
# ======================================================================================


class SearchSummary(LeaseFields):
    """One summary of one conversation focused on one query, written by a Celery task.

    The row is the cache *and* the job: a request creates it `pending`, the task claims it
    (`running`) with a conditional UPDATE and finishes it (`done` or `failed`). Identical
    requests — same normalised query, same conversation (its compression chain's root) and
    same newest message — share the row, so a summary is never paid for twice; a new
    message in the conversation makes a new key.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting")
        RUNNING = "running", _("Summarising")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    id = models.BigAutoField(verbose_name=_("ID"), primary_key=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="search_summaries",
    )
    # The root of the conversation's compression chain.
    session = models.ForeignKey(
        Session,
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        related_name="search_summaries",
    )
    query = models.CharField(verbose_name=_("query"), max_length=2048)
    query_hash = models.CharField(verbose_name=_("query hash"), max_length=64)
    last_message_id = models.BigIntegerField(verbose_name=_("last message ID"))
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, default=Status.PENDING
    )
    summary = models.TextField(verbose_name=_("summary"), blank=True, default="")
    error = models.CharField(verbose_name=_("error"), max_length=300, blank=True, default="")
    attempts = models.PositiveSmallIntegerField(verbose_name=_("attempts"), default=0)
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)
    claimed_at = models.DateTimeField(verbose_name=_("claimed at"), null=True, blank=True)
    finished_at = models.DateTimeField(verbose_name=_("finished at"), null=True, blank=True)

    class Meta:
        verbose_name = _("search summary")
        verbose_name_plural = _("search summaries")
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="search_summary_owner_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "query_hash", "last_message_id"],
                name="search_summary_unique_request",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "running", "done", "failed"]),
                name="search_summary_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.query[:40]}"
