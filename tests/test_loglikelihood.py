"""Multiple-choice log-likelihoods with shared contexts (issue 21): each context computed once for all its
choices, the batch's shared prefix once, and every value still the definition's, to float32 noise.

The reference is the definition itself: float64, one (context, continuation) pair per forward pass, no cache.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import jsonl, model_args, row

from pytest_llmeval import continuations
from pytest_llmeval.continuations import _share_prefixes, continuation_nll, continuation_scores
from pytest_llmeval.generation import build_prompt
from pytest_llmeval.models import LoadedModel, ModelSpec, load

# The bound: a float32 model within 2e-4 nats of its float64 self.
TOLERANCE = 2e-4

QUESTIONS = [
    ("Pick a colour.", ["red", "green", "blue sky", "a colour nobody has named yet"]),
    ("Which animal barks?", ["dog", "cat"]),
    ("Is the sky green? Answer yes or no, then say why in a few words.", ["no", "yes", "maybe"]),
    ("Name a prime number.", ["7", "8", "nine", "10"]),
    ("Translate 'chat' from French.", ["cat", "talk"]),
]


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> LoadedModel:
    return load(ModelSpec(base_model=str(tiny_model), device="cpu", dtype="float32"))


def pairs_of(
    loaded: LoadedModel, questions: list[tuple[str, list[str]]]
) -> list[tuple[list[int], list[int]]]:
    tok = loaded.tokenizer
    out = []
    for question, choices in questions:
        context = tok(build_prompt(tok, question), add_special_tokens=False)["input_ids"]
        out += [(context, tok(c, add_special_tokens=False)["input_ids"]) for c in choices]
    return out


def reference(model: Any, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
    """float64, one pair per forward pass, no cache."""
    model64 = copy.deepcopy(model).double()
    out = []
    for context, continuation in pairs:
        ids = torch.tensor([context + continuation])  # (1, T)
        with torch.inference_mode():
            logp = torch.log_softmax(model64(ids).logits[0], dim=-1)  # (T, V) float64
        out.append(-sum(float(logp[len(context) - 1 + j, t]) for j, t in enumerate(continuation)))
    return out


def test_shared_contexts_give_the_definitions_values(tiny: LoadedModel) -> None:
    pairs = pairs_of(tiny, QUESTIONS)
    assert {len(c) for _, c in pairs} >= {1, 2}  # one-token choices and longer ones
    expected = reference(tiny.model, pairs)
    got = continuation_nll(tiny.model, tiny.tokenizer, pairs)
    assert max(abs(g - e) for g, e in zip(got, expected, strict=True)) < TOLERANCE


@pytest.mark.parametrize("attention", ["sdpa", "eager", "flash (no custom masks: a second pass)"])
def test_every_attention_gives_the_definitions_values(
    tiny: LoadedModel, attention: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Choices packed after their context under a 4D mask (sdpa and eager read it), or, where the attention
    takes no custom mask, run in a second pass on copies of the context's cache: the same values."""
    model = copy.deepcopy(tiny.model)
    if attention == "eager":
        model.set_attn_implementation("eager")
    if attention.startswith("flash"):
        monkeypatch.setattr(continuations, "_takes_custom_masks", lambda model: False)
    else:
        assert continuations._takes_custom_masks(model)
    pairs = pairs_of(tiny, QUESTIONS)
    expected = reference(tiny.model, pairs)
    for size in (None, 2):
        got = continuation_nll(model, tiny.tokenizer, pairs, batch_size=size)
        assert max(abs(g - e) for g, e in zip(got, expected, strict=True)) < TOLERANCE, size


def test_every_batch_size_gives_the_same_values(tiny: LoadedModel) -> None:
    pairs = pairs_of(tiny, QUESTIONS)
    values = {
        size: continuation_nll(tiny.model, tiny.tokenizer, pairs, batch_size=size)
        for size in (None, 1, 2, 3, 5, 64)
    }
    first = values[None]
    for size, got in values.items():
        # Batches differ in their shared prefix and padding: float32 noise only, far below a choice's margin.
        assert got == pytest.approx(first, abs=1e-5), size


