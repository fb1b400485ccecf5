"""Reports for people: the spot check (Markdown) and a self-contained HTML page, made from results.json.

Pure: each takes the results.json document and returns text. No pytest, no torch; the HTML needs no
network when viewed (inline CSS and SVG, a few lines of inline JS that the page does not depend on).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pytest_llmeval import records
from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.formatting import (
    IN_DOMAIN_MARK,
    MATRIX_LEGEND,
    MISSING,
    REFERENCE_NOTE,
    SCORE_MEASURE,
    benchmark_labels,
    composite_value,
    level,
    matrix_lines,
    md_block,
    md_code,
    md_escape,
    measure_difference,
    measure_interval,
    measure_unit,
    measure_value,
    name_of_test,
    out_of_domain,
    p_value,
    percent,
    points,
    training_summary,
)
from pytest_llmeval.records import ADAPTER, BASE
from pytest_llmeval.results import NO_EFFECT

# Scores that agree to within this are equal: means of floats are not exact (see stats._NOISE).
_EPS = 1e-9
# Characters of a model output the spot check shows in full; longer ones are cut, with a marker saying so.
_MD_MAX = 1200
# Outputs this short and on one line go into the side-by-side table; longer ones get two blocks below it.
_MD_INLINE = 100
# Characters of an output the HTML row table shows: a 10k-row run with long outputs must stay viewable.
_HTML_MAX = 2000

# Okabe-Ito colours (distinguishable with the common colour-vision deficiencies); the base's bars are
# hatched as well, and every gate status carries a word and a symbol, so nothing relies on colour alone.
_BASE_COLOUR = "#E69F00"
_ADAPTER_COLOUR = "#0072B2"
_WORSE_COLOUR = "#D55E00"
_SAME_COLOUR = "#8c8c8c"
_STATUS_MARK = {"pass": "✔ PASS", "warn": "! WARN", "fail": "✘ FAIL", "skip": "– SKIP"}

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


# ---------------------------------------------------------------------------------------------------------
# Rows: scores, what changed, and the spot check's selection


@dataclass(frozen=True)
class _Row:
    benchmark: str  # the benchmark entry's benchmark_file: results.json rows leave it to their parent
    record: Mapping[str, Any]

    @property
    def nodeid(self) -> str:
        return str(self.record["nodeid"])

    def score(self, who: str) -> Mapping[str, Any] | None:
        return records.score(self.record, who)

    def value(self, who: str) -> float | None:
        return records.score_value(self.record, who)

    def passed(self, who: str) -> bool | None:
        score = self.score(who)
        if score is None:
            return None
        return bool(score.get("passed", float(score["value"]) >= float(score.get("threshold", 1.0))))

    @property
    def has_adapter(self) -> bool:
        return str(self.record["evaluated"]) == ADAPTER

    @property
    def delta(self) -> float | None:
        """Adapter score - base score; None unless both were scored."""
        a, b = self.value(ADAPTER), self.value(BASE)
        return None if a is None or b is None else a - b

    @property
    def measure_delta(self) -> float:
        """Perplexity rows: the adapter's rise in cross-entropy (nats per token); 0 for other rows."""
        a, b = self.score(ADAPTER), self.score(BASE)
        if a is None or b is None or "cross_entropy" not in a or "cross_entropy" not in b:
            return 0.0
        return float(a["cross_entropy"]) - float(b["cross_entropy"])

    @property
    def change(self) -> str:
        """regression (pass -> fail), worse, fixed (fail -> pass), better, same, base_only, error, skipped."""
        if self.record.get("skipped"):
            return "skipped"
        if self.record.get("error") or self.value(BASE) is None:
            return "error"
        if not self.has_adapter:
            return "base_only"
        delta = self.delta
        if delta is None:
            return "error"
        base, adapter = self.passed(BASE), self.passed(ADAPTER)
        if base and not adapter:
            return "regression"
        if adapter and not base:
            return "fixed"
        if delta < -_EPS:
            return "worse"
        if delta > _EPS:
            return "better"
        return "same"


def _rows(document: Mapping[str, Any]) -> list[_Row]:
    return [
        _Row(str(bench["benchmark_file"]), row)
        for bench in document.get("benchmarks", [])
        for row in bench.get("rows", [])
    ]


@dataclass(frozen=True)
class _Pick:
    row: _Row
    why: str  # "regression", "failure", "improvement", "other"


_Key = Callable[[_Row], tuple[Any, ...]]


def _no_key(row: _Row) -> tuple[Any, ...]:
    return ()


def _pick_spread(
    candidates: Iterable[_Row],
    key: _Key,
    count: int,
    taken: dict[str, int],
    chosen: set[str],
    then: _Key = _no_key,
) -> list[_Row]:
    """Greedily the `count` best rows by `key`; among equals, the benchmark picked least so far, `then`."""
    pool = [r for r in candidates if r.nodeid not in chosen]
    out: list[_Row] = []
    while pool and len(out) < count:
        best = min(pool, key=lambda r: (*key(r), taken.get(r.benchmark, 0), *then(r), r.nodeid))
        pool.remove(best)
        out.append(best)
        chosen.add(best.nodeid)
        taken[best.benchmark] = taken.get(best.benchmark, 0) + 1
    return out


class SpotCheckPick(NamedTuple):
    """A row the spot check shows: its benchmark file, the row, and one sentence on why it was chosen."""

    benchmark: str
    row: Mapping[str, Any]
    why: str


