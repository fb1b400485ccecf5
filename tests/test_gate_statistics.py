"""Gate statistics through pytester on rows the tiny adapter and base really disagree on.

Each row's expected output is set to what the tiny model answers with the adapter on, or with it off, or
to neither, so every benchmark has known discordant counts: the exact McNemar p the gates must report is
computed here independently, with scipy's binomial test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row, without_clocks

# Exact comparison of the raw output: the expected output is the prediction, character for character.
CONFIG = {"max_new_tokens": 4, "normalize": False, "case_sensitive": True}
NEITHER = "what neither model says"

# Per benchmark: how many rows only the adapter gets right (b), only the base (c), and neither.
# In-domain (--llmeval-domain task*): better_than_base. Out of domain: no_degradation.
DESIGN = {
    "task": (8, 0, 4),  # p = 2 * 0.5**8 = 0.0078 < 0.05: pass
    "task_weak": (6, 2, 4),  # adapter better (6/12 against 2/12), p = 0.29: fail, not significant
    "general_warn": (1, 2, 9),  # drop 1/12 = 0.083, between warn (0.05) and fail (0.10): warn
    "general_fail": (1, 3, 8),  # drop 2/12 = 0.167 > 0.10: fail
}
N_PROMPTS = sum(sum(counts) for counts in DESIGN.values())


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    # Without an ini file, pytester's --basetemp argument would make the rootdir the parent folder.
    pytester.makeini("[pytest]\n")


@pytest.fixture(scope="module")
def answers(tiny_model: Path, tiny_adapter: Path) -> list[tuple[str, str, str]]:
    """(instruction, adapter's output, base's output) for prompts on which the two differ."""
    from pytest_llmeval.models import LLM, ModelSpec, load

    loaded = load(ModelSpec(base_model=str(tiny_model), adapter=tiny_adapter))
    prompts = [f"Question {i}?" for i in range(N_PROMPTS + 12)]
    outputs = {
        side: LLM(loaded, adapter=side, max_new_tokens=4, batch_size=8).generate(prompts)
        for side in (True, False)
    }
    differing = [
        (p, a, b)
        for p, a, b in zip(prompts, outputs[True], outputs[False], strict=True)
        if a != b and a and b
    ]
    assert len(differing) >= N_PROMPTS, "the tiny adapter should change most outputs"
    return differing[:N_PROMPTS]


def write_benchmarks(pytester: pytest.Pytester, answers: list[tuple[str, str, str]]) -> None:
    """One file per DESIGN entry; its kinds of rows mixed, so that each chunk of 5 holds several."""
    prompts = iter(answers)
    for name, (b, c, neither) in DESIGN.items():
        winners = ["adapter"] * b + ["base"] * c + ["neither"] * neither
        winners = winners[0::2] + winners[1::2]
        rows = []
        for i, winner in enumerate(winners):
            instruction, adapter_says, base_says = next(prompts)
            expected = {"adapter": adapter_says, "base": base_says, "neither": NEITHER}[winner]
            rows.append(
                row(f"{name}{i:02d}", instruction=instruction, expected=expected, evaluation_config=CONFIG)
            )
        pytester.makefile(".jsonl", **{name: jsonl(rows)})


def mcnemar_p(b: int, c: int) -> float:
    from scipy.stats import binomtest

    return float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue) if b + c else 1.0


def benchmarks(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return {b["benchmark_file"].removesuffix(".jsonl"): b for b in document["benchmarks"]}


def without_timestamp(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return without_clocks(document)


def check(bench: dict[str, Any]) -> None:
    """Every benchmark's statistics and verdict are the ones DESIGN makes."""
    assert set(bench) == set(DESIGN)
    for name, (b, c, neither) in DESIGN.items():
        n = b + c + neither
        stats = bench[name]["statistics"]
        assert stats["kind"] == "binary" and stats["test"] == "mcnemar_exact" and stats["n"] == n, name
        assert stats["discordant"] == [b, c], name
        assert stats["mean_adapter"] == pytest.approx(b / n) and stats["mean_base"] == pytest.approx(c / n)
        assert stats["p_value"] == pytest.approx(mcnemar_p(b, c), rel=1e-12, abs=0), name
        assert bench[name]["significance_test"]["p_value"] == stats["p_value"]
        assert bench[name]["significance_test"]["significant"] is (stats["p_value"] < 0.05)
    assert [bench[name]["domain"] for name in DESIGN] == ["in", "in", "out", "out"]
    verdicts = {
        name: {gate: verdict["status"] for gate, verdict in bench[name]["gates"].items()} for name in DESIGN
    }
    assert verdicts == {
        "task": {"better_than_base": "pass"},
        "task_weak": {"better_than_base": "fail"},
        "general_warn": {"no_degradation": "warn"},
        "general_fail": {"no_degradation": "fail"},
    }


