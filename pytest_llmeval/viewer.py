"""The history viewer's payload: every run of a history as one JSON object a static page renders.

`pytest-llmeval view` (cli/view.py) writes one self-contained HTML file (reporting/viewer_page.py) around
this payload; the contract between the two is version 1 of issue 41's payload:

- runs, oldest first; a run's index is its position in `runs`, and every other block refers to runs by it;
- `strings`: every output, input and expected text once, referred to by index. A history repeats most of
  its texts from run to run (the same inputs, mostly the same outputs), so interning is what keeps a
  history of hundreds of runs a file a browser opens;
- `rows` per benchmark (every id any run has, first seen first, the newest run's text) and `cells` per
  benchmark, run and column as flat arrays aligned with the ids, two slots a row (output, score): one
  array per column rather than an object per row, as the payload holds runs x rows x columns cells;
  `passed`, aligned the same way with one slot a row, says whether each score reached its row's
  threshold (1, 0; null unscored), as the run judged it;
- `pairs`: B against A on the rows both scored, computed by the code `history --diff` prints from
  (history.compare_entries), for the newest STEPS steps of each identity's series of complete runs, the
  default pair and the pairs asked for. The page computes no statistic itself.

Pure: no pytest, no torch (scipy only for a t quantile, when a column's scores are not all 0 or 1).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from pytest_llmeval import history
from pytest_llmeval.records import ADAPTER, BASE, side

VERSION = 1
# Every interval of a column's mean is at this level (the page says 95%): the pairs' level is stats'.
CONFIDENCE = 0.95
_Z = statistics.NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)
# Scores 0 and 1 (most rows' scores) as the integers JSON writes in one character, not as "0.0": a fifth of
# a long history's payload. The page reads a number either way.
_SHORT: dict[float, int] = {0.0: 0, 1.0: 1}
# The series' steps compared without being asked, newest first: each comparison is the gates' bootstrap
# (about 50 ms on 2 CPU cores), and a history of 500 runs took 23 s for all its 449 steps. Older steps get
# the page's hint to ask for them (`--pair A B`).
STEPS = 100
# Characters of the prompt settings' sha256 the payload keeps: enough to tell two settings apart on a page.
_FINGERPRINT = 12


def build_payload(
    runs: Sequence[history.Run], *, alpha: float = 0.05, pairs: Sequence[tuple[int, int]] = ()
) -> dict[str, Any]:
    """The viewer's payload (version 1) of `runs`, oldest first; `pairs` (indexes into runs, A then B) are
    compared besides each series' steps and the default pair."""
    for a, b in pairs:
        if not (0 <= a < len(runs) and 0 <= b < len(runs)):
            raise IndexError(f"pair ({a}, {b}): the payload holds {len(runs)} run(s)")
    strings = _Strings()
    rows = _rows(runs, strings)
    positions = {name: {row_id: i for i, row_id in enumerate(block["ids"])} for name, block in rows.items()}
    run_entries: list[dict[str, Any]] = []
    cells: dict[str, dict[str, dict[str, list[Any]]]] = {name: {} for name in rows}
    passed: dict[str, dict[str, dict[str, list[int | None]]]] = {name: {} for name in rows}
    errors: dict[str, dict[str, dict[str, str]]] = {}
    for index, run in enumerate(runs):
        entry = _run_entry(run)
        columns: list[str] = entry["columns"]
        for bench in run.document.get("benchmarks", []):
            name = str(bench.get("benchmark_file"))
            arrays, verdicts, scores, errored = _cells(
                bench.get("rows", []), columns, positions[name], strings
            )
            cells[name][str(index)] = arrays
            passed[name][str(index)] = verdicts
            if errored:
                errors.setdefault(name, {})[str(index)] = errored
            entry["benchmarks"][name] = _benchmark_entry(run.document, bench, scores)
        run_entries.append(entry)
    default = _default_pair(runs)
    return {
        "version": VERSION,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "alpha": alpha,
        "strings": strings.texts,
        "runs": run_entries,
        "rows": rows,
        "cells": cells,
        "passed": passed,
        "errors": errors,
        "pairs": [
            found
            for a, b in _pairs_to_compare(runs, default, pairs)
            for found in _pair_entries(runs, a, b, alpha)
        ],
        "default_pair": None if default is None else list(default),
    }


class _Strings:
    """Interned texts: each distinct text once, by the index it was first given."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: Any) -> int | None:
        """The index of `text`; None for anything that is not a text (no output, no expected output)."""
        if not isinstance(text, str):
            return None
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.texts)
            self.texts.append(text)
        return found


def _rows(runs: Sequence[history.Run], strings: _Strings) -> dict[str, dict[str, Any]]:
    """Per benchmark: every row id any run has, first seen first, with the newest run's text of the row."""
    newest: dict[str, dict[str, Mapping[str, Any]]] = {}
    for run in runs:
        for bench in run.document.get("benchmarks", []):
            found = newest.setdefault(str(bench.get("benchmark_file")), {})
            for row in bench.get("rows", []):
                found[str(row["id"])] = row  # a key keeps its first place, and takes the newest value
    return {
        name: {
            "ids": list(found),
            "input": [strings(row.get("input")) for row in found.values()],
            "expected": [strings(row.get("expected_output")) for row in found.values()],
            "difficulty": [row.get("difficulty") for row in found.values()],
            "tags": [list(row.get("tags") or []) for row in found.values()],
        }
        for name, found in newest.items()
    }


