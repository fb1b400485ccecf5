"""Bad input fails fast, in one line, and a finished run is never lost (issue 24).

BAD_INPUTS is the table the "Bad input" section of docs/benchmarks.md is written from
(test_docs_list_every_bad_input keeps the two in step): each case is made with real files (a truncated
safetensors file, a folder where a file should be, ...), run through the real plugin serially and with -n 2,
and must stop before any test with exit code 4 and exactly one `ERROR: llmeval: ...` line: never a
traceback, never INTERNALERROR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO, jsonl, model_args, row

from pytest_llmeval.inputs import (
    InputError,
    check_adapter_folder,
    check_model_folder,
    check_output_file,
    check_safetensors,
)

ROWS = [row("r1"), row("r2", expected="bye")]
PREDICTIONS = "".join(json.dumps({"id": i, "prediction": "hello"}) + "\n" for i in ("r1", "r2"))


@dataclass(frozen=True)
class Models:
    tiny_model: Path
    tiny_adapter: Path


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def _truncate(path: Path, keep: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: keep if keep >= 0 else len(data) + keep])


def _predictions(p: pytest.Pytester) -> list[str]:
    p.makefile(".jsonl", preds=PREDICTIONS)
    return ["--llmeval-predictions=preds.jsonl"]


def _adapter(p: pytest.Pytester, m: Models, damage: Callable[[Path], None]) -> list[str]:
    adapter = _copy(m.tiny_adapter, p.path / "adapter")
    damage(adapter)
    return [*model_args(m.tiny_model), f"--adapter={adapter}"]


def _base(p: pytest.Pytester, m: Models, damage: Callable[[Path], None]) -> list[str]:
    base = _copy(m.tiny_model, p.path / "base")
    damage(base)
    return [f"--base-model={base}", "-p", "no:cacheprovider", "--llmeval-no-cache"]


def _set_json(path: Path, **fields: object) -> None:
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def _remove(*names: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        for name in names:
            (folder / name).unlink()

    return damage


def _other_project(p: pytest.Pytester, m: Models) -> list[str]:
    # The usual layout: the adapter lives in its training repository, which has its own pyproject.toml.
    trainer = p.path / "trainer"
    _copy(m.tiny_adapter, trainer / "adapters" / "tiny")
    (trainer / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-v"\n')
    return [*model_args(m.tiny_model), "--adapter", "trainer/adapters/tiny"]


@dataclass(frozen=True)
class Bad:
    id: str
    what: str  # the bad input, as the docs' table names it
    make: Callable[[pytest.Pytester, Models], list[str]]  # writes the files, returns the arguments
    message: str  # fnmatch pattern of the one line after "ERROR: llmeval: "
    env: tuple[tuple[str, str], ...] = ()  # environment of the run (pytester's folder is the working one)


def _huge_score(p: pytest.Pytester) -> Path:
    """A results document whose one row's score was set to 1e308 (a damaged or hand-edited baseline)."""
    row = {"id": "r1", "evaluated": "base", "models": {"base": {"score": {"value": 1e308}}}}
    path = p.path / "previous.json"
    path.write_text(json.dumps({"benchmarks": [{"benchmark_file": "bench.jsonl", "rows": [row]}]}))
    return path


def _retyped_count(p: pytest.Pytester) -> Path:
    """A results document whose perplexity row's token count was written as a string (hand-edited)."""
    score = {
        "value": 1.0,
        "cross_entropy": 2.0,
        "nll": 24.0,
        "perplexity": 7.39,
        "n_tokens": "12",
        "n_chars": 40,
    }
    row = {
        "id": "r1",
        "evaluation_type": "perplexity",
        "evaluated": "base",
        "models": {"base": {"score": score}},
    }
    path = p.path / "previous.json"
    path.write_text(json.dumps({"benchmarks": [{"benchmark_file": "bench.jsonl", "rows": [row]}]}))
    return path


def _two_adapters_one_name(p: pytest.Pytester, m: Models) -> list[str]:
    first, second = _copy(m.tiny_adapter, p.path / "first"), _copy(m.tiny_adapter, p.path / "second")
    return [*model_args(m.tiny_model), f"--adapter={first}", f"--adapter={second}"]


