from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares; an app only so `serve` and `fake_llm` are management
    commands."""

    name = "core"
    verbose_name = "Hermes Web"

    def ready(self) -> None:
        from .admin_strings import boolean_icons_translate

        boolean_icons_translate()
