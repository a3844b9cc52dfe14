"""Backups: one archive holding a consistent snapshot of the database, and restoring it.

An archive is a tar file with `manifest.json` (format version, database vendor, the
Django migrations applied, when and by which app version it was made, a SHA-256 and size
of every other member) and the database: a SQLite copy made with SQLite's online backup
API (FTS tables included), or a `pg_dump --format=custom` dump. Everything Hermes keeps
lives in the database (skills and their files too); `var/exports` holds only short-lived
download files. The secret key and HERMES_ENCRYPTION_KEY are added (`secrets.json`) only
when asked for: an archive already holds every conversation, and with the keys it also
opens every stored API key. Archives are written mode 0600, under a temporary name first.

`backup_restore` reads and checks the whole archive (checksums, the database copy opens,
no migration newer than this code) before it writes anything, and refuses a database that
already has users unless forced.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.migrations.loader import MigrationLoader

FORMAT = "hermes-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SECRETS = "secrets.json"
DATABASE_MEMBER = {"sqlite": "database.sqlite3", "postgresql": "database.pgdump"}
#: Name of the file a restore writes the archive's secrets to (under VAR_DIR).
RESTORED_SECRETS = "restored-secrets.env"
_CHUNK = 1 << 20


#: Checks run on a restored, migrated database; each returns a note for the operator or
#: None. Apps above core register theirs from ready() (core imports no app).
_AFTER_RESTORE: dict[str, Callable[[str], str | None]] = {}


def restore_check_register(key: str, check: Callable[[str], str | None]) -> None:
    """Run `check(using)` after a restore; registering a key again keeps the last check."""
    _AFTER_RESTORE[key] = check


class BackupError(Exception):
    """A backup or restore that cannot go ahead; the message tells the operator why."""


@dataclass
class Restored:
    """What a restore did and what the operator still has to do."""

    manifest: dict[str, Any]
    #: Migrations of this code the archive predates: run `migrate`.
    migrations_to_apply: int = 0
    secrets_file: Path | None = None
    #: What the registered checks found for the operator to do.
    notes: list[str] = field(default_factory=list)


def app_version() -> str:
    with (settings.BASE_DIR / "pyproject.toml").open("rb") as fd:
        return str(tomllib.load(fd)["project"]["version"])


def backup_filename(now: datetime | None = None) -> str:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"hermes-backup-{stamp}.tar"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fd:
        while chunk := fd.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _pg_env(settings_dict: dict[str, Any]) -> dict[str, str]:
    """libpq's environment for the configured database (the password never on argv)."""
    env = dict(os.environ)
    values = {
        "PGHOST": settings_dict.get("HOST"),
        "PGPORT": settings_dict.get("PORT"),
        "PGUSER": settings_dict.get("USER"),
        "PGPASSWORD": settings_dict.get("PASSWORD"),
        "PGDATABASE": settings_dict.get("NAME"),
        "PGSSLMODE": settings_dict.get("OPTIONS", {}).get("sslmode"),
    }
    env.update({key: str(value) for key, value in values.items() if value})
    return env


def _run(args: list[str], env: dict[str, str], what: str) -> None:
    if shutil.which(args[0]) is None:
        raise BackupError(f"{args[0]} is not installed; {what} needs it (PostgreSQL's client).")
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        raise BackupError(f"{what} failed: {done.stderr.strip() or done.stdout.strip()}")


def _sqlite_timeout(settings_dict: dict[str, Any]) -> float:
    return float(settings_dict.get("OPTIONS", {}).get("timeout", 20.0))


def _applied_migrations(cursor: Any) -> dict[str, list[str]]:
    cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
    applied: dict[str, list[str]] = {}
    for app, name in cursor.fetchall():
        applied.setdefault(app, []).append(name)
    return applied


def _snapshot_sqlite(settings_dict: dict[str, Any], target: Path) -> dict[str, list[str]]:
    """Copy the live database with the online backup API in one step: under WAL it reads
    one consistent snapshot while writers go on. Returns the copy's applied migrations."""
    src = sqlite3.connect(settings_dict["NAME"], timeout=_sqlite_timeout(settings_dict))
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
        # A standalone file: no -wal beside it in the archive.
        dst.execute("PRAGMA journal_mode=DELETE")
        return _applied_migrations(dst.cursor())
    finally:
        dst.close()
        src.close()


