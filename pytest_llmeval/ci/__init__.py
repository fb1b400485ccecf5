"""GitHub Actions output from a results.json document: the job summary and the `::error` annotations.

Pure: no pytest, no torch. hooks/reporting.py appends the summary to $GITHUB_STEP_SUMMARY and prints the
annotations when $GITHUB_ACTIONS is set. The gate check (`pytest-llmeval check`, failed_gates) is a
subcommand of the command line (pytest_llmeval/cli/check.py); `python -m pytest_llmeval.ci check` stays
as its alias, in ci/__main__.py (apart: the command line imports this module, never the other way round).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmeval import records
from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.formatting import (
    MISSING,
    SCORE_MEASURE,
    measure_difference,
    measure_interval,
    measure_unit,
    out_of_domain,
    p_value,
    percent,
    points,
)

# Annotations of failed rows beyond this are counted, not listed: GitHub shows at most 10 errors per step
# in the checks tab anyway, and hundreds of them bury the failed gates.
MAX_ROW_ANNOTATIONS = 10
STATUS_ICON = {"pass": "✅", "warn": "⚠️", "fail": "❌", "skip": "⏭️"}


def _cell(text: Any) -> str:
    """A Markdown table cell: pipes escaped, newlines flattened."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def step_summary(document: Mapping[str, Any]) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY: per benchmark, scores, difference, gates, the difficulty table."""
    adapter = document["mode"] == "adapter_vs_base"
    title = f"{document.get('adapter_name')} {document.get('adapter_version') or ''}".strip()
    lines = [
        f"## pytest-llmeval: {title if adapter else 'base model only'} on {document.get('base_model')}",
        "",
    ]
    if not document.get("complete", True):
        lines += [f"> **Incomplete run:** {_cell(document.get('incomplete_reason'))}", ""]
    unrun = not_run(document)
    if unrun:
        lines += [
            "**Not run** (`pytest-llmeval check` fails on each; on a deselected gate unless given "
            "`--allow-unrun-gates`):",
            "",
            *(f"- {_cell(not_run_what(entry))}: {_cell(entry['why'])}" for entry in unrun),
            "",
        ]
    top = document.get("top_level") or {}
    if top.get("benchmark"):
        lines += [f"Top level of results.json: `{_cell(top['benchmark'])}` ({_cell(top.get('reason'))})", ""]
    figure = document.get("out_of_domain")
    if figure:
        lines += [
            f"Out of domain, most degraded: `{_cell(figure['benchmark'])}`: {_cell(out_of_domain(figure))}",
            "",
        ]
    criteria = document.get("criteria")
    if criteria:
        from pytest_llmeval.gates import describe_criteria

        lines += [f"Gates decided by {_cell(describe_criteria(criteria))}.", ""]
        # What the criteria require of the run as a whole (locollm: an out-of-domain benchmark).
        for name, verdict in _run_gates(document).items():
            icon = STATUS_ICON.get(verdict["status"], verdict["status"])
            lines += [f"{icon} **{_cell(name)}**: {_cell(verdict['message'])}", ""]
    header = "| benchmark | rows | base | adapter | difference (CI) | p | gates |"
    lines += [header, "| --- | ---: | ---: | ---: | --- | ---: | --- |"]
    for bench in document["benchmarks"]:
        res = bench["results"]
        stats = bench.get("statistics") or {}
        measure = str(stats.get("measure", SCORE_MEASURE))
        difference = points(res.get("improvement_absolute"))
        if stats and measure == SCORE_MEASURE and res.get("improvement_absolute") is not None:
            difference += f" ({measure_interval(stats.get('ci_low'), stats.get('ci_high'), measure)})"
        elif stats and measure != SCORE_MEASURE:
            # The test compared another measure than the score column: its difference, in its own unit.
            difference += (
                f"; {measure_unit(measure)}: {measure_difference(stats.get('difference'), measure)} "
                f"({measure_interval(stats.get('ci_low'), stats.get('ci_high'), measure)})"
            )
        p = p_value(stats.get("p_value"), stats.get("alpha"))
        gates = " ".join(
            f"{STATUS_ICON.get(v['status'], v['status'])} {name}" for name, v in bench["gates"].items()
        )
        cells = [
            f"`{_cell(bench['benchmark_file'])}`",
            str(bench["n_examples"]),
            percent(res["base_model_score"]),
            percent(res["adapter_score"]) if adapter else MISSING,
            _cell(difference),
            p,
            gates or MISSING,
        ]
        lines.append(f"| {' | '.join(cells)} |")
    for bench in document["benchmarks"]:
        lines += ["", f"### `{_cell(bench['benchmark_file'])}`", ""]
        lines += ["| difficulty | rows | base | adapter |", "| --- | ---: | ---: | ---: |"]
        for difficulty in DIFFICULTIES:
            cell = bench["results"]["per_difficulty"][difficulty]
            lines.append(
                f"| {difficulty} | {cell['n']} | {percent(cell['base'])} | {percent(cell['adapter'])} |"
            )
        if bench.get("out_of_domain"):
            lines += ["", f"Out of domain: {_cell(out_of_domain(bench['out_of_domain']))}"]
        ppl = bench.get("perplexity")
        if ppl and ppl.get(records.BASE):
            text = f"Perplexity (token-weighted): base {ppl[records.BASE]['perplexity']:.2f}"
            if ppl.get(records.ADAPTER):
                text += f", adapter {ppl[records.ADAPTER]['perplexity']:.2f} (x{ppl['perplexity_ratio']:.3f})"
            lines += ["", text]
        failed = [(name, v) for name, v in bench["gates"].items() if v["status"] in ("fail", "warn")]
        for name, verdict in failed:
            lines += ["", f"{STATUS_ICON[verdict['status']]} **{name}**: {_cell(verdict['message'])}"]
    lines.append("")
    return "\n".join(lines)


