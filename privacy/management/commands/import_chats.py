from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ServiceError
from privacy.chat_import import chat_import
from privacy.chat_jobs import chat_import_job_learn_after
from privacy.chat_learning import learn_unavailable


class Command(BaseCommand):
    help = (
        "Import a ChatGPT or Claude data export (the zip, or its conversations.json) into an "
        "account. Safe to run again: only conversations and messages not imported yet are added. "
        "With --learn, the worker then reviews the imported conversations and proposes memory "
        "entries (and inferences with the local memory provider); the Account page shows it."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="The export zip, or conversations.json")
        parser.add_argument("--user", required=True, help="Username of the account to fill")
        parser.add_argument(
            "--learn",
            action="store_true",
            help="Let Hermes learn from this history (a background review on the worker)",
        )

    def handle(self, *args, **options):
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: options["user"]}).first()
        if user is None:
            raise CommandError(f"No account named {options['user']!r}.")
        if options["learn"] and (reason := learn_unavailable(user=user)):
            raise CommandError(f"--learn cannot be used: {reason}")

        def progress(done: int, total: int) -> None:
            if done == total or done % 500 == 0:
                self.stderr.write(f"{done:,}/{total:,} conversations")

        try:
            report = chat_import(
                user=user, path=Path(options["file"]).expanduser(), progress=progress
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        for line in report.lines():
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS("Import finished."))
        if options["learn"]:
            job = chat_import_job_learn_after(user=user, report=report)
            chosen = job.learning.get("chosen", 0)
            self.stdout.write(
                f"Learning from {chosen:,} of the {len(set(report.session_ids)):,} conversations "
                "runs on the worker; the Account page shows its progress and what it learned."
            )
