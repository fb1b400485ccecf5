"""results.json: pure aggregation of row records into the document, its atomic write, and its checked read.

No pytest, no torch. Records are records.RowRecord (made by evaluation.scoring.RowScorer.score_row) and gate
verdicts records.GateRecord; everything known at collection (a benchmark's hash and domain) is in them, so
the build reads no file. The document is built in one pass over each benchmark's rows: statistics a gate
already computed are taken from its record, not computed again. Each benchmark entry's figures (mean
scores, corpus perplexity, the composite, pass@k, ...) are summaries.py's; here they are put in place with
the comparisons, gates, slices and rows.

The document's top level is the adapter's LocoLLM results.json for its in-domain benchmark (the standard's
fields, validated against its schema in the tests); `benchmarks[]` keeps every benchmark's full detail.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeAlias, TypedDict, cast

from pytest_llmeval import comparisons
from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.gates import criteria_entry
from pytest_llmeval.records import (
    ADAPTER,
    BASE,
    BenchmarkInfo,
    GateRecord,
    RowRecord,
    evaluated_value,
    metric_value,
    partner,
    score,
    side,
    variant_of,
)
from pytest_llmeval.slices import slices_summary
from pytest_llmeval.summaries import (
    DEFAULT_COMPOSITE_WEIGHTS,
    chance_summary,
    char_accuracy_summary,
    composite_summary,
    corpus_scores,
    fluency_summary,
    lm_eval_groups,
    lm_eval_summary,
    metrics_summary,
    out_of_domain_figure,
    pass_at_k_summary,
    perplexity_summary,
    sandbox_isolation,
    summarize,
    unparsed_summary,
)

SCHEMA_VERSION = 2
# Gate verdicts from worst to best: the most degraded out-of-domain benchmark is the worst verdict first.
_SEVERITY = {"fail": 0, "warn": 1, "pass": 2, "skip": 3, None: 4}


class NotRun(TypedDict):
    """Something the run was given and did not run (results.json's `not_run`): a benchmark file that failed
    to collect (`gate` None: its rows and gates are all missing, and the run is incomplete), or a gate that
    was collected and deselected (`file` None for a gate of no benchmark file: a training or run gate)."""

    file: str | None  # the benchmark file, as results.json's benchmark_file names it
    gate: str | None  # the gate's key in its benchmark's `gates` (or the criteria's), as a verdict would be
    why: str  # the collection error's first line, or the selection options that deselected it


def not_run(*, file: str | None, gate: str | None, why: str) -> NotRun:
    """One entry of results.json's `not_run` (NotRun)."""
    return {"file": file, "gate": gate, "why": why}


def not_run_order(entries: Iterable[NotRun]) -> list[NotRun]:
    """`not_run` as results.json lists it: by file (gates of no file last), a file's own entry before its
    gates, then by gate; one entry per file and gate (under xdist several workers may report the same)."""
    unique = {(e["file"], e["gate"]): e for e in entries}
    return sorted(unique.values(), key=lambda e: (e["file"] is None, e["file"] or "", e["gate"] or ""))


class Selection(TypedDict):
    """What a process's collection selected (hooks.collection.selection_of): rows selected, rows in the
    benchmark files they came from, the options that selected them, and the gates deselected. Under xdist a
    worker sends it to the controller through the row spool (rowstore.RowStore.publish_selection)."""

    selected: int
    total: int
    how: str
    not_run: list[NotRun]


def comparison_blocks(cmp: Any, measure: str) -> dict[str, Any]:
    """A benchmark's `statistics` and `significance_test` from a stats.PairedComparison."""
    return {
        "statistics": {"measure": measure, **cmp.to_json()},
        "significance_test": cmp.significance_report(),
    }


@dataclass(frozen=True)
class Baseline:
    """The earlier run a benchmark's rows are compared with (no_regression), or why there is none."""

    document: Mapping[str, Any] | None
    source: str | None = None  # where it was read from: a history entry, or the --llmeval-previous file
    reason: str | None = None  # why there is none (document None)


# What build_results compares with: one earlier document for every benchmark (--llmeval-previous), or a
# lookup that picks each benchmark's baseline (history.Baselines.for_benchmark), or nothing.
Previous: TypeAlias = "Mapping[str, Any] | Callable[[BenchmarkInfo], Baseline] | None"


def baseline_lookup(previous: Previous) -> Callable[[BenchmarkInfo], Baseline] | None:
    """`previous` as a lookup from a benchmark to its baseline."""
    if previous is None or callable(previous):
        return previous
    document = previous
    return lambda _benchmark: Baseline(document)


def previous_comparison(
    benchmark: BenchmarkInfo,
    records: Sequence[Mapping[str, Any]],
    baseline: Baseline,
    alpha: float,
) -> tuple[Any, dict[str, Any]]:
    """This run's evaluated scores against the baseline's on the same rows.

    (stats.PairedComparison or None, results.json's `comparison_with_previous` block). No comparison when
    there is no baseline (the block's reason says why); not comparable when the benchmark file changed,
    or the baseline is of another schema version.
    """
    name = benchmark["name"]
    block: dict[str, Any] = {
        "previous_version": None,
        "comparable": True,
        "reason": baseline.reason,
        "statistics": None,
        "baseline": baseline.source,
    }
    previous = baseline.document
    if previous is None:
        return None, block
    block["previous_version"] = _version_of(previous)
    if previous.get("schema_version") != SCHEMA_VERSION:
        block["comparable"] = False
        block["reason"] = (
            f"the previous results.json has schema_version {previous.get('schema_version')}, "
            f"this run writes {SCHEMA_VERSION}: its rows cannot be read as this run's"
        )
        return None, block
    entry = next((b for b in previous.get("benchmarks", []) if b.get("benchmark_file") == name), None)
    if entry is None:
        return None, block
    if entry.get("benchmark_hash") != benchmark["sha256"]:
        block["comparable"] = False
        block["reason"] = (
            f"{name} changed since the previous results "
            f"({entry.get('benchmark_hash')} -> {benchmark['sha256']})"
        )
        return None, block
    before = {r["id"]: evaluated_value(r) for r in entry.get("rows", [])}
    now_scores: list[float] = []
    then_scores: list[float] = []
    for record in records:
        current, old = evaluated_value(record), before.get(record["id"])
        if current is not None and old is not None:
            now_scores.append(current)
            then_scores.append(old)
    if not now_scores:
        return None, block
    from pytest_llmeval.stats import compare_paired

    cmp = compare_paired(now_scores, then_scores, alpha=alpha)
    block["statistics"] = cmp.to_json()
    return cmp, block


def _version_of(document: Mapping[str, Any]) -> str | None:
    version = document.get("current_version")
    if isinstance(version, Mapping):
        found = version.get("version")
        return None if found is None else str(found)
    found = document.get("adapter_version")
    return None if found is None else str(found)


def kinds_of(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, str]:
    """Every column beside the base -> its kind, from meta's `models` (roster.Roster.to_json), else from
    the records: a column some row is evaluated by is an adapter, any other a model."""
    listed = meta.get("models")
    if isinstance(listed, list) and listed:
        return {str(m["column"]): str(m["kind"]) for m in listed if m.get("kind") != "base"}
    evaluated = {str(r["evaluated"]) for r in records}
    kinds: dict[str, str] = {}
    for record in records:
        for column in record["models"]:
            if column != BASE and not variant_of(column) and column not in kinds:
                kinds[column] = "adapter" if column in evaluated or column == ADAPTER else "model"
    return kinds


def project(record: RowRecord, column: str) -> RowRecord:
    """A row as a run of `column` alone against the base would have recorded it: its side is `adapter`,
    it is the evaluated one, and the benchmark's domain is its domain (one adapter's LocoLLM document)."""
    models = record["models"]
    against = partner(record, column)  # the base prompted as the column declares, where it differs
    sides = {BASE: models[against]} if against in models else {}
    if column in models:
        sides[ADAPTER] = models[column]
    info: BenchmarkInfo = {
        **record["benchmark"],
        "domain": (record["benchmark"].get("domains") or {}).get(column),
    }
    found = score(record, column)
    passed = bool(found["passed"]) if found is not None and "passed" in found else record["passed"]
    projected: RowRecord = {
        **record,
        "benchmark": info,
        "models": sides,
        "evaluated": ADAPTER,
        "passed": passed,
    }
    projected.pop("baselines", None)  # its base is `base` now
    return projected


def gate_key(gate: Mapping[str, Any]) -> str:
    """A gate record's key in its benchmark's `gates`: the gate's name, with its column when it has one."""
    which = ":".join(str(w) for w in (gate.get("model"), gate.get("metric")) if w)
    return f"{gate['gate']}[{which}]" if which else str(gate["gate"])


def interference_matrix(
    by_benchmark: Mapping[str, Sequence[Mapping[str, Any]]],
    kinds: Mapping[str, str],
    shown: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Every column on every benchmark against the base, in each benchmark's comparison measure
    (comparison_values): the diagonal (a column's own domain) is in-domain gain, the rest out-of-domain
    change. `shown`: a column's name in reports, where it is not the column (a lone adapter's `adapter`).
    None without a column beside the base."""
    if not kinds or not by_benchmark:
        return None
    names = sorted(by_benchmark)
    measures: list[str] = []
    base: list[float | None] = []
    for name in names:
        values, _, _, measure = comparison_values(by_benchmark[name], BASE, BASE)
        measures.append(measure)
        base.append(math.fsum(values) / len(values) if values else None)
    models = []
    for column, kind in kinds.items():
        entry: dict[str, Any] = {
            "name": (shown or {}).get(column, column),  # what reports call the column
            "column": column,
            "kind": kind,
            "against": BASE,
            "values": [],
            "change": [],
            "domain": [],
            "n": [],
        }
        for name in names:
            rows = by_benchmark[name]
            if rows:  # the base it is compared with: records.partner (the same on every benchmark)
                entry["against"] = partner(rows[0], column)
            values, against, _, _ = comparison_values(rows, column, entry["against"])
            mean = math.fsum(values) / len(values) if values else None
            entry["values"].append(mean)
            entry["change"].append(None if mean is None else mean - math.fsum(against) / len(against))
            entry["domain"].append((rows[0]["benchmark"].get("domains") or {}).get(column) if rows else None)
            entry["n"].append(len(values))
        models.append(entry)
    return {"benchmarks": names, "measures": measures, "base": base, "models": models}


def build_results(
    records: Iterable[RowRecord],
    *,
    meta: Mapping[str, Any],
    gates: Iterable[GateRecord] = (),
    previous: Previous = None,
    alpha: float = 0.05,
    composite_weights: Mapping[str, float] | None = None,
    complete: bool,
    incomplete_reason: str | None = None,
    not_run: Iterable[NotRun] = (),
    timestamp: datetime | None = None,
    adjust: str = "holm",
) -> dict[str, Any]:
    """The results.json document: the LocoLLM top level, then one entry per benchmark file with its rows.

    Several columns (adapters, other models): the top level is the first adapter's LocoLLM document (each
    adapter's own is adapter_documents'), its rows carry every column, and `models`, `comparisons` (with
    Holm-adjusted p-values) and `matrix` describe them all."""
    spent = sorted(records, key=lambda r: r["nodeid"])
    ordered, stopped = _sequential(spent, meta)
    gate_list = list(gates)
    kinds = kinds_of(ordered, meta)
    adapters = [c for c, k in kinds.items() if k == "adapter"]
    several = len(kinds) > 1 or (bool(kinds) and not adapters)
    common = _common(previous, alpha, composite_weights, complete, incomplete_reason, not_run, timestamp)
    by_benchmark: dict[str, list[RowRecord]] = {}
    for record in ordered:
        by_benchmark.setdefault(record["benchmark"]["name"], []).append(record)
    if several and adapters:
        primary = adapters[0]
        own = _gates_of(gate_list, primary)
        document = _build(
            [project(r, primary) for r in ordered], own, {**meta, **_adapter_meta(meta, primary)}, common
        )
    else:
        document = _build(ordered, gate_list, meta, common)
    if several:
        gates_of: dict[str, dict[str, Any]] = {}
        for gate in sorted(gate_list, key=lambda g: (g["benchmark"]["name"], gate_key(g))):
            gates_of.setdefault(gate["benchmark"]["name"], {})[gate_key(gate)] = {
                k: v for k, v in gate.items() if k not in ("benchmark", "statistics")
            }
        for entry in document["benchmarks"]:
            name = entry["benchmark_file"]
            entry["rows"] = [_row(r) for r in by_benchmark.get(name, [])]
            entry["gates"] = gates_of.get(name, {})
        document["several_models"] = True
        _lm_eval_of_every_column(document, by_benchmark, list(kinds))
        if adapters:
            document["top_level"]["reason"] += f"; the top level is adapter {adapters[0]}'s document"
    planned = comparisons.plan(by_benchmark, kinds, meta.get("gate_metrics") or ())
    document["models"] = list(meta.get("models") or [])
    document["adjustment"] = {
        "method": adjust,
        "families": {
            comparisons.GATES_FAMILY: "each gated column against the base on its own domain "
            "(better_than_base)",
            comparisons.REPORTED_FAMILY: "every other comparison (out-of-domain changes, models against "
            "adapters), adjusted among themselves",
        },
    }
    document["comparisons"] = comparisons.compare(by_benchmark, planned, alpha=alpha, adjust=adjust)
    # Each benchmark's significance_test (the top level's column against the base) with its adjusted p: the
    # one its gate decided on, and the same when the gates did not run.
    top_column = adapters[0] if adapters else None
    for entry in document["benchmarks"]:
        test = entry.get("significance_test")
        if test is None or top_column is None:
            continue
        try:
            found = comparisons.find(document["comparisons"], top_column, BASE, entry["benchmark_file"])
        except KeyError:
            continue
        # Only onto the same comparison (a gate that decided on other rows keeps its own block as it is).
        if found["p_value_adjusted"] is not None and found["p_value"] == test.get("p_value"):
            test.update(
                p_value_adjusted=found["p_value_adjusted"],
                adjustment=adjust,
                family=found["family"],
                family_size=found["family_size"],
            )
    names = {str(m["column"]): str(m["name"]) for m in document["models"] if "column" in m}
    document["matrix"] = interference_matrix(by_benchmark, kinds, names)
    from pytest_llmeval.costs import run_cost

    for entry in document["benchmarks"]:
        if entry["benchmark_file"] in stopped.blocks:
            entry["sequential"] = stopped.blocks[entry["benchmark_file"]]
    # What every model and benchmark took in tokens, seconds and dollars (rows computed past a sequential
    # stop and discarded included); the caps; why a run stopped.
    document["cost"] = {**run_cost(spent, meta.get("spent")), "discarded_rows": stopped.discarded}
    return document


@dataclass(frozen=True)
class _Stopped:
    blocks: dict[str, dict[str, Any]]  # benchmark -> its `sequential` block
    discarded: int  # rows computed past a stop (under xdist) and dropped


def _sequential(records: Sequence[RowRecord], meta: Mapping[str, Any]) -> tuple[list[RowRecord], _Stopped]:
    """--llmeval-sequential (meta `sequential`): rows past a benchmark's stop as skipped rows, sorted."""
    if not meta.get("sequential"):
        return list(records), _Stopped({}, 0)
    from pytest_llmeval.early_stop import apply

    kept, blocks, discarded = apply(records, meta["sequential"])
    return sorted(cast(list[RowRecord], kept), key=lambda r: r["nodeid"]), _Stopped(blocks, discarded)


def _common(
    previous: Previous,
    alpha: float,
    composite_weights: Mapping[str, float] | None,
    complete: bool,
    incomplete_reason: str | None,
    not_run: Iterable[NotRun],
    timestamp: datetime | None,
) -> dict[str, Any]:
    """What every LocoLLM document of one run is built with (_build's `common`)."""
    return {
        "previous": previous,
        "alpha": alpha,
        "composite_weights": composite_weights,
        "complete": complete,
        "incomplete_reason": incomplete_reason,
        "not_run": not_run_order(not_run),
        "timestamp": timestamp,
    }


def _adapter_meta(meta: Mapping[str, Any], column: str) -> dict[str, Any]:
    """meta's adapter fields for one adapter column (meta `models` holds each adapter's name, version and
    folder)."""
    for m in meta.get("models") or []:
        if m.get("column") == column:
            return {
                "adapter_name": m.get("name"),
                "adapter_version": m.get("version"),
                "adapter": m.get("source"),
                "parameter_efficiency": m.get("parameter_efficiency"),
                "training": m.get("training"),
            }
    return {}


def _gates_of(gates: Sequence[GateRecord], column: str) -> list[GateRecord]:
    """One column's gate records, and the benchmark's own gates, as a run of that column alone keys them."""
    out: list[GateRecord] = []
    for gate in gates:
        if gate.get("model") in (None, column):
            copy: GateRecord = {**gate, "model": None}
            out.append(copy)
    return out


def adapter_documents(
    records: Iterable[RowRecord],
    *,
    meta: Mapping[str, Any],
    gates: Iterable[GateRecord] = (),
    previous: Previous = None,
    alpha: float = 0.05,
    composite_weights: Mapping[str, float] | None = None,
    complete: bool,
    incomplete_reason: str | None = None,
    not_run: Iterable[NotRun] = (),
    timestamp: datetime | None = None,
) -> dict[str, dict[str, Any]]:
    """Each adapter's own LocoLLM document (results.<name>.json) of a run with several columns: its rows
    against the base and its gates, as a run of that adapter alone would have written them. Empty for a
    run of one adapter and nothing else (results.json is its document)."""
    ordered, _ = _sequential(sorted(records, key=lambda r: r["nodeid"]), meta)
    gate_list = list(gates)
    kinds = kinds_of(ordered, meta)
    adapters = [c for c, k in kinds.items() if k == "adapter"]
    if len(kinds) <= 1:
        return {}
    common = _common(previous, alpha, composite_weights, complete, incomplete_reason, not_run, timestamp)
    out: dict[str, dict[str, Any]] = {}
    for column in adapters:
        own = _gates_of(gate_list, column)
        extra = _adapter_meta(meta, column)
        document = _build([project(r, column) for r in ordered], own, {**meta, **extra}, common)
        document["column"] = column
        out[str(extra.get("adapter_name") or column)] = document
    return out


def _build(
    ordered: Sequence[RowRecord],
    gates: Iterable[GateRecord],
    meta: Mapping[str, Any],
    common: Mapping[str, Any],
) -> dict[str, Any]:
    """One LocoLLM document of base and (at most) one adapter column."""
    previous: Previous = common.get("previous")
    alpha: float = common.get("alpha", 0.05)
    composite_weights = common.get("composite_weights")
    complete: bool = common["complete"]
    incomplete_reason = common.get("incomplete_reason")
    unrun: list[NotRun] = common.get("not_run", [])
    timestamp = common.get("timestamp")
    weights = DEFAULT_COMPOSITE_WEIGHTS if composite_weights is None else composite_weights
    by_benchmark: dict[str, list[RowRecord]] = {}
    info: dict[str, BenchmarkInfo] = {}
    for record in ordered:
        by_benchmark.setdefault(record["benchmark"]["name"], []).append(record)
        info[record["benchmark"]["name"]] = record["benchmark"]
    gates_of: dict[str, dict[str, GateRecord]] = {}
    for gate in sorted(gates, key=lambda g: (g["benchmark"]["name"], g["gate"], g.get("metric") or "")):
        # A gate per metric sits beside its gate (`better_than_base[rouge]`), never in its place.
        gates_of.setdefault(gate["benchmark"]["name"], {})[gate_key(gate)] = gate
        info.setdefault(gate["benchmark"]["name"], gate["benchmark"])
    has_adapter = bool(ordered) and ordered[0]["evaluated"] == ADAPTER
    lookup = baseline_lookup(previous)
    baselines = {name: None if lookup is None else lookup(info[name]) for name in by_benchmark}
    benchmarks = []
    for name in sorted(by_benchmark):
        benchmarks.append(
            _benchmark_entry(
                info[name], by_benchmark[name], gates_of.get(name, {}), baselines[name], alpha, weights
            )
        )
    when = (timestamp or datetime.now(timezone.utc)).astimezone(timezone.utc)
    top, why = _top_level(benchmarks, has_adapter)
    top_baseline = None if top is None else baselines[top["benchmark_file"]]
    current = {
        "version": meta.get("adapter_version"),
        "adapter_score": None if top is None else top["results"]["adapter_score"],
        "base_model_score": None if top is None else top["results"]["base_model_score"],
    }
    hardware = meta.get("hardware") or {}
    inference = dict(meta.get("inference_config") or {})
    decoding = inference.get("decoding") or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": "adapter_vs_base" if has_adapter else "base_only",
        # The LocoLLM standard's document, for the adapter's in-domain benchmark (`top_level` says which).
        "adapter_name": meta.get("adapter_name"),
        "adapter_version": meta.get("adapter_version"),
        "base_model": meta.get("base_model"),
        "quantization": meta.get("quantization"),
        # The adaptation document's §2: the adapter's parameters against the whole model's (models.py).
        "parameter_efficiency": meta.get("parameter_efficiency"),
        # How the adapter trained, from its training log (training_entry); None without one.
        "training": meta.get("training"),
        "benchmark_file": None if top is None else top["benchmark_file"],
        "benchmark_hash": None if top is None else top["benchmark_hash"],
        "n_examples": None if top is None else top["n_examples"],
        "evaluation_type": None if top is None else top["evaluation_type"],
        "results": None if top is None else top["results"],
        "out_of_domain": _most_degraded(benchmarks) if has_adapter else None,
        "timestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "hardware": hardware_line(hardware),
        "inference_config": {
            # The standard's three settings first; decoding is greedy, so temperature 0 and top_p 1.
            "temperature": float(decoding.get("temperature", 0.0)),
            "max_tokens": int(decoding.get("max_new_tokens", 512)),
            "top_p": float(decoding.get("top_p", 1.0)),
            **inference,
        },
        "previous_version": (
            None
            if top_baseline is None or top_baseline.document is None
            else _previous_version(top_baseline.document, top)
        ),
        "current_version": current,
        # Beyond the standard.
        "top_level": {"benchmark": None if top is None else top["benchmark_file"], "reason": why},
        "adapter_path": meta.get("adapter"),
        "base_model_note": meta.get("base_model_note"),
        "hardware_detail": hardware,
        "complete": complete,
        "incomplete_reason": None if complete else incomplete_reason,
        # What the run was given and did not run: benchmark files that failed to collect, deselected gates.
        "not_run": [dict(entry) for entry in unrun],
        # --llmeval-sample: the seeded subset that ran (the same rows for every model and worker).
        "subset": meta.get("subset"),
        # The rules the gates decided by (--llmeval-criteria), with the run gates they require.
        "criteria": criteria_entry(
            meta.get("criteria"),
            [r["benchmark"] for r in ordered],
            {ADAPTER: str(meta.get("adapter_name") or ADAPTER)}
            | {str(m["column"]): str(m["name"]) for m in meta.get("models") or [] if "column" in m},
        ),
        "sandbox": sandbox_isolation(ordered),
        # semantic and bertscore rows' model (--llmeval-embedding-model), where a row was scored by one.
        "embedding_model": meta.get("embedding_model") if _embedded(ordered) else None,
        # Over every row of the run: the QA document scores one model with several metrics at once.
        "composite": composite_summary(ordered, weights),
        # lm-eval's groups (MMLU's subjects, say) over their converted tasks' benchmarks, as lm-eval
        # aggregates them; None when no converted task is in a group.
        "lm_eval_groups": lm_eval_groups([b.get("lm_eval") for b in benchmarks]),
        "benchmarks": benchmarks,
    }