def backup_create(*, output: Path, include_secrets: bool = False, using: str = "default") -> dict:
    """Write an archive of the database `using` to `output`; returns its manifest."""
    connection = connections[using]
    vendor = connection.vendor
    if vendor not in DATABASE_MEMBER:
        raise BackupError(f"Backups support SQLite and PostgreSQL, not {vendor}.")
    output = output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    member = DATABASE_MEMBER[vendor]
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=".hermes-backup-") as work:
        dump = Path(work) / member
        if vendor == "sqlite":
            migrations = _snapshot_sqlite(connection.settings_dict, dump)
        else:
            # Read first: migrate does not run while the site does, and pg_dump takes
            # its own snapshot.
            with connection.cursor() as cursor:
                migrations = _applied_migrations(cursor)
            _run(
                ["pg_dump", "--format=custom", "--no-owner", "--no-privileges", f"--file={dump}"],
                _pg_env(connection.settings_dict),
                "pg_dump",
            )
        payload = [dump]
        if include_secrets:
            secrets = Path(work) / SECRETS
            secrets.write_text(
                json.dumps(
                    {
                        "SECRET_KEY": settings.SECRET_KEY,
                        "HERMES_ENCRYPTION_KEY": settings.HERMES_ENCRYPTION_KEY,
                    }
                ),
                encoding="utf-8",
            )
            payload.append(secrets)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "vendor": vendor,
            "created_at": datetime.now(UTC).isoformat(),
            "app_version": app_version(),
            "migrations": migrations,
            "database": member,
            "secrets": include_secrets,
            "files": {p.name: {"sha256": _sha256(p), "size": p.stat().st_size} for p in payload},
        }
        manifest_path = Path(work) / MANIFEST
        manifest_path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        partial = Path(work) / "archive.tar"
        with tarfile.open(partial, "w") as tar:
            for path in [manifest_path, *payload]:
                tar.add(path, arcname=path.name)
        partial.chmod(0o600)
        # Only a complete archive ever carries the final name.
        os.replace(partial, output)
    return manifest


def _check_manifest(manifest: Any, vendor: str) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError("This is not a Hermes backup (its manifest is not ours).")
    if not isinstance(manifest.get("files"), dict) or not isinstance(
        manifest.get("migrations"), dict
    ):
        raise BackupError("This backup's manifest is damaged (files or migrations missing).")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BackupError(
            f"This backup has format version {manifest.get('format_version')!r}; this "
            f"Hermes reads version {FORMAT_VERSION} (made by Hermes "
            f"{manifest.get('app_version', '?')})."
        )
    if manifest.get("vendor") != vendor:
        raise BackupError(
            f"This backup is of a {manifest.get('vendor')} database; DATABASE_URL is {vendor}."
        )
    known = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    newer = sorted(
        f"{app}.{name}"
        for app, names in manifest["migrations"].items()
        for name in names
        if (app, name) not in known
    )
    if newer:
        raise BackupError(
            f"This backup was made by a newer Hermes ({manifest.get('app_version', '?')}) with "
            f"migrations this code lacks ({', '.join(newer[:5])}); upgrade before restoring."
        )


def _unpack(archive: Path, work: Path, vendor: str) -> dict[str, Any]:
    """Extract and verify every member into `work`; returns the manifest."""
    try:
        with tarfile.open(archive, "r:") as tar:
            names = tar.getnames()
            if MANIFEST not in names:
                raise BackupError("This is not a Hermes backup (no manifest.json in it).")
            member = tar.extractfile(MANIFEST)
            if member is None:
                raise BackupError("This is not a Hermes backup (its manifest.json is no file).")
            manifest = json.loads(member.read())
            _check_manifest(manifest, vendor)
            files = manifest["files"]
            if manifest.get("database") not in files or set(names) != {MANIFEST, *files}:
                raise BackupError("This backup's members do not match its manifest.")
            for name in files:
                tar.extract(name, work, filter="data")
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError, ValueError) as exc:
        raise BackupError(f"This file is not a complete Hermes backup ({exc}).") from exc
    for name, expected in files.items():
        path = work / name
        if not isinstance(expected, dict):
            raise BackupError(f"This backup's manifest is damaged (no checksum of {name}).")
        if path.stat().st_size != expected.get("size") or _sha256(path) != expected.get("sha256"):
            raise BackupError(f"{name} in this backup is damaged or truncated (checksum differs).")
    return manifest


