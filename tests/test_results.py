"""Unit tests and hypothesis properties of results.py: aggregation, the results.json document, atomic write.

Every document built here from scored rows is also validated against the LocoLLM standard's schema.
(The terminal summary, summary_lines, lives in reporting/summary.py and is tested in test_report.py.)
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from locollm import validate_locollm

from pytest_llmeval import gates
from pytest_llmeval.benchmark import DIFFICULTIES, Case
from pytest_llmeval.formatting import CROSS_ENTROPY_MEASURE, SCORE_MEASURE
from pytest_llmeval.records import (
    ADAPTER,
    BASE,
    BenchmarkInfo,
    Domain,
    FluencyRecord,
    GateRecord,
    RowRecord,
    SideRecord,
    evaluated_value,
    gate_record,
    row_record,
)
from pytest_llmeval.results import SCHEMA_VERSION, build_results, comparison_blocks
from pytest_llmeval.results_file import write_atomic
from pytest_llmeval.scorers import Score, bleu
from pytest_llmeval.scorers import perplexity as perplexity_scorer
from pytest_llmeval.stats import compare_paired
from pytest_llmeval.summaries import COMPOSITE_MIN_WEIGHT, composite_score, perplexity_score, summarize

WHEN = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
HARDWARE: dict[str, Any] = {
    "device": "cpu",
    "device_name": "x86_64",
    "cpu_count": 2,
    "platform": "Linux-6.1-x86_64",
    "torch": "2.3.0",
}
ADAPTER_META: dict[str, Any] = {
    "adapter": "adapters/demo",
    "adapter_name": "demo",
    "adapter_version": "1.0",
    "base_model": "tiny-base",
    "base_model_note": "a note",
    "quantization": None,
    "hardware": HARDWARE,
    "inference_config": {
        "decoding": {"max_new_tokens": 64, "temperature": 0.0, "top_p": 1.0},
        "batch_size": 4,
    },
}
BASE_META: dict[str, Any] = {
    "adapter": None,
    "base_model": "tiny-base",
    "inference_config": {"batch_size": 4},
}


def info(name: str, domain: Domain | None = "in", n_rows: int = 50) -> BenchmarkInfo:
    """A benchmark as collection knows it; the hash is made up (nothing here reads the file)."""
    return {
        "name": name,
        "sha256": "sha256:" + hashlib.sha256(name.encode()).hexdigest(),
        "domain": domain,
        "n_rows": n_rows,
    }


A_IN = info("a.jsonl", "in")
A_BASE_ONLY = info("a.jsonl", None)


def case(
    row_id: str,
    *,
    difficulty: str = "easy",
    evaluation_type: str = "exact_match",
    threshold: float = 1.0,
    line: int = 1,
) -> Case:
    return Case(
        id=row_id,
        instruction="What is 2 + 2?",
        input="",
        expected_output="4",
        evaluation_type=evaluation_type,
        difficulty=difficulty,
        line=line,
        evaluation_config={"threshold": threshold},
        tags=("t",),
    )


def scored(
    row_id: str,
    base: float | Score,
    adapter: float | Score | None,
    *,
    bench: BenchmarkInfo = A_IN,
    difficulty: str = "easy",
    evaluation_type: str = "exact_match",
    threshold: float = 1.0,
    line: int = 1,
    outputs: tuple[str | None, str | None] = ("base says 4", "adapter says 4"),
    fluency: Mapping[str, FluencyRecord] | None = None,
) -> RowRecord:
    """A scored row made through records.row_record; adapter=None: a base-only run (the base is evaluated)."""

    def as_score(value: float | Score, details: Mapping[str, Any]) -> Score:
        return value if isinstance(value, Score) else Score(value, threshold, details)

    base_score = as_score(base, {"extracted": "x"})
    models: dict[str, SideRecord] = {BASE: {"output": outputs[0], "score": base_score.to_json()}}
    primary = base_score
    if adapter is not None:
        primary = as_score(adapter, {})
        models[ADAPTER] = {"output": outputs[1], "score": primary.to_json()}
    for who, measured in (fluency or {}).items():
        models[who]["fluency"] = measured
    return row_record(
        nodeid=f"{bench['name']}::{row_id}",
        benchmark=bench,
        case=case(
            row_id, difficulty=difficulty, evaluation_type=evaluation_type, threshold=threshold, line=line
        ),
        evaluated=BASE if adapter is None else ADAPTER,
        models=models,
        passed=primary.passed,
    )


def errored(
    row_id: str,
    *,
    bench: BenchmarkInfo = A_IN,
    with_adapter: bool = True,
    difficulty: str = "easy",
    evaluation_type: str = "exact_match",
    line: int = 1,
) -> RowRecord:
    """A row whose scorer raised: the outputs are kept, no score."""
    models: dict[str, SideRecord] = {BASE: {"output": "base says 4", "score": None}}
    if with_adapter:
        models[ADAPTER] = {"output": "adapter says 4", "score": None}
    return row_record(
        nodeid=f"{bench['name']}::{row_id}",
        benchmark=bench,
        case=case(row_id, difficulty=difficulty, evaluation_type=evaluation_type, line=line),
        evaluated=ADAPTER if with_adapter else BASE,
        models=models,
        error=f"{bench['name']}:{line}: scorer '{evaluation_type}' raised ValueError: boom",
    )


def measured(cross_entropy: float, tokens: int = 10) -> Score:
    """A perplexity row's score, as the perplexity scorer makes it from what the model measured."""
    measurement = {
        "perplexity": math.exp(cross_entropy),
        "cross_entropy": cross_entropy,
        "nll": cross_entropy * tokens,
        "n_tokens": tokens,
        "n_chars": 4 * tokens,
        "max_length": 1024,
        "stride": 512,
        "first_token": "scored after BOS",
    }
    return perplexity_scorer.score_measurement(measurement, {"threshold": 1000.0})


def ppl_row(row_id: str, base_ce: float, adapter_ce: float | None, *, bench: BenchmarkInfo) -> RowRecord:
    """A perplexity row (a reference text measured by each model): nothing generated."""
    return scored(
        row_id,
        measured(base_ce),
        None if adapter_ce is None else measured(adapter_ce),
        bench=bench,
        evaluation_type="perplexity",
        outputs=(None, None),
    )


def fluent(scorer: str, output_ce: float | None, reference_ce: float, tokens: int = 10) -> FluencyRecord:
    """--llmeval-fluency's measurement of one side: its output's and the reference's NLL under `scorer`."""

    def text(ce: float) -> dict[str, Any]:
        return {"nll": ce * tokens, "n_tokens": tokens, "n_chars": 4 * tokens}

    return {
        "scorer": scorer,
        "output": None if output_ce is None else text(output_ce),
        "reference": text(reference_ce),
    }


def build(
    records: Iterable[RowRecord],
    *,
    meta: Mapping[str, Any] = ADAPTER_META,
    complete: bool = True,
    timestamp: datetime | None = WHEN,
    **kwargs: Any,
) -> dict[str, Any]:
    """build_results, with the document checked against the LocoLLM schema."""
    doc = build_results(records, meta=meta, complete=complete, timestamp=timestamp, **kwargs)
    validate_locollm(doc)
    return doc


def by_name(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["benchmark_file"]: b for b in doc["benchmarks"]}


