"""The terminal summary: per benchmark, base and adapter score, the difference, the gates (summary_lines).

Pure: takes the results.json document and returns lines. No pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmeval.formatting import (
    MISSING,
    SCORE_MEASURE,
    composite_value,
    level,
    matrix_lines,
    measure_difference,
    measure_interval,
    measure_unit,
    out_of_domain,
    p_value,
    percent,
    points,
    training_summary,
)
from pytest_llmeval.gates import describe_criteria
from pytest_llmeval.records import ADAPTER, BASE
from pytest_llmeval.results import NO_EFFECT
from pytest_llmeval.summaries import NEAR_CHANCE, lm_eval_stderr_key


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


def _chance_lines(chance: Mapping[str, Any]) -> list[str]:
    """A model whose multiple-choice accuracy is not significantly above answering at random."""
    return [
        f"  NOT ABOVE CHANCE: {who} {percent(c['accuracy'])} of {c['n']} multiple-choice rows, chance"
        f" {percent(c['chance_accuracy'])} (p={c['p_value']:.2g}): {NEAR_CHANCE}"
        for who, c in chance.items()
        if c.get("above_chance") is False
    ]


def _lm_eval_figures(block: Mapping[str, Any], metrics: list[str] | None = None) -> str:
    """Each model's lm-eval metrics as lm-eval reports them: accuracies in percent with their standard
    error, perplexities and bits as numbers."""
    parts = []
    for who in (BASE, ADAPTER):
        figures = block.get(who)
        if not figures:
            continue
        shown = []
        for metric in metrics or [k for k in figures if k != "n" and "_stderr" not in k]:
            if metric not in figures:
                continue
            value = float(figures[metric])
            error = figures.get(lm_eval_stderr_key(metric))
            if "perplexity" in metric or "bits" in metric:
                shown.append(f"{metric} {value:.3f}")
            else:
                shown.append(
                    f"{metric} {percent(value)}" + ("" if error is None else f" ± {100 * error:.1f}")
                )
        parts.append(f"{who} " + ", ".join(shown))
    return "; ".join(parts)


def _lm_eval_lines(block: Mapping[str, Any] | None) -> list[str]:
    """A converted lm-eval task's figures as lm-eval reports them (a group file's: its task count)."""
    if not block:
        return []
    if "tasks" in block:
        return [f"  lm-eval: {len(block['tasks'])} tasks in one file (each in results.json; the group below)"]
    shots = block.get("num_fewshot")
    return [
        f"  lm-eval {block.get('task')} v{block.get('version')} ({shots}-shot, lm-eval "
        f"{block.get('lm_eval_version')}): {_lm_eval_figures(block)}"
    ]


def _lm_eval_group_lines(groups: Mapping[str, Any] | None) -> list[str]:
    """Each lm-eval group over its converted tasks, as lm-eval aggregates it."""
    lines = []
    for name, group in (groups or {}).items():
        ran = len(group["tasks"])
        missing = (
            f"; NOT lm-eval's figure: {len(group['missing'])} of its tasks did not run"
            if group["missing"]
            else ""
        )
        lines.append(f"lm-eval group {name} ({ran} tasks): {_lm_eval_figures(group)}{missing}")
    return lines


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
        lines += _chance_lines(bench.get("chance") or {})
        lines += _lm_eval_lines(bench.get("lm_eval"))
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
            lines += _fluency_lines(bench["fluency"], verbose)
        if bench.get("metrics"):
            lines.append(f"  metrics (mean over the rows each scored): {_metrics_text(bench['metrics'])}")
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
    lines += _lm_eval_group_lines(document.get("lm_eval_groups"))
    lines += _criteria_lines(document.get("criteria"), verbose=verbose)
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
    lines += _not_run_lines(document.get("not_run") or [])
    if not document["complete"]:
        lines.append(f"INCOMPLETE: {document['incomplete_reason']}")
    return lines


# Gates a line of _not_run_lines names; the rest are counted (every one is in results.json's not_run).
_MAX_GATES_SHOWN = 12


def _not_run_lines(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the run did not run (results.json's `not_run`): each benchmark file that failed to collect on a
    line of its own; the gates deselected, one line per reason, by file."""
    lines = [f"NOT RUN: {e['file']} failed to collect: {e['why']}" for e in entries if e["gate"] is None]
    by_why: dict[str, dict[str, list[str]]] = {}
    for e in entries:
        if e["gate"] is not None:
            by_why.setdefault(e["why"], {}).setdefault(e["file"] or "", []).append(e["gate"])
    for why, files in by_why.items():
        named = [(file, gate) for file, gates in files.items() for gate in gates]
        shown: dict[str, list[str]] = {}
        for file, gate in named[:_MAX_GATES_SHOWN]:
            shown.setdefault(file, []).append(gate)
        text = "; ".join(
            f"{file}: {', '.join(gates)}" if file else ", ".join(gates) for file, gates in shown.items()
        )
        more = f" and {len(named) - _MAX_GATES_SHOWN} more" if len(named) > _MAX_GATES_SHOWN else ""
        lines.append(
            f"gates not run ({why}; `pytest-llmeval check` fails on them unless given --allow-unrun-gates): "
            f"{text}{more}"
        )
    return lines


