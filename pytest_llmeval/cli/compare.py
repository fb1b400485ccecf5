"""`pytest-llmeval compare PEFT.json [SFT.json]`: the adaptation document's criteria (reporting/peft_sft)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_llmeval.cli.common import (
    _check_alpha,
    _exit_codes,
    _refuse_clashes,
    _Refused,
    _subcommand,
    _write,
)
from pytest_llmeval.reporting import peft_sft, peft_sft_report, peft_sft_sides


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
    _check_alpha(parser, args.alpha)
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
        peft, sft = peft_sft_sides.load_sides(
            args.peft,
            args.sft,
            peft_column=args.peft_column,
            sft_column=args.sft_column,
            peft_training_log=args.peft_training_log,
            sft_training_log=args.sft_training_log,
        )
    except peft_sft_sides.PeftSftError as exc:
        raise _Refused(str(exc)) from None
    comparison = peft_sft.compare(peft, sft, criteria, alpha=args.alpha, sft_params=args.sft_params)
    print(peft_sft_report.render_table(comparison))
    if args.markdown is not None:
        _write(args.markdown, peft_sft_report.markdown_report(comparison))
        print(f"llmeval: wrote the report to {args.markdown}", file=sys.stderr)
    return 1 if peft_sft.primary_failed(comparison, require_measured=args.require_measured) else 0
