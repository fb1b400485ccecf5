"""The HTML report (--llmeval-html, `pytest-llmeval report`): one self-contained page of results.json.

Pure: takes the results.json document and returns text. No pytest, no torch; the page needs no network when
viewed (inline CSS and SVG, a few lines of inline JS that the page does not depend on). Here: the page's head,
styles and script, its header, and one section per benchmark with its rows table; the charts are in
html_charts.py, the other sections in html_sections.py, the interference matrix in html_matrix.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pytest_llmeval.ci import not_run, not_run_line
from pytest_llmeval.formatting import (
    MISSING,
    SCORE_MEASURE,
    level,
    measure_interval,
    name_of_test,
    out_of_domain,
    p_value,
    percent,
    points,
)
from pytest_llmeval.records import ADAPTER, BASE
from pytest_llmeval.reporting.html_charts import _differences, _difficulty_svg, _histogram_svg
from pytest_llmeval.reporting.html_matrix import _matrix_html
from pytest_llmeval.reporting.html_parts import (
    _ADAPTER_COLOUR,
    _BASE_COLOUR,
    _WORSE_COLOUR,
    _e,
    _kv_table,
    _num,
)
from pytest_llmeval.reporting.html_sections import (
    _composite_html,
    _cost_html,
    _fluency_html,
    _gates_html,
    _metrics_html,
    _peft_vs_sft_html,
    _perplexity_html,
    _sequential_html,
    _stats_line,
    _training_html,
)
from pytest_llmeval.reporting.rows import (
    _answer,
    _expected,
    _fmt_score,
    _measurement,
    _one_line,
    _prompt,
    _Row,
    _score_note,
    _truncate,
)
from pytest_llmeval.reporting.summary import _top_level_line

# Characters of an output the HTML row table shows: a 10k-row run with long outputs must stay viewable.
_HTML_MAX = 2000


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
.out + .out { border-top: 1px dashed #bbb; margin-top: .3em; }
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


def _slug(text: str, index: int) -> str:
    return f"b{index}-" + re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


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
        # Several references: one box each, in the row's order.
        expected = "".join(f'<div class="out">{_e(_truncate(r, _HTML_MAX))}</div>' for r in _expected(record))
        order = {"easy": 0, "medium": 1, "hard": 2}.get(str(record.get("difficulty")), 3)
        cells = [
            f'<td data-sort="{_e(record.get("nodeid"))}">{ident}</td>',
            f'<td data-sort="{order}">{_e(record.get("difficulty"))}</td>',
            f"<td>{_e(record.get('evaluation_type'))}</td>",
            f"<td>{expected}</td>",
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
    unrun = not_run(document)
    if unrun:
        # A file that failed to collect, a gate deselected: what the page cannot show, said where it starts.
        items = "".join(f"<li>{_e(not_run_line(entry))}</li>" for entry in unrun)
        out.append(f'<div class="incomplete" role="note"><strong>Not run:</strong><ul>{items}</ul></div>')
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
    if bench.get("metrics"):
        out += _metrics_html(bench["metrics"], adapter)
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
