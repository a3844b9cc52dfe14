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

from core.leases import LeaseFields


class Skill(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="skills",
        help_text="Empty for a team skill.",
    )
    is_team = models.BooleanField(
        default=False, help_text="Shared with everyone; read-only for users and the agent."
    )
    name = models.CharField(max_length=64)
    category = models.CharField(max_length=64, blank=True, default="")
    description = models.CharField(max_length=1024)
    body = models.TextField()
    #: Every frontmatter field (name and description included), as parsed.
    frontmatter = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    content = models.TextField(help_text="The whole SKILL.md.")
    enabled = models.BooleanField(
        default=True, help_text="Disabled skills are hidden from the agent."
    )
    pinned = models.BooleanField(
        default=False, help_text="Pinned skills cannot be deleted, nor changed by the reviewer."
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
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
        return f"{self.name} (team)" if self.is_team else self.name


class SkillFile(models.Model):
    """A supporting file: `references/…`, `templates/…`, `scripts/…` or `assets/…`."""

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=255)
    data = models.BinaryField()
    size = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
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
        USER = "user", "User"
        AGENT = "agent", "Agent"
        REVIEW = "review", "Background review"

    class Action(models.TextChoices):
        CREATE = "create", "Created"
        EDIT = "edit", "Edited"
        PATCH = "patch", "Patched"
        WRITE_FILE = "write_file", "File written"
        REMOVE_FILE = "remove_file", "File removed"
        ROLLBACK = "rollback", "Rolled back"
        IMPORT = "import", "Imported"

    skill = models.ForeignKey(Skill, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    action = models.CharField(max_length=16, choices=Action.choices)
    author = models.CharField(max_length=16, choices=Author.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who made or asked for the change.",
    )
    source_session = models.ForeignKey(
        "sessions_app.Session",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="skill_revisions",
    )
    file_path = models.CharField(max_length=255, blank=True, default="")
    #: Text after the change; None for a removed file or a binary one.
    content = models.TextField(null=True, blank=True)
    summary = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
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
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="skill_state",
    )
    iterations_since_skill_review = models.PositiveIntegerField(default=0)
    turns_since_memory_review = models.PositiveIntegerField(default=0)
    #: [{"id", "name", "category", "team"}] — what skills_index_freeze put in the prompt.
    included_skills = models.JSONField(default=list, blank=True)
    index_frozen_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"skill state of {self.session_id}"


class ReviewRun(LeaseFields):
    """One background review of one turn. Unique per (session, last message) so a turn is
    reviewed at most once however often the task is delivered."""

    class Kind(models.TextChoices):
        SKILL = "skill", "Skills"
        MEMORY = "memory", "Memory"
        COMBINED = "combined", "Skills and memory"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    session = models.ForeignKey(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="review_runs"
    )
    last_message_id = models.BigIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: The reviewer's final words ("Nothing to save." or what it did).
    outcome = models.TextField(blank=True, default="")
    #: [{"name", "ok", "summary"}] for every tool call the reviewer made.
    actions = models.JSONField(default=list, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "created_at"], name="reviewrun_status_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "last_message_id"], name="reviewrun_unique_turn"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} review of {self.session_id} @{self.last_message_id}"