def test_groups_of_rows_sharing_an_instruction(tiny: LoadedModel) -> None:
    """Rows of one instruction share a longer prefix, batch after batch; each group has its own."""
    tok = tiny.tokenizer
    groups = [
        (
            "Convert the date to ISO 8601 (YYYY-MM-DD). Reply with the date only.",
            ["Jan 5th, 2024", "5/1/24", "the fifth of January", "2024 Jan 05"],
            ["2024-01-05", "2024-05-01"],
        ),
        (
            "Classify the sentiment of the review as positive or negative.",
            ["Great film.", "Dull and long.", "I would watch it again tomorrow.", "Meh"],
            ["positive", "negative", "neutral"],
        ),
    ]
    pairs = []
    for instruction, inputs, choices in groups:
        for text in inputs:
            context = tok(build_prompt(tok, instruction, text), add_special_tokens=False)["input_ids"]
            pairs += [(context, tok(c, add_special_tokens=False)["input_ids"]) for c in choices]
    expected = reference(tiny.model, pairs)
    for size in (None, 4, 6):  # 4 and 6: several batches per group, each starting with the group's prefix
        got = continuation_nll(tiny.model, tok, pairs, batch_size=size)
        assert max(abs(g - e) for g, e in zip(got, expected, strict=True)) < TOLERANCE, size


def test_pair_order_and_repeated_contexts_do_not_matter(tiny: LoadedModel) -> None:
    pairs = pairs_of(tiny, QUESTIONS)
    together = continuation_nll(tiny.model, tiny.tokenizer, pairs)
    reversed_ = continuation_nll(tiny.model, tiny.tokenizer, pairs[::-1])[::-1]
    alone = [continuation_nll(tiny.model, tiny.tokenizer, [p])[0] for p in pairs]
    assert reversed_ == pytest.approx(together, abs=1e-5)
    assert alone == pytest.approx(together, abs=1e-5)


def test_a_context_longer_than_the_window_loses_its_oldest_tokens(tiny: LoadedModel) -> None:
    limit = tiny.model.config.max_position_embeddings
    tok = tiny.tokenizer
    long_context = tok(" word" * (limit + 50), add_special_tokens=False)["input_ids"]
    choices = [tok(c, add_special_tokens=False)["input_ids"] for c in ("yes", "no thanks")]
    pairs = [(long_context, c) for c in choices] + pairs_of(tiny, QUESTIONS[:1])
    got = continuation_nll(tiny.model, tok, pairs)
    kept = [(long_context[len(long_context) + len(c) - limit :], c) for c in choices]
    expected = reference(tiny.model, kept + pairs[2:])
    assert max(abs(g - e) for g, e in zip(got, expected, strict=True)) < TOLERANCE
    with pytest.raises(ValueError, match=r"pair 0: a .*-token continuation exceeds the context"):
        continuation_nll(tiny.model, tok, [(long_context[:5], long_context[: limit + 1])])


