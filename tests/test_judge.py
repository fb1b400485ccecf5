"""llm_judge's success path: a judge whose output parses, chosen with --llmeval-judge-model.

A random tiny model never writes "Score: N" (tests/test_choice_and_judge.py checks that failure), and the
real 135M model rarely does. So the judge here is a tiny Llama whose weights are set by hand to write
"Score: " and then sample one of "4", "8" or "?" with equal odds, whatever the prompt: its runs parse (or
do not, for "?") in a way the test can read back from results.json, and differ from seed to seed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from helpers import build_judge_model, jsonl, model_args, row

JUDGE_SAYS = ("Score: 4", "Score: 8", "Score: ?")
RUNS = 12  # equal odds of three endings: 12 seeded runs are never all alike


@pytest.fixture(scope="session")
def judge_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_judge_model(tmp_path_factory.mktemp("judge-model"))


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def judge_row(row_id: str, **config: Any) -> dict[str, Any]:
    return row(
        row_id,
        instruction="Greet the reader.",
        expected="Hello!",
        evaluation_type="llm_judge",
        evaluation_config={
            "rubric": "A friendly greeting scores high.",
            "runs": RUNS,
            "judge_max_new_tokens": 8,
            "max_new_tokens": 4,
            **config,
        },
    )


def rows_by_id(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    doc = json.loads((pytester.path / "results.json").read_text())
    return {r["id"]: r for r in doc["benchmarks"][0]["rows"]}


def test_the_judge_sees_its_own_text_as_designed(judge_model: Path) -> None:
    """The crafted judge, outside the plugin: every sample is one of JUDGE_SAYS, greedy is "Score: 4"."""
    from pytest_llmeval.generation import Sampling, build_prompt, generate
    from pytest_llmeval.models import ModelSpec, load

    judge = load(ModelSpec(base_model=str(judge_model), device="cpu"))
    prompts = [build_prompt(judge.tokenizer, f"Grade answer {i}: " + "x " * i) for i in range(RUNS)]
    sampled = generate(
        judge.model,
        judge.tokenizer,
        prompts,
        max_new_tokens=8,
        batch_size=RUNS,
        sampling=Sampling(temperature=0.7, seeds=list(range(RUNS))),
    )
    assert set(sampled) <= set(JUDGE_SAYS) and len(set(sampled)) > 1, sampled
    assert (
        generate(judge.model, judge.tokenizer, prompts[:2], max_new_tokens=8, batch_size=2)
        == ["Score: 4"] * 2
    )


def test_judge_model_grades_and_rows_get_the_mean_over_max_score(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, judge_model: Path
) -> None:
    # Serially only: tests/test_choice_and_judge.py runs judge rows under -n 2 already.
    rows = [
        judge_row("default"),
        # "Score: 8" is above max_score 5: unparseable, never clipped to 5.
        judge_row("max5", max_score=5, seed=3),
        # A pattern of the row's own (its first group is the score), and "Score: 8" in range again.
        judge_row("custom", extract_score_pattern=r"Score: (\d)", max_score=8, threshold=0.0),
    ]
    pytester.makefile(".jsonl", judged=jsonl(rows))
    result = pytester.runpytest(*model_args(tiny_model, tiny_adapter), f"--llmeval-judge-model={judge_model}")
    result.stdout.no_fnmatch_line("*the judge gave no score*")
    by_id = rows_by_id(pytester)
    for row_id, max_score, seed in (("default", 10, 0), ("max5", 5, 3), ("custom", 8, 0)):
        record = by_id[row_id]
        assert record["error"] is None, record["error"]
        for side in ("base", "adapter"):
            score = record["models"][side]["score"]
            # The judge that graded is the one the option named, recorded with every score.
            assert score["judge"] == str(judge_model)
            runs = score["runs"]
            assert [r["run"] for r in runs] == list(range(RUNS))
            assert [r["seed"] for r in runs] == [seed + r for r in range(RUNS)]
            assert {r["output"] for r in runs} <= set(JUDGE_SAYS) and len({r["output"] for r in runs}) > 1
            parsed = [
                float(r["output"][-1])
                if r["output"][-1].isdigit() and float(r["output"][-1]) <= max_score
                else None
                for r in runs
            ]
            assert [r["score"] for r in runs] == parsed
            values = [v for v in parsed if v is not None]
            assert values, f"{row_id}: no run parsed (the seeds drew no usable score)"
            assert score["n_runs"] == RUNS and score["n_unparseable"] == parsed.count(None)
            assert score["max_score"] == max_score
            assert score["judge_mean"] == pytest.approx(statistics.mean(values))
            assert score["value"] == pytest.approx(statistics.mean(values) / max_score)
            if len(values) > 1:
                assert score["judge_sd"] == pytest.approx(statistics.stdev(values))
        threshold = record["models"]["adapter"]["score"]["threshold"]
        assert record["passed"] is (record["models"]["adapter"]["score"]["value"] >= threshold)
    # The judge's text does not depend on the prompt: one seed, one grade, on either side.
    default = by_id["default"]["models"]
    assert [r["output"] for r in default["base"]["score"]["runs"]] == [
        r["output"] for r in default["adapter"]["score"]["runs"]
    ]


def test_without_the_option_the_base_model_judges(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, judge_model: Path
) -> None:
    """The contrast: the default judge (the random base, adapter off) writes no score; the crafted one does,
    even when it is also the evaluated model's base (its own outputs graded by itself)."""
    pytester.makefile(".jsonl", judged=jsonl([judge_row("j", runs=3)]))
    pytester.runpytest(*model_args(tiny_model))
    record = rows_by_id(pytester)["j"]
    assert "the judge gave no score" in record["error"]
    assert record["models"]["base"]["measurement"]["judge"] == f"{tiny_model} (the base model, adapter off)"
    pytester.runpytest(*model_args(judge_model))
    record = rows_by_id(pytester)["j"]
    assert record["error"] is None and record["models"]["base"]["output"] == "Score: 4"  # greedy
    score = record["models"]["base"]["score"]
    assert score["judge"] == f"{judge_model} (the base model, adapter off)"
    assert {r["output"] for r in score["runs"]} <= set(JUDGE_SAYS)