def _lm_eval_of_every_column(
    document: dict[str, Any], by_benchmark: Mapping[str, list[RowRecord]], columns: Sequence[str]
) -> None:
    """Several columns: each converted lm-eval task's figures, and each group's, for every column (each as
    its run alone against the base would report them), under `models`; the blocks' own `base` and
    `adapter` are the top level's column's."""
    blocks: dict[str, dict[str, Any]] = {}
    for entry in document["benchmarks"]:
        block = entry.get("lm_eval")
        if block is None:
            continue
        rows = by_benchmark.get(entry["benchmark_file"], [])
        for column in columns:
            found = lm_eval_summary([project(r, column) for r in rows]) or {}
            blocks.setdefault(column, {})[entry["benchmark_file"]] = found
            if "tasks" in block:
                for task, figures in (found.get("tasks") or {}).items():
                    if ADAPTER in figures and task in block["tasks"]:
                        block["tasks"][task].setdefault("models", {})[column] = figures[ADAPTER]
            elif ADAPTER in found:
                block.setdefault("models", {})[column] = found[ADAPTER]
    groups = document.get("lm_eval_groups") or {}
    for column, found in blocks.items():
        for name, group in (lm_eval_groups(list(found.values())) or {}).items():
            if name in groups and ADAPTER in group:
                groups[name].setdefault("models", {})[column] = group[ADAPTER]


