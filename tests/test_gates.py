"""Unit tests and hypothesis properties of gates.py: verdict boundaries, messages, held-out checks."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmeval.benchmark import Case, load_benchmark
from pytest_llmeval.gates import (
    _EPS,
    GATES,
    Verdict,
    better_than_base,
    difficulty_mix,
    edge_cases,
    no_degradation,
    no_regression,
    size,
)
from pytest_llmeval.held_out import TrainingRow, _NgramIndex, held_out, load_training_data
from pytest_llmeval.prompts import Example
from pytest_llmeval.scorers import SCORERS
from pytest_llmeval.stats import PairedComparison, compare_paired

REPO = Path(__file__).resolve().parent.parent
INSTRUCTION = "Convert the date to ISO 8601 format (YYYY-MM-DD). Reply with the date only."
LONG_INPUT = (
    "The committee reviewed the quarterly report and decided to postpone the vote on the new library wing "
    "until the auditors finish checking the accounts of the building fund"
)


def _binary(n: int, adapter_right: int, base_right: int, *, both: int | None = None) -> PairedComparison:
    """A comparison of n binary rows; `both` rows are right for both models (default: as many as possible)."""
    both = min(adapter_right, base_right) if both is None else both
    adapter = [1] * adapter_right + [0] * (n - adapter_right)
    # The base is right on the first `both` rows the adapter got right, then on rows the adapter got wrong.
    base = [1] * both + [0] * (adapter_right - both) + [1] * (base_right - both)
    base += [0] * (n - len(base))
    # Few bootstrap resamples: the gates read the CI, they don't test its precision.
    return compare_paired(adapter, base, n_boot=200)


def _drop(drop: float, *, n: int = 100, base_score: float = 0.6) -> PairedComparison:
    """A continuous comparison whose adapter mean is `drop` below the base mean (up to float rounding)."""
    base = [base_score] * n
    # Alternating +-0.01 keeps the paired differences from being constant (a t-test needs some spread).
    adapter = [base_score - drop + (0.01 if i % 2 else -0.01) for i in range(n)]
    return compare_paired(adapter, base, n_boot=200)


def _case(
    case_id: str = "r1",
    instruction: str = INSTRUCTION,
    inp: str = "",
    *,
    difficulty: str = "easy",
    tags: Sequence[str] = (),
    line: int = 1,
) -> Case:
    return Case(
        id=case_id,
        instruction=instruction,
        input=inp,
        expected_output="x",
        evaluation_type="exact_match",
        difficulty=difficulty,
        line=line,
        tags=tuple(tags),
    )


def _example(example_id: str, instruction: str = INSTRUCTION, inp: str = "", *, line: int = 1) -> Example:
    return Example(id=example_id, instruction=instruction, input=inp, output="x", line=line)


def _train(*rows: tuple[str, str]) -> list[TrainingRow]:
    return [TrainingRow(instruction=i, input=inp, line=n) for n, (i, inp) in enumerate(rows, start=1)]


def _made(**changes: Any) -> PairedComparison:
    """A hand-made comparison with round numbers: messages checked in full, any field set exactly."""
    cmp = PairedComparison(
        n=40,
        kind="binary",
        mean_adapter=0.75,
        mean_base=0.5,
        difference=0.25,
        ci_low=0.125,
        ci_high=0.375,
        confidence=0.95,
        test="mcnemar_exact",
        statistic=12.0,
        p_value=0.01,
        wilcoxon_p=None,
        effect_size=0.5,
        effect_size_pooled=0.5,
        discordant=(12, 2),
        alpha=0.05,
        significant=True,
        min_detectable_difference=0.2,
        n_for_10_points=300,
        t_statistic=3.0,
    )
    return dataclasses.replace(cmp, **changes)


# ---------------------------------------------------------------------------------------------------------
# Verdict


def test_verdict_passed_and_json() -> None:
    statuses = {s: Verdict("size", s, "m", {"k": [1]}) for s in ("pass", "warn", "fail", "skip")}
    assert {s: v.passed for s, v in statuses.items()} == {
        "pass": True,
        "warn": True,
        "fail": False,
        "skip": True,
    }
    out = statuses["warn"].to_json()
    assert out == {"gate": "size", "status": "warn", "passed": True, "message": "m", "details": {"k": [1]}}
    json.dumps(out)


def test_verdict_refuses_unknown_gate_and_status() -> None:
    with pytest.raises(ValueError, match="unknown status 'ok'"):
        Verdict("size", "ok", "m")
    with pytest.raises(ValueError, match="unknown gate 'sizes'"):
        Verdict("sizes", "pass", "m")
    assert "held_out" in GATES


def test_verdict_errors_list_the_known_gates_and_statuses() -> None:
    known_gates = (
        "better_than_base, no_degradation, no_regression, size, difficulty_mix, edge_cases, held_out"
    )
    with pytest.raises(ValueError, match=re.escape(f"unknown gate 'sizes' (known: {known_gates})")):
        Verdict("sizes", "pass", "m")
    with pytest.raises(ValueError, match=re.escape("unknown status 'ok' (known: pass, warn, fail, skip)")):
        Verdict("size", "ok", "m")


# ---------------------------------------------------------------------------------------------------------
# better_than_base


def test_better_than_base_significant_pass_message_has_the_numbers() -> None:
    cmp = _binary(60, adapter_right=53, base_right=4)
    verdict = better_than_base(cmp)
    assert verdict.status == "pass"
    assert verdict.message.startswith("adapter 0.883 vs base 0.067: +0.817 (95% CI ")
    assert f"McNemar exact p={cmp.p_value:.2g} < 0.05" in verdict.message
    assert verdict.details["comparison"] == cmp.to_json()
    json.dumps(verdict.to_json())


def test_better_than_base_not_better_fails() -> None:
    verdict = better_than_base(_binary(60, adapter_right=30, base_right=30))
    assert verdict.status == "fail"
    assert verdict.message.startswith("adapter is not better than base: adapter 0.500 vs base 0.500: +0.000")


def test_better_than_base_not_significant_fails_with_power_note() -> None:
    cmp = _binary(60, adapter_right=36, base_right=30, both=24)  # discordant 12 / 6
    assert cmp.min_detectable_difference is not None and cmp.n_for_10_points is not None
    verdict = better_than_base(cmp)
    assert verdict.status == "fail"
    assert verdict.message.startswith("adapter is better than base but not significantly: adapter 0.600")
    assert f"McNemar exact p={cmp.p_value:.2g} >= 0.05" in verdict.message
    assert verdict.message.endswith(
        f"; this benchmark can only detect differences >= {cmp.min_detectable_difference:.3f} at n=60 "
        f"(about {cmp.n_for_10_points} rows would detect 0.10)"
    )
    # With too few discordant rows no difference is detectable: the note is left out, not made up.
    tiny = _binary(60, adapter_right=31, base_right=30)
    assert tiny.min_detectable_difference is None
    assert "can only detect" not in better_than_base(tiny).message


def test_better_than_base_p_exactly_alpha_is_not_significant() -> None:
    cmp = dataclasses.replace(_binary(60, adapter_right=40, base_right=30), p_value=0.05, alpha=0.05)
    assert better_than_base(cmp).status == "fail"
    assert better_than_base(dataclasses.replace(cmp, p_value=0.0499)).status == "pass"


def test_better_than_base_point_mode() -> None:
    weak = _binary(60, adapter_right=31, base_right=30)
    verdict = better_than_base(weak, mode="point")
    assert verdict.status == "pass"
    assert "better on the point estimate (not significant: McNemar exact p=" in verdict.message
    assert verdict.details["mode"] == "point"
    strong = better_than_base(_binary(60, adapter_right=53, base_right=4), mode="point")
    assert strong.status == "pass" and "< 0.05)" in strong.message
    tie = better_than_base(_binary(60, adapter_right=30, base_right=30), mode="point")
    assert tie.status == "fail"
    assert tie.message.startswith("adapter is not better than base on the point estimate: adapter 0.500")


def test_better_than_base_skip_and_bad_mode() -> None:
    verdict = better_than_base(None)
    assert (verdict.status, verdict.message, verdict.passed) == (
        "skip",
        "no adapter: nothing to compare",
        True,
    )
    with pytest.raises(ValueError, match="mode must be 'significant' or 'point', got 'loose'"):
        better_than_base(None, mode="loose")


_BETTER = "adapter 0.750 vs base 0.500: +0.250 (95% CI +0.125 to +0.375)"
_TIE: dict[str, Any] = {
    "mean_adapter": 0.5,
    "difference": 0.0,
    "ci_low": -0.125,
    "ci_high": 0.125,
    "p_value": 1.0,
}
_SAME = "adapter 0.500 vs base 0.500: +0.000 (95% CI -0.125 to +0.125)"
_NOT_SIGNIFICANTLY = (
    f"adapter is better than base but not significantly: {_BETTER}, McNemar exact p=0.25 >= 0.05"
)


@pytest.mark.parametrize(
    ("mode", "changes", "status", "message"),
    [
        ("significant", {}, "pass", f"{_BETTER}, McNemar exact p=0.01 < 0.05"),
        # 0.0496 shown as "0.05 < 0.05" would contradict itself: the p-value gets the digits it needs.
        ("significant", {"p_value": 0.0496}, "pass", f"{_BETTER}, McNemar exact p=0.0496 < 0.05"),
        ("significant", _TIE, "fail", f"adapter is not better than base: {_SAME}, McNemar exact p=1"),
        (
            "significant",
            {"p_value": 0.25},
            "fail",
            f"{_NOT_SIGNIFICANTLY}; this benchmark can only detect differences >= 0.200 at n=40 "
            "(about 300 rows would detect 0.10)",
        ),
        (
            "significant",
            {"p_value": 0.25, "n_for_10_points": None},
            "fail",
            f"{_NOT_SIGNIFICANTLY}; this benchmark can only detect differences >= 0.200 at n=40",
        ),
        (
            "significant",
            {"p_value": 0.25, "min_detectable_difference": None, "n_for_10_points": None},
            "fail",
            _NOT_SIGNIFICANTLY,
        ),
        ("point", {}, "pass", f"{_BETTER}; better on the point estimate (McNemar exact p=0.01 < 0.05)"),
        (
            "point",
            {"p_value": 0.25},
            "pass",
            f"{_BETTER}; better on the point estimate (not significant: McNemar exact p=0.25 >= 0.05)",
        ),
        ("point", _TIE, "fail", f"adapter is not better than base on the point estimate: {_SAME}"),
    ],
)
def test_better_than_base_each_verdict_has_its_full_message_and_details(
    mode: str, changes: dict[str, Any], status: str, message: str
) -> None:
    cmp = _made(**changes)
    verdict = better_than_base(cmp, mode=mode)
    assert (verdict.status, verdict.message) == (status, message)
    assert verdict.details == {"mode": mode, "comparison": cmp.to_json()}


@pytest.mark.parametrize("mode", ["significant", "point"])
def test_better_than_base_skip_records_the_mode(mode: str) -> None:
    verdict = better_than_base(None, mode=mode)
    assert (verdict.status, verdict.message, verdict.details) == (
        "skip",
        "no adapter: nothing to compare",
        {"mode": mode},
    )


@pytest.mark.parametrize("mode", ["significant", "point"])
def test_better_than_base_a_difference_of_eps_is_rounding_not_improvement(mode: str) -> None:
    # Within _EPS of zero counts as zero, even with a tiny p-value: the adapter is not better.
    cmp = _made(difference=_EPS, p_value=0.001)
    assert better_than_base(cmp, mode=mode).status == "fail"


# ---------------------------------------------------------------------------------------------------------
# no_degradation: drop = base - adapter; drop <= 0.05 pass, <= 0.10 warn, above fail. A drop within 1e-9 of a
# threshold counts as at it (0.85 - 0.90 is -0.05000000000000004 in floats), and at a threshold the milder
# verdict wins.


@pytest.mark.parametrize(
    ("drop", "status"),
    [(-0.2, "pass"), (0.0, "pass"), (0.05, "pass"), (0.0501, "warn"), (0.10, "warn"), (0.1001, "fail")],
)
def test_no_degradation_boundaries_continuous(drop: float, status: str) -> None:
    verdict = no_degradation(_drop(drop))
    assert verdict.status == status
    if drop > 0:
        # Just past a threshold the message shows enough decimals to be past it: "0.0501 > 0.050".
        assert f"drop {drop:.3f}" in verdict.message or f"drop {drop:.4f}" in verdict.message


@pytest.mark.parametrize(
    ("adapter_right", "status"), [(85, "pass"), (84, "warn"), (80, "warn"), (79, "fail")]
)
def test_no_degradation_boundaries_binary(adapter_right: int, status: str) -> None:
    # 0.85 - 0.90 and 0.80 - 0.90 are not exactly -0.05 and -0.10 in floats: the rule absorbs that.
    assert no_degradation(_binary(100, adapter_right=adapter_right, base_right=90)).status == status


def test_no_degradation_float_representation_at_threshold() -> None:
    cmp = dataclasses.replace(_drop(0.05), difference=0.85 - 0.90)
    assert cmp.difference < -0.05  # the float really is past the threshold...
    assert no_degradation(cmp).status == "pass"  # ...and still counts as at it


def test_no_degradation_messages() -> None:
    warn = no_degradation(_binary(100, adapter_right=83, base_right=90))
    assert warn.status == "warn"
    assert warn.message.startswith("adapter 0.830 vs base 0.900: -0.070 (95% CI ")
    assert "drop 0.070 > warn threshold 0.050 (fails above 0.100)" in warn.message
    fail = no_degradation(_binary(100, adapter_right=70, base_right=90))
    assert "drop 0.200 > fail threshold 0.100" in fail.message
    cmp = _binary(100, adapter_right=88, base_right=90)
    assert f"CI {cmp.ci_low:+.3f} to {cmp.ci_high:+.3f}" in no_degradation(cmp).message
    assert no_degradation(_binary(100, adapter_right=95, base_right=90)).message.endswith(": no drop")
    assert no_degradation(None).status == "skip"


def test_no_degradation_custom_and_invalid_thresholds() -> None:
    assert no_degradation(_drop(0.03), warn_drop=0.02, fail_drop=0.03).status == "warn"
    assert no_degradation(_drop(0.0), warn_drop=0.0, fail_drop=0.0).status == "pass"
    with pytest.raises(ValueError, match="warn_drop <= fail_drop"):
        no_degradation(None, warn_drop=0.1, fail_drop=0.05)
    with pytest.raises(ValueError, match="0 <= warn_drop"):
        no_degradation(None, warn_drop=-0.01)


@pytest.mark.parametrize(
    ("drop", "difference", "status", "tail"),
    [
        (0.2, "-0.200", "fail", "drop 0.200 > fail threshold 0.100"),
        (0.07, "-0.070", "warn", "drop 0.070 > warn threshold 0.050 (fails above 0.100)"),
        # Just below the fail threshold, "0.100" is on the same side of it as 0.0999: no extra digits.
        (0.0999, "-0.100", "warn", "drop 0.100 > warn threshold 0.050 (fails above 0.100)"),
        # Exactly _EPS past a threshold is still at it: the milder verdict, shown as the threshold itself.
        (0.1 + _EPS, "-0.100", "warn", "drop 0.100 > warn threshold 0.050 (fails above 0.100)"),
        (0.05 + _EPS, "-0.050", "pass", "drop 0.050 <= 0.050"),
        (0.0499, "-0.050", "pass", "drop 0.050 <= 0.050"),
        # Past a threshold, the drop shows the digits that put it past: 4 here, every digit a hair past.
        (0.0501, "-0.050", "warn", "drop 0.0501 > warn threshold 0.050 (fails above 0.100)"),
        (
            math.nextafter(0.05 + _EPS, 1),
            "-0.050",
            "warn",
            "drop 0.05000000100000001 > warn threshold 0.050 (fails above 0.100)",
        ),
        (0.0, "-0.000", "pass", "no drop"),
        (-0.05, "+0.050", "pass", "no drop"),
    ],
)
def test_no_degradation_each_verdict_has_its_full_message_and_details(
    drop: float, difference: str, status: str, tail: str
) -> None:
    cmp = _made(mean_adapter=0.85, mean_base=0.9, difference=-drop, ci_low=-0.1, ci_high=0.0)
    verdict = no_degradation(cmp)
    assert verdict.status == status
    assert verdict.message == f"adapter 0.850 vs base 0.900: {difference} (95% CI -0.100 to +0.000): {tail}"
    assert verdict.details == {"drop": drop, "warn_drop": 0.05, "fail_drop": 0.1, "comparison": cmp.to_json()}


def test_no_degradation_skip_without_adapter_has_message_and_empty_details() -> None:
    verdict = no_degradation(None)
    assert (verdict.status, verdict.message, verdict.details) == (
        "skip",
        "no adapter: nothing to compare",
        {},
    )


def test_no_degradation_invalid_thresholds_name_both_values() -> None:
    expected = "no_degradation needs 0 <= warn_drop <= fail_drop, got warn_drop=0.1, fail_drop=0.05"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        no_degradation(None, warn_drop=0.1, fail_drop=0.05)


# ---------------------------------------------------------------------------------------------------------
# no_regression


def test_no_regression_fails_when_significantly_worse() -> None:
    cmp = _binary(60, adapter_right=20, base_right=50)
    verdict = no_regression(cmp, previous_version="0.1.0", comparable=True)
    assert verdict.status == "fail"
    assert verdict.message.startswith(
        "significant regression: current 0.333 vs previous version 0.1.0 0.833: -0.500"
    )
    assert f"p={cmp.p_value:.2g} < 0.05" in verdict.message


def test_no_regression_passes_when_not_significantly_worse_or_better() -> None:
    worse = no_regression(
        _binary(60, adapter_right=29, base_right=30), previous_version=None, comparable=True
    )
    assert worse.status == "pass"
    assert "current 0.483 vs previous results 0.500" in worse.message
    assert "lower but not significantly" in worse.message
    better = no_regression(
        _binary(60, adapter_right=40, base_right=30), previous_version="v2", comparable=True
    )
    assert better.status == "pass" and better.message.endswith("no regression")


def test_no_regression_skips() -> None:
    cmp = _binary(60, adapter_right=20, base_right=50)
    changed = no_regression(cmp, previous_version="0.1.0", comparable=False, reason="benchmark hash changed")
    assert (changed.status, changed.message) == ("skip", "scores are not comparable: benchmark hash changed")
    assert no_regression(cmp, previous_version=None, comparable=False).message.startswith(
        "scores are not comparable: "
    )
    none = no_regression(None, previous_version=None, comparable=True)
    assert (none.status, none.message) == ("skip", "no previous results to compare against")


_WORSE: dict[str, Any] = {
    "mean_adapter": 0.5,
    "mean_base": 0.75,
    "difference": -0.25,
    "ci_low": -0.375,
    "ci_high": -0.125,
}
_LOWER = "current 0.500 vs previous version 0.1.0 0.750: -0.250 (95% CI -0.375 to -0.125)"


@pytest.mark.parametrize(
    ("previous_version", "changes", "status", "message"),
    [
        ("0.1.0", _WORSE, "fail", f"significant regression: {_LOWER}, McNemar exact p=0.01 < 0.05"),
        (
            "0.1.0",
            {**_WORSE, "p_value": 0.0496},
            "fail",
            f"significant regression: {_LOWER}, McNemar exact p=0.0496 < 0.05",
        ),
        (
            "0.1.0",
            {**_WORSE, "test": "paired_t", "kind": "continuous"},
            "fail",
            f"significant regression: {_LOWER}, paired t-test p=0.01 < 0.05",
        ),
        (
            None,
            {**_WORSE, "p_value": 0.25},
            "pass",
            "current 0.500 vs previous results 0.750: -0.250 (95% CI -0.375 to -0.125): "
            "lower but not significantly, McNemar exact p=0.25 >= 0.05",
        ),
        (
            "v2",
            {},
            "pass",
            "current 0.750 vs previous version v2 0.500: +0.250 (95% CI +0.125 to +0.375): no regression",
        ),
        (
            "v2",
            _TIE,
            "pass",
            "current 0.500 vs previous version v2 0.500: +0.000 (95% CI -0.125 to +0.125): no regression",
        ),
        # A difference of -_EPS is rounding, not a regression, however small the p-value.
        (
            "v2",
            {**_TIE, "difference": -_EPS, "p_value": 0.001},
            "pass",
            "current 0.500 vs previous version v2 0.500: -0.000 (95% CI -0.125 to +0.125): no regression",
        ),
        (
            "v2",
            {**_TIE, "difference": -_EPS, "p_value": 0.25},
            "pass",
            "current 0.500 vs previous version v2 0.500: -0.000 (95% CI -0.125 to +0.125): no regression",
        ),
    ],
)
def test_no_regression_each_verdict_has_its_full_message_and_details(
    previous_version: str | None, changes: dict[str, Any], status: str, message: str
) -> None:
    cmp = _made(**changes)
    verdict = no_regression(cmp, previous_version=previous_version, comparable=True)
    assert (verdict.status, verdict.message) == (status, message)
    assert verdict.details == {
        "previous_version": previous_version,
        "comparable": True,
        "comparison": cmp.to_json(),
    }


def test_no_regression_p_exactly_alpha_is_not_significant() -> None:
    # Reachable with real data: McNemar on 2 discordant rows, both against the adapter, gives p = 0.5.
    cmp = compare_paired([0, 0], [1, 1], alpha=0.5, n_boot=50)
    assert (cmp.difference, cmp.p_value) == (-1.0, 0.5)
    verdict = no_regression(cmp, previous_version=None, comparable=True)
    assert verdict.status == "pass"
    assert "lower but not significantly, McNemar exact p=0.5 >= 0.5" in verdict.message


def test_no_regression_skips_carry_their_details() -> None:
    changed = no_regression(_made(), previous_version="0.1.0", comparable=False, reason="hash changed")
    assert changed.details == {"previous_version": "0.1.0", "comparable": False, "reason": "hash changed"}
    default = no_regression(_made(), previous_version=None, comparable=False)
    why = "the benchmark changed since the previous results"
    assert (default.status, default.message) == ("skip", f"scores are not comparable: {why}")
    assert default.details == {"previous_version": None, "comparable": False, "reason": why}
    none = no_regression(None, previous_version="0.1.0", comparable=True)
    assert none.details == {"previous_version": "0.1.0", "comparable": True}


# ---------------------------------------------------------------------------------------------------------
# size, difficulty_mix, edge_cases


def test_size_boundary() -> None:
    assert size(50).status == "pass"
    low = size(49)
    assert low.status == "fail"
    assert low.message == "benchmark has 49 rows, fewer than the minimum 50"
    assert size(3, minimum=3).status == "pass"
    with pytest.raises(ValueError, match="minimum must be >= 0"):
        size(10, minimum=-1)


def test_difficulty_mix_on_target_and_at_tolerance() -> None:
    assert difficulty_mix({"easy": 30, "medium": 50, "hard": 20}).status == "pass"
    # 0.45 - 0.3 is 0.15000000000000002 in floats: exactly at the tolerance, so still a pass.
    at = difficulty_mix({"easy": 45, "medium": 35, "hard": 20})
    assert at.status == "pass"
    past = difficulty_mix({"easy": 46, "medium": 34, "hard": 20})
    assert past.status == "warn"
    assert past.message == (
        "easy 46% (target 30%), medium 34% (target 50%), hard 20% (target 20%): "
        "easy, medium off target by more than 15 points"
    )
    assert past.details["off_target"] == ["easy", "medium"]


def test_difficulty_mix_shows_decimals_where_rounding_would_hide_the_miss() -> None:
    verdict = difficulty_mix({"easy": 4501, "medium": 3499, "hard": 2000})
    assert verdict.status == "warn"
    assert verdict.message.startswith("easy 45.01% (target 30%), medium 34.99% (target 50%), hard 20% ")


def test_difficulty_mix_unknown_level_and_empty() -> None:
    verdict = difficulty_mix({"easy": 3, "medium": 5, "hard": 1, "expert": 1}, tolerance=0.05)
    assert verdict.status == "warn"
    assert "expert 10% (target 0%)" in verdict.message
    assert difficulty_mix({}).status == "skip"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tolerance": 1.5}, "tolerance must be within"),
        ({"tolerance": -0.1}, "tolerance must be within"),
        ({"target": {"easy": 0.5, "hard": 0.2}}, "sum to 1"),
        ({"target": {"easy": 1.5, "hard": -0.5}}, "within \\[0, 1\\]"),
        # Within the sum's rounding allowance of 1, but a share above 1 is still refused.
        ({"target": {"easy": 1.0000005}}, "within \\[0, 1\\]"),
    ],
)
def test_difficulty_mix_invalid_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        difficulty_mix({"easy": 1}, **kwargs)  # type: ignore[arg-type]


@given(st.dictionaries(st.sampled_from(["easy", "medium", "hard", "other"]), st.integers(0, 10_000)))
@settings(max_examples=100, deadline=None)
def test_difficulty_mix_never_fails(counts: dict[str, int]) -> None:
    verdict = difficulty_mix(counts)
    assert verdict.status in ("pass", "warn", "skip")
    assert verdict.passed


def test_edge_cases_boundary() -> None:
    cases = [_case(f"r{i}", tags=["edge"] if i < 5 else ["dates"]) for i in range(20)]
    verdict = edge_cases(cases)
    assert (verdict.status, verdict.message) == ("pass", "5 of 20 rows tagged 'edge' (minimum 5)")
    short = edge_cases(cases[1:])
    assert (short.status, short.message) == ("fail", "4 of 19 rows tagged 'edge', fewer than the minimum 5")
    assert short.details["ids"] == ["r1", "r2", "r3", "r4"]
    assert edge_cases(cases, tag="dates", minimum=15).status == "pass"


@pytest.mark.parametrize(
    ("n_rows", "minimum", "status", "message"),
    [
        (50, 50, "pass", "benchmark has 50 rows (minimum 50)"),
        (49, 50, "fail", "benchmark has 49 rows, fewer than the minimum 50"),
        (0, 50, "fail", "benchmark has 0 rows, fewer than the minimum 50"),
        (0, 0, "pass", "benchmark has 0 rows (minimum 0)"),
        (1, 0, "pass", "benchmark has 1 rows (minimum 0)"),
    ],
)
def test_size_each_verdict_has_its_full_message_and_details(
    n_rows: int, minimum: int, status: str, message: str
) -> None:
    verdict = size(n_rows, minimum=minimum)
    assert (verdict.status, verdict.message) == (status, message)
    assert verdict.details == {"n_rows": n_rows, "minimum": minimum}


def test_size_negative_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^size minimum must be >= 0, got -1$"):
        size(10, minimum=-1)
    with pytest.raises(ValueError, match=r"^n_rows must be >= 0, got -1$"):
        size(-1)


@pytest.mark.parametrize(
    ("counts", "options", "message"),
    [
        (
            {"easy": 30, "medium": 50, "hard": 20},
            {},
            "easy 30% (target 30%), medium 50% (target 50%), hard 20% (target 20%): "
            "within 15 points of target",
        ),
        # A level present with 0 rows is on its target of 0%, not off it.
        (
            {"easy": 3, "medium": 5, "hard": 2, "expert": 0},
            {},
            "easy 30% (target 30%), medium 50% (target 50%), hard 20% (target 20%), expert 0% (target 0%): "
            "within 15 points of target",
        ),
        (
            {"easy": 3, "medium": 5, "hard": 2},
            {"tolerance": 0.0},
            "easy 30% (target 30%), medium 50% (target 50%), hard 20% (target 20%): "
            "within 0 points of target",
        ),
        # Target levels missing from the counts have 0 rows.
        (
            {"hard": 10},
            {"tolerance": 1.0},
            "easy 0% (target 30%), medium 0% (target 50%), hard 100% (target 20%): "
            "within 100 points of target",
        ),
        (
            {"easy": 4},
            {"target": {"easy": 1.0, "hard": 0.0}},
            "easy 100% (target 100%), hard 0% (target 0%): within 15 points of target",
        ),
    ],
)
def test_difficulty_mix_pass_has_its_full_message_and_details(
    counts: dict[str, int], options: dict[str, Any], message: str
) -> None:
    verdict = difficulty_mix(counts, **options)
    assert (verdict.status, verdict.message) == ("pass", message)
    target = options.get("target", {"easy": 0.3, "medium": 0.5, "hard": 0.2})
    total = sum(counts.values())
    levels = list(target) + sorted(set(counts) - set(target))
    assert verdict.details == {
        "counts": counts,
        "shares": {level: counts.get(level, 0) / total for level in levels},
        "target": target,
        "tolerance": options.get("tolerance", 0.15),
        "off_target": [],
    }


def test_difficulty_mix_eps_past_the_tolerance_is_still_at_it() -> None:
    # 0.75 - 0.5 is exactly (0.25 - _EPS) + _EPS: the inclusive edge of the rounding allowance.
    verdict = difficulty_mix({"easy": 3, "hard": 1}, target={"easy": 0.5, "hard": 0.5}, tolerance=0.25 - _EPS)
    assert (verdict.status, verdict.details["off_target"]) == ("pass", [])


def test_difficulty_mix_skip_without_rows_keeps_the_counts() -> None:
    verdict = difficulty_mix({"easy": 0, "hard": 0})
    assert (verdict.status, verdict.message, verdict.details) == (
        "skip",
        "no rows: no difficulty mix to check",
        {"counts": {"easy": 0, "hard": 0}},
    )


def test_difficulty_mix_negative_count_is_refused_with_the_counts() -> None:
    with pytest.raises(ValueError, match=r"^difficulty counts must be >= 0, got \{'easy': -1\}$"):
        difficulty_mix({"easy": -1})


def test_edge_cases_pass_details_and_minimum_zero() -> None:
    cases = [_case(f"r{i}", tags=["edge"] if i < 5 else ["dates"]) for i in range(20)]
    verdict = edge_cases(cases)
    assert verdict.details == {"tag": "edge", "minimum": 5, "count": 5, "ids": ["r0", "r1", "r2", "r3", "r4"]}
    empty = edge_cases([], minimum=0)
    assert (empty.status, empty.message) == ("pass", "0 of 0 rows tagged 'edge' (minimum 0)")
    assert empty.details == {"tag": "edge", "minimum": 0, "count": 0, "ids": []}
    with pytest.raises(ValueError, match=r"^edge_cases minimum must be >= 0, got -1$"):
        edge_cases([], minimum=-1)


# ---------------------------------------------------------------------------------------------------------
# held_out


def test_held_out_exact_duplicate_despite_case_whitespace_and_punctuation() -> None:
    cases = [_case("d1", inp="August 24, 2003", line=4), _case("d2", inp="2 Jun 2017")]
    training = _train(
        ("Translate to French.", "Good morning"),
        (
            "  convert THE date to ISO 8601 format (YYYY-MM-DD).   reply with the date only  ",
            "  august 24, 2003!",
        ),
    )
    verdict = held_out(cases, training)
    assert verdict.status == "fail"
    assert verdict.message.startswith(
        "1 of 2 benchmark rows against 2 training rows appear in the training data"
    )
    assert "d1 (training line 2)" in verdict.message
    assert verdict.details["exact"] == [
        {"id": "d1", "line": 4, "rules": ["exact"], "matches": 1, "training_lines": [2]}
    ]


def test_held_out_prompt_text_matches_instruction_and_input() -> None:
    # A training file in the "prompt" form holds the same row as one text: instruction, newline, input.
    training = [TrainingRow(instruction=f"{INSTRUCTION}\nAugust 24, 2003", input="", line=7)]
    verdict = held_out([_case("d1", inp="August 24, 2003")], training)
    assert verdict.status == "fail"
    assert verdict.details["exact"][0]["training_lines"] == [7]


def test_held_out_number_masked_near_duplicate() -> None:
    sentence = "The board met on {} to approve the budget for the new library wing and its reading room."
    cases = [_case("m1", "Summarise the minutes.", sentence.format("March 5, 2021"))]
    training = _train(("Summarise the minutes.", sentence.format("March 6, 2020")))
    verdict = held_out(cases, training)
    assert verdict.status == "warn"
    assert verdict.details["near"] == [
        {"id": "m1", "line": 1, "rules": ["numbers masked"], "matches": 1, "training_lines": [1]}
    ]
    assert verdict.message == (
        "1 of 1 benchmark rows against 1 training rows are near duplicates: "
        "m1 (training line 1; numbers masked)"
    )


def test_held_out_does_not_mask_rows_made_of_numbers() -> None:
    # In a bare date the numbers are the row: "March 5, 2021" and "March 6, 2020" are different questions.
    verdict = held_out([_case("d1", inp="March 5, 2021")], _train((INSTRUCTION, "March 6, 2020")))
    assert verdict.status == "pass"
    assert (
        held_out([_case("d1", inp="March 5, 2021")], _train((INSTRUCTION, "March 5, 2021"))).status == "fail"
    )
    # ...unless the numbers are few among the words (an ordinal date differing only in its year).
    near = held_out(
        [_case("d1", inp="fourteenth of March, 1997")], _train((INSTRUCTION, "fourteenth of March, 2018"))
    )
    assert near.status == "warn"


def test_held_out_ngram_near_duplicate_one_word_changed() -> None:
    changed = LONG_INPUT.replace("postpone", "delay")
    cases = [_case("n1", "Summarise this.", LONG_INPUT)]
    verdict = held_out(
        cases, _train(("Write a summary of the text below.", changed), ("Other.", "unrelated"))
    )
    assert verdict.status == "warn"
    assert verdict.details["near"][0]["rules"] == ["3-gram overlap"]
    assert verdict.details["near"][0]["training_lines"] == [1]
    assert "n1 (training line 1; 3-gram overlap)" in verdict.message


def test_held_out_ngram_containment_in_a_longer_training_text() -> None:
    training = [TrainingRow(instruction=f"Notes. {LONG_INPUT}. Then lunch was served.", input="", line=3)]
    verdict = held_out([_case("n1", "Summarise this.", LONG_INPUT)], training)
    assert verdict.status == "warn"
    assert verdict.details["near"][0]["training_lines"] == [3]


def test_held_out_unrelated_text_passes() -> None:
    cases = [_case("u1", "Summarise this.", LONG_INPUT), _case("u2", inp="Jan 5th, 2024")]
    training = _train(
        ("Summarise this.", "A recipe for bread: flour, water, salt and yeast, left to rise overnight."),
        (INSTRUCTION, "the 20th of February 2020"),
        ("Translate to German.", "the committee reviewed"),
    )
    verdict = held_out(cases, training)
    assert verdict.status == "pass"
    assert (
        verdict.message == "none of 2 benchmark rows against 3 training rows is a duplicate or near duplicate"
    )


def test_held_out_skip_without_training_and_invalid_settings() -> None:
    verdict = held_out([_case()], [])
    assert verdict.status == "skip"
    assert verdict.message.startswith("no training data given")
    with pytest.raises(ValueError, match="ngram must be >= 1"):
        held_out([], [], ngram=0)
    with pytest.raises(ValueError, match="max_overlap must be within \\(0, 1\\]"):
        held_out([], [], max_overlap=0)
    with pytest.raises(ValueError, match="max_number_share must be within"):
        held_out([], [], max_number_share=2)


def test_held_out_real_shipped_data() -> None:
    validators = {name: s.validate for name, s in SCORERS.items()}
    cases = load_benchmark(REPO / "benchmarks" / "dates.jsonl", validators).cases
    training = load_training_data(REPO / "adapters" / "date-iso" / "data" / "train.jsonl")
    verdict = held_out(cases, training)
    assert verdict.details["exact"] == []
    assert verdict.status in ("pass", "warn")
    # Benchmark and training share their formats on purpose: masking every date's digits would flag almost
    # every row. Only rows whose numbers are few among their words are compared masked.
    assert len(verdict.details["near"]) < len(cases) // 4
    json.dumps(verdict.to_json())


_WORDS = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
_TEXTS = st.lists(_WORDS, min_size=1, max_size=12).map(" ".join)


@given(st.lists(st.tuples(_TEXTS, _TEXTS), min_size=1, max_size=8))
@settings(max_examples=50, deadline=None)
def test_held_out_never_fails_without_training(rows: list[tuple[str, str]]) -> None:
    cases = [_case(f"r{i}", instruction, inp) for i, (instruction, inp) in enumerate(rows)]
    assert held_out(cases, []).status == "skip"


@given(
    st.lists(st.tuples(_TEXTS, _TEXTS), min_size=1, max_size=8),
    st.lists(st.tuples(_TEXTS, _TEXTS), max_size=8),
    st.data(),
)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_held_out_fails_when_training_holds_a_benchmark_row(
    rows: list[tuple[str, str]], other: list[tuple[str, str]], data: st.DataObject
) -> None:
    cases = [_case(f"r{i}", instruction, inp) for i, (instruction, inp) in enumerate(rows)]
    copied = data.draw(st.sampled_from(cases))
    position = data.draw(st.integers(0, len(other)))
    training_rows = [*other[:position], (copied.instruction, copied.input), *other[position:]]
    verdict = held_out(cases, _train(*training_rows))
    assert verdict.status == "fail"
    assert copied.id in [match["id"] for match in verdict.details["exact"]]


@given(
    st.lists(st.lists(st.sampled_from("abcde"), max_size=8), max_size=6),
    st.lists(st.lists(st.sampled_from("abcde"), max_size=10), max_size=10),
    st.integers(1, 3),
    st.floats(0.05, 1.0),
)
@settings(max_examples=200, deadline=None)
def test_ngram_index_finds_what_a_full_scan_finds(
    rows: list[list[str]], training: list[list[str]], n: int, share: float
) -> None:
    # Containment by brute force: the share of a row's n-grams (a row shorter than n: the whole row as one
    # phrase) that occur as consecutive words of the training text.
    def grams(words: list[str], k: int) -> set[tuple[str, ...]]:
        return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}

    index = _NgramIndex(rows, n)
    for text in training:
        expected = []
        for i, row in enumerate(rows):
            k = min(n, len(row))
            wanted = grams(row, k) if k else set()
            if wanted and len(wanted & grams(text, k)) >= share * len(wanted) - 1e-9:
                expected.append(i)
        assert index.matching(text, share) == expected


_SETTINGS = {"ngram": 3, "max_overlap": 0.8, "max_number_share": 1 / 3}


def test_held_out_skip_and_pass_carry_the_settings() -> None:
    skip = held_out([_case()], [])
    assert skip.details == _SETTINGS
    verdict = held_out([_case("u1", inp="Jan 5th, 2024")], _train(("Say hi.", "")))
    assert (verdict.status, verdict.message) == (
        "pass",
        "none of 1 benchmark rows against 1 training rows is a duplicate or near duplicate",
    )
    assert verdict.details == {**_SETTINGS, "training_rows": 1, "exact": [], "near": []}


@pytest.mark.parametrize(
    "options",
    [{"ngram": 1}, {"max_overlap": 1.0}, {"max_number_share": 0.0}, {"max_number_share": 1.0}],
)
def test_held_out_accepts_settings_at_the_ends_of_their_range(options: dict[str, Any]) -> None:
    verdict = held_out([_case("u1", inp="Jan 5th, 2024")], _train(("Say hi.", "")), **options)
    assert verdict.status == "pass"
    assert verdict.details == {**_SETTINGS, **options, "training_rows": 1, "exact": [], "near": []}


def test_held_out_max_overlap_above_one_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("held_out max_overlap must be within (0, 1], got 1.5")):
        held_out([], [], max_overlap=1.5)


def test_held_out_exact_message_in_full_with_and_without_near_duplicates() -> None:
    exact_only = held_out([_case("d1", inp="August 24, 2003")], _train((INSTRUCTION, "August 24, 2003")))
    assert exact_only.message == (
        "1 of 1 benchmark rows against 1 training rows appear in the training data: d1 (training line 1)"
    )
    cases = [_case("d1", inp="August 24, 2003"), _case("n1", "Summarise this.", LONG_INPUT)]
    both = held_out(cases, _train((INSTRUCTION, "August 24, 2003"), ("Summary?", LONG_INPUT + " today")))
    assert both.message == (
        "1 of 2 benchmark rows against 2 training rows appear in the training data: d1 (training line 1); "
        "1 more are near duplicates"
    )


def test_held_out_message_counts_training_lines_beyond_the_first_three() -> None:
    verdict = held_out([_case("d1", inp="August 24, 2003")], _train(*[(INSTRUCTION, "August 24, 2003")] * 4))
    assert verdict.message.endswith(": d1 (training lines 1, 2, 3 +1)")
    assert verdict.details["exact"][0]["training_lines"] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("rows", "listed"),
    [
        (
            5,
            "d0 (training line 1), d1 (training line 2), d2 (training line 3), d3 (training line 4), "
            "d4 (training line 5)",
        ),
        (
            6,
            "d0 (training line 1), d1 (training line 2), d2 (training line 3), d3 (training line 4), "
            "d4 (training line 5), and 1 more",
        ),
    ],
)
def test_held_out_message_names_five_rows_then_counts_the_rest(rows: int, listed: str) -> None:
    dates = [f"August {day}, 2003" for day in range(1, rows + 1)]
    verdict = held_out(
        [_case(f"d{i}", inp=d) for i, d in enumerate(dates)], _train(*[(INSTRUCTION, d) for d in dates])
    )
    assert verdict.message == (
        f"{rows} of {rows} benchmark rows against {rows} training rows appear in the training data: {listed}"
    )


def test_held_out_near_duplicate_by_both_rules_names_both() -> None:
    cases = [_case("n1", "Summarise this.", f"{LONG_INPUT} in 2021")]
    verdict = held_out(cases, _train(("Summarise this.", f"{LONG_INPUT} in 2020")))
    assert verdict.message == (
        "1 of 1 benchmark rows against 1 training rows are near duplicates: "
        "n1 (training line 1; 3-gram overlap, numbers masked)"
    )


def test_held_out_masks_numbers_that_are_exactly_the_allowed_share() -> None:
    # One number in three words is exactly max_number_share = 1/3: "at most" includes it.
    cases = [_case("y1", "Where was she born?", "born in 1997")]
    verdict = held_out(cases, _train(("Where was she born?", "born in 2018")))
    assert verdict.message == (
        "1 of 1 benchmark rows against 1 training rows are near duplicates: "
        "y1 (training line 1; numbers masked)"
    )


def test_held_out_compares_an_instruction_only_row_by_its_instruction() -> None:
    changed = LONG_INPUT.replace("postpone", "delay")
    verdict = held_out([_case("i1", LONG_INPUT, "")], _train((changed, "")))
    assert verdict.status == "warn"
    assert verdict.details["near"][0]["rules"] == ["3-gram overlap"]


def test_held_out_short_row_inside_a_longer_training_text_is_a_near_duplicate() -> None:
    cases = [_case("s1", "Summarise this.", "budget for repairs")]
    verdict = held_out(cases, _train(("Summarise this.", "The council approved the budget for repairs.")))
    assert verdict.status == "warn"
    assert verdict.details["near"][0]["id"] == "s1"


@pytest.mark.parametrize(
    ("benchmark", "training"),
    [
        # Leading punctuation is stripped like trailing punctuation, however many marks there are.
        (("Convert the date.", '"August 24, 2003"'), ("Convert the date.", "August 24, 2003")),
        (("Convert the date.", '("August 24, 2003")'), ("Convert the date.", "August 24, 2003")),
        # Blank and punctuation-only lines vanish; a line break is whitespace like a space.
        (
            ("Convert the date.\nReply with the date only.", "August 24, 2003"),
            ("Convert the date.\n\n---\nReply with the date only.", "August 24, 2003"),
        ),
    ],
)
def test_held_out_exact_despite_punctuation_and_blank_lines(
    benchmark: tuple[str, str], training: tuple[str, str]
) -> None:
    verdict = held_out([_case("d1", *benchmark)], _train(training))
    assert verdict.status == "fail"
    assert [match["id"] for match in verdict.details["exact"]] == ["d1"]


@pytest.mark.parametrize(("benchmark", "training"), [("Route 5", "Route 6"), ("cat", "bat")])
def test_held_out_rows_differing_in_one_short_word_are_not_duplicates(benchmark: str, training: str) -> None:
    # Stripping punctuation must not eat the letters or digits at the ends of a line.
    verdict = held_out([_case("r1", "Name it.", benchmark)], _train(("Name it.", training)))
    assert verdict.status == "pass"


def test_held_out_fewshot_example_copied_from_training_fails_and_is_named_with_its_line() -> None:
    cases = [_case("d1", inp="August 24, 2003")]
    examples = [_example("ex-1", inp="June 2, 2017", line=3), _example("ex-2", inp="May 1st, 1999", line=4)]
    training = _train(("Translate to French.", "Good morning"), (f"  {INSTRUCTION.upper()}", "june 2, 2017!"))
    verdict = held_out(cases, training, examples=examples)
    assert verdict.status == "fail"
    assert verdict.message == (
        "1 of 2 few-shot examples against 2 training rows appear in the training data: "
        "ex-1 at line 3 (training line 2)"
    )
    assert verdict.details == {
        **_SETTINGS,
        "fewshot_examples": 2,
        "training_rows": 2,
        "exact": [],
        "near": [],
        "fewshot_exact": [{"id": "ex-1", "line": 3, "rules": ["exact"], "matches": 1, "training_lines": [2]}],
        "fewshot_near": [],
    }


def test_held_out_fewshot_near_duplicate_warns() -> None:
    changed = LONG_INPUT.replace("postpone", "delay")
    examples = [_example("ex-1", "Summarise this.", LONG_INPUT, line=2)]
    verdict = held_out([_case("d1", inp="August 24, 2003")], _train(("Summary?", changed)), examples=examples)
    assert verdict.status == "warn"
    assert verdict.message == (
        "1 of 1 few-shot examples against 1 training rows are near duplicates: "
        "ex-1 at line 2 (training line 1; 3-gram overlap)"
    )
    assert (verdict.details["exact"], verdict.details["near"], verdict.details["fewshot_exact"]) == (
        [],
        [],
        [],
    )
    assert verdict.details["fewshot_near"] == [
        {"id": "ex-1", "line": 2, "rules": ["3-gram overlap"], "matches": 1, "training_lines": [1]}
    ]


def test_held_out_fewshot_examples_absent_from_training_pass_and_are_counted() -> None:
    cases = [_case("u1", "Summarise this.", LONG_INPUT), _case("u2", inp="Jan 5th, 2024")]
    examples = [_example(f"ex-{i}", inp=f"March {i}th, 1990", line=i) for i in (4, 5, 6)]
    training = _train(
        ("Summarise this.", "A recipe for bread: flour, water, salt and yeast, left to rise overnight."),
        (INSTRUCTION, "the 20th of February 2020"),
        ("Translate to German.", "the committee reviewed"),
    )
    verdict = held_out(cases, training, examples=examples)
    assert (verdict.status, verdict.message) == (
        "pass",
        "none of 2 benchmark rows and 3 few-shot examples against 3 training rows "
        "is a duplicate or near duplicate",
    )
    assert verdict.details == {
        **_SETTINGS,
        "fewshot_examples": 3,
        "training_rows": 3,
        "exact": [],
        "near": [],
        "fewshot_exact": [],
        "fewshot_near": [],
    }


@pytest.mark.parametrize(
    "training",
    [
        _train((INSTRUCTION, "August 24, 2003"), ("Summary?", LONG_INPUT + " today")),  # fail
        _train(("Summary?", LONG_INPUT + " today")),  # warn
        _train(("Say hi.", "")),  # pass
    ],
)
def test_held_out_without_examples_is_unchanged(training: list[TrainingRow]) -> None:
    cases = [_case("d1", inp="August 24, 2003"), _case("n1", "Summarise this.", LONG_INPUT)]
    verdict = held_out(cases, training)
    assert held_out(cases, training, examples=()) == verdict
    assert not [key for key in verdict.details if key.startswith("fewshot")]
    assert "few-shot" not in verdict.message


def test_held_out_rows_and_examples_are_reported_apart() -> None:
    # The same id on both sides: a row and an example are told apart by where they were checked, not by id.
    cases = [_case("d1", inp="August 24, 2003"), _case("n1", "Summarise this.", LONG_INPUT)]
    examples = [_example("d1", inp="June 2, 2017", line=7), _example("ex-2", "Summarise this.", LONG_INPUT)]
    training = _train((INSTRUCTION, "August 24, 2003"), (INSTRUCTION, "June 2, 2017"), ("Sum?", LONG_INPUT))
    verdict = held_out(cases, training, examples=examples)
    assert verdict.message == (
        "1 of 2 benchmark rows against 3 training rows appear in the training data: d1 (training line 1); "
        "1 more are near duplicates; "
        "1 of 2 few-shot examples appear in the training data: d1 at line 7 (training line 2); "
        "1 more are near duplicates"
    )
    assert [(m["id"], m["line"]) for m in verdict.details["exact"]] == [("d1", 1)]
    assert [(m["id"], m["line"]) for m in verdict.details["fewshot_exact"]] == [("d1", 7)]
    assert [m["id"] for m in verdict.details["near"]] == ["n1"]
    assert [m["id"] for m in verdict.details["fewshot_near"]] == ["ex-2"]


def test_held_out_near_duplicate_rows_beside_a_copied_example_are_counted() -> None:
    cases = [_case("n1", "Summarise this.", LONG_INPUT)]
    examples = [_example("ex-1", inp="June 2, 2017", line=3)]
    training = _train(("Summary?", LONG_INPUT + " today"), (INSTRUCTION, "June 2, 2017"))
    verdict = held_out(cases, training, examples=examples)
    assert verdict.status == "fail"
    assert verdict.message == (
        "1 of 1 benchmark rows against 2 training rows are near duplicates; "
        "1 of 1 few-shot examples appear in the training data: ex-1 at line 3 (training line 2)"
    )


def test_held_out_skip_with_examples_names_them_and_counts_them() -> None:
    verdict = held_out([_case()], [], examples=[_example("ex-1")])
    assert (verdict.status, verdict.message) == (
        "skip",
        "no training data given: cannot check that the benchmark and its few-shot examples are held out",
    )
    assert verdict.details == {**_SETTINGS, "fewshot_examples": 1}


@given(
    st.lists(st.tuples(_TEXTS, _TEXTS), min_size=1, max_size=6),
    st.lists(st.tuples(_TEXTS, _TEXTS), max_size=6),
    st.data(),
)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_held_out_fails_when_training_holds_a_fewshot_example(
    pool: list[tuple[str, str]], other: list[tuple[str, str]], data: st.DataObject
) -> None:
    examples = [_example(f"ex{i}", instruction, inp, line=i + 1) for i, (instruction, inp) in enumerate(pool)]
    copied = data.draw(st.sampled_from(examples))
    verdict = held_out([], _train(*other, (copied.instruction, copied.input)), examples=examples)
    assert verdict.status == "fail"
    assert copied.id in [match["id"] for match in verdict.details["fewshot_exact"]]
    assert verdict.details["exact"] == []


# ---------------------------------------------------------------------------------------------------------
# load_training_data


def test_load_training_data_forms_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    lines = [
        json.dumps({"instruction": "Convert.", "input": "Jan 5th, 2024", "output": "2024-01-05"}),
        "",
        "   ",
        json.dumps({"instruction": "Say hi."}),
        json.dumps({"prompt": "Convert.\nJan 6th, 2024", "completion": "2024-01-06"}),
        json.dumps({"text": "### Instruction: Convert"}),
        "",
    ]
    # A BOM and CRLF line ends, as editors on Windows write them.
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode())
    assert load_training_data(path) == [
        TrainingRow(instruction="Convert.", input="Jan 5th, 2024", line=1),
        TrainingRow(instruction="Say hi.", input="", line=4),
        TrainingRow(instruction="Convert.\nJan 6th, 2024", input="", line=5),
        TrainingRow(instruction="### Instruction: Convert", input="", line=6),
    ]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ('{"instruction": "x", ', "invalid JSON: "),
        ("[1, 2]", "expected a JSON object, got array"),
        ('{"output": "x"}', "expected an 'instruction' (with optional 'input'), 'prompt' or 'text' field"),
        ('{"instruction": "x", "input": 3}', "'instruction' and 'input' must be strings"),
        ('{"prompt": null}', "'prompt'/'text' must be a string"),
    ],
)
def test_load_training_data_bad_line_names_path_and_line(tmp_path: Path, bad: str, reason: str) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"instruction": "ok"}) + "\n\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_training_data(path)
    assert str(info.value).startswith(f"{path}:3: {reason}")
