"""Paired statistics of adapter against base: tests, bootstrap intervals, effect sizes and power.

Pure: no pytest, no torch. Scores are per-row floats in [0, 1] and paired: adapter[i] and base[i] score the
same benchmark row, so every statistic here works on the per-row differences adapter[i] - base[i].
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pytest_llmeval import formatting

# scipy.stats is imported where a statistic needs it (half a second: a run of one row, `-k one-row`, makes
# none of the comparisons that need it). The normal distribution is the standard library's (Wichura's AS241
# quantile, as accurate as scipy's ndtri), and a small binomial tail is summed exactly.
_NORMAL = NormalDist()
# Binomial tails up to this many trials are summed exactly in integers (scipy's above it).
_EXACT_BINOMIAL = 2000

FloatArray = NDArray[np.float64]
Values = Sequence[float] | FloatArray

DEFAULT_POWER = 0.8
# The difference LocoLLM's adaptation guide says a benchmark should be able to detect ("10 points").
TARGET_DIFFERENCE = 0.10

# Scores in [0, 1] come out of float arithmetic: differences that agree to within this are rounding noise
# (0.5 - 0.4 != 0.3 - 0.2 in binary floating point), so their spread is treated as exactly zero.
_NOISE = 1e-12
# Resampled values held in memory at once (scipy.stats.bootstrap's batch): 10_000 bootstrap resamples of a
# 5_000-row benchmark would otherwise need 400 MB of indices and as much again of resampled differences.
_BOOT_CHUNK = 1 << 22


@functools.cache
def _rng_keyword() -> str:
    """scipy 1.15 renamed bootstrap's random_state to rng (SPEC 7) and will drop the old name; pyproject
    allows scipy 1.11, which knows only random_state. Both take a Generator and draw the same resamples."""
    from scipy import stats

    return "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


# scipy.stats.wilcoxon's exact permutation test for tied or zero differences, up to this many rows.
_WILCOXON_PERMUTED = 13


@dataclass(frozen=True)
class PairedComparison:
    """Adapter against base on one set of paired rows: means, interval, test, effect size and power."""

    n: int
    kind: str  # "binary" (every score is 0 or 1) or "continuous"
    mean_adapter: float
    mean_base: float
    difference: float  # mean_adapter - mean_base
    ci_low: float  # percentile bootstrap interval of the mean difference, resampling rows, seeded
    ci_high: float
    confidence: float
    test: str  # "mcnemar_exact" (binary) or "paired_t" (continuous)
    # paired_t: the t statistic; mcnemar_exact: b, the rows the adapter gets right and the base wrong.
    # +/-inf when every difference is the same nonzero value (t's limit); None when n < 2 (no t exists).
    statistic: float | None
    # Two-sided. paired_t with t = +/-inf reports the exact sign test's 2 * 0.5**n instead of t's limit 0.
    p_value: float
    wilcoxon_p: float | None  # continuous only; None when every difference is 0
    # Cohen's d_z = mean(diff) / sd(diff, ddof=1): 0.0 when every difference is 0, +/-inf when every
    # difference is the same nonzero value, None when n < 2 (no sd exists). to_json writes inf as None.
    effect_size: float | None
    # Cohen's d with the pooled sd, the adaptation document's effect size: see cohens_d_pooled.
    effect_size_pooled: float | None
    discordant: tuple[int, int] | None  # binary: (adapter right & base wrong, base right & adapter wrong)
    alpha: float
    significant: bool  # p_value < alpha
    # At alpha, 80% power, this n, the observed discordance or sd (see power_analysis_*). None where the
    # data rule it out: no discordance or spread observed, or (for n_for_10_points) under 10% discordant.
    min_detectable_difference: float | None
    n_for_10_points: int | None  # rows needed to detect a 0.10 difference, same assumptions
    # The paired t on the differences whatever the kind: the adaptation document's significance report
    # shows a t statistic even for 0/1 scores, where the test of record is McNemar's.
    t_statistic: float | None

    def to_json(self) -> dict[str, Any]:
        """Every field as JSON-able values: tuples become lists, inf becomes None."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}

    def significance_report(self) -> dict[str, Any]:
        """The adaptation document's significance block under its names, and `method`: what each holds."""
        return {
            "t_statistic": _jsonable(self.t_statistic),
            "p_value": self.p_value,
            "effect_size": _jsonable(self.effect_size),
            "effect_size_pooled_d": _jsonable(self.effect_size_pooled),
            "confidence_interval": [self.ci_low, self.ci_high],
            "significant": self.significant,
            "method": self._method(),
        }

    def _method(self) -> str:
        # The document computes its p with a paired t test whatever the scores; here p_value and significant
        # are the test of record's, so say which test that was.
        if self.discordant is not None:
            p_value = "exact McNemar test on the discordant rows; t_statistic: paired t, shown beside it"
        elif self.statistic is None:
            p_value = "1, no test (one row); t_statistic: none"
        elif math.isinf(self.statistic):
            p_value = "exact sign test, as every row differs by the same amount (t is infinite)"
        else:
            p_value = "paired t-test on the differences; t_statistic: its t"
        return (
            f"p_value: {p_value}; effect_size: Cohen's d_z = mean(diff) / sd(diff); "
            "effect_size_pooled_d: Cohen's d = (mean_adapter - mean_base) / "
            "sqrt((sd_adapter^2 + sd_base^2) / 2); sd with ddof=1; "
            f"confidence_interval: {formatting.level(self.confidence)} percentile bootstrap of mean(diff) "
            "over rows"
        )

    def describe(self) -> str:
        """One line for failure messages: n, means, difference with its interval, the test's p."""
        level = formatting.level(self.confidence)
        text = (
            f"n={self.n}, adapter {self.mean_adapter:.3f}, base {self.mean_base:.3f}, "
            f"difference {self.difference:+.3f} ({level} CI {self.ci_low:+.3f} to {self.ci_high:+.3f}), "
        )
        if self.discordant is not None:
            wins, losses = self.discordant
            return text + (
                f"{formatting.name_of_test(self.test)} p={formatting.p_value(self.p_value, self.alpha)}, "
                f"discordant {wins} adapter-only / {losses} base-only"
            )
        text += f"{formatting.name_of_test(self.test)} p={formatting.p_value(self.p_value, self.alpha)}"
        if self.wilcoxon_p is not None:
            text += f", Wilcoxon p={formatting.p_value(self.wilcoxon_p, self.alpha)}"
        return text