def _embedded(rows: Sequence[RowRecord]) -> bool:
    """Whether a row was scored with the embedding model (its own type, or one of its `metrics`)."""
    kinds = ("semantic", "bertscore")
    return any(metric_value(r, who, k) is not None for r in rows for who in r["models"] for k in kinds)


def _benchmark_entry(
    bench: BenchmarkInfo,
    rows: Sequence[RowRecord],
    gates: Mapping[str, GateRecord],
    baseline: Baseline | None,
    alpha: float,
    weights: Mapping[str, float],
) -> dict[str, Any]:
    """One benchmark's entry: summary, statistics (a gate's when it computed them), gates, rows."""
    name = bench["name"]
    types = sorted({r["evaluation_type"] for r in rows})
    has_adapter = rows[0]["evaluated"] == ADAPTER
    entry: dict[str, Any] = {
        "benchmark_file": name,
        "benchmark_hash": bench["sha256"],
        "n_examples": len(rows),
        "evaluation_type": types[0] if len(types) == 1 else "mixed",
        "evaluation_types": types,
        "domain": bench["domain"],
        "results": summarize(rows),
        "statistics": None,
        "significance_test": None,
        "gates": {
            g: {k: v for k, v in gate.items() if k not in ("benchmark", "statistics")}
            for g, gate in gates.items()
        },
    }
    # The comparison gate decided on these very rows: its statistics are the benchmark's (computed once).
    # A gate per metric (--llmeval-gate-metric) decided on another metric's scores: its comparison is in
    # `comparisons`, never the benchmark's own.
    decided = next(
        (
            g["statistics"]
            for g in gates.values()
            if g["statistics"] and "statistics" in g["statistics"] and not g.get("metric")
        ),
        None,
    )
    if decided is not None:
        entry.update(decided)
    elif has_adapter:
        adapter_values, base_values, bounded, measure = comparison_values(rows)
        if adapter_values:
            from pytest_llmeval.stats import compare_paired

            cmp = compare_paired(adapter_values, base_values, alpha=alpha, bounded=bounded)
            entry.update(comparison_blocks(cmp, measure))
    # The optional blocks: each present only where the benchmark's rows have something to say.
    optional = {
        "perplexity": perplexity_summary(rows),
        "fluency": fluency_summary(rows),
        "pass_at_k": pass_at_k_summary(rows),
        "unparsed": unparsed_summary(rows),
        "char_accuracy": char_accuracy_summary(rows),
        "slices": slices_summary(rows, alpha),
        "corpus": corpus_scores(rows),
        "composite": composite_summary(rows, weights),
        "metrics": metrics_summary(rows),
        "lm_eval": lm_eval_summary(rows),
        "chance": chance_summary(rows),
    }
    entry.update({key: block for key, block in optional.items() if block is not None})
    if baseline is not None:
        regression = gates.get("no_regression")
        if regression is not None and regression["statistics"] is not None:
            entry["comparison_with_previous"] = regression["statistics"]["comparison_with_previous"]
        else:
            entry["comparison_with_previous"] = previous_comparison(bench, rows, baseline, alpha)[1]
    if has_adapter:
        entry["adapter_effect"] = adapter_effect(rows)
    if has_adapter and bench["domain"] == "out":
        verdict = gates.get("no_degradation")
        entry["out_of_domain"] = out_of_domain_figure(
            name, rows, None if verdict is None else verdict["status"]
        )
    entry["rows"] = [_row(r) for r in rows]
    return entry


