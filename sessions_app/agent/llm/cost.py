"""What a model call cost: token prices of the model's catalog entry (model_catalog), else
from ``HERMES_MODEL_PRICES``, and the per-call usage
record (:class:`CallUsage`) stored on assistant messages and added to session counters
(sessions_app/billing.py). The usage app reads these figures back for the Usage page and
the quotas."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from django.conf import settings

from .types import Usage

logger = logging.getLogger(__name__)

_ONE_MILLION: Final = Decimal(1_000_000)


@dataclass
class CallUsage:
    """One model call's tokens and estimated cost, as stored on its assistant message."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    @classmethod
    def of(cls, model: str, usage: Usage, *, prices: Mapping[str, Any] | None = None) -> CallUsage:
        """The record for a call to ``model`` that reported ``usage``, priced with ``prices``
        (the entry's, per million tokens) or else HERMES_MODEL_PRICES."""
        return cls(
            model=model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cost_usd=estimate_cost(model, usage, prices=prices),
        )


def _price_entry(model: str) -> Mapping[str, Any] | None:
    prices = settings.HERMES_MODEL_PRICES or {}
    if model in prices:
        return prices[model]
    # Providers answer with dated snapshots ("gpt-4o-2024-08-06") or prefixed ids ("openai/x").
    base = model.rsplit("/", 1)[-1]
    if base in prices:
        return prices[base]
    candidates = [name for name in prices if base.startswith(f"{name}-")]
    return prices[max(candidates, key=len)] if candidates else None


def _price(entry: Mapping[str, Any], key: str) -> Decimal | None:
    value = entry.get(key)
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        logger.warning("Ignoring non-numeric HERMES_MODEL_PRICES value for %r", key)
        return None


def estimate_cost(model: str, usage: Usage, *, prices: Mapping[str, Any] | None = None) -> Decimal:
    """USD cost of one call from ``prices`` (a catalog entry's ``input``, ``output``,
    ``cached_input``), else HERMES_MODEL_PRICES (per 1M tokens); 0 for unknown models.

    Cached prompt tokens are billed at ``cached_input`` when that price is given, otherwise at
    ``input``. The result is exact (not rounded); round when storing.
    """
    entry = prices if prices is not None else _price_entry(model or "")
    if not entry:
        return Decimal(0)
    input_price = _price(entry, "input") or Decimal(0)
    output_price = _price(entry, "output") or Decimal(0)
    cached_price = _price(entry, "cached_input")
    cached = min(max(usage.cached_tokens, 0), usage.prompt_tokens)
    if cached_price is None:
        cached_price = input_price
    total = (
        Decimal(usage.prompt_tokens - cached) * input_price
        + Decimal(cached) * cached_price
        + Decimal(usage.completion_tokens) * output_price
    )
    return total / _ONE_MILLION