def test_a_judge_request_longer_than_the_judges_context_is_fitted_or_the_rows_error(
    pytester: pytest.Pytester, tiny_model: Path, judge_model: Path
) -> None:
    # An input that fits the evaluated model's prompt (1024 tokens, 4 new) but not the judge's request,
    # which adds the rubric, the reference and the answer to it.
    from transformers import AutoTokenizer

    from pytest_llmeval.generation import build_prompt

    tok = AutoTokenizer.from_pretrained(tiny_model)
    overhead = len(tok(build_prompt(tok, "Greet the reader.", "x"), add_special_tokens=False)["input_ids"])
    text = " ".join(["word"] * (1024 - 4 - overhead - 8))
    prompt_tokens = len(
        tok(build_prompt(tok, "Greet the reader.", text), add_special_tokens=False)["input_ids"]
    )
    assert 1024 - 40 < prompt_tokens + 4 <= 1024
    rows = [{**judge_row("long"), "input": text}, judge_row("short")]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    args = [*model_args(tiny_model), f"--llmeval-judge-model={judge_model}"]
    pytester.runpytest(*args)
    by_id = rows_by_id(pytester)
    error = by_id["long"]["error"]
    assert error.startswith("bench.jsonl:1: the judge's request for the base output: ")
    assert "+ judge_max_new_tokens 8 = " in error and "more than the model's context of 1024" in error
    assert by_id["short"]["error"] is None and by_id["short"]["models"]["base"]["score"] is not None
    pytester.runpytest(*args, "--llmeval-context-overflow=truncate-left")
    long = rows_by_id(pytester)["long"]
    assert long["error"] is None and "prompt_truncated" not in long["models"]["base"]  # its own prompt fit
    cut = long["models"]["base"]["score"]["judge_prompt_truncated"]
    assert cut["policy"] == "truncate-left" and cut["prompt_tokens"] + 8 <= 1024
