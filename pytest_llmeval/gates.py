"""Gates: pass/warn/fail/skip verdicts from paired comparisons and benchmark hygiene checks.

Pure: no pytest, no torch. The plugin turns each Verdict into a test item of its own, so a failed gate shows
in JUnit and `-k`; a `skip` becomes a pytest skip there, which is why `passed` counts it as not failing.

Threshold rule used everywhere: a value within `_EPS` of a threshold counts as *at* the threshold, and at the
threshold the milder verdict wins. Means of n scores carry rounding errors (0.85 - 0.90 is
-0.05000000000000004 in floats), and a drop of exactly 5 points must not read as "more than 5 points".
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pytest_llmeval.benchmark import Case
from pytest_llmeval.formatting import level, name_of_test, p_value
from pytest_llmeval.training import (
    TrainingLog,
    assert_converged,
    assert_no_overfitting,
    convergence_step,
    overfitting,
)

if TYPE_CHECKING:
    # Only attributes are read at run time: importing stats here would pull in scipy for a type name.
    from pytest_llmeval.stats import PairedComparison

# A benchmark file's gates.
GATES: tuple[str, ...] = (
    "better_than_base",
    "no_degradation",
    "no_regression",
    "size",
    "difficulty_mix",
    "edge_cases",
    "held_out",
)
# Gates on how a column trained, from its training log (one item per column, not per benchmark file).
TRAINING_GATES: tuple[str, ...] = ("converged", "no_overfitting")
# Gates on the run as a whole, one item per gated column, made where the criteria require them (locollm).
RUN_GATES: tuple[str, ...] = ("out_of_domain_required",)
STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "skip")

# Far above the rounding error of a mean of a million scores (~1e-10), far below any meaningful threshold.
_EPS = 1e-9

# The LocoLLM standard's difficulty split, and its easy rows: "30% straightforward (base model should get
# ~50%+ of these right)".
DEFAULT_DIFFICULTY_MIX: Mapping[str, float] = MappingProxyType({"easy": 0.3, "medium": 0.5, "hard": 0.2})
EASY_BASE_EXPECTED = 0.5

# How many near-duplicate rows the message names, and training lines each details entry keeps: a 100k-row
# training set must not turn results.json into a copy of itself.
_MESSAGE_ROWS = 5
_DETAIL_LINES = 20


@dataclass(frozen=True)
class Verdict:
    """The outcome of one gate."""

    gate: str
    status: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gate not in (*GATES, *TRAINING_GATES, *RUN_GATES):
            raise ValueError(
                f"unknown gate {self.gate!r} (known: {', '.join(GATES)}), nor a training gate "
                f"({', '.join(TRAINING_GATES)}) nor a run gate ({', '.join(RUN_GATES)})"
            )
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r} (known: {', '.join(STATUSES)})")

    @property
    def passed(self) -> bool:
        """True unless the gate failed (a skip is not a failure; the plugin reports it as a pytest skip)."""
        return self.status in ("pass", "warn", "skip")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict for results.json."""
        return {
            "gate": self.gate,
            "status": self.status,
            "passed": self.passed,
            "message": self.message,
            "details": dict(self.details),
        }


# ---------------------------------------------------------------------------------------------------------
# Criteria: the rules the comparison gates decide by (--llmeval-criteria)


@dataclass(frozen=True)
class Criteria:
    """The rules better_than_base and no_degradation decide by, and what a run must hold: a named profile
    (--llmeval-criteria), or the default's rules as --llmeval-gate and the drop options set them."""

    name: str  # "default", or another profile of CRITERIA
    better_than_base: str  # "significant" (a higher mean and a paired test) or "point" (the mean alone)
    fail_drop: float  # no_degradation fails above this drop of the mean
    warn_drop: float | None  # ...and passes with a warning above this one; None: no warn band
    problem_drop: float | None = None  # a failure above this drop is named a training problem
    out_of_domain_required: bool = False  # each gated column needs a benchmark out of its domain (RUN_GATES)

    @property
    def warn_at(self) -> float:
        """The drop above which no_degradation stops passing plainly (the fail threshold: no band)."""
        return self.fail_drop if self.warn_drop is None else self.warn_drop

    def to_json(self) -> dict[str, Any]:
        """results.json's `criteria` (before the run gates' verdicts: criteria_entry)."""
        return {
            "name": self.name,
            "better_than_base": self.better_than_base,
            "fail_drop": self.fail_drop,
            "warn_drop": self.warn_drop,
            "training_problem_drop": self.problem_drop,
            "out_of_domain_required": self.out_of_domain_required,
        }


