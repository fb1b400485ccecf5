"""CI output: the GitHub step summary and annotations, JUnit properties, the gate check, the example
workflow, progress lines, and the GPU assignment of xdist workers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row

from pytest_llmeval import ci
from pytest_llmeval.ci.__main__ import main as ci_main
from pytest_llmeval.models import gpu_for_worker
from pytest_llmeval.records import ADAPTER, BASE

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def test_github_summary_annotations_and_junit(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pytester.path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    pytester.makefile(
        ".jsonl", bench=jsonl([row(f"r{i}", tags=["edge"] if i == 0 else []) for i in range(6)])
    )
    args = [f"--base-model={tiny_model}", f"--adapter={tiny_adapter}", "-p", "no:cacheprovider"]
    result = pytester.runpytest(*args, "--llmeval-min-rows=2", "--junitxml=junit.xml")
    result.stdout.fnmatch_lines(
        [
            "::error file=bench.jsonl,line=1::gate edge_cases failed: 1 of 6 rows tagged 'edge'*",
            "::error file=bench.jsonl,line=1::r0 scored 0.0 < 1.0 (adapter)",
            "::error file=bench.jsonl,line=6::r5 scored 0.0 < 1.0 (adapter)",
        ]
    )
    text = summary.read_text()
    assert text.startswith("earlier step\n## pytest-llmeval: tiny-adapter 0.0.1")  # appended, not replaced
    assert "| `bench.jsonl` | 6 | 0.0% | 0.0% | +0.0 pt (+0.0 to +0.0 pt) | 1 |" in text
    # No in-domain benchmark: the top level names the one it describes, and why.
    assert "Top level of results.json: `bench.jsonl` (no in-domain benchmark ran: " in text
    assert "❌ edge_cases" in text and "⚠️ difficulty_mix" in text and "| easy | 6 | 0.0% | 0.0% |" in text
    # The history kept so far, and the command that shows it (the GitHub Action writes and links the viewer).
    history = pytester.path / ".llmeval" / "history"
    assert text.endswith(
        f"\nHistory: 1 run(s) in `{history}`; `pytest-llmeval view {history} --out=history.html` shows them "
        "and their rows side by side.\n"
    )
    # JUnit: each row carries its scores as flat properties.
    case = ET.parse(pytester.path / "junit.xml").getroot().find(".//testcase[@name='r3']")
    assert case is not None
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties == {
        "llmeval_base_score": "0.0",
        "llmeval_adapter_score": "0.0",
        "llmeval_threshold": "1.0",
    }


def failed_row(row_id: str, line: int, *, evaluated: str = ADAPTER, value: float = 0.0) -> dict[str, Any]:
    """A failed row of results.json: both models scored `value` < 1.0, `evaluated` decides."""
    score = {"value": value, "threshold": 1.0, "passed": False}
    models = {BASE: {"output": "b", "score": {**score, "value": 1.0}}}
    if evaluated == ADAPTER:
        models[ADAPTER] = {"output": "a", "score": score}
    else:
        models[BASE]["score"] = score
    return {
        "nodeid": f"a.jsonl::{row_id}",
        "id": row_id,
        "line": line,
        "evaluated": evaluated,
        "models": models,
        "passed": False,
        "error": None,
        "skipped": None,
    }


def test_annotations_are_capped_and_escaped() -> None:
    rows = [failed_row(f"r{i}", i + 1) for i in range(25)]
    rows[0]["error"] = "bad: 100%\nsecond line"
    document: dict[str, Any] = {"benchmarks": [{"benchmark_file": "a,b:c.jsonl", "gates": {}, "rows": rows}]}
    lines = ci.error_annotations(document)
    assert len(lines) == ci.MAX_ROW_ANNOTATIONS + 1
    assert lines[0] == "::error file=a%2Cb%3Ac.jsonl,line=1::r0: bad: 100%25%0Asecond line"
    assert lines[1] == "::error file=a%2Cb%3Ac.jsonl,line=2::r1 scored 0.0 < 1.0 (adapter)"
    assert lines[-1] == "::notice::15 more failed rows are not annotated (see results.json)"


def test_annotations_name_the_model_whose_score_decided() -> None:
    unscored = failed_row("lost", 3)
    unscored["models"] = {}
    rows = [failed_row("a", 1), failed_row("b", 2, evaluated=BASE, value=0.25), unscored]
    document: dict[str, Any] = {"benchmarks": [{"benchmark_file": "x.jsonl", "gates": {}, "rows": rows}]}
    assert ci.error_annotations(document) == [
        "::error file=x.jsonl,line=1::a scored 0.0 < 1.0 (adapter)",  # not the base's 1.0
        "::error file=x.jsonl,line=2::b scored 0.25 < 1.0 (base)",
        "::error file=x.jsonl,line=3::lost: no score (adapter)",
    ]


def test_step_summary_of_a_real_run() -> None:
    """The frozen date-iso run: the top level's reason, and the perplexity benchmark's figures in nats."""
    doc = json.loads((REPO / "tests/data/report_results.json").read_text(encoding="utf-8"))
    text = ci.step_summary(doc)
    assert "Top level of results.json: `benchmarks/dates.jsonl` (the adapter's in-domain benchmark)" in text
    nats = (
        "negative cross-entropy (higher is better): adapter -3.636 nats/token vs base -3.589 nats/token, "
        "degradation (adapter − base) -0.047 nats/token, 60 rows; no_degradation pass"
    )
    assert f"Out of domain, most degraded: `benchmarks/japanese_text.jsonl`: {nats}" in text
    assert "### `benchmarks/japanese_text.jsonl`\n" in text and f"\nOut of domain: {nats}\n" in text
    assert (
        "\nOut of domain: score: adapter 83.3% vs base 85.0%, degradation (adapter − base) -1.7 pt," in text
    )
    assert "| `benchmarks/dates.jsonl` | 60 | 6.7% | 85.0% | +78.3 pt (+68.3 to +88.3 pt) | 1.4e-14 |" in text
    # The paired test of the perplexity rows compared cross-entropy: its difference says so, in nats.
    assert (
        "| -6.7 pt; negative cross-entropy (higher is better): -0.047 nats/token "
        "(-0.054 to -0.040 nats/token) | 5.6e-20 |"
    ) in text
    assert "-4.7 pt" not in text


def test_gate_check_exits_1_on_a_failed_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gates = {
        "size": {"status": "pass", "message": "ok"},
        "better_than_base": {"status": "fail", "message": "p=0.4"},
    }
    score = {"score": {"value": 1.0}}
    rows = [{"id": "r1", "evaluation_type": "exact_match", "evaluated": "base", "models": {"base": score}}]
    doc = {"complete": True, "benchmarks": [{"benchmark_file": "b.jsonl", "gates": gates, "rows": rows}]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    assert ci_main(["check", str(path)]) == 1
    assert "FAILED b.jsonl: better_than_base: p=0.4" in capsys.readouterr().out
    gates["better_than_base"]["status"] = "warn"
    path.write_text(json.dumps(doc))
    assert ci_main(["check", str(path)]) == 0
    path.write_text(json.dumps({**doc, "complete": False, "incomplete_reason": "interrupted"}))
    assert ci_main(["check", str(path)]) == 1
    assert ci_main(["check", str(tmp_path / "missing.json")]) == 2
    assert ci_main([]) == 2


def test_progress_lines_in_long_runs(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pytest_llmeval.hooks.reporting.PROGRESS_SECONDS", 0.0)
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}") for i in range(3)]))
    args = [f"--base-model={tiny_model}", "-p", "no:cacheprovider", "-m", "not gate"]
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(
        ["llmeval: 1/3 rows scored, * rows/s; bench.jsonl: 1/3", "llmeval: 3/3 rows scored*"]
    )
    quiet = pytester.runpytest(*args, "-q")
    assert "rows scored" not in quiet.stdout.str()


def test_progress_lines_under_xdist(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller writes whole lines between xdist's own output: one per finished row here."""
    monkeypatch.setattr("pytest_llmeval.hooks.reporting.PROGRESS_SECONDS", 0.0)
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}") for i in range(4)]))
    result = pytester.runpytest(
        f"--base-model={tiny_model}", "-p", "no:cacheprovider", "-m", "not gate", "-n", "2"
    )
    lines = [line for line in result.stdout.lines if "rows scored" in line]
    assert len(lines) == 4 and all(line.startswith("llmeval: ") for line in lines)
    assert lines[-1].startswith("llmeval: 4/4 rows scored")


@pytest.mark.parametrize(
    ("worker", "gpus", "expected"),
    [(None, 0, None), (None, 2, 0), (0, 1, 0), (3, 1, 0), (0, 4, 0), (5, 4, 1), (7, 4, 3), (2, 0, None)],
)
def test_xdist_worker_i_uses_gpu_i_mod_n(worker: int | None, gpus: int, expected: int | None) -> None:
    assert gpu_for_worker(worker, gpus) == expected


def test_spot_check_and_html_report_are_written(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}", instruction=f"Say word {i}.") for i in range(6)]))
    args = model_args(tiny_model, tiny_adapter)
    pytester.runpytest(*args, "--llmeval-html=out/report.html")
    spot = (pytester.path / "spot_check.md").read_text()
    assert spot.startswith("# Spot check: tiny-adapter 0.0.1") and spot.count("\n## ") == 5
    assert "Say word" in spot  # the prompt is in results.json's rows, so the report can show it
    html = (pytester.path / "out" / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "bench.jsonl" in html
