"""Pure parts of perplexity rows: config validation, the row score, corpus aggregation, fluency, stats."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.benchmark import Case
from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.records import (
    ADAPTER,
    BASE,
    BenchmarkInfo,
    FluencyRecord,
    RowRecord,
    SideRecord,
    row_record,
)
from pytest_llmeval.scorers import perplexity as scorer
from pytest_llmeval.stats import compare_paired
from pytest_llmeval.summaries import (
    DEFAULT_COMPOSITE_WEIGHTS,
    composite_score,
    composite_summary,
    fluency_summary,
    perplexity_score,
    perplexity_summary,
)


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
        ({"threshold": 10, "bands": [12, 10, 15]}, "'bands' must be three increasing perplexities"),
        ({"threshold": 10, "bands": [10, 12]}, "'bands' must be three increasing perplexities"),
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


BENCH: BenchmarkInfo = {"name": "texts.jsonl", "sha256": "sha256:" + "0" * 64, "domain": "out", "n_rows": 4}


def record(
    i: int,
    base: dict[str, Any] | float,
    adapter: dict[str, Any] | float | None,
    *,
    evaluation_type: str = "perplexity",
    fluency: dict[str, FluencyRecord] | None = None,
) -> RowRecord:
    """A scored row through records.row_record: a dict is a perplexity measurement, a float a plain score."""

    def side(found: dict[str, Any] | float) -> SideRecord:
        if isinstance(found, dict):
            return {"output": None, "score": scorer.score_measurement(found, {"threshold": 1e9}).to_json()}
        return {"output": "B", "score": {"value": found, "threshold": 1.0, "passed": found >= 1.0}}

    models = {BASE: side(base)}
    if adapter is not None:
        models[ADAPTER] = side(adapter)
    for who, measured_text in (fluency or {}).items():
        models[who]["fluency"] = measured_text
    config = {"threshold": 1e9} if evaluation_type == "perplexity" else {}
    case = Case(f"r{i}", "", "some text", "B", evaluation_type, "easy", i + 1, config)
    return row_record(
        nodeid=f"texts.jsonl::r{i}",
        benchmark=BENCH,
        case=case,
        evaluated=BASE if adapter is None else ADAPTER,
        models=models,
        passed=True,
    )


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


@pytest.mark.parametrize(
    ("perplexity", "label"),
    [
        (1.0, "excellent"),
        (9.99, "excellent"),
        (10.0, "good"),
        (11.99, "good"),
        (12.0, "acceptable"),
        (15.0, "acceptable"),
        (15.01, "poor"),
    ],
)
def test_the_documents_perplexity_bands(perplexity: float, label: str) -> None:
    # §7.1: excellent < 10, good 10-12, acceptable 12-15, poor > 15.
    assert scorer.band(perplexity) == label


def test_a_benchmark_sets_its_own_bands() -> None:
    # exp(106 / 102) = 2.83: excellent by the document's bands, poor by bands made for another tokenizer.
    records = [record(0, measured(100.0, 100, 300), None), record(1, measured(6.0, 2, 4), None)]
    summary = perplexity_summary(records)
    assert summary is not None and summary["base"]["band"] == "excellent"
    assert summary["bands"] == {"excellent": "< 10", "good": "< 12", "acceptable": "<= 15"}
    for r in records:
        r["evaluation_config"]["bands"] = [1.5, 2, 2.5]
    summary = perplexity_summary(records)
    assert summary is not None and summary["base"]["band"] == "poor"


def test_scripts_add_up_over_rows() -> None:
    def scripts(kanji: float, latin: float, hits: float) -> dict[str, Any]:
        return {
            "kanji": {"nll": kanji, "n_chars": 2, "hits": hits, "scored": 2.0},
            "latin": {"nll": latin, "n_chars": 3},  # measured before top-1 hits were kept: no accuracy
        }

    records = [
        record(0, measured(5.0, 4, 5, scripts=scripts(4.0, 1.0, 2.0)), None),
        record(1, measured(3.0, 2, 5, scripts=scripts(1.0, 2.0, 0.5)), None),
    ]
    summary = perplexity_summary(records)
    assert summary is not None
    by_script = summary["base"]["bits_per_character_by_script"]
    assert by_script["kanji"] == {
        "bits_per_character": pytest.approx(5.0 / math.log(2) / 4),
        "n_chars": 4,
        "top1_accuracy": pytest.approx(2.5 / 4),  # character-weighted over both texts
    }
    assert by_script["latin"]["top1_accuracy"] is None
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
    # Other benchmarks, mixed ones too, compare their [0, 1] scores.
    mixed = [records[0], record(9, 0.0, 1.0, evaluation_type="exact_match")]
    assert comparison_values(mixed) == ([1.0, 1.0], [1.0, 0.0], True, "score")


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


def text(nll: float, tokens: int) -> dict[str, Any]:
    """One text's NLL under a scorer, as measures.fluency records it."""
    return {"nll": nll, "n_tokens": tokens, "n_chars": tokens * 4}


def fluent(scorer_name: str, output: dict[str, Any] | None, reference: dict[str, Any]) -> FluencyRecord:
    return {"scorer": scorer_name, "output": output, "reference": reference}


