"""`python -m pytest_llmeval history`: list the history of runs, or compare two of them.

    python -m pytest_llmeval history                  # every run, oldest first, numbered
    python -m pytest_llmeval history --diff 1 -1      # the first run against the newest
    python -m pytest_llmeval history --results out/results.json   # the history beside another results.json

Runs are named by number (1 = oldest, -1 = newest), by file name, or by a unique prefix of it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_llmeval import history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_llmeval", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("history", help="list the runs in the history, or compare two (--diff A B)")
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
    args = parser.parse_args(argv)
    folder: Path = args.dir if args.dir is not None else history.history_dir(args.results)
    if not 0 < args.alpha < 1:
        parser.error(f"--alpha must be within (0, 1), got {args.alpha}")
    if not folder.is_dir():
        print(f"llmeval: no history at {folder} (a run writes one beside its results.json)", file=sys.stderr)
        return 2
    all_runs = history.runs(folder)
    if args.diff is None:
        for line in history.list_lines(all_runs):
            print(line)
        return 0
    try:
        a, b = (history.find_run(all_runs, key) for key in args.diff)
    except LookupError as exc:
        print(f"llmeval: {exc} ({folder})", file=sys.stderr)
        return 2
    for line in history.diff_lines(a, b, alpha=args.alpha):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
