"""The HTML page's SVG charts: mean score per difficulty, the histogram of per-row differences, the sequential
decision's confidence sequence, training curves. Each is inline SVG whose title and description say in words
what it draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.formatting import SCORE_MEASURE, percent, training_summary
from pytest_llmeval.records import ADAPTER, BASE
from pytest_llmeval.reporting.html_parts import (
    _ADAPTER_COLOUR,
    _BASE_COLOUR,
    _SAME_COLOUR,
    _WORSE_COLOUR,
    _e,
    _num,
)
from pytest_llmeval.reporting.rows import _EPS, _Row


def _svg_open(chart_id: str, width: int, height: int, title: str, desc: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="{chart_id}-t {chart_id}-d" '
        f'font-family="system-ui, sans-serif" font-size="12">',
        f'<title id="{chart_id}-t">{_e(title)}</title>',
        f'<desc id="{chart_id}-d">{_e(desc)}</desc>',
    ]


def _difficulty_svg(
    chart_id: str, per_difficulty: Mapping[str, Any], results: Mapping[str, Any], adapter: bool
) -> str:
    """Grouped bars of mean score per difficulty (and overall): base hatched orange, adapter solid blue."""
    groups: list[tuple[str, int, float | None, float | None]] = []
    for name in [*DIFFICULTIES, *sorted(set(per_difficulty) - set(DIFFICULTIES))]:
        entry = per_difficulty.get(name)
        if entry and entry.get("n"):
            groups.append((name, int(entry["n"]), entry.get("base"), entry.get("adapter")))
    total = sum(g[1] for g in groups)
    groups.append(("all", total, results.get("base_model_score"), results.get("adapter_score")))
    width, height, left, top, bottom = 130 + 110 * len(groups), 250, 44, 28, 44
    plot_h = height - top - bottom
    desc = "; ".join(
        f"{name} (n={n}): base {percent(b)}" + (f", adapter {percent(a)}" if adapter else "")
        for name, n, b, a in groups
    )
    title = "Mean score per difficulty, base" + (" against adapter" if adapter else " model")
    out = _svg_open(chart_id, width, height, title, desc)
    out.append(
        f'<defs><pattern id="{chart_id}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{_BASE_COLOUR}"/>'
        f'<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/></pattern></defs>'
    )
    for tick in (0, 25, 50, 75, 100):
        y = top + plot_h * (1 - tick / 100)
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#444">{tick}%</text>')
    bar_w = 34
    for i, (name, n, b, a) in enumerate(groups):
        x0 = left + 20 + i * 110
        bars = [("base", b, f"url(#{chart_id}-hatch)")] + (
            [("adapter", a, _ADAPTER_COLOUR)] if adapter else []
        )
        for j, (who, value, fill) in enumerate(bars):
            x = x0 + j * (bar_w + 4)
            if value is None:
                out.append(f'<text x="{x + bar_w / 2}" y="{top + plot_h - 4}" text-anchor="middle">–</text>')
                continue
            h = plot_h * max(0.0, min(1.0, float(value)))
            y = top + plot_h - h
            out.append(
                f'<rect x="{x}" y="{y:.1f}" width="{bar_w}" height="{h:.1f}" fill="{fill}" stroke="#333" '
                f'stroke-width="0.5"><title>{_e(f"{name}, {who}: {percent(value)} (n={n})")}</title></rect>'
            )
            out.append(
                f'<text x="{x + bar_w / 2}" y="{y - 4:.1f}" text-anchor="middle" font-size="10">'
                f"{percent(float(value), 0)}</text>"
            )
        out.append(
            f'<text x="{x0 + (bar_w + 2) * len(bars) / 2}" y="{height - bottom + 16}" text-anchor="middle" '
            f'font-weight="600">{_e(name)}</text>'
        )
        out.append(
            f'<text x="{x0 + (bar_w + 2) * len(bars) / 2}" y="{height - bottom + 30}" text-anchor="middle" '
            f'fill="#444">n={n}</text>'
        )
    legend_x = width - 190
    out.append(
        f'<rect x="{legend_x}" y="6" width="14" height="12" fill="url(#{chart_id}-hatch)" stroke="#333"/>'
    )
    out.append(f'<text x="{legend_x + 18}" y="16">base</text>')
    if adapter:
        out.append(
            f'<rect x="{legend_x + 70}" y="6" width="14" height="12" fill="{_ADAPTER_COLOUR}" stroke="#333"/>'
        )
        out.append(f'<text x="{legend_x + 88}" y="16">adapter</text>')
    out.append("</svg>")
    return "\n".join(out)


def _differences(bench: Mapping[str, Any]) -> tuple[list[float], str, float]:
    """(per-row differences, axis label, half-width of the axis): adapter - base, higher is better."""
    rows = [_Row(str(bench["benchmark_file"]), r) for r in bench.get("rows", [])]
    measure = (bench.get("statistics") or {}).get("measure", SCORE_MEASURE)
    if measure != SCORE_MEASURE:
        # Perplexity benchmarks are compared on cross-entropy (comparison_values): so is the chart.
        values = [-r.measure_delta for r in rows if r.score(ADAPTER) and r.score(BASE)]
        half = max((abs(v) for v in values), default=0.0)
        half = _nice(half) if half > 0 else 1.0
        return values, "base − adapter cross-entropy (nats per token)", half
    values = [d for r in rows if (d := r.delta) is not None]
    return values, "adapter − base score", 1.0


def _nice(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above x."""
    power = 10.0 ** math.floor(math.log10(x))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= x - 1e-15)


