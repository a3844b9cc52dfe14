from __future__ import annotations

from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "Usage"

    def ready(self) -> None:
        from accounts.meter import usage_meter_register

        from . import selectors

        # Quotas and the Team page (accounts) count through these two selectors.
        usage_meter_register(selectors)
