"""The history of runs (issue 17): partial runs say so, every run is kept, and no_regression compares with
the newest complete run of the same adapter on the same benchmark content. Pure functions of history.py
first, then the plugin through pytester (saved predictions: no model is needed to tell runs apart)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row, without_clocks

from pytest_llmeval import history
from pytest_llmeval.cli import main
from pytest_llmeval.records import BenchmarkInfo
from pytest_llmeval.results import SCHEMA_VERSION, Baseline
from pytest_llmeval.stats import compare_paired

WHEN = datetime(2026, 11, 26, 17, 30, 12, 123456, tzinfo=timezone.utc)
SHA = "sha256:" + "a" * 64
OTHER_SHA = "sha256:" + "b" * 64
BENCH: BenchmarkInfo = {"name": "bench.jsonl", "sha256": SHA, "domain": "in", "n_rows": 3}


def doc(
    adapter: str | None = "math",
    *,
    version: str | None = "0.2",
    complete: bool = True,
    sha: str = SHA,
    scores: tuple[float, ...] = (1.0, 0.0, 1.0),
    base_model: str = "smol",
) -> dict[str, Any]:
    """A results document with one benchmark whose rows carry `scores` for the evaluated model."""
    evaluated = "adapter" if adapter is not None else "base"
    rows = [
        {
            "id": f"r{i}",
            "evaluation_type": "exact_match",
            "evaluated": evaluated,
            "models": {
                evaluated: {"score": {"value": s}},
                **({"base": {"score": {"value": 0.0}}} if adapter else {}),
            },
        }
        for i, s in enumerate(scores)
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "adapter_name": adapter,
        "adapter_version": version,
        "base_model": base_model,
        "complete": complete,
        "incomplete_reason": None if complete else "interrupted",
        "timestamp": "2026-11-26T17:30:12Z",
        "benchmarks": [
            {
                "benchmark_file": "bench.jsonl",
                "benchmark_hash": sha,
                "n_examples": len(rows),
                "results": {"adapter_score": sum(scores) / len(scores), "base_model_score": 0.0},
                "rows": rows,
            }
        ],
    }


def write(folder: Path, *documents: dict[str, Any]) -> list[Path]:
    """History entries of `documents`, one second apart, oldest first."""
    return [history.append(folder, d, when=WHEN + timedelta(seconds=i)) for i, d in enumerate(documents)]


@pytest.fixture
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for hand-made documents (conftest checks every results.json under tmp_path against the
    LocoLLM schema: that is for what the plugin writes, and these carry only what history.py reads)."""
    return tmp_path_factory.mktemp("history")


# --- entries ---------------------------------------------------------------------------------------------


def test_an_entry_is_named_by_utc_time_adapter_and_version() -> None:
    east = WHEN.astimezone(timezone(timedelta(hours=9)))
    assert history.entry_name(doc(), east) == "20261126T173012.123456Z_math_0.2.json"
    assert history.entry_name(doc(version=None), WHEN) == "20261126T173012.123456Z_math.json"
    # A base-only run is named by its base model; characters a file name should not hold become dashes.
    assert history.entry_name(doc(None, version=None, base_model="org/Smol LM"), WHEN) == (
        "20261126T173012.123456Z_base-org-Smol-LM.json"
    )


def test_appending_never_replaces_an_entry(folder: Path) -> None:
    first = history.append(folder, doc(scores=(1.0, 1.0, 1.0)), when=WHEN)
    second = history.append(folder, doc(scores=(0.0, 0.0, 0.0)), when=WHEN)  # the same microsecond
    assert first != second and second.name == "20261126T173012.123456Z_math_0.2-2.json"
    assert history.read_entry(first) == doc(scores=(1.0, 1.0, 1.0))
    assert history.read_entry(second) == doc(scores=(0.0, 0.0, 0.0))


def test_entries_are_oldest_first_and_skip_a_write_in_progress(folder: Path) -> None:
    paths = write(folder, doc(), doc(), doc())
    (folder / ".20261126T000000.000000Z_math.json.x.tmp").write_text("{")
    (folder / ".hidden.json").write_text("{")
    assert history.entries(folder) == paths
    assert history.entries(folder / "missing") == []


def test_an_unreadable_entry_is_none(folder: Path) -> None:
    (folder / "a.json").write_text("{not json")
    (folder / "b.json").write_text(json.dumps({"benchmarks": "no"}))
    assert history.read_entry(folder / "a.json") is None
    assert history.read_entry(folder / "b.json") is None
    assert history.read_entry(folder / "c.json") is None


