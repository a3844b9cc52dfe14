from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # Registers the `memory` tool with the agent's tool registry.
        from . import tools  # noqa: F401

        # Inferences (the local memory provider): their admin and privacy registrations.
        from .inferences.registrations import register_all

        register_all()

        from . import personal_data

        personal_data.register()

        from core.maintenance import housekeeping_register

        from .services.entries import audit_prune

        housekeeping_register("prune", "audit_events", audit_prune)
