from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SkillsAppConfig(AppConfig):
    name = "skills_app"
    verbose_name = _("Skills")

    def ready(self) -> None:
        from django.db.models import Q

        from core.leases import lease_kind_register
        from sessions_app.agent.extensions import (
            PromptSection,
            after_turn_register,
            inspector_section_register,
            prompt_section_register,
        )
        from sessions_app.agent.tools import registry

        from . import personal_data
        from .models import ReviewRun
        from .selectors import skills_inspector_context
        from .services import review_after_turn, skills_index_freeze
        from .tools import TOOLS

        registry.register(*TOOLS)
        # The skills index follows the MEMORY/USER snapshot in a new frozen prompt.
        prompt_section_register(PromptSection("skills_index", 20, skills_index_freeze))
        after_turn_register("skill_review", review_after_turn)
        inspector_section_register("skills", skills_inspector_context)
        personal_data.register()
        lease_kind_register(
            "review",
            ReviewRun,
            task="skills_app.review_session",
            waiting=Q(status="queued"),
            working=Q(status="running"),
        )