def fmean_or_none(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def approx_or_none(value: float | None) -> Any:
    return None if value is None else pytest.approx(value, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------------------------------------------------
# summarize

SCORES = [  # (difficulty, base, adapter); None, None marks an errored row
    ("easy", 1.0, 1.0),
    ("easy", 0.0, 1.0),
    ("easy", 0.5, 0.25),
    ("medium", 0.0, 0.0),
    ("medium", 1.0, 0.75),
    ("medium", None, None),
    ("hard", 0.2, 0.9),
]


def sample_records() -> list[RowRecord]:
    out = []
    for i, (d, b, a) in enumerate(SCORES):
        if b is None:
            out.append(errored(f"r{i}", difficulty=d, line=i + 1))
        else:
            out.append(scored(f"r{i}", b, a, difficulty=d, line=i + 1))
    return out


def test_summarize_means_and_improvement() -> None:
    res = summarize(sample_records())
    base = [b for _, b, _ in SCORES if b is not None]
    adapter = [a for _, _, a in SCORES if a is not None]
    base_mean, adapter_mean = statistics.fmean(base), statistics.fmean(adapter)

    assert res["base_model_score"] == pytest.approx(base_mean)
    assert res["adapter_score"] == pytest.approx(adapter_mean)
    assert res["improvement_absolute"] == pytest.approx(adapter_mean - base_mean)
    assert res["improvement_relative"] == pytest.approx((adapter_mean - base_mean) / base_mean)


def test_summarize_per_difficulty() -> None:
    per = summarize(sample_records())["per_difficulty"]
    assert list(per) == list(DIFFICULTIES)
    for difficulty in DIFFICULTIES:
        rows = [(b, a) for d, b, a in SCORES if d == difficulty]
        base = [b for b, _ in rows if b is not None]
        adapter = [a for _, a in rows if a is not None]
        assert per[difficulty]["base"] == approx_or_none(fmean_or_none(base))
        assert per[difficulty]["adapter"] == approx_or_none(fmean_or_none(adapter))
        # n counts the rows the means are over; the errored ones are counted apart.
        assert per[difficulty]["n"] == len(adapter)
        assert per[difficulty]["n_errors"] == len(rows) - len(adapter)


def test_summarize_counts_passed_errored_and_skipped_rows() -> None:
    skipped = row_record(
        nodeid="a.jsonl::s", benchmark=A_IN, case=case("s"), evaluated=ADAPTER, skipped="no sandbox"
    )
    res = summarize([*sample_records(), skipped])
    # threshold 1.0: a row passes when the adapter (the evaluated model) scores 1.0.
    assert res["n_passed"] == sum(1 for _, _, a in SCORES if a is not None and a >= 1.0)
    assert res["n_errors"] == sum(1 for _, b, _ in SCORES if b is None)
    assert res["n_skipped"] == 1


def test_errored_rows_are_left_out_of_the_means() -> None:
    good = [scored("a", 0.5, 1.0), scored("b", 0.25, 0.5)]
    with_errors, without = summarize([*good, errored("c"), errored("d")]), summarize(good)
    for key in ("adapter_score", "base_model_score", "improvement_absolute", "improvement_relative"):
        assert with_errors[key] == without[key]
    assert with_errors["n_errors"] == 2
    # n: the rows the means are over; the errored ones counted apart (4 easy rows: 2 scored, 2 errored).
    assert with_errors["per_difficulty"]["easy"]["n"] == 2
    assert with_errors["per_difficulty"]["easy"]["n_errors"] == 2


def test_every_row_errored_gives_no_means() -> None:
    res = summarize([errored("a"), errored("b", difficulty="hard")])
    assert res["adapter_score"] is None
    assert res["base_model_score"] is None
    assert res["improvement_absolute"] is None
    assert res["improvement_relative"] is None
    assert res["n_errors"] == 2
    assert res["n_passed"] == 0
    assert res["per_difficulty"]["hard"] == {"adapter": None, "base": None, "n": 0, "n_errors": 1}


def test_relative_improvement_is_none_when_the_base_mean_is_zero() -> None:
    res = summarize([scored("a", 0.0, 1.0), scored("b", 0.0, 0.5)])
    assert res["base_model_score"] == 0.0
    assert res["improvement_absolute"] == pytest.approx(0.75)
    assert res["improvement_relative"] is None


def test_negative_improvement() -> None:
    res = summarize([scored("a", 1.0, 0.0), scored("b", 0.5, 0.5)])
    base, adapter = statistics.fmean([1.0, 0.5]), statistics.fmean([0.0, 0.5])
    assert res["improvement_absolute"] == pytest.approx(adapter - base)
    assert res["improvement_absolute"] < 0
    assert res["improvement_relative"] == pytest.approx((adapter - base) / base)


def test_base_only_records() -> None:
    recs = [
        scored("a", 1.0, None, bench=A_BASE_ONLY),
        scored("b", 0.0, None, bench=A_BASE_ONLY, difficulty="medium"),
    ]
    res = summarize(recs)
    assert res["adapter_score"] is None
    assert res["base_model_score"] == pytest.approx(0.5)
    assert res["improvement_absolute"] is None
    assert res["improvement_relative"] is None
    assert res["n_passed"] == 1  # the base score decides when there is no adapter
    assert res["per_difficulty"]["medium"] == {"adapter": None, "base": 0.0, "n": 1, "n_errors": 0}


def test_summarize_no_records() -> None:
    res = summarize([])
    assert res["adapter_score"] is None and res["base_model_score"] is None
    empty = {"adapter": None, "base": None, "n": 0, "n_errors": 0}
    assert res["per_difficulty"] == {d: empty for d in DIFFICULTIES}
    assert res["n_passed"] == 0 and res["n_errors"] == 0


# ---------------------------------------------------------------------------------------------------------
# build_results: benchmarks and rows


def test_build_results_groups_by_benchmark_and_sorts_rows() -> None:
    z = info("z.jsonl", "out")
    recs = [
        scored("b", 1.0, 1.0, bench=z),
        scored("r2", 0.0, 1.0),
        scored("a", 0.5, 0.0, bench=z, evaluation_type="other"),
        scored("r1", 1.0, 1.0),
        scored("r10", 1.0, 0.0),
    ]
    doc = build(recs)

    assert [b["benchmark_file"] for b in doc["benchmarks"]] == ["a.jsonl", "z.jsonl"]
    a_entry, z_entry = doc["benchmarks"]
    assert [r["nodeid"] for r in a_entry["rows"]] == ["a.jsonl::r1", "a.jsonl::r10", "a.jsonl::r2"]
    assert [r["nodeid"] for r in z_entry["rows"]] == ["z.jsonl::a", "z.jsonl::b"]
    assert (a_entry["n_examples"], z_entry["n_examples"]) == (3, 2)
    assert (a_entry["evaluation_type"], a_entry["evaluation_types"]) == ("exact_match", ["exact_match"])
    assert (z_entry["evaluation_type"], z_entry["evaluation_types"]) == ("mixed", ["exact_match", "other"])
    assert a_entry["results"] == summarize([r for r in recs if r["benchmark"]["name"] == "a.jsonl"])
    assert a_entry["results"]["adapter_score"] == pytest.approx(statistics.fmean([1.0, 1.0, 0.0]))


def test_rows_keep_everything_but_the_benchmark() -> None:
    rec = scored("r1", 0.5, 1.0, line=7)
    doc = build([rec])
    (row,) = doc["benchmarks"][0]["rows"]
    assert row == {k: v for k, v in rec.items() if k != "benchmark"}
    assert row["line"] == 7
    assert row["evaluated"] == ADAPTER
    assert row["models"][BASE]["score"] == {"value": 0.5, "threshold": 1.0, "passed": False, "extracted": "x"}


def test_hash_and_domain_come_from_the_records_benchmark_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing is read from disk: the files do not exist, and the working directory is empty.
    monkeypatch.chdir(tmp_path)
    inside, outside = info("benchmarks/in.jsonl", "in"), info("benchmarks/out.jsonl", "out")
    doc = build([scored("r1", 0.0, 1.0, bench=inside), scored("r1", 1.0, 1.0, bench=outside)])
    entries = by_name(doc)
    assert entries["benchmarks/in.jsonl"]["benchmark_hash"] == inside["sha256"]
    assert entries["benchmarks/out.jsonl"]["benchmark_hash"] == outside["sha256"]
    assert entries["benchmarks/in.jsonl"]["domain"] == "in"
    assert entries["benchmarks/out.jsonl"]["domain"] == "out"
    assert not any(entry["gates"] for entry in entries.values())  # no gate was needed to know the domain

    base_only = build([scored("r1", 1.0, None, bench=info("b.jsonl", None))], meta=BASE_META)
    assert base_only["benchmarks"][0]["domain"] is None


def test_adapter_vs_base_document() -> None:
    doc = build([scored("r1", 0.0, 1.0), scored("r2", 1.0, 1.0)])
    assert doc["schema_version"] == SCHEMA_VERSION == 2
    assert doc["mode"] == "adapter_vs_base"
    assert doc["adapter_path"] == "adapters/demo"
    assert doc["adapter_name"] == "demo"
    assert doc["adapter_version"] == "1.0"
    assert doc["base_model"] == "tiny-base"
    assert doc["base_model_note"] == "a note"
    assert doc["quantization"] is None
    assert doc["hardware"] == "cpu (x86_64, 2 cores), Linux-6.1-x86_64, torch 2.3.0"
    assert doc["hardware_detail"] == HARDWARE
    assert doc["timestamp"] == "2024-05-06T07:08:09Z"
    assert doc["complete"] is True
    assert doc["incomplete_reason"] is None
    assert doc["current_version"] == {"version": "1.0", "adapter_score": 1.0, "base_model_score": 0.5}
    assert doc["previous_version"] is None
    assert json.loads(json.dumps(doc)) == doc


def test_base_only_document_has_null_adapter_fields() -> None:
    recs = [
        scored("r1", 1.0, None, bench=A_BASE_ONLY),
        scored("r2", 0.0, None, bench=A_BASE_ONLY, difficulty="hard"),
    ]
    doc = build(recs, meta=BASE_META)
    assert doc["mode"] == "base_only"
    assert doc["adapter_path"] is None
    assert doc["adapter_name"] is None and doc["adapter_version"] is None  # missing from meta: null
    assert doc["benchmark_file"] == "a.jsonl"
    assert doc["top_level"]["reason"].startswith("base-only run")
    res = doc["results"]
    assert res["base_model_score"] == pytest.approx(0.5)
    assert res["adapter_score"] is None
    assert res["improvement_absolute"] is None and res["improvement_relative"] is None
    assert all(per["adapter"] is None for per in res["per_difficulty"].values())
    assert doc["out_of_domain"] is None
    assert doc["current_version"] == {"version": None, "adapter_score": None, "base_model_score": 0.5}
    assert doc["benchmarks"][0]["statistics"] is None  # nothing to compare
    assert all(set(r["models"]) == {BASE} and r["evaluated"] == BASE for r in doc["benchmarks"][0]["rows"])
    # No model was loaded (no hardware in meta): still the string the standard asks for.
    assert isinstance(doc["hardware"], str) and doc["hardware"]


def test_the_schema_check_lists_every_violation() -> None:
    doc = build([scored("r1", 0.0, 1.0)])
    broken = {**doc, "hardware": HARDWARE, "timestamp": "2024-05-06T07:08:09+00:00"}
    del broken["out_of_domain"]
    with pytest.raises(AssertionError) as raised:
        validate_locollm(broken)
    message = str(raised.value)
    assert message.startswith("3 LocoLLM schema violation(s)")
    assert "hardware:" in message and "timestamp:" in message and "'out_of_domain' is a required" in message


def test_no_rows_means_base_only_and_no_benchmark() -> None:
    # No benchmark to describe: this document cannot be the standard's, so it is not validated.
    doc = build_results([], meta={}, complete=True, timestamp=WHEN)
    assert doc["mode"] == "base_only"
    assert doc["benchmarks"] == []
    assert doc["benchmark_file"] is None and doc["results"] is None
    assert doc["top_level"] == {"benchmark": None, "reason": "no benchmark row was recorded"}


def test_incomplete_run_keeps_its_reason() -> None:
    recs = [scored("r1", 0.0, 1.0)]
    doc = build(recs, complete=False, incomplete_reason="3 of 10 rows ran")
    assert (doc["complete"], doc["incomplete_reason"]) == (False, "3 of 10 rows ran")
    doc = build(recs, complete=True, incomplete_reason="ignored")
    assert (doc["complete"], doc["incomplete_reason"]) == (True, None)


def test_build_results_accepts_a_generator() -> None:
    recs = sample_records()
    doc = build(iter(recs))
    assert doc["benchmarks"][0]["n_examples"] == len(recs)


# ---------------------------------------------------------------------------------------------------------
# the top level: the LocoLLM document of the adapter's in-domain benchmark

_TOP_KEYS = ("benchmark_file", "benchmark_hash", "n_examples", "evaluation_type", "results")


def test_top_level_is_the_in_domain_benchmark() -> None:
    # The out-of-domain file comes first by name: the in-domain one is chosen all the same.
    general, domain = info("a-general.jsonl", "out"), info("b-domain.jsonl", "in")
    recs = [
        scored("r1", 1.0, 0.5, bench=general),
        scored("r2", 1.0, 1.0, bench=general),
        scored("q1", 0.0, 1.0, bench=domain, evaluation_type="fuzzy"),
    ]
    doc = build(recs)
    chosen = by_name(doc)["b-domain.jsonl"]
    assert {k: doc[k] for k in _TOP_KEYS} == {k: chosen[k] for k in _TOP_KEYS}
    assert (doc["benchmark_file"], doc["benchmark_hash"]) == ("b-domain.jsonl", domain["sha256"])
    assert (doc["n_examples"], doc["evaluation_type"]) == (1, "fuzzy")
    assert doc["top_level"] == {"benchmark": "b-domain.jsonl", "reason": "the adapter's in-domain benchmark"}
    assert doc["current_version"] == {"version": "1.0", "adapter_score": 1.0, "base_model_score": 0.0}


def test_top_level_says_when_there_are_more_in_domain_benchmarks() -> None:
    recs = [
        scored("r1", 0.0, 1.0, bench=info("x.jsonl", "in")),
        scored("r1", 1.0, 1.0, bench=info("y.jsonl", "in")),
    ]
    doc = build(recs)
    assert doc["benchmark_file"] == "x.jsonl"
    assert (
        doc["top_level"]["reason"] == "the adapter's in-domain benchmark (1 more in-domain: see benchmarks)"
    )


def test_top_level_without_an_in_domain_benchmark_is_the_first_by_name() -> None:
    recs = [
        scored("r1", 0.0, 1.0, bench=info("b.jsonl", "out")),
        scored("r1", 1.0, 0.5, bench=info("a.jsonl", "out"), evaluation_type="rouge"),
    ]
    doc = build(recs)
    first = by_name(doc)["a.jsonl"]
    assert {k: doc[k] for k in _TOP_KEYS} == {k: first[k] for k in _TOP_KEYS}
    assert doc["top_level"]["benchmark"] == "a.jsonl"
    reason = doc["top_level"]["reason"]
    assert reason.startswith(
        "no in-domain benchmark ran: the top level describes a.jsonl, the first benchmark"
    )
    assert "--llmeval-domain" in reason  # and says how to mark one


# ---------------------------------------------------------------------------------------------------------
# out_of_domain: the most degraded out-of-domain benchmark, in the standard's sign (adapter - base)


def test_out_of_domain_reproduces_the_standards_example() -> None:
    # The standard's example: adapter 0.44, base 0.45, degradation -0.01.
    general = info("general.jsonl", "out")
    recs = [
        scored("q1", 0.0, 1.0),
        scored("r1", 0.5, 0.48, bench=general),
        scored("r2", 0.4, 0.40, bench=general),
    ]
    doc = build(recs)
    figure = doc["out_of_domain"]
    assert figure == {
        "benchmark": "general.jsonl",
        "adapter_score": pytest.approx(0.44),
        "base_model_score": pytest.approx(0.45),
        "degradation": pytest.approx(-0.01),
        "measure": SCORE_MEASURE,
        "n_rows": 2,
        "verdict": None,  # no gate ran
    }
    assert by_name(doc)["general.jsonl"]["out_of_domain"] == figure
    assert "out_of_domain" not in by_name(doc)["a.jsonl"]  # in-domain: no such figure


def test_out_of_domain_is_null_without_an_out_of_domain_benchmark() -> None:
    assert build([scored("r1", 0.0, 1.0)])["out_of_domain"] is None


def _two_out_of_domain(verdicts: Mapping[str, str | None]) -> dict[str, Any]:
    """big.jsonl drops 0.30, small.jsonl 0.05, better.jsonl gains 0.20; each with its verdict (if any)."""
    drops = {"big.jsonl": 0.30, "small.jsonl": 0.05, "better.jsonl": -0.20}
    recs, gate_records = [scored("q1", 0.0, 1.0)], []
    for name, drop in drops.items():
        bench = info(name, "out")
        recs += [scored("r1", 0.5, 0.5 - drop, bench=bench), scored("r2", 0.6, 0.6 - drop, bench=bench)]
        if verdicts.get(name) is not None:
            verdict = gates.Verdict("no_degradation", str(verdicts[name]), f"drop {drop}", {"drop": drop})
            gate_records.append(gate_record(bench, verdict.to_json()))
    return build(recs, gates=gate_records)


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ({}, "big.jsonl"),  # no gate: the largest drop
        ({"big.jsonl": "pass", "small.jsonl": "pass", "better.jsonl": "pass"}, "big.jsonl"),
        (
            {"big.jsonl": "warn", "small.jsonl": "fail", "better.jsonl": "pass"},
            "small.jsonl",
        ),  # verdict first
        ({"big.jsonl": "pass", "small.jsonl": "pass", "better.jsonl": "warn"}, "better.jsonl"),
        ({"big.jsonl": "skip", "small.jsonl": "pass"}, "small.jsonl"),
    ],
)
def test_out_of_domain_is_the_worst_verdict_then_the_largest_drop(
    verdicts: Mapping[str, str | None], expected: str
) -> None:
    doc = _two_out_of_domain(verdicts)
    figure = doc["out_of_domain"]
    assert figure["benchmark"] == expected
    assert figure == by_name(doc)[expected]["out_of_domain"]
    assert figure["verdict"] == verdicts.get(expected)
    drop = {"big.jsonl": 0.30, "small.jsonl": 0.05, "better.jsonl": -0.20}[expected]
    assert figure["degradation"] == pytest.approx(-drop)


