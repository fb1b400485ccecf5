"""PEFT against SFT: the Japanese adaptation document's comparison of a LoRA adaptation with full fine-tuning
(§5.1 performance ratio, §5.2 paired tests), its report (§6.2) and its success criteria (§7.2).

A *side* is one column of a results.json this project wrote: the adapter (`--adapter`), a model of
`--llmeval-model NAME=PATH`, or the base (an SFT model evaluated as `--base-model=PATH`). Both sides may be
columns of one document (`pytest --adapter lora --llmeval-model sft=PATH`) or of two. What each side
brings:

- per benchmark, its measure: the token-weighted corpus perplexity for a benchmark of perplexity rows
  (lower is better), else the mean score (higher is better); and its rows, for the paired test;
- its `parameter_efficiency` where results.json carries it (an adapter's);
- optionally its training log's analysis (`training.analyse`): convergence, overfitting, the run's total
  time and peak memory.

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
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypedDict, cast

from pytest_llmeval import training
from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.formatting import (
    MISSING,
    SCORE_MEASURE,
    level,
    md_code,
    md_escape,
    measure_difference,
    measure_interval,
    name_of_test,
    p_value,
    percent,
)
from pytest_llmeval.perplexity import SCRIPTS, script_of
from pytest_llmeval.records import ADAPTER, BASE, has_model, score, score_value, variant_of
from pytest_llmeval.results import (
    ResultsFileError,
    char_accuracy_summary,
    kinds_of,
    perplexity_summary,
)
from pytest_llmeval.results import read_results as read_results_file

PERPLEXITY_MEASURE = "perplexity"  # a benchmark of perplexity rows: corpus perplexity, lower is better
# Scripts that make a perplexity benchmark a Japanese one (kanji also covers Chinese text: a Chinese corpus
# counts too, which a Japanese adaptation project is unlikely to ship).
JAPANESE_SCRIPTS = frozenset({"hiragana", "katakana", "kanji"})
# The training log's peak memory, by where it was measured (training_callback): only the same kind on both
# sides compares, since a process's resident memory and CUDA's allocated bytes count different things.
PEAKS: Mapping[str, str] = {
    "peak_allocated_bytes": "peak CUDA allocated memory",
    "peak_rss_bytes": "peak resident memory of the training process",
}
# The adaptation document's §7.1 character accuracy targets, shown beside the char_accuracy figures.
CHAR_TARGETS: Mapping[str, float] = {"character": 0.85, "hiragana": 0.90, "katakana": 0.88, "kanji": 0.80}

Level = Literal["primary", "secondary"]
Status = Literal["pass", "fail", "not measured"]


class PeftSftError(ValueError):
    """The input cannot be compared; the message names the file (or the document) and what is wrong."""


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


# --- the compared result (JSON-ready) -----------------------------------------------------------------------


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


class SideInfo(TypedDict):
    label: str
    source: str
    column: str
    kind: str
    name: str
    training_log: str | None
    complete: bool


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


# --- one side of the comparison -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column of a results.json: its key in each row's `models`, its kind and its name for people."""

    column: str
    kind: str  # base, adapter, model, reference
    name: str

    def describe(self) -> str:
        shown = f" {self.name!r}" if self.name != self.column else ""
        return f"{self.column} ({self.kind}{shown})"


