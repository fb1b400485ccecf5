"""multiple_choice's pure functions, pinned exactly: every message, boundary and details key (issue 20).

Written from mutmut's survivors on scorers/multiple_choice.py (TESTING.md): each test names the behaviour
a surviving mutant changed. No model: these run in mutmut's selection in well under a second.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmeval.scorers import multiple_choice as mc

THREE = {"choices": ["red", "green", "blue sky"]}


def error(config: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as info:
        mc.validate_config(config)
    return str(info.value)


# --- validate_config: every message in full, every boundary --------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"choices": ["a"]}, "multiple_choice needs 'choices': a list of two or more strings"),
        ({"choices": "ab"}, "multiple_choice needs 'choices': a list of two or more strings"),
        ({"choices": ["a", " "]}, "every entry of 'choices' must be a non-empty string"),
        ({"choices": ["a", 2]}, "every entry of 'choices' must be a non-empty string"),
        ({"choices": ["a", "a"]}, "'choices' has duplicates"),
        ({**THREE, "answer_index": True}, "'answer_index' must be an integer, got True"),
        ({**THREE, "answer_index": 1.0}, "'answer_index' must be an integer, got 1.0"),
        ({**THREE, "answer_index": -1}, "'answer_index' -1 is out of range for 3 choices"),
        ({**THREE, "answer_index": 3}, "'answer_index' 3 is out of range for 3 choices"),
        ({**THREE, "normalize": "mean"}, "'normalize' must be one of sum, token, char, got 'mean'"),
    ],
)
def test_config_errors_say_exactly_what_is_wrong(config: dict[str, Any], message: str) -> None:
    assert error(config) == message


def test_unknown_keys_are_named_with_the_type() -> None:
    assert error({**THREE, "answer": 1}) == (
        "unknown key 'answer' in evaluation_config for multiple_choice; did you mean 'answer_index'? "
        "known: choices, answer_index, answer_indices, gold_mass, normalize, prompt_mode, target_delimiter, "
        "choices_in_context, continuation, lm_eval"
    )


@pytest.mark.parametrize(
    "config",
    [
        THREE,  # no normalize: "sum" by default
        {**THREE, "answer_index": 0},  # the first and the last positions are in range
        {**THREE, "answer_index": 2},
        *({**THREE, "normalize": n} for n in mc.NORMALIZE),
    ],
)
def test_valid_configs_pass(config: dict[str, Any]) -> None:
    mc.validate_config(config)


# --- validate_row, field_rule, expected_index ----------------------------------------------------------


def test_answer_index_alone_names_the_answer() -> None:
    config = {**THREE, "answer_index": 1}
    mc.validate_row(config, {})  # no expected_output at all
    mc.validate_row(config, {"expected_output": ""})
    mc.validate_row(config, {"expected_output": " green "})
    assert mc.expected_index("", config) == 1
    assert mc.expected_index("red", config) == 1  # answer_index decides (validate_row checks agreement)


def test_row_errors_in_full() -> None:
    with pytest.raises(ValueError) as info:
        mc.validate_row(THREE, {})
    assert str(info.value) == "expected_output '' is not one of the choices (give its text, or answer_index)"
    with pytest.raises(ValueError) as info:
        mc.validate_row({**THREE, "answer_index": 0}, {"expected_output": "green"})
    assert str(info.value) == "expected_output 'green' disagrees with answer_index 0 ('red')"


def test_expected_index_by_text() -> None:
    assert mc.expected_index(" blue sky ", THREE) == 2


def test_field_rule() -> None:
    assert mc.field_rule(THREE) == (frozenset({"input"}), frozenset())
    assert mc.field_rule({**THREE, "answer_index": 0}) == (
        frozenset({"input", "expected_output"}),
        frozenset(),
    )


# --- score: saved predictions matched to a choice ------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "picked"),
    [
        ("green", 1),
        ("  GREEN. ", 1),
        ("blue   sky", 2),  # runs of spaces count as one
        ("blue sky.", 2),
        ("(C)", 2),
        ("c:", 2),
        ("D", None),  # one past the last choice's letter
        ("purple", None),
    ],
)
def test_a_saved_prediction_scores_with_full_details(prediction: str, picked: int | None) -> None:
    got = mc.score(prediction, "green", THREE)
    assert got.value == (1.0 if picked == 1 else 0.0) and got.threshold == 1.0
    assert got.details == {
        "predicted_index": picked,
        "predicted": None if picked is None else THREE["choices"][picked],
        "expected_index": 1,
        "reason": None if picked is not None else "the prediction names no choice",
        "unparsed": picked is None,  # named no choice: counted apart from wrong answers
    }


def test_a_choice_named_like_a_letter_is_matched_by_its_text_first() -> None:
    config = {"choices": ["b", "a"]}
    assert mc.score("a", "a", config).details["predicted_index"] == 1  # the text "a", not the letter A


# --- explain: a failing row's report --------------------------------------------------------------------


def test_explain_lines() -> None:
    measured = mc.score_measurement(
        {
            "expected_index": 1,
            "choices": [
                {"text": "red", "nll": 1.0, "n_tokens": 1, "n_chars": 3},
                {"text": "green", "nll": 2.5, "n_tokens": 2, "n_chars": 5},
            ],
        },
        {"choices": ["red", "green"]},
    )
    assert mc.explain(measured.details, {}) == [
        "predicted:   'red' (log-likelihood, sum: 'red' -1.000, 'green' -2.500)"
    ]
    saved = mc.score("D", "green", THREE)
    assert mc.explain(saved.details, THREE) == ["predicted:   None"]


def test_a_measured_row_scores_with_full_details() -> None:
    choices = [
        {"text": "red", "nll": 3.0, "n_tokens": 1, "n_chars": 3},
        {"text": "green", "nll": 3.5, "n_tokens": 2, "n_chars": 5},
    ]
    got = mc.score_measurement(
        {"expected_index": 1, "choices": choices}, {"choices": ["red", "green"], "normalize": "token"}
    )
    assert (got.value, got.threshold) == (1.0, 1.0)
    assert got.details == {
        "predicted_index": 1,
        "predicted": "green",
        "expected_index": 1,
        "normalize": "token",
        "scores": [-3.0, -1.75],
        "choices": choices,
    }
