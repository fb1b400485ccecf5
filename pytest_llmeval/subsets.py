"""Seeded subsets of a benchmark: the same rows for every model, worker and run, the difficulty mix kept.

Pure, standard library only. `--llmeval-sample N` (or a fraction) with `--llmeval-seed S` runs a subset
of each benchmark file instead of "the first N rows" (lm-eval #2598): each difficulty gets its share of the
subset by the largest-remainder rule (within one row of proportional), and the rows of each difficulty are
drawn with a generator seeded by the seed, the file and the difficulty, never by the process. A subset run is
incomplete by construction, so it never becomes a no_regression baseline.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence

__all__ = ["allocate", "parse_size", "pick", "size_of", "subset_digest"]


def parse_size(value: str) -> int | float:
    """`--llmeval-sample`: a whole number of rows (>= 1) or a fraction of each file in (0, 1)."""
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"expected a number of rows (20) or a fraction (0.25), got {value!r}") from None
    if number.is_integer() and number >= 1 and "." not in value:
        return int(number)
    if 0 < number < 1:
        return number
    raise ValueError(f"expected a number of rows >= 1 or a fraction in (0, 1), got {value!r}")


def size_of(size: int | float, total: int) -> int:
    """Rows of a `total`-row file that the subset keeps: N (at most the file), or the fraction rounded (at
    least one row)."""
    if isinstance(size, int):
        return min(size, total)
    return min(total, max(1, round(size * total)))


def allocate(counts: Mapping[str, int], n: int) -> dict[str, int]:
    """`n` rows split over strata of `counts` rows in proportion, by the largest remainder: each stratum
    gets floor or ceil of its exact share (never more than it has), ties broken by the strata's order."""
    total = sum(counts.values())
    if not 0 <= n <= total:
        raise ValueError(f"cannot take {n} rows of {total}")
    if total == 0:
        return {name: 0 for name in counts}
    exact = {name: n * count / total for name, count in counts.items()}
    given = {name: math.floor(share) for name, share in exact.items()}
    order = sorted(counts, key=lambda name: (-(exact[name] - given[name]), list(counts).index(name)))
    for name in order[: n - sum(given.values())]:
        given[name] += 1
    return given


def pick(rows: Sequence[tuple[str, str]], size: int | float, *, seed: int, salt: str) -> list[str]:
    """The ids of the subset of `rows` ((id, difficulty) in file order), in file order. Strata are the
    difficulties in order of first appearance; each is drawn from with its own seeded generator."""
    strata: dict[str, list[str]] = {}
    for row_id, difficulty in rows:
        strata.setdefault(difficulty, []).append(row_id)
    quota = allocate({d: len(ids) for d, ids in strata.items()}, size_of(size, len(rows)))
    chosen: set[str] = set()
    for difficulty, ids in strata.items():
        # A str seed is hashed with SHA-512 by random.Random: the same in every process (not hash()).
        generator = random.Random(f"llmeval-subset\0{seed}\0{salt}\0{difficulty}")
        chosen |= set(generator.sample(ids, quota[difficulty]))
    return [row_id for row_id, _ in rows if row_id in chosen]


def subset_digest(chosen: Sequence[tuple[str, str]]) -> str:
    """sha256 of the subset's (benchmark, id) pairs, sorted: two runs on the same rows have the same."""
    text = "\n".join(f"{benchmark}\0{row_id}" for benchmark, row_id in sorted(chosen))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