BAD_INPUTS = [
    Bad(
        "two-adapters-one-name",
        "two --adapter folders with one name",
        _two_adapters_one_name,
        "--adapter */first and --adapter */second are both named 'tiny-adapter': rename one (metadata.json "
        "'name', else the folder name) so each column of the results has its own",
    ),
    Bad(
        "model-without-name",
        "--llmeval-model without NAME=",
        lambda p, m: [*model_args(m.tiny_model), "--llmeval-model=models/sft"],
        "--llmeval-model: expected NAME=PATH_OR_ID or NAME=ID@URL, got 'models/sft'",
    ),
    Bad(
        "reference-not-a-model",
        "--llmeval-reference naming no --llmeval-model",
        lambda p, m: [*model_args(m.tiny_model), "--llmeval-reference=gpt"],
        "--llmeval-reference gpt: no --llmeval-model is named 'gpt' (models: none)",
    ),
    Bad(
        "adapter-header-cut",
        "adapter weights cut short inside their header",
        lambda p, m: _adapter(p, m, lambda a: _truncate(a / "adapter_model.safetensors", 100)),
        "*adapter/adapter_model.safetensors: damaged safetensors file (its header claims * bytes, the file "
        "has 100): truncated, or not safetensors; copy or save it again",
    ),
    Bad(
        "adapter-data-cut",
        "adapter weights cut short in their tensors",
        lambda p, m: _adapter(p, m, lambda a: _truncate(a / "adapter_model.safetensors", -10)),
        "*adapter/adapter_model.safetensors: truncated safetensors file (its tensors need * bytes of data, "
        "it holds *); copy or save it again",
    ),
    Bad(
        "adapter-config-not-json",
        "adapter_config.json that is not JSON",
        lambda p, m: _adapter(p, m, lambda a: (a / "adapter_config.json").write_text("{'r': 4}")),
        "--adapter */adapter_config.json:1: invalid JSON (Expecting property name enclosed in double quotes,"
        " column 2)",
    ),
    Bad(
        "adapter-config-no-peft-type",
        "adapter_config.json without peft_type",
        lambda p, m: _adapter(p, m, lambda a: (a / "adapter_config.json").write_text('{"r": 4}')),
        "--adapter */adapter_config.json: no 'peft_type' string; is it a peft adapter's config?",
    ),
    Bad(
        "adapter-config-wrong-type",
        "a wrong type in adapter_config.json",
        lambda p, m: _adapter(p, m, lambda a: _set_json(a / "adapter_config.json", r="4")),
        "--adapter */adapter_config.json: 'r' must be int, got \"4\"",
    ),
    Bad(
        "adapter-metadata",
        "metadata.json whose domain_benchmarks is not a list",
        lambda p, m: _adapter(
            p, m, lambda a: _set_json(a / "metadata.json", domain_benchmarks="bench.jsonl")
        ),
        "--adapter */metadata.json: 'domain_benchmarks' must be a list of glob strings",
    ),
    Bad(
        "adapter-is-a-file",
        "--adapter naming a file",
        lambda p, m: [*model_args(m.tiny_model), f"--adapter={m.tiny_adapter / 'adapter_config.json'}"],
        "--adapter */adapter_config.json: not a folder (pass the folder holding adapter_config.json)",
    ),
    Bad(
        "base-no-tokenizer",
        "a model folder without tokenizer files",
        lambda p, m: _base(p, m, _remove("tokenizer.json", "tokenizer_config.json")),
        "--base-model */base: no tokenizer (tokenizer.json, tokenizer_config.json, tokenizer.model, "
        "vocab.json); save the tokenizer beside the model (tokenizer.save_pretrained)",
    ),
    Bad(
        "base-weights-cut",
        "model weights cut short",
        lambda p, m: _base(p, m, lambda b: _truncate(b / "model.safetensors", -1000)),
        "*base/model.safetensors: truncated safetensors file (its tensors need * bytes of data, it holds *);"
        " copy or save it again",
    ),
    Bad(
        "base-config-no-model-type",
        "config.json without model_type",
        lambda p, m: _base(p, m, lambda b: _set_json(b / "config.json", model_type=None)),
        "--base-model */base/config.json: no 'model_type' string; transformers cannot tell the architecture"
        " (save the model again with save_pretrained)",
    ),
    Bad(
        "judge-not-here",
        "--llmeval-judge-model that is neither a folder nor in the hub cache, downloads off",
        lambda p, m: [*_predictions(p), "--llmeval-offline", "--llmeval-judge-model=some-org/judge"],
        "--llmeval-judge-model 'some-org/judge' is not in the Hugging Face cache and downloads are off "
        "(HF_HUB_OFFLINE=1 or --llmeval-offline): download it once with network (`hf download "
        "some-org/judge`), or pass a local folder",
    ),
    Bad(
        "results-under-a-file",
        "--llmeval-results inside a path that is a file",
        lambda p, m: [*_predictions(p), "--llmeval-results=notes.txt/results.json"],
        "--llmeval-results */notes.txt/results.json: */notes.txt is a file, so the folder cannot be made; "
        "pick another path",
    ),
    Bad(
        "results-is-a-folder",
        "--llmeval-results naming a folder",
        lambda p, m: [*_predictions(p), "--llmeval-results=out"],
        "--llmeval-results */out: is a folder; pass a file path, e.g. */out/results.json",
    ),
    Bad(
        "results-is-the-benchmark",
        "--llmeval-results naming a benchmark file of the run",
        lambda p, m: [*_predictions(p), "--llmeval-results=bench.jsonl"],
        "--llmeval-results */bench.jsonl is the benchmark file */bench.jsonl: the run would replace what it "
        "reads; write it elsewhere",
    ),
    Bad(
        "results-is-the-predictions",
        "--llmeval-results naming the --llmeval-predictions file",
        lambda p, m: [*_predictions(p), "--llmeval-results=preds.jsonl"],
        "--llmeval-results */preds.jsonl is --llmeval-predictions */preds.jsonl: the run would replace what "
        "it reads; write it elsewhere",
    ),
    Bad(
        "html-is-the-results",
        "--llmeval-html naming the --llmeval-results file",
        lambda p, m: [*_predictions(p), "--llmeval-html=results.json"],
        "--llmeval-html */results.json is also --llmeval-results: one would replace the other; give each "
        "its own file",
    ),
    Bad(
        "previous-out-of-range",
        "an --llmeval-previous file holding a score of 1e308",
        lambda p, m: [*_predictions(p), f"--llmeval-previous={_huge_score(p)}"],
        # (fnmatch: [0] would be a character class)
        "--llmeval-previous: cannot read */previous.json: not a results.json (benchmarks*.rows*.models"
        ".base.score.value is 1e+308, out of any range a results.json holds)",
    ),
    Bad(
        "previous-wrong-type",
        'an --llmeval-previous file whose perplexity score has a token count of "12"',
        lambda p, m: [*_predictions(p), f"--llmeval-previous={_retyped_count(p)}"],
        "--llmeval-previous: cannot read */previous.json: not a results.json (benchmarks*.rows*.models.base"
        '.score.n_tokens is "12", not a count (a whole number >= 0))',
    ),
    Bad(
        "weight-too-large",
        "a composite weight of 1e308",
        lambda p, m: [*_predictions(p), "--llmeval-composite-weights=exact_match=1e308"],
        "--llmeval-composite-weights: weight of exact_match is '1e308': weights are relative, scale them "
        "down",
    ),
    Bad(
        "history-is-a-file",
        "a file where the history folder goes (.llmeval beside results.json)",
        lambda p, m: [*_predictions(p), "--llmeval-results=results.json"],
        "the history folder beside --llmeval-results */.llmeval/history: */.llmeval is a file, so the "
        "folder cannot be made; pick another path",
    ),
    Bad(
        "html-under-a-file",
        "--llmeval-html inside a path that is a file",
        lambda p, m: [*_predictions(p), "--llmeval-html=notes.txt/report.html"],
        "--llmeval-html */notes.txt/report.html: */notes.txt is a file, so the folder cannot be made;*",
    ),
    Bad(
        "cache-dir-is-a-file",
        "--llmeval-cache-dir naming a file",
        lambda p, m: [*_predictions(p), "--llmeval-cache-dir=notes.txt"],
        "--llmeval-cache-dir */notes.txt: is a file, not a folder",
    ),
    Bad(
        "train-data-bad-line",
        "a training file with a line that is not JSON",
        lambda p, m: [*_predictions(p), "--llmeval-train-data=train.jsonl"],
        "--llmeval-train-data (read by the held_out gate): train.jsonl:2: invalid JSON: Expecting value "
        "(column 1)",
    ),
    Bad(
        "train-data-missing",
        "--llmeval-train-data naming no file",
        lambda p, m: [*_predictions(p), "--llmeval-train-data=nowhere.jsonl"],
        "--llmeval-train-data nowhere.jsonl: no such file",
    ),
    Bad(
        "predictions-bad-line",
        "a predictions file with a line that is not JSON",
        lambda p, m: ["--llmeval-predictions=preds.jsonl"],
        "--llmeval-predictions: preds.jsonl:2: invalid JSON: Expecting value (column 1)",
    ),
    Bad(
        "predictions-is-a-folder",
        "--llmeval-predictions naming a folder",
        lambda p, m: ["--llmeval-predictions=out"],
        "--llmeval-predictions out: cannot read (Is a directory)",
    ),
    Bad(
        "embedded-cache-unwritable",
        "$LLMEVAL_CACHE_DIR that cannot be written, before the embedded model's first conversion",
        lambda p, m: ["-p", "no:cacheprovider"],
        "$LLMEVAL_CACHE_DIR (where the embedded model is converted once) */notes.txt/cache/models: "
        "*/notes.txt is a file, so the folder cannot be made; pick another path",
        env=(("LLMEVAL_CACHE_DIR", "notes.txt/cache"),),
    ),
    Bad(
        "rootdir-from-adapter",
        "`--adapter PATH` (two words) into a project with its own pyproject.toml",
        _other_project,
        "pytest took its rootdir */trainer and configfile */trainer/pyproject.toml from the value of "
        "`--adapter trainer/adapters/tiny` *; write `--adapter=trainer/adapters/tiny`, or add --rootdir=.",
    ),
    Bad(
        "hub-id-offline",
        "a Hub id that is not in the Hugging Face cache, downloads off",
        lambda p, m: ["--llmeval-offline", "--base-model=some-org/absent-model", "-p", "no:cacheprovider"],
        "--base-model 'some-org/absent-model' is not in the Hugging Face cache and downloads are off "
        "(HF_HUB_OFFLINE=1 or --llmeval-offline): download it once with network (`hf download "
        "some-org/absent-model`), or pass a local folder",
    ),
    Bad(
        "endpoint-without-base",
        "--llmeval-endpoint without --base-model",
        lambda p, m: ["--llmeval-endpoint=http://127.0.0.1:9/v1"],
        "--llmeval-endpoint: name the served base model with --base-model MODEL_ID (an id its /v1/models "
        "lists)",
    ),
    Bad(
        "endpoint-not-a-url",
        "--llmeval-endpoint that is not an http(s) URL",
        lambda p, m: ["--llmeval-endpoint=localhost:8000/v1", "--base-model=m"],
        "--llmeval-endpoint localhost:8000/v1: expected an http(s) base URL such as http://127.0.0.1:8000/v1",
    ),
    Bad(
        "endpoint-unreachable",
        "an --llmeval-endpoint that nothing answers at",
        lambda p, m: ["--llmeval-endpoint=http://127.0.0.1:9/v1", "--base-model=m", "--llmeval-retries=1"],
        "endpoint http://127.0.0.1:9/v1 model 'm': unreachable (connection failed (*); 2 attempts); check "
        "that the server is running and the URL ends in /v1",
    ),
]


