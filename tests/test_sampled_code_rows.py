"""Sampled and completion-style code rows through the plugin, on real models: n seeded samples per row repeat
exactly (run to run, serially and with -n 2, from the generation cache), differ from each other, and are keyed
by their temperature and seed; a completion-style row's prompt is its input as written (no chat template),
continued with the whitespace the code needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row, without_timing

pytest_plugins = ["pytester"]

PREFIX = 'def add(a, b):\n    """Return a + b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n"


def code_row(row_id: str, **config: Any) -> dict[str, Any]:
    return row(
        row_id,
        instruction="Complete the function.",
        input=PREFIX,
        expected="    return a + b\n",
        evaluation_type="code_execution",
        evaluation_config={
            "language": "python",
            "prompt_mode": "completion",
            "test": TEST,
            "entry_point": "add",
            "timeout_seconds": 5,
            **config,
        },
    )


def rows_by_id(path: Path) -> dict[str, dict[str, Any]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {r["id"]: r for b in doc["benchmarks"] for r in b["rows"]}


def samples_of(record: dict[str, Any]) -> list[str]:
    return [s["code"] for s in record["models"]["base"]["score"]["per_sample"]]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def test_sampled_rows_repeat_exactly_and_are_cached_by_seed(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    rows = [
        code_row("greedy", max_new_tokens=6),
        code_row("sampled", max_new_tokens=6, samples=4, k=[1, 2], temperature=1.0),
        code_row("hot", max_new_tokens=6, samples=4, k=[1, 4], temperature=2.0),
    ]
    pytester.makefile(".jsonl", code=jsonl(rows))
    args = [f"--base-model={tiny_model}", "code.jsonl", "-m", "not gate"]
    pytester.runpytest(*args, "--llmeval-results=first.json")
    first = rows_by_id(pytester.path / "first.json")
    sampled = samples_of(first["sampled"])
    assert len(sampled) == 4 and len(set(sampled)) > 1, sampled  # a random model at temperature 1
    assert samples_of(first["hot"]) != sampled  # another temperature, other draws
    # The completion continues the prompt as written: the program starts with the row's input.
    assert all(code.startswith(PREFIX) for code in sampled)
    doc = json.loads((pytester.path / "first.json").read_text(encoding="utf-8"))
    assert doc["inference_config"]["cache"]["misses"]["base"] == 1 + 4 + 4

    pytester.runpytest(*args, "--llmeval-results=again.json")
    again = json.loads((pytester.path / "again.json").read_text(encoding="utf-8"))
    assert again["inference_config"]["cache"]["hits"]["base"] == 9
    assert again["inference_config"]["weights_loaded"] is False
    for name in ("greedy", "sampled", "hot"):
        assert without_timing(rows_by_id(pytester.path / "again.json")[name]["models"]) == without_timing(
            first[name]["models"]
        )

    # Without the cache, in two worker processes: the same samples (seeded per row and sample, not per
    # batch or worker).
    pytester.runpytest(*args, "--llmeval-no-cache", "-n", "2", "--llmeval-results=xdist.json")
    xdist = rows_by_id(pytester.path / "xdist.json")
    for name in ("greedy", "sampled", "hot"):
        assert without_timing(xdist[name]["models"]) == without_timing(first[name]["models"])


@pytest.mark.slow
def test_real_model_completion_rows_with_samples(pytester: pytest.Pytester) -> None:
    """The embedded SmolLM2 continues a function prefix (completion mode) and samples it: the recorded
    programs start with the prefix as written, the samples differ, and pass@k is recorded for each k.
    (That seeded samples repeat is checked on the tiny model above: one real-model run is enough here.)"""
    pytester.makefile(
        ".jsonl",
        code=jsonl([code_row("add", max_new_tokens=16, samples=3, k=[1, 3], temperature=0.8)]),
    )
    pytester.runpytest("code.jsonl", "-m", "not gate", "--llmeval-no-cache", "--llmeval-results=one.json")
    one = rows_by_id(pytester.path / "one.json")["add"]
    programs = samples_of(one)
    assert all(code.startswith(PREFIX) for code in programs)
    assert len(set(programs)) > 1, programs
    score = one["models"]["base"]["score"]
    assert score["samples"] == 3 and set(score["pass_at_k"]) == {"1", "3"}
    assert score["temperature"] == 0.8