def test_contexts_differing_near_the_end_share_their_prefix(tiny: LoadedModel) -> None:
    """WinoGrande's shape: each option completes the context, one continuation per context. The prefix two
    contexts share is read once (continuations._share_prefixes), the options' own tokens run unscored before
    the continuation, and every value and greedy flag is still the definition's."""
    tok = tiny.tokenizer
    shots = "The trophy did not fit in the suitcase because the trophy was too big. " * 3
    pairs = []
    for sentence, options, rest in [
        ("Sam took the bread from the basket because the", [" basket", " loaf of bread"], " was empty."),
        ("The dog chased the cat until the", [" dog", " black cat", " tired old animal"], " got tired."),
        ("Ann lent Beth a book, so", [" Ann", " Beth Smith"], " was kind."),
    ]:
        for option in options:
            context = tok(shots + sentence + option, add_special_tokens=False)["input_ids"]
            pairs.append((context, tok(rest, add_special_tokens=False)["input_ids"]))
    pairs.append(
        (pairs[0][0], tok(" was full.", add_special_tokens=False)["input_ids"])
    )  # a context's 2nd pair
    pairs += pairs_of(tiny, QUESTIONS[:2])
    moved = continuation_scores_leads(pairs)
    # Cut back to what they share: the options of the last two sentences (5); the first sentence's " basket"
    # context has two pairs and keeps its own pass, so " bread", sharing with nothing cut, keeps its too.
    assert [bool(lead) for lead in moved[:7]] == [False, False, True, True, True, True, True]
    assert not any(moved[7:])
    assert max(moved) > 1  # options of several tokens: their own tokens run unscored before the continuation
    expected = reference(tiny.model, pairs)
    model64 = copy.deepcopy(tiny.model).double()
    for size in (None, 1, 3):
        got = continuation_scores(tiny.model, tok, pairs, batch_size=size)
        assert max(abs(g - e) for (g, _), e in zip(got, expected, strict=True)) < TOLERANCE, size
        for (context, continuation), (_, greedy) in zip(pairs, got, strict=True):
            ids = torch.tensor([context + continuation])  # (1, T)
            with torch.inference_mode():
                top = model64(ids).logits[0, len(context) - 1 : -1].argmax(dim=-1)  # (K,)
            assert greedy == (top.tolist() == continuation), size


def continuation_scores_leads(pairs: list[tuple[list[int], list[int]]]) -> list[int]:
    """The lead of each pair after _share_prefixes: how many context tokens moved to its continuation."""
    contexts: dict[tuple[int, ...], list[int]] = {}
    for index, (context, _) in enumerate(pairs):
        contexts.setdefault(tuple(context), []).append(index)
    leads = [0] * len(pairs)
    _share_prefixes(contexts, [list(c) for _, c in pairs], leads)
    return leads


@pytest.mark.slow
def test_the_real_model_within_the_bound(real_model: LoadedModel) -> None:
    """SmolLM2 on prompts of the shipped benchmarks, 2 and 4 choices, against its float64 self."""
    rows = [json.loads(line) for line in Path("benchmarks/dates.jsonl").read_text().splitlines()[:6]]
    answers = [r["expected_output"] for r in rows]
    questions = [
        (r["instruction"] + "\n\n" + r["input"], answers[i : i + 2 + 2 * (i % 2)] or answers[:2])
        for i, r in enumerate(rows)
    ]
    pairs = pairs_of(real_model, questions)
    got = continuation_nll(real_model.model, real_model.tokenizer, pairs)
    expected = reference(real_model.model, pairs)
    assert max(abs(g - e) for g, e in zip(got, expected, strict=True)) < TOLERANCE


def test_multiple_choice_rows_agree_serially_and_under_xdist(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    rows = [
        row(
            f"mc{i}",
            instruction=question,
            expected=choices[0],
            evaluation_type="multiple_choice",
            evaluation_config={"choices": choices},
        )
        for i, (question, choices) in enumerate(QUESTIONS * 2)
    ]
    pytester.makefile(".jsonl", mc=jsonl(rows))
    args = [*model_args(tiny_model), "--llmeval-batch-size=3", "--llmeval-no-history"]
    pytester.runpytest(*args, "--llmeval-results=serial.json")
    pytester.runpytest(*args, "-n", "2", "--llmeval-results=parallel.json")

    def measured(name: str) -> dict[str, list[float]]:
        doc = json.loads((pytester.path / name).read_text())
        return {
            r["id"]: [c["nll"] for c in r["models"]["base"]["score"]["choices"]]
            for r in doc["benchmarks"][0]["rows"]
        }

    serial, parallel = measured("serial.json"), measured("parallel.json")
    # Equal up to float32 rounding: each xdist worker runs torch on fewer threads, and on some CPUs (an
    # AMD EPYC here) a matrix product summed over another thread count differs in the 7th digit.
    assert len(serial) == len(rows) and serial.keys() == parallel.keys()
    for rid, values in serial.items():
        assert values == pytest.approx(parallel[rid], rel=1e-6), rid
