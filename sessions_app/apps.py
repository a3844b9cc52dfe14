from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Conversations"

    def ready(self) -> None:
        # Registers the `session_search` tool with the agent's tool registry.
        from .search import tool  # noqa: F401
