"""No green without evidence (issue 36): a gate needs scored rows, an errored row makes the run incomplete,
`check` fails a document with nothing scored behind it, options only the end reads are refused at the
start, and the end of a run that fails anyway keeps its rows.

Predictions mode (no model loaded): the rows are the point here, and `-n 2` costs no model load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

from pytest_llmeval import gates
from pytest_llmeval.cli import main as cli

# A custom scorer that raises on the outputs of one model (the adapter says "boom"): the row errors.
SCRIPT = """
def evaluate(generated, expected):
    if "boom" in generated:
        raise RuntimeError("the scorer cannot read this output")
    return 1.0 if generated.strip() == expected else 0.0
"""
XDIST = pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])


def custom_row(i: int) -> dict[str, Any]:
    config = {"script": "score.py", "function": "evaluate"}
    tags = ["edge"] if i < 5 else []
    return row(f"r{i}", expected=f"a{i}", evaluation_type="custom", evaluation_config=config, tags=tags)


def setup_run(pytester: pytest.Pytester, n: int, broken: set[int]) -> None:
    """n custom rows; the adapter right on every row but `broken` (where it says "boom"), the base wrong."""
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl([custom_row(i) for i in range(n)]))
    (pytester.path / "score.py").write_text(SCRIPT)
    preds = [
        {"id": f"r{i}", "prediction": "boom" if i in broken else f"a{i}", "base_prediction": "no"}
        for i in range(n)
    ]
    (pytester.path / "preds.jsonl").write_text(jsonl(preds))


def gate_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = doc["benchmarks"][0]["gates"][name]
    return found


def read(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    return data


@XDIST
def test_a_gate_fails_when_every_adapter_row_errored(
    pytester: pytest.Pytester, workers: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    setup_run(pytester, 10, broken=set(range(10)))
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "--llmeval-domain=bench*", "--llmeval-min-rows=10", *workers
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = read(pytester)
    verdict = gate_of(doc, "better_than_base")
    # Failed, not skipped as "no adapter": the adapter ran and every one of its rows errored.
    assert verdict["status"] == "fail", verdict
    assert "0 of 10 rows scored against base (10 errored)" in verdict["message"]
    assert verdict["details"]["evidence"] == {
        "rows": 10,
        "scored_pairs": 0,
        "errored": 10,
        "skipped": 0,
        "unscored": 0,
        "needed": 10,
    }
    result.stdout.fnmatch_lines(["*gate better_than_base failed: adapter: 0 of 10 rows scored against base*"])
    assert doc["complete"] is False and "10 of 10 rows errored" in doc["incomplete_reason"]
    capsys.readouterr()
    assert cli(["check", str(pytester.path / "results.json")]) == 1
    out = capsys.readouterr().out
    assert "0 of 10 rows scored" in out and "the run is incomplete" in out


@pytest.mark.parametrize(("minimum", "status"), [(10, "fail"), (6, "pass")])
def test_a_gate_decides_on_the_scored_pairs_when_there_are_enough(
    pytester: pytest.Pytester, minimum: int, status: str
) -> None:
    """4 of 10 adapter rows error: 6 scored pairs. Below the minimum the gate fails; at it, the gate decides
    on those 6 (all right against a base that is always wrong: McNemar 6 to 0, p = 0.031)."""
    setup_run(pytester, 10, broken={0, 3, 5, 8})
    pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "--llmeval-domain=bench*", f"--llmeval-min-rows={minimum}"
    )
    verdict = gate_of(read(pytester), "better_than_base")
    assert verdict["status"] == status, verdict
    if status == "fail":
        assert verdict["message"].startswith("adapter: 6 of 10 rows scored against base (4 errored)")
        assert "a verdict needs 10 scored pairs (--llmeval-min-rows=10)" in verdict["message"]
    else:
        assert verdict["details"]["comparison"]["n"] == 6


def test_every_row_that_ran_is_needed_below_the_minimum() -> None:
    # A selection of 3 rows against the default minimum of 50: all three must score.
    few = gates.Evidence(rows=3, scored=2, errored=1, skipped=0)
    verdict = gates.without_evidence("no_degradation", few, minimum=50, who="sentiment")
    assert verdict is not None and verdict.status == "fail" and not verdict.passed
    assert verdict.message == (
        "sentiment: 2 of 3 rows scored against base (1 errored); a verdict needs 3 scored pairs "
        "(every row that ran (fewer than --llmeval-min-rows=50))"
    )
    assert gates.without_evidence("no_degradation", few, minimum=2) is None
    # No row scored at all: never enough, whatever the minimum.
    none = gates.Evidence(rows=4, scored=0, errored=0, skipped=3)
    lacking = gates.without_evidence("better_than_base", none, minimum=1)
    assert lacking is not None and "(3 skipped, 1 without a score on both sides)" in lacking.message


def test_check_fails_a_document_with_no_scored_rows_whatever_its_gates_say(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_run(pytester, 10, broken=set())
    pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "--llmeval-domain=bench*", "--llmeval-min-rows=10"
    )
    path = pytester.path / "results.json"
    capsys.readouterr()
    assert cli(["check", str(path)]) == 0
    # The same document with the adapter's scores gone (as a run before this check, or a hand edit): its
    # gates still say pass, and check does not believe them.
    doc = read(pytester)
    for r in doc["benchmarks"][0]["rows"]:
        r["models"]["adapter"]["score"] = None
    path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert cli(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert (
        "bench.jsonl: adapter has no scored row of 10 (0 errored, 0 skipped): no verdict stands on it" in out
    )
    for r in doc["benchmarks"][0]["rows"]:
        r["models"]["base"]["score"] = None
    path.write_text(json.dumps(doc))
    assert cli(["check", str(path)]) == 1
    assert "no row of the document has a score: there is nothing to pass" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("--llmeval-alpha=0", "significance level strictly between 0 and 1"),
        ("--llmeval-alpha=1", "significance level strictly between 0 and 1"),
        (
            "--llmeval-composite-weights=rouge=inf,exact_match=1",
            "weight of rouge must be a finite number >= 0",
        ),
        (
            "--llmeval-composite-weights=rouge=nan,exact_match=1",
            "weight of rouge must be a finite number >= 0",
        ),
        # Each finite, their sum not: the weighted mean would be NaN. Past 1e100 a weight is refused alone.
        ("--llmeval-composite-weights=rouge=1e308,exact_match=1e308", "weights are relative, scale them"),
    ],
)
@XDIST
def test_values_only_the_end_reads_are_refused_at_the_start(
    pytester: pytest.Pytester, option: str, said: str, workers: tuple[str, ...]
) -> None:
    setup_run(pytester, 3, broken=set())
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", option, *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str()
    assert not (pytester.path / "results.json").exists()
    result.stdout.no_fnmatch_line("*bench.jsonl::r0*")


@XDIST
def test_a_failing_end_of_run_keeps_the_rows_and_says_where(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: tuple[str, ...]
) -> None:
    """The last line of defence, with a fault injected where the document is built: the rows are written
    beside results.json, one line says where, and the exit code is pytest's internal error, not 1."""
    from pytest_llmeval import recorder

    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise OverflowError("injected: building the document failed")

    setup_run(pytester, 4, broken={1})
    pytester.runpytest("--llmeval-predictions=preds.jsonl", "-m", "not gate")
    before = (pytester.path / "results.json").read_text()
    # The document is built on the controller, which pytester runs in this process (workers report to it).
    monkeypatch.setattr(recorder, "build_results", broken)
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "-m", "not gate", *workers)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    rescued_path = pytester.path / "results.rescued.json"
    result.stdout.fnmatch_lines(
        [
            "ERROR: llmeval: the end of the run failed (OverflowError: injected: building the document "
            f"failed); results.json was not written: the 4 row(s) and 0 verdict(s) are in {rescued_path}. "
            "This is a bug: please report it"
        ]
    )
    rescued = json.loads(rescued_path.read_text())
    assert rescued["complete"] is False and "OverflowError" in rescued["incomplete_reason"]
    assert sorted(r["id"] for r in rescued["rows"]) == ["r0", "r1", "r2", "r3"]
    assert [r["id"] for r in rescued["rows"] if r["error"]] == ["r1"]
    # The earlier complete results.json is left as it was.
    assert (pytester.path / "results.json").read_text() == before


