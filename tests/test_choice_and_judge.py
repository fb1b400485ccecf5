"""multiple_choice (log-likelihood of each choice) and llm_judge (sampled judge runs): pure parts, tiny
models through the plugin, and the real embedded model."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import jsonl, model_args, row
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.continuations import continuation_nll
from pytest_llmeval.generation import Sampling, build_prompt, generate
from pytest_llmeval.models import LoadedModel, ModelSpec, load
from pytest_llmeval.scorers import llm_judge, multiple_choice

REPO = Path(__file__).resolve().parent.parent
COLOURS = {"choices": ["red", "green", "blue sky"]}


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> LoadedModel:
    return load(ModelSpec(base_model=str(tiny_model), device="cpu", dtype="float32"))


# --- multiple_choice --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"choices": ["a"]}, "two or more"),
        ({"choices": ["a", "a"]}, "duplicates"),
        ({"choices": ["a", " "]}, "non-empty"),
        ({"choices": ["a", "b"], "answer_index": 2}, "out of range"),
        ({"choices": ["a", "b"], "normalize": "bytes"}, "'normalize' must be one of"),
        ({"choices": ["a", "b"], "shuffle": True}, "unknown key"),
    ],
)
def test_choice_configs(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        multiple_choice.validate_config(config)


def test_expected_must_name_one_choice() -> None:
    multiple_choice.validate_row(COLOURS, {"expected_output": "green"})
    multiple_choice.validate_row({**COLOURS, "answer_index": 1}, {"expected_output": ""})
    with pytest.raises(ValueError, match="not one of the choices"):
        multiple_choice.validate_row(COLOURS, {"expected_output": "yellow"})
    with pytest.raises(ValueError, match="disagrees with answer_index"):
        multiple_choice.validate_row({**COLOURS, "answer_index": 0}, {"expected_output": "green"})


def test_normalisation_changes_the_pick() -> None:
    # "blue sky" has the highest total NLL but the lowest per character.
    measured = {
        "expected_index": 2,
        "choices": [
            {"text": "red", "nll": 3.0, "n_tokens": 1, "n_chars": 3},
            {"text": "green", "nll": 3.5, "n_tokens": 1, "n_chars": 5},
            {"text": "blue sky", "nll": 4.0, "n_tokens": 2, "n_chars": 8},
        ],
    }
    assert multiple_choice.score_measurement(measured, COLOURS).details["predicted"] == "red"
    assert multiple_choice.score_measurement(measured, {**COLOURS, "normalize": "char"}).value == 1.0
    assert (
        multiple_choice.score_measurement(measured, {**COLOURS, "normalize": "token"}).details[
            "predicted_index"
        ]
        == 2
    )


@pytest.mark.parametrize(
    ("prediction", "picked"), [("green", 1), (" Green. ", 1), ("B", 1), ("(C)", 2), ("Z", None)]
)
def test_saved_predictions_name_a_choice(prediction: str, picked: int | None) -> None:
    score = multiple_choice.score(prediction, "green", COLOURS)
    assert score.details["predicted_index"] == picked and score.value == (1.0 if picked == 1 else 0.0)


def test_continuation_nll_equals_log_softmax_by_hand(tiny: LoadedModel) -> None:
    tok = tiny.tokenizer
    context = tok(build_prompt(tok, "Pick a colour."), add_special_tokens=False)["input_ids"]
    pairs = [(context, tok(c, add_special_tokens=False)["input_ids"]) for c in COLOURS["choices"]]
    for batch_size in (None, 1, 2):
        got = continuation_nll(tiny.model, tok, pairs, batch_size=batch_size)
        for (ctx, cont), nll in zip(pairs, got, strict=True):
            ids = torch.tensor([ctx + cont])  # (1, T)
            with torch.no_grad():
                logp = torch.log_softmax(tiny.model(ids).logits[0].double(), dim=-1)  # (T, V)
            expected = -sum(float(logp[len(ctx) - 1 + j, t]) for j, t in enumerate(cont))
            assert nll == pytest.approx(expected, rel=1e-5)


# --- llm_judge ----------------------------------------------------------------------------------------------


def test_judge_config_and_extraction() -> None:
    with pytest.raises(ValueError, match="needs 'rubric'"):
        llm_judge.validate_config({})
    with pytest.raises(ValueError, match="not a valid regex"):
        llm_judge.validate_config({"rubric": "Grade it.", "extract_score_pattern": "("})
    with pytest.raises(ValueError, match="'runs' must be an integer >= 1"):
        llm_judge.validate_config({"rubric": "Grade it.", "runs": 0})
    config = {"rubric": "Grade it.", "max_score": 5}
    llm_judge.validate_config(config)
    assert llm_judge.extract("Looks fine. Score: 4", config) == 4.0
    assert llm_judge.extract("Score: 7", config) is None  # above max_score: unparseable, not clipped
    assert llm_judge.extract("no number", config) is None
    assert llm_judge.extract("8/10", {**config, "extract_score_pattern": r"(\d+)/10", "max_score": 10}) == 8.0
    assert "Score: N" in llm_judge.judge_request("R", "Task", "", "ref", "out", config)


def test_judge_score_is_the_mean_of_parseable_runs() -> None:
    config = {"rubric": "Grade it.", "max_score": 10}
    runs = [{"run": 0, "output": "Score: 8"}, {"run": 1, "output": "hmm"}, {"run": 2, "output": "Score: 6"}]
    score = llm_judge.score_measurement({"judge": "j", "runs": runs}, config)
    assert score.value == pytest.approx(0.7) and score.details["n_unparseable"] == 1
    assert score.details["judge_sd"] == pytest.approx(math.sqrt(2))
    assert [r["score"] for r in score.details["runs"]] == [8.0, None, 6.0]
    with pytest.raises(ValueError, match="the judge gave no score"):
        llm_judge.score_measurement({"judge": "j", "runs": runs[1:2]}, config)


def test_sampling_is_seeded_per_prompt(tiny: LoadedModel) -> None:
    """Each prompt's sample depends on its seed only, not on its batch; distinct seeds give distinct runs."""
    prompts = [build_prompt(tiny.tokenizer, p) for p in ("Grade this.", "Grade that one, please.", "Hi")]
    run = lambda seeds, batch: generate(  # noqa: E731
        tiny.model,
        tiny.tokenizer,
        prompts,
        max_new_tokens=12,
        batch_size=batch,
        sampling=Sampling(temperature=1.0, seeds=seeds),
    )
    first = run([0, 0, 0], 3)
    assert first == run([0, 0, 0], 1) == run([0, 0, 0], 2)
    assert run([1, 1, 1], 3) != first
    greedy = generate(tiny.model, tiny.tokenizer, prompts, max_new_tokens=12, batch_size=3)
    assert greedy != first


