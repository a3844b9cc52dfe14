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

# --- the CJK gram index (migration 0011) ----------------------------------------------------
# Chinese is written without spaces and most of its words have two characters, fewer than a
# trigram. Every message with CJK text is indexed as its CJK *grams*: for each CJK character
# the pair it starts (a bigram), or the character alone where the run of CJK ends. "部署到生产"
# gives 部署 署到 到生 生产 产. The rest of the text stays as it is, so the Latin words of such
# a message are in this index too ("把Kafka部署" is one word to unicode61, here it is 把
# kafka 部署 署). A 2-character word is one token, a longer one the AND of its bigrams, a
# single character a prefix; the search rechecks the exact substring on the candidates
# (see search/backends.py). SQLite builds the grams in plain SQL (no CTE is allowed in a
# trigger): a helper table of positions cuts the text into 64-character chunks (substr()
# walks UTF-8 from the start, so one pass per character would cost the square of the
# length) and each chunk into characters, in order ("LIMIT -1" keeps SQLite from
# flattening the chunks into the outer join, which would cut each chunk again for every
# character). Only the first CJK_CHARS characters are indexed (tool output: TOOL_TEXT's
# 8,192); messages without CJK are not in this index at all.

CJK_CHARS = 65536
CJK_CHUNK = 64
# Code points: kana, CJK extension A + unified ideographs, hangul, compatibility
# ideographs, extension B (CJK punctuation is not a word character and is left out).
CJK_CODE_RANGES = (
    (0x3040, 0x30FF),
    (0x3400, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2A6DF),
)
CJK_CLASS = "[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_CODE_RANGES) + "]"


def _is_cjk_sql(code: str) -> str:
    return "(" + " OR ".join(f"{code} BETWEEN {lo} AND {hi}" for lo, hi in CJK_CODE_RANGES) + ")"


def _sqlite_grams(text: str) -> str:
    """A scalar subquery: `text` (an SQL expression) with each CJK character replaced by
    its gram between spaces; everything else as it was, in order."""
    here = "unicode(substr(ch.s, p.n, 1))"
    after = "unicode(substr(ch.s, p.n + 1, 1))"
    return f"""(SELECT group_concat(CASE WHEN {_is_cjk_sql(here)}
            THEN ' ' || substr(ch.s, p.n, CASE WHEN {_is_cjk_sql(after)} THEN 2 ELSE 1 END) || ' '
            ELSE substr(ch.s, p.n, 1) END, '')
        FROM (SELECT substr({text}, k.n * {CJK_CHUNK} - {CJK_CHUNK - 1}, {CJK_CHUNK + 1}) AS s
              FROM messages_fts_positions k
              WHERE k.n <= (min(length({text}), {CJK_CHARS}) + {CJK_CHUNK - 1}) / {CJK_CHUNK}
              LIMIT -1) ch
        JOIN messages_fts_positions p ON p.n <= min({CJK_CHUNK}, length(ch.s)))"""


def _sqlite_has_cjk(text: str) -> str:
    return f"{text} GLOB '*{CJK_CLASS}*'"


