"""Branches: messages form a tree (`parent`) with a selected path (`active`).

Existing conversations become one linear path: each message's parent is the message before
it in its session (by id), and every row is on the selected path. The SQL is the same on
SQLite and PostgreSQL. Reversing drops the tree, so the rows that are not on the selected
path (other branches) are deleted first: the schema before branches would read them as part
of the conversation.
"""

import django.db.models.deletion
from django.db import migrations, models

from ._fts_sql import SQLITE_WORDS_FORWARD, SQLITE_WORDS_REVERSE, VendorRunSQL

LINK_LINEAR = """
UPDATE sessions_app_message SET parent_id = (
    SELECT MAX(p.id) FROM sessions_app_message p
    WHERE p.session_id = sessions_app_message.session_id AND p.id < sessions_app_message.id
)
"""

DROP_OTHER_BRANCHES = "DELETE FROM sessions_app_message WHERE NOT active"

# PostgreSQL checks the new foreign key at commit; the schema change after the data change
# (this migration's next one forwards, the field removal backwards) needs it checked now.
CHECK_NOW = "SET CONSTRAINTS ALL IMMEDIATE"


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0007_session_model_switch_marker"),
    ]

    # SQLite rebuilds the message table to add the foreign key; the FTS views and triggers
    # are dropped around the rebuild and re-created (and re-indexed) afterwards.
    operations = [
        VendorRunSQL("sqlite", SQLITE_WORDS_REVERSE, SQLITE_WORDS_FORWARD),
        migrations.AddField(
            model_name="message",
            name="active",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="message",
            name="parent",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="sessions_app.message",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(fields=["session", "active", "id"], name="message_session_path_idx"),
        ),
        VendorRunSQL("postgresql", migrations.RunSQL.noop, CHECK_NOW),
        migrations.RunSQL(LINK_LINEAR, reverse_sql=DROP_OTHER_BRANCHES),
        VendorRunSQL("postgresql", CHECK_NOW, migrations.RunSQL.noop),
        VendorRunSQL("sqlite", SQLITE_WORDS_FORWARD, SQLITE_WORDS_REVERSE),
    ]
