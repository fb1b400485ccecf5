"""`pytest-llmeval` (also `python -m pytest_llmeval`): the command line beside the plugin.

    pytest-llmeval check results.json        # CI's gate: exit 1 when a gate failed or the run is incomplete
    pytest-llmeval report results.json       # the HTML report and the spot check again, from results.json
    pytest-llmeval history                   # every run, oldest first, numbered
    pytest-llmeval history --diff 1 -1       # the first run against the newest
    pytest-llmeval history --results out/results.json   # the history beside another results.json

Runs are named by number (1 = oldest, -1 = newest), by file name, or by a unique prefix of it.

    pytest-llmeval convert humaneval HumanEval.jsonl.gz -o benchmarks/humaneval.jsonl
    pytest-llmeval convert mbpp sanitized-mbpp.json -o benchmarks/mbpp.jsonl --difficulty easy
    pytest-llmeval convert humaneval HumanEval.jsonl.gz --samples 10 --k 1,10 --temperature 0.8

The input is the dataset's own file, gzip-compressed or not: JSONL, or a JSON array (MBPP's sanitized
release). The rows go to -o (written whole, once every record converted) or to standard output.

    pytest-llmeval compare peft.json sft.json --peft-training-log lora/ --sft-training-log sft/
    pytest-llmeval compare results.json --sft-column sft --markdown report.md

compare judges the Japanese adaptation document's success criteria (peft_sft.py).

Every subcommand exits 0 when it did its job, 1 when the verdict it was asked for failed (check: a gate or
an incomplete run; compare: a primary criterion), 2 on input or usage it cannot act on, with one line on
standard error that starts with "llmeval:" and names the file or option (argparse's own usage errors
excepted, which print the usage first). `python -m pytest_llmeval.ci check` is kept as an alias of check.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_llmeval import ci, convert, history, peft_sft, report
from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.inputs import path_clashes
from pytest_llmeval.results import ResultsFileError, read_results, write_text_atomic

PROG = "pytest-llmeval"
# The HTML report `report` writes unless --html says where; a run writes one only where --llmeval-html says.
HTML_NAME = "report.html"
# Help text is wrapped here, not by argparse: its formatter either wraps everything (and runs the exit-status
# table together) or nothing (RawDescriptionHelpFormatter).
_WIDTH = 100


def _exit_codes(*lines: str) -> str:
    """An epilog: `exit status:` and one indented entry per status, each wrapped under its own text."""
    wrapped = (textwrap.fill(line, _WIDTH, initial_indent="  ", subsequent_indent="     ") for line in lines)
    return "exit status:\n" + "\n".join(wrapped)


def _paragraphs(*texts: str) -> str:
    return "\n\n".join(textwrap.fill(text, _WIDTH) for text in texts)


EXIT_CODES = _exit_codes(
    "0  done (check: no gate failed, and the run is complete; compare: every primary criterion met)",
    "1  the verdict failed (check: a gate failed, or the run is incomplete; compare: a primary criterion)",
    "2  bad input or usage: a file that cannot be read or written, an option out of range; one line on "
    'standard error, starting "llmeval:" (or argparse\'s usage and "error:"), names it',
)


class _Refused(Exception):
    """Input a subcommand cannot act on: main prints `llmeval: <message>` and exits 2."""


Handler = Callable[[argparse.ArgumentParser, argparse.Namespace], int]


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """The `pytest-llmeval` command: run the subcommand argv (default sys.argv[1:]) names; its exit status."""
    parser = argparse.ArgumentParser(
        prog=prog or _prog(),
        description=_paragraphs(
            "The command line beside the pytest plugin: the gate check for CI, the reports again from a "
            "results.json, the history of runs, a PEFT adaptation against full fine-tuning, benchmark rows "
            "from HumanEval and MBPP.",
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
    # `python -m pytest_llmeval` runs this file as __main__.py: name the command as it was typed. The console
    # script, and main() called from Python (whose argv[0] is the caller's), are pytest-llmeval.
    return "python -m pytest_llmeval" if Path(sys.argv[0]).name == "__main__.py" else PROG


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


# --- check ------------------------------------------------------------------------------------------------


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    check = _subcommand(
        commands,
        "check",
        help="CI's gate: exit 1 when a gate failed or the run is incomplete",
        description="Print every failed gate of a results.json (and the reason when the run is incomplete), "
        "and exit 1 when there is one.\npytest's own exit status also counts rows the model answered "
        "wrong, which are results, not failures: CI gates on this instead.\n"
        "`python -m pytest_llmeval.ci check RESULTS_JSON` is the same command.",
        epilog=_exit_codes(
            "0  every gate passed, warned or was skipped, and the run is complete",
            "1  a gate failed, or the run is incomplete (interrupted, stopped early)",
            "2  RESULTS_JSON cannot be read, or is not a results.json",
        ),
    )
    check.add_argument("results", type=Path, metavar="RESULTS_JSON", help="the results.json of a run")
    return check


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    document = _read_results(args.results)
    try:
        failures = ci.failed_gates(document)
        gates = sum(len(b["gates"]) for b in document["benchmarks"])
    except (LookupError, TypeError, AttributeError) as exc:
        raise _Refused(_not_results(args.results, exc)) from None
    for failure in failures:
        print(f"FAILED {failure}")
    print(f"llmeval: {len(failures)} failure(s), {gates} gate verdict(s) in {args.results}")
    return 1 if failures else 0


# --- report -----------------------------------------------------------------------------------------------


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
        help=f"the spot check to write (default: {report.SPOT_CHECK_NAME} beside RESULTS_JSON, where the "
        "run wrote it)",
    )
    return rep


def _report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    results: Path = args.results
    document = _read_results(results)
    html_path: Path = args.html if args.html is not None else results.parent / HTML_NAME
    spot_path: Path = args.spot_check if args.spot_check is not None else report.spot_check_path(results)
    _refuse_clashes([("--html", html_path), ("--spot-check", spot_path)], [("RESULTS_JSON", results)])
    try:
        # Both made before either is written: a document that cannot be rendered leaves no half of a pair.
        texts = [(html_path, report.html_report(document)), (spot_path, report.spot_check_markdown(document))]
    except (LookupError, TypeError, AttributeError, ValueError) as exc:
        raise _Refused(_not_results(results, exc)) from None
    for path, text in texts:
        _write(path, text)
    print(f"llmeval: wrote the HTML report to {html_path} and the spot check to {spot_path}", file=sys.stderr)
    return 0


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


# --- history ----------------------------------------------------------------------------------------------


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
    if not 0 < args.alpha < 1:
        parser.error(f"--alpha must be within (0, 1), got {args.alpha}")
    if not folder.is_dir():
        raise _Refused(f"no history at {folder} (a run writes one beside its results.json)")
    damaged: dict[Path, str] = {}
    all_runs = history.runs(folder, damaged)
    for problem in damaged.values():
        # Listed apart and left where it is: a damaged entry is no run, and never stops the listing.
        print(f"llmeval: passed over {problem}", file=sys.stderr)
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


# --- convert, compare -------------------------------------------------------------------------------------


def _add_convert(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    conv = _subcommand(
        commands,
        "convert",
        help="write benchmark rows (code_execution) from HumanEval's or MBPP's own file",
        description="Write code_execution benchmark rows from HumanEval's or MBPP's own file "
        "(gzip or plain; JSONL, or MBPP's sanitized JSON array).\nThe rows go to -o (written whole, once "
        "every record converted) or to standard output.",
        epilog=_exit_codes(
            "0  every record converted and written",
            "2  the file cannot be read or a record converted (nothing written), -o cannot be written, "
            "or an option out of range",
        ),
    )
    conv.add_argument("dataset", choices=convert.DATASETS, help="which dataset the file holds")
    conv.add_argument("file", type=Path, help="the dataset's file, e.g. HumanEval.jsonl.gz or mbpp.jsonl")
    conv.add_argument("-o", "--output", type=Path, default=None, help="the JSONL to write (default: stdout)")
    conv.add_argument("--difficulty", choices=DIFFICULTIES, default="medium", help="of every row (medium)")
    conv.add_argument("--samples", type=int, default=None, help="samples per problem, for pass@k")
    conv.add_argument("--k", type=_ints, default=None, help="the k of pass@k, e.g. 1,10 (default: 1)")
    conv.add_argument("--temperature", type=float, default=None, help="of the samples (needs --samples > 1)")
    conv.add_argument("--timeout", type=float, default=None, help="seconds each program may run")
    conv.add_argument(
        "--chat",
        action="store_true",
        help="humaneval: chat rows (the model writes the whole function in a code block) instead of "
        "completion rows (it continues the prompt, no chat template)",
    )
    return conv


def _add_compare(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    default = peft_sft.DEFAULT_CRITERIA
    versus = _subcommand(
        commands,
        "compare",
        help="a PEFT (LoRA) adaptation against full fine-tuning (SFT): the adaptation document's criteria",
        description="Compare a PEFT adapter with a fully fine-tuned (SFT) model from their results.json "
        "(and training logs): per-benchmark performance ratio and paired test, parameter, memory and "
        "training-time efficiency, and the success criteria (§7.2).",
        epilog=_exit_codes(
            "0  every primary criterion met (or not measured, without --require-measured)",
            "1  a primary criterion failed",
            "2  input that cannot be compared (a file, a column, a training log), --markdown cannot be "
            "written, or an option out of range",
        ),
    )
    versus.add_argument(
        "peft", type=Path, metavar="PEFT.json", help="the results.json holding the PEFT adapter"
    )
    versus.add_argument(
        "sft",
        type=Path,
        nargs="?",
        metavar="SFT.json",
        help="the results.json holding the SFT model (default: another column of PEFT.json)",
    )
    versus.add_argument(
        "--peft-column",
        default=None,
        metavar="COLUMN",
        help="the PEFT column or model name (default: the first adapter)",
    )
    versus.add_argument(
        "--sft-column",
        default=None,
        metavar="COLUMN",
        help="the SFT column or model name (default: the only --llmeval-model column; in a base-only run "
        "the base)",
    )
    versus.add_argument(
        "--peft-training-log",
        type=Path,
        default=None,
        metavar="PATH",
        help="trainer_state.json, EvaluationCallback JSONL, or a folder holding one",
    )
    versus.add_argument(
        "--sft-training-log", type=Path, default=None, metavar="PATH", help="the same, of the SFT run"
    )
    versus.add_argument(
        "--markdown", type=Path, default=None, metavar="PATH", help="write the report (§6.2) to this file"
    )
    versus.add_argument(
        "--sft-params",
        type=int,
        default=None,
        metavar="N",
        help="the SFT model's parameter count (default: the PEFT adapter's base model's)",
    )
    versus.add_argument("--alpha", type=float, default=0.05, help="significance level of the paired tests")
    versus.add_argument(
        "--require-measured",
        action="store_true",
        help="a primary criterion that could not be measured fails too",
    )
    for name, help_text in (
        ("max_performance_loss", "largest performance loss against SFT on any benchmark"),
        ("min_parameter_reduction", "smallest parameter reduction"),
        ("min_memory_saving", "smallest peak-memory saving"),
        ("min_time_reduction", "smallest training-time reduction"),
        ("max_fluency_loss", "largest perplexity rise against SFT on Japanese text"),
    ):
        versus.add_argument(
            "--" + name.replace("_", "-"),
            type=float,
            default=getattr(default, name),
            metavar="SHARE",
            help=f"{help_text}, a share (default {getattr(default, name):g})",
        )
    return versus


def _compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1:
        parser.error(f"--alpha must be within (0, 1), got {args.alpha}")
    if args.sft_params is not None and args.sft_params < 1:
        parser.error(f"--sft-params must be a parameter count >= 1, got {args.sft_params}")
    if args.markdown is not None:
        read = [("PEFT.json", args.peft), ("SFT.json", args.sft)]
        read += [
            ("--peft-training-log", args.peft_training_log),
            ("--sft-training-log", args.sft_training_log),
        ]
        _refuse_clashes([("--markdown", args.markdown)], [(what, p) for what, p in read if p is not None])
    try:
        criteria = peft_sft.Criteria(
            max_performance_loss=args.max_performance_loss,
            min_parameter_reduction=args.min_parameter_reduction,
            min_memory_saving=args.min_memory_saving,
            min_time_reduction=args.min_time_reduction,
            max_fluency_loss=args.max_fluency_loss,
        )
    except ValueError as exc:
        parser.error(str(exc).replace("_", "-"))
    try:
        peft, sft = peft_sft.load_sides(
            args.peft,
            args.sft,
            peft_column=args.peft_column,
            sft_column=args.sft_column,
            peft_training_log=args.peft_training_log,
            sft_training_log=args.sft_training_log,
        )
    except peft_sft.PeftSftError as exc:
        raise _Refused(str(exc)) from None
    comparison = peft_sft.compare(peft, sft, criteria, alpha=args.alpha, sft_params=args.sft_params)
    print(peft_sft.render_table(comparison))
    if args.markdown is not None:
        _write(args.markdown, peft_sft.markdown_report(comparison))
        print(f"llmeval: wrote the report to {args.markdown}", file=sys.stderr)
    return 1 if peft_sft.primary_failed(comparison, require_measured=args.require_measured) else 0


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, e.g. 1,10, not {text!r}"
        ) from None


def _convert(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        extra = convert.sampling_config(
            samples=args.samples, k=args.k, temperature=args.temperature, timeout=args.timeout
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.chat and args.dataset != "humaneval":
        parser.error("--chat is for humaneval (mbpp rows are chat rows already)")
    if args.output is not None:
        _refuse_clashes([("--output", args.output)], [("FILE", args.file)])
    try:
        records = convert.read_records(args.file)
        if args.dataset == "humaneval":
            rows = convert.humaneval_rows(
                records, difficulty=args.difficulty, extra_config=extra, chat=args.chat
            )
        else:
            rows = convert.mbpp_rows(records, difficulty=args.difficulty, extra_config=extra)
    except convert.ConvertError as exc:
        raise _Refused(f"{exc} (nothing written)") from None
    except OSError as exc:
        raise _Refused(f"cannot read {args.file}: {exc.strerror or exc}") from None
    text = convert.rows_text(rows)
    if args.output is None:
        out = getattr(sys.stdout, "buffer", None)
        if out is None:  # a text-only stream put in its place (io.StringIO)
            sys.stdout.write(text)
        else:
            # Bytes: a benchmark file is UTF-8 whatever the locale of the terminal or pipe.
            sys.stdout.flush()
            out.write(text.encode("utf-8"))
            out.flush()
        where = "standard output"
    else:
        # Whole or not at all (atomic): a benchmark file cut short would run as a smaller benchmark.
        _write(args.output, text)
        where = str(args.output)
    print(f"llmeval: wrote {len(rows)} {args.dataset} rows from {args.file} to {where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
