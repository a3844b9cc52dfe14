"""The Usage page (/usage/): tokens, cost and prompt-cache hit rate per day and per model,
from the usage saved with every model answer; superusers also see it per person."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET

from .charts import HALF, WIDTH, hbars_of, rate_line, stacked_bars
from .selectors import PERIODS, usage_report


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
    values = {"days": days}
    tokens_title = (
        ngettext("Tokens per day, last %(days)d day", "Tokens per day, last %(days)d days", days)
        % values
    )
    context: dict[str, Any] = {
        "days": days,
        "periods": [
            (p, ngettext("%(days)d day", "%(days)d days", p) % {"days": p}) for p in PERIODS
        ],
        "report": report,
        "rows": [(d, report.per_day[d]) for d in reversed(report.days)],
        "has_usage": report.total.calls > 0,
        "everyone": everyone,
        "tokens_chart": stacked_bars(
            tokens_title,
            report.days,
            [
                ("bar-cached", [float(t.cached) for t in per_day]),
                ("bar-prompt", [float(t.prompt - t.cached) for t in per_day]),
                ("bar-completion", [float(t.completion) for t in per_day]),
            ],
        ),
        "tokens_chart_narrow": stacked_bars(
            tokens_title,
            report.days,
            [
                ("bar-cached", [float(t.cached) for t in per_day]),
                ("bar-prompt", [float(t.prompt - t.cached) for t in per_day]),
                ("bar-completion", [float(t.completion) for t in per_day]),
            ],
            width=HALF,
        ),
        "cost_chart": stacked_bars(
            ngettext(
                "Estimated cost per day (USD), last %(days)d day",
                "Estimated cost per day (USD), last %(days)d days",
                days,
            )
            % values,
            report.days,
            [("bar-cost", [float(t.cost) for t in per_day])],
            unit="$",
            width=HALF,
        ),
        "cache_chart": rate_line(
            ngettext(
                "Prompt-cache hit rate per day, last %(days)d day",
                "Prompt-cache hit rate per day, last %(days)d days",
                days,
            )
            % values,
            report.days,
            [t.hit_rate for t in per_day],
            width=HALF,
        ),
        "model_chart": hbars_of(_("Tokens per model"), report.per_model, WIDTH),
        "model_chart_narrow": hbars_of(_("Tokens per model"), report.per_model, HALF),
        "user_chart": hbars_of(_("Tokens per person"), report.per_user, WIDTH),
        "user_chart_narrow": hbars_of(_("Tokens per person"), report.per_user, HALF),
    }
    return render(request, "usage/usage.html", context)
