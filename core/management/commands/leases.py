"""`manage.py leases`: every lease held now (kind, row, owner, seconds left), for operators
and the chaos tests; `--recover` releases those of dead processes of this host."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from core.leases import leases_held, leases_recover_dead


class Command(BaseCommand):
    help = "List the leases held now; --recover releases those of dead local processes."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--recover", action="store_true", help="Release dead local leases.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["recover"]:
            self.stdout.write(f"released: {leases_recover_dead()}")
        now = timezone.now()
        for held in leases_held():
            left = (held.expires_at - now).total_seconds() if held.expires_at else 0.0
            state = "EXPIRED" if held.expired else f"{left:.0f}s left"
            self.stdout.write(f"{held.kind}\t{held.model}\t{held.pk}\t{held.owner}\t{state}")