def _run_entry(run: history.Run) -> dict[str, Any]:
    """A run's own fields (its benchmarks are added by build_payload)."""
    document = run.document
    adapter, base = history.identity_of(document)
    columns = _columns(document)
    evaluated = next(
        (str(r["evaluated"]) for b in document.get("benchmarks", []) for r in b.get("rows", [])[:1]),
        ADAPTER if adapter is not None else BASE,
    )
    complete = document.get("complete") is True
    return {
        # A history entry by its file name (what `history` lists and --pair takes), another results.json
        # by the path it was given as.
        "name": run.path.name if history.is_entry(run.path) else str(run.path),
        "time": _time(document),
        "label": history.label_of(document),
        "identity": f"adapter:{adapter}" if adapter is not None else f"base:{base}",
        "complete": complete,
        "reason": None if complete else str(document.get("incomplete_reason") or "not said"),
        "columns": columns,
        "evaluated": evaluated,
        "benchmarks": {},
    }


def _columns(document: Mapping[str, Any]) -> list[str]:
    """The model columns of a run's rows, base first, then as first met."""
    seen: dict[str, None] = {}
    for bench in document.get("benchmarks", []):
        for row in bench.get("rows", []):
            seen.update(dict.fromkeys(row.get("models") or ()))
    return sorted(seen, key=lambda c: c != BASE)  # stable: the others keep their order


def _time(document: Mapping[str, Any]) -> str | None:
    """The document's timestamp in UTC, ISO 8601; None when it has none (or none that reads as a time)."""
    when = timestamp_of(document)
    return None if when is None else when.isoformat()


def timestamp_of(document: Mapping[str, Any]) -> datetime | None:
    """When a run was made, in UTC (a time without its zone is taken as UTC); None when it does not say."""
    stamp = document.get("timestamp")
    try:
        when = datetime.fromisoformat(str(stamp)) if stamp is not None else None
    except ValueError:
        return None
    if when is None:
        return None
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


