"""Unit tests and hypothesis properties of the bleu and chrf scorers, checked against sacrebleu itself."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from sacrebleu.metrics.chrf import CHRF

from pytest_llmeval.scorers import bleu
from pytest_llmeval.scorers.bleu import corpus_score, score_bleu, score_chrf, validate_bleu, validate_chrf

# Real (expected, prediction) pairs: translations and paraphrases.
ENGLISH = [
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("Paris is the capital of France.", "The capital of France is Paris."),
    (
        "The committee will publish its final report next Tuesday.",
        "The committee is going to publish the final report on Tuesday.",
    ),
    ("I would like a cup of coffee, please.", "I'd like a coffee please."),
    ("He didn't know the answer.", "He did not know the answer."),
    ("Water boils at 100 degrees Celsius at sea level.", "At sea level, water boils at 100 °C."),
]
JAPANESE = [
    ("猫がマットの上に座った。", "猫はマットの上に座っている。"),
    ("東京は日本の首都です。", "日本の首都は東京です。"),
    ("明日の会議は午後3時に始まります。", "明日の会議は15時開始です。"),
    ("彼はその答えを知らなかった。", "彼は答えを知りませんでした。"),
]
PAIRS = ENGLISH + JAPANESE

_TEXT = st.text(max_size=40)
_WORD = st.from_regex(r"[a-z]{1,6}", fullmatch=True)


def _unit(score: float) -> float:
    return min(1.0, score / 100)


# ---------------------------------------------------------------------------------------------------------
# validate


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"tokenize": "13a"},
        {"tokenize": "char", "lowercase": True},
        {"tokenize": "intl"},
        {"tokenize": "zh"},
        {"tokenize": "none"},
        {"threshold": 0.1, "max_new_tokens": 64},
    ],
)
def test_valid_bleu_configs_pass(config: dict[str, Any]) -> None:
    validate_bleu(config)


@pytest.mark.parametrize(
    "config",
    [{}, {"word_order": 2}, {"word_order": 1, "lowercase": True}, {"threshold": 0.6, "max_new_tokens": 8}],
)
def test_valid_chrf_configs_pass(config: dict[str, Any]) -> None:
    validate_chrf(config)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"tokenize": "moses"}, "tokenize"),
        ({"tokenize": 13}, "tokenize"),
        ({"tokenize": "spm"}, "tokenize"),
        ({"tokenize": "flores200"}, "tokenize"),
        ({"lowercase": "no"}, "lowercase"),
        ({"threshold": 30}, "threshold"),
        ({"threshold": None}, "threshold"),
        ({"max_new_tokens": -1}, "max_new_tokens"),
        ({"word_order": 2}, "word_order"),
        ({"smooth_method": "floor"}, "smooth_method"),
    ],
)
def test_wrong_bleu_values_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key) as info:
        validate_bleu(config)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"word_order": 3}, "word_order"),
        ({"word_order": True}, "word_order"),
        ({"word_order": "2"}, "word_order"),
        ({"lowercase": 1}, "lowercase"),
        ({"threshold": -0.5}, "threshold"),
        ({"tokenize": "char"}, "tokenize"),
        ({"char_order": 4}, "char_order"),
    ],
)
def test_wrong_chrf_values_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key) as info:
        validate_chrf(config)
    assert "\n" not in str(info.value)


def test_downloading_tokenizers_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="downloads a SentencePiece model"):
        validate_bleu({"tokenize": "flores101"})


@pytest.mark.parametrize(
    ("tokenize", "extra"), [("ja-mecab", "sacrebleu[ja]"), ("ko-mecab", "sacrebleu[ko]")]
)
def test_missing_mecab_says_how_to_install(
    tokenize: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bleu, "_installed", lambda module: False)
    with pytest.raises(ValueError) as info:
        validate_bleu({"tokenize": tokenize})
    message = str(info.value)
    assert message.startswith(f"tokenize '{tokenize}' needs ")
    assert f"pip install '{extra}'" in message


def test_installed_mecab_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bleu, "_installed", lambda module: True)
    validate_bleu({"tokenize": "ja-mecab"})


def test_this_environment_reports_mecab_truthfully() -> None:
    try:
        import ipadic  # noqa: F401
        import MeCab  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="sacrebleu\\[ja\\]"):
            validate_bleu({"tokenize": "ja-mecab"})
    else:  # pragma: no cover - only where sacrebleu[ja] is installed
        validate_bleu({"tokenize": "ja-mecab"})


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(ValueError, match="did you mean 'tokenize'"):
        validate_bleu({"tokenizer": "char"})


def test_non_mapping_config_is_rejected() -> None:
    with pytest.raises(ValueError, match="mapping"):
        validate_chrf(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# sentence scores equal sacrebleu's


@pytest.mark.parametrize(("expected", "prediction"), PAIRS)
@pytest.mark.parametrize("tokenize", ["13a", "char", "intl"])
@pytest.mark.parametrize("lowercase", [False, True])
def test_sentence_bleu_equals_sacrebleu(
    expected: str, prediction: str, tokenize: str, lowercase: bool
) -> None:
    want = sacrebleu.sentence_bleu(prediction, [expected], tokenize=tokenize, lowercase=lowercase)
    result = score_bleu(prediction, expected, {"tokenize": tokenize, "lowercase": lowercase})
    assert result.value == _unit(want.score)
    assert result.details["precisions"] == [p / 100 for p in want.precisions]
    assert result.details["brevity_penalty"] == want.bp
    assert (result.details["prediction_length"], result.details["expected_length"]) == (
        want.sys_len,
        want.ref_len,
    )


@pytest.mark.parametrize(("expected", "prediction"), PAIRS)
@pytest.mark.parametrize("word_order", [0, 1, 2])
def test_sentence_chrf_equals_sacrebleu(expected: str, prediction: str, word_order: int) -> None:
    want = sacrebleu.sentence_chrf(prediction, [expected], word_order=word_order)
    assert score_chrf(prediction, expected, {"word_order": word_order}).value == _unit(want.score)


def test_chrf_lowercase_equals_sacrebleu() -> None:
    want = CHRF(lowercase=True).sentence_score("THE CAT", ["the cat"]).score
    assert want == 100
    assert score_chrf("THE CAT", "the cat", {"lowercase": True}).value == 1.0
    assert score_chrf("THE CAT", "the cat", {}).value < 1.0


def test_bleu_details_say_how_it_was_computed() -> None:
    result = score_bleu("The cat sat on a mat.", "The cat sat on the mat.", {})
    assert result.threshold == 0.3
    assert result.details["metric"] == "bleu"
    assert result.details["scale"] == "0-1"
    assert result.details["bleu"] == result.value
    assert result.details["tokenize"] == "13a"
    assert (
        result.details["signature"]
        == f"nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    )
    assert json.loads(json.dumps(result.to_json())) == result.to_json()


def test_chrf_details_say_how_it_was_computed() -> None:
    result = score_chrf("The cat sat on a mat.", "The cat sat on the mat.", {"word_order": 2})
    assert result.threshold == 0.5
    assert result.details["metric"] == "chrf++"
    assert (result.details["char_order"], result.details["word_order"], result.details["beta"]) == (6, 2, 2)
    assert result.details["signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|")
    assert json.loads(json.dumps(result.to_json())) == result.to_json()


def test_a_perfect_match_is_exactly_one() -> None:
    # sacrebleu's exp(log) gives 100.00000000000004 here: the value is clamped, not reported above 1.
    assert sacrebleu.sentence_bleu("a b c d", ["a b c d"]).score > 100
    assert score_bleu("a b c d", "a b c d", {}).value == 1.0


def test_cjk_under_13a_gets_a_note_and_char_fixes_it() -> None:
    expected, prediction = JAPANESE[0]
    spaced = score_bleu(prediction, expected, {})
    assert spaced.value == 0.0  # each sentence is one token under 13a
    assert "use tokenize 'char'" in spaced.details["note"]
    chars = score_bleu(prediction, expected, {"tokenize": "char"})
    assert chars.value > 0.0
    assert "note" not in chars.details


def test_threshold_from_config() -> None:
    assert score_bleu("a", "b", {"threshold": 0}).passed
    assert score_chrf("a", "b", {"threshold": 0.25}).threshold == 0.25


# ---------------------------------------------------------------------------------------------------------
# corpus


@pytest.mark.parametrize("tokenize", ["13a", "char"])
def test_corpus_bleu_equals_sacrebleu_and_differs_from_the_mean(tokenize: str) -> None:
    references, predictions = [e for e, _ in PAIRS], [p for _, p in PAIRS]
    summary = corpus_score("bleu", predictions, references, {"tokenize": tokenize, "threshold": 0.2})
    want = sacrebleu.corpus_bleu(predictions, [references], tokenize=tokenize)
    sentences = [_unit(sacrebleu.sentence_bleu(p, [e], tokenize=tokenize).score) for e, p in PAIRS]
    assert summary["metric"] == "bleu"
    assert summary["scale"] == "0-1"
    assert summary["rows"] == len(PAIRS)
    assert summary["corpus"] == _unit(want.score)
    assert summary["mean_sentence"] == pytest.approx(sum(sentences) / len(sentences))
    assert summary["corpus"] != pytest.approx(summary["mean_sentence"])
    assert summary["precisions"] == [p / 100 for p in want.precisions]
    assert summary["brevity_penalty"] == want.bp
    # corpus BLEU is sacrebleu's corpus_bleu default: no effective order
    version = sacrebleu.__version__
    assert summary["signature"] == f"nrefs:1|case:mixed|eff:no|tok:{tokenize}|smooth:exp|version:{version}"
    assert json.loads(json.dumps(summary)) == summary


@pytest.mark.parametrize("word_order", [0, 2])
def test_corpus_chrf_equals_sacrebleu(word_order: int) -> None:
    references, predictions = [e for e, _ in PAIRS], [p for _, p in PAIRS]
    summary = corpus_score("chrf", predictions, references, {"word_order": word_order})
    want = sacrebleu.corpus_chrf(predictions, [references], word_order=word_order)
    sentences = [_unit(sacrebleu.sentence_chrf(p, [e], word_order=word_order).score) for e, p in PAIRS]
    assert summary["metric"] == ("chrf++" if word_order else "chrf")
    assert summary["corpus"] == _unit(want.score)
    assert summary["mean_sentence"] == pytest.approx(sum(sentences) / len(sentences))
    assert "precisions" not in summary


def test_corpus_of_no_rows() -> None:
    assert corpus_score("bleu", [], [], {}) == {
        "metric": "bleu",
        "scale": "0-1",
        "rows": 0,
        "tokenize": "13a",
        "corpus": None,
        "mean_sentence": None,
    }


def test_corpus_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="kind"):
        corpus_score("rouge", ["a"], ["a"], {})
    with pytest.raises(ValueError, match="1 predictions but 2 references"):
        corpus_score("bleu", ["a"], ["a", "b"], {})
    with pytest.raises(ValueError, match="one string"):
        corpus_score("chrf", "abc", "abc", {})
    with pytest.raises(ValueError, match="unknown key"):
        corpus_score("bleu", ["a"], ["a"], {"tokenize": "13a", "x": 1})


# ---------------------------------------------------------------------------------------------------------
# properties


@settings(max_examples=80, deadline=None)
@given(_TEXT, _TEXT, st.sampled_from(["13a", "char", "intl", "zh", "none"]))
def test_bleu_agrees_with_sacrebleu_and_stays_in_range(prediction: str, expected: str, tokenize: str) -> None:
    value = score_bleu(prediction, expected, {"tokenize": tokenize}).value
    assert value == _unit(sacrebleu.sentence_bleu(prediction, [expected], tokenize=tokenize).score)
    assert 0.0 <= value <= 1.0


@settings(max_examples=80, deadline=None)
@given(_TEXT, _TEXT, st.sampled_from([0, 1, 2]))
def test_chrf_agrees_with_sacrebleu_and_stays_in_range(
    prediction: str, expected: str, word_order: int
) -> None:
    value = score_chrf(prediction, expected, {"word_order": word_order}).value
    assert value == _unit(sacrebleu.sentence_chrf(prediction, [expected], word_order=word_order).score)
    assert 0.0 <= value <= 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=5))
def test_corpus_agrees_with_sacrebleu(pairs: list[tuple[str, str]]) -> None:
    predictions, references = [p for p, _ in pairs], [r for _, r in pairs]
    assert corpus_score("bleu", predictions, references, {})["corpus"] == _unit(
        sacrebleu.corpus_bleu(predictions, [references]).score
    )
    assert corpus_score("chrf", predictions, references, {})["corpus"] == _unit(
        sacrebleu.corpus_chrf(predictions, [references]).score
    )


@settings(max_examples=60, deadline=None)
@given(_TEXT.filter(str.strip), st.sampled_from(["13a", "char"]))
def test_identity_gives_one(text: str, tokenize: str) -> None:
    # Sentence BLEU uses effective order, so identity gives 1 from a single token on (plain BLEU would
    # need 4 tokens); only a text with no token at all (empty, whitespace) scores 0 against itself.
    assert score_bleu(text, text, {"tokenize": tokenize}).value == 1.0
    assert score_chrf(text, text, {}).value == 1.0
    assert score_chrf(text, text, {"word_order": 2}).value == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=8), st.integers(min_value=0, max_value=7), st.integers(1, 12))
def test_clipping_caps_a_repeated_word_at_its_reference_count(
    words: list[str], pick: int, repeats: int
) -> None:
    word = words[pick % len(words)]
    result = score_bleu(" ".join([word] * repeats), " ".join(words), {})
    # Repeating a reference word earns it at most as many matches as the reference holds.
    assert result.details["precisions"][0] == pytest.approx(min(words.count(word), repeats) / repeats)


@settings(max_examples=60, deadline=None)
@given(st.lists(_WORD, min_size=2, max_size=12), st.data())
def test_brevity_penalty_below_one_exactly_for_short_outputs(words: list[str], data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=1, max_value=len(words)))
    result = score_bleu(" ".join(words[:cut]), " ".join(words), {})
    assert (result.details["brevity_penalty"] < 1.0) == (cut < len(words))
    longer = score_bleu(" ".join(words + words[:cut]), " ".join(words), {})
    assert longer.details["brevity_penalty"] == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=8), st.data(), _TEXT)
def test_extra_whitespace_never_changes_the_score(
    words: list[str], data: st.DataObject, expected: str
) -> None:
    gaps = data.draw(
        st.lists(st.sampled_from([" ", "  ", "\t", " \t "]), min_size=len(words), max_size=len(words))
    )
    spaced = "".join(gap + word for gap, word in zip(gaps, words, strict=True)) + gaps[0]
    plain = " ".join(words)
    assert score_bleu(spaced, expected, {}).value == score_bleu(plain, expected, {}).value
    assert score_chrf(spaced, expected, {}).value == score_chrf(plain, expected, {}).value
    assert (
        score_chrf(spaced, expected, {"word_order": 2}).value
        == score_chrf(plain, expected, {"word_order": 2}).value
    )


# ---------------------------------------------------------------------------------------------------------
# details the mutation run showed were unpinned

SHORT = [("the cat sat", "the cat"), ("The Dog Ran", "the dog ran"), ("A b", "a B")]


def test_corpus_mean_sentence_uses_effective_order_and_lowercase_like_sacrebleu() -> None:
    references, predictions = [e for e, _ in SHORT], [p for _, p in SHORT]
    summary = corpus_score("bleu", predictions, references, {"lowercase": True})
    want = sacrebleu.corpus_bleu(predictions, [references], lowercase=True)
    sentences = [_unit(sacrebleu.sentence_bleu(p, [e], lowercase=True).score) for e, p in SHORT]
    assert summary["corpus"] == _unit(want.score)
    assert summary["mean_sentence"] == pytest.approx(sum(sentences) / len(sentences))
    assert (summary["prediction_length"], summary["expected_length"]) == (want.sys_len, want.ref_len)


def test_corpus_chrf_lowercase_like_sacrebleu() -> None:
    references, predictions = [e for e, _ in SHORT], [p for _, p in SHORT]
    summary = corpus_score("chrf", predictions, references, {"lowercase": True})
    metric = CHRF(lowercase=True)
    assert summary["corpus"] == _unit(metric.corpus_score(predictions, [references]).score)


def test_corpus_refuses_one_string_on_either_side() -> None:
    with pytest.raises(
        ValueError, match=r"^predictions and references must be sequences of strings, not one string$"
    ):
        corpus_score("bleu", "abc", ["a", "b", "c"], {})


def test_cjk_on_one_side_only_gets_the_note() -> None:
    note = score_bleu("猫がマットの上に座った。", "The cat sat.", {}).details["note"]
    assert note == (
        "tokenize 13a splits on spaces only, so a CJK sentence is one token: "
        "use tokenize 'char' (or 'ja-mecab', 'zh') for CJK text"
    )


def test_chrf_details_name_the_scale_and_score() -> None:
    details = score_chrf("a cat", "the cat", {}).details
    assert (details["scale"], details["chrf"]) == ("0-1", score_chrf("a cat", "the cat", {}).value)


@pytest.mark.parametrize(
    ("validate", "config", "message"),
    [
        (validate_bleu, [], "evaluation_config for bleu must be a mapping, not list"),
        (validate_chrf, [], "evaluation_config for chrf must be a mapping, not list"),
        (validate_bleu, {"x": 1}, "unknown key 'x' in evaluation_config for bleu"),
        (validate_chrf, {"x": 1}, "unknown key 'x' in evaluation_config for chrf"),
        (
            validate_bleu,
            {"tokenize": "moses"},
            "tokenize must be one of 13a, char, intl, ja-mecab, ko-mecab, none, zh, not 'moses' (str)",
        ),
        (
            validate_bleu,
            {"tokenize": "spm"},
            "tokenize 'spm' downloads a SentencePiece model when first used, which a benchmark "
            "must not need; use one of 13a, char, intl, ja-mecab, ko-mecab, none, zh",
        ),
        (
            validate_chrf,
            {"tokenize": "13a"},
            "tokenize has no meaning for chrf (it compares character n-grams); remove it",
        ),
        (validate_chrf, {"word_order": 3}, "word_order must be 0 (chrF), 1 or 2 (chrF++), not 3 (int)"),
        (validate_bleu, {"lowercase": "no"}, "lowercase must be true or false, not 'no' (str)"),
    ],
)
def test_config_messages_in_full(validate: Any, config: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate(config)
    assert str(info.value).startswith(message)


def test_missing_mecab_modules_are_joined_with_and(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bleu, "_installed", lambda module: False)
    with pytest.raises(
        ValueError, match=r"^tokenize 'ja-mecab' needs MeCab and ipadic, which are not installed"
    ):
        validate_bleu({"tokenize": "ja-mecab"})
