"""Iteration in seconds (issue 40): every figure of the issue, side by side, from one run.

    python bench/iteration.py [--repeats 2] [--rows 10000 100000] [--skip overhead,mixed]

1. The main job (`pytest --adapter=adapters/date-iso --adapter=adapters/sentiment benchmarks/`) in a fresh
   folder with an empty generation cache, then again with every output cached: wall time from launch to
   exit, the ratio (target >= 20x), and the re-run against bare `pytest --collect-only` of the same files
   (pytest's start and collection walk with this plugin off: the floor of any pytest command here).
2. One row, cached (`-k dates-005` on benchmarks/dates.jsonl, README's "why did this row fail?" step),
   against bare `pytest --collect-only` of that file (target <= 2x).
3. The plugin's overhead per row in predictions mode at 10,000 and 100,000 rows against pytest's own
   non-python example collecting the same file (bench/overhead.py; target <= 1.3x, time and memory linear).
4. Base + both demo adapters generated in one mixed batch against three separate passes on the same rows
   (bench/mixed_batches.py; on CPU here, on a GPU with --device cuda).

Subprocesses run with bytecode caching on, as on a user's machine (this sandbox sets
PYTHONDONTWRITEBYTECODE, which makes every process compile every module again: about 2 s of each run).
Never run this beside another benchmark or the test suite: the figures are ratios of runs on one machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
MAIN_JOB = ["--adapter=adapters/date-iso", "--adapter=adapters/sentiment", "benchmarks/"]
ONE_ROW = ["--adapter=adapters/date-iso", "--adapter=adapters/sentiment", "benchmarks/dates.jsonl"]
ONE_ROW += ["-k", "dates-005"]


def user_env() -> dict[str, str]:
    """This process's environment with bytecode caching on (a user's default)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def wall(args: list[str], folder: Path) -> float:
    """Seconds from launch to exit of `python -m pytest ARGS` in `folder` (exit 0 or 1: rows may fail)."""
    command = [sys.executable, "-m", "pytest", *args, "-q", "--tb=no", "-p", "no:randomly"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=user_env())
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1, 4, 5):  # 4, 5: bare pytest finds no test in a .jsonl file
        raise SystemExit(
            f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return seconds


def ours(args: list[str]) -> list[str]:
    return [*args, "--llmeval-cache-dir=gen-cache", "--llmeval-no-history"]


def bare(files: list[str]) -> list[str]:
    """Bare pytest over the same files: this plugin off, collection only."""
    return [*files, "--collect-only", "-p", "no:llmeval"]


def cached_runs(repeats: int) -> list[tuple[str, float, float, str]]:
    """(what, ours in s, reference in s, target) for the main job's re-run and one cached row."""
    firsts: list[float] = []
    reruns: list[float] = []
    rows: list[float] = []
    bares: list[float] = []
    row_bares: list[float] = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="llmeval-iteration-") as tmp:
            folder = Path(tmp)
            for name in ("benchmarks", "adapters"):
                shutil.copytree(REPO / name, folder / name)
            firsts.append(wall(ours(MAIN_JOB), folder))
            reruns.append(wall(ours(MAIN_JOB), folder))
            rows.append(wall(ours(ONE_ROW), folder))
            bares.append(wall(bare(["benchmarks/"]), folder))
            row_bares.append(wall(bare(["benchmarks/dates.jsonl"]), folder))
    first, rerun, row = min(firsts), min(reruns), min(rows)
    return [
        ("main job: cached re-run vs first run", rerun, first, ">= 20x faster"),
        ("main job: cached re-run vs bare --collect-only", rerun, min(bares), "(reference)"),
        ("one cached row (-k dates-005) vs bare --collect-only", row, min(row_bares), "<= 2x"),
    ]


def load_bench(name: str) -> ModuleType:
    """Another script of bench/ as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--skip", default="", help="comma-separated: cached, overhead, mixed")
    parser.add_argument("--device", default="cpu", help="the mixed-batch figure's device (cpu, cuda)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    lines: list[str] = []
    if "cached" not in skip:
        for what, mine, reference, target in cached_runs(args.repeats):
            lines.append(
                f"{what}: {mine:.2f} s vs {reference:.2f} s: "
                + (f"{reference / mine:.1f}x faster" if "faster" in target else f"{mine / reference:.2f}x")
                + f" (target {target})"
            )
            print(lines[-1], flush=True)
    if "overhead" not in skip:
        lines += load_bench("overhead").side_by_side(args.rows, args.repeats)  # printed as measured
    if "mixed" not in skip:
        lines += load_bench("mixed_batches").side_by_side(args.device, args.repeats)  # printed as measured
    print("\nside by side:\n" + "\n".join(f"  {line}" for line in lines))


if __name__ == "__main__":
    main()