def _top_level(
    benchmarks: Sequence[Mapping[str, Any]], has_adapter: bool
) -> tuple[Mapping[str, Any] | None, str]:
    """The benchmark the standard's top-level fields describe, and why that one."""
    if not benchmarks:
        return None, "no benchmark row was recorded"
    scored = [b for b in benchmarks if b["results"]["base_model_score"] is not None]
    if has_adapter:
        inside = [b for b in benchmarks if b["domain"] == "in"]
        if inside:
            pick = next((b for b in inside if b in scored), inside[0])
            others = f" ({len(inside) - 1} more in-domain: see benchmarks)" if len(inside) > 1 else ""
            return pick, f"the adapter's in-domain benchmark{others}"
        pick = next(iter(scored), benchmarks[0])
        return pick, (
            f"no in-domain benchmark ran: the top level describes {pick['benchmark_file']}, "
            f"{_first(pick, scored)} (mark in-domain files with --llmeval-domain or metadata.json "
            "domain_benchmarks)"
        )
    pick = next(iter(scored), benchmarks[0])
    return pick, f"base-only run: the top level describes {pick['benchmark_file']}, {_first(pick, scored)}"


def _first(pick: Mapping[str, Any], scored: Sequence[Mapping[str, Any]]) -> str:
    return "the first benchmark by name with a score" if pick in scored else "the first benchmark by name"


