"""Import a Hermes home into a user's account: `manage.py import_hermes <HERMES_HOME>
--user <name>` and the upload on the Account page (a zip of the home, or of an export).

    state.db            sessions (titles, lineage, counters) and their live messages
    memories/MEMORY.md  through the memory services: every entry is threat-scanned; a
    memories/USER.md    blocked entry is reported (and audit-logged), never stored; a file
                        over the person's limit is held whole for their choice (raise the
                        limit to fit, import what fits, or discard)
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
from typing import IO, TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils.functional import lazy
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy, ngettext_lazy

from core.exceptions import ServiceError, Text, lazy_format
from core.zipfiles import zip_errors

from . import statedb
from .import_report import HermesImportReport
from .import_sessions import SessionImporter, profile_settings_import

if TYPE_CHECKING:
    from memory.services import WriteResult

# --- memory, identity, skills ---------------------------------------------------------------

#: MEMORY.md / USER.md hold a few kilobytes (their stores' limits); SOUL.md a prompt.
MEMORY_FILE_MAX_BYTES = 256 * 1024
SOUL_MAX_BYTES = 64 * 1024
#: A report line of MEMORY.md or USER.md: "MEMORY.md: Imported 3 new entries."
_FILE_SAYS = gettext_lazy("%(file)s: %(result)s")


def _memory_refusal(exc: ServiceError, target: str) -> Text:
    """Why the memory services refused an imported entry or file, as a page says it."""
    from memory.page_text import page_message

    return lazy(page_message, str)(exc, target, where="import")


def _read_small(path: Path, limit: int, report: HermesImportReport) -> str | None:
    """The UTF-8 text of `path`, or None (with the reason reported) when it is larger than
    `limit` bytes or not text. Only `limit` + 1 bytes are ever read."""
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        report.errors.append(
            lazy_format(
                gettext_lazy("%(name)s could not be read (%(error)s); nothing imported from it."),
                name=path.name,
                error=str(exc),
            )
        )
        return None
    if len(data) > limit:
        report.errors.append(
            lazy_format(
                gettext_lazy("%(name)s is larger than %(kib)s KiB; nothing imported from it."),
                name=path.name,
                kib=f"{limit // 1024:,}",
            )
        )
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        report.errors.append(
            lazy_format(
                gettext_lazy("%(name)s is not UTF-8 text; nothing imported from it."),
                name=path.name,
            )
        )
        return None


def _memory_result(result: WriteResult) -> Text:
    """What a memory import did ("Imported 3 new entries. 1 already existed."), in the
    language it is shown in (the words of memory.page_text.import_message)."""
    added, existed, removed = result.imported or (0, 0, 0)
    parts = [
        lazy_format(
            ngettext_lazy(
                "Imported %(count)d new entry.", "Imported %(count)d new entries.", added
            ),
            count=added,
        )
    ]
    if existed:
        parts.append(
            lazy_format(
                ngettext_lazy("%(count)d already existed.", "%(count)d already existed.", existed),
                count=existed,
            )
        )
    if removed:
        parts.append(
            lazy_format(
                ngettext_lazy(
                    "Removed %(count)d not in the file.",
                    "Removed %(count)d not in the file.",
                    removed,
                ),
                count=removed,
            )
        )
    return format_lazy(" ".join(["{}"] * len(parts)), *parts)


def _import_memory(
    user: AbstractBaseUser, home: Path, report: HermesImportReport, over_limit: str
) -> None:
    from memory import scanner
    from memory.models import ENTRY_DELIMITER, Source
    from memory.selectors import memory_limit
    from memory.services import (
        Provenance,
        memory_add,
        memory_import,
        memory_import_hold,
        memory_import_resolve,
        parse_memory_file,
    )

    provenance = Provenance(source=Source.IMPORT)
    for target, name in (("memory", "MEMORY.md"), ("user", "USER.md")):
        path = home / "memories" / name
        if not path.is_file():
            continue
        text = _read_small(path, MEMORY_FILE_MAX_BYTES, report)
        if text is None:
            continue
        clean: list[str] = []
        for i, entry in enumerate(parse_memory_file(text), start=1):
            if scanner.scan(entry):
                # Through the service so the refusal lands in the memory audit log.
                try:
                    memory_add(user=user, target=target, content=entry, provenance=provenance)
                except ServiceError as exc:
                    report.blocked.append(
                        lazy_format(
                            gettext_lazy("%(file)s entry %(number)s: %(reason)s"),
                            file=name,
                            number=i,
                            reason=_memory_refusal(exc, target),
                        )
                    )
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
            if exc.code != "over_limit":
                report.errors.append(
                    lazy_format(_FILE_SAYS, file=name, result=_memory_refusal(exc, target))
                )
                continue
            # Hermes lets people raise the limit, so a file may hold more than ours allows:
            # keep every entry, held for the person's choice, instead of refusing the file.
            held = memory_import_hold(
                user=user, target=target, entries=clean, provenance=provenance
            )
            if over_limit == "hold":
                report.memory[target] = lazy_format(
                    _FILE_SAYS,
                    file=name,
                    result=lazy_format(
                        ngettext_lazy(
                            "Imported 0 new entries: %(size)s characters do not fit your limit "
                            "of %(limit)s characters. %(held)s entry is kept, waiting for your "
                            "choice: raise your limit to fit, import what fits, or discard it.",
                            "Imported 0 new entries: %(size)s characters do not fit your limit "
                            "of %(limit)s characters. %(held)s entries are kept, waiting for your "
                            "choice: raise your limit to fit, import what fits, or discard them.",
                            held,
                        ),
                        size=f"{exc.details['size_after']:,}",
                        limit=f"{memory_limit(user=user, target=target):,}",
                        held=held,
                    ),
                )
                continue
            # Said in the active language, and naming its file already.
            report.memory[target] = memory_import_resolve(
                user=user, target=target, choice=over_limit, provenance=provenance
            )
            report.memory_changed = True
            continue
        report.memory[target] = lazy_format(_FILE_SAYS, file=name, result=_memory_result(result))
        added, _existed, removed = result.imported or (0, 0, 0)
        report.memory_changed = report.memory_changed or bool(added or removed)


def _import_identity(user: AbstractBaseUser, home: Path, report: HermesImportReport) -> None:
    from accounts.services import profile_get

    path = home / "SOUL.md"
    if not path.is_file():
        return
    text = _read_small(path, SOUL_MAX_BYTES, report)
    if text is None:
        return
    # Kept as written (its trailing newline too), so exporting gives back the same file;
    # the prompt builder strips it where it is used.
    text = text.replace("\x00", "")
    if not text.strip():
        return
    profile = profile_get(user=user)
    if profile.identity == text:
        report.identity = gettext_lazy("Agent identity (SOUL.md): unchanged.")
        return
    profile.identity = text
    profile.save(update_fields=["identity"])
    report.identity = gettext_lazy("Agent identity set from SOUL.md.")


def _skills_zip(root: Path, report: HermesImportReport) -> bytes | None:
    """skills/ as the zip the skills importer reads. Files over the skills' own size limits
    are left out (and reported) before they are read."""
    from skills_app import skillmd
    from skills_app.services.transfer import MAX_TOTAL_BYTES

    buffer = io.BytesIO()
    count = total = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part.startswith(".") for part in rel.parts):
                continue  # .archive/, .hub/ and other Hermes bookkeeping
            if path.is_symlink() or not path.is_file():
                continue
            size = path.stat().st_size
            limit = skillmd.CONTENT_MAX * 4 if path.name == "SKILL.md" else skillmd.FILE_MAX_BYTES
            if size > limit or total + size > MAX_TOTAL_BYTES:
                report.errors.append(
                    lazy_format(
                        gettext_lazy(
                            "Skill file %(path)s (%(size)s bytes) was not imported: it is over "
                            "the %(limit)s-byte limit of one file or the %(total)s MiB of one "
                            "import."
                        ),
                        path=f"skills/{rel.as_posix()}",
                        size=f"{size:,}",
                        limit=f"{limit:,}",
                        total=MAX_TOTAL_BYTES // (1024 * 1024),
                    )
                )
                continue
            total += size
            zf.write(path, "skills/" + rel.as_posix())
            count += 1
    return buffer.getvalue() if count else None


def _import_skills(user: AbstractBaseUser, home: Path, report: HermesImportReport) -> None:
    from skills_app.page_text import page_message
    from skills_app.services import skills_import_zip

    root = home / "skills"
    if not root.is_dir():
        return
    payload = _skills_zip(root, report)
    if payload is None:
        return
    try:
        result = skills_import_zip(user=user, upload=payload)
    except ServiceError as exc:
        report.errors.append(
            lazy_format(gettext_lazy("Skills: %(reason)s"), reason=lazy(page_message, str)(exc))
        )
        return
    report.skills_created = result.count("created")
    report.skills_updated = result.count("updated")
    report.skills_unchanged = result.count("unchanged")
    for item in result.results:
        if item.status == "error":
            report.errors.append(
                lazy_format(
                    gettext_lazy("Skill %(folder)s: %(reason)s"),
                    folder=item.folder,
                    reason=item.message,
                )
            )
    report.warnings += result.warnings


# --- entry points -------------------------------------------------------------------------


def hermes_import(
    *, user: AbstractBaseUser, home: Path, over_limit: str = "hold"
) -> HermesImportReport:
    """Import the Hermes home at `home` into `user`'s account (see the module docstring).
    `over_limit` says what to do with a MEMORY.md/USER.md bigger than the person's limit:
    "hold" its entries for their choice, or at once "raise" the limit or import what "fit"s
    (memory.services.memory_import_resolve)."""
    from memory.services import HELD_CHOICES

    if over_limit != "hold" and over_limit not in HELD_CHOICES:
        raise ServiceError(
            "invalid",
            lazy_format(
                gettext_lazy("Unknown choice %(choice)s for a file over the limit."),
                choice=repr(over_limit),
            ),
        )
    home = Path(home)
    if not home.is_dir():
        raise ServiceError(
            "not_found", lazy_format(gettext_lazy("%(path)s is not a folder."), path=str(home))
        )
    found = [
        p
        for p in ("state.db", "memories", "skills", "SOUL.md")
        if (home / p).exists() and not (home / p).is_symlink()
    ]
    if not found:
        raise ServiceError(
            "invalid",
            gettext_lazy(
                "That is not a Hermes home: it has none of state.db, memories/, skills/, SOUL.md."
            ),
        )
    report = HermesImportReport()
    db = home / "state.db"
    if db.is_file() and not db.is_symlink():
        with tempfile.TemporaryDirectory(prefix="hermes-import-") as work:
            try:
                conn = statedb.open_copy(db, Path(work))
            except (OSError, sqlite3.Error) as exc:
                report.errors.append(
                    lazy_format(
                        gettext_lazy("state.db could not be opened (%(error)s)."), error=str(exc)
                    )
                )
            else:
                try:
                    statedb.refuse_computed(conn)
                    if not statedb.has_table(conn, "sessions") or not statedb.has_table(
                        conn, "messages"
                    ):
                        raise sqlite3.DatabaseError("no sessions/messages tables")
                    sessions = SessionImporter(user, conn)
                    done = sessions.run()
                    profile_settings_import(user, conn, done)
                except statedb.RefusedDatabase as exc:
                    report.errors.append(
                        lazy_format(
                            gettext_lazy(
                                "state.db was refused and no conversation was imported: "
                                "%(reason)s. A Hermes state.db stores its messages; this one "
                                "would compute them."
                            ),
                            reason=exc.text,
                        )
                    )
                except sqlite3.DatabaseError as exc:
                    report.errors.append(
                        lazy_format(
                            gettext_lazy("state.db is not a Hermes session database (%(error)s)."),
                            error=str(exc),
                        )
                    )
                else:
                    report.sessions_created = done.sessions_created
                    report.sessions_skipped = done.sessions_skipped
                    report.messages_created = done.messages_created
                    report.warnings += done.warnings
                    report.errors += done.errors
                    report.shortened = done.shortened
                finally:
                    conn.close()
    _import_memory(user, home, report, over_limit)
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


def upload_save(upload: IO[bytes], target: Path, *, command: str) -> None:
    """Write an upload to `target`, refusing it (and removing what was written) past
    HERMES_IMPORT_MAX_MB; `command` is the manage.py command suggested for bigger files."""
    limit = settings.HERMES_IMPORT_MAX_MB * 1024 * 1024
    written = 0
    with target.open("wb") as out:
        while chunk := upload.read(1024 * 1024):
            written += len(chunk)
            if written > limit:
                break
            out.write(chunk)
    if written > limit:
        target.unlink(missing_ok=True)
        raise ServiceError(
            "too_large",
            lazy_format(
                gettext_lazy(
                    "The file is larger than %(mb)s MiB; use `manage.py %(command)s` on the "
                    "server for bigger files."
                ),
                mb=settings.HERMES_IMPORT_MAX_MB,
                command=command,
            ),
        )


def hermes_import_zip(*, user: AbstractBaseUser, upload: IO[bytes]) -> HermesImportReport:
    """Import a zip of a Hermes home (or an archive from "Download my data"). Only the files
    the import reads are unpacked, into a temporary folder removed afterwards."""
    limit = settings.HERMES_IMPORT_MAX_MB * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="hermes-upload-") as work:
        archive = Path(work) / "upload.zip"
        upload_save(upload, archive, command="import_hermes")
        with zip_errors():
            zf = zipfile.ZipFile(archive)
        home = Path(work) / "home"
        with zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            if sum(i.file_size for i in infos) > 4 * limit:
                raise ServiceError("too_large", gettext_lazy("The zip unpacks to too much data."))
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
                gettext_lazy(
                    "No Hermes home in that zip: expected state.db, memories/, skills/ or SOUL.md."
                ),
            )
        return hermes_import(user=user, home=home)