def test_fluency_summary() -> None:
    # Each side's scorer measures its own output and the reference: the references differ per side.
    records = [
        record(
            0,
            1.0,
            1.0,
            evaluation_type="exact_match",
            fluency={
                BASE: fluent("base-m", text(20.0, 5), text(10.0, 5)),
                ADAPTER: fluent("adapter-m", text(12.0, 6), text(9.0, 5)),
            },
        ),
        record(
            1,
            1.0,
            1.0,
            evaluation_type="exact_match",
            fluency={
                BASE: fluent("base-m", None, text(6.0, 3)),  # an empty base output: nothing to score
                ADAPTER: fluent("adapter-m", text(3.0, 2), text(5.0, 3)),
            },
        ),
        record(2, 1.0, 1.0, evaluation_type="exact_match"),  # fluency not measured
    ]
    out = fluency_summary(records)
    assert out is not None and set(out) == {BASE, ADAPTER}
    base, adapter = out[BASE], out[ADAPTER]
    assert (base["scorer"], adapter["scorer"]) == ("base-m", "adapter-m")
    assert base["output"]["perplexity"] == pytest.approx(math.exp(4.0))
    assert base["output"]["n_texts"] == 1 and base["n_empty_outputs"] == 1
    assert base["reference"]["perplexity"] == pytest.approx(math.exp(16 / 8))
    assert base["reference"]["n_texts"] == 2
    assert adapter["output"]["perplexity"] == pytest.approx(math.exp(15 / 8))
    assert adapter["reference"]["perplexity"] == pytest.approx(math.exp(14 / 8))
    assert adapter["n_empty_outputs"] == 0
    assert adapter["ratio_to_reference"] == pytest.approx(math.exp(15 / 8) / math.exp(14 / 8))
    assert adapter["cross_entropy_difference"] == pytest.approx(15 / 8 - 14 / 8)
    assert adapter["perplexity_score"] == pytest.approx(perplexity_score(math.exp(15 / 8)))
    assert base["perplexity_score"] == pytest.approx(perplexity_score(math.exp(4.0)))
    assert fluency_summary(records[2:]) is None


def test_fluency_of_only_empty_outputs() -> None:
    rows = [
        record(0, 1.0, None, evaluation_type="exact_match", fluency={BASE: fluent("m", None, text(2.0, 2))})
    ]
    out = fluency_summary(rows)
    assert out is not None and set(out) == {BASE}
    assert out[BASE]["output"] is None and out[BASE]["perplexity_score"] is None
    assert out[BASE]["n_empty_outputs"] == 1 and out[BASE]["reference"]["n_texts"] == 1
    assert "ratio_to_reference" not in out[BASE]


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
    # The perplexity part is each model's own outputs' fluency (base 50, adapter 20), never the perplexity
    # of reference texts (the perplexity row, near 1 for both): the QA fine-tuning document's Fix #1.
    fluency = {
        BASE: fluent("m", text(math.log(50.0) * 10, 10), text(1.0, 10)),
        ADAPTER: fluent("m", text(math.log(20.0) * 10, 10), text(1.0, 10)),
    }
    mc = [
        record(i, v, 1.0, evaluation_type="multiple_choice", fluency=fluency)
        for i, v in enumerate((1.0, 0.0, 1.0, 1.0))
    ]
    texts = [record(9, measured(0.1, 10, 30), measured(0.1, 10, 30))]
    out = composite_summary([*mc, *texts], {"multiple_choice": 0.5, "perplexity": 0.5})
    assert out is not None
    assert out[BASE]["metrics"] == {
        "multiple_choice": 75.0,
        "perplexity": pytest.approx(perplexity_score(50.0)),
    }
    assert out[ADAPTER]["value"] == pytest.approx(0.5 * 100 + 0.5 * perplexity_score(20.0))
    assert composite_summary(mc[:0], {"rouge": 1.0}) is None
    # Perplexity rows alone give no perplexity metric: no output was generated.
    alone = composite_summary(texts, {"multiple_choice": 0.5, "perplexity": 0.5})
    assert alone is None


def test_composite_below_half_the_weight_has_no_value() -> None:
    result = composite_score({"perplexity": 84.15}, DEFAULT_COMPOSITE_WEIGHTS)
    assert result["value"] is None and result["present_weight"] == pytest.approx(0.1)
    assert "10% of the weight, under 50%" in result["reason"]
    assert result["metrics"]["perplexity"] == 84.15


@pytest.mark.parametrize(
    "config",
    [
        {"threshold": 1},  # a perplexity of exactly 1 (a certain model) is a legal bound
        {"threshold": 1.5},
        {"threshold": 10, "max_length": 2},
        {"threshold": 10, "stride": 1},
        {"threshold": 10, "stride": 4},  # no max_length: the model's context decides, nothing to exceed
        {"threshold": 10, "max_length": 8, "stride": 8},
        {"threshold": 10, "max_length": 2, "stride": 1, "on": "reference"},
    ],
)
def test_boundary_configs_pass(config: dict[str, Any]) -> None:
    scorer.validate_config(config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "perplexity needs 'threshold': the highest acceptable perplexity"),
        (
            {"threshold": 0.999},
            "'threshold' must be a number >= 1 (a perplexity is never below 1), got 0.999",
        ),
        ({"threshold": 10, "max_length": 512.0}, "'max_length' must be an integer >= 2, got 512.0"),
        ({"threshold": 10, "max_length": True}, "'max_length' must be an integer >= 2, got True"),
        ({"threshold": 10, "stride": 4.0}, "'stride' must be an integer >= 1, got 4.0"),
        ({"threshold": 10, "max_length": 8, "stride": 9}, "'stride' (9) must not exceed 'max_length' (8)"),
    ],
)
def test_invalid_config_messages_in_full(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        scorer.validate_config(config)
    assert str(info.value) == message
