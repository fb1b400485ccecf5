"""Pure parts of perplexity rows: config validation, the row score, corpus aggregation, fluency, stats."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.results import (
    DEFAULT_COMPOSITE_WEIGHTS,
    comparison_values,
    composite_score,
    composite_summary,
    fluency_summary,
    perplexity_score,
    perplexity_summary,
)
from pytest_llmeval.scorers import perplexity as scorer
from pytest_llmeval.stats import compare_paired


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "needs 'threshold'"),
        ({"threshold": 0.5}, "number >= 1"),
        ({"threshold": True}, "number >= 1"),
        ({"threshold": 10, "on": "output"}, "'on' must be one of input, reference"),
        ({"threshold": 10, "max_length": 1}, "integer >= 2"),
        ({"threshold": 10, "stride": 0}, "integer >= 1"),
        ({"threshold": 10, "max_length": 8, "stride": 9}, "must not exceed"),
        (
            {"threshold": 10, "extract_pattern": "x"},
            "unknown key .extract_pattern. in evaluation_config for perplexity",
        ),
    ],
)
def test_invalid_configs(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scorer.validate_config(config)


def test_field_rule_needs_only_the_scored_text() -> None:
    may_be_empty, must = scorer.field_rule({"threshold": 5})
    assert must == {"input"} and may_be_empty == {"instruction", "expected_output"}
    may_be_empty, must = scorer.field_rule({"threshold": 5, "on": "reference"})
    assert must == {"expected_output"} and "input" in may_be_empty


def test_a_row_passes_at_or_below_its_bound() -> None:
    assert scorer.score_measurement({"perplexity": 20.0}, {"threshold": 20}).passed
    failed = scorer.score_measurement({"perplexity": 20.5, "n_tokens": 3}, {"threshold": 20})
    assert not failed.passed and failed.value == 0.0
    assert failed.to_json()["max_perplexity"] == 20.0 and failed.to_json()["n_tokens"] == 3


def measured(nll: float, tokens: int, chars: int, **extra: Any) -> dict[str, Any]:
    return {
        "perplexity": math.exp(nll / tokens),
        "cross_entropy": nll / tokens,
        "nll": nll,
        "n_tokens": tokens,
        "n_chars": chars,
        "n_bytes": chars * 2,
        "max_length": 1024,
        "stride": 512,
        "first_token": "scored after BOS",
        **extra,
    }


def record(i: int, base: dict[str, Any], adapter: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": f"r{i}",
        "evaluation_type": "perplexity",
        "base": {"output": None, "score": {"value": 1.0, **base}},
        "adapter": None if adapter is None else {"output": None, "score": {"value": 1.0, **adapter}},
    }


def test_corpus_perplexity_is_token_weighted() -> None:
    # One long text at cross-entropy 1 and one short text at 3: the corpus is close to the long text.
    records = [record(0, measured(100.0, 100, 300), None), record(1, measured(6.0, 2, 4), None)]
    summary = perplexity_summary(records)
    assert summary is not None and summary["adapter"] is None
    base = summary["base"]
    assert base["perplexity"] == pytest.approx(math.exp(106 / 102))
    assert base["mean_text_perplexity"] == pytest.approx((math.e + math.exp(3)) / 2)
    assert base["bits_per_character"] == pytest.approx(106 / math.log(2) / 304)
    assert base["bits_per_byte"] == pytest.approx(106 / math.log(2) / 608)
    assert base["n_tokens"] == 102 and base["n_texts"] == 2


def test_scripts_add_up_over_rows() -> None:
    def scripts(kanji: float, latin: float) -> dict[str, Any]:
        return {"kanji": {"nll": kanji, "n_chars": 2}, "latin": {"nll": latin, "n_chars": 3}}

    records = [
        record(0, measured(5.0, 4, 5, scripts=scripts(4.0, 1.0)), None),
        record(1, measured(3.0, 2, 5, scripts=scripts(1.0, 2.0)), None),
    ]
    summary = perplexity_summary(records)
    assert summary is not None
    by_script = summary["base"]["bits_per_character_by_script"]
    assert by_script["kanji"] == {"bits_per_character": pytest.approx(5.0 / math.log(2) / 4), "n_chars": 4}
    assert by_script["latin"]["bits_per_character"] == pytest.approx(3.0 / math.log(2) / 6)


def test_comparison_values_use_cross_entropy_for_perplexity_benchmarks() -> None:
    records = [record(i, measured(10.0 + i, 10, 20), measured(9.0 + i, 10, 20)) for i in range(4)]
    adapter, base, bounded, measure = comparison_values(records)
    assert not bounded and measure.startswith("negative cross-entropy")
    assert adapter == pytest.approx([-0.9, -1.0, -1.1, -1.2]) and base == pytest.approx(
        [-1.0, -1.1, -1.2, -1.3]
    )
    summary = perplexity_summary(records)
    assert summary is not None
    assert summary["perplexity_ratio"] == pytest.approx(math.exp(-0.1))
    assert summary["cross_entropy_difference"] == pytest.approx(-0.1)
    # Other benchmarks compare their [0, 1] scores.
    mixed = [{**records[0], "evaluation_type": "exact_match"}]
    assert comparison_values(mixed)[2] is True


def test_unbounded_comparison() -> None:
    cmp = compare_paired([-0.9, -1.0, -1.1, -1.25], [-1.0, -1.1, -1.2, -1.3], bounded=False)
    assert cmp.kind == "continuous" and cmp.test == "paired_t" and cmp.difference == pytest.approx(0.0875)
    # 0 and 1 values are not taken for pass/fail when unbounded, and values beyond [0, 1] are accepted.
    assert compare_paired([1.0, 0.0, 1.0], [0.0, 0.0, 1.0], bounded=False).test == "paired_t"
    assert (
        compare_paired([5.0, 7.0, 9.0], [1.0, 2.0, 4.0], bounded=False).min_detectable_difference is not None
    )
    with pytest.raises(ValueError, match="scores must be in"):
        compare_paired([5.0, 7.0], [1.0, 2.0])


def test_fluency_summary() -> None:
    def text(nll: float, tokens: int) -> dict[str, Any]:
        return {"nll": nll, "n_tokens": tokens, "n_chars": tokens * 4}

    records = [
        {"fluency": {"reference": text(10.0, 5), "base": text(20.0, 5), "adapter": text(12.0, 6)}},
        {"fluency": {"reference": text(6.0, 3), "base": None, "adapter": text(3.0, 2)}},  # empty base output
        {"other": True},
    ]
    out = fluency_summary(records)
    assert out is not None
    assert out["reference"]["perplexity"] == pytest.approx(math.exp(16 / 8))
    assert out["base"]["perplexity"] == pytest.approx(math.exp(4.0)) and out["base"]["n_empty"] == 1
    assert out["adapter"]["ratio_to_reference"] == pytest.approx(math.exp(15 / 8) / math.exp(2.0))
    assert out["adapter"]["cross_entropy_difference"] == pytest.approx(15 / 8 - 2.0)
    assert out["adapter"]["perplexity_score"] == pytest.approx(perplexity_score(math.exp(15 / 8)))
    assert fluency_summary([{"x": 1}]) is None


def test_perplexity_score_is_the_documents() -> None:
    # 100 * exp(-ppl / 300): the worked example's perplexity score 84.15 is a perplexity of about 51.79.
    assert perplexity_score(0.0) == 100.0
    assert perplexity_score(51.79) == pytest.approx(84.15, abs=0.01)


@given(st.floats(1.0, 1e4), st.floats(1.0, 1e4))
def test_perplexity_score_falls_as_perplexity_rises(a: float, b: float) -> None:
    low, high = min(a, b), max(a, b)
    assert 0.0 < perplexity_score(high) <= perplexity_score(low) <= 100.0


# --- the composite score ----------------------------------------------------------------------------------


def test_composite_reproduces_the_qa_documents_worked_example() -> None:
    """Base model: MCQ 93.37, BERTScore 85.13, ROUGE-L 10.18, perplexity score 84.15 -> 73.35.

    The weighted sum of those printed (rounded) inputs is 73.338; the document's 73.35 was computed from
    unrounded ones, so the check allows the inputs' rounding.
    """
    metrics = {"multiple_choice": 93.37, "bertscore": 85.13, "rouge": 10.18, "perplexity": 84.15}
    result = composite_score(metrics, DEFAULT_COMPOSITE_WEIGHTS)
    assert result["value"] == pytest.approx(73.35, abs=0.015)
    assert result["missing"] == []


def test_composite_renormalises_over_present_metrics() -> None:
    result = composite_score({"multiple_choice": 80.0, "rouge": 20.0}, DEFAULT_COMPOSITE_WEIGHTS)
    assert result["value"] == pytest.approx((0.4 * 80 + 0.2 * 20) / 0.6)
    assert result["missing"] == ["bertscore", "perplexity"]
    assert composite_score({}, DEFAULT_COMPOSITE_WEIGHTS)["value"] is None


def test_composite_of_records() -> None:
    mc = [
        {
            "evaluation_type": "multiple_choice",
            "base": {"score": {"value": v}},
            "adapter": {"score": {"value": 1.0}},
        }
        for v in (1.0, 0.0, 1.0, 1.0)
    ]
    texts = [record(0, measured(math.log(50.0) * 10, 10, 30), measured(math.log(20.0) * 10, 10, 30))]
    out = composite_summary([*mc, *texts], {"multiple_choice": 0.5, "perplexity": 0.5})
    assert out is not None
    assert out["base"]["metrics"] == {
        "multiple_choice": 75.0,
        "perplexity": pytest.approx(perplexity_score(50.0)),
    }
    assert out["adapter"]["value"] == pytest.approx(0.5 * 100 + 0.5 * perplexity_score(20.0))
    assert composite_summary(mc[:0], {"rouge": 1.0}) is None
