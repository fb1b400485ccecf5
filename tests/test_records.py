"""Unit tests of records.py: the row constructor (scored, skipped, errored), the accessors, gate records."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from pytest_llmeval import gates
from pytest_llmeval.benchmark import Case
from pytest_llmeval.records import (
    ADAPTER,
    BASE,
    BenchmarkInfo,
    GateRecord,
    RowRecord,
    SideRecord,
    evaluated_value,
    gate_record,
    has_model,
    row_record,
    score,
    score_value,
    side,
)
from pytest_llmeval.scorers import Score

INFO: BenchmarkInfo = {
    "name": "benchmarks/a.jsonl",
    "sha256": "sha256:" + "ab" * 32,
    "domain": "in",
    "n_rows": 3,
}
CASE = Case(
    id="q1",
    instruction="What is 2 + 2?",
    input="",
    expected_output="4",
    evaluation_type="exact_match",
    difficulty="medium",
    line=7,
    evaluation_config={"threshold": 1.0},
    tags=("arith", "edge"),
)


def sides(base: float | None, adapter: float | None) -> dict[str, SideRecord]:
    """Both models' sides, scored (None: the scorer raised, so the side has its output and no score)."""
    return {
        BASE: {"output": "base says 4", "score": None if base is None else Score(base, 1.0).to_json()},
        ADAPTER: {"output": "4", "score": None if adapter is None else Score(adapter, 1.0).to_json()},
    }


def scored_row() -> RowRecord:
    return row_record(
        nodeid="benchmarks/a.jsonl::q1",
        benchmark=INFO,
        case=CASE,
        evaluated=ADAPTER,
        models=sides(0.0, 1.0),
        passed=True,
    )


def skipped_row() -> RowRecord:
    return row_record(
        nodeid="benchmarks/a.jsonl::q1", benchmark=INFO, case=CASE, evaluated=ADAPTER, skipped="no sandbox"
    )


def errored_row() -> RowRecord:
    return row_record(
        nodeid="benchmarks/a.jsonl::q1",
        benchmark=INFO,
        case=CASE,
        evaluated=ADAPTER,
        models=sides(None, None),
        error="benchmarks/a.jsonl:7: scorer 'exact_match' raised ValueError: boom",
    )


# ---------------------------------------------------------------------------------------------------------
# row_record


def test_every_variant_has_the_typed_dicts_keys_in_one_order() -> None:
    # The NotRequired keys come last: the row's prompt and its own prompt settings (when it has them),
    # the base each column is compared with (when not the base), and `cost`, the evaluator's to add.
    keys = list(RowRecord.__annotations__)
    optional = ["prompt", "baselines", "system", "prompt_template", "references", "cost"]
    assert keys[-len(optional) :] == optional
    keys = keys[: -len(optional)]
    for record in (scored_row(), skipped_row(), errored_row()):
        assert list(record) == keys
    case = Case(
        "q", "i", "", "o", "exact_match", "easy", 1, {}, run_options={"prompt_template": "{{ input }}"}
    )
    case = replace(case, system="Be brief.")
    made = row_record(nodeid="a::q", benchmark=INFO, case=case, evaluated=BASE, prompt="<prompt>")
    assert list(made) == [*keys, "prompt", "system", "prompt_template"]
    assert (made["prompt"], made["system"], made["prompt_template"]) == (
        "<prompt>",
        "Be brief.",
        "{{ input }}",
    )


def test_a_scored_row_carries_the_case_and_the_benchmark() -> None:
    record = scored_row()
    assert record["nodeid"] == "benchmarks/a.jsonl::q1"
    assert record["benchmark"] == INFO
    assert (record["id"], record["line"], record["difficulty"]) == ("q1", 7, "medium")
    assert (record["instruction"], record["input"], record["expected_output"]) == ("What is 2 + 2?", "", "4")
    assert record["evaluation_type"] == "exact_match"
    assert record["evaluation_config"] == {"threshold": 1.0}
    assert record["tags"] == ["arith", "edge"]  # a list, as JSON gives it back
    assert record["evaluated"] == ADAPTER
    assert record["models"] == sides(0.0, 1.0)
    assert (record["passed"], record["error"], record["skipped"]) == (True, None, None)
    assert json.loads(json.dumps(record)) == record


def test_a_skipped_row_has_no_models_and_does_not_pass() -> None:
    record = skipped_row()
    assert record["models"] == {}
    assert (record["passed"], record["error"], record["skipped"]) == (False, None, "no sandbox")


def test_an_errored_row_keeps_its_outputs() -> None:
    record = errored_row()
    assert record["models"][BASE] == {"output": "base says 4", "score": None}
    assert record["passed"] is False and record["skipped"] is None
    assert record["error"] is not None and "raised ValueError" in record["error"]


