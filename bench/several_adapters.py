"""Two adapters in one run against two runs of one adapter each, measured in the same process tree.

    python bench/several_adapters.py [--runs 2]

One run: `pytest --adapter=adapters/date-iso --adapter=adapters/sentiment benchmarks/` (the base generated
once for both, one copy of its weights). Two runs: the same command with each adapter alone, one right
after the other. Every output is generated (--llmeval-no-cache), model load included, each command in a
fresh subprocess; the order alternates between repeats (ABBA) so that machine noise falls on both. Prints
each time, the medians and the ratio (one run / two runs; the target is at most 0.7). Also checks that
the two ways give each adapter the same outputs, row by row.

Never run it beside another benchmark or the test suite: on 2 cores a contended run reads as a regression.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ADAPTERS = ("adapters/date-iso", "adapters/sentiment")


def run(adapters: tuple[str, ...], results: Path) -> float:
    """One run of the shipped benchmarks with these adapters; its wall time in seconds."""
    cmd = [sys.executable, "-m", "pytest", *(f"--adapter={a}" for a in adapters), "benchmarks/"]
    cmd += ["-q", "--tb=no", "-p", "no:cacheprovider", "--llmeval-no-cache", "--llmeval-no-history"]
    cmd += [f"--llmeval-results={results}"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1) or not results.is_file():
        raise SystemExit(f"the run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed


def outputs(path: Path, column: str) -> dict[str, Any]:
    """Every row's output (or measurement's score) of one column, by node id."""
    doc = json.loads(path.read_text())
    out: dict[str, Any] = {}
    for bench in doc["benchmarks"]:
        for row in bench["rows"]:
            side = row["models"].get(column) or {}
            out[row["nodeid"]] = side.get("output") if side.get("output") is not None else side.get("score")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2, help="repeats of each way (default 2)")
    args = parser.parse_args()
    together: list[float] = []
    apart: list[float] = []
    with tempfile.TemporaryDirectory(prefix="llmeval-bench-") as tmp:
        folder = Path(tmp)
        for i in range(args.runs):

            def one(i: int = i) -> None:
                seconds = run(ADAPTERS, folder / f"together-{i}.json")
                together.append(seconds)
                print(f"one run, two adapters: {seconds:.1f} s", flush=True)

            def two(i: int = i) -> None:
                seconds = sum(run((a,), folder / f"apart-{i}-{n}.json") for n, a in enumerate(ADAPTERS))
                apart.append(seconds)
                print(f"two runs, one adapter each: {seconds:.1f} s", flush=True)

            for step in (one, two) if i % 2 == 0 else (two, one):
                step()
        same = all(
            outputs(folder / "together-0.json", Path(a).name)
            == outputs(folder / f"apart-0-{n}.json", "adapter")
            for n, a in enumerate(ADAPTERS)
        )
    ours, theirs = statistics.median(together), statistics.median(apart)
    print(f"median: one run {ours:.1f} s, two runs {theirs:.1f} s; ratio {ours / theirs:.3f} (target <= 0.7)")
    print(f"each adapter's outputs identical in both ways: {same}")


if __name__ == "__main__":
    main()
