"""`pytest-llmeval convert humaneval|mbpp FILE`: benchmark rows from a dataset's own file (convert.py);
`pytest-llmeval convert lm-eval TASK... --out=DIR`: rows from lm-eval's tasks (lm_eval_tasks.py);
`pytest-llmeval convert dataset SOURCE --input=FIELD ...`: rows from any dataset by a field mapping
(dataset_rows.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_llmeval import convert, dataset_rows
from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.cli.common import _exit_codes, _refuse_clashes, _Refused, _subcommand, _write


def _add_convert(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    conv = _subcommand(
        commands,
        "convert",
        help="write benchmark rows from HumanEval's or MBPP's own file, from lm-eval's tasks, or from a "
        "dataset of your own",
        description="Write code_execution benchmark rows from HumanEval's or MBPP's own file "
        "(gzip or plain; JSONL, or MBPP's sanitized JSON array).\nThe rows go to -o (written whole, once "
        "every record converted) or to standard output.\n\nWith lm-eval: one benchmark file per task "
        "(a group: per subtask) in --out, each row a document as lm-eval 0.4.13 renders it (its prompt, "
        "few-shot examples and seed), scored as lm-eval scores it (docs/lm-eval.md: the output types). "
        "Needs pip install 'pytest-llmeval[lm-eval]'.\nWith dataset: one row per record of SOURCE, a "
        "parquet, JSON/JSONL, CSV or arrow file, a save_to_disk folder or a hub dataset id (read with "
        "datasets; offline, from its cache), as the field mapping says: --input, --expected and "
        "--instruction make exact_match rows (or --type), --choices multiple_choice rows. The rows go to -o "
        "or to standard output.",
        epilog=_exit_codes(
            "0  every record converted and written",
            "2  the file cannot be read or a record converted (nothing written), -o cannot be written, "
            "or an option out of range; with lm-eval, a task unknown, unreadable or not convertible "
            "exactly (nothing written); with dataset, a record without a mapped field or with a bad one "
            "(nothing written)",
        ),
    )
    conv.add_argument(
        "dataset",
        choices=(*convert.DATASETS, LM_EVAL, DATASET),
        help="which dataset the file holds, or lm-eval, or dataset (any, by a field mapping)",
    )
    conv.add_argument(
        "file",
        nargs="+",
        help="the dataset's file, e.g. HumanEval.jsonl.gz or mbpp.jsonl; with lm-eval, task or group names; "
        "with dataset, SOURCE: a file, a save_to_disk folder or a hub dataset id",
    )
    conv.add_argument("-o", "--output", type=Path, default=None, help="the JSONL to write (default: stdout)")
    conv.add_argument("--difficulty", choices=DIFFICULTIES, default="medium", help="of every row (medium)")
    conv.add_argument(
        "--limit",
        type=int,
        default=None,
        help="lm-eval: the first N documents of each task; dataset: the first N records",
    )
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
    lm = conv.add_argument_group("lm-eval")
    lm.add_argument("--out", type=Path, default=None, help="the folder for one TASK.jsonl per task")
    lm.add_argument("--num-fewshot", type=int, default=None, help="few-shot examples (default: the task's)")
    lm.add_argument(
        "--data-files",
        action="append",
        default=[],
        metavar="SPLIT=PATH",
        help="read a split from a local parquet, JSON/JSONL, CSV or arrow file in the dataset's own schema "
        "(repeat for each split; default: the task's dataset_path through datasets)",
    )
    lm.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="read each task's splits, a group's every subtask's, from DIR/TASK/SPLIT.jsonl (or .parquet, "
        ".json, .csv, .arrow)",
    )
    lm.add_argument(
        "--include-path",
        type=Path,
        default=None,
        metavar="DIR",
        help="a folder of your own lm-eval task and group YAMLs, found beside lm-eval's (its include_path)",
    )
    lm.add_argument(
        "--group-file",
        action="store_true",
        help="write a group's subtasks into one file, GROUP.jsonl, so that one gate decides on the group "
        "(default: one file per subtask)",
    )
    own = conv.add_argument_group("dataset")
    own.add_argument(
        "--input", dest="input_field", metavar="FIELD", help="the field that is each row's input"
    )
    own.add_argument(
        "--expected",
        dest="expected_field",
        metavar="FIELD",
        help="the field of the expected answer: a text or a list of references; with --choices a choice's "
        "position (from 0), text or letter (A, B, ...)",
    )
    own.add_argument(
        "--choices",
        dest="choices_field",
        metavar="FIELD",
        help="the list field of the choices, or FIELD,FIELD,... one choice each: multiple_choice rows",
    )
    own.add_argument("--instruction", metavar="TEXT", help="every row's instruction (required)")
    own.add_argument(
        "--type",
        dest="evaluation_type",
        choices=(*dataset_rows.TEXT_TYPES, dataset_rows.CHOICE_TYPE),
        metavar="TYPE",
        help=f"the evaluation type: {dataset_rows.DEFAULT_TYPE} (the default), another text type ("
        + ", ".join(t for t in dataset_rows.TEXT_TYPES if t != dataset_rows.DEFAULT_TYPE)
        + f"), or {dataset_rows.CHOICE_TYPE} (the default with --choices)",
    )
    own.add_argument(
        "--id",
        dest="id_field",
        metavar="FIELD",
        help="the field of each row's id (default: PREFIX-N, N the record's position from 0)",
    )
    own.add_argument(
        "--id-prefix",
        metavar="PREFIX",
        help="the prefix of numbered ids (default: the source's name); with --id, of every id",
    )
    own.add_argument(
        "--tag", dest="tag_field", metavar="FIELD", help="a field whose value tags the row, as FIELD:VALUE"
    )
    own.add_argument("--split", metavar="NAME", help="the split of a DatasetDict folder or a hub dataset")
    own.add_argument("--subset", metavar="NAME", help="a hub dataset's subset (its config name)")
    return conv


LM_EVAL = "lm-eval"
DATASET = "dataset"


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, e.g. 1,10, not {text!r}"
        ) from None


def _only_for(parser: argparse.ArgumentParser, owner: str, given: list[tuple[str, Any]]) -> None:
    """Refuse the first option given (0 counts as given) that is for another kind of conversion."""
    used = [option for option, value in given if value is not None and value is not False and value != []]
    if used:
        parser.error(f"{used[0]} is for {owner}")


def _dataset_options(args: argparse.Namespace) -> list[tuple[str, Any]]:
    return [
        ("--input", args.input_field),
        ("--expected", args.expected_field),
        ("--choices", args.choices_field),
        ("--instruction", args.instruction),
        ("--type", args.evaluation_type),
        ("--id", args.id_field),
        ("--id-prefix", args.id_prefix),
        ("--tag", args.tag_field),
        ("--split", args.split),
        ("--subset", args.subset),
    ]


def _lm_eval_options(args: argparse.Namespace) -> list[tuple[str, Any]]:
    return [
        ("--out", args.out),
        ("--num-fewshot", args.num_fewshot),
        ("--data-files", args.data_files),
        ("--data-dir", args.data_dir),
        ("--group-file", args.group_file),
        ("--include-path", args.include_path),
    ]


def _code_options(args: argparse.Namespace) -> list[tuple[str, Any]]:
    return [
        ("--samples", args.samples),
        ("--k", args.k),
        ("--temperature", args.temperature),
        ("--timeout", args.timeout),
        ("--chat", args.chat),
    ]


def _convert(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.dataset == LM_EVAL:
        return _convert_lm_eval(parser, args)
    if args.dataset == DATASET:
        return _convert_dataset(parser, args)
    _only_for(parser, "lm-eval", _lm_eval_options(args))
    _only_for(parser, "lm-eval and dataset", [("--limit", args.limit)])
    _only_for(parser, "dataset", _dataset_options(args))
    if len(args.file) != 1:
        parser.error(f"{args.dataset} converts one FILE")
    args.file = Path(args.file[0])
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
    where = _emit(args.output, convert.rows_text(rows))
    print(f"llmeval: wrote {len(rows)} {args.dataset} rows from {args.file} to {where}", file=sys.stderr)
    return 0


def _emit(output: Path | None, text: str) -> str:
    """Write the rows to `output`, or to standard output when None; where they went, for the last line."""
    if output is None:
        out = getattr(sys.stdout, "buffer", None)
        if out is None:  # a text-only stream put in its place (io.StringIO)
            sys.stdout.write(text)
        else:
            # Bytes: a benchmark file is UTF-8 whatever the locale of the terminal or pipe.
            sys.stdout.flush()
            out.write(text.encode("utf-8"))
            out.flush()
        return "standard output"
    # Whole or not at all (atomic): a benchmark file cut short would run as a smaller benchmark.
    _write(output, text)
    return str(output)


def _convert_dataset(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _only_for(parser, "humaneval and mbpp", _code_options(args))
    _only_for(parser, "lm-eval", _lm_eval_options(args))
    if len(args.file) != 1:
        parser.error("dataset converts one SOURCE")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be 1 or more")
    try:
        fields = dataset_rows.FieldMap(
            input=args.input_field or "",
            expected=args.expected_field or "",
            instruction=args.instruction or "",
            choices=tuple(args.choices_field.split(",")) if args.choices_field is not None else (),
            id=args.id_field,
            id_prefix=args.id_prefix,
            tag=args.tag_field,
            evaluation_type=args.evaluation_type,
            difficulty=args.difficulty,
        )
    except ValueError as exc:
        parser.error(str(exc))
    source = args.file[0]
    if args.output is not None:
        _refuse_clashes([("--output", args.output)], [("SOURCE", Path(source))])
    try:
        opened = dataset_rows.read_source(source, subset=args.subset, split=args.split)
        rows = dataset_rows.dataset_rows(opened, fields, limit=args.limit)
    except convert.ConvertError as exc:
        raise _Refused(f"{exc} (nothing written)") from None
    except OSError as exc:
        raise _Refused(f"cannot read {source}: {exc.strerror or exc}") from None
    where = _emit(args.output, convert.rows_text(rows))
    print(f"llmeval: wrote {len(rows)} rows from {opened.label} to {where}", file=sys.stderr)
    return 0


def _convert_lm_eval(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pytest_llmeval import lm_eval_tasks

    if args.out is None:
        parser.error("lm-eval writes one file per task: give --out=DIR")
    _only_for(parser, "humaneval, mbpp and dataset", [("-o", args.output)])
    _only_for(parser, "humaneval and mbpp", _code_options(args))
    _only_for(parser, "dataset", _dataset_options(args))
    for option, value in (("--num-fewshot", args.num_fewshot), ("--limit", args.limit)):
        if value is not None and value < (0 if option == "--num-fewshot" else 1):
            parser.error(f"{option} must be {'0 or more' if option == '--num-fewshot' else '1 or more'}")
    if args.data_dir is not None and args.data_files:
        parser.error("give --data-files (one task's splits) or --data-dir (a folder per task), not both")
    for option, folder in (("--data-dir", args.data_dir), ("--include-path", args.include_path)):
        if folder is not None and not folder.is_dir():
            parser.error(f"{option}={folder}: no such folder")
    try:
        files = lm_eval_tasks.parse_data_files(args.data_files)
        converted = lm_eval_tasks.convert_tasks(
            args.file,
            num_fewshot=args.num_fewshot,
            limit=args.limit,
            data_files=files,
            data_dir=args.data_dir,
            group_file=args.group_file,
            include_path=args.include_path,
        )
    except lm_eval_tasks.LmEvalError as exc:
        raise _Refused(f"{exc} (nothing written)") from None
    try:
        written = lm_eval_tasks.write_tasks(converted, args.out)
    except OSError as exc:
        raise _Refused(f"cannot write to {args.out}: {exc.strerror or exc}") from None
    for task, path in zip(converted, written, strict=True):
        kind = (
            "task"
            if {r["evaluation_config"]["lm_eval"]["task"] for r in task.rows} == {task.task}
            else "group"
        )
        print(
            f"llmeval: wrote {len(task.rows)} rows of lm-eval {kind} {task.task} to {path}", file=sys.stderr
        )
    return 0
