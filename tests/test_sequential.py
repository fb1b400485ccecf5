"""--llmeval-sequential through the plugin: rows run in a seeded planned order, a benchmark stops at the
chunk boundary where its comparison gates are decided by the anytime-valid test, the gate passes or fails
on that decision, and serial and -n 2 runs write the same results.json (rows a worker computed past the
stop are discarded, and counted in `cost`). The statistics themselves: tests/test_sequential_stats.py.

Saved predictions (no model) make the rows' outcomes exact: the decision row is known in advance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row, without_clocks

pytest_plugins = ["pytester"]

ROWS = 64
DIFFICULTIES = ("easy",) * 3 + ("medium",) * 5 + ("hard",) * 2  # the 30/50/20 mix


def write(
    pytester: pytest.Pytester,
    *,
    adapter_right: bool = True,
    base_right: bool = False,
    rows: int = ROWS,
    **config: Any,
) -> None:
    cases = [
        row(f"r{i:03d}", expected=f"a{i}", difficulty=DIFFICULTIES[i % 10], evaluation_config={**config})
        for i in range(rows)
    ]
    pytester.makefile(".jsonl", task=jsonl(cases))
    preds = [
        {
            "id": f"r{i:03d}",
            "prediction": f"a{i}" if adapter_right else "no",
            "base_prediction": f"a{i}" if base_right else "no",
        }
        for i in range(rows)
    ]
    (pytester.path / "preds.txt").write_text(jsonl(preds))


def run(
    pytester: pytest.Pytester, *more: str, domain: str = "task*"
) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest(
        "--llmeval-predictions=preds.txt",
        f"--llmeval-domain={domain}",
        "--llmeval-sequential",
        "--llmeval-batch-size=8",
        "--llmeval-no-history",
        "-p",
        "no:cacheprovider",
        "-k",
        "not size and not difficulty and not edge and not held",
        *more,
    )
    where = next((m.split("=", 1)[1] for m in more if m.startswith("--llmeval-results=")), "results.json")
    return result, json.loads((pytester.path / where).read_text())


def test_a_clear_win_stops_after_the_first_chunk(pytester: pytest.Pytester) -> None:
    write(pytester)
    result, doc = run(pytester, "-rs", "--llmeval-html=report.html")
    bench = doc["benchmarks"][0]
    seq = bench["sequential"]
    # 8 discordant wins: e = 2^9 / 9 > 20 = 1/alpha at the first look.
    assert seq["early"] and seq["stopped_after"] == 8 and seq["planned_rows"] == ROWS
    decision = seq["decisions"]["adapter"]
    assert decision["question"] == "better_than_base" and decision["decided"] == "better"
    ran = [r for r in bench["rows"] if r["skipped"] is None]
    assert len(ran) == 8
    assert all(
        r["skipped"].startswith("not run: --llmeval-sequential decided after 8 of 64 rows")
        for r in bench["rows"]
        if r not in ran
    )
    # The planned order keeps the difficulty mix in its first chunk.
    for difficulty in ("easy", "medium", "hard"):
        share = sum(1 for i in range(ROWS) if DIFFICULTIES[i % 10] == difficulty) / ROWS
        assert abs([r["difficulty"] for r in ran].count(difficulty) - 8 * share) <= 1
    gate = bench["gates"]["better_than_base"]
    assert gate["status"] == "pass" and "decided after 8 of 64 rows" in gate["message"]
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 8 + 1 and outcomes["skipped"] >= ROWS - 8  # rows, the gate; no_regression
    result.stdout.fnmatch_lines(["*sequential: stopped early, decided after 8 of 64 rows*"])
    page = (pytester.path / "report.html").read_text()
    assert "Sequential decision" in page and "decided: better (8 rows)" in page


def test_serial_and_xdist_stop_at_the_same_row(pytester: pytest.Pytester) -> None:
    write(pytester)
    _, serial = run(pytester, "--llmeval-results=serial/results.json")
    _, parallel = run(pytester, "-n", "2", "--llmeval-results=xdist/results.json")
    assert without_clocks(serial) == without_clocks(parallel)
    # Workers that ran chunks before the decision reached them: those rows are discarded, and counted.
    print("discarded under -n 2:", parallel["cost"]["discarded_rows"])
    assert serial["cost"]["discarded_rows"] == 0


def test_a_clear_loss_fails_early(pytester: pytest.Pytester) -> None:
    write(pytester, adapter_right=False, base_right=True)
    _, doc = run(pytester)
    bench = doc["benchmarks"][0]
    assert bench["sequential"]["decisions"]["adapter"]["decided"] == "worse"
    assert bench["gates"]["better_than_base"]["status"] == "fail"


def test_no_difference_runs_to_the_end_and_the_fixed_test_decides(pytester: pytest.Pytester) -> None:
    write(pytester, adapter_right=True, base_right=True)
    _, doc = run(pytester)
    bench = doc["benchmarks"][0]
    assert not bench["sequential"]["early"] and bench["sequential"]["stopped_after"] is None
    assert all(r["skipped"] is None for r in bench["rows"])
    assert "decided after" not in bench["gates"]["better_than_base"]["message"]  # McNemar, as without


def test_out_of_domain_no_degradation_decides_too(pytester: pytest.Pytester) -> None:
    # A margin of 5 points takes more rows to be sure of than a clear win: ~120 equal rows.
    write(pytester, adapter_right=True, base_right=True, rows=320)
    _, doc = run(pytester, domain="elsewhere*")
    bench = doc["benchmarks"][0]
    decision = bench["sequential"]["decisions"]["adapter"]
    # Equal on every row: the drop is surely below warn_drop (5 points) once enough rows agree.
    assert decision["question"] == "no_degradation" and decision["decided"] == "not_degraded"
    assert bench["sequential"]["early"]
    assert bench["gates"]["no_degradation"]["status"] == "pass"


def test_a_benchmark_can_opt_out(pytester: pytest.Pytester) -> None:
    write(pytester, sequential=False)
    _, doc = run(pytester)
    bench = doc["benchmarks"][0]
    assert "sequential" not in bench and all(r["skipped"] is None for r in bench["rows"])


def test_the_seed_changes_the_planned_order_not_the_verdict(pytester: pytest.Pytester) -> None:
    write(pytester)
    _, one = run(pytester, "--llmeval-seed=1")
    _, two = run(pytester, "--llmeval-seed=2")

    def ran(doc: dict[str, Any]) -> set[str]:
        return {r["id"] for r in doc["benchmarks"][0]["rows"] if r["skipped"] is None}

    assert ran(one) != ran(two) and len(ran(one)) == len(ran(two)) == 8
    assert one["benchmarks"][0]["sequential"]["seed"] == 1


@pytest.mark.slow
def test_real_demo_date_adapter_decides_early(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """On the shipped demo, the date adapter against the embedded base: better_than_base on dates.jsonl is
    decided before the file's end; the run records after how many rows."""
    from helpers import REPO

    # Where the adapter's metadata.json says its domain is (domain_benchmarks: benchmarks/dates.jsonl).
    (pytester.path / "benchmarks").mkdir()
    dates = (REPO / "benchmarks" / "dates.jsonl").read_text()
    (pytester.path / "benchmarks" / "dates.jsonl").write_text(dates)
    result = pytester.runpytest(
        f"--adapter={REPO / 'adapters/date-iso'}",
        "--llmeval-sequential",
        "--llmeval-batch-size=8",
        "--llmeval-no-cache",
        "--llmeval-no-history",
        "-p",
        "no:cacheprovider",
        "-k",
        "not gate or better_than_base",
    )
    doc = json.loads((pytester.path / "results.json").read_text())
    bench = doc["benchmarks"][0]
    seq = bench["sequential"]
    assert seq["decisions"]["adapter"]["decided"] == "better", seq
    assert seq["early"] and seq["stopped_after"] < seq["planned_rows"]
    assert bench["gates"]["better_than_base"]["status"] == "pass"
    print(f"dates.jsonl decided after {seq['stopped_after']} of {seq['planned_rows']} rows")  # for the note
    assert result.ret in (0, 1)


def test_a_bad_opt_out_names_its_line(tmp_path: Path) -> None:
    from pytest_llmeval.benchmark import BenchmarkError
    from pytest_llmeval.scorers import read_benchmark

    path = tmp_path / "task.jsonl"
    path.write_text(
        jsonl(
            [
                row("ok", evaluation_config={"sequential": False}),
                row("bad", evaluation_config={"sequential": "no"}),
            ]
        )
    )
    with pytest.raises(BenchmarkError) as info:
        read_benchmark(path)
    assert info.value.problems == [(2, 'evaluation_config: sequential must be true or false, got "no"')]
    path.write_text(jsonl([row("ok", evaluation_config={"sequential": False, "max_new_tokens": 4})]))
    (case,) = read_benchmark(path).cases
    # Kept apart from the scorer's config: exact_match would refuse a key it does not know.
    assert case.run_options == {"sequential": False} and dict(case.evaluation_config) == {"max_new_tokens": 4}
