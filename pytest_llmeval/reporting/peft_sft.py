"""PEFT against SFT: the Japanese adaptation document's comparison of a LoRA adaptation with full fine-tuning
(§5.1 performance ratio, §5.2 paired tests) and its success criteria (§7.2), judged between two sides
(peft_sft_sides.py); its report (§6.2) is peft_sft_report.py.

How the two are put side by side follows the history's `--diff`: benchmarks by file name, compared only
at the same content hash (runs on other content are never compared), rows by id, each row's value in the
measure the gates compare (`comparisons.comparison_values`: per-text negative cross-entropy for perplexity
rows, the score otherwise), and `stats.compare_paired` for the test. The history's own comparison
(`results.previous_comparison`) cannot be called as it is: it reads only each run's evaluated column, and
a perplexity row's pass/fail against its threshold rather than its cross-entropy.

Pure: no torch, no pytest; scipy is imported on the first paired test.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pytest_llmeval import training
from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.formatting import MISSING, percent
from pytest_llmeval.records import ADAPTER, BASE
from pytest_llmeval.reporting.peft_sft_sides import PERPLEXITY_MEASURE, BenchmarkSide, Side, SideInfo

# The training log's peak memory, by where it was measured (training_callback): only the same kind on both
# sides compares, since a process's resident memory and CUDA's allocated bytes count different things.
PEAKS: Mapping[str, str] = {
    "peak_allocated_bytes": "peak CUDA allocated memory",
    "peak_rss_bytes": "peak resident memory of the training process",
}

Level = Literal["primary", "secondary"]
Status = Literal["pass", "fail", "not measured"]


@dataclass(frozen=True)
class Criteria:
    """The §7.2 success criteria's thresholds, each a share of 1 (0.10 = 10%)."""

    max_performance_loss: float = 0.10  # PEFT at most this much worse than SFT on every benchmark
    min_parameter_reduction: float = 0.99  # 1 - PEFT trainable / SFT trainable
    min_memory_saving: float = 0.40  # 1 - PEFT peak / SFT peak
    min_time_reduction: float = 0.20  # 1 - PEFT training time / SFT training time
    max_fluency_loss: float = 0.10  # PEFT's perplexity on Japanese text at most this much above SFT's

    def __post_init__(self) -> None:
        for name in ("max_performance_loss", "max_fluency_loss"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 (a share: 0.10 = 10%), got {getattr(self, name)}")
        for name in ("min_parameter_reduction", "min_memory_saving", "min_time_reduction"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(
                    f"{name} must be within [0, 1) (a share: 0.40 = 40%), got {getattr(self, name)}"
                )


DEFAULT_CRITERIA = Criteria()


# --- the compared result (JSON-ready) ---------------------------------------------------------------------


class Criterion(TypedDict):
    """One success criterion, judged."""

    name: str  # performance_loss, parameter_reduction, memory_saving, time_reduction, ...
    title: str  # the document's wording
    level: Level
    comparison: Literal["<", ">", "yes"]  # measured < threshold, measured > threshold, or a yes/no
    threshold: float | None  # None for a yes/no criterion
    measured: float | bool | None  # None: not measured
    status: Status
    reason: str  # what decided it (the worst benchmark, ...), or why it was not measured


class PairedTest(TypedDict):
    """PEFT against SFT on the rows both scored (stats.PairedComparison, PEFT in the adapter's place)."""

    measure: str  # formatting.SCORE_MEASURE or CROSS_ENTROPY_MEASURE: higher is better in both
    n: int
    mean_peft: float
    mean_sft: float
    difference: float  # mean_peft - mean_sft: > 0 PEFT better
    ci_low: float
    ci_high: float
    confidence: float
    test: str
    p_value: float
    significant: bool
    effect_size: float | None  # Cohen's d_z; None when infinite or undefined


class BenchmarkComparison(TypedDict):
    benchmark: str
    measure: str  # PERPLEXITY_MEASURE or SCORE_MEASURE
    peft: float | None  # corpus perplexity, or mean score
    sft: float | None
    performance_ratio: float | None  # PEFT / SFT in the measure (the document's §5.1 ratio)
    performance_loss: float | None  # how much worse PEFT is, a share of SFT's value; < 0: PEFT better
    japanese: bool
    comparable: bool
    reason: str | None  # why not comparable, or a note on the ratio
    paired_test: PairedTest | None
    perplexity: dict[str, Any] | None  # {"peft": figures, "sft": figures}: results.perplexity_summary's
    char_accuracy: dict[str, Any] | None  # {"peft": ..., "sft": ...}: results.char_accuracy_summary's


class ParameterGain(TypedDict):
    peft_trainable_params: int | None
    peft_total_params: int | None
    sft_trainable_params: int | None  # every parameter of the SFT model
    sft_params_source: str | None
    efficiency_gain: float | None  # SFT trainable / PEFT trainable (§5.1)
    parameter_reduction: float | None  # 1 - PEFT trainable / SFT trainable
    reason: str | None


class MemorySaving(TypedDict):
    peak: str | None  # the training log's key: peak_allocated_bytes or peak_rss_bytes
    peft_bytes: float | None
    sft_bytes: float | None
    saving: float | None  # 1 - PEFT / SFT
    efficiency_gain: float | None  # SFT / PEFT (§5.1)
    reason: str | None


class TimeReduction(TypedDict):
    peft_s: float | None
    sft_s: float | None
    peft_source: str | None  # total_training_time_s, or time_per_step_s x steps
    sft_source: str | None
    reduction: float | None  # 1 - PEFT / SFT
    efficiency_gain: float | None  # SFT / PEFT (§5.1)
    reason: str | None


class Comparison(TypedDict):
    """What compare() returns: JSON-ready."""

    peft: SideInfo
    sft: SideInfo
    alpha: float
    criteria: list[Criterion]
    benchmarks: list[BenchmarkComparison]
    only_peft: list[str]  # benchmarks only one side ran
    only_sft: list[str]
    parameters: ParameterGain
    memory: MemorySaving
    training_time: TimeReduction
    training: dict[str, training.Analysis | None]  # "peft", "sft"
    notes: list[str]


# --- comparing --------------------------------------------------------------------------------------------


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _performance(peft: BenchmarkSide, sft: BenchmarkSide) -> tuple[float | None, float, str | None]:
    """(ratio PEFT / SFT, loss, note). Perplexity: higher is worse, loss = ratio - 1, the ratio taken as
    exp(cross-entropy difference) (the same number, finite where a perplexity overflowed). Score: lower is
    worse, loss = 1 - ratio; against an SFT score of 0 there is no ratio and PEFT cannot be worse: loss 0."""
    if peft.measure == PERPLEXITY_MEASURE:
        assert peft.cross_entropy is not None and sft.cross_entropy is not None
        ratio = _exp(peft.cross_entropy - sft.cross_entropy)
        return ratio, ratio - 1.0, None
    assert peft.value is not None and sft.value is not None
    if sft.value > 0:
        ratio = peft.value / sft.value
        return ratio, 1.0 - ratio, None
    return None, 0.0, "SFT scores 0: no ratio, and PEFT cannot score lower"


def _paired(peft: BenchmarkSide, sft: BenchmarkSide, pc: str, sc: str, alpha: float) -> PairedTest | None:
    """The paired test on the rows (matched by id) that both sides scored."""
    merged = []
    for rid, row in peft.rows.items():
        other = sft.rows.get(rid)
        mine, theirs = (row.get("models") or {}).get(pc), (other or {}).get("models", {}).get(sc)
        if mine is not None and theirs is not None:
            # PEFT in the adapter's place and SFT in the base's: comparison_values reads those two.
            merged.append({**row, "models": {ADAPTER: mine, BASE: theirs}})
    peft_values, sft_values, bounded, measure = comparison_values(merged, ADAPTER, BASE)
    if not peft_values:
        return None
    from pytest_llmeval.stats import compare_paired

    cmp = compare_paired(peft_values, sft_values, alpha=alpha, bounded=bounded)
    effect = cmp.effect_size
    return {
        "measure": measure,
        "n": cmp.n,
        "mean_peft": cmp.mean_adapter,
        "mean_sft": cmp.mean_base,
        "difference": cmp.difference,
        "ci_low": cmp.ci_low,
        "ci_high": cmp.ci_high,
        "confidence": cmp.confidence,
        "test": cmp.test,
        "p_value": cmp.p_value,
        "significant": cmp.significant,
        "effect_size": None if effect is None or math.isinf(effect) else effect,
    }


def compare_benchmark(
    peft: BenchmarkSide, sft: BenchmarkSide, peft_column: str, sft_column: str, alpha: float = 0.05
) -> BenchmarkComparison:
    """One benchmark both sides ran: the §5.1 ratio, how much worse PEFT is, and the §5.2 paired test."""
    out: BenchmarkComparison = {
        "benchmark": peft.name,
        "measure": peft.measure,
        "peft": peft.value,
        "sft": sft.value,
        "performance_ratio": None,
        "performance_loss": None,
        "japanese": peft.japanese,
        "comparable": False,
        "reason": None,
        "paired_test": None,
        "perplexity": None
        if peft.perplexity is None and sft.perplexity is None
        else {
            "peft": peft.perplexity,
            "sft": sft.perplexity,
        },
        "char_accuracy": None
        if peft.char_accuracy is None and sft.char_accuracy is None
        else {
            "peft": peft.char_accuracy,
            "sft": sft.char_accuracy,
        },
    }
    if peft.sha256 != sft.sha256:
        out["reason"] = (
            f"the file differs between the two runs ({str(peft.sha256)[:19]} vs {str(sft.sha256)[:19]}): "
            "runs on other content are never compared"
        )
        return out
    if peft.measure != sft.measure:
        out["reason"] = f"PEFT measured {peft.measure}, SFT {sft.measure}: their scored rows differ"
        return out
    for who, found in (("PEFT", peft), ("SFT", sft)):
        if found.value is None:
            out["reason"] = f"{who} scored no row of it"
            return out
    ratio, loss, note = _performance(peft, sft)
    out["comparable"], out["performance_ratio"], out["performance_loss"] = True, ratio, loss
    out["reason"] = note
    out["paired_test"] = _paired(peft, sft, peft_column, sft_column, alpha)
    return out


def parameter_gain(peft: Side, sft_params: int | None = None) -> ParameterGain:
    """PEFT's trainable parameters against SFT's, which are all of the SFT model's.

    results.json counts an adapter's parameters, not a full model's: SFT's count is `sft_params` when
    given, else the base model the PEFT adapter was applied to (PEFT's base_params): a full fine-tune of
    that base trains every one of them.
    """
    out: ParameterGain = {
        "peft_trainable_params": None,
        "peft_total_params": None,
        "sft_trainable_params": None,
        "sft_params_source": None,
        "efficiency_gain": None,
        "parameter_reduction": None,
        "reason": None,
    }
    counts = peft.parameter_efficiency
    if not counts or counts.get("trainable_params") is None:
        out["reason"] = (
            f"no parameter_efficiency for the PEFT side ({peft.label}): results.json records it for "
            "adapter columns"
        )
        return out
    trainable = int(counts["trainable_params"])
    out["peft_trainable_params"] = trainable
    total = counts.get("total_params")
    out["peft_total_params"] = None if total is None else int(total)
    if sft_params is not None:
        out["sft_trainable_params"], out["sft_params_source"] = int(sft_params), "given (sft_params)"
    else:
        base = counts.get("base_params")
        if base is None and total is not None:
            base = int(total) - trainable
        if base is None:
            out["reason"] = "no count of the SFT model's parameters: give it (--sft-params)"
            return out
        out["sft_trainable_params"] = int(base)
        out["sft_params_source"] = (
            "the PEFT adapter's base model's (assumed: SFT fine-tuned every parameter of the same base; "
            "give --sft-params when the SFT model is another size)"
        )
    sft_trainable = out["sft_trainable_params"]
    assert sft_trainable is not None
    if sft_trainable <= 0:
        out["reason"] = f"the SFT model's parameter count is {sft_trainable}"
        return out
    out["parameter_reduction"] = 1.0 - trainable / sft_trainable
    out["efficiency_gain"] = sft_trainable / trainable if trainable else None
    return out


def _no_log(role: str) -> str:
    return f"no training log for the {role} side (--{role.lower()}-training-log)"


def memory_saving(peft: Side, sft: Side) -> MemorySaving:
    """1 - PEFT's peak / SFT's, from the training logs' peaks, when both measured the same kind of peak."""
    out: MemorySaving = {
        "peak": None,
        "peft_bytes": None,
        "sft_bytes": None,
        "saving": None,
        "efficiency_gain": None,
        "reason": None,
    }
    peaks: dict[str, tuple[str, float]] = {}
    for role, side in (("PEFT", peft), ("SFT", sft)):
        if side.analysis is None:
            out["reason"] = _no_log(role)
            return out
        totals = side.analysis["totals"]
        found = next(((k, float(totals[k])) for k in PEAKS if k in totals), None)
        if found is None:
            out["reason"] = (
                f"the {role} training log ({side.training_log}) records no peak memory (a Trainer's "
                "trainer_state.json has none: train with training_callback.EvaluationCallback)"
            )
            return out
        peaks[role] = found
    (peft_kind, peft_peak), (sft_kind, sft_peak) = peaks["PEFT"], peaks["SFT"]
    out["peft_bytes"], out["sft_bytes"] = peft_peak, sft_peak
    if peft_kind != sft_kind:
        out["reason"] = (
            f"not comparable: PEFT's is the {PEAKS[peft_kind]} ({peft_kind}), SFT's the {PEAKS[sft_kind]} "
            f"({sft_kind}); train both on the same kind of device"
        )
        return out
    out["peak"] = peft_kind
    if sft_peak <= 0 or peft_peak <= 0:
        out["reason"] = f"a peak of {min(peft_peak, sft_peak):g} bytes cannot be compared"
        return out
    out["saving"] = 1.0 - peft_peak / sft_peak
    out["efficiency_gain"] = sft_peak / peft_peak
    return out


def training_seconds(analysis: training.Analysis) -> tuple[float, str] | None:
    """A run's training time and where it came from: total_training_time_s, else time_per_step_s x the
    number of steps (the end event's n_steps, else the last logged step); None when the log has neither."""
    totals = analysis["totals"]
    if "total_training_time_s" in totals:
        return float(totals["total_training_time_s"]), "total_training_time_s"
    if "time_per_step_s" in totals:
        steps = float(totals.get("n_steps", analysis["n_steps"]))
        return float(totals["time_per_step_s"]) * steps, f"time_per_step_s x {steps:g} steps"
    return None


def time_reduction(peft: Side, sft: Side) -> TimeReduction:
    """1 - PEFT's training time / SFT's (§2.3), from the training logs."""
    out: TimeReduction = {
        "peft_s": None,
        "sft_s": None,
        "peft_source": None,
        "sft_source": None,
        "reduction": None,
        "efficiency_gain": None,
        "reason": None,
    }
    found: dict[str, tuple[float, str]] = {}
    for role, side in (("PEFT", peft), ("SFT", sft)):
        if side.analysis is None:
            out["reason"] = _no_log(role)
            return out
        seconds = training_seconds(side.analysis)
        if seconds is None:
            out["reason"] = (
                f"the {role} training log ({side.training_log}) has no training time (total_training_time_s "
                "or time_per_step_s): did the run finish?"
            )
            return out
        found[role] = seconds
    (peft_s, peft_source), (sft_s, sft_source) = found["PEFT"], found["SFT"]
    out["peft_s"], out["sft_s"], out["peft_source"], out["sft_source"] = (
        peft_s,
        sft_s,
        peft_source,
        sft_source,
    )
    if not (peft_s > 0 and sft_s > 0):
        out["reason"] = "a training time of 0 seconds cannot be compared"
        return out
    out["reduction"] = 1.0 - peft_s / sft_s
    out["efficiency_gain"] = sft_s / peft_s
    return out


def _criterion(
    name: str,
    title: str,
    level_: Level,
    comparison: Literal["<", ">", "yes"],
    threshold: float | None,
    measured: float | bool | None,
    reason: str,
) -> Criterion:
    """The one constructor of a Criterion: its status follows from measured and threshold."""
    status: Status
    if measured is None:
        status = "not measured"
    elif comparison == "yes":
        status = "pass" if measured is True else "fail"
    else:
        assert threshold is not None
        ok = float(measured) < threshold if comparison == "<" else float(measured) > threshold
        status = "pass" if ok else "fail"
    return {
        "name": name,
        "title": title,
        "level": level_,
        "comparison": comparison,
        "threshold": threshold,
        "measured": measured,
        "status": status,
        "reason": reason,
    }


def _loss_text(b: BenchmarkComparison) -> str:
    return f"{b['benchmark']}: {_value(b['peft'], b['measure'])} vs SFT {_value(b['sft'], b['measure'])}"


def _worst(benchmarks: Sequence[BenchmarkComparison], what: str) -> tuple[float | None, str]:
    """The largest performance loss among comparable benchmarks, and the reason line naming it."""
    judged = [b for b in benchmarks if b["comparable"] and b["performance_loss"] is not None]
    skipped = [b["benchmark"] for b in benchmarks if not b["comparable"]]
    if not judged:
        why = f"no {what} both sides scored"
        return None, why + (f" ({len(skipped)} not comparable: {', '.join(skipped)})" if skipped else "")
    worst = max(judged, key=lambda b: (b["performance_loss"] or 0.0, b["benchmark"]))
    reason = f"worst of {len(judged)}: {_loss_text(worst)}"
    if skipped:
        reason += f"; not compared: {', '.join(skipped)}"
    return worst["performance_loss"], reason


def _convergence(peft: Side) -> tuple[bool | None, str]:
    if peft.analysis is None:
        return None, _no_log("PEFT")
    found = peft.analysis
    over = found["overfitting"]
    if found["convergence_step"] is None:
        return False, f"the PEFT training loss did not converge in {found['n_steps']} steps"
    if over["detected"]:
        return (
            False,
            f"converged at step {found['convergence_step']}, but overfitting from step {over['onset_step']}",
        )
    if over["best_step"] is None:
        return None, (
            f"converged at step {found['convergence_step']}; no evaluation (eval_loss) in the PEFT training "
            "log, so overfitting cannot be checked"
        )
    return True, f"converged at step {found['convergence_step']}, no overfitting"


def judge(
    benchmarks: Sequence[BenchmarkComparison],
    parameters: ParameterGain,
    memory: MemorySaving,
    time: TimeReduction,
    peft: Side,
    criteria: Criteria = DEFAULT_CRITERIA,
) -> list[Criterion]:
    """The §7.2 success criteria, primary then secondary, each pass, fail or not measured (with why)."""
    loss, loss_reason = _worst(benchmarks, "benchmark")
    japanese = [b for b in benchmarks if b["japanese"]]
    fluency, fluency_reason = _worst(japanese, "Japanese perplexity benchmark (kana or kanji in its texts)")
    converged, converged_reason = _convergence(peft)
    reduction = parameters["parameter_reduction"]
    return [
        _criterion(
            "performance_loss",
            "performance loss vs SFT (on every benchmark)",
            "primary",
            "<",
            criteria.max_performance_loss,
            loss,
            loss_reason,
        ),
        _criterion(
            "parameter_reduction",
            "parameter reduction",
            "primary",
            ">",
            criteria.min_parameter_reduction,
            reduction,
            parameters["reason"]
            or f"{_count(parameters['peft_trainable_params'])} trainable of SFT's "
            f"{_count(parameters['sft_trainable_params'])}",
        ),
        _criterion(
            "memory_saving",
            "memory savings",
            "primary",
            ">",
            criteria.min_memory_saving,
            memory["saving"],
            memory["reason"]
            or f"{PEAKS[str(memory['peak'])]}: PEFT {_bytes(memory['peft_bytes'])}, "
            f"SFT {_bytes(memory['sft_bytes'])}",
        ),
        _criterion(
            "time_reduction",
            "training time reduction",
            "secondary",
            ">",
            criteria.min_time_reduction,
            time["reduction"],
            time["reason"] or f"PEFT {_seconds(time['peft_s'])}, SFT {_seconds(time['sft_s'])}",
        ),
        _criterion(
            "stable_convergence",
            "stable convergence",
            "secondary",
            "yes",
            None,
            converged,
            converged_reason,
        ),
        _criterion(
            "japanese_fluency",
            "Japanese fluency maintained (perplexity on Japanese text against SFT's)",
            "secondary",
            "<",
            criteria.max_fluency_loss,
            fluency,
            fluency_reason,
        ),
    ]


def compare(
    peft: Side,
    sft: Side,
    criteria: Criteria = DEFAULT_CRITERIA,
    *,
    alpha: float = 0.05,
    sft_params: int | None = None,
) -> Comparison:
    """PEFT against SFT, JSON-ready: per shared benchmark the §5.1 ratio and §5.2 paired test, parameter,
    memory and time efficiency, and the §7.2 criteria judged one by one.

    Performance loss is how much worse PEFT is, as a share of SFT's value: for a perplexity benchmark
    (lower is better) PEFT / SFT - 1, for a scored one (higher is better) 1 - PEFT / SFT; negative when
    PEFT is better. The primary criterion takes the worst comparable benchmark. Japanese fluency is the same
    loss on the perplexity benchmarks whose texts hold kana or kanji, against its own tolerance
    (Criteria.max_fluency_loss): fluency maintained relative to SFT; the §7.1 perplexity band of each side
    is reported beside it, not judged (a small model's absolute perplexity says more about its size than
    about the adaptation). Stable convergence: PEFT's training log converged (training.convergence_step)
    with no overfitting, which needs evaluations in the log.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be within (0, 1), got {alpha}")
    shared = sorted(set(peft.benchmarks) & set(sft.benchmarks))
    benchmarks = [
        compare_benchmark(peft.benchmarks[n], sft.benchmarks[n], peft.column.column, sft.column.column, alpha)
        for n in shared
    ]
    parameters = parameter_gain(peft, sft_params)
    memory = memory_saving(peft, sft)
    time = time_reduction(peft, sft)
    notes = [*peft.notes, *sft.notes]
    if parameters["sft_params_source"] and sft_params is None:
        notes.append(f"SFT's parameter count is {parameters['sft_params_source']}")
    return {
        "peft": peft.info(),
        "sft": sft.info(),
        "alpha": alpha,
        "criteria": judge(benchmarks, parameters, memory, time, peft, criteria),
        "benchmarks": benchmarks,
        "only_peft": sorted(set(peft.benchmarks) - set(sft.benchmarks)),
        "only_sft": sorted(set(sft.benchmarks) - set(peft.benchmarks)),
        "parameters": parameters,
        "memory": memory,
        "training_time": time,
        "training": {"peft": peft.analysis, "sft": sft.analysis},
        "notes": notes,
    }


def primary_failed(comparison: Comparison, *, require_measured: bool = False) -> list[str]:
    """The names of the primary criteria that failed (and, with require_measured, that were not measured)."""
    bad: tuple[Status, ...] = ("fail", "not measured") if require_measured else ("fail",)
    return [c["name"] for c in comparison["criteria"] if c["level"] == "primary" and c["status"] in bad]


# --- the figures the criteria's reasons quote (peft_sft_report.py shows them too) -------------------------


def _value(value: float | None, measure: str) -> str:
    """A benchmark's figure: perplexity as a number, a score in percent."""
    if value is None:
        return MISSING
    if measure == PERPLEXITY_MEASURE:
        return f"{value:.2f}" if value < 1e4 else f"{value:.4g}"
    return percent(value)


def _bytes(n: float | None) -> str:
    if n is None:
        return MISSING
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _seconds(s: float | None) -> str:
    return MISSING if s is None else f"{s:.1f} s"


def _count(n: int | None) -> str:
    return MISSING if n is None else f"{n:,}"