DEFAULT_CRITERIA = Criteria("default", "significant", fail_drop=0.10, warn_drop=0.05)
# The LocoLLM evaluation standard as written: "Adapter score must be higher than base model score"; out of
# domain "within 5 percentage points of the base model's score", "more than 10 points indicates a problem
# with training"; "Run the adapter on at least one other domain's benchmark".
LOCOLLM_CRITERIA = Criteria(
    "locollm", "point", fail_drop=0.05, warn_drop=None, problem_drop=0.10, out_of_domain_required=True
)
CRITERIA: Mapping[str, Criteria] = MappingProxyType({c.name: c for c in (DEFAULT_CRITERIA, LOCOLLM_CRITERIA)})


def describe_criteria(entry: Mapping[str, Any]) -> str:
    """One line on the rules of a `criteria` entry (Criteria.to_json), for the run header and the summary."""
    comparison = (
        "better_than_base on the point estimate (adapter mean > base mean)"
        if entry["better_than_base"] == "point"
        else "better_than_base needs a higher mean and a significant paired test"
    )
    fail = f"{float(entry['fail_drop']) * 100:g}"
    if entry.get("warn_drop") is None:
        drops = f"no_degradation fails above a {fail}-point drop, no warn band"
    else:
        drops = (
            f"no_degradation warns above a {float(entry['warn_drop']) * 100:g}-point drop, fails above {fail}"
        )
    if entry.get("training_problem_drop") is not None:
        drops += f" (above {float(entry['training_problem_drop']) * 100:g}: a training problem)"
    required = (
        "an out-of-domain benchmark is required"
        if entry.get("out_of_domain_required")
        else "no out-of-domain benchmark required"
    )
    standard = " (the LocoLLM standard)" if entry["name"] == "locollm" else ""
    return f"criteria {entry['name']}{standard}: {comparison}; {drops}; {required}"


# ---------------------------------------------------------------------------------------------------------
# Policy: which gates a benchmark file gets


def in_domain(benchmark: str, adapter: Path | None, globs: Sequence[str], rootdir: Path) -> bool:
    """In-domain: under the adapter's folder (adapters/<domain>/eval/...), or matched by a domain glob."""
    path = (rootdir / benchmark).resolve()
    if adapter is not None and path.is_relative_to(adapter.resolve()):
        return True
    return any(fnmatch.fnmatch(benchmark, g) or fnmatch.fnmatch(str(path), g) for g in globs)


def gate_names(*, in_domain: bool, has_previous: bool) -> list[str]:
    """The gates a benchmark file gets, in the order they run."""
    names = ["better_than_base" if in_domain else "no_degradation"]
    if has_previous:
        names.append("no_regression")
    return [*names, "size", "difficulty_mix", "edge_cases", "held_out"]


# ---------------------------------------------------------------------------------------------------------
# Model gates: verdicts from paired comparisons (stats.compare_paired)


@dataclass(frozen=True)
class Adjusted:
    """A p-value adjusted for the run's family of comparisons (stats.holm), and what it was adjusted over."""

    p_value: float  # the adjusted p-value the gate decides on
    method: str  # "holm"
    family_size: int  # comparisons in the family


