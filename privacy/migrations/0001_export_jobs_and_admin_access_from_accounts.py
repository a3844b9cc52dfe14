import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """ExportJob and AdminContentAccess moved here from accounts. Their tables
    (accounts_exportjob, accounts_admincontentaccess) exist already and keep their names and
    rows: this only tells Django's state where the models live now."""

    initial = True

    dependencies = [
        ("accounts", "0003_export_jobs_and_admin_content_access"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AdminContentAccess",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "action",
                            models.CharField(
                                choices=[
                                    ("list", "Listed"),
                                    ("view", "Opened"),
                                    ("delete", "Deleted"),
                                    ("export", "Exported"),
                                ],
                                max_length=8,
                            ),
                        ),
                        ("model", models.CharField(max_length=100)),
                        ("object_id", models.CharField(blank=True, default="", max_length=64)),
                        ("rows", models.PositiveIntegerField(default=1)),
                        ("path", models.CharField(blank=True, default="", max_length=300)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "subject",
                            models.ForeignKey(
                                blank=True,
                                help_text="Whose content it was (empty for a list spanning several people).",
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "viewer",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "admin content access",
                        "verbose_name_plural": "admin content access log",
                        "db_table": "accounts_admincontentaccess",
                        "ordering": ["-created_at", "-id"],
                        "indexes": [
                            models.Index(
                                fields=["subject", "-created_at"], name="admincontent_subject_idx"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ExportJob",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Waiting"),
                                    ("running", "Building"),
                                    ("done", "Ready"),
                                    ("failed", "Failed"),
                                    ("expired", "Expired"),
                                ],
                                default="queued",
                                max_length=16,
                            ),
                        ),
                        ("progress", models.PositiveSmallIntegerField(default=0)),
                        ("stage", models.CharField(blank=True, default="", max_length=200)),
                        ("file_name", models.CharField(blank=True, default="", max_length=200)),
                        ("size", models.PositiveBigIntegerField(default=0)),
                        ("error", models.CharField(blank=True, default="", max_length=300)),
                        ("task_id", models.CharField(blank=True, default="", max_length=64)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("expires_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "owner",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="export_jobs",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "accounts_exportjob",
                        "ordering": ["-created_at", "-id"],
                        "indexes": [
                            models.Index(
                                fields=["owner", "-created_at"], name="exportjob_owner_idx"
                            ),
                            models.Index(
                                fields=["status", "expires_at"], name="exportjob_expiry_idx"
                            ),
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    (
                                        "status__in",
                                        ["queued", "running", "done", "failed", "expired"],
                                    )
                                ),
                                name="exportjob_status_valid",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("progress__lte", 100)),
                                name="exportjob_progress_pct",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
