from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from core.maintenance import housekeeping_register

        from . import personal_data
        from .agent.tools import registry
        from .maintenance import streams_close_orphaned
        from .search.tool import TOOLS

        registry.register(*TOOLS)
        housekeeping_register("prune", "orphaned_streams", streams_close_orphaned)
        personal_data.register()