def test_the_record_does_not_share_mutable_state_with_its_arguments() -> None:
    models = sides(1.0, 1.0)
    config: dict[str, Any] = {"threshold": 1.0}
    case = Case("q", "i", "", "o", "exact_match", "easy", 1, config)
    record = row_record(nodeid="a.jsonl::q", benchmark=INFO, case=case, evaluated=BASE, models=models)
    models.pop(ADAPTER)
    config["threshold"] = 0.5
    assert set(record["models"]) == {BASE, ADAPTER}
    assert record["evaluation_config"] == {"threshold": 1.0}


# ---------------------------------------------------------------------------------------------------------
# accessors: the same on a record and on a results.json row (a record less `benchmark`)


@pytest.mark.parametrize("strip", [False, True], ids=["record", "results.json row"])
def test_accessors_of_a_scored_row(strip: bool) -> None:
    record: dict[str, Any] = dict(scored_row())
    if strip:
        del record["benchmark"]
    assert side(record, BASE) == {"output": "base says 4", "score": Score(0.0, 1.0).to_json()}
    assert score(record, ADAPTER) == {"value": 1.0, "threshold": 1.0, "passed": True}
    assert (score_value(record, BASE), score_value(record, ADAPTER)) == (0.0, 1.0)
    assert evaluated_value(record) == 1.0
    assert has_model(record, BASE) and has_model(record, ADAPTER)
    assert not has_model(record, "other-adapter")
    assert side(record, "other-adapter") is None and score_value(record, "other-adapter") is None


def test_evaluated_value_follows_the_evaluated_model() -> None:
    record = row_record(
        nodeid="a.jsonl::q", benchmark=INFO, case=CASE, evaluated=BASE, models=sides(0.25, 1.0), passed=False
    )
    assert evaluated_value(record) == 0.25


def test_score_value_is_a_float() -> None:
    record = row_record(
        nodeid="a.jsonl::q",
        benchmark=INFO,
        case=CASE,
        evaluated=BASE,
        models={BASE: {"output": "4", "score": {"value": 1, "threshold": 1, "passed": True}}},
    )
    found = score_value(record, BASE)
    assert found == 1.0 and isinstance(found, float)


def test_accessors_of_skipped_and_errored_rows() -> None:
    for record in (skipped_row(), errored_row()):
        for who in (BASE, ADAPTER):
            assert score(record, who) is None
            assert score_value(record, who) is None
        assert evaluated_value(record) is None
    assert not has_model(skipped_row(), BASE)
    assert has_model(errored_row(), BASE)  # it ran: its output is there, its scorer failed
    assert side(errored_row(), ADAPTER) == {"output": "4", "score": None}


def test_a_row_without_models_key_has_no_side() -> None:
    assert side({"evaluated": BASE}, BASE) is None
    assert side({"evaluated": BASE, "models": None}, BASE) is None


# ---------------------------------------------------------------------------------------------------------
# gate_record


def test_gate_record_from_a_verdict() -> None:
    verdict = gates.size(3, minimum=50)
    record = gate_record(INFO, verdict.to_json())
    # Every key but `metric`, which only a gate per metric (--llmeval-gate-metric) has.
    assert list(record) == [k for k in GateRecord.__annotations__ if k != "metric"]
    assert gate_record(INFO, verdict.to_json(), metric="rouge")["metric"] == "rouge"
    assert record["benchmark"] == INFO
    assert record["gate"] == "size"
    assert record["status"] == verdict.status == "fail"
    assert record["passed"] is False
    assert record["message"] == verdict.message
    assert record["details"] == dict(verdict.details)
    assert record["statistics"] is None
    assert json.loads(json.dumps(record)) == record


def test_gate_record_keeps_the_statistics_it_decided_on() -> None:
    from pytest_llmeval.formatting import SCORE_MEASURE
    from pytest_llmeval.results import comparison_blocks
    from pytest_llmeval.stats import compare_paired

    cmp = compare_paired([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    blocks = comparison_blocks(cmp, SCORE_MEASURE)
    record = gate_record(INFO, gates.better_than_base(cmp, mode="point").to_json(), blocks)
    assert record["statistics"] == blocks
    assert record["statistics"] is not blocks  # a copy: the record owns its statistics
    assert record["status"] == "pass" and record["passed"] is True
    assert record["details"]["comparison"] == cmp.to_json()


def test_gate_record_normalises_types() -> None:
    verdict = {"gate": "size", "status": "skip", "passed": 1, "message": "m", "details": {}}
    record = gate_record(INFO, verdict)
    assert record["passed"] is True
