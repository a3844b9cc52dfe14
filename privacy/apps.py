from __future__ import annotations

from django.apps import AppConfig


class PrivacyConfig(AppConfig):
    name = "privacy"
    verbose_name = "Privacy"

    def ready(self) -> None:
        from django.db.models import Q

        from core.leases import lease_kind_register

        from . import personal_data
        from .models import ExportJob

        personal_data.register()
        lease_kind_register(
            "export",
            ExportJob,
            task="accounts.export_build",
            waiting=Q(status="queued"),
            working=Q(status="running"),
        )
