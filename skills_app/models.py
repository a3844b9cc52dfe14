"""Skills (procedural memory): SKILL.md documents, their supporting files, every version of
either, and the per-session state of the background reviewer.

A skill belongs to one user, or to the whole team (no owner, `is_team`). `content` is the
SKILL.md text exactly as written; the other text fields are parsed from it on every write
(see skills_app/skillmd.py) so lists and the prompt index never parse YAML.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core.leases import LeaseFields


class Skill(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="skills",
        help_text=_("Empty for a team skill."),
    )
    is_team = models.BooleanField(
        verbose_name=_("team skill"),
        default=False,
        help_text=_("Shared with everyone; read-only for users and the agent."),
    )
    name = models.CharField(verbose_name=_("name"), max_length=64)
    category = models.CharField(verbose_name=_("category"), max_length=64, blank=True, default="")
    description = models.CharField(verbose_name=_("description"), max_length=1024)
    body = models.TextField(verbose_name=_("body"))
    #: Every frontmatter field (name and description included), as parsed.
    frontmatter = models.JSONField(verbose_name=_("frontmatter"), default=dict, blank=True)
    tags = models.JSONField(verbose_name=_("tags"), default=list, blank=True)
    content = models.TextField(verbose_name=_("content"), help_text=_("The whole SKILL.md."))
    enabled = models.BooleanField(
        verbose_name=_("enabled"),
        default=True,
        help_text=_("Disabled skills are hidden from the agent."),
    )
    pinned = models.BooleanField(
        verbose_name=_("pinned"),
        default=False,
        help_text=_("Pinned skills cannot be deleted, nor changed by the reviewer."),
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)

    class Meta:
        verbose_name = _("skill")
        verbose_name_plural = _("skills")
        ordering = ["category", "name"]
        indexes = [
            models.Index(fields=["owner", "category", "name"], name="skill_owner_cat_name_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=Q(owner__isnull=False),
                name="skill_unique_name_per_owner",
            ),
            models.UniqueConstraint(
                fields=["name"], condition=Q(is_team=True), name="skill_unique_team_name"
            ),
            models.CheckConstraint(
                condition=Q(is_team=True, owner__isnull=True)
                | Q(is_team=False, owner__isnull=False),
                name="skill_team_xor_owner",
            ),
            models.CheckConstraint(condition=~Q(name=""), name="skill_name_not_empty"),
        ]

    def __str__(self) -> str:
        return gettext("%(name)s (team)") % {"name": self.name} if self.is_team else self.name


class SkillFile(models.Model):
    """A supporting file: `references/…`, `templates/…`, `scripts/…` or `assets/…`."""

    skill = models.ForeignKey(
        Skill, verbose_name=_("skill"), on_delete=models.CASCADE, related_name="files"
    )
    path = models.CharField(verbose_name=_("path"), max_length=255)
    data = models.BinaryField(verbose_name=_("data"))
    size = models.PositiveIntegerField(verbose_name=_("size"), default=0)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)

    class Meta:
        verbose_name = _("skill file")
        verbose_name_plural = _("skill files")
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "path"], name="skillfile_unique_path"),
        ]

    def __str__(self) -> str:
        return f"{self.skill.name}/{self.path}"

    def text(self) -> str | None:
        """The file as text, or None when it is not UTF-8 (an image, an archive…)."""
        try:
            return bytes(self.data).decode("utf-8")
        except UnicodeDecodeError:
            return None


class SkillRevision(models.Model):
    """One change of one document of a skill, with the full text after the change.

    `file_path` is empty for SKILL.md. Diffs compare a revision with the previous revision
    of the same document; rollback writes an old revision's text as a new revision.
    """

    class Author(models.TextChoices):
        USER = "user", _("User")
        AGENT = "agent", _("Agent")
        REVIEW = "review", _("Background review")

    class Action(models.TextChoices):
        CREATE = "create", _("Created")
        EDIT = "edit", _("Edited")
        PATCH = "patch", _("Patched")
        WRITE_FILE = "write_file", _("File written")
        REMOVE_FILE = "remove_file", _("File removed")
        ROLLBACK = "rollback", _("Rolled back")
        IMPORT = "import", _("Imported")

    skill = models.ForeignKey(
        Skill, verbose_name=_("skill"), on_delete=models.CASCADE, related_name="revisions"
    )
    number = models.PositiveIntegerField(verbose_name=_("number"))
    action = models.CharField(verbose_name=_("action"), max_length=16, choices=Action.choices)
    author = models.CharField(verbose_name=_("author"), max_length=16, choices=Author.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("actor"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Who made or asked for the change."),
    )
    source_session = models.ForeignKey(
        "sessions_app.Session",
        verbose_name=_("source session"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="skill_revisions",
    )
    file_path = models.CharField(
        verbose_name=_("file path"), max_length=255, blank=True, default=""
    )
    #: Text after the change; None for a removed file or a binary one.
    content = models.TextField(verbose_name=_("content"), null=True, blank=True)
    summary = models.CharField(verbose_name=_("summary"), max_length=300, blank=True, default="")
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("skill revision")
        verbose_name_plural = _("skill revisions")
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["skill", "number"], name="skillrevision_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.skill.name} r{self.number}"

    @property
    def document(self) -> str:
        return self.file_path or "SKILL.md"


class SessionSkillState(models.Model):
    """Per conversation: the reviewer's counters and the skills its frozen prompt lists."""

    session = models.OneToOneField(
        "sessions_app.Session",
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="skill_state",
    )
    iterations_since_skill_review = models.PositiveIntegerField(
        verbose_name=_("iterations since skill review"), default=0
    )
    turns_since_memory_review = models.PositiveIntegerField(
        verbose_name=_("turns since memory review"), default=0
    )
    #: [{"id", "name", "category", "team"}] — what skills_index_freeze put in the prompt.
    included_skills = models.JSONField(verbose_name=_("included skills"), default=list, blank=True)
    index_frozen_at = models.DateTimeField(verbose_name=_("index frozen at"), null=True, blank=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), default=timezone.now)

    class Meta:
        verbose_name = _("session skill state")
        verbose_name_plural = _("session skill states")

    def __str__(self) -> str:
        return gettext("skill state of %(session)s") % {"session": self.session_id}


