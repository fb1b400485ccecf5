"""What a run did not run is in results.json (`not_run`), serially and under xdist alike: a benchmark file
that failed to collect (and the run is then incomplete), a gate deselected (--deselect, -m 'not gate', -k).
`pytest-llmeval check` fails on each, one line apiece; a deselected gate can be accepted knowingly
(--allow-unrun-gates), a missing file cannot. The GitHub summary and annotations show them too.

The runs are saved predictions (--llmeval-predictions): no model is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

from pytest_llmeval.ci import error_annotations, step_summary
from pytest_llmeval.cli import main as cli
from pytest_llmeval.results_reader import ResultsFileError, read_results

WORKERS = pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
# Gates four rows can pass: a finished run's check fails only on what did not run.
RUN = [
    "--llmeval-predictions=preds.txt",
    "--llmeval-no-history",
    "-p",
    "no:cacheprovider",
    "--llmeval-min-rows=1",
    "--llmeval-min-edge-cases=1",
]
GATES = ["difficulty_mix", "edge_cases", "held_out", "no_degradation", "size"]
BAD_LINE = "bad.jsonl:1: invalid JSON: Expecting value (column 7)"


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def a_benchmark(pytester: pytest.Pytester, *, adapter: bool = False) -> None:
    """bench.jsonl: four rows, each predicted right (preds.txt); with `adapter`, the adapter's predictions
    beside the base's."""
    rows = [
        row(f"r{i}", expected=f"a{i}", difficulty=("easy", "medium", "hard")[i % 3], tags=["edge"])
        for i in range(4)
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    side = "base_prediction" if adapter else "prediction"
    predictions = [{"id": f"r{i}", "prediction": f"a{i}", side: f"a{i}"} for i in range(4)]
    (pytester.path / "preds.txt").write_text(jsonl(predictions))


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest(*RUN, *args)
    return result, read_results(pytester.path / "results.json")


def check(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    status = cli(["check", str(path), *args])
    return status, capsys.readouterr().out.splitlines()


@WORKERS
def test_a_benchmark_file_that_failed_to_collect_makes_the_run_incomplete_and_fails_check(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], workers: list[str]
) -> None:
    a_benchmark(pytester)
    pytester.makefile(".jsonl", bad='{"id": \n')
    result, document = run(pytester, "--continue-on-collection-errors", *workers)
    result.assert_outcomes(passed=7, skipped=2, errors=1)
    # Under xdist the error reached the controller on the worker's collect report: the same entry.
    assert document["not_run"] == [{"file": "bad.jsonl", "gate": None, "why": BAD_LINE}]
    assert document["complete"] is False
    assert document["incomplete_reason"] == "bad.jsonl failed to collect"
    result.stdout.fnmatch_lines([f"NOT RUN: bad.jsonl failed to collect: {BAD_LINE}"])
    missing = f"FAILED bad.jsonl: did not run: it failed to collect ({BAD_LINE})"
    # Whatever is accepted: a file that never ran has no rows to accept.
    for accept in ([], ["--allow-unrun-gates"]):
        status, out = check(capsys, pytester.path / "results.json", *accept)
        assert status == 1
        assert out[:2] == [missing, "FAILED the run is incomplete: bad.jsonl failed to collect"]
    assert f"- bad.jsonl: {BAD_LINE}" in step_summary(document)
    assert f"::error file=bad.jsonl,line=1::bad.jsonl did not run: {BAD_LINE}" in error_annotations(document)


@WORKERS
def test_a_deselected_gate_is_recorded_and_fails_check_unless_accepted(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], workers: list[str]
) -> None:
    a_benchmark(pytester)
    result, document = run(pytester, "--deselect", "bench.jsonl::gate::size", *workers)
    result.assert_outcomes(passed=6, skipped=2)  # deselected: counted on the workers under xdist
    assert document["not_run"] == [{"file": "bench.jsonl", "gate": "size", "why": "deselected by --deselect"}]
    # Every row ran: the run is complete, only a verdict is missing.
    assert document["complete"] is True and "size" not in document["benchmarks"][0]["gates"]
    status, out = check(capsys, pytester.path / "results.json")
    assert status == 1
    line = "bench.jsonl: gate size did not run: deselected by --deselect"
    assert out[0] == f"FAILED {line} (--allow-unrun-gates accepts it)"
    assert out[1].startswith("llmeval: 1 failure(s), 4 gate verdict(s) in ")
    status, out = check(capsys, pytester.path / "results.json", "--allow-unrun-gates")
    assert status == 0
    assert out[0] == f"ACCEPTED {line}"
    assert out[1].startswith(
        "llmeval: 0 failure(s), 4 gate verdict(s), 1 gate(s) not run, accepted (--allow-unrun-gates) in "
    )
    assert "- bench.jsonl gate size: deselected by --deselect" in step_summary(document)
    assert (
        "::warning file=bench.jsonl,line=1::bench.jsonl gate size did not run: deselected by --deselect"
        in error_annotations(document)
    )


