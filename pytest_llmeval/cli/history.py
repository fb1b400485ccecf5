"""`pytest-llmeval history [--diff A B]`: the runs a history keeps, or two of them compared (history.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_llmeval import history
from pytest_llmeval.cli.common import _check_alpha, _exit_codes, _history_runs, _Refused, _subcommand


def _add_history(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    show = _subcommand(
        commands,
        "history",
        help="list the runs in the history, or compare two (--diff A B)",
        description="List the runs a results.json's history keeps (.llmeval/history beside it), oldest "
        "first and numbered, or compare two of them on their shared rows (--diff A B).\nRuns are named "
        "by number (1 = oldest, -1 = newest), by file name, or by a unique prefix of it.",
        epilog=_exit_codes(
            "0  listed, or compared",
            "2  no history there, a run that --diff names is not in it, or --alpha out of range",
        ),
    )
    where = show.add_mutually_exclusive_group()
    where.add_argument(
        "--results",
        type=Path,
        default=Path("results.json"),
        help="the results.json whose history to read (default: ./results.json: ./.llmeval/history)",
    )
    where.add_argument("--dir", type=Path, default=None, help="the history folder itself")
    show.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare run B with run A on shared rows")
    show.add_argument("--alpha", type=float, default=0.05, help="significance level of --diff (default 0.05)")
    return show


def _history(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    folder: Path = args.dir if args.dir is not None else history.history_dir(args.results)
    _check_alpha(parser, args.alpha)
    if not folder.is_dir():
        raise _Refused(f"no history at {folder} (a run writes one beside its results.json)")
    # Listed apart and left where it is: a damaged entry is no run, and never stops the listing.
    all_runs = _history_runs(folder)
    if args.diff is None:
        for line in history.list_lines(all_runs):
            print(line)
        return 0
    try:
        a, b = (history.find_run(all_runs, key) for key in args.diff)
    except LookupError as exc:
        raise _Refused(f"{exc} ({folder})") from None
    for line in history.diff_lines(a, b, alpha=args.alpha):
        print(line)
    return 0
