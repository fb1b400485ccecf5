"""The history viewer at scale (issue 41): `pytest-llmeval view` on a history of RUNS runs of ROWS rows.

    python bench/viewer.py [--runs 500] [--rows 1000]

Writes, in a temp folder, a history of RUNS results.json entries of one adapter on one exact-match benchmark
of ROWS rows (two columns, 5% of the adapter's rows flipping from one run to the next, every tenth run
partial), then times, in this process:

- reference: reading the entries back (`history.runs`: every entry through the validating reader), which
  anything that shows a history pays;
- the payload (`viewer.build_payload`: interned texts, cells, intervals, the paired comparisons of the
  newest viewer.STEPS series steps) and the page (`reporting.viewer_page.render`).

Printed: each time, the payload's time against the reading's, the page's size. The page's first render in
Chromium is measured by tests/test_viewer_page.py (test_a_history_of_500_runs_by_1000_rows_opens, `-s`).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_llmeval import history
from pytest_llmeval.reporting.viewer_page import render
from pytest_llmeval.results import SCHEMA_VERSION
from pytest_llmeval.results_file import write_atomic
from pytest_llmeval.viewer import STEPS, build_payload


def documents(runs: int, rows: int) -> list[dict[str, Any]]:
    """The history's documents, oldest first, in the shape the readers check."""
    rng = random.Random(0)
    right = [rng.random() < 0.6 for _ in range(rows)]
    out = []
    for k in range(runs):
        table = []
        for i in range(rows):
            if rng.random() < 0.05:
                right[i] = not right[i]
            answer = f"2024-01-{i % 28 + 1:02d}"
            said = answer if right[i] else f"01/{i % 28 + 1:02d}/2024 ({rng.randrange(3)})"
            table.append(
                {
                    "nodeid": f"benchmarks/dates.jsonl::row-{i:04d}",
                    "id": f"row-{i:04d}",
                    "evaluation_type": "exact_match",
                    "evaluation_config": {},
                    "evaluated": "adapter",
                    "instruction": "Convert the date to ISO 8601 format (YYYY-MM-DD).",
                    "input": f"January {i % 28 + 1}, 2024",
                    "expected_output": answer,
                    "difficulty": ("easy", "medium", "hard")[i % 3],
                    "tags": ["edge"] if i % 7 == 0 else [],
                    "models": {
                        "base": {
                            "output": f"Jan {i % 28 + 1} 2024",
                            "score": {"value": 0.0, "threshold": 1.0},
                        },
                        "adapter": {"output": said, "score": {"value": float(right[i]), "threshold": 1.0}},
                    },
                    "passed": right[i],
                    "error": None,
                    "skipped": None,
                }
            )
        out.append(
            {
                "schema_version": SCHEMA_VERSION,
                "adapter_name": "date-iso",
                "adapter_version": f"0.{k}",
                "base_model": "embedded:SmolLM2-135M-Instruct",
                "complete": k % 10 != 3,
                "incomplete_reason": None if k % 10 != 3 else "2 of 1000 rows selected (-k)",
                "timestamp": f"2026-{1 + k // 672 % 12:02d}-{1 + k // 24 % 28:02d}T{k % 24:02d}:00:00+00:00",
                "models": [{"column": "base", "kind": "base"}, {"column": "adapter", "kind": "adapter"}],
                "benchmarks": [
                    {
                        "benchmark_file": "benchmarks/dates.jsonl",
                        "benchmark_hash": "sha256:" + "0" * 64,
                        "n_examples": rows,
                        "gates": {},
                        "rows": table,
                    }
                ],
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmeval-viewer-") as tmp:
        folder = Path(tmp) / ".llmeval" / "history"
        folder.mkdir(parents=True)
        for k, document in enumerate(documents(args.runs, args.rows)):
            write_atomic(
                folder / f"2026{k // 10000:04d}T{k % 10000:06d}.000000Z_date-iso_0.{k}.json", document
            )
        size = sum(p.stat().st_size for p in folder.iterdir())
        started = time.perf_counter()
        runs = history.runs(folder)
        read = time.perf_counter() - started
        started = time.perf_counter()
        payload = build_payload(runs)
        built = time.perf_counter() - started
        started = time.perf_counter()
        page = render(payload)
        rendered = time.perf_counter() - started
    print(f"{args.runs} runs x {args.rows} rows: {len(runs)} entries, {size / 1e6:.0f} MB of results.json")
    print(f"reading the entries back (reference): {read:.2f} s")
    print(
        f"payload: {built:.2f} s ({built / read:.2f}x the reading; {len(payload['pairs'])} paired"
        f" comparisons, at most {STEPS} series steps unasked), page: {rendered:.2f} s,"
        f" {len(page.encode()) / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
