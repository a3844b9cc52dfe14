"""Import a Hermes home into a user's account: `manage.py import_hermes <HERMES_HOME>
--user <name>` and the upload on the Account page (a zip of the home, or of an export).

    state.db            sessions (titles, lineage, counters) and their live messages
    memories/MEMORY.md  through the memory services: every entry is threat-scanned; a
    memories/USER.md    blocked entry is reported (and audit-logged), never stored
    SOUL.md             the agent identity on the Profile
    skills/             through the skills app's importer (validated and scanned)

Re-running it adds nothing: a session already imported (same id, or imported earlier under
a new id) is skipped, memory entries that exist are not added twice, and unchanged skills
get no new revision. An archive from "Download my data" carries Hermes Web's own columns in
side tables of its state.db, so it comes back exactly as it was exported.
"""

from __future__ import annotations

import io
import re
import shutil
import sqlite3
import stat
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from hermes_site.exceptions import ServiceError

from . import statedb

SESSION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")
ROLES = {"system", "user", "assistant", "tool"}
STATUSES = {"streaming", "complete", "interrupted", "failed"}
KINDS = {"", "summary", "carried"}
_BATCH = 500


@dataclass
class HermesImportReport:
    sessions_created: int = 0
    sessions_skipped: int = 0
    messages_created: int = 0
    #: target → what the memory import said ("Imported 3 new entries.").
    memory: dict[str, str] = field(default_factory=dict)
    #: Entries the threat scanner refused, one line each.
    blocked: list[str] = field(default_factory=list)
    identity: str = ""
    skills_created: int = 0
    skills_updated: int = 0
    skills_unchanged: int = 0
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def added_anything(self) -> bool:
        return bool(
            self.sessions_created
            or self.messages_created
            or self.skills_created
            or self.skills_updated
            or any(not m.startswith("Imported 0 ") for m in self.memory.values())
        )

    def lines(self) -> list[str]:
        out = [
            f"Conversations: {self.sessions_created} imported, {self.sessions_skipped} "
            f"already there ({self.messages_created} messages).",
        ]
        for target, message in self.memory.items():
            out.append(f"{'MEMORY.md' if target == 'memory' else 'USER.md'}: {message}")
        out += [f"Blocked: {b}" for b in self.blocked]
        if self.identity:
            out.append(self.identity)
        if self.skills_created or self.skills_updated or self.skills_unchanged:
            out.append(
                f"Skills: {self.skills_created} created, {self.skills_updated} updated, "
                f"{self.skills_unchanged} unchanged."
            )
        out += [f"Note: {w}" for w in self.warnings]
        out += [f"Error: {e}" for e in self.errors]
        return out