@dataclass(frozen=True)
class BenchmarkSide:
    """One side's figures on one benchmark file."""

    name: str
    sha256: str | None
    measure: str  # PERPLEXITY_MEASURE or SCORE_MEASURE
    value: float | None  # corpus perplexity, or mean score; None when the side scored no row
    cross_entropy: float | None  # perplexity benchmarks: token-weighted nats per token
    n_scored: int
    japanese: bool
    rows: Mapping[str, Mapping[str, Any]]  # row id -> the row as results.json holds it (every column)
    perplexity: Mapping[str, Any] | None = None
    char_accuracy: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Side:
    """One column of one results.json, with its training log's analysis when one was given."""

    source: str  # the file (or "the PEFT document")
    column: Column
    benchmarks: Mapping[str, BenchmarkSide]
    parameter_efficiency: Mapping[str, Any] | None = None
    analysis: training.Analysis | None = None
    training_log: str | None = None
    complete: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        return f"{self.column.kind} {self.column.name!r} (column {self.column.column}) in {self.source}"

    def info(self) -> SideInfo:
        return {
            "label": self.label,
            "source": self.source,
            "column": self.column.column,
            "kind": self.column.kind,
            "name": self.column.name,
            "training_log": self.training_log,
            "complete": self.complete,
        }


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A results.json document; PeftSftError naming the file when it is missing or not one."""
    try:
        return read_results_file(path)
    except ResultsFileError as exc:
        raise PeftSftError(str(exc)) from None


def _checked(document: Any, source: str) -> dict[str, Any]:
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), list):
        raise PeftSftError(f"{source}: not a results.json (no 'benchmarks' list)")
    return document


def _rows(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in entry.get("rows") or [] if isinstance(r, Mapping)]


def columns(document: Mapping[str, Any]) -> list[Column]:
    """The document's columns, the base first, with their kinds (results.kinds_of) and names."""
    rows = [r for entry in document.get("benchmarks", []) for r in _rows(entry)]
    listed = [m for m in document.get("models") or [] if isinstance(m, Mapping) and "column" in m]
    names = {str(m["column"]): str(m.get("name") or m["column"]) for m in listed}
    if ADAPTER not in names and document.get("adapter_name"):
        names[ADAPTER] = str(document["adapter_name"])  # a run of one adapter, from before `models`
    out = [Column(BASE, "base", str(document.get("base_model") or BASE))]
    for column, kind in kinds_of(rows, {"models": listed}).items():
        if not variant_of(column):  # `base@x` is the base prompted as x declares, not a model
            out.append(Column(column, kind, names.get(column, column)))
    return out


def _listing(document: Mapping[str, Any]) -> str:
    return ", ".join(c.describe() for c in columns(document))


def resolve_column(document: Mapping[str, Any], wanted: str, source: str) -> Column:
    """The column named `wanted`: a column key (`adapter`, `sft`, `base`) or a model's name."""
    found = columns(document)
    for column in found:
        if column.column == wanted:
            return column
    by_name = [c for c in found if c.name == wanted]
    if len(by_name) == 1:
        return by_name[0]
    raise PeftSftError(f"{source}: no column {wanted!r}; its columns: {_listing(document)}")


def default_peft_column(document: Mapping[str, Any], source: str) -> Column:
    """The PEFT side when none is named: the document's first adapter column (its top level's)."""
    adapters = [c for c in columns(document) if c.kind == "adapter"]
    if not adapters:
        raise PeftSftError(
            f"{source}: no adapter column to compare as PEFT (its columns: {_listing(document)}); "
            "name one with --peft-column"
        )
    return adapters[0]


def default_sft_column(document: Mapping[str, Any], source: str, *, besides: Column | None = None) -> Column:
    """The SFT side when none is named: the document's only model column; in a document of the base alone
    (an SFT model evaluated as --base-model), the base. `besides`: the PEFT column, when both sides are
    columns of this one document (then there must be a model column)."""
    found = columns(document)
    models = [c for c in found if c.kind in ("model", "reference")]
    if len(models) == 1:
        return models[0]
    if besides is None and len(found) == 1:
        return found[0]
    if besides is not None and not models:
        raise PeftSftError(
            f"{source}: no model column to compare {besides.column} with (its columns: "
            f"{_listing(document)}); give the SFT run's results.json as a second file, or evaluate the "
            "SFT model in the same run with --llmeval-model sft=PATH, or name a column with --sft-column"
        )
    raise PeftSftError(
        f"{source}: which column is SFT? its columns: {_listing(document)}; name one with --sft-column"
    )


def _as_base(row: Mapping[str, Any], column: str) -> dict[str, Any]:
    """The row with `column` as its only side, under `base`: results.py's per-benchmark summaries read
    the base and the first adapter only, and this lets them summarise any column the same way."""
    found = (row.get("models") or {}).get(column)
    return {**row, "evaluated": BASE, "models": {BASE: found} if found is not None else {}}