def test_out_of_domain_of_a_perplexity_benchmark_is_in_negative_cross_entropy() -> None:
    texts = info("wiki.jsonl", "out")
    recs = [
        scored("q1", 0.0, 1.0),
        ppl_row("t1", 1.0, 1.1, bench=texts),
        ppl_row("t2", 1.2, 1.3, bench=texts),
    ]
    doc = build(recs)
    figure = doc["out_of_domain"]
    assert figure["benchmark"] == "wiki.jsonl"
    assert figure["measure"] == CROSS_ENTROPY_MEASURE
    assert "nats per token" in figure["measure"]
    # Not the rows' pass/fail scores (all 1.0): each text's -cross-entropy, so the drop shows.
    assert figure["adapter_score"] == pytest.approx(-1.2)
    assert figure["base_model_score"] == pytest.approx(-1.1)
    assert figure["degradation"] == pytest.approx(-0.1)
    entry = by_name(doc)["wiki.jsonl"]
    assert entry["statistics"]["measure"] == CROSS_ENTROPY_MEASURE
    assert entry["statistics"]["difference"] == pytest.approx(-0.1)
    assert entry["perplexity"]["cross_entropy_difference"] == pytest.approx(0.1)


def test_a_benchmark_of_perplexity_rows_only_validates() -> None:
    texts = info("wiki.jsonl", "in")
    doc = build([ppl_row("t1", 1.0, 0.9, bench=texts), ppl_row("t2", 2.0, 1.9, bench=texts)])
    assert doc["benchmark_file"] == "wiki.jsonl" and doc["evaluation_type"] == "perplexity"
    assert doc["benchmarks"][0]["perplexity"]["base"]["perplexity"] == pytest.approx(math.exp(1.5))
    base_only = info("wiki.jsonl", None)
    build([ppl_row("t1", 1.0, None, bench=base_only)], meta=BASE_META)


