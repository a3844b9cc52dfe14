"""Warn when API keys would be encrypted with a key derived from SECRET_KEY."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Warning, register


@register()
def encryption_key_check(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    if str(settings.HERMES_ENCRYPTION_KEY or "").strip():
        return []
    return [
        Warning(
            "HERMES_ENCRYPTION_KEY is not set: model API keys are encrypted with a key derived "
            "from SECRET_KEY, and become unreadable if SECRET_KEY changes.",
            hint="Set HERMES_ENCRYPTION_KEY to a long random secret (see the README).",
            id="model_catalog.W001",
        )
    ]
