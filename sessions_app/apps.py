from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = _("Conversations")

    def ready(self) -> None:
        from django.db.models import Q

        from core.leases import lease_kind_register
        from core.maintenance import housekeeping_register

        from . import personal_data, turn_claim
        from .agent.tools import registry
        from .maintenance import streams_close_orphaned
        from .models import SearchSummary, Session
        from .search.tool import TOOLS

        registry.register(*TOOLS)
        housekeeping_register("prune", "orphaned_streams", streams_close_orphaned)
        personal_data.register()
        lease_kind_register(turn_claim.TURN, Session, on_dead=turn_claim.answers_interrupt)
        lease_kind_register(turn_claim.COMPRESS, Session)
        lease_kind_register(
            "summary",
            SearchSummary,
            task="sessions_app.summarise_search_hit",
            waiting=Q(status="pending"),
            working=Q(status="running"),
        )