# --- conversations ------------------------------------------------------------------------


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value).replace("\x00", "")


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _decimal(value: Any) -> Decimal:
    try:
        return Decimal(str(value or 0)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        return Decimal(0)


def _col(row: sqlite3.Row, name: str, default: Any = None) -> Any:
    return row[name] if name in row.keys() else default


def _unique_title(title: str, taken: set[str]) -> str:
    title = title[:100]
    if title not in taken:
        return title
    n = 2
    while f"{title[:94]} ({n})" in taken:
        n += 1
    return f"{title[:94]} ({n})"


class _SessionImporter:
    def __init__(self, user: AbstractBaseUser, conn: sqlite3.Connection) -> None:
        from sessions_app.models import Session

        self.user = user
        self.conn = conn
        self.report = HermesImportReport()
        self.sides = {t for t in statedb.SIDE_TABLES if statedb.has_table(conn, t)}
        self.message_columns = statedb.table_columns(conn, "messages")
        #: source session id → our session id, for everything already in the account.
        self.known: dict[str, str] = {}
        for sid, config in Session.objects.filter(owner=user).values_list("id", "model_config"):
            self.known[sid] = sid
            source = (config or {}).get("imported_from") if isinstance(config, dict) else None
            if isinstance(source, str):
                self.known[source] = sid
        self.titles = set(
            Session.objects.filter(owner=user, title__isnull=False).values_list("title", flat=True)
        )
        self.prompts: dict[str, str | None] = {}

    def _prompt(self, row: sqlite3.Row) -> Any:
        from sessions_app.models import SystemPrompt

        text = None
        digest = _col(row, "system_prompt_hash")
        if digest and statedb.has_table(self.conn, "system_prompts"):
            found = self.conn.execute(
                "SELECT prompt FROM system_prompts WHERE hash = ?", (digest,)
            ).fetchone()
            text = found[0] if found else None
        if text is None:
            text = _col(row, "system_prompt")
        if not text:
            return None
        text = _text(text)
        prompt, _ = SystemPrompt.objects.get_or_create(
            hash=SystemPrompt.digest(text), defaults={"prompt": text}
        )
        return prompt

    def _new_id(self, source_id: str, started: Any) -> tuple[str, dict[str, Any]]:
        from sessions_app.models import Session, new_session_id

        if SESSION_ID.match(source_id) and not Session.objects.filter(pk=source_id).exists():
            return source_id, {}
        # Taken (by another account, e.g. the same export imported twice on one site) or
        # not an id we can store: a fresh id, with the original remembered for re-imports.
        while True:
            candidate = new_session_id()
            if started is not None:
                candidate = f"{started:%Y%m%d_%H%M%S}_{candidate[-6:]}"
            if not Session.objects.filter(pk=candidate).exists():
                return candidate, {"imported_from": source_id}

    def run(self) -> HermesImportReport:
        from sessions_app.models import Session

        created: dict[str, str | None] = {}  # our id → source parent id
        for row in self.conn.execute("SELECT * FROM sessions ORDER BY started_at, id"):
            source_id = _text(row["id"])
            if source_id in self.known:
                self.report.sessions_skipped += 1
                continue
            try:
                with transaction.atomic():
                    session = self._session(row, source_id)
                    self._messages(row, session)
            except (IntegrityError, ValueError, sqlite3.Error) as exc:
                self.report.errors.append(f"Conversation {source_id}: not imported ({exc}).")
                continue
            self.known[source_id] = session.pk
            created[session.pk] = _text(_col(row, "parent_session_id")) or None
            self.report.sessions_created += 1
        # Lineage last: a parent may come later in the file than its child.
        for our_id, parent in created.items():
            if parent and parent in self.known and self.known[parent] != our_id:
                Session.objects.filter(pk=our_id, owner=self.user).update(
                    parent_id=self.known[parent]
                )
        return self.report

    def _session(self, row: sqlite3.Row, source_id: str) -> Any:
        from sessions_app.models import Session

        started = statedb.from_epoch(row["started_at"])
        if started is None:
            raise ValueError("it has no start time")
        ended = statedb.from_epoch(_col(row, "ended_at"))
        if ended is not None and ended < started:
            ended = started
        session_id, marker = self._new_id(source_id, started)
        config = statedb.parse_json(_col(row, "model_config"))
        config = config if isinstance(config, dict) else {}
        config.update(marker)
        title = _text(_col(row, "title")).strip() or None
        if title is not None:
            title = _unique_title(title, self.titles)
            self.titles.add(title)
        temporary = False
        if "hermes_web_sessions" in self.sides:
            extra = self.conn.execute(
                "SELECT temporary FROM hermes_web_sessions WHERE id = ?", (source_id,)
            ).fetchone()
            temporary = bool(extra and extra[0])
        return Session.objects.create(
            id=session_id,
            owner=self.user,
            source=_text(_col(row, "source")) or "hermes",
            model=_text(_col(row, "model"))[:200],
            model_config=config,
            system_prompt=self._prompt(row),
            started_at=started,
            ended_at=ended,
            end_reason=_text(_col(row, "end_reason"))[:32],
            message_count=_int(_col(row, "message_count")),
            tool_call_count=_int(_col(row, "tool_call_count")),
            api_call_count=_int(_col(row, "api_call_count")),
            input_tokens=_int(_col(row, "input_tokens")),
            output_tokens=_int(_col(row, "output_tokens")),
            cache_read_tokens=_int(_col(row, "cache_read_tokens")),
            cache_write_tokens=_int(_col(row, "cache_write_tokens")),
            reasoning_tokens=_int(_col(row, "reasoning_tokens")),
            estimated_cost_usd=_decimal(_col(row, "estimated_cost_usd")),
            title=title,
            title_source=_text(_col(row, "title_source"))[:16],
            last_activity_at=statedb.from_epoch(_col(row, "last_activity_at")) or started,
            archived=bool(_col(row, "archived", 0)),
            pinned=bool(_col(row, "pinned", 0)),
            temporary=temporary,
            compression_failure_error=_text(_col(row, "compression_failure_error"))[:300],
            compression_cooldown_until=statedb.from_epoch(
                _col(row, "compression_failure_cooldown_until")
            ),
        )

    def _message_rows(self, source_id: str) -> Iterable[sqlite3.Row]:
        where = "m.session_id = ?"
        # Live rows only: compaction-archived and rewound rows are not part of the
        # conversation Hermes continues from.
        if "active" in self.message_columns:
            where += " AND m.active = 1"
        if "hermes_web_messages" in self.sides:
            sql = (
                "SELECT m.*, x.kind AS x_kind, x.status AS x_status, "  # noqa: S608 - constants
                "x.context_block AS x_context, x.model AS x_model, "
                "x.prompt_tokens AS x_prompt, x.completion_tokens AS x_completion, "
                "x.cached_tokens AS x_cached, x.reasoning_tokens AS x_reasoning, "
                "x.cost_usd AS x_cost FROM messages m "
                "LEFT JOIN hermes_web_messages x ON x.id = m.id "
                f"WHERE {where} ORDER BY m.id"
            )
        else:
            sql = f"SELECT m.* FROM messages m WHERE {where} ORDER BY m.id"  # noqa: S608
        return self.conn.execute(sql, (source_id,))

    def _messages(self, row: sqlite3.Row, session: Any) -> None:
        from sessions_app.models import Message

        source_id = _text(row["id"])
        carried = self._parent_texts(row)
        skipped_roles = 0
        batch: list[Message] = []
        for m in self._message_rows(source_id):
            role = _text(m["role"])
            if role not in ROLES:
                skipped_roles += 1
                continue
            content = _text(m["content"])
            tool_calls = statedb.parse_json(_col(m, "tool_calls"))
            kind = _text(_col(m, "x_kind")) if _col(m, "x_kind") is not None else None
            if kind is None:
                if _col(m, "_compressed_summary", 0):
                    kind = "summary"
                elif (role, content) in carried:
                    kind = "carried"
                else:
                    kind = ""
            status = _text(_col(m, "x_status")) if _col(m, "x_status") is not None else None
            if status is None:
                status = "complete" if role == "assistant" else ""
            if role != "assistant" or status not in STATUSES:
                status = "" if role != "assistant" else "complete"
            message = Message(
                session=session,
                role=role,
                content=content,
                tool_call_id=_text(_col(m, "tool_call_id"))[:200]
                or ("missing" if role == "tool" else ""),
                tool_calls=tool_calls if isinstance(tool_calls, list | dict) else None,
                tool_name=_text(_col(m, "tool_name"))[:200],
                timestamp=statedb.from_epoch(m["timestamp"]) or session.started_at,
                token_count=_int(_col(m, "token_count")) if _col(m, "token_count") else None,
                finish_reason=_text(_col(m, "finish_reason"))[:32],
                reasoning=_text(_col(m, "reasoning") or _col(m, "reasoning_content")),
                status=status,
                kind=kind if kind in KINDS else "",
                context_block=_text(_col(m, "x_context")),
                model=_text(_col(m, "x_model"))[:200],
                prompt_tokens=_int(_col(m, "x_prompt")),
                completion_tokens=_int(_col(m, "x_completion")),
                cached_tokens=_int(_col(m, "x_cached")),
                reasoning_tokens=_int(_col(m, "x_reasoning")),
                cost_usd=_decimal(_col(m, "x_cost")),
            )
            batch.append(message)
            if len(batch) >= _BATCH:
                Message.objects.bulk_create(batch)
                self.report.messages_created += len(batch)
                batch = []
        if batch:
            Message.objects.bulk_create(batch)
            self.report.messages_created += len(batch)
        if skipped_roles:
            self.report.warnings.append(
                f"Conversation {source_id}: {skipped_roles} message(s) with an unknown role "
                "were skipped."
            )

    def _parent_texts(self, row: sqlite3.Row) -> set[tuple[str, str]]:
        """For a Hermes compression continuation (no side table): the (role, content) of the
        parent's messages, to recognise the ones carried over into the child."""
        if "hermes_web_messages" in self.sides:
            return set()
        parent = _col(row, "parent_session_id")
        if not parent:
            return set()
        ended = self.conn.execute(
            "SELECT end_reason FROM sessions WHERE id = ?", (parent,)
        ).fetchone()
        if not ended or ended[0] != "compression":
            return set()
        return {
            (_text(r[0]), _text(r[1]))
            for r in self.conn.execute(
                "SELECT role, content FROM messages WHERE session_id = ?", (parent,)
            )
        }


def _profile_settings(user: AbstractBaseUser, conn: sqlite3.Connection) -> None:
    """Settings from an export of this app (state.db side table); only filled in where the
    account has none yet, so an import never overwrites what the person set here."""
    from accounts.services import profile_get

    if not statedb.has_table(conn, "hermes_web_profile"):
        return
    values = dict(conn.execute("SELECT key, value FROM hermes_web_profile").fetchall())
    profile = profile_get(user=user)
    changed = []
    if values.get("custom_instructions") and not profile.custom_instructions:
        profile.custom_instructions = _text(values["custom_instructions"])
        changed.append("custom_instructions")
    if changed:
        profile.save(update_fields=changed)


# --- memory, identity, skills ---------------------------------------------------------------


def _import_memory(user: AbstractBaseUser, home: Path, report: HermesImportReport) -> None:
    from memory import scanner
    from memory.models import ENTRY_DELIMITER, Source
    from memory.services import Provenance, memory_add, memory_import, parse_memory_file

    provenance = Provenance(source=Source.IMPORT)
    for target, name in (("memory", "MEMORY.md"), ("user", "USER.md")):
        path = home / "memories" / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            report.errors.append(f"{name} is not UTF-8 text; nothing imported from it.")
            continue
        clean: list[str] = []
        for i, entry in enumerate(parse_memory_file(text), start=1):
            if scanner.scan(entry):
                # Through the service so the refusal lands in the memory audit log.
                try:
                    memory_add(user=user, target=target, content=entry, provenance=provenance)
                except ServiceError as exc:
                    report.blocked.append(f"{name} entry {i}: {exc.message}")
                    continue
            clean.append(entry)
        if not clean:
            continue
        try:
            result = memory_import(
                user=user,
                target=target,
                text=ENTRY_DELIMITER.join(clean),
                provenance=provenance,
            )
        except ServiceError as exc:
            report.errors.append(f"{name}: {exc.message}")
            continue
        report.memory[target] = result.message


def _import_identity(user: AbstractBaseUser, home: Path, report: HermesImportReport) -> None:
    from accounts.services import profile_get

    path = home / "SOUL.md"
    if not path.is_file():
        return
    try:
        text = path.read_text(encoding="utf-8").replace("\x00", "").strip()
    except (UnicodeDecodeError, OSError):
        report.errors.append("SOUL.md is not UTF-8 text; the identity was not imported.")
        return
    if not text:
        return
    profile = profile_get(user=user)
    if profile.identity == text:
        report.identity = "Agent identity (SOUL.md): unchanged."
        return
    profile.identity = text
    profile.save(update_fields=["identity"])
    report.identity = "Agent identity set from SOUL.md."


def _skills_zip(root: Path) -> bytes | None:
    buffer = io.BytesIO()
    count = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part.startswith(".") for part in rel.parts):
                continue  # .archive/, .hub/ and other Hermes bookkeeping
            if path.is_symlink() or not path.is_file():
                continue
            zf.write(path, "skills/" + rel.as_posix())
            count += 1
    return buffer.getvalue() if count else None


