"""What a run reads and writes at its ends, fuzzed (issue 36): output paths against input paths, option
values only the end of a run reads, damaged baselines in the history, damaged documents given to the CLI.

Every example ends in one of: a valid run (its results.json strict JSON and readable back), one
`ERROR: llmeval:` line before any test, or exit 2 with one line from the command line. Never a traceback, an
internal error, a hang, a green gate without scored rows, or an input file changed.

Predictions mode, in-process: no model is loaded, so an example is a fraction of a second. The normal suite
runs a few derandomized examples of each property; a campaign draws fresh ones
(`LLMEVAL_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz_runs.py`, a tenth of that per plugin-level property).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_inputs import fuzz_settings, outcome, time_limit
from test_peft_sft import CLOSE, document

from pytest_llmeval.cli import main as cli
from pytest_llmeval.results_reader import ResultsFileError, read_results

SCRIPT = "def evaluate(generated, expected):\n    return float(generated.strip() == expected)\n"
INPUTS = ("bench.jsonl", "preds.jsonl", "score.py")
N_ROWS = 6


def setup_files(path: Path) -> dict[str, bytes]:
    """A custom-scored benchmark (its scorer a file the run reads), the predictions; their bytes."""
    config = {"script": "score.py", "function": "evaluate"}
    rows = [
        row(f"r{i}", expected=f"a{i}", evaluation_type="custom", evaluation_config=config, tags=["edge"])
        for i in range(N_ROWS)
    ]
    preds = [{"id": f"r{i}", "prediction": f"a{i}", "base_prediction": "no"} for i in range(N_ROWS)]
    files = {
        "bench.jsonl": jsonl(rows).encode(),
        "preds.jsonl": jsonl(preds).encode(),
        "score.py": SCRIPT.encode(),
    }
    for name, data in files.items():
        (path / name).write_bytes(data)
    for stale in ("results.json", "results.partial.json", "out.json", "report.html", "junit.xml"):
        (path / stale).unlink(missing_ok=True)
    return files


def strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a document the project wrote")

    return json.loads(text, parse_constant=refuse)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    with time_limit():
        return pytester.runpytest(
            "--llmeval-predictions=preds.jsonl", "bench.jsonl", "-p", "no:cacheprovider", *args
        )


def check_ending(
    pytester: pytest.Pytester,
    result: pytest.RunResult,
    inputs: dict[str, bytes],
    results: str = "results.json",
) -> str:
    """The run ended in one of the allowed ways (its name, for the statistics); no input was changed."""
    for name, data in inputs.items():
        assert (pytester.path / name).read_bytes() == data, f"{name} was written over"
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    if result.ret == pytest.ExitCode.USAGE_ERROR and "results written to" not in out:
        errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
        # Ours, or pytest's for a value an option's type refused: its usage line, then one naming the option.
        ours = len(errors) == 1 and errors[0].startswith("ERROR: llmeval: ")
        parsed = [line for line in result.stderr.lines if ": error: argument --llmeval-" in line]
        assert ours or (errors == [line for line in errors if "usage:" in line] and len(parsed) == 1), (
            result.stderr.lines
        )
        assert "bench.jsonl::" not in result.stdout.str(), "a test ran before the refusal"
        return "refused at the start"
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), out[-3000:]
    written = pytester.path / results
    assert f"results written to {written}" in out, out[-3000:]
    strict(written.read_text(encoding="utf-8"))
    read_results(written)
    return "a valid run"


# ---------------------------------------------------------------------------------------------------------
# Outputs against inputs: wherever the options point, nothing the run reads is written over.

TARGETS = st.sampled_from(
    [*INPUTS, "out.json", "report.html", "junit.xml", "sub/../bench.jsonl", "./preds.jsonl", "results.json"]
)


@fuzz_settings(10, share=10, pytester=True)
@given(results=st.none() | TARGETS, html=st.none() | TARGETS, junit=st.none() | TARGETS)
def test_outputs_never_touch_inputs(
    pytester: pytest.Pytester, results: str | None, html: str | None, junit: str | None
) -> None:
    inputs = setup_files(pytester.path)
    (pytester.path / "sub").mkdir(exist_ok=True)
    args = [f"--llmeval-results={results}"] if results else []
    args += [f"--llmeval-html={html}"] if html else []
    args += [f"--junitxml={junit}"] if junit else []
    ending = check_ending(pytester, run(pytester, *args, "-m", "not gate"), inputs, results or "results.json")
    outcome(ending)
    chosen = [Path(p).resolve() for p in (results or "results.json", html, junit) if p]
    clash = len(set(chosen)) < len(chosen) or any(p.name in INPUTS for p in chosen)
    assert (ending == "refused at the start") == clash, (results, html, junit)


# ---------------------------------------------------------------------------------------------------------
# Option values the end of a run reads: refused when parsed, or the run ends written.

NUMBERS = (
    st.floats(allow_nan=True, allow_infinity=True).map(repr)
    | st.integers(-(10**400), 10**400).map(str)
    | st.sampled_from(["0", "1", "-0", "1e308", "1e-320", "nan", "inf", "", "x"])
    | st.sampled_from(["0.05", "0.5", "0.1", "3", "6", "10"])  # values a run accepts
)
WEIGHT_KEYS = st.sampled_from(["custom", "exact_match", "rouge", "nonsense", ""])


@st.composite
def option_values(draw: st.DrawFn) -> list[str]:
    options = {
        "--llmeval-alpha": NUMBERS,
        "--llmeval-warn-drop": NUMBERS,
        "--llmeval-fail-drop": NUMBERS,
        "--llmeval-min-rows": NUMBERS,
        "--llmeval-min-edge-cases": NUMBERS,
        "--llmeval-history-keep": NUMBERS,
        "--llmeval-composite-weights": st.lists(
            st.tuples(WEIGHT_KEYS, NUMBERS).map("=".join), min_size=1, max_size=3
        ).map(",".join),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=3, unique=True))
    return [f"{name}={draw(options[name])}" for name in chosen]


@fuzz_settings(12, share=10, pytester=True)
@given(args=option_values())
def test_option_values_are_refused_at_the_start_or_the_run_ends_written(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    inputs = setup_files(pytester.path)
    outcome(check_ending(pytester, run(pytester, *args), inputs))


# ---------------------------------------------------------------------------------------------------------
# Damaged documents: a baseline in the history, --llmeval-previous, and every command of the CLI.

REPLACEMENTS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
REPLACEMENTS |= st.lists(st.integers(), max_size=2) | st.dictionaries(
    st.text(max_size=2), st.integers(), max_size=2
)


def fields(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value in a JSON document, the document itself first."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += fields(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += fields(item, (*at, i))
    return found


@st.composite
def damaged(draw: st.DrawFn, good: dict[str, Any]) -> dict[str, Any]:
    """`good` with one to three of its fields replaced by values of any JSON type (or removed)."""
    doc = json.loads(json.dumps(good))
    for _ in range(draw(st.integers(1, 3))):
        paths = fields(doc)[1:]
        where = draw(st.sampled_from(paths))
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[where[-1]]
        else:
            parent[where[-1]] = draw(REPLACEMENTS)
    return doc


def baseline_doc(pytester: pytest.Pytester) -> tuple[dict[str, Any], dict[str, bytes]]:
    inputs = setup_files(pytester.path)
    assert check_ending(pytester, run(pytester), inputs) == "a valid run"
    (entry,) = (pytester.path / ".llmeval" / "history").iterdir()
    return json.loads(entry.read_text()), inputs


_BASELINES: dict[Path, tuple[dict[str, Any], dict[str, bytes]]] = {}


@fuzz_settings(8, share=10, pytester=True)
@given(data=st.data())
def test_a_damaged_baseline_is_passed_over_or_refused(pytester: pytest.Pytester, data: st.DataObject) -> None:
    if pytester.path not in _BASELINES:  # one good run per test (the examples share its folder)
        _BASELINES[pytester.path] = baseline_doc(pytester)
    good, inputs = _BASELINES[pytester.path]
    poisoned = pytester.path / ".llmeval" / "history" / "29991231T000000.000000Z_prediction.json"
    poisoned.write_text(json.dumps(data.draw(damaged(good))))
    try:
        # The newest entry in the history: passed over (or used, when still a document), never a crash.
        ending = check_ending(pytester, run(pytester, "--llmeval-history-keep=3"), inputs)
        assert ending == "a valid run"
        # The same file named as --llmeval-previous: refused in one line, or compared with.
        outcome(
            check_ending(
                pytester, run(pytester, f"--llmeval-previous={poisoned}", "--llmeval-no-history"), inputs
            )
        )
    finally:
        poisoned.unlink()


# The CLI reads documents it did not write: one line and status 2, or its answer (0 or 1), never a traceback.
PEFT_SFT = document(CLOSE)
REPORTED = json.loads((Path(__file__).parent / "data" / "report_results.json").read_text())


def commands(path: Path, out: Path) -> list[list[str]]:
    return [
        ["check", str(path)],
        ["report", str(path), f"--html={out / 'r.html'}", f"--spot-check={out / 's.md'}"],
        ["compare", str(path), str(path)],
        ["compare", str(path), str(path), "--peft-column=adapter", "--sft-column=base"],
        ["history", f"--results={path}"],
    ]


@fuzz_settings(40, share=1)
@given(data=st.data(), which=st.sampled_from(["peft-sft", "report"]))
def test_the_command_line_answers_any_damaged_document(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, which: str
) -> None:
    folder = tmp_path_factory.mktemp("cli", numbered=True)
    doc = data.draw(damaged(PEFT_SFT if which == "peft-sft" else REPORTED))
    path = folder / "results.json"
    path.write_text(json.dumps(doc))
    try:
        read_results(path)
        outcome("read as a document")
    except ResultsFileError:
        outcome("refused by the reader")
    for argv in commands(path, folder):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), time_limit():
            status = cli(argv)
        assert status in (0, 1, 2), (argv, status)
        if status == 2:
            lines = err.getvalue().strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("llmeval: "), (argv, lines)


def test_a_document_read_back_names_the_damaged_field(tmp_path: Path) -> None:
    """The reader's answer for some damage a campaign found crashing `compare` before it was refused."""
    b, ja = next(
        (b, i)
        for b, bench in enumerate(PEFT_SFT["benchmarks"])
        for i, r in enumerate(bench["rows"])
        if r["evaluation_type"] == "perplexity"
    )
    score = ("benchmarks", b, "rows", ja, "models", "adapter", "score")
    cases = {
        f'benchmarks[0].rows[{ja}].models.adapter.score.n_tokens is "", not a count (a whole number >= 0)': (
            ("benchmarks", 0, "rows", ja, "models", "adapter", "score", "n_tokens"),
            "",
        ),
        f"benchmarks[{b}].rows[{ja}].models.adapter.score has no nll": (
            (*score, "nll"),
            None,
        ),
        "models[1].parameter_efficiency.trainable_params is {}, not a count (a whole number >= 0) or null": (
            ("models", 1, "parameter_efficiency", "trainable_params"),
            {},
        ),
    }
    for said, (where, value) in cases.items():
        doc = json.loads(json.dumps(PEFT_SFT))
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        parent[where[-1]] = value
        path = tmp_path / "results.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(ResultsFileError) as refused:
            read_results(path)
        assert str(refused.value) == f"cannot read {path}: not a results.json ({said})"