class ReviewRun(LeaseFields):
    """One background review of one turn. Unique per (session, last message) so a turn is
    reviewed at most once however often the task is delivered."""

    class Kind(models.TextChoices):
        SKILL = "skill", _("Skills")
        MEMORY = "memory", _("Memory")
        COMBINED = "combined", _("Skills and memory")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    session = models.ForeignKey(
        "sessions_app.Session",
        verbose_name=_("session"),
        on_delete=models.CASCADE,
        related_name="review_runs",
    )
    last_message_id = models.BigIntegerField(verbose_name=_("last message ID"))
    kind = models.CharField(verbose_name=_("kind"), max_length=16, choices=Kind.choices)
    status = models.CharField(
        verbose_name=_("status"), max_length=16, choices=Status.choices, default=Status.QUEUED
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), default=timezone.now)
    started_at = models.DateTimeField(verbose_name=_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(verbose_name=_("finished at"), null=True, blank=True)
    #: The reviewer's final words ("Nothing to save." or what it did).
    outcome = models.TextField(verbose_name=_("outcome"), blank=True, default="")
    #: [{"name", "ok", "summary"}] for every tool call the reviewer made.
    actions = models.JSONField(verbose_name=_("actions"), default=list, blank=True)
    prompt_tokens = models.PositiveIntegerField(verbose_name=_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(verbose_name=_("completion tokens"), default=0)
    error = models.TextField(verbose_name=_("error"), blank=True, default="")

    class Meta:
        verbose_name = _("review run")
        verbose_name_plural = _("review runs")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "created_at"], name="reviewrun_status_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "last_message_id"], name="reviewrun_unique_turn"
            ),
        ]

    def __str__(self) -> str:
        return gettext("%(kind)s review of %(session)s @%(message)s") % {
            "kind": self.get_kind_display(),
            "session": self.session_id,
            "message": self.last_message_id,
        }
