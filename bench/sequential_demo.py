"""The main job with and without --llmeval-sequential, measured in the same run.

    python bench/sequential_demo.py [--runs 2] [--job demo|date-iso]

Each run is a main job (`demo`: `pytest --adapter=adapters/date-iso --adapter=adapters/sentiment
benchmarks/`, as `make demo`; `date-iso`: that adapter alone) with `--llmeval-no-cache` (every output
generated), in a fresh subprocess, model load included; the
two variants alternate (ABBA) so that machine noise falls on both. Prints each run's wall time, the medians
and the ratio (sequential / whole: below 1 is faster), and per benchmark the rows generated and, where a
benchmark stopped early, after how many rows and with which decision.

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
JOBS = {
    "demo": ["--adapter=adapters/date-iso", "--adapter=adapters/sentiment", "benchmarks/"],  # make demo
    "date-iso": ["--adapter=adapters/date-iso", "benchmarks/"],  # one adapter, the README's first job
}


def run_once(job: list[str], extra: list[str], results: Path) -> tuple[float, dict[str, Any]]:
    """One main job; its wall time in seconds and its results.json."""
    cmd = [sys.executable, "-m", "pytest", *job, "-q", "--tb=no", "-p", "no:cacheprovider"]
    cmd += ["--llmeval-no-cache", "--llmeval-no-history", f"--llmeval-results={results}", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1) or not results.is_file():
        raise SystemExit(f"the main job failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    document: dict[str, Any] = json.loads(results.read_text())
    return elapsed, document


def rows_generated(document: dict[str, Any]) -> dict[str, str]:
    """Per benchmark: rows run of rows planned, and the decision where it stopped early."""
    out = {}
    for bench in document["benchmarks"]:
        ran = sum(1 for r in bench["rows"] if r["skipped"] is None)
        text = f"{ran} of {len(bench['rows'])} rows"
        seq = bench.get("sequential")
        if seq:
            decided = {c: d["decided"] for c, d in seq["decisions"].items()}
            text += f" ({'stopped early' if seq['early'] else 'ran to the end'}; {decided})"
        out[bench["benchmark_file"]] = text
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2, help="runs of each (default 2)")
    parser.add_argument("--job", choices=sorted(JOBS), default="demo", help="which main job (default demo)")
    args = parser.parse_args()
    variants = {"whole": [], "sequential": ["--llmeval-sequential"]}
    times: dict[str, list[float]] = {name: [] for name in variants}
    last: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="llmeval-bench-") as tmp:
        for i in range(args.runs):
            names = list(variants) if i % 2 == 0 else list(variants)[::-1]
            for name in names:
                seconds, last[name] = run_once(JOBS[args.job], variants[name], Path(tmp) / f"{name}-{i}.json")
                times[name].append(seconds)
                print(f"{name:>10}: run {i + 1}: {seconds:.1f} s", flush=True)
    whole, sequential = statistics.median(times["whole"]), statistics.median(times["sequential"])
    print(f"median: whole {whole:.1f} s, sequential {sequential:.1f} s; ratio {sequential / whole:.3f}")
    for name in variants:
        for bench, text in rows_generated(last[name]).items():
            print(f"{name:>10}: {bench}: {text}")
    for bench in last["sequential"]["benchmarks"]:
        for gate, verdict in sorted(bench["gates"].items()):
            if gate.startswith(("better_than_base", "no_degradation")):
                where = f"{bench['benchmark_file']}: {gate}"
                print(f"sequential: {where}: {verdict['status']}: {verdict['message']}")


if __name__ == "__main__":
    main()
