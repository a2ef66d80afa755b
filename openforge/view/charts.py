"""Small inline SVG charts, made on the server (no script): lines over training steps, bars side by side.

Every text in a chart is escaped; colours come from the stylesheet (classes s0…s5), so the page needs no inline
style."""

from __future__ import annotations

import math
from dataclasses import dataclass

from markupsafe import Markup

WIDTH, HEIGHT = 520, 240
LEFT, RIGHT, TOP, BOTTOM = 52, 14, 30, 38


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]  # (x, y); None values are left out by the caller


def _fmt(value: float, percent: bool) -> str:
    if percent:
        return f"{100 * value:.0f}%"
    if value == int(value):
        return str(int(value))
    return f"{value:.3g}"


def _ticks(lo: float, hi: float, count: int = 5, whole: bool = False) -> list[float]:
    if hi <= lo:
        return [lo]
    if whole:  # counts and versions: whole-number ticks only
        every = max(1, math.ceil((hi - lo) / (count - 1)))
        return [float(v) for v in range(math.floor(lo), math.ceil(hi) + 1, every)]
    step = (hi - lo) / (count - 1)
    return [lo + i * step for i in range(count)]


def _x_ticks(lo: float, hi: float) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    step = max(1, math.ceil(span / 8))  # integer steps: x is a training step or an evaluation point
    first = math.ceil(lo)
    return [float(v) for v in range(first, int(math.floor(hi)) + 1, step)]


def line_chart(
    title: str,
    series: list[Series],
    x_label: str,
    y_label: str = "",
    y_range: tuple[float, float] | None = None,
    percent: bool = False,
    chart_id: str = "",
) -> Markup:
    points = [p for s in series for p in s.points]
    if not points:
        return Markup('<p class="muted">{}: nothing recorded yet.</p>').format(title)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_lo, x_hi = min(xs), max(xs)
    if x_lo == x_hi:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = y_range if y_range else (min(0.0, min(ys)), max(ys) if max(ys) > 0 else 1.0)
    if y_lo == y_hi:
        y_hi = y_lo + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_at(x: float) -> float:
        return LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w

    def y_at(y: float) -> float:
        return TOP + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h

    parts = [
        Markup('<svg class="chart" id="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">').format(
            chart_id, WIDTH, HEIGHT, title
        ),
        Markup('<text class="ctitle" x="{}" y="18">{}</text>').format(LEFT, title),
    ]
    whole = y_range is None and not percent and all(float(y).is_integer() for y in ys)
    if whole:
        y_hi = max(y_hi, math.ceil(y_hi))
    for y in _ticks(y_lo, y_hi, whole=whole):
        parts.append(
            Markup(
                '<line class="grid" x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}"/>'
                '<text class="tick" x="{3}" y="{4:.1f}" text-anchor="end">{5}</text>'
            ).format(LEFT, WIDTH - RIGHT, y_at(y), LEFT - 6, y_at(y) + 4, _fmt(y, percent))
        )
    for x in _x_ticks(x_lo, x_hi):
        parts.append(
            Markup('<text class="tick" x="{:.1f}" y="{}" text-anchor="middle">{}</text>').format(
                x_at(x), HEIGHT - BOTTOM + 16, _fmt(x, False)
            )
        )
    parts.append(
        Markup('<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>').format(
            LEFT + plot_w / 2, HEIGHT - 6, x_label
        )
    )
    if y_label:
        parts.append(
            Markup(
                '<text class="axis" x="12" y="{0}" text-anchor="middle" transform="rotate(-90 12 {0})">{1}</text>'
            ).format(TOP + plot_h / 2, y_label)
        )
    parts.append(_legend(series))
    for i, s in enumerate(series):
        cls = f"s{i % 6}"
        coords = " ".join(f"{x_at(x):.1f},{y_at(y):.1f}" for x, y in s.points)
        parts.append(Markup('<polyline class="line {}" points="{}"/>').format(cls, coords))
        for x, y in s.points:
            parts.append(
                Markup(
                    '<circle class="dot {}" cx="{:.1f}" cy="{:.1f}" r="3"><title>{}: {} at {}</title></circle>'
                ).format(cls, x_at(x), y_at(y), s.name, _fmt(y, percent), _fmt(x, False))
            )
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def _legend(series: list[Series]) -> Markup:
    """Right-aligned on the title's line, one coloured entry per series."""
    items, x = [], WIDTH - RIGHT
    for i, s in reversed(list(enumerate(series))):
        parts = Markup('<text class="legend s{}" x="{}" y="18" text-anchor="end">■ {}</text>').format(i % 6, x, s.name)
        items.append(parts)
        x -= 14 + 7 * len(s.name)
    return Markup("").join(items)


def bar_chart(title: str, bars: list[tuple[str, float | None]], percent: bool = True, chart_id: str = "") -> Markup:
    """One bar per (label, value); values in [0, 1] when `percent`."""
    shown = [(label, v) for label, v in bars if v is not None]
    if not shown:
        return Markup('<p class="muted">{}: nothing measured.</p>').format(title)
    top = 1.0 if percent else max(max(v for _, v in shown), 1e-9)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(shown)
    bar_w = min(80.0, slot * 0.6)
    parts = [
        Markup('<svg class="chart" id="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">').format(
            chart_id, WIDTH, HEIGHT, title
        ),
        Markup('<text class="ctitle" x="{}" y="18">{}</text>').format(LEFT, title),
    ]
    for y in _ticks(0.0, top):
        y_px = TOP + plot_h - y / top * plot_h
        parts.append(
            Markup(
                '<line class="grid" x1="{0}" x2="{1}" y1="{2:.1f}" y2="{2:.1f}"/>'
                '<text class="tick" x="{3}" y="{4:.1f}" text-anchor="end">{5}</text>'
            ).format(LEFT, WIDTH - RIGHT, y_px, LEFT - 6, y_px + 4, _fmt(y, percent))
        )
    for i, (label, value) in enumerate(shown):
        h = value / top * plot_h
        x = LEFT + slot * i + (slot - bar_w) / 2
        parts.append(
            Markup(
                '<rect class="bar s{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}">'
                "<title>{}: {}</title></rect>"
            ).format(i % 6, x, TOP + plot_h - h, bar_w, h, label, _fmt(value, percent))
        )
        parts.append(
            Markup('<text class="barval" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>').format(
                x + bar_w / 2, TOP + plot_h - h - 4, _fmt(value, percent)
            )
        )
        parts.append(
            Markup('<text class="tick" x="{:.1f}" y="{}" text-anchor="middle">{}</text>').format(
                x + bar_w / 2, HEIGHT - BOTTOM + 16, label
            )
        )
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


__all__ = ["Series", "bar_chart", "line_chart"]
