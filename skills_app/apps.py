from __future__ import annotations

from django.apps import AppConfig


class SkillsAppConfig(AppConfig):
    name = "skills_app"
    verbose_name = "Skills"

    def ready(self) -> None:
        from sessions_app.agent.tools import registry

        from . import personal_data
        from .tools import TOOLS

        registry.register(*TOOLS)
        personal_data.register()
