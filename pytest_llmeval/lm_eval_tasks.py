"""Benchmark rows from lm-evaluation-harness's own task definitions (`pytest-llmeval convert lm-eval`).

lm-eval (an optional extra, tested against 0.4.13) builds every row: its TaskManager loads the task (its
documents through `process_docs`, `!function` fields and all), the task renders each document
(`doc_to_text`, `doc_to_choice`, `doc_to_target`, `target_delimiter`, `description`) and draws its few-shot
examples with the seeds `simple_evaluate` uses, and `build_all_requests` makes the requests lm-eval itself
would send. This module only writes them down: one multiple_choice row per document, its `input` the
rendered context (sent raw: no chat template, as lm-eval's `hf` model sends it), its choices the task's, so
that the JSONL stays the one truth (hashed, versioned, diffable) and scoring needs no lm-eval.

What the rows cannot express exactly is refused in one line naming the task and the field, never
approximated under the task's name. This first part covers `multiple_choice` tasks with one context and one
gold answer scored by `acc` and `acc_norm` (ARC, HellaSwag, MMLU, PIQA, BoolQ, ...); the other output types
(`loglikelihood`, `loglikelihood_rolling`, `generate_until`), several gold answers and varying contexts
(WinoGrande) are refused, saying so.

No pytest, no torch: lm-eval is imported only when a task is converted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmeval.benchmark import _ID_RE
from pytest_llmeval.convert import rows_text
from pytest_llmeval.models import _one_line  # an exception as one line, cut to 300 characters

__all__ = [
    "DATA_FORMATS",
    "FEWSHOT_SEED",
    "LmEvalError",
    "TaskRows",
    "convert_tasks",
    "parse_data_files",
    "write_tasks",
]

# simple_evaluate's defaults (lm_eval/evaluator.py): python's random 0, numpy's and the few-shot sampler's
# 1234. The sampler's decides which examples a row shows; the others are set as lm-eval sets them for the
# tasks whose process_docs draw at random.
FEWSHOT_SEED = 1234
RANDOM_SEED = 0
NUMPY_SEED = 1234
# A local file's format by its ending: the `datasets` builder that reads it.
DATA_FORMATS: dict[str, str] = {
    ".parquet": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".arrow": "arrow",
}
# The metrics a converted row's scorer computes exactly as lm-eval's process_results does.
SUPPORTED_METRICS = frozenset({"acc", "acc_norm"})


class LmEvalError(Exception):
    """A task that cannot be converted exactly, or input that cannot be read: one line, nothing written."""


@dataclass(frozen=True)
class TaskRows:
    """One task's rows, and where they are written."""

    task: str
    rows: list[dict[str, Any]]
    file_name: str


def parse_data_files(specs: Sequence[str]) -> dict[str, Path]:
    """`--data-files=SPLIT=PATH` values -> {split: path}; a file of a format `datasets` cannot read, a
    missing file or a split named twice is refused."""
    out: dict[str, Path] = {}
    for spec in specs:
        split, sep, path = spec.partition("=")
        if not sep or not split or not path:
            raise LmEvalError(f"--data-files={spec}: expected SPLIT=PATH, e.g. test=data/arc_easy.jsonl")
        if split in out:
            raise LmEvalError(f"--data-files: the split {split!r} is given twice")
        file = Path(path)
        if not file.exists():
            raise LmEvalError(f"--data-files={spec}: {file} does not exist")
        if file.is_file() and file.suffix not in DATA_FORMATS:
            known = ", ".join(sorted(DATA_FORMATS))
            raise LmEvalError(
                f"--data-files={spec}: cannot read a {file.suffix or 'nameless'} file ({known})"
            )
        out[split] = file
    return out


def _data_format(files: Mapping[str, Path]) -> str:
    formats = {DATA_FORMATS[p.suffix] for p in files.values() if p.is_file()}
    if len(formats) != 1 or any(p.is_dir() for p in files.values()):
        raise LmEvalError("--data-files: give files of one format (parquet, JSON/JSONL, CSV or arrow)")
    return formats.pop()


def _fingerprint(files: Mapping[str, Path]) -> str:
    """sha256 over the data files' names and bytes: two runs on other data are never one series."""
    digest = hashlib.sha256()
    for split in sorted(files):
        digest.update(split.encode() + b"\0")
        with files[split].open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@functools.cache
def _task_manager(cls: Any) -> Any:
    """One TaskManager per process: building one indexes lm-eval's ~14,000 task files (seconds)."""
    return cls()


def _lm_eval() -> Any:
    try:
        import datasets
        import lm_eval
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise LmEvalError(
            "converting lm-eval tasks needs lm-eval: pip install 'pytest-llmeval[lm-eval]'"
        ) from None
    # The converter says what it wrote in one line per task: lm-eval's notes on defaults it applied and
    # datasets' progress bars are not for the user here.
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return lm_eval, TaskManager


