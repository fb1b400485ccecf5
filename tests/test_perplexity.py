"""Perplexity: equal to the transformers guide's one-window-at-a-time loop, independent of batching."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.models import LoadedModel, ModelSpec, load
from pytest_llmeval.perplexity import attribute_to_scripts, perplexity, script_of

TEXTS = [
    "Hi.",
    "The quick brown fox jumps over the lazy dog.",
    "Perplexity measures how well a language model predicts a sample of text; lower is better, "
    "and a model that guesses uniformly over its vocabulary has a perplexity equal to its size.",
    "Ünïcödé text — with accents, dashes and emoji 🙂 — has more bytes than characters.",
    " ".join(f"item {i} costs {i * 7 % 13} euros," for i in range(30)),  # ~200 tokens: many windows
]
REL = 1e-5


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> LoadedModel:
    return load(ModelSpec(base_model=str(tiny_model), device="cpu", dtype="float32"))


def token_ids(loaded: LoadedModel, text: str) -> list[int]:
    """What perplexity() scores: BOS, then the text's tokens without special tokens."""
    tokens: list[int] = loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
    bos = loaded.tokenizer.bos_token_id
    return [bos, *tokens] if bos is not None else tokens


def reference(loaded: LoadedModel, text: str, max_length: int, stride: int) -> tuple[float, int]:
    """The guide's loop, one window per forward pass, loss from `model(input_ids, labels=...)`.

    Total NLL and scored tokens. The guide subtracts one token per window for the label shift; that is
    right only when the whole window is scored, so here the shifted labels are counted exactly.
    """
    ids = torch.tensor([token_ids(loaded, text)])  # (1, L)
    length = ids.shape[1]
    total, count, prev_end = 0.0, 0, 0
    for begin in range(0, length, stride):
        end = min(begin + max_length, length)
        trg_len = end - prev_end
        input_ids = ids[:, begin:end]
        target_ids = input_ids.clone()
        target_ids[:, :-trg_len] = -100
        scored = int((target_ids[:, 1:] != -100).sum())  # the model shifts labels left by one
        if scored:
            with torch.no_grad():
                loss = loaded.model(input_ids, labels=target_ids).loss
            total += float(loss) * scored
            count += scored
        prev_end = end
        if end == length:
            break
    return total, count


def disjoint_reference(loaded: LoadedModel, text: str, size: int) -> tuple[float, int]:
    """Chunks of `size` tokens scored alone (no shared context), by hand with log_softmax."""
    ids = token_ids(loaded, text)
    total, count = 0.0, 0
    for begin in range(0, len(ids), size):
        chunk = torch.tensor([ids[begin : begin + size]])  # (1, T)
        if chunk.shape[1] < 2:
            continue
        with torch.no_grad():
            logp = torch.log_softmax(loaded.model(chunk).logits[0, :-1].float(), dim=-1)  # (T - 1, V)
        total -= float(logp.gather(1, chunk[0, 1:, None]).sum())
        count += chunk.shape[1] - 1
    return total, count


def test_equals_reference_loop_on_tiny_model(tiny: LoadedModel) -> None:
    result = perplexity(tiny.model, tiny.tokenizer, TEXTS, max_length=16, stride=8)
    assert result.first_token == "scored after BOS <|im_start|>"
    assert (result.max_length, result.stride) == (16, 8)
    assert len(token_ids(tiny, TEXTS[-1])) > 100  # really many windows
    for text, got in zip(TEXTS, result.texts, strict=True):
        nll, count = reference(tiny, text, 16, 8)
        assert got.n_tokens == count
        # stride < max_length: every text token is scored exactly once (BOS never is)
        assert got.n_tokens == len(token_ids(tiny, text)) - 1
        assert got.nll == pytest.approx(nll, rel=REL)
        assert got.perplexity == pytest.approx(math.exp(nll / count), rel=REL)


@pytest.mark.slow
def test_equals_reference_loop_on_embedded_model(real_model: LoadedModel) -> None:
    loaded = real_model
    texts = TEXTS[1:4]
    result = perplexity(loaded.model, loaded.tokenizer, texts, max_length=64, stride=32)
    for text, got in zip(texts, result.texts, strict=True):
        nll, count = reference(loaded, text, 64, 32)
        assert got.n_tokens == count
        assert got.nll == pytest.approx(nll, rel=REL)
    # a trained model: far better than uniform over its 49k vocabulary, worse than perfect
    assert 1.5 < result.perplexity < 1000


