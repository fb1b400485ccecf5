"""Unit tests and hypothesis properties of the rouge scorer, checked against rouge-score itself."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from pytest_llmeval.scorers.rouge import METRICS, CjkTokenizer, has_cjk, score, tokenize, validate_config

# Real pairs (expected, prediction) of the kind a summarisation or QA benchmark holds.
ENGLISH = [
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("Paris is the capital of France.", "The capital of France is Paris."),
    (
        "Photosynthesis converts light energy into chemical energy stored in glucose.",
        "Plants use photosynthesis to turn sunlight into chemical energy, which is stored as glucose.",
    ),
    ("The meeting was moved to Thursday at 3 pm.", "The meeting is now on Thursday, 3pm."),
    ("Running is good for your heart.", "Runners have healthier hearts."),
    ("first line\nsecond line here", "second line\nfirst line there"),
]
JAPANESE = [
    ("猫がマットの上に座った。", "猫はマットの上に座っている。"),
    ("東京は日本の首都です。", "日本の首都は東京です。"),
    ("光合成は光エネルギーを化学エネルギーに変換する。", "植物は光合成で光を化学エネルギーに変える。"),
    ("会議は木曜日の午後3時に変更されました。", "会議は木曜日の15時に移りました。"),
    ("GPT-4は2023年に発表された。", "GPT-4が発表されたのは2023年です。"),
]

# Text rouge-score's default tokenizer sees as it is: Latin (some accented), digits, punctuation,
# Cyrillic, whitespace; never CJK, where our tokenizer takes over by design.
_LATIN = st.text(
    alphabet=st.sampled_from("abcdefghij ABCDEFGHIJ 0123456789 .,;!?-'\"\n\téüß кот"), max_size=40
).filter(lambda text: not has_cjk(text))
_WORD = st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True)
_CJK_WORD = st.text(
    alphabet=st.sampled_from("猫犬がはの上に座るた東京日本語カタナ한국어"), min_size=1, max_size=4
)
_METRIC = st.sampled_from(METRICS)
_SYMMETRIC = st.sampled_from(("rouge1", "rouge2", "rougeL"))  # rougeLsum's union LCS is not symmetric


def _reference(expected: str, prediction: str, metric: str, use_stemmer: bool = False) -> float:
    scorer = rouge_scorer.RougeScorer([metric], use_stemmer=use_stemmer)
    return float(scorer.score(expected, prediction)[metric].fmeasure)


# ---------------------------------------------------------------------------------------------------------
# validate_config


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"metric": "rouge1"},
        {"metric": "rouge2", "use_stemmer": True},
        {"metric": "rougeLsum", "threshold": 0.5},
        {"threshold": 0},
        {"threshold": 1},
        {"max_new_tokens": 64},
    ],
)
def test_valid_configs_pass(config: dict[str, Any]) -> None:
    validate_config(config)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"metric": "rougeX"}, "metric"),
        ({"metric": "rouge-l"}, "metric"),
        ({"metric": 1}, "metric"),
        ({"use_stemmer": "yes"}, "use_stemmer"),
        ({"use_stemmer": 1}, "use_stemmer"),
        ({"threshold": "0.3"}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": 8.0}, "max_new_tokens"),
        ({"stemmer": True}, "stemmer"),
    ],
)
def test_wrong_values_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key) as info:
        validate_config(config)
    assert "\n" not in str(info.value)


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(
        ValueError, match="unknown key 'metirc' in evaluation_config for rouge; did you mean 'metric'"
    ):
        validate_config({"metirc": "rouge1"})


def test_a_misspelt_metric_gets_a_suggestion() -> None:
    with pytest.raises(ValueError, match="did you mean 'rougeL'"):
        validate_config({"metric": "rougel"})


def test_non_mapping_config_is_rejected() -> None:
    with pytest.raises(ValueError, match="mapping"):
        validate_config("rougeL")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# score: English equals rouge-score


@pytest.mark.parametrize(("expected", "prediction"), ENGLISH)
@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("use_stemmer", [False, True])
def test_english_equals_rouge_score(expected: str, prediction: str, metric: str, use_stemmer: bool) -> None:
    result = score(prediction, expected, {"metric": metric, "use_stemmer": use_stemmer})
    assert result.value == _reference(expected, prediction, metric, use_stemmer)
    assert result.details["tokenizer"] == "rouge-score"


def test_default_is_rouge_l_f1_with_threshold_0_3() -> None:
    result = score("A cat was sitting on the mat.", "The cat sat on the mat.", {})
    scored = rouge_scorer.RougeScorer(["rougeL"]).score(
        "The cat sat on the mat.", "A cat was sitting on the mat."
    )
    assert result.threshold == 0.3
    assert result.details["metric"] == "rougeL"
    assert result.value == scored["rougeL"].fmeasure
    assert result.details["precision"] == scored["rougeL"].precision
    assert result.details["recall"] == scored["rougeL"].recall
    assert result.details["fmeasure"] == scored["rougeL"].fmeasure


def test_precision_is_of_the_prediction_and_recall_of_the_expected() -> None:
    result = score("the cat", "the cat sat on the mat", {"metric": "rouge1"})
    assert result.details["precision"] == 1.0
    assert result.details["recall"] == pytest.approx(2 / 6)
    assert result.details["prediction_tokens"] == 2
    assert result.details["expected_tokens"] == 6


def test_stemming_helps_inflected_words() -> None:
    plain = score("Runners were running", "The runner runs", {"metric": "rouge1"})
    stemmed = score("Runners were running", "The runner runs", {"metric": "rouge1", "use_stemmer": True})
    assert stemmed.value > plain.value


def test_threshold_from_config_and_passing() -> None:
    result = score("the cat", "the cat sat on the mat", {"metric": "rouge1", "threshold": 0.5})
    assert result.threshold == 0.5
    assert result.value == pytest.approx(0.5)
    assert score("xyz", "the cat", {}).passed is False


def test_text_without_tokens_scores_zero_with_a_note() -> None:
    result = score("Кошка сидит", "The cat sits", {})
    assert result.value == 0.0
    assert result.details["note"] == (
        "no tokens in the prediction: the tokenizer keeps only a-z and 0-9 (rouge-score's default)"
    )
    both = score("...", "", {})
    assert both.details["note"].startswith("no tokens in the prediction or the expected text")
    assert "note" not in score("a", "b", {}).details


def test_details_are_json_able() -> None:
    for prediction, expected in [*ENGLISH[:2], *JAPANESE[:2], ("", "")]:
        result = score(prediction, expected, {})
        assert json.loads(json.dumps(result.to_json())) == result.to_json()


# ---------------------------------------------------------------------------------------------------------
# CJK


@pytest.mark.parametrize(("expected", "prediction"), JAPANESE)
@pytest.mark.parametrize("metric", METRICS)
def test_japanese_scores_above_zero(expected: str, prediction: str, metric: str) -> None:
    if not any(char.isascii() and char.isalnum() for char in expected + prediction):
        # rouge-score alone sees only ASCII words and digits (GPT, 4, 2023): nothing at all here.
        assert _reference(expected, prediction, metric) == 0.0
    result = score(prediction, expected, {"metric": metric})
    assert result.value > 0.0
    assert result.details["tokenizer"] == "cjk-characters"


def test_japanese_rouge_by_hand() -> None:
    # 猫 が 好 き against 犬 が 好 き: three of four characters shared, in order.
    unigrams = score("犬が好き", "猫が好き", {"metric": "rouge1"})
    assert (unigrams.details["precision"], unigrams.details["recall"], unigrams.value) == (0.75, 0.75, 0.75)
    # bigrams 猫が が好 好き against 犬が が好 好き: two of three.
    assert score("犬が好き", "猫が好き", {"metric": "rouge2"}).value == pytest.approx(2 / 3)
    # the LCS が好き is 3 long; the prediction has 3 characters, the expected 6: P = 1, R = 1/2, F = 2/3.
    lcs = score("が好き", "私は猫が好き", {"metric": "rougeL"})
    assert lcs.details["precision"] == 1.0
    assert lcs.details["recall"] == 0.5
    assert lcs.value == pytest.approx(2 / 3)


def test_japanese_rouge_equals_rouge_score_with_the_cjk_tokenizer() -> None:
    for expected, prediction in JAPANESE:
        for metric in METRICS:
            scorer = rouge_scorer.RougeScorer([metric], tokenizer=CjkTokenizer())
            want = scorer.score(expected, prediction)[metric].fmeasure
            assert score(prediction, expected, {"metric": metric}).value == want


def test_cjk_tokenizer_splits_characters_and_keeps_latin_words() -> None:
    assert tokenize("GPT-4は2023年に発表された。", cjk=True) == [
        "gpt",
        "4",
        "は",
        "2023",
        "年",
        "に",
        "発",
        "表",
        "さ",
        "れ",
        "た",
    ]
    # NFKC: full-width Latin and digits are ASCII words, half-width kana full-width characters.
    assert tokenize("ＡＢＣ２０２３ｶﾀｶﾅ", cjk=True) == ["abc2023", "カ", "タ", "カ", "ナ"]
    # punctuation (、。「」・) is dropped, as rouge-score drops Latin punctuation; ー 々 〇 are letters.
    assert tokenize("「人々」、コーヒー・〇。", cjk=True) == ["人", "々", "コ", "ー", "ヒ", "ー", "〇"]
    assert tokenize("한국어 문장", cjk=True) == ["한", "국", "어", "문", "장"]
    assert tokenize("running fast", cjk=True, use_stemmer=True) == ["run", "fast"]


def test_one_cjk_side_switches_both_sides() -> None:
    result = score("Tokyo", "東京 Tokyo", {"metric": "rouge1"})
    assert result.details["tokenizer"] == "cjk-characters"
    assert result.details["expected_tokens"] == 3
    assert result.details["precision"] == 1.0


@pytest.mark.parametrize(
    ("text", "cjk"),
    [
        ("猫", True),
        ("カ", True),
        ("ｶ", True),
        ("한", True),
        ("々", True),
        ("abc", False),
        ("。、「」", False),
        ("кот", False),
    ],
)
def test_has_cjk(text: str, cjk: bool) -> None:
    assert has_cjk(text) is cjk


# ---------------------------------------------------------------------------------------------------------
# properties


@settings(max_examples=60, deadline=None)
@given(_LATIN, _LATIN, _METRIC, st.booleans())
def test_latin_text_equals_rouge_score(
    prediction: str, expected: str, metric: str, use_stemmer: bool
) -> None:
    result = score(prediction, expected, {"metric": metric, "use_stemmer": use_stemmer})
    assert result.value == _reference(expected, prediction, metric, use_stemmer)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40), _METRIC)
def test_value_is_in_unit_interval(prediction: str, expected: str, metric: str) -> None:
    assert 0.0 <= score(prediction, expected, {"metric": metric}).value <= 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_WORD, _CJK_WORD), min_size=2, max_size=8), _METRIC)
def test_identity_gives_one(words: list[str], metric: str) -> None:
    text = " ".join(words)  # two words at least: rouge2 of a single token has no bigram to match
    assert score(text, text, {"metric": metric}).value == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30), _SYMMETRIC)
def test_f1_is_symmetric(a: str, b: str, metric: str) -> None:
    assert score(a, b, {"metric": metric}).value == pytest.approx(score(b, a, {"metric": metric}).value)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_WORD, _CJK_WORD), min_size=1, max_size=8), st.data(), _METRIC)
def test_extra_whitespace_never_changes_the_score(words: list[str], data: st.DataObject, metric: str) -> None:
    gaps = data.draw(
        st.lists(st.sampled_from([" ", "  ", "\t", " \u3000 "]), min_size=len(words), max_size=len(words))
    )
    spaced = "".join(gap + word for gap, word in zip(gaps, words, strict=True))
    expected = "x " + " ".join(reversed(words))
    assert (
        score(spaced, expected, {"metric": metric}).value
        == score(" ".join(words), expected, {"metric": metric}).value
    )


# ---------------------------------------------------------------------------------------------------------
# full messages, details and the public defaults


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (["metric"], "evaluation_config for rouge must be a mapping, not list"),
        ({"metric": "bleu"}, "metric must be one of rouge1, rouge2, rougeL, rougeLsum, not 'bleu' (str)"),
        (
            {"metric": "rougel"},
            "metric must be one of rouge1, rouge2, rougeL, rougeLsum, not 'rougel' (str)"
            " (did you mean 'rougeL'?)",
        ),
        ({"use_stemmer": "yes"}, "use_stemmer must be true or false, not 'yes' (str)"),
    ],
)
def test_invalid_config_messages_in_full(config: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_config(config)
    assert str(info.value) == message


def test_an_empty_side_next_to_cjk_text_gets_the_cjk_note() -> None:
    result = score("Привет", "東京", {})
    assert result.value == 0.0
    assert result.details["tokenizer"] == "cjk-characters"
    assert result.details["note"] == (
        "no tokens in the prediction: the tokenizer keeps only a-z, 0-9 and CJK characters"
    )


def test_details_record_whether_the_stemmer_was_used() -> None:
    assert score("running", "runs", {"use_stemmer": True}).details["use_stemmer"] is True
    assert score("running", "runs", {}).details["use_stemmer"] is False


def test_tokenizers_do_not_stem_unless_asked() -> None:
    assert tokenize("running", cjk=False) == ["running"]
    assert tokenize("running", cjk=True) == ["running"]
    assert CjkTokenizer().tokenize("running 東京") == ["running", "東", "京"]
    assert CjkTokenizer(use_stemmer=True).tokenize("running 東京") == ["run", "東", "京"]
    assert tokenize("running 東京", cjk=True, use_stemmer=True) == ["run", "東", "京"]
