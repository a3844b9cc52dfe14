from __future__ import annotations

from django.apps import AppConfig


class HermesSiteConfig(AppConfig):
    name = "hermes_site"
    verbose_name = "Hermes Web"
