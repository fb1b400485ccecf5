"""llm_judge's pure parts pinned exactly: validate_config's boundaries and messages, the judge's request
text, score extraction, the Score with every detail, and the failing row's report lines."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_llmeval.scorers import llm_judge
from pytest_llmeval.scorers.base import Score

RUBRIC = {"rubric": "Grade it."}
KNOWN = (
    "rubric, max_new_tokens, extract_score_pattern, max_score, runs, temperature, seed, "
    "judge_max_new_tokens, threshold"
)


def refused(config: dict[str, Any], message: str) -> None:
    """validate_config raises ValueError with exactly `message`."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        llm_judge.validate_config(config)


# --- validate_config: values on the accepted side of every boundary ------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"max_score": 1e-9},  # max_score > 0, not >= 1
        {"max_score": 0.5},
        {"temperature": 1e-9},
        {"runs": 1},
        {"judge_max_new_tokens": 1},
        {"max_new_tokens": 1},
        {"max_new_tokens": None},  # absent and null both mean "the default limit"
        {"seed": 0},
        {"threshold": 0},
        {"threshold": 0.0},
        {"threshold": 1},
        {"threshold": 1.0},
        {"extract_score_pattern": r"(\d+)/10"},
    ],
)
def test_accepted_configs(extra: dict[str, Any]) -> None:
    llm_judge.validate_config({**RUBRIC, **extra})


# --- validate_config: every refusal, with its whole message ----------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        # unknown keys name where they were found and every known key
        (
            {**RUBRIC, "zzz": 1},
            f"unknown key 'zzz' in evaluation_config for llm_judge; known: {KNOWN}",
        ),
        # the rubric is required and must say something
        ({}, "llm_judge needs 'rubric': the grading instructions for the judge"),
        ({"rubric": "  "}, "llm_judge needs 'rubric': the grading instructions for the judge"),
        ({"rubric": 3}, "llm_judge needs 'rubric': the grading instructions for the judge"),
        # the pattern must be a string (a number is refused by this check, not by re.compile)
        ({**RUBRIC, "extract_score_pattern": 5}, "'extract_score_pattern' must be a string"),
        ({**RUBRIC, "extract_score_pattern": None}, "'extract_score_pattern' must be a string"),
        # max_score and temperature: numbers strictly above 0, never bools
        ({**RUBRIC, "max_score": 0}, "'max_score' must be a number > 0, got 0"),
        ({**RUBRIC, "max_score": 0.0}, "'max_score' must be a number > 0, got 0.0"),
        ({**RUBRIC, "max_score": -1}, "'max_score' must be a number > 0, got -1"),
        ({**RUBRIC, "max_score": True}, "'max_score' must be a number > 0, got True"),
        ({**RUBRIC, "max_score": "10"}, "'max_score' must be a number > 0, got '10'"),
        ({**RUBRIC, "temperature": 0}, "'temperature' must be a number > 0, got 0"),
        ({**RUBRIC, "temperature": True}, "'temperature' must be a number > 0, got True"),
        # the integer options: runs, judge_max_new_tokens, max_new_tokens >= 1; seed >= 0; never bools
        ({**RUBRIC, "runs": 0}, "'runs' must be an integer >= 1, got 0"),
        ({**RUBRIC, "runs": True}, "'runs' must be an integer >= 1, got True"),
        ({**RUBRIC, "runs": None}, "'runs' must be an integer >= 1, got None"),
        ({**RUBRIC, "runs": 2.0}, "'runs' must be an integer >= 1, got 2.0"),
        ({**RUBRIC, "judge_max_new_tokens": 0}, "'judge_max_new_tokens' must be an integer >= 1, got 0"),
        ({**RUBRIC, "max_new_tokens": 0}, "'max_new_tokens' must be an integer >= 1, got 0"),
        ({**RUBRIC, "max_new_tokens": True}, "'max_new_tokens' must be an integer >= 1, got True"),
        # seed comes after max_new_tokens: an absent max_new_tokens must not end the checks
        ({**RUBRIC, "seed": -1}, "'seed' must be an integer >= 0, got -1"),
        ({**RUBRIC, "seed": False}, "'seed' must be an integer >= 0, got False"),
        # threshold: a number in [0, 1], never a bool
        ({**RUBRIC, "threshold": 2}, "'threshold' must be a number in [0, 1], got 2"),
        ({**RUBRIC, "threshold": 1.5}, "'threshold' must be a number in [0, 1], got 1.5"),
        ({**RUBRIC, "threshold": -0.1}, "'threshold' must be a number in [0, 1], got -0.1"),
        ({**RUBRIC, "threshold": True}, "'threshold' must be a number in [0, 1], got True"),
        ({**RUBRIC, "threshold": "0.5"}, "'threshold' must be a number in [0, 1], got '0.5'"),
    ],
)
def test_refused_configs(config: dict[str, Any], message: str) -> None:
    refused(config, message)


