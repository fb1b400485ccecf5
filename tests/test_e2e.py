"""End to end on the real embedded model: the main job, base vs the demo adapter on the shipped benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def main_job(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp_path_factory.mktemp("e2e") / "results.json"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--adapter",
        "adapters/date-iso",
        "benchmarks/",
        "-q",
        "--tb=no",
        "-p",
        "no:cacheprovider",
        f"--llmeval-results={out}",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def by_file(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["benchmark_file"]: b for b in doc["benchmarks"]}


def test_main_job_runs_every_row_and_reports(
    main_job: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    proc, doc = main_job
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 1: some rows answered wrong
    assert "results written to" in proc.stdout
    assert doc["complete"] is True
    assert doc["mode"] == "adapter_vs_base"
    assert doc["adapter_name"] == "date-iso"
    assert doc["base_model"] == "embedded:SmolLM2-135M-Instruct"
    benches = by_file(doc)
    assert set(benches) == {"benchmarks/dates.jsonl", "benchmarks/sentiment.jsonl"}
    for bench in benches.values():
        assert bench["n_examples"] == 60
        assert bench["results"]["n_errors"] == 0
        rows = bench["rows"]
        # Scores in results.json are recomputed from the stored outputs: nothing is hard-coded.
        mean = sum(r["adapter"]["score"]["value"] for r in rows) / len(rows)
        assert bench["results"]["adapter_score"] == pytest.approx(mean)


def test_adapter_beats_base_on_its_task(
    main_job: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    res = by_file(main_job[1])["benchmarks/dates.jsonl"]["results"]
    assert res["improvement_absolute"] >= 0.20, res


def test_adapter_keeps_the_other_domain(
    main_job: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    res = by_file(main_job[1])["benchmarks/sentiment.jsonl"]["results"]
    assert abs(res["improvement_absolute"]) <= 0.05, res


def test_gates_of_the_main_job(main_job: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    benches = by_file(main_job[1])
    dates, sentiment = benches["benchmarks/dates.jsonl"], benches["benchmarks/sentiment.jsonl"]
    # metadata.json of the demo adapter declares dates as its domain: better_than_base there, with a test.
    assert dates["domain"] == "in" and sentiment["domain"] == "out"
    assert dates["gates"]["better_than_base"]["status"] == "pass"
    assert dates["statistics"]["test"] == "mcnemar_exact" and dates["statistics"]["p_value"] < 0.05
    assert sentiment["gates"]["no_degradation"]["status"] == "pass"
    for bench in (dates, sentiment):
        for gate in ("size", "difficulty_mix", "edge_cases"):
            assert bench["gates"][gate]["status"] == "pass", bench["gates"][gate]
    # The adapter's own training file is found beside it, and no benchmark row is copied from it.
    assert dates["gates"]["held_out"]["status"] in ("pass", "warn")
    assert main_job[1]["out_of_domain"][0]["benchmark_file"] == "benchmarks/sentiment.jsonl"
