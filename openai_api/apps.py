from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class OpenaiApiConfig(AppConfig):
    name = "openai_api"
    verbose_name = _("OpenAI-compatible endpoint")
