"""Step charts as inline SVG text, byte-identical for the same data.

The after-action report embeds its figures (leakage over time, privacy budget charged over time)
in the page itself, so the report is one self-contained file. The charts are drawn here as plain
SVG text rather than with matplotlib: no optional extra is needed to run an exercise, there are
no element ids or dates to pin, and the same series always give the same bytes (every number is
printed with a fixed precision).
"""

from __future__ import annotations

import math
from html import escape
from typing import Final

__all__ = ["PALETTE", "step_chart"]

PALETTE: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")
"""Series colours, in order."""
WIDTH: Final = 680
HEIGHT: Final = 300
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 28, 40


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high]."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        if value >= low - step * 1e-9:
            ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def _label(v: float) -> str:
    return f"{v:g}"


def step_chart(
    title: str,
    series: dict[str, list[tuple[float, float]]],
    *,
    x_max: float,
    x_label: str,
    y_label: str,
    y_start: float = 0.0,
    y_min: float | None = None,
    y_max: float | None = None,
    markers: list[tuple[float, str]] | None = None,
) -> str:
    """An SVG step chart: each series holds its value until the next point, starting at
    ``y_start`` at time 0 and running to ``x_max``; ``markers`` are labelled vertical lines
    (decisions)."""
    values = [y for points in series.values() for _, y in points if math.isfinite(y)]
    low = y_min if y_min is not None else min([y_start, *values])
    high = y_max if y_max is not None else max([y_start, *values, low + 1e-9])
    if high <= low:
        high = low + 1.0
    ticks = _nice_ticks(low, high)
    low, high = min(low, ticks[0]), max(high, ticks[-1])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    x_max = max(x_max, 1e-9)

    def sx(x: float) -> float:
        return LEFT + plot_w * min(max(x, 0.0), x_max) / x_max

    def sy(y: float) -> float:
        y = min(max(y, low), high)
        return TOP + plot_h * (1.0 - (y - low) / (high - low))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11" role="img">',
        f"<title>{escape(title)}</title>",
        f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#999"/>',
    ]
    for tick in ticks:
        y = _fmt(sy(tick))
        out.append(
            f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + plot_w}" y2="{y}" stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">'
            f"{_label(tick)}</text>"
        )
    for tick in _nice_ticks(0.0, x_max):
        if tick > x_max:
            continue
        x = _fmt(sx(tick))
        out.append(
            f'<line x1="{x}" y1="{TOP + plot_h}" x2="{x}" y2="{TOP + plot_h + 4}" stroke="#999"/>'
            f'<text x="{x}" y="{TOP + plot_h + 16}" text-anchor="middle">{_label(tick)}</text>'
        )
    out.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    for t, label in markers or []:
        x = _fmt(sx(t))
        out.append(
            f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{TOP + plot_h}" stroke="#555" '
            f'stroke-dasharray="4 3"/><text x="{x}" y="{TOP - 3}" text-anchor="middle" '
            f'font-size="9">{escape(label)}</text>'
        )
    for k, (name, points) in enumerate(series.items()):
        colour = PALETTE[k % len(PALETTE)]
        y_prev = y_start
        path = [f"M{_fmt(sx(0.0))},{_fmt(sy(y_prev))}"]
        for t, y in sorted(points, key=lambda p: p[0]):
            if not math.isfinite(y):
                y = high if y > 0 else low
            path.append(f"H{_fmt(sx(t))}V{_fmt(sy(y))}")
            y_prev = y
        path.append(f"H{_fmt(sx(x_max))}")
        out.append(f'<path d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        ly = TOP + 14 * k + 8
        out.append(
            f'<line x1="{WIDTH - RIGHT + 10}" y1="{ly}" x2="{WIDTH - RIGHT + 28}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2"/><text x="{WIDTH - RIGHT + 32}" y="{ly}" '
            f'dominant-baseline="middle">{escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