def _load(names: Sequence[str], data_files: Mapping[str, Path], manager: Any) -> dict[str, Any]:
    """{task name: lm-eval Task}, each loaded as simple_evaluate loads it; with data files, from them."""
    tasks: dict[str, Any] = {}
    for name in names:
        entry = manager._entry(name)
        if entry is None:
            raise LmEvalError(_unknown(name, manager))
        spec: str | dict[str, Any] = name
        is_task = not str(getattr(entry, "kind", "")).lower().endswith(("group", "tag"))
        config: dict[str, Any] = manager._factory._load_full_config(entry, None) if is_task else {}
        if is_task:  # refused before its data is read (a download, perhaps)
            _refuse_output_type(name, config.get("output_type", "generate_until"))
        if data_files:
            if str(getattr(entry, "kind", "")).lower().endswith(("group", "tag")):
                raise LmEvalError(
                    f"lm-eval task {name}: --data-files is for one task (a group's subtasks each read "
                    "their own data: convert them one by one)"
                )
            # The task's whole config (its YAML, includes resolved) with the data source replaced: a dict
            # naming a registered task would otherwise be a new task of those fields alone (lm-eval 0.4.13).
            spec = manager._factory._load_full_config(
                entry,
                {
                    "dataset_path": _data_format(data_files),
                    "dataset_name": None,
                    "dataset_kwargs": {"data_files": {s: str(p) for s, p in data_files.items()}},
                },
            )
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                loaded = manager.load([spec])
        except KeyError as exc:
            splits = {
                config.get(k) for k in ("training_split", "validation_split", "test_split", "fewshot_split")
            }
            if exc.args and exc.args[0] in splits - {None}:
                raise LmEvalError(
                    f"lm-eval task {name}: its data has no split {exc.args[0]!r}"
                    + (f" (give --data-files={exc.args[0]}=PATH)" if data_files else "")
                ) from None
            raise LmEvalError(
                f"lm-eval task {name}: a document lacks what the task reads: {_one_line(exc)}"
            ) from None
        except (IndexError, TypeError) as exc:
            raise LmEvalError(
                f"lm-eval task {name}: a document lacks what the task reads: {_one_line(exc)}"
            ) from None
        except (OSError, ValueError) as exc:
            if "OfflineModeIsEnabled" in str(exc) or "offline" in type(exc).__name__.lower():
                raise LmEvalError(
                    f"lm-eval task {name}: its data needs a download and HF_DATASETS_OFFLINE is set: "
                    "give it with --data-files=SPLIT=PATH, or run once online to fill the cache"
                ) from None
            raise LmEvalError(f"lm-eval task {name}: its data cannot be read: {_one_line(exc)}") from None
        except Exception as exc:  # datasets' own errors (DatasetNotFoundError, offline): not OSError
            raise LmEvalError(f"lm-eval task {name}: its data cannot be loaded: {_one_line(exc)}") from None
        if not loaded["tasks"]:
            raise LmEvalError(f"lm-eval group {name} has no subtasks")
        tasks.update(loaded["tasks"])
    return tasks


def _unknown(name: str, manager: Any) -> str:
    import difflib

    known = list(getattr(manager, "all_tasks", []) or [])
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"lm-eval has no task or group named {name!r}{hint}"


def _refuse_output_type(name: str, output_type: Any) -> None:
    if output_type != "multiple_choice":
        raise LmEvalError(
            f"lm-eval task {name}: output_type {output_type!r} is not converted yet (multiple_choice only)"
        )


def _refuse_unsupported(name: str, task: Any) -> None:
    """One line naming the task and the field it uses that a row cannot reproduce exactly."""
    config = task.config
    _refuse_output_type(name, config.output_type)
    if getattr(task, "multiple_input", False):
        raise LmEvalError(f"lm-eval task {name}: doc_to_choice varies the context (multiple_input)")
    if getattr(task, "multiple_target", False):
        raise LmEvalError(f"lm-eval task {name}: doc_to_target gives several gold answers (multiple_target)")
    if config.process_results is not None:
        raise LmEvalError(f"lm-eval task {name}: process_results is the task's own Python function")
    if (config.repeats or 1) != 1:
        raise LmEvalError(f"lm-eval task {name}: repeats {config.repeats} (one answer per request only)")
    metrics = [m["metric"] for m in (config.metric_list or [])]
    other = [m for m in metrics if not isinstance(m, str) or m not in SUPPORTED_METRICS]
    if other:
        raise LmEvalError(f"lm-eval task {name}: metric_list has {other[0]!r} (acc and acc_norm only)")
    filters = config.filter_list
    if filters:
        raise LmEvalError(f"lm-eval task {name}: filter_list is not converted for multiple_choice")


def _version(task: Any) -> Any:
    metadata = task.config.metadata or {}
    return metadata.get("version") if isinstance(metadata, Mapping) else None


