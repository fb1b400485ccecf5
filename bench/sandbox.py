"""Sandbox overhead per test case against a bare interpreter start, same stdin, same run.

    python bench/sandbox.py [--repeats 20] [--mode auto|strict|basic ...]

The reference is what running a test case costs at the least: `python -I -c pass` started by subprocess with
the case's input on stdin. The sandboxed run is `Sandbox.run("pass", stdin, limits)`: the launcher, the
isolation layers, the output capture and the clean-up after. The two are run alternately, `--repeats`
times each, and the medians are compared (these machines are noisy). The target is an overhead of at most
100 ms per test case.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time

from pytest_llmeval.sandbox import Sandbox, SandboxUnavailable, detect
from pytest_llmeval.sandbox.runs import Limits

STDIN = "3 4\n" * 100


def bare(python: str) -> float:
    """Seconds for subprocess to start `python -I -c pass` on STDIN and collect its output."""
    with tempfile.TemporaryFile() as stdin:
        stdin.write(STDIN.encode())
        stdin.seek(0)
        started = time.perf_counter()
        subprocess.run([python, "-I", "-c", "pass"], stdin=stdin, capture_output=True, check=True)
        return time.perf_counter() - started


def sandboxed(box: Sandbox) -> float:
    started = time.perf_counter()
    result = box.run("pass", STDIN, Limits())
    elapsed = time.perf_counter() - started
    if result.exit_code != 0 or result.sandbox_error:
        raise SystemExit(f"the sandboxed run failed: {result}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--mode", action="append", choices=["auto", "strict", "basic"])
    args = parser.parse_args()
    for mode in args.mode or ["auto", "basic"]:
        try:
            isolation = detect(mode)
        except SandboxUnavailable as error:
            print(f"{mode}: unavailable: {error}")
            continue
        box = Sandbox(isolation)
        (
            bare(box.python),
            sandboxed(box),
        )  # warm the page cache: the first start reads the interpreter from disk
        reference, measured = [], []
        for _ in range(args.repeats):
            reference.append(bare(box.python))
            measured.append(sandboxed(box))
        ref, got = statistics.median(reference), statistics.median(measured)
        print(f"mode {mode}: isolation {isolation.level}, layers: {', '.join(isolation.layers)}")
        if isolation.missing:
            print(f"  missing: {', '.join(isolation.missing)}")
        print(f"  bare `python -I -c pass`: median {ref * 1000:6.1f} ms over {args.repeats} runs")
        print(f"  sandboxed run of `pass`:  median {got * 1000:6.1f} ms over {args.repeats} runs")
        print(
            f"  overhead: {(got - ref) * 1000:+.1f} ms per test case, ratio {got / ref:.2f}x",
            "(target: <= +100 ms)",
        )


if __name__ == "__main__":
    main()
