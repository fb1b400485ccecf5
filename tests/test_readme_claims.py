"""Claims of the documentation (README.md and docs/) that no other test checks, each tested as stated.

- "change the patterns with the ini option `llmeval_files`": another pattern collects, and `-k` selects;
- saved predictions' `"benchmark"` field ("a path suffix, when ids repeat across files");
- `pytest --cache-clear` "empties" the generation cache "with pytest's cache";
- "xdist workers starting together wait on a file lock while one converts" the embedded model;
- the adapter's `train.jsonl` (or `data/train.jsonl`, or --llmeval-train-data) "is then never collected as
  a benchmark";
- `--llmeval-gate point` "passes on the point estimate alone";
- `no_regression`: "the adapter is not significantly worse than its baseline on the same rows" (it fails
  when it is);
- JUnit properties "`llmeval_*_perplexity` for perplexity rows";
- `python -m pytest_llmeval.ci check results.json` "exits 1 only when a gate failed or the run is
  incomplete (and 2 when the file cannot be read)".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def results(pytester: pytest.Pytester, name: str = "results.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


def predictions(pytester: pytest.Pytester, lines: list[dict[str, Any]], name: str = "preds.txt") -> str:
    (pytester.path / name).write_text(jsonl(lines))
    return f"--llmeval-predictions={name}"


def nodes(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and " " not in line]


# --- llmeval_files -------------------------------------------------------------------------------------


def test_llmeval_files_patterns_collect_and_k_selects(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllmeval_files = *.bench\n")
    rows = [row(f"r{i}", instruction=f"Q{i}", expected=f"a{i}") for i in range(3)]
    pytester.makefile(".bench", tasks=jsonl(rows))
    pytester.makefile(".jsonl", ignored=jsonl(rows))  # *.jsonl is the default pattern, replaced here
    collected = pytester.runpytest("--collect-only", "-q", "-m", "not gate")
    assert nodes(collected) == ["tasks.bench::r0", "tasks.bench::r1", "tasks.bench::r2"]
    assert collected.ret == 0
    selected = pytester.runpytest("--collect-only", "-q", "-k", "r1 and not gate")
    assert nodes(selected) == ["tasks.bench::r1"]
    # And they run as rows: scored, and in results.json under their file.
    preds = predictions(pytester, [{"id": f"r{i}", "prediction": f"a{i}"} for i in range(3)])
    pytester.runpytest(preds, "-k", "r1 and not gate").assert_outcomes(passed=1, deselected=7)
    (bench,) = results(pytester)["benchmarks"]
    assert bench["benchmark_file"] == "tasks.bench" and [r["id"] for r in bench["rows"]] == ["r1"]


# --- the predictions' benchmark field ---------------------------------------------------------------------


def two_files_one_id(pytester: pytest.Pytester, *folders: str) -> None:
    for folder in folders:
        (pytester.path / folder).mkdir()
        (pytester.path / folder / "bench.jsonl").write_text(
            jsonl([row("q1", instruction=f"Which folder? ({folder})", expected=folder)])
        )


def test_predictions_benchmark_field_tells_repeated_ids_apart(pytester: pytest.Pytester) -> None:
    two_files_one_id(pytester, "one", "two")
    preds = predictions(
        pytester,
        [
            {"id": "q1", "prediction": "one", "benchmark": "one/bench.jsonl"},
            {"id": "q1", "prediction": "wrong", "benchmark": "two/bench.jsonl"},
        ],
    )
    result = pytester.runpytest(preds, "-m", "not gate")
    result.assert_outcomes(passed=1, failed=1)
    outputs = {
        b["benchmark_file"]: b["rows"][0]["models"]["base"]["output"] for b in results(pytester)["benchmarks"]
    }
    assert outputs == {"one/bench.jsonl": "one", "two/bench.jsonl": "wrong"}
    # A prediction without the field is for every file with that id: a row it shares with another
    # prediction cannot be placed, and says how to fix it.
    preds = predictions(
        pytester,
        [{"id": "q1", "prediction": "one"}, {"id": "q1", "prediction": "x", "benchmark": "two/bench.jsonl"}],
    )
    result = pytester.runpytest(preds, "-m", "not gate")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*two/bench.jsonl:1: id 'q1' is on lines 1, 2 of preds.txt: add a 'benchmark' field*"]
    )


def test_predictions_benchmark_is_a_path_suffix_not_a_string_suffix(pytester: pytest.Pytester) -> None:
    two_files_one_id(pytester, "a", "data")
    preds = predictions(
        pytester,
        [
            {"id": "q1", "prediction": "a", "benchmark": "a/bench.jsonl"},
            {"id": "q1", "prediction": "data", "benchmark": "data/bench.jsonl"},
        ],
    )
    pytester.runpytest(preds, "-m", "not gate").assert_outcomes(passed=2)


# --- --cache-clear ----------------------------------------------------------------------------------------


def test_cache_clear_empties_the_generation_cache(pytester: pytest.Pytester, tiny_model: Path) -> None:
    """README: `pytest --cache-clear ...  # empties it with pytest's cache` (.pytest_cache/d/llmeval)."""
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}", input=f"item {i}") for i in range(3)]))
    args = [f"--base-model={tiny_model}", "-m", "not gate"]  # pytest's cacheprovider on, as users have it
    store = pytester.path / ".pytest_cache" / "d" / "llmeval"

    def cache_counts() -> dict[str, Any]:
        cache: dict[str, Any] = results(pytester)["inference_config"]["cache"]
        return {"hits": cache["hits"]["base"], "misses": cache["misses"]["base"], "dir": cache["dir"]}

    def stored() -> tuple[int, int]:
        """(outputs, recall files: what the tokenizer said, for a run that loads nothing; recall.py)."""
        files = list(store.rglob("*.json"))
        recalled = [f for f in files if f.parent.name == "recall"]
        return len(files) - len(recalled), len(recalled)

    pytester.runpytest(*args)
    assert cache_counts() == {"hits": 0, "misses": 3, "dir": str(store)}
    assert stored() == (3, 1)
    pytester.runpytest(*args)
    assert cache_counts()["hits"] == 3
    pytester.runpytest(*args, "--cache-clear")
    assert cache_counts() == {"hits": 0, "misses": 3, "dir": str(store)}  # everything generated again
    assert stored() == (3, 1)  # and stored again


# --- the GGUF conversion lock -----------------------------------------------------------------------------

CONVERTER = """
import json, os, sys, time
from pathlib import Path

