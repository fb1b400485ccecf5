"""results.json: pure aggregation of per-row records, an atomic write, and the terminal summary lines.

No pytest, no torch: records are plain JSON-able dicts made by runner.EvalRun.score_row.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_llmeval.benchmark import DIFFICULTIES, file_hash

SCHEMA_VERSION = 1


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _score_of(record: Mapping[str, Any], who: str) -> float | None:
    side = record.get(who)
    if not side or not side.get("score"):
        return None
    value = side["score"]["value"]
    return float(value)


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Scores of one benchmark: means over scored rows (rows whose scorer failed are counted apart)."""
    adapter_scores = [s for r in records if (s := _score_of(r, "adapter")) is not None]
    base_scores = [s for r in records if (s := _score_of(r, "base")) is not None]
    adapter = _mean(adapter_scores)
    base = _mean(base_scores)
    per_difficulty: dict[str, dict[str, Any]] = {}
    for difficulty in DIFFICULTIES:
        rows = [r for r in records if r["difficulty"] == difficulty]
        a = [s for r in rows if (s := _score_of(r, "adapter")) is not None]
        b = [s for r in rows if (s := _score_of(r, "base")) is not None]
        per_difficulty[difficulty] = {"adapter": _mean(a), "base": _mean(b), "n": len(rows)}
    absolute = None if adapter is None or base is None else adapter - base
    relative = None if absolute is None or not base else absolute / base
    return {
        "adapter_score": adapter,
        "base_model_score": base,
        "improvement_absolute": absolute,
        "improvement_relative": relative,
        "per_difficulty": per_difficulty,
        "n_passed": sum(1 for r in records if r["passed"]),
        "n_errors": sum(1 for r in records if r["error"]),
    }


def build_results(
    records: Iterable[Mapping[str, Any]],
    *,
    meta: Mapping[str, Any],
    rootdir: Path,
    complete: bool,
    incomplete_reason: str | None = None,
    timestamp: datetime | None = None,
) -> dict[str, Any]:
    """The results.json document: run metadata, then one entry per benchmark file with its rows."""
    by_benchmark: dict[str, list[Mapping[str, Any]]] = {}
    for record in sorted(records, key=lambda r: r["nodeid"]):
        by_benchmark.setdefault(record["benchmark"], []).append(record)
    benchmarks = []
    for name in sorted(by_benchmark):
        rows = by_benchmark[name]
        path = rootdir / name
        types = sorted({r["evaluation_type"] for r in rows})
        benchmarks.append(
            {
                "benchmark_file": name,
                "benchmark_hash": file_hash(path.read_bytes()) if path.is_file() else None,
                "n_examples": len(rows),
                "evaluation_type": types[0] if len(types) == 1 else "mixed",
                "evaluation_types": types,
                "results": summarize(rows),
                "rows": [_row(r) for r in rows],
            }
        )
    has_adapter = meta.get("adapter") is not None
    when = timestamp or datetime.now(timezone.utc)
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": "adapter_vs_base" if has_adapter else "base_only",
        "adapter_name": meta.get("adapter_name"),
        "adapter_version": meta.get("adapter_version"),
        "adapter_path": meta.get("adapter"),
        "base_model": meta.get("base_model"),
        "base_model_note": meta.get("base_model_note"),
        "quantization": meta.get("quantization"),
        "timestamp": when.isoformat(timespec="seconds"),
        "hardware": meta.get("hardware"),
        "inference_config": meta.get("inference_config"),
        "complete": complete,
        "incomplete_reason": None if complete else incomplete_reason,
        "benchmarks": benchmarks,
    }


def _row(record: Mapping[str, Any]) -> dict[str, Any]:
    """A row as results.json shows it (the benchmark name is the parent's)."""
    return {k: v for k, v in record.items() if k not in ("benchmark",)}


def write_atomic(path: Path, document: Mapping[str, Any]) -> None:
    """Write JSON to a temp file beside `path`, then os.replace: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _pct(value: float | None) -> str:
    return "   -  " if value is None else f"{100 * value:5.1f}%"


def summary_lines(document: Mapping[str, Any]) -> list[str]:
    """A compact table for the terminal: per benchmark, base and adapter score and the difference."""
    adapter = document["mode"] == "adapter_vs_base"
    lines = []
    header = f"{'benchmark':<40} {'rows':>5} {'base':>7}"
    if adapter:
        header += f" {'adapter':>8} {'diff':>8}"
    lines.append(header)
    for bench in document["benchmarks"]:
        res = bench["results"]
        line = f"{bench['benchmark_file']:<40} {bench['n_examples']:>5} {_pct(res['base_model_score']):>7}"
        if adapter:
            diff = res["improvement_absolute"]
            diff_s = "   -" if diff is None else f"{100 * diff:+6.1f}pt"
            line += f" {_pct(res['adapter_score']):>8} {diff_s:>8}"
        if res["n_errors"]:
            line += f"  ({res['n_errors']} rows errored)"
        lines.append(line)
    if not document["complete"]:
        lines.append(f"INCOMPLETE: {document['incomplete_reason']}")
    return lines