def test_results_json_is_strict_json() -> None:
    from pytest_llmeval.results_file import document_text

    assert json.loads(document_text({"a": [1.5, None]})) == {"a": [1.5, None]}
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        document_text({"a": float("nan")})
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        document_text({"a": [float("inf")]})
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        document_text({"rows": [{"score": float("nan")}]})


def test_results_json_layout_has_one_row_per_line() -> None:
    """Indented by two spaces, as json.dumps(indent=2) would, except each row on one line of its own (the
    compact C writer; a diff of two runs reads row by row); the same document either way."""
    from pytest_llmeval.results_file import document_text

    document = {
        "mode": "base_only",
        "benchmarks": [
            {"name": "b.jsonl", "rows": [{"id": "r0", "models": {"base": {"output": "é<"}}}, {"id": "r1"}]}
        ],
        "counts": {2: 2, True: None, None: [], "empty": {}},
    }
    text = document_text(document)
    assert json.loads(text) == json.loads(json.dumps(document))
    assert text.endswith("}\n") and not text.endswith("\n\n")
    lines = text.splitlines()
    assert '        {"id": "r0", "models": {"base": {"output": "é<"}}},' in lines
    assert '        {"id": "r1"}' in lines
    # Everything else is laid out as json.dumps(indent=2) lays it out.
    assert text.startswith('{\n  "mode": "base_only",\n  "benchmarks": [\n    {\n      "name": "b.jsonl",\n')
    assert '  "counts": {\n    "2": 2,\n    "true": null,\n    "null": [],\n    "empty": {}\n  }' in text


