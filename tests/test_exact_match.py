"""Unit tests and hypothesis properties of the exact_match scorer."""

from __future__ import annotations

import datetime
import json
import re
from decimal import Context, Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.exact_match import extract, normalize, score, validate_config

# ---------------------------------------------------------------------------------------------------------
# validate_config


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"extract_pattern": r"answer: (\d+)", "extract_match": "last"},
        {"normalize": False, "case_sensitive": True},
        {"percent": True},
        {"threshold": 0},
        {"threshold": 0.5},
        {"threshold": 1},
        {"max_new_tokens": 16},
    ],
)
def test_valid_configs_pass(config: dict[str, Any]) -> None:
    validate_config(config)


def test_invalid_regex_message_names_the_key_and_quotes_the_pattern_as_written() -> None:
    with pytest.raises(ValueError) as info:
        validate_config({"extract_pattern": r"(\d+"})
    assert str(info.value) == (
        r"invalid regex in extract_pattern '(\d+': missing ), unterminated subpattern at position 0"
    )


def test_invalid_regex_message_stays_on_one_line() -> None:
    with pytest.raises(ValueError, match="extract_pattern") as info:
        validate_config({"extract_pattern": "a\n(b"})
    assert "\n" not in str(info.value)


def test_unknown_key_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        validate_config({"x": 1})
    message = str(info.value)
    assert message.startswith("unknown key 'x' in evaluation_config for exact_match; known: ")
    for key in ("extract_pattern", "extract_match", "normalize", "case_sensitive", "percent", "threshold"):
        assert key in message


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(ValueError, match="did you mean 'threshold'"):
        validate_config({"treshold": 0.5})


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"extract_pattern": 3}, "extract_pattern"),
        ({"extract_pattern": ""}, "extract_pattern"),
        ({"extract_match": "middle"}, "extract_match"),
        ({"extract_match": None}, "extract_match"),
        ({"normalize": "yes"}, "normalize"),
        ({"normalize": 1}, "normalize"),
        ({"case_sensitive": 0}, "case_sensitive"),
        ({"percent": "true"}, "percent"),
        ({"percent": True, "normalize": False}, "percent"),
        ({"threshold": "1"}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"max_new_tokens": True}, "max_new_tokens"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": -3}, "max_new_tokens"),
        ({"max_new_tokens": 8.0}, "max_new_tokens"),
        ({"max_new_tokens": "8"}, "max_new_tokens"),
    ],
)
def test_wrong_values_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key) as info:
        validate_config(config)
    assert "\n" not in str(info.value)


def test_non_mapping_config_is_rejected() -> None:
    with pytest.raises(ValueError, match="mapping"):
        validate_config(["threshold"])  # type: ignore[arg-type]


def test_score_rejects_an_invalid_config_too() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        score("a", "a", {"nope": 1})


# ---------------------------------------------------------------------------------------------------------
# extract


def test_extract_whole_match_without_groups() -> None:
    assert extract("the answer is 42 apples", r"\d+") == "42"


def test_extract_group_one_when_the_pattern_captures() -> None:
    assert extract("Answer: Paris. Confidence: 9", r"Answer: (\w+)") == "Paris"


def test_extract_first_non_none_group() -> None:
    pattern = r"(?:answer is (\d+)|final: (\d+))"
    assert extract("final: 7", pattern) == "7"
    assert extract("answer is 3", pattern) == "3"


def test_extract_none_when_no_group_took_part() -> None:
    assert extract("answer:", r"answer:(\d+)?") is None


def test_extract_first_versus_last() -> None:
    text = "2 + 3 = 5, then 5 * 4 = 20. Answer: 20"
    assert extract(text, r"\d+") == "2"
    assert extract(text, r"\d+", which="first") == "2"
    assert extract(text, r"\d+", which="last") == "20"
    assert extract("a=1 b=2 c=3", r"=(\d)", which="last") == "3"


def test_extract_none_when_nothing_matches() -> None:
    assert extract("no digits here", r"\d+") is None
    assert extract("no digits here", r"\d+", which="last") is None


def test_extract_searches_anywhere_and_honours_inline_flags() -> None:
    assert extract("line one\nANSWER: b", r"(?im)^answer: (\w)$") == "b"


def test_extract_rejects_unknown_which() -> None:
    with pytest.raises(ValueError, match="which"):
        extract("1", r"\d", which="middle")


