"""`pytest-llmeval` (also `python -m pytest_llmeval`): the command line beside the plugin.

    pytest-llmeval check results.json        # CI's gate: exit 1 when a gate failed or did not run, or the
                                             # run is incomplete
    pytest-llmeval report results.json       # the HTML report and the spot check again, from results.json
    pytest-llmeval history                   # every run, oldest first, numbered
    pytest-llmeval history --diff 1 -1       # the first run against the newest
    pytest-llmeval history --results out/results.json   # the history beside another results.json
    pytest-llmeval view                      # history.html: every run of the history, to browse offline
    pytest-llmeval view .llmeval/history other/results.json --pair 3 -1 --out=runs.html

Runs are named by number (1 = oldest, -1 = newest), by file name, or by a unique prefix of it.

    pytest-llmeval convert humaneval HumanEval.jsonl.gz -o benchmarks/humaneval.jsonl
    pytest-llmeval convert mbpp sanitized-mbpp.json -o benchmarks/mbpp.jsonl --difficulty easy
    pytest-llmeval convert humaneval HumanEval.jsonl.gz --samples 10 --k 1,10 --temperature 0.8

The input is the dataset's own file, gzip-compressed or not: JSONL, or a JSON array (MBPP's sanitized
release). The rows go to -o (written whole, once every record converted) or to standard output.

    pytest-llmeval compare peft.json sft.json --peft-training-log lora/ --sft-training-log sft/
    pytest-llmeval compare results.json --sft-column sft --markdown report.md

compare judges the Japanese adaptation document's success criteria (reporting/peft_sft.py).

Every subcommand exits 0 when it did its job, 1 when the verdict it was asked for failed (check: a gate or
an incomplete run; compare: a primary criterion), 2 on input or usage it cannot act on, with one line on
standard error that starts with "llmeval:" and names the file or option (argparse's own usage errors
excepted, which print the usage first). `python -m pytest_llmeval.ci check` is kept as an alias of check.

One module a subcommand (check.py, report.py, history.py, view.py, compare.py, convert.py: its parser and
its handler), common.py what they share (the help layout, the refusal that exits 2, reading a results.json
and writing a file); this module builds the parser and runs the handler. The work itself is done by the
library modules they call (ci, history, viewer, convert, reporting/): the command line only reads arguments
and files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from pytest_llmeval.cli.check import _add_check, _check
from pytest_llmeval.cli.common import _exit_codes, _paragraphs, _Refused
from pytest_llmeval.cli.compare import _add_compare, _compare
from pytest_llmeval.cli.convert import _add_convert, _convert
from pytest_llmeval.cli.history import _add_history, _history
from pytest_llmeval.cli.report import _add_report, _report
from pytest_llmeval.cli.view import _add_view, _view

PROG = "pytest-llmeval"

EXIT_CODES = _exit_codes(
    "0  done (check: no gate failed, and the run is complete; compare: every primary criterion met)",
    "1  the verdict failed (check: a gate failed or did not run, or the run is incomplete; compare: a "
    "primary criterion)",
    "2  bad input or usage: a file that cannot be read or written, an option out of range; one line on "
    'standard error, starting "llmeval:" (or argparse\'s usage and "error:"), names it',
)


Handler = Callable[[argparse.ArgumentParser, argparse.Namespace], int]


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """The `pytest-llmeval` command: run the subcommand argv (default sys.argv[1:]) names; its exit status."""
    parser = argparse.ArgumentParser(
        prog=prog or _prog(),
        description=_paragraphs(
            "The command line beside the pytest plugin: the gate check for CI, the reports again from a "
            "results.json, the history of runs and a page to browse it, a PEFT adaptation against full "
            "fine-tuning, benchmark rows from HumanEval, MBPP, lm-eval's tasks and your own datasets.",
        ),
        epilog=f"{EXIT_CODES}\n\n"
        + _paragraphs(
            "Each subcommand's --help gives its options and its own exit statuses. `python -m "
            "pytest_llmeval` is the same command; `python -m pytest_llmeval.ci check` is an alias of check.",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers: dict[str, tuple[argparse.ArgumentParser, Handler]] = {
        "check": (_add_check(commands), _check),
        "report": (_add_report(commands), _report),
        "history": (_add_history(commands), _history),
        "view": (_add_view(commands), _view),
        "compare": (_add_compare(commands), _compare),
        "convert": (_add_convert(commands), _convert),
    }
    args = parser.parse_args(argv)
    sub, handler = handlers[args.command]
    try:
        return handler(sub, args)
    except _Refused as exc:
        print(f"llmeval: {exc}", file=sys.stderr)
        return 2


def _prog() -> str:
    # `python -m pytest_llmeval` runs pytest_llmeval/__main__.py, which calls main: name the command as it was
    # typed. The console script, and main() called from Python (whose argv[0] is the caller's), are
    # pytest-llmeval.
    return "python -m pytest_llmeval" if Path(sys.argv[0]).name == "__main__.py" else PROG