def _files_beside(p: pytest.Pytester, case: Bad) -> None:
    """The files some cases need besides the ones `make` writes."""
    p.makefile(".txt", notes="a file, not a folder")
    (p.path / "out").mkdir()
    if case.id == "history-is-a-file":
        (p.path / ".llmeval").write_text("a file, not a folder")
    if case.id == "train-data-bad-line":
        (p.path / "train.jsonl").write_text('{"instruction": "x"}\nnot json\n')
    if case.id == "predictions-bad-line":
        (p.path / "preds.jsonl").write_text('{"id": "r1", "prediction": "hello"}\nnot json\n')


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c.id for c in BAD_INPUTS])
def test_bad_input_stops_the_run_in_one_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Path,
    tiny_adapter: Path,
    case: Bad,
    workers: tuple[str, ...],
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    _files_beside(pytester, case)
    for name, value in case.env:
        monkeypatch.setenv(name, str(pytester.path / value))
    args = case.make(pytester, Models(tiny_model, tiny_adapter))
    result = pytester.runpytest(*args, *workers, "bench.jsonl")
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    result.stderr.fnmatch_lines([f"ERROR: llmeval: {case.message}"])
    assert not (pytester.path / "results.json").exists()  # stopped before any row


def test_docs_list_every_bad_input() -> None:
    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    missing = [case.what for case in BAD_INPUTS if f"| {case.what} |" not in page]
    assert not missing, f"docs/benchmarks.md's bad-input table lacks: {missing}"


