"""The main job's wall time, this tree against a reference commit, measured in the same run.

    python bench/main_job.py --reference HEAD~1 [--runs 2] [-- extra pytest args]

Each run is `pytest --adapter=adapters/date-iso benchmarks/ --llmeval-no-cache` (every output generated,
nothing served from the cache) in a fresh subprocess, model load included. The reference runs from a git
worktree of the given commit with the same virtual environment (its package first on PYTHONPATH), and the
two alternate so that machine noise falls on both. Prints each run's wall time, the medians and the ratio
(this tree / reference: below 1 is faster).

Never run it beside another benchmark or the test suite: on 2 cores a contended run reads as a regression.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_once(tree: Path, extra: list[str], results: Path) -> float:
    """One main job from `tree` (its own pytest_llmeval first on the path); its wall time in seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "pytest", "--adapter=adapters/date-iso", "benchmarks/", "-q", "--tb=no"]
    cmd += ["-p", "no:cacheprovider", "--llmeval-no-cache", f"--llmeval-results={results}", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1) or not results.is_file():
        raise SystemExit(f"the main job failed in {tree}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference", required=True, help="git revision to compare against")
    parser.add_argument("--runs", type=int, default=2, help="runs of each (default 2)")
    parser.add_argument("extra", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmeval-bench-") as tmp:
        reference = Path(tmp) / "reference"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(reference), args.reference],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        try:
            times: dict[str, list[float]] = {"this tree": [], args.reference: []}
            for i in range(args.runs):
                pair = [("this tree", REPO), (args.reference, reference)]
                # ABBA order: whatever favours the first or second run of a pair falls on both.
                for name, tree in pair if i % 2 == 0 else pair[::-1]:
                    seconds = run_once(tree, args.extra, Path(tmp) / f"results-{i}-{len(times[name])}.json")
                    times[name].append(seconds)
                    print(f"{name:>12}: run {i + 1}: {seconds:.1f} s", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(reference)], cwd=REPO, check=False)
    ours, theirs = statistics.median(times["this tree"]), statistics.median(times[args.reference])
    print(f"median: this tree {ours:.1f} s, {args.reference} {theirs:.1f} s; ratio {ours / theirs:.3f}")


if __name__ == "__main__":
    main()
