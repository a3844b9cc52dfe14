from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.services import admin_ensure


class Command(BaseCommand):
    help = (
        "Create the first administrator when there is none (password from "
        "HERMES_ADMIN_PASSWORD, else generated and printed once)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default=settings.HERMES_ADMIN_USER)

    def handle(self, *args, **options):
        username = options["username"]
        created, generated = admin_ensure(
            username=username, password=settings.HERMES_ADMIN_PASSWORD or None
        )
        if not created:
            self.stdout.write("An administrator already exists; nothing changed.")
        elif generated:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created administrator '{username}' with password: {generated}\n"
                    "It is shown only this once; change it on the Account page."
                )
            )
        else:
            self.stdout.write(
                f"Created administrator '{username}' (password from HERMES_ADMIN_PASSWORD)."
            )
