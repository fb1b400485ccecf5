"""The plugin itself, through pytester: collection, markers, errors, results.json, xdist, fixtures."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row, without_clocks

ROWS = [
    row("r1", difficulty="easy", tags=["edge"]),
    row("r2", instruction="Count to three.", difficulty="medium"),
    row("r3", instruction="Name a colour.", difficulty="hard"),
    row("r4", instruction="Name a fruit.", input="Any fruit.", difficulty="medium"),
    row("r5", instruction="Spell cat.", difficulty="easy"),
]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    # Without an ini file, pytester's --basetemp argument would make the rootdir the parent folder.
    pytester.makeini("[pytest]\n")


def results(pytester: pytest.Pytester, name: str = "results.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data


# --- collection -------------------------------------------------------------------------------------


def test_rows_become_items_with_file_and_id(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["bench.jsonl::r1", "bench.jsonl::r2", "bench.jsonl::r5", "10 tests collected*"]
    )
    assert result.ret == 0


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (["-m", "hard"], ["r3"]),
        (["-m", "medium"], ["r2", "r4"]),
        (["-m", "exact_match and easy"], ["r1", "r5"]),
        (["-k", "edge and not gate"], ["r1"]),  # tags are keywords (and edge_cases is a gate)
        (["-k", "r4 or r5"], ["r4", "r5"]),
    ],
)
def test_markers_and_keywords_select_rows(
    pytester: pytest.Pytester, selection: list[str], expected: list[str]
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    result = pytester.runpytest("--collect-only", "-q", "--strict-markers", *selection)
    collected = [line.split("::")[1] for line in result.outlines if line.startswith("bench.jsonl::")]
    assert collected == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a"\n', "bad.jsonl:1: invalid JSON*"),
        (
            jsonl([row("a"), {**row("b"), "difficulty": "extreme"}]),
            "bad.jsonl:2: unknown difficulty 'extreme'*",
        ),
        (jsonl([{**row("a"), "evaluation_type": "vibes"}]), "bad.jsonl:1: unknown evaluation_type 'vibes'*"),
        (jsonl([row("a"), row("a")]), "bad.jsonl:2: duplicate id 'a' (first used on line 1)"),
        (jsonl([{k: v for k, v in row("a").items() if k != "instruction"}]), "*missing required field*"),
        (
            jsonl([{**row("a"), "expected_output": 7}]),
            "bad.jsonl:1: field 'expected_output' must be a string*",
        ),
        (
            jsonl([row("a", evaluation_config={"extract_pattern": "(\\d+"})]),
            "bad.jsonl:1: evaluation_config: invalid regex*",
        ),
        ("", "bad.jsonl:1: empty benchmark file*"),
    ],
)
def test_bad_file_fails_its_own_collection_only(
    pytester: pytest.Pytester, content: str, message: str
) -> None:
    pytester.makefile(".jsonl", good=jsonl(ROWS[:2]))
    (pytester.path / "bad.jsonl").write_text(content)
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines([message])
    result.stdout.fnmatch_lines(["good.jsonl::r1", "good.jsonl::r2"])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*def collect*")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's usual answer to collection errors


def test_bom_crlf_and_blank_lines_are_accepted(pytester: pytest.Pytester) -> None:
    text = "\ufeff" + json.dumps(ROWS[0]) + "\r\n\r\n" + json.dumps(ROWS[1]) + "\r\n"
    (pytester.path / "win.jsonl").write_bytes(text.encode("utf-8"))
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["win.jsonl::r1", "win.jsonl::r2"])


# --- running rows on a tiny model -------------------------------------------------------------------


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_rows_run_and_results_json_is_written(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, workers: list[str]
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    result = pytester.runpytest(*model_args(tiny_model, tiny_adapter), *workers)
    # A random model answers none of them: each row fails with a readable report, not a traceback.
    result.assert_outcomes(failed=5)
    assert "bench.jsonl:1: r1 [exact_match, easy] scored 0 < threshold 1 (adapter)" in result.stdout.lines
    result.stdout.fnmatch_lines(["*expected:    'hello'*", "*base output:*"])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.fnmatch_lines(["*llmeval*", "bench.jsonl*5*", "results written to *results.json"])

    doc = results(pytester)
    assert doc["mode"] == "adapter_vs_base"
    assert doc["complete"] is True
    assert doc["adapter_name"] == "tiny-adapter" and doc["adapter_version"] == "0.0.1"
    assert doc["base_model"] == str(tiny_model)
    assert doc["inference_config"]["decoding"]["do_sample"] is False
    assert doc["inference_config"]["prompt_template"]["kind"] == "chat_template"
    assert doc["hardware_detail"]["device"] == "cpu"
    (bench,) = doc["benchmarks"]
    assert bench["benchmark_file"] == "bench.jsonl"
    assert bench["n_examples"] == 5
    assert bench["evaluation_type"] == "exact_match"
    import hashlib

    assert (
        bench["benchmark_hash"]
        == "sha256:" + hashlib.sha256((pytester.path / "bench.jsonl").read_bytes()).hexdigest()
    )
    assert [r["id"] for r in bench["rows"]] == ["r1", "r2", "r3", "r4", "r5"]
    for r in bench["rows"]:
        assert r["models"]["base"]["output"] and r["models"]["adapter"]["output"]
        assert (
            r["models"]["base"]["score"]["value"] == 0.0 and r["models"]["adapter"]["score"]["value"] == 0.0
        )
    # The random adapter changes what the model says: base outputs really come with the adapter off.
    assert any(r["models"]["base"]["output"] != r["models"]["adapter"]["output"] for r in bench["rows"])
    res = bench["results"]
    assert res["adapter_score"] == 0.0 and res["base_model_score"] == 0.0
    assert res["per_difficulty"]["medium"]["n"] == 2


def test_passing_rows_when_expected_is_what_the_model_says(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    from pytest_llmeval.models import LLM, ModelSpec, load

    llm = LLM(load(ModelSpec(base_model=str(tiny_model))), adapter=False, max_new_tokens=4, batch_size=8)
    outputs = llm.generate(
        [r["instruction"] if not r["input"] else f"{r['instruction']}\n\n{r['input']}" for r in ROWS]
    )
    rows = [
        {
            **r,
            "expected_output": out,
            "evaluation_config": {"max_new_tokens": 4, "normalize": False, "case_sensitive": True},
        }
        for r, out in zip(ROWS, outputs, strict=True)
    ]
    rows.append(row("wrong", expected="definitely not this"))
    pytester.makefile(".jsonl", bench=jsonl(rows))
    result = pytester.runpytest(*model_args(tiny_model))
    result.assert_outcomes(passed=5, failed=1)
    doc = results(pytester)
    assert doc["mode"] == "base_only"
    assert doc["adapter_name"] is None
    res = doc["benchmarks"][0]["results"]
    assert res["adapter_score"] is None
    assert res["base_model_score"] == pytest.approx(5 / 6)


def test_serial_and_xdist_write_the_same_results(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    many = [
        row(
            f"q{i:02d}",
            instruction=f"Question {i}?" + " more" * (i % 5),
            difficulty=("easy", "medium", "hard")[i % 3],
        )
        for i in range(20)
    ]
    pytester.makefile(".jsonl", one=jsonl(many[:12]), two=jsonl(many[12:]))
    # Gates included: under -n 2 they read rows that other workers scored (the spool).
    args = [
        *model_args(tiny_model, tiny_adapter, gates=True),
        "--llmeval-batch-size",
        "4",
        "--llmeval-min-rows",
        "5",
        "--llmeval-no-history",  # the runs are peers: neither is the other's baseline (no_regression)
    ]
    serial = pytester.runpytest(*args, "--llmeval-results", "serial.json")
    parallel = pytester.runpytest(*args, "-n", "2", "--llmeval-results", "parallel.json")
    outcomes = {k: v for k, v in serial.parseoutcomes().items() if k != "warnings"}
    assert outcomes == {k: v for k, v in parallel.parseoutcomes().items() if k != "warnings"}
    assert serial.parseoutcomes()["failed"] == 20 + 2  # every row, and edge_cases of both files
    a, b = results(pytester, "serial.json"), results(pytester, "parallel.json")
    assert a["complete"] and b["complete"]
    assert without_clocks(a) == without_clocks(b)
    assert a["benchmarks"][0]["gates"]["no_degradation"]["status"] == "pass"


def test_exit_first_writes_finished_rows_marked_incomplete(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    result = pytester.runpytest(*model_args(tiny_model), "-x")
    result.assert_outcomes(failed=1)
    doc = results(pytester)
    assert doc["complete"] is False
    assert "1 of 5 rows finished" in doc["incomplete_reason"]
    assert [r["id"] for r in doc["benchmarks"][0]["rows"]] == ["r1"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_good_file_still_runs_beside_a_bad_one(
    pytester: pytest.Pytester, tiny_model: Path, workers: list[str]
) -> None:
    pytester.makefile(".jsonl", good=jsonl(ROWS[:2]), bad='{"id": \n')
    result = pytester.runpytest(*model_args(tiny_model), "--continue-on-collection-errors", *workers)
    result.assert_outcomes(failed=2, errors=1)
    assert [b["benchmark_file"] for b in results(pytester)["benchmarks"]] == ["good.jsonl"]


def test_a_scorer_that_raises_fails_its_row_only(pytester: pytest.Pytester, tiny_model: Path) -> None:
    pytester.makeconftest(
        """
        from pytest_llmeval.scorers import SCORERS, ScorerSpec

        def explode(prediction, expected, config):
            raise ZeroDivisionError("custom scorer bug")

        SCORERS["explode"] = ScorerSpec(validate=lambda config: None, score=explode)
        """
    )
    rows = [row("ok"), {**row("boom"), "evaluation_type": "explode"}, row("ok2")]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    # A subprocess: the conftest adds to the scorer registry, which must not leak into this process.
    result = pytester.runpytest_subprocess(*model_args(tiny_model))
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        ["*bench.jsonl:2: scorer 'explode' raised ZeroDivisionError: custom scorer bug*"]
    )
    doc = results(pytester)
    by_id = {r["id"]: r for r in doc["benchmarks"][0]["rows"]}
    assert by_id["boom"]["error"] and by_id["ok"]["error"] is None
    assert doc["benchmarks"][0]["results"]["n_errors"] == 1


def test_interrupted_run_writes_finished_rows_marked_incomplete(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    # Ctrl-C while the third row is scored: a KeyboardInterrupt raised where pytest would see the real one.
    pytester.makeconftest(
        """
        from pytest_llmeval.scorers import SCORERS, ScorerSpec

        def interrupt(prediction, expected, config):
            raise KeyboardInterrupt

        SCORERS["interrupt"] = ScorerSpec(validate=lambda config: None, score=interrupt)
        """
    )
    rows = [row("a"), row("b"), {**row("c"), "evaluation_type": "interrupt"}, row("d")]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    result = pytester.runpytest_subprocess(*model_args(tiny_model))
    assert result.ret == pytest.ExitCode.INTERRUPTED
    doc = results(pytester)
    assert doc["complete"] is False
    assert doc["incomplete_reason"].startswith("interrupted")
    assert [r["id"] for r in doc["benchmarks"][0]["rows"]] == ["a", "b"]


def test_junit_xml_lists_every_row(pytester: pytest.Pytester, tiny_model: Path) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS[:3]))
    pytester.runpytest(*model_args(tiny_model), "--junitxml=junit.xml")
    xml = (pytester.path / "junit.xml").read_text()
    for name in ("r1", "r2", "r3"):
        assert f'classname="bench.jsonl" name="{name}"' in xml
    assert xml.count("<failure") == 3


def test_no_benchmark_no_results_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(): pass")
    pytester.runpytest().assert_outcomes(passed=1)
    assert not (pytester.path / "results.json").exists()


# --- fixtures ---------------------------------------------------------------------------------------


def test_llm_fixtures_share_weights(pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path) -> None:
    pytester.makepyfile(
        """
        def test_generate(llm, llm_base):
            assert llm.loaded is llm_base.loaded  # one set of weights
            a = llm.generate(["Say hello.", "Count."], max_new_tokens=5)
            b = llm_base.generate(["Say hello.", "Count."], max_new_tokens=5)
            assert len(a) == len(b) == 2 and all(isinstance(x, str) for x in a + b)
            assert a != b  # the adapter is on in one, off in the other
            assert llm.adapter and not llm_base.adapter
        """
    )
    pytester.runpytest(*model_args(tiny_model, tiny_adapter)).assert_outcomes(passed=1)


# --- errors that stop the run before any test -------------------------------------------------------


def test_wrong_adapter_path_stops_the_run(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    result = pytester.runpytest(*model_args(tiny_model), "--adapter", "/no/such/adapter")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: llmeval: --adapter /no/such/adapter: no such folder"])
    # A relative path could be a Hub id too: the message says both (offline here: the Hub is not asked).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = pytester.runpytest(*model_args(tiny_model), "--adapter", "adapters/nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: llmeval: --adapter adapters/nope: no such folder, and as a Hugging Face Hub id it is not "
            "in the Hugging Face cache and downloads are off*"
        ]
    )
    assert "Traceback" not in result.stderr.str()


def test_adapter_for_another_architecture_stops_the_run(
    pytester: pytest.Pytester, tiny_model: Path, other_arch_adapter: Path
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    result = pytester.runpytest(*model_args(tiny_model), f"--adapter={other_arch_adapter}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: llmeval: adapter * was not made for base model *does not fit*"])


def test_base_model_not_available_offline_stops_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = pytester.runpytest("--base-model", "some-org/not-on-this-machine")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: llmeval: --base-model 'some-org/not-on-this-machine' is not in the Hugging Face cache and*"]
    )


def test_offline_option_is_undone_when_the_session_ends(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--llmeval-offline sets HF_HUB_OFFLINE for the session (workers and transformers read it) and puts
    it back after: a process that goes on (pytester's in-process runs, an IDE) is not left offline."""
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    result = pytester.runpytest("--llmeval-offline", "--base-model", "some-org/not-on-this-machine")
    result.stderr.fnmatch_lines(["*downloads are off*"])  # it was on during the run
    assert "HF_HUB_OFFLINE" not in os.environ
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    pytester.runpytest("--llmeval-offline", "--base-model", "some-org/not-on-this-machine")
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_bad_option_values_are_usage_errors(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--llmeval-device", "tpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmeval-device: invalid auto|cpu|cuda|cuda:N value: 'tpu'*"])
    result = pytester.runpytest("--llmeval-batch-size", "0")
    result.stderr.fnmatch_lines(["*--llmeval-batch-size: invalid positive integer value: '0'*"])


def test_importing_the_plugin_stays_light() -> None:
    """`pytest --help` and runs without a model must not pay for torch, transformers or scipy."""
    import subprocess
    import sys

    heavy = "('torch', 'transformers', 'scipy')"
    code = f"import sys, pytest_llmeval.plugin; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