def test_two_word_option_inside_the_project_is_fine(pytester: pytest.Pytester, tiny_model: Path) -> None:
    """The rootdir check fires only when the rootdir really changed: `--adapter adapters/x` from the repo."""
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")
    shutil.copytree(tiny_model, pytester.path / "models" / "tiny")
    args = ["--base-model", "models/tiny", "-p", "no:cacheprovider", "--llmeval-no-cache", "-m", "not gate"]
    result = pytester.runpytest(*args, "bench.jsonl")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == len(ROWS), outcomes


def test_bare_folder_run_checks_results_path_at_collection(pytester: pytest.Pytester) -> None:
    """`pytest benchmarks/` names no option: the outputs are checked once rows are collected, before any."""
    (pytester.path / "benchmarks").mkdir()
    (pytester.path / "benchmarks" / "bench.jsonl").write_text(jsonl(ROWS))
    (pytester.path / "results.json").mkdir()
    result = pytester.runpytest("benchmarks/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: llmeval: --llmeval-results */results.json: is a folder;*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_run_without_benchmarks_checks_nothing(pytester: pytest.Pytester) -> None:
    """Plain unit tests in a project that has the plugin installed never meet its output checks."""
    pytester.makepyfile("def test_ok():\n    pass\n")
    (pytester.path / "results.json").mkdir()
    pytester.runpytest().assert_outcomes(passed=1)


# --- a finished run is never lost -------------------------------------------------------------------

SWAP_CONFTEST = """
import shutil
from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # The results folder turns into a file while the run ends (a mount gone, a clean-up script).
    if hasattr(session.config, "workerinput"):
        return  # xdist workers end first; the controller writes results.json
    shutil.rmtree("out")
    Path("out").write_text("not a folder any more")
"""


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_results_that_cannot_be_written_go_to_the_temporary_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workers: tuple[str, ...]
) -> None:
    fallback = tmp_path / "fallback"
    fallback.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    pytester.makeconftest(SWAP_CONFTEST)
    (pytester.path / "out").mkdir()
    args = [*_predictions(pytester), "--llmeval-results=out/results.json", "--llmeval-html=out/report.html"]
    result = pytester.runpytest(*args, "-m", "not gate", *workers, "bench.jsonl")
    output = result.stdout.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # tests passed and failed; the run still is not green
    saved = sorted(fallback.glob("llmeval-results-*.json"))
    assert len(saved) == 1, list(fallback.iterdir())
    result.stdout.fnmatch_lines(
        [
            f"ERROR: llmeval: cannot write results.json to */out/results.json (*/out is not a folder): "
            f"written to {saved[0]} instead",
            "ERROR: llmeval: cannot add this run to the history in */out/.llmeval/history (a part of "
            "*/out/.llmeval/history is a file, not a folder); results.json has it",
            "ERROR: llmeval: cannot write the spot check to */out/spot_check.md (*): written to */llmeval-"
            "spot_check-*.md instead",
            "ERROR: llmeval: cannot write the HTML report to */out/report.html (*): written to */llmeval-"
            "report-*.html instead",
            f"results written to {saved[0]}",
        ]
    )
    document = json.loads(saved[0].read_text())
    rows = {r["id"]: r for b in document["benchmarks"] for r in b["rows"]}
    assert sorted(rows) == ["r1", "r2"] and document["complete"] is True
    assert [rows[i]["models"]["base"]["score"]["value"] for i in ("r1", "r2")] == [1.0, 0.0]