def _is_japanese(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a scored text of the perplexity rows holds a kana or kanji character."""
    from pytest_llmeval.scorers.perplexity import text_field

    for row in rows:
        if row.get("evaluation_type") != "perplexity":
            continue
        text = str(row.get(text_field(row.get("evaluation_config") or {})) or "")
        if any(script_of(ch) in JAPANESE_SCRIPTS for ch in text):
            return True
    return False


def benchmark_side(
    name: str, sha256: str | None, rows: Sequence[Mapping[str, Any]], column: str
) -> BenchmarkSide:
    """One column's figures on one benchmark's rows (rows as results.json holds them)."""
    scored = [r for r in rows if score(r, column) is not None]
    types = {str(r.get("evaluation_type")) for r in (scored or rows)}
    own = [_as_base(r, column) for r in rows]
    figures: Mapping[str, Any] | None = None
    cross_entropy: float | None = None
    if types == {"perplexity"}:
        # The measure comparison_values picks for these rows; its corpus value, as results.json reports it.
        measure = PERPLEXITY_MEASURE
        summary = perplexity_summary(own)
        if summary is not None and summary.get(BASE):
            figures = {**summary[BASE], "bands": summary["bands"]}
        value = None if figures is None else float(figures["perplexity"])
        cross_entropy = None if figures is None else float(figures["cross_entropy"])
    else:
        measure = SCORE_MEASURE
        values = [v for r in scored if (v := score_value(r, column)) is not None]
        value = math.fsum(values) / len(values) if values else None
    chars = char_accuracy_summary(own)
    return BenchmarkSide(
        name=name,
        sha256=sha256,
        measure=measure,
        value=value,
        cross_entropy=cross_entropy,
        n_scored=len(scored),
        japanese=measure == PERPLEXITY_MEASURE and _is_japanese(rows),
        rows={str(r.get("id")): r for r in rows},
        perplexity=figures,
        char_accuracy=None if chars is None else chars.get(BASE),
    )


def _parameter_efficiency(document: Mapping[str, Any], column: str) -> Mapping[str, Any] | None:
    """A column's parameter_efficiency: its `models` entry's (adapters), else the top level's (the top's
    adapter, column `adapter` in a run of one)."""
    for model in document.get("models") or []:
        if isinstance(model, Mapping) and model.get("column") == column and model.get("parameter_efficiency"):
            found: Mapping[str, Any] = model["parameter_efficiency"]
            return found
    top = document.get("parameter_efficiency")
    return top if column == ADAPTER and isinstance(top, Mapping) else None


def side_of(
    document: Mapping[str, Any],
    column: Column | str,
    *,
    source: str = "results.json",
    analysis: training.Analysis | None = None,
    training_log: str | None = None,
) -> Side:
    """One column of a results.json document as a side of the comparison."""
    document = _checked(document, source)
    found = column if isinstance(column, Column) else resolve_column(document, column, source)
    benchmarks: dict[str, BenchmarkSide] = {}
    for entry in document["benchmarks"]:
        if not isinstance(entry, Mapping):
            continue
        rows = _rows(entry)
        if not any(has_model(r, found.column) for r in rows):
            continue  # the column did not run on this benchmark
        name = str(entry.get("benchmark_file"))
        sha = entry.get("benchmark_hash")
        benchmarks[name] = benchmark_side(name, None if sha is None else str(sha), rows, found.column)
    notes = []
    from pytest_llmeval.results import SCHEMA_VERSION

    if document.get("schema_version") != SCHEMA_VERSION:
        notes.append(
            f"{source} has schema_version {document.get('schema_version')}, this version reads "
            f"{SCHEMA_VERSION}: its rows may not read as this version's"
        )
    complete = document.get("complete") is not False
    if not complete:
        notes.append(f"{source} is a partial run ({document.get('incomplete_reason')})")
    return Side(
        source=source,
        column=found,
        benchmarks=benchmarks,
        parameter_efficiency=_parameter_efficiency(document, found.column),
        analysis=analysis,
        training_log=training_log,
        complete=complete,
        notes=tuple(notes),
    )


Results: TypeAlias = "str | os.PathLike[str] | Mapping[str, Any]"
Log: TypeAlias = "str | os.PathLike[str] | training.TrainingLog"


def _open(results: Results, role: str) -> tuple[dict[str, Any], str]:
    if isinstance(results, Mapping):
        return _checked(dict(results), f"the {role} document"), f"the {role} document"
    return read_results(results), str(results)


def _analyse(log: Log | None) -> tuple[training.Analysis | None, str | None]:
    if log is None:
        return None, None
    try:
        found = log if isinstance(log, training.TrainingLog) else training.read_log(log)
    except training.TrainingLogError as exc:
        raise PeftSftError(str(exc)) from None
    return training.analyse(found), str(found.source)


def _recorded_training(
    document: Mapping[str, Any], column: str
) -> tuple[training.Analysis | None, str | None]:
    """The column's training analysis as the run recorded it (results.json `models[].training`, from
    --llmeval-training-log or the adapter folder's log), when no log is given here."""
    for entry in document.get("models") or []:
        if isinstance(entry, Mapping) and entry.get("column") == column:
            recorded = entry.get("training")
            if isinstance(recorded, Mapping) and "final_loss" in recorded:
                keys = training.Analysis.__annotations__
                analysis = cast(training.Analysis, {k: recorded[k] for k in keys if k in recorded})
                log = recorded.get("log")
                return analysis, None if log is None else str(log)
    return None, None


