"""Seeded subsets (--llmeval-sample, --llmeval-seed): proportional to the difficulty mix within one row, the
same rows in every run, worker and model, recorded in results.json, and never a complete run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import jsonl, row
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.subsets import allocate, parse_size, pick, size_of

pytest_plugins = ["pytester"]


@given(
    counts=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=4),
    share=st.floats(min_value=0, max_value=1),
)
def test_each_stratum_gets_its_share_within_one_row(counts: list[int], share: float) -> None:
    strata = {f"s{i}": c for i, c in enumerate(counts)}
    total = sum(counts)
    n = round(share * total)
    given_ = allocate(strata, n)
    assert sum(given_.values()) == n
    for name, count in strata.items():
        exact = n * count / total if total else 0
        assert abs(given_[name] - exact) < 1 and 0 <= given_[name] <= count


@given(
    difficulties=st.lists(st.sampled_from(["easy", "medium", "hard"]), min_size=1, max_size=80),
    size=st.one_of(st.integers(min_value=1, max_value=100), st.floats(min_value=0.01, max_value=0.99)),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_a_pick_is_a_seeded_stratified_subset_in_file_order(
    difficulties: list[str], size: int | float, seed: int
) -> None:
    rows = [(f"r{i}", d) for i, d in enumerate(difficulties)]
    chosen = pick(rows, size, seed=seed, salt="bench.jsonl")
    assert chosen == pick(list(rows), size, seed=seed, salt="bench.jsonl")  # deterministic
    assert len(chosen) == size_of(size, len(rows))
    order = [r for r, _ in rows]
    assert chosen == sorted(chosen, key=order.index)
    for difficulty in set(difficulties):
        have = sum(1 for r, d in rows if d == difficulty)
        got = sum(1 for r, d in rows if d == difficulty and r in chosen)
        assert abs(got - len(chosen) * have / len(rows)) < 1


def test_another_seed_or_file_draws_other_rows() -> None:
    rows = [(f"r{i}", "medium") for i in range(100)]
    first = pick(rows, 10, seed=0, salt="a.jsonl")
    assert first != pick(rows, 10, seed=1, salt="a.jsonl")
    assert first != pick(rows, 10, seed=0, salt="b.jsonl")


@pytest.mark.parametrize("bad", ["0", "-3", "1.5", "abc", "0.0", "1.0"])
def test_bad_sizes_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="expected a number of rows"):
        parse_size(bad)
    assert parse_size("20") == 20 and parse_size("0.25") == 0.25


def bench_rows() -> list[dict[str, Any]]:
    """60 rows, 30/50/20 easy/medium/hard; every prediction right."""
    mix = ["easy"] * 18 + ["medium"] * 30 + ["hard"] * 12
    return [row(f"q{i:02d}", expected=f"a{i}", difficulty=d) for i, d in enumerate(mix)]


@pytest.fixture
def bench(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl(bench_rows()))
    preds = [json.dumps({"id": r["id"], "prediction": r["expected_output"]}) for r in bench_rows()]
    pytester.makefile(".jsonl", preds="\n".join(preds))


def run_ids(pytester: pytest.Pytester, *args: str) -> tuple[list[str], dict[str, Any]]:
    pytester.runpytest("--llmeval-predictions=preds.jsonl", "bench.jsonl", "-m", "not gate", *args)
    doc = json.loads((pytester.path / "results.json").read_text())
    return sorted(r["id"] for r in doc["benchmarks"][0]["rows"]), doc


@pytest.mark.usefixtures("bench")
def test_the_subset_is_the_same_in_every_run_and_worker_and_keeps_the_mix(pytester: pytest.Pytester) -> None:
    ids, doc = run_ids(pytester, "--llmeval-sample=10", "--llmeval-seed=7")
    assert len(ids) == 10
    difficulty = {r["id"]: r["difficulty"] for r in bench_rows()}
    mix = [sum(difficulty[i] == d for i in ids) for d in ("easy", "medium", "hard")]
    assert mix == [3, 5, 2]
    assert doc["complete"] is False
    assert "--llmeval-sample 10 --llmeval-seed 7" in doc["incomplete_reason"]
    subset = doc["subset"]
    assert subset["seed"] == 7 and subset["size"] == 10
    assert subset["benchmarks"] == {"bench.jsonl": {"rows": 10, "of": 60}}
    again, doc2 = run_ids(pytester, "--llmeval-sample=10", "--llmeval-seed=7", "-n", "2")
    assert again == ids and doc2["subset"]["ids_sha256"] == subset["ids_sha256"]
    other, doc3 = run_ids(pytester, "--llmeval-sample=10", "--llmeval-seed=8")
    assert other != ids and doc3["subset"]["ids_sha256"] != subset["ids_sha256"]


@pytest.mark.usefixtures("bench")
def test_a_fraction_and_k_after_the_subset(pytester: pytest.Pytester) -> None:
    """A fraction of each file; -k then narrows the subset (it never changes which rows are drawn)."""
    ids, _ = run_ids(pytester, "--llmeval-sample=0.25")
    assert len(ids) == 15
    narrowed, _ = run_ids(pytester, "--llmeval-sample=0.25", "-k", "q0")
    assert narrowed == [i for i in ids if i.startswith("q0")]


def test_the_same_subset_for_every_model(
    pytester: pytest.Pytester, tiny_model: Any, tiny_adapter: Any
) -> None:
    """Base and adapter, or any model: the subset is drawn before any model is loaded, from the files."""
    pytester.makeini("[pytest]\n")
    config = {"max_new_tokens": 2}
    rows = [
        row(f"q{i:02d}", input=f"item {i}", difficulty="medium", evaluation_config=config) for i in range(12)
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    args = [
        "bench.jsonl",
        "-m",
        "not gate",
        f"--base-model={tiny_model}",
        "--llmeval-sample=4",
        "--llmeval-no-cache",
    ]
    pytester.runpytest(*args)
    base_only = json.loads((pytester.path / "results.json").read_text())
    pytester.runpytest(*args, f"--adapter={tiny_adapter}")
    with_adapter = json.loads((pytester.path / "results.json").read_text())
    ids = [r["id"] for r in base_only["benchmarks"][0]["rows"]]
    assert ids == [r["id"] for r in with_adapter["benchmarks"][0]["rows"]] and len(ids) == 4
