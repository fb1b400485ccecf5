"""The fault campaign (issue 53): a server that answers the start-up probe correctly, then gets one field of
one answer wrong, must never produce a score built on the wrong value, nor a traceback.

The server is tests/vllm_format.py (vLLM's format, every number from a real model: a tiny random Llama as the
served model, and a tiny judge model that answers "Score: 4"), its answers perturbed by tests/perturb.py. A
benchmark holds rows of every kind a served column runs (generated, perplexity, windowed perplexity over
multi-byte text, multiple choice under the server's chat template and under a template of the run's, judged),
each marked so the server knows which row a request belongs to. Hypothesis draws, for every row of a run, no
perturbation or one (a field of that row's kind of answer, a way to get it wrong, and where), and the run is
made serially and with -n 2. Every row must then end:

- as it ended without any perturbation, to the last digit (the perturbed value was not one it used), or
- as a row error of one line that names the server (127.0.0.1), or
- for a text far longer than max_tokens allows: cut, with a note saying so;

and the run must end with no traceback, exit 0 or 1, and a results.json its own reader reads.

In the normal suite a few derandomised examples run (each perturbs several rows at once); the long form
(`LLMEVAL_CAMPAIGN_EXAMPLES=2000`, TESTING.md) runs as many as asked with fresh randomness.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers import LEAN, build_judge_model, build_tiny_model, jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from perturb import CHOICE, ECHO, GENERATE, Perturbation, every_perturbation, kind_of, marker, row_of
from vllm_format import VllmFormat, serve_vllm_format

from pytest_llmeval.endpoint import MAX_CHARS_PER_TOKEN
from pytest_llmeval.results_reader import read_results

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("LLMEVAL_CAMPAIGN_EXAMPLES", "0"))
# The long form's benchmark holds its rows this many times over (each copy marked apart, each perturbed on
# its own): a run pair's cost is mostly pytest's and -n 2's start-up, so a draw of 4 copies checks about 4
# times as many perturbations for about 1.5 times the time (TESTING.md).
COPIES = int(os.environ.get("LLMEVAL_CAMPAIGN_COPIES", "1"))
LOG = os.environ.get("LLMEVAL_CAMPAIGN_LOG")  # a JSONL file: each run's perturbations and how each ended
JUDGE = "judge"  # the judge's model id, and the kind of its answers (GENERATE, to the judge model)
MAX_NEW_TOKENS = 4


def rows(copies: int) -> list[tuple[str, dict[str, Any]]]:
    """(the kinds of answer its requests get, the row) for each row of the campaign's benchmark."""
    out: list[tuple[str, dict[str, Any]]] = []
    for _ in range(copies):
        one_copy(out)
    return out


def one_copy(out: list[tuple[str, dict[str, Any]]]) -> None:
    """Every kind of row a served column runs, once, each marked with its index in `out`."""

    def add(kinds: str, row: dict[str, Any]) -> None:
        index = len(out)
        row["id"] = f"r{index:03d}"
        row.setdefault("difficulty", "easy")
        out.append((kinds, row))

    for word in ("hello", "yes", "no"):
        add(
            GENERATE,
            {
                "instruction": f"Say {word}. {marker(len(out))}",
                "input": "",
                "expected_output": word,
                "evaluation_type": "exact_match",
                "evaluation_config": {"max_new_tokens": MAX_NEW_TOKENS},
            },
        )
    for text, config in (
        ("The quick brown fox jumps over the lazy dog.", {}),
        ("Rain fell on the quiet town all night long.", {}),
        ("日本語の文章を読みます。東京は日本の首都です。", {}),  # tokens that are bytes of one character
        ("One two three four five six seven eight nine ten eleven twelve.", {"max_length": 8, "stride": 4}),
    ):
        add(
            ECHO,
            {
                "instruction": "",
                "input": f"{marker(len(out))} {text}",
                "expected_output": "",
                "evaluation_type": "perplexity",
                "evaluation_config": {"threshold": 1e9, **config},
            },
        )
    for question, answer, options, template in (
        ("Which is a fruit?", "apple", ["apple", "car"], None),
        ("What is the capital of France?", "Paris", ["London", "Paris", "Berlin"], None),
        ("Which is a colour?", "red", ["red", "run"], "Question: {{ instruction }}\nAnswer:"),
        ("Which is an animal?", "cat", ["cat", "cup", "cap"], "Q: {{ instruction }}\nA:"),
    ):
        config: dict[str, Any] = {"choices": options}
        if template is not None:
            config["prompt_template"] = template
        add(
            CHOICE if template is None else ECHO,
            {
                "instruction": f"{marker(len(out))} {question}",
                "input": "",
                "expected_output": answer,
                "evaluation_type": "multiple_choice",
                "evaluation_config": config,
            },
        )
    for task in ("Greet the reader.", "Thank the reader."):
        add(
            f"{GENERATE}+{JUDGE}",
            {
                "instruction": f"{task} {marker(len(out))}",
                "input": "",
                "expected_output": "Hello!",
                "evaluation_type": "llm_judge",
                "evaluation_config": {
                    "rubric": "A friendly answer scores high.",
                    "runs": 2,
                    "judge_max_new_tokens": 8,
                    "max_new_tokens": MAX_NEW_TOKENS,
                },
            },
        )


ROWS = rows(COPIES)


