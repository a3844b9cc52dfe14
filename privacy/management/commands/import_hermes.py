from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ServiceError
from privacy.hermes_import import hermes_import


class Command(BaseCommand):
    help = (
        "Import a Hermes home (state.db, memories/MEMORY.md and USER.md, SOUL.md, skills/) "
        "into an account. Safe to run again: nothing is imported twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("home", help="The Hermes home folder, e.g. ~/.hermes")
        parser.add_argument("--user", required=True, help="Username of the account to fill")
        parser.add_argument(
            "--memory-over-limit",
            choices=["hold", "raise", "fit", "discard"],
            default="hold",
            help=(
                "A MEMORY.md/USER.md bigger than the account's limit: hold its entries for the "
                "person to choose on the Account page (default), raise their limit to fit, "
                "import the first entries that fit (the rest stay held), or discard them."
            ),
        )

    def handle(self, *args, **options):
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: options["user"]}).first()
        if user is None:
            raise CommandError(f"No account named {options['user']!r}.")
        home = Path(options["home"]).expanduser()
        try:
            report = hermes_import(user=user, home=home, over_limit=options["memory_over_limit"])
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        for line in report.lines():
            self.stdout.write(line)
        if not report.ok:
            raise CommandError("Finished with errors (see above); everything else was imported.")
        self.stdout.write(self.style.SUCCESS("Import finished."))