# ---------------------------------------------------------------------------------------------------------
# normalize


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Paris  ", "paris"),
        ("New   York\tCity", "new york city"),
        ("line one\r\nline two\r\n", "line one line two"),
        ("a\u00a0b\u2003c\u3000d", "a b c d"),  # NBSP, em space, ideographic space
        ("Straße", "strasse"),
        ("cafe\u0301", "café"),  # decomposed equals composed
        ("Paris.", "paris"),
        ("Paris!", "paris"),
        ("Paris?", "paris"),
        ("Paris...", "paris"),
        ("Really?!", "really"),
        ("?", "?"),  # nothing but punctuation stays
        ("e.g.", "e.g"),
        ("3.", "3"),
        ("3.5.", "3.5"),
        ("The answer is 42.", "the answer is 42"),
    ],
)
def test_normalize_text(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1,000", "1000"),
        ("1,234,567", "1234567"),
        ("-1,000", "-1000"),
        ("1,000.50", "1000.5"),
        ("$1,000", "$1000"),
        ("3.0", "3"),
        ("3.000", "3"),
        ("3.50", "3.5"),
        ("+5", "5"),
        ("-5", "-5"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("+0.00", "0"),
        (".5", "0.5"),
        ("-.5", "-0.5"),
        ("(3.0)", "(3)"),
        ("x = 3.0, y = 4.0", "x = 3, y = 4"),
        ("it costs 12.50 dollars.", "it costs 12.5 dollars"),
    ],
)
def test_normalize_numbers(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "007",  # leading zeros are meaningful in codes
        "0042",
        "2021-03-05",  # dates
        "05/03/2021",
        "10:30",  # times
        "10:30:00",
        "1.2.3",  # versions
        "v1.0",
        "1.0.0",
        "1,00",  # not a valid thousands grouping
        "12,3456",
        "1,2,3",  # a list, not a number
        "1-2",
        "1.5-2.0",
        "3/4",
        "1e3",
        "3rd",
        "x2.0",
        "5%%",
    ],
)
def test_normalize_leaves_non_plain_numbers_alone(raw: str) -> None:
    assert normalize(raw) == raw


def test_dates_times_versions_survive_inside_sentences() -> None:
    assert (
        normalize("Released on 2021-03-05 at 10:30 as v1.2.3.") == "released on 2021-03-05 at 10:30 as v1.2.3"
    )


def test_case_sensitive_keeps_case_but_still_normalises() -> None:
    assert normalize("  Paris  France. ", case_sensitive=True) == "Paris France"
    assert normalize("3.50 USD", case_sensitive=True) == "3.5 USD"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("50%", "0.5"),
        ("12.5%", "0.125"),
        ("0.1%", "0.001"),
        ("100%", "1"),
        ("250%", "2.5"),
        ("-0%", "0"),
        ("-40%", "-0.4"),
        ("1,250%", "12.5"),
        ("about 30% of them", "about 0.3 of them"),
    ],
)
def test_percent_on(raw: str, expected: str) -> None:
    assert normalize(raw, percent=True) == expected


def test_percent_on_is_exact_for_long_numbers() -> None:
    assert normalize("123456789012345678901234567890.1%", percent=True) == "1234567890123456789012345678.901"


