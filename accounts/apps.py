from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = _("Accounts")

    def ready(self) -> None:
        from core.maintenance import housekeeping_register

        from . import (
            personal_data,
            signals,  # noqa: F401  (connects the socket-closing receivers)
        )
        from .services import login_sessions_expire
        from .throttle import throttle_prune

        housekeeping_register("expire", "login_sessions", login_sessions_expire)
        housekeeping_register("expire", "login_throttle", throttle_prune)
        personal_data.register()
