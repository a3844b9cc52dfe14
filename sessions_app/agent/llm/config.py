"""Which model and endpoint a call uses: a :class:`model_catalog.selectors.ModelChoice`.

Callers resolve the entry in sync code (the session's model for a turn, the summary model
for background work: :func:`model_for`) and pass it to ``stream_chat``/``complete``; a call
without one uses the environment's entry (settings only, no database: safe in async code).

Settings read (through the catalog): ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``HERMES_MODEL``, ``HERMES_SUMMARY_MODEL``, ``HERMES_CONTEXT_LENGTH``.
"""

from __future__ import annotations

from model_catalog.selectors import (
    ModelChoice,
    any_configured,
    default_choice,
    env_choice,
    summary_choice,
)

from .types import ModelKind


def model_for(kind: ModelKind = "chat") -> ModelChoice:
    """The default chat model or the summary model (reads the catalog: sync code only)."""
    if kind == "chat":
        return default_choice()
    if kind == "summary":
        return summary_choice()
    raise ValueError(f"Unknown model kind {kind!r}; expected 'chat' or 'summary'.")


def model_name(kind: ModelKind = "chat") -> str:
    """The model id for chat turns or summaries ("" when not configured)."""
    return model_for(kind).model_id


def call_entry(entry: ModelChoice | None, kind: ModelKind) -> ModelChoice:
    return entry if entry is not None else env_choice(kind)


def is_configured() -> bool:
    """True when a model is named and there is somewhere to send requests."""
    return any_configured()
