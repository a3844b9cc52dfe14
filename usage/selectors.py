"""Reads about usage: tokens and estimated cost of model answers, per day, model and
person (the Usage page), and per person today and this month (quotas, the Team page)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from accounts.meter import Usage
from sessions_app.models import Message

PERIODS = (7, 30, 90)


@dataclass
class Totals:
    calls: int = 0
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    reasoning: int = 0
    cost: Decimal = field(default_factory=Decimal)

    @property
    def tokens(self) -> int:
        return self.prompt + self.completion

    @property
    def hit_rate(self) -> float | None:
        """Share of prompt tokens served from the provider's prompt cache (None: no prompt)."""
        return self.cached / self.prompt if self.prompt else None

    @property
    def hit_pct(self) -> str:
        rate = self.hit_rate
        return "—" if rate is None else f"{rate * 100:.0f}%"

    def add(self, row: dict[str, Any]) -> None:
        self.calls += row["calls"] or 0
        self.prompt += row["prompt"] or 0
        self.cached += row["cached"] or 0
        self.completion += row["completion"] or 0
        self.reasoning += row["reasoning"] or 0
        self.cost += row["cost"] or Decimal(0)


_AGGREGATES = {
    "calls": Count("id"),
    "prompt": Sum("prompt_tokens"),
    "cached": Sum("cached_tokens"),
    "completion": Sum("completion_tokens"),
    "reasoning": Sum("reasoning_tokens"),
    "cost": Sum("cost_usd"),
}


def usage_messages(*, user: Any | None, since: date) -> QuerySet:
    """Model answers with usage since `since` (local date); one user's, or everyone's."""
    start = timezone.make_aware(datetime.combine(since, time.min))
    qs = Message.objects.filter(timestamp__gte=start).filter(
        Q(prompt_tokens__gt=0) | Q(completion_tokens__gt=0)
    )
    if user is not None:
        qs = qs.filter(session__owner=user)
    return qs


@dataclass
class UsageReport:
    days: list[date]
    per_day: dict[date, Totals]
    per_model: list[tuple[str, Totals]]
    per_user: list[tuple[str, Totals]]
    total: Totals


def usage_report(*, user: Any, days: int, everyone: bool = False) -> UsageReport:
    today = timezone.localdate()
    since = today - timedelta(days=days - 1)
    qs = usage_messages(user=user, since=since)
    per_day: dict[date, Totals] = {since + timedelta(days=i): Totals() for i in range(days)}
    for row in (
        qs.annotate(day=TruncDate("timestamp")).values("day").annotate(**_AGGREGATES).order_by()
    ):
        if row["day"] in per_day:
            per_day[row["day"]].add(row)
    per_model: dict[str, Totals] = {}
    for row in qs.values("model").annotate(**_AGGREGATES).order_by():
        per_model.setdefault(row["model"] or "(unknown)", Totals()).add(row)
    per_user: list[tuple[str, Totals]] = []
    if everyone:
        names = dict(get_user_model().objects.values_list("pk", get_user_model().USERNAME_FIELD))
        everyone_qs = usage_messages(user=None, since=since)
        for row in everyone_qs.values("session__owner").annotate(**_AGGREGATES).order_by():
            totals = Totals()
            totals.add(row)
            per_user.append((names.get(row["session__owner"], "?"), totals))
        per_user.sort(key=lambda item: -item[1].tokens)
    total = Totals()
    for totals in per_day.values():
        total.calls += totals.calls
        total.prompt += totals.prompt
        total.cached += totals.cached
        total.completion += totals.completion
        total.reasoning += totals.reasoning
        total.cost += totals.cost
    return UsageReport(
        days=list(per_day),
        per_day=per_day,
        per_model=sorted(per_model.items(), key=lambda item: -item[1].tokens),
        per_user=per_user,
        total=total,
    )


_TOKENS = F("prompt_tokens") + F("completion_tokens")


def usage_since(*, user: AbstractBaseUser, since: datetime) -> Usage:
    """Messages the user sent and tokens their answers used (prompt + completion)."""
    row = Message.objects.filter(session__owner=user, timestamp__gte=since).aggregate(
        messages=Count("id", filter=Q(role=Message.Role.USER)),
        tokens=Sum(_TOKENS, filter=Q(role=Message.Role.ASSISTANT)),
    )
    return Usage(messages=row["messages"] or 0, tokens=row["tokens"] or 0)


def usage_per_person(
    *, today: datetime, month: datetime, user_id: int | None = None
) -> dict[int, dict[str, Usage]]:
    """Per owner (or only `user_id`): {"today": Usage, "month": Usage} for messages since
    `today` and since `month`, in one query."""
    messages = Message.objects.filter(timestamp__gte=month)
    if user_id is not None:
        messages = messages.filter(session__owner_id=user_id)
    rows = (
        messages.values("session__owner_id")
        .annotate(
            messages_today=Count("id", filter=Q(role=Message.Role.USER, timestamp__gte=today)),
            tokens_today=Sum(_TOKENS, filter=Q(role=Message.Role.ASSISTANT, timestamp__gte=today)),
            messages_month=Count("id", filter=Q(role=Message.Role.USER)),
            tokens_month=Sum(_TOKENS, filter=Q(role=Message.Role.ASSISTANT)),
        )
        .order_by()
    )
    return {
        row["session__owner_id"]: {
            "today": Usage(row["messages_today"] or 0, row["tokens_today"] or 0),
            "month": Usage(row["messages_month"] or 0, row["tokens_month"] or 0),
        }
        for row in rows
    }
