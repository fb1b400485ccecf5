"""One bad row never takes its batch down (issue 23): a prompt longer than the model's context is that row's
error (or is truncated, and says so), batches are budgeted by tokens, and a batch that fails is split until
the failing row is alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import EXPLODER, jsonl, model_args, row

from pytest_llmeval import generation
from pytest_llmeval.generation import ELISION, build_prompt, fit_text, token_batches

# About 12,000 words: longer than the embedded model's context (8192 tokens), as in the issue.
LONG_INPUT = (
    "DOCUMENT START. "
    + " ".join(f"word{i % 97} of the long document," for i in range(4000))
    + " QUESTION: what is it?"
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from pytest_llmeval.models import embedded_model_dir

    return AutoTokenizer.from_pretrained(embedded_model_dir())


def fit_prompt(tokenizer: Any, instruction: str, input: str, **fit: Any) -> tuple[str, dict[str, Any] | None]:
    """A row's prompt fitted as the evaluator fits it."""
    return fit_text(tokenizer, lambda text: build_prompt(tokenizer, instruction, text), input, **fit)


def count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


# --- fitting a prompt to the context ---------------------------------------------------------------------


def test_a_prompt_that_fits_is_left_alone(tokenizer: Any) -> None:
    prompt, truncated = fit_prompt(
        tokenizer, "Summarise.", "A short text.", max_new_tokens=64, context=8192, policy="error"
    )
    assert prompt == build_prompt(tokenizer, "Summarise.", "A short text.") and truncated is None


def test_an_overflowing_prompt_is_an_error_with_its_counts(tokenizer: Any) -> None:
    tokens = count(tokenizer, build_prompt(tokenizer, "Summarise.", LONG_INPUT))
    assert tokens > 8192
    with pytest.raises(ValueError) as info:
        fit_prompt(tokenizer, "Summarise.", LONG_INPUT, max_new_tokens=64, context=8192, policy="error")
    # (the exact message: it is what a user reads in the row's failure)
    assert str(info.value) == (
        f"{tokens} prompt tokens + max_new_tokens 64 = {tokens + 64} tokens, more than the model's "
        "context of 8192: --llmeval-context-overflow truncate-left or truncate-middle shortens the input, "
        "or lower the row's evaluation_config.max_new_tokens"
    )


@pytest.mark.parametrize("policy", ["truncate-left", "truncate-middle"])
def test_truncation_keeps_the_instruction_and_the_end_of_the_input(tokenizer: Any, policy: str) -> None:
    prompt, truncated = fit_prompt(
        tokenizer,
        "Answer the question at the end.",
        LONG_INPUT,
        max_new_tokens=64,
        context=1024,
        policy=policy,
    )
    assert truncated is not None
    tokens = count(tokenizer, prompt)
    assert tokens + 64 <= 1024 and tokens == truncated["prompt_tokens"]
    assert truncated["policy"] == policy and truncated["context"] == 1024
    assert truncated["original_prompt_tokens"] == count(
        tokenizer, build_prompt(tokenizer, "Answer the question at the end.", LONG_INPUT)
    )
    assert truncated["input_tokens"] == count(tokenizer, LONG_INPUT) > truncated["input_tokens_kept"]
    # Nearly all the room is used: a prompt cut far shorter than needed would throw away input for nothing.
    assert tokens + 64 > 1024 - 16
    assert "Answer the question at the end." in prompt and "QUESTION: what is it?" in prompt
    assert ("DOCUMENT START." in prompt) == (policy == "truncate-middle")
    assert (ELISION in prompt) == (policy == "truncate-middle")


def test_no_room_for_any_input_is_an_error(tokenizer: Any) -> None:
    with pytest.raises(
        ValueError, match="the instruction and template alone leave no room for any of the input"
    ):
        fit_prompt(
            tokenizer, "word " * 300, LONG_INPUT, max_new_tokens=64, context=256, policy="truncate-left"
        )
    with pytest.raises(ValueError, match="context overflow policy must be one of error, truncate-left"):
        fit_prompt(tokenizer, "Q", "x", max_new_tokens=1, context=10, policy="truncate")


# --- batches budgeted by tokens --------------------------------------------------------------------------