import transformers  # noqa: F401  (embedded_model_dir's key; imported before both processes start)

from pytest_llmeval import models

log, me = Path(sys.argv[1]), sys.argv[2]


def note(event):
    with open(log, "a") as f:
        f.write(json.dumps([event, me, time.time()]) + "\\n")


def fake_convert(gguf, target):
    # The real conversion takes ~20 s: this one takes 1 s and writes the folder as it does (atomically).
    note("start")
    time.sleep(1.0)
    tmp = target.with_name(target.name + ".tmp-" + me)
    tmp.mkdir()
    (tmp / "config.json").write_text("{}")
    os.replace(tmp, target)
    note("end")


models._convert_gguf = fake_convert
log.with_name("ready-" + me).touch()
while len(list(log.parent.glob("ready-*"))) < 2:  # both processes reach the conversion together
    time.sleep(0.01)
path = models.embedded_model_dir()
note("returned " + str(path))
"""


def test_two_processes_converting_at_once_convert_once(tmp_path: Path) -> None:
    script = tmp_path / "convert.py"
    script.write_text(CONVERTER)
    log = tmp_path / "sync" / "log.jsonl"
    log.parent.mkdir()
    env = {**os.environ, "LLMEVAL_CACHE_DIR": str(tmp_path / "cache")}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(log), name], env=env, stderr=subprocess.PIPE, text=True
        )
        for name in ("p1", "p2")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    events = [json.loads(line) for line in log.read_text().splitlines()]
    starts = [e for e in events if e[0] == "start"]
    assert len(starts) == 1, events  # one converted...
    converter = starts[0][1]
    (end,) = [e[2] for e in events if e[0] == "end"]
    returned = {e[1]: (e[0].removeprefix("returned "), e[2]) for e in events if e[0].startswith("returned")}
    waiter = next(name for name in returned if name != converter)
    assert returned[waiter][1] >= end  # ...the other waited for it, and then used its folder
    paths = {path for path, _ in returned.values()}
    assert len(paths) == 1 and (Path(paths.pop()) / "config.json").is_file()
    assert Path(returned[waiter][0]).parent == tmp_path / "cache" / "models"


# --- the adapter's training data is not a benchmark -------------------------------------------------------


@pytest.mark.parametrize("where", ["train.jsonl", "data/train.jsonl", "--llmeval-train-data"])
def test_adapter_training_data_is_never_collected(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, where: str
) -> None:
    adapter = Path(shutil.copytree(tiny_adapter, pytester.path / "adapter"))
    benchmark = [row(f"e{i}", instruction=f"Question {i}?") for i in range(3)]
    (adapter / "eval").mkdir()
    (adapter / "eval" / "benchmark.jsonl").write_text(jsonl(benchmark))  # the LocoLLM layout: in-domain
    # Training rows are no benchmark rows (no id, `output`): collected, they would be a collection error.
    training = jsonl([{"instruction": "Question 1?", "input": "", "output": "one"}])
    extra = []
    if where == "--llmeval-train-data":
        path = pytester.path / "training" / "mine.jsonl"
        extra = [f"--llmeval-train-data={path}"]
    else:
        path = adapter / where
    path.parent.mkdir(exist_ok=True)
    path.write_text(training)
    args = [f"--base-model={tiny_model}", f"--adapter={adapter}", "-p", "no:cacheprovider", *extra]
    collected = pytester.runpytest("--collect-only", "-q", *args)
    assert collected.ret == 0, collected.stdout.str()
    assert not [n for n in nodes(collected) if "train" in n or "mine" in n]
    assert "adapter/eval/benchmark.jsonl::gate::better_than_base" in nodes(collected)
    # It is the training data the held_out gate reads: row e1 is in it.
    gated = pytester.runpytest("-k", "held_out", "-rf", *args)
    gated.assert_outcomes(failed=1, deselected=7)
    gated.stdout.fnmatch_lines(["*gate held_out failed:*e1*"])


# --- --llmeval-gate point ---------------------------------------------------------------------------------


def better_on_three(pytester: pytest.Pytester, adapter_right: int = 3) -> str:
    """12 rows: the base gets 6 right; the adapter those 6 and `adapter_right` more."""
    pytester.makefile(
        ".jsonl", bench=jsonl([row(f"r{i:02d}", expected=f"a{i}", tags=["edge"]) for i in range(12)])
    )
    return predictions(
        pytester,
        [
            {
                "id": f"r{i:02d}",
                "prediction": f"a{i}" if i < 6 + adapter_right else "no",
                "base_prediction": f"a{i}" if i < 6 else "no",
            }
            for i in range(12)
        ],
    )


def test_gate_point_passes_on_the_point_estimate_alone(pytester: pytest.Pytester) -> None:
    preds = better_on_three(pytester)
    # Each run writes its own results file, and no history: none is the baseline of another (no_regression).
    args = [
        preds,
        "--llmeval-domain=bench*",
        "-k",
        "better_than_base or not gate",
        "-rfs",
        "--llmeval-no-history",
    ]
    # 3 discordant rows, all for the adapter: exact McNemar p = 0.25, not significant. (The adapter gets
    # 3 rows wrong: those fail whatever the gate.)
    significant = pytester.runpytest(*args, "--llmeval-results=significant.json")
    significant.assert_outcomes(passed=9, failed=4, deselected=4)
    significant.stdout.fnmatch_lines(
        ["*gate better_than_base failed: adapter is better than base but not significantly*"]
    )
    point = pytester.runpytest(*args, "--llmeval-gate=point", "--llmeval-results=point.json")
    point.assert_outcomes(passed=10, failed=3, deselected=4)
    gate = results(pytester, "point.json")["benchmarks"][0]["gates"]["better_than_base"]
    assert gate["status"] == "pass" and "better on the point estimate (not significant" in gate["message"]
    assert gate["details"]["mode"] == "point"
    # No better on the point estimate either: point fails too.
    args[0] = better_on_three(pytester, adapter_right=0)
    equal = pytester.runpytest(*args, "--llmeval-gate=point", "--llmeval-results=equal.json")
    equal.assert_outcomes(passed=6, failed=7, deselected=4)
    gate = results(pytester, "equal.json")["benchmarks"][0]["gates"]["better_than_base"]
    assert gate["status"] == "fail" and "not better than base on the point estimate" in gate["message"]


# --- a failing no_regression ------------------------------------------------------------------------------


def test_no_regression_fails_when_the_adapter_got_much_worse(pytester: pytest.Pytester) -> None:
    rows = [row(f"r{i:02d}", expected=f"a{i}") for i in range(12)]
    pytester.makefile(".jsonl", bench=jsonl(rows))

    def adapter_says(right: bool) -> str:
        return predictions(
            pytester,
            [
                # One model's two versions: the `model` field names them alike (outputs differ).
                {
                    "id": f"r{i:02d}",
                    "prediction": f"a{i}" if right else "no",
                    "base_prediction": "no",
                    "model": "m",
                }
                for i in range(12)
            ],
        )

    args = ["-k", "no_regression or not gate", "-rfs"]
    pytester.runpytest(adapter_says(True), *args).assert_outcomes(passed=12, deselected=5)
    shutil.copy(pytester.path / "results.json", pytester.path / "good.json")
    # Every row the previous version got right is now wrong: 12 discordant rows, McNemar p = 0.0005.
    worse = pytester.runpytest(adapter_says(False), *args)
    worse.assert_outcomes(failed=13, deselected=5)
    worse.stdout.fnmatch_lines(["*bench.jsonl: gate no_regression failed: significant regression: *"])
    bench = results(pytester)["benchmarks"][0]
    assert bench["gates"]["no_regression"]["status"] == "fail"
    comparison = bench["comparison_with_previous"]
    assert comparison["comparable"] is True and comparison["statistics"]["discordant"] == [0, 12]
    # --llmeval-previous names the previous results explicitly (results.json now holds the worse run).
    explicit = pytester.runpytest(
        adapter_says(False), *args, "--llmeval-previous=good.json", "--llmeval-results=other.json"
    )
    explicit.assert_outcomes(failed=13, deselected=5)
    assert results(pytester, "other.json")["benchmarks"][0]["gates"]["no_regression"]["status"] == "fail"
    # Against itself (the worse run's results.json) there is no regression.
    pytester.runpytest(adapter_says(False), *args).assert_outcomes(failed=12, passed=1, deselected=5)


# --- JUnit perplexity properties --------------------------------------------------------------------------


def test_junit_properties_of_a_perplexity_row(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    text = row(
        "ppl",
        instruction="Text",
        input="The quick brown fox jumps over the lazy dog.",
        expected="",
        evaluation_type="perplexity",
        evaluation_config={"threshold": 1e9},
    )
    pytester.makefile(".jsonl", bench=jsonl([text]))
    args = [
        f"--base-model={tiny_model}",
        f"--adapter={tiny_adapter}",
        "-p",
        "no:cacheprovider",
        "-m",
        "not gate",
    ]
    pytester.runpytest(*args, "--junitxml=junit.xml").assert_outcomes(passed=1)
    case = ET.parse(pytester.path / "junit.xml").getroot().find(".//testcase[@name='ppl']")
    assert case is not None
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    models = results(pytester)["benchmarks"][0]["rows"][0]["models"]
    assert properties == {
        "llmeval_base_score": "1.0",
        "llmeval_base_perplexity": str(models["base"]["score"]["perplexity"]),
        "llmeval_adapter_score": "1.0",
        "llmeval_adapter_perplexity": str(models["adapter"]["score"]["perplexity"]),
        "llmeval_threshold": str(models["adapter"]["score"]["threshold"]),
    }
    assert properties["llmeval_base_perplexity"] != properties["llmeval_adapter_perplexity"]


# --- python -m pytest_llmeval.ci check --------------------------------------------------------------------


def ci_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmeval.ci", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_ci_check_exit_codes_on_documents_of_real_runs(pytester: pytest.Pytester) -> None:
    preds = better_on_three(pytester, adapter_right=6)  # 6 discordant rows: p = 0.031, significant
    args = [preds, "--llmeval-domain=bench*", "--llmeval-min-rows=12"]
    # Rows the adapter answers wrong fail pytest (exit 1) but are results: every gate passes, CI passes.
    run = pytester.runpytest(*args, "--llmeval-results=good.json")
    assert run.ret == pytest.ExitCode.OK  # every row is right here; the gates are what matter
    check = ci_check(pytester.path / "good.json")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "llmeval: 0 failure(s), 5 gate verdict(s)" in check.stdout  # held_out skipped: still a verdict
    # A failed gate: the size gate wants more rows.
    pytester.runpytest(*args, "--llmeval-min-rows=50", "--llmeval-results=small.json")
    check = ci_check(pytester.path / "small.json")
    assert check.returncode == 1 and "FAILED bench.jsonl: size: benchmark has 12 rows" in check.stdout
    # An incomplete run: -x stops at the first wrong row, so the gates never run.
    wrong = better_on_three(pytester, adapter_right=0)
    pytester.runpytest(wrong, "--llmeval-domain=bench*", "-x", "--llmeval-results=stopped.json")
    check = ci_check(pytester.path / "stopped.json")
    assert check.returncode == 1 and "the run is incomplete: stopped early" in check.stdout
    # A file that cannot be read.
    (pytester.path / "broken.json").write_text('{"complete": tr')
    for path in (pytester.path / "broken.json", pytester.path / "missing.json"):
        check = ci_check(path)
        assert check.returncode == 2 and "llmeval: cannot read" in check.stderr


@pytest.mark.parametrize("content", ["{}", "[]", '{"benchmarks": "none"}'])
def test_ci_check_json_that_is_no_results_file_is_unreadable(tmp_path: Path, content: str) -> None:
    path = tmp_path / "package.json"
    path.write_text(content)
    check = ci_check(path)
    assert check.returncode == 2 and "Traceback" not in check.stderr, check.stderr


def test_readme_names_each_claim_tested_here() -> None:
    """The claims above are quoted from README.md and docs/: if one is reworded, look at this file again."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    readme = " ".join(" ".join(page.read_text(encoding="utf-8").split()) for page in pages)
    for claim in (
        "change the patterns with the ini option `llmeval_files`",
        '`"benchmark"` (a path suffix, when ids repeat across files)',
        "pytest --cache-clear ... # empties it with pytest's cache",
        "xdist workers starting together wait on a file lock while one converts",
        "which is then never collected as a benchmark",
        "`--llmeval-gate point` passes on the point estimate alone",
        "the adapter is not significantly worse than its baseline on the same rows",
        "(and `llmeval_*_perplexity` for perplexity rows)",
        "a benchmark file failed to collect, or the run is incomplete (and 2 when the file cannot be read)",
    ):
        assert claim in readme, claim
