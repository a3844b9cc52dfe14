"""The Usage page (/usage/): tokens, cost and prompt-cache hit rate per day and per model,
from the usage saved with every model answer; superusers also see it per person.

Charts are inline SVG drawn here, on the server: no chart library, no CDN, nothing a
Content-Security-Policy of `script-src 'self'; style-src 'self'` would block. Each chart has
a text title and the same numbers as a table below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

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
    from sessions_app.models import Message

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


# --- SVG charts ---------------------------------------------------------------------------

WIDTH, HEIGHT = 640, 200
HALF = 400  # the charts shown side by side
LEFT, RIGHT, TOP, BOTTOM = 56, 24, 10, 26
#: Steps of the value axis: 1, 1.5, 2, 2.5 … 8 times a power of ten.
_STEPS = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)


def _n(value: float) -> str:
    """A coordinate for an SVG attribute (format_html escapes its arguments to strings)."""
    return f"{value:.1f}"


def _short(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M".replace(".0M", "M")
    if n >= 1000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n:.0f}" if float(n).is_integer() else f"{n:.2f}"


def _scale(value: float, intervals: int = 4) -> float:
    """A round axis maximum at or above `value`, divisible into `intervals` round steps."""
    if value <= 0:
        return 1.0
    raw = value / intervals
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(s * magnitude for s in _STEPS if s * magnitude >= raw * (1 - 1e-9))
    return step * intervals


def _axis_label(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:.0f}%"
    if unit == "$":
        return f"${value:.3f}".rstrip("0").rstrip(".") if value < 1 else f"${value:,.2f}"
    return _short(value)


def _frame(
    title: str, body: SafeString, y_max: float, unit: str, days: list[date], width: int
) -> SafeString:
    plot_h = HEIGHT - TOP - BOTTOM
    grid = []
    for i in range(5):
        value = y_max * i / 4
        y = TOP + plot_h - plot_h * i / 4
        grid.append(
            format_html(
                '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                '<text class="axis" x="{}" y="{}" text-anchor="end">{}</text>',
                LEFT,
                _n(y),
                width - RIGHT,
                _n(y),
                LEFT - 6,
                _n(y + 4),
                _axis_label(value, unit),
            )
        )
    ticks = []
    slot = (width - LEFT - RIGHT) / max(1, len(days))
    every = max(1, math.ceil(len(days) / max(1, (width - LEFT - RIGHT) // 56)))
    for i, day in enumerate(days):
        if (len(days) - 1 - i) % every:
            continue  # count from the newest day, so today always has its label
        ticks.append(
            format_html(
                '<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>',
                _n(LEFT + slot * (i + 0.5)),
                HEIGHT - 8,
                day.strftime("%b %-d"),
            )
        )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        "<title>{}</title>{}{}{}</svg>",
        width,
        HEIGHT,
        title,
        title,
        mark_safe("".join(grid)),  # noqa: S308 - built with format_html above
        body,
        mark_safe("".join(ticks)),  # noqa: S308
    )


def stacked_bars(
    title: str,
    days: list[date],
    series: list[tuple[str, list[float]]],
    unit: str = "",
    width: int = WIDTH,
) -> SafeString:
    """Bars per day, each stacked from the series (css class, values) in order."""
    totals = [sum(values[i] for _, values in series) for i in range(len(days))]
    y_max = _scale(max(totals, default=0))
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (width - LEFT - RIGHT) / max(1, len(days))
    bar = max(1.0, slot * 0.7)
    parts = []
    for i, day in enumerate(days):
        y = TOP + plot_h
        for css, values in series:
            h = plot_h * values[i] / y_max
            if h <= 0:
                continue
            y -= h
            parts.append(
                format_html(
                    '<rect class="{}" x="{}" y="{}" width="{}" height="{}">'
                    "<title>{}: {}</title></rect>",
                    css,
                    _n(LEFT + slot * i + (slot - bar) / 2),
                    _n(y),
                    _n(bar),
                    _n(max(h, 0.5)),
                    day.isoformat(),
                    f"${values[i]:.4f}" if unit == "$" else f"{values[i]:,.0f}",
                )
            )
    return _frame(title, mark_safe("".join(parts)), y_max, unit, days, width)  # noqa: S308


def rate_line(
    title: str, days: list[date], rates: list[float | None], width: int = WIDTH
) -> SafeString:
    """A line of percentages per day; days without prompts leave a gap."""
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (width - LEFT - RIGHT) / max(1, len(days))
    runs: list[list[tuple[float, float]]] = [[]]
    dots = []
    for i, rate in enumerate(rates):
        if rate is None:
            runs.append([])
            continue
        x = LEFT + slot * (i + 0.5)
        y = TOP + plot_h - plot_h * rate
        runs[-1].append((x, y))
        dots.append(
            format_html(
                '<circle class="dot" cx="{}" cy="{}" r="3"><title>{}: {}%</title></circle>',
                _n(x),
                _n(y),
                days[i].isoformat(),
                f"{rate * 100:.0f}",
            )
        )
    lines = format_html_join(
        "",
        '<polyline class="line" points="{}"/>',
        ((" ".join(f"{x:.1f},{y:.1f}" for x, y in run),) for run in runs if len(run) > 1),
    )
    return _frame(title, mark_safe(lines + "".join(dots)), 1.0, "%", days, width)  # noqa: S308


def hbars(title: str, rows: list[tuple[str, float, str]], width: int = WIDTH) -> SafeString:
    """Horizontal bars: (label, value, shown value) per row."""
    height = 28 * max(1, len(rows)) + 8
    top = max((v for _, v, _ in rows), default=0) or 1
    label_w, value_w = min(190, int(width * 0.36)), 64
    span = width - label_w - value_w
    parts = []
    for i, (label, value, shown) in enumerate(rows):
        y = 6 + 28 * i
        length = max(1.0, span * value / top)
        parts.append(
            format_html(
                '<text class="axis label" x="{}" y="{}" text-anchor="end">{}</text>'
                '<rect class="bar-total" x="{}" y="{}" width="{}" height="18"/>'
                '<text class="axis" x="{}" y="{}">{}</text>',
                label_w - 8,
                y + 13,
                label if len(label) <= 28 else label[:27] + "…",
                label_w,
                y,
                _n(length),
                _n(label_w + length + 6),
                y + 13,
                shown,
            )
        )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}"><title>{}</title>'
        "{}</svg>",
        width,
        height,
        title,
        title,
        mark_safe("".join(parts)),  # noqa: S308
    )


# --- the page -----------------------------------------------------------------------------


def _hbars(title: str, rows: list[tuple[str, Totals]], width: int) -> SafeString | str:
    if not rows:
        return ""
    return hbars(title, [(name, float(t.tokens), _short(t.tokens)) for name, t in rows], width)


@login_required
@require_GET
def usage(request: HttpRequest) -> HttpResponse:
    try:
        days = int(request.GET.get("days", "30"))
    except ValueError:
        days = 30
    if days not in PERIODS:
        days = 30
    everyone = bool(request.user.is_superuser)
    report = usage_report(user=request.user, days=days, everyone=everyone)
    per_day = [report.per_day[d] for d in report.days]
    context: dict[str, Any] = {
        "days": days,
        "periods": PERIODS,
        "report": report,
        "rows": [(d, report.per_day[d]) for d in reversed(report.days)],
        "has_usage": report.total.calls > 0,
        "everyone": everyone,
        "tokens_chart": stacked_bars(
            f"Tokens per day, last {days} days",
            report.days,
            [
                ("bar-cached", [float(t.cached) for t in per_day]),
                ("bar-prompt", [float(t.prompt - t.cached) for t in per_day]),
                ("bar-completion", [float(t.completion) for t in per_day]),
            ],
        ),
        "tokens_chart_narrow": stacked_bars(
            f"Tokens per day, last {days} days",
            report.days,
            [
                ("bar-cached", [float(t.cached) for t in per_day]),
                ("bar-prompt", [float(t.prompt - t.cached) for t in per_day]),
                ("bar-completion", [float(t.completion) for t in per_day]),
            ],
            width=HALF,
        ),
        "cost_chart": stacked_bars(
            f"Estimated cost per day (USD), last {days} days",
            report.days,
            [("bar-cost", [float(t.cost) for t in per_day])],
            unit="$",
            width=HALF,
        ),
        "cache_chart": rate_line(
            f"Prompt-cache hit rate per day, last {days} days",
            report.days,
            [t.hit_rate for t in per_day],
            width=HALF,
        ),
        "model_chart": _hbars("Tokens per model", report.per_model, WIDTH),
        "model_chart_narrow": _hbars("Tokens per model", report.per_model, HALF),
        "user_chart": _hbars("Tokens per person", report.per_user, WIDTH),
        "user_chart_narrow": _hbars("Tokens per person", report.per_user, HALF),
    }
    return render(request, "usage/usage.html", context)
