"""SQL for the message full-text indexes, shared by the migrations that create them and by
those that must drop and re-create them around a rebuild of the message table (SQLite
rebuilds a table to add most columns, and the views/triggers would block the rename).

The leading underscore keeps Django's migration loader from treating this as a migration.
"""

from django.db import migrations

MESSAGE = "sessions_app_message"
TOOL_TEXT = "CASE WHEN {r}.role = 'tool' THEN substr({r}.content, 1, 8192) ELSE {r}.content END"


def _projection(row: str) -> str:
    return TOOL_TEXT.format(r=row)


SQLITE_FORWARD = [
    f"""CREATE VIEW messages_fts_src AS
        SELECT m.id AS id, {_projection("m")} AS content, m.tool_name AS tool_name,
               m.tool_calls AS tool_calls
        FROM {MESSAGE} m""",
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, tool_name, tool_calls,
        content='messages_fts_src', content_rowid='id', tokenize='unicode61')""",
    f"""CREATE VIEW messages_fts_trigram_src AS
        SELECT m.id AS id, m.content AS content, m.tool_name AS tool_name
        FROM {MESSAGE} m WHERE m.role <> 'tool'""",
    """CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(
        content, tool_name,
        content='messages_fts_trigram_src', content_rowid='id', tokenize='trigram')""",
    f"""CREATE TRIGGER messages_fts_insert AFTER INSERT ON {MESSAGE} BEGIN
        INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
            VALUES (new.id, {_projection("new")}, new.tool_name, new.tool_calls);
        INSERT INTO messages_fts_trigram(rowid, content, tool_name)
            SELECT new.id, new.content, new.tool_name WHERE new.role <> 'tool';
    END""",
    f"""CREATE TRIGGER messages_fts_delete AFTER DELETE ON {MESSAGE} BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
            VALUES ('delete', old.id, {_projection("old")}, old.tool_name, old.tool_calls);
        INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name)
            SELECT 'delete', old.id, old.content, old.tool_name WHERE old.role <> 'tool';
    END""",
    f"""CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_name, tool_calls, role
        ON {MESSAGE}
        WHEN old.content IS NOT new.content OR old.tool_name IS NOT new.tool_name
          OR old.tool_calls IS NOT new.tool_calls OR old.role IS NOT new.role
    BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
            VALUES ('delete', old.id, {_projection("old")}, old.tool_name, old.tool_calls);
        INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
            VALUES (new.id, {_projection("new")}, new.tool_name, new.tool_calls);
        INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name)
            SELECT 'delete', old.id, old.content, old.tool_name WHERE old.role <> 'tool';
        INSERT INTO messages_fts_trigram(rowid, content, tool_name)
            SELECT new.id, new.content, new.tool_name WHERE new.role <> 'tool';
    END""",
    # Index whatever rows already exist (a database migrated with data in it).
    "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
    "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('rebuild')",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS messages_fts_update",
    "DROP TRIGGER IF EXISTS messages_fts_delete",
    "DROP TRIGGER IF EXISTS messages_fts_insert",
    "DROP TABLE IF EXISTS messages_fts_trigram",
    "DROP VIEW IF EXISTS messages_fts_trigram_src",
    "DROP TABLE IF EXISTS messages_fts",
    "DROP VIEW IF EXISTS messages_fts_src",
]

POSTGRES_TEXT = (
    "coalesce(CASE WHEN role = 'tool' THEN left(content, 8192) ELSE content END, '')"
    " || ' ' || coalesce(tool_name, '') || ' ' || coalesce(tool_calls::text, '')"
)
POSTGRES_FORWARD = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    f"""ALTER TABLE {MESSAGE} ADD COLUMN search_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, {POSTGRES_TEXT})) STORED""",
    f"CREATE INDEX message_search_vector_idx ON {MESSAGE} USING GIN (search_vector)",
    f"""CREATE INDEX message_content_trgm_idx ON {MESSAGE}
        USING GIN (content gin_trgm_ops) WHERE role <> 'tool'""",
]
POSTGRES_REVERSE = [
    "DROP INDEX IF EXISTS message_content_trgm_idx",
    "DROP INDEX IF EXISTS message_search_vector_idx",
    f"ALTER TABLE {MESSAGE} DROP COLUMN IF EXISTS search_vector",
]


class VendorRunSQL(migrations.RunSQL):
    """RunSQL that only runs on one database vendor (both directions)."""

    def __init__(self, vendor: str, sql, reverse_sql, **kwargs):
        super().__init__(sql, reverse_sql, **kwargs)
        self.vendor = vendor

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        return name, [self.vendor, *args], kwargs

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == self.vendor:
            super().database_backwards(app_label, schema_editor, from_state, to_state)
