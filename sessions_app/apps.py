from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Registers the `session_search` tool with the agent's tool registry.
        from core.maintenance import housekeeping_register

        from . import personal_data
        from .maintenance import streams_close_orphaned
        from .search import tool  # noqa: F401

        housekeeping_register("prune", "orphaned_streams", streams_close_orphaned)
        personal_data.register()
