"""Stemmed full-text search beside the exact index, and searchable conversation titles.

SQLite: `messages_fts_stem` (FTS5 `porter unicode61`, same source view and projection as
`messages_fts`) with its own triggers, and `sessions_title_fts` (porter) over session titles
keyed by the session table's rowid. PostgreSQL: a stored `stem_vector` tsvector ('english')
with a GIN index, and a GIN expression index over `to_tsvector('english', title)`.

Both build from the rows already there (FTS5 'rebuild' / a stored generated column) and
reverse by dropping what they added; the exact indexes are untouched.
"""

from django.db import migrations

from ._fts_sql import (
    POSTGRES_STEM_FORWARD,
    POSTGRES_STEM_REVERSE,
    SQLITE_STEM_FORWARD,
    SQLITE_STEM_REVERSE,
    SQLITE_TITLE_FORWARD,
    SQLITE_TITLE_REVERSE,
    VendorRunSQL,
)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0009_session_and_summary_leases")]

    operations = [
        VendorRunSQL("sqlite", SQLITE_STEM_FORWARD, SQLITE_STEM_REVERSE),
        VendorRunSQL("sqlite", SQLITE_TITLE_FORWARD, SQLITE_TITLE_REVERSE),
        VendorRunSQL("postgresql", POSTGRES_STEM_FORWARD, POSTGRES_STEM_REVERSE),
    ]
