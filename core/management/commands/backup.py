"""`manage.py backup [--output FILE] [--include-secrets]`: one archive with a consistent
snapshot of the database, taken while the site runs (core/backups.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.backups import BackupError, backup_create, backup_filename


class Command(BaseCommand):
    help = "Write a backup archive of the database (safe while the site runs)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--output", type=Path, help="Archive to write (default: HERMES_BACKUP_DIR/<time>.tar)."
        )
        parser.add_argument(
            "--include-secrets",
            action="store_true",
            help="Also store SECRET_KEY and HERMES_ENCRYPTION_KEY (guard the file well).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        output = options["output"] or Path(settings.HERMES_BACKUP_DIR) / backup_filename()
        try:
            manifest = backup_create(output=output, include_secrets=options["include_secrets"])
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        size = sum(f["size"] for f in manifest["files"].values())
        self.stdout.write(f"Backup of the {manifest['vendor']} database written to {output}")
        self.stdout.write(f"({size / 1e6:.1f} MB of data, Hermes {manifest['app_version']}).")
        if manifest["secrets"]:
            self.stdout.write(
                "It holds SECRET_KEY and HERMES_ENCRYPTION_KEY: anyone with the file can read "
                "the stored API keys."
            )
        else:
            self.stdout.write(
                "Without secrets: keep HERMES_ENCRYPTION_KEY (or SECRET_KEY) elsewhere; the "
                "stored model API keys cannot be decrypted without it."
            )
