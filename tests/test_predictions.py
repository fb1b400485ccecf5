"""--llmeval-predictions: scoring saved outputs, no model loaded, gates as with a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

ROWS = [
    row(f"r{i}", instruction=f"Q{i}", expected=f"answer {i}", tags=["edge"] if i < 5 else [])
    for i in range(8)
]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def doc(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    return data


def test_predictions_with_base_play_adapter_and_base(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    # The "adapter" gets all 8 right, the "base" only 1: better_than_base passes on McNemar (7 vs 0).
    preds = [
        {"id": f"r{i}", "prediction": f"Answer {i}.", "base_prediction": "no idea" if i else "answer 0"}
        for i in range(8)
    ]
    preds.append({"id": "stray", "prediction": "x", "base_prediction": "y"})
    (pytester.path / "preds.json").write_text(jsonl(preds))
    result = pytester.runpytest(
        "--llmeval-predictions=preds.json", "--llmeval-domain=bench*", "--llmeval-min-rows=8", "-rs"
    )
    # Pass: 8 rows, better_than_base, size, difficulty_mix (all easy: a warning), edge_cases; skip: held_out.
    result.assert_outcomes(passed=12, skipped=1)
    result.stdout.fnmatch_lines(["predictions matching no benchmark row: 'stray'"])
    data = doc(pytester)
    assert data["mode"] == "adapter_vs_base"
    assert data["predictions"] == {"file": "preds.json", "unmatched_ids": ["stray"]}
    bench = data["benchmarks"][0]
    assert bench["results"]["adapter_score"] == 1.0 and bench["results"]["base_model_score"] == 1 / 8
    assert bench["gates"]["better_than_base"]["status"] == "pass"
    assert bench["statistics"]["discordant"] == [7, 0]
    assert "nothing was generated" in data["inference_config"]["source"]


def test_predictions_alone_are_the_evaluated_model(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS[:3]))
    preds = [{"id": "r0", "prediction": "answer 0"}, {"id": "r1", "prediction": "wrong"}]
    (pytester.path / "preds.jsonl.txt").write_text(jsonl(preds))
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl.txt", "-m", "not gate")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["bench.jsonl:3: no prediction for id 'r2' in preds.jsonl.txt"])
    data = doc(pytester)
    assert data["mode"] == "base_only"
    assert data["benchmarks"][0]["results"]["n_errors"] == 1


def test_bad_predictions_file_stops_the_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS[:3]))
    (pytester.path / "preds.txt").write_text('{"id": "r0", "prediction": "a"}\n{"id": 3}\n')
    result = pytester.runpytest("--llmeval-predictions=preds.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*preds.txt:2: id, prediction must be strings*"])
    result = pytester.runpytest("--llmeval-predictions=preds.txt", "--adapter=x")
    result.stderr.fnmatch_lines(
        ["*leave out --adapter, --base-model, --llmeval-model and --llmeval-endpoint*"]
    )


def test_load_predictions_reports_every_bad_line(tmp_path: Path) -> None:
    from pytest_llmeval.benchmark import load_predictions

    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "a", "prediction": "x"}\n\nnot json\n[1]\n{"id": "a", "prediction": "y"}\n')
    with pytest.raises(ValueError) as info:
        load_predictions(path)
    lines = str(info.value).splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{path}:3", f"{path}:4", f"{path}:5"]
    assert "duplicate id 'a' (first on line 1)" in lines[2]