def better_than_base(
    cmp: PairedComparison | None,
    *,
    mode: str = "significant",
    who: str = "adapter",
    adjusted: Adjusted | None = None,
) -> Verdict:
    """Does `who` (the adapter) beat the base model: significantly (default) or on the point estimate
    (LocoLLM)? With `adjusted`, significance is decided on the family-adjusted p-value (Holm)."""
    if mode not in ("significant", "point"):
        raise ValueError(f"better_than_base mode must be 'significant' or 'point', got {mode!r}")
    gate = "better_than_base"
    if cmp is None:
        return Verdict(gate, "skip", f"no {who}: nothing to compare", {"mode": mode})
    details: dict[str, Any] = {"mode": mode, "comparison": cmp.to_json()}
    summary = _summary(cmp, adapter=who)
    better = cmp.difference > _EPS
    p = cmp.p_value
    test = f"{name_of_test(cmp.test)} p={p_value(cmp.p_value, cmp.alpha)}"
    if adjusted is not None:
        p = adjusted.p_value
        details.update(
            p_value_adjusted=adjusted.p_value, adjustment=adjusted.method, family_size=adjusted.family_size
        )
        if adjusted.family_size > 1:
            test += (
                f", {adjusted.method.capitalize()}-adjusted over {adjusted.family_size} comparisons "
                f"p={p_value(adjusted.p_value, cmp.alpha)}"
            )
    significant = better and p < cmp.alpha
    if mode == "point":
        if better:
            # The LocoLLM criterion: any improvement of the mean counts; say how much evidence there is.
            evidence = (
                f"{test} < {cmp.alpha:g}" if significant else f"not significant: {test} >= {cmp.alpha:g}"
            )
            return Verdict(gate, "pass", f"{summary}; better on the point estimate ({evidence})", details)
        return Verdict(
            gate, "fail", f"{who} is not better than base on the point estimate: {summary}", details
        )
    if significant:
        return Verdict(gate, "pass", f"{summary}, {test} < {cmp.alpha:g}", details)
    if not better:
        return Verdict(gate, "fail", f"{who} is not better than base: {summary}, {test}", details)
    return Verdict(
        gate,
        "fail",
        f"{who} is better than base but not significantly: {summary}, {test} >= {cmp.alpha:g}"
        + _power_note(cmp),
        details,
    )


def no_degradation(
    cmp: PairedComparison | None,
    *,
    warn_drop: float | None = 0.05,
    fail_drop: float = 0.10,
    problem_drop: float | None = None,
    who: str = "adapter",
) -> Verdict:
    """Does the adapter keep the base model's score on a general benchmark (drop <= warn_drop passes)?

    `warn_drop` None: no warn band (a drop up to fail_drop passes, above it fails: LOCOLLM_CRITERIA). A
    failure above `problem_drop` says the standard reads it as a problem with training."""
    band = fail_drop if warn_drop is None else warn_drop
    if not 0 <= band <= fail_drop:
        raise ValueError(
            "no_degradation needs 0 <= warn_drop <= fail_drop, "
            f"got warn_drop={warn_drop!r}, fail_drop={fail_drop!r}"
        )
    gate = "no_degradation"
    if cmp is None:
        return Verdict(gate, "skip", f"no {who}: nothing to compare", {})
    drop = -cmp.difference
    details: dict[str, Any] = {
        "drop": drop,
        "warn_drop": warn_drop,
        "fail_drop": fail_drop,
        "comparison": cmp.to_json(),
    }
    if problem_drop is not None:
        details["training_problem_drop"] = problem_drop
    summary = _summary(cmp, adapter=who)
    problem = fail_drop if problem_drop is None else problem_drop
    shown = _shown(drop, lambda d: (d > band + _EPS, d > fail_drop + _EPS, d > problem + _EPS))
    if drop > fail_drop + _EPS:
        message = f"{summary}: drop {shown} > fail threshold {fail_drop:.3f}"
        if problem_drop is not None and drop > problem_drop + _EPS:
            message += (
                f"; more than {problem_drop * 100:g} points, which the LocoLLM standard calls a problem "
                "with training"
            )
        return Verdict(gate, "fail", message, details)
    if warn_drop is not None and drop > warn_drop + _EPS:
        return Verdict(
            gate,
            "warn",
            f"{summary}: drop {shown} > warn threshold {warn_drop:.3f} (fails above {fail_drop:.3f})",
            details,
        )
    verb = f"drop {shown} <= {band:.3f}" if drop > 0 else "no drop"
    return Verdict(gate, "pass", f"{summary}: {verb}", details)


