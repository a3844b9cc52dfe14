from __future__ import annotations

from django.apps import AppConfig


class ModelCatalogConfig(AppConfig):
    name = "model_catalog"
    verbose_name = "Models"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the encryption-key check)
