"""PEFT against SFT, its two sides: which column of which results.json each is, and what each brings to the
comparison (peft_sft.py).

A *side* is one column of a results.json this project wrote: the adapter (`--adapter`), a model of
`--llmeval-model NAME=PATH`, or the base (an SFT model evaluated as `--base-model=PATH`). Both sides may be
columns of one document (`pytest --adapter lora --llmeval-model sft=PATH`) or of two. What each side
brings:

- per benchmark, its measure: the token-weighted corpus perplexity for a benchmark of perplexity rows
  (lower is better), else the mean score (higher is better); and its rows, for the paired test;
- its `parameter_efficiency` where results.json carries it (an adapter's);
- optionally its training log's analysis (`training.analyse`): convergence, overfitting, the run's total
  time and peak memory.

Pure: no torch, no pytest.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypedDict, cast

from pytest_llmeval import training
from pytest_llmeval.formatting import SCORE_MEASURE
from pytest_llmeval.perplexity import script_of
from pytest_llmeval.records import ADAPTER, BASE, has_model, score, score_value, variant_of
from pytest_llmeval.results import kinds_of
from pytest_llmeval.results_reader import ResultsFileError
from pytest_llmeval.results_reader import read_results as read_results_file
from pytest_llmeval.summaries import char_accuracy_summary, perplexity_summary

PERPLEXITY_MEASURE = "perplexity"  # a benchmark of perplexity rows: corpus perplexity, lower is better
# Scripts that make a perplexity benchmark a Japanese one (kanji also covers Chinese text: a Chinese corpus
# counts too, which a Japanese adaptation project is unlikely to ship).
JAPANESE_SCRIPTS = frozenset({"hiragana", "katakana", "kanji"})


class PeftSftError(ValueError):
    """The input cannot be compared; the message names the file (or the document) and what is wrong."""


class SideInfo(TypedDict):
    label: str
    source: str
    column: str
    kind: str
    name: str
    training_log: str | None
    complete: bool


# --- one side of the comparison ---------------------------------------------------------------------------


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
