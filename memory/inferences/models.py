"""What the local user model concluded about a person (inferences), where each was used, and
the person's switches for it. Models of the `memory` app (re-exported by memory.models)."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class InferenceCategory(models.TextChoices):
    PREFERENCE = "preference", _("Preference")
    ABOUT = "about", _("About you")
    PROJECT = "project", _("Project")
    ENVIRONMENT = "environment", _("Tools and environment")
    GOAL = "goal", _("Goal")
    OTHER = "other", _("Other")


class Inference(models.Model):
    """Something the agent inferred about its user, with the messages it came from.

    Only *active* inferences are ever recalled or searchable by the agent; quarantined ones
    (imperative or suspicious text from the extractor) wait for the person's review, and
    contradicted ones were replaced by a newer inference. Deleting one is a hard delete
    (plus an InferenceTombstone so the same statement is not derived again).
    """

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        QUARANTINED = "quarantined", _("Held for your review")
        CONTRADICTED = "contradicted", _("Contradicted by a newer inference")

    class Origin(models.TextChoices):
        EXTRACTED = "extracted", _("Inferred from a conversation")
        MEMORY = "memory", _("Mirrored from memory")
        CORRECTED = "corrected", _("Corrected by you")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="inferences",
    )
    statement = models.TextField(verbose_name=_("statement"))
    # Duplicates are found by this digest of the normalised statement (see
    # memory.inferences.guard.statement_digest); PostgreSQL cannot btree-index long text.
    statement_hash = models.CharField(
        verbose_name=_("statement hash"), max_length=64, editable=False
    )
    category = models.CharField(
        verbose_name=_("category"),
        max_length=16,
        choices=InferenceCategory.choices,
        default=InferenceCategory.OTHER,
    )
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, default=Status.ACTIVE
    )
    origin = models.CharField(
        verbose_name=_("origin"), max_length=16, choices=Origin.choices, default=Origin.EXTRACTED
    )
    #: How sure the extractor was (merged duplicates raise it).
    confidence = models.DecimalField(
        verbose_name=_("confidence"), max_digits=4, decimal_places=3, default=Decimal("0.500")
    )
    #: Feedback-driven: +0.05 helpful, −0.10 unhelpful, clamped to 0..1 (exact decimals).
    trust = models.DecimalField(
        verbose_name=_("trust"), max_digits=4, decimal_places=3, default=Decimal("0.500")
    )
    helpful_count = models.PositiveIntegerField(verbose_name=_("helpful count"), default=0)
    unhelpful_count = models.PositiveIntegerField(verbose_name=_("unhelpful count"), default=0)
    use_count = models.PositiveIntegerField(verbose_name=_("use count"), default=0)
    evidence = models.ManyToManyField(
        "sessions_app.Message", verbose_name=_("evidence"), blank=True, related_name="inferences"
    )
    source_session = models.ForeignKey(
        "sessions_app.Session",
        verbose_name=_("source session"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="inferences",
    )
    contradicted_by = models.ForeignKey(
        "self",
        verbose_name=_("contradicted by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="contradicts",
    )
    quarantine_reason = models.CharField(
        verbose_name=_("quarantine reason"), max_length=300, blank=True, default=""
    )
    extractor_version = models.CharField(
        verbose_name=_("extractor version"), max_length=32, blank=True, default=""
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)
    last_used_at = models.DateTimeField(verbose_name=_("last used at"), null=True, blank=True)

    class Meta:
        verbose_name = _("inference")
        verbose_name_plural = _("inferences")
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

    inference = models.ForeignKey(
        Inference, verbose_name=_("inference"), on_delete=models.CASCADE, related_name="uses"
    )
    message = models.ForeignKey(
        "sessions_app.Message",
        verbose_name=_("message"),
        on_delete=models.CASCADE,
        related_name="inference_uses",
    )
    score = models.FloatField(verbose_name=_("score"), default=0.0)
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("inference use")
        verbose_name_plural = _("inference uses")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["message"], name="inference_use_message_idx")]
        constraints = [
            models.UniqueConstraint(fields=["inference", "message"], name="inference_use_unique"),
        ]

    def __str__(self) -> str:
        return gettext("inference %(inference)s in message %(message)s") % {
            "inference": self.inference_id,
            "message": self.message_id,
        }


class InferenceState(models.Model):
    """Per conversation: how far extraction got (a watermark claimed with a conditional
    update, so a task delivered twice extracts once) and the recall candidates computed in
    the background for its next turn."""

    session = models.OneToOneField(
        "sessions_app.Session",
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        related_name="inference_state",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="inference_states",
    )
    extracted_through = models.BigIntegerField(verbose_name=_("extracted through"), default=0)
    extracted_at = models.DateTimeField(verbose_name=_("extracted at"), null=True, blank=True)
    recall_ids = models.JSONField(verbose_name=_("recall IDs"), default=list, blank=True)
    recall_at = models.DateTimeField(verbose_name=_("recall at"), null=True, blank=True)

    class Meta:
        verbose_name = _("inference state")
        verbose_name_plural = _("inference states")
        indexes = [models.Index(fields=["owner"], name="inference_state_owner_idx")]

    def __str__(self) -> str:
        return gettext("inference state of %(session)s") % {"session": self.session_id}


class InferenceSettings(models.Model):
    """A person's consent to inference. No row: HERMES_INFERENCE_DEFAULT_ENABLED."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="inference_settings",
    )
    enabled = models.BooleanField(verbose_name=_("enabled"), default=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)

    class Meta:
        verbose_name = _("inference settings")
        verbose_name_plural = _("inference settings")

    def __str__(self) -> str:
        if self.enabled:
            return gettext("inference on for %(user)s") % {"user": self.user}
        return gettext("inference off for %(user)s") % {"user": self.user}


class InferenceTombstone(models.Model):
    """The digest (not the text) of a statement the person deleted, so extraction does not
    derive it again."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="inference_tombstones",
    )
    digest = models.CharField(verbose_name=_("digest"), max_length=64)
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("inference tombstone")
        verbose_name_plural = _("inference tombstones")
        constraints = [
            models.UniqueConstraint(fields=["owner", "digest"], name="inference_tombstone_unique"),
        ]

    def __str__(self) -> str:
        return gettext("deleted inference %(digest)s") % {"digest": self.digest[:12]}
