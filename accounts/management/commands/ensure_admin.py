from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.services import admin_ensure, superuser_exists


class Command(BaseCommand):
    help = (
        "Create the first administrator when there is none (password from "
        "HERMES_ADMIN_PASSWORD, else generated and printed once)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default=settings.HERMES_ADMIN_USER)

    def handle(self, *args, **options):
        if not settings.HERMES_PASSWORD_LOGIN and not superuser_exists():
            # A password administrator could not sign in: the first one comes from the
            # sign-in service instead.
            self.stdout.write(
                "Password sign-in is off (HERMES_PASSWORD_LOGIN=false): no password "
                "administrator is made. Members of HERMES_OIDC_ADMIN_GROUP (or "
                "HERMES_AUTH_ADMIN_GROUP) are team admins when they sign in; to make someone "
                "who has signed in a superuser, run: manage.py make_superuser NAME"
            )
            return
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
