"""Anytime-valid sequential gates: stop running a benchmark once adapter against base is decided.

Pure: no pytest, no torch; numpy and scipy at the top, as the plugin imports this module only when
`--llmeval-sequential` asks for it.

`--llmeval-sequential` runs a benchmark's rows in a seeded, stratified planned order (`planned_order`), chunk
by chunk, and after each chunk (a "look" at a boundary of the planned order) asks the comparison gate's
question of the paired rows so far; once the question is decided at level alpha, the remaining rows are
skipped. An ordinary p-value looked at after every chunk is no longer a p-value: stopping at the first
p < alpha of an exact McNemar test after every 8 of 240 rows claims "better" under the null 3.4 to 4.7 times
as often as the same test run once at the end (tests/test_sequential_stats.py). Every statistic here is an
e-process instead, a nonnegative supermartingale with initial value 1 under its null, so by Ville's
inequality P(sup_t E_t >= 1/alpha) <= alpha: the decision's error stays at most alpha whatever look the run
stops at, and however the looks were placed.

Two constructions:

`discordant_beta_mixture` (0/1 scores). Only discordant pairs carry information about McNemar's question:
with p = P(adapter right | the two disagree), "better" is H1: p > 1/2 against H0: p <= 1/2. The e-value is
the likelihood ratio of the discordant wins w and losses l mixed over p ~ Uniform[1/2, 1] (density 2),
against p = 1/2:
    E_better(w, l) = 2 * integral_{1/2}^{1} p^w (1 - p)^l dp / 2^-(w + l).
For every p' >= 1/2 and every p <= 1/2, E_p[(p'/(1/2))^X ((1 - p')/(1/2))^(1 - X)] = 1 + (2p' - 1)(2p - 1)
<= 1, so each fixed-p' product is a nonnegative supermartingale under the composite null and so is the mixture
(Robbins 1970, "Statistical methods related to the law of the iterated logarithm", Ann. Math. Statist.
41:1397-1409; Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic
confidence sequences", Ann. Statist. 49:1055-1080). Concordant rows multiply it by 1. E_worse(w, l) is the
mirror, E_better(l, w). Closed form: 2^(n+1) B(w+1, l+1) I_{1/2}(l+1, w+1), n = w + l, in log space.

`betting` (any scores in [0, 1]; d_i = adapter_i - base_i in [-1, 1]). Testing by betting, Waudby-Smith &
Ramdas 2023, "Estimating means of bounded random variables by betting", JRSS-B 86(1):1-27. For
H0: E[d] <= m the capital is K+_t(m) = prod_{i<=t} (1 + lambda+_i (d_i - m)); for H0: E[d] >= m it is
K-_t(m) = prod_{i<=t} (1 - lambda-_i (d_i - m)). Under its null each factor has conditional mean <= 1
because lambda_i is chosen before d_i is seen, so the capital is a nonnegative supermartingale. The bets are
the paper's predictable plug-in rule (as its authors' confseq package computes it, lambda_predmix_eb; here
`_betting_log_capital`), written for d in [-1, 1] rather than x = (d + 1) / 2 in [0, 1]:
    lambda_t = sqrt(2 log(1 / a) / (sigma2_{t-1} t log(1 + t))), t = this pair's index (1, 2, ...),
    mu_t = (0 + sum_{i<=t} d_i) / (t + 1),  sigma2_t = (1 + sum_{i<=t} (d_i - mu_i)^2) / (t + 1),
one pseudo-pair of prior (mean 0, variance 1: the paper's 1/2 and 1/4 in d's units). The rule is the same
formula in either scale (lambda scales by 1/2 when sigma2 scales by 4), so working in d changes nothing but
the bookkeeping. Truncation as in the paper's hedged capital: lambda+ = min(lambda, c / (1 + m)),
lambda- = min(lambda, c / (1 - m)), c = 1/2, so every factor is at least 1 - c = 1/2 and the capital never
reaches 0. a is the level the capital is built for: alpha for a decision's one-sided test, alpha/2 for each
side of the confidence sequence. It tunes power only; validity does not depend on it.

Each question has two one-sided tests, each run at alpha: each decision's own error is at most alpha (Ville).
better_than_base: "better" is wrong only if E[d] <= 0, "worse" only if E[d] >= 0; no_degradation:
"not_degraded" (K+ at m = -warn_drop: the drop is surely below warn_drop) is wrong only if E[d] <= -warn_drop,
"degraded" (K- at m = -fail_drop: the drop surely exceeds fail_drop) only if E[d] >= -fail_drop. Where both
nulls hold at once (E[d] = 0; a drop between the two thresholds) the chance of some decision is at most
2 alpha; everywhere else the chance of a wrong one is at most alpha.

Every e-value is capped at 1e300 (`_LOG_E_MAX`). The minimum of a supermartingale and a constant is still one,
so the cap costs no validity, sits far above any 1/alpha, and keeps every e-value finite for arithmetic and
JSON.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

__all__ = [
    "Decision",
    "Look",
    "Outcomes",
    "beta_mixture_e",
    "decide_better",
    "decide_no_degradation",
    "outcomes_better",
    "outcomes_no_degradation",
    "planned_order",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
Scores = Sequence[float | None]

DISCORDANT_BETA_MIXTURE = "discordant_beta_mixture"
BETTING = "betting"

_LOG2 = math.log(2.0)
# 1e300: far above any 1/alpha, and finite (exp of log(1e300) does not overflow).
_LOG_E_MAX = math.log(1e300)
# Below this, scipy's regularized incomplete beta has lost digits to underflow (it returns 0 below ~1e-308):
# those few entries are summed exactly in log space instead (`_log_binomial_upper_tail`).
_LOG_TAIL_EXACT = math.log(1e-280)
# Waudby-Smith & Ramdas's truncation constant: each factor of the capital stays >= 1 - c.
_C = 0.5
# The confidence sequence's grid over [-1, 1]: 401 points k / 200, one every 0.005 (half a percent point);
# divided rather than stepped, so that -0.035 is the double nearest -0.035, not -0.035000000000000024.
_GRID_SCALE = 200
_GRID: FloatArray = np.arange(-_GRID_SCALE, _GRID_SCALE + 1) / _GRID_SCALE
# Grid points x rows held at once while computing the confidence sequence (8 MB a float array).
_CS_BLOCK = 1 << 20

# Decision labels by question: (when the "up" test rejects, when the "down" test rejects).
_BETTER_LABELS = ("better", "worse")
_NO_DEGRADATION_LABELS = ("not_degraded", "degraded")
_SAYS = {
    "better": "adapter better",
    "worse": "adapter worse",
    "not_degraded": "adapter not degraded",
    "degraded": "adapter degraded",
}


@dataclass(frozen=True)
class Look:
    """The statistic at one look (a chunk boundary of the planned order)."""

    rows: int  # planned rows up to this boundary (the boundary itself)
    n: int  # pairs used so far (rows with both scores finite)
    e_value: float  # the largest e-value of the question's tests at this look
    lower: float  # anytime-valid (1 - alpha) confidence sequence for the mean paired difference
    upper: float  # adapter - base, in score units ([-1, 1]), running intersection


@dataclass(frozen=True)
class Decision:
    """The outcome of a sequential gate: what was decided, after which look, on which e-value."""

    # "better" | "worse" (better_than_base); "not_degraded" | "degraded" (no_degradation); None: undecided
    decided: str | None
    at: int | None  # planned rows after which it was decided (a boundary), None if undecided
    e_value: float | None  # the e-value that crossed the threshold (None if undecided)
    threshold: float  # 1 / alpha
    test: str  # "discordant_beta_mixture" or "betting"
    looks: tuple[Look, ...]  # every look evaluated: up to the deciding one, or all boundaries

    def to_json(self) -> dict[str, Any]:
        """JSON-safe: e-values to 4 significant digits (more where rounding would cross 1/alpha), interval
        ends to 4 decimals. No e-value is ever inf or NaN (capped at 1e300), so every number is a number."""
        return {
            "decided": self.decided,
            "at": self.at,
            "e_value": None if self.e_value is None else float(_e_text(self.e_value, self.threshold)),
            "threshold": self.threshold,
            "test": self.test,
            "looks": [
                {
                    "rows": look.rows,
                    "n": look.n,
                    "e_value": float(_e_text(look.e_value, self.threshold)),
                    "lower": round(look.lower, 4),
                    "upper": round(look.upper, 4),
                }
                for look in self.looks
            ],
        }

    def message(self, planned: int) -> str:
        """One line: `decided after 18 of 60 rows (15 pairs): e = 41.2 >= 1/alpha = 20 (adapter better)`."""
        threshold = f"1/alpha = {self.threshold:.6g}"
        if self.decided is not None and self.e_value is not None:
            pairs = self.looks[-1].n
            return (
                f"decided after {self.at} of {planned} rows ({pairs} pairs): "
                f"e = {_e_text(self.e_value, self.threshold)} >= {threshold} ({_SAYS[self.decided]})"
            )
        if not self.looks:
            return f"undecided: no look at any of {planned} rows"
        largest = max(look.e_value for look in self.looks)
        last = self.looks[-1]
        return (
            f"undecided after {last.rows} of {planned} rows ({last.n} pairs): "
            f"largest e = {_e_text(largest, self.threshold)} < {threshold}"
        )


class Outcomes(NamedTuple):
    """Many sequences' decisions at once (simulations): code +1 for "better"/"not_degraded", -1 for
    "worse"/"degraded", 0 undecided; at the planned rows of the deciding boundary, 0 when undecided."""

    code: IntArray  # (S,)
    at: IntArray  # (S,)


def decide_better(
    base: Scores, adapter: Scores, *, binary: bool, alpha: float, boundaries: Sequence[int]
) -> Decision:
    """better_than_base, sequentially: "better" / "worse" at the first look where an e-value reaches 1/alpha.

    binary=True (0/1 scores): the discordant beta mixture; otherwise testing by betting on d at m = 0.
    NaN or None marks a row without a pair: it keeps its planned position and contributes nothing.
    """
    b, a, bounds = _inputs(base, adapter, boundaries, alpha=alpha, binary=binary)
    e_up, e_down, n = _look_e_values(b[None, :], a[None, :], bounds, binary=binary, alpha=alpha, m_up=0.0)
    test = DISCORDANT_BETA_MIXTURE if binary else BETTING
    return _decision(a - b, bounds, e_up[0], e_down[0], n[0], alpha=alpha, labels=_BETTER_LABELS, test=test)


def decide_no_degradation(
    base: Scores,
    adapter: Scores,
    *,
    alpha: float,
    warn_drop: float,
    fail_drop: float,
    boundaries: Sequence[int],
) -> Decision:
    """no_degradation, sequentially, by betting: "not_degraded" once the drop is surely below warn_drop,
    "degraded" once it surely exceeds fail_drop (drop = mean(base - adapter))."""
    _check_drops(warn_drop, fail_drop)
    b, a, bounds = _inputs(base, adapter, boundaries, alpha=alpha, binary=False)
    e_up, e_down, n = _look_e_values(
        b[None, :], a[None, :], bounds, binary=False, alpha=alpha, m_up=-warn_drop, m_down=-fail_drop
    )
    return _decision(
        a - b, bounds, e_up[0], e_down[0], n[0], alpha=alpha, labels=_NO_DEGRADATION_LABELS, test=BETTING
    )


def outcomes_better(
    base: ArrayLike, adapter: ArrayLike, *, binary: bool, alpha: float, boundaries: Sequence[int]
) -> Outcomes:
    """decide_better's decision for every row of (S, T) score matrices at once (simulations; no interval)."""
    b, a, bounds = _matrices(base, adapter, boundaries, alpha=alpha, binary=binary)
    e_up, e_down, _ = _look_e_values(b, a, bounds, binary=binary, alpha=alpha, m_up=0.0)
    return _outcomes(e_up, e_down, bounds, alpha)


