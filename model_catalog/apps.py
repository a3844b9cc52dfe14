from __future__ import annotations

from django.apps import AppConfig


class ModelCatalogConfig(AppConfig):
    name = "model_catalog"
    verbose_name = "Models"

    def ready(self) -> None:
        from core.backups import restore_check_register

        from .selectors import restore_note

        restore_check_register("model_api_keys", restore_note)