def test_token_batches_put_a_long_row_alone() -> None:
    lengths = [9000, 40, 38, 35, 30, 20]
    limits = [64] * 6
    order = sorted(range(6), key=lambda i: -lengths[i])
    # A short row padded to the long one's 9000 + 64 tokens would pay 87 times its own 104: never.
    assert token_batches(order, lengths, limits, 32, 32768) == [[0], [1, 2, 3, 4, 5]]
    assert token_batches(order, lengths, limits, 32, None) == [[0], [1, 2, 3, 4, 5]]
    # Without the padding limit only the budget cuts: two rows of 9064 padded tokens are over 16,384.
    assert token_batches(order, lengths, limits, 32, 16384, max_padding=1000) == [[0], [1, 2, 3, 4, 5]]
    assert token_batches(order, lengths, limits, 32, 32768, max_padding=1000) == [[0, 1, 2], [3, 4, 5]]
    assert token_batches(order, lengths, limits, 32, None, max_padding=1000) == [[0, 1, 2, 3, 4, 5]]
    assert token_batches(order, lengths, limits, 2, None) == [[0], [1, 2], [3, 4], [5]]
    # 3 rows of (40 + 64) padded tokens fit 312; a fourth would not.
    assert token_batches(order[1:], lengths, limits, 32, 312) == [[1, 2, 3], [4, 5]]
    # 4x is the limit: a row of 30 + 0 tokens joins a batch 120 wide, not one 121 wide.
    assert token_batches([0, 1], [120, 30], [0, 0], 32, None) == [[0, 1]]
    assert token_batches([0, 1], [121, 30], [0, 0], 32, None) == [[0], [1]]
    # A row over the budget on its own is still generated, alone.
    assert token_batches([0], lengths, limits, 32, 100) == [[0]]


