"""The interference matrix on the HTML page: every model against the base on every benchmark, as a heatmap
table (its terminal table is formatting.matrix_lines).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_llmeval.formatting import (
    IN_DOMAIN_MARK,
    MATRIX_LEGEND,
    MISSING,
    REFERENCE_NOTE,
    benchmark_labels,
    measure_difference,
    measure_unit,
    measure_value,
)
from pytest_llmeval.reporting.html_parts import _e

# The interference matrix's heatmap: a diverging blue-orange scale (the ends of ColorBrewer's RdBu and PuOr,
# through their common near-white), which the common colour-vision deficiencies keep apart; each cell prints
# its value too, so the colour only helps the eye find the large changes.
_GAIN_COLOUR = "#2166ac"
_LOSS_COLOUR = "#b35806"
_NEUTRAL_COLOUR = "#f7f7f7"
# Text on a heatmap cell: whichever of these contrasts more with the cell. Pure black, not the page's
# #1b1b1b: then one of the two reaches WCAG AA (4.5:1) on every colour of the scale.
_LIGHT_TEXT = "#ffffff"
_DARK_TEXT = "#000000"


def _rgb(colour: str) -> tuple[int, int, int]:
    """`#rrggbb` as its three channels, 0-255."""
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def change_colour(change: float, scale: float) -> str:
    """A heatmap cell's background: near-white for no change, toward blue for gains and orange for losses,
    at the full end colour where |change| reaches `scale` (the largest change of its measure)."""
    if scale <= 0 or not math.isfinite(change) or change == 0:
        return _NEUTRAL_COLOUR
    share = min(1.0, abs(change) / scale)
    end = _rgb(_GAIN_COLOUR if change > 0 else _LOSS_COLOUR)
    # Straight lines in sRGB from the neutral to each end: each channel moves monotonically with |change|,
    # and a gain and a loss of one size sit at the same share of the way to their ends.
    mixed = (round(n + (e - n) * share) for n, e in zip(_rgb(_NEUTRAL_COLOUR), end, strict=True))
    return "#" + "".join(f"{c:02x}" for c in mixed)


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    linear = [
        c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in _rgb(colour)
    ]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def text_colour(background: str) -> str:
    """White or black text, whichever contrasts more with `background` (WCAG contrast ratio)."""
    lum = _luminance(background)
    # Contrast ratios (lighter + 0.05) / (darker + 0.05): white's luminance is 1, black's 0.
    return _LIGHT_TEXT if 1.05 / (lum + 0.05) > (lum + 0.05) / 0.05 else _DARK_TEXT


def _matrix_scales(matrix: Mapping[str, Any]) -> dict[str, float]:
    """Per measure, the largest |change| in the matrix: score columns (points) and cross-entropy columns
    (nats) cannot share one scale, so each colours against its own largest change."""
    scales: dict[str, float] = {}
    measures = [str(m) for m in matrix["measures"]]
    for model in matrix["models"]:
        for change, measure in zip(model["change"], measures, strict=True):
            if change is not None and math.isfinite(change):
                scales[measure] = max(scales.get(measure, 0.0), abs(float(change)))
    return scales


def _matrix_html(matrix: Mapping[str, Any], slugs: Mapping[str, str]) -> list[str]:
    """The interference matrix as a heatmap table: the base's values, then each model's change against it."""
    benchmarks = [str(b) for b in matrix["benchmarks"]]
    measures = [str(m) for m in matrix["measures"]]
    scales = _matrix_scales(matrix)
    out = [
        '<section id="interference-matrix" aria-labelledby="interference-matrix-h">',
        '<h2 id="interference-matrix-h">Interference matrix</h2>',
        "<p>Each model against the base, benchmark by benchmark, on the rows both scored: an adapter should "
        "gain on its own benchmark (marked) and lose nothing on the others.</p>",
        '<table class="matrix"><caption>Change against the base (model − base); the first row is the '
        "base's own mean</caption><thead><tr>",
        '<th scope="col">model</th><th scope="col">kind</th>',
    ]
    for benchmark, label, measure in zip(benchmarks, benchmark_labels(benchmarks), measures, strict=True):
        name = _e(label)
        if benchmark in slugs:
            name = f'<a href="#{slugs[benchmark]}">{name}</a>'
        out.append(
            f'<th scope="col" title="{_e(benchmark)}">{name}<br>'
            f'<span class="muted">{_e(measure_unit(measure))}</span></th>'
        )
    out.append("</tr></thead><tbody>")
    base_cells = "".join(
        f'<td class="num">{_e(measure_value(v, m))}</td>'
        for v, m in zip(matrix["base"], measures, strict=True)
    )
    out.append(f'<tr class="base"><th scope="row">base</th><td>base model</td>{base_cells}</tr>')
    for model in matrix["models"]:
        kind = str(model["kind"])
        label = REFERENCE_NOTE if kind == "reference" else kind
        cells = [f'<th scope="row">{_e(model["name"])}</th>', f"<td>{_e(label)}</td>"]
        for i, (benchmark, measure) in enumerate(zip(benchmarks, measures, strict=True)):
            cells.append(_matrix_cell(model, i, benchmark, measure, scales.get(measure, 0.0)))
        out.append(f'<tr class="{_e(kind)}">{"".join(cells)}</tr>')
    out.append("</tbody></table>")
    out.append(_matrix_legend(scales, any(m["kind"] == "reference" for m in matrix["models"])))
    out.append("</section>")
    return out


def _matrix_cell(model: Mapping[str, Any], i: int, benchmark: str, measure: str, scale: float) -> str:
    """A model's change on benchmark i: printed, coloured by the change, outlined where in-domain."""
    value, change, domain = model["values"][i], model["change"][i], model["domain"][i]
    where = {"in": " (in-domain)", "out": " (out-of-domain)"}.get(str(domain), "")
    classes = "change in-domain" if domain == "in" else "change"
    if change is None:
        title = f"{model['name']} on {benchmark}{where}: no row with both scores"
        return f'<td class="{classes}" title="{_e(title)}">{MISSING}</td>'
    background = change_colour(float(change), scale)
    title = (
        f"{model['name']} on {benchmark}{where}: {measure_value(value, measure)}, "
        f"{measure_difference(change, measure)} against the base over {model['n'][i]} rows both scored"
    )
    shown = measure_difference(change, measure) + (f" {IN_DOMAIN_MARK}" if domain == "in" else "")
    return (
        f'<td class="{classes}" style="background-color: {background}; color: {text_colour(background)}" '
        f'title="{_e(title)}">{_e(shown)}<small>{_e(measure_value(value, measure))}</small></td>'
    )


def _matrix_legend(scales: Mapping[str, float], reference: bool) -> str:
    """What the colours and marks mean, and the change each measure's full colour stands for."""
    # In column order (the order _matrix_scales met the measures in), each measure in its own unit.
    full = "; ".join(f"{measure_unit(m)} ±{measure_difference(s, m).lstrip('+')}" for m, s in scales.items())
    return (
        '<p class="muted legend">'
        f'<span class="swatch" style="background: {_LOSS_COLOUR}"></span> loss · '
        f'<span class="swatch" style="background: {_NEUTRAL_COLOUR}"></span> no change · '
        f'<span class="swatch" style="background: {_GAIN_COLOUR}"></span> gain against the base; '
        f"full colour at the largest change of each measure ({_e(full or 'none')}). Each cell prints its "
        "change and, below it, the model's own mean. "
        f'<span class="swatch in-domain"></span> {_e(MATRIX_LEGEND)}. '
        + (f"Italic rows: {_e(REFERENCE_NOTE)}." if reference else "")
        + "</p>"
    )
