"""Quick check of the ``sentiment`` adapter: base vs adapter on the dev set and every shipped benchmark.

Loads the weights once; base outputs come from the same model with the adapter disabled. Prints the
exact-match rate per file and per difficulty, and the change the adapter makes; for perplexity benchmarks
(``evaluation_type: perplexity``) the mean per-text negative cross-entropy, the measure the plugin's
no_degradation gate compares. ``data/dev.jsonl`` (hand-written, never trained on) comes first: tune on it,
not on the benchmark.

Usage (from the repository root): ``python adapters/sentiment/evaluate_quick.py``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BENCH_DIR = ROOT / "benchmarks"
DEV_FILE = HERE / "data" / "dev.jsonl"
# The dev rows carry no evaluation_config: score them as the benchmark scores its rows.
SENTIMENT_EVAL_CONFIG: dict[str, Any] = {
    "extract_pattern": r"(?i)\b(positive|negative)\b",
    "extract_match": "first",
    "max_new_tokens": 12,
}


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rates(rows: Sequence[dict[str, Any]], scores: Sequence[float]) -> dict[str, tuple[float, int]]:
    """Exact-match rate (percent) and row count: overall under "all", then per difficulty."""
    groups: dict[str, list[float]] = defaultdict(list)
    for row, value in zip(rows, scores, strict=True):
        groups["all"].append(value)
        groups[str(row.get("difficulty", "-"))].append(value)
    return {key: (100.0 * sum(v) / len(v), len(v)) for key, v in groups.items()}


def main(argv: Sequence[str] | None = None) -> None:
    """Generate with and without the adapter, score with exact_match, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--adapter", type=Path, default=HERE, help="adapter folder")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--show", type=int, default=0, help="print the first N adapter misses per benchmark")
    parser.add_argument(
        "--show-diff", type=int, default=0, help="print the first N rows base and adapter score differently"
    )
    parser.add_argument(
        "--only",
        nargs="*",
        type=Path,
        help="these files only (default: data/dev.jsonl, then benchmarks/*.jsonl)",
    )
    args = parser.parse_args(argv)
    # Before torch loads OpenMP: passive waiting keeps two threads usable next to other busy processes.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.path.insert(0, str(ROOT))  # run from anywhere: the plugin package lives at the repository root

    import torch

    from pytest_llmeval.generation import build_prompt, generate
    from pytest_llmeval.models import ModelSpec, load
    from pytest_llmeval.perplexity import perplexity
    from pytest_llmeval.scorers import exact_match

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    loaded = load(ModelSpec(adapter=args.adapter))
    print(f"model: {loaded.base.name} + {args.adapter} on {loaded.device}, {loaded.dtype}")
    # Whatever is shipped, in a fixed order: the dev set, the in-domain benchmark and any out-of-domain ones.
    benchmarks = (
        [p.resolve() for p in args.only] if args.only else [DEV_FILE, *sorted(BENCH_DIR.glob("*.jsonl"))]
    )
    if not benchmarks:
        raise SystemExit(f"no benchmarks/*.jsonl under {ROOT}")
    for path in benchmarks:
        rows = read_rows(path)
        for r in rows:
            r.setdefault("evaluation_config", SENTIMENT_EVAL_CONFIG)
        if rows and all(r.get("evaluation_type") == "perplexity" for r in rows):
            # Mean per-text negative cross-entropy (nats per token), adapter off and on.
            texts = [r["input"] for r in rows]
            means: dict[str, float] = {}
            for label, enabled in (("base", False), ("adapter", True)):
                with loaded.adapter_enabled(enabled):
                    result = perplexity(loaded.model, loaded.tokenizer, texts)
                means[label] = sum(-t.nll / t.n_tokens for t in result.texts) / len(texts)
            drop = means["base"] - means["adapter"]
            print(f"\n{path.relative_to(ROOT)} ({len(rows)} rows): mean negative cross-entropy per token")
            print(
                f" base {means['base']:.4f}  adapter {means['adapter']:.4f}  drop {drop:+.4f} (pass: <= 0.05)"
            )
            continue
        prompts = [build_prompt(loaded.tokenizer, r["instruction"], r.get("input", "")) for r in rows]
        # Each row's own limit, as the plugin uses it: a longer limit would give the base more rope to ramble.
        limits = [int(r.get("evaluation_config", {}).get("max_new_tokens", 512)) for r in rows]
        table: dict[str, dict[str, tuple[float, int]]] = {}
        outputs: dict[str, list[str]] = {}
        row_scores: dict[str, list[float]] = {}
        for label, enabled in (("base", False), ("adapter", True)):
            with loaded.adapter_enabled(enabled):
                outputs[label] = generate(
                    loaded.model, loaded.tokenizer, prompts, max_new_tokens=limits, batch_size=args.batch_size
                )
            row_scores[label] = [
                exact_match.score(out, r["expected_output"], r.get("evaluation_config", {})).value
                for out, r in zip(outputs[label], rows, strict=True)
            ]
            table[label] = rates(rows, row_scores[label])
        print(f"\n{path.relative_to(ROOT)} ({len(rows)} rows): exact match %")
        # "same": the adapter's output equals the base's word for word, a finer forgetting signal than the
        # score when the base rarely gets a row right.
        print(f"  {'difficulty':<10} {'n':>4} {'base':>7} {'adapter':>8} {'delta':>7} {'same':>6}")
        table["same"] = rates(
            rows, [float(a == b) for a, b in zip(outputs["base"], outputs["adapter"], strict=True)]
        )
        keys = ["all", *sorted(k for k in table["base"] if k != "all")]
        for key in keys:
            (base, n), (adapted, _) = table["base"][key], table["adapter"][key]
            same = table["same"][key][0]
            print(f"  {key:<10} {n:>4} {base:>7.1f} {adapted:>8.1f} {adapted - base:>+7.1f} {same:>6.1f}")
        misses = [
            (r["id"], r["input"], r["expected_output"], out)
            for r, out, value in zip(rows, outputs["adapter"], row_scores["adapter"], strict=True)
            if value < 1.0
        ]
        for row_id, text, expected, got in misses[: args.show]:
            print(f"    miss {row_id}: {text!r} -> {got!r} (expected {expected!r})")
        base_s, adapter_s = row_scores["base"], row_scores["adapter"]
        diffs = [i for i in range(len(rows)) if base_s[i] != adapter_s[i]]
        for i in diffs[: args.show_diff]:
            r = rows[i]
            where = f"{r['id']} [{r.get('difficulty', '-')}] expected {r['expected_output']!r}"
            print(f"    diff {where}: {r['input']!r}")
            print(f"      base    {base_s[i]:.0f} {outputs['base'][i]!r}")
            print(f"      adapter {adapter_s[i]:.0f} {outputs['adapter'][i]!r}")
    print(f"\n{time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