def test_generate_batches_by_token_budget_with_the_same_outputs(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    prompts = [build_prompt(tok, "Repeat: " + "long " * 300)] + [build_prompt(tok, f"Q{i}") for i in range(5)]
    batches: list[int] = []
    decode = generation._decode

    def counted(model: Any, ids: Any, *args: Any, **kwargs: Any) -> Any:
        batches.append(ids.shape[0])
        return decode(model, ids, *args, **kwargs)

    monkeypatch.setattr(generation, "_decode", counted)
    long_tokens = len(tok(prompts[0], add_special_tokens=False)["input_ids"])
    # Room for the long row alone (and for the five short ones together), not for the long one and another.
    budget = long_tokens + 8 + 50
    assert 5 * (len(tok(prompts[1], add_special_tokens=False)["input_ids"]) + 8) <= budget
    budgeted = generation.generate(
        model, tok, prompts, max_new_tokens=8, batch_size=32, token_budget=budget, max_padding=1000
    )
    assert batches == [1, 5]  # the budget alone: the long row alone, then the five short ones together
    batches.clear()
    unpadded = generation.generate(model, tok, prompts, max_new_tokens=8, batch_size=32)
    assert batches == [1, 5]  # the padding limit alone (a short row would pay ~10x its length)
    batches.clear()
    together = generation.generate(model, tok, prompts, max_new_tokens=8, batch_size=32, max_padding=1000)
    assert batches == [6] and together == budgeted == unpadded


# --- through the plugin ----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def results(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    return data


def rows_by_id(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in results(pytester)["benchmarks"][0]["rows"]}


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_real_model_a_row_longer_than_the_context_is_its_own_error(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    rows = [
        row("long", instruction="Answer the question at the end.", input=LONG_INPUT),
        row("short", instruction="Say hello.", evaluation_config={"max_new_tokens": 8}),
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    args = [
        "-m",
        "not gate",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-cache",
        "--llmeval-batch-size=2",
        *workers,
    ]
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=2)  # the short row is scored (and wrong); the long one is an error row
    by_id = rows_by_id(pytester)
    assert by_id["short"]["error"] is None and by_id["short"]["models"]["base"]["output"]
    error = by_id["long"]["error"]
    assert error.startswith("bench.jsonl:1: ") and "more than the model's context of 8192" in error
    assert "--llmeval-context-overflow truncate-left" in error and "Traceback" not in result.stdout.str()
    # Both rows finished, one scored and one a clear error: a row without a score leaves the run incomplete.
    doc = results(pytester)
    assert doc["complete"] is False and doc["incomplete_reason"] == "1 of 2 rows errored"


def test_a_truncated_row_is_generated_and_says_so(pytester: pytest.Pytester, tiny_model: Path) -> None:
    # The tiny model's context is 1024 tokens.
    rows = [
        row(
            "long",
            instruction="Answer the question at the end.",
            input=LONG_INPUT[:8000],
            evaluation_config={"max_new_tokens": 4},
        ),
        row("short", evaluation_config={"max_new_tokens": 4}),
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    error_run = pytester.runpytest(*model_args(tiny_model))
    error_run.assert_outcomes(failed=2)
    assert "more than the model's context of 1024" in rows_by_id(pytester)["long"]["error"]
    truncated_run = pytester.runpytest(*model_args(tiny_model), "--llmeval-context-overflow=truncate-left")
    truncated_run.assert_outcomes(failed=2)
    long = rows_by_id(pytester)["long"]
    assert long["error"] is None and long["models"]["base"]["output"] is not None
    cut = long["models"]["base"]["prompt_truncated"]
    assert cut["policy"] == "truncate-left" and cut["context"] == 1024 and cut["prompt_tokens"] + 4 <= 1024
    assert "prompt_truncated" not in rows_by_id(pytester)["short"]["models"]["base"]
    assert results(pytester)["inference_config"]["context_overflow"] == "truncate-left"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_failing_batch_is_split_until_the_failing_row_is_alone(
    pytester: pytest.Pytester, tiny_model: Path, workers: list[str]
) -> None:
    pytester.makeconftest(EXPLODER)
    rows = [
        row(f"r{i}", instruction=f"Question {i}?", evaluation_config={"max_new_tokens": 4}) for i in range(8)
    ]
    rows[5]["instruction"] = "EXPLODE please"
    pytester.makefile(".jsonl", bench=jsonl(rows))
    # With the generation cache on: rows of a batch that failed and was retried count once.
    args = [a for a in model_args(tiny_model) if a != "--llmeval-no-cache"]
    result = pytester.runpytest(
        *args, f"--llmeval-cache-dir={pytester.path / 'cache'}", "--llmeval-batch-size=8", *workers
    )
    result.assert_outcomes(failed=8)
    cache = results(pytester)["inference_config"]["cache"]
    assert cache["misses"] == {"base": 7, "adapter": 0} and cache["hits"] == {"base": 0, "adapter": 0}
    by_id = rows_by_id(pytester)
    assert (
        by_id["r5"]["error"]
        == "bench.jsonl:6: generation failed (base): RuntimeError: cannot generate this input"
    )
    assert all(
        by_id[f"r{i}"]["error"] is None and by_id[f"r{i}"]["models"]["base"]["output"]
        for i in range(8)
        if i != 5
    )
    retries = results(pytester)["inference_config"]["batch_retries"]
    # 8 rows -> 4 + 4 -> the failing 4 -> 2 + 2 -> the failing 2 -> 1 + 1.
    assert [r["rows"] for r in retries] == [8, 4, 2]
    assert all(
        r == {"side": "base", "rows": r["rows"], "error": "RuntimeError: cannot generate this input"}
        for r in retries
    )


def test_a_multiple_choice_row_longer_than_the_context_is_fitted_the_same_way(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    config = {"choices": ["red", "green", "blue sky"]}
    rows = [
        row(
            "long",
            instruction="Which colour?",
            input=LONG_INPUT[:8000],
            expected="green",
            evaluation_type="multiple_choice",
            evaluation_config=config,
        ),
        row(
            "short",
            instruction="Which colour?",
            expected="green",
            evaluation_type="multiple_choice",
            evaluation_config=config,
        ),
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    pytester.runpytest(*model_args(tiny_model))
    by_id = rows_by_id(pytester)
    error = by_id["long"]["error"]
    assert error.startswith("bench.jsonl:1: ") and "+ the longest choice 2 = " in error
    assert error.endswith("--llmeval-context-overflow truncate-left or truncate-middle shortens the input")
    assert by_id["short"]["error"] is None and by_id["short"]["models"]["base"]["score"] is not None
    pytester.runpytest(*model_args(tiny_model), "--llmeval-context-overflow=truncate-middle")
    long = rows_by_id(pytester)["long"]
    assert long["error"] is None and long["models"]["base"]["score"] is not None
    cut = long["models"]["base"]["prompt_truncated"]
    assert cut["policy"] == "truncate-middle" and cut["prompt_tokens"] + 2 <= 1024