SQLITE_CJK_FORWARD = [
    "CREATE TABLE IF NOT EXISTS messages_fts_positions (n INTEGER PRIMARY KEY)",
    f"""WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {CJK_CHARS // CJK_CHUNK})
        INSERT OR IGNORE INTO messages_fts_positions(n) SELECT n FROM r""",
    # Contentless: the grams are never shown (snippets come from the message text).
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_cjk USING fts5(
        grams, content='', tokenize='unicode61')""",
    f"""CREATE TRIGGER IF NOT EXISTS messages_fts_cjk_insert AFTER INSERT ON {MESSAGE}
        WHEN {_sqlite_has_cjk(_projection("new"))} BEGIN
        INSERT INTO messages_fts_cjk(rowid, grams)
            VALUES (new.id, {_sqlite_grams(_projection("new"))});
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS messages_fts_cjk_delete AFTER DELETE ON {MESSAGE}
        WHEN {_sqlite_has_cjk(_projection("old"))} BEGIN
        INSERT INTO messages_fts_cjk(messages_fts_cjk, rowid, grams)
            VALUES ('delete', old.id, {_sqlite_grams(_projection("old"))});
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS messages_fts_cjk_update AFTER UPDATE OF content, role
        ON {MESSAGE}
        WHEN old.content IS NOT new.content OR old.role IS NOT new.role
    BEGIN
        INSERT INTO messages_fts_cjk(messages_fts_cjk, rowid, grams)
            SELECT 'delete', old.id, {_sqlite_grams(_projection("old"))}
            WHERE {_sqlite_has_cjk(_projection("old"))};
        INSERT INTO messages_fts_cjk(rowid, grams)
            SELECT new.id, {_sqlite_grams(_projection("new"))}
            WHERE {_sqlite_has_cjk(_projection("new"))};
    END""",
    # The rows already there (a database migrated with data in it).
    "INSERT INTO messages_fts_cjk(messages_fts_cjk) VALUES ('delete-all')",
    f"""INSERT INTO messages_fts_cjk(rowid, grams)
        SELECT m.id, {_sqlite_grams(_projection("m"))} FROM {MESSAGE} m
        WHERE {_sqlite_has_cjk(_projection("m"))}""",
]
SQLITE_CJK_REVERSE = [
    "DROP TRIGGER IF EXISTS messages_fts_cjk_update",
    "DROP TRIGGER IF EXISTS messages_fts_cjk_delete",
    "DROP TRIGGER IF EXISTS messages_fts_cjk_insert",
    "DROP TABLE IF EXISTS messages_fts_cjk",
    "DROP TABLE IF EXISTS messages_fts_positions",
]

#: Every message-table FTS object as of now: what a migration that makes SQLite rebuild the
#: message table drops first (SQLITE_REVERSE) and re-creates afterwards (SQLITE_FORWARD).
SQLITE_FORWARD = SQLITE_WORDS_FORWARD + SQLITE_STEM_FORWARD + SQLITE_CJK_FORWARD
SQLITE_REVERSE = SQLITE_CJK_REVERSE + SQLITE_STEM_REVERSE + SQLITE_WORDS_REVERSE

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
# PostgreSQL: the same grams (string_to_array splits into characters in one pass) in a
# stored 'simple' tsvector, NULL for messages without CJK, with a GIN index.
_PG_IS_CJK = _is_cjk_sql("ascii({c})")
POSTGRES_CJK_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION hermes_cjk_grams(body text) RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT string_agg(CASE WHEN NOT {_PG_IS_CJK.format(c="c")} THEN c
                               WHEN {_PG_IS_CJK.format(c="nx")} THEN ' ' || c || nx || ' '
                               ELSE ' ' || c || ' ' END, '' ORDER BY i)
        FROM (SELECT c, i, lead(c) OVER (ORDER BY i) AS nx
              FROM unnest(string_to_array(left(body, {CJK_CHARS}), NULL))
                   WITH ORDINALITY AS t(c, i)) x
    $$""",
    f"""ALTER TABLE {MESSAGE} ADD COLUMN IF NOT EXISTS cjk_vector tsvector
        GENERATED ALWAYS AS (CASE WHEN content ~ '{CJK_CLASS}' THEN to_tsvector('simple'::regconfig,
            hermes_cjk_grams(CASE WHEN role = 'tool' THEN left(content, 8192) ELSE content END))
        END) STORED""",
    f"CREATE INDEX IF NOT EXISTS message_cjk_vector_idx ON {MESSAGE} USING GIN (cjk_vector)",
]
POSTGRES_CJK_REVERSE = [
    "DROP INDEX IF EXISTS message_cjk_vector_idx",
    f"ALTER TABLE {MESSAGE} DROP COLUMN IF EXISTS cjk_vector",
    "DROP FUNCTION IF EXISTS hermes_cjk_grams(text)",
]

#: Every PostgreSQL search object as of now (the benchmark drops and builds them all).
POSTGRES_FORWARD = POSTGRES_WORDS_FORWARD + POSTGRES_STEM_FORWARD + POSTGRES_CJK_FORWARD
POSTGRES_REVERSE = POSTGRES_CJK_REVERSE + POSTGRES_STEM_REVERSE + POSTGRES_WORDS_REVERSE


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