def test_batch_size_does_not_change_the_result(tiny: LoadedModel) -> None:
    results = [
        perplexity(tiny.model, tiny.tokenizer, TEXTS, max_length=16, stride=8, batch_size=b)
        for b in (1, 3, 8, None)
    ]
    first = results[0]
    for other in results[1:]:
        assert other.n_tokens == first.n_tokens
        assert other.total_nll == pytest.approx(first.total_nll, rel=REL)
        for a, b in zip(first.texts, other.texts, strict=True):
            assert b.nll == pytest.approx(a.nll, rel=REL)


def test_stride_equal_to_max_length_gives_disjoint_windows(tiny: LoadedModel) -> None:
    disjoint = perplexity(tiny.model, tiny.tokenizer, TEXTS, max_length=16, stride=16)
    for text, got in zip(TEXTS, disjoint.texts, strict=True):
        nll, count = disjoint_reference(tiny, text, 16)
        assert got.n_tokens == count
        assert got.nll == pytest.approx(nll, rel=REL)
    sliding = perplexity(tiny.model, tiny.tokenizer, TEXTS[-1:], max_length=16, stride=8)
    # shared context changes the long text's value (and disjoint windows leave window starts unscored)
    assert sliding.texts[0].nll != pytest.approx(disjoint.texts[-1].nll, rel=1e-3)
    assert sliding.texts[0].n_tokens > disjoint.texts[-1].n_tokens


def test_text_shorter_than_the_window_is_independent_of_stride(tiny: LoadedModel) -> None:
    text = TEXTS[1]
    assert len(token_ids(tiny, text)) < 32
    values = [perplexity(tiny.model, tiny.tokenizer, [text], max_length=32, stride=s) for s in (1, 5, 16, 32)]
    for value in values[1:]:
        assert value.texts[0].n_tokens == values[0].texts[0].n_tokens
        assert value.total_nll == pytest.approx(values[0].total_nll, rel=REL)


def test_bits_per_character_and_byte(tiny: LoadedModel) -> None:
    result = perplexity(tiny.model, tiny.tokenizer, TEXTS, max_length=16, stride=8)
    # the seed's way: bits per token scaled by tokens per character
    assert result.bits_per_character == pytest.approx(
        result.bits_per_token * result.n_tokens / result.n_chars, rel=1e-12
    )
    assert result.bits_per_token == pytest.approx(result.cross_entropy / math.log(2), rel=1e-12)
    assert result.n_chars == sum(len(t) for t in TEXTS)
    assert result.n_bytes == sum(len(t.encode()) for t in TEXTS)
    assert result.n_bytes > result.n_chars  # the accented text and the emoji
    assert result.bits_per_byte < result.bits_per_character
    accented = result.texts[3]
    assert accented.bits_per_byte == pytest.approx(accented.nll / math.log(2) / accented.n_bytes)


def test_token_weighted_not_mean_of_texts(tiny: LoadedModel) -> None:
    result = perplexity(tiny.model, tiny.tokenizer, TEXTS, max_length=16, stride=8)
    total_nll = sum(t.nll for t in result.texts)
    total_tokens = sum(t.n_tokens for t in result.texts)
    assert result.n_tokens == total_tokens
    assert result.perplexity == pytest.approx(math.exp(total_nll / total_tokens), rel=1e-12)
    mean = sum(t.perplexity for t in result.texts) / len(result.texts)
    assert result.mean_text_perplexity == pytest.approx(mean, rel=1e-12)
    assert result.perplexity != pytest.approx(result.mean_text_perplexity, rel=1e-3)
    worst = result.worst(2)
    assert [w.perplexity for w in worst] == sorted((t.perplexity for t in result.texts), reverse=True)[:2]
    data = result.to_json()
    assert data["texts"][0]["index"] == 0 and data["n_tokens"] == total_tokens


def test_without_bos_the_first_token_is_context_only(tiny_model: Path) -> None:
    loaded = load(ModelSpec(base_model=str(tiny_model), device="cpu", dtype="float32"))
    loaded.tokenizer.bos_token = None
    assert loaded.tokenizer.bos_token_id is None
    result = perplexity(loaded.model, loaded.tokenizer, TEXTS[:3], max_length=16, stride=8)
    assert result.first_token == "not scored (no BOS)"
    for text, got in zip(TEXTS[:3], result.texts, strict=True):
        nll, count = reference(loaded, text, 16, 8)
        assert got.n_tokens == count == len(token_ids(loaded, text)) - 1
        assert got.nll == pytest.approx(nll, rel=REL)
    with pytest.raises(ValueError, match="text 1 has no token to score"):
        perplexity(loaded.model, loaded.tokenizer, ["Hello world.", "a"], max_length=16)