# ---------------------------------------------------------------------------------------------------------
# timestamp, hardware, inference_config, versions


def test_timestamp_is_utc_with_a_z_even_for_another_time_zone() -> None:
    two_hours_east = datetime(2024, 5, 6, 9, 8, 9, tzinfo=timezone(timedelta(hours=2)))
    doc = build([scored("r1", 0.0, 1.0)], timestamp=two_hours_east)
    assert doc["timestamp"] == "2024-05-06T07:08:09Z"


def test_default_timestamp_is_now_in_utc() -> None:
    before = datetime.now(timezone.utc).replace(microsecond=0)
    doc = build([scored("r1", 0.0, 1.0)], timestamp=None)
    assert doc["timestamp"].endswith("Z")
    stamp = datetime.strptime(doc["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= stamp <= datetime.now(timezone.utc)


def test_inference_config_starts_with_the_standards_three_settings() -> None:
    doc = build([scored("r1", 0.0, 1.0)])
    config = doc["inference_config"]
    assert list(config)[:3] == ["temperature", "max_tokens", "top_p"]
    assert (config["temperature"], config["max_tokens"], config["top_p"]) == (0.0, 64, 1.0)
    assert list(config)[3:] == list(ADAPTER_META["inference_config"])  # then everything else, as it was
    assert config["batch_size"] == 4
    # Without decoding settings in meta: greedy, and the default budget.
    config = build([scored("r1", 1.0, None, bench=A_BASE_ONLY)], meta=BASE_META)["inference_config"]
    assert config == {"temperature": 0.0, "max_tokens": 512, "top_p": 1.0, "batch_size": 4}


def test_hardware_is_a_string_without_a_loaded_model() -> None:
    doc = build([scored("r1", 1.0, None, bench=A_BASE_ONLY)], meta=BASE_META)
    assert doc["hardware"] == "unknown (no model was loaded in this run)"
    assert doc["hardware_detail"] == {}


def _previous_run(version: str, base: float, adapter: float) -> dict[str, Any]:
    meta = {**ADAPTER_META, "adapter_version": version}
    return build([scored("r1", base, adapter), scored("r2", base, adapter)], meta=meta)


def test_previous_and_current_versions() -> None:
    previous = _previous_run("0.9", 0.0, 0.5)
    doc = build([scored("r1", 0.0, 1.0), scored("r2", 0.0, 1.0)], previous=previous)
    assert doc["previous_version"] == {"version": "0.9", "adapter_score": 0.5, "base_model_score": 0.0}
    assert doc["current_version"] == {"version": "1.0", "adapter_score": 1.0, "base_model_score": 0.0}
    block = doc["benchmarks"][0]["comparison_with_previous"]
    assert (block["previous_version"], block["comparable"], block["reason"]) == ("0.9", True, None)
    assert block["statistics"]["difference"] == pytest.approx(0.5)


def test_previous_results_without_this_benchmark_give_no_previous_version() -> None:
    previous = build([scored("r1", 0.0, 1.0, bench=info("other.jsonl", "in"))])
    doc = build([scored("r1", 0.0, 1.0)], previous=previous)
    assert doc["previous_version"] is None
    assert doc["benchmarks"][0]["comparison_with_previous"]["statistics"] is None


def test_previous_results_of_schema_version_1_are_not_comparable() -> None:
    previous = {  # the shape schema_version 1 wrote: `base`/`adapter` on each row, current_version a string
        "schema_version": 1,
        "adapter_version": "0.9",
        "current_version": "0.9",
        "benchmarks": [
            {
                "benchmark_file": "a.jsonl",
                "benchmark_hash": A_IN["sha256"],
                "results": {"adapter_score": 0.5, "base_model_score": 0.0},
                "rows": [
                    {"id": "r1", "base": {"score": {"value": 0.0}}, "adapter": {"score": {"value": 0.5}}},
                ],
            }
        ],
    }
    doc = build([scored("r1", 0.0, 1.0)], previous=previous)
    block = doc["benchmarks"][0]["comparison_with_previous"]
    assert block["comparable"] is False
    assert block["previous_version"] == "0.9"
    assert block["statistics"] is None
    assert "schema_version 1" in block["reason"] and f"writes {SCHEMA_VERSION}" in block["reason"]


def test_previous_results_of_a_changed_file_are_not_comparable() -> None:
    previous = _previous_run("0.9", 0.0, 0.5)
    changed: BenchmarkInfo = {**A_IN, "sha256": "sha256:" + "0" * 64}
    doc = build([scored("r1", 0.0, 1.0, bench=changed)], previous=previous)
    block = doc["benchmarks"][0]["comparison_with_previous"]
    assert block["comparable"] is False and "a.jsonl changed since the previous results" in block["reason"]


# ---------------------------------------------------------------------------------------------------------
# statistics: computed once (by the gate that decided on them, else here)

PAIRS = [(0.0, 1.0), (0.0, 1.0), (1.0, 1.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0)]  # (base, adapter)


def _rows() -> list[RowRecord]:
    return [scored(f"r{i}", b, a) for i, (b, a) in enumerate(PAIRS)]


def _gate(name: str, cmp: Any, measure: str = SCORE_MEASURE) -> GateRecord:
    verdict = gates.better_than_base(cmp) if name == "better_than_base" else gates.no_degradation(cmp)
    return gate_record(A_IN, verdict.to_json(), comparison_blocks(cmp, measure))


def test_without_a_gate_the_statistics_are_computed_from_the_rows() -> None:
    entry = build(_rows(), alpha=0.1)["benchmarks"][0]
    cmp = compare_paired([a for _, a in PAIRS], [b for b, _ in PAIRS], alpha=0.1)
    expected = comparison_blocks(cmp, SCORE_MEASURE)
    # The run's only comparison: its own family, in which Holm leaves its p as it is.
    expected["significance_test"].update(
        p_value_adjusted=cmp.p_value, adjustment="holm", family="reported", family_size=1
    )
    assert {k: entry[k] for k in ("statistics", "significance_test")} == expected
    assert entry["statistics"]["alpha"] == 0.1 and entry["statistics"]["n"] == len(PAIRS)


def test_a_gates_statistics_are_the_benchmarks() -> None:
    # Statistics the rows would not give (other scores, another alpha, another measure name): if the
    # document recomputed them, they would differ.
    cmp = compare_paired([0.75, 0.5, 0.5], [0.25, 0.5, 0.75], alpha=0.2)
    gate = _gate("better_than_base", cmp, measure="the gate's measure")
    entry = build(_rows(), gates=[gate])["benchmarks"][0]
    assert entry["statistics"] == {"measure": "the gate's measure", **cmp.to_json()}
    assert entry["significance_test"] == cmp.significance_report()
    assert entry["statistics"] != build(_rows())["benchmarks"][0]["statistics"]
    # The gate's entry keeps its verdict only: its statistics are the benchmark's, kept once.
    assert entry["gates"] == {
        "better_than_base": {k: v for k, v in gate.items() if k not in ("benchmark", "statistics")}
    }


def test_gates_without_statistics_leave_them_to_be_computed() -> None:
    size = gate_record(A_IN, gates.size(len(PAIRS)).to_json())
    skipped = gate_record(A_IN, gates.better_than_base(None).to_json(), None)
    entry = build(_rows(), gates=[size, skipped])["benchmarks"][0]
    assert entry["statistics"] == build(_rows())["benchmarks"][0]["statistics"]
    assert set(entry["gates"]) == {"size", "better_than_base"}
    assert entry["gates"]["better_than_base"]["status"] == "skip"


def test_a_no_regression_gate_lends_its_comparison_with_previous_not_statistics() -> None:
    previous = _previous_run("0.9", 0.0, 0.5)
    # What the gate decided on (made up here, so that a recomputed block would differ).
    block = {
        "previous_version": "0.9",
        "comparable": False,
        "reason": "the gate's reason",
        "statistics": None,
    }
    verdict = gates.no_regression(None, previous_version="0.9", comparable=False, reason="the gate's reason")
    gate = gate_record(A_IN, verdict.to_json(), {"comparison_with_previous": block})
    entry = build(_rows(), gates=[gate], previous=previous)["benchmarks"][0]
    assert entry["comparison_with_previous"] == block
    # The benchmark's statistics are still the adapter against the base, computed from the rows.
    assert entry["statistics"] == build(_rows())["benchmarks"][0]["statistics"]


def test_a_gate_of_another_benchmark_does_not_lend_its_statistics() -> None:
    other = info("other.jsonl", "in")
    cmp = compare_paired([0.75, 0.5, 0.5], [0.25, 0.5, 0.75])
    gate = gate_record(other, gates.better_than_base(cmp).to_json(), comparison_blocks(cmp, SCORE_MEASURE))
    doc = build([*_rows(), scored("r1", 0.0, 1.0, bench=other)], gates=[gate])
    assert by_name(doc)["a.jsonl"]["statistics"] == build(_rows())["benchmarks"][0]["statistics"]
    assert by_name(doc)["a.jsonl"]["gates"] == {}
    assert by_name(doc)["other.jsonl"]["statistics"]["n"] == 3


# ---------------------------------------------------------------------------------------------------------
# composite and fluency

BASE_OUT_CE, ADAPTER_OUT_CE, REFERENCE_CE = math.log(60.0), math.log(30.0), math.log(20.0)


def _fluent_row(row_id: str, base: float, adapter: float, evaluation_type: str) -> RowRecord:
    return scored(
        row_id,
        base,
        adapter,
        evaluation_type=evaluation_type,
        fluency={
            BASE: fluent("tiny-base", BASE_OUT_CE, REFERENCE_CE),
            ADAPTER: fluent("tiny-base+adapter", ADAPTER_OUT_CE, REFERENCE_CE),
        },
    )


def test_composite_of_perplexity_alone_is_not_reported() -> None:
    doc = build([_fluent_row("r1", 0.0, 1.0, "exact_match"), _fluent_row("r2", 1.0, 1.0, "exact_match")])
    for who in (BASE, ADAPTER):
        composite = doc["composite"][who]
        assert composite["value"] is None
        assert composite["present_weight"] == pytest.approx(0.10)
        assert composite["missing"] == ["multiple_choice", "bertscore", "rouge"]
        assert composite["reason"] == (
            "the metrics measured carry 10% of the weight, under 50%: "
            "missing multiple_choice, bertscore, rouge"
        )
    assert doc["composite"][ADAPTER]["metrics"]["perplexity"] == pytest.approx(perplexity_score(30.0))


def test_composite_at_half_the_weight_is_reported() -> None:
    # multiple_choice (40%) and the perplexity score (10%): 50%, enough.
    doc = build(
        [_fluent_row("r1", 0.0, 1.0, "multiple_choice"), _fluent_row("r2", 1.0, 1.0, "multiple_choice")]
    )
    expected = {BASE: (50.0, perplexity_score(60.0)), ADAPTER: (100.0, perplexity_score(30.0))}
    for who, (choice, fluency) in expected.items():
        composite = doc["composite"][who]
        assert composite["present_weight"] == pytest.approx(0.5)
        assert composite["reason"] is None
        assert composite["value"] == pytest.approx((0.4 * choice + 0.1 * fluency) / 0.5)
    assert doc["benchmarks"][0]["composite"] == doc["composite"]  # one benchmark: the same rows


def test_composite_at_exactly_half_the_weight_is_reported() -> None:
    # Weights whose shares are exact in binary: the 50% bound itself is enough.
    weights = {"multiple_choice": 1.0, "rouge": 1.0}
    recs = [scored("r1", 0.0, 1.0, evaluation_type="multiple_choice")]
    composite = build(recs, composite_weights=weights)["composite"]
    assert composite[ADAPTER]["present_weight"] == 0.5
    assert (composite[BASE]["value"], composite[ADAPTER]["value"]) == (0.0, 100.0)
    assert composite[ADAPTER]["weights"] == weights and composite[ADAPTER]["missing"] == ["rouge"]


def test_composite_perplexity_is_each_models_own_outputs_never_perplexity_rows() -> None:
    texts = info("texts.jsonl", "out")
    recs = [
        _fluent_row("r1", 1.0, 1.0, "multiple_choice"),
        # Reference texts the models find very easy (perplexity ~1): they must not enter the composite.
        ppl_row("t1", 0.01, 0.02, bench=texts),
        ppl_row("t2", 0.01, 0.02, bench=texts),
    ]
    doc = build(recs)
    assert doc["composite"][BASE]["metrics"]["perplexity"] == pytest.approx(perplexity_score(60.0))
    assert doc["composite"][ADAPTER]["metrics"]["perplexity"] == pytest.approx(perplexity_score(30.0))
    # A benchmark of perplexity rows alone has no composite: no output was generated there.
    assert "composite" not in by_name(doc)["texts.jsonl"]


def test_no_weighted_metric_gives_no_composite() -> None:
    doc = build([scored("r1", 0.0, 1.0)])
    assert doc["composite"] is None
    assert "composite" not in doc["benchmarks"][0]


def test_fluency_summary_per_model_beside_the_reference() -> None:
    doc = build([_fluent_row("r1", 0.0, 1.0, "exact_match"), _fluent_row("r2", 1.0, 1.0, "exact_match")])
    fluency = doc["benchmarks"][0]["fluency"]
    assert set(fluency) == {BASE, ADAPTER}
    for who, scorer, ppl in ((BASE, "tiny-base", 60.0), (ADAPTER, "tiny-base+adapter", 30.0)):
        entry = fluency[who]
        assert entry["scorer"] == scorer
        assert entry["output"]["perplexity"] == pytest.approx(ppl)
        assert entry["output"]["n_texts"] == 2
        assert entry["reference"]["perplexity"] == pytest.approx(20.0)
        assert entry["ratio_to_reference"] == pytest.approx(ppl / 20.0)
        assert entry["cross_entropy_difference"] == pytest.approx(math.log(ppl / 20.0))
        assert entry["perplexity_score"] == pytest.approx(perplexity_score(ppl))
        assert entry["n_empty_outputs"] == 0


# ---------------------------------------------------------------------------------------------------------
# properties: means match a plain reference; output does not depend on record order

_score = st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 1, allow_nan=False)
_DOMAINS: dict[str, Domain] = {"a.jsonl": "in", "b.jsonl": "out", "sub/c.jsonl": "out"}


@st.composite
def _records(draw: st.DrawFn, *, with_adapter: bool = True) -> list[RowRecord]:
    files = st.sampled_from(sorted(_DOMAINS))
    ids = st.text("abcxyz0189", min_size=1, max_size=4)
    pairs = draw(st.lists(st.tuples(files, ids), max_size=12, unique=True))
    out = []
    for i, (file, row_id) in enumerate(pairs):
        bench = info(file, _DOMAINS[file] if with_adapter else None)
        difficulty = draw(st.sampled_from(DIFFICULTIES))
        evaluation_type = draw(st.sampled_from(["exact_match", "other"]))
        if draw(st.integers(0, 5)) == 0:
            out.append(
                errored(
                    row_id,
                    bench=bench,
                    with_adapter=with_adapter,
                    difficulty=difficulty,
                    evaluation_type=evaluation_type,
                    line=i + 1,
                )
            )
            continue
        out.append(
            scored(
                row_id,
                draw(_score),
                draw(_score) if with_adapter else None,
                bench=bench,
                difficulty=difficulty,
                evaluation_type=evaluation_type,
                threshold=draw(st.sampled_from([0.5, 1.0])),
                line=i + 1,
            )
        )
    return out


def _side_scores(records: Sequence[Mapping[str, Any]], who: str) -> list[float]:
    """Plain reading of the rows, independent of records.py's accessors."""
    return [
        float(r["models"][who]["score"]["value"])
        for r in records
        if who in r["models"] and r["models"][who]["score"] is not None
    ]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), with_adapter=st.booleans())