def _rows(name: str, task: Any, *, fingerprint: str | None, lm_eval_version: str) -> list[dict[str, Any]]:
    """One multiple_choice row per document, from the requests lm-eval built for it."""
    by_doc: dict[int, list[Any]] = {}
    for instance in task.instances:
        by_doc.setdefault(int(instance.doc_id), []).append(instance)
    delimiter = str(task.config.target_delimiter)
    metrics = [m["metric"] for m in (task.config.metric_list or [])] or ["acc"]
    rows = []
    for doc_id in sorted(by_doc):
        instances = sorted(by_doc[doc_id], key=lambda i: i.idx)
        doc = instances[0].doc
        contexts = {i.arguments[0] for i in instances}
        where = f"lm-eval task {name}, document {doc_id}"
        if len(contexts) != 1:
            raise LmEvalError(f"{where}: its choices have different contexts")
        context = contexts.pop()
        try:
            choices = [str(c) for c in task.doc_to_choice(doc)]
            gold = task.doc_to_target(doc)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LmEvalError(f"{where}: lacks what the task reads: {_one_line(exc)}") from None
        continuations = [i.arguments[1] for i in instances]
        if continuations != [delimiter + c for c in choices]:
            raise LmEvalError(f"{where}: its requests are not target_delimiter + each choice")
        if isinstance(gold, str):
            gold = choices.index(gold) if gold in choices else -1
        if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
            raise LmEvalError(f"{where}: doc_to_target gives {gold!r}, not one of its {len(choices)} choices")
        if len(set(choices)) != len(choices) or not all(c.strip() for c in choices):
            raise LmEvalError(f"{where}: its choices repeat or are empty: {choices!r}")
        if not context:
            raise LmEvalError(f"{where}: its context is empty")
        row_id = f"{name}-{doc_id}"
        if not _ID_RE.match(row_id):
            raise LmEvalError(f"lm-eval task {name}: makes the row id {row_id!r}, which a benchmark refuses")
        rows.append(
            {
                "id": row_id,
                # Every row needs one; a completion row's is not sent: it says what the row asks.
                "instruction": f"lm-eval task {name}: the choice most likely to follow the input.",
                "input": context,
                "expected_output": choices[gold],
                "evaluation_type": "multiple_choice",
                "evaluation_config": {
                    "choices": choices,
                    "answer_index": gold,
                    "prompt_mode": "completion",
                    "target_delimiter": delimiter,
                    "normalize": "char" if metrics[0] == "acc_norm" else "sum",
                    "lm_eval": {
                        "task": name,
                        "version": _version(task),
                        "lm_eval_version": lm_eval_version,
                        "num_fewshot": int(task.config.num_fewshot or 0),
                        "fewshot_seed": FEWSHOT_SEED,
                        "doc_id": doc_id,
                        "metrics": metrics,
                        "data_sha256": fingerprint,
                    },
                },
                # Every row needs one; lm-eval's tasks grade none (the converter's, like HumanEval's).
                "difficulty": "medium",
            }
        )
    return rows


def convert_tasks(
    names: Sequence[str],
    *,
    num_fewshot: int | None = None,
    limit: int | None = None,
    data_files: Mapping[str, Path] | None = None,
) -> list[TaskRows]:
    """Every task's rows (a group's subtasks each their own), built by lm-eval as simple_evaluate builds
    them; LmEvalError before anything is returned if any task cannot be converted exactly."""
    lm_eval, task_manager = _lm_eval()
    import numpy as np

    files = dict(data_files or {})
    fingerprint = _fingerprint(files) if files else None
    version = str(getattr(lm_eval, "__version__", "unknown"))
    tasks = _load(names, files, _task_manager(task_manager))
    out = []
    for name, task in sorted(tasks.items()):
        _refuse_unsupported(name, task)
        # As simple_evaluate: the few-shot count (a task whose config says 0 keeps 0), then the seeds.
        if num_fewshot is not None and task.get_config("num_fewshot") != 0:
            task.set_config(key="num_fewshot", value=num_fewshot)
        elif task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=FEWSHOT_SEED)
        random.seed(RANDOM_SEED)
        np.random.seed(NUMPY_SEED)
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
                task.build_all_requests(limit=limit, rank=0, world_size=1)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            if "larger than population" in str(exc):  # random.sample: fewer examples than shots
                shots = task.get_config("num_fewshot")
                raise LmEvalError(
                    f"lm-eval task {name}: its few-shot split is too small for {shots} examples (lm-eval"
                    " draws one more than asked, to leave out the document itself): lower --num-fewshot"
                ) from None
            raise LmEvalError(
                f"lm-eval task {name}: a document lacks what the task reads: {_one_line(exc)}"
            ) from None
        rows = _rows(name, task, fingerprint=fingerprint, lm_eval_version=version)
        if not rows:
            raise LmEvalError(f"lm-eval task {name}: its data has no documents")
        out.append(TaskRows(task=name, rows=rows, file_name=f"{name}.jsonl"))
    return out


def write_tasks(converted: Iterable[TaskRows], out: Path) -> list[Path]:
    """Each task's rows to OUT/TASK.jsonl (whole files, written once every task converted)."""
    from pytest_llmeval.results import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for task in converted:
        path = out / task.file_name
        write_text_atomic(path, rows_text(task.rows))
        written.append(path)
    return written
