"""A job's error is kept as JSON (core.exceptions.stored): a message marked for translation
with its values, shown in the language of whoever reads it. The text written before stays as
it was (a JSON string). Through a text column, so each database converts valid JSON."""

import json

from django.db import migrations, models


def _as_json(apps, schema_editor):
    for name in ("ExportJob", "ChatImportJob"):
        model = apps.get_model("privacy", name)
        for pk, error in model.objects.values_list("pk", "error"):
            model.objects.filter(pk=pk).update(error=json.dumps(error or ""))


def _english(value):
    if not isinstance(value, dict):
        return str(value or "")
    if "values" not in value:
        return value.get("text", "")
    values = {k: _english(v) if isinstance(v, dict) else v for k, v in value["values"].items()}
    return value.get("text", "") % values


def _as_text(apps, schema_editor):
    for name in ("ExportJob", "ChatImportJob"):
        model = apps.get_model("privacy", name)
        for pk, error in model.objects.values_list("pk", "error"):
            text = _english(json.loads(error)) if error else ""
            model.objects.filter(pk=pk).update(error=text[:300])


class Migration(migrations.Migration):
    dependencies = [
        ("privacy", "0006_translated_names"),
    ]

    operations = [
        migrations.AlterField(
            model_name="exportjob",
            name="error",
            field=models.TextField(blank=True, default="", verbose_name="error"),
        ),
        migrations.AlterField(
            model_name="chatimportjob",
            name="error",
            field=models.TextField(blank=True, default="", verbose_name="error"),
        ),
        migrations.RunPython(_as_json, _as_text),
        migrations.AlterField(
            model_name="exportjob",
            name="error",
            field=models.JSONField(blank=True, default=str, verbose_name="error"),
        ),
        migrations.AlterField(
            model_name="chatimportjob",
            name="error",
            field=models.JSONField(blank=True, default=str, verbose_name="error"),
        ),
    ]