def test_property_summarize_matches_a_plain_reference(data: st.DataObject, with_adapter: bool) -> None:
    recs = data.draw(_records(with_adapter=with_adapter))
    res = summarize(recs)
    base = fmean_or_none(_side_scores(recs, BASE))
    adapter = fmean_or_none(_side_scores(recs, ADAPTER))
    assert res["base_model_score"] == approx_or_none(base)
    assert res["adapter_score"] == approx_or_none(adapter)
    absolute = None if base is None or adapter is None else adapter - base
    assert res["improvement_absolute"] == approx_or_none(absolute)
    if absolute is None or base == 0:
        assert res["improvement_relative"] is None
    else:
        assert base is not None
        assert math.isclose(res["improvement_relative"], absolute / base, rel_tol=1e-9, abs_tol=1e-9)
    for d in DIFFICULTIES:
        rows = [r for r in recs if r["difficulty"] == d]
        assert res["per_difficulty"][d]["n"] == sum(1 for r in rows if evaluated_value(r) is not None)
        assert res["per_difficulty"][d]["n_errors"] == sum(1 for r in rows if r["error"])
        assert res["per_difficulty"][d]["base"] == approx_or_none(fmean_or_none(_side_scores(rows, BASE)))
        assert res["per_difficulty"][d]["adapter"] == approx_or_none(
            fmean_or_none(_side_scores(rows, ADAPTER))
        )
    assert res["n_errors"] == sum(1 for r in recs if r["error"])
    assert res["n_passed"] == sum(1 for r in recs if r["passed"])


