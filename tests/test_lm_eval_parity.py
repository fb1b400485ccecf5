"""lm-eval tasks converted and run on the embedded model give lm-eval 0.4.13's own numbers, row by row
(issue 54): every output type's rows against lm-eval's per-sample logs of the same task on the same data,
recorded by `make lm-eval-logs` (tests/data/lm_eval/logs/). That the recordings are still what lm-eval does
is tests/test_lm_eval_tasks.py's live test; the comparison itself is tests/lm_eval_checks.py.
"""

from __future__ import annotations

import pytest
from lm_eval_checks import check_aggregates, check_rows, convert, lm_eval_imported, recorded, run  # noqa: F401

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("task", "shots"),
    [
        ("arc_easy", 2),
        ("arc_challenge", 5),
        ("hellaswag", 0),  # its documents through process_docs (a !function of lm-eval's)
        ("piqa", 1),
        ("boolq", 1),
        ("mmlu_astronomy", 5),  # a description, and first_n examples from its dev split
        ("winogrande", 5),  # multiple_input: each choice completes the context, one continuation after
        ("truthfulqa_mc2", 0),  # its process_results: the true answers' share of the probability
        ("lambada_openai", 0),  # loglikelihood: the last word's log-likelihood, and whether it is greedy
        ("wikitext", 0),  # loglikelihood_rolling: every token once, weighted by words and bytes
        ("mmlu_social_sciences", 5),  # a group: 12 subjects in one file, the group's aggregate
    ],
)
def test_a_converted_task_scores_as_lm_eval_scored_it(
    pytester: pytest.Pytester, task: str, shots: int
) -> None:
    theirs, results = recorded(task, shots)
    rows = convert(pytester.path / "bench", task, f"--num-fewshot={shots}")
    assert len(rows) == sum(len(docs) for docs in theirs.values()) >= 20
    for row in rows:
        origin = row["evaluation_config"]["lm_eval"]
        assert origin["lm_eval_version"] == "0.4.13"
        assert origin["num_fewshot"] == results[origin["task"]]["n-shot"]
    document = run(pytester, task)
    found = check_rows(rows, document, theirs)
    check_aggregates(rows, document, results, found)