@dataclass(frozen=True)
class PowerAnalysis:
    """What a benchmark of n rows can detect, and how many rows a target difference needs."""

    n: int
    alpha: float  # two-sided
    power: float
    target: float  # the difference n_for_target is computed for
    min_detectable_difference: float | None  # None: no achievable difference reaches the power at this n
    n_for_target: int | None  # None: the target cannot be reached under these assumptions


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p: binomial test of b successes in b + c discordant pairs at 1/2."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    # Doubling the smaller tail is the exact two-sided test because Binomial(m, 1/2) is symmetric; b == c
    # doubles a tail holding more than half the mass, hence the cap.
    m, k = b + c, min(b, c)
    if m <= _EXACT_BINOMIAL:
        # P(X <= k) for X ~ Binomial(m, 1/2): a ratio of integers, rounded once.
        return min(1.0, 2.0 * (sum(math.comb(m, i) for i in range(k + 1)) / (1 << m)))
    from scipy import stats

    return min(1.0, 2.0 * float(stats.binom.cdf(k, m, 0.5)))


def paired_t_test(differences: Values) -> tuple[float | None, float]:
    """Two-sided one-sample t test of the differences against 0: (t, p); t is None when n < 2."""
    d = _as_finite("differences", differences)
    n = d.size
    if n < 2:
        return None, 1.0
    mean = float(d.mean())
    sd = _sd(d)
    if sd == 0.0:
        # t's limits, as scipy.stats.ttest_rel gives them: no evidence when nothing differs, certainty
        # when every row differs by the same amount.
        if abs(mean) <= _NOISE:
            return 0.0, 1.0
        return math.copysign(math.inf, mean), 0.0
    t = mean / (sd / math.sqrt(n))
    from scipy import stats

    return t, float(2.0 * stats.t.sf(abs(t), n - 1))


