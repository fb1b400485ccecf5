"""`pytest-llmeval view [PATH ...]`: one static HTML page to browse a history's runs (viewer.py builds its
payload, reporting/viewer_page.py the page)."""

from __future__ import annotations

import argparse
import heapq
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_llmeval import history
from pytest_llmeval.cli.common import (
    _check_alpha,
    _exit_codes,
    _history_runs,
    _read_results,
    _refuse_clashes,
    _Refused,
    _subcommand,
    _write,
)
from pytest_llmeval.viewer import build_payload, timestamp_of

# The page `view` writes unless --out says where: in the current folder, as a run's report.html is beside it.
VIEW_NAME = "history.html"
# Runs without a timestamp go first: they cannot be placed, and a history's own order keeps them in place.
_NO_TIME = datetime.min.replace(tzinfo=timezone.utc)


def _add_view(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    view = _subcommand(
        commands,
        "view",
        help="write one static HTML page to browse every run of a history, row by row",
        description="Write one self-contained HTML page (no server, no network: open it from the disk) "
        "that shows every run of a history: each benchmark's scores run after run, each row's outputs and "
        "scores in any run, and run B against run A on their shared rows with the paired statistics "
        "`history --diff` prints.\nPATH is a history folder (.llmeval/history) or a results.json; "
        "several are merged by their runs' timestamps. Without PATH: the history beside ./results.json. "
        "Runs are named by number (1 = oldest, -1 = newest, counted over every PATH), by file name, or by "
        "a unique prefix of it.",
        epilog=_exit_codes(
            "0  the page written",
            "2  no run in any PATH, a PATH that cannot be read, a run that --pair names is not there, "
            "--alpha out of range, or the page cannot be written",
        ),
    )
    view.add_argument(
        "paths",
        type=Path,
        nargs="*",
        metavar="PATH",
        help="history folders and results.json files (default: the history beside ./results.json)",
    )
    view.add_argument(
        "--out",
        type=Path,
        default=Path(VIEW_NAME),
        metavar="FILE",
        help=f"the page to write (default: ./{VIEW_NAME})",
    )
    view.add_argument(
        "--pair",
        nargs=2,
        action="append",
        default=[],
        metavar=("A", "B"),
        help="also compare run B with run A on their shared rows (repeatable); the page compares each run "
        "with the previous complete run of the same model without being asked",
    )
    view.add_argument(
        "--alpha", type=float, default=0.05, help="significance level of the comparisons (default 0.05)"
    )
    return view


def _view(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _check_alpha(parser, args.alpha)
    paths: list[Path] = args.paths or [history.history_dir(Path("results.json"))]
    if not args.paths and not paths[0].is_dir():
        raise _Refused(f"no history at {paths[0]} (a run writes one beside its results.json): name a PATH")
    out: Path = args.out
    _refuse_clashes([("--out", out)], [("PATH", p) for p in paths if not p.is_dir()])
    all_runs = _runs(paths)
    if not all_runs:
        where = ", ".join(map(str, paths))
        raise _Refused(f"no run in {where} (a history is the folder .llmeval/history beside a results.json)")
    try:
        # Positions in the payload: run number n is runs[n - 1].
        pairs = [
            (history.find_run(all_runs, a).index - 1, history.find_run(all_runs, b).index - 1)
            for a, b in args.pair
        ]
    except LookupError as exc:
        raise _Refused(str(exc)) from None
    # The page module is the heavy half (its script and styles): imported when a page is written.
    from pytest_llmeval.reporting.viewer_page import render

    payload = build_payload(all_runs, alpha=args.alpha, pairs=pairs)
    _write(out, render(payload))
    print(f"llmeval: wrote the history of {len(all_runs)} run(s) to {out}", file=sys.stderr)
    return 0


def _runs(paths: list[Path]) -> list[history.Run]:
    """Every run of `paths`, merged by timestamp (each history keeps its own order), numbered from 1."""
    sources: list[list[tuple[Path, dict[str, Any]]]] = []
    for path in paths:
        if path.is_dir():
            sources.append([(run.path, run.document) for run in _history_runs(path)])
        elif path.exists():
            sources.append([(path, _read_results(path))])
        else:
            raise _Refused(f"cannot read {path}: no such file or folder")
    merged: list[history.Run] = []
    # results.json is also its history's newest entry: the same run given twice is shown once (the two
    # are equal documents, so they carry one timestamp: only runs of that timestamp are compared).
    by_time: dict[Any, list[dict[str, Any]]] = {}
    for path, document in heapq.merge(*sources, key=lambda run: timestamp_of(run[1]) or _NO_TIME):
        same_time = by_time.setdefault(document.get("timestamp"), [])
        if document not in same_time:
            same_time.append(document)
            merged.append(history.Run(len(merged) + 1, path, document))
    return merged
