"""The pure parts of lm-eval's scoring that converted rows reproduce, against lm-eval 0.4.13's own functions:
rolling windows, TruthfulQA MC2's probability share, the metrics' aggregations, a group's aggregate and its
pooled standard error, and the lm-eval scores of a multiple-choice row with several right answers. lm-eval
is the oracle here; no model is loaded."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmeval.continuations import rolling_windows
from pytest_llmeval.scorers import loglikelihood, multiple_choice
from pytest_llmeval.scorers import perplexity as ppl_scorer
from pytest_llmeval.summaries import lm_eval_aggregate, lm_eval_groups


@settings(max_examples=200, deadline=None)
@given(
    tokens=st.lists(st.integers(min_value=3, max_value=50), min_size=0, max_size=60),
    max_length=st.integers(min_value=1, max_value=17),
)
def test_rolling_windows_are_lm_evals(tokens: list[int], max_length: int) -> None:
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    theirs = [
        make_disjoint_window(w)
        for w in get_rolling_token_windows(tokens, prefix_token=1, max_seq_len=max_length, context_len=1)
    ]
    mine = rolling_windows(tokens, 1, max_length)
    assert mine == [(list(a), list(b)) for a, b in theirs]
    # Every token scored once, in order; no window reads more than the model's window.
    assert [t for _, cont in mine for t in cont] == tokens
    assert all(len(ctx) + len(cont) - 1 <= max_length for ctx, cont in mine)


@settings(max_examples=200, deadline=None)
@given(
    lls=st.lists(st.floats(min_value=-60, max_value=0), min_size=2, max_size=8),
    data=st.data(),
)
def test_gold_mass_is_truthfulqa_mc2s_process_results(lls: list[float], data: Any) -> None:
    from lm_eval.tasks.truthfulqa.utils import process_results_mc2

    true = data.draw(st.integers(min_value=1, max_value=len(lls) - 1))
    labels = [1] * true + [0] * (len(lls) - true)
    doc = {"mc2_targets": {"labels": labels}}
    theirs = process_results_mc2(doc, [(ll, False) for ll in lls])["acc"]
    assert multiple_choice.gold_mass(lls, list(range(true))) == theirs


def test_several_right_answers_score_as_lm_evals_multiple_target() -> None:
    """acc: the most likely choice is one of the right ones (lm-eval's `pred in gold`); acc_norm by length."""
    config = {"choices": ["a", "bbbb", "cc"], "answer_indices": [1, 2], "lm_eval": {}}
    multiple_choice.validate_config(config)
    measured = {
        "choices": [
            {"text": "a", "nll": 1.0, "n_tokens": 1, "n_chars": 1},
            {"text": "bbbb", "nll": 2.0, "n_tokens": 1, "n_chars": 4},
            {"text": "cc", "nll": 3.0, "n_tokens": 1, "n_chars": 2},
        ],
        "expected_index": 1,
    }
    score = multiple_choice.score_measurement(measured, config)
    assert score.value == 0.0  # "a" is the most likely, and it is not right
    assert score.details["lm_eval"] == {"acc": 0.0, "acc_norm": 1.0, "acc_bytes": 1.0}  # -0.5 per char
    assert score.details["expected_indices"] == [1, 2]
    mass = multiple_choice.score_measurement(measured, {**config, "gold_mass": True})
    share = (math.exp(-2) + math.exp(-3)) / (math.exp(-1) + math.exp(-2) + math.exp(-3))
    assert mass.value == pytest.approx(share) and mass.threshold == multiple_choice.GOLD_MASS_PASS
    assert not mass.passed  # under half the probability on the right answers


@pytest.mark.parametrize(
    "config",
    [
        {"choices": ["a", "b"], "answer_index": 0, "answer_indices": [0]},
        {"choices": ["a", "b"], "answer_indices": [0, 0]},
        {"choices": ["a", "b"], "answer_indices": [2]},
        {"choices": ["a", "b"], "gold_mass": True},
        {"choices": ["a", "b"], "answer_index": 0, "choices_in_context": True},
        {"choices": ["a", "b"], "answer_index": 0, "prompt_mode": "completion", "continuation": "x"},
        {
            "choices": ["a", "b"],
            "answer_index": 0,
            "prompt_mode": "completion",
            "choices_in_context": True,
            "continuation": "x",
            "normalize": "char",
        },
    ],
)
def test_bad_multiple_choice_keys_are_refused(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        multiple_choice.validate_config(config)


def test_a_choice_in_the_context_is_followed_by_the_continuation() -> None:
    config = {
        "choices": ["cup", "box"],
        "answer_index": 0,
        "prompt_mode": "completion",
        "target_delimiter": " ",
        "choices_in_context": True,
        "continuation": "was too big.",
    }
    multiple_choice.validate_config(config)
    assert multiple_choice.option_pair(config, "It did not fit because the ", "box") == (
        "It did not fit because the box",
        " was too big.",
    )
    plain = {"choices": ["A", "B"], "prompt_mode": "completion", "target_delimiter": " "}
    assert multiple_choice.option_pair(plain, "Answer:", "B") == ("Answer:", " B")


@settings(max_examples=100, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.floats(min_value=-500, max_value=-0.01), st.integers(min_value=1, max_value=400)),
        min_size=1,
        max_size=20,
    )
)
def test_aggregations_are_lm_evals(items: list[tuple[float, int]]) -> None:
    from lm_eval.api import metrics

    lls = [ll for ll, _ in items]
    assert lm_eval_aggregate("mean", lls) == metrics.mean(lls)
    assert lm_eval_aggregate("perplexity", lls) == metrics.perplexity(lls)
    assert lm_eval_aggregate("weighted_perplexity", items) == metrics.weighted_perplexity(items)
    assert lm_eval_aggregate("bits_per_byte", items) == metrics.bits_per_byte(items)


