from __future__ import annotations

from django.apps import AppConfig


class ModelCatalogConfig(AppConfig):
    name = "model_catalog"
    verbose_name = "Models"