# --- baselines --------------------------------------------------------------------------------------------


def baselines(paths: list[Path]) -> history.Baselines:
    return history.Baselines(candidates=list(reversed(paths)), where="the history")


def test_the_baseline_is_the_newest_complete_run_of_the_same_adapter_and_content(folder: Path) -> None:
    paths = write(
        folder,
        doc(version="0.1"),  # 0: complete, the right content, older
        doc(version="0.2"),  # 1: the one
        doc(version="0.3", complete=False),  # 2: partial: never a baseline
        doc("code", version="9"),  # 3: another adapter
        doc(version="0.4", sha=OTHER_SHA),  # 4: other content
        doc(None, version=None),  # 5: a base-only run
    )
    found = baselines(paths).for_benchmark(BENCH, ("math", None))
    assert found == Baseline(history.read_entry(paths[1]), source=paths[1].name)
    # A base-only run's baseline is the newest base-only run of the same base model.
    assert baselines(paths).for_benchmark(BENCH, (None, "smol")).source == paths[5].name
    assert baselines(paths).for_benchmark(BENCH, (None, "other")).document is None


def test_without_a_baseline_the_reason_says_why(folder: Path) -> None:
    partial = write(folder / "p", doc(complete=False), doc(complete=False))
    assert baselines(partial).for_benchmark(BENCH, ("math", None)) == Baseline(
        None,
        reason="no complete earlier run of adapter 'math' on bench.jsonl in the history: "
        "2 partial run(s), which are never a baseline",
    )
    changed = write(folder / "c", doc(sha=OTHER_SHA), doc(sha="sha256:" + "c" * 64))
    assert baselines(changed).for_benchmark(BENCH, ("math", None)) == Baseline(
        None,
        reason=f"bench.jsonl changed since the last complete run of adapter 'math' ({changed[1].name}: "
        "sha256:cccccccccccc -> sha256:aaaaaaaaaaaa); runs on other content are never compared",
    )
    assert baselines(changed).for_benchmark(BENCH, (None, "smol")) == Baseline(
        None, reason="no earlier run of base model 'smol' on bench.jsonl in the history"
    )
    other_file: BenchmarkInfo = {**BENCH, "name": "other.jsonl"}
    assert baselines(changed).for_benchmark(other_file, ("math", None)).reason == (
        "no earlier run of adapter 'math' on other.jsonl in the history"
    )


def test_an_explicit_previous_is_every_benchmarks_baseline_as_given() -> None:
    given = doc("someone-else", complete=False, sha=OTHER_SHA)
    found = history.Baselines(explicit=given, explicit_source="old.json").for_benchmark(BENCH, ("math", None))
    assert found == Baseline(given, source="old.json")  # the user's choice: compared (or refused) as today
    assert history.Baselines(explicit=given).available and not history.Baselines().available


# --- retention --------------------------------------------------------------------------------------------


def test_pruning_keeps_the_newest_and_every_runs_baseline(folder: Path) -> None:
    paths = write(
        folder,
        doc(version="0.1"),  # 0: superseded by 2
        doc("code"),  # 1: code's only complete run: its baseline, kept
        doc(version="0.2"),  # 2: math's newest complete run: kept
        doc(version="0.3", complete=False),  # 3
        doc(version="0.3", complete=False),  # 4
        doc(version="0.3", complete=False),  # 5
    )
    removed = history.prune(folder, keep=2)
    assert removed == [paths[0], paths[3]]
    assert history.entries(folder) == [paths[1], paths[2], paths[4], paths[5]]
    assert baselines(history.entries(folder)).for_benchmark(BENCH, ("math", None)).source == paths[2].name


# --- listing and comparing --------------------------------------------------------------------------------


def test_a_run_is_found_by_number_name_or_prefix(folder: Path) -> None:
    paths = write(folder, doc(), doc(), doc())
    runs = history.runs(folder)
    assert [r.index for r in runs] == [1, 2, 3]
    assert history.find_run(runs, "1").path == paths[0]
    assert history.find_run(runs, "-1").path == paths[2]
    assert history.find_run(runs, paths[1].name).path == paths[1]
    assert history.find_run(runs, "20261126T173013").path == paths[1]
    with pytest.raises(LookupError, match="'20261126T1730' names 3 runs: give more of the name"):
        history.find_run(runs, "20261126T1730")
    with pytest.raises(LookupError, match="no run named 'x' in the history"):
        history.find_run(runs, "x")
    with pytest.raises(LookupError, match="no run number 4: the history holds 3 run"):
        history.find_run(runs, "4")
    with pytest.raises(LookupError, match="no run number 0"):
        history.find_run(runs, "0")


