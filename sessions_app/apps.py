from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from .agent.tools import registry
        from .search.tool import TOOLS

        registry.register(*TOOLS)
