"""Unit tests and hypothesis properties of the fuzzy scorer, its Levenshtein (rapidfuzz's) checked against a
plain dynamic programme written here: an independent reference, not the code under test."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmeval.scorers.fuzzy import levenshtein, normalize, score, similarity, validate_config

REAL = [
    ("kitten", "sitting"),
    ("Albert Einstein", "Albert Einstien"),
    ("The Great Gatsby", "the great gatsby"),
    ("New York City", "New York"),
    ("Tchaikovsky", "Chaikovsky"),
    ("東京都", "東京"),
    ("夏目漱石", "夏目 漱石"),
    ("日本の首都は東京です", "東京は日本の首都です"),
    ("Pythonプログラミング", "Python プログラミング入門"),
]

_SHORT = st.text(max_size=30)
_WHITESPACE = st.text(alphabet=" \t\n\r\u00a0\u3000", min_size=1, max_size=3)
_WORD = st.text(min_size=1, max_size=6).filter(lambda word: not any(char.isspace() for char in word))


def reference_levenshtein(a: str, b: str) -> int:
    """The textbook Wagner-Fischer table, row by row: slow, obviously right, shares no code with fuzzy.py."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


# ---------------------------------------------------------------------------------------------------------
# validate_config


@pytest.mark.parametrize(
    "config",
    [{}, {"normalize": False}, {"case_sensitive": True}, {"threshold": 0.9, "max_new_tokens": 16}],
)
def test_valid_configs_pass(config: dict[str, Any]) -> None:
    validate_config(config)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"normalize": "yes"}, "normalize"),
        ({"case_sensitive": 0}, "case_sensitive"),
        ({"threshold": 80}, "threshold"),
        ({"threshold": False}, "threshold"),
        ({"max_new_tokens": 1.5}, "max_new_tokens"),
        ({"distance": "levenshtein"}, "distance"),
    ],
)
def test_wrong_values_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key) as info:
        validate_config(config)
    assert "\n" not in str(info.value)


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(
        ValueError, match="unknown key 'normalise' in evaluation_config for fuzzy; did you mean"
    ):
        validate_config({"normalise": True})


# ---------------------------------------------------------------------------------------------------------
# levenshtein and similarity


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("", "", 0),
        ("", "abc", 3),
        ("abc", "", 3),
        ("abc", "abc", 0),
        ("kitten", "sitting", 3),
        ("flaw", "lawn", 2),
        ("abc", "cba", 2),
        ("東京", "京都", 2),
        ("cafe\u0301", "café", 2),  # code points, not what is seen: normalize (NFC) is the scorer's job
    ],
)
def test_levenshtein_known_values(a: str, b: str, distance: int) -> None:
    assert levenshtein(a, b) == distance


@pytest.mark.parametrize(("a", "b"), REAL)
def test_real_pairs_equal_the_reference(a: str, b: str) -> None:
    assert levenshtein(a, b) == reference_levenshtein(a, b)
    assert similarity(a, b) == 1 - reference_levenshtein(a, b) / max(len(a), len(b))


def test_similarity_definition() -> None:
    assert similarity("", "") == 1.0
    assert similarity("", "a") == 0.0
    assert similarity("kitten", "sitting") == 1 - 3 / 7
    assert similarity("abc", "xyz") == 0.0


def test_long_inputs_are_still_exact() -> None:
    a = "the quick brown fox jumps over the lazy dog " * 12
    b = a.replace("quick", "slow").replace("lazy", "sleepy")
    assert levenshtein(a, b) == reference_levenshtein(a, b)


# ---------------------------------------------------------------------------------------------------------
# score


def test_score_defaults() -> None:
    result = score("Albert Einstien", "Albert Einstein", {})
    assert result.threshold == 0.8
    assert result.value == 1 - 2 / 15
    assert result.passed
    assert result.details == {
        "metric": "levenshtein_similarity",
        "distance": 2,
        "max_length": 15,
        "normalize": True,
        "case_sensitive": False,
    }
    assert json.loads(json.dumps(result.to_json())) == result.to_json()


def test_normalisation_is_on_by_default() -> None:
    assert score("  The   Great\nGatsby ", "the great gatsby", {}).value == 1.0
    assert score("Straße", "STRASSE", {}).value == 1.0  # casefold, not lower
    assert score("cafe\u0301", "café", {}).value == 1.0  # NFC