def load_sides(
    peft: Results,
    sft: Results | None = None,
    *,
    peft_column: str | None = None,
    sft_column: str | None = None,
    peft_training_log: Log | None = None,
    sft_training_log: Log | None = None,
) -> tuple[Side, Side]:
    """The two sides: from two results.json (paths or documents), or two columns of one (sft None).

    Columns by default: PEFT the first adapter column; SFT the only model column, or in a base-only SFT
    document its base. A training log is a trainer_state.json, an EvaluationCallback JSONL or a folder
    holding one (training.find_log).
    """
    peft_doc, peft_source = _open(peft, "PEFT")
    if sft is None:
        sft_doc, sft_source = peft_doc, peft_source
    else:
        sft_doc, sft_source = _open(sft, "SFT")
    peft_col = (
        resolve_column(peft_doc, peft_column, peft_source)
        if peft_column is not None
        else default_peft_column(peft_doc, peft_source)
    )
    if sft_column is not None:
        sft_col = resolve_column(sft_doc, sft_column, sft_source)
    else:
        sft_col = default_sft_column(sft_doc, sft_source, besides=peft_col if sft is None else None)
    if sft is None and sft_col.column == peft_col.column:
        raise PeftSftError(f"{peft_source}: PEFT and SFT are both column {peft_col.column}: name two columns")
    peft_analysis, peft_log = (
        _analyse(peft_training_log)
        if peft_training_log is not None
        else _recorded_training(peft_doc, peft_col.column)
    )
    sft_analysis, sft_log = (
        _analyse(sft_training_log)
        if sft_training_log is not None
        else _recorded_training(sft_doc, sft_col.column)
    )
    return (
        side_of(peft_doc, peft_col, source=peft_source, analysis=peft_analysis, training_log=peft_log),
        side_of(sft_doc, sft_col, source=sft_source, analysis=sft_analysis, training_log=sft_log),
    )


# --- comparing ----------------------------------------------------------------------------------------------


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


# --- presentation -------------------------------------------------------------------------------------------


def _value(value: float | None, measure: str) -> str:
    """A benchmark's figure: perplexity as a number, a score in percent."""
    if value is None:
        return MISSING
    if measure == PERPLEXITY_MEASURE:
        return f"{value:.2f}" if value < 1e4 else f"{value:.4g}"
    return percent(value)


def _signed(share: float | None) -> str:
    return MISSING if share is None else f"{100 * share:+.1f}%"


def _bytes(n: float | None) -> str:
    if n is None:
        return MISSING
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _seconds(s: float | None) -> str:
    return MISSING if s is None else f"{s:.1f} s"


def measured_text(c: Criterion) -> str:
    """A criterion's measured value as people read it: `12.3%`, `yes`, or the en dash."""
    measured = c["measured"]
    if measured is None:
        return MISSING
    if c["comparison"] == "yes":
        return "yes" if measured else "no"
    if c["name"] in ("performance_loss", "japanese_fluency"):
        return _signed(float(measured))
    return percent(float(measured), 2)


def threshold_text(c: Criterion) -> str:
    """A criterion's threshold: `< 10%`, `> 99%`, `yes`."""
    if c["threshold"] is None:
        return "yes"
    return f"{c['comparison']} {level(c['threshold'])}"


def criterion_line(c: Criterion) -> str:
    """One line for messages: `memory_saving (primary): 12.00%, needs > 40% (...)`."""
    return f"{c['name']} ({c['level']}): {measured_text(c)}, needs {threshold_text(c)} ({c['reason']})"