def _namespace_mounts() -> str | None:
    """None when this machine lets an unprivileged user mount a tmpfs in a new namespace, else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        text=True,
    )
    return None if probe.returncode == 0 else f"unshare -rm cannot mount here: {probe.stderr.strip()}"


def _run_on_a_small_filesystem(
    tmp_path: Path, mount_options: str, fill: bool, args: list[str]
) -> subprocess.CompletedProcess[str]:
    """pytest in its own mount namespace, with `tmp_path/mnt` a tmpfs mounted with `mount_options`."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "bench.jsonl").write_text(jsonl(ROWS))
    (work / "preds.jsonl").write_text(PREDICTIONS)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fallback = tmp_path / "fallback"
    fallback.mkdir()
    script = f'mount -t tmpfs -o {mount_options} tmpfs "{mnt}" || exit 90\n'
    if fill:
        # Fill it to the last block: creating an empty file still works, writing one does not.
        script += f'head -c 10000000 /dev/zero > "{mnt}/filler" 2>/dev/null\n'
    script += 'exec "$@"\n'
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-m",
        "not gate",
        *args,
        "bench.jsonl",
    ]
    env = {**os.environ, "TMPDIR": str(fallback)}
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", *command],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_full_disk_at_the_end_keeps_the_results(tmp_path: Path) -> None:
    why_not = _namespace_mounts()
    if why_not is not None:
        pytest.skip(
            f"{why_not}; test_results_that_cannot_be_written_go_to_the_temporary_folder covers the rest"
        )
    mnt = tmp_path / "mnt"
    result = _run_on_a_small_filesystem(
        tmp_path,
        "size=256k",
        fill=True,
        args=[
            "--llmeval-predictions=preds.jsonl",
            f"--llmeval-results={mnt}/results.json",
            "--llmeval-no-history",
        ],
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    saved = sorted((tmp_path / "fallback").glob("llmeval-results-*.json"))
    assert len(saved) == 1
    assert (
        f"ERROR: llmeval: cannot write results.json to {mnt}/results.json (No space left on device): "
        f"written to {saved[0]} instead"
    ) in result.stdout
    document = json.loads(saved[0].read_text())
    assert document["complete"] is True and len(document["benchmarks"][0]["rows"]) == 2


def test_a_read_only_results_folder_stops_the_run_first(tmp_path: Path) -> None:
    why_not = _namespace_mounts()
    if why_not is not None:
        pytest.skip(f"{why_not}; the folder-is-a-file cases cover the check")
    mnt = tmp_path / "mnt"
    result = _run_on_a_small_filesystem(
        tmp_path,
        "ro",
        fill=False,
        args=["--llmeval-predictions=preds.jsonl", f"--llmeval-results={mnt}/results.json"],
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert result.stderr.strip() == (
        f"ERROR: llmeval: --llmeval-results {mnt}/results.json: cannot write in {mnt} (Read-only file system)"
    )


# --- the checks themselves ----------------------------------------------------------------------------


def test_every_prefix_of_a_safetensors_file_is_refused(tiny_adapter: Path, tmp_path: Path) -> None:
    data = (tiny_adapter / "adapter_model.safetensors").read_bytes()
    check_safetensors(tiny_adapter / "adapter_model.safetensors")
    cut = tmp_path / "cut.safetensors"
    header = int.from_bytes(data[:8], "little")
    # Every length in the header, the first bytes of data and the last ones; each must be refused.
    for keep in [*range(0, 8 + header + 2), *range(len(data) - 64, len(data))]:
        cut.write_bytes(data[:keep])
        with pytest.raises(InputError, match="safetensors file"):
            check_safetensors(cut)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x02\x00\x00\x00\x00\x00\x00\x00[]", "its header is not a JSON object"),
        (b"\x02\x00\x00\x00\x00\x00\x00\x00{x", "its header is not JSON"),
        (
            len(b'{"t": {"dtype": "F32"}}').to_bytes(8, "little") + b'{"t": {"dtype": "F32"}}',
            "tensor 't' has no valid data_offsets",
        ),
        (b"\xff" * 8 + b"{}", "its header claims 18446744073709551615 bytes"),
    ],
)
def test_damaged_safetensors_headers(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.safetensors"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        check_safetensors(path)


def test_sharded_model_with_a_missing_shard(tiny_model: Path, tmp_path: Path) -> None:
    folder = _copy(tiny_model, tmp_path / "sharded")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(
        InputError,
        match=r"weight files named in model\.safetensors\.index\.json are missing: "
        r"model-00002-of-00002\.safetensors",
    ):
        check_model_folder(folder, "--base-model")
    index["weight_map"]["b"] = "model-00001-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    check_model_folder(folder, "--base-model")


def test_the_shipped_adapter_and_models_pass(tiny_model: Path) -> None:
    check_adapter_folder(REPO / "adapters" / "date-iso")
    check_model_folder(tiny_model, "--base-model")


def test_output_file_checks_make_nothing(tmp_path: Path) -> None:
    """The writability probe leaves no file or folder behind, whether the parent exists or not."""
    check_output_file(tmp_path / "results.json", "--llmeval-results")
    check_output_file(tmp_path / "a" / "b" / "results.json", "--llmeval-results")
    assert list(tmp_path.iterdir()) == []
