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


SQLITE_WORDS_FORWARD = [
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
SQLITE_WORDS_REVERSE = [
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
POSTGRES_WORDS_FORWARD = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    f"""ALTER TABLE {MESSAGE} ADD COLUMN search_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, {POSTGRES_TEXT})) STORED""",
    f"CREATE INDEX message_search_vector_idx ON {MESSAGE} USING GIN (search_vector)",
    f"""CREATE INDEX message_content_trgm_idx ON {MESSAGE}
        USING GIN (content gin_trgm_ops) WHERE role <> 'tool'""",
]
POSTGRES_WORDS_REVERSE = [
    "DROP INDEX IF EXISTS message_content_trgm_idx",
    "DROP INDEX IF EXISTS message_search_vector_idx",
    f"ALTER TABLE {MESSAGE} DROP COLUMN IF EXISTS search_vector",
]


# --- the stemmed index and the title index (migration 0007) --------------------------------
# Written with IF [NOT] EXISTS so that a migration wrapping a message-table rebuild in
# SQLITE_REVERSE / SQLITE_FORWARD (below) may run before or after the one that adds them.

SQLITE_STEM_FORWARD = [
    # Same source view as messages_fts: the porter stemmer over unicode61 tokens, so
    # "camped" meets "camping". English-only; the exact index stays beside it.
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_stem USING fts5(
        content, tool_name, tool_calls,
        content='messages_fts_src', content_rowid='id', tokenize='porter unicode61')""",
    f"""CREATE TRIGGER IF NOT EXISTS messages_fts_stem_insert AFTER INSERT ON {MESSAGE} BEGIN
        INSERT INTO messages_fts_stem(rowid, content, tool_name, tool_calls)
            VALUES (new.id, {_projection("new")}, new.tool_name, new.tool_calls);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS messages_fts_stem_delete AFTER DELETE ON {MESSAGE} BEGIN
        INSERT INTO messages_fts_stem(messages_fts_stem, rowid, content, tool_name, tool_calls)
            VALUES ('delete', old.id, {_projection("old")}, old.tool_name, old.tool_calls);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS messages_fts_stem_update
        AFTER UPDATE OF content, tool_name, tool_calls, role ON {MESSAGE}
        WHEN old.content IS NOT new.content OR old.tool_name IS NOT new.tool_name
          OR old.tool_calls IS NOT new.tool_calls OR old.role IS NOT new.role
    BEGIN
        INSERT INTO messages_fts_stem(messages_fts_stem, rowid, content, tool_name, tool_calls)
            VALUES ('delete', old.id, {_projection("old")}, old.tool_name, old.tool_calls);
        INSERT INTO messages_fts_stem(rowid, content, tool_name, tool_calls)
            VALUES (new.id, {_projection("new")}, new.tool_name, new.tool_calls);
    END""",
    "INSERT INTO messages_fts_stem(messages_fts_stem) VALUES ('rebuild')",
]
SQLITE_STEM_REVERSE = [
    "DROP TRIGGER IF EXISTS messages_fts_stem_update",
    "DROP TRIGGER IF EXISTS messages_fts_stem_delete",
    "DROP TRIGGER IF EXISTS messages_fts_stem_insert",
    "DROP TABLE IF EXISTS messages_fts_stem",
]

#: Every message-table FTS object as of now: what a migration that makes SQLite rebuild the
#: message table drops first (SQLITE_REVERSE) and re-creates afterwards (SQLITE_FORWARD).
SQLITE_FORWARD = SQLITE_WORDS_FORWARD + SQLITE_STEM_FORWARD
SQLITE_REVERSE = SQLITE_STEM_REVERSE + SQLITE_WORDS_REVERSE

SESSION = "sessions_app_session"
# Conversation titles, exact and stemmed in one table (two columns would double the
# triggers for nothing: titles are short). Keyed by the session table's rowid; a migration
# that makes SQLite rebuild the session table must wrap itself in these two lists too.
SQLITE_TITLE_FORWARD = [
    """CREATE VIRTUAL TABLE IF NOT EXISTS sessions_title_fts USING fts5(
        title, tokenize='porter unicode61')""",
    f"""CREATE TRIGGER IF NOT EXISTS sessions_title_fts_insert AFTER INSERT ON {SESSION}
        WHEN new.title IS NOT NULL BEGIN
        INSERT INTO sessions_title_fts(rowid, title) VALUES (new.rowid, new.title);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS sessions_title_fts_delete AFTER DELETE ON {SESSION} BEGIN
        DELETE FROM sessions_title_fts WHERE rowid = old.rowid;
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS sessions_title_fts_update AFTER UPDATE OF title ON {SESSION}
        WHEN old.title IS NOT new.title BEGIN
        DELETE FROM sessions_title_fts WHERE rowid = old.rowid;
        INSERT INTO sessions_title_fts(rowid, title)
            SELECT new.rowid, new.title WHERE new.title IS NOT NULL;
    END""",
    "DELETE FROM sessions_title_fts",
    f"""INSERT INTO sessions_title_fts(rowid, title)
        SELECT rowid, title FROM {SESSION} WHERE title IS NOT NULL""",
]
SQLITE_TITLE_REVERSE = [
    "DROP TRIGGER IF EXISTS sessions_title_fts_update",
    "DROP TRIGGER IF EXISTS sessions_title_fts_delete",
    "DROP TRIGGER IF EXISTS sessions_title_fts_insert",
    "DROP TABLE IF EXISTS sessions_title_fts",
]

# PostgreSQL: a second stored tsvector with the 'english' configuration (stems, stop words)
# beside the exact 'simple' one, and an expression index over titles.
POSTGRES_STEM_FORWARD = [
    f"""ALTER TABLE {MESSAGE} ADD COLUMN IF NOT EXISTS stem_vector tsvector
        GENERATED ALWAYS AS (to_tsvector('english'::regconfig, {POSTGRES_TEXT})) STORED""",
    f"CREATE INDEX IF NOT EXISTS message_stem_vector_idx ON {MESSAGE} USING GIN (stem_vector)",
    f"""CREATE INDEX IF NOT EXISTS session_title_search_idx ON {SESSION}
        USING GIN (to_tsvector('english'::regconfig, coalesce(title, '')))""",
]
POSTGRES_STEM_REVERSE = [
    "DROP INDEX IF EXISTS session_title_search_idx",
    "DROP INDEX IF EXISTS message_stem_vector_idx",
    f"ALTER TABLE {MESSAGE} DROP COLUMN IF EXISTS stem_vector",
]
#: Every PostgreSQL search object as of now (the benchmark drops and builds them all).
POSTGRES_FORWARD = POSTGRES_WORDS_FORWARD + POSTGRES_STEM_FORWARD
POSTGRES_REVERSE = POSTGRES_STEM_REVERSE + POSTGRES_WORDS_REVERSE


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
