"""The Usage page's charts: inline SVG drawn on the server. No chart library, no CDN,
nothing a Content-Security-Policy of `script-src 'self'; style-src 'self'` would block.
Each chart has a text title and the same numbers as a table below it."""

from __future__ import annotations

import math
from datetime import date

from django.utils.dateformat import format as date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import pgettext

from .selectors import Totals

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
    tick_format = pgettext("date format", "M j")
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
                date_format(day, tick_format),
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
                '<text class="axis label" x="{}" y="{}" text-anchor="end" translate="no">{}</text>'
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


def hbars_of(title: str, rows: list[tuple[str, Totals]], width: int) -> SafeString | str:
    if not rows:
        return ""
    return hbars(title, [(name, float(t.tokens), _short(t.tokens)) for name, t in rows], width)