_SIDE_BINS = 10  # bins on each side of the "equal" bar


def _bin(value: float, step: float) -> int:
    """Bar index of a difference: 0..9 below zero, 10 for equal, 11..20 above (edges at multiples of step)."""
    if abs(value) <= _EPS:
        return _SIDE_BINS
    # (k*step, (k+1)*step], with slack so that 0.3 - 0.2 lands where 0.1 does
    k = min(_SIDE_BINS - 1, max(0, math.ceil(abs(value) / step - 1e-9) - 1))
    return _SIDE_BINS + 1 + k if value > 0 else _SIDE_BINS - 1 - k


def _histogram_svg(chart_id: str, values: Sequence[float], label: str, half: float) -> str:
    """Histogram of per-row differences on [-half, half]: worse bins, a bar of exact ties, better bins."""
    step = half / _SIDE_BINS
    counts = [0] * (2 * _SIDE_BINS + 1)
    for v in values:
        counts[_bin(v, step)] += 1
    width, height, left, top, bottom = 520, 250, 44, 28, 50
    plot_w, plot_h = width - left - 14, height - top - bottom
    bar_w = plot_w / len(counts)
    peak = max(counts, default=0) or 1
    worse, same = sum(counts[:_SIDE_BINS]), counts[_SIDE_BINS]
    better = len(values) - worse - same

    def edge(v: float) -> float:
        """x of a difference on the axis: the equal bar sits between the negative and positive bins."""
        if abs(v) <= _EPS:
            return left + (_SIDE_BINS + 0.5) * bar_w
        return left + (_SIDE_BINS + v / step + (1 if v > 0 else 0)) * bar_w

    def bin_name(i: int) -> str:
        if i == _SIDE_BINS:
            return "equal"
        k = abs(i - _SIDE_BINS) - 1
        lo, hi = k * step, (k + 1) * step
        return f"{lo:+.3g} to {hi:+.3g}" if i > _SIDE_BINS else f"{-hi:+.3g} to {-lo:+.3g}"

    desc = f"{len(values)} rows: adapter better on {better}, worse on {worse}, equal on {same}. " + "; ".join(
        f"{bin_name(i)}: {c}" for i, c in enumerate(counts) if c
    )
    out = _svg_open(chart_id, width, height, f"Distribution of per-row differences ({label})", desc)
    ticks = sorted({0, peak // 2, peak}) if peak > 1 else [0, 1]
    for tick in ticks:
        y = top + plot_h * (1 - tick / peak)
        out.append(f'<line x1="{left}" x2="{width - 14}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#444">{tick}</text>')
    out.append(f'<text x="{left - 6}" y="{top - 10}" text-anchor="end" fill="#444">rows</text>')
    for i, c in enumerate(counts):
        if not c:
            continue
        fill = _SAME_COLOUR if i == _SIDE_BINS else (_ADAPTER_COLOUR if i > _SIDE_BINS else _WORSE_COLOUR)
        x = left + i * bar_w
        h = plot_h * c / peak
        out.append(
            f'<rect x="{x + 1:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
            f'fill="{fill}" stroke="#333" stroke-width="0.5">'
            f"<title>{_e(f'{bin_name(i)}: {c} rows')}</title></rect>"
        )
        out.append(
            f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h - h - 4:.1f}" text-anchor="middle" '
            f'font-size="10">{c}</text>'
        )
    for frac in (-1.0, -0.5, 0.0, 0.5, 1.0):
        out.append(
            f'<text x="{edge(frac * half):.1f}" y="{top + plot_h + 14}" text-anchor="middle" fill="#444">'
            f"{'0' if frac == 0 else f'{frac * half:+.3g}'}</text>"
        )
    out.append(f'<text x="{left}" y="{height - 8}" fill="{_WORSE_COLOUR}">◀ adapter worse ({worse})</text>')
    out.append(
        f'<text x="{width - 14}" y="{height - 8}" text-anchor="end" fill="{_ADAPTER_COLOUR}">'
        f"adapter better ({better}) ▶</text>"
    )
    out.append(f'<text x="{edge(0):.1f}" y="{height - 8}" text-anchor="middle">equal: {same}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _sequence_svg(chart_id: str, column: str, decision: Mapping[str, Any], planned: int) -> str:
    """--llmeval-sequential: the anytime-valid confidence sequence for the mean paired difference (adapter
    − base) at every look, narrowing as rows come in, with the row where the gate was decided marked."""
    looks = [look for look in decision.get("looks") or [] if look.get("lower") is not None]
    width, height, left, top, bottom = 520, 230, 52, 24, 44
    plot_w, plot_h = width - left - 14, height - top - bottom
    rows = max(planned, 1)

    def x(n: float) -> float:
        return left + plot_w * n / rows

    def y(v: float) -> float:
        return top + plot_h * (1 - (max(-1.0, min(1.0, v)) + 1) / 2)

    decided = decision.get("decided")
    at = decision.get("at")
    desc = "; ".join(f"after {lk['rows']} rows: {lk['lower']:+.3f} to {lk['upper']:+.3f}" for lk in looks)
    title = f"{column} − base: anytime-valid {1 - float(decision.get('alpha', 0.05)):.0%} confidence sequence"
    out = _svg_open(chart_id, width, height, title, desc or "no look yet")
    for v in (-1.0, -0.5, 0.0, 0.5, 1.0):
        stroke = "#999" if v == 0 else "#e4e4e4"
        out.append(f'<line x1="{left}" x2="{width - 14}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{stroke}"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#444">{v:+.1f}</text>')
    if looks:
        upper = " ".join(f"{x(lk['rows']):.1f},{y(lk['upper']):.1f}" for lk in looks)
        lower = " ".join(f"{x(lk['rows']):.1f},{y(lk['lower']):.1f}" for lk in reversed(looks))
        out.append(
            f'<polygon points="{upper} {lower}" fill="{_ADAPTER_COLOUR}" fill-opacity="0.25" '
            f'stroke="{_ADAPTER_COLOUR}"/>'
        )
    if at is not None:
        out.append(
            f'<line x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{top}" y2="{top + plot_h}" stroke="#000" '
            f'stroke-dasharray="4 3"><title>{_e(f"decided after {at} rows: {decided}")}</title></line>'
        )
        out.append(
            f'<text x="{x(at) + 4:.1f}" y="{top + 12}" fill="#000">decided: {_e(decided)} ({at} rows)</text>'
        )
    out.append(f'<text x="{left}" y="{height - 8}" fill="#444">0</text>')
    out.append(
        f'<text x="{width - 14}" y="{height - 8}" text-anchor="end" fill="#444">{planned} rows planned</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


class _Series(NamedTuple):
    """One line of a curve chart: [step, value] points in step order."""

    label: str
    colour: str
    points: Sequence[Sequence[float]]
    dots: bool = False  # a dot at every point (evaluations: few, and each one a measurement)


class _Mark(NamedTuple):
    """A step a curve chart marks: a vertical line (value None) or a dot on a point (a spike)."""

    step: float
    label: str
    colour: str
    value: float | None = None
    dot: bool = False  # a dot at (step, value); at the top edge when value is None (a norm not finite)


def _curve_svg(
    chart_id: str, title: str, desc: str, series: Sequence[_Series], marks: Sequence[_Mark]
) -> str:
    """A line chart of curves over training steps (loss, eval loss, gradient norm), with marked steps."""
    width, height, left, top, bottom, right = 520, 250, 56, 34, 40, 14
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [float(p[0]) for s in series for p in s.points] + [m.step for m in marks]
    ys = [float(p[1]) for s in series for p in s.points if p[1] is not None]
    ys += [m.value for m in marks if m.value is not None]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if x1 <= x0:
        x0, x1 = x0 - 1, x1 + 1
    pad = (y1 - y0) * 0.05 if y1 > y0 else max(abs(y0) * 0.05, 1e-6)
    y0, y1 = y0 - pad, y1 + pad

    def x(step: float) -> float:
        return left + plot_w * (step - x0) / (x1 - x0)

    def y(value: float | None) -> float:
        return top if value is None else top + plot_h * (1 - (value - y0) / (y1 - y0))

    out = _svg_open(chart_id, width, height, title, desc)
    for i in range(5):
        value = y0 + (y1 - y0) * i / 4
        at_y = y(value)
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{at_y:.1f}" y2="{at_y:.1f}" stroke="#e4e4e4"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end" fill="#444">{value:.3g}</text>'
        )
    for step in sorted({x0, (x0 + x1) / 2, x1}):
        tick = f'<text x="{x(step):.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#444">'
        out.append(f"{tick}{step:.0f}</text>")
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle" fill="#444">step</text>')
    for mark in marks:
        if mark.dot:
            continue
        out.append(
            f'<line x1="{x(mark.step):.1f}" x2="{x(mark.step):.1f}" y1="{top}" y2="{top + plot_h}" '
            f'stroke="{mark.colour}" stroke-width="1.5" stroke-dasharray="5 3">'
            f"<title>{_e(mark.label)}</title></line>"
        )
    for line in series:
        drawn = " ".join(
            f"{x(float(p[0])):.1f},{y(float(p[1])):.1f}" for p in line.points if p[1] is not None
        )
        if drawn:
            out.append(f'<polyline points="{drawn}" fill="none" stroke="{line.colour}" stroke-width="1.5"/>')
        if line.dots:
            for p in line.points:
                if p[1] is not None:
                    out.append(
                        f'<circle cx="{x(float(p[0])):.1f}" cy="{y(float(p[1])):.1f}" r="3" '
                        f'fill="{line.colour}">'
                        f"<title>{_e(f'{line.label}, step {p[0]}: {float(p[1]):.4g}')}</title></circle>"
                    )
    for mark in marks:
        if mark.dot:
            out.append(
                f'<circle cx="{x(mark.step):.1f}" cy="{y(mark.value):.1f}" r="5" fill="none" '
                f'stroke="{mark.colour}" stroke-width="2"><title>{_e(mark.label)}</title></circle>'
            )
    # The legend: each curve, then each kind of mark, in one row above the plot.
    keys = [(s.label, s.colour, "line") for s in series if s.points]
    keys += list({(m.label.split(":")[0], m.colour, "dot" if m.dot else "dash"): None for m in marks})
    at = left
    for label, colour, kind in keys:
        if kind == "dot":
            out.append(
                f'<circle cx="{at + 7}" cy="14" r="4" fill="none" stroke="{colour}" stroke-width="2"/>'
            )
        else:
            dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
            out.append(
                f'<line x1="{at}" x2="{at + 14}" y1="14" y2="14" stroke="{colour}" stroke-width="2"{dash}/>'
            )
        out.append(f'<text x="{at + 18}" y="18">{_e(label)}</text>')
        at += 26 + 7 * len(label)
    out.append("</svg>")
    return "\n".join(out)


def _training_charts(chart_id: str, name: str, entry: Mapping[str, Any]) -> list[str]:
    """A column's training curves (results.json `training`): training and eval loss with the convergence
    step and the overfitting onset marked; gradient norm with its spikes circled."""
    curves = entry.get("curves") or {}
    overfitting = entry.get("overfitting") or {}
    marks = []
    if entry.get("convergence_step") is not None:
        step = entry["convergence_step"]
        marks.append(_Mark(step, f"converged: from step {step}", "#000000"))
    if overfitting.get("detected"):
        step = overfitting["onset_step"]
        marks.append(_Mark(step, f"overfitting: from step {step}", _WORSE_COLOUR))
    losses = [
        _Series("training loss", _ADAPTER_COLOUR, curves.get("loss") or []),
        _Series("eval loss", _BASE_COLOUR, curves.get("eval_loss") or [], dots=True),
    ]
    summary = training_summary(entry)
    loss = _curve_svg(f"{chart_id}-loss", f"{name}: training and eval loss per step", summary, losses, marks)
    norms = {float(p[0]): p[1] for p in curves.get("grad_norm") or []}
    spikes = [
        _Mark(s, f"spike: step {s}, norm {_num(norms.get(s), '.4g')}", _WORSE_COLOUR, norms.get(s), dot=True)
        for s in (entry.get("grad_norm") or {}).get("spikes") or []
    ]
    stats = entry.get("grad_norm") or {}
    desc = (
        f"gradient norm: mean {_num(stats.get('mean'), '.4g')}, max {_num(stats.get('max'), '.4g')}, "
        f"{len(spikes)} spike(s)"
    )
    grad = _curve_svg(
        f"{chart_id}-grad",
        f"{name}: gradient norm per step",
        desc,
        [_Series("gradient norm", _ADAPTER_COLOUR, curves.get("grad_norm") or [])],
        spikes,
    )
    return ['<div class="charts">', f"<figure>{loss}</figure>", f"<figure>{grad}</figure>", "</div>"]