@pytest.mark.parametrize(("raw", "expected"), [("50%", "50%"), ("50.0%", "50%"), ("1,000%", "1000%")])
def test_percent_off_keeps_the_sign(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


# ---------------------------------------------------------------------------------------------------------
# score


def test_score_match_and_mismatch() -> None:
    hit = score("  Paris. ", "paris", {})
    assert hit == Score(
        value=1.0,
        threshold=1.0,
        details={"extracted": None, "normalized_prediction": "paris", "normalized_expected": "paris"},
    )
    assert hit.passed
    miss = score("Lyon", "Paris", {})
    assert miss.value == 0.0
    assert not miss.passed


def test_score_extracts_from_the_prediction_only() -> None:
    config = {"extract_pattern": r"answer is (\S+)"}
    result = score("Let me think. The answer is 1,000.", "1000", config)
    assert result.value == 1.0
    assert result.details["extracted"] == "1,000."
    assert result.details["normalized_prediction"] == "1000"
    # expected is the bare answer: the pattern is not applied to it
    assert score("The answer is 7", "7", config).value == 1.0


def test_score_extract_last() -> None:
    prediction = "answer is 3? No wait, answer is 5"
    assert score(prediction, "5", {"extract_pattern": r"answer is (\d+)"}).value == 0.0
    assert (
        score(prediction, "5", {"extract_pattern": r"answer is (\d+)", "extract_match": "last"}).value == 1.0
    )


def test_score_when_extraction_finds_nothing() -> None:
    result = score("I do not know", "42", {"extract_pattern": r"\d+"})
    assert result.value == 0.0
    assert result.details["extracted"] is None
    assert result.details["reason"] == "extract_pattern matched nothing"


def test_score_case_sensitivity() -> None:
    assert score("PARIS", "paris", {}).value == 1.0
    assert score("PARIS", "paris", {"case_sensitive": True}).value == 0.0
    assert score("Paris", "Paris", {"case_sensitive": True}).value == 1.0


def test_score_without_normalize_compares_raw_strings_case_folded() -> None:
    assert score("PARIS", "paris", {"normalize": False}).value == 1.0
    assert score("Paris ", "Paris", {"normalize": False}).value == 0.0
    assert score("3.0", "3", {"normalize": False}).value == 0.0
    assert score("Paris", "paris", {"normalize": False, "case_sensitive": True}).value == 0.0


def test_score_percent() -> None:
    assert score("50%", "0.5", {"percent": True}).value == 1.0
    assert score("50%", "0.5", {}).value == 0.0
    assert score("50%", "50%", {}).value == 1.0


def test_score_threshold_comes_from_config() -> None:
    result = score("a", "b", {"threshold": 0})
    assert result.threshold == 0.0
    assert result.passed


def test_score_details_are_json_able() -> None:
    for result in (score("x", "y", {}), score("x", "y", {"extract_pattern": r"\d"})):
        assert json.loads(json.dumps(result.to_json())) == result.to_json()


# ---------------------------------------------------------------------------------------------------------
# properties

_WHITESPACE = st.text(alphabet=" \t\n\r\u00a0\u2003\u3000\x0b\x0c", min_size=1, max_size=4)
_WORD = st.text(min_size=1, max_size=8).filter(lambda word: not any(char.isspace() for char in word))


@given(st.text(), st.booleans(), st.booleans())
def test_normalize_is_idempotent(text: str, case_sensitive: bool, percent: bool) -> None:
    once = normalize(text, case_sensitive=case_sensitive, percent=percent)
    assert normalize(once, case_sensitive=case_sensitive, percent=percent) == once


@given(st.from_regex(r"[-+ .,:/%0-9a-z]{0,20}", fullmatch=True), st.booleans())
def test_normalize_is_idempotent_on_number_like_text(text: str, percent: bool) -> None:
    once = normalize(text, percent=percent)
    assert normalize(once, percent=percent) == once


@given(st.text())
def test_score_of_text_against_itself_is_one(text: str) -> None:
    assert score(text, text, {}).value == 1.0


@given(st.text(), st.text())
def test_score_is_symmetric_without_extraction(a: str, b: str) -> None:
    assert score(a, b, {}).value == score(b, a, {}).value
    assert score(a, b, {"percent": True}).value == score(b, a, {"percent": True}).value


@given(st.lists(_WORD, min_size=1, max_size=6), st.data())
def test_extra_whitespace_never_changes_the_score(words: list[str], data: st.DataObject) -> None:
    plain = " ".join(words)
    gaps = data.draw(st.lists(_WHITESPACE, min_size=len(words) + 1, max_size=len(words) + 1))
    spaced = gaps[0] + "".join(word + gap for word, gap in zip(words, gaps[1:], strict=True))
    assert score(spaced, plain, {}).value == 1.0


@given(st.lists(st.from_regex(r"[!-~]{1,8}", fullmatch=True), min_size=1, max_size=6), st.data())
def test_ascii_case_changes_never_change_the_score(words: list[str], data: st.DataObject) -> None:
    plain = " ".join(words)
    flips = data.draw(st.lists(st.booleans(), min_size=len(plain), max_size=len(plain)))
    shouted = "".join(char.swapcase() if flip else char for char, flip in zip(plain, flips, strict=True))
    assert score(shouted, plain, {}).value == 1.0


@given(st.integers())
def test_thousands_separators_normalise_away(n: int) -> None:
    assert normalize(f"{n:,}") == normalize(str(n)) == str(n)
    assert normalize(f"The total is {n:,}.") == normalize(f"the total is {n}")


@given(st.integers(), st.integers(min_value=1, max_value=4))
def test_integer_with_zero_fraction_equals_integer(n: int, zeros: int) -> None:
    assert normalize(f"{n}." + "0" * zeros) == str(n)


@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(min_value=1, max_value=3))
def test_trailing_zeros_of_a_decimal_never_matter(x: float, zeros: int) -> None:
    plain = format(Decimal(repr(x)), "f")  # the float's shortest repr, written out without an exponent
    padded = plain + "0" * zeros if "." in plain else plain + "." + "0" * zeros
    assert normalize(padded) == normalize(plain)
    assert score(padded, plain, {}).value == 1.0