@dataclass(frozen=True)
class Evidence:
    """What a comparison gate has to decide on: the rows of its benchmark that ran, and how many of them
    gave a score on both sides (the compared column and its base), the others by why not."""

    rows: int  # rows of the benchmark that ran in this session (sequentially stopped rows aside)
    scored: int  # rows with a score on both sides: the pairs a comparison is made of
    errored: int  # rows that ended in an error (generation, endpoint, scorer)
    skipped: int  # rows skipped (no sandbox, a resource missing)

    @property
    def unscored(self) -> int:
        """Rows that ran without error or skip but lack a score on one side."""
        return max(0, self.rows - self.scored - self.errored - self.skipped)

    def needed(self, minimum: int) -> int:
        """Pairs a verdict needs: the size gate's minimum, or every row that ran when fewer ran (a
        selection, a small file); at least one."""
        return max(1, min(minimum, self.rows))

    def to_json(self, minimum: int) -> dict[str, int]:
        return {
            "rows": self.rows,
            "scored_pairs": self.scored,
            "errored": self.errored,
            "skipped": self.skipped,
            "unscored": self.unscored,
            "needed": self.needed(minimum),
        }


def without_evidence(
    gate: str, evidence: Evidence, *, minimum: int, who: str = "adapter", against: str = "base"
) -> Verdict | None:
    """A failed verdict when a comparison gate has fewer scored pairs than it needs (Evidence.needed), else
    None. Never a skip: a column that ran and produced no score is not "no adapter", and a gate that passes
    on no evidence turns a run whose every row errored green."""
    needed = evidence.needed(minimum)
    if evidence.scored >= needed:
        return None
    why = [
        f"{n} {what}"
        for n, what in (
            (evidence.errored, "errored"),
            (evidence.skipped, "skipped"),
            (evidence.unscored, "without a score on both sides"),
        )
        if n
    ]
    rule = (
        f"every row that ran (fewer than --llmeval-min-rows={minimum})"
        if needed == evidence.rows and needed < minimum
        else f"--llmeval-min-rows={minimum}"
    )
    return Verdict(
        gate,
        "fail",
        f"{who}: {evidence.scored} of {evidence.rows} rows scored against {against}"
        + (f" ({', '.join(why)})" if why else "")
        + f"; a verdict needs {needed} scored pairs ({rule})",
        {"evidence": evidence.to_json(minimum)},
    )


def sequential(name: str, decision: Any, planned: int, *, who: str = "adapter") -> Verdict:
    """better_than_base or no_degradation decided by --llmeval-sequential's anytime-valid test
    (sequential.Decision): "better" and "not_degraded" pass, "worse" and "degraded" fail, at the row where
    the test crossed 1/alpha; its error is at most alpha whatever row that was (Ville's inequality)."""
    status = "pass" if decision.decided in ("better", "not_degraded") else "fail"
    return Verdict(name, status, f"{who}: {decision.message(planned)}", {"sequential": decision.to_json()})


def no_regression(
    cmp_vs_previous: PairedComparison | None,
    *,
    previous_version: str | None,
    comparable: bool,
    reason: str | None = None,
    baseline: str | None = None,
) -> Verdict:
    """Is the adapter significantly worse than its previous version on the same rows ("base" = previous)?

    `baseline` names the earlier run compared with (a history entry, or the --llmeval-previous file);
    without a comparison, `reason` says why there is none.
    """
    gate = "no_regression"
    details: dict[str, Any] = {"previous_version": previous_version, "comparable": comparable}
    if baseline is not None:
        details["baseline"] = baseline
    if not comparable:
        why = reason or "the benchmark changed since the previous results"
        return Verdict(gate, "skip", f"scores are not comparable: {why}", {**details, "reason": why})
    if cmp_vs_previous is None:
        if reason:
            message = f"no baseline to compare against: {reason}"
            return Verdict(gate, "skip", message, {**details, "reason": reason})
        return Verdict(gate, "skip", "no previous results to compare against", details)
    cmp = cmp_vs_previous
    details["comparison"] = cmp.to_json()
    previous = f"previous version {previous_version}" if previous_version else "previous results"
    summary = _summary(cmp, adapter="current", base=previous)
    test = f"{name_of_test(cmp.test)} p={p_value(cmp.p_value, cmp.alpha)}"
    if cmp.difference < -_EPS and cmp.p_value < cmp.alpha:
        return Verdict(gate, "fail", f"significant regression: {summary}, {test} < {cmp.alpha:g}", details)
    if cmp.difference < -_EPS:
        return Verdict(
            gate, "pass", f"{summary}: lower but not significantly, {test} >= {cmp.alpha:g}", details
        )
    return Verdict(gate, "pass", f"{summary}: no regression", details)


