"""Unit tests and hypothesis properties of results.py: aggregation, results.json, atomic write, summary."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.results import SCHEMA_VERSION, build_results, summarize, summary_lines, write_atomic
from pytest_llmeval.scorers import Score

WHEN = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
ADAPTER_META: dict[str, Any] = {
    "adapter": "adapters/demo",
    "adapter_name": "demo",
    "adapter_version": "1.0",
    "base_model": "tiny-base",
    "base_model_note": "a note",
    "quantization": None,
    "hardware": {"device": "cpu"},
    "inference_config": {"batch_size": 4},
}
BASE_META: dict[str, Any] = {
    "adapter": None,
    "base_model": "tiny-base",
    "inference_config": {"batch_size": 4},
}


def record(
    nodeid: str,
    *,
    base: float | None = 1.0,
    adapter: float | None = None,
    with_adapter: bool = True,
    difficulty: str = "easy",
    evaluation_type: str = "exact_match",
    threshold: float = 1.0,
    line: int = 1,
) -> dict[str, Any]:
    """A record shaped like runner.EvalRun.score_row makes it; `base=None` makes a row whose scorer raised."""
    benchmark, row_id = nodeid.split("::")
    errored = base is None
    if errored:
        assert adapter is None
    elif with_adapter:
        assert adapter is not None
    base_score = None if base is None else Score(base, threshold, {"extracted": "x"})
    adapter_score = None if adapter is None or not with_adapter else Score(adapter, threshold)
    primary = adapter_score if adapter_score is not None else base_score
    return {
        "nodeid": nodeid,
        "benchmark": benchmark,
        "id": row_id,
        "line": line,
        "difficulty": difficulty,
        "evaluation_type": evaluation_type,
        "tags": ["t"],
        "expected_output": "4",
        "base": {"output": "base says 4", "score": None if base_score is None else base_score.to_json()},
        "adapter": (
            None
            if not with_adapter
            else {
                "output": "adapter says 4",
                "score": None if adapter_score is None else adapter_score.to_json(),
            }
        ),
        "passed": False if primary is None else primary.passed,
        "error": f"{benchmark}:{line}: scorer '{evaluation_type}' raised ValueError: boom"
        if errored
        else None,
    }


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


def sample_records() -> list[dict[str, Any]]:
    return [
        record(f"b.jsonl::r{i}", difficulty=d, base=b, adapter=a, line=i + 1)
        for i, (d, b, a) in enumerate(SCORES)
    ]


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
        # n counts every row of that difficulty, errored ones too.
        assert per[difficulty]["n"] == len(rows)


def test_summarize_counts_passed_and_errored_rows() -> None:
    res = summarize(sample_records())
    # threshold 1.0: a row passes when the adapter (the evaluated model) scores 1.0.
    assert res["n_passed"] == sum(1 for _, _, a in SCORES if a is not None and a >= 1.0)
    assert res["n_errors"] == sum(1 for _, b, _ in SCORES if b is None)


def test_errored_rows_are_left_out_of_the_means() -> None:
    good = [record("b.jsonl::a", base=0.5, adapter=1.0), record("b.jsonl::b", base=0.25, adapter=0.5)]
    errored = [record("b.jsonl::c", base=None), record("b.jsonl::d", base=None)]
    with_errors, without = summarize(good + errored), summarize(good)
    for key in ("adapter_score", "base_model_score", "improvement_absolute", "improvement_relative"):
        assert with_errors[key] == without[key]
    assert with_errors["n_errors"] == 2
    assert with_errors["per_difficulty"]["easy"]["n"] == 4


def test_every_row_errored_gives_no_means() -> None:
    res = summarize([record("b.jsonl::a", base=None), record("b.jsonl::b", base=None, difficulty="hard")])
    assert res["adapter_score"] is None
    assert res["base_model_score"] is None
    assert res["improvement_absolute"] is None
    assert res["improvement_relative"] is None
    assert res["n_errors"] == 2
    assert res["n_passed"] == 0
    assert res["per_difficulty"]["hard"] == {"adapter": None, "base": None, "n": 1}


def test_relative_improvement_is_none_when_the_base_mean_is_zero() -> None:
    res = summarize(
        [record("b.jsonl::a", base=0.0, adapter=1.0), record("b.jsonl::b", base=0.0, adapter=0.5)]
    )
    assert res["base_model_score"] == 0.0
    assert res["improvement_absolute"] == pytest.approx(0.75)
    assert res["improvement_relative"] is None


def test_negative_improvement() -> None:
    res = summarize(
        [record("b.jsonl::a", base=1.0, adapter=0.0), record("b.jsonl::b", base=0.5, adapter=0.5)]
    )
    base, adapter = statistics.fmean([1.0, 0.5]), statistics.fmean([0.0, 0.5])
    assert res["improvement_absolute"] == pytest.approx(adapter - base)
    assert res["improvement_absolute"] < 0
    assert res["improvement_relative"] == pytest.approx((adapter - base) / base)


def test_base_only_records() -> None:
    recs = [
        record("b.jsonl::a", base=1.0, with_adapter=False),
        record("b.jsonl::b", base=0.0, with_adapter=False, difficulty="medium"),
    ]
    res = summarize(recs)
    assert res["adapter_score"] is None
    assert res["base_model_score"] == pytest.approx(0.5)
    assert res["improvement_absolute"] is None
    assert res["improvement_relative"] is None
    assert res["n_passed"] == 1  # the base score decides when there is no adapter
    assert res["per_difficulty"]["medium"] == {"adapter": None, "base": 0.0, "n": 1}


def test_summarize_no_records() -> None:
    res = summarize([])
    assert res["adapter_score"] is None and res["base_model_score"] is None
    assert res["per_difficulty"] == {d: {"adapter": None, "base": None, "n": 0} for d in DIFFICULTIES}
    assert res["n_passed"] == 0 and res["n_errors"] == 0


# ---------------------------------------------------------------------------------------------------------
# build_results


def test_build_results_groups_by_benchmark_and_sorts_rows(tmp_path: Path) -> None:
    recs = [
        record("z.jsonl::b", base=1.0, adapter=1.0),
        record("a.jsonl::r2", base=0.0, adapter=1.0),
        record("z.jsonl::a", base=0.5, adapter=0.0, evaluation_type="other"),
        record("a.jsonl::r1", base=1.0, adapter=1.0),
        record("a.jsonl::r10", base=1.0, adapter=0.0),
    ]
    doc = build_results(recs, meta=ADAPTER_META, rootdir=tmp_path, complete=True, timestamp=WHEN)

    assert [b["benchmark_file"] for b in doc["benchmarks"]] == ["a.jsonl", "z.jsonl"]
    a, z = doc["benchmarks"]
    assert [r["nodeid"] for r in a["rows"]] == ["a.jsonl::r1", "a.jsonl::r10", "a.jsonl::r2"]
    assert [r["nodeid"] for r in z["rows"]] == ["z.jsonl::a", "z.jsonl::b"]
    assert (a["n_examples"], z["n_examples"]) == (3, 2)
    assert (a["evaluation_type"], a["evaluation_types"]) == ("exact_match", ["exact_match"])
    assert (z["evaluation_type"], z["evaluation_types"]) == ("mixed", ["exact_match", "other"])
    assert a["results"] == summarize([r for r in recs if r["benchmark"] == "a.jsonl"])
    assert a["results"]["adapter_score"] == pytest.approx(statistics.fmean([1.0, 1.0, 0.0]))


def test_rows_keep_everything_but_the_benchmark_name(tmp_path: Path) -> None:
    rec = record("a.jsonl::r1", base=0.5, adapter=1.0, line=7)
    doc = build_results([rec], meta=ADAPTER_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    (row,) = doc["benchmarks"][0]["rows"]
    assert row == {k: v for k, v in rec.items() if k != "benchmark"}
    assert row["line"] == 7
    assert row["base"]["score"] == {"value": 0.5, "threshold": 1.0, "passed": False, "extracted": "x"}


def test_benchmark_hash_is_computed_from_the_file_under_rootdir(tmp_path: Path) -> None:
    data = b'{"id": "r1"}\r\n\xef\xbb\xbf\n'
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "a.jsonl").write_bytes(data)
    recs = [record("benchmarks/a.jsonl::r1", adapter=1.0), record("gone.jsonl::r1", adapter=1.0)]
    doc = build_results(recs, meta=ADAPTER_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    hashes = {b["benchmark_file"]: b["benchmark_hash"] for b in doc["benchmarks"]}
    assert hashes == {
        "benchmarks/a.jsonl": "sha256:" + hashlib.sha256(data).hexdigest(),
        "gone.jsonl": None,  # a file that is not there has no hash
    }


def test_adapter_vs_base_document(tmp_path: Path) -> None:
    doc = build_results(
        [record("a.jsonl::r1", adapter=1.0)],
        meta=ADAPTER_META,
        rootdir=tmp_path,
        complete=True,
        timestamp=WHEN,
    )
    assert doc["schema_version"] == SCHEMA_VERSION == 1
    assert doc["mode"] == "adapter_vs_base"
    assert doc["adapter_path"] == "adapters/demo"
    assert doc["adapter_name"] == "demo"
    assert doc["adapter_version"] == "1.0"
    assert doc["base_model"] == "tiny-base"
    assert doc["base_model_note"] == "a note"
    assert doc["quantization"] is None
    assert doc["hardware"] == {"device": "cpu"}
    assert doc["inference_config"] == {"batch_size": 4}
    assert doc["timestamp"] == "2024-05-06T07:08:09+00:00"
    assert doc["complete"] is True
    assert doc["incomplete_reason"] is None
    assert json.loads(json.dumps(doc)) == doc


def test_base_only_document(tmp_path: Path) -> None:
    recs = [record("a.jsonl::r1", with_adapter=False), record("a.jsonl::r2", base=0.0, with_adapter=False)]
    doc = build_results(recs, meta=BASE_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    assert doc["mode"] == "base_only"
    assert doc["adapter_path"] is None
    assert doc["adapter_name"] is None  # a key missing from meta becomes null
    assert doc["hardware"] is None
    res = doc["benchmarks"][0]["results"]
    assert res["adapter_score"] is None
    assert res["base_model_score"] == pytest.approx(0.5)
    assert all(r["adapter"] is None for r in doc["benchmarks"][0]["rows"])


def test_missing_adapter_key_means_base_only(tmp_path: Path) -> None:
    doc = build_results([], meta={}, rootdir=tmp_path, complete=True, timestamp=WHEN)
    assert doc["mode"] == "base_only"
    assert doc["benchmarks"] == []


def test_incomplete_run_keeps_its_reason(tmp_path: Path) -> None:
    kwargs: dict[str, Any] = {"meta": ADAPTER_META, "rootdir": tmp_path, "timestamp": WHEN}
    doc = build_results([], complete=False, incomplete_reason="3 of 10 rows ran", **kwargs)
    assert (doc["complete"], doc["incomplete_reason"]) == (False, "3 of 10 rows ran")
    doc = build_results([], complete=True, incomplete_reason="ignored", **kwargs)
    assert (doc["complete"], doc["incomplete_reason"]) == (True, None)


def test_default_timestamp_is_now_in_utc(tmp_path: Path) -> None:
    before = datetime.now(timezone.utc).replace(microsecond=0)
    doc = build_results([], meta={}, rootdir=tmp_path, complete=True)
    stamp = datetime.fromisoformat(doc["timestamp"])
    assert stamp.utcoffset() == timedelta(0)
    assert before <= stamp <= datetime.now(timezone.utc)


def test_build_results_accepts_a_generator(tmp_path: Path) -> None:
    recs = sample_records()
    doc = build_results(iter(recs), meta=ADAPTER_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    assert doc["benchmarks"][0]["n_examples"] == len(recs)


# ---------------------------------------------------------------------------------------------------------
# properties: means match a plain reference; output does not depend on record order

_score = st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 1, allow_nan=False)


@st.composite
def _records(draw: st.DrawFn, *, with_adapter: bool = True) -> list[dict[str, Any]]:
    files = st.sampled_from(["a.jsonl", "b.jsonl", "sub/c.jsonl"])
    ids = st.text("abcxyz0189", min_size=1, max_size=4)
    nodeids = draw(st.lists(st.builds("{}::{}".format, files, ids), max_size=12, unique=True))
    out = []
    for i, nodeid in enumerate(nodeids):
        errored = draw(st.integers(0, 5)) == 0
        out.append(
            record(
                nodeid,
                base=None if errored else draw(_score),
                adapter=None if errored or not with_adapter else draw(_score),
                with_adapter=with_adapter,
                difficulty=draw(st.sampled_from(DIFFICULTIES)),
                evaluation_type=draw(st.sampled_from(["exact_match", "other"])),
                threshold=draw(st.sampled_from([0.5, 1.0])),
                line=i + 1,
            )
        )
    return out


def _side_scores(records: Sequence[Mapping[str, Any]], who: str) -> list[float]:
    return [r[who]["score"]["value"] for r in records if r[who] is not None and r[who]["score"] is not None]


@settings(max_examples=60, deadline=None)
@given(recs=_records(), with_adapter=st.booleans())
def test_property_summarize_matches_a_plain_reference(recs: list[dict[str, Any]], with_adapter: bool) -> None:
    if not with_adapter:
        recs = [{**r, "adapter": None} for r in recs]
    res = summarize(recs)
    base = fmean_or_none(_side_scores(recs, "base"))
    adapter = fmean_or_none(_side_scores(recs, "adapter"))
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
        assert res["per_difficulty"][d]["n"] == len(rows)
        assert res["per_difficulty"][d]["base"] == approx_or_none(fmean_or_none(_side_scores(rows, "base")))
        assert res["per_difficulty"][d]["adapter"] == approx_or_none(
            fmean_or_none(_side_scores(rows, "adapter"))
        )
    assert res["n_errors"] == sum(1 for r in recs if r["error"])
    assert res["n_passed"] == sum(1 for r in recs if r["passed"])


@settings(max_examples=40, deadline=None)
@given(data=st.data(), with_adapter=st.booleans())
def test_property_results_do_not_depend_on_record_order(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, with_adapter: bool
) -> None:
    root = tmp_path_factory.getbasetemp()
    recs = data.draw(_records(with_adapter=with_adapter))
    shuffled = data.draw(st.permutations(recs))
    meta = ADAPTER_META if with_adapter else BASE_META
    one = build_results(recs, meta=meta, rootdir=root, complete=True, timestamp=WHEN)
    two = build_results(shuffled, meta=meta, rootdir=root, complete=True, timestamp=WHEN)
    # Byte-identical JSON: the same floats summed in the same order, the same key order.
    assert json.dumps(one) == json.dumps(two)
    for bench in one["benchmarks"]:
        nodeids = [r["nodeid"] for r in bench["rows"]]
        assert nodeids == sorted(nodeids)
    assert sum(b["n_examples"] for b in one["benchmarks"]) == len(recs)


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
    doc = build_results(sample_records(), meta=ADAPTER_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    target = tmp_path / "results.json"
    write_atomic(target, doc)
    assert json.loads(target.read_text(encoding="utf-8")) == doc


# ---------------------------------------------------------------------------------------------------------
# summary_lines


def test_summary_lines_adapter_mode(tmp_path: Path) -> None:
    recs = [
        record("a.jsonl::r1", base=1.0, adapter=1.0),
        record("a.jsonl::r2", base=0.0, adapter=1.0),
        record("b.jsonl::r1", base=None),
    ]
    doc = build_results(recs, meta=ADAPTER_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    header, a, b = summary_lines(doc)
    assert header.split() == ["benchmark", "rows", "base", "adapter", "diff", "95%", "CI,", "p"]
    assert a.split()[:5] == ["a.jsonl", "2", "50.0%", "100.0%", "+50.0pt"]
    stats = doc["benchmarks"][0]["statistics"]
    assert a.split()[5:] == [f"[{100 * stats['ci_low']:+.1f},", f"{100 * stats['ci_high']:+.1f}],", "p=1"]
    assert b.startswith("b.jsonl")
    assert b.split()[:5] == ["b.jsonl", "1", "-", "-", "-"]
    assert b.endswith("(1 rows errored)")


def test_summary_lines_base_only_mode_has_no_adapter_columns(tmp_path: Path) -> None:
    recs = [record("a.jsonl::r1", base=0.25, with_adapter=False)]
    doc = build_results(recs, meta=BASE_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    header, a = summary_lines(doc)
    assert header.split() == ["benchmark", "rows", "base"]
    assert a.split() == ["a.jsonl", "1", "25.0%"]


def test_summary_lines_negative_diff(tmp_path: Path) -> None:
    recs = [record("a.jsonl::r1", base=1.0, adapter=0.0), record("a.jsonl::r2", base=1.0, adapter=1.0)]
    doc = build_results(recs, meta=ADAPTER_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    assert summary_lines(doc)[1].split()[4] == "-50.0pt"


def test_summary_lines_incomplete(tmp_path: Path) -> None:
    doc = build_results(
        [record("a.jsonl::r1", adapter=1.0)],
        meta=ADAPTER_META,
        rootdir=tmp_path,
        complete=False,
        incomplete_reason="worker gw1 crashed",
        timestamp=WHEN,
    )
    lines = summary_lines(doc)
    assert len(lines) == 3
    assert lines[-1] == "INCOMPLETE: worker gw1 crashed"


def test_summary_lines_of_no_benchmarks(tmp_path: Path) -> None:
    doc = build_results([], meta=BASE_META, rootdir=tmp_path, complete=True, timestamp=WHEN)
    assert len(summary_lines(doc)) == 1