# --- through the plugin -------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_choice_and_judge_rows_on_a_tiny_model(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, workers: list[str]
) -> None:
    rows = [
        row(
            "mc1",
            instruction="Pick a colour.",
            expected="green",
            evaluation_type="multiple_choice",
            evaluation_config=COLOURS,
        ),
        row(
            "mc2",
            instruction="Pick again.",
            expected="",
            evaluation_type="multiple_choice",
            evaluation_config={**COLOURS, "answer_index": 0, "normalize": "char"},
        ),
        # A random model never writes "Score: N": every run is unparseable, and the row says so.
        row(
            "j1",
            evaluation_type="llm_judge",
            evaluation_config={"rubric": "Grade it.", "max_new_tokens": 4, "judge_max_new_tokens": 6},
        ),
    ]
    pytester.makefile(".jsonl", mixed=jsonl(rows))
    args = model_args(tiny_model, tiny_adapter)
    result = pytester.runpytest(*args, *workers)
    result.stdout.fnmatch_lines(
        ["*mixed.jsonl:3: scorer 'llm_judge' raised ValueError: the judge gave no score*in 3 run(s)*"]
    )
    doc = json.loads((pytester.path / "results.json").read_text())
    by_id = {r["id"]: r for r in doc["benchmarks"][0]["rows"]}
    for row_id in ("mc1", "mc2"):
        for side in ("base", "adapter"):
            score = by_id[row_id]["models"][side]["score"]
            assert len(score["choices"]) == 3 and score["predicted_index"] in (0, 1, 2)
            assert score["value"] == (1.0 if score["predicted_index"] == score["expected_index"] else 0.0)
    assert (
        by_id["mc1"]["models"]["base"]["score"]["choices"]
        != by_id["mc1"]["models"]["adapter"]["score"]["choices"]
    )
    assert by_id["j1"]["error"] is not None


