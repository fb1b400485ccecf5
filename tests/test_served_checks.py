"""Every value a server sends is checked where it enters, on every answer, not once at the probe (issue 53).

Each case is one that a server answering the start-up probe correctly got through before: log-probabilities of
+5 a token (a perplexity below 1, and better_than_base passed on it), all exactly 0 (a perplexity of exactly
1.00), -1e300 (an OverflowError traceback on every row), echoed tokens that do not spell the text sent (only
its first two, or three for a whole sentence: a perplexity of 1.01 with no warning), an answer from another
model, a text far longer than max_tokens (50 MB for a 16-token row), rows that errored counted as served from
the cache. The server is tests/vllm_format.py serving a tiny random Llama; its answers to a case's rows are
perturbed after the probe (`VllmFormat.perturb`). Each case is a benchmark file of its own, so one run holds
them all, each with its own gates; the run is made serially and with -n 2. tests/test_fault_campaign.py draws
such perturbations at random; these are the ones seen, kept as they were seen.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LEAN, build_tiny_model, jsonl
from vllm_format import VllmFormat, serve_vllm_format

from pytest_llmeval.endpoint import MAX_CHARS_PER_TOKEN
from pytest_llmeval.results_reader import read_results

pytestmark = pytest.mark.slow

TEXTS = [
    "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat.",
    "A journey of a thousand miles begins with a single step, said the old proverb.",
    "Rain fell on the quiet town all night, and the rivers rose by the morning light.",
    "She sells sea shells by the sea shore, and the shells she sells are surely seashells.",
]
WORKERS = pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])

Answer = dict[str, Any]
Change = Callable[[Answer], None]


def set_logprobs(value: float) -> Change:
    """Every echoed log-probability of the text replaced by `value` (the first, which has none, left)."""

    def change(answer: Answer) -> None:
        logprobs = answer["choices"][0]["logprobs"]
        logprobs["token_logprobs"] = [None if v is None else value for v in logprobs["token_logprobs"]]

    return change


def first_two(answer: Answer) -> None:
    """The echo's arrays cut to the text's first two tokens, kept aligned: a part scored as the whole."""
    logprobs = answer["choices"][0]["logprobs"]
    for name in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        logprobs[name] = logprobs[name][:2]


def three_tokens(answer: Answer) -> None:
    """Three tokens for a whole sentence, with real-looking numbers."""
    answer["choices"][0]["logprobs"] = {
        "tokens": ["The", " quick", " brown"],
        "token_logprobs": [None, -3.0, -2.0],
        "top_logprobs": [None, {" quick": -3.0}, {" brown": -2.0}],
        "text_offset": [0, 3, 9],
    }


def usage_off(answer: Answer) -> None:
    answer["usage"]["prompt_tokens"] += 1


def other_model(answer: Answer) -> None:
    answer["model"] = "some-org/other-model"


def flood(answer: Answer) -> None:
    if "message" in answer["choices"][0]:
        answer["choices"][0]["message"]["content"] += "x" * 5_000_000


def no_text(answer: Answer) -> None:
    answer["choices"][0]["message"]["content"] = None


# Each case: its benchmark file's name, the change made to its rows' answers, the kind of rows it holds.
CASES: dict[str, tuple[Change, str]] = {
    "positive": (set_logprobs(5.0), "perplexity"),
    "zero": (set_logprobs(0.0), "perplexity"),
    "huge": (set_logprobs(-1e300), "perplexity"),
    "firsttwo": (first_two, "perplexity"),
    "three": (three_tokens, "perplexity"),
    "usage": (usage_off, "perplexity"),
    "othermodel": (other_model, "both"),
    "flood": (flood, "generated"),
    "notext": (no_text, "generated"),
}
# What each case's rows' errors say (None: the rows are scored).
SAYS = {
    "positive": "is 5: positive, a probability above 1",
    "zero": "is exactly 0",
    "huge": "is -1e+300: below -100000",
    "firsttwo": "echoed tokens do not spell",
    "three": "2 echoed tokens do not spell",
    "usage": "usage counts",
    "othermodel": "came from model 'some-org/other-model', not 'smol'",
    "flood": None,
    "notext": "the response has no text",
}


def rows_of(case: str) -> list[dict[str, Any]]:
    kinds = CASES[case][1]
    out: list[dict[str, Any]] = []
    if kinds in ("perplexity", "both"):
        out += [
            {
                "id": f"{case}-p{i}",
                "instruction": "",
                "input": f"[[{case}]] {text}",
                "expected_output": "",
                "evaluation_type": "perplexity",
                "evaluation_config": {"threshold": 1e9},
            }
            for i, text in enumerate(TEXTS)
        ]
    if kinds in ("generated", "both"):
        out += [
            {
                "id": f"{case}-g{i}",
                "instruction": f"[[{case}]] Say {word}.",
                "input": "",
                "expected_output": word,
                "evaluation_type": "exact_match",
                "evaluation_config": {"max_new_tokens": 4},
            }
            for i, word in enumerate(("hello", "yes", "no"))
        ]
    return [r | {"difficulty": "easy"} for r in out]


def perturb(path: str, body: dict[str, Any], answer: Answer) -> Answer | None:
    """The change of the case whose marker the request holds, made to its correct answer."""
    found = re.search(r"\[\[(\w+)\]\]", json.dumps(body))
    if found is None or found.group(1) not in CASES:
        return None  # the start-up probe's requests, answered correctly
    CASES[found.group(1)][0](answer)
    return answer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("served-checks"), seed=3)


@pytest.fixture(scope="module")
def server(tiny: Path) -> Iterator[VllmFormat]:
    # Two ids of the same weights: a served base and a served column beside it.
    with serve_vllm_format(tiny, also={"smol-b": tiny}) as served:
        yield served


def run(pytester: pytest.Pytester, server: VllmFormat, *args: str) -> tuple[str, dict[str, Any]]:
    results = pytester.path / "results.json"
    results.unlink(missing_ok=True)
    server.perturb = perturb
    try:
        result = pytester.runpytest(
            "--llmeval-retries=0",
            "--llmeval-no-history",
            "--llmeval-no-cache",
            *LEAN,
            *args,
        )
    finally:
        server.perturb = None
    output = result.stdout.str() + result.stderr.str()
    assert result.ret in (0, 1), output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    return output, read_results(results)


@WORKERS
def test_impossible_values_from_a_server_are_row_errors_never_scores(
    pytester: pytest.Pytester, tiny: Path, server: VllmFormat, workers: list[str]
) -> None:
    """A served column beside the local base (the same weights), gated on positive.jsonl: every case's rows
    are errors naming the server and the check, or (flood) scored on a text cut to what max_tokens holds,
    with a note; the gate that stood on +5 a token does not pass; the rows that errored without the cache
    are not counted as served from it."""
    for case in CASES:
        pytester.makefile(".jsonl", **{case: jsonl(rows_of(case))})
    args = [
        f"--base-model={tiny}",
        f"--llmeval-model=served=smol@{server.base_url}",
        "--llmeval-gate-model=served",
        "--llmeval-domain=served=positive.jsonl",
        "--llmeval-dtype=float32",
        *workers,
        *(f"{case}.jsonl" for case in CASES),
    ]
    _, document = run(pytester, server, *args)
    benchmarks = {Path(b["benchmark_file"]).stem: b for b in document["benchmarks"]}
    assert set(benchmarks) == set(CASES)
    for case, says in SAYS.items():
        for row in benchmarks[case]["rows"]:
            if says is None:
                continue
            error = row["error"]
            assert error is not None and says in error, (case, error)
            assert server.base_url in error and "\n" not in error, (case, error)
            assert "served" not in row["models"], (case, row["models"])  # no score built on it
    # The local base measured every perplexity row; the served column none: no verdict stands on +5.
    assert benchmarks["positive"]["gates"]["better_than_base"]["status"] != "pass"
    assert document["complete"] is False
    for row in benchmarks["flood"]["rows"]:
        side = row["models"]["served"]
        assert len(side["output"]) <= 4 * MAX_CHARS_PER_TOKEN
        assert side["notes"] and "cut to 1,024" in side["notes"][0], side
    assert (pytester.path / "results.json").stat().st_size < 500_000
    spent = document["cost"]["benchmarks"]["notext.jsonl"]["served"]
    assert spent["cached_rows"] == 0 and spent["rows"] == 3, spent


@WORKERS
def test_a_served_column_beside_a_served_base_passes_no_gate_on_positive_values(
    pytester: pytest.Pytester, server: VllmFormat, workers: list[str]
) -> None:
    """Both columns served (--llmeval-endpoint): the column whose server sends +5 a token errs, and its
    better_than_base (p=1.4e-06 before) does not pass."""
    pytester.makefile(".jsonl", positive=jsonl(rows_of("positive")))

    def only_b(path: str, body: dict[str, Any], answer: Answer) -> Answer | None:
        return perturb(path, body, answer) if body.get("model") == "smol-b" else None

    server.perturb = only_b
    results = pytester.path / "results.json"
    try:
        pytester.runpytest(
            f"--llmeval-endpoint={server.base_url}",
            "--base-model=smol",
            "--llmeval-model=b=smol-b",
            "--llmeval-gate-model=b",
            "--llmeval-domain=b=positive.jsonl",
            "--llmeval-no-cache",
            "--llmeval-no-history",
            *LEAN,
            *workers,
            "positive.jsonl",
        )
    finally:
        server.perturb = None
    document = read_results(results)
    rows = document["benchmarks"][0]["rows"]
    assert all("positive" in str(r["error"]) for r in rows), [r["error"] for r in rows]
    assert document["benchmarks"][0]["gates"]["better_than_base"]["status"] != "pass"


def test_a_served_perplexity_run_passes_check(pytester: pytest.Pytester, server: VllmFormat) -> None:
    """Every served perplexity row wrote `"scripts": null`, which the validating reader refused: `check`
    exited 2 on a run with no gate at fault, and `view` and `history` passed the run over."""
    rows = [r | {"input": r["input"].replace("[[positive]] ", "")} for r in rows_of("positive")]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    pytester.runpytest(
        f"--llmeval-endpoint={server.base_url}",
        "--base-model=smol",
        "--llmeval-no-cache",
        "-p",
        "no:cacheprovider",
        "bench.jsonl",
    )
    document = read_results(pytester.path / "results.json")
    assert all(r["error"] is None for r in document["benchmarks"][0]["rows"])
    checked = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "check", str(pytester.path / "results.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr


def test_docs_list_every_served_check() -> None:
    """docs/benchmarks.md's table of bad input during a run holds each case's line as these tests see it."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    table = page[page.index("| bad input during a run |") :]
    missing = [says for says in SAYS.values() if says is not None and says not in table]
    assert not missing, f"docs/benchmarks.md's table of bad input during a run lacks: {missing}"
