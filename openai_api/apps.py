from __future__ import annotations

from django.apps import AppConfig


class OpenaiApiConfig(AppConfig):
    name = "openai_api"
    verbose_name = "OpenAI-compatible endpoint"
