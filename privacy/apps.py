from __future__ import annotations

from django.apps import AppConfig


class PrivacyConfig(AppConfig):
    name = "privacy"
    verbose_name = "Privacy"

    def ready(self) -> None:
        from . import personal_data

        personal_data.register()
