"""What every subcommand shares: the help layout, the refusal main turns into exit status 2, and reading a
results.json or writing a file under that rule."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from pytest_llmeval import history
from pytest_llmeval.inputs import path_clashes
from pytest_llmeval.results_file import write_text_atomic
from pytest_llmeval.results_reader import ResultsFileError, read_results

# Help text is wrapped here, not by argparse: its formatter either wraps everything (and runs the exit-status
# table together) or nothing (RawDescriptionHelpFormatter).
_WIDTH = 100


def _exit_codes(*lines: str) -> str:
    """An epilog: `exit status:` and one indented entry per status, each wrapped under its own text."""
    wrapped = (textwrap.fill(line, _WIDTH, initial_indent="  ", subsequent_indent="     ") for line in lines)
    return "exit status:\n" + "\n".join(wrapped)


def _paragraphs(*texts: str) -> str:
    return "\n\n".join(textwrap.fill(text, _WIDTH) for text in texts)


class _Refused(Exception):
    """Input a subcommand cannot act on: main prints `llmeval: <message>` and exits 2."""


def _subcommand(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    description: str,
    epilog: str,
) -> argparse.ArgumentParser:
    return commands.add_parser(
        name,
        help=help,
        description=_paragraphs(*description.split("\n")),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _read_results(path: Path) -> dict[str, Any]:
    """The results.json document at `path`; _Refused naming the file when it cannot be read or is not one."""
    try:
        return read_results(path)
    except ResultsFileError as exc:
        raise _Refused(str(exc)) from None


def _not_results(path: Path, exc: Exception) -> str:
    # A traceback would exit 1, which CI reads as a failed gate: a damaged document is input, status 2.
    what = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else f"{type(exc).__name__}: {exc}"
    return f"cannot read {path}: not a results.json this version can read ({what})"


def _refuse_clashes(outputs: list[tuple[str, Path]], inputs: list[tuple[str, Path]]) -> None:
    """_Refused, before anything is written, when an output would replace an input or another output."""
    clashes = path_clashes(outputs, [(what, path) for what, path in inputs if path.exists()])
    if clashes:
        raise _Refused(clashes[0])


def _write(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (readers never see half a file); _Refused naming it when it fails."""
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise _Refused(f"cannot write {path}: {exc.strerror or exc}") from None


def _check_alpha(parser: argparse.ArgumentParser, alpha: float) -> None:
    """argparse's usage error (exit 2) for a significance level outside (0, 1)."""
    if not 0 < alpha < 1:
        parser.error(f"--alpha must be within (0, 1), got {alpha}")


def _history_runs(folder: Path) -> list[history.Run]:
    """A history's readable runs; each damaged entry is passed over by name on standard error, never a
    reason to stop (`history` and `view` alike)."""
    damaged: dict[Path, str] = {}
    runs = history.runs(folder, damaged)
    for problem in damaged.values():
        print(f"llmeval: passed over {problem}", file=sys.stderr)
    return runs