def error_annotations(document: Mapping[str, Any]) -> list[str]:
    """`::error file=...,line=...::message` lines for failed gates and failed rows (rows capped)."""
    out: list[str] = []
    for bench in document["benchmarks"]:
        for name, verdict in bench["gates"].items():
            if verdict["status"] == "fail":
                out.append(
                    _command("error", bench["benchmark_file"], 1, f"gate {name} failed: {verdict['message']}")
                )
    # A run gate belongs to no benchmark file: an annotation without a file.
    out += [
        f"::error::{_data(f'gate {name} failed: ' + str(verdict['message']))}"
        for name, verdict in _run_gates(document).items()
        if verdict["status"] == "fail"
    ]
    # A file that failed to collect is an error (the run is incomplete); a deselected gate a warning (check
    # fails on it unless it is accepted, which only the check knows).
    for entry in not_run(document):
        kind = "error" if entry["gate"] is None else "warning"
        message = f"{not_run_what(entry)} did not run: {entry['why']}"
        out.append(
            _command(kind, str(entry["file"]), 1, message)
            if entry["file"] is not None
            else f"::{kind}::{_data(message)}"
        )
    failed_rows = [
        (bench["benchmark_file"], row)
        for bench in document["benchmarks"]
        for row in bench["rows"]
        if not row["passed"] and not row.get("skipped")
    ]
    for file, row in failed_rows[:MAX_ROW_ANNOTATIONS]:
        if row.get("error"):
            message = f"{row['id']}: {row['error']}"
        else:
            # The evaluated model's score decided the row: the adapter's with an adapter, else the base's.
            who = str(row["evaluated"])
            score = records.score(row, who)
            if score is None:
                message = f"{row['id']}: no score ({who})"
            else:
                message = f"{row['id']} scored {score.get('value')} < {score.get('threshold')} ({who})"
        out.append(_command("error", file, int(row.get("line") or 1), message))
    if len(failed_rows) > MAX_ROW_ANNOTATIONS:
        rest = len(failed_rows) - MAX_ROW_ANNOTATIONS
        out.append(f"::notice::{rest} more failed rows are not annotated (see results.json)")
    return out


