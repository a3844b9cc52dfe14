from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ModelCatalogConfig(AppConfig):
    name = "model_catalog"
    verbose_name = _("Models")

    def ready(self) -> None:
        from core.backups import restore_check_register

        from .selectors import restore_note

        restore_check_register("model_api_keys", restore_note)
