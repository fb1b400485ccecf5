"""The evaluation_config checks every scorer shares: unknown keys, threshold, max_new_tokens, messages."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmeval.scorers.config import check_keys, describe, quote, threshold

# ---------------------------------------------------------------------------------------------------------
# check_keys


def test_known_keys_pass() -> None:
    check_keys({"alpha": 1, "beta": 2}, ("alpha", "beta"), "here")


def test_an_unknown_key_with_a_close_one_is_named_with_a_hint_and_every_known_key() -> None:
    with pytest.raises(ValueError) as info:
        check_keys({"alpah": 1}, ("alpha", "beta"), "evaluation_config for x")
    assert str(info.value) == (
        "unknown key 'alpah' in evaluation_config for x; did you mean 'alpha'? known: alpha, beta"
    )


def test_an_unknown_key_with_nothing_close_gets_no_hint() -> None:
    with pytest.raises(ValueError) as info:
        check_keys({"zzz": 1}, ("alpha", "beta"), "here")
    assert str(info.value) == "unknown key 'zzz' in here; known: alpha, beta"


# ---------------------------------------------------------------------------------------------------------
# threshold and max_new_tokens


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0, 0.25])
def test_threshold_bounds_are_inclusive(value: float) -> None:
    assert threshold({"threshold": value}, 0.5) == float(value)


def test_threshold_defaults_when_absent() -> None:
    assert threshold({}, 0.3) == 0.3


@pytest.mark.parametrize("tokens", [1, 2, 512])
def test_max_new_tokens_accepts_every_positive_integer(tokens: int) -> None:
    assert threshold({"max_new_tokens": tokens}, 0.5) == 0.5


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer, not 0 (int)"),
        ({"max_new_tokens": "8"}, "max_new_tokens must be a positive integer, not '8' (str)"),
        ({"max_new_tokens": True}, "max_new_tokens must be a positive integer, not True (bool)"),
        ({"max_new_tokens": None}, "max_new_tokens must be a positive integer, not null"),
        ({"threshold": "1"}, "threshold must be a number in [0, 1], not '1' (str)"),
        ({"threshold": True}, "threshold must be a number in [0, 1], not True (bool)"),
        ({"threshold": None}, "threshold must be a number in [0, 1], not null"),
        ({"threshold": 1.0000001}, "threshold must be a number in [0, 1], not 1.0000001"),
        ({"threshold": -0.0001}, "threshold must be a number in [0, 1], not -0.0001"),
        ({"threshold": float("nan")}, "threshold must be a number in [0, 1], not nan"),
    ],
)
def test_bad_values_are_named_with_what_is_allowed(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        threshold(config, 0.5)
    assert str(info.value) == message


# ---------------------------------------------------------------------------------------------------------
# quote and describe


def test_quote_keeps_backslashes_as_written_and_escapes_line_breaks() -> None:
    assert quote("(\\d+") == "'(\\d+'"
    assert quote("a\r\nb\nc\rd") == "'a\\r\\nb\\nc\\rd'"


def test_describe_shows_json_null_for_none() -> None:
    assert describe(None) == "null"


def test_describe_quotes_strings_and_names_other_types() -> None:
    assert describe("a\nb") == "'a\\nb' (str)"
    assert describe(1.5) == "1.5 (float)"


def test_describe_keeps_a_value_of_exactly_60_characters_whole() -> None:
    value = ["x" * 56]  # a list, since strings are quoted, never cut; repr: ['xx...x'] is 60 characters
    assert len(repr(value)) == 60
    assert describe(value) == f"{value!r} (list)"


def test_describe_cuts_a_value_of_61_characters_to_57_and_an_ellipsis() -> None:
    value = ["x" * 57]  # repr: ['xxx...x'] is 61 characters
    text = repr(value)
    assert len(text) == 61
    assert describe(value) == f"{text[:57]}... (list)"