def test_an_invalid_pattern_names_the_regex_error() -> None:
    with pytest.raises(ValueError, match=r"^'extract_score_pattern' is not a valid regex: missing \)"):
        llm_judge.validate_config({**RUBRIC, "extract_score_pattern": "("})


# --- judge_request: the whole text the judge reads -------------------------------------------------------

GRADE_LINE = "Grade the response. End with a line 'Score: N', N from 0 to {}."


@pytest.mark.parametrize(
    ("input", "expected", "output", "config", "text"),
    [
        # every part, the default pattern: the format line names the default max_score
        (
            " in ",
            " ref ",
            " out ",
            {},
            "R\n\nTask:\nT\n\nInput:\nin\n\nReference answer:\nref\n\nResponse to grade:\nout\n\n"
            + GRADE_LINE.format(10),
        ),
        # the format line names the row's max_score
        (
            "in",
            "ref",
            "out",
            {"max_score": 5},
            "R\n\nTask:\nT\n\nInput:\nin\n\nReference answer:\nref\n\nResponse to grade:\nout\n\n"
            + GRADE_LINE.format(5),
        ),
        # blank input and reference are left out; a blank output is shown as such
        (
            " ",
            "\n",
            "  ",
            {},
            "R\n\nTask:\nT\n\nResponse to grade:\n(empty response)\n\n" + GRADE_LINE.format(10),
        ),
        # a custom pattern: the judge's prompt (the rubric) says the format, so no format line
        (
            "",
            "ref",
            "out",
            {"extract_score_pattern": r"(\d+)/10"},
            "R\n\nTask:\nT\n\nReference answer:\nref\n\nResponse to grade:\nout",
        ),
        (
            "in",
            "",
            "out",
            {"extract_score_pattern": r"(\d+)/10"},
            "R\n\nTask:\nT\n\nInput:\nin\n\nResponse to grade:\nout",
        ),
    ],
)
def test_judge_request_text(
    input: str, expected: str, output: str, config: dict[str, Any], text: str
) -> None:
    assert llm_judge.judge_request(" R ", "\nT\n", input, expected, output, config) == text


# --- extract: the first group, or the whole match when the pattern has no group; in 0..max_score --------


@pytest.mark.parametrize(
    ("text", "config", "value"),
    [
        ("Score: 4", {}, 4.0),
        ("score = 7.5 then Score: 2", {}, 7.5),  # the first match
        ("Score: 0", {}, 0.0),
        ("Score: 10", {}, 10.0),  # max_score itself is in range
        ("Score: 11", {}, None),  # above max_score: unparseable, not clipped
        ("no score here", {}, None),
        ("8/10", {"extract_score_pattern": r"(\d+)/10"}, 8.0),
        ("graded 8 of 10", {"extract_score_pattern": r"\d+"}, 8.0),  # no group: the whole match
        ("graded x", {"extract_score_pattern": r"graded (\w)"}, None),  # not a number
        ("Score: nan", {"extract_score_pattern": r"Score: (\w+)"}, None),  # not finite
        ("Score: 3", {"extract_score_pattern": r"Score: (\d)?(x)?"}, 3.0),
        ("Score: ", {"extract_score_pattern": r"Score: (\d)?"}, None),  # the group did not take part
    ],
)
def test_extract(text: str, config: dict[str, Any], value: float | None) -> None:
    assert llm_judge.extract(text, config) == value