# ---------------------------------------------------------------------------------------------------------
# Outputs never touch inputs


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--llmeval-results=bench.jsonl", "bench.jsonl"],
            "--llmeval-results {p}/bench.jsonl is the benchmark file",
        ),
        (["--llmeval-results=bench.jsonl", "."], "--llmeval-results {p}/bench.jsonl is the benchmark file"),
        (["--llmeval-html=bench.jsonl"], "--llmeval-html {p}/bench.jsonl is the benchmark file"),
        (["--llmeval-results=preds.jsonl"], "--llmeval-results {p}/preds.jsonl is --llmeval-predictions"),
        (["--llmeval-html=results.json"], "--llmeval-html {p}/results.json is also --llmeval-results"),
        (["--llmeval-html=score.py"], "--llmeval-html {p}/score.py is the custom scorer"),
        (["--junitxml=preds.jsonl"], "--junitxml {p}/preds.jsonl is --llmeval-predictions"),
        # Known only once collected; pytest writes its XML at the end of even a refused session.
        (["--junitxml=score.py"], "--junitxml {p}/score.py is the custom scorer"),
    ],
    ids=[
        "results-file",
        "results-in-folder",
        "html",
        "predictions",
        "html-is-results",
        "script",
        "junit",
        "junit-script",
    ],
)
@XDIST
def test_an_output_that_is_an_input_stops_the_run_before_any_test(
    pytester: pytest.Pytester, args: list[str], said: str, workers: tuple[str, ...]
) -> None:
    setup_run(pytester, 3, broken=set())
    kept = {p.name: p.read_bytes() for p in pytester.path.iterdir() if p.is_file()}
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", *args, *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    if "score.py" in args[0] and workers:
        # Under xdist the controller collects nothing: a custom scorer's script is known only from the rows,
        # at the end. The rows ran; the report goes to a temporary file, and the script is left alone.
        option = args[0].split("=")[0]
        what = "the HTML report" if option == "--llmeval-html" else "the JUnit XML"
        result.stdout.fnmatch_lines(
            [
                f"ERROR: llmeval: cannot write {what} to {pytester.path}/score.py ({option} "
                f"{pytester.path}/score.py is the custom scorer {pytester.path}/score.py: the run would "
                "replace what it reads; write it elsewhere): written to * instead"
            ]
        )
        assert (pytester.path / "score.py").read_bytes() == kept["score.py"]
        return
    lines = [line for line in result.stderr.lines if line.startswith("ERROR: llmeval:")]
    assert len(lines) == 1 and said.format(p=pytester.path) in lines[0], result.stderr.str()
    assert "the run would replace what it reads" in lines[0] or "one would replace the other" in lines[0]
    # Nothing ran and nothing read was changed.
    assert {p.name: p.read_bytes() for p in pytester.path.iterdir() if p.is_file()} == kept


