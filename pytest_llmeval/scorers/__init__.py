"""Scorers: one module per evaluation type, each a pure function (prediction, expected, config) -> Score.

No pytest and no torch here: scorers are plain functions, tested with plain unit tests and hypothesis.
"""

from __future__ import annotations

from pathlib import Path

from pytest_llmeval.benchmark import Benchmark, load_benchmark
from pytest_llmeval.scorers import (
    bleu,
    char_accuracy,
    code_execution,
    custom,
    exact_match,
    fuzzy,
    llm_judge,
    lm_eval_exact_match,
    loglikelihood,
    multiple_choice,
    perplexity,
    rouge,
    semantic,
)
from pytest_llmeval.scorers.base import Score, ScorerSpec

__all__ = ["METRIC_TYPES", "SCORERS", "Score", "ScorerSpec", "read_benchmark"]

SCORERS: dict[str, ScorerSpec] = {
    # references=True: expected_output may be a list of references (each scorer's docstring says how it
    # uses them: sacrebleu's multi-reference BLEU and chrF, the best reference for the others).
    "exact_match": ScorerSpec(
        validate=exact_match.validate_config,
        score=exact_match.score,
        explain=exact_match.explain,
        references=True,
    ),
    "rouge": ScorerSpec(validate=rouge.validate_config, score=rouge.score, references=True),
    "bleu": ScorerSpec(validate=bleu.validate_bleu, score=bleu.score_bleu, references=True),
    "chrf": ScorerSpec(validate=bleu.validate_chrf, score=bleu.score_chrf, references=True),
    "fuzzy": ScorerSpec(validate=fuzzy.validate_config, score=fuzzy.score, references=True),
    "char_accuracy": ScorerSpec(
        validate=char_accuracy.validate_config,
        score=char_accuracy.score,
        explain=char_accuracy.explain,
        references=True,
    ),
    "semantic": ScorerSpec(
        validate=semantic.validate_semantic,
        score=semantic.score_semantic,
        uses=frozenset({"embedder"}),
        references=True,
    ),
    "bertscore": ScorerSpec(
        validate=semantic.validate_bertscore,
        score=semantic.score_bertscore,
        uses=frozenset({"embedder"}),
        references=True,
    ),
    # The row's own function, imported from its script at collection (custom.load_for_config).
    "custom": ScorerSpec(validate=custom.validate_config, score=custom.score, uses=frozenset({"function"})),
    "code_execution": ScorerSpec(
        validate=code_execution.validate_config,
        score=code_execution.score,
        score_samples=code_execution.score_samples,
        uses=frozenset({"sandbox", "prompt"}),
        field_rule=code_execution.field_rule,
        explain=code_execution.explain,
        completion=code_execution.completion_mode,
    ),
    "llm_judge": ScorerSpec(
        validate=llm_judge.validate_config,
        measure="judge",  # generated, then graded by the judge model
        score_measurement=llm_judge.score_measurement,
        explain=llm_judge.explain,
        field_rule=lambda config: (frozenset({"input", "expected_output"}), frozenset()),
    ),
    "multiple_choice": ScorerSpec(
        validate=multiple_choice.validate_config,
        score=multiple_choice.score,  # saved predictions only: with a model, choices are measured
        measure="choices",
        score_measurement=multiple_choice.score_measurement,
        field_rule=multiple_choice.field_rule,
        validate_row=multiple_choice.validate_row,
        explain=multiple_choice.explain,
        options=lambda expected, config: list(config["choices"]),
        pair=multiple_choice.option_pair,
        expected_option=multiple_choice.expected_index,
        completion=multiple_choice.completion_mode,
    ),
    # lm-eval's generate_until tasks (lm_eval_generate.py): generated until a stop string, filtered, and
    # compared by lm-eval's exact_match.
    "lm_eval_exact_match": ScorerSpec(
        validate=lm_eval_exact_match.validate_config,
        score=lm_eval_exact_match.score,
        field_rule=lm_eval_exact_match.field_rule,
        explain=lm_eval_exact_match.explain,
        completion=lm_eval_exact_match.completion_mode,
        stop=lm_eval_exact_match.stop,
        as_metric=False,
    ),
    "loglikelihood": ScorerSpec(
        validate=loglikelihood.validate_config,
        measure="continuation",  # one option's log-likelihood, and whether it is the greedy one
        score_measurement=loglikelihood.score_measurement,
        field_rule=loglikelihood.field_rule,
        explain=loglikelihood.explain,
        completion=loglikelihood.completion_mode,
        options=lambda expected, config: [loglikelihood.continuation_of(config, expected)],
        pair=lambda config, prompt, option: (prompt, option),
        needs_greedy=True,
    ),
    "perplexity": ScorerSpec(
        validate=perplexity.validate_config,
        measure="perplexity",
        score_measurement=perplexity.score_measurement,
        field_rule=perplexity.field_rule,
    ),
}


# The types a row may name in `metrics`, scored on its one generated output: those scoring a text with no
# resource of the row's own (a custom row's script, a code row's sandbox runs and prompt).
METRIC_TYPES: frozenset[str] = frozenset(
    name
    for name, s in SCORERS.items()
    if s.score is not None and s.measure is None and s.uses <= {"embedder"} and s.as_metric
)


def read_benchmark(path: Path) -> Benchmark:
    """Parse and validate a benchmark file with every evaluation type's rules (benchmark.load_benchmark)."""
    return load_benchmark(
        path,
        {name: s.validate for name, s in SCORERS.items()},
        {name: s.field_rule for name, s in SCORERS.items() if s.field_rule is not None},
        {name: s.validate_row for name, s in SCORERS.items() if s.validate_row is not None},
        METRIC_TYPES,
        reference_types={name for name, s in SCORERS.items() if s.references},
    )
