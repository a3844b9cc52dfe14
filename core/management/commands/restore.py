"""`manage.py restore FILE [--force]`: replace the configured database with a backup made
by `manage.py backup`. The archive is checked in full before anything is written; a
database that already has users is refused unless --force. Stop the site first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.backups import BackupError, backup_restore


class Command(BaseCommand):
    help = "Restore a backup archive into the configured (empty) database."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("archive", type=Path, help="A file written by `manage.py backup`.")
        parser.add_argument(
            "--force",
            action="store_true",
            help="Replace the database even if it already has users (their data is lost).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            restored = backup_restore(archive=options["archive"], force=options["force"])
        except BackupError as exc:
            raise CommandError(f"Nothing was restored: {exc}") from exc
        manifest = restored.manifest
        self.stdout.write(
            f"Restored the backup of {manifest['created_at']} (Hermes {manifest['app_version']})."
        )
        if restored.migrations_to_apply:
            self.stdout.write(
                f"It predates {restored.migrations_to_apply} migration(s) of this code: run "
                "`python manage.py migrate` before starting the site."
            )
        if restored.secrets_file:
            self.stdout.write(
                f"The backup's SECRET_KEY and HERMES_ENCRYPTION_KEY differ from this "
                f"deployment's; they are in {restored.secrets_file} (mode 0600). Set them in "
                "the environment or .env, restart, then delete that file."
            )
        for note in restored.notes:
            self.stdout.write(note)