def test_a_groups_aggregate_is_lm_evals_weighted_mean_and_pooled_stderr() -> None:
    from lm_eval.api.metrics import aggregate_subtask_metrics, pooled_sample_stderr, unweighted_mean_stderr

    def block(task: str, acc: float, stderr: float, n: int, weighted: bool) -> dict[str, Any]:
        group = {
            "group": "g",
            "version": "2",
            "aggregate": [{"metric": "acc", "weight_by_size": weighted}],
            "tasks": ["t1", "t2", "t3"],
        }
        return {"task": task, "groups": [group], "base": {"n": n, "acc": acc, "acc_stderr": stderr}}

    figures = [("t1", 0.5, 0.1, 20), ("t2", 0.25, 0.08, 30)]
    for weighted in (True, False):
        found = lm_eval_groups([block(*f, weighted) for f in figures])
        assert found is not None
        group = found["g"]
        assert group["missing"] == ["t3"] and group["tasks"] == ["t1", "t2"]
        accs, errors, sizes = [f[1] for f in figures], [f[2] for f in figures], [f[3] for f in figures]
        assert group["base"]["acc"] == aggregate_subtask_metrics(accs, sizes, weighted)
        expected = pooled_sample_stderr(errors, sizes) if weighted else unweighted_mean_stderr(errors)
        assert group["base"]["acc_stderr"] == pytest.approx(float(expected), rel=1e-12)
        assert group["base"]["n"] == 50
    assert lm_eval_groups([{"task": "t", "base": {"n": 1, "acc": 1.0}}]) is None


def test_a_loglikelihood_row_passes_when_its_continuation_is_greedy() -> None:
    config = {"continuation": " dog", "prompt_mode": "completion", "lm_eval": {"task": "lambada_openai"}}
    loglikelihood.validate_config(config)
    measured = {"choices": [{"text": " dog", "nll": 0.75, "n_tokens": 1, "n_chars": 4, "greedy": True}]}
    score = loglikelihood.score_measurement(measured, config)
    assert score.passed and score.details["lm_eval"] == {"perplexity": -0.75, "acc": 1}
    missed = {"choices": [{**measured["choices"][0], "greedy": False}]}
    assert not loglikelihood.score_measurement(missed, config).passed
    for bad in ({"continuation": ""}, {"prompt_mode": "raw"}, {"lm_eval": "x"}, {"other": 1}):
        with pytest.raises(ValueError):
            loglikelihood.validate_config(bad)


def test_a_converted_rolling_row_records_lm_evals_items_and_needs_no_threshold() -> None:
    origin = {"metrics": ["word_perplexity", "bits_per_byte"], "word_count": 12, "byte_count": 70}
    config = {"rolling": True, "lm_eval": origin}
    ppl_scorer.validate_config(config)
    score = ppl_scorer.score_measurement({"nll": 30.5, "perplexity": 9.0}, config)
    assert score.passed
    assert score.details["lm_eval"] == {"word_perplexity": [-30.5, 12], "bits_per_byte": [-30.5, 70]}
    for bad in (
        {"rolling": True},
        {"rolling": True, "threshold": 5, "max_length": 8},
        {"rolling": "yes", "threshold": 5},
    ):
        with pytest.raises(ValueError):
            ppl_scorer.validate_config(bad)


def test_the_terminal_summary_shows_tasks_and_groups_as_lm_eval_reports_them() -> None:
    from pytest_llmeval.reporting.summary import _lm_eval_group_lines, _lm_eval_lines

    block = {
        "task": "gsm8k",
        "version": 3.0,
        "num_fewshot": 5,
        "lm_eval_version": "0.4.13",
        "base": {"n": 25, "exact_match,strict-match": 0.04, "exact_match_stderr,strict-match": 0.04},
    }
    assert _lm_eval_lines(block) == [
        "  lm-eval gsm8k v3.0 (5-shot, lm-eval 0.4.13): base exact_match,strict-match 4.0% ± 4.0"
    ]
    rolling = {"task": "wikitext", "version": 2.0, "num_fewshot": 0, "lm_eval_version": "0.4.13"}
    rolling["base"] = {"n": 20, "word_perplexity": 24.8219, "bits_per_byte": 0.93274}
    assert _lm_eval_lines(rolling)[0].endswith("base word_perplexity 24.822, bits_per_byte 0.933")
    assert _lm_eval_lines({"tasks": {"a": {}, "b": {}}}) == [
        "  lm-eval: 2 tasks in one file (each in results.json; the group below)"
    ]
    groups = {
        "g": {
            "tasks": ["a", "b"],
            "missing": ["c"],
            "base": {"n": 40, "acc": 0.5, "acc_stderr": 0.08},
            "adapter": {"n": 40, "acc": 0.25, "acc_stderr": 0.07},
        }
    }
    assert _lm_eval_group_lines(groups) == [
        "lm-eval group g (2 tasks): base acc 50.0% ± 8.0; adapter acc 25.0% ± 7.0; NOT lm-eval's figure: 1 "
        "of its tasks did not run"
    ]
