"""Hermes' state.db: its schema (SCHEMA_VERSION 30, FTS storage layout 3), conversions
between its REAL unix-second timestamps and our datetimes, and a read-only opener.

The export writes a state.db with this schema so the Hermes CLI opens it like its own
(`hermes sessions list`, search); the import reads state.db files written by Hermes or by
us. Only the tables that carry conversations are written: Hermes creates its operational
tables (gateway routing, leases, heartbeats…) with CREATE TABLE IF NOT EXISTS on open.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.utils.translation import gettext_lazy

from core.exceptions import Text, english, lazy_format

SCHEMA_VERSION = 30
FTS_STORAGE_VERSION = 3
#: Tool results are indexed up to this many characters (Hermes' FTS projection).
FTS_TOOL_PREFIX_CHARS = 8192

_TABLES = """
CREATE TABLE schema_version (version INTEGER NOT NULL);

CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);

CREATE TABLE system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    created_source TEXT,
    user_id TEXT,
    session_key TEXT,
    chat_id TEXT,
    chat_type TEXT,
    thread_id TEXT,
    display_name TEXT,
    origin_json TEXT,
    expiry_finalized INTEGER DEFAULT 0,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    system_prompt_hash TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    cwd TEXT,
    git_branch TEXT,
    git_repo_root TEXT,
    git_metadata_generation INTEGER NOT NULL DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    title_source TEXT,
    last_activity_at REAL,
    last_activity_description TEXT,
    last_activity_provenance TEXT,
    api_call_count INTEGER DEFAULT 0,
    handoff_state TEXT,
    handoff_platform TEXT,
    handoff_error TEXT,
    compression_failure_cooldown_until REAL,
    compression_failure_error TEXT,
    compression_fallback_streak INTEGER NOT NULL DEFAULT 0,
    compression_ineffective_count INTEGER NOT NULL DEFAULT 0,
    compression_recovery_deadline REAL,
    compression_overload_streak INTEGER NOT NULL DEFAULT 0,
    profile_name TEXT,
    transport_profile TEXT,
    rewind_count INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0,
    pinned INTEGER NOT NULL DEFAULT 0,
    hidden INTEGER NOT NULL DEFAULT 0,
    last_read_at REAL,
    tool_names TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id),
    FOREIGN KEY (system_prompt_hash) REFERENCES system_prompts(hash)
);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    effect_disposition TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT,
    codex_message_items TEXT,
    platform_message_id TEXT,
    observed INTEGER DEFAULT 0,
    _compressed_summary INTEGER NOT NULL DEFAULT 0,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    api_content TEXT,
    display_kind TEXT,
    display_metadata TEXT,
    display_identity BLOB,
    display_order INTEGER
);

CREATE TABLE session_model_usage (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    billing_provider TEXT NOT NULL DEFAULT '',
    billing_base_url TEXT NOT NULL DEFAULT '',
    billing_mode TEXT NOT NULL DEFAULT '',
    task TEXT NOT NULL DEFAULT '',
    api_call_count INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    estimated_cost_usd REAL NOT NULL DEFAULT 0,
    actual_cost_usd REAL NOT NULL DEFAULT 0,
    cost_status TEXT,
    cost_source TEXT,
    first_seen REAL,
    last_seen REAL,
    PRIMARY KEY (session_id, model, billing_provider, billing_base_url, billing_mode, task)
);

CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_source_id ON sessions(source, id);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX idx_messages_session_id ON messages(session_id, id);
CREATE INDEX idx_messages_assistant_calls_by_session ON messages(session_id)
    WHERE role = 'assistant' AND tool_calls IS NOT NULL;
CREATE INDEX idx_messages_session_active ON messages(session_id, active, timestamp);
CREATE INDEX idx_session_model_usage_session ON session_model_usage(session_id);
CREATE INDEX idx_session_model_usage_model ON session_model_usage(model);
"""


def _gate(row: str, prefix: str) -> str:
    # Hermes' chunked-rebuild gate: always true while the two state_meta keys are absent.
    def key(name: str) -> str:
        return (
            f"COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta "  # noqa: S608
            f"WHERE key = '{prefix}_{name}'), -1)"
        )

    return f"({row}.id > {key('high_water')} OR {row}.id <= {key('progress')})"


def _indexed(row: str) -> str:
    return (
        f"CASE WHEN {row}.role = 'tool' THEN substr(COALESCE({row}.content, ''), 1, "
        f"{FTS_TOOL_PREFIX_CHARS}) ELSE {row}.content END"
    )


_FTS_TEMPLATE = """
CREATE VIEW messages_fts_src AS
    SELECT id, @IDX_MESSAGES@ AS content, tool_name, tool_calls FROM messages;

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, tool_name, tool_calls,
    content='messages_fts_src', content_rowid='id', tokenize='unicode61'
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
WHEN @GATE_NEW@
BEGIN
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
    VALUES (new.id, @IDX_NEW@, new.tool_name, new.tool_calls);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN @GATE_OLD@
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, @IDX_OLD@, old.tool_name, old.tool_calls);
END;

CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_name, tool_calls, role
ON messages
WHEN (old.content IS NOT new.content OR old.tool_name IS NOT new.tool_name
      OR old.tool_calls IS NOT new.tool_calls OR old.role IS NOT new.role)
  AND @GATE_OLD@
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, @IDX_OLD@, old.tool_name, old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
    VALUES (new.id, @IDX_NEW@, new.tool_name, new.tool_calls);
END;

CREATE VIEW messages_fts_trigram_src AS
    SELECT m.id AS id, m.content AS content, m.tool_name AS tool_name
    FROM messages m JOIN sessions s ON s.id = m.session_id
    WHERE m.role <> 'tool' AND COALESCE(s.source, '') NOT IN ('cron', 'subagent')
      AND json_extract(CASE WHEN json_valid(s.model_config) THEN s.model_config
                            ELSE json_object() END, '$._delegate_from') IS NULL;

CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(
    content, tool_name,
    content='messages_fts_trigram_src', content_rowid='id', tokenize='trigram'
);
"""

# The trigram index covers what its view shows; a trigger mirrors the view's filter.
_TRIGRAM_ELIGIBLE = """{row}.role <> 'tool' AND EXISTS (
        SELECT 1 FROM sessions s WHERE s.id = {row}.session_id
          AND COALESCE(s.source, '') NOT IN ('cron', 'subagent')
          AND json_extract(CASE WHEN json_valid(s.model_config) THEN s.model_config
                                ELSE json_object() END, '$._delegate_from') IS NULL)"""

_TRIGRAM_TEMPLATE = """
CREATE TRIGGER messages_fts_trigram_insert AFTER INSERT ON messages
WHEN @ELIG_NEW@ AND @GATE_NEW@
BEGIN
    INSERT INTO messages_fts_trigram(rowid, content, tool_name)
    VALUES (new.id, new.content, new.tool_name);
END;

CREATE TRIGGER messages_fts_trigram_delete AFTER DELETE ON messages
WHEN @ELIG_OLD@ AND @GATE_OLD@
BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name)
    VALUES ('delete', old.id, old.content, old.tool_name);
END;

CREATE TRIGGER messages_fts_trigram_update AFTER UPDATE OF content, tool_name, role
ON messages
WHEN (old.content IS NOT new.content OR old.tool_name IS NOT new.tool_name
      OR old.role IS NOT new.role) AND @GATE_OLD@
BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name)
    SELECT 'delete', old.id, old.content, old.tool_name
    WHERE @ELIG_OLD@;
    INSERT INTO messages_fts_trigram(rowid, content, tool_name)
    SELECT new.id, new.content, new.tool_name
    WHERE @ELIG_NEW@;