def outcomes_no_degradation(
    base: ArrayLike,
    adapter: ArrayLike,
    *,
    alpha: float,
    warn_drop: float,
    fail_drop: float,
    boundaries: Sequence[int],
) -> Outcomes:
    """decide_no_degradation's decision for every row of (S, T) score matrices at once."""
    _check_drops(warn_drop, fail_drop)
    b, a, bounds = _matrices(base, adapter, boundaries, alpha=alpha, binary=False)
    e_up, e_down, _ = _look_e_values(
        b, a, bounds, binary=False, alpha=alpha, m_up=-warn_drop, m_down=-fail_drop
    )
    return _outcomes(e_up, e_down, bounds, alpha)


def beta_mixture_e(wins: ArrayLike, losses: ArrayLike) -> FloatArray:
    """E_better(w, l) = 2^(w+l+1) B(w+1, l+1) I_{1/2}(l+1, w+1), elementwise; E_worse(w, l) is (l, w)."""
    w = np.asarray(wins, dtype=np.float64)
    l = np.asarray(losses, dtype=np.float64)  # noqa: E741 (the paper's letter)
    if np.any(w < 0) or np.any(l < 0) or np.any(w != np.floor(w)) or np.any(l != np.floor(l)):
        raise ValueError("wins and losses must be whole numbers >= 0")
    shape = np.broadcast_shapes(w.shape, l.shape)
    w, l = np.broadcast_to(w, shape).ravel(), np.broadcast_to(l, shape).ravel()  # noqa: E741
    # integral_{1/2}^{1} p^w (1-p)^l dp = B(w+1, l+1) P(Beta(l+1, w+1) <= 1/2) (substitute q = 1 - p).
    with np.errstate(divide="ignore"):
        log_tail = np.log(special.betainc(l + 1.0, w + 1.0, 0.5))
    for i in np.flatnonzero(log_tail < _LOG_TAIL_EXACT):
        # Many more losses than wins: the tail underflows, the e-value (~1/(l+1) at w = 0) does not.
        log_tail[i] = _log_binomial_upper_tail(int(l[i]) + 1, int(w[i] + l[i]) + 1)
    log_e = (w + l + 1.0) * _LOG2 + special.betaln(w + 1.0, l + 1.0) + log_tail
    return _capped(np.asarray(log_e, dtype=np.float64)).reshape(shape)