@settings(max_examples=40, deadline=None)
@given(data=st.data(), with_adapter=st.booleans())
def test_property_results_do_not_depend_on_record_order(data: st.DataObject, with_adapter: bool) -> None:
    recs = data.draw(_records(with_adapter=with_adapter))
    shuffled = data.draw(st.permutations(recs))
    meta = ADAPTER_META if with_adapter else BASE_META
    one = build_results(recs, meta=meta, complete=True, timestamp=WHEN)
    two = build_results(shuffled, meta=meta, complete=True, timestamp=WHEN)
    # Byte-identical JSON: the same floats summed in the same order, the same key order.
    assert json.dumps(one) == json.dumps(two)
    for bench in one["benchmarks"]:
        nodeids = [r["nodeid"] for r in bench["rows"]]
        assert nodeids == sorted(nodeids)
    assert sum(b["n_examples"] for b in one["benchmarks"]) == len(recs)
    files = {r["benchmark"]["name"] for r in recs}
    if files and all(_side_scores([r for r in recs if r["benchmark"]["name"] == f], BASE) for f in files):
        # Every benchmark has a base score, so whichever the top level describes, the document is the
        # standard's. (An in-domain benchmark whose every row errored is still the one described: the
        # standard's base_model_score is then null, which its schema does not allow.)
        validate_locollm(one)


# ---------------------------------------------------------------------------------------------------------
# write_atomic


def test_write_atomic_writes_valid_json_and_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "out" / "deeper" / "results.json"  # parents are created
    doc = {"a": [1, 2.5, None], "text": "Größe 日本語", "nested": {"ok": True}}
    write_atomic(target, doc)
    assert json.loads(target.read_text(encoding="utf-8")) == doc
    assert "Größe 日本語" in target.read_text(encoding="utf-8")  # written as UTF-8, not \u escapes
    assert target.read_bytes().endswith(b"}\n")
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]