def test_the_command_line_never_writes_over_what_it_reads(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_run(pytester, 10, broken=set())
    pytester.runpytest("--llmeval-predictions=preds.jsonl", "--llmeval-min-rows=10")
    results = pytester.path / "results.json"
    preds = pytester.path / "preds.jsonl"
    kept = {p: p.read_bytes() for p in (results, preds)}
    cases = [
        (["report", str(results), f"--html={results}"], f"--html {results} is RESULTS_JSON {results}"),
        (["report", str(results), f"--spot-check={results}"], f"--spot-check {results} is RESULTS_JSON"),
        (
            [
                "report",
                str(results),
                f"--html={pytester.path / 'x.md'}",
                f"--spot-check={pytester.path / 'x.md'}",
            ],
            f"--spot-check {pytester.path}/x.md is also --html",
        ),
        (["convert", "mbpp", str(preds), f"--output={preds}"], f"--output {preds} is FILE {preds}"),
        (["compare", str(results), f"--markdown={results}"], f"--markdown {results} is PEFT.json {results}"),
    ]
    for argv, said in cases:
        capsys.readouterr()
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("llmeval: ") and said in err[0], (argv, err)
        assert {p: p.read_bytes() for p in (results, preds)} == kept
    assert not (pytester.path / "x.md").exists()


# ---------------------------------------------------------------------------------------------------------
# A damaged earlier file never costs a later run its end


def damage(document: dict[str, Any], how: str) -> str:
    """A history entry's text, damaged as `how` says (each as seen in a real poisoned history)."""
    doc = json.loads(json.dumps(document))
    first = doc["benchmarks"][0]["rows"][0]["models"]["adapter"]["score"]
    if how == "nan":
        first["value"] = "__NAN__"
        return json.dumps(doc).replace('"__NAN__"', "NaN")
    if how == "huge":
        first["value"] = 1e308
    elif how == "null":
        first["value"] = None
    elif how == "rows":
        doc["benchmarks"][0]["rows"] = "x"
    elif how == "deep":
        return json.dumps(doc).replace('"tags": [', '"tags": ' + "[" * 3000 + "]" * 3000 + ", [", 1)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("how", "workers"),
    [*((how, ()) for how in ("nan", "huge", "null", "rows", "deep")), ("nan", ("-n", "2"))],
    ids=["nan", "huge", "null", "rows", "deep", "nan-xdist"],
)
def test_a_damaged_history_entry_is_passed_over_by_name(
    pytester: pytest.Pytester, how: str, workers: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    setup_run(pytester, 10, broken=set())
    args = ["--llmeval-predictions=preds.jsonl", "--llmeval-domain=bench*", "--llmeval-min-rows=10"]
    assert pytester.runpytest(*args).ret == pytest.ExitCode.OK  # the good entry (serially: only setup)
    args += workers
    folder = pytester.path / ".llmeval" / "history"
    (good,) = folder.iterdir()
    poisoned = folder / "29991231T000000.000000Z_prediction.json"  # the newest entry
    poisoned.write_text(damage(json.loads(good.read_text()), how))
    result = pytester.runpytest(*args, "-rA")
    # The run ends as runs do: its results written, no_regression decided against the good entry before.
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    verdict = gate_of(read(pytester), "no_regression")
    assert verdict["status"] == "pass" and verdict["details"]["baseline"] == good.name
    assert f"passed over a damaged history entry: cannot read {poisoned}: " in verdict["message"]
    capsys.readouterr()
    assert cli(["history", f"--dir={folder}"]) == 0
    out, err = capsys.readouterr()
    assert f"llmeval: passed over cannot read {poisoned}" in err and "Traceback" not in out + err
    # Given as --llmeval-previous it is refused, in one line naming the file, before any row runs.
    refused = pytester.runpytest(*args, f"--llmeval-previous={poisoned}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in refused.stderr.lines if x.startswith("ERROR:")]
    assert line.startswith(f"ERROR: llmeval: --llmeval-previous: cannot read {poisoned}: not ")
    poisoned.unlink()  # the suite checks every results document a test leaves against the schema


# ---------------------------------------------------------------------------------------------------------
# Saved predictions: whose they are, and what their lines may hold


def test_two_models_predictions_never_share_a_baseline(pytester: pytest.Pytester) -> None:
    setup_run(pytester, 10, broken=set())
    args = ["--llmeval-domain=bench*", "--llmeval-min-rows=10"]
    assert pytester.runpytest("--llmeval-predictions=preds.jsonl", *args).ret == pytest.ExitCode.OK
    first = read(pytester)["adapter_name"]
    assert first.startswith("preds.jsonl@") and len(first) == len("preds.jsonl@") + 12
    # Another model's outputs (wrong on every row) in a file of the same name, scored into the same folder:
    # not compared with the first model's run (which would fail no_regression against the wrong baseline).
    other = [{"id": f"r{i}", "prediction": "x", "base_prediction": "no"} for i in range(10)]
    (pytester.path / "preds.jsonl").write_text(jsonl(other))
    pytester.runpytest("--llmeval-predictions=preds.jsonl", *args)
    doc = read(pytester)
    assert doc["adapter_name"] != first
    verdict = gate_of(doc, "no_regression") if "no_regression" in doc["benchmarks"][0]["gates"] else None
    assert verdict is None or verdict["status"] == "skip", verdict
    # Named by a `model` field, runs of one model compare whatever their outputs: the regression is seen.
    for lines in ([{**p, "prediction": f"a{i}"} for i, p in enumerate(other)], other):
        (pytester.path / "preds.jsonl").write_text(jsonl([{**p, "model": "math-v2"} for p in lines]))
        pytester.runpytest("--llmeval-predictions=preds.jsonl", *args)
    doc = read(pytester)
    assert doc["adapter_name"] == "math-v2"
    assert gate_of(doc, "no_regression")["status"] == "fail"


@XDIST
def test_an_unknown_field_in_a_predictions_line_is_refused_with_a_suggestion(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    setup_run(pytester, 3, broken=set())
    lines = (pytester.path / "preds.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"base_prediction"', '"base_predicton"')
    (pytester.path / "preds.jsonl").write_text("\n".join(lines) + "\n")
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*preds.jsonl:2: unknown field 'base_predicton' (did you mean 'base_prediction'?)*"]
    )
    mixed = [{"id": "r0", "prediction": "a0", "model": "a"}, {"id": "r1", "prediction": "a1", "model": "b"}]
    (pytester.path / "preds.jsonl").write_text(jsonl(mixed))
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl")
    result.stderr.fnmatch_lines(["*preds.jsonl:2: model 'b' differs from line 1's 'a'*"])


@XDIST
def test_predictions_of_deselected_rows_are_not_called_unmatched(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    setup_run(pytester, 6, broken=set())
    with (pytester.path / "preds.jsonl").open("a") as f:
        f.write(json.dumps({"id": "stray", "prediction": "x", "base_prediction": "y"}) + "\n")
    pytester.runpytest("--llmeval-predictions=preds.jsonl", "-k", "r1 or r2", "-m", "not gate", *workers)
    assert read(pytester)["predictions"]["unmatched_ids"] == ["stray"]


@XDIST
def test_a_partial_run_never_replaces_a_complete_results_json_unless_asked(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    setup_run(pytester, 6, broken=set())
    args = ["--llmeval-predictions=preds.jsonl", "--llmeval-no-history", "-m", "not gate", *workers]
    pytester.runpytest(*args)
    complete = (pytester.path / "results.json").read_text()
    spot = (pytester.path / "spot_check.md").read_text()
    assert json.loads(complete)["complete"] is True
    result = pytester.runpytest(*args, "-k", "r1 or r2")
    # The complete run stays; the partial one goes beside it, and the summary says so and how to replace.
    assert (pytester.path / "results.json").read_text() == complete
    assert (pytester.path / "spot_check.md").read_text() == spot
    partial = json.loads((pytester.path / "results.partial.json").read_text())
    assert partial["complete"] is False and len(partial["benchmarks"][0]["rows"]) == 2
    assert (pytester.path / "spot_check.partial.md").is_file()
    result.stdout.fnmatch_lines(
        [
            f"results written to {pytester.path / 'results.partial.json'}",
            f"{pytester.path / 'results.json'} (the complete run of *) is kept: a partial run (2 of 6 rows "
            "selected (-k*)) does not replace it unless --llmeval-overwrite is given",
        ]
    )
    if workers:
        return  # what follows is the controller's choice alone, the same under -n: serially only (time)
    # A run of every row in which a row errored is the model as it is now: it replaces.
    setup_run(pytester, 6, broken={3})
    pytester.runpytest(*args)
    now = json.loads((pytester.path / "results.json").read_text())
    assert now["complete"] is False and now["incomplete_reason"] == "1 of 6 rows errored"
    # Asked for: --llmeval-overwrite, or results written elsewhere.
    pytester.runpytest(*args)
    setup_run(pytester, 6, broken=set())
    pytester.runpytest(*args)
    pytester.runpytest(*args, "-k", "r1", "--llmeval-results=r1.json")
    assert json.loads((pytester.path / "r1.json").read_text())["complete"] is False
    pytester.runpytest(*args, "-k", "r1", "--llmeval-overwrite")
    assert len(json.loads((pytester.path / "results.json").read_text())["benchmarks"][0]["rows"]) == 1


def test_a_hygiene_gate_is_turned_off_by_its_own_option(pytester: pytest.Pytester) -> None:
    setup_run(pytester, 6, broken=set())
    (pytester.path / "bench.jsonl").write_text(
        jsonl([{**custom_row(i), "tags": []} for i in range(6)])  # no row tagged edge
    )
    args = ["--llmeval-predictions=preds.jsonl"]
    pytester.runpytest(*args)
    before = read(pytester)["benchmarks"][0]["gates"]
    assert before["edge_cases"]["status"] == before["size"]["status"] == "fail"
    pytester.runpytest(*args, "--llmeval-min-edge-cases=0", "--llmeval-min-rows=0")
    after = read(pytester)["benchmarks"][0]["gates"]
    assert after["edge_cases"]["status"] == after["size"]["status"] == "pass"


def test_history_pruning_touches_only_the_entries_it_wrote(pytester: pytest.Pytester) -> None:
    setup_run(pytester, 3, broken=set())
    folder = pytester.path / ".llmeval" / "history"
    folder.mkdir(parents=True)
    notes = folder / "0-notes.json"  # sorts before every entry: the oldest, were it one
    notes.write_text('{"benchmarks": []}')
    for _ in range(3):
        pytester.runpytest("--llmeval-predictions=preds.jsonl", "-m", "not gate", "--llmeval-history-keep=1")
    assert notes.read_text() == '{"benchmarks": []}'
    assert len([p for p in folder.iterdir() if p != notes]) == 1


@XDIST
def test_a_long_output_is_cut_in_the_failure_report_and_whole_in_results_json(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl([row("r0", expected="hello")]))
    long = "x" * 1_000_000
    (pytester.path / "preds.jsonl").write_text(jsonl([{"id": "r0", "prediction": long}]))
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "-m", "not gate", *workers)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert len(text) < 50_000, len(text)
    result.stdout.fnmatch_lines(["*output: *'xxx*' … 998800 more characters (all of it in results.json)"])
    assert read(pytester)["benchmarks"][0]["rows"][0]["models"]["base"]["output"] == long


def test_path_clashes_by_resolved_path_hard_link_folder_top_and_other_output(tmp_path: Path) -> None:
    from pytest_llmeval.inputs import path_clashes

    bench = tmp_path / "bench.jsonl"
    bench.write_text("{}\n")
    linked = tmp_path / "linked.jsonl"
    os.link(bench, linked)
    adapter = tmp_path / "adapter"
    (adapter / "eval").mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "eval" / "results.json").write_text("{}")
    inputs = [("the benchmark file", bench), ("--adapter", adapter)]
    assert path_clashes([("--llmeval-results", tmp_path / "sub" / ".." / "bench.jsonl")], inputs)
    assert path_clashes([("--llmeval-results", linked)], inputs)  # the same file under another name
    assert path_clashes([("--llmeval-results", adapter / "adapter_config.json")], inputs)
    # A subfolder of an adapter is the user's (and a new file at its top replaces nothing).
    assert not path_clashes([("--llmeval-results", adapter / "eval" / "results.json")], inputs)
    assert not path_clashes([("--llmeval-results", adapter / "results.json")], inputs)
    both = [("--llmeval-results", tmp_path / "r.json"), ("--llmeval-html", tmp_path / "./r.json")]
    assert path_clashes(both, inputs) == [
        f"--llmeval-html {tmp_path}/r.json is also --llmeval-results: one would replace the other; give each "
        "its own file"
    ]


@XDIST
def test_a_pattern_that_backtracks_without_end_is_a_row_error_not_a_hang(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    pytester.makeini("[pytest]\n")
    config = {"extract_pattern": "^(a|aa)+$"}
    rows = [row("slow", expected="a", evaluation_config=config), row("fine", expected="hello")]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    preds = [{"id": "slow", "prediction": "a" * 60 + "!"}, {"id": "fine", "prediction": "hello"}]
    (pytester.path / "preds.jsonl").write_text(jsonl(preds))
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "-m", "not gate", *workers)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bench.jsonl:1: scorer 'exact_match' raised ValueError: extract_pattern '^(a|aa)+$' ran past "
            "2 s on this output (61 characters): it backtracks without end*"
        ]
    )
    assert read(pytester)["benchmarks"][0]["results"]["n_errors"] == 1
