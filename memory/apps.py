from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = _("Memory")

    def ready(self) -> None:
        from sessions_app.agent.extensions import (
            PromptSection,
            inspector_section_register,
            memory_providers_register,
            prompt_section_register,
        )
        from sessions_app.agent.tools import registry

        from .inspector import memory_inspector_context
        from .providers import MemoryManager, active_provider_name
        from .services import memory_snapshot_freeze
        from .tools import TOOLS

        registry.register(*TOOLS)
        # What a conversation asks of memory: the providers of each turn, the MEMORY/USER
        # snapshot of a new frozen prompt, the inspector's memory parts.
        memory_providers_register(
            MemoryManager.for_user, external=lambda: bool(active_provider_name())
        )
        prompt_section_register(
            PromptSection("memory_snapshot", 10, memory_snapshot_freeze, memory=True)
        )
        inspector_section_register("memory", memory_inspector_context)

        # Inferences (the local memory provider): their admin and privacy registrations.
        from .inferences.registrations import register_all

        register_all()

        from . import personal_data

        personal_data.register()

        from core.maintenance import housekeeping_register

        from .services.entries import audit_prune

        housekeeping_register("prune", "audit_events", audit_prune)