def planned_order(difficulties: Sequence[str], seed: int, key: str) -> list[int]:
    """A seeded random permutation of the rows whose every prefix keeps the file's difficulty mix: after k
    rows, each difficulty's count is within 1 of k * its share (strictly).

    Seeded from sha256(f"{seed}:{key}"), key the benchmark file's name, so every run and process agrees.
    Each difficulty's rows (in order of first appearance) are shuffled by that generator; then the strata
    are merged as unit jobs with windows: a stratum of n_s rows out of N may place its j-th row at planned
    position k only if (j - 1) N / n_s < k <= ceil(j N / n_s): any earlier and its count would reach
    k * share + 1, any later and it would fall to k * share - 1. Every stretch of positions can hold the rows
    whose windows lie inside it (their count is at most the stretch's length), so a schedule exists (Tijdeman
    1980, "The chairman assignment problem", even with a tighter bound), and earliest deadline first among the
    released rows finds one (Jackson's rule; optimal for unit jobs with release times). The simpler "take
    the stratum furthest below its share" rule drifts past 1 with seven strata, and subsets.allocate's
    largest remainder is not nested from one prefix to the next (the Alabama paradox), so neither is used.
    Ties between equal deadlines go by a seeded random ranking of the strata: ranked by first appearance,
    a file of one row per difficulty would come out in file order whatever the seed.
    """
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    generator = np.random.default_rng(int.from_bytes(digest, "big"))
    strata: dict[str, list[int]] = {}
    for row, difficulty in enumerate(difficulties):
        strata.setdefault(difficulty, []).append(row)
    shuffled = [[int(row) for row in generator.permutation(rows)] for rows in strata.values()]
    rank = [int(r) for r in generator.permutation(len(shuffled))]
    total = len(difficulties)
    taken = [0] * len(shuffled)
    order: list[int] = []
    for position in range(1, total + 1):
        best, best_key = -1, (total + 1, 0)
        for stratum, rows in enumerate(shuffled):
            size, nth = len(rows), taken[stratum] + 1
            if nth > size or (nth - 1) * total // size + 1 > position:
                continue  # used up, or its next row would put it a whole row above its share
            urgency = (-(-nth * total // size), rank[stratum])  # (deadline, tie-break)
            if urgency < best_key:
                best, best_key = stratum, urgency
        # Never -1: a schedule exists, so some row is always released (EDF leaves no position idle).
        order.append(shuffled[best][taken[best]])
        taken[best] += 1
    return order


# The e-values at every look, for S sequences at once.


def _look_e_values(
    base: FloatArray,
    adapter: FloatArray,
    bounds: IntArray,
    *,
    binary: bool,
    alpha: float,
    m_up: float,
    m_down: float | None = None,
) -> tuple[FloatArray, FloatArray, IntArray]:
    """(e of the "up" test, e of the "down" test, pairs) at each boundary: three (S, K) arrays.

    up rejects H0: E[d] <= m_up, down rejects H0: E[d] >= m_down (m_down defaults to m_up)."""
    d = adapter - base  # (S, T): NaN where either side has no score
    pairs = np.cumsum(np.isfinite(d), axis=1)[:, bounds - 1]  # (S, K)
    if binary:
        # Comparisons with NaN are False: rows without a pair are neither wins nor losses.
        wins = np.cumsum((adapter == 1.0) & (base == 0.0), axis=1)[:, bounds - 1]  # (S, K)
        losses = np.cumsum((adapter == 0.0) & (base == 1.0), axis=1)[:, bounds - 1]
        return beta_mixture_e(wins, losses), beta_mixture_e(losses, wins), pairs
    down = m_up if m_down is None else m_down
    m = np.array([m_up, down])
    up_log = _betting_log_capital(d, m[:1], side=1.0, bet_alpha=alpha)[:, 0, :][:, bounds - 1]  # (S, K)
    down_log = _betting_log_capital(d, m[1:], side=-1.0, bet_alpha=alpha)[:, 0, :][:, bounds - 1]
    return _capped(up_log), _capped(down_log), pairs


def _betting_log_capital(d: FloatArray, m: FloatArray, *, side: float, bet_alpha: float) -> FloatArray:
    """log K_t(m) after every row: d (S, T), NaN for no pair; m (M,) -> (S, M, T).

    side +1: K+ = prod (1 + lambda+ (d - m)) against H0: E[d] <= m; side -1: K- = prod (1 - lambda- (d - m))
    against H0: E[d] >= m. lambda is Waudby-Smith & Ramdas's predictable plug-in bet built for level
    bet_alpha (module docstring); row i's bet uses rows before i only.
    """
    pair = np.isfinite(d)  # (S, T)
    x = np.where(pair, d, 0.0)  # a row without a pair adds nothing to any sum
    t = np.cumsum(pair, axis=1)  # (S, T): this row's pair index (1-based) on pair rows
    mean = np.cumsum(x, axis=1) / (t + 1.0)  # mu_t, prior mean 0 as one pseudo-pair
    sq = np.where(pair, (x - mean) ** 2, 0.0)
    var = (1.0 + np.cumsum(sq, axis=1)) / (t + 1.0)  # sigma2_t, prior variance 1 as one pseudo-pair
    # Predictable: row i bets with sigma2 of the pairs before it (the prior 1 before the first pair).
    var_before = np.concatenate([np.ones_like(var[:, :1]), var[:, :-1]], axis=1)  # (S, T)
    t_bet = np.maximum(t, 1).astype(np.float64)  # non-pair rows' bets are computed, then multiplied by 0
    bet = np.sqrt(2.0 * math.log(1.0 / bet_alpha) / (var_before * t_bet * np.log1p(t_bet)))  # (S, T)
    with np.errstate(divide="ignore"):
        cap = _C / (1.0 + side * m)  # (M,): inf at m = -side, where d - m never has the losing sign
    lam = np.minimum(bet[:, None, :], cap[None, :, None])  # (S, M, T)
    log_factor = np.log1p(lam * side * (x[:, None, :] - m[None, :, None]))  # >= log(1 - c)
    log_factor = np.where(pair[:, None, :], log_factor, 0.0)
    log_capital: FloatArray = np.cumsum(log_factor, axis=2)
    return log_capital


def _outcomes(e_up: FloatArray, e_down: FloatArray, bounds: IntArray, alpha: float) -> Outcomes:
    code, index = _first_crossing(e_up, e_down, 1.0 / alpha)
    at = np.where(index >= 0, bounds[np.maximum(index, 0)], 0).astype(np.int64)
    return Outcomes(code, at)


def _first_crossing(e_up: FloatArray, e_down: FloatArray, threshold: float) -> tuple[IntArray, IntArray]:
    """(code, look index) per sequence: +1 up / -1 down / 0 none at the first look either test crosses.

    Where both cross at that look (possible only for data that no fixed mean explains, e.g. a run of +1
    then a run of -1), the larger e-value decides, and a tie goes to the cautious verdict ("worse",
    "degraded")."""
    crossed = (e_up >= threshold) | (e_down >= threshold)  # (S, K)
    decided = crossed.any(axis=1)
    first = np.argmax(crossed, axis=1)  # the first True, or 0 where none
    rows = np.arange(crossed.shape[0])
    code = np.where(e_up[rows, first] > e_down[rows, first], 1, -1)
    return np.where(decided, code, 0).astype(np.int64), np.where(decided, first, -1).astype(np.int64)


# One sequence: the decision, its looks and the confidence sequence.


def _decision(
    d: FloatArray,
    bounds: IntArray,
    e_up: FloatArray,
    e_down: FloatArray,
    pairs: IntArray,
    *,
    alpha: float,
    labels: tuple[str, str],
    test: str,
) -> Decision:
    threshold = 1.0 / alpha
    code, index = _first_crossing(e_up[None, :], e_down[None, :], threshold)
    used = bounds.size if index[0] < 0 else int(index[0]) + 1  # later looks are never evaluated
    intervals = _confidence_sequence(d[: bounds[used - 1]], bounds[:used], alpha)
    looks = tuple(
        Look(int(bounds[k]), int(pairs[k]), float(max(e_up[k], e_down[k])), low, high)
        for k, (low, high) in enumerate(intervals)
    )
    if index[0] < 0:
        return Decision(None, None, None, threshold, test, looks)
    k = int(index[0])
    decided = labels[0] if code[0] > 0 else labels[1]
    crossing = float(e_up[k] if code[0] > 0 else e_down[k])
    return Decision(decided, int(bounds[k]), crossing, threshold, test, looks)


def _confidence_sequence(d: FloatArray, bounds: IntArray, alpha: float) -> list[tuple[float, float]]:
    """The two-sided betting confidence sequence for E[d] at each boundary, running intersection.

    A grid point m is kept while max(K+(m), K-(m)) < 2/alpha (each side at alpha/2, Ville) at every look so
    far. The interval is the hull of the kept points (a superset, so still valid; the capital need not be
    monotone in m once the truncation moves with it), widened by one grid step each way so that a mean
    between two grid points is not lost to the grid's resolution. If nothing is kept (data no fixed mean
    explains), it collapses to the sample mean clipped into the previous interval, which keeps the
    sequence nested.
    """
    row = d[None, :]  # (1, T)
    excluded = np.zeros((_GRID.size, bounds.size), dtype=np.bool_)  # (M, K)
    # A block of grid points at a time: (M, T) capitals of a 20_000-row benchmark would hold 64 MB each.
    block = max(1, _CS_BLOCK // max(1, d.size))
    for start in range(0, _GRID.size, block):
        m = _GRID[start : start + block]
        for side in (1.0, -1.0):
            log_k = _betting_log_capital(row, m, side=side, bet_alpha=alpha / 2.0)[0][:, bounds - 1]
            excluded[start : start + block] |= _capped(log_k) >= 2.0 / alpha
    kept = np.logical_and.accumulate(~excluded, axis=1)  # (M, K): running intersection over looks
    intervals: list[tuple[float, float]] = []
    low, high = -1.0, 1.0
    for k, boundary in enumerate(bounds):
        points = np.flatnonzero(kept[:, k]) - _GRID_SCALE  # kept m, as multiples of the grid's step
        if points.size:
            low = max(-_GRID_SCALE, int(points.min()) - 1) / _GRID_SCALE
            high = min(_GRID_SCALE, int(points.max()) + 1) / _GRID_SCALE
        else:
            seen = d[:boundary]
            estimate = float(np.mean(seen[np.isfinite(seen)]))  # some pair exists: all m are kept at n = 0
            low = high = min(high, max(low, estimate))
        intervals.append((low, high))
    return intervals


# Inputs, numbers and text.


def _inputs(
    base: Scores, adapter: Scores, boundaries: Sequence[int], *, alpha: float, binary: bool
) -> tuple[FloatArray, FloatArray, IntArray]:
    b = np.array([math.nan if v is None else float(v) for v in base], dtype=np.float64)
    a = np.array([math.nan if v is None else float(v) for v in adapter], dtype=np.float64)
    b2, a2, bounds = _matrices(b, a, boundaries, alpha=alpha, binary=binary)
    return b2[0], a2[0], bounds


def _matrices(
    base: ArrayLike, adapter: ArrayLike, boundaries: Sequence[int], *, alpha: float, binary: bool
) -> tuple[FloatArray, FloatArray, IntArray]:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha}")
    b = np.atleast_2d(np.asarray(base, dtype=np.float64))
    a = np.atleast_2d(np.asarray(adapter, dtype=np.float64))
    if b.ndim != 2 or b.shape != a.shape:
        raise ValueError(f"base and adapter must score the same rows: shapes {b.shape} and {a.shape}")
    for name, scores in (("base", b), ("adapter", a)):
        present = scores[~np.isnan(scores)]
        if np.any(~np.isfinite(present)) or np.any((present < 0.0) | (present > 1.0)):
            raise ValueError(f"{name} scores must be in [0, 1] (NaN or None for a row without a score)")
        if binary and np.any((present != 0.0) & (present != 1.0)):
            raise ValueError(f"binary=True needs 0/1 scores, and {name} has others")
    bounds = np.asarray(list(boundaries), dtype=np.int64)
    if bounds.ndim != 1 or bounds.size == 0:
        raise ValueError("boundaries must be a non-empty sequence of row counts")
    if bounds[0] < 1 or np.any(np.diff(bounds) <= 0) or bounds[-1] > b.shape[1]:
        raise ValueError(
            f"boundaries must increase strictly from >= 1 to at most the {b.shape[1]} rows, "
            f"got {list(boundaries)}"
        )
    return b, a, bounds


def _check_drops(warn_drop: float, fail_drop: float) -> None:
    # A mean difference of scores in [0, 1] lies in [-1, 1]: a drop beyond 1 cannot happen.
    if not 0.0 <= warn_drop <= fail_drop <= 1.0:
        raise ValueError(
            f"no_degradation needs 0 <= warn_drop <= fail_drop <= 1, got warn_drop={warn_drop!r}, "
            f"fail_drop={fail_drop!r}"
        )


def _capped(log_e: FloatArray) -> FloatArray:
    e: FloatArray = np.exp(np.minimum(log_e, _LOG_E_MAX))
    return e


def _log_binomial_upper_tail(k: int, n: int) -> float:
    """log P(Binomial(n, 1/2) >= k), summed term by term in log space (I_{1/2}(k, n-k+1) is this tail)."""
    j = np.arange(k, n + 1, dtype=np.float64)
    terms = special.gammaln(n + 1.0) - special.gammaln(j + 1.0) - special.gammaln(n - j + 1.0)
    return float(special.logsumexp(terms)) - n * _LOG2


def _e_text(e: float, threshold: float) -> str:
    """An e-value to 4 significant digits, more where rounding would move it across 1/alpha (19.99996 shown
    as "20" beside ">= 20" would read as decided)."""
    for digits in range(4, 18):
        shown = f"{e:.{digits}g}"
        if (float(shown) >= threshold) == (e >= threshold):
            return shown
    return repr(e)
