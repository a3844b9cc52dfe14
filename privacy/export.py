"""The "Download my data" archive (GDPR Art. 15 access and Art. 20 portability).

One zip, laid out as a Hermes home so it can be unpacked into `~/.hermes` (or a profile
folder) and opened by the Hermes CLI, plus two files describing everything:

    manifest.json        schema version, generation time, counts, and the Art. 15
                         information sheet (purposes, categories, recipients — the
                         configured LLM endpoint —, retention, rights, sources), written
                         in the person's language (its keys stay English)
    export.json          everything the registry knows about the person: profile and
                         settings, conversations with every message and its usage, memory
                         entries with provenance, memory events, skills with files and
                         revisions, and every other registered table (inferences …)
    state.db             the conversations in Hermes' SQLite schema, with its FTS5 indexes
    memories/MEMORY.md   the agent's notes, entries joined by "\\n§\\n"
    memories/USER.md     what it knows about the person, same format
    SOUL.md              the person's agent identity, when they set one
    skills/[category/]name/SKILL.md (+ references/, templates/, scripts/, assets/)

The archive is written to a file in one pass over the database with bounded memory:
rows are streamed with `.iterator()`, export.json is written into the zip as it is
produced, and state.db is filled in the same pass.
"""

from __future__ import annotations

import io
import json
import sqlite3
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from django.utils.translation import get_language, gettext

from accounts.language import speaking_to
from core.privacy import registry
from core.privacy.serialize import json_value, row_dict

from . import statedb
from .information import information_sheet

SCHEMA_VERSION = 1
FORMAT = "hermes-web-export"

#: (percent 0–100, what is happening) — called now and then while the archive is built.
Progress = Callable[[int, str], None]

#: Sections written by their own code (nested rows), not by the generic registry loop.
_NESTED_SECTIONS = {"conversations", "skills"}
#: One-row sections: an object (or null) rather than a list.
_SINGLE_SECTIONS = {"profile", "membership"}


@dataclass
class ExportStats:
    conversations: int = 0
    messages: int = 0
    memory_entries: int = 0
    skills: int = 0
    sections: dict[str, int] = field(default_factory=dict)
    size: int = 0


def _noop(_pct: int, _stage: str) -> None:
    return None


# --- export.json ----------------------------------------------------------------------------


class _JsonWriter:
    """Writes one JSON document piece by piece (objects and lists of rows)."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.first: list[bool] = []

    def _sep(self) -> None:
        if self.first:
            if self.first[-1]:
                self.first[-1] = False
            else:
                self.fh.write(",")
        self.fh.write("\n")

    def open_object(self, key: str | None = None) -> None:
        self._key(key)
        self.fh.write("{")
        self.first.append(True)

    def close_object(self) -> None:
        self.first.pop()
        self.fh.write("\n}")

    def open_list(self, key: str | None = None) -> None:
        self._key(key)
        self.fh.write("[")
        self.first.append(True)

    def close_list(self) -> None:
        self.first.pop()
        self.fh.write("\n]")

    def _key(self, key: str | None) -> None:
        self._sep()
        if key is not None:
            self.fh.write(json.dumps(key) + ": ")

    def value(self, value: Any, key: str | None = None) -> None:
        self._key(key)
        self.fh.write(json.dumps(json_value(value), ensure_ascii=False))


def _account(user: AbstractBaseUser) -> dict[str, Any]:
    # The password hash is an authentication secret, not information about the person.
    return row_dict(user, exclude=("password",))


# --- conversations ----------------------------------------------------------------------


def _session_row(session: Any) -> tuple[Any, ...]:
    config = session.model_config or {}
    return (
        session.id,
        session.source or "web",
        session.model or None,
        statedb.json_text(config) if config else None,
        session.system_prompt_id,
        session.parent_id,
        statedb.to_epoch(session.started_at),
        statedb.to_epoch(session.ended_at),
        session.end_reason or None,
        session.message_count,
        session.tool_call_count,
        session.input_tokens,
        session.output_tokens,
        session.cache_read_tokens,
        session.cache_write_tokens,
        session.reasoning_tokens,
        float(session.estimated_cost_usd or 0),
        session.title,
        session.title_source or None,
        statedb.to_epoch(session.last_activity_at),
        session.api_call_count,
        int(session.archived),
        int(session.pinned),
        session.compression_failure_error or None,
        statedb.to_epoch(session.compression_cooldown_until),
    )


_SESSION_SQL = """INSERT INTO sessions (id, source, model, model_config, system_prompt_hash,
    parent_session_id, started_at, ended_at, end_reason, message_count, tool_call_count,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
    estimated_cost_usd, title, title_source, last_activity_at, api_call_count, archived,
    pinned, compression_failure_error, compression_failure_cooldown_until)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