def _most_degraded(benchmarks: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The out_of_domain figure of the worst out-of-domain benchmark: worst verdict, then largest drop."""
    figures = [b["out_of_domain"] for b in benchmarks if b.get("out_of_domain")]
    if not figures:
        return None
    worst: dict[str, Any] = min(
        figures, key=lambda f: (_SEVERITY.get(f["verdict"], 4), f["degradation"], f["benchmark"])
    )
    return worst


def _previous_version(previous: Mapping[str, Any], top: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The standard's previous_version: the previous run's version and its scores on the same benchmark."""
    name = None if top is None else top["benchmark_file"]
    entry = next((b for b in previous.get("benchmarks", []) if b.get("benchmark_file") == name), None)
    results = (entry or {}).get("results") or {}
    base = results.get("base_model_score")
    if base is None:
        return None  # the standard needs the base's score; a previous run without this benchmark has none
    return {
        "version": _version_of(previous),
        "adapter_score": results.get("adapter_score"),
        "base_model_score": base,
    }


def hardware_line(hardware: Mapping[str, Any]) -> str:
    """The standard's `hardware` string, e.g. `cpu (x86_64, 2 cores), Linux-6.1-x86_64, torch 2.13.0`."""
    if not hardware:
        return "unknown (no model was loaded in this run)"
    device = str(hardware.get("device", "unknown device"))
    name = hardware.get("device_name")
    cores = hardware.get("cpu_count")
    inside = ", ".join(str(x) for x in (name, f"{cores} cores" if cores else None) if x)
    parts = [f"{device} ({inside})" if inside else device]
    parts += [str(hardware[k]) for k in ("platform",) if hardware.get(k)]
    parts += [f"{k} {hardware[k]}" for k in ("torch", "transformers") if hardware.get(k)]
    return ", ".join(parts)


def _what_changed(record: Mapping[str, Any], who: str) -> Any:
    """What a model produced on a row, to compare with another model: its text, else what it measured."""
    its = side(record, who)
    if its is None:
        return None
    if its.get("output") is not None:
        return its["output"]
    found = its.get("score") or {}
    return (found.get("value"), found.get("perplexity"), found.get("predicted_index"))


def adapter_effect(records: Sequence[Mapping[str, Any]], who: str = ADAPTER) -> str | None:
    """ "none" when `who` produced exactly what the base produced on every row both ran (an adapter that
    was never applied, or whose LoRA B weights are all zero: lm-eval #2432, peft #1468), "changed" when
    it differs on any, None without a row to compare."""
    pairs = [(_what_changed(r, who), _what_changed(r, BASE)) for r in records]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not pairs:
        return None
    return "none" if all(a == b for a, b in pairs) else "changed"


NO_EFFECT = "its outputs equal the base's on every row (adapter_effect: none): is the adapter applied?"


def _row(record: RowRecord) -> dict[str, Any]:
    """A row as results.json shows it (the benchmark is its parent)."""
    return {k: v for k, v in record.items() if k not in ("benchmark", "cost")}