def _check_database_copy(path: Path, vendor: str, settings_dict: dict[str, Any]) -> None:
    if vendor == "sqlite":
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                ok = db.execute("PRAGMA integrity_check").fetchone()[0]
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            raise BackupError(f"The database in this backup does not open: {exc}.") from exc
        if ok != "ok":
            raise BackupError(f"The database in this backup is damaged: {ok}.")
    else:
        _run(["pg_restore", "--list", str(path)], _pg_env(settings_dict), "Reading the dump")


def _has_users(using: str) -> bool:
    connection = connections[using]
    table = get_user_model()._meta.db_table
    if table not in connection.introspection.table_names():
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {connection.ops.quote_name(table)} LIMIT 1")  # noqa: S608
        return cursor.fetchone() is not None


def _write_database(path: Path, vendor: str, using: str) -> None:
    connection = connections[using]
    settings_dict = connection.settings_dict
    connection.close()
    if vendor == "sqlite":
        # The backup API in reverse writes through SQLite's own locking and WAL, so the
        # target file is replaced page by page, never left half-copied.
        src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        dst = sqlite3.connect(settings_dict["NAME"], timeout=_sqlite_timeout(settings_dict))
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=WAL")
        finally:
            dst.close()
            src.close()
    else:
        _run(
            [
                "pg_restore",
                "--clean",
                "--if-exists",
                "--no-owner",
                "--no-privileges",
                "--single-transaction",
                "--exit-on-error",
                f"--dbname={settings_dict['NAME']}",
                str(path),
            ],
            _pg_env(settings_dict),
            "pg_restore",
        )


def _write_secrets(path: Path) -> Path | None:
    """Put the archive's keys where the operator can take them from, if they differ."""
    archived = json.loads(path.read_text(encoding="utf-8"))
    current = {
        "SECRET_KEY": settings.SECRET_KEY,
        "HERMES_ENCRYPTION_KEY": settings.HERMES_ENCRYPTION_KEY,
    }
    if all(archived.get(name, "") == value for name, value in current.items()):
        return None
    target = Path(settings.VAR_DIR) / RESTORED_SECRETS
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        for name in current:
            out.write(f"{name}={archived.get(name, '')}\n")
    return target


def backup_restore(*, archive: Path, force: bool = False, using: str = "default") -> Restored:
    """Replace the database `using` with the archive's. Everything is checked before the
    first write; a database with users is refused unless `force`."""
    connection = connections[using]
    vendor = connection.vendor
    if not archive.is_file():
        raise BackupError(f"{archive} does not exist.")
    with tempfile.TemporaryDirectory(dir=settings.VAR_DIR, prefix=".hermes-restore-") as tmp:
        work = Path(tmp)
        manifest = _unpack(archive, work, vendor)
        database = work / manifest["database"]
        _check_database_copy(database, vendor, connection.settings_dict)
        if not force and _has_users(using):
            raise BackupError(
                "The configured database already has users; restore into an empty one "
                "(or pass --force to replace everything in it)."
            )
        _write_database(database, vendor, using)
        secrets_file = _write_secrets(work / SECRETS) if manifest.get("secrets") else None
    known = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    applied = {(app, n) for app, names in manifest["migrations"].items() for n in names}
    restored = Restored(
        manifest=manifest,
        migrations_to_apply=len(set(known) - applied),
        secrets_file=secrets_file,
    )
    if not restored.migrations_to_apply:
        notes = (check(using) for check in _AFTER_RESTORE.values())
        restored.notes = [note for note in notes if note]
    return restored


def backups_rotate(*, directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` archives this module named in `directory`."""
    archives = sorted(directory.glob("hermes-backup-*.tar"), reverse=True)
    removed = archives[keep:]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def backup_scheduled() -> Path:
    """The periodic backup: a new archive in HERMES_BACKUP_DIR, then the retention."""
    directory = Path(settings.HERMES_BACKUP_DIR)
    output = directory / backup_filename()
    backup_create(output=output)
    backups_rotate(directory=directory, keep=settings.HERMES_BACKUP_KEEP)
    return output