@pytest.mark.slow
def test_real_model_multiple_choice_and_judge(tmp_path: Path) -> None:
    """The embedded model: choices scored by log-likelihood, the judge's runs graded and recorded."""
    rows = [
        row(
            "capital",
            instruction="What is the capital of France?",
            expected="Paris",
            evaluation_type="multiple_choice",
            evaluation_config={"choices": ["Berlin", "Paris", "Madrid", "Rome"]},
        ),
        row(
            "sky",
            instruction="What colour is a clear daytime sky?",
            expected="blue",
            evaluation_type="multiple_choice",
            evaluation_config={"choices": ["green", "blue", "purple"]},
        ),
        row(
            "greet",
            instruction="Write a one-sentence friendly greeting.",
            expected="Hello! Nice to meet you.",
            evaluation_type="llm_judge",
            evaluation_config={
                "rubric": "You grade greetings: a friendly, polite greeting scores high, anything else low.",
                "max_new_tokens": 32,
                "judge_max_new_tokens": 32,
            },
        ),
    ]
    bench = tmp_path / "mixed.jsonl"
    bench.write_text(jsonl(rows))
    out = tmp_path / "results.json"
    cmd = [sys.executable, "-m", "pytest", str(bench), "--adapter=adapters/date-iso", "-m", "not gate", "-q"]
    cmd += ["-p", "no:cacheprovider", f"--llmeval-results={out}", f"--rootdir={tmp_path}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    by_id = {r["id"]: r for r in json.loads(out.read_text())["benchmarks"][0]["rows"]}
    for row_id in ("capital", "sky"):
        assert by_id[row_id]["models"]["base"]["score"]["value"] == 1.0, by_id[row_id]["models"]["base"][
            "score"
        ]
    greet = by_id["greet"]
    # A 135M model is no judge: it rarely writes "Score: N". Either way the three sampled runs are kept
    # (in the score, or beside the row's error), and they differ.
    for side in ("base", "adapter"):
        graded = greet["models"][side]["score"] or greet["models"][side]["measurement"]
        runs = graded["runs"]
        assert [r["seed"] for r in runs] == [0, 1, 2] and all(r["output"] for r in runs)
        assert len({r["output"] for r in runs}) > 1
    if greet["error"] is None:
        assert 0.0 <= greet["models"]["adapter"]["score"]["value"] <= 1.0
    else:
        assert "the judge gave no score" in greet["error"]


def test_composite_weights_from_pyproject_and_the_option(pytester: pytest.Pytester) -> None:
    rows = [
        row(
            f"q{i}",
            instruction="Pick.",
            expected="green",
            evaluation_type="multiple_choice",
            evaluation_config=COLOURS,
        )
        for i in range(4)
    ]
    preds = [{"id": f"q{i}", "prediction": p} for i, p in enumerate(["green", "B", "red", "Z"])]
    pytester.makefile(".jsonl", mc=jsonl(rows), preds=jsonl(preds))
    pytester.makefile(
        ".toml", pyproject="[tool.llmeval]\ncomposite_weights = {multiple_choice = 1.0, perplexity = 0.0}\n"
    )
    args = ["--llmeval-predictions=preds.jsonl", "mc.jsonl", "-m", "not gate", "-p", "no:cacheprovider"]
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(["composite score: base 50.00"])
    doc = json.loads((pytester.path / "results.json").read_text())
    assert (
        doc["composite"]["base"]["value"] == 50.0 and doc["composite"]["base"]["weights"]["perplexity"] == 0.0
    )
    assert doc["benchmarks"][0]["composite"]["base"]["metrics"]["multiple_choice"] == 50.0
    # The option overrides pyproject.toml; bad values are usage errors naming their source.
    result = pytester.runpytest(*args, "--llmeval-composite-weights=multiple_choice=2,perplexity=1")
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["composite"]["base"]["missing"] == ["perplexity"] and doc["composite"]["base"]["value"] == 50.0
    bad = pytester.runpytest(*args, "--llmeval-composite-weights=mcq=1")
    bad.stderr.fnmatch_lines(["*--llmeval-composite-weights: unknown evaluation type 'mcq'*"])
    pytester.makefile(".toml", pyproject="[tool.llmeval]\ncomposite_weights = {multiple_choice = -1}\n")
    bad = pytester.runpytest(*args)
    bad.stderr.fnmatch_lines(
        [
            "*pyproject.toml [[]tool.llmeval[]] composite_weights: weight of multiple_choice must be a "
            "finite "
            "number >= 0*"
        ]
    )


# --- properties -----------------------------------------------------------------------------------------


@given(
    # No subnormals: 5e-324 / 2 underflows to 0.0, a tie per token that the sum does not have.
    nll=st.lists(st.floats(0.0, 50.0, allow_subnormal=False), min_size=2, max_size=6),
    data=st.data(),
)
def test_the_pick_is_the_most_likely_choice(nll: list[float], data: st.DataObject) -> None:
    choices = [f"choice {i}" for i in range(len(nll))]
    expected = data.draw(st.integers(0, len(nll) - 1))
    measured = {
        "expected_index": expected,
        "choices": [
            {"text": c, "nll": v, "n_tokens": 2, "n_chars": len(c)} for c, v in zip(choices, nll, strict=True)
        ],
    }
    score = multiple_choice.score_measurement(measured, {"choices": choices})
    best = min(range(len(nll)), key=lambda i: (nll[i], i))
    assert score.details["predicted_index"] == best and score.value == float(best == expected)
    # Same token counts for every choice: per-token normalisation cannot change the pick.
    assert (
        multiple_choice.score_measurement(measured, {"choices": choices, "normalize": "token"}).value
        == score.value
    )


@given(scores=st.lists(st.integers(0, 10), min_size=1, max_size=5), noise=st.text("abxyz .!\n", max_size=20))
def test_judge_score_is_the_mean_over_max(scores: list[int], noise: str) -> None:
    config = {"rubric": "r", "max_score": 10}
    runs = [{"run": i, "seed": i, "output": f"{noise}\nScore: {s}"} for i, s in enumerate(scores)]
    result = llm_judge.score_measurement({"judge": "j", "runs": runs}, config)
    assert 0.0 <= result.value <= 1.0
    assert result.value == pytest.approx(sum(scores) / len(scores) / 10)