def select_spot_check(document: Mapping[str, Any], n: int = 5) -> list[SpotCheckPick]:
    """The rows the spot check shows, with why each was chosen: see SELECTION_RULE."""
    rows = _rows(document)
    taken: dict[str, int] = {}
    chosen: set[str] = set()
    picks: list[_Pick] = []

    def add(why: str, candidates: Iterable[_Row], key: _Key, count: int, then: _Key = _no_key) -> None:
        found = _pick_spread(candidates, key, min(count, n - len(picks)), taken, chosen, then)
        picks.extend(_Pick(r, why) for r in found)

    scored = [r for r in rows if r.change not in ("error", "skipped")]
    unscored = [r for r in rows if r.change in ("error", "skipped")]
    if document.get("mode") == "base_only" or not any(r.has_adapter for r in rows):
        add("failure", [r for r in scored if not r.passed(BASE)], lambda r: (r.value(BASE),), n)
        add("other", scored, _no_key, n)
    else:
        # Perplexity rows score pass/fail against a bound: among equal drops, the larger move in
        # cross-entropy is the clearer example. It ranks after the benchmark spread, as other rows have none.
        worst: _Key = lambda r: (r.change != "regression", r.delta)  # noqa: E731
        lowest: _Key = lambda r: (r.value(ADAPTER),)  # noqa: E731
        best: _Key = lambda r: (r.change != "fixed", -(r.delta or 0.0))  # noqa: E731
        rise: _Key = lambda r: (-r.measure_delta,)  # noqa: E731
        fall: _Key = lambda r: (r.measure_delta,)  # noqa: E731
        regressions = [r for r in scored if r.change in ("regression", "worse")]
        failing = [r for r in scored if not r.passed(ADAPTER)]
        add("regression", regressions, worst, max(1, n // 2), rise)
        # Without a regression every row the adapter fails is one the base failed too.
        add("failure", [r for r in failing if not r.passed(BASE)], lowest, 1, rise)
        add("improvement", [r for r in scored if r.change in ("fixed", "better")], best, n, fall)
        add("regression", regressions, worst, n, rise)
        add("failure", failing, lowest, n, rise)
        add("other", scored, _no_key, n)
    add("other", unscored, _no_key, n)
    return [SpotCheckPick(p.row.benchmark, p.row.record, _why(p)) for p in picks]


SELECTION_RULE = (
    "Rows are chosen across all benchmarks, deterministically. With an adapter: (1) regressions, up to "
    "half the rows: the base passed and the adapter fails first, then the largest score drop; (2) one row "
    "the adapter still gets wrong (both fail; the lowest adapter score); (3) the clearest improvements: "
    "the base failed and the adapter passes first, then the largest score gain; (4) if rows are left: more "
    "regressions, more failures, then the rest. Base model only: failures first (lowest score first), then "
    "the rest. Among equal scores, perplexity rows with the larger change in cross-entropy come first, then "
    "the benchmark with the fewest rows picked so far, then node id. Rows that errored or were skipped come "
    "last."
)


def _why(pick: _Pick) -> str:
    """One sentence: why this row is in the spot check."""
    row = pick.row
    change = row.change
    if change in ("error", "skipped"):
        reason = row.record.get("skipped") or row.record.get("error") or "no score"
        return f"{'Skipped' if change == 'skipped' else 'Error'}: {_one_line(str(reason), 200)}"
    b = _fmt_score(row.value(BASE))
    if change == "base_only":
        verdict = "fails" if not row.passed(BASE) else "passes"
        return f"The base model {verdict} ({b})."
    a = _fmt_score(row.value(ADAPTER))
    text = {
        "regression": f"Regression: the base passed ({b}) and the adapter fails ({a}).",
        "worse": f"Regression: the adapter scores lower than the base ({b} → {a}).",
        "fixed": f"Improvement: the base failed ({b}) and the adapter passes ({a}).",
        "better": f"Improvement: the adapter scores higher than the base ({b} → {a}).",
    }.get(change)
    if text is None:
        both = "fail" if not row.passed(ADAPTER) else "pass"
        label = "Still wrong" if pick.why == "failure" else "Unchanged"
        text = f"{label}: both {both} (base {b}, adapter {a})."
    if row.measure_delta:
        ppl_b, ppl_a = row.score(BASE), row.score(ADAPTER)
        assert ppl_b is not None and ppl_a is not None  # measure_delta is nonzero only with both
        text += f" Perplexity {ppl_b['perplexity']:.2f} → {ppl_a['perplexity']:.2f}."
    return text


# ---------------------------------------------------------------------------------------------------------
# What a side of a row answered, and a short note on its score, whatever the evaluation type


def _answer(record: Mapping[str, Any], who: str) -> tuple[str | None, str]:
    """(text the model wrote, or None for measured rows; a language for a code block)."""
    side = records.side(record, who)
    if not side:
        return None, ""
    score = side.get("score") or {}
    if record.get("evaluation_type") == "code_execution":
        # A sampled row's first sample stands for it (all of them are in results.json).
        first = (score.get("per_sample") or [score])[0]
        if isinstance(first.get("code"), str):
            return str(first["code"]), "python"
    output = side.get("output")
    return (None if output is None else str(output)), ""


def _measurement(record: Mapping[str, Any], who: str) -> str | None:
    """What a measured row measured (perplexity, the chosen choice), as one line; None for generated rows."""
    side = records.side(record, who)
    if not side:
        return None
    score = side.get("score") or {}
    if "perplexity" in score and side.get("output") is None:
        text = f"perplexity {float(score['perplexity']):.2f} over {score.get('n_tokens', '?')} tokens"
        if score.get("max_perplexity") is not None:
            text += f" (bound {float(score['max_perplexity']):g})"
        return text
    if "predicted_index" in score and side.get("output") is None:
        choices = (record.get("evaluation_config") or {}).get("choices") or []
        index = score["predicted_index"]
        if index is None:
            return "chose no choice"
        where = f" (choice {int(index) + 1} of {len(choices)})" if choices else ""
        return f"chose {json.dumps(score.get('predicted'), ensure_ascii=False)}{where}"
    if side.get("output") is None and side.get("measurement") is not None:
        return _one_line(json.dumps(side["measurement"], ensure_ascii=False), 200)
    return None


def _score_note(record: Mapping[str, Any], who: str) -> str:
    """Score, verdict and the type's own details in a few words: '0.00, fail (threshold 1.00); ...'."""
    side = records.side(record, who)
    if not side:
        return "no score" if record.get("error") or record.get("skipped") else "-"
    score = side.get("score")
    if not score:
        return "no score" + (f" ({_one_line(str(record['error']), 120)})" if record.get("error") else "")
    passed = score.get("passed", float(score["value"]) >= float(score.get("threshold", 1.0)))
    text = f"{float(score['value']):.2f}, {'pass' if passed else 'fail'}"
    if float(score.get("threshold", 1.0)) != 1.0:
        text += f" (threshold {float(score['threshold']):.2f})"
    extra: list[str] = []
    if "verdicts" in score:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(score["verdicts"].items()))
        if "per_sample" in score:
            ks = ", ".join(f"pass@{k} {float(v):.3f}" for k, v in score.get("pass_at_k", {}).items())
            extra.append(
                f"{score.get('correct_samples')} of {score.get('samples')} samples passed every case "
                f"({ks}; {verdicts})"
            )
        else:
            extra.append(
                f"{score.get('passed_cases')} of {score.get('counted_cases')} test cases passed ({verdicts})"
            )
    if "judge_mean" in score:
        extra.append(f"judge {float(score['judge_mean']):.2f} of {score.get('max_score')}")
    if score.get("extracted") is not None and score["extracted"] != side.get("output"):
        extra.append(f"extracted {json.dumps(score['extracted'], ensure_ascii=False)}")
    if score.get("reason"):
        extra.append(str(score["reason"]))
    return text + "".join(f"; {e}" for e in extra)


def _fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a marker that says how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… truncated: {len(text) - limit} more characters]"


