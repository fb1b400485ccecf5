"""Sections of the HTML page beside each benchmark's charts and rows: its gates, its paired statistics, its
sequential decision, perplexity, composite score and fluency; the run's training, PEFT against SFT, cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmeval.formatting import (
    MISSING,
    SCORE_MEASURE,
    composite_value,
    level,
    measure_difference,
    measure_interval,
    measure_unit,
    name_of_test,
    p_value,
    training_summary,
)
from pytest_llmeval.records import ADAPTER, BASE
from pytest_llmeval.reporting.html_charts import _sequence_svg, _training_charts
from pytest_llmeval.reporting.html_parts import _e, _kv_table, _num

# Each gate status as a word and a symbol, so that its colour (html_parts' palette) is never all it says.
_STATUS_MARK = {"pass": "✔ PASS", "warn": "! WARN", "fail": "✘ FAIL", "skip": "– SKIP"}


def _sequential_html(seq: Mapping[str, Any], slug: str) -> list[str]:
    said = seq.get("reason") or "not decided early: all planned rows ran"
    out = [f"<h3>Sequential decision</h3><p>{_e(said)}</p>"]
    for i, (column, decision) in enumerate((seq.get("decisions") or {}).items()):
        out.append(_sequence_svg(f"{slug}-seq{i}", column, decision, int(seq.get("planned_rows") or 0)))
    return out


def _stats_line(stats: Mapping[str, Any] | None) -> str:
    if not stats:
        return ""
    measure = str(stats.get("measure", SCORE_MEASURE))
    alpha = stats.get("alpha")
    text = (
        f"adapter − base, {measure_unit(measure)}: {measure_difference(stats.get('difference'), measure)} "
        f"({level(float(stats.get('confidence', 0.95)))} CI "
        f"{measure_interval(stats.get('ci_low'), stats.get('ci_high'), measure)}), "
        f"{name_of_test(str(stats.get('test')))} p = {p_value(stats.get('p_value'), alpha)}, "
        f"n = {stats.get('n')}"
    )
    if stats.get("discordant"):
        wins, losses = stats["discordant"]
        text += f", adapter-only right {wins} / base-only right {losses}"
    if stats.get("effect_size") is not None:
        text += f", d_z = {float(stats['effect_size']):.2f}"
    verdict = "significant" if stats.get("significant") else "not significant"
    text += f" — {verdict} at α = {alpha}"
    return f'<p class="stats">{_e(text)}</p>'


def _gates_html(gates: Mapping[str, Any]) -> list[str]:
    if not gates:
        return []
    out = ["<h3>Gates</h3>", '<ul class="gates">']
    for name, verdict in gates.items():
        status = str(verdict.get("status", "?"))
        mark = _STATUS_MARK.get(status, status.upper())
        out.append(
            f'<li class="{_e(status)}"><span class="badge">{_e(mark)}</span><strong>{_e(name)}</strong>: '
            f"{_e(verdict.get('message', ''))}</li>"
        )
    out.append("</ul>")
    return out


def _training_html(document: Mapping[str, Any]) -> list[str]:
    """Each column with a training log: its summary, its curves, its training gates."""
    trained = [m for m in document.get("models") or [] if m.get("training")]
    if not trained:
        return []
    out = ['<section aria-labelledby="training"><h2 id="training">Training</h2>']
    for i, model in enumerate(trained):
        name, entry = str(model.get("name")), model["training"]
        out.append(f"<h3>{_e(name)}</h3>")
        out.append(f"<p>{_e(training_summary(entry))}</p>")
        out.append(
            f'<p class="muted">log: {_e(entry.get("log"))} ({_e(entry.get("found"))}); smoothed over '
            f"{_e(entry.get('window'))} logged steps; curves of at most "
            f"{_e((entry.get('curves') or {}).get('max_points'))} points each</p>"
        )
        out += _training_charts(f"training{i}", name, entry)
        out += _gates_html(entry.get("gates") or {})
    out.append("</section>")
    return out


def _peft_vs_sft_html(comparison: Mapping[str, Any]) -> list[str]:
    """--llmeval-peft-vs-sft: the adaptation document's success criteria (§7.2), the benchmarks' ratios and
    paired tests, and the recommendations (§6.2); the Markdown report beside results.json has it all."""
    from pytest_llmeval.reporting.peft_sft_report import (
        measured_text,
        paired_test_text,
        recommendations,
        threshold_text,
    )

    peft, sft = comparison["peft"], comparison["sft"]
    out = [
        '<section aria-labelledby="peft-vs-sft"><h2 id="peft-vs-sft">PEFT against SFT</h2>',
        f"<p>PEFT: {_e(peft.get('name'))} (column {_e(peft.get('column'))}); SFT: {_e(sft.get('name'))} "
        f"(column {_e(sft.get('column'))}). The full report: peft_vs_sft.md beside results.json.</p>",
    ]
    out += _kv_table(
        "Success criteria",
        ("criterion", "level", "measured", "needs", "status", "why"),
        (
            (c["name"], c["level"], measured_text(c), threshold_text(c), c["status"], c.get("reason") or "")
            for c in comparison["criteria"]
        ),
    )
    out += _kv_table(
        "Benchmarks (performance ratio PEFT / SFT; paired test PEFT − SFT)",
        ("benchmark", "measure", "PEFT", "SFT", "ratio", "paired test"),
        (
            (
                b["benchmark"],
                b["measure"],
                MISSING if b["peft"] is None else f"{b['peft']:.4g}",
                MISSING if b["sft"] is None else f"{b['sft']:.4g}",
                MISSING if b["performance_ratio"] is None else f"{b['performance_ratio']:.3f}",
                paired_test_text(b["paired_test"]),
            )
            for b in comparison["benchmarks"]
        ),
    )
    advice = recommendations(comparison)  # type: ignore[arg-type]
    if advice:
        out.append("<h3>Recommendations</h3><ul>" + "".join(f"<li>{_e(a)}</li>" for a in advice) + "</ul>")
    out.append("</section>")
    return out


def _cost_html(cost: Mapping[str, Any]) -> list[str]:
    """What each model spent on each benchmark: tokens, seconds, rows per second, dollars."""
    header = ["benchmark", "model", "rows", "from cache", "prompt tokens", "generated tokens", "seconds"]
    header += ["rows/s", "USD"]
    rows = [
        [
            name,
            column,
            c["rows"],
            c["cached_rows"],
            MISSING if c["prompt_tokens"] is None else c["prompt_tokens"],
            MISSING if c["generated_tokens"] is None else c["generated_tokens"],
            _num(c["generation_s"] + c["scoring_s"], ".2f"),
            _num(c["rows_per_s"], ".2f"),
            _num(c["usd"], ".4f"),
        ]
        for name, columns in cost.get("benchmarks", {}).items()
        for column, c in columns.items()
    ]
    loads = ", ".join(f"{column} {c['load_s']:.1f} s" for column, c in cost["models"].items() if c["load_s"])
    caption = "What the run cost" + (f" (loading weights: {loads})" if loads else "")
    out = ['<section aria-labelledby="cost"><h2 id="cost">Cost</h2>', *_kv_table(caption, header, rows)]
    if cost.get("stopped"):
        out.append(f"<p><strong>Stopped early:</strong> {_e(cost['stopped'])}</p>")
    return [*out, "</section>"]


def _perplexity_html(ppl: Mapping[str, Any]) -> list[str]:
    sides = [w for w in (BASE, ADAPTER) if ppl.get(w)]
    fields = [
        ("perplexity (token-weighted)", "perplexity", ".2f"),
        ("mean text perplexity", "mean_text_perplexity", ".2f"),
        ("cross-entropy (nats/token)", "cross_entropy", ".4f"),
        ("bits per character", "bits_per_character", ".3f"),
        ("bits per byte", "bits_per_byte", ".3f"),
        ("texts", "n_texts", ".0f"),
        ("tokens", "n_tokens", ".0f"),
    ]
    rows = [[label, *(_num(ppl[w].get(key), fmt) for w in sides)] for label, key, fmt in fields]
    out = ["<h3>Perplexity</h3>", *_kv_table("Corpus perplexity", ["", *sides], rows)]
    notes = []
    if ppl.get("perplexity_ratio") is not None:
        notes.append(f"adapter/base perplexity ×{float(ppl['perplexity_ratio']):.3f}")
    window = ppl.get("window")
    if window:
        notes.append(
            f"window {window.get('max_length')}, stride {window.get('stride')}; {window.get('first_token')}"
        )
    if notes:
        out.append(f'<p class="muted">{_e("; ".join(notes))}</p>')
    return out


def _composite_html(composite: Mapping[str, Any], heading: str, adapter: bool) -> list[str]:
    # results.json has an adapter entry in a base-only run too (with no value): only models that ran.
    sides = [w for w in ([BASE, ADAPTER] if adapter else [BASE]) if composite.get(w)]
    first = composite[sides[0]]
    rows = [
        [metric, f"{float(weight):g}", *(_num(composite[w]["metrics"].get(metric), ".2f") for w in sides)]
        for metric, weight in first.get("weights", {}).items()
    ]
    # No value: the reason stands in the cell instead (the metrics present carry too little weight).
    rows.append(["composite (0–100)", "", *(composite_value(composite[w]) for w in sides)])
    out = [
        f"<h3>{_e(heading)}</h3>",
        *_kv_table("Weighted composite score", ["metric", "weight", *sides], rows),
    ]
    renormalised = [w for w in sides if composite[w].get("value") is not None and composite[w].get("missing")]
    if renormalised:
        missing = composite[renormalised[0]]["missing"]
        out.append(f'<p class="muted">No rows for: {_e(", ".join(missing))} (weights renormalised).</p>')
    return out


def _metrics_html(metrics: Mapping[str, Any], adapter: bool) -> list[str]:
    """Rows naming several metrics: each metric's mean per model, and how many rows' pass it decided."""
    sides = [BASE, ADAPTER] if adapter else [BASE]
    rows = [
        [kind, *(_num(entry.get(w), ".3f") for w in sides), str(entry.get("n_deciding", 0))]
        for kind, entry in metrics.items()
    ]
    header = ["metric", *sides, "rows it decides"]
    return _kv_table("Every metric of the rows (mean over the rows each scored)", header, rows)


def _fluency_html(fluency: Mapping[str, Any]) -> list[str]:
    """--llmeval-fluency, per model: perplexity of its own outputs, beside the reference texts' under the
    same scorer."""
    sides = [w for w in (BASE, ADAPTER) if fluency.get(w)] + sorted(set(fluency) - {BASE, ADAPTER})

    def corpus(who: str, which: str, key: str, fmt: str) -> str:
        found = fluency[who].get(which)
        return _num(None if not found else found.get(key), fmt)

    # An external scorer (--llmeval-ppl-model) measured every model's outputs, not each its own.
    own = (
        "perplexity of the outputs"
        if any(fluency[w].get("external") for w in sides)
        else "perplexity of its own outputs"
    )
    rows = [
        ["scored by", *(str(fluency[w].get("scorer", MISSING)) for w in sides)],
        [own, *(corpus(w, "output", "perplexity", ".2f") for w in sides)],
        ["perplexity of the references", *(corpus(w, "reference", "perplexity", ".2f") for w in sides)],
        ["outputs / references", *(_num(fluency[w].get("ratio_to_reference"), ".3f") for w in sides)],
        [
            "cross-entropy difference (nats/token)",
            *(_num(fluency[w].get("cross_entropy_difference"), "+.4f") for w in sides),
        ],
        ["perplexity score (0–100)", *(_num(fluency[w].get("perplexity_score"), ".2f") for w in sides)],
        ["outputs measured", *(corpus(w, "output", "n_texts", ".0f") for w in sides)],
        ["empty outputs", *(str(fluency[w].get("n_empty_outputs", 0)) for w in sides)],
    ]
    external = any(fluency[w].get("external") for w in sides)
    caption = (
        "Perplexity of each model's outputs under one external scorer (token-weighted)"
        if external
        else "Perplexity of each model's generated outputs, under that model (token-weighted)"
    )
    out = ["<h3>Fluency</h3>", *_kv_table(caption, ["", *sides], rows)]
    for who in sides:
        if fluency[who].get("chest_xray"):
            out += _chest_xray_html(who, fluency[who]["chest_xray"])
    return out


def _chest_xray_html(who: str, summary: Mapping[str, Any]) -> list[str]:
    """The chest X-ray document's per-study summary of one model's outputs: statistics, ranges, flags."""
    stats = ["mean", "median", "std", "min", "max"]
    rows = [
        [figure.replace("_", " "), *(_num(values.get(s), ".3f") for s in stats)]
        for figure, values in summary.get("per_study", {}).items()
    ]
    out = _kv_table(f"{who}: per study ({summary.get('n_studies')} studies)", ["", *stats], rows)
    ranges = [
        [
            f"{kind.replace('_', ' ')} ({side})",
            ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()),
        ]
        for kind in ("perplexity_ranges", "cross_entropy_ranges")
        for side, counts in (summary.get(kind) or {}).items()
    ]
    if summary.get("ratio_ranges"):
        counts = summary["ratio_ranges"]
        ranges.append(
            ["ratio to reference", ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())]
        )
    ranges.append(
        ["review recommended (perplexity > 50)", ", ".join(summary.get("review_recommended") or []) or "none"]
    )
    ranges.append(
        ["potential issues (perplexity > 100)", ", ".join(summary.get("potential_issues") or []) or "none"]
    )
    return out + _kv_table(f"{who}: the chest X-ray document's ranges and review flags", ["", ""], ranges)
