"""Plots as inline SVG strings, generated in Python (no plotting dependency, no script, no fetch).

Every function returns one ``<svg>`` element sized in CSS pixels. Every label, title and tooltip goes
through :func:`esc` (``html.escape`` with quotes), because labels are entity names, query texts and
triple ids that come from documents: untrusted text. Long labels are cut *before* escaping (so an
entity reference is never split) and keep their full text in a ``<title>`` tooltip.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "PALETTE",
    "SIGNATURE_COLORS",
    "bar_chart",
    "box_plot",
    "column_chart",
    "diverging_bars",
    "esc",
    "funnel",
    "line_chart",
    "stacked_bars",
]

PALETTE: tuple[str, ...] = (
    "#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0",
)  # fmt: skip
"""Categorical colours (Observable 10), readable on white and distinguishable in print."""

SIGNATURE_COLORS: Mapping[str, str] = {
    "supported": "#3ca951",
    "out_of_scope": "#9498a0",
    "retrieval_gap": "#ff725c",
    "connectivity_gap": "#efb118",
    "relational_gap": "#a463f2",
    "generation_gap": "#4269d0",
    "undetermined": "#d0d3d8",
}
"""One fixed colour per chain signature (TRIAGE §4.5), the same in every plot."""

_FONT = 'font-family="system-ui, sans-serif" font-size="12"'
_INK = "#1f2328"
_MUTED = "#6e7781"
_GRID = "#e6e8eb"


def esc(value: object) -> str:
    """``html.escape(str(value), quote=True)``: safe in SVG/HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


def _label(x: float, y: float, text: str, *, limit: int = 28, anchor: str = "end", fill: str = _INK) -> str:
    """A text element cut to ``limit`` characters, with the full text as its tooltip."""
    full = " ".join(str(text).split())
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{fill}" dominant-baseline="middle">'
        f"<title>{esc(full)}</title>{esc(_cut(full, limit))}</text>"
    )


def _svg(width: float, height: float, title: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" role="img" aria-label="{esc(title)}" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" {_FONT}>'
        f"<title>{esc(title)}</title>"
        f'<text x="0" y="14" font-weight="600" fill="{_INK}">{esc(_cut(title, 90))}</text>'
        + "".join(body)
        + "</svg>"
    )


def _fmt(value: float, fmt: str) -> str:
    return fmt.format(value)


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


# --------------------------------------------------------------------------- bars


def bar_chart(
    items: Sequence[tuple[str, float]],
    *,
    title: str,
    value_format: str = "{:.2f}",
    max_value: float | None = None,
    color: str = PALETTE[0],
    colors: Mapping[str, str] | None = None,
    width: int = 420,
    label_width: int = 150,
    bar_height: int = 18,
) -> str:
    """Horizontal bars, one per ``(label, value)``, scaled to ``max_value`` (default: the largest)."""
    top = 22
    gap = 6
    height = top + len(items) * (bar_height + gap) + 4
    values = _finite([v for _, v in items])
    scale_max = max_value if max_value is not None else (max(values) if values else 1.0)
    scale_max = scale_max if scale_max > 0 else 1.0
    span = width - label_width - 60
    body: list[str] = []
    for i, (label, value) in enumerate(items):
        y = top + i * (bar_height + gap)
        body.append(_label(label_width - 6, y + bar_height / 2, label, limit=label_width // 7))
        w = max(0.0, min(1.0, value / scale_max)) * span
        fill = (colors or {}).get(label, color)
        body.append(
            f'<rect x="{label_width}" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{esc(fill)}" rx="2">'
            f"<title>{esc(label)}: {esc(_fmt(value, value_format))}</title></rect>"
        )
        body.append(
            f'<text x="{label_width + w + 4:.1f}" y="{y + bar_height / 2:.1f}" fill="{_MUTED}" '
            f'dominant-baseline="middle">{esc(_fmt(value, value_format))}</text>'
        )
    return _svg(width, height, title, body)


def column_chart(
    items: Sequence[tuple[str, float]],
    *,
    title: str,
    value_format: str = "{:.0%}",
    max_value: float | None = None,
    color: str = PALETTE[0],
    width: int = 240,
    height: int = 150,
) -> str:
    """Vertical columns (a histogram over ordered categories, e.g. RHD ℓ = 0, 1, 2, ∞)."""
    top, bottom, left = 34, 22, 6
    n = max(1, len(items))
    slot = (width - 2 * left) / n
    values = _finite([v for _, v in items])
    scale_max = max_value if max_value is not None else (max(values) if values else 1.0)
    scale_max = scale_max if scale_max > 0 else 1.0
    plot_h = height - top - bottom
    body = [
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - left}" y2="{height - bottom}" stroke="{_GRID}"/>'
    ]
    for i, (label, value) in enumerate(items):
        h = max(0.0, min(1.0, value / scale_max)) * plot_h
        x = left + i * slot + slot * 0.15
        w = slot * 0.7
        y = height - bottom - h
        body.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{esc(color)}" rx="2">'
            f"<title>{esc(label)}: {esc(_fmt(value, value_format))}</title></rect>"
        )
        body.append(
            f'<text x="{x + w / 2:.1f}" y="{y - 6:.1f}" text-anchor="middle" fill="{_MUTED}" font-size="11">'
            f"{esc(_fmt(value, value_format))}</text>"
        )
        body.append(_label(x + w / 2, height - bottom + 12, label, limit=8, anchor="middle"))
    return _svg(width, height, title, body)


