"""`pytest-llmeval report [RESULTS_JSON]`: the HTML report and the spot check again, from a results.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_llmeval.cli.common import (
    _exit_codes,
    _not_results,
    _read_results,
    _refuse_clashes,
    _Refused,
    _subcommand,
    _write,
)
from pytest_llmeval.reporting import html, spot_check

# The HTML report `report` writes unless --html says where; a run writes one only where --llmeval-html says.
HTML_NAME = "report.html"


def _add_report(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    rep = _subcommand(
        commands,
        "report",
        help="write the HTML report and the spot check from a results.json, without running anything",
        description="Write the self-contained HTML report (the page --llmeval-html writes) and the spot "
        "check (the spot_check.md a run writes beside results.json) from an existing results.json: "
        "nothing is evaluated again, and the files are the ones the run itself wrote from the same "
        "results.",
        epilog=_exit_codes(
            "0  both files written",
            "2  RESULTS_JSON cannot be read or is not a results.json (nothing written), or a file cannot "
            "be written",
        ),
    )
    rep.add_argument(
        "results",
        type=Path,
        nargs="?",
        default=Path("results.json"),
        metavar="RESULTS_JSON",
        help="the results.json of a run (default: ./results.json)",
    )
    rep.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the HTML report to write (default: {HTML_NAME} beside RESULTS_JSON)",
    )
    rep.add_argument(
        "--spot-check",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the spot check to write (default: {spot_check.SPOT_CHECK_NAME} beside RESULTS_JSON, where the "
        "run wrote it)",
    )
    return rep


def _report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    results: Path = args.results
    document = _read_results(results)
    html_path: Path = args.html if args.html is not None else results.parent / HTML_NAME
    spot_path: Path = args.spot_check if args.spot_check is not None else spot_check.spot_check_path(results)
    _refuse_clashes([("--html", html_path), ("--spot-check", spot_path)], [("RESULTS_JSON", results)])
    try:
        # Both made before either is written: a document that cannot be rendered leaves no half of a pair.
        texts = [
            (html_path, html.html_report(document)),
            (spot_path, spot_check.spot_check_markdown(document)),
        ]
    except (LookupError, TypeError, AttributeError, ValueError) as exc:
        raise _Refused(_not_results(results, exc)) from None
    for path, text in texts:
        _write(path, text)
    print(f"llmeval: wrote the HTML report to {html_path} and the spot check to {spot_path}", file=sys.stderr)
    return 0
