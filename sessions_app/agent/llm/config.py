"""Which model and endpoint to use, read from settings on every call (tests and the admin
change them at run time).

Settings read: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``HERMES_MODEL``,
``HERMES_SUMMARY_MODEL``.
"""

from __future__ import annotations

from django.conf import settings

from .types import ModelKind


def setting_str(name: str) -> str:
    """A string setting, stripped; "" when unset (env files often carry stray spaces)."""
    return str(getattr(settings, name) or "").strip()


def base_url() -> str:
    return setting_str("OPENAI_BASE_URL")


def api_key() -> str:
    return setting_str("OPENAI_API_KEY")


def model_name(kind: ModelKind = "chat") -> str:
    """The configured model id for chat turns or summaries ("" when not configured)."""
    if kind == "chat":
        return setting_str("HERMES_MODEL")
    if kind == "summary":
        return setting_str("HERMES_SUMMARY_MODEL") or setting_str("HERMES_MODEL")
    raise ValueError(f"Unknown model kind {kind!r}; expected 'chat' or 'summary'.")


def endpoint_configured() -> bool:
    # An empty base URL means api.openai.com, which is only usable with a real key.
    return bool(base_url() or api_key())


def is_configured() -> bool:
    """True when a model is named and there is somewhere to send requests."""
    return bool(model_name("chat")) and endpoint_configured()
