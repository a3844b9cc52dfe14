"""A trigger that releases a memory entry's references when the entry row is deleted:
its snapshot links go and its audit events keep their text but lose the link (what
Django's collector does for `SessionMemorySnapshot.entries` and `MemoryEvent.entry`,
SET_NULL). The write path deletes entries with one DELETE and relies on it."""

from django.db import migrations

from sessions_app.migrations._fts_sql import VendorRunSQL

SQLITE_FORWARD = [
    """
    CREATE TRIGGER memory_entry_release BEFORE DELETE ON memory_memoryentry
    BEGIN
        DELETE FROM memory_sessionmemorysnapshot_entries WHERE memoryentry_id = OLD.id;
        UPDATE memory_memoryevent SET entry_id = NULL WHERE entry_id = OLD.id;
    END
    """,
]
SQLITE_REVERSE = ["DROP TRIGGER IF EXISTS memory_entry_release"]

POSTGRES_FORWARD = [
    """
    CREATE FUNCTION memory_entry_release() RETURNS trigger AS $$
    BEGIN
        DELETE FROM memory_sessionmemorysnapshot_entries WHERE memoryentry_id = OLD.id;
        UPDATE memory_memoryevent SET entry_id = NULL WHERE entry_id = OLD.id;
        RETURN OLD;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER memory_entry_release BEFORE DELETE ON memory_memoryentry
    FOR EACH ROW EXECUTE FUNCTION memory_entry_release()
    """,
]
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS memory_entry_release ON memory_memoryentry",
    "DROP FUNCTION IF EXISTS memory_entry_release()",
]


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0003_mcp_source"),
    ]

    operations = [
        VendorRunSQL("sqlite", SQLITE_FORWARD, SQLITE_REVERSE),
        VendorRunSQL("postgresql", POSTGRES_FORWARD, POSTGRES_REVERSE),
    ]
