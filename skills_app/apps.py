from __future__ import annotations

from django.apps import AppConfig


class SkillsAppConfig(AppConfig):
    name = "skills_app"
    verbose_name = "Skills"

    def ready(self) -> None:
        # The agent's skill tools join the shared registry once the models are loaded.
        from . import personal_data
        from .tools import register

        register()
        personal_data.register()
