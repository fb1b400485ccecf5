"""The main job with K few-shot examples against none, measured in the same run.

    python bench/fewshot.py [--runs 2] [--k 5] [--job date-iso|demo]

Each run is a main job (`date-iso`: `pytest --adapter=adapters/date-iso benchmarks/`, the README's first job;
`demo`: both demo adapters, as `make demo`) with `--llmeval-no-cache` (every output generated), in a fresh
subprocess, model load included, once with `--llmeval-fewshot=0` and once with `--llmeval-fewshot=K`; the
two alternate (ABBA) so that machine noise falls on both. Prints each run's wall time, the medians and their
ratio (K / 0), the prompt tokens each variant read, every benchmark's score per column under each, and per
benchmark how much of its prompts is one prefix common to all its rows (the part the shared-prefix
speed-up computes once per batch: the chat template's system turn, and with few-shot examples drawn per
row at least the first example's instruction).

Never run it beside another benchmark or the test suite: on 2 cores a contended run reads as a regression.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

# One main job in a subprocess, its wall time and results.json: the same runner as the sequential benchmark.
from sequential_demo import run_once

JOBS = {
    "date-iso": ["--adapter=adapters/date-iso", "benchmarks/"],
    "demo": ["--adapter=adapters/date-iso", "--adapter=adapters/sentiment", "benchmarks/"],
}


def scores(document: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per benchmark, each column's mean score (the matrix results.json keeps)."""
    out: dict[str, dict[str, float]] = {}
    for bench in document["benchmarks"]:
        columns: dict[str, list[float]] = {}
        for r in bench["rows"]:
            for column, side in r["models"].items():
                value = side.get("score")
                if isinstance(value, dict):
                    value = value.get("value")
                if isinstance(value, (int, float)):
                    columns.setdefault(column, []).append(float(value))
        out[bench["benchmark_file"]] = {c: statistics.fmean(v) for c, v in columns.items() if v}
    return out


def common_prefix(document: dict[str, Any]) -> dict[str, tuple[int, float]]:
    """Per benchmark: the tokens of the prefix all its recorded prompts share, and their mean length."""
    from transformers import AutoTokenizer

    from pytest_llmeval.generation import shared_prefix_length
    from pytest_llmeval.models import embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    out = {}
    for bench in document["benchmarks"]:
        prompts = [r["prompt"] for r in bench["rows"] if "prompt" in r]
        encoded = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if encoded:
            out[bench["benchmark_file"]] = (
                shared_prefix_length(encoded, minimum=0),
                statistics.fmean(len(e) for e in encoded),
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2, help="runs of each (default 2)")
    parser.add_argument("--k", type=int, default=5, help="few-shot examples per row (default 5)")
    parser.add_argument("--job", choices=sorted(JOBS), default="date-iso", help="which main job")
    args = parser.parse_args()
    variants = {"K=0": 0, f"K={args.k}": args.k}
    times: dict[str, list[float]] = {name: [] for name in variants}
    last: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="llmeval-bench-") as tmp:
        for i in range(args.runs):
            names = list(variants) if i % 2 == 0 else list(variants)[::-1]
            for name in names:
                results = Path(tmp) / f"{name}-{i}.json"
                seconds, last[name] = run_once(
                    JOBS[args.job], [f"--llmeval-fewshot={variants[name]}"], results
                )
                times[name].append(seconds)
                print(f"{name:>5}: run {i + 1}: {seconds:.1f} s", flush=True)
    (zero, k) = (statistics.median(times[n]) for n in variants)
    print(f"median: K=0 {zero:.1f} s, K={args.k} {k:.1f} s; ratio {k / zero:.3f}")
    for name in variants:
        tokens = {c: m["prompt_tokens"] for c, m in last[name]["cost"]["models"].items()}
        print(f"{name:>5}: prompt tokens read {tokens}")
    for name in variants:
        for bench, columns in scores(last[name]).items():
            shown = ", ".join(f"{c} {v:.3f}" for c, v in columns.items())
            print(f"{name:>5}: {bench}: {shown}")
    for name in variants:
        for bench, (shared, mean) in common_prefix(last[name]).items():
            print(f"{name:>5}: {bench}: prefix common to every row {shared} of {mean:.0f} tokens on average")


if __name__ == "__main__":
    main()
