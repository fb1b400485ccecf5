"""Anytime-valid sequential gates: power and rows saved, against the fixed-sample exact McNemar test.

    python bench/sequential_power.py [--sims 2000] [--seed 0]

Simulated 0/1 benchmark rows, no model: the base is right on 60% of rows, and the adapter keeps 95% of the
base's right answers and fixes enough of its wrong ones to be 5, 10 or 30 points more accurate (how a
fine-tuned adapter's answers relate to its base's; the discordant pairs are what McNemar's test sees). The
sequential gate (`--llmeval-sequential`: sequential.outcomes_better, the discordant beta mixture) looks after
every 16 rows up to a cap of 600 and stops at the first look where e >= 1/alpha. For each effect it prints
the share of sequences decided "better" by the cap, the rows used (the deciding boundary, or the cap when
undecided): mean, median and the rows by which 80% of sequences were decided; against it, the exact power of
the fixed-sample McNemar test at 600 rows (two-sided at alpha, "better" when p < alpha and the adapter won
more discordant rows; computed exactly, not simulated) and the smallest N on a grid of 5 where that power
reaches 80%. The last line is the null (effect 0, same correlation): how often each procedure says
"better", the e-process stopping early against the same McNemar test repeated after every chunk.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from pytest_llmeval.sequential import outcomes_better

ALPHA = 0.05
CHUNK = 16
CAP = 600
BASE_ACCURACY = 0.6
KEEP = 0.95  # P(adapter right | base right)
EFFECTS = (0.05, 0.10, 0.30)
POWER = 0.8
GRID = np.arange(5, 3001, 5)  # the fixed-sample sizes searched for 80% power


def rates(effect: float) -> tuple[float, float]:
    """(P(adapter right, base wrong), P(adapter wrong, base right)) per row for this accuracy effect."""
    fix = (BASE_ACCURACY + effect - BASE_ACCURACY * KEEP) / (1.0 - BASE_ACCURACY)
    return (1.0 - BASE_ACCURACY) * fix, BASE_ACCURACY * (1.0 - KEEP)


def simulate(effect: float, sims: int, rng: np.random.Generator) -> tuple[NDArray[np.float64], ...]:
    """(base, adapter) 0/1 scores, (sims, CAP)."""
    win, loss = rates(effect)
    base = (rng.random((sims, CAP)) < BASE_ACCURACY).astype(np.float64)
    u = rng.random((sims, CAP))
    # Given base right, the adapter is wrong w.p. loss / P(base right); given base wrong, right w.p. win / ...
    adapter = np.where(base == 1.0, u >= loss / BASE_ACCURACY, u < win / (1.0 - BASE_ACCURACY))
    return base, adapter.astype(np.float64)


def fixed_power(n: int, effect: float) -> float:
    """Exact power of "better" for the exact McNemar test at n rows: sum over the discordant count k of
    P(k) P(losses <= the largest l with 2 P(Bin(k, 1/2) <= l) < alpha | k)."""
    win, loss = rates(effect)
    k = np.arange(n + 1)
    largest = stats.binom.ppf(ALPHA / 2.0, k, 0.5) - 1.0  # P(<= l) < alpha/2 exactly for l below the ppf
    rejected = stats.binom.cdf(largest, k, loss / (win + loss))
    return float(np.sum(stats.binom.pmf(k, n, win + loss) * rejected))


def naive_better(base: NDArray[np.float64], adapter: NDArray[np.float64], bounds: list[int]) -> float:
    """The share called "better" by the exact McNemar test after every chunk, stopping at p < alpha."""
    look = np.asarray(bounds) - 1
    wins = np.cumsum((adapter == 1.0) & (base == 0.0), axis=1)[:, look]
    losses = np.cumsum((adapter == 0.0) & (base == 1.0), axis=1)[:, look]
    p = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(wins, losses), wins + losses, 0.5))
    rejected = (p < ALPHA) & (wins + losses > 0)
    first = np.argmax(rejected, axis=1)
    return float(np.mean(rejected.any(axis=1) & (wins > losses)[np.arange(len(p)), first]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    bounds = sorted({*range(CHUNK, CAP + 1, CHUNK), CAP})
    start = time.perf_counter()

    print(
        f"alpha {ALPHA}, looks every {CHUNK} rows up to {CAP}, {args.sims} simulated benchmarks per line; "
        f"base {BASE_ACCURACY:.0%} right, the adapter keeps {KEEP:.0%} of its right answers"
    )
    print()
    print(
        "| effect | discordant (wins / losses) | sequential: better by 600 | mean rows | median rows "
        "| rows for 80% better | McNemar at 600: power | McNemar: N for 80% |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for effect in EFFECTS:
        base, adapter = simulate(effect, args.sims, rng)
        out = outcomes_better(base, adapter, binary=True, alpha=ALPHA, boundaries=bounds)
        better = out.code == 1
        used = np.where(out.code != 0, out.at, CAP)
        # The rows by which 80% of sequences were decided "better": the 80th percentile of the rows used,
        # counting undecided ones as never (infinite).
        by = np.sort(np.where(better, out.at, np.iinfo(np.int64).max))[int(np.ceil(POWER * args.sims)) - 1]
        reach = "–" if by > CAP else str(by)
        powers = np.array([fixed_power(int(n), effect) for n in GRID])
        reached = GRID[powers >= POWER]
        n80 = str(reached[0]) if reached.size else f"> {GRID[-1]}"
        win, loss = rates(effect)
        print(
            f"| +{effect * 100:.0f} pt | {win:.3f} / {loss:.3f} | {better.mean():.1%} | {used.mean():.0f} "
            f"| {np.median(used):.0f} | {reach} | {fixed_power(CAP, effect):.1%} | {n80} |"
        )
    base, adapter = simulate(0.0, args.sims, rng)
    out = outcomes_better(base, adapter, binary=True, alpha=ALPHA, boundaries=bounds)
    print()
    print(
        f"null (effect 0, discordant {rates(0.0)[0]:.3f} / {rates(0.0)[1]:.3f}): sequential says better in "
        f"{np.mean(out.code == 1):.2%} (bound {ALPHA:.0%}); exact McNemar after every {CHUNK} rows "
        f"{naive_better(base, adapter, bounds):.2%}; once at {CAP} rows {fixed_power(CAP, 0.0):.2%} (exact)"
    )
    print(f"({time.perf_counter() - start:.1f} s)")
    print(f"command: .venv/bin/python bench/sequential_power.py --sims {args.sims} --seed {args.seed}")


if __name__ == "__main__":
    main()