def _data(text: str) -> str:
    """A workflow command's data: %, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _command(kind: str, file: str, line: int, message: str) -> str:
    """A workflow command; its data escapes %, CR and LF, its properties also ':' and ','."""

    def prop(text: str) -> str:
        return _data(text).replace(":", "%3A").replace(",", "%2C")

    return f"::{kind} file={prop(file)},line={line}::{_data(message)}"


def _run_gates(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The verdicts of the gates the criteria require of the run as a whole (locollm's out-of-domain run)."""
    found: Mapping[str, Any] = (document.get("criteria") or {}).get("gates") or {}
    return found


def not_run(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The document's `not_run` (results.NotRun): benchmark files that failed to collect, deselected gates;
    none in a document written before they were recorded."""
    found: list[Mapping[str, Any]] = document.get("not_run") or []
    return found


def not_run_what(entry: Mapping[str, Any]) -> str:
    """What a `not_run` entry names: `bad.jsonl`, `bench.jsonl gate size`, or `gate converged[date-iso]`."""
    if entry["gate"] is None:
        return str(entry["file"])
    return f"{entry['file']} gate {entry['gate']}" if entry["file"] is not None else f"gate {entry['gate']}"


def not_run_line(entry: Mapping[str, Any]) -> str:
    """A `not_run` entry as `check` prints it: `bad.jsonl: did not run: it failed to collect (why)`, or
    `bench.jsonl: gate size did not run: deselected by --deselect`."""
    if entry["gate"] is None:
        return f"{entry['file']}: did not run: it failed to collect ({entry['why']})"
    where = "" if entry["file"] is None else f"{entry['file']}: "
    return f"{where}gate {entry['gate']} did not run: {entry['why']}"


def unrun_gates(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The gates the run collected and deselected (`not_run` entries with a gate)."""
    return [entry for entry in not_run(document) if entry["gate"] is not None]


def failed_gates(document: Mapping[str, Any], *, allow_unrun_gates: bool = False) -> list[str]:
    """`benchmark: gate: message` for every failed gate, every benchmark file that failed to collect, every
    gate deselected (unless `allow_unrun_gates`), and the reason when the run is incomplete."""
    out = [
        f"{bench['benchmark_file']}: {name}: {verdict['message']}"
        for bench in document["benchmarks"]
        for name, verdict in bench["gates"].items()
        if verdict["status"] == "fail"
    ]
    # What the criteria require of the run as a whole (--llmeval-criteria locollm: an out-of-domain check).
    out += [f"{name}: {v['message']}" for name, v in _run_gates(document).items() if v["status"] == "fail"]
    # What did not run gave no verdict to fail: a missing file always fails (the run is incomplete), a
    # deselected gate unless it is accepted knowingly.
    for entry in not_run(document):
        if entry["gate"] is None:
            out.append(not_run_line(entry))
        elif not allow_unrun_gates:
            out.append(f"{not_run_line(entry)} (--allow-unrun-gates accepts it)")
    if not document.get("complete", True):
        out.append(f"the run is incomplete: {document.get('incomplete_reason')}")
    return out + unscored(document)


def unscored(document: Mapping[str, Any]) -> list[str]:
    """What a verdict would stand on nothing for: each gated column (else the base) with no scored row in a
    benchmark that ran, and a document with no scored row at all. `check` fails on these whatever the gates
    say: a document written before gates needed evidence, or edited by hand, cannot pass on no rows."""
    gated = [str(m["column"]) for m in document.get("models") or [] if m.get("gated")]
    out: list[str] = []
    any_score = False
    for bench in document["benchmarks"]:
        rows = bench["rows"]
        columns = gated or sorted({str(r["evaluated"]) for r in rows})
        for column in columns:
            # Every row is meant to have every gated column: a row that errored before any model ran has
            # no side at all, and counts against each.
            scored = sum(1 for r in rows if records.score(r, column) is not None)
            any_score = any_score or scored > 0
            if rows and not scored:
                errored = sum(1 for r in rows if r.get("error") is not None)
                skipped = sum(1 for r in rows if r.get("skipped") is not None)
                out.append(
                    f"{bench['benchmark_file']}: {column} has no scored row of {len(rows)} "
                    f"({errored} errored, {skipped} skipped): no verdict stands on it"
                )
    if not any_score:
        out.append("no row of the document has a score: there is nothing to pass")
    return out
