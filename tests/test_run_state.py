"""The run state split by role, through pytester: rows known as rows (any llmeval_files pattern), the
recorder's document the same with and without -n, and a worker killed mid-run."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row, without_clocks


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllmeval_files = *.ndjson *.jsonl\n")


def results(pytester: pytest.Pytester, name: str = "results.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


def batch_log(pytester: pytest.Pytester) -> Path:
    """A conftest that logs the size of every generated batch (in every process) to a file; its path."""
    log = pytester.path / "batches.log"
    pytester.makeconftest(
        textwrap.dedent(
            f"""
            import json
            from pytest_llmeval.evaluation import producer

            _original = producer.Producer._generate

            def _logged(self, nodeids):
                with open({str(log)!r}, "a") as f:
                    f.write(json.dumps(len(nodeids)) + "\\n")
                return _original(self, nodeids)

            def pytest_configure(config):
                producer.Producer._generate = _logged

            def pytest_unconfigure(config):
                producer.Producer._generate = _original
            """
        )
    )
    return log


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_rows_of_any_file_pattern_generate_in_batches(
    pytester: pytest.Pytester, tiny_model: Path, workers: list[str]
) -> None:
    # Rows are rows because they were collected as rows: a .ndjson benchmark chunks like a .jsonl one.
    log = batch_log(pytester)
    pytester.makefile(".ndjson", bench=jsonl([row(f"r{i}", input=f"item {i}") for i in range(8)]))
    result = pytester.runpytest(*model_args(tiny_model), "--llmeval-batch-size=4", *workers)
    result.assert_outcomes(failed=8)
    sizes = sorted(int(line) for line in log.read_text().split())
    assert sizes == [4, 4], sizes  # two chunks of four, not eight batches of one
    doc = results(pytester)
    assert [b["benchmark_file"] for b in doc["benchmarks"]] == ["bench.ndjson"]
    assert doc["complete"] is True


def test_serial_and_xdist_agree_without_gates_domain_included(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    rows = [row(f"q{i:02d}", instruction=f"Question {i}?" + " more" * (i % 4)) for i in range(10)]
    pytester.makefile(".jsonl", inside=jsonl(rows[:6]), outside=jsonl(rows[6:]))
    # -m "not gate": the domain of each benchmark still comes from collection, not from gate records.
    # No history: the serial run would be the parallel run's baseline (this test compares the two as peers).
    args = [
        *model_args(tiny_model, tiny_adapter),
        "--llmeval-batch-size=3",
        "--llmeval-domain=inside*",
        "--llmeval-no-history",
    ]
    pytester.runpytest(*args, "--llmeval-results=serial.json")
    pytester.runpytest(*args, "-n", "2", "--llmeval-results=parallel.json")
    a, b = results(pytester, "serial.json"), results(pytester, "parallel.json")
    a_rest, b_rest = (without_clocks(d) for d in (a, b))
    assert a_rest == b_rest
    assert [(x["benchmark_file"], x["domain"]) for x in a["benchmarks"]] == [
        ("inside.jsonl", "in"),
        ("outside.jsonl", "out"),
    ]
    assert a["benchmark_file"] == "inside.jsonl" and a["out_of_domain"]["benchmark"] == "outside.jsonl"
    assert a["benchmarks"][0]["statistics"]["n"] == 6  # computed without a gate


KILLER = """
import os
import signal

from pytest_llmeval.scorers import SCORERS, ScorerSpec
from pytest_llmeval.scorers.exact_match import score


def killer(prediction, expected, config):
    if config.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)  # this xdist worker dies mid-row, as with kill -9
    return score(prediction, expected, {})


SCORERS["killer"] = ScorerSpec(validate=lambda config: None, score=killer)
"""


def test_a_worker_killed_mid_run_loses_only_its_row(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(KILLER)
    rows = [
        {**row(f"r{i}", expected=f"answer {i}"), "evaluation_type": "killer", "evaluation_config": {}}
        for i in range(8)
    ]
    rows[5]["evaluation_config"] = {"die": True}
    pytester.makefile(".jsonl", bench=jsonl(rows))
    preds = [{"id": f"r{i}", "prediction": f"answer {i}", "base_prediction": "no"} for i in range(8)]
    (pytester.path / "preds.txt").write_text(jsonl(preds))
    # A subprocess: the conftest adds to the scorer registry, which must not leak into this process.
    result = pytester.runpytest_subprocess(
        "--llmeval-predictions=preds.txt",
        "--llmeval-domain=bench*",
        "--llmeval-batch-size=2",
        "--llmeval-min-rows=8",
        "-n",
        "2",
        "-rs",
        timeout=300,  # the gates must not wait for the row that will never come
    )
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'bench.jsonl::r5'*"])
    doc = results(pytester)
    assert doc["complete"] is False and "7 of 8 rows finished" in doc["incomplete_reason"]
    bench = doc["benchmarks"][0]
    assert sorted(r["id"] for r in bench["rows"]) == [f"r{i}" for i in range(8) if i != 5]
    gate = bench["gates"]["better_than_base"]
    assert gate["status"] == "skip" and "1 of 8 rows of bench.jsonl did not finish" in gate["message"]
    assert "r5: its worker crashed" in gate["message"]
    assert bench["gates"]["size"]["status"] == "pass"  # hygiene gates read the file, not the rows
