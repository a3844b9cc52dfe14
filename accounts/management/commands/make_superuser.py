from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from accounts.services import superuser_grant
from core.exceptions import ServiceError


class Command(BaseCommand):
    help = (
        "Make an existing account a superuser and team admin (with password sign-in off, "
        "the first administrator signs in with the provider once, then this is run)."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, **options):
        try:
            user = superuser_grant(username=options["username"])
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            self.style.SUCCESS(f"{user.get_username()} is now a superuser and team admin.")
        )
