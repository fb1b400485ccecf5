"""A run's comparisons between columns of the same rows, and the families their p-values are adjusted in.

Every column beside the base is compared with the base on every benchmark, and every full model with every
adapter (PEFT against SFT); the reference is reported beside them and tested in none. Two families:

- `gates`: the comparisons whose p-value decides a gate: each gated column (adapters, --llmeval-gate-model)
  against the base on the benchmarks of its domain (better_than_base);
- `reported`: every other comparison. Out-of-domain changes are judged by the no_degradation thresholds
  on the drop, not by a test, so they do not make an in-domain claim harder to pass.

Within each family the p-values are adjusted with Holm's step-down method (stats.holm), unless the run asks
for none. The gates and results.json compute the same family from the same records, with the same seeded
bootstrap, so a gate's adjusted p is the one results.json reports.

Pure: no pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmeval.formatting import CROSS_ENTROPY_MEASURE, SCORE_MEASURE
from pytest_llmeval.records import ADAPTER, BASE, as_metric, metric_value, partner, score, score_value

GATES_FAMILY = "gates"
REPORTED_FAMILY = "reported"


@dataclass(frozen=True)
class Planned:
    """One comparison: `column` against `against` on the rows of `benchmark`."""

    column: str
    against: str
    benchmark: str
    family: str
    metric: str | None = None  # --llmeval-gate-metric: compared on this metric's scores (records.as_metric)


def plan(
    records_by_benchmark: Mapping[str, Sequence[Mapping[str, Any]]],
    kinds: Mapping[str, str],
    gate_metrics: Sequence[str] = (),
) -> list[Planned]:
    """The comparisons of a run, in a fixed order (benchmark by name, then columns in the run's order).

    kinds: every column beside the base -> "adapter" | "model" | "reference", in the run's order. A column
    is in the `gates` family on a benchmark whose record says it is in its domain (BenchmarkInfo
    `domains`); a benchmark on which a column has no scored row is left out for it.
    """
    planned: list[Planned] = []
    adapters = [c for c, k in kinds.items() if k == "adapter"]
    for name in sorted(records_by_benchmark):
        rows = records_by_benchmark[name]
        if not rows:
            continue
        domains = rows[0]["benchmark"].get("domains") or {}
        present = {c for c in kinds if any(score(r, c) is not None for r in rows)}
        for column, kind in kinds.items():
            if kind == "reference" or column not in present:
                continue
            family = GATES_FAMILY if domains.get(column) == "in" else REPORTED_FAMILY
            planned.append(Planned(column, partner(rows[0], column), name, family))
            # A gate per metric (--llmeval-gate-metric) is one more claim: in the same family as the
            # column's own, so that asking for more gates makes each one harder to pass, not easier.
            for metric in gate_metrics:
                if any(metric_value(r, column, metric) is not None for r in rows):
                    planned.append(Planned(column, partner(rows[0], column), name, family, metric))
        for column, kind in kinds.items():
            if kind != "model" or column not in present:
                continue
            for adapter in adapters:
                if adapter in present:
                    planned.append(Planned(column, adapter, name, REPORTED_FAMILY))
    return planned


def paired_scores(
    records: Sequence[Mapping[str, Any]], column: str = ADAPTER, against: str = BASE
) -> tuple[list[float], list[float]]:
    """Scores of two columns (the adapter and the base) on the rows that have both (rows whose scorer
    failed are left out)."""
    adapter: list[float] = []
    base: list[float] = []
    for record in records:
        a, b = score_value(record, column), score_value(record, against)
        if a is not None and b is not None:
            adapter.append(a)
            base.append(b)
    return adapter, base


def comparison_values(
    records: Sequence[Mapping[str, Any]], column: str = ADAPTER, against: str = BASE
) -> tuple[list[float], list[float], bool, str]:
    """(adapter values, base values, bounded, measure) that gates and statistics compare, row by row
    (`column` against `against`: another pair of columns of the same rows).

    Scores in [0, 1] as a rule. A benchmark of perplexity rows compares per-text negative cross-entropy
    (nats per token; higher is better) instead of pass/fail against the bound, which would throw away how
    much each text moved: a drop of 0.05 in it is a 5% rise in perplexity (e^0.05 = 1.051).
    """
    scored = [r for r in records if score(r, against) is not None]
    if scored and all(r["evaluation_type"] == "perplexity" for r in scored):
        adapter: list[float] = []
        base: list[float] = []
        for r in scored:
            a, b = score(r, column), score(r, against)
            if a is not None and b is not None:
                adapter.append(-float(a["cross_entropy"]))
                base.append(-float(b["cross_entropy"]))
        return adapter, base, False, CROSS_ENTROPY_MEASURE
    adapter, base = paired_scores(records, column, against)
    return adapter, base, True, SCORE_MEASURE


def compare(
    records_by_benchmark: Mapping[str, Sequence[Mapping[str, Any]]],
    planned: Sequence[Planned],
    *,
    alpha: float,
    adjust: str = "holm",
) -> list[dict[str, Any]]:
    """Each planned comparison as results.json's `comparisons` entry, with its p-value adjusted within its
    family (`p_value_adjusted`; equal to `p_value` with adjust "none"). A comparison without paired rows
    has no statistics and takes no place in its family."""
    from pytest_llmeval.stats import compare_paired, holm

    entries: list[dict[str, Any]] = []
    for p in planned:
        rows = sorted(records_by_benchmark[p.benchmark], key=lambda r: r["nodeid"])
        if p.metric is not None:
            rows = [m for r in rows if (m := as_metric(r, p.metric)) is not None]
        values, against, bounded, measure = comparison_values(rows, p.column, p.against)
        entry: dict[str, Any] = {
            "model": p.column,
            "against": p.against,
            "benchmark": p.benchmark,
            "family": p.family,
            "measure": measure,
            "statistics": None,
            "p_value": None,
            "p_value_adjusted": None,
            "significant": None,
        }
        if p.metric is not None:
            entry["metric"] = p.metric
        if values:
            cmp = compare_paired(values, against, alpha=alpha, bounded=bounded)
            entry.update(statistics=cmp.to_json(), p_value=cmp.p_value)
        entries.append(entry)
    for family in (GATES_FAMILY, REPORTED_FAMILY):
        members = [e for e in entries if e["family"] == family and e["p_value"] is not None]
        raw = [float(e["p_value"]) for e in members]
        adjusted = holm(raw) if adjust == "holm" else raw
        for e, value in zip(members, adjusted, strict=True):
            e["p_value_adjusted"] = value
            e["family_size"] = len(members)
            e["significant"] = value < alpha
    return entries


def find(
    entries: Sequence[Mapping[str, Any]],
    column: str,
    against: str,
    benchmark: str,
    metric: str | None = None,
) -> Mapping[str, Any]:
    """The entry of one comparison (`metric`: a gate metric's, None: the rows' own scores)."""
    for e in entries:
        if (e["model"], e["against"], e["benchmark"], e.get("metric")) == (
            column,
            against,
            benchmark,
            metric,
        ):
            return e
    raise KeyError((column, against, benchmark, metric))