def test_write_atomic_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    target.write_text("old, not even JSON, and much longer than the new document " * 10)
    write_atomic(target, {"new": 1})
    assert json.loads(target.read_text()) == {"new": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_write_atomic_failure_keeps_the_old_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    write_atomic(target, {"old": 1})
    with pytest.raises(TypeError):
        write_atomic(target, {"bad": object()})  # not JSON-serialisable, fails halfway through the dump
    assert json.loads(target.read_text()) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_whole_document_round_trips_through_write_atomic(tmp_path: Path) -> None:
    doc = build(sample_records())
    target = tmp_path / "results.json"
    write_atomic(target, doc)
    assert json.loads(target.read_text(encoding="utf-8")) == doc


# ---------------------------------------------------------------------------------------------------------
# corpus BLEU and chrF: pooled per group of metric settings, beside the sentence mean

SENTENCES = [  # (expected, base output, adapter output)
    ("the cat sat on the mat", "a cat sat on a mat", "the cat sat on the mat"),
    ("Dogs bark at night", "dogs bark at noon", "dogs bark at night"),
    ("it rains in Spain", "it rains in France", "rain in Spain"),
]


def text_row(
    row_id: str,
    evaluation_type: str,
    config: Mapping[str, Any],
    sentence: tuple[str, str, str],
    *,
    with_adapter: bool = True,
) -> RowRecord:
    """A bleu or chrf row scored by the real scorer, with its own reference and evaluation_config."""
    expected, base_output, adapter_output = sentence
    scorer = bleu.score_bleu if evaluation_type == "bleu" else bleu.score_chrf
    models: dict[str, SideRecord] = {
        BASE: {"output": base_output, "score": scorer(base_output, expected, config).to_json()}
    }
    if with_adapter:
        models[ADAPTER] = {
            "output": adapter_output,
            "score": scorer(adapter_output, expected, config).to_json(),
        }
    bench = A_IN if with_adapter else A_BASE_ONLY
    return row_record(
        nodeid=f"{bench['name']}::{row_id}",
        benchmark=bench,
        case=Case(
            id=row_id,
            instruction="Translate.",
            input="",
            expected_output=expected,
            evaluation_type=evaluation_type,
            difficulty="easy",
            line=1,
            evaluation_config=dict(config),
            tags=(),
        ),
        evaluated=ADAPTER if with_adapter else BASE,
        models=models,
    )


def test_corpus_bleu_and_chrf_pool_their_rows_per_kind_beside_the_sentence_mean() -> None:
    # The same settings written in another key order, with another threshold and budget: one group.
    first = {"threshold": 0.2, "tokenize": "char", "lowercase": True}
    second = {"lowercase": True, "tokenize": "char", "threshold": 0.9, "max_new_tokens": 8}
    chrf_config = {"word_order": 2, "threshold": 0.5}
    recs = [
        text_row("b1", "bleu", first, SENTENCES[0]),
        text_row("b2", "bleu", second, SENTENCES[1]),
        text_row("c1", "chrf", chrf_config, SENTENCES[2]),
        scored("x1", 1.0, 1.0),  # not a bleu or chrf row: no part of any corpus value
    ]
    corpus = build(recs)["benchmarks"][0]["corpus"]

    settings = {"lowercase": True, "tokenize": "char"}  # what changes the metric, nothing else
    references = [s[0] for s in SENTENCES[:2]]
    assert corpus == {
        "bleu": {
            "settings": settings,
            BASE: bleu.corpus_score("bleu", [s[1] for s in SENTENCES[:2]], references, settings),
            ADAPTER: bleu.corpus_score("bleu", [s[2] for s in SENTENCES[:2]], references, settings),
        },
        "chrf": {
            "settings": {"word_order": 2},
            BASE: bleu.corpus_score("chrf", [SENTENCES[2][1]], [SENTENCES[2][0]], {"word_order": 2}),
            ADAPTER: bleu.corpus_score("chrf", [SENTENCES[2][2]], [SENTENCES[2][0]], {"word_order": 2}),
        },
    }
    assert corpus["bleu"][ADAPTER]["rows"] == 2 and corpus["bleu"][ADAPTER]["tokenize"] == "char"
    assert corpus["bleu"][ADAPTER]["corpus"] == 1.0 > corpus["bleu"][BASE]["corpus"]


def test_corpus_values_of_rows_with_other_metric_settings_are_named_by_their_settings() -> None:
    recs = [
        text_row("b1", "bleu", {"tokenize": "char"}, SENTENCES[0]),
        text_row("b2", "bleu", {"tokenize": "char", "threshold": 0.1}, SENTENCES[1]),
        text_row("b3", "bleu", {"tokenize": "13a"}, SENTENCES[2]),
        text_row("c1", "chrf", {}, SENTENCES[2]),
    ]
    corpus = build(recs)["benchmarks"][0]["corpus"]
    assert list(corpus) == ['bleu {"tokenize": "13a"}', 'bleu {"tokenize": "char"}', "chrf"]
    char = corpus['bleu {"tokenize": "char"}']
    assert char["settings"] == {"tokenize": "char"}
    assert char[ADAPTER]["rows"] == 2 and corpus['bleu {"tokenize": "13a"}'][ADAPTER]["rows"] == 1
    assert corpus["chrf"]["settings"] == {} and corpus["chrf"][BASE]["rows"] == 1


def test_a_base_only_corpus_has_no_adapter_value_and_skipped_rows_are_left_out() -> None:
    skipped = row_record(
        nodeid="a.jsonl::s",
        benchmark=A_BASE_ONLY,
        case=case("s", evaluation_type="bleu"),
        evaluated=BASE,
        skipped="sacrebleu is not installed",
    )
    recs = [text_row("b1", "bleu", {}, SENTENCES[0], with_adapter=False), skipped]
    corpus = build(recs, meta=BASE_META)["benchmarks"][0]["corpus"]
    assert corpus == {
        "bleu": {
            "settings": {},
            BASE: bleu.corpus_score("bleu", [SENTENCES[0][1]], [SENTENCES[0][0]], {}),
            ADAPTER: None,
        }
    }


def test_no_bleu_or_chrf_row_gives_no_corpus() -> None:
    assert "corpus" not in build([scored("r1", 0.0, 1.0)])["benchmarks"][0]


# ---------------------------------------------------------------------------------------------------------
# perplexity: corpus values, window settings, per script


def test_perplexity_summary_carries_every_corpus_value_and_the_window() -> None:
    texts = info("wiki.jsonl", "in")
    entry = build([ppl_row("t1", 1.0, 0.5, bench=texts), ppl_row("t2", 2.0, 1.5, bench=texts)])["benchmarks"][
        0
    ]
    ppl = entry["perplexity"]
    # Two texts of 10 tokens and 40 characters each: the base's NLL is 10 + 20 nats.
    assert ppl[BASE] == {
        "perplexity": pytest.approx(math.exp(1.5)),
        "cross_entropy": pytest.approx(1.5),
        "bits_per_token": pytest.approx(1.5 / math.log(2)),
        "bits_per_character": pytest.approx(30.0 / math.log(2) / 80),
        "n_texts": 2,
        "n_tokens": 20,
        "n_chars": 80,
        "mean_text_perplexity": pytest.approx((math.exp(1.0) + math.exp(2.0)) / 2),
        "band": "excellent",  # the adaptation document's label (§7.1): below 10
    }
    assert ppl[ADAPTER]["cross_entropy"] == pytest.approx(1.0)
    assert ppl["window"] == {"max_length": 1024, "stride": 512, "first_token": "scored after BOS"}
    assert ppl["perplexity_ratio"] == pytest.approx(math.exp(1.0 - 1.5))
    assert ppl["cross_entropy_difference"] == pytest.approx(-0.5)


def _text_with_scripts(cross_entropy: float, latin_chars: int, han_chars: int, chars: int) -> Score:
    """A perplexity row's score whose text is split by script (every script is listed, 0 characters too)."""
    nll = cross_entropy * 10
    measurement = {
        "perplexity": math.exp(cross_entropy),
        "cross_entropy": cross_entropy,
        "nll": nll,
        "n_tokens": 10,
        "n_chars": chars,
        "max_length": 1024,
        "stride": 512,
        "first_token": "scored after BOS",
        "scripts": {
            "latin": {"nll": nll, "n_chars": latin_chars},
            "han": {"nll": 0.0, "n_chars": han_chars},
        },
    }
    return perplexity_scorer.score_measurement(measurement, {"threshold": 1000.0})


def _perplexity_corpus(latin: int, han: int, chars: int) -> dict[str, Any]:
    """The base's perplexity block of one row of `chars` characters, `latin` and `han` of them by script."""
    row = scored(
        "t1",
        _text_with_scripts(1.0, latin, han, chars),
        _text_with_scripts(0.5, latin, han, chars),
        bench=info("wiki.jsonl", "in"),
        evaluation_type="perplexity",
        outputs=(None, None),
    )
    corpus: dict[str, Any] = build([row])["benchmarks"][0]["perplexity"][BASE]
    return corpus


def test_bits_per_character_by_script_is_none_for_a_script_without_characters() -> None:
    by_script = _perplexity_corpus(40, 0, 40)["bits_per_character_by_script"]
    # These measurements carry no top-1 hits (scripts measured without them): no accuracy either.
    assert by_script == {
        "latin": {
            "bits_per_character": pytest.approx(10.0 / math.log(2) / 40),
            "n_chars": 40,
            "top1_accuracy": None,
        },
        "han": {"bits_per_character": None, "n_chars": 0, "top1_accuracy": None},
    }


def test_bits_per_character_is_none_for_texts_without_characters() -> None:
    # Tokens scored but no character counted (a text of special tokens only): no division by zero.
    corpus = _perplexity_corpus(0, 0, 0)
    assert corpus["bits_per_character"] is None and corpus["n_chars"] == 0
    assert corpus["bits_per_token"] == pytest.approx(1.0 / math.log(2))


def test_a_perplexity_row_whose_adapter_failed_is_left_out_of_the_comparison() -> None:
    texts = info("wiki.jsonl", "out")
    failed = ppl_row("t3", 1.0, 1.0, bench=texts)
    failed["models"][ADAPTER]["score"] = None
    recs = [scored("q1", 0.0, 1.0), ppl_row("t1", 1.0, 1.1, bench=texts), failed]
    figure = build(recs)["out_of_domain"]
    assert figure["n_rows"] == 1 and figure["degradation"] == pytest.approx(-0.1)


def test_a_row_scored_for_one_model_only_is_left_out_of_the_statistics() -> None:
    # The base's scorer raised on r9, the adapter's did not: a pair needs both.
    one_sided = scored("r9", 0.0, 1.0)
    one_sided["models"][BASE]["score"] = None
    entry = build([*_rows(), one_sided])["benchmarks"][0]
    assert entry["statistics"] == build(_rows())["benchmarks"][0]["statistics"]
    assert entry["statistics"]["n"] == len(PAIRS)


def test_fluency_of_the_adapter_is_reported_when_the_base_has_none() -> None:
    row = scored("r1", 0.0, 1.0, fluency={ADAPTER: fluent("tiny-base+adapter", ADAPTER_OUT_CE, REFERENCE_CE)})
    fluency = build([row])["benchmarks"][0]["fluency"]
    assert list(fluency) == [ADAPTER]
    assert fluency[ADAPTER]["output"]["perplexity"] == pytest.approx(30.0)


# ---------------------------------------------------------------------------------------------------------
# composite: zero weights, the tolerance at the bound, a model with no metric


def test_a_zero_weight_metric_is_not_missing_from_the_composite() -> None:
    weights = {"multiple_choice": 1.0, "rouge": 0.0}
    composite = build([scored("r1", 0.0, 1.0, evaluation_type="multiple_choice")], composite_weights=weights)
    assert composite["composite"][ADAPTER]["missing"] == []
    assert composite["composite"][ADAPTER]["present_weight"] == 1.0
    assert composite["composite"][ADAPTER]["value"] == 100.0


def test_a_composite_without_any_positive_weight_has_no_share() -> None:
    result = composite_score({"rouge": 50.0}, {"rouge": 0.0})
    assert (result["value"], result["present_weight"], result["missing"]) == (None, 0.0, [])
    assert result["reason"] == "no metric of the composite was measured (missing: )"


def test_a_share_at_the_bound_less_its_rounding_tolerance_is_still_reported() -> None:
    # share = 0.5 - 1e-12 exactly (its two weights sum to exactly 1.0): the lowest share still reported.
    edge = COMPOSITE_MIN_WEIGHT - 1e-12
    weights = {"multiple_choice": edge, "rouge": 1.0 - edge}
    assert sum(weights.values()) == 1.0
    result = composite_score({"multiple_choice": 80.0, "rouge": None}, weights)
    assert result["present_weight"] == edge
    assert (result["value"], result["reason"]) == (80.0, None)


def test_a_model_without_any_metric_of_the_composite_says_so() -> None:
    # A base-only run: the adapter's composite has nothing to be made of.
    weights = {"multiple_choice": 1.0, "rouge": 1.0}
    recs = [scored("r1", 1.0, None, bench=A_BASE_ONLY, evaluation_type="multiple_choice")]
    composite = build(recs, meta=BASE_META, composite_weights=weights)["composite"]
    assert composite[BASE]["value"] == 100.0
    assert composite[ADAPTER]["value"] is None and composite[ADAPTER]["present_weight"] == 0.0
    assert composite[ADAPTER]["reason"] == (
        "no metric of the composite was measured (missing: multiple_choice, rouge)"
    )


# ---------------------------------------------------------------------------------------------------------
# comparison with the previous results: what the block says, and previous documents of other shapes


def test_the_comparison_with_previous_block_is_exactly_the_five_keys() -> None:
    previous = _previous_run("0.9", 0.0, 0.5)
    doc = build([scored("r1", 0.0, 1.0), scored("r2", 0.0, 1.0)], previous=previous, alpha=0.1)
    block = doc["benchmarks"][0]["comparison_with_previous"]
    cmp = compare_paired([1.0, 1.0], [0.5, 0.5], alpha=0.1)
    assert block == {
        "previous_version": "0.9",
        "comparable": True,
        "reason": None,
        "statistics": cmp.to_json(),
        "baseline": None,  # a document given as is: no history entry to name
    }
    assert block["statistics"]["alpha"] == 0.1


def test_a_changed_files_reason_names_both_hashes() -> None:
    previous = _previous_run("0.9", 0.0, 0.5)
    changed: BenchmarkInfo = {**A_IN, "sha256": "sha256:" + "0" * 64}
    block = build([scored("r1", 0.0, 1.0, bench=changed)], previous=previous)["benchmarks"][0][
        "comparison_with_previous"
    ]
    assert block["reason"] == (
        f"a.jsonl changed since the previous results ({A_IN['sha256']} -> {changed['sha256']})"
    )


def test_rows_that_errored_now_are_left_out_of_the_comparison_with_previous() -> None:
    previous = _previous_run("0.9", 0.0, 0.5)
    doc = build([scored("r1", 0.0, 1.0), errored("r2")], previous=previous)
    statistics = doc["benchmarks"][0]["comparison_with_previous"]["statistics"]
    assert statistics["n"] == 1 and statistics["difference"] == pytest.approx(0.5)


def test_a_previous_document_without_benchmarks_or_rows_is_read_as_having_none() -> None:
    for previous in (
        {"schema_version": SCHEMA_VERSION, "adapter_version": "0.9"},
        {
            "schema_version": SCHEMA_VERSION,
            "adapter_version": "0.9",
            "benchmarks": [{"benchmark_file": "a.jsonl", "benchmark_hash": A_IN["sha256"]}],
        },
    ):
        doc = build([scored("r1", 0.0, 1.0)], previous=previous)
        assert doc["previous_version"] is None
        assert doc["benchmarks"][0]["comparison_with_previous"] == {
            "previous_version": "0.9",
            "comparable": True,
            "reason": None,
            "statistics": None,
            "baseline": None,
        }


def test_the_previous_version_is_read_from_current_version_first() -> None:
    previous = _previous_run("0.9", 0.0, 0.5)
    del previous["adapter_version"]  # another tool's document: current_version only
    doc = build([scored("r1", 0.0, 1.0)], previous=previous)
    assert doc["previous_version"]["version"] == "0.9"
    assert doc["benchmarks"][0]["comparison_with_previous"]["previous_version"] == "0.9"


@pytest.mark.parametrize("schema_version", [SCHEMA_VERSION, 1])
def test_a_previous_run_without_a_version_has_a_null_version_not_the_string_none(schema_version: int) -> None:
    # A base-only previous run (schema 2: current_version.version null; schema 1: adapter_version null).
    previous: dict[str, Any] = {
        "schema_version": schema_version,
        "adapter_version": None,
        "current_version": {"version": None} if schema_version == SCHEMA_VERSION else None,
        "benchmarks": [],
    }
    doc = build([scored("r1", 0.0, 1.0)], previous=previous)
    assert doc["benchmarks"][0]["comparison_with_previous"]["previous_version"] is None


def test_a_run_without_rows_has_no_previous_version() -> None:
    doc = build_results([], meta={}, complete=True, timestamp=WHEN, previous=_previous_run("0.9", 0.0, 0.5))
    assert doc["previous_version"] is None


# ---------------------------------------------------------------------------------------------------------
# the top level when benchmarks have no score, and its reasons word for word

_RUN_DOMAIN_HINT = "(mark in-domain files with --llmeval-domain or metadata.json domain_benchmarks)"


def test_the_top_level_prefers_the_first_in_domain_benchmark_with_a_score() -> None:
    # a.jsonl and c.jsonl: every row errored (no base score); b.jsonl is scored.
    recs = [
        errored("r1", bench=info("a.jsonl", "in")),
        scored("r1", 0.0, 1.0, bench=info("b.jsonl", "in")),
        errored("r1", bench=info("c.jsonl", "in")),
    ]
    doc = build(recs)
    assert doc["top_level"] == {
        "benchmark": "b.jsonl",
        "reason": "the adapter's in-domain benchmark (2 more in-domain: see benchmarks)",
    }


def test_an_in_domain_benchmark_without_a_score_is_still_the_top_level() -> None:
    doc = build_results([errored("r1")], meta=ADAPTER_META, complete=True, timestamp=WHEN)
    assert doc["benchmark_file"] == "a.jsonl" and doc["results"]["base_model_score"] is None


def test_without_an_in_domain_benchmark_the_reason_names_the_first_scored_one() -> None:
    recs = [
        errored("r1", bench=info("a.jsonl", "out")),
        scored("r1", 1.0, 0.5, bench=info("b.jsonl", "out")),
    ]
    doc = build(recs)
    assert doc["top_level"] == {
        "benchmark": "b.jsonl",
        "reason": "no in-domain benchmark ran: the top level describes b.jsonl, "
        f"the first benchmark by name with a score {_RUN_DOMAIN_HINT}",
    }


def test_without_an_in_domain_benchmark_or_any_score_the_top_level_is_the_first_by_name() -> None:
    recs = [errored("r1", bench=info("b.jsonl", "out")), errored("r1", bench=info("a.jsonl", "out"))]
    doc = build_results(recs, meta=ADAPTER_META, complete=True, timestamp=WHEN)
    assert doc["top_level"] == {
        "benchmark": "a.jsonl",
        "reason": "no in-domain benchmark ran: the top level describes a.jsonl, "
        f"the first benchmark by name {_RUN_DOMAIN_HINT}",
    }


def test_base_only_reasons_say_whether_the_top_level_has_a_score() -> None:
    unscored, good = info("a.jsonl", None), info("b.jsonl", None)
    recs = [errored("r1", bench=unscored, with_adapter=False), scored("r1", 1.0, None, bench=good)]
    doc = build(recs, meta=BASE_META)
    assert doc["top_level"] == {
        "benchmark": "b.jsonl",
        "reason": "base-only run: the top level describes b.jsonl, the first benchmark by name with a score",
    }
    doc = build_results(recs[:1], meta=BASE_META, complete=True, timestamp=WHEN)
    assert doc["top_level"] == {
        "benchmark": "a.jsonl",
        "reason": "base-only run: the top level describes a.jsonl, the first benchmark by name",
    }


# ---------------------------------------------------------------------------------------------------------
# what meta says, as the document says it


def test_quantization_is_reported_as_given() -> None:
    doc = build([scored("r1", 0.0, 1.0)], meta={**ADAPTER_META, "quantization": "4bit"})
    assert doc["quantization"] == "4bit"


def test_a_base_only_benchmark_has_null_statistics_and_significance_test() -> None:
    entry = build([scored("r1", 1.0, None, bench=A_BASE_ONLY)], meta=BASE_META)["benchmarks"][0]
    assert (entry["statistics"], entry["significance_test"]) == (None, None)
    assert "significance_test" in entry


def test_timestamp_is_utc_whatever_the_machines_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    two_hours_east = datetime(2024, 5, 6, 9, 8, 9, tzinfo=timezone(timedelta(hours=2)))
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30, no daylight saving time
    time.tzset()
    try:
        doc = build([scored("r1", 0.0, 1.0)], timestamp=two_hours_east)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert doc["timestamp"] == "2024-05-06T07:08:09Z"


@pytest.mark.parametrize(
    ("hardware", "line"),
    [
        ({"device": "cpu"}, "cpu"),
        ({"device": "cuda", "device_name": "NVIDIA H100"}, "cuda (NVIDIA H100)"),
        ({"cpu_count": 2}, "unknown device (2 cores)"),
        (
            {"device": "cpu", "cpu_count": 2, "torch": "2.3.0", "transformers": "4.40.0"},
            "cpu (2 cores), torch 2.3.0, transformers 4.40.0",
        ),
    ],
)
def test_hardware_line_names_only_what_is_known(hardware: dict[str, Any], line: str) -> None:
    doc = build([scored("r1", 0.0, 1.0)], meta={**ADAPTER_META, "hardware": hardware})
    assert doc["hardware"] == line
    assert doc["hardware_detail"] == hardware


# ---------------------------------------------------------------------------------------------------------
# sandbox: the isolation code_execution rows ran under

ISOLATION = {"level": "strict", "layers": ["bubblewrap", "rlimits"], "missing": [], "reason": None}


@pytest.mark.parametrize("with_adapter", [True, False])
def test_sandbox_is_the_isolation_code_rows_ran_under(with_adapter: bool) -> None:
    ran = Score(1.0, 1.0, {"isolation": ISOLATION})
    bench = A_IN if with_adapter else A_BASE_ONLY
    recs = [
        scored("a", 1.0, 1.0 if with_adapter else None, bench=bench),  # no code: no isolation
        scored("b", ran, ran if with_adapter else None, bench=bench, evaluation_type="code_execution"),
    ]
    doc = build(recs, meta=ADAPTER_META if with_adapter else BASE_META)
    assert doc["sandbox"] == ISOLATION


def test_sandbox_is_null_without_code_rows() -> None:
    assert build([scored("r1", 0.0, 1.0)])["sandbox"] is None


def test_write_atomic_writes_two_space_indented_json(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    write_atomic(target, {"a": [1], "b": "Größe"})
    assert target.read_text(encoding="utf-8") == '{\n  "a": [\n    1\n  ],\n  "b": "Größe"\n}\n'


def test_the_lm_eval_block_takes_each_metric_over_the_rows_that_recorded_it() -> None:
    """lm-eval's mean and mean_stderr per metric, each over its own rows: one row's acc_norm alone has no
    spread, and no row's metric is left out rather than divided by zero."""
    from pytest_llmeval.summaries import lm_eval_summary

    origin = {"task": "t", "version": 1.0, "metrics": ["acc", "acc_norm", "exact_match"]}

    def record(per_row: dict[str, float]) -> dict[str, Any]:
        return {"evaluation_config": {"lm_eval": origin}, "models": {"base": {"score": {"lm_eval": per_row}}}}

    block = lm_eval_summary(
        [record({"acc": 1.0, "acc_norm": 0.0}), record({"acc": 0.0}), record({"acc": 1.0})]
    )
    assert block is not None
    base = block["base"]
    assert base["n"] == 3 and base["acc"] == pytest.approx(2 / 3) and base["acc_norm"] == 0.0
    assert base["acc_stderr"] == pytest.approx(math.sqrt((1 / 3) / 3))  # sample variance 1/3, over n = 3
    assert base["acc_norm_stderr"] == 0.0 and "exact_match" not in base