def _import_skills(user: AbstractBaseUser, home: Path, report: HermesImportReport) -> None:
    from skills_app.services import skills_import_zip

    root = home / "skills"
    if not root.is_dir():
        return
    payload = _skills_zip(root)
    if payload is None:
        return
    try:
        result = skills_import_zip(user=user, upload=payload)
    except ServiceError as exc:
        report.errors.append(f"Skills: {exc.message}")
        return
    report.skills_created = result.count("created")
    report.skills_updated = result.count("updated")
    report.skills_unchanged = result.count("unchanged")
    for item in result.results:
        if item.status == "error":
            report.errors.append(f"Skill {item.folder}: {item.message}")
    report.warnings += result.warnings


# --- entry points -------------------------------------------------------------------------


def hermes_import(*, user: AbstractBaseUser, home: Path) -> HermesImportReport:
    """Import the Hermes home at `home` into `user`'s account (see the module docstring)."""
    home = Path(home)
    if not home.is_dir():
        raise ServiceError("not_found", f"{home} is not a folder.")
    found = [
        p
        for p in ("state.db", "memories", "skills", "SOUL.md")
        if (home / p).exists() and not (home / p).is_symlink()
    ]
    if not found:
        raise ServiceError(
            "invalid",
            "That is not a Hermes home: it has none of state.db, memories/, skills/, SOUL.md.",
        )
    report = HermesImportReport()
    db = home / "state.db"
    if db.is_file() and not db.is_symlink():
        with tempfile.TemporaryDirectory(prefix="hermes-import-") as work:
            try:
                conn = statedb.open_copy(db, Path(work))
            except (OSError, sqlite3.Error) as exc:
                report.errors.append(f"state.db could not be opened ({exc}).")
            else:
                try:
                    if not statedb.has_table(conn, "sessions") or not statedb.has_table(
                        conn, "messages"
                    ):
                        raise sqlite3.DatabaseError("no sessions/messages tables")
                    sessions = _SessionImporter(user, conn)
                    done = sessions.run()
                    _profile_settings(user, conn)
                except sqlite3.DatabaseError as exc:
                    report.errors.append(f"state.db is not a Hermes session database ({exc}).")
                else:
                    report.sessions_created = done.sessions_created
                    report.sessions_skipped = done.sessions_skipped
                    report.messages_created = done.messages_created
                    report.warnings += done.warnings
                    report.errors += done.errors
                finally:
                    conn.close()
    _import_memory(user, home, report)
    _import_identity(user, home, report)
    _import_skills(user, home, report)
    return report