def _criteria_lines(criteria: Mapping[str, Any] | None, *, verbose: bool) -> list[str]:
    """The rules the gates decided by, and the run gates they require (a failed one always, else with
    `verbose`)."""
    if not criteria:
        return []  # a document written before results.json named its criteria
    lines = [f"gates decided by {describe_criteria(criteria)}"]
    for name, verdict in (criteria.get("gates") or {}).items():
        if verbose or verdict["status"] == "fail":
            lines.append(f"  {name} {verdict['status']}: {verdict['message']}")
    return lines


def _top_level_line(document: Mapping[str, Any]) -> str:
    """Which benchmark the standard's top-level fields of results.json describe, and why that one."""
    top = document.get("top_level") or {}
    reason = str(top.get("reason") or "not recorded")
    return f"{top['benchmark']} ({reason})" if top.get("benchmark") else f"none ({reason})"


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


def _metrics_text(metrics: Mapping[str, Any]) -> str:
    """'bertscore base 0.81, adapter 0.90 (decides 3 rows); rouge base 0.20, adapter 0.41': every metric
    of a benchmark whose rows name several, and how many rows' pass each decided."""
    parts = []
    for kind, entry in metrics.items():
        sides = [f"{who} {entry[who]:.2f}" for who in (BASE, ADAPTER) if entry.get(who) is not None]
        decides = f" (decides {entry['n_deciding']} rows)" if entry.get("n_deciding") else ""
        parts.append(f"{kind} {', '.join(sides) or '-'}{decides}")
    return "; ".join(parts)


def _fluency_lines(fluency: Mapping[str, Any], verbose: bool) -> list[str]:
    """--llmeval-fluency: per model, the token-weighted perplexity of its outputs beside the references'
    under the same scorer, with the QA fine-tuning document's band; then the chest X-ray document's
    per-study summary of each model (and, verbose, its ranges and review flags)."""
    entries = list(fluency.values())
    if all(entry.get("external") for entry in entries):
        scorers = ", ".join(dict.fromkeys(str(entry["scorer"]) for entry in entries))
        heading = f"fluency, perplexity under the scorer {scorers} (token-weighted)"
    else:
        heading = "fluency, perplexity of each model's own outputs"
    lines = [f"  {heading}: {_fluency_text(fluency)}"]
    for who, entry in fluency.items():
        study = entry.get("chest_xray")
        if not study:
            continue
        figures = study["per_study"]
        stats = "; ".join(
            f"{label} {_spread_text(figures.get(key))}"
            for label, key in (("generated", "perplexity_generated"), ("reference", "perplexity_reference"))
        )
        lines.append(
            f"  chest X-ray summary, {who} ({study['n_studies']} studies, per study): perplexity {stats}"
        )
        if not verbose:
            continue
        ratio = figures.get("perplexity_ratio")
        ranges = study["perplexity_ranges"]["generated"]
        confidence = study["cross_entropy_ranges"]["generated"]
        lines.append(
            "    generated: "
            + ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in ranges.items())
            + "; cross-entropy "
            + ", ".join(f"{name} {n}" for name, n in confidence.items())
            + f"; ratio to reference (mean {MISSING if not ratio else format(ratio['mean'], '.3f')}): "
            + ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in study["ratio_ranges"].items())
            + f" (similar: within {study['ratio_tolerance']:.0%} of 1)"
        )
        flags = [
            f"{label}: {', '.join(study[key])}"
            for key, label in (
                ("review_recommended", "review recommended (perplexity > 50)"),
                ("potential_issues", "potential issues (perplexity > 100)"),
            )
            if study[key]
        ]
        if flags:
            lines.append(f"    {'; '.join(flags)}")
    return lines


def _spread_text(spread: Mapping[str, Any] | None) -> str:
    """mean, median, std, min and max of per-study values, in a few words."""
    if not spread:
        return MISSING
    std = MISSING if spread.get("std") is None else format(spread["std"], ".2f")
    return (
        f"mean {spread['mean']:.2f}, median {spread['median']:.2f}, std {std}, "
        f"min {spread['min']:.2f}, max {spread['max']:.2f}"
    )


def _fluency_text(fluency: Mapping[str, Any]) -> str:
    """Per model: the perplexity of its outputs, the references' under the same scorer beside it, each with
    the QA fine-tuning document's band."""
    parts = []
    for who, entry in fluency.items():
        output, reference = entry.get("output"), entry.get("reference")
        part = f"{who} {MISSING if not output else format(output['perplexity'], '.2f')}{_qa(output)}"
        if reference:
            part += f" (reference {reference['perplexity']:.2f}{_qa(reference)})"
        if entry.get("n_empty_outputs"):
            part += f" [{entry['n_empty_outputs']} empty outputs]"
        parts.append(part)
    return ", ".join(parts)


def _qa(corpus: Mapping[str, Any] | None) -> str:
    """The QA fine-tuning document's band beside a fluency perplexity (low, medium, high), when it has one."""
    return f" [QA band {corpus['qa_band']}]" if corpus and corpus.get("qa_band") else ""
