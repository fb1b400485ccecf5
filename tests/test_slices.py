"""Slices: per-tag statistics of every benchmark (key:value tags group by key, plain tags under "tag"), equal
to the statistics of the rows filtered by hand; in results.json, the HTML report and the terminal with -v;
and --llmeval-slice-gate, which makes no_degradation judge each slice of a key, Holm-adjusted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import jsonl, row

from pytest_llmeval.slices import slice_comparison, slices_of, slices_summary
from pytest_llmeval.stats import compare_paired

pytest_plugins = ["pytester"]


def test_tags_make_slices() -> None:
    assert slices_of(["domain:film", "edge", "a:b:c", ":x", "y:"]) == [
        ("domain", "film"),
        ("tag", "edge"),
        ("a", "b:c"),
        ("tag", ":x"),
        ("tag", "y:"),
    ]


def record(i: int, tags: list[str], base: float, adapter: float) -> dict[str, Any]:
    return {
        "id": f"r{i}",
        "tags": tags,
        "evaluation_type": "exact_match",
        "models": {"base": {"score": {"value": base}}, "adapter": {"score": {"value": adapter}}},
    }


def test_a_slices_statistics_are_those_of_its_rows_filtered_by_hand() -> None:
    rows = [
        record(
            i,
            [f"domain:{'film' if i % 3 else 'product'}", *(["edge"] if i % 4 == 0 else [])],
            i % 2,
            (i // 2) % 2,
        )
        for i in range(40)
    ]
    summary = slices_summary(rows, 0.05)
    assert summary is not None and set(summary) == {"domain", "tag"}
    for key, value in (("domain", "film"), ("domain", "product"), ("tag", "edge")):
        mine = [r for r in rows if f"{key}:{value}" in r["tags"] or (key == "tag" and value in r["tags"])]
        cmp = compare_paired(
            [r["models"]["adapter"]["score"]["value"] for r in mine],
            [r["models"]["base"]["score"]["value"] for r in mine],
        )
        got = summary[key][value]
        assert got["n"] == len(mine)
        assert (got["difference"], got["p_value"], got["ci_low"], got["ci_high"]) == (
            cmp.difference,
            cmp.p_value,
            cmp.ci_low,
            cmp.ci_high,
        )
        assert got == slice_comparison(mine, 0.05)
    assert slices_summary([record(0, [], 1, 1)], 0.05) is None


def bench_files(pytester: pytest.Pytester) -> None:
    """40 rows: on film rows the adapter fixes 10 of 20 failures; on 20 product rows it breaks 12 of 20
    successes. Overall it loses 2 of 40 (5 points: within no_degradation's warn threshold)."""
    pytester.makeini("[pytest]\n")
    rows, preds = [], []
    for i in range(40):
        film = i < 20
        tags = ["domain:film" if film else "domain:product", *(["edge"] if i % 5 == 0 else [])]
        rows.append(row(f"r{i:02d}", expected="yes", tags=tags))
        base_right = not film
        adapter_right = (i < 10) if film else (i >= 32)
        preds.append(
            {
                "id": f"r{i:02d}",
                "base_prediction": "yes" if base_right else "no",
                "prediction": "yes" if adapter_right else "no",
            }
        )
    pytester.makefile(".jsonl", general=jsonl(rows))
    pytester.makefile(".jsonl", preds="\n".join(json.dumps(p) for p in preds))


def run(pytester: pytest.Pytester, *extra: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl",
        "general.jsonl",
        "--llmeval-domain=elsewhere/*",
        "-k",
        "not size and not difficulty and not edge_cases and not held",
        *extra,
    )
    return result, json.loads((pytester.path / "results.json").read_text())


def test_slices_in_results_report_and_terminal(pytester: pytest.Pytester) -> None:
    bench_files(pytester)
    result, doc = run(pytester, "-v", "--llmeval-html=r.html")
    slices = doc["benchmarks"][0]["slices"]
    assert set(slices) == {"domain", "tag"}
    assert slices["domain"]["film"]["difference"] == pytest.approx(0.5)
    assert slices["domain"]["product"]["difference"] == pytest.approx(-0.6)
    assert slices["tag"]["edge"]["n"] == 8
    result.stdout.fnmatch_lines(["*slice domain:film *n=20*base 0.0%, adapter 50.0%, +50.0 pt*"])
    result.stdout.fnmatch_lines(["*slice domain:product *n=20*base 100.0%, adapter 40.0%, -60.0 pt*"])
    assert "Slices (tags)" in (pytester.path / "r.html").read_text()
    # The whole benchmark hides the loss: no_degradation passes on a 5-point drop.
    gate = next(g for g in doc["benchmarks"][0]["gates"].values())
    assert gate["status"] == "warn" or gate["status"] == "pass"
    quiet = pytester.runpytest("--llmeval-predictions=preds.jsonl", "general.jsonl", "-m", "not gate")
    assert "slice domain:" not in quiet.stdout.str()  # only with -v


def test_the_slice_gate_fails_the_slice_that_degraded(pytester: pytest.Pytester) -> None:
    bench_files(pytester)
    result, doc = run(pytester, "--llmeval-slice-gate=domain")
    gate = doc["benchmarks"][0]["gates"]["no_degradation"]
    assert gate["status"] == "fail"
    result.stdout.fnmatch_lines(["*no_degradation*slices: domain:product drop 0.600 (n=20, Holm p=*: fail)*"])
    assert "domain:film" not in gate["message"]
    absent = run(pytester, "--llmeval-slice-gate=topic")[1]["benchmarks"][0]["gates"]["no_degradation"]
    assert "no row is tagged with a slice of topic" in absent["message"]