@dataclass
class Plan:
    """Which row's answers are perturbed how, and which perturbations the server applied."""

    perturbed: dict[int, Perturbation] = field(default_factory=dict)
    applied: set[int] = field(default_factory=set)

    def hook(self, path: str, body: dict[str, Any], answer: dict[str, Any]) -> Any:
        index = row_of(body)
        if index is None or index not in self.perturbed:
            return None  # the probe's requests, a window's token ids, a row left alone
        kind = JUDGE if body.get("model") == JUDGE else kind_of(path, body)
        chosen = self.perturbed[index]
        if chosen.kind != kind:
            return None
        self.applied.add(index)
        return chosen.apply(answer)


def perturbations_of(kinds: str) -> st.SearchStrategy[Perturbation]:
    """Any one perturbation of any kind of answer a row's requests get."""
    options = [
        (kind, field_, how)
        for kind in kinds.split("+")
        for field_, how in every_perturbation(GENERATE if kind == JUDGE else kind)
    ]
    return st.builds(
        lambda chosen, at: Perturbation(chosen[0], chosen[1], chosen[2], at),
        st.sampled_from(options),
        st.integers(0, 50),
    )


PLANS = st.tuples(*(st.one_of(st.none(), perturbations_of(kinds)) for kinds, _ in ROWS))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmFormat]:
    model = build_tiny_model(tmp_path_factory.mktemp("campaign-model"), seed=5)
    judge = build_judge_model(tmp_path_factory.mktemp("campaign-judge"), endings=("4",))
    with serve_vllm_format(model, also={JUDGE: judge}) as server:
        yield server


def run(pytester: pytest.Pytester, server: VllmFormat, *more: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makefile(".jsonl", bench=jsonl([r for _, r in ROWS]))
    results = pytester.path / "results.json"
    results.unlink(missing_ok=True)
    result = pytester.runpytest(
        f"--llmeval-endpoint={server.base_url}",
        "--base-model=smol",
        f"--llmeval-judge-model={JUDGE}",
        "--llmeval-retries=0",
        "--llmeval-no-cache",
        "--llmeval-no-history",
        *LEAN,
        "-m",
        "not gate",
        *more,
        "bench.jsonl",
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.ret in (0, 1), output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    return result, read_results(results)


def by_row(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for b in document["benchmarks"] for r in b["rows"]}


def check(row: dict[str, Any], before: dict[str, Any], perturbation: Perturbation | None) -> str:
    """A row of a perturbed run ended as it did before ("same"), or as a one-line error naming the server
    ("error"), or (a text far longer than max_tokens allows) cut with a note ("cut"): which one."""
    where = f"{row['id']} under {perturbation}"
    if row["error"] is not None:
        assert perturbation is not None, f"{where}: an unperturbed row errored: {row['error']}"
        assert "\n" not in row["error"] and "Traceback" not in row["error"], where
        assert "127.0.0.1" in row["error"], f"{where}: the error does not name the server: {row['error']}"
        return "error"
    assert row["skipped"] is None, f"{where}: skipped: {row['skipped']}"
    if perturbation is not None and perturbation.how == "oversized":
        size = len(json.dumps(row))
        assert size < 64 * MAX_CHARS_PER_TOKEN * MAX_NEW_TOKENS, f"{where}: a row of {size} characters"
        if row["models"] != before["models"]:
            sides = row["models"].values()
            noted = any(s.get("notes") for s in sides) or "'note'" in repr(row["models"])
            assert noted, f"{where}: its output changed with no note"
            return "cut"
    assert row["models"] == before["models"], f"{where}: scored on a perturbed value"
    return "same"


def campaign(
    pytester: pytest.Pytester, server: VllmFormat, before: dict[str, dict[str, Any]], plan: Plan
) -> None:
    for workers in ([], ["-n", "2"]):
        plan.applied.clear()
        server.perturb = plan.hook
        try:
            _, document = run(pytester, server, *workers)
        finally:
            server.perturb = None
        found = by_row(document)
        assert set(found) == set(before)
        outcomes = {}
        for index, (_, row) in enumerate(ROWS):
            chosen = plan.perturbed.get(index)
            ended = check(found[row["id"]], before[row["id"]], chosen if index in plan.applied else None)
            if chosen is not None and index in plan.applied:
                outcomes[f"{row['id']} {chosen}"] = ended  # by row: two rows perturbed alike count twice
        if LOG is not None:  # the long form's record (TESTING.md): every perturbation and how it ended
            with open(LOG, "a", encoding="utf-8") as out:
                out.write(json.dumps({"workers": " ".join(workers) or "serial", "ended": outcomes}) + "\n")


def test_the_unperturbed_rows_are_all_scored(pytester: pytest.Pytester, served: VllmFormat) -> None:
    """The campaign's control: without a perturbation every row is scored, so that a row error in the
    campaign can only come from its perturbation. (Every campaign run, serial or -n 2, holds its rows left
    alone to these, to the last digit.)"""
    _, serial = run(pytester, served)
    assert [r["error"] for r in by_row(serial).values()] == [None] * len(ROWS)
    CONTROL.update(by_row(serial))


CONTROL: dict[str, dict[str, Any]] = {}


@settings(
    max_examples=EXAMPLES or 4,
    derandomize=not EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=PLANS)
def test_a_perturbed_answer_is_a_row_error_never_a_score(
    pytester: pytest.Pytester, served: VllmFormat, plan: tuple[Perturbation | None, ...]
) -> None:
    if not CONTROL:
        _, serial = run(pytester, served)
        CONTROL.update(by_row(serial))
    chosen = Plan({i: p for i, p in enumerate(plan) if p is not None})
    campaign(pytester, served, CONTROL, chosen)