_MESSAGE_SQL = """INSERT INTO messages (id, session_id, role, content, tool_call_id,
    tool_calls, tool_name, timestamp, token_count, finish_reason, reasoning,
    _compressed_summary, active, compacted)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"""

_SESSION_EXTRA_SQL = "INSERT INTO hermes_web_sessions (id, temporary) VALUES (?, ?)"
_MESSAGE_EXTRA_SQL = """INSERT INTO hermes_web_messages (id, kind, status, context_block,
    model, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_usd)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

_USAGE_SQL = """INSERT INTO session_model_usage (session_id, model, api_call_count,
    input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, estimated_cost_usd,
    cost_status, cost_source, first_seen, last_seen)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'estimated', 'hermes-web', ?, ?)"""


def _message_row(m: Any) -> tuple[Any, ...]:
    return (
        m.id,
        m.session_id,
        m.role,
        m.content,
        m.tool_call_id or None,
        statedb.json_text(m.tool_calls),
        m.tool_name or None,
        statedb.to_epoch(m.timestamp),
        m.token_count,
        m.finish_reason or None,
        m.reasoning or None,
        1 if m.kind == "summary" else 0,
        # Other branches (an edited message's original, earlier answers) are Hermes'
        # rewound rows: active 0, compacted 0. Hermes continues from the active ones.
        1 if m.active else 0,
    )


def _message_extra(m: Any) -> tuple[Any, ...]:
    return (
        m.id,
        m.kind,
        m.status,
        m.context_block,
        m.model,
        m.prompt_tokens,
        m.completion_tokens,
        m.cached_tokens,
        m.reasoning_tokens,
        str(m.cost_usd),
    )


def _sessions_with_messages(user: AbstractBaseUser) -> Iterator[tuple[Any, list[Any]]]:
    """Each of the user's sessions with its messages; memory holds one conversation at a
    time (a query per conversation: an archive is built once, in the background)."""
    from sessions_app.models import Message, Session

    sessions = Session.objects.filter(owner=user).order_by("started_at", "id")
    for session in sessions.iterator(chunk_size=500):
        messages = Message.objects.filter(session=session).order_by("id")
        yield session, list(messages.iterator(chunk_size=2000))


@dataclass
class _Usage:
    calls: int = 0
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    reasoning: int = 0
    cost: Decimal = Decimal(0)
    first: float | None = None
    last: float | None = None


def _write_conversations(
    user: AbstractBaseUser,
    out: _JsonWriter,
    db: sqlite3.Connection,
    stats: ExportStats,
    progress: Progress,
    total_messages: int,
) -> None:
    out.open_list("conversations")
    done = 0
    for session, messages in _sessions_with_messages(user):
        data = row_dict(session)
        out.open_object()
        for key, value in data.items():
            out.value(value, key)
        out.open_list("messages")
        for m in messages:
            out.value(row_dict(m))
        out.close_list()
        out.close_object()
        db.execute(_SESSION_SQL, _session_row(session))
        db.executemany(_MESSAGE_SQL, [_message_row(m) for m in messages])
        db.execute(_SESSION_EXTRA_SQL, (session.id, int(session.temporary)))
        db.executemany(_MESSAGE_EXTRA_SQL, [_message_extra(m) for m in messages])
        usage: dict[str, _Usage] = {}
        for m in messages:
            if not (m.prompt_tokens or m.completion_tokens):
                continue
            u = usage.setdefault(m.model or session.model or "unknown", _Usage())
            u.calls += 1
            u.prompt += m.prompt_tokens
            u.completion += m.completion_tokens
            u.cached += m.cached_tokens
            u.reasoning += m.reasoning_tokens
            u.cost += m.cost_usd or 0
            ts = statedb.to_epoch(m.timestamp)
            u.first = ts if u.first is None else min(u.first, ts)
            u.last = ts if u.last is None else max(u.last, ts)
        db.executemany(
            _USAGE_SQL,
            [
                (
                    session.id,
                    model,
                    u.calls,
                    u.prompt,
                    u.completion,
                    u.cached,
                    u.reasoning,
                    float(u.cost),
                    u.first,
                    u.last,
                )
                for model, u in usage.items()
            ],
        )
        stats.conversations += 1
        stats.messages += len(messages)
        done += len(messages) + 1
        progress(
            5 + int(70 * done / max(1, total_messages + stats.conversations)),
            f"Conversations: {stats.conversations}",
        )
    out.close_list()


def _write_system_prompts(user: AbstractBaseUser, out: _JsonWriter, db: sqlite3.Connection) -> int:
    from sessions_app.models import SystemPrompt

    out.open_list("system_prompts")
    count = 0
    for prompt in (
        SystemPrompt.objects.filter(sessions__owner=user).distinct().order_by("hash").iterator()
    ):
        out.value({"hash": prompt.hash, "prompt": prompt.prompt})
        db.execute(
            "INSERT INTO system_prompts (hash, prompt) VALUES (?, ?)", (prompt.hash, prompt.prompt)
        )
        count += 1
    out.close_list()
    return count


def _write_profile_settings(user: AbstractBaseUser, db: sqlite3.Connection) -> None:
    """Settings Hermes keeps in config.yaml rather than state.db, for a re-import here."""
    from accounts.models import Profile

    profile = Profile.objects.filter(user=user).first()
    if profile is None:
        return
    db.executemany(
        "INSERT INTO hermes_web_profile (key, value) VALUES (?, ?)",
        [
            ("custom_instructions", profile.custom_instructions),
            ("memory_enabled", "1" if profile.memory_enabled else "0"),
            ("memory_write_approval", "1" if profile.memory_write_approval else "0"),
        ],
    )


def _write_skills(user: AbstractBaseUser, out: _JsonWriter) -> int:
    from skills_app.models import Skill

    out.open_list("skills")
    count = 0
    for skill in Skill.objects.filter(owner=user).order_by("category", "name").iterator():
        data = row_dict(skill)
        data["files"] = [row_dict(f) for f in skill.files.order_by("path")]
        data["revisions"] = [row_dict(r) for r in skill.revisions.order_by("number")]
        out.value(data)
        count += 1
    out.close_list()
    return count


def _write_section(entry: registry.PersonalData, user: AbstractBaseUser, out: _JsonWriter) -> int:
    serialize = entry.serialize or row_dict
    rows = entry.rows(user).order_by("pk")
    if entry.section in _SINGLE_SECTIONS:
        row = rows.first()
        out.value(serialize(row) if row is not None else None, entry.section)
        return int(row is not None)
    out.open_list(entry.section)
    count = 0
    for row in rows.iterator(chunk_size=1000):
        out.value(serialize(row))
        count += 1
    out.close_list()
    return count


# --- the Hermes home ----------------------------------------------------------------------


def _info(name: str, when: datetime) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, timezone.localtime(when).timetuple()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o600 << 16  # Hermes keeps its files private to the user
    return info


def _write_hermes_files(user: AbstractBaseUser, zf: zipfile.ZipFile, now: datetime) -> int:
    """memories/, SOUL.md and skills/ (from the skills app's own exporter); returns the
    number of skills."""
    from accounts.models import Profile
    from memory.selectors import memory_export
    from skills_app.services import skills_export_zip

    for target, name in (("memory", "MEMORY.md"), ("user", "USER.md")):
        zf.writestr(_info(f"memories/{name}", now), memory_export(user=user, target=target))
    identity = Profile.objects.filter(user=user).values_list("identity", flat=True).first()
    if identity:
        zf.writestr(_info("SOUL.md", now), identity)
    skills = 0
    with zipfile.ZipFile(io.BytesIO(skills_export_zip(user=user))) as source:
        for item in source.infolist():
            if item.is_dir():
                continue
            zf.writestr(_info(item.filename, now), source.read(item))
            if item.filename.endswith("/SKILL.md"):
                skills += 1
    return skills


# --- the archive --------------------------------------------------------------------------


def build_export(
    *, user: AbstractBaseUser, target: Path, progress: Progress | None = None
) -> ExportStats:
    """Write the user's archive to `target` (a new file). Reads only the user's rows: every
    query is filtered by the owner, and nothing else is written into the archive. The
    working files go to `.build-<target's stem>-*/` beside it, so they carry its owner."""
    from sessions_app.models import Message

    progress = progress or _noop
    now = timezone.now()
    stats = ExportStats()
    progress(1, "Counting")
    total_messages = Message.objects.filter(session__owner=user).count()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".build-{target.stem}-") as work:
        db_path = Path(work) / "state.db"
        db = sqlite3.connect(db_path)
        try:
            db.execute("PRAGMA journal_mode = DELETE")
            statedb.create_schema(db)
            with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
                with zf.open(_info("export.json", now), "w", force_zip64=True) as raw:
                    text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
                    out = _JsonWriter(text)
                    out.open_object()
                    out.value(SCHEMA_VERSION, "schema_version")
                    out.value(FORMAT, "format")
                    out.value(now, "generated_at")
                    out.value(_account(user), "account")
                    _write_conversations(user, out, db, stats, progress, total_messages)
                    stats.sections["conversations"] = stats.conversations
                    stats.sections["system_prompts"] = _write_system_prompts(user, out, db)
                    _write_profile_settings(user, db)
                    progress(80, "Memory, skills and settings")
                    stats.skills = _write_skills(user, out)
                    stats.sections["skills"] = stats.skills
                    for entry in registry.entries():
                        if not entry.section or entry.section in _NESTED_SECTIONS:
                            continue
                        if entry.section == "system_prompts":
                            continue
                        stats.sections[entry.section] = _write_section(entry, user, out)
                    out.close_object()
                    text.write("\n")
                    text.flush()
                    text.detach()
                stats.memory_entries = stats.sections.get("memory_entries", 0)
                # One b-tree per index: a smaller file, and Hermes' first search is fast.
                db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
                db.execute(
                    "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('optimize')"
                )
                db.commit()
                db.close()
                progress(90, "Hermes files")
                zf.write(db_path, "state.db")
                zf.getinfo("state.db").external_attr = 0o600 << 16
                _write_hermes_files(user, zf, now)
                zf.writestr(
                    _info("manifest.json", now),
                    json.dumps(_manifest(user, now, stats), indent=2, ensure_ascii=False) + "\n",
                )
        finally:
            db.close()
    stats.size = target.stat().st_size
    progress(100, "Ready")
    return stats


def _manifest(user: AbstractBaseUser, now: datetime, stats: ExportStats) -> dict[str, Any]:
    """manifest.json: its keys and counts for programs, its descriptions and the information
    sheet in the owner's language (named in `language`)."""
    with speaking_to(user.pk):
        return {
            "schema_version": SCHEMA_VERSION,
            "format": FORMAT,
            "generated_at": now.isoformat(),
            "account": {"id": user.pk, "username": user.get_username()},
            "hermes_state_schema_version": statedb.SCHEMA_VERSION,
            "counts": {
                "conversations": stats.conversations,
                "messages": stats.messages,
                "skills": stats.skills,
                **{k: v for k, v in stats.sections.items() if k != "conversations"},
            },
            "language": get_language(),
            "files": {
                "manifest.json": gettext("This file."),
                "export.json": gettext("Everything stored about you, as JSON."),
                "state.db": gettext("Your conversations in Hermes' SQLite schema."),
                "memories/MEMORY.md": gettext("The agent's notes (Hermes format)."),
                "memories/USER.md": gettext("What the agent knows about you (Hermes format)."),
                "SOUL.md": gettext("Your agent identity, if you set one."),
                "skills/": gettext("Your skills (Hermes layout)."),
            },
            "information": information_sheet(),
        }
