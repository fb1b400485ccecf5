"""Unit tests and hypothesis properties of the char_accuracy scorer: aligned character accuracy, per script.

The alignment is rapidfuzz's; its count is checked against a longest-common-subsequence table written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmeval.benchmark import BenchmarkError
from pytest_llmeval.scorers import SCORERS, read_benchmark
from pytest_llmeval.scorers.char_accuracy import (
    DEFAULT_SCRIPT_THRESHOLDS,
    aligned_mask,
    explain,
    normalize,
    score,
    script_of,
    validate_config,
)
from pytest_llmeval.scorers.fuzzy import levenshtein

# Few distinct characters of every script, so that random strings share many and alignments have ties.
_JAPANESE = st.sampled_from(list("あいのはアイーン東京日本aA1 。・"))
_TEXT = st.text(_JAPANESE, max_size=16) | st.text(max_size=16)


def reference_lcs(a: str, b: str) -> int:
    """The textbook longest-common-subsequence table: slow, obviously right, shares no code with rapidfuzz."""
    previous = [0] * (len(b) + 1)
    for char_a in a:
        current = [0]
        for j, char_b in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if char_a == char_b else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def is_subsequence(part: str, whole: str) -> bool:
    rest = iter(whole)
    return all(char in rest for char in part)  # `in` consumes the iterator up to the match


def aligned(expected: str, output: str) -> int:
    return sum(aligned_mask(expected, output))


# ---------------------------------------------------------------------------------------------------------
# alignment, not position


def test_one_insertion_costs_one_character_not_the_rest_of_the_line() -> None:
    expected, output = "こんにちは世界", "こXんにちは世界"
    result = score(output, expected, {})
    assert result.value == 7 / 8
    details = result.details
    assert (details["aligned"], details["expected_chars"], details["output_chars"]) == (7, 7, 8)
    # Position by position, everything after the X is one place off: only こ matches.
    same_place = sum(got == want for got, want in zip(output, expected, strict=False))
    assert same_place / max(len(output), len(expected)) == 1 / 8
    assert details["scripts"]["hiragana"]["correct"] == 5
    assert details["scripts"]["kanji"]["correct"] == 2


def test_a_correct_character_between_a_deletion_and_an_insertion_is_counted_correct() -> None:
    # 東 dropped, X added: a cheapest Levenshtein alignment (rapidfuzz's Levenshtein.opcodes) pairs 東京
    # with 京X by two substitutions, counts the correct 京 wrong and fails the row on kanji (4/6 < 0.80).
    result = score("日本の首都は京Xです。", "日本の首都は東京です。", {})
    assert result.details["aligned"] == 10
    assert result.value == 10 / 11
    assert result.details["scripts"]["kanji"] == {
        "chars": 6,
        "correct": 5,
        "accuracy": 5 / 6,
        "threshold": 0.8,
        "passed": True,
    }
    assert result.passed
    # The same between two hiragana: ん dropped, X added, に still right.
    assert score("こにXちは世界", "こんにちは世界", {}).details["aligned"] == 6


# ---------------------------------------------------------------------------------------------------------
# per-script accounting


def test_scripts_of_the_document_ranges() -> None:
    assert [script_of(c) for c in "ぁゟ゠ヿー・亜龯"] == [
        *["hiragana"] * 2,
        *["katakana"] * 4,
        *["kanji"] * 2,
    ]
    # Just outside the document's ranges: 々, CJK extension A, the ideographs after U+9FAF, half-width kana.
    assert {script_of(c) for c in "々\u3400\u9fb0ｱA1。 "} == {"other"}


def test_mixed_text_counted_by_hand() -> None:
    # expected: 東 京 | タ ワ ー | は | A B C | で す    output: 東 都 | タ ワ | は | A B c | で す ね
    # Every character differs from every other, so there is one alignment: 東, タ, ワ, は, A, B, で, す.
    result = score("東都タワはABcですね", "東京タワーはABCです", {})
    assert result.value == 8 / 11
    assert result.details == {
        "accuracy": 8 / 11,
        "aligned": 8,
        "expected_chars": 11,
        "output_chars": 11,
        "scripts": {
            "hiragana": {"chars": 3, "correct": 3, "accuracy": 1.0, "threshold": 0.9, "passed": True},
            "katakana": {"chars": 3, "correct": 2, "accuracy": 2 / 3, "threshold": 0.88, "passed": False},
            "kanji": {"chars": 2, "correct": 1, "accuracy": 0.5, "threshold": 0.8, "passed": False},
            "other": {"chars": 3, "correct": 2, "accuracy": 2 / 3, "threshold": None, "passed": None},
        },
        "failed_scripts": ["katakana", "kanji"],
    }
    assert not result.passed
    assert json.loads(json.dumps(result.to_json())) == result.to_json()


def test_a_script_absent_from_the_expected_text_is_not_judged() -> None:
    # The output's stray katakana are wrong characters overall, but there is no katakana to get right.
    result = score("ひらがなカナ", "ひらがな", {"threshold": 0.5})
    assert list(result.details["scripts"]) == ["hiragana"]
    assert result.value == 4 / 6
    assert result.passed


# ---------------------------------------------------------------------------------------------------------
# thresholds and the pass rule


def test_defaults_are_the_documents_targets() -> None:
    result = score("こんにちは世界", "こんにちは世界", {})
    assert result.threshold == 0.85
    assert dict(DEFAULT_SCRIPT_THRESHOLDS) == {"hiragana": 0.9, "katakana": 0.88, "kanji": 0.8, "other": None}
    assert result.passed


def test_overall_below_its_threshold_fails() -> None:
    result = score("こんにちは", "こんばんは", {})  # 3 of 5
    assert result.value == 0.6
    assert not result.passed
    assert result.to_json()["passed"] is False


def test_a_script_below_its_threshold_fails_the_row_although_the_overall_passes() -> None:
    result = score("今日は電気がいい", "今日は天気がいい", {})
    assert result.value == 7 / 8 >= result.threshold
    assert result.details["scripts"]["kanji"]["accuracy"] == 0.75
    assert result.details["failed_scripts"] == ["kanji"]
    assert not result.passed
    assert result.to_json()["passed"] is False


@pytest.mark.parametrize(
    ("config", "passed"),
    [
        ({"script_thresholds": {"kanji": 0.75}}, True),  # at the threshold passes
        ({"script_thresholds": {"kanji": None}}, True),  # null: reported, not judged
        ({"script_thresholds": {"hiragana": 1, "kanji": 0.7}}, True),
        ({"threshold": 0.9, "script_thresholds": {"kanji": 0.5}}, False),  # 0.875 < 0.9
        ({"script_thresholds": {"other": 0.5}}, False),  # kanji keeps its default
    ],
)
def test_config_overrides_thresholds(config: dict[str, Any], passed: bool) -> None:
    assert score("今日は電気がいい", "今日は天気がいい", config).passed is passed


def test_a_switched_off_script_is_reported_with_no_verdict() -> None:
    result = score("今日は電気がいい", "今日は天気がいい", {"script_thresholds": {"kanji": None}})
    kanji = result.details["scripts"]["kanji"]
    assert kanji == {"chars": 4, "correct": 3, "accuracy": 0.75, "threshold": None, "passed": None}


def test_other_is_judged_when_given_a_threshold() -> None:
    result = score("ABC", "ABD", {"threshold": 0.5, "script_thresholds": {"other": 0.7}})
    assert result.details["scripts"]["other"]["passed"] is False
    assert not result.passed


# ---------------------------------------------------------------------------------------------------------
# normalisation


def test_nfc_and_the_ends_but_not_the_inside() -> None:
    assert score("か\u3099", "が", {}).value == 1.0  # a decomposed が is one character
    assert score("  こんにちは\n", "こんにちは", {}).value == 1.0  # a trailing newline is no character
    assert score("夏目 漱石", "夏目漱石", {}).value == 4 / 5  # an inner space is one the model added


def test_case_counts_unless_told_otherwise() -> None:
    assert score("tokyo", "Tokyo", {}).value == 4 / 5
    assert score("tokyo", "Tokyo", {"case_sensitive": False}).value == 1.0
    assert normalize("  Straße ", case_sensitive=False) == "strasse"


def test_empty_texts() -> None:
    both = score("", "  ", {})
    assert (both.value, both.details["scripts"], both.passed) == (1.0, {}, True)
    assert score("何か", "", {}).value == 0.0
    assert score("", "何か", {}).value == 0.0


# ---------------------------------------------------------------------------------------------------------
# validate_config


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"threshold": 0.5, "max_new_tokens": 64},
        {"case_sensitive": False},
        {"script_thresholds": {}},
        {"script_thresholds": {"hiragana": 0, "katakana": 1, "kanji": 0.5, "other": None}},
    ],
)
def test_valid_configs_pass(config: dict[str, Any]) -> None:
    validate_config(config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (["threshold"], "evaluation_config for char_accuracy must be a mapping, not list"),
        (
            {"script_threshold": {"kanji": 0.8}},
            "unknown key 'script_threshold' in evaluation_config for char_accuracy; did you mean "
            "'script_thresholds'? known: case_sensitive, max_new_tokens, script_thresholds, threshold",
        ),
        (
            {"script_thresholds": {"kanj": 0.8}},
            "unknown key 'kanj' in script_thresholds; did you mean 'kanji'? "
            "known: hiragana, katakana, kanji, other",
        ),
        (
            {"script_thresholds": {"latin": 0.8}},
            "unknown key 'latin' in script_thresholds; known: hiragana, katakana, kanji, other",
        ),
        (
            {"script_thresholds": [0.9, 0.88]},
            "script_thresholds must be an object of script names (hiragana, katakana, kanji, other) "
            "to a number in [0, 1] or null, not [0.9, 0.88] (list)",
        ),
        (
            {"script_thresholds": None},
            "script_thresholds must be an object of script names (hiragana, katakana, kanji, other) "
            "to a number in [0, 1] or null, not null",
        ),
        (
            {"script_thresholds": {"kanji": 80}},
            "script_thresholds.kanji must be a number in [0, 1] or null, not 80",
        ),
        (
            {"script_thresholds": {"kanji": -0.1}},
            "script_thresholds.kanji must be a number in [0, 1] or null, not -0.1",
        ),
        (
            {"script_thresholds": {"kanji": float("nan")}},
            "script_thresholds.kanji must be a number in [0, 1] or null, not nan",
        ),
        (
            {"script_thresholds": {"hiragana": "0.9"}},
            "script_thresholds.hiragana must be a number in [0, 1] or null, not '0.9' (str)",
        ),
        (
            {"script_thresholds": {"katakana": True}},
            "script_thresholds.katakana must be a number in [0, 1] or null, not True (bool)",
        ),
        ({"threshold": 85}, "threshold must be a number in [0, 1], not 85"),
        ({"case_sensitive": "no"}, "case_sensitive must be true or false, not 'no' (str)"),
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer, not 0 (int)"),
    ],
)
def test_invalid_config_messages_in_full(config: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_config(config)
    assert str(info.value) == message


def test_a_bad_row_fails_its_files_collection_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "ja.jsonl"
    rows = [
        {"script_thresholds": {"kanji": 0.7}},
        {"script_thresholds": {"kanj": 0.7}},
    ]
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"ja-{n}",
                    "instruction": "次の文を書き写してください。",
                    "input": "今日は天気がいい",
                    "expected_output": "今日は天気がいい",
                    "evaluation_type": "char_accuracy",
                    "evaluation_config": config,
                    "difficulty": "easy",
                },
                ensure_ascii=False,
            )
            + "\n"
            for n, config in enumerate(rows)
        ),
        encoding="utf-8",
    )
    with pytest.raises(BenchmarkError) as info:
        read_benchmark(path)
    assert str(info.value) == (
        f"{path}:2: evaluation_config: unknown key 'kanj' in script_thresholds; did you mean 'kanji'? "
        "known: hiragana, katakana, kanji, other"
    )
    path.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    (case,) = read_benchmark(path).cases
    assert case.evaluation_type == "char_accuracy"


# ---------------------------------------------------------------------------------------------------------
# explain: what a failing row's report adds


def test_explain_shows_each_script_against_its_threshold() -> None:
    config = {"script_thresholds": {"katakana": None}}
    result = score("東都タワはABcですね", "東京タワーはABCです", config)
    assert SCORERS["char_accuracy"].explain is explain
    assert explain(result.details, config) == [
        "characters:  0.73 < 0.85 (8 of 11 aligned)",
        "hiragana:    1.00 >= 0.90 (3 of 3)",
        "katakana:    0.67 (no threshold) (2 of 3)",
        "kanji:       0.50 < 0.80 (1 of 2)",
        "other:       0.67 (no threshold) (2 of 3)",
    ]


def test_explain_never_rounds_a_failure_into_a_tie() -> None:
    details = {
        "accuracy": 0.7999,
        "aligned": 7999,
        "expected_chars": 10000,
        "output_chars": 10000,
        "scripts": {"kanji": {"chars": 10000, "correct": 7999, "accuracy": 0.7999, "threshold": 0.8}},
    }
    assert explain(details, {})[1] == "kanji:       0.7999 < 0.8000 (7999 of 10000)"


# ---------------------------------------------------------------------------------------------------------
# properties


@given(_TEXT)
def test_identical_texts_score_one_in_every_script(text: str) -> None:
    result = score(text, text, {})
    assert result.value == 1.0
    assert all(s["accuracy"] == 1.0 for s in result.details["scripts"].values())
    assert result.details["failed_scripts"] == []
    assert result.passed


@settings(max_examples=300)
@given(_TEXT, _TEXT)
def test_the_count_is_the_longest_common_subsequence(expected: str, output: str) -> None:
    mask = aligned_mask(expected, output)
    assert len(mask) == len(expected)
    # Honest: the characters marked right really occur in the output, in order.
    assert is_subsequence("".join(c for c, hit in zip(expected, mask, strict=True) if hit), output)
    # And as many as can be: no alignment keeps more characters.
    assert sum(mask) == reference_lcs(expected, output)
    # A cheapest Levenshtein alignment keeps max - distance or more; none keeps more than the shorter text.
    assert max(len(expected), len(output)) - levenshtein(expected, output) <= sum(mask)
    assert sum(mask) <= min(len(expected), len(output))


@given(_TEXT, _TEXT)
def test_accuracy_is_symmetric_and_in_range(a: str, b: str) -> None:
    value = score(a, b, {}).value
    assert 0.0 <= value <= 1.0
    assert value == score(b, a, {}).value
    assert aligned(a, b) == aligned(b, a)


@given(_TEXT, _TEXT, st.data())
def test_one_edit_moves_the_count_by_at_most_one(expected: str, output: str, data: st.DataObject) -> None:
    before = aligned(expected, output)
    at = data.draw(st.integers(0, len(output)))
    char = data.draw(_JAPANESE)
    edits = [output[:at] + char + output[at:]]  # insertion
    if at < len(output):
        edits.append(output[:at] + output[at + 1 :])  # deletion
        edits.append(output[:at] + char + output[at + 1 :])  # substitution
    for edited in edits:
        assert abs(aligned(expected, edited) - before) <= 1
        assert abs(aligned(edited, output) - len(output)) <= 1  # the same, from the expected side


@given(_TEXT, _TEXT)
def test_script_counts_add_up(output: str, expected: str) -> None:
    details = score(output, expected, {}).details
    scripts = details["scripts"].values()
    assert sum(s["chars"] for s in scripts) == details["expected_chars"] == len(normalize(expected))
    assert sum(s["correct"] for s in scripts) == details["aligned"]
    assert all(0.0 <= s["accuracy"] <= 1.0 and s["chars"] > 0 for s in scripts)
    assert details["failed_scripts"] == [
        name for name, s in details["scripts"].items() if s["passed"] is False
    ]


def test_a_run_pools_char_accuracy_per_benchmark_and_says_which_script_failed(
    pytester: pytest.Pytester,
) -> None:
    """Through the plugin (saved predictions): results.json pools the rows per model, character-weighted, and
    a row that passes overall but fails on its kanji says so in its first line."""
    from helpers import jsonl, row

    def char_row(row_id: str, expected: str) -> dict[str, Any]:
        return row(row_id, expected=expected, evaluation_type="char_accuracy", evaluation_config={})

    expected = {
        "a": "日本の首都は東京です。",
        "b": "ひらがなとカタカナ",
        "c": "これはひらがなのながいぶんです山",
    }
    pytester.makefile(".jsonl", ja=jsonl([char_row(k, v) for k, v in expected.items()]))
    preds = [
        # 東京 -> 大阪: 9 of 11 aligned, kanji 4 of 6; the base is right.
        {"id": "a", "prediction": "日本の首都は大阪です。", "base_prediction": expected["a"]},
        # The base writes katakana as hiragana and が as か: ひ ら な と, 4 of 9.
        {"id": "b", "prediction": expected["b"], "base_prediction": "ひらかなとかたかな"},
        # 15 of 16 right, the one kanji wrong: over the threshold overall, kanji 0 of 1.
        {"id": "c", "prediction": "これはひらがなのながいぶんです川", "base_prediction": expected["c"]},
    ]
    (pytester.path / "preds.txt").write_text(jsonl(preds))
    result = pytester.runpytest("--llmeval-predictions=preds.txt", "-m", "not gate", "-p", "no:cacheprovider")
    doc = json.loads((pytester.path / "results.json").read_text())
    pooled = doc["benchmarks"][0]["char_accuracy"]
    assert pooled["adapter"]["character"] == pytest.approx((9 + 9 + 15) / (11 + 9 + 16))
    assert pooled["base"]["character"] == pytest.approx((11 + 4 + 16) / (11 + 9 + 16))
    assert pooled["adapter"]["scripts"]["kanji"] == {"accuracy": pytest.approx(4 / 7), "chars": 7}
    result.stdout.fnmatch_lines(
        [
            "*ja.jsonl:1: a [[]char_accuracy, easy] scored 0.818 < threshold 0.85 (adapter)",
            "*ja.jsonl:3: c [[]char_accuracy, easy] scored 0.938 >= threshold 0.85 but kanji below theirs*",
            "*character accuracy (aligned, pooled over rows): base 86.1%*; adapter 91.7%*",
        ]
    )