def stacked_bars(
    rows: Sequence[tuple[str, Mapping[str, float]]],
    categories: Sequence[str],
    *,
    title: str,
    colors: Mapping[str, str] | None = None,
    width: int = 720,
    label_width: int = 170,
    bar_height: int = 20,
) -> str:
    """One 100 % stacked horizontal bar per row (shares of ``categories``), with a legend."""
    colors = colors or {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(categories)}
    present = [c for c in categories if any(counts.get(c, 0) for _, counts in rows)]
    legend_rows = math.ceil(len(present) / 4) if present else 0
    top = 24 + legend_rows * 18
    gap = 6
    height = top + len(rows) * (bar_height + gap) + 4
    span = width - label_width - 10
    body: list[str] = []
    for i, cat in enumerate(present):
        lx = (i % 4) * ((width - 10) / 4)
        ly = 24 + (i // 4) * 18
        body.append(
            f'<rect x="{lx:.1f}" y="{ly}" width="12" height="12" fill="{esc(colors.get(cat, _MUTED))}"/>'
        )
        body.append(_label(lx + 16, ly + 6, cat, limit=24, anchor="start"))
    for i, (label, counts) in enumerate(rows):
        y = top + i * (bar_height + gap)
        body.append(_label(label_width - 6, y + bar_height / 2, label, limit=label_width // 7))
        total = sum(v for v in counts.values() if v > 0)
        x = float(label_width)
        if total <= 0:
            body.append(
                f'<text x="{x:.1f}" y="{y + bar_height / 2:.1f}" fill="{_MUTED}" dominant-baseline="middle">'
                "no data</text>"
            )
            continue
        for cat in present:
            value = counts.get(cat, 0)
            if value <= 0:
                continue
            w = value / total * span
            body.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_height}" '
                f'fill="{esc(colors.get(cat, _MUTED))}"><title>{esc(label)} — {esc(cat)}: '
                f"{esc(_fmt(value, '{:g}'))} ({value / total:.0%})</title></rect>"
            )
            if w > 28:
                body.append(
                    f'<text x="{x + w / 2:.1f}" y="{y + bar_height / 2:.1f}" text-anchor="middle" '
                    f'dominant-baseline="middle" fill="#fff" font-size="11">{value / total:.0%}</text>'
                )
            x += w
    return _svg(width, height, title, body)


def funnel(steps: Sequence[tuple[str, float]], *, title: str, width: int = 300, bar_height: int = 22) -> str:
    """The diagnostic chain as a funnel: centred bars whose width is the share that passed each link."""
    top, gap = 24, 4
    height = top + len(steps) * (bar_height + gap) + 4
    label_w = 52
    span = width - label_w - 8
    body: list[str] = []
    for i, (label, share) in enumerate(steps):
        share = max(0.0, min(1.0, share))
        y = top + i * (bar_height + gap)
        w = share * span
        x = label_w + (span - w) / 2
        body.append(_label(label_w - 6, y + bar_height / 2, label, limit=8))
        body.append(
            f'<rect x="{label_w}" y="{y}" width="{span}" height="{bar_height}" fill="{_GRID}" rx="3"/>'
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_height}" '
            f'fill="{PALETTE[0]}" rx="3"><title>{esc(label)} passed: {share:.0%}</title></rect>'
            f'<text x="{label_w + span / 2:.1f}" y="{y + bar_height / 2:.1f}" text-anchor="middle" '
            f'dominant-baseline="middle" fill="{"#fff" if share > 0.25 else _INK}" font-size="11">'
            f"{share:.0%}</text>"
        )
    return _svg(width, height, title, body)