def test_normalisation_and_case_can_be_turned_off() -> None:
    assert score("The Great Gatsby", "the great gatsby", {"case_sensitive": True}).value == 1 - 3 / 16
    # without normalize, whitespace counts but case is still folded unless case_sensitive
    assert score("the  great gatsby", "The great gatsby", {"normalize": False}).value == 1 - 1 / 17
    assert score("Gatsby", "gatsby", {"normalize": False, "case_sensitive": True}).value == 1 - 1 / 6


def test_japanese_near_miss() -> None:
    result = score("夏目 漱石", "夏目漱石", {"threshold": 0.75})
    assert result.value == 0.8  # one inserted space in five characters
    assert result.passed
    assert score("東京都", "東京", {}).value == pytest.approx(2 / 3)


def test_threshold_decides_passing() -> None:
    assert not score("abc", "abd", {}).passed  # 2/3 < 0.8
    assert score("abc", "abd", {"threshold": 0.6}).passed


# ---------------------------------------------------------------------------------------------------------
# properties


@settings(max_examples=200)
@given(_SHORT, _SHORT)
def test_levenshtein_equals_the_reference(a: str, b: str) -> None:
    assert levenshtein(a, b) == reference_levenshtein(a, b)


@settings(max_examples=100)
@given(st.text(alphabet="ab", max_size=40), st.text(alphabet="ab", max_size=40))
def test_levenshtein_equals_the_reference_on_a_small_alphabet(a: str, b: str) -> None:
    # Two letters make long shared prefixes, suffixes and ties between edits: the hard cases.
    assert levenshtein(a, b) == reference_levenshtein(a, b)


@given(_SHORT, _SHORT, st.booleans(), st.booleans())
def test_score_is_in_range_and_symmetric(a: str, b: str, normalize_on: bool, case_sensitive: bool) -> None:
    config = {"normalize": normalize_on, "case_sensitive": case_sensitive}
    value = score(a, b, config).value
    assert 0.0 <= value <= 1.0
    assert value == score(b, a, config).value


@given(_SHORT, st.booleans(), st.booleans())
def test_identity_gives_one(text: str, normalize_on: bool, case_sensitive: bool) -> None:
    assert score(text, text, {"normalize": normalize_on, "case_sensitive": case_sensitive}).value == 1.0


@given(_SHORT, _SHORT, _SHORT)
def test_triangle_inequality(a: str, b: str, c: str) -> None:
    assert levenshtein(a, c) <= levenshtein(a, b) + levenshtein(b, c)


@given(_SHORT, _SHORT)
def test_distance_bounds(a: str, b: str) -> None:
    assert abs(len(a) - len(b)) <= levenshtein(a, b) <= max(len(a), len(b))


@given(st.lists(_WORD, min_size=1, max_size=6), st.data(), _SHORT)
def test_extra_whitespace_never_changes_the_score(
    words: list[str], data: st.DataObject, expected: str
) -> None:
    gaps = data.draw(st.lists(_WHITESPACE, min_size=len(words) + 1, max_size=len(words) + 1))
    spaced = gaps[0] + "".join(word + gap for word, gap in zip(words, gaps[1:], strict=True))
    assert score(spaced, expected, {}).value == score(" ".join(words), expected, {}).value


@given(st.from_regex(r"[ -~]{0,20}", fullmatch=True), _SHORT)
def test_ascii_case_never_changes_the_score(text: str, expected: str) -> None:
    assert score(text.swapcase(), expected, {}).value == score(text, expected, {}).value


@given(_SHORT)
def test_normalize_is_idempotent(text: str) -> None:
    assert normalize(normalize(text)) == normalize(text)


# ---------------------------------------------------------------------------------------------------------
# full messages and the public defaults


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (["threshold"], "evaluation_config for fuzzy must be a mapping, not list"),
        ({"normalize": "yes"}, "normalize must be true or false, not 'yes' (str)"),
        ({"case_sensitive": 0}, "case_sensitive must be true or false, not 0 (int)"),
    ],
)
def test_invalid_config_messages_in_full(config: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_config(config)
    assert str(info.value) == message


def test_normalize_folds_case_by_default() -> None:
    assert normalize("  Straße  ROAD ") == "strasse road"
    assert normalize("  Straße  ROAD ", case_sensitive=True) == "Straße ROAD"
