from __future__ import annotations

from django.apps import AppConfig


class SkillsAppConfig(AppConfig):
    name = "skills_app"
    verbose_name = "Skills"

    def ready(self) -> None:
        from django.db.models import Q

        from core.leases import lease_kind_register
        from sessions_app.agent.tools import registry

        from . import personal_data
        from .models import ReviewRun
        from .tools import TOOLS

        registry.register(*TOOLS)
        personal_data.register()
        lease_kind_register(
            "review",
            ReviewRun,
            task="skills_app.review_session",
            waiting=Q(status="queued"),
            working=Q(status="running"),
        )
