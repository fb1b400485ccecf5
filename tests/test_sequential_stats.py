"""Unit tests, simulations and hypothesis properties of sequential.py: anytime-valid early stopping.

The simulations are the reason the module exists: a gate that looks after every chunk must keep its error
at alpha whenever it stops, and an ordinary test repeated after every chunk does not. Every simulation is
vectorised over 10_000 sequences with a seeded generator, so the rates below are the same on every run.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import integrate
from scipy import stats as sps

from pytest_llmeval.sequential import (
    Decision,
    beta_mixture_e,
    decide_better,
    decide_no_degradation,
    outcomes_better,
    outcomes_no_degradation,
    planned_order,
)
from pytest_llmeval.stats import mcnemar_exact

ALPHA = 0.05
SIMS = 10_000
ROWS = 240
# Monte Carlo margin of a rejection rate estimated from SIMS sequences: 3 standard errors at alpha.
MARGIN = 3.0 * math.sqrt(ALPHA * (1.0 - ALPHA) / SIMS)  # 0.0065

Matrix = NDArray[np.float64]


def chunks(size: int, rows: int = ROWS) -> list[int]:
    """Boundaries after every `size` planned rows, and at the last row."""
    return sorted({*range(size, rows + 1, size), rows})


def binary_null(discordance: float, seed: int) -> tuple[Matrix, Matrix]:
    """(base, adapter) 0/1 scores, (SIMS, ROWS): discordant rows split evenly between wins and losses."""
    rng = np.random.default_rng(seed)
    u = rng.random((SIMS, ROWS))
    both = (rng.random((SIMS, ROWS)) < 0.5).astype(np.float64)  # concordant rows: both right or both wrong
    win, loss = u < discordance / 2.0, (u >= discordance / 2.0) & (u < discordance)
    adapter = np.where(win, 1.0, np.where(loss, 0.0, both))
    base = np.where(win, 0.0, np.where(loss, 1.0, both))
    return base, adapter


def correlated_binary(
    base_accuracy: float, effect: float, rows: int, sims: int, seed: int
) -> tuple[Matrix, Matrix]:
    """(base, adapter) 0/1 scores where the adapter keeps 95% of the base's right answers and fixes enough of
    its wrong ones to be `effect` more accurate: how a fine-tuned adapter's answers relate to its base's."""
    rng = np.random.default_rng(seed)
    keep = 0.95
    fix = (base_accuracy + effect - base_accuracy * keep) / (1.0 - base_accuracy)
    base = (rng.random((sims, rows)) < base_accuracy).astype(np.float64)
    adapter = np.where(base == 1.0, rng.random((sims, rows)) < keep, rng.random((sims, rows)) < fix)
    return base, adapter.astype(np.float64)


def naive_mcnemar_better(base: Matrix, adapter: Matrix, boundaries: Sequence[int]) -> tuple[float, float]:
    """(peeking, once): the share of sequences called "better" by the exact McNemar test at p < alpha with
    w > l, stopping at the first chunk where p < alpha; and by one test after all rows."""
    look = np.asarray(boundaries) - 1
    wins = np.cumsum((adapter == 1.0) & (base == 0.0), axis=1)[:, look]  # (S, K)
    losses = np.cumsum((adapter == 0.0) & (base == 1.0), axis=1)[:, look]
    p = mcnemar_p(wins, losses)
    up = wins > losses
    return _first_rejection_better(p, up), float(np.mean((p[:, -1] < ALPHA) & up[:, -1]))


def mcnemar_p(wins: NDArray[np.int64], losses: NDArray[np.int64]) -> Matrix:
    """stats.mcnemar_exact, elementwise (test_mcnemar_p_is_the_gates_test)."""
    p = np.minimum(1.0, 2.0 * sps.binom.cdf(np.minimum(wins, losses), wins + losses, 0.5))
    return np.where(wins + losses == 0, 1.0, p)


def naive_t_better(base: Matrix, adapter: Matrix, boundaries: Sequence[int]) -> tuple[float, float]:
    """(peeking, once) as naive_mcnemar_better, for the paired t test on the differences."""
    look = np.asarray(boundaries) - 1
    n = np.asarray(boundaries, dtype=np.float64)
    d = adapter - base
    mean = np.cumsum(d, axis=1)[:, look] / n
    sd = np.sqrt((np.cumsum(d * d, axis=1)[:, look] - n * mean**2) / (n - 1.0))
    p = 2.0 * sps.t.sf(np.abs(mean / (sd / np.sqrt(n))), n - 1.0)
    return _first_rejection_better(p, mean > 0.0), float(np.mean((p[:, -1] < ALPHA) & (mean[:, -1] > 0.0)))


def _first_rejection_better(p: Matrix, up: NDArray[np.bool_]) -> float:
    rejected = p < ALPHA
    first = np.argmax(rejected, axis=1)
    return float(np.mean(rejected.any(axis=1) & up[np.arange(p.shape[0]), first]))


def test_mcnemar_p_is_the_gates_test() -> None:
    wins, losses = np.meshgrid(np.arange(40), np.arange(40), indexing="ij")
    expected = np.vectorize(lambda b, c: mcnemar_exact(int(b), int(c)))(wins, losses)
    np.testing.assert_allclose(mcnemar_p(wins, losses), expected, rtol=1e-12)


# The beta mixture: exact values.


@pytest.mark.parametrize(("wins", "losses"), [(0, 0), (1, 0), (0, 1), (3, 1), (10, 2), (5, 40), (60, 45)])
def test_beta_mixture_equals_numerical_integration(wins: int, losses: int) -> None:
    integral, _ = integrate.quad(lambda p: p**wins * (1 - p) ** losses, 0.5, 1.0, epsabs=0.0, epsrel=1e-12)
    expected = 2.0 * integral * 2.0 ** (wins + losses)  # density 2 on [1/2, 1], over the null's 2^-(w+l)
    assert float(beta_mixture_e(wins, losses)) == pytest.approx(expected, rel=1e-9)


def test_beta_mixture_hand_values_symmetry_and_monotonicity() -> None:
    assert float(beta_mixture_e(0, 0)) == 1.0  # no discordant pair: no evidence either way
    assert float(beta_mixture_e(1, 0)) == pytest.approx(1.5)  # 2 * 2 * (1 - 1/4) / 2
    # Far more losses than wins: scipy's incomplete beta underflows, the e-value does not: 1 / (l + 1).
    assert float(beta_mixture_e(0, 3000)) == pytest.approx(1.0 / 3001.0, rel=1e-9)
    # Far more wins: capped at 1e300, finite.
    assert 1e299 < float(beta_mixture_e(3000, 0)) <= 1e300
    wins, losses = np.meshgrid(np.arange(60), np.arange(60), indexing="ij")
    e = beta_mixture_e(wins, losses)
    assert np.array_equal(e, beta_mixture_e(losses, wins).T)  # E_worse(w, l) = E_better(l, w)
    assert np.all(np.diff(e, axis=0) > 0.0)  # one more win, more evidence for "better"
    assert np.all(np.diff(e, axis=1) < 0.0)


@settings(deadline=None, max_examples=60)
@given(st.integers(0, 5000), st.integers(0, 5000))
def test_beta_mixture_is_nonnegative_and_finite(wins: int, losses: int) -> None:
    e = float(beta_mixture_e(wins, losses))
    assert 0.0 <= e <= 1e300


def test_beta_mixture_refuses_negative_or_fractional_counts() -> None:
    with pytest.raises(ValueError, match="whole numbers"):
        beta_mixture_e(-1, 2)
    with pytest.raises(ValueError, match="whole numbers"):
        beta_mixture_e(1.5, 2)


# Type-I error by simulation: the reason the feature exists.


# Measured (seeded as below), early stopping "better" / naive peeking McNemar "better" / one McNemar at 240:
#   discordance 0.1: chunk 8 0.0172 / 0.0549 / 0.0161; chunk 32 0.0127 / 0.0426 / 0.0161
#   discordance 0.3: chunk 8 0.0209 / 0.0877 / 0.0200; chunk 32 0.0131 / 0.0623 / 0.0200
#   discordance 0.6: chunk 8 0.0187 / 0.0988 / 0.0212; chunk 32 0.0104 / 0.0675 / 0.0212
# With chunks of 8 the peeking test claims "better" at 1.1 to 2.0 times alpha, 2.2 to 4.0 times its own
# nominal alpha/2 (a two-sided test at alpha says "better" at alpha/2) and 3.4 to 4.7 times what the same
# test claims once at the end (2.6 to 3.2 times with chunks of 32); the e-process stays under alpha/2 at
# every setting (its bound is alpha, and 0/1 data are discrete).
@pytest.mark.parametrize("chunk", [8, 32])
@pytest.mark.parametrize("discordance", [0.1, 0.3, 0.6])
def test_early_stopping_binary_gate_keeps_type_one_error(discordance: float, chunk: int) -> None:
    base, adapter = binary_null(discordance, seed=1)
    bounds = chunks(chunk)
    out = outcomes_better(base, adapter, binary=True, alpha=ALPHA, boundaries=bounds)
    sequential = float(np.mean(out.code == 1))
    assert sequential <= ALPHA + MARGIN
    peeking, once = naive_mcnemar_better(base, adapter, bounds)
    assert peeking > sequential
    if chunk == 8:
        assert peeking >= 2.0 * once  # peeking at every chunk at least doubles the false "better" claims
        assert peeking > 2.0 * (ALPHA / 2.0)  # and doubles the test's own nominal level


# Measured: early stopping "better" 0.0150 (chunk 8), 0.0108 (chunk 32), "worse" 0.0129 and 0.0100; the paired
# t test peeking after every chunk says "better" at 0.1381 and 0.0846, once at 240 rows at 0.0254.
@pytest.mark.parametrize("chunk", [8, 32])
def test_early_stopping_betting_gate_keeps_type_one_error(chunk: int) -> None:
    rng = np.random.default_rng(2)
    base, adapter = rng.beta(2.0, 2.0, (SIMS, ROWS)), rng.beta(2.0, 2.0, (SIMS, ROWS))  # same distribution
    bounds = chunks(chunk)
    out = outcomes_better(base, adapter, binary=False, alpha=ALPHA, boundaries=bounds)
    assert float(np.mean(out.code == 1)) <= ALPHA + MARGIN
    assert float(np.mean(out.code == -1)) <= ALPHA + MARGIN
    peeking, once = naive_t_better(base, adapter, bounds)
    if chunk == 8:
        assert peeking >= 2.0 * ALPHA
        assert peeking >= 2.0 * once


@pytest.mark.parametrize(("adapter_accuracy", "wrong"), [(0.55, "not_degraded"), (0.50, "degraded")])
def test_no_degradation_keeps_type_one_error_at_each_threshold(adapter_accuracy: float, wrong: str) -> None:
    # A drop of exactly warn_drop (0.60 -> 0.55): "not degraded" is wrong; exactly fail_drop: "degraded" is.
    # Measured: 0.0230 and 0.0214.
    rng = np.random.default_rng(4)
    base = (rng.random((SIMS, ROWS)) < 0.60).astype(np.float64)
    adapter = (rng.random((SIMS, ROWS)) < adapter_accuracy).astype(np.float64)
    out = outcomes_no_degradation(
        base, adapter, alpha=ALPHA, warn_drop=0.05, fail_drop=0.10, boundaries=chunks(8)
    )
    assert float(np.mean(out.code == (1 if wrong == "not_degraded" else -1))) <= ALPHA + MARGIN


def test_a_real_effect_is_decided_well_before_the_end() -> None:
    # Base 60% right, adapter 90%, correlated as real adapters are: decided "better" in (nearly) every
    # sequence, at a median of 32 of the 240 rows (measured: all 2000, 90th percentile 48 rows).
    base, adapter = correlated_binary(0.6, 0.30, ROWS, sims=2000, seed=3)
    out = outcomes_better(base, adapter, binary=True, alpha=ALPHA, boundaries=chunks(8))
    assert float(np.mean(out.code == 1)) >= 0.99
    assert float(np.median(out.at)) <= ROWS / 4


def test_the_confidence_sequence_covers_the_mean_at_every_look() -> None:
    # Continuous scores, true mean difference 0.1 (Beta(3, 2) against Beta(2, 2)). Measured: 300 of 300.
    rng = np.random.default_rng(5)
    sims = 300
    covered = 0
    for _ in range(sims):
        decision = decide_better(
            list(rng.beta(2.0, 2.0, 120)),
            list(rng.beta(3.0, 2.0, 120)),
            binary=False,
            alpha=ALPHA,
            boundaries=chunks(8, 120),
        )
        covered += all(look.lower <= 0.1 <= look.upper for look in decision.looks)
    assert covered / sims >= 1.0 - ALPHA - 3.0 * math.sqrt(ALPHA * (1.0 - ALPHA) / sims)


# The vectorised path is the scalar one.


def test_outcomes_equal_the_scalar_decisions() -> None:
    rng = np.random.default_rng(6)
    base, adapter = correlated_binary(0.6, 0.10, 120, sims=12, seed=7)
    base[:, rng.random(120) < 0.1] = np.nan  # some rows without a pair
    continuous_base, continuous_adapter = rng.beta(2.0, 2.0, (12, 120)), rng.beta(2.3, 2.0, (12, 120))
    bounds = chunks(16, 120)
    labels = {"better": 1, "worse": -1, "not_degraded": 1, "degraded": -1, None: 0}
    for b, a, binary in ((base, adapter, True), (continuous_base, continuous_adapter, False)):
        out = outcomes_better(b, a, binary=binary, alpha=ALPHA, boundaries=bounds)
        drop = outcomes_no_degradation(b, a, alpha=ALPHA, warn_drop=0.05, fail_drop=0.1, boundaries=bounds)
        for i in range(b.shape[0]):
            decision = decide_better(list(b[i]), list(a[i]), binary=binary, alpha=ALPHA, boundaries=bounds)
            assert (labels[decision.decided], decision.at or 0) == (out.code[i], out.at[i])
            kept = decide_no_degradation(
                list(b[i]), list(a[i]), alpha=ALPHA, warn_drop=0.05, fail_drop=0.1, boundaries=bounds
            )
            assert (labels[kept.decided], kept.at or 0) == (drop.code[i], drop.at[i])


# Rows without a pair.


def test_rows_without_a_pair_are_ignored() -> None:
    rng = np.random.default_rng(8)
    for case in range(20):
        base, adapter = correlated_binary(0.6, 0.15, 96, sims=1, seed=100 + case)
        b: list[float | None] = [float(v) for v in base[0]]
        a: list[float | None] = [float(v) for v in adapter[0]]
        missing = rng.random(96) < 0.15
        for i in np.flatnonzero(missing):
            if rng.random() < 0.5:
                b[i] = math.nan
            else:
                a[i] = None
        bounds = chunks(12, 96)
        # The same rows without the unpaired ones, each boundary moved back by the rows removed before it.
        shifted = [int(k - missing[:k].sum()) for k in bounds]
        if len(set(shifted)) < len(shifted):
            continue  # a whole chunk without a pair: no look to compare it with
        kept = ~missing
        b_kept, a_kept = list(base[0][kept]), list(adapter[0][kept])
        for binary in (True, False):
            with_gaps = decide_better(b, a, binary=binary, alpha=ALPHA, boundaries=bounds)
            without = decide_better(b_kept, a_kept, binary=binary, alpha=ALPHA, boundaries=shifted)
            _assert_same_decision(with_gaps, without, bounds, shifted)
        with_gaps = decide_no_degradation(b, a, alpha=ALPHA, warn_drop=0.05, fail_drop=0.1, boundaries=bounds)
        without = decide_no_degradation(
            b_kept, a_kept, alpha=ALPHA, warn_drop=0.05, fail_drop=0.1, boundaries=shifted
        )
        _assert_same_decision(with_gaps, without, bounds, shifted)


def _assert_same_decision(
    with_gaps: Decision, without: Decision, bounds: Sequence[int], shifted: Sequence[int]
) -> None:
    assert with_gaps.decided == without.decided
    assert with_gaps.e_value == without.e_value
    if with_gaps.at is not None:
        assert shifted[list(bounds).index(with_gaps.at)] == without.at
    assert [(k.n, k.e_value, k.lower, k.upper) for k in with_gaps.looks] == [
        (k.n, k.e_value, k.lower, k.upper) for k in without.looks
    ]


def test_a_row_scored_on_one_side_only_is_not_a_pair() -> None:
    decision = decide_better([0.0, math.nan, 1.0], [1.0, 1.0, None], binary=True, alpha=ALPHA, boundaries=[3])
    assert decision.looks[0].n == 1
    assert decision.looks[0].e_value == pytest.approx(1.5)  # one win, no losses


# Decisions, intervals and their text.


scores = st.one_of(st.floats(0.0, 1.0), st.none())


@st.composite
def sequences(draw: st.DrawFn) -> tuple[list[float | None], list[float | None], list[int]]:
    rows = draw(st.integers(1, 60))
    base = draw(st.lists(scores, min_size=rows, max_size=rows))
    adapter = draw(st.lists(scores, min_size=rows, max_size=rows))
    bounds = sorted(set(draw(st.lists(st.integers(1, rows), min_size=1, max_size=8))))
    return base, adapter, bounds


@settings(deadline=None, max_examples=60)
@given(sequences(), st.sampled_from([0.01, 0.05, 0.2]))
def test_decisions_look_until_the_first_crossing_with_nested_intervals(
    data: tuple[list[float | None], list[float | None], list[int]], alpha: float
) -> None:
    base, adapter, bounds = data
    for decision in (
        decide_better(base, adapter, binary=False, alpha=alpha, boundaries=bounds),
        decide_no_degradation(base, adapter, alpha=alpha, warn_drop=0.02, fail_drop=0.1, boundaries=bounds),
    ):
        looks = decision.looks
        assert [look.rows for look in looks] == bounds[: len(looks)]
        assert all(0.0 <= look.e_value < math.inf for look in looks)
        assert all(look.e_value < decision.threshold for look in looks[:-1])
        if decision.decided is None:
            assert len(looks) == len(bounds) and looks[-1].e_value < decision.threshold
        else:
            assert decision.at == looks[-1].rows and decision.e_value == looks[-1].e_value
            assert decision.e_value is not None and decision.e_value >= decision.threshold
        for before, after in itertools.pairwise(looks):
            assert before.lower <= after.lower <= after.upper <= before.upper  # running intersection
            assert before.n <= after.n
        assert all(-1.0 <= look.lower <= look.upper <= 1.0 for look in looks)
        json.dumps(decision.to_json(), allow_nan=False)


@settings(deadline=None, max_examples=40)
@given(st.integers(-200, 200), st.integers(1, 300))
def test_a_constant_difference_stays_inside_the_interval(hundredths: int, rows: int) -> None:
    # Every row moved by the same d: no fixed mean other than d explains it, and d is never excluded.
    d = hundredths / 200.0
    base = [max(0.0, -d)] * rows
    adapter = [max(0.0, d)] * rows
    decision = decide_better(
        base, adapter, binary=False, alpha=ALPHA, boundaries=sorted({1, rows // 2 or 1, rows})
    )
    assert all(look.lower <= d <= look.upper for look in decision.looks)


def test_to_json_and_message() -> None:
    base, adapter = correlated_binary(0.6, 0.30, 60, sims=1, seed=9)
    decision = decide_better(
        list(base[0]), list(adapter[0]), binary=True, alpha=ALPHA, boundaries=chunks(6, 60)
    )
    assert decision.decided == "better" and decision.test == "discordant_beta_mixture"
    record = decision.to_json()
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert record["at"] == decision.at and record["threshold"] == 20.0
    assert len(record["looks"]) == len(decision.looks)
    pairs = decision.looks[-1].n
    shown = f"{decision.e_value:.4g}"
    assert decision.message(60) == (
        f"decided after {decision.at} of 60 rows ({pairs} pairs): e = {shown} >= 1/alpha = 20 "
        "(adapter better)"
    )
    # An e-value too large for a float is capped, never inf: JSON needs no special case.
    huge = decide_better([0.0] * 3000, [1.0] * 3000, binary=True, alpha=ALPHA, boundaries=[3000])
    assert json.dumps(huge.to_json(), allow_nan=False)
    # Undecided: the largest e seen, and never a rounding that crosses 1/alpha.
    same = decide_better([1.0, 0.0] * 10, [1.0, 0.0] * 10, binary=True, alpha=ALPHA, boundaries=[10, 20])
    assert same.to_json()["e_value"] is None and same.at is None
    assert same.message(30) == "undecided after 20 of 30 rows (20 pairs): largest e = 1 < 1/alpha = 20"


def test_rounding_never_crosses_the_threshold() -> None:
    almost = Decision(None, None, None, 20.0, "betting", ())
    assert almost.message(5) == "undecided: no look at any of 5 rows"
    from pytest_llmeval.sequential import Look

    looks = (Look(10, 10, 19.99996, -0.5, 0.5),)
    record = Decision(None, None, None, 20.0, "betting", looks).to_json()
    assert record["looks"][0]["e_value"] < 20.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"boundaries": []}, "non-empty"),
        ({"boundaries": [4, 4]}, "increase strictly"),
        ({"boundaries": [0, 4]}, "increase strictly"),
        ({"boundaries": [4, 9]}, "at most the 8 rows"),
        ({"alpha": 1.0}, "alpha"),
        ({"adapter": [0.5] * 8}, "binary=True needs 0/1"),
        ({"adapter": [1.5] * 8}, r"in \[0, 1\]"),
        ({"adapter": [1.0] * 7}, "same rows"),
    ],
)
def test_bad_inputs_are_refused(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"base": [0.0] * 8, "adapter": [1.0] * 8, "alpha": ALPHA, "boundaries": [4, 8]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        decide_better(binary=True, **args)  # type: ignore[arg-type]


def test_drop_thresholds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="warn_drop <= fail_drop"):
        decide_no_degradation([1.0] * 4, [1.0] * 4, alpha=ALPHA, warn_drop=0.2, fail_drop=0.1, boundaries=[4])


# The planned order.


@settings(deadline=None, max_examples=80)
@given(
    st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=80), st.integers(0, 2**32), st.text(max_size=8)
)
def test_planned_order_is_a_seeded_stratified_permutation(
    difficulties: list[str], seed: int, key: str
) -> None:
    order = planned_order(difficulties, seed, key)
    assert sorted(order) == list(range(len(difficulties)))
    assert order == planned_order(difficulties, seed, key)
    if len(difficulties) >= 10:
        assert order != planned_order(difficulties, seed + 1, key)
    total = len(difficulties)
    share = {d: difficulties.count(d) / total for d in set(difficulties)}
    counts = dict.fromkeys(share, 0)
    for k, row in enumerate(order, start=1):
        counts[difficulties[row]] += 1
        assert all(abs(counts[d] - k * share[d]) < 1.0 for d in share)


def test_planned_order_holds_where_the_greedy_rule_drifts() -> None:
    # Taking the difficulty furthest below its share drifts to 1.04 rows off at row 27 of these 46.
    sizes = [12, 5, 3, 12, 12, 1, 1]
    difficulties = [f"d{i}" for i, size in enumerate(sizes) for _ in range(size)]
    order = planned_order(difficulties, 0, "x.jsonl")
    counts = np.zeros(len(sizes))
    for k, row in enumerate(order, start=1):
        counts[int(difficulties[row][1:])] += 1
        assert np.all(np.abs(counts - k * np.array(sizes) / len(difficulties)) < 1.0)


def test_planned_order_depends_on_the_file() -> None:
    difficulties = ["easy", "medium", "hard"] * 10
    assert planned_order(difficulties, 0, "a.jsonl") != planned_order(difficulties, 0, "b.jsonl")
    assert planned_order([], 0, "a.jsonl") == []