def _prompt(record: Mapping[str, Any]) -> str:
    """Instruction and input of a row, as results.json records them ("" when both are empty)."""
    parts = [str(record["instruction"]), str(record["input"])]
    return "\n\n".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------------------
# Markdown


def _md_value(text: str | None, *, empty: str = "*(empty)*") -> str:
    if text is None:
        return "-"
    return md_escape(text) if text.strip() else empty


def _md_header(document: Mapping[str, Any]) -> list[str]:
    name = document.get("adapter_name") or document.get("adapter_path")
    version = document.get("adapter_version")
    base = document.get("base_model") or "?"
    lines: list[str] = []
    if document.get("mode") == "base_only" or name is None:
        lines.append(f"# Spot check: {md_escape(str(base))} (base model only)")
        lines.append("")
        lines.append(
            f"No adapter: the base model's answers, failures first. Base model: **{md_escape(base)}**."
        )
    else:
        title = f"{name} {version}" if version else str(name)
        lines.append(f"# Spot check: {md_escape(title)}")
        lines.append("")
        where = f" ({md_code(str(document['adapter_path']))})" if document.get("adapter_path") else ""
        lines.append(
            f"Adapter **{md_escape(str(name))}**, version {md_escape(str(version or '?'))}{where}, "
            f"against the base model **{md_escape(str(base))}**."
        )
    facts = [f"Run of {document.get('timestamp', '?')}"]
    if document.get("quantization"):
        facts.append(f"quantization: {document['quantization']}")
    if document.get("hardware"):
        facts.append(f"hardware: {document['hardware']}")
    lines.append(md_escape("; ".join(facts)) + ".")
    lines += ["", _md_top_level(document)]
    if not document.get("complete", True):
        lines += ["", f"> **Incomplete run:** {md_escape(str(document.get('incomplete_reason') or '?'))}"]
    return lines


def _md_top_level(document: Mapping[str, Any]) -> str:
    """Which benchmark results.json's top level (the LocoLLM fields) describes, why, and its scores."""
    top = document.get("top_level") or {}
    reason = md_escape(str(top.get("reason") or "not recorded"))
    if not top.get("benchmark"):
        return f"Top level of results.json: none ({reason})."
    text = f"Top level of results.json: {md_code(str(top['benchmark']))} ({reason})"
    results = document.get("results") or {}
    scores = [f"base {percent(results.get('base_model_score'))}"]
    if document.get("mode") == "adapter_vs_base":
        scores.append(f"adapter {percent(results.get('adapter_score'))}")
    return f"{text}: {', '.join(scores)}."


# A run writes its spot check beside results.json; `pytest-llmeval report` writes it there again.
SPOT_CHECK_NAME = "spot_check.md"


def spot_check_path(results: Path) -> Path:
    """The spot check beside a results.json: where the run writes it, and `pytest-llmeval report` too."""
    return results.parent / SPOT_CHECK_NAME


