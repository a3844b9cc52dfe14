from django.db import migrations, models

from ._fts_sql import SQLITE_WORDS_FORWARD, SQLITE_WORDS_REVERSE, VendorRunSQL


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0004_search_summary"),
    ]

    # SQLite rebuilds the message table to add `kind`; the FTS views and triggers are
    # dropped around the rebuild and re-created (and re-indexed) afterwards.
    operations = [
        VendorRunSQL("sqlite", SQLITE_WORDS_REVERSE, SQLITE_WORDS_FORWARD),
        migrations.AddField(
            model_name="message",
            name="kind",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "Regular"),
                    ("summary", "Compression summary"),
                    ("carried", "Carried over from the previous part"),
                ],
                default="",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="session",
            name="compression_cooldown_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="compression_failure_error",
            field=models.CharField(blank=True, default="", max_length=300),
        ),
        VendorRunSQL("sqlite", SQLITE_WORDS_FORWARD, SQLITE_WORDS_REVERSE),
    ]
