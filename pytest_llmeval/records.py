"""The records that cross modules and processes: a scored row, one model's side of it, a gate's verdict.

Pure: no pytest, no torch. Every record is a JSON-able TypedDict, built by one constructor here, so a row
record has one shape whether it was scored, skipped or errored, on this process or on an xdist worker.

A row's sides are a mapping keyed by model name (today "base" and "adapter"; several adapters and other
models are one more key each), and the record says which of them is evaluated: nothing downstream guesses
it from which keys happen to be present. What collection knew of the row's benchmark (its name, content
hash and domain) travels in the record, so the controller never re-reads a file or parses a node id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

# Model names of the sides a row has today.
BASE = "base"
ADAPTER = "adapter"

Domain = Literal["in", "out"]


class _BenchmarkInfo(TypedDict):
    name: str  # its path from the rootdir (else absolute): results.json's benchmark_file
    sha256: str  # "sha256:<hex>" of the file's bytes, as read at collection
    domain: Domain | None  # the evaluated column's; None when no adapter is evaluated (no domain to be in)
    n_rows: int  # valid rows in the file (before -k/-m selection)


class BenchmarkInfo(_BenchmarkInfo, total=False):
    """What collection knew of a row's benchmark file."""

    # Each gated column's domain (several adapters, --llmeval-gate-model): column -> in or out.
    domains: dict[str, Domain]


class FluencyRecord(TypedDict):
    """Perplexity of one model's generated output and of the reference, under that side's scorer."""

    scorer: str  # the model that measured: this side's own model, or --llmeval-ppl-model
    output: dict[str, Any] | None  # {nll, n_tokens, n_chars}; None for an empty output
    reference: dict[str, Any] | None  # the same for the row's expected output
    # True: one external scorer (--llmeval-ppl-model) measured, not the model that wrote the output.
    external: NotRequired[bool]
    # The chest X-ray document's per-study figures, from output and reference (summaries.study_figures);
    # None where a text is empty. Ratio: generated / reference; difference: generated - reference.
    perplexity_generated: NotRequired[float | None]
    perplexity_reference: NotRequired[float | None]
    perplexity_ratio: NotRequired[float | None]
    cross_entropy_generated: NotRequired[float | None]
    cross_entropy_reference: NotRequired[float | None]
    cross_entropy_difference: NotRequired[float | None]


class SideRecord(TypedDict, total=False):
    """One model's side of a row: what it produced and how it scored."""

    output: str | None  # generated text; None for measured types (perplexity, multiple_choice)
    score: dict[str, Any] | None  # scorers.Score.to_json(); None when the scorer raised
    measurement: dict[str, Any]  # what the model measured, kept when scoring failed (the judge's runs)
    fluency: FluencyRecord  # --llmeval-fluency: perplexity of this side's output
    # The row's `metrics`: evaluation type -> its score of the same output (`score` is the row's own type's,
    # which decides the pass).
    metrics: dict[str, dict[str, Any]]
    # --llmeval-context-overflow truncate-*: the prompt was cut to fit the model's context (how, in tokens)
    prompt_truncated: dict[str, Any]
    # The prompt this column was given, where it differs from the row's `prompt` (its own tokenizer, its
    # own declared prompt under --llmeval-prompt-per-model).
    prompt: str
    # The output opened with a reasoning block (--llmeval-reasoning-tags): `output` is the raw text, this
    # the answer after the block, which was scored; unterminated: the block never closed (no answer).
    scored_output: str
    reasoning_unterminated: bool
    # What was done to its output on its way in, one line each (a served text longer than its max_tokens can
    # hold, cut: endpoint.MAX_CHARS_PER_TOKEN).
    notes: list[str]


class RowRecord(TypedDict):
    """One benchmark row of one run, as results.json stores it (less `benchmark`, its parent's)."""

    nodeid: str
    benchmark: BenchmarkInfo
    id: str
    line: int
    difficulty: str
    evaluation_type: str
    evaluation_config: dict[str, Any]
    instruction: str
    input: str
    tags: list[str]
    expected_output: str  # the first reference when the row gives several
    evaluated: str  # the model whose score decides pass/fail: ADAPTER with an adapter, else BASE
    models: dict[str, SideRecord]  # empty when the row was skipped or failed before any model ran
    passed: bool
    error: str | None
    skipped: str | None
    # The prompt the model was given (the base's; a column given another has its own in its side), and the
    # row's own prompt settings when it has them (benchmark.Case.system, evaluation_config.prompt_template).
    prompt: NotRequired[str]
    # Adapter column -> the column of the base prompted as that adapter declares (`base@<column>`), for
    # the adapters whose declared prompt differs from the first's: each is compared with its own (partner).
    baselines: NotRequired[dict[str, str]]
    system: NotRequired[str]
    prompt_template: NotRequired[str]
    # Every reference, when the row's expected_output was a list of more than one (benchmark.Case.references).
    references: NotRequired[list[str]]
    # What the row cost each column (costs.side_cost): summed into results.json's `cost`, not shown per row
    # (its clocks differ between any two runs, and rows are the same with or without -n).
    cost: NotRequired[dict[str, dict[str, Any]]]