def _table(rows: Sequence[Sequence[str]], right: Callable[[int], bool]) -> list[str]:
    """Rows of cells, padded to aligned columns (columns where `right(i)` right-aligned)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            c.rjust(w) if right(i) else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]


def paired_test_text(test: PairedTest | None) -> str:
    if test is None:
        return MISSING
    return (
        f"{measure_difference(test['difference'], test['measure'])} "
        f"[{measure_interval(test['ci_low'], test['ci_high'], test['measure'])}], "
        f"{name_of_test(test['test'])} p={p_value(test['p_value'])}, n={test['n']}"
    )


def render_table(comparison: Comparison) -> str:
    """The comparison for the terminal: the sides, one line per benchmark, one line per criterion."""
    lines = [f"PEFT: {comparison['peft']['label']}", f"SFT:  {comparison['sft']['label']}"]
    rows: list[list[str]] = [
        ["benchmark", "measure", "PEFT", "SFT", "PEFT/SFT", "loss", "paired test (PEFT - SFT)"]
    ]
    for b in comparison["benchmarks"]:
        ratio = MISSING if b["performance_ratio"] is None else f"{b['performance_ratio']:.3f}"
        test = paired_test_text(b["paired_test"]) if b["comparable"] else f"not compared: {b['reason']}"
        rows.append(
            [
                b["benchmark"],
                b["measure"],
                _value(b["peft"], b["measure"]),
                _value(b["sft"], b["measure"]),
                ratio,
                _signed(b["performance_loss"]),
                test,
            ]
        )
    if len(rows) > 1:
        lines += _table(rows, lambda i: i in (2, 3, 4, 5))
    else:
        lines.append("no benchmark in both runs")
    for label, names in (
        ("only PEFT ran", comparison["only_peft"]),
        ("only SFT ran", comparison["only_sft"]),
    ):
        if names:
            lines.append(f"{label}: {', '.join(names)}")
    crit: list[list[str]] = [["criterion", "level", "threshold", "measured", "status"]]
    for c in comparison["criteria"]:
        crit.append(
            [c["name"], c["level"], threshold_text(c), measured_text(c), f"{c['status']}: {c['reason']}"]
        )
    lines += _table(crit, lambda i: i in (2, 3))
    lines += [f"note: {n}" for n in comparison["notes"]]
    failed = primary_failed(comparison)
    verdict = f"failed: {', '.join(failed)}" if failed else "none failed"
    lines.append(f"primary criteria: {verdict}{_unmeasured(comparison)}")
    return "\n".join(lines)


def _unmeasured(comparison: Comparison) -> str:
    names = [
        c["name"] for c in comparison["criteria"] if c["level"] == "primary" and c["status"] == "not measured"
    ]
    return f" ({', '.join(names)} not measured)" if names else ""


# Recommendations per failed criterion (§6.2 "recommendations"): what is known to move that number.
RECOMMENDATIONS: Mapping[str, str] = {
    "performance_loss": (
        "PEFT is further behind SFT than the tolerance: raise the LoRA rank r (and lora_alpha with it), add "
        "target modules (all attention and MLP projections), train longer or tune the learning rate; the "
        "paired tests say whether the gap is larger than these rows can resolve."
    ),
    "parameter_reduction": (
        "The adapter trains too large a share of the parameters: lower r, target fewer modules, and keep "
        "embeddings and lm_head frozen (no modules_to_save)."
    ),
    "memory_saving": (
        "LoRA saves the optimizer state and gradients of the frozen weights, not the weights or the "
        "activations: load the base quantized (4-bit or 8-bit, QLoRA), enable gradient checkpointing, or "
        "lower batch size x sequence length; a lower r or fewer target modules shrink only the adapter's "
        "share. Measure both peaks the same way, each training run in its own process."
    ),
    "time_reduction": (
        "LoRA still runs the full forward and backward pass through the frozen base; its time saving is "
        "the optimizer step: spend the saved memory on a larger batch, train in mixed precision, or target "
        "fewer modules."
    ),
    "stable_convergence": (
        "The PEFT loss did not settle or validation loss rose: lower the learning rate or add warmup, train "
        "for more steps, and against overfitting add lora_dropout, use fewer epochs or keep the best "
        "checkpoint (load_best_model_at_end)."
    ),
    "japanese_fluency": (
        "PEFT's perplexity on Japanese text is further above SFT's than the tolerance: add Japanese text "
        "to the training data, raise r or include the MLP projections, and check that the tokenizer covers "
        "kana and kanji without falling back to bytes."
    ),
}
# What to supply so that a criterion can be measured at all.
TO_MEASURE: Mapping[str, str] = {
    "performance_loss": "Evaluate both models on the same benchmark files (the same content hash).",
    "parameter_reduction": (
        "Evaluate the PEFT model as an adapter (--adapter): results.json then counts its parameters."
    ),
    "memory_saving": (
        "Train both with training_callback.EvaluationCallback on the same kind of device and pass both logs."
    ),
    "time_reduction": "Pass both training logs (--peft-training-log, --sft-training-log) of finished runs.",
    "stable_convergence": (
        "Pass the PEFT training log, with evaluations during training (eval_strategy='steps')."
    ),
    "japanese_fluency": (
        "Evaluate both on a perplexity benchmark of Japanese text (benchmarks/japanese_text.jsonl)."
    ),
}


def recommendations(comparison: Comparison) -> list[str]:
    """One fixed recommendation per failed criterion, then what would measure the unmeasured ones."""
    out = [
        f"{c['name']}: {RECOMMENDATIONS[c['name']]}" for c in comparison["criteria"] if c["status"] == "fail"
    ]
    out += [
        f"{c['name']} (not measured): {TO_MEASURE[c['name']]}"
        for c in comparison["criteria"]
        if c["status"] == "not measured"
    ]
    return out


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _num(value: Any, fmt: str = ".4g") -> str:
    return MISSING if value is None else format(float(value), fmt)


def markdown_report(comparison: Comparison) -> str:
    """The §6.2 report: executive summary, detailed metrics, statistical analysis, Japanese-specific metrics
    and recommendations, as Markdown."""
    peft, sft = comparison["peft"], comparison["sft"]
    by_name = {c["name"]: c for c in comparison["criteria"]}
    failed = primary_failed(comparison)
    lines = [
        "# PEFT against SFT",
        "",
        f"- PEFT: {md_escape(peft['label'])}"
        + (f", training log {md_code(peft['training_log'])}" if peft["training_log"] else ""),
        f"- SFT: {md_escape(sft['label'])}"
        + (f", training log {md_code(sft['training_log'])}" if sft["training_log"] else ""),
        "",
        "## Executive summary",
        "",
    ]
    ppl = [b for b in comparison["benchmarks"] if b["measure"] == PERPLEXITY_MEASURE]
    if ppl:
        for b in ppl:
            lines.append(
                f"- Final perplexity on {md_code(b['benchmark'])}: PEFT {_value(b['peft'], b['measure'])}, "
                f"SFT {_value(b['sft'], b['measure'])} (PEFT/SFT {_num(b['performance_ratio'], '.3f')})"
            )
    else:
        lines.append("- Final perplexity: no perplexity benchmark in both runs")
    params = comparison["parameters"]
    lines.append(
        f"- Parameter efficiency: PEFT trains {_count(params['peft_trainable_params'])} parameters, SFT "
        f"{_count(params['sft_trainable_params'])}: a reduction of "
        f"{percent(params['parameter_reduction'], 2)}"
        + (f" ({md_escape(params['reason'])})" if params["reason"] else "")
    )
    memory = comparison["memory"]
    lines.append(
        f"- Memory savings: {percent(memory['saving'], 1)}"
        + (f" ({md_escape(memory['reason'])})" if memory["reason"] else f" ({PEAKS[str(memory['peak'])]})")
    )
    conv = by_name["stable_convergence"]
    lines.append(f"- Convergence achieved: {measured_text(conv)} ({md_escape(conv['reason'])})")
    lines.append(
        f"- Primary criteria: **{'failed: ' + ', '.join(failed) if failed else 'none failed'}**"
        + md_escape(_unmeasured(comparison))
    )
    lines += ["", "### Success criteria (§7.2)", ""]
    lines += _md_table(
        ["criterion", "level", "threshold", "measured", "status", "why"],
        [
            [c["title"], c["level"], threshold_text(c), measured_text(c), c["status"], md_escape(c["reason"])]
            for c in comparison["criteria"]
        ],
    )
    lines += ["", "## Detailed metrics", "", "### Benchmarks (§5.1 performance ratio)", ""]
    if comparison["benchmarks"]:
        lines += _md_table(
            ["benchmark", "measure", "PEFT", "SFT", "PEFT/SFT", "performance loss", "note"],
            [
                [
                    md_code(b["benchmark"]),
                    b["measure"],
                    _value(b["peft"], b["measure"]),
                    _value(b["sft"], b["measure"]),
                    _num(b["performance_ratio"], ".3f"),
                    _signed(b["performance_loss"]),
                    md_escape(b["reason"] or ""),
                ]
                for b in comparison["benchmarks"]
            ],
        )
        lines += [
            "",
            "Performance loss: how much worse PEFT is, as a share of SFT's value (perplexity: PEFT/SFT - 1, "
            "lower is better; score: 1 - PEFT/SFT, higher is better); negative when PEFT is better.",
        ]
    else:
        lines.append("No benchmark in both runs.")
    for label, names in (
        ("Only PEFT ran", comparison["only_peft"]),
        ("Only SFT ran", comparison["only_sft"]),
    ):
        if names:
            lines += ["", f"{label}: {', '.join(md_code(n) for n in names)}"]
    time = comparison["training_time"]
    lines += ["", "### Efficiency (§2)", ""]
    lines += _md_table(
        ["metric", "PEFT", "SFT", "saving", "SFT/PEFT"],
        [
            [
                "trainable parameters",
                _count(params["peft_trainable_params"]),
                _count(params["sft_trainable_params"]),
                percent(params["parameter_reduction"], 2),
                _num(params["efficiency_gain"], ".1f"),
            ],
            [
                "peak memory" + (f" ({memory['peak']})" if memory["peak"] else ""),
                _bytes(memory["peft_bytes"]),
                _bytes(memory["sft_bytes"]),
                percent(memory["saving"]),
                _num(memory["efficiency_gain"], ".2f"),
            ],
            [
                "training time",
                _seconds(time["peft_s"]),
                _seconds(time["sft_s"]),
                percent(time["reduction"]),
                _num(time["efficiency_gain"], ".2f"),
            ],
        ],
    )
    for key in ("reason",):
        for label, found in (("parameters", params[key]), ("memory", memory[key]), ("time", time[key])):
            if found:
                lines.append(f"\n{label}: {md_escape(found)}")
    lines += ["", "### Training (§3)", ""]
    analyses = comparison["training"]
    if any(analyses.values()):
        lines += _md_table(
            ["", "PEFT", "SFT"],
            [
                [name, *(_analysis_cell(analyses[s], key) for s in ("peft", "sft"))]
                for name, key in _ANALYSIS_ROWS
            ],
        )
    else:
        lines.append("No training log was given.")
    lines += ["", "## Statistical analysis (§5.2)", ""]
    tested = [b for b in comparison["benchmarks"] if b["paired_test"] is not None]
    if tested:
        rows = []
        for b in tested:
            t = b["paired_test"]
            assert t is not None
            rows.append(
                [
                    md_code(b["benchmark"]),
                    md_escape(t["measure"]),
                    str(t["n"]),
                    measure_difference(t["difference"], t["measure"]),
                    measure_interval(t["ci_low"], t["ci_high"], t["measure"]),
                    name_of_test(t["test"]),
                    p_value(t["p_value"], comparison["alpha"]),
                    _num(t["effect_size"], ".3f"),
                    "yes" if t["significant"] else "no",
                ]
            )
        lines += _md_table(
            [
                "benchmark",
                "measure",
                "n",
                "PEFT - SFT",
                "CI",
                "test",
                "p",
                "Cohen's d_z",
                f"p < {comparison['alpha']:g}",
            ],
            rows,
        )
        lines += [
            "",
            "Paired on the rows both scored (matched by id); higher is better in both measures, so a "
            "positive difference favours PEFT. Perplexity rows compare each text's negative cross-entropy.",
        ]
    else:
        lines.append("No rows both sides scored.")
    lines += ["", "## Japanese-specific metrics (§4)", ""]
    lines += _japanese_lines(comparison)
    lines += ["", "## Recommendations", ""]
    found_recs = recommendations(comparison)
    lines += [f"- {md_escape(r)}" for r in found_recs] or ["- Every criterion passed: no change indicated."]
    if comparison["notes"]:
        lines += ["", "## Notes", "", *(f"- {md_escape(n)}" for n in comparison["notes"])]
    return "\n".join(lines) + "\n"


def _count(n: int | None) -> str:
    return MISSING if n is None else f"{n:,}"


_ANALYSIS_ROWS: tuple[tuple[str, str], ...] = (
    ("logged steps", "n_steps"),
    ("final loss", "final_loss"),
    ("loss stability", "loss_stability"),
    ("convergence step", "convergence_step"),
    ("steps to 95%", "steps_to_95"),
    ("overfitting", "overfitting"),
    ("gradient norm mean / max / spikes", "grad_norm"),
)


def _analysis_cell(analysis: training.Analysis | None, key: str) -> str:
    if analysis is None:
        return MISSING
    if key == "overfitting":
        over = analysis["overfitting"]
        if over["best_step"] is None:
            return "not checked (no evaluation)"
        return f"from step {over['onset_step']}" if over["detected"] else "no"
    if key == "grad_norm":
        g = analysis["grad_norm"]
        return f"{_num(g['mean'])} / {_num(g['max'])} / {len(g['spikes'])}"
    value = analysis[key]  # type: ignore[literal-required]
    return MISSING if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))


def _japanese_lines(comparison: Comparison) -> list[str]:
    lines: list[str] = []
    japanese = [b for b in comparison["benchmarks"] if b["japanese"]]
    if not japanese:
        lines.append("No perplexity benchmark of Japanese text (kana or kanji in its texts) in both runs.")
    for b in japanese:
        figures = b["perplexity"] or {}
        peft, sft = figures.get("peft") or {}, figures.get("sft") or {}
        lines += [f"### {md_code(b['benchmark'])}", ""]
        lines += _md_table(
            ["", "PEFT", "SFT"],
            [
                ["perplexity (token-weighted)", _num(peft.get("perplexity")), _num(sft.get("perplexity"))],
                ["§7.1 band", str(peft.get("band", MISSING)), str(sft.get("band", MISSING))],
                [
                    "bits per character",
                    _num(peft.get("bits_per_character")),
                    _num(sft.get("bits_per_character")),
                ],
                ["bits per byte", _num(peft.get("bits_per_byte")), _num(sft.get("bits_per_byte"))],
            ],
        )
        found = set(peft.get("bits_per_character_by_script") or {}) | set(
            sft.get("bits_per_character_by_script") or {}
        )
        scripts = [s for s in SCRIPTS if s in found] + sorted(found - set(SCRIPTS))
        if scripts:
            rows = []
            for script in scripts:
                p = (peft.get("bits_per_character_by_script") or {}).get(script) or {}
                s = (sft.get("bits_per_character_by_script") or {}).get(script) or {}
                if not (p.get("n_chars") or s.get("n_chars")):
                    continue
                rows.append(
                    [
                        script,
                        str(p.get("n_chars", s.get("n_chars", MISSING))),
                        _num(p.get("bits_per_character")),
                        _num(s.get("bits_per_character")),
                        percent(p.get("top1_accuracy")),
                        percent(s.get("top1_accuracy")),
                    ]
                )
            lines += ["", "Per script (§4.2): bits per character and top-1 next-token accuracy", ""]
            lines += _md_table(
                ["script", "characters", "PEFT bits/char", "SFT bits/char", "PEFT top-1", "SFT top-1"], rows
            )
        lines.append("")
    chars = [b for b in comparison["benchmarks"] if b["char_accuracy"]]
    for b in chars:
        pair = b["char_accuracy"] or {}
        peft, sft = pair.get("peft") or {}, pair.get("sft") or {}
        rows = [
            [
                "character",
                percent(peft.get("character")),
                percent(sft.get("character")),
                f"> {level(CHAR_TARGETS['character'])}",
            ]
        ]
        for script in sorted(set(peft.get("scripts") or {}) | set(sft.get("scripts") or {})):
            target = CHAR_TARGETS.get(script)
            rows.append(
                [
                    script,
                    percent(((peft.get("scripts") or {}).get(script) or {}).get("accuracy")),
                    percent(((sft.get("scripts") or {}).get(script) or {}).get("accuracy")),
                    MISSING if target is None else f"> {level(target)}",
                ]
            )
        lines += [f"### Character accuracy (§4.1) on {md_code(b['benchmark'])}", ""]
        lines += _md_table(["", "PEFT", "SFT", "§7.1 target"], rows)
        lines.append("")
    return lines