# ---------------------------------------------------------------------------------------------------------
# Run gates: what the criteria require of the run as a whole

# Where a benchmark's domain comes from, for a message that has to say how to add one out of it.
DOMAIN_RULE = (
    "a benchmark is in the adapter's domain when it lies under the adapter folder, matches --llmeval-domain "
    "GLOB, or is listed in the adapter's metadata.json domain_benchmarks; any other is out of it"
)


def run_domains(benchmarks: Iterable[Mapping[str, Any]], column: str) -> dict[str, str | None]:
    """Each benchmark of the run (records.BenchmarkInfo, repeats allowed) -> its domain for `column`."""
    return {str(info["name"]): (info.get("domains") or {}).get(column) for info in benchmarks}


def out_of_domain_required(domains: Mapping[str, str | None], *, who: str = "adapter") -> Verdict:
    """Did `who` run on at least one benchmark out of its domain? The LocoLLM standard's out-of-domain
    check: "Run the adapter on at least one other domain's benchmark". `domains`: run_domains."""
    gate = "out_of_domain_required"
    outside = sorted(name for name, domain in domains.items() if domain == "out")
    inside = sorted(name for name, domain in domains.items() if domain != "out")
    details: dict[str, Any] = {"out_of_domain": outside, "in_domain": inside}
    if not domains:
        return Verdict(gate, "skip", "no benchmark row ran in this session: no run to require it of", details)
    if outside:
        return Verdict(
            gate,
            "pass",
            f"{who} ran on {_count(outside, 'benchmark')} out of its domain: {_names(outside)}",
            details,
        )
    return Verdict(
        gate,
        "fail",
        f"{who} ran on no benchmark out of its domain (in it: {_names(inside)}); the LocoLLM standard "
        "(--llmeval-criteria locollm) requires an out-of-domain check: add another domain's benchmark "
        f"to the run ({DOMAIN_RULE})",
        details,
    )


def criteria_entry(
    rules: Mapping[str, Any] | None, benchmarks: Iterable[Mapping[str, Any]], names: Mapping[str, str]
) -> dict[str, Any] | None:
    """results.json's `criteria`: the rules the gates applied (Criteria.to_json) and, where they require an
    out-of-domain benchmark, the verdict of each gated column (a key of the benchmarks' `domains`) over the
    benchmarks that ran (their BenchmarkInfo), keyed as its gate item is labelled (`names`: column -> the
    name it is shown by; the column itself when absent)."""
    if rules is None:
        return None
    entry = dict(rules)
    if rules.get("out_of_domain_required"):
        infos = list(benchmarks)
        columns = sorted({column for info in infos for column in info.get("domains") or {}})
        shown = {column: names.get(column, column) for column in columns}
        entry["gates"] = {
            f"out_of_domain_required[{shown[column]}]": out_of_domain_required(
                run_domains(infos, column), who=shown[column]
            ).to_json()
            for column in columns
        }
    return entry


