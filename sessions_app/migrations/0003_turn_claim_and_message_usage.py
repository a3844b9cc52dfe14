from django.db import migrations, models

from ._fts_sql import SQLITE_WORDS_FORWARD, SQLITE_WORDS_REVERSE, VendorRunSQL


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0002_message_full_text_search"),
    ]

    # SQLite rebuilds the message table to add these columns; the FTS views and triggers
    # that reference it are dropped first and re-created (and re-indexed) afterwards.
    operations = [
        VendorRunSQL("sqlite", SQLITE_WORDS_REVERSE, SQLITE_WORDS_FORWARD),
        migrations.AddField(
            model_name="message",
            name="cached_tokens",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="message",
            name="completion_tokens",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="message",
            name="context_block",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="message",
            name="cost_usd",
            field=models.DecimalField(decimal_places=6, default=0, max_digits=12),
        ),
        migrations.AddField(
            model_name="message",
            name="model",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="message",
            name="prompt_tokens",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="message",
            name="reasoning_tokens",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="session",
            name="turn_started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="turn_token",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        VendorRunSQL("sqlite", SQLITE_WORDS_FORWARD, SQLITE_WORDS_REVERSE),
    ]
