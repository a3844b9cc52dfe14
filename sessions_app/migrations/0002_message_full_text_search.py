"""Full-text indexes over messages, per database vendor.

SQLite: two external-content FTS5 tables keyed by message id — `messages_fts` (unicode61;
content + tool_name + tool_calls) and `messages_fts_trigram` (trigram; content + tool_name of
non-tool rows, for CJK and substrings) — kept in sync by triggers. Tool output is indexed
up to its first 8,192 characters, as Hermes does.

PostgreSQL: a stored tsvector column over the same text with a GIN index, and a pg_trgm
GIN index over non-tool content.
"""

from django.db import migrations

from ._fts_sql import (
    POSTGRES_WORDS_FORWARD,
    POSTGRES_WORDS_REVERSE,
    SQLITE_WORDS_FORWARD,
    SQLITE_WORDS_REVERSE,
    VendorRunSQL,
)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]

    operations = [
        VendorRunSQL("sqlite", SQLITE_WORDS_FORWARD, SQLITE_WORDS_REVERSE),
        VendorRunSQL("postgresql", POSTGRES_WORDS_FORWARD, POSTGRES_WORDS_REVERSE),
    ]