def test_known_discordant_rows_give_the_exact_mcnemar_p_and_verdicts(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, answers: list[tuple[str, str, str]]
) -> None:
    # The design's premises: 8 adapter-only rows of 8 discordant are significant, 6 of 8 are not.
    assert mcnemar_p(8, 0) == pytest.approx(0.0078125) and mcnemar_p(6, 2) == pytest.approx(0.2890625)
    write_benchmarks(pytester, answers)
    args = [
        *model_args(tiny_model, tiny_adapter, gates=True),
        "--llmeval-domain=task*",
        "--llmeval-batch-size=5",
        "--llmeval-no-history",  # the runs are peers: none is another's baseline (no_regression)
        "-k",
        "not gate or better_than_base or no_degradation",
    ]
    serial = pytester.runpytest(*args, "--llmeval-results=serial.json")
    check(benchmarks(pytester, "serial.json"))
    # Rows pass when the adapter says the expected output: 8 + 6 + 1 + 1 of 48; gates: one of each file.
    serial.assert_outcomes(passed=16 + 2, failed=32 + 2, deselected=4 * 4)
    serial.stdout.fnmatch_lines(
        [
            "*general_fail.jsonl: gate no_degradation failed: adapter 0.083 vs base 0.250: -0.167 (*): "
            "drop 0.167 > fail threshold 0.100",
            "*task_weak.jsonl: gate better_than_base failed: adapter is better than base but not "
            # Two in-domain files, two comparisons in the gates' family: Holm leaves the larger p as is.
            "significantly: adapter 0.500 vs base 0.167: +0.333 (*), McNemar exact p=0.29, "
            "Holm-adjusted over 2 comparisons p=0.29 >= 0.05*",
        ]
    )
    serial.stdout.fnmatch_lines(
        [
            "*general_warn.jsonl:1: LLMEvalGateWarning: gate no_degradation: adapter 0.083 vs base 0.167: "
            "-0.083 (*): drop 0.083 > warn threshold 0.050 (fails above 0.100)"
        ]
    )

    parallel = pytester.runpytest(*args, "-n", "2", "--llmeval-results=parallel.json")
    check(benchmarks(pytester, "parallel.json"))
    # Under xdist the workers deselect (the controller counts none) and load the model (whose library's
    # own warnings then show): the tests' outcomes only.
    parallel.assert_outcomes(passed=16 + 2, failed=32 + 2)
    parallel.stdout.fnmatch_lines(["*general_warn.jsonl:1: LLMEvalGateWarning: gate no_degradation:*"])
    a, b = (without_timestamp(pytester, name) for name in ("serial.json", "parallel.json"))
    assert a == b

    # Without the gates, the recorder computes the same statistics from the rows.
    rows_only = pytester.runpytest(*args[:-2], "-m", "not gate", "--llmeval-results=rows.json")
    rows_only.assert_outcomes(passed=16, failed=32, deselected=5 * 4)
    serial_bench, bench = benchmarks(pytester, "serial.json"), benchmarks(pytester, "rows.json")
    for name in DESIGN:
        assert bench[name]["gates"] == {}, name
        for block in ("statistics", "significance_test"):
            assert bench[name][block] == serial_bench[name][block], (name, block)
