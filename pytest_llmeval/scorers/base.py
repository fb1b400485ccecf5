"""The Score every scorer returns, and the ScorerSpec the registry holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar


@dataclass(frozen=True)
class Score:
    """The score of one prediction against one expected answer."""

    value: float  # in [0, 1]
    threshold: float  # the row passes when value >= threshold
    details: Mapping[str, Any] = field(default_factory=dict)  # JSON-able: extracted answer, normalised forms

    @property
    def passed(self) -> bool:
        return self.value >= self.threshold

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "threshold": self.threshold, "passed": self.passed, **self.details}


@dataclass(frozen=True)
class ScorerSpec:
    """What the collector and the evaluator need to know of one evaluation type.

    A text scorer (`score`) scores a generated output against the expected one and never sees the model.
    A measured type (`measure` names what the evaluator computes, `score_measurement` turns it into a Score)
    generates nothing: the evaluator measures the row with the model itself, adapter off and on, in batches.
    """

    # Raises ValueError with a one-line reason when evaluation_config is invalid (checked at collection).
    validate: Callable[[Mapping[str, Any]], None]
    # (prediction, expected, evaluation_config, **resources) -> Score
    score: Callable[..., Score] | None = None
    # (predictions, expected, evaluation_config, **resources) -> Score: a row's n sampled outputs (pass@k).
    score_samples: Callable[..., Score] | None = None
    # What the evaluator must hand `score` as keyword arguments: "sandbox" (the sandbox.Sandbox that runs
    # model-written code, one per process), "embedder" (embeddings.Embedder, the sentence-embedding model,
    # one per process), "function" (a custom row's function, from its script), "prompt" (the row's input).
    uses: frozenset[str] = frozenset()
    # "perplexity", "choices", "continuation": measured instead of generated; "judge": generated, then
    # graded by a model.
    measure: str | None = None
    # (measurement, evaluation_config) -> Score; the measurement is a JSON-able dict.
    score_measurement: Callable[[Mapping[str, Any], Mapping[str, Any]], Score] | None = None
    # (evaluation_config) -> (text fields that may be empty, fields that must not be), when the type needs
    # other fields than the default (only `input` may be empty).
    field_rule: Callable[[Mapping[str, Any]], tuple[frozenset[str], frozenset[str]]] | None = None
    # (Score.details, evaluation_config) -> lines a failing row's report adds after the output: what this
    # type saw (the extracted answer, each test case's verdict, the judge's runs).
    explain: Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]] | None = None
    # (evaluation_config, the row's JSON object) -> None, raising ValueError: checks that need both, such
    # as an expected answer that must be one of the choices (run at collection, after `validate`).
    validate_row: Callable[[Mapping[str, Any], Mapping[str, Any]], None] | None = None
    # (evaluation_config) -> whether the row's input is its whole context, sent raw (no chat template) and
    # continued by the model; None: never (the row is a chat turn).
    completion: Callable[[Mapping[str, Any]], bool] | None = None
    # (evaluation_config) -> the strings a generated output ends at and is cut before (lm-eval's `until`,
    # in order: generation.cut_at_stops), the backend adding the model's EOS text as lm-eval's hf model
    # does; None here: generation ends at EOS or max_new_tokens only.
    stop: Callable[[Mapping[str, Any]], tuple[str, ...]] | None = None
    # A "choices" measurement's options: (expected_output, evaluation_config) -> the texts scored after the
    # row's prompt (a multiple-choice row's choices, a loglikelihood row's one continuation).
    options: Callable[[str, Mapping[str, Any]], list[str]] | None = None
    # (evaluation_config, prompt, option) -> (context, the text scored after it) for a completion row.
    pair: Callable[[Mapping[str, Any], str, str], tuple[str, str]] | None = None
    # (expected_output, evaluation_config) -> the right option's position, which the measurement records.
    expected_option: Callable[[str, Mapping[str, Any]], int] | None = None
    # Whether the score needs each option's `greedy` (every token the model's most likely next one): a
    # served model is then asked for its top log-probabilities too, and a row it gives none for is an error.
    needs_greedy: bool = False
    # Whether a row may name this type in `metrics`, scored on its one output: false for a type whose score
    # needs its own row's settings beside the text (lm_eval_exact_match's stop strings and filters).
    as_metric: bool = True
    # Whether `score` takes several references: a row's expected_output may then be a list, and `score` is
    # handed the tuple of them (one string when the row gives one). Other types refuse a list at collection.
    references: bool = False


S = TypeVar("S", bound=Score)


def as_references(expected: str | Sequence[str]) -> tuple[str, ...]:
    """A scorer's expected answer as its references: one string is one reference."""
    return (expected,) if isinstance(expected, str) else tuple(expected)


def best_reference(score_one: Callable[[str], S], expected: str | Sequence[str]) -> S:
    """The score against the best of several references: the first that passes with the highest value
    (the highest value alone for a plain Score); its details say which reference (0-based) of how many.
    One reference is scored exactly as a plain string."""
    references = as_references(expected)
    if len(references) == 1:
        return score_one(references[0])
    scores = [score_one(reference) for reference in references]
    # max keeps the first of equals: ties go to the earlier reference, as rouge-score's score_multi does.
    index = max(range(len(scores)), key=lambda i: (scores[i].passed, scores[i].value))
    best = scores[index]
    return replace(best, details={**best.details, "best_reference": index, "n_references": len(references)})
