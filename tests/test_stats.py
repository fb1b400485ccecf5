"""Unit tests and hypothesis properties of stats.py, against scipy, statsmodels and hand-computed values."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.power import NormalIndPower, TTestPower

from pytest_llmeval import formatting
from pytest_llmeval.stats import (
    TARGET_DIFFERENCE,
    PairedComparison,
    PowerAnalysis,
    above_chance_p,
    cohens_d_pooled,
    cohens_dz,
    compare_paired,
    mcnemar_exact,
    mcnemar_power,
    paired_bootstrap_ci,
    paired_t_power,
    paired_t_test,
    power_analysis_binary,
    power_analysis_continuous,
    wilcoxon_signed_rank,
)

# Properties resample a few hundred times, not 10_000: they check structure, not precision.
FAST_BOOT = 400

# The adaptation document's failing example: 60 rows, 43 both right, 8 only the base right, 9 both wrong.
ADAPTER_60 = [1.0] * 43 + [0.0] * 17
BASE_60 = [1.0] * 51 + [0.0] * 9


def _continuous(n: int, seed: int, shift: float = 0.05) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.1, 0.8, n)
    adapter = np.clip(base + shift + rng.normal(0.0, 0.1, n), 0.0, 1.0)
    return adapter.tolist(), base.tolist()


def _exact_mcnemar_power(n: int, delta: float, psi: float, alpha: float) -> float:
    """Power of the exact McNemar test itself: discordant count ~ Bin(n, psi), adapter-only among them."""
    q = (psi + delta) / (2.0 * psi)  # P(adapter-only | discordant)
    total = 0.0
    for m in range(1, n + 1):
        b = np.arange(m + 1)
        p = np.minimum(1.0, 2.0 * sps.binom.cdf(np.minimum(b, m - b), m, 0.5))
        total += float(sps.binom.pmf(m, n, psi) * sps.binom.pmf(b, m, q)[p < alpha].sum())
    return total


# ---------------------------------------------------------------------------------------------------------
# McNemar


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 8, 2 * 0.5**8),
        (8, 0, 2 * 0.5**8),
        (0, 0, 1.0),
        (5, 5, 1.0),
        (1, 0, 1.0),
        (0, 5, 2 * 0.5**5),
        (1, 4, 2 * (1 + 5) / 2**5),  # P(X <= 1) for Bin(5, 1/2) = (1 + 5) / 32, doubled
    ],
)
def test_mcnemar_exact_hand_values(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("b", "c"), [(3, 10), (10, 3), (7, 8), (0, 1), (25, 40), (120, 90), (1, 30)])
def test_mcnemar_exact_matches_scipy_and_statsmodels(b: int, c: int) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(sps.binomtest(b, b + c, 0.5).pvalue, rel=1e-10)
    table = [[11, b], [c, 4]]  # the concordant cells do not enter the test
    assert mcnemar_exact(b, c) == pytest.approx(sm_mcnemar(table, exact=True).pvalue, rel=1e-10)


def test_mcnemar_exact_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="discordant counts must be >= 0"):
        mcnemar_exact(-1, 3)


def test_compare_paired_binary_matches_statsmodels_table() -> None:
    rng = np.random.default_rng(7)
    base = (rng.random(120) < 0.55).astype(float)
    adapter = np.where(rng.random(120) < 0.2, 1.0 - base, base)
    result = compare_paired(adapter.tolist(), base.tolist())
    table = [
        [np.sum((adapter == 1) & (base == 1)), np.sum((adapter == 1) & (base == 0))],
        [np.sum((adapter == 0) & (base == 1)), np.sum((adapter == 0) & (base == 0))],
    ]
    assert result.kind == "binary"
    assert result.test == "mcnemar_exact"
    assert result.discordant == (table[0][1], table[1][0])
    assert result.statistic == float(table[0][1])
    assert result.p_value == pytest.approx(sm_mcnemar(table, exact=True).pvalue, rel=1e-10)
    assert result.wilcoxon_p is None


def test_the_documents_failing_example() -> None:
    result = compare_paired(ADAPTER_60, BASE_60)
    assert result.n == 60
    assert result.mean_adapter == pytest.approx(43 / 60)
    assert result.mean_base == pytest.approx(51 / 60)
    assert result.difference == pytest.approx(-8 / 60)
    assert result.discordant == (0, 8)
    assert result.statistic == 0.0
    assert result.p_value == 2 * 0.5**8
    assert result.significant
    assert result.ci_low < result.difference < result.ci_high < 0.0
    # The t in the significance report is the paired t on the 0/1 differences, as scipy computes it.
    t = sps.ttest_rel(ADAPTER_60, BASE_60)
    assert result.t_statistic == pytest.approx(t.statistic, rel=1e-12)
    d = np.array(ADAPTER_60) - np.array(BASE_60)
    assert result.effect_size == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)


# ---------------------------------------------------------------------------------------------------------
# Continuous: paired t, Wilcoxon, effect size


@pytest.mark.parametrize(("n", "seed", "shift"), [(5, 1, 0.05), (30, 2, 0.0), (60, 3, 0.05), (200, 4, -0.02)])
def test_compare_paired_continuous_matches_scipy(n: int, seed: int, shift: float) -> None:
    adapter, base = _continuous(n, seed, shift)
    result = compare_paired(adapter, base)
    t = sps.ttest_rel(adapter, base)
    w = sps.wilcoxon(adapter, base, zero_method="wilcox")
    d = np.array(adapter) - np.array(base)
    assert result.kind == "continuous"
    assert result.test == "paired_t"
    assert result.statistic == pytest.approx(t.statistic, rel=1e-10)
    assert result.t_statistic == result.statistic
    assert result.p_value == pytest.approx(t.pvalue, rel=1e-9)
    assert result.wilcoxon_p == pytest.approx(w.pvalue, rel=1e-9)
    assert result.effect_size == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
    assert result.difference == pytest.approx(np.mean(adapter) - np.mean(base), abs=1e-15)
    assert result.discordant is None
    assert result.significant == (result.p_value < 0.05)


def test_wilcoxon_drops_zero_differences_like_scipy() -> None:
    adapter = [0.5, 0.7, 0.2, 0.9, 0.4, 0.4, 0.65, 0.3]
    base = [0.5, 0.6, 0.2, 0.5, 0.1, 0.45, 0.6, 0.3]  # three ties
    result = compare_paired(adapter, base)
    assert result.wilcoxon_p == pytest.approx(sps.wilcoxon(adapter, base, zero_method="wilcox").pvalue)


@pytest.mark.parametrize(
    "d",
    [
        [0.25, 0.0, 0.5, -0.125, 0.25],  # a zero and a tie: scipy's exhaustive permutation test
        [0.5, 0.5, 0.5, 0.5, -0.5, 0.25, 0.25, 0.0, 0.0, 1.0],
        [0.5, 0.25, 0.5, 0.0, -0.125, 0.25, 0.5, 0.75, 1.0, -0.5, 0.5, 0.25, 0.125],  # 13 rows: the last
        [0.5, 0.25, 0.5, 0.0, -0.125, 0.25, 0.5, 0.75, 1.0, -0.5, 0.5, 0.25, 0.125, 0.5],  # 14: asymptotic
        [0.1, -0.2, 0.3, 0.45, 0.5, -0.6, 0.7],  # no ties: scipy's exact distribution
        [0.0, 0.0, 0.75],
        # Midranks 1.5 and 4: doubled they stay exact; any other factor rounds them and moves p.
        [0.75, 0.0, -0.25, 0.0, 0.75, -0.25, 0.5, 0.0],
    ],
)
def test_wilcoxon_signed_rank_matches_scipy(d: list[float]) -> None:
    expected = sps.wilcoxon(d, zero_method="wilcox").pvalue
    assert wilcoxon_signed_rank(d) == pytest.approx(expected, rel=1e-12)
    assert wilcoxon_signed_rank([-x for x in d]) == pytest.approx(expected, rel=1e-12)


def test_wilcoxon_signed_rank_of_no_differences_is_none() -> None:
    assert wilcoxon_signed_rank([0.0, 0.0]) is None


def test_paired_t_test_and_cohens_dz_hand_values() -> None:
    d = [0.1, 0.2, 0.3]  # mean 0.2, sd 0.1: t = 0.2 / (0.1 / sqrt 3), d_z = 2
    t, p = paired_t_test(d)
    assert t == pytest.approx(2 * math.sqrt(3))
    assert p == pytest.approx(2 * sps.t.sf(2 * math.sqrt(3), 2))
    assert cohens_dz(d) == pytest.approx(2.0)


def test_cohens_d_pooled_hand_values() -> None:
    # adapter: mean 0.4, sd 0.2; base: mean 0.2, sd 0.1. d = 0.2 / sqrt((0.04 + 0.01) / 2) = sqrt(1.6).
    assert cohens_d_pooled([0.2, 0.4, 0.6], [0.1, 0.2, 0.3]) == pytest.approx(math.sqrt(1.6), rel=1e-12)
    assert cohens_d_pooled([0.1, 0.2, 0.3], [0.2, 0.4, 0.6]) == pytest.approx(-math.sqrt(1.6), rel=1e-12)
    # The same sd on both sides: d is the difference in sd units. Rows 1, 2, 3, 4 have sd sqrt(5/3).
    assert cohens_d_pooled([2, 3, 4, 5], [1, 2, 3, 4]) == pytest.approx(1 / math.sqrt(5 / 3), rel=1e-12)


@pytest.mark.parametrize(("n", "seed"), [(2, 1), (5, 2), (40, 3), (300, 4)])
def test_cohens_d_pooled_matches_numpy_and_the_textbook_formula(n: int, seed: int) -> None:
    a, b = (np.array(side) for side in _continuous(n, seed))
    d = cohens_d_pooled(a, b)
    assert d == pytest.approx((a.mean() - b.mean()) / np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2), rel=1e-10)
    # Two groups of n: pooled variance ((n-1) s_a^2 + (n-1) s_b^2) / (n + n - 2).
    pooled = math.sqrt(((n - 1) * a.var(ddof=1) + (n - 1) * b.var(ddof=1)) / (2 * n - 2))
    assert d == pytest.approx((a.mean() - b.mean()) / pooled, rel=1e-10)
    # The adaptation document's own code: np.var's default ddof=0.
    document = (np.mean(a) - np.mean(b)) / np.sqrt((np.var(a) + np.var(b)) / 2)
    assert d == pytest.approx(document * math.sqrt((n - 1) / n), rel=1e-10)
    assert compare_paired(a, b).effect_size_pooled == d


def test_cohens_d_pooled_limits() -> None:
    assert cohens_d_pooled([0.5], [0.2]) is None  # no sd from one row
    assert cohens_d_pooled([0.5, 0.5], [0.5, 0.5]) == 0.0
    assert cohens_d_pooled([0.75, 0.75], [0.25, 0.25]) == math.inf
    assert cohens_d_pooled([0.25, 0.25], [0.75, 0.75]) == -math.inf
    assert cohens_d_pooled([0.5, 0.3, 0.9], [0.4, 0.4, 0.4]) == pytest.approx(
        (0.5 + 0.3 + 0.9 - 1.2) / 3 / math.sqrt(np.var([0.5, 0.3, 0.9], ddof=1) / 2)
    )  # one side constant: the other's sd alone, halved in variance
    result = compare_paired([0.75, 0.75, 0.75], [0.25, 0.25, 0.25])
    assert result.effect_size_pooled == math.inf
    assert result.to_json()["effect_size_pooled"] is None
    assert result.significance_report()["effect_size_pooled_d"] is None
    with pytest.raises(ValueError, match="same rows: got 2 and 1 values"):
        cohens_d_pooled([0.5, 0.4], [0.5])
    with pytest.raises(ValueError, match=r"base values\[0\] is nan"):
        cohens_d_pooled([0.5], [math.nan])


def test_significance_report_names_its_methods() -> None:
    binary = compare_paired(ADAPTER_60, BASE_60).significance_report()
    assert binary["method"].startswith("p_value: exact McNemar test on the discordant rows; t_statistic: ")
    continuous = compare_paired(*_continuous(40, 9)).significance_report()
    assert continuous["method"].startswith("p_value: paired t-test on the differences; ")
    constant = compare_paired([0.5, 0.75, 1.0], [0.25, 0.5, 0.75]).significance_report()
    assert constant["method"].startswith("p_value: exact sign test")
    assert compare_paired([0.5], [0.2]).significance_report()["method"].startswith("p_value: 1, no test")
    for report in (binary, continuous):
        assert "effect_size: Cohen's d_z" in report["method"]
        assert "effect_size_pooled_d: Cohen's d = (mean_adapter - mean_base) / sqrt(" in report["method"]
        assert "confidence_interval: 95% percentile bootstrap" in report["method"]
    ninety = compare_paired(ADAPTER_60, BASE_60, confidence=0.9).significance_report()
    assert "confidence_interval: 90% percentile" in ninety["method"]


def test_constant_nonzero_differences() -> None:
    # Every row gains exactly 0.25: t is infinite; p falls back to the exact sign test, as McNemar would.
    adapter = [0.5, 0.75, 1.0, 0.25, 0.5]
    base = [0.25, 0.5, 0.75, 0.0, 0.25]
    result = compare_paired(adapter, base)
    assert result.statistic == math.inf
    assert result.effect_size == math.inf
    assert result.p_value == 2 * 0.5**5
    assert not result.significant
    assert result.ci_low == result.ci_high == 0.25
    assert result.min_detectable_difference is None  # no spread to base a power estimate on
    assert paired_t_test([0.25] * 5) == (math.inf, 0.0)  # the t test's own limit, as scipy gives it
    assert cohens_dz([-0.25] * 5) == -math.inf
    as_json = result.to_json()
    assert as_json["statistic"] is None and as_json["effect_size"] is None
    json.dumps(as_json, allow_nan=False)
    json.dumps(result.significance_report(), allow_nan=False)


def test_rounding_noise_counts_as_constant() -> None:
    # 0.5 - 0.4 and 0.3 - 0.2 differ in the last bit: still "every row moved by 0.1".
    result = compare_paired([0.5, 0.3, 0.9], [0.4, 0.2, 0.8])
    assert result.effect_size == math.inf
    assert result.p_value == 2 * 0.5**3


@pytest.mark.parametrize(
    ("adapter", "base", "kind"), [([1.0], [0.0], "binary"), ([0.5], [0.2], "continuous")]
)
def test_single_row(adapter: list[float], base: list[float], kind: str) -> None:
    result = compare_paired(adapter, base)
    assert result.kind == kind
    assert result.p_value == 1.0
    assert not result.significant
    assert result.t_statistic is None
    assert result.effect_size is None
    assert result.ci_low == result.ci_high == result.difference
    assert result.min_detectable_difference is None
    json.dumps(result.to_json(), allow_nan=False)


def test_to_json_and_significance_report() -> None:
    result = compare_paired(*_continuous(40, 9))
    as_json = result.to_json()
    assert json.loads(json.dumps(as_json, allow_nan=False)) == as_json
    assert as_json["p_value"] == result.p_value
    assert set(as_json) == set(PairedComparison.__dataclass_fields__)
    report = result.significance_report()
    assert list(report) == [
        "t_statistic",
        "p_value",
        "effect_size",
        "effect_size_pooled_d",
        "confidence_interval",
        "significant",
        "method",
    ]
    assert report["confidence_interval"] == [result.ci_low, result.ci_high]
    assert report["t_statistic"] == result.statistic
    assert report["effect_size"] == result.effect_size
    assert report["effect_size_pooled_d"] == result.effect_size_pooled
    binary = compare_paired(ADAPTER_60, BASE_60).to_json()
    assert binary["discordant"] == [0, 8]


def test_describe_continuous() -> None:
    text = compare_paired(*_continuous(40, 5, shift=0.1)).describe()
    assert text.startswith("n=40, adapter ")
    assert "paired t-test p=" in text and "Wilcoxon p=" in text


def test_describe_keeps_p_on_the_right_side_of_alpha() -> None:
    # Two significant digits would round p = 0.0496 up to the threshold; the text must not.
    result = compare_paired(*_continuous(30, 2), alpha=0.05)
    shown = result.describe().split("paired t-test p=")[1].split(",")[0]
    assert (float(shown) < 0.05) == result.significant


# ---------------------------------------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    ("adapter", "base", "kwargs", "message"),
    [
        ([1.0, 0.0], [1.0], {}, "same rows: got 2 adapter scores and 1 base scores"),
        ([], [], {}, "no rows to compare"),
        ([0.5, 1.5], [0.5, 0.5], {}, r"adapter score at row 1 is 1.5: scores must be in \[0, 1\]"),
        ([0.5, 0.5], [-0.1, 0.5], {}, r"base score at row 0 is -0.1"),
        ([0.5, math.nan], [0.5, 0.5], {}, r"adapter scores\[1\] is nan: every value must be a finite number"),
        ([0.5], [math.inf], {}, "finite number"),
        ([[0.5]], [[0.5]], {}, "flat sequence"),
        ([0.5], [0.5], {"alpha": 0.0}, "alpha must be strictly between 0 and 1"),
        ([0.5], [0.5], {"alpha": 1.0}, "alpha must be strictly between 0 and 1"),
        ([0.5], [0.5], {"confidence": 1.0}, "confidence must be strictly between 0 and 1"),
        ([0.5], [0.5], {"confidence": -0.5}, "confidence must be strictly between 0 and 1"),
        ([0.5], [0.5], {"confidence": math.nan}, "confidence must be strictly between 0 and 1"),
        ([0.5], [0.5], {"n_boot": 0}, "n_boot must be >= 1"),
    ],
)
def test_compare_paired_validation(
    adapter: Sequence[float], base: Sequence[float], kwargs: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        compare_paired(adapter, base, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: power_analysis_binary(0, 0.2), "n must be >= 1"),
        (lambda: power_analysis_binary(50, 1.2), r"discordant_rate must be in \[0, 1\]"),
        (lambda: power_analysis_binary(50, 0.2, power=0.3), r"power must be in \[0.5, 1\)"),
        (lambda: power_analysis_continuous(50, -0.1), "sd must be >= 0"),
        (lambda: power_analysis_continuous(50, 0.2, target=0.0), r"target must be in \(0, 1\]"),
        (lambda: mcnemar_power(50, 0.3, 0.2), "needs at least 0.3 of rows discordant"),
        (lambda: paired_t_power(1, 0.1, 0.2), "needs n >= 2"),
        (lambda: paired_t_power(10, 0.1, 0.0), "sd must be positive"),
        (lambda: paired_bootstrap_ci([], confidence=0.95, n_boot=10, seed=0), "no differences"),
    ],
)
def test_power_and_bootstrap_validation(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


# ---------------------------------------------------------------------------------------------------------
# Bootstrap


def test_bootstrap_matches_a_plain_reference() -> None:
    d = np.array(_continuous(25, 11)[0]) - np.array(_continuous(25, 11)[1])
    rng = np.random.default_rng(3)
    means = d[rng.integers(0, d.size, size=(2000, d.size))].mean(axis=1)
    low, high = paired_bootstrap_ci(d.tolist(), confidence=0.9, n_boot=2000, seed=3)
    assert low == pytest.approx(np.percentile(means, 5), abs=1e-12)
    assert high == pytest.approx(np.percentile(means, 95), abs=1e-12)


def test_bootstrap_seeds() -> None:
    d = (np.array(_continuous(30, 12)[0]) - np.array(_continuous(30, 12)[1])).tolist()
    first = paired_bootstrap_ci(d, confidence=0.95, n_boot=1000, seed=1)
    assert paired_bootstrap_ci(d, confidence=0.95, n_boot=1000, seed=1) == first
    assert paired_bootstrap_ci(d, confidence=0.95, n_boot=1000, seed=2) != first
    a, b = _continuous(30, 12)
    assert compare_paired(a, b, seed=5) == compare_paired(a, b, seed=5)
    assert compare_paired(a, b, seed=5).ci_low != compare_paired(a, b, seed=6).ci_low


def test_bootstrap_of_a_large_benchmark_is_chunked_and_close_to_normal_theory() -> None:
    # 5_000 rows: several chunks of resamples. The interval must agree with mean +/- 1.96 se.
    rng = np.random.default_rng(0)
    d = rng.normal(0.05, 0.2, 5000).clip(-1, 1)
    low, high = paired_bootstrap_ci(d.tolist(), confidence=0.95, n_boot=2000, seed=0)
    se = d.std(ddof=1) / math.sqrt(d.size)
    assert low == pytest.approx(d.mean() - 1.96 * se, abs=0.15 * se)
    assert high == pytest.approx(d.mean() + 1.96 * se, abs=0.15 * se)


def test_bootstrap_is_scipys_paired_bootstrap_of_the_rows() -> None:
    # paired=True on (adapter, base) draws the same row indices; the one-sample bootstrap of the differences
    # gives the same interval without gathering both sides.
    a, b = (np.array(side) for side in _continuous(40, 14))
    expected = sps.bootstrap(
        (a, b),
        lambda x, y, axis: (x - y).mean(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=3000,
        confidence_level=0.9,
        method="percentile",
        rng=np.random.default_rng(8),
    ).confidence_interval
    low, high = paired_bootstrap_ci((a - b).tolist(), confidence=0.9, n_boot=3000, seed=8)
    assert (low, high) == pytest.approx((expected.low, expected.high), abs=1e-15)


@given(st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=60), st.integers(0, 2**32 - 1))
def test_bootstrap_interval_lies_between_the_extreme_differences(d: list[float], seed: int) -> None:
    low, high = paired_bootstrap_ci(d, confidence=0.95, n_boot=FAST_BOOT, seed=seed)
    assert min(d) - 1e-12 <= low <= high <= max(d) + 1e-12
    assert paired_bootstrap_ci(d, confidence=0.95, n_boot=FAST_BOOT, seed=seed) == (low, high)
    if len(set(d)) == 1:  # every resample has the same mean: the interval is that point
        assert low == high == np.mean(d)


def test_wider_confidence_gives_a_wider_interval() -> None:
    a, b = _continuous(40, 13)
    narrow = compare_paired(a, b, confidence=0.8)
    wide = compare_paired(a, b, confidence=0.99)
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high
    assert "99% CI" in wide.describe() and "80% CI" in narrow.describe()


# ---------------------------------------------------------------------------------------------------------
# Power


def test_power_binary_hand_values() -> None:
    # n = 50, 20% of rows discordant (Connor 1987):
    # delta = sqrt(.2) (sqrt(50) 1.95996 + 0.84162 sqrt(50 - 1.95996^2 + 0.84162^2)) / (50 + 0.84162^2)
    analysis = power_analysis_binary(50, 0.2)
    mdd = analysis.min_detectable_difference
    assert mdd == pytest.approx(0.17304, abs=1e-5)
    assert mdd is not None and mcnemar_power(50, mdd, 0.2) == pytest.approx(0.8, abs=1e-9)
    # n = (1.95996 sqrt(.2) + 0.84162 sqrt(.2 - .01))^2 / .01 = 154.6
    assert analysis.n_for_target == 155
    assert mcnemar_power(155, 0.1, 0.2) >= 0.8 > mcnemar_power(154, 0.1, 0.2)


def test_power_binary_limits() -> None:
    # A difference can never exceed the discordance, and three rows can never be significant.
    assert power_analysis_binary(50, 0.0).min_detectable_difference is None
    assert power_analysis_binary(50, 0.05).n_for_target is None
    assert power_analysis_binary(3, 1.0).min_detectable_difference is None
    assert mcnemar_power(20, 1.0, 1.0) == 1.0  # every row discordant, all one way: no spread left
    assert mcnemar_power(100, 0.0, 0.3) < 0.05


def test_locollm_claim_fifty_rows_ten_points() -> None:
    # 0/1 scores: at no discordance can 50 rows detect 0.10; the fewest rows that can (psi = 0.10) are 77.
    assert all(
        (mdd := power_analysis_binary(50, psi).min_detectable_difference) is None or mdd > 0.10
        for psi in np.linspace(0.0, 1.0, 101)
    )
    assert power_analysis_binary(50, 0.1).n_for_target == 77
    assert mcnemar_exact(5, 0) > 0.05  # even all 5 discordant rows won: not significant
    # Continuous scores: it holds when sd(diff) <= 0.247 (d_z >= 0.40).
    assert power_analysis_continuous(50, 0.247).n_for_target == 50
    assert power_analysis_continuous(50, 0.248).n_for_target == 51


@pytest.mark.parametrize(("n", "psi"), [(50, 0.2), (155, 0.2), (100, 0.3), (300, 0.3)])
def test_connor_approximates_the_exact_mcnemar_power(n: int, psi: float) -> None:
    # The exact test is conservative: at Connor's detectable difference its true power is 0.76-0.79.
    mdd = power_analysis_binary(n, psi).min_detectable_difference
    assert mdd is not None
    assert 0.74 < _exact_mcnemar_power(n, mdd, psi, 0.05) < 0.82


@pytest.mark.parametrize(("n", "effect"), [(2, 3.0), (5, 1.5), (20, 0.5), (50, 0.4), (400, 0.1)])
def test_paired_t_power_matches_statsmodels(n: int, effect: float) -> None:
    expected = TTestPower().power(effect_size=effect, nobs=n, alpha=0.05, alternative="two-sided")
    assert paired_t_power(n, effect * 0.2, 0.2) == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("n", [3, 10, 50, 200])
def test_continuous_detectable_difference_matches_statsmodels(n: int) -> None:
    sd = 0.2
    effect = TTestPower().solve_power(nobs=n, alpha=0.05, power=0.8, alternative="two-sided")
    analysis = power_analysis_continuous(n, sd)
    assert analysis.min_detectable_difference == pytest.approx(effect * sd, rel=1e-5)


@pytest.mark.parametrize("sd", [0.08, 0.15, 0.3, 0.6])
def test_continuous_rows_needed_match_statsmodels(sd: float) -> None:
    rows = power_analysis_continuous(50, sd).n_for_target
    assert rows is not None
    exact = TTestPower().solve_power(effect_size=0.1 / sd, alpha=0.05, power=0.8, alternative="two-sided")
    assert rows == max(2, math.ceil(exact))
    # The normal approximation (one sample: ratio 0) is the floor the t test's answer sits just above.
    normal = NormalIndPower().solve_power(effect_size=0.1 / sd, alpha=0.05, power=0.8, ratio=0)
    assert normal <= rows <= normal + 3


def test_continuous_power_limits() -> None:
    assert power_analysis_continuous(50, 0.0).min_detectable_difference is None
    assert power_analysis_continuous(1, 0.2).min_detectable_difference is None
    assert power_analysis_continuous(2, 0.2).min_detectable_difference is None  # needs a 2.3 difference
    assert power_analysis_continuous(2, 0.05).min_detectable_difference == pytest.approx(
        0.05 * 11.5499, rel=1e-4
    )


@given(st.integers(1, 2000), st.floats(0.01, 1.0))
def test_binary_detectable_difference_shrinks_with_n(n: int, psi: float) -> None:
    now = power_analysis_binary(n, psi).min_detectable_difference
    later = power_analysis_binary(n + 1, psi).min_detectable_difference
    if now is not None:
        assert later is not None and later < now


@given(st.integers(2, 2000), st.floats(0.01, 0.5))
def test_continuous_detectable_difference_shrinks_with_n(n: int, sd: float) -> None:
    now = power_analysis_continuous(n, sd).min_detectable_difference
    later = power_analysis_continuous(n + 1, sd).min_detectable_difference
    if now is not None:
        assert later is not None and later < now


# ---------------------------------------------------------------------------------------------------------
# Properties of compare_paired

# Multiples of 1/64 are exact in binary floating point, so differences and shifts are exact too.
GRID = st.integers(0, 64).map(lambda k: k / 64)
BINARY = st.sampled_from([0.0, 1.0])
SCORE_PAIRS = st.one_of(
    st.lists(st.tuples(BINARY, BINARY), min_size=1, max_size=40),
    st.lists(st.tuples(GRID, GRID), min_size=1, max_size=40),
)


def _compare(pairs: Sequence[tuple[float, float]], *, seed: int = 0) -> PairedComparison:
    adapter = [a for a, _ in pairs]
    base = [b for _, b in pairs]
    return compare_paired(adapter, base, n_boot=FAST_BOOT, seed=seed)


@given(SCORE_PAIRS)
def test_p_values_are_probabilities(pairs: list[tuple[float, float]]) -> None:
    result = _compare(pairs)
    assert 0.0 <= result.p_value <= 1.0
    assert result.wilcoxon_p is None or 0.0 <= result.wilcoxon_p <= 1.0
    assert result.significant == (result.p_value < result.alpha)
    json.dumps(result.to_json(), allow_nan=False)


@given(SCORE_PAIRS)
def test_swapping_adapter_and_base_mirrors_everything(pairs: list[tuple[float, float]]) -> None:
    forward = _compare(pairs)
    backward = _compare([(b, a) for a, b in pairs])
    assert backward.difference == -forward.difference
    # The same resamples, negated; scipy reads each end from its own tail, so they agree to rounding.
    mirrored = (-forward.ci_high, -forward.ci_low)
    assert (backward.ci_low, backward.ci_high) == pytest.approx(mirrored, abs=1e-12)
    assert backward.p_value == forward.p_value
    assert backward.wilcoxon_p == forward.wilcoxon_p
    assert backward.effect_size == (None if forward.effect_size is None else -forward.effect_size)
    pooled = forward.effect_size_pooled
    assert backward.effect_size_pooled == (None if pooled is None else -pooled)
    assert (backward.min_detectable_difference, backward.n_for_10_points) == (
        forward.min_detectable_difference,
        forward.n_for_10_points,
    )
    if forward.discordant is not None:
        assert backward.discordant == forward.discordant[::-1]
        assert backward.statistic == float(forward.discordant[1])
    elif forward.statistic is not None:
        assert backward.statistic == -forward.statistic


@given(st.lists(st.one_of(BINARY, GRID), min_size=1, max_size=40))
def test_identical_scores_show_no_difference(scores: list[float]) -> None:
    result = compare_paired(scores, scores, n_boot=FAST_BOOT)
    assert result.difference == 0.0
    assert result.p_value == 1.0
    assert not result.significant
    assert (result.ci_low, result.ci_high) == (0.0, 0.0)
    assert result.wilcoxon_p is None
    assert result.effect_size == (None if len(scores) < 2 else 0.0)
    assert result.discordant in (None, (0, 0))


@given(st.lists(st.tuples(st.integers(1, 32), st.integers(1, 32)), min_size=1, max_size=40))
def test_adding_a_constant_to_both_changes_only_the_means(pairs: list[tuple[int, int]]) -> None:
    # Scores k/64 in (0, 0.5] never are all 0/1, so both sides stay "continuous"; + 0.25 keeps them exact.
    low = _compare([(a / 64, b / 64) for a, b in pairs]).to_json()
    high = _compare([(a / 64 + 0.25, b / 64 + 0.25) for a, b in pairs]).to_json()
    for key in ("mean_adapter", "mean_base"):
        assert high.pop(key) == pytest.approx(low.pop(key) + 0.25)
    assert high == low


@given(SCORE_PAIRS, st.integers(0, 2**32 - 1))
def test_interval_contains_the_observed_difference(pairs: list[tuple[float, float]], seed: int) -> None:
    result = _compare(pairs, seed=seed)
    assert result.ci_low - 1e-12 <= result.difference <= result.ci_high + 1e-12
    assert result.ci_low >= -1.0 and result.ci_high <= 1.0


@given(SCORE_PAIRS)
def test_same_seed_same_result(pairs: list[tuple[float, float]]) -> None:
    assert _compare(pairs, seed=42) == _compare(pairs, seed=42)


@given(SCORE_PAIRS, st.integers(2, 4))
def test_more_rows_with_the_same_effect_detect_smaller_differences(
    pairs: list[tuple[float, float]], copies: int
) -> None:
    small = _compare(pairs)
    large = _compare(pairs * copies)
    assert large.difference == pytest.approx(small.difference)
    before, after = small.min_detectable_difference, large.min_detectable_difference
    assume(before is not None)
    assert after is not None and before is not None and after < before


@given(st.lists(st.tuples(GRID, GRID), min_size=1, max_size=40), st.integers(-64, 64))
def test_cohens_d_pooled_ignores_a_shared_shift_and_flips_with_the_sides(
    pairs: list[tuple[float, float]], k: int
) -> None:
    adapter = [a for a, _ in pairs]
    base = [b for _, b in pairs]
    d = cohens_d_pooled(adapter, base)
    # k/64 keeps every shifted score exact, so the shifted d is the same float.
    assert cohens_d_pooled([a + k / 64 for a in adapter], [b + k / 64 for b in base]) == d
    assert cohens_d_pooled(base, adapter) == (None if d is None else -d)
    assert compare_paired(adapter, base, n_boot=FAST_BOOT).effect_size_pooled == d


@given(
    st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), min_size=2, max_size=40),
    st.floats(-10.0, 10.0),
)
def test_cohens_d_pooled_ignores_any_shared_shift(pairs: list[tuple[float, float]], shift: float) -> None:
    adapter = np.array([a for a, _ in pairs])
    base = np.array([b for _, b in pairs])
    assume(adapter.std(ddof=1) + base.std(ddof=1) > 0.01)  # well away from a constant side
    d = cohens_d_pooled(adapter, base)
    assert d is not None
    assert cohens_d_pooled(adapter + shift, base + shift) == pytest.approx(d, rel=1e-9, abs=1e-9)
    assert cohens_d_pooled(base, adapter) == -d


# ---------------------------------------------------------------------------------------------------------
# Boundaries: the exact branch conditions, argument names in errors, arguments passed through


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired_t_test([0.1, math.nan]), r"^differences\[1\] is nan: every value must be a finite"),
        (lambda: cohens_dz([math.nan]), r"^differences\[0\] is nan"),
        (lambda: wilcoxon_signed_rank([0.5, math.inf]), r"^differences\[1\] is inf"),
        (
            lambda: paired_bootstrap_ci([math.nan], confidence=0.9, n_boot=10, seed=0),
            r"^differences\[0\] is nan",
        ),
        (
            lambda: paired_bootstrap_ci([0.1], confidence=1.0, n_boot=10, seed=0),
            r"^confidence must be strictly between 0 and 1, got 1.0$",
        ),
        (
            lambda: paired_bootstrap_ci([], confidence=0.9, n_boot=10, seed=0),
            r"^no differences to resample$",
        ),
        (lambda: cohens_d_pooled([math.nan, 0.5], [0.5, 0.5]), r"^adapter values\[0\] is nan"),
        (lambda: compare_paired([2.0, math.nan], [0.0, 0.0], bounded=False), r"^adapter values\[1\] is nan"),
        (lambda: compare_paired([2.0, 3.0], [math.inf, 0.0], bounded=False), r"^base values\[0\] is inf"),
        (lambda: compare_paired([], []), r"^no rows to compare: both score lists are empty$"),
        (lambda: mcnemar_power(50, 0.1, 1.5), r"^discordant_rate must be in \[0, 1\], got 1.5$"),
        (
            lambda: power_analysis_binary(50, 0.2, alpha=1.0),
            r"^alpha must be strictly between 0 and 1, got 1.0$",
        ),
        (lambda: power_analysis_binary(50, 0.2, power=1.0), r"^power must be in \[0.5, 1\), got 1.0$"),
        (lambda: power_analysis_continuous(50, 0.2, target=1.5), r"^target must be in \(0, 1\], got 1.5$"),
    ],
)
def test_errors_name_the_argument_at_fault(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_two_rows_are_enough_for_a_t_test() -> None:
    expected = sps.ttest_1samp([0.1, 0.3], 0.0)
    t, p = paired_t_test([0.1, 0.3])
    assert t == pytest.approx(expected.statistic, rel=1e-12)
    assert p == pytest.approx(expected.pvalue, rel=1e-12)


def test_a_mean_difference_exactly_at_the_noise_level_is_no_difference() -> None:
    # _NOISE is 1e-12 and the test is <=: a constant 1e-12 counts as rounding noise, the next float does not.
    noise, above = 1e-12, math.nextafter(1e-12, 1.0)
    assert paired_t_test([noise, noise]) == (0.0, 1.0)
    assert cohens_dz([noise, noise]) == 0.0
    assert cohens_d_pooled([noise, noise], [0.0, 0.0]) == 0.0
    assert paired_t_test([above, above]) == (math.inf, 0.0)
    assert cohens_dz([above, above]) == math.inf
    assert cohens_d_pooled([above, above], [0.0, 0.0]) == math.inf


def test_a_spread_at_or_below_the_noise_level_is_no_spread() -> None:
    # 0.5 - 0.4 is 0.1 less an ulp: the sd of these two "equal" differences is 2e-17, treated as 0.
    assert paired_t_test([0.1, 0.5 - 0.4]) == (math.inf, 0.0)
    # sd(ddof=1) of [0, x] is exactly 1e-12 here: still noise, so the mean (7e-13, noise too) is no evidence.
    x = 1.414213562373095e-12
    assert float(np.std([0.0, x], ddof=1)) == 1e-12
    assert paired_t_test([0.0, x]) == (0.0, 1.0)


# scipy's bootstrap takes the spread of its one resample too (ddof=1 of one value) and warns about it.
@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_bootstrap_of_one_resample_is_that_resamples_mean() -> None:
    d = [0.1, 0.2, 0.4]
    drawn = np.array(d)[np.random.default_rng(0).integers(0, 3, size=(1, 3))].mean()
    assert paired_bootstrap_ci(d, confidence=0.9, n_boot=1, seed=0) == pytest.approx(
        (drawn, drawn), abs=1e-15
    )


def test_mcnemar_power_without_spread_is_all_or_nothing() -> None:
    # psi = delta^2 leaves the statistic no spread: power is 1 exactly when sqrt(n) delta > z sqrt(psi).
    assert mcnemar_power(50, 0.0, 0.0) == 0.0  # excess exactly 0: not detected
    assert mcnemar_power(3, 1.0, 1.0) == 0.0  # sqrt(3) < 1.96
    assert mcnemar_power(8, 1.0, 1.0) == 1.0  # sqrt(8) - 1.96 = 0.87, between 0 and 1


def test_binary_detectable_difference_at_the_edges_of_connors_formula() -> None:
    # n = 4: the radicand n - z_a^2 + z_b^2 is 0.87, under 1; the answer sits just under psi = 1.
    four = power_analysis_binary(4, 1.0)
    assert four.min_detectable_difference == pytest.approx(0.99898, abs=1e-5)
    assert mcnemar_power(4, four.min_detectable_difference, 1.0) == pytest.approx(0.8, abs=1e-9)  # type: ignore[arg-type]
    # n = 6 at alpha 0.01 is under z_a^2 = 6.6: the quadratic's root there is the power-below-1/2 branch.
    assert power_analysis_binary(6, 0.96, alpha=0.01).min_detectable_difference is None
    # alpha with z_a exactly 1 and power 1/2 (z_b = 0): at n = 1 the radicand is exactly 0, sqrt(n) delta
    # equals z_a sqrt(psi) and delta equals psi. Every boundary is inclusive.
    alpha = 0.31731050786291415  # 2 * norm.sf(1), nudged to the float where norm.isf(alpha / 2) is 1.0
    edge = power_analysis_binary(1, 1.0, alpha=alpha, power=0.5)
    assert edge.min_detectable_difference == 1.0
    # There the rows needed for a target of 1 are (z_a sqrt(1) + 0)^2 / 1 = 1 exactly: not rounded up to 2.
    assert power_analysis_binary(1, 1.0, alpha=alpha, power=0.5, target=1.0).n_for_target == 1


def test_power_analyses_stay_finite_at_an_alpha_below_the_float_spacing_of_one() -> None:
    # 1 - alpha / 2 rounds to 1.0 below alpha ~ 2.2e-16 (norm.ppf(1.0) is inf): the upper tail is taken
    # directly (isf), so a strict alpha still gives numbers.
    continuous = power_analysis_continuous(50, 0.2, alpha=1e-20)
    assert continuous.min_detectable_difference == pytest.approx(0.4855, abs=1e-4)
    assert continuous.n_for_target is not None
    binary = power_analysis_binary(50, 0.2, alpha=1e-20)
    assert binary.n_for_target == 2064


def test_power_analyses_report_the_assumptions_they_were_given() -> None:
    binary = power_analysis_binary(40, 0.3, alpha=0.01, power=0.9, target=0.2)
    assert (binary.n, binary.alpha, binary.power, binary.target) == (40, 0.01, 0.9, 0.2)
    for sd in (0.0, 0.2):  # the no-spread early return and the full answer
        found = power_analysis_continuous(40, sd, alpha=0.01, power=0.9, target=0.2)
        assert (found.n, found.alpha, found.power, found.target) == (40, 0.01, 0.9, 0.2)
    assert power_analysis_continuous(40, 0.0, alpha=0.01, power=0.9, target=0.2) == PowerAnalysis(
        40, 0.01, 0.9, 0.2, None, None
    )


def test_continuous_detectable_difference_at_its_boundaries() -> None:
    assert power_analysis_continuous(50, 1e-12) == PowerAnalysis(50, 0.05, 0.8, 0.1, None, None)  # noise
    # n = 2 needs d = 11.55: at the sd where d * sd is exactly 1, a detectable difference of 1 is possible.
    effect = power_analysis_continuous(2, 1.0, bounded=False).min_detectable_difference
    assert effect is not None and effect == pytest.approx(11.5499, rel=1e-4)
    sd = 1.0 / effect
    while effect * sd != 1.0:  # 1 / d times d can miss 1 by an ulp; the neighbouring float does not
        sd = math.nextafter(sd, 1.0 if effect * sd < 1.0 else 0.0)
    assert power_analysis_continuous(2, sd).min_detectable_difference == 1.0
    assert power_analysis_continuous(2, 0.1).min_detectable_difference is None  # 1.15: scores cannot
    assert power_analysis_continuous(2, 0.1, bounded=False).min_detectable_difference == pytest.approx(
        1.155, abs=1e-3
    )
    # A target of 20 sd needs the fewest rows the t test allows.
    assert power_analysis_continuous(50, 0.005).n_for_target == 2


def test_continuous_power_at_unusual_alpha_and_power_matches_statsmodels() -> None:
    # alpha 0.6: 2 alpha is above 1, so z_{1 - 2 alpha} would not exist.
    found = power_analysis_continuous(50, 0.2, alpha=0.6)
    effect = TTestPower().solve_power(nobs=50, alpha=0.6, power=0.8, alternative="two-sided")
    assert found.min_detectable_difference == pytest.approx(effect * 0.2, rel=1e-5)
    rows = TTestPower().solve_power(effect_size=0.5, alpha=0.6, power=0.8, alternative="two-sided")
    assert found.n_for_target == max(2, math.ceil(rows))
    # alpha 0.9 above power 0.5: even no difference "reaches" the power.
    assert power_analysis_continuous(50, 0.2, alpha=0.9, power=0.5).min_detectable_difference == 0.0


def test_compare_paired_defaults_are_ten_thousand_resamples_seeded_zero() -> None:
    a, b = _continuous(30, 21)
    assert compare_paired(a, b) == compare_paired(a, b, n_boot=10_000, seed=0)


def test_binary_on_one_side_only_is_continuous() -> None:
    assert compare_paired([1.0, 0.0, 1.0], [0.5, 0.5, 0.2]).kind == "continuous"
    assert compare_paired([0.5, 0.5, 0.2], [1.0, 0.0, 1.0]).kind == "continuous"


def test_compare_paired_power_uses_its_alpha_and_bounds() -> None:
    adapter = [1.0] * 20 + [0.0] * 10 + [1.0] * 15 + [0.0] * 15
    base = [0.0] * 20 + [1.0] * 10 + [1.0] * 15 + [0.0] * 15
    binary = compare_paired(adapter, base, alpha=0.01)
    expected = power_analysis_binary(60, 0.5, alpha=0.01)
    assert binary.min_detectable_difference == expected.min_detectable_difference
    assert binary.n_for_10_points == expected.n_for_target
    a, b = _continuous(40, 22)
    continuous = compare_paired(a, b, alpha=0.01)
    sd = float(np.std(np.array(a) - np.array(b), ddof=1))
    assert continuous.min_detectable_difference == pytest.approx(
        power_analysis_continuous(40, sd, alpha=0.01).min_detectable_difference, rel=1e-12
    )
    # Two rows with sd 0.85: the detectable 9.8 is no score difference, but is one of unbounded values.
    assert compare_paired([1.0, 0.2], [0.1, 0.5]).min_detectable_difference is None
    assert compare_paired([1.0, 0.2], [0.1, 0.5], bounded=False).min_detectable_difference == pytest.approx(
        11.5499 * math.sqrt(0.72), rel=1e-4
    )


def test_two_rows_give_a_power_analysis_and_one_row_none() -> None:
    two = compare_paired([0.6, 0.65], [0.5, 0.5])
    assert (
        two.n_for_10_points == power_analysis_continuous(2, float(np.std([0.1, 0.15], ddof=1))).n_for_target
    )
    assert two.n_for_10_points is not None
    one = compare_paired([0.5], [0.2])
    assert one.min_detectable_difference is None and one.n_for_10_points is None


def test_p_exactly_at_alpha_is_not_significant() -> None:
    result = compare_paired([1.0] * 5 + [0.0] * 3, [0.0] * 8, alpha=2 * 0.5**5)
    assert result.p_value == result.alpha
    assert not result.significant


def _alpha_between(p: float) -> float:
    """An alpha between p and p at two digits: two digits alone would show p on the wrong side of it."""
    shown = float(f"{p:.2g}")
    assert shown != p
    return (p + shown) / 2.0


def test_describe_keeps_every_p_on_its_side_of_alpha() -> None:
    binary = compare_paired([1.0] * 5 + [0.0] * 3, [0.0] * 8, alpha=0.0624)  # p = 0.0625 shows as 0.062
    assert "McNemar exact p=0.0625, " in binary.describe()
    a, b = _continuous(30, 2)
    first = compare_paired(a, b, n_boot=FAST_BOOT)
    assert first.wilcoxon_p is not None
    for p, label in ((first.p_value, "paired t-test p="), (first.wilcoxon_p, "Wilcoxon p=")):
        alpha = _alpha_between(p)
        text = compare_paired(a, b, alpha=alpha, n_boot=FAST_BOOT).describe()
        shown = text.split(label)[1].split(",")[0]
        assert shown == formatting.p_value(p, alpha)
        assert (float(shown) < alpha) == (p < alpha)


def test_method_ends_with_what_the_bootstrap_resamples() -> None:
    method = compare_paired(*_continuous(10, 3), n_boot=FAST_BOOT).significance_report()["method"]
    assert method.endswith("confidence_interval: 95% percentile bootstrap of mean(diff) over rows")


def test_boolean_and_small_integer_scores_are_taken_as_numbers() -> None:
    # Subtracting numpy bools raises and unsigned integers wrap around (0 - 1 = 255): convert first.
    floats = compare_paired([1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0], n_boot=FAST_BOOT)
    as_bool = np.array([True, False, True, True]), np.array([False, True, True, False])
    assert compare_paired(*as_bool, n_boot=FAST_BOOT) == floats
    as_uint8 = (side.astype(np.uint8) for side in as_bool)
    assert compare_paired(*as_uint8, n_boot=FAST_BOOT) == floats


def test_rows_needed_for_a_vanishing_effect_is_the_normal_count_not_an_overflow() -> None:
    """A spread of 1e90 (a damaged document's cross-entropy) asks for ~1e183 rows: the count, not a scan
    of candidate n past int64. Either side of the switch the answer is within a few rows of the normal one."""
    huge = power_analysis_continuous(10, 1e90, bounded=False)
    assert huge.n_for_target is not None and 1e182 < huge.n_for_target < 1e184
    z = sps.norm.isf(0.025) + sps.norm.ppf(0.8)
    for rows in (9e6, 2e7):  # either side of the switch
        sd = TARGET_DIFFERENCE * math.sqrt(rows) / z
        needed = power_analysis_continuous(10, sd, bounded=False).n_for_target
        assert needed is not None and abs(needed - rows) <= 3


def test_a_comparison_is_computed_once_per_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gates, slices and results.json compare the same pair again: one computation per distinct inputs."""
    import pytest_llmeval.stats as module

    calls: list[int] = []
    real = module._compare_paired

    def counted(*args: Any, **kwargs: Any) -> module.PairedComparison:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "_compare_paired", counted)
    monkeypatch.setattr(module, "_COMPARED", {})
    first = module.compare_paired([1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 0, 1])
    assert module.compare_paired([1.0, 0.0, 1.0, 1.0, 0.0, 1.0], [0, 0, 1, 0, 0, 1]) is first
    assert len(calls) == 1
    # Any other input or parameter is another computation, with its own answer.
    assert module.compare_paired([1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 0, 1], alpha=0.01).alpha == 0.01
    assert module.compare_paired([1, 1, 1, 1, 0, 1], [0, 0, 1, 0, 0, 1]).difference != first.difference
    assert module.compare_paired([1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 0, 1], seed=1).ci_low is not None
    assert len(calls) == 4


@pytest.mark.parametrize(("n", "p", "correct"), [(24, 0.25, 21), (24, 0.25, 6), (100, 0.5, 50), (7, 0.2, 0)])
def test_above_chance_p_is_the_binomial_tail_when_every_row_has_as_many_choices(
    n: int, p: float, correct: int
) -> None:
    from scipy.stats import binom

    assert above_chance_p([p] * n, correct) == pytest.approx(binom.sf(correct - 1, n, p), rel=1e-9, abs=1e-15)


def test_above_chance_p_counts_every_way_to_be_right_with_mixed_choices() -> None:
    """Against enumerating all 2^n outcomes, rows of two, three and four choices mixed."""
    import itertools

    chances = [1 / 2, 1 / 3, 1 / 4, 1 / 4, 1 / 2, 1 / 3, 1 / 4]
    for correct in range(len(chances) + 1):
        exact = sum(
            math.prod(p if hit else 1 - p for p, hit in zip(chances, outcome, strict=True))
            for outcome in itertools.product([0, 1], repeat=len(chances))
            if sum(outcome) >= correct
        )
        assert above_chance_p(chances, correct) == pytest.approx(exact, rel=1e-12, abs=1e-15)
