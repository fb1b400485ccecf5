"""`python -m pytest_llmeval`: the history of runs (history); benchmark rows from HumanEval, MBPP (convert);
a PEFT adaptation against full fine-tuning (compare).

    python -m pytest_llmeval history                  # every run, oldest first, numbered
    python -m pytest_llmeval history --diff 1 -1      # the first run against the newest
    python -m pytest_llmeval history --results out/results.json   # the history beside another results.json

Runs are named by number (1 = oldest, -1 = newest), by file name, or by a unique prefix of it.

    python -m pytest_llmeval convert humaneval HumanEval.jsonl.gz -o benchmarks/humaneval.jsonl
    python -m pytest_llmeval convert mbpp sanitized-mbpp.json -o benchmarks/mbpp.jsonl --difficulty easy
    python -m pytest_llmeval convert humaneval HumanEval.jsonl.gz --samples 10 --k 1,10 --temperature 0.8

The input is the dataset's own file, gzip-compressed or not: JSONL, or a JSON array (MBPP's sanitized
release). The rows go to -o (written whole, once every record converted) or to standard output.

    python -m pytest_llmeval compare peft.json sft.json --peft-training-log lora/ --sft-training-log sft/
    python -m pytest_llmeval compare results.json --sft-column sft --markdown report.md

compare judges the Japanese adaptation document's success criteria (peft_sft.py): exit status 1 when a
primary criterion fails, 2 when the input cannot be compared.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_llmeval import convert, history, peft_sft
from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.results import write_text_atomic


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
    conv = _add_convert(commands)
    versus = _add_compare(commands)
    args = parser.parse_args(argv)
    if args.command == "convert":
        return _convert(conv, args)
    if args.command == "compare":
        return _compare(versus, args)
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


def _add_convert(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    conv = commands.add_parser(
        "convert",
        help="write benchmark rows (code_execution) from HumanEval's or MBPP's own file",
        description="Write code_execution benchmark rows from HumanEval's or MBPP's own file "
        "(gzip or plain; JSONL, or MBPP's sanitized JSON array).",
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
    versus = commands.add_parser(
        "compare",
        help="a PEFT (LoRA) adaptation against full fine-tuning (SFT): the adaptation document's criteria",
        description="Compare a PEFT adapter with a fully fine-tuned (SFT) model from their results.json "
        "(and training logs): per-benchmark performance ratio and paired test, parameter, memory and "
        "training-time efficiency, and the success criteria (§7.2). Exit status 1 when a primary criterion "
        "fails, 2 on input that cannot be compared.",
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
        print(f"llmeval: {exc}", file=sys.stderr)
        return 2
    comparison = peft_sft.compare(peft, sft, criteria, alpha=args.alpha, sft_params=args.sft_params)
    print(peft_sft.render_table(comparison))
    if args.markdown is not None:
        try:
            write_text_atomic(args.markdown, peft_sft.markdown_report(comparison))
        except OSError as exc:
            print(f"llmeval: cannot write {args.markdown}: {exc.strerror or exc}", file=sys.stderr)
            return 2
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
    try:
        records = convert.read_records(args.file)
        if args.dataset == "humaneval":
            rows = convert.humaneval_rows(
                records, difficulty=args.difficulty, extra_config=extra, chat=args.chat
            )
        else:
            rows = convert.mbpp_rows(records, difficulty=args.difficulty, extra_config=extra)
    except convert.ConvertError as exc:
        print(f"llmeval: {exc} (nothing written)", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"llmeval: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
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
        try:
            # Whole or not at all: a benchmark file cut short would run as a smaller benchmark.
            write_text_atomic(args.output, text)
        except OSError as exc:
            print(f"llmeval: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        where = str(args.output)
    print(f"llmeval: wrote {len(rows)} {args.dataset} rows from {args.file} to {where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
