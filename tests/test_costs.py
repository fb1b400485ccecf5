"""What a run cost, and the caps that stop it: tokens read and generated per model and benchmark (counted
where they were generated, 0 for an output served from the cache), seconds, rows per second, dollars for
priced served models; --llmeval-max-tokens and --llmeval-max-cost stop sending rows once spent, and the run
ends incomplete with every finished row kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer
from helpers import jsonl, model_args, row
from hypothesis import given, settings
from hypothesis import strategies as st
from test_endpoints import KEY, served_args

from pytest_llmeval.costs import (
    Budget,
    Price,
    PriceError,
    merge_spent,
    parse_prices,
    run_cost,
    side_cost,
    summarize,
    summary_line,
)

pytest_plugins = ["pytester"]

# --- the arithmetic --------------------------------------------------------------------------------------


def test_prices_are_per_million_tokens() -> None:
    prices = parse_prices(
        {"gpt-x": {"prompt": 0.15, "completion": 0.6}, "free": {"prompt": 0, "completion": 0}}, "t"
    )
    assert prices["gpt-x"].usd(1_000_000, 0) == pytest.approx(0.15)
    assert prices["gpt-x"].usd(2000, 500) == pytest.approx((2000 * 0.15 + 500 * 0.6) / 1e6)
    assert prices["free"] == Price(0.0, 0.0)


@pytest.mark.parametrize(
    "table, message",
    [
        ([1, 2], "must be a table"),
        ({"m": 0.5}, "'m' must be {prompt"),
        ({"m": {"prompt": 1}}, "'m' must be {prompt"),
        ({"m": {"prompt": -1, "completion": 1}}, "prompt must be a price of 0 or more"),
        ({"m": {"prompt": 1, "completion": "1"}}, "completion must be a price"),
        ({"m": {"prompt": True, "completion": 1}}, "prompt must be a price"),
        ({"m": {"prompt": float("nan"), "completion": 1}}, "prompt must be a price"),
    ],
)
def test_a_bad_price_table_says_where(table: Any, message: str) -> None:
    with pytest.raises(PriceError, match=r"pyproject\.toml"):
        parse_prices(table, "pyproject.toml [tool.llmeval.prices]")
    with pytest.raises(PriceError) as info:
        parse_prices(table, "src")
    assert message in str(info.value)


def test_summaries_add_up() -> None:
    price = Price(prompt=1.0, completion=2.0)
    costs = [
        side_cost(prompt_tokens=10, generated_tokens=5, cached=False, seconds=0.5, price=price),
        side_cost(prompt_tokens=0, generated_tokens=0, cached=True, seconds=0.0, price=price),
        {**side_cost(prompt_tokens=None, generated_tokens=None, cached=False, seconds=1.0), "scoring_s": 0.5},
    ]
    total = summarize(costs)
    assert total["rows"] == 3 and total["cached_rows"] == 1 and total["uncounted_rows"] == 1
    assert (total["prompt_tokens"], total["generated_tokens"]) == (10, 5)
    assert total["generation_s"] == 1.5 and total["scoring_s"] == 0.5
    assert total["rows_per_s"] == pytest.approx(3 / 2.0)
    assert total["usd"] == pytest.approx((10 * 1 + 5 * 2) / 1e6)
    assert summarize([])["rows_per_s"] is None and summarize([])["prompt_tokens"] is None


def record(nodeid: str, bench: str, cost: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"nodeid": nodeid, "benchmark": {"name": bench}, "cost": cost}


def cost_of(prompt: int, generated: int, seconds: float = 1.0) -> dict[str, Any]:
    return side_cost(prompt_tokens=prompt, generated_tokens=generated, cached=False, seconds=seconds)


def test_run_cost_per_model_and_benchmark() -> None:
    records = [
        record("a.jsonl::1", "a.jsonl", {"base": cost_of(3, 1), "adapter": cost_of(3, 2)}),
        record("a.jsonl::2", "a.jsonl", {"base": cost_of(4, 1), "adapter": cost_of(4, 4)}),
        record("b.jsonl::1", "b.jsonl", {"base": cost_of(7, 7)}),
        {"nodeid": "b.jsonl::2", "benchmark": {"name": "b.jsonl"}},  # skipped: it cost nothing
    ]
    spent = merge_spent(
        [
            {"load_s": {"base": 1.5}, "caps": None, "stopped": None},
            {"load_s": {"base": 2.0, "full": 3.0}, "caps": {"max_tokens": 9}, "stopped": "cap reached"},
            {"load_s": {}, "caps": {"max_tokens": 9}, "stopped": "cap reached"},
        ]
    )
    cost = run_cost(records, spent)
    assert cost["benchmarks"]["a.jsonl"]["adapter"]["generated_tokens"] == 6
    assert cost["benchmarks"]["b.jsonl"]["base"]["prompt_tokens"] == 7
    assert cost["models"]["base"]["prompt_tokens"] == 14 and cost["models"]["base"]["rows"] == 3
    assert cost["models"]["base"]["load_s"] == 3.5
    assert cost["total"]["load_s"] == 6.5 and cost["total"]["prompt_tokens"] == 21
    assert cost["stopped"] == "cap reached" and cost["caps"] == {"max_tokens": 9}
    line = summary_line(cost)
    assert line is not None and line.startswith("cost: base 14 prompt + 9 generated tokens, 3.0 s")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 50), st.integers(0, 50), st.booleans()),
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_run_cost_does_not_depend_on_record_order(rows: list[tuple[str, int, int, bool]], rnd: Any) -> None:
    records = [
        record(
            f"{bench}::{i}",
            bench,
            {"base": side_cost(prompt_tokens=p, generated_tokens=g, cached=c, seconds=0.1)},
        )
        for i, (bench, p, g, c) in enumerate(rows)
    ]
    shuffled = list(records)
    rnd.shuffle(shuffled)
    assert json.dumps(run_cost(records, None)) == json.dumps(run_cost(shuffled, None))
    total = run_cost(records, None)["total"]
    assert total["prompt_tokens"] == (sum(p for _, p, _, _ in rows) if rows else None)


def test_a_budget_stops_at_its_share() -> None:
    budget = Budget(max_tokens=100, share=2)
    assert budget.exhausted() is None
    budget.spend(49)
    assert budget.exhausted() is None
    budget.spend(1)
    reason = budget.exhausted()
    assert (
        reason is not None
        and "--llmeval-max-tokens 100 reached (this worker's 1/2 share): 50 tokens" in reason
    )
    money = Budget(max_usd=0.01)
    money.spend(10, usd=0.004)
    assert money.exhausted() is None
    money.spend(10, usd=0.006)
    assert "--llmeval-max-cost 0.01 reached: $0.0100 spent" in str(money.exhausted())
    assert Budget().exhausted() is None  # no cap


# --- counting tokens where they are generated ---------------------------------------------------------------


@pytest.mark.slow
def test_generate_counts_what_it_read_and_wrote(real_model: Any) -> None:
    """generate()'s counts equal transformers' own generate(): the prompt's tokens, and the new tokens with
    the EOS that ended the answer (a row cut at its limit has no EOS)."""
    import torch

    from pytest_llmeval.generation import Tokens, build_prompt, generate

    tok = real_model.tokenizer
    prompts = [build_prompt(tok, q) for q in ("Say hi.", "Count from one to twenty, in words.")]
    counts = Tokens()
    generate(real_model.model, tok, prompts, max_new_tokens=[40, 6], batch_size=2, counts=counts)
    for i, (prompt, limit) in enumerate(zip(prompts, (40, 6), strict=True)):
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = real_model.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=limit,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        assert counts.prompt[i] == ids.shape[1]
        assert counts.generated[i] == out.shape[1] - ids.shape[1]
    assert counts.generated[0] < 40 and counts.generated[1] == 6  # one ended at EOS, one at its limit


# --- a run's cost, end to end -------------------------------------------------------------------------


def prompt_tokens(tiny_model: Path, instructions: list[str]) -> int:
    from pytest_llmeval.generation import build_prompt
    from pytest_llmeval.models import load_tokenizer

    tok = load_tokenizer(tiny_model)
    return sum(len(tok(build_prompt(tok, i), add_special_tokens=False)["input_ids"]) for i in instructions)


def test_a_run_reports_its_cost(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, tmp_path: Path
) -> None:
    one = [row(f"a{i}", instruction=f"Question {i}?") for i in range(3)]
    two = [row(f"b{i}", instruction=f"Other question {i}, longer.") for i in range(2)]
    pytester.makefile(".jsonl", one=jsonl(one), two=jsonl(two))
    args = [*model_args(tiny_model, tiny_adapter, cache=tmp_path / "cache"), "--llmeval-html=report.html"]
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(["cost: base * prompt + * generated tokens, * s (* rows/s); adapter *"])
    cost = json.loads((pytester.path / "results.json").read_text())["cost"]
    for column in ("base", "adapter"):
        for bench, rows in (("one.jsonl", one), ("two.jsonl", two)):
            spent = cost["benchmarks"][bench][column]
            assert spent["rows"] == len(rows) and spent["cached_rows"] == 0
            assert spent["prompt_tokens"] == prompt_tokens(tiny_model, [r["instruction"] for r in rows])
            assert len(rows) <= spent["generated_tokens"] <= 4 * len(rows)  # max_new_tokens 4
            assert spent["generation_s"] > 0 and spent["scoring_s"] > 0 and spent["rows_per_s"] > 0
    assert cost["models"]["base"]["load_s"] > 0 and cost["stopped"] is None
    assert "What the run cost" in (pytester.path / "report.html").read_text()
    # The same run again: every output comes from the cache, and nothing is spent.
    pytester.runpytest(*args, "--llmeval-results=again.json")
    again = json.loads((pytester.path / "again.json").read_text())["cost"]
    assert again["models"]["base"]["cached_rows"] == 5
    assert again["total"]["prompt_tokens"] == 0 and again["total"]["generated_tokens"] == 0
    assert again["models"]["base"]["load_s"] == 0  # no weights were loaded


ROWS = 8


def capped_run(pytester: pytest.Pytester, args: list[str], *more: str) -> dict[str, Any]:
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}", instruction=f"Say {i}.") for i in range(ROWS)]))
    result = pytester.runpytest(*args, "--llmeval-batch-size=2", "--llmeval-max-tokens=1", *more)
    outcomes = result.parseoutcomes()
    doc: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    rows = doc["benchmarks"][0]["rows"]
    run = [r for r in rows if r["skipped"] is None]
    stopped = [r for r in rows if r["skipped"] is not None]
    # Each process runs its first chunk of 2 rows (the cap is checked before a chunk), then stops.
    assert len(run) == 2 * int(doc["cost"]["caps"]["workers"])
    assert outcomes.get("skipped", 0) == len(stopped) == ROWS - len(run)
    assert all(r["models"]["base"]["output"] is not None for r in run)  # finished rows kept
    assert all("--llmeval-max-tokens 1 reached" in r["skipped"] for r in stopped)
    assert doc["complete"] is False and "--llmeval-max-tokens 1 reached" in doc["incomplete_reason"]
    assert "--llmeval-max-tokens 1 reached" in doc["cost"]["stopped"]
    result.stdout.fnmatch_lines(["INCOMPLETE: *--llmeval-max-tokens 1 reached*"])
    return doc


@pytest.mark.slow
def test_a_token_cap_stops_the_real_model_run_incomplete(pytester: pytest.Pytester) -> None:
    doc = capped_run(
        pytester, ["-p", "no:cacheprovider", "--llmeval-no-cache", "-m", "not gate", "-p", "no:randomly"]
    )
    assert doc["cost"]["models"]["base"]["rows"] == 2
    assert doc["cost"]["total"]["prompt_tokens"] > 1  # the chunk that crossed the cap finished


def test_a_token_cap_is_shared_among_workers(pytester: pytest.Pytester, tiny_model: Path) -> None:
    doc = capped_run(pytester, model_args(tiny_model), "-n", "2")
    assert doc["cost"]["caps"] == {"max_tokens": 1, "max_cost_usd": None, "workers": 2}


# --- served models: the server's usage, prices, a cost cap ----------------------------------------------


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    monkeypatch.setenv("LLMEVAL_TEST_KEY", KEY)
    with FaultServer(models=("base-id", "lora-id"), api_key=KEY) as s:
        yield s


def served(server: FaultServer, pytester: pytest.Pytester, *more: str, prices: str = "") -> pytest.RunResult:
    words = [f"word{i}" for i in range(6)]
    pytester.makefile(
        ".jsonl", bench=jsonl([row(f"r{i}", instruction=w, expected=w[::-1]) for i, w in enumerate(words)])
    )
    if prices:
        pytester.makepyprojecttoml(f"[tool.llmeval.prices]\n{prices}")
    return pytester.runpytest(*served_args(server, "--llmeval-no-cache", *more))


PRICES = '"base-id" = {prompt = 1000, completion = 2000}\n"lora-id" = {prompt = 3000, completion = 0}\n'


def test_served_models_report_tokens_and_dollars(pytester: pytest.Pytester, server: FaultServer) -> None:
    served(server, pytester, prices=PRICES).assert_outcomes(passed=6)
    cost = json.loads((pytester.path / "results.json").read_text())["cost"]
    # The fault server counts one token per character of the prompt and of the answer (the prompt reversed).
    chars = sum(len(f"word{i}") for i in range(6))
    for column, (prompt_price, completion_price) in (("base", (1000, 2000)), ("adapter", (3000, 0))):
        spent = cost["models"][column]
        assert spent["prompt_tokens"] == chars and spent["generated_tokens"] == chars
        assert spent["usd"] == pytest.approx(chars * (prompt_price + completion_price) / 1e6)
    assert cost["total"]["usd"] == pytest.approx(chars * 6000 / 1e6)


def test_a_cost_cap_stops_served_rows(pytester: pytest.Pytester, server: FaultServer) -> None:
    # 6 rows of chunk 1 (batch size 1): each chunk costs 5 chars x (1000 + 2000 + 3000) / 1e6 = $0.03.
    result = served(
        server,
        pytester,
        "--llmeval-max-cost=0.05",
        "--llmeval-batch-size=1",
        "--llmeval-concurrency=1",
        prices=PRICES,
    )
    result.assert_outcomes(passed=2, skipped=4)
    doc = json.loads((pytester.path / "results.json").read_text())
    assert (
        doc["complete"] is False
        and "--llmeval-max-cost 0.05 reached: $0.0600 spent" in doc["incomplete_reason"]
    )
    # The probe's four requests (each model's, and the check of its log-probabilities), then two rows each.
    assert len(server.posts()) - 4 == 4


def test_a_server_that_reports_no_usage(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMEVAL_TEST_KEY", KEY)
    with FaultServer(models=("base-id", "lora-id"), api_key=KEY, report_usage=False) as quiet:
        served(quiet, pytester).assert_outcomes(passed=6)
    cost = json.loads((pytester.path / "results.json").read_text())["cost"]
    assert cost["models"]["base"]["prompt_tokens"] is None and cost["models"]["base"]["uncounted_rows"] == 6


def test_a_cost_cap_needs_prices(pytester: pytest.Pytester, server: FaultServer, tiny_model: Path) -> None:
    result = served(
        server, pytester, "--llmeval-max-cost=1", prices='"base-id" = {prompt = 1, completion = 1}\n'
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--llmeval-max-cost needs a price for every served model: add 'lora-id' to*"]
    )
    pytester.makefile(".jsonl", local=jsonl([row("r")]))
    local = pytester.runpytest(*model_args(tiny_model), "--llmeval-max-cost=1", "local.jsonl")
    local.stderr.fnmatch_lines(["*--llmeval-max-cost caps the money spent at --llmeval-endpoint*"])
    bad = served(server, pytester, prices='"base-id" = {prompt = -1, completion = 1}\n')
    bad.stderr.fnmatch_lines(
        ["*pyproject.toml [[]tool.llmeval.prices[]]: 'base-id': prompt must be a price of 0 or more*"]
    )
