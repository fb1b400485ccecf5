"""semantic and bertscore: similarity of the output to the expected answer under all-MiniLM-L6-v2.

Pure but for the embedder they are handed (pytest_llmeval.embeddings.Embedder, built once per process by
the evaluator, which also warms its cache with a whole chunk's texts): no pytest, no torch, no numpy import.

- semantic: cosine similarity of the two mean-pooled, normalised sentence embeddings. Score.value is the
  cosine clamped to [0, 1]: a negative cosine (the texts point away from each other, which for this model
  happens only between unrelated texts) scores 0, like an orthogonal one. Default threshold 0.7.
- bertscore: BERTScore of the output (candidate) against the expected answer (reference), token embeddings
  of one layer (the last, 6, by default) matched greedily by cosine; `metric` picks F1 (default), precision
  or recall, clamped to [0, 1]. No idf weighting, no baseline rescaling. Default threshold 0.8.

An output that is empty or only whitespace scores 0 with reason "empty prediction" (the model is not run:
an empty text has no meaning to compare); so does an empty expected answer.

Several references (a row's expected_output given as a list): the highest value against any of them (the
cosine, or the chosen BERTScore metric); the details name that reference (`best_reference`, 0-based).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmeval.scorers.base import Score, best_reference
from pytest_llmeval.scorers.config import check_keys, threshold
from pytest_llmeval.scorers.config import describe as _describe

if TYPE_CHECKING:
    from pytest_llmeval.embeddings import Embedder

__all__ = ["score_bertscore", "score_semantic", "validate_bertscore", "validate_semantic"]

# Measured on all-MiniLM-L6-v2 (examples in tests/test_semantic.py): close paraphrases score cosine
# 0.89-0.99 and BERTScore F1 0.82-0.97; correct but wordier answers ("Sure! DNA is a double helix. Let me
# know if you need more detail.") cosine 0.35-0.89 (median 0.75) and F1 0.34-0.82 (median 0.62); unrelated
# answers cosine -0.1-0.13 and F1 0.02-0.22. So 0.7 cosine reads "says about the same", 0.8 F1 "a close
# paraphrase" (F1 counts every extra word; `metric: recall` asks only that the reference be covered).
# Neither checks facts: "Berlin is the capital of France." against "... is Paris." scores 0.73 / 0.77.
SEMANTIC_THRESHOLD = 0.7
BERTSCORE_THRESHOLD = 0.8
METRICS = ("f1", "precision", "recall")

_SEMANTIC_KEYS = ("max_new_tokens", "threshold")
_BERTSCORE_KEYS = ("max_new_tokens", "metric", "threshold")


def validate_semantic(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _threshold(config, "semantic", _SEMANTIC_KEYS, SEMANTIC_THRESHOLD)


def validate_bertscore(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _threshold(config, "bertscore", _BERTSCORE_KEYS, BERTSCORE_THRESHOLD)
    _metric(config)


def score_semantic(
    prediction: str, expected: str | Sequence[str], config: Mapping[str, Any], *, embedder: Embedder
) -> Score:
    """Cosine similarity of the sentence embeddings of prediction and expected (the most similar of several
    references), clamped to [0, 1]."""
    threshold = _threshold(config, "semantic", _SEMANTIC_KEYS, SEMANTIC_THRESHOLD)
    return best_reference(lambda reference: _semantic(prediction, reference, threshold, embedder), expected)


def _semantic(prediction: str, expected: str, threshold: float, embedder: Embedder) -> Score:
    empty = _empty(prediction, expected)
    if empty is not None:
        return Score(
            value=0.0, threshold=threshold, details={"cosine": None, "model": embedder.name, **empty}
        )
    # float64 and the norms taken again: identical texts give exactly 1, and swapping the sides changes
    # no bit (each product and the order of the sum are the same).
    first, second = embedder.encode([prediction, expected]).astype("float64")  # (H,), (H,)
    cosine = float(first @ second) / math.sqrt(float(first @ first) * float(second @ second))
    return Score(
        value=_clamp(cosine), threshold=threshold, details={"cosine": cosine, "model": embedder.name}
    )


def score_bertscore(
    prediction: str, expected: str | Sequence[str], config: Mapping[str, Any], *, embedder: Embedder
) -> Score:
    """BERTScore of prediction (candidate) against expected (reference; the best of several); `metric` of P,
    R, F1 is the value."""
    threshold = _threshold(config, "bertscore", _BERTSCORE_KEYS, BERTSCORE_THRESHOLD)
    metric = _metric(config)
    return best_reference(
        lambda reference: _bertscore(prediction, reference, metric, threshold, embedder), expected
    )


def _bertscore(prediction: str, expected: str, metric: str, threshold: float, embedder: Embedder) -> Score:
    details: dict[str, Any] = {"metric": metric, "layer": embedder.layer, "model": embedder.name}
    empty = _empty(prediction, expected)
    if empty is not None:
        details.update(precision=None, recall=None, f1=None, **empty)
        return Score(value=0.0, threshold=threshold, details=details)
    [(precision, recall, f1)] = embedder.bertscore([prediction], [expected])
    details.update(precision=precision, recall=recall, f1=f1)
    return Score(value=_clamp(details[metric]), threshold=threshold, details=details)


def _empty(prediction: str, expected: str) -> dict[str, str] | None:
    if not prediction.strip():
        return {"reason": "empty prediction"}
    if not expected.strip():
        return {"reason": "empty expected_output"}
    return None


def _clamp(value: float) -> float:
    # Rounding can put an identical pair a hair above 1; a negative similarity is as bad as none.
    return min(1.0, max(0.0, value))


def _threshold(config: Mapping[str, Any], kind: str, known: tuple[str, ...], default: float) -> float:
    """Check the keys every embedding scorer shares; return the threshold."""
    if not isinstance(config, Mapping):
        raise ValueError(f"evaluation_config for {kind} must be a mapping, not {type(config).__name__}")
    check_keys(config, known, f"evaluation_config for {kind}")
    return threshold(config, default)


def _metric(config: Mapping[str, Any]) -> str:
    metric = config.get("metric", "f1")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {_describe(metric)}")
    return str(metric)