def cohens_dz(differences: Values) -> float | None:
    """Cohen's d for paired data, mean(diff) / sd(diff, ddof=1); None when n < 2."""
    d = _as_finite("differences", differences)
    if d.size < 2:
        return None
    mean = float(d.mean())
    sd = _sd(d)
    if sd == 0.0:
        return 0.0 if abs(mean) <= _NOISE else math.copysign(math.inf, mean)
    return mean / sd


def cohens_d_pooled(adapter: Values, base: Values) -> float | None:
    """Cohen's d with the pooled sd, (mean_a - mean_b) / sqrt((sd_a^2 + sd_b^2) / 2), ddof=1; None when n < 2.

    0.0 when neither side varies and the means are equal, +/-inf when neither varies and they differ. For
    two groups of n rows this is the textbook pooled sd, sqrt(((n-1) sd_a^2 + (n-1) sd_b^2) / (2n - 2)). The
    adaptation document takes np.var's ddof=0, which gives sqrt(n / (n - 1)) times this d.
    """
    a = _as_finite("adapter values", adapter)
    b = _as_finite("base values", base)
    if a.size != b.size:
        raise ValueError(f"adapter and base must score the same rows: got {a.size} and {b.size} values")
    if a.size < 2:
        return None
    # mean(a - b) is mean_a - mean_b, but negates exactly when adapter and base swap. Each sd is taken after
    # subtracting the side's first value: the sd ignores the shift, and then so does its floating-point
    # value whenever adding a constant to the scores was exact.
    mean = float((a - b).mean())
    pooled = math.sqrt((_sd(a - a[0]) ** 2 + _sd(b - b[0]) ** 2) / 2.0)
    if pooled == 0.0:
        return 0.0 if abs(mean) <= _NOISE else math.copysign(math.inf, mean)
    return mean / pooled


def wilcoxon_signed_rank(differences: Values) -> float | None:
    """Two-sided p of scipy.stats.wilcoxon(differences, zero_method="wilcox"); None when all are 0."""
    d = _as_finite("differences", differences)
    if not np.any(d):
        return None
    nonzero = d[d != 0.0]
    magnitudes = np.abs(nonzero)
    tied = np.unique(magnitudes).size < magnitudes.size or nonzero.size < d.size
    from scipy import stats

    if not tied or d.size > _WILCOXON_PERMUTED:
        return float(stats.wilcoxon(d, zero_method="wilcox").pvalue)
    # Here scipy enumerates all 2**n sign flips through a per-permutation Python call (about 1 s at n =
    # 13). The same exact null distribution of the positive rank sum, by convolution over the rows:
    doubled = np.rint(2.0 * stats.rankdata(magnitudes)).astype(np.int64)  # midranks are multiples of 1/2
    ways = np.zeros(int(doubled.sum()) + 1)  # ways[s]: sign patterns whose doubled positive rank sum is s
    ways[0] = 1.0
    for rank in doubled:
        ways[rank:] = ways[rank:] + ways[:-rank]  # this row positive (shift by its rank) or not
    null = ways / ways.sum()
    observed = int(doubled[nonzero > 0.0].sum())
    return min(1.0, 2.0 * min(float(null[: observed + 1].sum()), float(null[observed:].sum())))