_WANTED = re.compile(r"^(state\.db(-wal)?|SOUL\.md|memories/(MEMORY|USER)\.md|skills/.+)$")


def _safe_name(name: str) -> bool:
    return not (name.startswith("/") or "\\" in name or "\x00" in name or ".." in name.split("/"))


def _home_prefix(names: list[str]) -> str:
    """The folder inside the zip that is the Hermes home: '' or one top-level folder
    (people zip `.hermes/` itself as often as its contents)."""
    candidates: dict[str, int] = {}
    for name in names:
        if not _safe_name(name):
            continue
        if _WANTED.match(name):
            return ""
        top, _, rest = name.partition("/")
        if rest and _WANTED.match(rest):
            candidates[top + "/"] = candidates.get(top + "/", 0) + 1
    return max(candidates, key=lambda k: candidates[k]) if candidates else ""


def hermes_import_zip(*, user: AbstractBaseUser, upload: IO[bytes]) -> HermesImportReport:
    """Import a zip of a Hermes home (or an archive from "Download my data"). Only the files
    the import reads are unpacked, into a temporary folder removed afterwards."""
    limit = settings.HERMES_IMPORT_MAX_MB * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="hermes-upload-") as work:
        archive = Path(work) / "upload.zip"
        written = 0
        with archive.open("wb") as out:
            while chunk := upload.read(1024 * 1024):
                written += len(chunk)
                if written > limit:
                    raise ServiceError(
                        "too_large",
                        f"The file is larger than {settings.HERMES_IMPORT_MAX_MB} MiB; use "
                        "`manage.py import_hermes` on the server for bigger homes.",
                    )
                out.write(chunk)
        try:
            zf = zipfile.ZipFile(archive)
        except (zipfile.BadZipFile, OSError):
            raise ServiceError("invalid_zip", "That file is not a zip archive.") from None
        home = Path(work) / "home"
        with zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            if sum(i.file_size for i in infos) > 4 * limit:
                raise ServiceError("too_large", "The zip unpacks to too much data.")
            names = [i.filename for i in infos]
            prefix = _home_prefix(names)
            for info in infos:
                name = info.filename
                if not name.startswith(prefix):
                    continue
                rel = name[len(prefix) :]
                if (
                    not _WANTED.match(rel)
                    or not _safe_name(rel)
                    or stat.S_ISLNK(info.external_attr >> 16)
                ):
                    continue
                target = home / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1024 * 1024)
        if not home.exists():
            raise ServiceError(
                "invalid",
                "No Hermes home in that zip: expected state.db, memories/, skills/ or SOUL.md.",
            )
        return hermes_import(user=user, home=home)
