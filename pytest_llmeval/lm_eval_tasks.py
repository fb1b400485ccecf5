"""Benchmark rows from lm-evaluation-harness's own task definitions (`pytest-llmeval convert lm-eval`).

lm-eval (an optional extra, tested against 0.4.13) builds every row: its TaskManager loads the task (its
documents through `process_docs`, `!function` fields and all), the task renders each document
(`doc_to_text`, `doc_to_choice`, `doc_to_target`, `target_delimiter`, `description`) and draws its few-shot
examples with the seeds `simple_evaluate` uses, and `build_all_requests` makes the requests lm-eval itself
would send. This module only writes them down, one row per document, each output type by its builder
(ROW_BUILDERS): multiple_choice here (one context or, WinoGrande's, a context per choice; one right answer,
several, or TruthfulQA MC2's probability share), generate_until in lm_eval_generate.py, loglikelihood and
loglikelihood_rolling in lm_eval_likelihood.py. Inputs are the rendered contexts, sent raw (no chat
template, as lm-eval's `hf` model sends them), so that the JSONL stays the one truth (hashed, versioned,
diffable) and scoring needs no lm-eval. Groups expand into their tasks, each row recording the groups it is
in, for results.json's group aggregates (summaries.lm_eval_groups).

What the rows cannot express exactly is refused in one line naming the task and the field, never
approximated under the task's name.

No pytest, no torch: lm-eval is imported only when a task is converted.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmeval.convert import rows_text
from pytest_llmeval.data_files import (
    DATA_FORMATS,
    arrow_files,
    data_format,
    fingerprint,
    split_files,
    unreadable,
)
from pytest_llmeval.lm_eval_generate import generate_rows
from pytest_llmeval.lm_eval_likelihood import likelihood_rows, rolling_rows
from pytest_llmeval.lm_eval_requests import LmEvalError, by_document, row_id
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
# The metrics a converted row's scorer computes exactly as lm-eval's process_results does.
SUPPORTED_METRICS = frozenset({"acc", "acc_norm", "acc_bytes"})


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
        why = unreadable(file)
        if why is not None:
            raise LmEvalError(f"--data-files={spec}: {why}")
        out[split] = file
    return out


def _data_format(files: Mapping[str, Path]) -> str:
    """The `datasets` builder that reads every split: one format (a save_to_disk split is arrow)."""
    formats = {data_format(p) for p in files.values()}
    if len(formats) != 1:
        raise LmEvalError(
            "--data-files: give files of one format (parquet, JSON/JSONL, CSV, or arrow: files or "
            "save_to_disk folders)"
        )
    return formats.pop()


@functools.cache
def _task_manager(cls: Any, include_path: Path | None = None) -> Any:
    """One TaskManager per process (and folder of the user's own task files): building one indexes
    lm-eval's ~14,000 task files (seconds)."""
    return cls() if include_path is None else cls(include_path=str(include_path))


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


def _kind(entry: Any) -> str:
    """ "group", "tag" or "task": what an lm-eval index entry names."""
    kind = str(getattr(entry, "kind", "")).lower()
    return "group" if kind.endswith("group") else "tag" if kind.endswith("tag") else "task"


def _load(names: Sequence[str], data_files: Mapping[str, Path], manager: Any) -> dict[str, Any]:
    """{task name: lm-eval Task}, each loaded as simple_evaluate loads it; with data files, from them."""
    tasks: dict[str, Any] = {}
    for item in load_for_lm_eval(names, manager, data_files=data_files):
        tasks.update(_leaves(item))
    return tasks


def load_for_lm_eval(
    names: Sequence[str],
    manager: Any,
    *,
    data_files: Mapping[str, Path] | None = None,
    data_dir: Path | None = None,
) -> list[Any]:
    """The tasks and groups named, as lm-eval Task and Group objects (what simple_evaluate takes), each
    task's data from the hub (its dataset_path), from `data_files` (one task) or from `data_dir`, where
    every task, a group's each, reads DATA_DIR/TASK/SPLIT.EXT (a split per file, named by its stem)."""
    built = []
    for name in names:
        entry = manager._entry(name)
        if entry is None:
            raise LmEvalError(_unknown(name, manager))
        if data_files and _kind(entry) != "task":
            raise LmEvalError(
                f"lm-eval task {name}: --data-files is for one task (a group's subtasks each read their "
                "own data: give --data-dir=DIR, with DIR/TASK/SPLIT.jsonl for each)"
            )
        found = _built(name, manager, dict(data_files or {}), data_dir)
        if not _leaves(found):
            raise LmEvalError(f"lm-eval group {name} has no subtasks")
        built.extend(_as_list(found))
    return built


def _leaves(item: Any) -> dict[str, Any]:
    """{task name: Task} under a Task, a Group (its subgroups' too) or a list of them (a tag's)."""
    if hasattr(item, "task_name"):
        return {str(item.task_name): item}
    found: dict[str, Any] = {}
    for child in item:
        found.update(_leaves(child))
    return found


def _built(name: str, manager: Any, data_files: dict[str, Path], data_dir: Path | None) -> Any:
    """One name as lm-eval builds it: a Task, a Group with its children, or a tag's list of Tasks."""
    entry = manager._entry(name)
    if entry is None:
        raise LmEvalError(_unknown(name, manager))
    kind = _kind(entry)
    if kind == "task":  # refused before its data is read (a download, perhaps)
        config: dict[str, Any] = manager._factory._load_full_config(entry, None)
        _refuse_output_type(name, config.get("output_type", "generate_until"))
        if data_dir is not None:
            data_files = _files_in(data_dir, name)
        return _task(name, entry, config, data_files, manager)
    if data_dir is None:  # lm-eval builds it whole, each task from its own dataset (refused after: every
        # output type lm-eval has is converted, and what a row cannot reproduce needs the built task)
        return _guarded(name, bool(data_files), {}, lambda: manager._load_spec(name))
    if kind == "tag":
        return [t for child in sorted(entry.tags) for t in _as_list(_built(child, manager, {}, data_dir))]
    # A group read from a folder: built as lm-eval's factory builds it (GroupConfig -> Group), each child
    # a task loaded with its own files; a group that sets its tasks' fields cannot be rebuilt exactly.
    from lm_eval.api.group import Group
    from lm_eval.config.group import GroupConfig
    from lm_eval.tasks._factory import GROUP_FIELD_NAMES

    raw = manager._factory._load_full_config(entry, None)
    extra = sorted(k for k in raw if k not in GROUP_FIELD_NAMES)
    if extra:
        raise LmEvalError(
            f"lm-eval group {name}: sets {extra[0]!r} for its tasks, which --data-dir does not carry"
        )
    config_fields = {k: v for k, v in raw.items() if k in GROUP_FIELD_NAMES} | {"group": name}
    group = Group.from_config(GroupConfig(**config_fields))
    members = raw.get("task") or []
    for member in [members] if isinstance(members, str) else members:
        if not isinstance(member, str):
            raise LmEvalError(
                f"lm-eval group {name}: a member defined inline ({member!r}) cannot read --data-dir"
            )
        for child in _as_list(_built(member, manager, {}, data_dir)):
            group.add(child)
    return group


def _as_list(found: Any) -> list[Any]:
    return found if isinstance(found, list) else [found]


def _files_in(data_dir: Path, name: str) -> dict[str, Path]:
    """DATA_DIR/TASK's data files, {split (the file's stem): path}; one line when there are none."""
    folder = data_dir / name
    # A file per split (its stem the split), or a DatasetDict save_to_disk wrote (a folder per split).
    saved = (folder / "dataset_dict.json").is_file()  # save_to_disk's: only its split folders are data
    found = (
        {
            p.stem: p
            for p in sorted(folder.iterdir())
            if (p.is_file() and p.suffix in DATA_FORMATS and not saved) or (p.is_dir() and arrow_files(p))
        }
        if folder.is_dir()
        else {}
    )
    if not found:
        raise LmEvalError(
            f"--data-dir={data_dir}: no data for lm-eval task {name} (expected {folder}/SPLIT.jsonl, "
            "one file per split: parquet, JSON/JSONL, CSV or arrow; or a DatasetDict's save_to_disk)"
        )
    return found


def _task(name: str, entry: Any, config: Mapping[str, Any], files: Mapping[str, Path], manager: Any) -> Any:
    """One task as simple_evaluate loads it; with data files, its YAML's whole config (includes resolved)
    with the data source replaced: a dict naming a registered task would otherwise be a new task of those
    fields alone (lm-eval 0.4.13)."""
    spec: str | dict[str, Any] = name
    if files:
        spec = manager._factory._load_full_config(
            entry,
            {
                "dataset_path": _data_format(files),
                "dataset_name": None,
                "dataset_kwargs": {
                    "data_files": {s: [str(f) for f in split_files(p)] for s, p in files.items()}
                },
            },
        )
    return _guarded(name, bool(files), config, lambda: manager.load([spec])["tasks"][name])


def _guarded(name: str, local: bool, config: Mapping[str, Any], load: Callable[[], Any]) -> Any:
    """lm-eval's and datasets' errors while loading a task's data, as one line naming the task."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return load()
    except KeyError as exc:
        splits = {
            config.get(k) for k in ("training_split", "validation_split", "test_split", "fewshot_split")
        }
        if exc.args and exc.args[0] in splits - {None}:
            raise LmEvalError(
                f"lm-eval task {name}: its data has no split {exc.args[0]!r}"
                + (f" (give --data-files={exc.args[0]}=PATH)" if local else "")
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
                "give it with --data-files=SPLIT=PATH or --data-dir=DIR, or run once online to fill the cache"
            ) from None
        raise LmEvalError(f"lm-eval task {name}: its data cannot be read: {_one_line(exc)}") from None
    except LmEvalError:
        raise
    except Exception as exc:  # datasets' own errors (DatasetNotFoundError, offline): not OSError
        raise LmEvalError(f"lm-eval task {name}: its data cannot be loaded: {_one_line(exc)}") from None


def group_chains(built: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """{task name: the groups it is in, innermost first}, each as a row records it: the group's name,
    version, how lm-eval aggregates it (metric, weight_by_size) and every task under it (so that a run of
    some of them is seen to be partial)."""
    chains: dict[str, list[dict[str, Any]]] = {}

    def walk(item: Any, outer: list[dict[str, Any]]) -> None:
        if hasattr(item, "task_name"):
            chains.setdefault(str(item.task_name), list(reversed(outer)))
            return
        if isinstance(item, list):
            for child in item:
                walk(child, outer)
            return
        here = {
            "group": str(item.name),
            "version": None if item.version == "N/A" else item.version,
            "aggregate": [
                {"metric": str(m.metric), "weight_by_size": bool(m.weight_by_size)}
                for m in item.aggregate_metric_list or []
                if (m.filter_list is None or list(m.filter_list) == ["none"])
            ],
            "tasks": sorted(str(t.task_name) for t in item.get_all_tasks()),
        }
        for child in item:
            walk(child, [*outer, here])

    for item in built:
        walk(item, [])
    return chains


def _unknown(name: str, manager: Any) -> str:
    import difflib

    known = list(getattr(manager, "all_tasks", []) or [])
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"lm-eval has no task or group named {name!r}{hint}"


def _refuse_output_type(name: str, output_type: Any) -> None:
    if output_type not in CONVERTED_OUTPUT_TYPES:
        known = ", ".join(CONVERTED_OUTPUT_TYPES)
        raise LmEvalError(f"lm-eval task {name}: output_type {output_type!r} is not converted yet ({known})")


def _refuse_unsupported(name: str, task: Any) -> None:
    """One line naming the task and the field it uses that a row cannot reproduce exactly."""
    config = task.config
    _refuse_output_type(name, config.output_type)
    if config.output_type != "multiple_choice":
        return  # each other output type's builder refuses what it cannot reproduce (ROW_BUILDERS)
    metrics = [m["metric"] for m in (config.metric_list or [])]
    if config.process_results is not None and _known_results(config.process_results) is None:
        raise LmEvalError(f"lm-eval task {name}: process_results is the task's own Python function")
    if (config.repeats or 1) != 1:
        raise LmEvalError(f"lm-eval task {name}: repeats {config.repeats} (one answer per request only)")
    other = [m for m in metrics if not isinstance(m, str) or m not in SUPPORTED_METRICS]
    if other:
        known = ", ".join(sorted(SUPPORTED_METRICS))
        raise LmEvalError(f"lm-eval task {name}: metric_list has {other[0]!r} ({known} only)")
    if getattr(task, "multiple_input", False) and set(metrics) - {"acc"}:
        # lm-eval divides by the lengths of doc_to_choice's texts, which a row's choices are not
        raise LmEvalError(
            f"lm-eval task {name}: metric_list has {sorted(set(metrics) - {'acc'})[0]!r} with "
            "multiple_input (acc only)"
        )
    if config.process_results is not None and metrics != ["acc"]:
        raise LmEvalError(
            f"lm-eval task {name}: metric_list has {metrics!r} with its process_results (acc only)"
        )
    filters = config.filter_list
    if filters:
        raise LmEvalError(f"lm-eval task {name}: filter_list is not converted for multiple_choice")


# The process_results functions of lm-eval's own tasks that a row reproduces exactly: (the folder of the
# task's utils.py, the function's name) -> what the row does instead of lm-eval's default multiple_choice
# results. TruthfulQA MC2: the true answers' share of the probability (the choices' `gold_mass`).
KNOWN_PROCESS_RESULTS: dict[tuple[str, str], str] = {("truthfulqa", "process_results_mc2"): "gold_mass"}


def _known_results(function: Any) -> str | None:
    import inspect

    try:
        folder = Path(inspect.getfile(function)).parent.name
    except TypeError:
        return None
    return KNOWN_PROCESS_RESULTS.get((folder, str(getattr(function, "__name__", ""))))


def _version(task: Any) -> Any:
    metadata = task.config.metadata or {}
    return metadata.get("version") if isinstance(metadata, Mapping) else None


def origin(name: str, task: Any, *, fingerprint: str | None, lm_eval_version: str) -> dict[str, Any]:
    """The lm_eval block every row of the task carries (each adds its doc_id): the task, its version, the
    lm-eval version, shots, seed, the data's sha256, and its metrics, each with the aggregation lm-eval
    gives it (summaries.lm_eval_summary reports them so) and whether higher is better."""
    from lm_eval.api.registry import AGGREGATION_REGISTRY

    names = {fn: key for key, fn in AGGREGATION_REGISTRY.items()}
    metrics = [str(m["metric"]) for m in (task.config.metric_list or [])] or ["acc"]
    aggregations = task.aggregation()
    higher = task.higher_is_better()
    return {
        "task": name,
        "version": _version(task),
        "lm_eval_version": lm_eval_version,
        "num_fewshot": int(task.config.num_fewshot or 0),
        "fewshot_seed": FEWSHOT_SEED,
        "metrics": metrics,
        "aggregation": {m: names.get(aggregations.get(m), "mean") for m in metrics},
        "higher_is_better": {m: bool(higher.get(m, True)) for m in metrics},
        "data_sha256": fingerprint,
    }


def _choice_rows(name: str, task: Any, block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One multiple_choice row per document, from the requests lm-eval built for it: its choices after one
    context, or (multiple_input: WinoGrande) each choice completing the context, one continuation after
    them all; one right choice, several (multiple_target), or TruthfulQA MC2's true answers' share."""
    delimiter = str(task.config.target_delimiter)
    metrics = list(block["metrics"])
    in_context = bool(getattr(task, "multiple_input", False))
    results = None if task.config.process_results is None else _known_results(task.config.process_results)
    rows = []
    for doc_id, instances in by_document(task):
        doc = instances[0].doc
        where = f"lm-eval task {name}, document {doc_id}"
        try:
            choices = [str(c) for c in task.doc_to_choice(doc)]
            gold = task.doc_to_text(doc) if in_context else task.doc_to_target(doc)
            target = str(task.doc_to_target(doc)) if in_context else None
            if results == "gold_mass":  # process_results_mc2 reads the labels from the document itself
                gold = [i for i, label in enumerate(doc["mc2_targets"]["labels"]) if label == 1]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LmEvalError(f"{where}: lacks what the task reads: {_one_line(exc)}") from None
        contexts = [str(i.arguments[0]) for i in instances]
        continuations = [str(i.arguments[1]) for i in instances]
        extra: dict[str, Any] = {}
        if in_context:
            # Each request's context is the same few-shot text and sentence start, then a choice: the
            # row's input is what they share, its choices what follows, its continuation the rest.
            context = _shared_prefix(contexts)
            choices = [c[len(context) :] for c in contexts]
            if continuations != [delimiter + str(target)] * len(contexts) or not all(choices):
                raise LmEvalError(f"{where}: its requests are not each choice's context + one continuation")
            extra = {"choices_in_context": True, "continuation": str(target)}
        else:
            if len(set(contexts)) != 1:
                raise LmEvalError(f"{where}: its choices have different contexts")
            context = contexts[0]
            if continuations != [delimiter + c for c in choices]:
                raise LmEvalError(f"{where}: its requests are not target_delimiter + each choice")
        golds = _gold_positions(gold, choices, where)
        if len(set(choices)) != len(choices) or not all(c.strip() for c in choices):
            raise LmEvalError(f"{where}: its choices repeat or are empty: {choices!r}")
        if not context:
            raise LmEvalError(f"{where}: its context is empty")
        answer: dict[str, Any] = (
            {"answer_index": golds[0]} if len(golds) == 1 and results is None else {"answer_indices": golds}
        )
        rows.append(
            {
                "id": row_id(name, doc_id),
                # Every row needs one; a completion row's is not sent: it says what the row asks.
                "instruction": f"lm-eval task {name}: the choice most likely to follow the input.",
                "input": context,
                "expected_output": choices[golds[0]],
                "evaluation_type": "multiple_choice",
                "evaluation_config": {
                    "choices": choices,
                    **answer,
                    **({"gold_mass": True} if results == "gold_mass" else {}),
                    "prompt_mode": "completion",
                    "target_delimiter": delimiter,
                    **extra,
                    "normalize": "char" if metrics[0] == "acc_norm" else "sum",
                    "lm_eval": {**block, "doc_id": doc_id},
                },
                # Every row needs one; lm-eval's tasks grade none (the converter's, like HumanEval's).
                "difficulty": "medium",
            }
        )
    return rows


def _shared_prefix(texts: Sequence[str]) -> str:
    """The longest text every one of them starts with (character by character: these are not paths)."""
    first = texts[0]
    end = len(first)
    for text in texts[1:]:
        end = min(end, len(text))
        end = next((i for i in range(end) if text[i] != first[i]), end)
    return first[:end]


def _gold_positions(gold: Any, choices: Sequence[str], where: str) -> list[int]:
    """The right choices' positions from doc_to_target (an index, a choice's text, or a list of them)."""
    found = []
    for one in gold if isinstance(gold, list) else [gold]:
        if isinstance(one, str):
            one = choices.index(one) if one in choices else -1
        if isinstance(one, bool) or not isinstance(one, int) or not 0 <= one < len(choices):
            raise LmEvalError(f"{where}: doc_to_target gives {gold!r}, not one of its {len(choices)} choices")
        found.append(one)
    if not found or len(set(found)) != len(found):
        raise LmEvalError(f"{where}: doc_to_target gives {gold!r}: no right choice, or one twice")
    return found


def convert_tasks(
    names: Sequence[str],
    *,
    num_fewshot: int | None = None,
    limit: int | None = None,
    data_files: Mapping[str, Path] | None = None,
    data_dir: Path | None = None,
    group_file: bool = False,
    include_path: Path | None = None,
) -> list[TaskRows]:
    """Every task's rows (a group's subtasks each their own file; with group_file, a group's in one file
    named after it, so that one gate decides on the whole group), built by lm-eval as simple_evaluate
    builds them; LmEvalError before anything is returned if any task cannot be converted exactly."""
    lm_eval, task_manager = _lm_eval()
    import numpy as np

    version = str(getattr(lm_eval, "__version__", "unknown"))
    manager = _task_manager(task_manager, include_path)
    requested = {
        name: load_for_lm_eval([name], manager, data_files=data_files, data_dir=data_dir) for name in names
    }
    built = [item for items in requested.values() for item in items]
    tasks = _leaves(built)
    groups = group_chains(built)
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
        files = _files_in(data_dir, name) if data_dir is not None else dict(data_files or {})
        block = origin(name, task, fingerprint=fingerprint(files) if files else None, lm_eval_version=version)
        if groups.get(name):
            block["groups"] = groups[name]
        rows = ROW_BUILDERS[str(task.config.output_type)](name, task, block)
        if not rows:
            raise LmEvalError(f"lm-eval task {name}: its data has no documents")
        out.append(TaskRows(task=name, rows=rows, file_name=f"{name}.jsonl"))
    if not group_file:
        return out
    converted = {t.task: t for t in out}
    joined = []
    for name, items in requested.items():
        members = sorted(_leaves(items))
        if members == [name]:
            joined.append(converted[name])
        else:  # the group's tasks' rows, task by task: ids stay TASK-DOC, each row's lm_eval block its own
            rows = [row for member in members for row in converted[member].rows]
            joined.append(TaskRows(task=name, rows=rows, file_name=f"{name}.jsonl"))
    return joined


# Each converted output type's rows: (task name, lm-eval Task with its requests built, the lm_eval block) ->
# rows, refusing (LmEvalError) what a row cannot reproduce exactly.
ROW_BUILDERS: dict[str, Callable[[str, Any, Mapping[str, Any]], list[dict[str, Any]]]] = {
    "multiple_choice": _choice_rows,
    "generate_until": generate_rows,  # lm_eval_generate.py
    "loglikelihood": likelihood_rows,  # lm_eval_likelihood.py
    "loglikelihood_rolling": rolling_rows,
}
CONVERTED_OUTPUT_TYPES = tuple(ROW_BUILDERS)


def write_tasks(converted: Iterable[TaskRows], out: Path) -> list[Path]:
    """Each task's rows to OUT/TASK.jsonl (whole files, written once every task converted)."""
    from pytest_llmeval.results_file import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for task in converted:
        path = out / task.file_name
        write_text_atomic(path, rows_text(task.rows))
        written.append(path)
    return written
