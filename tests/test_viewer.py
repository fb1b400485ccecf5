"""The history viewer's payload (issue 41) and `pytest-llmeval view`: every history entry a run, the pairs'
figures those `history --diff` prints, rows told apart from the cells, interned texts, the prompt's
fingerprint, and the command's exit statuses.

The history is the plugin's own: five runs on saved predictions (no model needed to tell runs apart), made
once for the module in a folder of its own. The prompt's fingerprint needs a run that records its prompt,
which saved predictions do not: two runs of the tiny model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row

from pytest_llmeval import history, viewer
from pytest_llmeval.cli import main

pytest_plugins = ["pytester"]

ROWS = [row(f"r{i:02d}", input=f"item {i}", expected=f"a{i}", tags=["edge"] * (i < 5)) for i in range(12)]
# The history's runs, oldest first: which rows the adapter gets right in each (the base gets none right).
RIGHT = {
    "A": set(range(8)),
    "B": {0, 1, 2, 3, 4, 5, 8, 9},  # r06 and r07 regressed from A, r08 and r09 improved
    "partial": {0, 1, 2, 3, 4, 5, 8, 9},  # B's predictions on two rows (-k), none for r03: a partial run
    "C": set(range(10)),
    "D": set(range(13)),  # the benchmark changed: r11's input, and a row r12
}
MODEL = "dates-fix"  # the predictions' `model`: one identity for every run, whatever the outputs


def _predictions(right: set[int], n: int = 12, missing: int | None = None) -> str:
    """Saved predictions: the adapter right on the rows `right`; none for row `missing` (which errors)."""
    lines = [
        {
            "id": f"r{i:02d}",
            "model": MODEL,
            "prediction": f"a{i}" if i in right else f"no {i}",
            "base_prediction": "no",
        }
        for i in range(n)
        if i != missing
    ]
    return jsonl(lines)


def _plugin(folder: Path, *args: str) -> None:
    """The plugin in its own process in `folder` (a module's history is made once, outside any test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS"))}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--llmeval-predictions=preds.txt",
    ]
    done = subprocess.run([*command, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose history holds the runs of RIGHT, in that order."""
    folder = tmp_path_factory.mktemp("viewer")
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "bench.jsonl").write_text(jsonl(ROWS))
    for name in ("A", "B", "partial", "C"):
        (folder / "preds.txt").write_text(_predictions(RIGHT[name], missing=3 if name == "partial" else None))
        _plugin(folder, *(["-k", "r03 or r09"] if name == "partial" else []))
    changed = [*ROWS[:11], {**ROWS[11], "input": "item eleven"}, row("r12", input="item 12", expected="a12")]
    (folder / "bench.jsonl").write_text(jsonl(changed))
    (folder / "preds.txt").write_text(_predictions(RIGHT["D"], 13))
    _plugin(folder)
    return folder


@pytest.fixture(scope="module")
def runs(project: Path) -> list[history.Run]:
    found = history.runs(history.history_dir(project / "results.json"))
    assert len(found) == len(RIGHT)
    return found


@pytest.fixture(scope="module")
def payload(runs: list[history.Run]) -> dict[str, Any]:
    return viewer.build_payload(runs)


def text(payload: Mapping[str, Any], index: int | None) -> str | None:
    return None if index is None else str(payload["strings"][index])


def cells(payload: Mapping[str, Any], run: int, column: str = "adapter") -> dict[str, tuple[Any, Any]]:
    """A run's cells of bench.jsonl by row id: (output, score)."""
    flat = payload["cells"]["bench.jsonl"][str(run)][column]
    ids = payload["rows"]["bench.jsonl"]["ids"]
    return {i: (text(payload, flat[2 * n]), flat[2 * n + 1]) for n, i in enumerate(ids)}


# --- the payload ------------------------------------------------------------------------------------------


def test_every_history_entry_is_one_run_oldest_first(
    runs: list[history.Run], payload: dict[str, Any]
) -> None:
    assert payload["version"] == 1 and payload["alpha"] == 0.05
    json.dumps(payload, allow_nan=False)  # JSON as it is: no NaN, no tuple the page could not read
    assert [r["name"] for r in payload["runs"]] == [run.path.name for run in runs]
    assert [r["complete"] for r in payload["runs"]] == [True, True, False, True, True]
    assert payload["runs"][2]["reason"] == "2 of 12 rows selected (-k 'r03 or r09'); 1 of 2 rows errored"
    first = payload["runs"][0]
    assert first["identity"] == f"adapter:{MODEL}" and first["label"] == MODEL
    assert first["columns"] == ["base", "adapter"] and first["evaluated"] == "adapter"
    when = viewer.timestamp_of(runs[0].document)
    assert when is not None and first["time"] == when.isoformat()
    assert first["time"].endswith("+00:00")
    bench = first["benchmarks"]["bench.jsonl"]
    assert bench["hash"] == runs[0].document["benchmarks"][0]["benchmark_hash"] and bench["n"] == 12
    assert bench["prompt"] is None  # saved predictions record no prompt
    assert (
        bench["scores"]["adapter"]["mean"] == pytest.approx(8 / 12) and bench["scores"]["adapter"]["n"] == 12
    )
    assert bench["scores"]["base"]["mean"] == 0.0
    # no_regression, from the second run on (the first had no history to compare with).
    assert bench["no_regression"] is None
    gate = runs[1].document["benchmarks"][0]["gates"]["no_regression"]
    second = payload["runs"][1]["benchmarks"]["bench.jsonl"]["no_regression"]
    assert second == {"status": gate["status"], "message": gate["message"]}


def test_the_pairs_are_the_figures_history_diff_prints(
    runs: list[history.Run], payload: dict[str, Any]
) -> None:
    # Each complete run against the previous complete one; the partial run (2) is no side of any pair.
    assert [(p["a"], p["b"]) for p in payload["pairs"]] == [(0, 1), (1, 3), (3, 4)]
    assert payload["default_pair"] == [3, 4]
    for pair in payload["pairs"]:
        lines = history.diff_lines(runs[pair["a"]], runs[pair["b"]])
        shared = next(line for line in lines if line.startswith("  B vs A"))
        if "reason" in pair:
            assert shared == f"  B vs A: {pair['reason']}"
            continue
        assert shared == f"  B vs A on {pair['n']} shared rows: {pair['text']}"
    first = payload["pairs"][0]
    assert (first["n"], first["mean_a"], first["mean_b"]) == (
        12,
        pytest.approx(8 / 12),
        pytest.approx(8 / 12),
    )
    assert first["difference"] == 0.0 and first["test"] == "mcnemar_exact" and first["significant"] is False
    assert (payload["pairs"][1]["mean_a"], payload["pairs"][1]["mean_b"]) == (
        pytest.approx(8 / 12),
        pytest.approx(10 / 12),
    )
    # The benchmark changed between C and D: not compared, as history --diff says.
    assert payload["pairs"][2]["reason"].startswith("not comparable: bench.jsonl changed")


def test_pairs_asked_for_are_computed_too_also_with_a_partial_run(runs: list[history.Run]) -> None:
    payload = viewer.build_payload(runs, pairs=[(0, 2), (0, 1)], alpha=0.2)
    assert [(p["a"], p["b"]) for p in payload["pairs"]] == [(0, 1), (1, 3), (3, 4), (0, 2)]
    asked = payload["pairs"][3]
    assert asked["n"] == 1 and payload["alpha"] == 0.2  # r09: r03 errored in the partial run
    lines = history.diff_lines(runs[0], runs[2], alpha=0.2)
    assert f"  B vs A on 1 shared rows: {asked['text']}" in lines
    with pytest.raises(IndexError, match="pair"):
        viewer.build_payload(runs, pairs=[(0, 5)])


def test_regressed_rows_are_told_from_the_cells(payload: dict[str, Any]) -> None:
    before, after = cells(payload, 0), cells(payload, 1)
    regressed = sorted(i for i in before if before[i][1] == 1.0 and after[i][1] == 0.0)
    improved = sorted(i for i in before if before[i][1] == 0.0 and after[i][1] == 1.0)
    assert (regressed, improved) == (["r06", "r07"], ["r08", "r09"])
    assert after["r06"] == ("no 6", 0.0) and after["r08"] == ("a8", 1.0)
    # The partial run has two rows, and r03 errored (no prediction): the others have no cells in it.
    partial = cells(payload, 2)
    assert {i for i, cell in partial.items() if cell != (None, None)} == {"r09"}
    assert payload["errors"] == {
        "bench.jsonl": {"2": {"r03": "bench.jsonl:4: no prediction for id 'r03' in preds.txt"}}
    }
    assert cells(payload, 0, "base")["r00"] == ("no", 0.0)


def test_each_cell_says_whether_it_reached_its_rows_threshold(payload: dict[str, Any]) -> None:
    # The run's own verdict per cell (1, 0; None where unscored), aligned with the ids: the page's
    # passed/failed filter reads it rather than guessing from full marks.
    assert payload["runs"][1]["benchmarks"]["bench.jsonl"]["evaluated"] == "adapter"
    ids = payload["rows"]["bench.jsonl"]["ids"]
    verdicts = payload["passed"]["bench.jsonl"]["1"]["adapter"]
    scores = payload["cells"]["bench.jsonl"]["1"]["adapter"][1::2]
    assert len(verdicts) == len(ids) and verdicts == [None if s is None else int(s >= 1.0) for s in scores]
    assert verdicts[ids.index("r06")] == 0 and verdicts[ids.index("r08")] == 1
    # A score that records no verdict is judged against its threshold, then against full marks.
    from pytest_llmeval.viewer import _reached

    assert _reached({"value": 0.6, "threshold": 0.5}) and not _reached({"value": 0.6})
    assert not _reached({"value": 0.9, "threshold": 0.5, "passed": False})


def test_rows_are_every_id_first_seen_with_the_newest_text(payload: dict[str, Any]) -> None:
    rows = payload["rows"]["bench.jsonl"]
    assert rows["ids"] == [f"r{i:02d}" for i in range(13)]  # r12 only in the last run: last
    inputs = [text(payload, i) for i in rows["input"]]
    assert inputs[11] == "item eleven" and inputs[0] == "item 0"  # the newest run's text
    assert [text(payload, i) for i in rows["expected"]][:2] == ["a0", "a1"]
    assert rows["tags"][:6] == [["edge"]] * 5 + [[]] and rows["difficulty"][0] == "easy"
    assert cells(payload, 0)["r12"] == (None, None)  # not a row of the first run
    assert cells(payload, 4)["r12"] == ("a12", 1.0)


def test_texts_are_interned_once(payload: dict[str, Any]) -> None:
    strings = payload["strings"]
    assert len(strings) == len(set(strings))
    # "a0" is r00's expected output and the adapter's output in every run: one string, one index.
    index = strings.index("a0")
    assert payload["rows"]["bench.jsonl"]["expected"][0] == index
    assert all(payload["cells"]["bench.jsonl"][str(run)]["adapter"][0] == index for run in (0, 1, 3, 4))
    assert sum(s == "no" for s in strings) == 1  # the base's output of 13 rows x 5 runs


def test_a_column_mean_has_a_wilson_interval_for_0_1_scores_else_a_t_interval() -> None:
    found = viewer.mean_interval([1.0] * 8 + [0.0] * 4)
    low, high = found["ci"]
    # Wilson's bounds are the p where the score test sits at z: (p_hat - p)^2 = z^2 p (1 - p) / n.
    z = 1.959963984540054
    for p in (low, high):
        assert (8 / 12 - p) ** 2 == pytest.approx(z * z * p * (1 - p) / 12)
    assert viewer.mean_interval([1.0] * 5)["ci"][1] == 1.0  # never past 1
    from scipy import stats

    values = [0.2, 0.5, 0.9, 0.4]
    found = viewer.mean_interval(values)
    mean = sum(values) / 4
    expected = stats.t.interval(0.95, 3, loc=mean, scale=stats.sem(values))
    assert found["mean"] == pytest.approx(mean) and found["ci"] == pytest.approx(list(expected))
    assert viewer.mean_interval([0.5]) == {"mean": 0.5, "ci": None, "n": 1}


def test_the_prompt_fingerprint_follows_the_prompt_settings(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl([row("r0", input="x"), row("r1", input="y")]))
    results = pytester.path / "results.json"
    for system in ("Be brief.", "Be brief.", "Answer in French."):
        outcome = pytester.runpytest(*model_args(tiny_model), f"--llmeval-system-prompt={system}")
        assert outcome.ret in (0, 1), outcome.stdout.str()[-2000:]
    runs = history.runs(history.history_dir(results))
    payload = viewer.build_payload(runs)
    prints = [r["benchmarks"]["bench.jsonl"]["prompt"] for r in payload["runs"]]
    assert all(isinstance(p, str) and len(p) == 12 for p in prints)
    assert prints[0] == prints[1] != prints[2]


def test_the_prompt_fingerprint_is_of_the_benchmarks_settings_the_command_line_and_the_mode() -> None:
    def fingerprint(prompt: dict[str, Any] | None, name: str = "b.jsonl") -> str | None:
        return viewer.prompt_fingerprint({"inference_config": {"prompt": prompt}}, name)

    plain = {"mode": "shared", "command_line": {"system": None}, "benchmarks": {"b.jsonl": {"sidecar": None}}}
    assert fingerprint(plain) == fingerprint(json.loads(json.dumps(plain)))  # canonical: the same settings
    changed = [
        {**plain, "mode": "per_model"},
        {**plain, "command_line": {"system": "Be brief."}},
        {**plain, "benchmarks": {"b.jsonl": {"sidecar": "b.llmeval.toml"}}},
    ]
    assert len({fingerprint(plain), *map(fingerprint, changed)}) == 4
    # Another benchmark's settings are not this one's.
    assert fingerprint(
        {**plain, "benchmarks": {**plain["benchmarks"], "c.jsonl": {"sidecar": "c"}}}
    ) == fingerprint(plain)
    assert fingerprint(None) is None and viewer.prompt_fingerprint({}, "b.jsonl") is None


def _document(adapter: str | None, *, complete: bool = True) -> dict[str, Any]:
    """A run of one row, as history.py reads it (the plugin's own runs are above)."""
    evaluated = "adapter" if adapter is not None else "base"
    # The evaluated side first, the base (if another) after it: the payload puts the base first.
    models = {evaluated: {"output": "x", "score": {"value": 1.0}}, "base": {"output": "y", "score": None}}
    rows = [{"id": "r0", "evaluated": evaluated, "models": models}]
    return {
        "schema_version": 2,
        "adapter_name": adapter,
        "base_model": "smol",
        "complete": complete,
        "incomplete_reason": None if complete else "interrupted",
        "benchmarks": [
            {"benchmark_file": "b.jsonl", "benchmark_hash": "sha256:x", "n_examples": 1, "rows": rows}
        ],
    }


def test_each_identity_is_a_series_and_the_default_pair_is_the_newest_runs() -> None:
    made = [_document("math"), _document("code"), _document("math"), _document(None), _document("code")]
    made += [_document("code", complete=False)]
    runs = [history.Run(i + 1, Path(f"run{i}.json"), d) for i, d in enumerate(made)]
    payload = viewer.build_payload(runs)
    assert [(p["a"], p["b"]) for p in payload["pairs"]] == [(0, 2), (1, 4)]
    # The newest run is a partial one of code: code's last two complete runs.
    assert payload["default_pair"] == [1, 4]
    assert [r["identity"] for r in payload["runs"]][:4] == [
        "adapter:math",
        "adapter:code",
        "adapter:math",
        "base:smol",
    ]
    assert payload["runs"][3]["label"] == "base smol" and payload["runs"][3]["columns"] == ["base"]
    assert payload["runs"][0]["columns"] == ["base", "adapter"]
    assert payload["strings"] == ["y", "x"]
    assert payload["cells"]["b.jsonl"]["0"] == {"base": [0, None], "adapter": [1, 1]}  # the base: not scored
    assert payload["runs"][0]["benchmarks"]["b.jsonl"]["scores"] == {
        "adapter": {"mean": 1.0, "ci": None, "n": 1}
    }
    assert payload["runs"][0]["name"] == "run0.json" and payload["runs"][0]["time"] is None
    assert viewer.build_payload(runs[:4])["default_pair"] is None  # one complete base-only run: no pair


# --- the command ------------------------------------------------------------------------------------------


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> list[Mapping[str, Any]]:
    """The payloads `view` hands the page, kept; the page written is the payload's JSON (the page's own
    tests are about the page)."""
    from pytest_llmeval.reporting import viewer_page

    seen: list[Mapping[str, Any]] = []

    def render(payload: Mapping[str, Any]) -> str:
        seen.append(payload)
        return json.dumps(payload)

    monkeypatch.setattr(viewer_page, "render", render)
    return seen


def refused(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a refusal prints."""
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmeval: "), lines
    return lines[0]


def test_view_writes_the_page_of_the_history_beside_results_json(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    out = tmp_path / "page.html"
    assert main(["view", f"--out={out}"]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html")
    assert capsys.readouterr().err == f"llmeval: wrote the history of 5 run(s) to {out}\n"
    # Without --out: history.html in the current folder.
    monkeypatch.chdir(tmp_path)
    assert main(["view", str(history.history_dir(project / "results.json"))]) == 0
    assert (tmp_path / "history.html").is_file()


def test_view_pairs_the_runs_it_is_asked_for(
    project: Path, runs: list[history.Run], tmp_path: Path, rendered: list[Mapping[str, Any]]
) -> None:
    folder = str(history.history_dir(project / "results.json"))
    out = tmp_path / "page.html"
    assert (
        main(["view", folder, f"--out={out}", "--pair", "1", "3", "--pair", runs[1].path.name[:22], "-1"])
        == 0
    )
    payload = rendered[-1]
    assert json.loads(out.read_text(encoding="utf-8")) == payload
    assert [(p["a"], p["b"]) for p in payload["pairs"]][3:] == [(0, 2), (1, 4)]
    assert payload["pairs"][4]["reason"].startswith("not comparable: bench.jsonl changed")


def test_view_merges_results_json_files_with_the_history_by_time(
    project: Path, tmp_path: Path, rendered: list[Mapping[str, Any]]
) -> None:
    folder = history.history_dir(project / "results.json")
    # results.json is the newest entry again: one run, not two.
    assert main(["view", str(folder), str(project / "results.json"), f"--out={tmp_path / 'a.html'}"]) == 0
    assert len(rendered[-1]["runs"]) == 5
    # Another run's results.json, made before the history's runs: first, named by its path.
    older = json.loads((project / "results.json").read_text(encoding="utf-8"))
    older["timestamp"] = "2020-01-01T00:00:00Z"
    (tmp_path / "old.json").write_text(json.dumps(older))
    assert main(["view", str(folder), str(tmp_path / "old.json"), f"--out={tmp_path / 'b.html'}"]) == 0
    payload = rendered[-1]
    assert [r["name"] for r in payload["runs"]][:2] == [
        str(tmp_path / "old.json"),
        history.runs(folder)[0].path.name,
    ]
    assert payload["runs"][0]["time"] == "2020-01-01T00:00:00+00:00"


def test_view_refuses_with_one_line(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(history.history_dir(project / "results.json"))
    out = f"--out={tmp_path / 'page.html'}"
    assert main(["view", folder, out, "--pair", "1", "9"]) == 2
    assert refused(capsys) == "llmeval: no run number 9: the history holds 5 run(s)"
    assert main(["view", folder, out, "--pair", "1", "nothing"]) == 2
    assert "no run named 'nothing'" in refused(capsys)
    (tmp_path / "empty").mkdir()
    assert main(["view", str(tmp_path / "empty"), out]) == 2
    assert refused(capsys).startswith(f"llmeval: no run in {tmp_path / 'empty'}")
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["view", folder, str(tmp_path / "bad.json"), out]) == 2
    assert refused(capsys).startswith(f"llmeval: cannot read {tmp_path / 'bad.json'}: not JSON")
    assert main(["view", str(tmp_path / "missing"), out]) == 2
    assert refused(capsys) == f"llmeval: cannot read {tmp_path / 'missing'}: no such file or folder"
    monkeypatch.chdir(tmp_path)  # no results.json here, so no history beside it
    assert main(["view", out]) == 2
    assert refused(capsys).startswith("llmeval: no history at .llmeval/history")
    assert not (tmp_path / "page.html").exists()


def test_only_the_newest_steps_of_a_long_history_are_compared_unasked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each comparison is the gates' bootstrap: a 500-run history would spend most of its build on them. The
    # newest STEPS steps are compared; the default pair and the pairs asked for always are.
    from pytest_llmeval import viewer
    from pytest_llmeval.history import Run

    monkeypatch.setattr(viewer, "STEPS", 2)
    documents = [{"adapter_name": "a", "complete": True, "benchmarks": []} for _ in range(6)]
    documents[4]["complete"] = False
    runs = [Run(i + 1, Path(f"run{i}.json"), d) for i, d in enumerate(documents)]
    assert viewer._pairs_to_compare(runs, (3, 5), [(0, 1)]) == [(2, 3), (3, 5), (0, 1)]