def paired_bootstrap_ci(
    differences: Values, *, confidence: float, n_boot: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean difference (scipy.stats.bootstrap over rows, seeded)."""
    _check_open_unit("confidence", confidence)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    d = _as_finite("differences", differences)
    n = d.size
    if n == 0:
        raise ValueError("no differences to resample")
    if np.ptp(d) == 0.0:
        # Every resample has the same mean (summing in another order could move it by an ulp), and scipy
        # refuses a single row.
        mean = float(d.mean())
        return mean, mean
    # One sample of per-row differences rather than paired=True on (adapter, base): paired=True draws the
    # same row indices from the generator and its mean(adapter[i] - base[i]) equals mean(d[i]) bit for bit,
    # but it gathers both sides for every resample. Measured at 10_000 resamples of 5_000 rows: 0.35 s here,
    # 0.79 s with paired=True, 0.25 s for the hand-written loop this replaced (same resamples, same interval
    # to an ulp); 60 rows: 6, 11 and 5 ms. Percentile, as before: BCa (0.46 s) would move every interval
    # away from earlier results for a second-order gain on a mean.
    from scipy import stats

    result = stats.bootstrap(
        (d,),
        np.mean,
        n_resamples=n_boot,
        batch=max(1, _BOOT_CHUNK // n),
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        **{_rng_keyword(): np.random.default_rng(seed)},
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


# Power.
#
# Binary scores are tested with McNemar's test, whose power depends on the discordant pairs only. With
# psi = P(rows disagree) = (b + c) / n and delta = P(adapter-only) - P(base-only) (the difference in
# accuracy), the normal approximation of Connor (1987, Biometrics 43:207-211) is
#     n = (z_{1-a/2} sqrt(psi) + z_{power} sqrt(psi - delta^2))^2 / delta^2,
# equivalently power = Phi((sqrt(n) |delta| - z_{1-a/2} sqrt(psi)) / sqrt(psi - delta^2)). Solved for
# delta at a given n (a quadratic; the root where sqrt(n) delta >= z_{1-a/2} sqrt(psi)), with z_a = z_{1-a/2}
# and z_b = z_{power}:
#     delta = sqrt(psi) (sqrt(n) z_a + z_b sqrt(n - z_a^2 + z_b^2)) / (n + z_b^2).
# A difference can never exceed the discordance (|delta| <= psi), so no answer exists above it. The exact
# test is conservative: at Connor's detectable difference its true power is 0.76-0.79, not 0.80, for n from
# 50 to 300 (tests/test_stats.py enumerates it).
#
# Continuous scores are tested with the paired t test: its exact power is that of a noncentral t with
# n - 1 degrees of freedom and noncentrality (delta / sd) sqrt(n), both tails counted (as statsmodels'
# TTestPower does). The normal approximation n = ((z_{1-a/2} + z_{power}) sd / delta)^2 is the starting
# point of the search and is a row or two short at these sizes.
#
# LocoLLM's "50 rows detect 10 points" (alpha 0.05 two-sided, 80% power): for 0/1 scores it cannot hold.
# delta = 0.10 needs psi >= 0.10, and even psi = 0.10 (5 discordant rows, all won by the adapter) gives an
# exact McNemar p of 2 * 0.5**5 = 0.0625; Connor's formula says 77 rows at psi = 0.10 and 155 at psi = 0.20,
# where 50 rows detect 0.173. For continuous scores it needs sd(diff) <= 0.247, i.e. d_z >= 0.40.


def mcnemar_power(n: int, difference: float, discordant_rate: float, *, alpha: float = 0.05) -> float:
    """Approximate power of McNemar's test (Connor 1987) for a difference in accuracy at discordance psi."""
    _check_power_args(n, alpha)
    delta = abs(difference)
    if not 0.0 <= discordant_rate <= 1.0:
        raise ValueError(f"discordant_rate must be in [0, 1], got {discordant_rate}")
    if delta > discordant_rate:
        raise ValueError(
            f"a difference of {delta} needs at least {delta} of rows discordant, not {discordant_rate}"
        )
    z_a = _z_two_sided(alpha)
    excess = math.sqrt(n) * delta - z_a * math.sqrt(discordant_rate)
    spread = discordant_rate - delta**2
    if spread <= 0.0:
        # Every discordant row goes one way (or none disagree): the statistic has no spread left.
        return 1.0 if excess > 0.0 else 0.0
    return _NORMAL.cdf(excess / math.sqrt(spread))


def paired_t_power(n: int, difference: float, sd: float, *, alpha: float = 0.05) -> float:
    """Exact power of the two-sided paired t test (noncentral t) for a mean difference at this sd."""
    _check_power_args(n, alpha)
    if n < 2:
        raise ValueError(f"the paired t test needs n >= 2 rows, got {n}")
    if not sd > 0.0 or not math.isfinite(sd):
        raise ValueError(f"sd must be positive and finite, got {sd}")
    return float(_t_power(np.array([n]), abs(difference) / sd, alpha)[0])


def power_analysis_binary(
    n: int,
    discordant_rate: float,
    *,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    target: float = TARGET_DIFFERENCE,
) -> PowerAnalysis:
    """McNemar power at discordance psi = (b + c) / n (Connor 1987): detectable difference, rows needed."""
    _check_power_args(n, alpha)
    _check_target(power, target)
    if not 0.0 <= discordant_rate <= 1.0:
        raise ValueError(f"discordant_rate must be in [0, 1], got {discordant_rate}")
    z_a = _z_two_sided(alpha)
    z_b = _NORMAL.inv_cdf(power)
    psi = discordant_rate
    detectable: float | None = None
    radicand = n - z_a**2 + z_b**2
    if psi > 0.0 and radicand >= 0.0:
        delta = math.sqrt(psi) * (math.sqrt(n) * z_a + z_b * math.sqrt(radicand)) / (n + z_b**2)
        # The other branch of the quadratic (power below 1/2) and differences above psi are not answers.
        if math.sqrt(n) * delta >= z_a * math.sqrt(psi) and delta <= psi:
            detectable = delta
    needed: int | None = None
    if psi >= target:
        rows = (z_a * math.sqrt(psi) + z_b * math.sqrt(psi - target**2)) ** 2 / target**2
        needed = _ceil(rows)
    return PowerAnalysis(n, alpha, power, target, detectable, needed)


def power_analysis_continuous(
    n: int,
    sd: float,
    *,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    target: float = TARGET_DIFFERENCE,
    bounded: bool = True,
) -> PowerAnalysis:
    """Paired t power (noncentral t) at this sd of differences: detectable difference, rows for target."""
    _check_power_args(n, alpha)
    _check_target(power, target)
    if not sd >= 0.0 or not math.isfinite(sd):
        raise ValueError(f"sd must be >= 0 and finite, got {sd}")
    if sd <= _NOISE:
        # No spread observed, so nothing to base a power estimate on (not "any difference is detectable").
        return PowerAnalysis(n, alpha, power, target, None, None)
    detectable: float | None = None
    if n >= 2:
        effect = _t_detectable_effect(n, alpha, power)
        if effect * sd <= 1.0 or not bounded:  # scores in [0, 1] cannot differ by more than 1
            detectable = effect * sd
    return PowerAnalysis(n, alpha, power, target, detectable, _t_rows_needed(target / sd, alpha, power))


def compare_paired(
    adapter: Values,
    base: Values,
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
    bounded: bool = True,
) -> PairedComparison:
    """Compare paired per-row scores: exact McNemar for 0/1 scores, paired t (and Wilcoxon) otherwise.

    bounded=False takes any finite values (negative cross-entropy, say): always the paired t, and the
    detectable difference is not capped at 1.
    """
    _check_open_unit("alpha", alpha)
    _check_open_unit("confidence", confidence)
    a = _as_scores("adapter", adapter) if bounded else _as_finite("adapter values", adapter)
    b = _as_scores("base", base) if bounded else _as_finite("base values", base)
    # A run compares the same pair of score lists several times (each gate of a benchmark, its slices,
    # results.json's comparisons, the summaries): the same inputs give the same seeded result, so each is
    # computed once per process (issue 40: the gates' statistics were 2 s of a 13 s cached re-run).
    key = (a.tobytes(), b.tobytes(), alpha, confidence, n_boot, seed, bounded)
    found = _COMPARED.get(key)
    if found is None:
        found = _compare_paired(
            a, b, alpha=alpha, confidence=confidence, n_boot=n_boot, seed=seed, bounded=bounded
        )
        if len(_COMPARED) >= _COMPARED_MAX:
            _COMPARED.pop(next(iter(_COMPARED)))  # the oldest: a long process (a notebook) stays bounded
        _COMPARED[key] = found
    return found


# compare_paired's results by its inputs (PairedComparison is frozen: sharing one is safe).
_COMPARED: dict[tuple[Any, ...], PairedComparison] = {}
_COMPARED_MAX = 1024


def _compare_paired(
    a: FloatArray, b: FloatArray, *, alpha: float, confidence: float, n_boot: int, seed: int, bounded: bool
) -> PairedComparison:
    if a.size != b.size:
        raise ValueError(
            f"adapter and base must score the same rows: got {a.size} adapter scores and {b.size} base scores"
        )
    n = a.size
    if n == 0:
        raise ValueError("no rows to compare: both score lists are empty")
    diff = a - b  # (n,): adapter minus base, row by row
    binary = bounded and bool(np.all((a == 0.0) | (a == 1.0)) and np.all((b == 0.0) | (b == 1.0)))
    t_statistic, t_p = paired_t_test(diff)
    ci_low, ci_high = paired_bootstrap_ci(diff, confidence=confidence, n_boot=n_boot, seed=seed)
    statistic: float | None
    discordant: tuple[int, int] | None
    wilcoxon_p: float | None
    if binary:
        wins = int(np.count_nonzero((a == 1.0) & (b == 0.0)))
        losses = int(np.count_nonzero((a == 0.0) & (b == 1.0)))
        test, statistic, p_value = "mcnemar_exact", float(wins), mcnemar_exact(wins, losses)
        discordant, wilcoxon_p = (wins, losses), None
        power = power_analysis_binary(n, (wins + losses) / n, alpha=alpha)
    else:
        test, statistic, p_value = "paired_t", t_statistic, t_p
        if statistic is not None and math.isinf(statistic):
            # Every row moved by the same amount: t's limit p = 0 would make 2 rows significant. The exact
            # sign test's 2 * 0.5**n is what McNemar gives 0/1 scores that all move one way.
            p_value = mcnemar_exact(n, 0)
        discordant = None
        wilcoxon_p = wilcoxon_signed_rank(diff)
        power = power_analysis_continuous(n, _sd(diff) if n >= 2 else 0.0, alpha=alpha, bounded=bounded)
    mean_adapter, mean_base = float(a.mean()), float(b.mean())
    return PairedComparison(
        n=n,
        kind="binary" if binary else "continuous",
        mean_adapter=mean_adapter,
        mean_base=mean_base,
        difference=float(diff.mean()),
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=confidence,
        test=test,
        statistic=statistic,
        p_value=p_value,
        wilcoxon_p=wilcoxon_p,
        effect_size=cohens_dz(diff),
        effect_size_pooled=cohens_d_pooled(a, b),
        discordant=discordant,
        alpha=alpha,
        significant=p_value < alpha,
        min_detectable_difference=power.min_detectable_difference,
        n_for_10_points=power.n_for_target,
        t_statistic=t_statistic,
    )


ADJUSTMENTS = ("holm", "none")


def above_chance_p(chances: Sequence[float], correct: int) -> float:
    """One-sided p-value of `correct` or more successes when trial i succeeds with probability chances[i]
    (a multiple-choice row answered at random: 1 / its number of choices): the Poisson-binomial upper tail,
    exact (its distribution built one trial at a time: O(n^2), a fraction of a second at MMLU's 14,000)."""
    n = len(chances)
    if not 0 <= correct <= n or any(not 0.0 <= p <= 1.0 for p in chances):
        raise ValueError("correct must be in [0, n] and every chance in [0, 1]")
    if correct == 0:
        return 1.0
    pmf = np.zeros(n + 1)  # pmf[k]: probability of k successes among the trials so far
    pmf[0] = 1.0
    for i, p in enumerate(chances):
        pmf[1 : i + 2] = pmf[1 : i + 2] * (1.0 - p) + pmf[: i + 1] * p
        pmf[0] *= 1.0 - p
    return float(min(1.0, math.fsum(pmf[correct:])))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (Holm 1979), in the order given.

    Sorted ascending, the i-th smallest of m (i from 0) is multiplied by m - i, the running maximum of
    those is taken (an adjusted p never falls below a smaller raw p's), and each is capped at 1. Rejecting
    where the adjusted p < alpha keeps the chance of any false "significant" in the family at or below
    alpha, however the tests depend on each other; it is uniformly more powerful than Bonferroni. Checked
    against statsmodels' multipletests(method="holm") (tests/test_several_models.py), which computes the
    same products in the same order, so the two agree to the last bit.
    """
    for p in p_values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"a p-value must be in [0, 1], got {p!r}")
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: p_values[k])):
        running = max(running, (m - rank) * p_values[i])
        adjusted[i] = min(1.0, running)
    return adjusted


def _z_two_sided(alpha: float) -> float:
    """The two-sided critical z. Taken from the lower tail by symmetry (-ppf(alpha/2), scipy's isf): below
    alpha ~ 2.2e-16, 1 - alpha/2 rounds to 1.0 and ppf of it is inf (the power searches then never ended)."""
    return -_NORMAL.inv_cdf(alpha / 2.0)


def _t_power(n: NDArray[np.int64], effect: float, alpha: float) -> FloatArray:
    """Two-sided paired t power at each n for a standardised effect (both rejection tails)."""
    from scipy import stats

    df = n - 1
    crit = stats.t.isf(alpha / 2.0, df)
    nc = effect * np.sqrt(n)
    # The far tail P(T < -crit) is taken as sf at -nc: scipy's nct.cdf(-crit, df, nc) returns NaN rather
    # than ~0 for some nc above ~10.
    power: FloatArray = stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc)
    return power


def _t_detectable_effect(n: int, alpha: float, power: float) -> float:
    """The standardised effect the paired t test detects with this power at n rows."""

    def shortfall(effect: float) -> float:
        return float(_t_power(np.array([n]), effect, alpha)[0]) - power

    if shortfall(0.0) >= 0.0:  # alpha >= power: even no effect "reaches" it
        return 0.0
    # Start from the normal approximation and widen until the root is bracketed (n = 2 needs d = 11.5).
    high = (_z_two_sided(alpha) + _NORMAL.inv_cdf(power)) / math.sqrt(n)
    while shortfall(high) < 0.0:
        high *= 2.0
    from scipy import optimize

    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-12))


def _t_rows_needed(effect: float, alpha: float, power: float) -> int:
    """The fewest rows (at least 2) at which the paired t test reaches this power for the effect."""
    approx = ((_z_two_sided(alpha) + _NORMAL.inv_cdf(power)) / effect) ** 2
    if approx > _NORMAL_ROWS:
        # So many rows that t is normal to well under a row: the scan below would run past int64 (a tiny
        # effect against a huge spread, such as a damaged document's cross-entropy, asks for 1e200 rows).
        return _ceil(approx)
    # The t test needs a few rows more than the normal approximation; power grows with n, so scan upward.
    start = max(2, _ceil(approx) - 2)
    while True:
        candidates = np.arange(start, start + 64)
        reached = np.flatnonzero(_t_power(candidates, effect, alpha) >= power)
        if reached.size:
            return int(candidates[reached[0]])
        start += 64


def _sd(d: FloatArray) -> float:
    sd = float(d.std(ddof=1))
    return 0.0 if sd <= _NOISE else sd


_NORMAL_ROWS = 1e7  # above this many rows, _t_rows_needed takes the normal approximation as it is


def _ceil(x: float) -> int:
    # A sample size whose exact value is a whole number can land a hair above it in floating point: that
    # is not a reason to ask for one more row.
    return math.ceil(x - 1e-9)


def _as_finite(name: str, values: Values) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of numbers, got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ValueError(f"{name}[{bad[0]}] is {array[bad[0]]}: every value must be a finite number")
    return array


def _as_scores(name: str, values: Values) -> FloatArray:
    array = _as_finite(f"{name} scores", values)
    bad = np.flatnonzero((array < 0.0) | (array > 1.0))
    if bad.size:
        raise ValueError(f"{name} score at row {bad[0]} is {array[bad[0]]}: scores must be in [0, 1]")
    return array


def _check_open_unit(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be strictly between 0 and 1, got {value}")


def _check_power_args(n: int, alpha: float) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    _check_open_unit("alpha", alpha)


def _check_target(power: float, target: float) -> None:
    if not 0.5 <= power < 1.0:
        raise ValueError(f"power must be in [0.5, 1), got {power}")
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple):
        return list(value)
    return value
