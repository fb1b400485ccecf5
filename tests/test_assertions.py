"""assertions.py: what passes, what fails, and what the failure messages say."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pytest_llmeval.assertions import assert_better_than_base, assert_no_degradation
from pytest_llmeval.stats import PairedComparison

# The adaptation document's example: 60 rows, the adapter loses 8 the base gets right and wins none.
ADAPTER_60 = [1.0] * 43 + [0.0] * 17
BASE_60 = [1.0] * 51 + [0.0] * 9


def _binary(wins: int, losses: int, same_right: int, same_wrong: int) -> tuple[list[float], list[float]]:
    adapter = [1.0] * wins + [0.0] * losses + [1.0] * same_right + [0.0] * same_wrong
    base = [0.0] * wins + [1.0] * losses + [1.0] * same_right + [0.0] * same_wrong
    return adapter, base


def test_better_than_base_passes_and_returns_the_comparison() -> None:
    adapter, base = _binary(wins=12, losses=1, same_right=30, same_wrong=7)
    result = assert_better_than_base(adapter, base)
    assert isinstance(result, PairedComparison)
    assert result.discordant == (12, 1)
    assert result.significant and result.difference > 0


def test_better_than_base_failure_message_is_the_documents() -> None:
    expected = (
        "adapter is not significantly better than base: n=60, adapter 0.717, base 0.850, difference -0.133 "
        "(95% CI -0.233 to -0.050), McNemar exact p=0.0078, discordant 0 adapter-only / 8 base-only"
    )
    with pytest.raises(AssertionError, match=f"^{re.escape(expected)}$"):
        assert_better_than_base(ADAPTER_60, BASE_60)


def test_better_but_not_significant_fails() -> None:
    adapter, base = _binary(wins=4, losses=2, same_right=30, same_wrong=14)
    with pytest.raises(
        AssertionError, match=r"difference \+0\.040 .* p=0\.69, discordant 4 adapter-only / 2 base-only"
    ):
        assert_better_than_base(adapter, base)


def test_alpha_decides() -> None:
    adapter, base = _binary(wins=8, losses=1, same_right=30, same_wrong=11)  # exact p = 20/512 = 0.039
    assert_better_than_base(adapter, base, alpha=0.05)
    with pytest.raises(AssertionError, match=r"McNemar exact p=0\.039"):
        assert_better_than_base(adapter, base, alpha=0.01)


def test_better_than_base_continuous_message() -> None:
    rng = np.random.default_rng(4)
    base = rng.uniform(0.2, 0.8, 40)
    adapter = np.clip(base - 0.02 + rng.normal(0, 0.1, 40), 0, 1)
    pattern = r"^adapter is not significantly better than base: n=40, adapter 0\.\d{3}, base 0\.\d{3}, "
    pattern += r"difference [+-]0\.\d{3} \(95% CI [+-]0\.\d{3} to [+-]0\.\d{3}\), paired t-test p=\d\.\d+, "
    pattern += r"Wilcoxon p=\d(\.\d+)?$"
    with pytest.raises(AssertionError, match=pattern):
        assert_better_than_base(adapter.tolist(), base.tolist())


def test_no_degradation_passes_within_the_allowed_drop() -> None:
    adapter, base = _binary(wins=0, losses=1, same_right=15, same_wrong=4)  # exactly -0.05
    assert assert_no_degradation(adapter, base).difference == -0.05
    adapter, base = _binary(wins=5, losses=1, same_right=30, same_wrong=14)  # better is fine too
    assert assert_no_degradation(adapter, base).difference > 0


def test_no_degradation_fails_with_the_statistics() -> None:
    expected = (
        "adapter is worse than base by more than 0.050: n=60, adapter 0.717, base 0.850, difference -0.133 "
        "(95% CI -0.233 to -0.050), McNemar exact p=0.0078, discordant 0 adapter-only / 8 base-only"
    )
    with pytest.raises(AssertionError, match=f"^{re.escape(expected)}$"):
        assert_no_degradation(ADAPTER_60, BASE_60)
    # A looser bound lets the same scores through.
    assert assert_no_degradation(ADAPTER_60, BASE_60, max_drop=0.15).difference == pytest.approx(-8 / 60)


def test_no_degradation_is_not_a_significance_test() -> None:
    # One lost row in ten is a 0.10 drop: not significant (p = 1), still a failure at max_drop 0.05.
    adapter, base = _binary(wins=0, losses=1, same_right=6, same_wrong=3)
    with pytest.raises(AssertionError, match=r"difference -0\.100 .* p=1,"):
        assert_no_degradation(adapter, base)


@pytest.mark.parametrize("max_drop", [-0.01, 1.5])
def test_no_degradation_refuses_a_bad_max_drop(max_drop: float) -> None:
    with pytest.raises(ValueError, match=r"max_drop must be in \[0, 1\]"):
        assert_no_degradation([1.0], [1.0], max_drop=max_drop)


@pytest.mark.parametrize("check", [assert_better_than_base, assert_no_degradation])
def test_bad_scores_are_value_errors_not_failures(check: object) -> None:
    with pytest.raises(ValueError, match="same rows"):
        check([1.0, 0.0], [1.0])  # type: ignore[operator]
    with pytest.raises(ValueError, match=r"scores must be in \[0, 1\]"):
        check([2.0], [1.0])  # type: ignore[operator]