@given(st.decimals(min_value=-(10**30), max_value=10**30, places=4))
def test_percent_is_the_number_divided_by_a_hundred(d: Decimal) -> None:
    as_percent = format(d, "f") + "%"
    # scaleb rounds to the context's precision; give it enough digits to be exact
    as_fraction = format(d.scaleb(-2, context=Context(prec=100)), "f")
    assert normalize(as_percent, percent=True) == normalize(as_fraction)


@given(st.dates(), st.times())
def test_dates_and_times_are_never_mangled(day: datetime.date, time: datetime.time) -> None:
    assert normalize(day.isoformat()) == day.isoformat()
    clock = time.strftime("%H:%M")
    assert normalize(clock) == clock
    assert normalize(f"on {day.isoformat()} at {clock}.") == f"on {day.isoformat()} at {clock}"


@given(st.lists(st.integers(min_value=0, max_value=999), min_size=3, max_size=4))
def test_versions_are_never_mangled(parts: list[int]) -> None:
    version = ".".join(map(str, parts))
    assert normalize(version) == version
    assert normalize(f"v{version}") == f"v{version}"


@given(st.lists(st.integers(min_value=0, max_value=99), min_size=1, max_size=5), st.booleans())
def test_extract_first_and_last_pick_the_ends(numbers: list[int], last: bool) -> None:
    text = " and ".join(f"n={n}" for n in numbers)
    found = extract(text, r"n=(\d+)", which="last" if last else "first")
    assert found == str(numbers[-1] if last else numbers[0])


@given(st.text(), st.text(min_size=1), st.text())
def test_extract_without_groups_returns_the_whole_match(before: str, needle: str, after: str) -> None:
    assert extract(before + needle + after, re.escape(needle)) == needle


@given(st.text(alphabet="abc"))
def test_extract_none_exactly_when_the_pattern_is_absent(text: str) -> None:
    assert (extract(text, "ab") is None) == ("ab" not in text)


# ---------------------------------------------------------------------------------------------------------
# full messages: the user is told which field is wrong, what it holds and what is allowed


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (["threshold"], "evaluation_config for exact_match must be a mapping, not list"),
        (
            {"zzz": 1},
            "unknown key 'zzz' in evaluation_config for exact_match; known: case_sensitive, extract_match, "
            "extract_pattern, max_new_tokens, normalize, percent, threshold",
        ),
        ({"extract_pattern": 3}, "extract_pattern must be a string, not 3 (int)"),
        (
            {"extract_pattern": ""},
            "extract_pattern must not be empty (it would match the empty string everywhere)",
        ),
        ({"extract_match": "middle"}, "extract_match must be 'first' or 'last', not 'middle' (str)"),
        ({"normalize": "yes"}, "normalize must be true or false, not 'yes' (str)"),
        ({"percent": 1}, "percent must be true or false, not 1 (int)"),
        (
            {"percent": True, "normalize": False},
            "percent: true needs normalize: true (percent is part of normalisation)",
        ),
    ],
)
def test_invalid_config_messages_in_full(config: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_config(config)
    assert str(info.value) == message


def test_percent_of_a_tiny_number_is_written_out_not_in_scientific_notation() -> None:
    # str(Decimal) would give "1E-9"; the answer must stay comparable to a plain "0.000000001".
    assert normalize("0.0000001%", percent=True) == "0.000000001"


def test_failed_extraction_records_the_normalised_expected_answer() -> None:
    result = score("no digits here", " 42. ", {"extract_pattern": r"\d+"})
    assert result.value == 0.0
    assert result.details == {
        "extracted": None,
        "unparsed": True,
        "reason": "extract_pattern matched nothing",
        "normalized_expected": "42",
    }


def test_a_config_is_parsed_once_and_its_types_are_part_of_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    # Scoring 10,000 rows parsed the same (empty) config 10,000 times (issue 40): parsed once now. `1` equals
    # `True` in Python but not to the config check, so the memo must not hand a bad config a good parse.
    from pytest_llmeval.scorers import exact_match

    parsed: list[object] = []
    real = exact_match._parse

    def counted(config: object) -> object:
        parsed.append(config)
        return real(config)  # type: ignore[arg-type]

    monkeypatch.setattr(exact_match, "_PARSED", {})
    monkeypatch.setattr(exact_match, "_parse", counted)
    for _ in range(3):
        assert exact_match.score("Paris", "paris", {"normalize": True}).value == 1.0
    assert len(parsed) == 1
    with pytest.raises(ValueError, match="normalize must be true or false, not 1"):
        exact_match.score("Paris", "paris", {"normalize": 1})
    # A config that cannot be a key (a list inside) is parsed every time, and still checked.
    with pytest.raises(ValueError, match="unknown key"):
        exact_match.score("Paris", "paris", {"bands": [1, 2]})
