from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = _("Usage")

    def ready(self) -> None:
        from accounts.meter import usage_meter_register

        from . import selectors

        # Quotas and the Team page (accounts) count through these two selectors.
        usage_meter_register(selectors)