def _cells(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], positions: Mapping[str, int], strings: _Strings
) -> tuple[dict[str, list[Any]], dict[str, list[int | None]], dict[str, list[float]], dict[str, str]]:
    """One run's cells of one benchmark (per column: output, score for each row of the benchmark, in the
    order of its ids), whether each score reached its row's threshold (1, 0, None unscored), each column's
    score values, and the rows that errored (id -> why)."""
    size = 2 * len(positions)
    arrays: dict[str, list[Any]] = {column: [None] * size for column in columns}
    verdicts: dict[str, list[int | None]] = {column: [None] * len(positions) for column in columns}
    scores: dict[str, list[float]] = {column: [] for column in columns}
    errored: dict[str, str] = {}
    for row in rows:
        at = 2 * positions[str(row["id"])]
        for column in columns:
            found = side(row, column)
            if found is None:
                continue
            # records.score_value, on the side already found: this loop runs runs x rows x columns times.
            scored = found.get("score")
            value = None if scored is None else float(scored["value"])
            cell = arrays[column]
            cell[at] = strings(found.get("output"))
            cell[at + 1] = value if value is None else _SHORT.get(value, value)
            if scored is not None and value is not None:
                scores[column].append(value)
                verdicts[column][at // 2] = int(_reached(scored))
        if row.get("error"):
            errored[str(row["id"])] = str(row["error"])
    return arrays, verdicts, scores, errored


def _reached(scored: Mapping[str, Any]) -> bool:
    """Whether a score (scorers.base.Score.to_json) reached its row's threshold: its own `passed`, else value
    against threshold, else full marks (a document that records neither)."""
    said = scored.get("passed")
    if isinstance(said, bool):
        return said
    threshold = scored.get("threshold")
    return float(scored["value"]) >= (1.0 if threshold is None else float(threshold))


def _benchmark_entry(
    document: Mapping[str, Any], bench: Mapping[str, Any], scores: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """A benchmark of one run: its hash, prompt fingerprint, size, each column's mean, no_regression."""
    name = str(bench.get("benchmark_file"))
    gate = (bench.get("gates") or {}).get("no_regression")
    rows = bench.get("rows") or []
    return {
        # Whose score passes or fails the rows: in a run of several adapters, each benchmark's own adapter.
        "evaluated": str(rows[0]["evaluated"]) if rows else None,
        "hash": bench.get("benchmark_hash"),
        "prompt": prompt_fingerprint(document, name),
        "n": bench.get("n_examples"),
        # A column that scored no row of the benchmark has no mean: it is left out.
        "scores": {column: mean_interval(values) for column, values in scores.items() if values},
        "no_regression": None
        if not isinstance(gate, Mapping)
        else {"status": gate.get("status"), "message": gate.get("message")},
    }


def prompt_fingerprint(document: Mapping[str, Any], benchmark: str) -> str | None:
    """A short fingerprint of a benchmark's prompt settings in a run: the benchmark's block of
    inference_config.prompt, the command line's settings and the mode, as canonical JSON, sha256, the first
    12 hex digits. Two runs with the same fingerprint prompted the benchmark alike; None when the run does
    not record its prompt (saved predictions generate nothing)."""
    prompt = (document.get("inference_config") or {}).get("prompt")
    if not isinstance(prompt, Mapping):
        return None
    settings = {
        "benchmark": (prompt.get("benchmarks") or {}).get(benchmark),
        "command_line": prompt.get("command_line"),
        "mode": prompt.get("mode"),
    }
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_FINGERPRINT]


def mean_interval(values: Sequence[float]) -> dict[str, Any]:
    """{mean, ci, n} of a column's scores: the 95% Wilson interval when every score is 0 or 1, else
    mean +- t * sd / sqrt(n); ci None under 2 scores (no spread to speak of)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return {"mean": mean, "ci": None, "n": n}
    if all(v in (0.0, 1.0) for v in values):
        # Wilson's score interval: never outside [0, 1], and not empty at 0 or n of n right (Wald's is).
        z2 = _Z * _Z
        centre = (mean + z2 / (2 * n)) / (1 + z2 / n)
        half = _Z * math.sqrt(mean * (1 - mean) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        low, high = max(0.0, centre - half), min(1.0, centre + half)
    else:
        half = _t_quantile(n - 1) * statistics.stdev(values) / math.sqrt(n)
        low, high = mean - half, mean + half
    return {"mean": mean, "ci": [low, high], "n": n}


@functools.cache
def _t_quantile(df: int) -> float:
    """Student's t quantile for the two-sided 95% interval: one per row count, which a history repeats."""
    from scipy import stats

    return float(stats.t.ppf(1 - (1 - CONFIDENCE) / 2, df))


def _default_pair(runs: Sequence[history.Run]) -> tuple[int, int] | None:
    """The last two complete runs of the newest run's identity, oldest first; None without two."""
    if not runs:
        return None
    identity = history.identity_of(runs[-1].document)
    series = [
        i for i, run in enumerate(runs) if _complete(run) and history.identity_of(run.document) == identity
    ]
    return (series[-2], series[-1]) if len(series) >= 2 else None


def _complete(run: history.Run) -> bool:
    return run.document.get("complete") is True


def _pairs_to_compare(
    runs: Sequence[history.Run], default: tuple[int, int] | None, asked: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Every complete run against the previous complete run of its identity (the newest STEPS of them),
    the default pair, and the pairs asked for, each once in that order. A partial run is a side only where
    it is asked for."""
    steps: list[tuple[int, int]] = []
    last: dict[history.Identity, int] = {}
    for index, run in enumerate(runs):
        if not _complete(run):
            continue
        identity = history.identity_of(run.document)
        if identity in last:
            steps.append((last[identity], index))
        last[identity] = index
    found: dict[tuple[int, int], None] = dict.fromkeys(steps[-STEPS:])
    if default is not None:
        found[default] = None
    found.update(dict.fromkeys((int(a), int(b)) for a, b in asked))
    return list(found)


def _pair_entries(runs: Sequence[history.Run], a: int, b: int, alpha: float) -> list[dict[str, Any]]:
    """B against A on each benchmark both hold, as `history --diff A B` prints it."""
    first, second = runs[a].document, runs[b].document
    names = {str(x.get("benchmark_file")) for x in first.get("benchmarks", [])}
    out: list[dict[str, Any]] = []
    for entry in second.get("benchmarks", []):
        name = str(entry.get("benchmark_file"))
        if name not in names:
            continue  # as history --diff: a benchmark only one side ran is not compared
        cmp, why_not = history.compare_entries(first, entry, alpha=alpha)
        if cmp is None:
            out.append({"a": a, "b": b, "benchmark": name, "reason": why_not})
            continue
        out.append(
            {
                "a": a,
                "b": b,
                "benchmark": name,
                "n": cmp.n,
                "mean_a": cmp.mean_base,  # previous_comparison's "base" is the earlier run, A
                "mean_b": cmp.mean_adapter,
                "difference": cmp.difference,
                "ci": [cmp.ci_low, cmp.ci_high],
                "p_value": cmp.p_value,
                "test": cmp.test,
                "significant": cmp.significant,
                "text": history.comparison_text(cmp),
            }
        )
    return out
