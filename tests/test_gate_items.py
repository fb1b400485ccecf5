"""Gates as test items, through pytester: collection, selection, verdicts, results.json, versioning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

# Six rows: two of them edge cases, difficulty 2/3/1.
ROWS = [
    row("r1", difficulty="easy", tags=["edge"]),
    row("r2", instruction="Count to three.", difficulty="medium", tags=["edge"]),
    row("r3", instruction="Name a colour.", difficulty="hard"),
    row("r4", instruction="Name a fruit.", input="Any fruit.", difficulty="medium"),
    row("r5", instruction="Spell cat.", difficulty="easy"),
    row("r6", instruction="Say goodbye.", difficulty="medium"),
]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def args(tiny_model: Path, tiny_adapter: Path | None = None, *extra: str) -> list[str]:
    out = [f"--base-model={tiny_model}", "-p", "no:cacheprovider", "-rs", *extra]
    if tiny_adapter is not None:
        out.append(f"--adapter={tiny_adapter}")
    return out


def doc(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    return data


def test_each_file_gets_its_gates_as_items(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", task=jsonl(ROWS), other=jsonl(ROWS))
    result = pytester.runpytest("--collect-only", "-q", "--llmeval-domain", "task.jsonl")
    gates = [line for line in result.outlines if "::gate::" in line]
    assert gates == [
        "other.jsonl::gate::no_degradation",
        "other.jsonl::gate::size",
        "other.jsonl::gate::difficulty_mix",
        "other.jsonl::gate::edge_cases",
        "other.jsonl::gate::held_out",
        "task.jsonl::gate::better_than_base",
        "task.jsonl::gate::size",
        "task.jsonl::gate::difficulty_mix",
        "task.jsonl::gate::edge_cases",
        "task.jsonl::gate::held_out",
    ]
    # After every row, whatever the file order.
    assert result.outlines.index(gates[0]) > max(i for i, line in enumerate(result.outlines) if "::r" in line)
    selected = pytester.runpytest(
        "--collect-only", "-q", "-k", "better_than_base", "--llmeval-domain", "task*"
    )
    assert [line for line in selected.outlines if "::" in line] == ["task.jsonl::gate::better_than_base"]
    rows_only = pytester.runpytest("--collect-only", "-q", "-m", "not gate")
    assert not [line for line in rows_only.outlines if "::gate::" in line]


def test_gates_with_an_adapter(pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    extra = ("--llmeval-min-rows", "10", "--llmeval-min-edge-cases", "2", "-k", "gate")
    result = pytester.runpytest(*args(tiny_model, tiny_adapter, *extra))
    # size fails (6 < 10); -k deselected every row, so no_degradation says so instead of passing;
    # held_out has no training data.
    result.assert_outcomes(passed=2, failed=1, skipped=2, deselected=6)
    result.stdout.fnmatch_lines(
        ["*bench.jsonl: gate size failed: benchmark has 6 rows, fewer than the minimum 10"]
    )
    result.stdout.fnmatch_lines(["SKIPPED*no row of bench.jsonl ran in this session*"])
    result.stdout.fnmatch_lines(["SKIPPED*held_out*"])


def test_comparison_gates_read_the_rows(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    extra = ("--llmeval-min-rows", "5", "--llmeval-min-edge-cases", "2", "--llmeval-domain", "bench*")
    result = pytester.runpytest(*args(tiny_model, tiny_adapter, *extra))
    # Failed: the 6 rows and better_than_base; passed: size, difficulty_mix, edge_cases; skipped: held_out.
    result.assert_outcomes(failed=7, passed=3, skipped=1)
    result.stdout.fnmatch_lines(
        ["*gate better_than_base failed: adapter is not better than base: adapter 0.000 vs base 0.000*"]
    )
    data = doc(pytester)
    bench = data["benchmarks"][0]
    assert bench["domain"] == "in"
    assert bench["gates"]["better_than_base"]["status"] == "fail"
    assert bench["statistics"]["n"] == 6 and bench["statistics"]["p_value"] == 1.0
    assert set(bench["significance_test"]) == {
        "t_statistic",
        "p_value",
        "effect_size",
        "effect_size_pooled_d",
        "confidence_interval",
        "significant",
        "method",
        # The gate decided on the p-value adjusted over the run's in-domain comparisons (one here).
        "p_value_adjusted",
        "adjustment",
        "family",
        "family_size",
    }
    assert bench["significance_test"]["p_value_adjusted"] == 1.0
    assert bench["significance_test"]["family_size"] == 1
    assert "McNemar" in bench["significance_test"]["method"]
    # The only benchmark is in-domain: the top level is its LocoLLM document, and nothing is out of domain.
    assert data["benchmark_file"] == "bench.jsonl" and data["out_of_domain"] is None
    assert data["top_level"]["reason"].startswith("the adapter's in-domain benchmark")


def test_without_adapter_the_comparison_gate_is_skipped(pytester: pytest.Pytester, tiny_model: Path) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    result = pytester.runpytest(*args(tiny_model, None, "-k", "no_degradation or r1"))
    result.assert_outcomes(failed=1, skipped=1, deselected=9)
    result.stdout.fnmatch_lines(["SKIPPED*no adapter: nothing to compare*"])


def test_held_out_fails_on_a_training_copy(pytester: pytest.Pytester, tiny_model: Path) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    train = pytester.path / "train" / "data.jsonl"
    train.parent.mkdir()
    train.write_text(jsonl([{"instruction": "name a FRUIT", "input": "Any fruit", "output": "apple"}]))
    result = pytester.runpytest(*args(tiny_model, None, "-k", "held_out", f"--llmeval-train-data={train}"))
    result.assert_outcomes(failed=1, deselected=10)
    result.stdout.fnmatch_lines(["*gate held_out failed:*r4*"])


def test_difficulty_mix_warns_and_passes(pytester: pytest.Pytester, tiny_model: Path) -> None:
    pytester.makefile(
        ".jsonl", bench=jsonl([row(f"e{i}", difficulty="easy", instruction=f"Q{i}") for i in range(6)])
    )
    result = pytester.runpytest(*args(tiny_model, None, "-k", "difficulty_mix"))
    result.assert_outcomes(passed=1, deselected=10)
    result.stdout.fnmatch_lines(["*bench.jsonl:1: LLMEvalGateWarning: gate difficulty_mix: easy 100%*"])


def test_no_regression_against_the_previous_results(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    first = pytester.runpytest(*args(tiny_model, tiny_adapter, "-m", "not gate"))
    first.assert_outcomes(failed=6)
    # The results.json of the first run is the previous version for the second.
    second = pytester.runpytest(*args(tiny_model, tiny_adapter, "-k", "no_regression or not gate"))
    second.assert_outcomes(failed=6, passed=1, deselected=5)
    data = doc(pytester)
    assert data["previous_version"] == {"version": "0.0.1", "adapter_score": 0.0, "base_model_score": 0.0}
    assert data["current_version"] == {"version": "0.0.1", "adapter_score": 0.0, "base_model_score": 0.0}
    bench = data["benchmarks"][0]
    assert bench["comparison_with_previous"]["comparable"] is True
    assert bench["gates"]["no_regression"]["status"] == "pass"
    # A changed benchmark is not compared: no earlier run holds this content.
    (pytester.path / "bench.jsonl").write_text(jsonl([*ROWS, row("r7")]))
    third = pytester.runpytest(*args(tiny_model, tiny_adapter, "-k", "no_regression or not gate"))
    third.assert_outcomes(failed=7, skipped=1, deselected=5)
    third.stdout.fnmatch_lines(
        [
            "SKIPPED*no baseline to compare against: bench.jsonl changed since the last complete run of "
            "adapter 'tiny-adapter' (*_tiny-adapter_0.0.1.json: sha256:* -> sha256:*); runs on other "
            "content are never compared"
        ]
    )


def test_bad_thresholds_are_usage_errors(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--llmeval-warn-drop", "0.2", "--llmeval-fail-drop", "0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmeval-fail-drop 0.1 is below --llmeval-warn-drop 0.2*"])
    result = pytester.runpytest("--llmeval-previous", "nothing.json")
    result.stderr.fnmatch_lines(["*--llmeval-previous nothing.json: no such file*"])