@WORKERS
def test_not_gate_records_every_gate_as_not_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], workers: list[str]
) -> None:
    a_benchmark(pytester)
    result, document = run(pytester, "-m", "not gate", *workers)
    result.assert_outcomes(passed=4)
    why = "deselected by -m 'not gate'"
    assert document["not_run"] == [{"file": "bench.jsonl", "gate": g, "why": why} for g in GATES]
    assert document["complete"] is True and document["benchmarks"][0]["gates"] == {}
    result.stdout.fnmatch_lines([f"gates not run ({why}; *): bench.jsonl: {', '.join(GATES)}"])
    status, out = check(capsys, pytester.path / "results.json")
    assert status == 1 and len([line for line in out if line.startswith("FAILED ")]) == len(GATES)
    assert check(capsys, pytester.path / "results.json", "--allow-unrun-gates")[0] == 0


def test_a_gate_of_no_benchmark_file_deselected_by_k(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """--llmeval-criteria locollm's run gate (an adapter's out-of-domain benchmark) belongs to the run, not
    to a file: `file` is null."""
    a_benchmark(pytester, adapter=True)
    result, document = run(pytester, "--llmeval-criteria=locollm", "-k", "not out_of_domain_required")
    result.assert_outcomes(passed=8, skipped=1, deselected=1)
    (entry,) = document["not_run"]
    assert entry["file"] is None and entry["gate"].startswith("out_of_domain_required[")
    assert entry["why"] == "deselected by -k 'not out_of_domain_required'"
    # The run gate's key is the one its verdict has in `criteria` (which results.json computes anyway).
    assert entry["gate"] in document["criteria"]["gates"]
    _, out = check(capsys, pytester.path / "results.json")
    assert f"FAILED gate {entry['gate']} did not run: {entry['why']} (--allow-unrun-gates accepts it)" in out


def test_a_run_that_ran_everything_has_nothing_not_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    a_benchmark(pytester)
    _, document = run(pytester)
    assert document["not_run"] == [] and document["complete"] is True
    assert "Not run" not in step_summary(document)
    assert check(capsys, pytester.path / "results.json")[0] == 0


@pytest.mark.parametrize(
    ("not_run", "problem"),
    [
        ({}, "not_run is {}, not a list"),
        ([{"file": "b.jsonl", "gate": None}], "not_run[0] has no why"),
        ([{"file": 1, "gate": None, "why": "x"}], "not_run[0].file is 1, not a string or null"),
    ],
)
def test_the_reader_refuses_a_damaged_not_run(tmp_path: Path, not_run: Any, problem: str) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"benchmarks": [], "not_run": not_run}))
    with pytest.raises(ResultsFileError) as refused:
        read_results(path)
    assert str(refused.value) == f"cannot read {path}: not a results.json ({problem})"
