"""Which model a call uses. A :class:`ModelChoice` carries everything a call needs (endpoint,
decrypted key, model id, window, prices); its repr never shows the key.

The environment variables make one read-only entry, ``env``: it is the default unless an
enabled row is marked default, and the summary model unless a row is marked summary.
Rows are referred to by their primary key as text ("3"); the environment entry as "env".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final, Literal

from django.conf import settings

from .crypto import KeyUnreadable, decrypt
from .models import ModelEntry

ENV_REF: Final = "env"
Kind = Literal["chat", "summary"]


@dataclass(frozen=True)
class ModelChoice:
    ref: str
    name: str
    model_id: str
    base_url: str
    api_key: str = field(default="", repr=False)
    context_length: int = 128000
    #: USD per million tokens ("input", "output", "cached_input"); None: HERMES_MODEL_PRICES.
    prices: dict[str, Decimal | None] | None = None
    #: Why the stored key could not be used ("" when it could).
    key_error: str = ""

    @property
    def configured(self) -> bool:
        # An empty base URL means api.openai.com, which is only usable with a real key.
        return bool(self.model_id) and bool(self.base_url or self.api_key or self.key_error)


def _setting(name: str) -> str:
    return str(getattr(settings, name) or "").strip()


def env_context_length(model_id: str) -> int:
    """HERMES_CONTEXT_LENGTH, or the longest key of HERMES_CONTEXT_OVERRIDES in the id."""
    overrides: dict[str, int] = settings.HERMES_CONTEXT_OVERRIDES
    matches = [key for key in overrides if key and key in (model_id or "")]
    if matches:
        return int(overrides[max(matches, key=len)])
    return int(settings.HERMES_CONTEXT_LENGTH)


def env_choice(kind: Kind = "chat") -> ModelChoice:
    """The entry the environment variables describe (reads settings only, no database)."""
    model_id = _setting("HERMES_MODEL")
    if kind == "summary":
        model_id = _setting("HERMES_SUMMARY_MODEL") or model_id
    return ModelChoice(
        ref=ENV_REF,
        name=model_id or "environment",
        model_id=model_id,
        base_url=_setting("OPENAI_BASE_URL"),
        api_key=_setting("OPENAI_API_KEY"),
        context_length=env_context_length(model_id),
    )


def choice_of(entry: ModelEntry) -> ModelChoice:
    try:
        key, key_error = decrypt(entry.api_key_encrypted), ""
    except KeyUnreadable as exc:
        key, key_error = "", str(exc)
    prices = {
        "input": entry.price_input,
        "output": entry.price_output,
        "cached_input": entry.price_cached_input,
    }
    return ModelChoice(
        ref=str(entry.pk),
        name=entry.name,
        model_id=entry.model_id,
        base_url=entry.base_url,
        api_key=key,
        context_length=entry.context_length,
        prices=prices if any(v is not None for v in prices.values()) else None,
        key_error=key_error,
    )


def default_choice() -> ModelChoice:
    """The model of new chats: the enabled row marked default, else the environment's."""
    entry = ModelEntry.objects.filter(is_default=True, enabled=True).first()
    if entry is not None:
        return choice_of(entry)
    env = env_choice("chat")
    if env.configured:
        return env
    first = ModelEntry.objects.filter(enabled=True).first()
    return choice_of(first) if first is not None else env


def summary_choice() -> ModelChoice:
    """Summaries and background work: the row marked summary, else the environment's
    summary model, else the default model."""
    entry = ModelEntry.objects.filter(is_summary=True, enabled=True).first()
    if entry is not None:
        return choice_of(entry)
    env = env_choice("summary")
    return env if env.configured else default_choice()


def enabled_choices() -> list[ModelChoice]:
    """What people may pick: the environment entry (when configured) and enabled rows."""
    env = env_choice("chat")
    rows = [choice_of(entry) for entry in ModelEntry.objects.filter(enabled=True)]
    return ([env] if env.configured else []) + rows


def choice_for(ref: str | None) -> ModelChoice | None:
    """The enabled entry ``ref`` names, or None (unknown, deleted, disabled, unconfigured)."""
    ref = str(ref or "")
    if ref == ENV_REF:
        env = env_choice("chat")
        return env if env.configured else None
    if not ref.isdigit():
        return None
    entry = ModelEntry.objects.filter(pk=int(ref), enabled=True).first()
    return choice_of(entry) if entry is not None else None


def any_configured() -> bool:
    return default_choice().configured


def api_keys_unreadable(using: str = "default") -> list[str]:
    """Names of the catalog's models whose stored API key no configured key decrypts."""
    unreadable = []
    entries = ModelEntry.objects.using(using).exclude(api_key_encrypted="").order_by("name")
    for name, token in entries.values_list("name", "api_key_encrypted"):
        try:
            decrypt(token)
        except KeyUnreadable:
            unreadable.append(name)
    return unreadable


def restore_note(using: str) -> str | None:
    """After a backup is restored: which API keys the deployment's keys cannot decrypt."""
    names = api_keys_unreadable(using)
    if not names:
        return None
    return (
        f"The API keys of {len(names)} model(s) ({', '.join(names)}) cannot be decrypted with "
        "this deployment's HERMES_ENCRYPTION_KEY (or SECRET_KEY when it is unset): set the "
        "key the backup was made with, or enter those API keys again in the admin."
    )
