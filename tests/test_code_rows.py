"""code_execution rows through the plugin: saved predictions (no model) and the real embedded model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row, strict_required

REPO = Path(__file__).resolve().parent.parent

SUM = {
    "test_cases": [{"input": "1 2\n", "expected_output": "3"}, {"input": "10 -4\n", "expected_output": "6"}]
}


def code_row(row_id: str, **config: Any) -> dict[str, Any]:
    return row(
        row_id,
        instruction="Write a Python program that reads two integers from one line and prints their sum.",
        expected="",
        evaluation_type="code_execution",
        evaluation_config={"language": "python", "timeout_seconds": 2, **SUM, **config},
    )


PREDICTIONS = {
    "right": "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
    "wrong": "a, b = map(int, input().split())\nprint(a - b)",
    "half": "a, b = map(int, input().split())\nprint(3 if a == 1 else 0)",
    "hang": "while True:\n    pass",
    "broken": "print(",
}


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


@pytest.fixture
def code_bench(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", code=jsonl([code_row(i) for i in PREDICTIONS]))
    pytester.makefile(
        ".jsonl", preds="".join(json.dumps({"id": i, "prediction": p}) + "\n" for i, p in PREDICTIONS.items())
    )


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.usefixtures("code_bench")
def test_code_rows_score_in_the_sandbox(pytester: pytest.Pytester, workers: list[str]) -> None:
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "code.jsonl", "-m", "not gate", *workers)
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines(["*case 0: wrong_output: stdout '-1', expected '3'*"])
    doc = json.loads((pytester.path / "results.json").read_text())
    rows = {r["id"]: r["models"]["base"]["score"] for r in doc["benchmarks"][0]["rows"]}
    assert {i: s["value"] for i, s in rows.items()} == {
        "right": 1.0,
        "wrong": 0.0,
        "half": 0.5,
        "hang": 0.0,
        "broken": 0.0,
    }
    assert rows["half"]["pass_at_1"] == 0.0 and rows["right"]["pass_at_1"] == 1.0
    assert [c["verdict"] for c in rows["hang"]["cases"]] == ["timeout", "timeout"]
    assert rows["broken"]["verdicts"] == {"compile_error": 2}
    # Strict where this machine must give it (bubblewrap installed, or CI's LLMEVAL_REQUIRE_STRICT=1).
    required, why = strict_required()
    expected = ("strict",) if required else ("strict", "basic")
    assert doc["sandbox"]["level"] in expected, (doc["sandbox"], why)
    assert doc["sandbox"] == rows["right"]["isolation"]


@pytest.mark.usefixtures("code_bench")
def test_strict_without_the_means_skips_code_rows(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Without bubblewrap on PATH, strict skips code rows and says why; auto falls back, with a warning."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    strict = _run(pytester, env, "--llmeval-sandbox=strict", "-rs")
    strict.assert_outcomes(skipped=5)
    strict.stdout.fnmatch_lines(["*--llmeval-sandbox strict: code is not run without it*"])
    auto = _run(pytester, env, "-W", "always")
    auto.assert_outcomes(passed=1, failed=4)
    auto.stdout.fnmatch_lines(["*LLMEvalWarning: code_execution rows run with basic isolation only*"])
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["sandbox"]["level"] == "basic" and "network-namespace" in doc["sandbox"]["missing"]


def _run(pytester: pytest.Pytester, env: dict[str, str], *args: str) -> pytest.RunResult:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--llmeval-predictions=preds.jsonl"]
    cmd += ["code.jsonl", "-m", "not gate", *args]
    proc = subprocess.run(cmd, cwd=pytester.path, env=env, capture_output=True, text=True, timeout=300)
    return pytest.RunResult(proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(), 0.0)


@pytest.mark.slow
def test_real_model_writes_code_that_runs(tmp_path: Path) -> None:
    """The embedded model answers code rows; its programs run in the sandbox and get verdicts, not errors."""
    bench = tmp_path / "code.jsonl"
    rows = [
        row(
            "hello",
            instruction="Write a Python program that prints Hello, World! Reply with the code only.",
            expected="",
            evaluation_type="code_execution",
            evaluation_config={
                "language": "python",
                "timeout_seconds": 5,
                "max_new_tokens": 64,
                "test_cases": [{"input": "", "expected_output": "Hello, World!"}],
            },
        ),
        {**code_row("sum"), "evaluation_config": {"language": "python", "max_new_tokens": 96, **SUM}},
    ]
    bench.write_text(jsonl(rows))
    out = tmp_path / "results.json"
    cmd = [sys.executable, "-m", "pytest", str(bench), "--adapter=adapters/date-iso", "-m", "not gate"]
    cmd += ["-q", "-p", "no:cacheprovider", f"--llmeval-results={out}", f"--rootdir={tmp_path}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    for record in doc["benchmarks"][0]["rows"]:
        assert record["error"] is None
        for who in ("base", "adapter"):
            score = record["models"][who]["score"]
            assert score["code"].strip() and all(c["verdict"] != "sandbox_error" for c in score["cases"])
    hello = next(r for r in doc["benchmarks"][0]["rows"] if r["id"] == "hello")
    assert hello["models"]["base"]["score"]["value"] == 1.0, hello["models"][
        "base"
    ]  # a 135M instruct model can print a greeting