def diverging_bars(
    items: Sequence[tuple[str, float]],
    *,
    title: str,
    value_format: str = "{:+.1f}",
    width: int = 640,
    label_width: int = 240,
    bar_height: int = 16,
) -> str:
    """Bars left (negative, suppressed) or right (positive, promoted) of a zero line."""
    top, gap = 22, 5
    height = top + len(items) * (bar_height + gap) + 4
    values = _finite([abs(v) for _, v in items])
    scale = max(values) if values and max(values) > 0 else 1.0
    half = (width - label_width - 20) / 2
    zero = label_width + half
    body = [f'<line x1="{zero:.1f}" y1="{top - 4}" x2="{zero:.1f}" y2="{height - 2}" stroke="{_MUTED}"/>']
    for i, (label, value) in enumerate(items):
        y = top + i * (bar_height + gap)
        w = abs(value) / scale * (half - 40)
        x = zero if value >= 0 else zero - w
        color = PALETTE[4] if value >= 0 else PALETTE[2]
        body.append(_label(label_width - 6, y + bar_height / 2, label, limit=label_width // 7))
        body.append(
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_height}" fill="{color}" rx="2">'
            f"<title>{esc(label)}: {esc(_fmt(value, value_format))}</title></rect>"
        )
        tx = x + w + 4 if value >= 0 else x - 4
        anchor = "start" if value >= 0 else "end"
        body.append(
            f'<text x="{tx:.1f}" y="{y + bar_height / 2:.1f}" text-anchor="{anchor}" '
            f'dominant-baseline="middle" fill="{_MUTED}" font-size="11">{esc(_fmt(value, value_format))}</text>'
        )
    return _svg(width, height, title, body)


# --------------------------------------------------------------------------- distributions and series


def _quantile(ordered: list[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def box_plot(
    groups: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    domain: tuple[float, float] | None = (0.0, 1.0),
    width: int = 520,
    label_width: int = 170,
    row_height: int = 22,
) -> str:
    """Horizontal box plots (min, quartiles, median, max) of one metric per group; empty groups say N/A."""
    top = 24
    height = top + len(groups) * row_height + 22
    all_values = [v for _, vals in groups for v in _finite(list(vals))]
    lo, hi = domain if domain is not None else (min([0.0, *all_values]), max([1.0, *all_values]))
    if hi <= lo:
        hi = lo + 1.0
    span = width - label_width - 16

    def sx(v: float) -> float:
        return label_width + (min(max(v, lo), hi) - lo) / (hi - lo) * span

    body: list[str] = []
    for tick in range(5):
        v = lo + (hi - lo) * tick / 4
        x = sx(v)
        body.append(
            f'<line x1="{x:.1f}" y1="{top - 2}" x2="{x:.1f}" y2="{height - 20}" stroke="{_GRID}"/>'
            f'<text x="{x:.1f}" y="{height - 8}" text-anchor="middle" fill="{_MUTED}" font-size="10">{v:g}</text>'
        )
    for i, (label, raw) in enumerate(groups):
        values = sorted(_finite(list(raw)))
        y = top + i * row_height
        mid = y + row_height / 2
        body.append(_label(label_width - 6, mid, label, limit=label_width // 7))
        if not values:
            body.append(
                f'<text x="{label_width + 4}" y="{mid:.1f}" fill="{_MUTED}" dominant-baseline="middle">'
                "N/A (no defined value)</text>"
            )
            continue
        q1, med, q3 = (_quantile(values, q) for q in (0.25, 0.5, 0.75))
        color = PALETTE[i % len(PALETTE)]
        tip = f"{label}: n={len(values)}, min={values[0]:.3g}, q1={q1:.3g}, median={med:.3g}, q3={q3:.3g}, max={values[-1]:.3g}"
        body.append(
            f"<g><title>{esc(tip)}</title>"
            f'<line x1="{sx(values[0]):.1f}" y1="{mid:.1f}" x2="{sx(values[-1]):.1f}" y2="{mid:.1f}" stroke="{_MUTED}"/>'
            f'<rect x="{sx(q1):.1f}" y="{y + 4}" width="{max(1.5, sx(q3) - sx(q1)):.1f}" height="{row_height - 8}" '
            f'fill="{color}" fill-opacity="0.35" stroke="{color}"/>'
            f'<line x1="{sx(med):.1f}" y1="{y + 3}" x2="{sx(med):.1f}" y2="{y + row_height - 3}" '
            f'stroke="{_INK}" stroke-width="2"/></g>'
        )
    return _svg(width, height, title, body)


@dataclass(frozen=True, slots=True)
class _Frame:
    """The plotting area of a line chart: its box in pixels and the data ranges mapped onto it."""

    width: int
    height: int
    top: int
    bottom: int
    left: int
    right: int
    x0: float
    x1: float
    y0: float
    y1: float

    @property
    def pw(self) -> int:
        return self.width - self.left - self.right

    @property
    def ph(self) -> int:
        return self.height - self.top - self.bottom

    def sx(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * self.pw

    def sy(self, y: float) -> float:
        return self.top + (1 - (min(max(y, self.y0), self.y1) - self.y0) / (self.y1 - self.y0)) * self.ph


def _legend(names: list[str], width: int) -> list[str]:
    body: list[str] = []
    for i, name in enumerate(names):
        lx = (i % 4) * ((width - 10) / 4)
        ly = 22 + (i // 4) * 16
        body.append(f'<rect x="{lx:.1f}" y="{ly}" width="12" height="3" fill="{PALETTE[i % len(PALETTE)]}"/>')
        body.append(_label(lx + 16, ly + 2, name, limit=22, anchor="start"))
    return body


def _axes(f: _Frame, xs: list[float], x_label: str) -> list[str]:
    body: list[str] = []
    for tick in range(5):
        v = f.y0 + (f.y1 - f.y0) * tick / 4
        y = f.sy(v)
        body.append(
            f'<line x1="{f.left}" y1="{y:.1f}" x2="{f.width - f.right}" y2="{y:.1f}" stroke="{_GRID}"/>'
            f'<text x="{f.left - 4}" y="{y:.1f}" text-anchor="end" dominant-baseline="middle" fill="{_MUTED}" '
            f'font-size="10">{v:.2g}</text>'
        )
    distinct_x = sorted(set(xs))
    step = max(1, len(distinct_x) // 10)
    for x in distinct_x[::step]:
        body.append(
            f'<text x="{f.sx(x):.1f}" y="{f.height - f.bottom + 14}" text-anchor="middle" fill="{_MUTED}" '
            f'font-size="10">{x:g}</text>'
        )
    if x_label:
        body.append(
            f'<text x="{f.left + f.pw / 2:.1f}" y="{f.height - 4}" text-anchor="middle" fill="{_MUTED}" '
            f'font-size="10">{esc(x_label)}</text>'
        )
    return body


def _guides(f: _Frame, thresholds: Mapping[str, float], markers: Sequence[tuple[float, str]]) -> list[str]:
    body: list[str] = []
    for name, value in thresholds.items():
        y = f.sy(value)
        body.append(
            f'<line x1="{f.left}" y1="{y:.1f}" x2="{f.width - f.right}" y2="{y:.1f}" stroke="{_MUTED}" '
            f'stroke-dasharray="4 3"><title>{esc(name)} = {value:g}</title></line>'
        )
    for x, label in markers:
        body.append(
            f'<line x1="{f.sx(x):.1f}" y1="{f.top}" x2="{f.sx(x):.1f}" y2="{f.top + f.ph}" stroke="{PALETTE[2]}" '
            f'stroke-dasharray="3 3"><title>{esc(label)}</title></line>'
        )
    return body


def _series_lines(f: _Frame, series: Mapping[str, Sequence[tuple[float, float | None]]]) -> list[str]:
    body: list[str] = []
    for i, (name, pts) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        segments: list[list[tuple[float, float]]] = [[]]
        for x, y in pts:
            if y is None or not math.isfinite(float(y)):
                segments.append([])
            else:
                segments[-1].append((f.sx(x), f.sy(float(y))))
        for seg in segments:
            if len(seg) > 1:
                d = " ".join(f"{px:.1f},{py:.1f}" for px, py in seg)
                body.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
        if len(pts) <= 30:
            for x, y in pts:
                if y is not None and math.isfinite(float(y)):
                    body.append(
                        f'<circle cx="{f.sx(x):.1f}" cy="{f.sy(float(y)):.1f}" r="3" fill="{color}">'
                        f"<title>{esc(name)} @ {x:g}: {float(y):.3f}</title></circle>"
                    )
    return body


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float | None]]],
    *,
    title: str,
    x_label: str = "",
    y_range: tuple[float, float] | None = (0.0, 1.0),
    thresholds: Mapping[str, float] | None = None,
    markers: Sequence[tuple[float, str]] = (),
    width: int = 640,
    height: int = 240,
) -> str:
    """Lines over x (rounds, query index); ``None`` values break the line. ``markers`` are vertical
    dashed lines at x with a label (e.g. where a trigger fired); ``thresholds`` horizontal ones."""
    names = list(series)
    legend_rows = math.ceil(len(names) / 4) if names else 0
    xs = [x for pts in series.values() for x, _ in pts]
    ys = _finite([y for pts in series.values() for _, y in pts])
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1.0
    y0, y1 = y_range if y_range is not None else (min(ys, default=0.0), max(ys, default=1.0))
    if y1 <= y0:
        y1 = y0 + 1.0
    frame = _Frame(width, height, 24 + legend_rows * 16, 30, 38, 12, x0, x1, y0, y1)
    body = [
        *_legend(names, width),
        *_axes(frame, xs, x_label),
        *_guides(frame, thresholds or {}, markers),
        *_series_lines(frame, series),
    ]
    return _svg(width, height, title, body)