def test_defaults(tiny: LoadedModel) -> None:
    result = perplexity(tiny.model, tiny.tokenizer, TEXTS[:2])
    # tiny model: max_position_embeddings 1024, so the cap and the model agree
    assert (result.max_length, result.stride) == (1024, 512)


@pytest.mark.parametrize(
    ("texts", "kwargs", "message"),
    [
        (["fine", ""], {}, "text 1 is empty"),
        (["fine"], {"max_length": 8, "stride": 9}, "stride must be between 1 and max_length"),
        (["fine"], {"max_length": 8, "stride": 0}, "stride must be between 1 and max_length"),
        (["fine"], {"max_length": 1}, "max_length must be >= 2"),
        (["fine"], {"max_length": 4096}, "exceeds the model's max_position_embeddings"),
        (["fine"], {"batch_size": 0}, "batch_size must be >= 1"),
        ([], {}, "at least one text"),
    ],
)
def test_errors(tiny: LoadedModel, texts: list[str], kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        perplexity(tiny.model, tiny.tokenizer, texts, **kwargs)


def test_adapter_on_and_off(tiny: LoadedModel, tiny_model: Path, tiny_adapter: Path) -> None:
    loaded = load(ModelSpec(base_model=str(tiny_model), adapter=tiny_adapter, device="cpu", dtype="float32"))
    with loaded.adapter_enabled(False):
        off = perplexity(loaded.model, loaded.tokenizer, TEXTS, max_length=16, stride=8)
    with loaded.adapter_enabled(True):
        on = perplexity(loaded.model, loaded.tokenizer, TEXTS, max_length=16, stride=8)
    base = perplexity(tiny.model, tiny.tokenizer, TEXTS, max_length=16, stride=8)
    assert off.total_nll == pytest.approx(base.total_nll, rel=REL)
    assert on.total_nll != pytest.approx(base.total_nll, rel=1e-3)


def test_llm_fixtures_offer_perplexity_and_the_assertion(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    """`llm.perplexity` and `llm_base.perplexity` in hand-written tests; assert_perplexity_below's report."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        """
        import re

        import pytest
        from pytest_llmeval import assert_perplexity_below

        TEXTS = ["The cat sat on the mat.", "Dates look like 2021-03-05.", "A much longer text " * 12]

        def test_adapter_and_base_differ(llm, llm_base):
            on, off = llm.perplexity(TEXTS, max_length=32, stride=16), llm_base.perplexity(TEXTS)
            assert on.n_tokens == llm_base.perplexity(TEXTS, max_length=32, stride=16).n_tokens
            assert on.perplexity != off.perplexity

        def test_below(llm_base):
            result = assert_perplexity_below(llm_base, TEXTS, threshold=1e9)
            assert result.perplexity < 1e9

        def test_report(llm_base):
            with pytest.raises(AssertionError) as info:
                assert_perplexity_below(llm_base, TEXTS, threshold=1.0)
            message = str(info.value)
            assert message.startswith("perplexity ") and "> threshold 1 over " in message
            # The three worst texts, with their values.
            assert len(re.findall(r"text \\d \\(\\d+ tokens\\): ", message)) == 3
        """
    )
    result = pytester.runpytest(
        f"--base-model={tiny_model}", f"--adapter={tiny_adapter}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3)


# --- per-script breakdown -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("char", "script"),
    [
        ("あ", "hiragana"),
        ("ゝ", "hiragana"),
        ("カ", "katakana"),
        ("ー", "katakana"),
        ("ｶ", "katakana"),
        ("猫", "kanji"),
        ("々", "kanji"),
        ("𠀋", "kanji"),
        ("a", "latin"),
        ("Z", "latin"),
        ("é", "latin"),
        ("Ａ", "latin"),
        ("1", "other"),
        ("。", "other"),
        (" ", "other"),
        ("🙂", "other"),
        ("×", "other"),
    ],
)
def test_script_of(char: str, script: str) -> None:
    assert script_of(char) == script


@given(
    text=st.text(alphabet="あいカキ猫犬ab .1🙂", min_size=1, max_size=30),
    data=st.data(),
)
def test_attribution_keeps_every_nat(text: str, data: st.DataObject) -> None:
    """Whatever the token spans, the script shares add up to the total loss and count every character."""
    cuts = sorted(
        data.draw(st.sets(st.integers(1, len(text) - 1), max_size=len(text))) if len(text) > 1 else []
    )
    bounds = [0, *cuts, len(text)]
    offsets = list(itertools.pairwise(bounds))
    offsets += data.draw(st.lists(st.sampled_from([*offsets, (0, 0)]), max_size=3))  # split characters, empty
    losses = data.draw(st.lists(st.floats(0, 20), min_size=len(offsets), max_size=len(offsets)))
    shares = attribute_to_scripts(text, offsets, losses)
    assert math.fsum(s.nll for s in shares.values()) == pytest.approx(math.fsum(losses), abs=1e-9)
    assert sum(s.n_chars for s in shares.values()) == len(text)


def test_attribution_by_hand() -> None:
    # Token 1 covers "猫", token 2 and 3 share "あ" (one character split over two byte-level tokens),
    # token 4 covers "a " (split evenly between latin and other).
    shares = attribute_to_scripts("猫あa ", [(0, 1), (1, 2), (1, 2), (2, 4)], [4.0, 1.0, 2.0, 6.0])
    assert {s: (v.nll, v.n_chars) for s, v in shares.items()} == {
        "hiragana": (3.0, 1),
        "katakana": (0.0, 0),
        "kanji": (4.0, 1),
        "latin": (3.0, 1),
        "other": (3.0, 1),
    }
    assert shares["kanji"].bits_per_character == pytest.approx(4.0 / math.log(2))
    assert shares["katakana"].bits_per_character is None


def test_by_script_sums_to_the_total_and_changes_nothing_else(tiny: LoadedModel) -> None:
    texts = ["吾輩は猫である。名前はまだ無い。", "カタカナ and English, 123!", *TEXTS[:2]]
    plain = perplexity(tiny.model, tiny.tokenizer, texts, max_length=8, stride=3)
    split = perplexity(tiny.model, tiny.tokenizer, texts, max_length=8, stride=3, by_script=True)
    assert split.perplexity == plain.perplexity
    assert plain.scripts is None and split.scripts is not None
    for text in split.texts:
        assert text.scripts is not None
        assert math.fsum(s.nll for s in text.scripts.values()) == pytest.approx(text.nll, rel=1e-12)
    assert math.fsum(s.nll for s in split.scripts.values()) == pytest.approx(split.total_nll, rel=1e-12)
    assert split.scripts["kanji"].n_chars == 6 and split.scripts["katakana"].n_chars == 4
    doc = split.to_json()
    assert doc["scripts"]["hiragana"]["n_chars"] == split.scripts["hiragana"].n_chars
    assert doc["texts"][0]["scripts"]["kanji"]["nll"] == split.texts[0].scripts["kanji"].nll  # type: ignore[index]


def test_top1_accuracy_by_hand() -> None:
    # Token 1 ("猫") right, tokens 2 and 3 (both on "あ") wrong then right, token 4 ("a ") not scored.
    shares = attribute_to_scripts(
        "猫あa ", [(0, 1), (1, 2), (1, 2), (2, 4)], [4.0, 1.0, 2.0, 6.0], [1.0, 0.0, 1.0, None]
    )
    assert shares["kanji"].top1_accuracy == 1.0
    assert shares["hiragana"].top1_accuracy == 0.5
    assert shares["latin"].top1_accuracy is None and shares["latin"].scored == 0.0


@pytest.mark.slow
def test_top1_accuracy_counts_the_models_own_argmax(real_model: LoadedModel) -> None:
    """The document's character prediction accuracy: summed over scripts, the hits are the scored tokens
    whose top-1 prediction was right, as one plain forward pass over the whole text counts them (the real
    SmolLM2: a random model is right on no token, and a broken count would go unseen)."""
    import torch

    texts = ["吾輩は猫である。名前はまだ無い。", "The quick brown fox jumps over the lazy dog. 1, 2, 3, 4, 5"]
    result = perplexity(real_model.model, real_model.tokenizer, texts, max_length=64, by_script=True)
    total_right = 0
    for text, measured in zip(texts, result.texts, strict=True):
        ids = token_ids(real_model, text)
        with torch.no_grad():
            logits = real_model.model(input_ids=torch.tensor([ids])).logits[0]  # (T, V)
        predicted = logits[:-1].argmax(-1).tolist()  # position j predicts token j + 1
        right = sum(p == t for p, t in zip(predicted, ids[1:], strict=True))
        total_right += right
        assert measured.scripts is not None
        assert math.fsum(s.hits for s in measured.scripts.values()) == pytest.approx(right)
        assert math.fsum(s.scored for s in measured.scripts.values()) == pytest.approx(len(ids) - 1)
    assert total_right > 5  # the model knows these texts: the count is not trivially 0
    assert result.scripts is not None and 0.0 <= (result.scripts["kanji"].top1_accuracy or 0.0) <= 1.0
    assert result.to_json()["scripts"]["kanji"]["top1_accuracy"] == result.scripts["kanji"].top1_accuracy