def _count(items: Sequence[object], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _names(names: Sequence[str]) -> str:
    """The first few names, then a count of the rest."""
    shown = ", ".join(names[:_MESSAGE_ROWS])
    return shown + (f" and {len(names) - _MESSAGE_ROWS} more" if len(names) > _MESSAGE_ROWS else "")


# ---------------------------------------------------------------------------------------------------------
# Training gates: verdicts from a column's training log (training.py's assertions say what is wrong)

# What a training gate whose criterion fails says when it only warns.
_WARN_ONLY = "warn only: --llmeval-training-gates=fail makes it fail"


def converged(
    log: TrainingLog, *, window: int = 50, tolerance: float = 0.05, strict: bool = False
) -> Verdict:
    """Did the training loss converge (training.convergence_step)? Not converged: "warn", or "fail" when
    `strict`; the message is assert_converged's, which names the step where the loss was still moving."""
    details: dict[str, Any] = {"window": window, "tolerance": tolerance, "strict": strict}
    try:
        assert_converged(log, window=window, tolerance=tolerance)
    except AssertionError as exc:
        if strict:
            return Verdict("converged", "fail", str(exc), details)
        return Verdict("converged", "warn", f"{exc} ({_WARN_ONLY})", details)
    step = convergence_step(log, window=window, tolerance=tolerance)
    return Verdict(
        "converged",
        "pass",
        f"{log.source}: training loss converged at step {step} (within {tolerance:.0%} of its final value "
        f"from there to step {log.steps[-1]}, window={window})",
        {**details, "convergence_step": step},
    )


def no_overfitting(
    log: TrainingLog,
    *,
    patience: int = 3,
    min_rise: float = 0.02,
    smoothing: int = 50,
    strict: bool = False,
) -> Verdict:
    """Does the validation loss stay down while the training loss falls (training.overfitting)?

    Overfitting: "warn", or "fail" when `strict`, with assert_no_overfitting's message (the onset step and
    the eval losses from there). Too few evaluations to tell: "skip", which says how to log them.
    """
    details: dict[str, Any] = {
        "patience": patience,
        "min_rise": min_rise,
        "smoothing": smoothing,
        "strict": strict,
    }
    try:
        assert_no_overfitting(log, patience=patience, min_rise=min_rise, smoothing=smoothing)
    except AssertionError as exc:
        found = overfitting(log, patience=patience, min_rise=min_rise, smoothing=smoothing)
        details.update(found)
        if len(log.eval_loss) < patience + 1:
            return Verdict("no_overfitting", "skip", str(exc), details)
        if strict:
            return Verdict("no_overfitting", "fail", str(exc), details)
        return Verdict("no_overfitting", "warn", f"{exc} ({_WARN_ONLY})", details)
    found = overfitting(log, patience=patience, min_rise=min_rise, smoothing=smoothing)
    best = found["best_step"]
    lowest = min(log.eval_loss)
    return Verdict(
        "no_overfitting",
        "pass",
        f"{log.source}: no overfitting in {len(log.eval_loss)} evaluations (lowest eval loss {lowest:.4g} "
        f"at step {best}; the last, at step {log.eval_steps[-1]}, {log.eval_loss[-1]:.4g})",
        {**details, **found},
    )


# ---------------------------------------------------------------------------------------------------------
# Benchmark hygiene gates


def size(n_rows: int, *, minimum: int = 50) -> Verdict:
    """Does the benchmark have enough rows for its verdicts to mean anything?"""
    if minimum < 0:
        raise ValueError(f"size minimum must be >= 0, got {minimum!r}")
    if n_rows < 0:
        raise ValueError(f"n_rows must be >= 0, got {n_rows!r}")
    details = {"n_rows": n_rows, "minimum": minimum}
    if n_rows < minimum:
        return Verdict(
            "size", "fail", f"benchmark has {n_rows} rows, fewer than the minimum {minimum}", details
        )
    return Verdict("size", "pass", f"benchmark has {n_rows} rows (minimum {minimum})", details)


def difficulty_mix(
    counts: Mapping[str, int],
    *,
    target: Mapping[str, float] = DEFAULT_DIFFICULTY_MIX,
    tolerance: float = 0.15,
    easy_base: tuple[int, int] | None = None,
) -> Verdict:
    """Are the difficulty shares near the target mix, and does the base model get at least half of the easy
    rows right (`easy_base`: (right, scored) over the easy rows that ran, None when none did)? Warns, never
    fails: the mix and the easy rows' ease are advice, not defects."""
    if not 0 <= tolerance <= 1:
        raise ValueError(f"difficulty_mix tolerance must be within [0, 1], got {tolerance!r}")
    if any(not 0 <= share <= 1 for share in target.values()) or abs(sum(target.values()) - 1) > 1e-6:
        raise ValueError(
            f"difficulty_mix target shares must be within [0, 1] and sum to 1, got {dict(target)}"
        )
    if any(n < 0 for n in counts.values()):
        raise ValueError(f"difficulty counts must be >= 0, got {dict(counts)}")
    if easy_base is not None and not 0 <= easy_base[0] <= easy_base[1]:
        raise ValueError(
            f"difficulty_mix easy_base must be (right, scored) with 0 <= right <= scored, got {easy_base!r}"
        )
    gate = "difficulty_mix"
    total = sum(counts.values())
    if total == 0:
        return Verdict(gate, "skip", "no rows: no difficulty mix to check", {"counts": dict(counts)})
    # Levels outside the target (a typo, a new level) have target share 0, so they count against the mix.
    levels = list(target) + sorted(set(counts) - set(target))
    shares = {level: counts.get(level, 0) / total for level in levels}

    def off_target(level: str) -> Callable[[float], bool]:
        return lambda share: abs(share - target.get(level, 0.0)) > tolerance + _EPS

    off = [level for level in levels if off_target(level)(shares[level])]
    table = ", ".join(
        f"{level} {_shown(shares[level], off_target(level), percent=True)} "
        f"(target {target.get(level, 0.0):.0%})"
        for level in levels
    )
    details: dict[str, Any] = {
        "counts": dict(counts),
        "shares": shares,
        "target": dict(target),
        "tolerance": tolerance,
        "off_target": off,
    }
    mix = (
        f"{', '.join(off)} off target by more than {tolerance * 100:g} points"
        if off
        else f"within {tolerance * 100:g} points of target"
    )
    easy, easy_warns = _easy_rows(easy_base)
    if easy_base is not None:
        right, scored = easy_base
        details["easy_base"] = {
            "right": right,
            "scored": scored,
            "rate": right / scored if scored else None,
            "expected": EASY_BASE_EXPECTED,
        }
    status = "warn" if off or easy_warns else "pass"
    return Verdict(gate, status, f"{table}: {mix}{easy}", details)


def _easy_rows(easy_base: tuple[int, int] | None) -> tuple[str, bool]:
    """difficulty_mix's clause on the base model's easy rows, and whether it is a warning."""
    if easy_base is None or easy_base[1] == 0:
        return "", False
    right, scored = easy_base
    rate = right / scored

    def under(share: float) -> bool:
        return share < EASY_BASE_EXPECTED - _EPS

    figures = f"the base model got {right} of {scored} easy rows right ({_shown(rate, under, percent=True)})"
    if under(rate):
        return (
            f"; {figures}, under the {EASY_BASE_EXPECTED:.0%} the LocoLLM standard expects: the benchmark's "
            "easy rows may not be easy",
            True,
        )
    return f"; {figures}", False


def edge_cases(cases: Sequence[Case], *, minimum: int = 5, tag: str = "edge") -> Verdict:
    """Does the benchmark have at least `minimum` rows tagged as edge cases?"""
    if minimum < 0:
        raise ValueError(f"edge_cases minimum must be >= 0, got {minimum!r}")
    ids = [case.id for case in cases if tag in case.tags]
    details = {"tag": tag, "minimum": minimum, "count": len(ids), "ids": ids}
    found = f"{len(ids)} of {len(cases)} rows tagged {tag!r}"
    if len(ids) < minimum:
        return Verdict("edge_cases", "fail", f"{found}, fewer than the minimum {minimum}", details)
    return Verdict("edge_cases", "pass", f"{found} (minimum {minimum})", details)


# ---------------------------------------------------------------------------------------------------------
# Message pieces


def _summary(cmp: PairedComparison, *, adapter: str = "adapter", base: str = "base") -> str:
    """`adapter 0.883 vs base 0.067: +0.817 (95% CI +0.720 to +0.900)`."""
    return (
        f"{adapter} {cmp.mean_adapter:.3f} vs {base} {cmp.mean_base:.3f}: {cmp.difference:+.3f} "
        f"({level(cmp.confidence)} CI {cmp.ci_low:+.3f} to {cmp.ci_high:+.3f})"
    )


def _power_note(cmp: PairedComparison) -> str:
    if cmp.min_detectable_difference is None:
        return ""
    note = f"; this benchmark can only detect differences >= {cmp.min_detectable_difference:.3f} at n={cmp.n}"
    if cmp.n_for_10_points is not None:
        note += f" (about {cmp.n_for_10_points} rows would detect 0.10)"
    return note


def _shown(value: float, side: Callable[[float], object], *, percent: bool = False) -> str:
    """`0.050` or `46%`, with more decimals where rounding would move the value across a threshold."""
    # A drop of 0.0501 shown as "0.050 > warn threshold 0.050" reads as a contradiction.
    for digits in range(0 if percent else 3, 17):
        shown = f"{value:.{digits}%}" if percent else f"{value:.{digits}f}"
        back = float(shown[:-1]) / 100 if percent else float(shown)
        if side(back) == side(value):
            return shown
    return repr(value)