def test_the_diff_is_the_paired_comparison_on_the_shared_rows(folder: Path) -> None:
    a_scores, b_scores = (1.0, 1.0, 1.0, 1.0, 0.0, 1.0), (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    write(folder, doc(scores=a_scores), doc(version="0.3", scores=b_scores))
    a, b = history.runs(folder)
    lines = history.diff_lines(a, b, alpha=0.05)
    cmp = compare_paired(list(b_scores), list(a_scores), alpha=0.05)
    assert lines[0] == f"A: #1 {a.path.name}" and lines[1] == f"B: #2 {b.path.name}"
    assert "bench.jsonl:" in lines
    assert "  A: 6 rows, adapter 0.833, base 0.000" in lines
    assert "  B: 6 rows, adapter 0.167, base 0.000" in lines
    shared = next(line for line in lines if line.startswith("  B vs A"))
    assert shared.startswith(f"  B vs A on 6 shared rows: 0.167 vs 0.833, difference {cmp.difference:.3f} ")
    assert f"p={cmp.p_value:.2g}" in shared and shared.endswith("no significant difference")


def test_the_diff_refuses_rows_of_other_content(folder: Path) -> None:
    write(folder, doc(), doc(sha=OTHER_SHA, complete=False))
    a, b = history.runs(folder)
    lines = history.diff_lines(a, b)
    assert "note: B is partial (interrupted)" in lines
    assert any(line.startswith("  B vs A: not comparable: bench.jsonl changed") for line in lines)


def test_the_command_lists_and_diffs(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(history.history_dir(folder / "results.json"), doc(), doc(complete=False))
    assert main(["history", "--results", str(folder / "results.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("  1  2026-11-26T17:30:12Z  math 0.2  [complete]  20261126T173012")
    assert out[1] == "       bench.jsonl (sha256:aaaaa): 3 rows, adapter 0.667, base 0.000"
    assert "[partial: interrupted]" in out[2]
    where = history.history_dir(folder / "results.json")
    assert main(["history", "--dir", str(where), "--diff", "1", "2"]) == 0
    assert "  B vs A on 3 shared rows:" in capsys.readouterr().out
    assert main(["history", "--results", str(folder / "x" / "results.json")]) == 2
    assert "llmeval: no history at" in capsys.readouterr().err
    assert main(["history", "--results", str(folder / "results.json"), "--diff", "1", "7"]) == 2
    assert "no run number 7" in capsys.readouterr().err


# --- the plugin -------------------------------------------------------------------------------------------

ROWS = [
    row(f"r{i:02d}", expected=f"a{i}", difficulty=("easy", "medium", "hard")[i % 3], tags=["edge"] * (i < 5))
    for i in range(12)
]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def bench(pytester: pytest.Pytester, adapter_right: int = 8) -> tuple[str, ...]:
    """bench.jsonl (12 rows) and saved predictions: the adapter right on the first `adapter_right` rows."""
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    preds = [
        {"id": f"r{i:02d}", "prediction": f"a{i}" if i < adapter_right else "no", "base_prediction": "no"}
        for i in range(12)
    ]
    (pytester.path / "preds.txt").write_text(jsonl(preds))
    # Saved predictions, and hygiene gates this small benchmark passes.
    return "--llmeval-predictions=preds.txt", "--llmeval-min-rows=12"


def results(pytester: pytest.Pytester, name: str = "results.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


def entries(pytester: pytest.Pytester, results_name: str = "results.json") -> list[Path]:
    return history.entries(history.history_dir(pytester.path / results_name))


def test_a_selection_is_partial_and_the_next_full_run_compares_with_the_last_full_one(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = bench(pytester)
    first = pytester.runpytest(*preds)
    # 8 rows right, 4 wrong; gates: no_degradation, size, edge_cases, difficulty_mix pass, held_out skips (no
    # training data). No history yet: no no_regression.
    first.assert_outcomes(passed=8 + 4, failed=4, skipped=1)
    # Named by the predictions: their file and a hash of their outputs (no `model` field in the lines).
    first.stdout.fnmatch_lines(
        [
            "history: *.llmeval/history/*_preds.txt-????????????.json; list with `pytest-llmeval history`, "
            "see the runs and their rows side by side in a browser with "
            "`pytest-llmeval view --out=history.html`"
        ]
    )
    assert results(pytester)["complete"] is True
    quick = pytester.runpytest(*preds, "-k", "r03 or r09")
    quick.assert_outcomes(passed=1, failed=1, deselected=16)
    # Beside the complete run's results.json, which it does not replace.
    partial = results(pytester, "results.partial.json")
    assert partial["complete"] is False
    assert partial["incomplete_reason"] == "2 of 12 rows selected (-k 'r03 or r09')"
    third = pytester.runpytest(*preds, "-rs")
    third.assert_outcomes(passed=8 + 5, failed=4, skipped=1)
    runs = entries(pytester)
    assert len(runs) == 3
    bench_entry = results(pytester)["benchmarks"][0]
    gate = bench_entry["gates"]["no_regression"]
    assert gate["status"] == "pass" and gate["details"]["baseline"] == runs[0].name  # not the -k run
    comparison = bench_entry["comparison_with_previous"]
    assert comparison["baseline"] == runs[0].name and comparison["statistics"]["n"] == 12
    # Each history entry is the document its run wrote as results.json.
    assert history.read_entry(runs[1]) == partial and history.read_entry(runs[2]) == results(pytester)
    capsys.readouterr()  # the runs' own output
    assert main(["history", "--results", str(pytester.path / "results.json")]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("       ")]
    assert [line.split()[0] for line in listed] == ["1", "2", "3"]
    assert "[partial: 2 of 12 rows selected (-k 'r03 or r09')]" in listed[1]


@pytest.mark.parametrize(
    ("selection", "how", "selected"),
    [
        (["bench.jsonl::r01", "bench.jsonl::r02"], "node ids on the command line", 2),
        (["-m", "hard"], "-m 'hard'", 4),
        (["--deselect", "bench.jsonl::r00"], "--deselect", 11),
    ],
    ids=["node-ids", "marker", "deselect"],
)
def test_every_way_of_running_part_of_a_benchmark_is_partial(
    pytester: pytest.Pytester, selection: list[str], how: str, selected: int
) -> None:
    preds = bench(pytester)
    pytester.runpytest(*preds, *selection)
    document = results(pytester)
    assert document["complete"] is False
    assert document["incomplete_reason"] == f"{selected} of 12 rows selected ({how})"


def test_deselecting_gates_alone_leaves_a_run_complete(pytester: pytest.Pytester) -> None:
    preds = bench(pytester)
    pytester.runpytest(*preds, "-m", "not gate").assert_outcomes(passed=8, failed=4, deselected=5)
    assert results(pytester)["complete"] is True
    # With a history, no_regression is one more gate deselected.
    pytester.runpytest(*preds, "-m", "not gate").assert_outcomes(passed=8, failed=4, deselected=6)
    assert results(pytester)["complete"] is True


def test_a_selection_under_xdist_says_the_same(pytester: pytest.Pytester) -> None:
    preds = bench(pytester)
    pytester.makefile(".jsonl", other=jsonl(ROWS[:3]))  # all deselected: still counted in the total
    pytester.runpytest(*preds, "-k", "bench and (r03 or r09)", "-n", "2")
    assert results(pytester)["incomplete_reason"] == "2 of 15 rows selected (-k 'bench and (r03 or r09)')"
    pytester.runpytest(*preds, "-k", "bench and (r03 or r09)", "--llmeval-results=serial.json")
    assert results(pytester, "serial.json")["incomplete_reason"] == results(pytester)["incomplete_reason"]


INTERRUPTER = """
import os

from pytest_llmeval.scorers import SCORERS, ScorerSpec
from pytest_llmeval.scorers.exact_match import score


def interrupter(prediction, expected, config):
    if config.get("stop") and os.path.exists("stop.flag"):
        if os.environ.get("PYTEST_XDIST_WORKER"):
            os.kill(os.getpid(), 9)  # an xdist worker killed mid-row
        raise KeyboardInterrupt  # Ctrl-C in a row
    return score(prediction, expected, {})


SCORERS["interrupter"] = ScorerSpec(validate=lambda config: None, score=interrupter)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["ctrl-c", "killed-worker"])
def test_an_interrupted_run_is_kept_and_never_a_baseline(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makeconftest(INTERRUPTER)
    rows = [{**r, "evaluation_type": "interrupter", "evaluation_config": {}} for r in ROWS]
    rows[6]["evaluation_config"] = {"stop": True}
    pytester.makefile(".jsonl", bench=jsonl(rows))
    preds = [{"id": f"r{i:02d}", "prediction": f"a{i}", "base_prediction": "no"} for i in range(12)]
    (pytester.path / "preds.txt").write_text(jsonl(preds))
    args = ["--llmeval-predictions=preds.txt", "--llmeval-batch-size=2", "-rs", *workers]
    (pytester.path / "stop.flag").write_text("")
    # A subprocess: the conftest adds to the scorer registry, which must not leak into this process.
    pytester.runpytest_subprocess(*args, timeout=300)
    runs = entries(pytester)
    assert len(runs) == 1
    stopped = history.read_entry(runs[0])
    assert stopped is not None and stopped["complete"] is False
    assert ("interrupted" if not workers else "11 of 12 rows finished") in stopped["incomplete_reason"]
    (pytester.path / "stop.flag").unlink()
    after = pytester.runpytest_subprocess(*args, timeout=300)
    gate = results(pytester)["benchmarks"][0]["gates"]["no_regression"]
    assert gate["status"] == "skip"
    name = results(pytester)["adapter_name"]  # the predictions' file and a hash of their outputs
    assert name.startswith("preds.txt@")
    assert gate["message"] == (
        f"no baseline to compare against: no complete earlier run of adapter '{name}' on bench.jsonl "
        f"in {history.history_dir(pytester.path / 'results.json')}: 1 partial run(s), which are never a "
        "baseline"
    ), after.stdout.str()[-3000:]
    assert len(entries(pytester)) == 2


def test_serial_and_xdist_write_the_same_history_entry(pytester: pytest.Pytester) -> None:
    preds = bench(pytester)
    pytester.runpytest(*preds, "--llmeval-results=serial/results.json")
    pytester.runpytest(*preds, "--llmeval-results=xdist/results.json", "-n", "2")
    (serial,), (parallel,) = entries(pytester, "serial/results.json"), entries(pytester, "xdist/results.json")
    a, b = history.read_entry(serial), history.read_entry(parallel)
    assert a is not None and b is not None
    assert a["timestamp"] and b["timestamp"]
    assert without_clocks(a) == without_clocks(b)


def test_retention_and_no_history(pytester: pytest.Pytester) -> None:
    preds = bench(pytester)
    pytester.runpytest(*preds)  # complete: the baseline, kept whatever the retention
    for _ in range(3):
        pytester.runpytest(*preds, "-k", "r01", "--llmeval-history-keep=2")
    runs = entries(pytester)
    assert len(runs) == 3  # the first (a baseline) and the two newest
    assert history.read_entry(runs[0])["complete"] is True  # type: ignore[index]
    result = pytester.runpytest(*preds, "--llmeval-history-keep=1")
    result.stdout.fnmatch_lines(["history: *(3 older run(s) removed: --llmeval-history-keep)*"])
    assert len(entries(pytester)) == 1
    pytester.runpytest(*preds, "--llmeval-no-history")
    assert len(entries(pytester)) == 1
    usage = pytester.runpytest(*preds, "--llmeval-history-keep=0")
    assert usage.ret == pytest.ExitCode.USAGE_ERROR


def test_history_dir_sits_beside_results_json(pytester: pytest.Pytester) -> None:
    preds = bench(pytester)
    pytester.runpytest(*preds, "--llmeval-results=out/r.json")
    folder = pytester.path / "out" / ".llmeval" / "history"
    assert [p.parent for p in entries(pytester, "out/r.json")] == [folder]
    assert not (pytester.path / ".llmeval").exists()


def test_no_history_falls_back_to_the_complete_results_json_it_replaces(pytester: pytest.Pytester) -> None:
    preds = bench(pytester)
    pytester.runpytest(*preds, "--llmeval-no-history")
    assert not (pytester.path / ".llmeval").exists()
    pytester.runpytest(*preds, "--llmeval-no-history")
    gate = results(pytester)["benchmarks"][0]["gates"]["no_regression"]
    assert gate["status"] == "pass" and gate["details"]["baseline"] == "results.json"
    pytester.runpytest(*preds, "--llmeval-no-history", "-k", "r01")  # beside results.json: it stays
    pytester.runpytest(*preds, "--llmeval-no-history")
    gate = results(pytester)["benchmarks"][0]["gates"]["no_regression"]
    assert gate["status"] == "pass" and gate["details"]["baseline"] == "results.json"
    pytester.runpytest(*preds, "--llmeval-no-history", "-k", "r01", "--llmeval-overwrite")  # now partial
    pytester.runpytest(*preds, "--llmeval-no-history")
    gate = results(pytester)["benchmarks"][0]["gates"]["no_regression"]
    assert gate["status"] == "skip" and "1 partial run(s), which are never a baseline" in gate["message"]
    assert os.fspath(pytester.path / "results.json") in gate["message"]
