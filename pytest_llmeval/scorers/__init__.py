"""Scorers: one module per evaluation type, each a pure function (prediction, expected, config) -> Score.

No pytest and no torch here: scorers are plain functions, tested with plain unit tests and hypothesis.
"""

from __future__ import annotations

from pytest_llmeval.scorers import code_execution, exact_match, perplexity
from pytest_llmeval.scorers.base import Score, ScorerSpec

__all__ = ["SCORERS", "Score", "ScorerSpec"]

SCORERS: dict[str, ScorerSpec] = {
    "exact_match": ScorerSpec(validate=exact_match.validate_config, score=exact_match.score),
    "code_execution": ScorerSpec(
        validate=code_execution.validate_config,
        score=code_execution.score,
        uses=frozenset({"sandbox"}),
        field_rule=code_execution.field_rule,
    ),
    "perplexity": ScorerSpec(
        validate=perplexity.validate_config,
        measure="perplexity",
        score_measurement=perplexity.score_measurement,
        field_rule=perplexity.field_rule,
    ),
}
