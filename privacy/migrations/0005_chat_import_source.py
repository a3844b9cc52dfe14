"""A chat import remembers its export's format ("chatgpt" or "claude"), so what its learning
wrote can say "Learned from your ChatGPT import of …". Imports with a learning plan take the
format of the conversations it names; others stay unknown ("your import of …")."""

from django.db import migrations, models


def source_from_plan(apps, schema_editor):
    job_model = apps.get_model("privacy", "ChatImportJob")
    session_model = apps.get_model("sessions_app", "Session")
    for job in job_model.objects.filter(learn=True).only("pk", "learning").iterator():
        batches = (job.learning or {}).get("batches") or []
        ids = [sid for batch in batches if isinstance(batch, list) for sid in batch][:20]
        found = (
            session_model.objects.filter(pk__in=ids, source__in=["chatgpt", "claude"])
            .values_list("source", flat=True)
            .first()
        )
        if found:
            job_model.objects.filter(pk=job.pk).update(source=found)


class Migration(migrations.Migration):
    dependencies = [
        ("privacy", "0004_chat_import_learning"),
        ("sessions_app", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="chatimportjob",
            name="source",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.RunPython(source_from_plan, migrations.RunPython.noop),
    ]
