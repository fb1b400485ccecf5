"""Unit tests and hypothesis properties of the semantic and bertscore scorers, on the real MiniLM model."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmeval.embeddings import Embedder
from pytest_llmeval.scorers.base import ScorerSpec
from pytest_llmeval.scorers.semantic import (
    BERTSCORE_THRESHOLD,
    SEMANTIC_THRESHOLD,
    score_bertscore,
    score_semantic,
    validate_bertscore,
    validate_semantic,
)

WORDS = "the a cat dog sat ran on under mat house Paris France capital is was not 42 3.5 , . ? !".split()
TEXTS = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=16).map(" ".join),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=30),
)
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PARAPHRASE = ("Paris is the capital of France.", "The capital of France is Paris.")
WRONG_FACT = ("Berlin is the capital of France.", "The capital of France is Paris.")
UNRELATED = ("I don't know.", "The mitochondria produce energy for the cell.")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.load(device="cpu")


# ---------------------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize(
    "config",
    [{}, {"threshold": 0}, {"threshold": 0.65}, {"threshold": 1}, {"max_new_tokens": 64}],
)
def test_valid_semantic_configs_pass(config: dict[str, Any]) -> None:
    validate_semantic(config)


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"metric": "precision"},
        {"metric": "recall", "threshold": 0.5},
        {"metric": "f1", "max_new_tokens": 1},
    ],
)
def test_valid_bertscore_configs_pass(config: dict[str, Any]) -> None:
    validate_bertscore(config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"treshold": 0.5},
            "unknown key 'treshold' in evaluation_config for semantic; did you mean 'threshold'? ",
        ),
        (
            {"metric": "f1"},
            "unknown key 'metric' in evaluation_config for semantic; known: max_new_tokens, thr",
        ),
        ({"threshold": 1.5}, "threshold must be a number in [0, 1], not 1.5"),
        ({"threshold": -0.1}, "threshold must be a number in [0, 1], not -0.1"),
        ({"threshold": math.nan}, "threshold must be a number in [0, 1], not nan"),
        ({"threshold": True}, "threshold must be a number in [0, 1], not True (bool)"),
        ({"threshold": "0.8"}, "threshold must be a number in [0, 1], not '0.8'"),
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer, not 0 (int)"),
        ({"max_new_tokens": 2.0}, "max_new_tokens must be a positive integer, not 2.0 (float)"),
    ],
)
def test_invalid_semantic_configs_say_why(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_semantic(config)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"metric": "F1"}, "metric must be one of f1, precision, recall, not 'F1'"),
        ({"metric": None}, "metric must be one of f1, precision, recall, not null"),
        (
            {"idf": True},
            "unknown key 'idf' in evaluation_config for bertscore; known: max_new_tokens, metric, thr",
        ),
        ({"threshold": 2}, "threshold must be a number in [0, 1], not 2"),
    ],
)
def test_invalid_bertscore_configs_say_why(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_bertscore(config)
    assert str(info.value).startswith(message)


def test_config_must_be_a_mapping() -> None:
    with pytest.raises(ValueError, match="evaluation_config for semantic must be a mapping, not list"):
        validate_semantic([])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# semantic


def test_default_thresholds() -> None:
    assert SEMANTIC_THRESHOLD == 0.7
    assert BERTSCORE_THRESHOLD == 0.8


# The measurements behind the default thresholds (the comment above SEMANTIC_THRESHOLD).
MEASURED = [
    # prediction, expected, cosine, semantic passes, BERTScore F1, bertscore passes
    (*PARAPHRASE, 0.989, True, 0.971, True),
    ("The cat sat on the mat.", "A cat was sitting on the mat.", 0.949, True, 0.907, True),
    (
        "The answer: Use list.reverse() or slicing with [::-1]. This is a well-known fact.",
        "You can reverse a Python list with list.reverse() or lst[::-1].",
        0.833,
        True,
        0.759,
        False,
    ),
    (
        "Sure! DNA is a double helix. Let me know if you need more detail.",
        "The structure of DNA is a double helix, described by Watson and Crick in 1953.",
        0.589,
        False,
        0.534,
        False,
    ),
    # Neither checks facts: a wrong answer in the reference's words is semantically close.
    (*WRONG_FACT, 0.728, True, 0.768, False),
    ("He did not pass the exam.", "He passed the exam.", 0.716, True, 0.743, False),
    (*UNRELATED, -0.040, False, 0.061, False),
]


@pytest.mark.parametrize(("prediction", "expected", "cosine", "semantic", "f1", "bertscore"), MEASURED)
def test_measured_scores_and_default_verdicts(
    embedder: Embedder,
    prediction: str,
    expected: str,
    cosine: float,
    semantic: bool,
    f1: float,
    bertscore: bool,
) -> None:
    by_cosine = score_semantic(prediction, expected, {}, embedder=embedder)
    by_tokens = score_bertscore(prediction, expected, {}, embedder=embedder)
    assert by_cosine.details["cosine"] == pytest.approx(cosine, abs=1e-3)
    assert by_tokens.details["f1"] == pytest.approx(f1, abs=1e-3)
    assert (by_cosine.passed, by_tokens.passed) == (semantic, bertscore)
    assert (
        by_cosine.details["model"] == by_tokens.details["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    )


def test_the_threshold_comes_from_the_config(embedder: Embedder) -> None:
    assert not score_semantic(*WRONG_FACT, {"threshold": 0.8}, embedder=embedder).passed
    assert score_bertscore(*WRONG_FACT, {"threshold": 0.75}, embedder=embedder).passed


def test_negative_cosine_scores_zero_and_keeps_the_cosine(embedder: Embedder) -> None:
    score = score_semantic(*UNRELATED, {"threshold": 0}, embedder=embedder)
    assert score.details["cosine"] == pytest.approx(-0.040, abs=1e-3)
    assert score.value == 0.0
    assert score.passed  # threshold 0: anything passes, as with the other scorers


def test_cosine_agrees_with_the_embeddings(embedder: Embedder) -> None:
    vectors = embedder.encode(list(PARAPHRASE)).astype(np.float64)  # (2, H)
    score = score_semantic(*PARAPHRASE, {}, embedder=embedder)
    assert score.details["cosine"] == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-6)


@pytest.mark.parametrize(("prediction", "expected"), [("", "Paris"), ("  \n\t", "Paris"), ("Paris", " ")])
def test_empty_text_scores_zero_with_a_reason(embedder: Embedder, prediction: str, expected: str) -> None:
    count = embedder.embedded["sentence"]
    score = score_semantic(prediction, expected, {"threshold": 0.1}, embedder=embedder)
    assert score.value == 0.0 and not score.passed
    assert score.details["reason"] == (
        "empty prediction" if not prediction.strip() else "empty expected_output"
    )
    assert score.details["cosine"] is None
    assert embedder.embedded["sentence"] == count  # nothing embedded for it


def test_scores_are_json_able(embedder: Embedder) -> None:
    for score in (
        score_semantic(*PARAPHRASE, {}, embedder=embedder),
        score_semantic("", "x", {}, embedder=embedder),
        score_bertscore(*PARAPHRASE, {}, embedder=embedder),
        score_bertscore("", "x", {}, embedder=embedder),
    ):
        assert json.loads(json.dumps(score.to_json())) == score.to_json()


@FEW
@given(prediction=TEXTS, expected=TEXTS)
def test_semantic_is_symmetric_and_in_range(embedder: Embedder, prediction: str, expected: str) -> None:
    forward = score_semantic(prediction, expected, {}, embedder=embedder)
    backward = score_semantic(expected, prediction, {}, embedder=embedder)
    assert 0.0 <= forward.value <= 1.0
    assert forward.value == backward.value
    assert forward.details["cosine"] == backward.details["cosine"]


@FEW
@given(text=TEXTS.filter(str.strip))
def test_semantic_of_a_text_with_itself_is_one(embedder: Embedder, text: str) -> None:
    score = score_semantic(text, text, {"threshold": 1.0}, embedder=embedder)
    assert score.value == pytest.approx(1.0, abs=1e-12)
    assert score.details["cosine"] == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------------------------------------
# bertscore


def test_bertscore_details_and_metric(embedder: Embedder) -> None:
    prediction, expected = "Paris", "The capital of France is Paris."
    f1 = score_bertscore(prediction, expected, {}, embedder=embedder)
    [(p, r, f)] = embedder.bertscore([prediction], [expected])
    assert f1.details == {
        "metric": "f1",
        "layer": 6,
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "precision": p,
        "recall": r,
        "f1": f,
    }
    assert f1.value == f and f1.threshold == 0.8 and not f1.passed  # F1 0.709: the answer is too short
    precision = score_bertscore(prediction, expected, {"metric": "precision"}, embedder=embedder)
    assert precision.value == p and precision.passed  # P 0.911: all it says is in the reference
    assert score_bertscore(prediction, expected, {"metric": "recall"}, embedder=embedder).value == r


def test_bertscore_paraphrase_passes_and_a_wrong_fact_fails(embedder: Embedder) -> None:
    assert score_bertscore(*PARAPHRASE, {}, embedder=embedder).value == pytest.approx(0.971, abs=1e-3)
    assert score_bertscore(*WRONG_FACT, {}, embedder=embedder).value == pytest.approx(0.768, abs=1e-3)


def test_bertscore_of_an_empty_prediction_is_zero_with_a_reason(embedder: Embedder) -> None:
    score = score_bertscore(" ", "Paris", {"metric": "recall"}, embedder=embedder)
    assert score.value == 0.0 and not score.passed
    assert score.details["reason"] == "empty prediction"
    assert score.details["precision"] is score.details["recall"] is score.details["f1"] is None


@FEW
@given(prediction=TEXTS, expected=TEXTS)
def test_bertscore_f1_is_symmetric_and_in_range(embedder: Embedder, prediction: str, expected: str) -> None:
    forward = score_bertscore(prediction, expected, {}, embedder=embedder)
    backward = score_bertscore(expected, prediction, {}, embedder=embedder)
    assert 0.0 <= forward.value <= 1.0
    assert forward.value == pytest.approx(backward.value, abs=1e-6)
    if "reason" not in forward.details:
        assert forward.details["precision"] == pytest.approx(backward.details["recall"], abs=1e-6)


@FEW
@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=16))
def test_bertscore_of_a_text_with_itself_is_one(embedder: Embedder, words: list[str]) -> None:
    text = " ".join(words)
    for metric in ("f1", "precision", "recall"):
        score = score_bertscore(text, text, {"metric": metric, "threshold": 1.0}, embedder=embedder)
        assert score.value == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------------------------------------------------
# how the runner calls them


@pytest.mark.parametrize(
    ("validate", "score"), [(validate_semantic, score_semantic), (validate_bertscore, score_bertscore)]
)
def test_scorer_spec_with_the_embedder_resource(embedder: Embedder, validate: Any, score: Any) -> None:
    spec = ScorerSpec(validate=validate, score=score, uses=frozenset({"embedder"}))
    config = {"threshold": 0.9}
    spec.validate(config)
    embedder.warm([*PARAPHRASE, *WRONG_FACT], tokens=True)
    count = sum(embedder.embedded.values())
    assert spec.score is not None
    resources = {name: embedder for name in spec.uses}
    assert spec.score(*PARAPHRASE, config, **resources).passed
    assert not spec.score(*WRONG_FACT, config, **resources).passed
    assert sum(embedder.embedded.values()) == count  # scored from the warmed cache


def test_several_references_score_the_best_one(embedder: Embedder) -> None:
    # A row's expected_output given as a list (tests/test_multi_reference.py has the other metrics): the
    # value is the highest against any reference, and a one-item list is the plain string.
    prediction, references = PARAPHRASE[0], [UNRELATED[1], PARAPHRASE[1]]
    for score, config in ((score_semantic, {}), (score_bertscore, {"metric": "recall"})):
        alone = [score(prediction, reference, config, embedder=embedder) for reference in references]
        got = score(prediction, references, config, embedder=embedder)
        assert got.value == max(s.value for s in alone) == alone[1].value > alone[0].value
        assert (got.details["best_reference"], got.details["n_references"]) == (1, 2)
        assert score(prediction, [references[1]], config, embedder=embedder) == alone[1]