# --- score_measurement: the whole Score, every detail ----------------------------------------------------


def judge_runs(*outputs: str) -> list[dict[str, Any]]:
    return [{"run": r, "seed": 7 + r, "output": output} for r, output in enumerate(outputs)]


def test_score_is_the_mean_of_the_parseable_runs_with_every_detail() -> None:
    runs = judge_runs("Score: 2", "Score: 4", "nothing", "Score: 6")
    score = llm_judge.score_measurement({"judge": "base", "runs": runs}, {**RUBRIC, "threshold": 0.4})
    assert score == Score(
        value=0.4,
        threshold=0.4,
        details={
            "judge_mean": 4.0,
            "judge_sd": 2.0,  # the sample standard deviation of 2, 4, 6
            "max_score": 10.0,
            "n_runs": 4,
            "n_unparseable": 1,
            "judge": "base",
            "runs": [
                {"run": 0, "seed": 7, "output": "Score: 2", "score": 2.0},
                {"run": 1, "seed": 8, "output": "Score: 4", "score": 4.0},
                {"run": 2, "seed": 9, "output": "nothing", "score": None},
                {"run": 3, "seed": 10, "output": "Score: 6", "score": 6.0},
            ],
        },
    )
    assert score.passed
    assert runs[0] == {"run": 0, "seed": 7, "output": "Score: 2"}  # the measurement is not modified


def test_one_parseable_run_has_no_sd_and_a_truncated_prompt_is_reported() -> None:
    measurement = {"judge": "judge-model", "runs": judge_runs("3/4"), "prompt_truncated": True}
    config = {**RUBRIC, "extract_score_pattern": r"(\d+)/4", "max_score": 4}
    assert llm_judge.score_measurement(measurement, config).to_json() == {
        "value": 0.75,
        "threshold": 0.5,
        "passed": True,
        "judge_mean": 3.0,
        "judge_sd": None,
        "max_score": 4.0,
        "n_runs": 1,
        "n_unparseable": 0,
        "judge": "judge-model",
        "runs": [{"run": 0, "seed": 7, "output": "3/4", "score": 3.0}],
        "judge_prompt_truncated": True,
    }


@pytest.mark.parametrize("truncated", [True, False])
def test_judge_prompt_truncated_copies_the_measurement(truncated: bool) -> None:
    measurement = {"judge": "j", "runs": judge_runs("Score: 1"), "prompt_truncated": truncated}
    details = llm_judge.score_measurement(measurement, RUBRIC).details
    assert details["judge_prompt_truncated"] is truncated


def test_no_parseable_run_is_an_error_naming_the_pattern_and_the_first_output() -> None:
    long = "x" * 300
    message = (
        f"the judge gave no score that extract_score_pattern {llm_judge.DEFAULT_PATTERN!r} "
        f"finds in 2 run(s); first output: {'x' * 200!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        llm_judge.score_measurement({"judge": "j", "runs": judge_runs(long, "Score: 99")}, RUBRIC)


# --- explain: one line per run, the output cut to 160 characters -----------------------------------------


def test_explain_lines() -> None:
    runs = judge_runs("Score: 4", "y" * 200)
    details = llm_judge.score_measurement({"judge": "j", "runs": runs}, RUBRIC).details
    assert llm_judge.explain(details, RUBRIC) == [
        "judge run 0 (seed 7): 4.0: 'Score: 4'",
        f"judge run 1 (seed 8): None: {'y' * 160!r}",
    ]