class GateRecord(TypedDict):
    """One gate's verdict for one benchmark (gates.Verdict.to_json() plus where it belongs)."""

    benchmark: BenchmarkInfo
    gate: str
    status: str
    passed: bool
    message: str
    details: dict[str, Any]
    # The paired comparison the gate decided on (stats.PairedComparison.to_json()), when it compared rows:
    # results.json keeps it once, as the benchmark's `statistics`, instead of computing it again.
    statistics: dict[str, Any] | None
    model: str | None  # the column a model gate compared with the base; None: the run's only one, or none
    metric: NotRequired[str]  # --llmeval-gate-metric: the evaluation type whose scores the gate judged


def row_record(
    *,
    nodeid: str,
    benchmark: BenchmarkInfo,
    case: Any,
    evaluated: str,
    models: Mapping[str, SideRecord] | None = None,
    passed: bool = False,
    error: str | None = None,
    skipped: str | None = None,
    prompt: str | None = None,
) -> RowRecord:
    """The one constructor of a row record: scored, skipped or errored (`case` is a benchmark.Case)."""
    made: RowRecord = {
        "nodeid": nodeid,
        "benchmark": benchmark,
        "id": case.id,
        "line": case.line,
        "difficulty": case.difficulty,
        "evaluation_type": case.evaluation_type,
        "evaluation_config": dict(case.evaluation_config),
        "instruction": case.instruction,
        "input": case.input,
        "tags": list(case.tags),
        "expected_output": case.expected_output,
        "evaluated": evaluated,
        "models": dict(models or {}),
        "passed": passed,
        "error": error,
        "skipped": skipped,
    }
    if prompt is not None:
        made["prompt"] = prompt
    if getattr(case, "system", None) is not None:
        made["system"] = case.system
    template = getattr(case, "run_options", {}).get("prompt_template")
    if template is not None:
        made["prompt_template"] = template
    if len(getattr(case, "references", ())) > 1:
        made["references"] = list(case.references)
    return made


def partner(record: Mapping[str, Any], column: str) -> str:
    """The column `column` is compared with on a row: the base, or the base prompted as `column` declares
    (RowRecord `baselines`)."""
    return str((record.get("baselines") or {}).get(column, BASE))


def variant_of(column: str) -> bool:
    """Whether a column is the base prompted as an adapter declares (`base@<adapter>`), not a model."""
    return column.startswith(BASE + "@")


def gate_record(
    benchmark: BenchmarkInfo,
    verdict: Mapping[str, Any],
    statistics: Mapping[str, Any] | None = None,
    model: str | None = None,
    metric: str | None = None,
) -> GateRecord:
    """The one constructor of a gate record, from gates.Verdict.to_json()."""
    made: GateRecord = {
        "benchmark": benchmark,
        "gate": str(verdict["gate"]),
        "status": str(verdict["status"]),
        "passed": bool(verdict["passed"]),
        "message": str(verdict["message"]),
        "details": dict(verdict["details"]),
        "statistics": None if statistics is None else dict(statistics),
        "model": model,
    }
    if metric is not None:
        made["metric"] = metric
    return made


# --- reading a row (a record, or a row of results.json: the same shape less `benchmark`) -----------------


def side(row: Mapping[str, Any], model: str) -> Mapping[str, Any] | None:
    """One model's side of a row; None when that model did not run on it."""
    models = row.get("models") or {}
    found: Mapping[str, Any] | None = models.get(model)
    return found


def score(row: Mapping[str, Any], model: str) -> Mapping[str, Any] | None:
    """One model's score of a row (Score.to_json()); None when absent, skipped or errored."""
    found = side(row, model)
    value: Mapping[str, Any] | None = found.get("score") if found else None
    return value


def score_value(row: Mapping[str, Any], model: str) -> float | None:
    """One model's score value of a row; None when absent, skipped or errored."""
    found = score(row, model)
    return None if found is None else float(found["value"])


def metric_value(row: Mapping[str, Any], model: str, kind: str) -> float | None:
    """One model's score of a row by evaluation type `kind`: its own type's score, or one of its `metrics`;
    None when the row has no such score."""
    if row["evaluation_type"] == kind:
        return score_value(row, model)
    found = side(row, model)
    metric = None if found is None or row.get("error") else (found.get("metrics") or {}).get(kind)
    return None if metric is None else float(metric["value"])


def as_metric(row: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The row as if `kind` had scored it: each side's `score` is its score by `kind` (its own type's, or
    one of its `metrics`), so every reader of scores (comparisons, gates) reads that metric. None when the
    row has no score by `kind`."""
    if row["evaluation_type"] == kind:
        return dict(row)
    models = {
        who: {**found, "score": found["metrics"][kind]}
        for who, found in (row.get("models") or {}).items()
        if kind in (found.get("metrics") or {})
    }
    if not models:
        return None
    return {**row, "evaluation_type": kind, "models": models}


def evaluated_value(row: Mapping[str, Any]) -> float | None:
    """The evaluated model's score value (the adapter's when there is one, else the base's)."""
    return score_value(row, str(row["evaluated"]))


def has_model(row: Mapping[str, Any], model: str) -> bool:
    """Whether `model` is one of the row's sides (it ran, or was meant to)."""
    return side(row, model) is not None
