"""What the privacy app stores itself: "Download my data" jobs and the audit log of
administrators reading other people's content. Both tables predate the app (they were
created by accounts' migrations) and keep their names."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.exceptions import restored
from core.leases import LeaseFields


class ShownError:
    """A job's `error`, kept marked for translation (core.exceptions.stored)."""

    error: object

    @property
    def error_text(self) -> str:
        """The error in the reader's language (the active one)."""
        return str(restored(self.error))


class ExportJob(ShownError, LeaseFields):
    """One "Download my data" archive, built by a Celery task and downloadable by its owner
    until `expires_at`. The row is the job: the task claims it (`running`) with a
    conditional UPDATE, reports `progress`, and finishes it (`done` or `failed`)."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("Waiting")
        RUNNING = "running", _("Building")
        DONE = "done", _("Ready")
        FAILED = "failed", _("Failed")
        EXPIRED = "expired", _("Expired")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="export_jobs",
    )
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, default=Status.QUEUED
    )
    #: 0–100, and what the task is doing now ("Conversations 120/400").
    progress = models.PositiveSmallIntegerField(verbose_name=_("progress"), default=0)
    stage = models.CharField(verbose_name=_("stage"), max_length=200, blank=True, default="")
    #: File name under HERMES_EXPORT_DIR (never a path chosen by a user).
    file_name = models.CharField(
        verbose_name=_("file name"), max_length=200, blank=True, default=""
    )
    size = models.PositiveBigIntegerField(verbose_name=_("size"), default=0)
    #: Why it failed, shown in the reader's language (core.exceptions.stored).
    error = models.JSONField(verbose_name=_("error"), blank=True, default=str)
    task_id = models.CharField(verbose_name=_("task ID"), max_length=64, blank=True, default="")
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    started_at = models.DateTimeField(verbose_name=_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(verbose_name=_("finished at"), null=True, blank=True)
    expires_at = models.DateTimeField(verbose_name=_("expires at"), null=True, blank=True)

    class Meta:
        # The table kept its name when the model moved here from accounts.
        verbose_name = _("export job")
        verbose_name_plural = _("export jobs")
        db_table = "accounts_exportjob"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="exportjob_owner_idx"),
            models.Index(fields=["status", "expires_at"], name="exportjob_expiry_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed", "expired"]),
                name="exportjob_status_valid",
            ),
            models.CheckConstraint(condition=Q(progress__lte=100), name="exportjob_progress_pct"),
        ]

    def __str__(self) -> str:
        return gettext("export %(id)s of %(owner)s (%(status)s)") % {
            "id": self.pk,
            "owner": self.owner_id,
            "status": self.get_status_display(),
        }


class AdminContentAccess(models.Model):
    """An administrator looked at (or exported, or deleted) someone else's content in the
    admin. Only written when HERMES_ADMIN_CONTENT_ACCESS is on; holds no content itself.
    The people are kept as SET_NULL so erasing either account leaves an anonymous record."""

    class Action(models.TextChoices):
        LIST = "list", _("Listed")
        VIEW = "view", _("Opened")
        DELETE = "delete", _("Deleted")
        EXPORT = "export", _("Exported")

    viewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("viewer"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("subject"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Whose content it was (empty for a list spanning several people)."),
    )
    action = models.CharField(verbose_name=_("action"), max_length=8, choices=Action.choices)
    model = models.CharField(verbose_name=_("model"), max_length=100)
    object_id = models.CharField(verbose_name=_("object ID"), max_length=64, blank=True, default="")
    rows = models.PositiveIntegerField(verbose_name=_("rows"), default=1)
    path = models.CharField(verbose_name=_("path"), max_length=300, blank=True, default="")
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)

    class Meta:
        db_table = "accounts_admincontentaccess"
        ordering = ["-created_at", "-id"]
        verbose_name = _("admin content access")
        verbose_name_plural = _("admin content access log")
        indexes = [
            models.Index(fields=["subject", "-created_at"], name="admincontent_subject_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} {self.model} {self.object_id}".strip()


class ChatImportJob(ShownError, LeaseFields):
    """One upload of a ChatGPT or Claude export, imported by a Celery task (privacy.chat_jobs).
    Claimed with a lease like an export; `report` holds the summary lines when it is done.

    With `learn` (the person's choice at upload), a learning review follows the import
    (privacy.chat_learn): queued when the import is done, it holds the row's lease in its
    turn (kind `chat_learn`; the two never run at once) and keeps its plan, progress and
    summary in `learning`."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("Waiting")
        RUNNING = "running", _("Importing")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    class LearnStatus(models.TextChoices):
        NONE = "", _("Not started")
        QUEUED = "queued", _("Waiting")
        RUNNING = "running", _("Learning")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        related_name="chat_import_jobs",
    )
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, default=Status.QUEUED
    )
    progress = models.PositiveSmallIntegerField(verbose_name=_("progress"), default=0)
    stage = models.CharField(verbose_name=_("stage"), max_length=200, blank=True, default="")
    #: The uploaded file under HERMES_EXPORT_DIR (a random name of ours), until it is read.
    file_name = models.CharField(
        verbose_name=_("file name"), max_length=200, blank=True, default=""
    )
    #: What the import did, one line each, shown in the reader's language
    #: (import_report.HermesImportReport.stored; `report_lines`).
    report = models.JSONField(verbose_name=_("report"), default=list, blank=True)
    #: The export's format once imported: "chatgpt" or "claude" (sessions_app.IMPORT_SOURCES).
    source = models.CharField(verbose_name=_("source"), max_length=16, blank=True, default="")
    #: Why it failed, shown in the reader's language (core.exceptions.stored).
    error = models.JSONField(verbose_name=_("error"), blank=True, default=str)
    task_id = models.CharField(verbose_name=_("task ID"), max_length=64, blank=True, default="")
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    finished_at = models.DateTimeField(verbose_name=_("finished at"), null=True, blank=True)
    learn = models.BooleanField(
        verbose_name=_("learn"),
        default=False,
        help_text=_("Let Hermes learn from this history (chosen at upload)."),
    )
    learn_status = models.CharField(
        verbose_name=_("learn status"),
        max_length=16,
        choices=LearnStatus.choices,
        blank=True,
        default="",
    )
    #: The learning's plan (batches of conversations), progress, counts and summary lines.
    learning = models.JSONField(verbose_name=_("learning"), default=dict, blank=True)

    class Meta:
        verbose_name = _("chat import job")
        verbose_name_plural = _("chat import jobs")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed"]),
                name="chatimportjob_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(learn_status__in=["", "queued", "running", "done", "failed"]),
                name="chatimportjob_learn_status_valid",
            ),
            models.CheckConstraint(condition=Q(progress__lte=100), name="chatimportjob_pct"),
        ]

    def __str__(self) -> str:
        return gettext("chat import %(id)s of %(owner)s (%(status)s)") % {
            "id": self.pk,
            "owner": self.owner_id,
            "status": self.get_status_display(),
        }

    @property
    def report_lines(self) -> list[str]:
        """What the import did, in the reader's language."""
        return [str(restored(line)) for line in self.report or []]

    @property
    def panel_status(self) -> str:
        """The Account page's state of the job: its status, or "learning" while the
        learning that follows the import waits or runs."""
        if self.status == self.Status.DONE and self.learn_status in (
            self.LearnStatus.QUEUED,
            self.LearnStatus.RUNNING,
        ):
            return "learning"
        return self.status
