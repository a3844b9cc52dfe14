"""A conversation's usage counters: what model calls add to them. The chat turn (one
call per assistant message) and compression (its flush and summary calls, billed to the
compressed conversation) both count through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import F

from .agent.llm.cost import CallUsage
from .models import Session


def session_counters(calls: Sequence[CallUsage]) -> dict[str, Any]:
    """UPDATE expressions adding `calls` to a Session row's usage counters."""
    return {
        "api_call_count": F("api_call_count") + len(calls),
        "input_tokens": F("input_tokens") + sum(c.prompt_tokens for c in calls),
        "output_tokens": F("output_tokens") + sum(c.completion_tokens for c in calls),
        "cache_read_tokens": F("cache_read_tokens") + sum(c.cached_tokens for c in calls),
        "reasoning_tokens": F("reasoning_tokens") + sum(c.reasoning_tokens for c in calls),
        "estimated_cost_usd": F("estimated_cost_usd") + sum(c.cost_usd for c in calls),
    }


def session_bill(*, session_id: str, calls: Sequence[CallUsage]) -> None:
    """Add model calls that have no message of their own to the conversation's usage."""
    calls = [c for c in calls if c.prompt_tokens or c.completion_tokens]
    if calls:
        Session.objects.filter(pk=session_id).update(**session_counters(calls))
