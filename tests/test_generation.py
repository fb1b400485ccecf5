"""Batched generation: outputs independent of batch size and order, per-row limits, prompt building."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmeval.generation import (
    PLAIN_TEMPLATE,
    build_prompt,
    generate,
    shared_prefix_length,
    template_info,
    user_message,
)
from pytest_llmeval.models import LoadedModel, ModelSpec, load

QUESTIONS = [
    ("Convert the date to ISO 8601 format (YYYY-MM-DD). Reply with the date only.", "March 5, 2021"),
    ("Convert the date to ISO 8601 format (YYYY-MM-DD). Reply with the date only.", "the 21st of June 1998"),
    ("Answer with a single number.", "What is 17 + 25?"),
    ("Answer with a single number.", "A box holds 12 eggs. How many eggs are in 3 boxes?"),
    ("Name the capital of France.", ""),
    ("Rewrite the sentence in the passive voice.", "The cat chased the mouse."),
    ("Say hello.", ""),
    ("Translate to French.", "Good morning, how are you today? I hope the weather is fine where you are."),
]


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> LoadedModel:
    return load(ModelSpec(base_model=str(tiny_model)))


def prompts(loaded: LoadedModel) -> list[str]:
    return [build_prompt(loaded.tokenizer, i, x) for i, x in QUESTIONS]


def test_tiny_outputs_do_not_depend_on_batch_size(tiny: LoadedModel) -> None:
    texts = prompts(tiny)
    one = generate(tiny.model, tiny.tokenizer, texts, max_new_tokens=8, batch_size=1)
    three = generate(tiny.model, tiny.tokenizer, texts, max_new_tokens=8, batch_size=3)
    eight = generate(tiny.model, tiny.tokenizer, texts, max_new_tokens=8, batch_size=8)
    assert one == three == eight
    assert all(one)


def test_outputs_come_back_in_prompt_order(tiny: LoadedModel) -> None:
    texts = prompts(tiny)
    forward = generate(tiny.model, tiny.tokenizer, texts, max_new_tokens=6, batch_size=4)
    backward = generate(tiny.model, tiny.tokenizer, texts[::-1], max_new_tokens=6, batch_size=4)
    assert backward == forward[::-1]


def test_per_row_limits_equal_separate_generation(tiny: LoadedModel) -> None:
    texts = prompts(tiny)
    limits = [1, 2, 3, 4, 5, 6, 7, 8]
    mixed = generate(tiny.model, tiny.tokenizer, texts, max_new_tokens=limits, batch_size=8)
    for text, limit, got in zip(texts, limits, mixed, strict=True):
        alone = generate(tiny.model, tiny.tokenizer, [text], max_new_tokens=limit, batch_size=1)
        assert got == alone[0]


def test_bad_arguments(tiny: LoadedModel) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        generate(tiny.model, tiny.tokenizer, ["x"], max_new_tokens=2, batch_size=0)
    with pytest.raises(ValueError, match="one limit per prompt"):
        generate(tiny.model, tiny.tokenizer, ["x", "y"], max_new_tokens=[2], batch_size=2)


def test_prompt_uses_chat_template_with_generation_prompt(tiny: LoadedModel) -> None:
    text = build_prompt(tiny.tokenizer, "Do this.", "On that.")
    assert text.rstrip().endswith("<|im_start|>assistant")
    assert "Do this.\n\nOn that." in text
    assert template_info(tiny.tokenizer)["kind"] == "chat_template"
    assert user_message("Do this.", "  ") == "Do this."


def test_plain_template_without_chat_template(tiny: LoadedModel) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny.base.path)
    tokenizer.chat_template = None
    assert build_prompt(tokenizer, "Do this.", "On that.") == PLAIN_TEMPLATE.format(
        instruction="Do this.", input="On that."
    )
    assert "### Input" not in build_prompt(tokenizer, "Do this.")
    assert template_info(tokenizer)["kind"] == "plain"


@pytest.mark.slow
def test_real_model_batch_1_equals_batch_8_in_float32(real_model: LoadedModel) -> None:
    """The embedded SmolLM2 in float32: a row's output must not depend on its batch."""
    loaded = real_model
    texts = prompts(loaded)
    one = generate(loaded.model, loaded.tokenizer, texts, max_new_tokens=12, batch_size=1)
    eight = generate(loaded.model, loaded.tokenizer, texts, max_new_tokens=12, batch_size=8)
    assert one == eight
    assert len(set(one)) == len(one)  # real, distinct answers


def test_same_tokens_as_transformers_generate(tiny: LoadedModel) -> None:
    """Our greedy loop (shared prefix, rows leaving the batch) equals transformers' own greedy generate()."""
    import torch
    from transformers import GenerationConfig

    texts = prompts(tiny)
    limits = [3, 8, 5, 8, 1, 6, 8, 2]
    ours = generate(tiny.model, tiny.tokenizer, texts, max_new_tokens=limits, batch_size=8)
    eos = tiny.tokenizer.eos_token_id
    for text, limit, got in zip(texts, limits, ours, strict=True):
        ids = tiny.tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids  # (1, T)
        config = GenerationConfig(max_new_tokens=limit, do_sample=False, eos_token_id=eos, pad_token_id=eos)
        with torch.inference_mode():
            out = tiny.model.generate(input_ids=ids, generation_config=config)  # (1, T + new)
        expected = tiny.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()
        assert got == expected


@pytest.mark.parametrize(
    ("sequences", "expected"),
    [
        ([[1] * 20 + [2], [1] * 20 + [3, 4]], 20),
        ([[1] * 20], 0),  # one row: nothing to share
        ([[1] * 5 + [2], [1] * 5 + [3]], 0),  # below the minimum
        ([[1] * 12, [1] * 12], 11),  # identical prompts keep one token each for decoding
        ([[1, 2] * 10, [2, 1] * 10], 0),
    ],
)
def test_shared_prefix_length(sequences: list[list[int]], expected: int) -> None:
    assert shared_prefix_length(sequences) == expected
