"""`pytest-llmeval convert humaneval|mbpp FILE`: benchmark rows from a dataset's own file (convert.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_llmeval import convert
from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.cli.common import _exit_codes, _refuse_clashes, _Refused, _subcommand, _write


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