def spot_check_markdown(
    document: Mapping[str, Any],
    *,
    n: int = 5,
) -> str:
    """spot_check.md: n rows with the base's and the adapter's answers side by side (LocoLLM's spot check)."""
    lines = _md_header(document)
    total = len(_rows(document))
    picked = select_spot_check(document, n)
    adapter = document.get("mode") == "adapter_vs_base"
    lines += ["", f"{len(picked)} of {total} rows, chosen by the rule at the end of this page.", ""]
    if not picked:
        lines += ["No benchmark rows in this run: nothing to check.", ""]
    for index, (bench, record, why) in enumerate(picked, start=1):
        lines.append(f"## {index}. {md_code(bench)} :: {md_code(str(record.get('id')))}")
        lines.append("")
        lines.append(md_escape(why))
        lines.append("")
        facts = [
            f"Difficulty {md_escape(str(record.get('difficulty')))}",
            md_code(str(record.get("evaluation_type"))),
            f"line {record.get('line')}",
        ]
        if record.get("tags"):
            facts.append("tags: " + ", ".join(md_code(str(t)) for t in record["tags"]))
        lines.append(" · ".join(facts) + ".")
        lines.append("")
        prompt = _prompt(record)
        lines += [
            "**Prompt**",
            "",
            md_block(_truncate(prompt, _MD_MAX)) if prompt else "*(empty)*",
            "",
        ]
        expected = str(record.get("expected_output") or "")
        if expected and ("\n" in expected or len(expected) > _MD_INLINE):
            lines += ["**Expected**", "", md_block(_truncate(expected, _MD_MAX)), ""]
        else:
            lines += [f"**Expected:** {_md_value(expected, empty='*(none)*')}", ""]
        sides = [BASE, ADAPTER] if adapter else [BASE]
        answers = {who: _answer(record, who) for who in sides}
        blocks = any(
            text is not None and ("\n" in text or len(text) > _MD_INLINE or lang)
            for text, lang in answers.values()
        )
        lines.append("| | " + " | ".join(who.capitalize() for who in sides) + " |")
        lines.append("|---|" + "---|" * len(sides))
        cells = []
        for who in sides:
            text, _ = answers[who]
            measured = _measurement(record, who)
            if measured is not None:
                cells.append(md_escape(measured))
            elif text is None:
                cells.append("-")
            elif blocks:
                cells.append(f"see {who} answer below")
            else:
                cells.append(_md_value(_truncate(text, _MD_INLINE)))
        lines.append("| Answer | " + " | ".join(cells) + " |")
        lines.append("| Score | " + " | ".join(md_escape(_score_note(record, who)) for who in sides) + " |")
        lines.append("")
        if blocks:
            for who in sides:
                text, lang = answers[who]
                if text is None or _measurement(record, who) is not None:
                    continue
                label = f"{who.capitalize()} answer"
                lines += [
                    f"**{label}**",
                    "",
                    md_block(_truncate(text, _MD_MAX), lang) if text else "*(empty)*",
                    "",
                ]
    lines += ["---", "", f"*Selection rule.* {md_escape(SELECTION_RULE)}", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# HTML

_CSS = """
:root { color-scheme: light; --base: %(base)s; --adapter: %(adapter)s; --worse: %(worse)s; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1400px; padding: 1rem 1.5rem 3rem; color: #1b1b1b; background: #fff; }
h1 { font-size: 1.6rem; margin: .2rem 0 .6rem; }
h2 { font-size: 1.3rem; margin-top: 2.2rem; border-bottom: 2px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; }
.incomplete { border: 3px solid var(--worse); background: #fff3ea; padding: .6rem 1rem; margin: 1rem 0;
              font-size: 1.1rem; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
figure { margin: 0; } figcaption { font-size: .85rem; color: #444; max-width: 480px; }
ul.gates { list-style: none; padding: 0; margin: 0; }
ul.gates li { border-left: 6px solid #999; padding: .25rem .6rem; margin: .25rem 0; background: #f7f7f7; }
ul.gates li.pass { border-color: %(adapter)s; }
ul.gates li.fail { border-color: %(worse)s; background: #fff0e8; }
ul.gates li.warn { border-color: %(base)s; background: #fff8e6; }
ul.gates li.skip { border-color: #bbb; }
.badge { font-weight: 700; font-family: ui-monospace, monospace; margin-right: .5rem; white-space: nowrap; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } caption { text-align: left; font-weight: 600; padding: .2rem 0; }
table.rows { width: 100%%; font-size: .85rem; } table.rows td:nth-child(-n+3) { white-space: nowrap; }
table.rows .out { min-width: 11ch; } table.rows td.num { text-align: right; white-space: nowrap; }
.out { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, monospace; max-height: 14em;
       overflow: auto; margin: 0; }
tr.regression, tr.worse { background: #fff0e8; } tr.fixed, tr.better { background: #eaf3fb; }
.mark { font-weight: 700; white-space: nowrap; }
.stats { font-family: ui-monospace, monospace; font-size: .9rem; }
.toolbar { display: flex; gap: 1rem; align-items: center; margin: .4rem 0; flex-wrap: wrap; }
th button { font: inherit; background: none; border: 0; padding: 0; cursor: pointer; text-align: left; }
.muted { color: #555; }
table.matrix td.change, table.matrix td.num { text-align: right; white-space: nowrap;
                                               font-variant-numeric: tabular-nums; }
table.matrix td.change small { display: block; font-size: .75rem; }
table.matrix td.in-domain { outline: 2px solid #000; outline-offset: -2px; box-shadow: inset 0 0 0 4px #fff;
                            font-weight: 700; }
table.matrix tr.base td { background: #fafafa; }
table.matrix tr.reference th, table.matrix tr.reference td { font-style: italic; }
table.matrix tr.reference { border-top: 2px dashed #888; }
.swatch { display: inline-block; width: 1.6em; height: .9em; vertical-align: middle; border: 1px solid #999; }
.swatch.in-domain { outline: 2px solid #000; outline-offset: -2px; box-shadow: inset 0 0 0 4px #fff;
                    background: #f7f7f7; }
"""

# Sorting and filtering of the row tables. The page is complete without it: controls are added by the
# script itself, so a reader without JS never sees dead buttons. It marks <html data-js="ready"> at the end,
# which the Chromium test reads to know it ran through without an error.
_JS = """
(function () {
  "use strict";
  function cellValue(row, index) {
    var cell = row.cells[index];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-sort");
    return v === null ? cell.textContent.trim().toLowerCase() : v;
  }
  function compare(a, b) {
    var x = a === "" ? NaN : Number(a), y = b === "" ? NaN : Number(b);
    if (!isNaN(x) && !isNaN(y)) { return x - y; }
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  var tables = document.querySelectorAll("table.rows");
  Array.prototype.forEach.call(tables, function (table) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, index) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = th.textContent;
      th.textContent = "";
      th.appendChild(button);
      th.setAttribute("aria-sort", "none");
      button.addEventListener("click", function () {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        rows.sort(function (r1, r2) {
          var c = compare(cellValue(r1, index), cellValue(r2, index));
          return ascending ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
    var bar = document.createElement("div");
    bar.className = "toolbar";
    var label = document.createElement("label");
    label.textContent = "Filter rows: ";
    var input = document.createElement("input");
    input.type = "search";
    label.appendChild(input);
    var selectLabel = document.createElement("label");
    selectLabel.textContent = "Show: ";
    var select = document.createElement("select");
    [["all", "all rows"], ["fail", "failed"], ["regression worse", "regressions"],
     ["fixed better", "improvements"], ["error skipped", "errors and skips"]].forEach(function (o) {
      var option = document.createElement("option");
      option.value = o[0];
      option.textContent = o[1];
      select.appendChild(option);
    });
    selectLabel.appendChild(select);
    var count = document.createElement("span");
    count.className = "muted";
    count.setAttribute("aria-live", "polite");
    bar.appendChild(label);
    bar.appendChild(selectLabel);
    bar.appendChild(count);
    table.parentNode.insertBefore(bar, table);
    function apply() {
      var text = input.value.trim().toLowerCase();
      var kinds = select.value === "all" ? null : select.value.split(" ");
      var shown = 0;
      rows.forEach(function (r) {
        var ok = (!text || r.textContent.toLowerCase().indexOf(text) !== -1) &&
          (!kinds || kinds.indexOf(r.getAttribute("data-change")) !== -1 ||
           (kinds.indexOf("fail") !== -1 && r.getAttribute("data-passed") === "false"));
        r.hidden = !ok;
        if (ok) { shown += 1; }
      });
      count.textContent = shown + " of " + rows.length + " rows shown";
    }
    input.addEventListener("input", apply);
    select.addEventListener("change", apply);
    apply();
  });
  document.documentElement.setAttribute("data-js", "ready");
})();
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _slug(text: str, index: int) -> str:
    return f"b{index}-" + re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


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
    from pytest_llmeval.peft_sft import measured_text, paired_test_text, recommendations, threshold_text

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


def _kv_table(caption: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    out = [f"<table><caption>{_e(caption)}</caption><thead><tr>"]
    out += [f'<th scope="col">{_e(h)}</th>' for h in header]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
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


def _num(value: Any, fmt: str = ".3f") -> str:
    return MISSING if value is None else format(float(value), fmt)


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


def _fluency_html(fluency: Mapping[str, Any]) -> list[str]:
    """--llmeval-fluency, per model: perplexity of its own outputs, beside the reference texts' under the
    same scorer."""
    sides = [w for w in (BASE, ADAPTER) if fluency.get(w)] + sorted(set(fluency) - {BASE, ADAPTER})

    def corpus(who: str, which: str, key: str, fmt: str) -> str:
        found = fluency[who].get(which)
        return _num(None if not found else found.get(key), fmt)

    rows = [
        ["scored by", *(str(fluency[w].get("scorer", MISSING)) for w in sides)],
        ["perplexity of its own outputs", *(corpus(w, "output", "perplexity", ".2f") for w in sides)],
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
    return [
        "<h3>Fluency</h3>",
        *_kv_table("Perplexity of each model's generated outputs (token-weighted)", ["", *sides], rows),
    ]


def _side_cell(record: Mapping[str, Any], who: str) -> str:
    measured = _measurement(record, who)
    if measured is not None:
        return f'<td><span class="out">{_e(measured)}</span></td>'
    text, _ = _answer(record, who)
    if text is None:
        return "<td>–</td>"
    if not text:
        return '<td><span class="muted">(empty)</span></td>'
    return f'<td><div class="out">{_e(_truncate(text, _HTML_MAX))}</div></td>'


def _columns(bench: Mapping[str, Any], adapter: bool) -> list[str]:
    """The columns the rows table shows: base (and adapter), or every column of a run of several."""
    seen: dict[str, None] = {BASE: None}
    for record in bench.get("rows", []):
        seen.update(dict.fromkeys(record.get("models") or {}))
    if set(seen) <= {BASE, ADAPTER}:
        return [BASE, ADAPTER] if adapter else [BASE]
    return list(seen)


def _rows_table(bench: Mapping[str, Any], adapter: bool) -> list[str]:
    columns = _columns(bench, adapter)
    header = ["id", "difficulty", "type", "expected"]
    for column in columns:
        header += [f"{column} output", f"{column} score"]
    header.append("result")
    out = [
        f'<table class="rows"><caption>Rows of {_e(bench["benchmark_file"])}</caption><thead><tr>',
        *(f'<th scope="col">{_e(h)}</th>' for h in header),
        "</tr></thead><tbody>",
    ]
    for record in bench.get("rows", []):
        row = _Row(str(bench["benchmark_file"]), record)
        change = row.change
        passed = bool(record.get("passed"))
        prompt = _prompt(record)
        ident = _e(record.get("id"))
        if prompt:
            shown = _e(_truncate(prompt, _HTML_MAX))
            ident = f'<details><summary>{ident}</summary><div class="out">{shown}</div></details>'
        expected = str(record.get("expected_output") or "")
        order = {"easy": 0, "medium": 1, "hard": 2}.get(str(record.get("difficulty")), 3)
        cells = [
            f'<td data-sort="{_e(record.get("nodeid"))}">{ident}</td>',
            f'<td data-sort="{order}">{_e(record.get("difficulty"))}</td>',
            f"<td>{_e(record.get('evaluation_type'))}</td>",
            f'<td><div class="out">{_e(_truncate(expected, _HTML_MAX))}</div></td>',
        ]
        for who in columns:
            value = row.value(who)
            cells.append(_side_cell(record, who))
            cells.append(
                f'<td class="num" data-sort="{"" if value is None else f"{value:.6f}"}" '
                f'title="{_e(_score_note(record, who))}">{_fmt_score(value)}</td>'
            )
        if change in ("error", "skipped"):
            reason = record.get("skipped") or record.get("error") or "no score"
            mark = "– skipped" if change == "skipped" else "⚠ error"
            result = f'<span class="mark">{mark}</span> {_e(_one_line(str(reason), 300))}'
        else:
            result = f'<span class="mark">{"✔ pass" if passed else "✘ fail"}</span>'
            if change in ("regression", "worse", "fixed", "better"):
                result += f" ({change})"
        cells.append(f"<td>{result}</td>")
        state = f'class="{change}" data-change="{change}" data-passed="{str(passed).lower()}"'
        out.append(f"<tr {state}>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return out


def _adapter_line(document: Mapping[str, Any]) -> str:
    version = f" {document['adapter_version']}" if document.get("adapter_version") else ""
    path = f" ({document['adapter_path']})" if document.get("adapter_path") else ""
    return f"{document.get('adapter_name') or 'adapter'}{version}{path}"


def _top_level_line(document: Mapping[str, Any]) -> str:
    """Which benchmark the standard's top-level fields of results.json describe, and why that one."""
    top = document.get("top_level") or {}
    reason = str(top.get("reason") or "not recorded")
    return f"{top['benchmark']} ({reason})" if top.get("benchmark") else f"none ({reason})"


def _version_scores(version: Mapping[str, Any]) -> str:
    """The standard's current_version / previous_version object: version and top-level scores."""
    return (
        f"{version.get('version') or '?'}: adapter {percent(version.get('adapter_score'))}, "
        f"base {percent(version.get('base_model_score'))}"
    )


def _header_html(document: Mapping[str, Any], adapter: bool) -> tuple[str, list[str]]:
    base = str(document.get("base_model") or "?")
    if adapter:
        name = str(document.get("adapter_name") or document.get("adapter_path") or "adapter")
        version = document.get("adapter_version")
        title = f"{name} {version}" if version else name
        heading = f"Evaluation report: {title} against {base}"
    else:
        heading = f"Evaluation report: {base} (base model only)"
    facts: list[tuple[str, object]] = [
        ("mode", document.get("mode", "?")),
        ("adapter", _adapter_line(document) if adapter else "none"),
        (
            "base model",
            base + (f" — {document['base_model_note']}" if document.get("base_model_note") else ""),
        ),
        ("quantization", document.get("quantization") or MISSING),
        ("run", document.get("timestamp", "?")),
        ("hardware", document.get("hardware") or MISSING),
        ("top level", _top_level_line(document)),
    ]
    if adapter and document.get("current_version"):
        facts.append(("this version", _version_scores(document["current_version"])))
    if document.get("previous_version"):
        facts.append(("previous version", _version_scores(document["previous_version"])))
    if document.get("out_of_domain"):
        figure = document["out_of_domain"]
        facts.append(("out of domain (most degraded)", f"{figure['benchmark']}: {out_of_domain(figure)}"))
    sandbox = document.get("sandbox")
    if sandbox:
        facts.append(("sandbox", sandbox.get("level", json.dumps(sandbox))))
    out = [f"<h1>{_e(heading)}</h1>", '<dl class="meta">']
    out += [f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts]
    out.append("</dl>")
    return heading, out


def html_report(document: Mapping[str, Any]) -> str:
    """--llmeval-html: one self-contained page of results.json: inline CSS, SVG charts, optional inline JS."""
    benches = list(document.get("benchmarks", []))
    adapter = document.get("mode") == "adapter_vs_base"
    heading, header = _header_html(document, adapter)
    css = _CSS % {"base": _BASE_COLOUR, "adapter": _ADAPTER_COLOUR, "worse": _WORSE_COLOUR}
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(heading)}</title>",
        f"<style>{css}</style>",
        "</head>",
        "<body>",
        "<header>",
        *header,
        "</header>",
    ]
    if not document.get("complete", True):
        out.append(
            '<div class="incomplete" role="alert"><strong>⚠ Incomplete run:</strong> '
            f"{_e(document.get('incomplete_reason') or 'the run stopped early')}. "
            "Scores, statistics and gates below cover only the rows that finished.</div>"
        )
    out.append("<main>")
    matrix = document.get("matrix")
    if matrix and matrix.get("models"):
        slugs = {str(b["benchmark_file"]): _slug(str(b["benchmark_file"]), i) for i, b in enumerate(benches)}
        out += _matrix_html(matrix, slugs)
    if not benches:
        out.append("<p>No benchmark rows in this run: nothing to report.</p>")
    else:
        out.append('<nav aria-label="Benchmarks"><h2>Benchmarks</h2><ul>')
        for i, bench in enumerate(benches):
            res = bench.get("results", {})
            line = f"{bench['benchmark_file']}: {bench.get('n_examples')} rows"
            line += f", base {percent(res.get('base_model_score'))}"
            if adapter:
                line += f", adapter {percent(res.get('adapter_score'))}"
            out.append(f'<li><a href="#{_slug(str(bench["benchmark_file"]), i)}">{_e(line)}</a></li>')
        out.append("</ul></nav>")
    if document.get("composite"):
        out += _composite_html(document["composite"], "Composite score (all rows)", adapter)
    for i, bench in enumerate(benches):
        out += _benchmark_html(bench, _slug(str(bench["benchmark_file"]), i), adapter)
    out += _training_html(document)
    if document.get("peft_vs_sft"):
        out += _peft_vs_sft_html(document["peft_vs_sft"])
    if (document.get("cost") or {}).get("models"):
        out += _cost_html(document["cost"])
    out += ["</main>", f"<script>{_JS}</script>", "</body>", "</html>", ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# The interference matrix: every model against the base on every benchmark


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


def _benchmark_html(bench: Mapping[str, Any], slug: str, adapter: bool) -> list[str]:
    res = bench.get("results", {})
    name = str(bench["benchmark_file"])
    out = [f'<section id="{slug}" aria-labelledby="{slug}-h">', f'<h2 id="{slug}-h">{_e(name)}</h2>']
    types = bench.get("evaluation_types") or [str(bench.get("evaluation_type"))]
    summary = (
        f"{bench.get('n_examples')} rows ({', '.join(types)}"
        + (f"; {bench['domain']}-domain" if bench.get("domain") else "")
        + f"). Base {percent(res.get('base_model_score'))}"
    )
    if adapter:
        diff = res.get("improvement_absolute")
        summary += f", adapter {percent(res.get('adapter_score'))}"
        summary += f", difference {points(diff)}"
    summary += f". Passed {res.get('n_passed', 0)}"
    if res.get("n_errors"):
        summary += f", errors {res['n_errors']}"
    if res.get("n_skipped"):
        summary += f", skipped {res['n_skipped']}"
    out.append(f"<p>{_e(summary)}.</p>")
    out.append(_stats_line(bench.get("statistics")))
    if bench.get("out_of_domain"):
        out.append(f"<p>{_e('Out of domain: ' + out_of_domain(bench['out_of_domain']))}.</p>")
    out += _gates_html(bench.get("gates") or {})
    if bench.get("sequential"):
        out += _sequential_html(bench["sequential"], slug)
    out.append('<div class="charts">')
    out.append(
        f"<figure>{_difficulty_svg(f'{slug}-difficulty', res.get('per_difficulty') or {}, res, adapter)}"
        "<figcaption>Mean score per difficulty (percent; n = rows). Base: hatched orange"
        + ("; adapter: solid blue." if adapter else ".")
        + "</figcaption></figure>"
    )
    if adapter:
        values, label, half = _differences(bench)
        if values:
            out.append(
                f"<figure>{_histogram_svg(f'{slug}-diff', values, label, half)}"
                f"<figcaption>Per-row difference, {_e(label)}: left of 0 the adapter does worse, right of 0 "
                "better.</figcaption></figure>"
            )
        else:
            out.append('<p class="muted">No row has both scores: no differences to plot.</p>')
    out.append("</div>")
    if bench.get("perplexity"):
        out += _perplexity_html(bench["perplexity"])
    if bench.get("slices"):
        header = ["slice", "rows", "base", *(["adapter", "difference", "p"] if adapter else [])]
        rows = [
            [
                f"{key}:{value}",
                entry["n"],
                percent(entry.get("base")),
                *(
                    [
                        percent(entry.get("adapter")),
                        _num(entry.get("difference"), "+.3f"),
                        p_value(entry.get("p_value")),
                    ]
                    if adapter
                    else []
                ),
            ]
            for key, values in bench["slices"].items()
            for value, entry in values.items()
        ]
        out += _kv_table("Slices (tags): each one's rows compared on their own", header, rows)
    if bench.get("fluency"):
        out += _fluency_html(bench["fluency"])
    if bench.get("composite"):
        out += _composite_html(bench["composite"], "Composite score", adapter)
    previous = bench.get("comparison_with_previous")
    if previous:
        run = f" (run {previous['baseline']})" if previous.get("baseline") else ""
        text = f"Against version {previous.get('previous_version')}{run}: "
        if previous.get("comparable") and previous.get("reason"):
            text = f"No baseline to compare against: {previous['reason']}"
        elif not previous.get("comparable"):
            text += f"not comparable ({previous.get('reason')})"
        elif previous.get("statistics"):
            s = previous["statistics"]
            # The evaluated model's scores, this run against the previous one's: shares, so points.
            text += f"{points(s.get('difference'))} ({level(float(s.get('confidence', 0.95)))} CI "
            text += f"{measure_interval(s.get('ci_low'), s.get('ci_high'), SCORE_MEASURE)}), "
            text += f"{name_of_test(str(s.get('test')))} p = {p_value(s.get('p_value'), s.get('alpha'))}"
        else:
            text += "no common rows"
        out.append(f"<p>{_e(text)}</p>")
    out.append("<h3>Rows</h3>")
    out += _rows_table(bench, adapter)
    out.append("</section>")
    return out


# ---------------------------------------------------------------------------------------------------------
# The terminal summary


def _slice_text(entry: Mapping[str, Any], adapter: bool) -> str:
    text = f"n={entry['n']:<4} base {percent(entry.get('base'))}"
    if adapter:
        text += f", adapter {percent(entry.get('adapter'))}"
        if entry.get("difference") is not None and entry.get("measure") == "score":
            text += f", {points(entry['difference'])}, p={p_value(entry.get('p_value'))}"
        elif entry.get("difference") is not None:
            text += f", {entry['difference']:+.4f} ({entry['measure']}), p={p_value(entry.get('p_value'))}"
    return text


def _slice_lines(slices: Mapping[str, Any], adapter: bool) -> list[str]:
    """-v: every slice of the benchmark, one line each."""
    return [
        f"  slice {key}:{value:<24} {_slice_text(entry, adapter)}"
        for key, values in slices.items()
        for value, entry in values.items()
    ]


def summary_lines(document: Mapping[str, Any], *, verbose: bool = True, slices: bool = False) -> list[str]:
    """A compact table for the terminal: per benchmark, base and adapter score, the difference, the gates."""
    adapter = document["mode"] == "adapter_vs_base"
    lines = []
    header = f"{'benchmark':<40} {'rows':>5} {'base':>7}"
    if adapter:
        header += f" {'adapter':>8} {'diff':>9}  CI, p"
    lines.append(header)
    for bench in document["benchmarks"]:
        res = bench["results"]
        base = percent(res["base_model_score"], missing="-")
        line = f"{bench['benchmark_file']:<40} {bench['n_examples']:>5} {base:>7}"
        if adapter:
            diff = points(res["improvement_absolute"], missing="-")
            line += f" {percent(res['adapter_score'], missing='-'):>8} {diff:>9}"
            line += _summary_statistics(bench.get("statistics"))
        if res["n_errors"]:
            line += f"  ({res['n_errors']} rows errored)"
        lines.append(line)
        if bench.get("out_of_domain"):
            lines.append(f"  out of domain: {out_of_domain(bench['out_of_domain'])}")
        if bench.get("adapter_effect") == "none":
            lines.append(f"  NO ADAPTER EFFECT: {NO_EFFECT}")
        seq = bench.get("sequential")
        if seq:
            if seq["early"]:
                said = str(seq["reason"]).removeprefix("not run: --llmeval-sequential ")
                lines.append(f"  sequential: stopped early, {said}")
            else:
                lines.append(
                    f"  sequential: not decided early; all {seq['planned_rows']} planned rows ran "
                    "(the fixed-sample test decides)"
                )
        ppl = bench.get("perplexity")
        if ppl and ppl.get(BASE):
            text = f"  perplexity (token-weighted): base {ppl[BASE]['perplexity']:.2f}{_band(ppl[BASE])}"
            if ppl.get(ADAPTER):
                ratio = f"x{ppl['perplexity_ratio']:.3f}"
                text += f", adapter {ppl[ADAPTER]['perplexity']:.2f}{_band(ppl[ADAPTER])} ({ratio})"
            lines.append(text)
        if bench.get("fluency"):
            lines.append(
                f"  fluency, perplexity of each model's own outputs: {_fluency_text(bench['fluency'])}"
            )
        unparsed = bench.get("unparsed") or {}
        if any(u["n_unparsed"] for u in unparsed.values()):
            parts = [
                f"{who} {percent(u['rate'])} ({u['n_unparsed']} of {u['n_rows']})"
                for who, u in ((w, unparsed.get(w)) for w in (BASE, ADAPTER))
                if u
            ]
            lines.append(f"  unparsed (no answer extracted; scored 0, not wrong answers): {', '.join(parts)}")
        chars = bench.get("char_accuracy") or {}
        if chars:
            parts = [
                f"{who} {percent(c['character'])} ("
                + ", ".join(f"{name} {percent(v['accuracy'])}" for name, v in c["scripts"].items())
                + ")"
                for who, c in chars.items()
            ]
            lines.append(f"  character accuracy (aligned, pooled over rows): {'; '.join(parts)}")
        passk = bench.get("pass_at_k")
        if passk and any(k != "1" for who in passk.values() for k in who):
            # Only for sampled rows: a greedy run's pass@1 is the pass rate the table already shows.
            parts = [
                f"{who} " + ", ".join(f"pass@{k} {percent(v['value'])}" for k, v in passk[who].items())
                for who in (BASE, ADAPTER)
                if passk.get(who)
            ]
            lines.append(f"  pass@k: {'; '.join(parts)}")
        if slices and bench.get("slices"):
            lines += _slice_lines(bench["slices"], adapter)
        if verbose and bench.get("gates"):
            verdicts = ", ".join(f"{name} {v['status']}" for name, v in bench["gates"].items())
            lines.append(f"  gates: {verdicts}")
    composite = document.get("composite")
    if composite:
        sides = [w for w in ([BASE, ADAPTER] if adapter else [BASE]) if composite.get(w)]
        parts = [f"{who} {composite_value(composite[who])}" for who in sides]
        reasons = {composite[w]["reason"] for w in sides}
        if len(sides) > 1 and len(reasons) == 1 and None not in reasons:
            parts = [f"none for {' and '.join(sides)} ({reasons.pop()})"]  # one reason, said once
        renormalised = [w for w in sides if composite[w]["value"] is not None and composite[w]["missing"]]
        missing = (
            f" (no rows for: {', '.join(composite[renormalised[0]]['missing'])})" if renormalised else ""
        )
        lines.append(f"composite score: {', '.join(parts)}{missing}")
    matrix = document.get("matrix")
    if matrix and (document.get("several_models") or len(matrix.get("models") or []) > 1):
        lines.extend(matrix_lines(matrix))
    top = document.get("top_level")
    if verbose and top:
        lines.append(f"top level of results.json: {_top_level_line(document)}")
    efficiency = document.get("parameter_efficiency") or {}
    if verbose and efficiency.get("efficiency_ratio") is not None:
        lines.append(
            f"parameter efficiency: the adapter holds {efficiency['efficiency_ratio']:.3%} of the parameters "
            f"({efficiency['trainable_params']:,} of {efficiency['total_params']:,}; reduction "
            f"{efficiency['parameter_reduction']:.2%})"
        )
    for model in document.get("models") or []:
        if verbose and model.get("training"):
            entry = model["training"]
            lines.append(f"training of {model['name']}: {training_summary(entry)}; log {entry['log']}")
    if verbose and document.get("cost"):
        from pytest_llmeval.costs import summary_line

        spent = summary_line(document["cost"])
        if spent:
            lines.append(spent)
    if not document["complete"]:
        lines.append(f"INCOMPLETE: {document['incomplete_reason']}")
    return lines


def _band(corpus: Mapping[str, Any]) -> str:
    """The adaptation document's label beside a corpus perplexity, when the document has one."""
    return f" [{corpus['band']}]" if corpus.get("band") else ""


def _summary_statistics(stats: Mapping[str, Any] | None) -> str:
    """The paired comparison in a few words: its interval in the measure's unit, and the test's p."""
    if not stats:
        return ""
    measure = str(stats.get("measure", SCORE_MEASURE))
    ci = measure_interval(stats.get("ci_low"), stats.get("ci_high"), measure)
    p = p_value(stats.get("p_value"), stats.get("alpha"))
    confidence = level(float(stats.get("confidence", 0.95)))
    if measure == SCORE_MEASURE:
        return f"  {confidence} CI {ci}, p={p}"
    # The diff column is the score's; the test compared another measure: say which, in its own unit.
    return (
        f"  {measure_unit(measure)}: {measure_difference(stats.get('difference'), measure)}, "
        f"{confidence} CI {ci}, p={p}"
    )


def _fluency_text(fluency: Mapping[str, Any]) -> str:
    """Per model: the perplexity of its own outputs, the references' under the same scorer beside it."""
    parts = []
    for who, entry in fluency.items():
        output, reference = entry.get("output"), entry.get("reference")
        part = f"{who} {MISSING if not output else format(output['perplexity'], '.2f')}"
        if reference:
            part += f" (reference {reference['perplexity']:.2f})"
        if entry.get("n_empty_outputs"):
            part += f" [{entry['n_empty_outputs']} empty outputs]"
        parts.append(part)
    return ", ".join(parts)
