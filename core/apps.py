from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app shares; an app only so `serve` and `fake_llm` are management
    commands."""

    name = "core"
    verbose_name = "Hermes Web"
