"""evaluation_type `perplexity` and --llmeval-fluency through the plugin (pytester, tiny models)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import build_tiny_model, jsonl, row

from pytest_llmeval.models import ModelSpec, load
from pytest_llmeval.perplexity import perplexity

TEXTS = [
    "The cat sat on the mat.",
    "吾輩は猫である。名前はまだ無い。",
    "A longer text that the window of sixteen tokens has to slide over more than once, step by step.",
    "ひらがなとカタカナと漢字。",
    "Short.",
    "Numbers like 1,234.5 and dates like 2024-01-05 are text too.",
]


def ppl_row(i: int, text: str, **config: Any) -> dict[str, Any]:
    return row(
        f"t{i}",
        instruction="",
        input=text,
        expected="",
        evaluation_type="perplexity",
        evaluation_config={"threshold": 1e9 if i % 2 == 0 else 1.5, **config},
        difficulty=("easy", "medium", "hard")[i % 3],
    )


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def args(tiny_model: Path, tiny_adapter: Path | None = None) -> list[str]:
    out = [f"--base-model={tiny_model}", "-p", "no:cacheprovider", "-m", "not gate"]
    return out + ([f"--adapter={tiny_adapter}"] if tiny_adapter else [])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_perplexity_rows_pass_under_their_bound_and_report_the_corpus(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, workers: list[str]
) -> None:
    rows = [ppl_row(i, t) for i, t in enumerate(TEXTS)]
    rows.append(ppl_row(6, TEXTS[2], max_length=8, stride=4))
    pytester.makefile(".jsonl", texts=jsonl(rows))
    result = pytester.runpytest(*args(tiny_model, tiny_adapter), "--llmeval-batch-size=3", *workers)
    # Bound 1e9 passes (even rows), 1.5 fails (a random model is far above it).
    result.assert_outcomes(passed=4, failed=3)
    result.stdout.fnmatch_lines(
        ["*t1 [[]perplexity, medium[]] perplexity * > threshold 1.5 (adapter, *tokens*"]
    )
    result.stdout.fnmatch_lines(["*perplexity (token-weighted): base *, adapter * (x*)"])
    doc = json.loads((pytester.path / "results.json").read_text())
    bench = doc["benchmarks"][0]
    # Each row's values equal a direct call on the same weights.
    loaded = load(ModelSpec(base_model=str(tiny_model), device="cpu", dtype="float32"))
    direct = perplexity(loaded.model, loaded.tokenizer, TEXTS)
    by_id = {r["id"]: r for r in bench["rows"]}
    for i, text_result in enumerate(direct.texts):
        score = by_id[f"t{i}"]["models"]["base"]["score"]
        assert score["perplexity"] == pytest.approx(text_result.perplexity, rel=1e-5)
        assert score["n_tokens"] == text_result.n_tokens
    windowed = by_id["t6"]["models"]["base"]["score"]
    assert (windowed["max_length"], windowed["stride"]) == (8, 4)
    # The corpus value is token-weighted over the rows, not a mean of per-row perplexities.
    scores = [r["models"]["base"]["score"] for r in bench["rows"]]
    weighted = math.exp(sum(s["nll"] for s in scores) / sum(s["n_tokens"] for s in scores))
    assert bench["perplexity"]["base"]["perplexity"] == pytest.approx(weighted, rel=1e-12)
    assert bench["perplexity"]["adapter"]["perplexity"] != bench["perplexity"]["base"]["perplexity"]
    assert bench["statistics"]["test"] == "paired_t"
    assert bench["statistics"]["measure"].startswith("negative cross-entropy")


def test_serial_and_xdist_agree_on_perplexity_rows(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    pytester.makefile(".jsonl", texts=jsonl([ppl_row(i, t) for i, t in enumerate(TEXTS)]))
    # Gates included: under -n 2 the cross-entropy gate reads rows that the other worker measured.
    base = [f"--base-model={tiny_model}", f"--adapter={tiny_adapter}", "-p", "no:cacheprovider"]
    # No history: the runs are peers, neither is the other's baseline (no_regression).
    base += ["--llmeval-batch-size=2", "--llmeval-min-rows=2", "--llmeval-no-history"]
    pytester.runpytest(*base, "--llmeval-results=serial.json")
    pytester.runpytest(*base, "-n", "2", "--llmeval-results=parallel.json")
    a, b = (json.loads((pytester.path / n).read_text()) for n in ("serial.json", "parallel.json"))
    assert [x for x in a if x != "timestamp"] == [x for x in b if x != "timestamp"]
    assert a["benchmarks"] == b["benchmarks"]
    assert a["benchmarks"][0]["gates"]["no_degradation"]["details"]["comparison"]["test"] == "paired_t"


def test_perplexity_rows_are_skipped_with_saved_predictions(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".jsonl",
        mixed=jsonl([ppl_row(0, "Some text."), row("g1", expected="hello")]),
        preds=json.dumps({"id": "g1", "prediction": "hello"}) + "\n",
    )
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "mixed.jsonl", "-rs", "-m", "not gate")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*mixed.jsonl:1: perplexity rows measure the model itself*loads none*"])
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["benchmarks"][0]["results"]["n_skipped"] == 1


def test_a_perplexity_row_needs_only_its_text(pytester: pytest.Pytester) -> None:
    good = ppl_row(0, "Some text.")
    on_reference = ppl_row(1, "", on="reference")  # input empty, expected_output empty: nothing to score
    no_threshold = {**ppl_row(2, "Text."), "evaluation_config": {}}
    pytester.makefile(".jsonl", bad=jsonl([good, on_reference, no_threshold]))
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "*bad.jsonl:2: field 'expected_output' is empty",
            "*bad.jsonl:3: evaluation_config: perplexity needs 'threshold'*",
        ]
    )


def test_fluency_scores_outputs_and_references_under_a_scoring_model(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, tmp_path: Path
) -> None:
    rows = [
        row(f"g{i}", instruction=f"Say {w}.", expected=f"{w} there") for i, w in enumerate(["hi", "yo", "ok"])
    ]
    pytester.makefile(".jsonl", gen=jsonl(rows))
    pytester.runpytest(*args(tiny_model, tiny_adapter), "--llmeval-fluency", "--llmeval-results=own.json")
    other = build_tiny_model(tmp_path / "scorer", seed=7)
    pytester.runpytest(
        *args(tiny_model, tiny_adapter), f"--llmeval-ppl-model={other}", "--llmeval-results=other.json"
    )
    own, scored = (
        json.loads((pytester.path / n).read_text())["benchmarks"][0] for n in ("own.json", "other.json")
    )
    for bench in (own, scored):
        for side in ("base", "adapter"):
            fluency = bench["fluency"][side]
            assert fluency["ratio_to_reference"] == pytest.approx(
                fluency["output"]["perplexity"] / fluency["reference"]["perplexity"]
            )
            assert fluency["cross_entropy_difference"] == pytest.approx(
                fluency["output"]["cross_entropy"] - fluency["reference"]["cross_entropy"]
            )
            assert fluency["perplexity_score"] == pytest.approx(
                100 * math.exp(-fluency["output"]["perplexity"] / 300)
            )
    # The QA document's fix: each model measures its own outputs (and the reference), base outputs by the
    # base with the adapter off, adapter outputs by the adapter; --llmeval-ppl-model measures all of them.
    references = [r["expected_output"] for r in rows]
    base_model = load(ModelSpec(base_model=str(tiny_model), device="cpu", dtype="float32"))
    with_adapter = load(
        ModelSpec(base_model=str(tiny_model), adapter=tiny_adapter, device="cpu", dtype="float32")
    )
    scorer = load(ModelSpec(base_model=str(other), device="cpu", dtype="float32"))
    for bench, measurer in ((own, {"base": base_model, "adapter": with_adapter}), (scored, None)):
        for side in ("base", "adapter"):
            outputs = [r["models"][side]["output"] for r in bench["rows"]]
            model = scorer if measurer is None else measurer[side]
            direct_out = perplexity(model.model, model.tokenizer, outputs).perplexity
            direct_ref = perplexity(model.model, model.tokenizer, references).perplexity
            assert bench["fluency"][side]["output"]["perplexity"] == pytest.approx(direct_out, rel=1e-5)
            assert bench["fluency"][side]["reference"]["perplexity"] == pytest.approx(direct_ref, rel=1e-5)
    # The adapter really measured with itself: its view of the reference is not the base's.
    assert own["fluency"]["adapter"]["reference"]["perplexity"] != pytest.approx(
        own["fluency"]["base"]["reference"]["perplexity"], rel=1e-4
    )
    assert own["fluency"]["adapter"]["scorer"].endswith("(the adapter itself)")
    assert scored["fluency"]["base"]["scorer"] == scored["fluency"]["adapter"]["scorer"] == str(other)


def test_fluency_needs_a_model(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".jsonl", gen=jsonl([row("g1")]), preds=json.dumps({"id": "g1", "prediction": "x"}) + "\n"
    )
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "--llmeval-fluency")
    result.stderr.fnmatch_lines(
        [
            "*--llmeval-fluency measures each model's outputs with that model"
            "*add --llmeval-ppl-model=NAME_OR_PATH*"
        ]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
