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
from pathlib import Path
from typing import IO

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from core.exceptions import ServiceError
from core.zipfiles import zip_errors

from . import statedb
from .import_report import HermesImportReport
from .import_sessions import SessionImporter, profile_settings_import

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
                    sessions = SessionImporter(user, conn)
                    done = sessions.run()
                    profile_settings_import(user, conn)
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
        with zip_errors():
            zf = zipfile.ZipFile(archive)
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
                with zip_errors(name), zf.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1024 * 1024)
        if not home.exists():
            raise ServiceError(
                "invalid",
                "No Hermes home in that zip: expected state.db, memories/, skills/ or SOUL.md.",
            )
        return hermes_import(user=user, home=home)
