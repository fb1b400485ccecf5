"""Reasoning blocks and unparsed answers: a `<think>` block is cut off before scoring (the raw output kept),
an answer that cannot be extracted is counted apart from wrong ones (`unparsed` per benchmark and model)."""

from __future__ import annotations

import json

import pytest
from helpers import jsonl, row
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.reasoning import parse_tags, split_reasoning
from pytest_llmeval.scorers import exact_match, multiple_choice

pytest_plugins = ["pytester"]

PATTERN = {"extract_pattern": "(?i)\\b(positive|negative)\\b", "extract_match": "first"}


@given(
    reasoning=st.text().filter(lambda t: "</think>" not in t),
    answer=st.text(),
    lead=st.sampled_from(["", " ", "\n\n"]),
)
def test_the_answer_is_what_follows_the_block(reasoning: str, answer: str, lead: str) -> None:
    split = split_reasoning(f"{lead}<think>{reasoning}</think>{answer}")
    assert (split.answer, split.reasoning, split.unterminated) == (answer.strip(), reasoning, False)


@given(st.text())
def test_an_output_without_a_leading_block_is_left_whole(text: str) -> None:
    if not text.lstrip().startswith("<think>"):
        split = split_reasoning(text)
        assert (split.answer, split.reasoning, split.stripped) == (text, None, False)


def test_only_a_leading_block_counts_and_an_open_one_leaves_no_answer() -> None:
    assert split_reasoning("The tag <think>x</think> is quoted here.").answer == (
        "The tag <think>x</think> is quoted here."
    )
    open_block = split_reasoning("<think>still thinking when the tokens ran out")
    assert (open_block.answer, open_block.unterminated) == ("", True)
    assert split_reasoning("[[a]] b", ("[[", "]]")).answer == "b"
    # The first closing tag ends the block: a second one belongs to the answer.
    assert split_reasoning("<think>a</think>b</think>").answer == "b</think>"


@pytest.mark.parametrize("bad", ["<think>", "<think>,", ",</think>", "a,b,c", "x,x"])
def test_bad_tags_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"OPEN,CLOSE|must differ"):
        parse_tags(bad)


def test_scorers_that_extract_say_when_they_could_not() -> None:
    assert exact_match.score("I would say neutral.", "positive", PATTERN).details["unparsed"] is True
    assert exact_match.score("negative", "positive", PATTERN).details["unparsed"] is False
    assert "unparsed" not in exact_match.score("negative", "positive", {}).details  # nothing to extract
    config = {"choices": ["red", "green"]}
    assert multiple_choice.score("blue", "red", config).details["unparsed"] is True
    assert multiple_choice.score("B", "red", config).details["unparsed"] is False


PREDICTIONS = {
    "thought-right": "<think>Not negative at all, they loved it.</think>\nPositive",
    "thought-cut": "<think>The reviewer seems",  # ran out of tokens while thinking
    "no-label": "I would call it neutral.",
    "wrong": "negative",
}


@pytest.fixture
def bench(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    rows = [
        row(
            i,
            instruction="Classify the review.",
            input="A review.",
            expected="positive",
            evaluation_config=PATTERN,
        )
        for i in PREDICTIONS
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    pytester.makefile(
        ".jsonl", preds="\n".join(json.dumps({"id": i, "prediction": p}) for i, p in PREDICTIONS.items())
    )


@pytest.mark.usefixtures("bench")
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_reasoning_is_cut_off_and_unparsed_rows_are_counted_apart(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "bench.jsonl", "-m", "not gate", *workers
    )
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        ["*unparsed (no answer extracted; scored 0, not wrong answers): base 50.0% (2 of 4)*"]
    )
    doc = json.loads((pytester.path / "results.json").read_text())
    bench = doc["benchmarks"][0]
    assert bench["unparsed"] == {"base": {"rate": 0.5, "n_unparsed": 2, "n_rows": 4}}
    sides = {r["id"]: r["models"]["base"] for r in bench["rows"]}
    # The raw output is kept; what was scored is beside it.
    assert sides["thought-right"]["output"] == PREDICTIONS["thought-right"]
    assert sides["thought-right"]["scored_output"] == "Positive"
    assert sides["thought-right"]["reasoning_unterminated"] is False
    assert (
        sides["thought-cut"]["reasoning_unterminated"] is True and sides["thought-cut"]["scored_output"] == ""
    )
    assert "scored_output" not in sides["wrong"]
    assert sides["no-label"]["score"]["unparsed"] is True and sides["wrong"]["score"]["unparsed"] is False


@pytest.mark.usefixtures("bench")
def test_keep_reasoning_scores_the_whole_output(pytester: pytest.Pytester) -> None:
    """Whole, the thought's "negative" is the first label in the output: the right answer reads as wrong,
    which is what cutting the block off prevents."""
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "bench.jsonl", "-m", "not gate", "--llmeval-keep-reasoning"
    )
    result.assert_outcomes(passed=0, failed=4)
    doc = json.loads((pytester.path / "results.json").read_text())
    sides = {r["id"]: r["models"]["base"] for r in doc["benchmarks"][0]["rows"]}
    assert sides["thought-right"]["score"]["extracted"] == "negative"
    assert "scored_output" not in sides["thought-right"]


@pytest.mark.usefixtures("bench")
def test_other_tags_and_bad_tags(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl",
        "bench.jsonl",
        "-m",
        "not gate",
        "--llmeval-reasoning-tags=<t>,</t>",
    )
    result.assert_outcomes(passed=0, failed=4)  # <think> is not a tag now: scored whole
    bad = pytester.runpytest(
        "--llmeval-predictions=preds.jsonl", "bench.jsonl", "--llmeval-reasoning-tags=<t>"
    )
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--llmeval-reasoning-tags*expected OPEN,CLOSE*"])