END;
"""


def _fill(template: str) -> str:
    """Schema text from constants only (str.replace: no user input ever reaches it)."""
    parts = {
        "@IDX_MESSAGES@": _indexed("messages"),
        "@IDX_NEW@": _indexed("new"),
        "@IDX_OLD@": _indexed("old"),
        "@GATE_NEW@": _gate("new", "fts_rebuild"),
        "@GATE_OLD@": _gate("old", "fts_rebuild"),
        "@ELIG_NEW@": _TRIGRAM_ELIGIBLE.replace("{row}", "new"),
        "@ELIG_OLD@": _TRIGRAM_ELIGIBLE.replace("{row}", "old"),
    }
    for key, value in parts.items():
        template = template.replace(key, value)
    return template


_FTS = _fill(_FTS_TEMPLATE)
_TRIGRAM_TRIGGERS = _fill(_TRIGRAM_TEMPLATE)


# Hermes Web's own columns, in side tables Hermes never reads (it only creates and reads
# its own tables), so an export re-imported here loses nothing Hermes has no column for.
_SIDE_TABLES = """
CREATE TABLE hermes_web_sessions (
    id TEXT PRIMARY KEY REFERENCES sessions(id),
    temporary INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE hermes_web_messages (
    id INTEGER PRIMARY KEY REFERENCES messages(id),
    kind TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT '',
    context_block TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd TEXT NOT NULL DEFAULT '0'
);
CREATE TABLE hermes_web_profile (key TEXT PRIMARY KEY, value TEXT);
"""
SIDE_TABLES = ("hermes_web_sessions", "hermes_web_messages", "hermes_web_profile")


def create_schema(conn: sqlite3.Connection) -> None:
    """Create an empty state.db schema (tables, indexes, FTS5 indexes and their triggers)
    on a fresh connection."""
    conn.executescript(_TABLES)
    conn.executescript(_FTS)
    conn.executescript(_TRIGRAM_TRIGGERS)
    conn.executescript(_SIDE_TABLES)
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
    conn.execute(
        "INSERT INTO state_meta (key, value) VALUES ('fts_storage_version', ?)",
        (str(FTS_STORAGE_VERSION),),
    )


# --- conversions ------------------------------------------------------------------------


def to_epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def from_epoch(value: Any) -> datetime | None:
    """A REAL unix timestamp as an aware UTC datetime; None for NULL or nonsense."""
    if value is None or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def json_text(value: Any) -> str | None:
    """A JSON column value (None stays NULL)."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False)


def parse_json(value: Any) -> Any:
    """A JSON TEXT column as Python; undecodable text comes back as None."""
    if value is None or value == "":
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return None


# --- reading ----------------------------------------------------------------------------


#: The tables an import reads. Each must hold stored values only (see `refuse_computed`).
READ_TABLES = ("sessions", "messages", "system_prompts", *SIDE_TABLES)
#: The longest single value SQLite may hand over while importing: a stored value past it
#: fails its conversation instead of filling the server's memory.
READ_LIMIT_BYTES = 32 * 1024 * 1024


class RefusedDatabase(Exception):
    """A foreign state.db that could compute what the import reads (generated columns, or a
    view or virtual table where a table belongs); `text` says why, marked for translation."""

    def __init__(self, text: Text) -> None:
        super().__init__(english(text))
        self.text = text


def open_copy(path: Path, workdir: Path) -> sqlite3.Connection:
    """Open a copy of the state.db at `path` (with its -wal, so committed writes a running
    Hermes has not checkpointed yet are included) made in `workdir`; the original is never
    opened, locked or written. The copy is opened read-only and immutable, so no trigger can
    fire, and with SQLite's value length limit lowered to READ_LIMIT_BYTES."""
    target = workdir / "state.db"
    shutil.copyfile(path, target)
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, workdir / "state.db-wal")
        # Fold the WAL into the copy: an immutable connection does not read it. A checkpoint
        # copies pages; it runs none of the database's SQL.
        fold = sqlite3.connect(target)
        try:
            fold.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            fold.execute("PRAGMA journal_mode=DELETE")
        finally:
            fold.close()
    conn = sqlite3.connect(f"{target.as_uri()}?mode=ro&immutable=1", uri=True)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, READ_LIMIT_BYTES)
    conn.row_factory = sqlite3.Row
    return conn


def refuse_computed(conn: sqlite3.Connection) -> None:
    """Raise RefusedDatabase if reading a table of READ_TABLES could run an expression: a
    generated column (`content AS (hex(zeroblob(1e9)))` turns a 600-byte file into
    gigabytes), or a view or virtual table under one of those names. Triggers and views
    elsewhere in the file are Hermes' own search machinery; reading never fires or uses them."""
    for table in READ_TABLES:
        row = conn.execute(
            "SELECT type, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE", (table,)
        ).fetchone()
        if row is None:
            continue
        kind, sql = row[0], (row[1] or "").lstrip().upper()
        if kind != "table" or sql.startswith("CREATE VIRTUAL"):
            if kind == "table":
                why = gettext_lazy("'%(table)s' is a virtual table, not a stored table")
            else:
                why = gettext_lazy("'%(table)s' is a %(kind)s, not a stored table")
            raise RefusedDatabase(lazy_format(why, table=table, kind=kind))
        # hidden: 0 stored, 1 virtual-table hidden column, 2 / 3 generated (virtual / stored).
        for column in conn.execute(f'PRAGMA table_xinfo("{table}")'):  # noqa: S608 - constants
            if column[6] in (2, 3):
                raise RefusedDatabase(
                    lazy_format(
                        gettext_lazy("'%(column)s' is a generated column (computed when read)"),
                        column=f"{table}.{column[1]}",
                    )
                )


def has_table(conn: sqlite3.Connection, table: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return row is not None


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """Stored columns only (`table_info` leaves generated ones out), in table order."""
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]  # noqa: S608
