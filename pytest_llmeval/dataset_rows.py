"""Benchmark rows from a dataset that is not an lm-eval task (`pytest-llmeval convert dataset`): a field
mapping (FieldMap) names, in every record, the row's input, its expected answer, its choices, its id and a
tag.

`read_source` opens SOURCE: a local file (.parquet, .json, .jsonl, .csv, .arrow), a folder `save_to_disk`
wrote (one split's, or a DatasetDict's: then `split` picks one), or a hub dataset id (`subset` is its config
name), and yields every record with where it is. JSON and JSONL files go through the project's one JSON
reader (convert.read_records), so that a bad record is named by its line and no `datasets` is needed; the
other formats through `datasets`, as `convert lm-eval --data-files` reads them (data_files.py). A hub dataset
comes from `datasets`' cache when HF_DATASETS_OFFLINE (or HF_HUB_OFFLINE) is set.

`dataset_rows` maps the records: without choices, rows of a text type (exact_match by default; the gold
a string, a number, or a list of references); with choices, multiple_choice rows shaped as the hand-written
and lm-eval-converted ones are (`choices` and the `answer_index` of the gold, given as a position, a
choice's text or its letter). Each problem of a record raises ConvertError naming the record (`file:line`,
or `source[index]`, the index from 0) and the field, before anything is written.

Pure: no pytest, no torch; `datasets` only inside data_files' readers.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from pytest_llmeval.benchmark import _ID_RE, DIFFICULTIES, _json_type
from pytest_llmeval.convert import ConvertError, _check_encodable, _Ids, read_records
from pytest_llmeval.data_files import (
    DATA_FORMATS,
    DataFileError,
    arrow_files,
    load_hub,
    load_split,
    saved_splits,
)
from pytest_llmeval.scorers import METRIC_TYPES, SCORERS

__all__ = ["CHOICE_TYPE", "DEFAULT_TYPE", "TEXT_TYPES", "FieldMap", "Source", "dataset_rows", "read_source"]

# The types a row can be given with nothing but its expected answer: those scoring one generated text with
# no resource of the row's own (the registry's METRIC_TYPES). Any other (a judge's rubric, a code row's
# tests, a perplexity row's threshold) needs configuration a field mapping does not carry.
TEXT_TYPES: tuple[str, ...] = tuple(sorted(METRIC_TYPES))
DEFAULT_TYPE = "exact_match"
# What --choices makes: the rows whose choices are scored, not generated.
CHOICE_TYPE = "multiple_choice"
LETTERS = string.ascii_uppercase
# A hub id as `datasets.load_dataset` takes one: NAME or OWNER/NAME (only when no such local path exists).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
# How many of a record's field names a "missing field" message lists.
_SHOWN_FIELDS = 20


@dataclass(frozen=True)
class FieldMap:
    """Which field of a record is each part of its row, and what every row shares; ValueError, naming the
    option, when the mapping cannot make valid rows.

    A field name with dots (`answers.text`) reads a nested object's field, unless the record has a field of
    that very name. `choices` is one field holding the list of choices, or several fields, one choice each
    (a CSV's `A,B,C,D` columns). Without `id`, rows are numbered `<id_prefix>-<n>`; with it and an
    `id_prefix`, the ids are `<id_prefix>-<value>`.
    """

    input: str
    expected: str
    instruction: str
    choices: tuple[str, ...] = ()
    id: str | None = None
    id_prefix: str | None = None
    tag: str | None = None
    evaluation_type: str | None = None  # default: exact_match, multiple_choice with choices
    difficulty: str = "medium"

    def __post_init__(self) -> None:
        if not self.input:
            raise ValueError("dataset needs --input=FIELD: the field that is each row's input")
        if not self.expected:
            raise ValueError(
                "dataset needs --expected=FIELD: the field that holds each row's expected answer"
            )
        if not self.instruction.strip():
            raise ValueError(
                "dataset needs --instruction=TEXT: every row needs one (what the model is asked)"
            )
        _check_option_text(self.instruction, "--instruction")
        if any(not name for name in self.choices) or len(set(self.choices)) != len(self.choices):
            raise ValueError(
                f"--choices={','.join(self.choices)}: one list field, or distinct fields separated by commas"
            )
        kind = self.evaluation_type or (CHOICE_TYPE if self.choices else DEFAULT_TYPE)
        if self.choices and kind != CHOICE_TYPE:
            raise ValueError(f"--choices makes {CHOICE_TYPE} rows: leave out --type={kind}")
        if not self.choices and kind == CHOICE_TYPE:
            raise ValueError(f"--type={CHOICE_TYPE} needs --choices=FIELD (the list of choices)")
        if kind not in TEXT_TYPES and kind != CHOICE_TYPE:
            raise ValueError(
                f"--type={kind}: one of {', '.join(TEXT_TYPES)}, or {CHOICE_TYPE} with --choices (the other "
                "types need configuration a field mapping does not carry)"
            )
        object.__setattr__(self, "evaluation_type", kind)
        if self.id_prefix is not None and not _ID_RE.fullmatch(self.id_prefix):
            raise ValueError(
                f"--id-prefix={self.id_prefix}: use letters, digits and . _ + -, starting with a letter or "
                "digit"
            )
        if self.difficulty not in DIFFICULTIES:
            raise ValueError(
                f"--difficulty must be one of {', '.join(DIFFICULTIES)}, not {self.difficulty!r}"
            )


@dataclass(frozen=True)
class Source:
    """An opened SOURCE: what the converter says it read, the tag and id prefix its rows get, its number of
    records (the width of the numbered ids: --limit does not change them) and (where, record) for each."""

    label: str
    tag: str
    prefix: str
    count: int
    records: Iterable[tuple[str, Mapping[str, Any]]]


def read_source(source: str, *, subset: str | None = None, split: str | None = None) -> Source:
    """SOURCE opened as a local file or folder when one is there, else as a hub dataset id; ConvertError
    naming it when it cannot be read."""
    path = Path(source)
    try:
        if path.exists():
            if subset is not None:
                raise ConvertError(source, "--subset is for a hub dataset id (a local file or folder is one)")
            return _local(path, split)
        if path.suffix in DATA_FORMATS or not _HUB_ID.fullmatch(source):
            raise ConvertError(source, "no such file or folder")
        return _hub(source, subset, split)
    except DataFileError as exc:
        raise ConvertError(exc.where, exc.reason) from None


def _local(path: Path, split: str | None) -> Source:
    if path.is_dir():
        splits = saved_splits(path)
        if splits is not None:  # a DatasetDict: a folder per split
            chosen = _pick(str(path), splits, split)
            return _from_dataset(
                load_split(path / chosen),
                f"{path} (split {chosen})",
                path / chosen,
                f"{path.name}/{chosen}",
                prefix=path.name,
            )
        if not arrow_files(path):
            raise ConvertError(
                str(path),
                "is a folder of neither kind save_to_disk writes (a split's .arrow files, or a DatasetDict's "
                "dataset_dict.json and a folder per split)",
            )
    if split is not None:
        raise ConvertError(
            str(path),
            "--split is for a DatasetDict's save_to_disk folder or a hub dataset: this is one split",
        )
    if path.is_file() and path.suffix in (".json", ".jsonl"):
        records = list(read_records(path))
        return Source(str(path), path.name, _prefix(path.stem), len(records), records)
    return _from_dataset(load_split(path), str(path), path, path.name)


def _hub(name: str, subset: str | None, split: str | None) -> Source:
    loaded = load_hub(name, subset, split)
    if split is None:  # load_dataset gave every split (a DatasetDict)
        split = _pick(name, list(loaded), None)
        loaded = loaded[split]
    label = ":".join([name, *([subset] if subset else []), split])
    return _from_dataset(loaded, label, label, label, prefix=name.rsplit("/", 1)[-1])


def _pick(where: str, splits: Sequence[str], split: str | None) -> str:
    """The split to read: the one named, else the only one."""
    if split is None:
        if len(splits) == 1:
            return splits[0]
        raise ConvertError(where, f"holds the splits {', '.join(splits)}: give --split=NAME")
    if split not in splits:
        raise ConvertError(where, f"has no split {split!r} (its splits: {', '.join(splits)})")
    return split


def _from_dataset(
    dataset: Any, label: str, where: Path | str, tag: str, *, prefix: str | None = None
) -> Source:
    count = len(dataset)
    if count == 0:
        raise ConvertError(label, "no records")
    records = ((f"{where}[{i}]", record) for i, record in enumerate(dataset))
    name = prefix if prefix is not None else Path(where).stem
    return Source(label, tag, _prefix(name), count, records)


def _prefix(name: str) -> str:
    """An id prefix from a file's or dataset's name: what a row id may not hold becomes '-'."""
    cleaned = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", re.sub(r"[^A-Za-z0-9._+-]+", "-", name))
    return cleaned or "row"


def dataset_rows(source: Source, fields: FieldMap, *, limit: int | None = None) -> list[dict[str, Any]]:
    """One row per record (the first `limit` ones), as `fields` maps it; ConvertError naming the record and
    the field at the first record that cannot make a valid row."""
    kind = str(fields.evaluation_type)
    width = len(str(max(source.count - 1, 0)))
    prefix = fields.id_prefix or source.prefix
    hint = ": leave out --id to number the rows instead"
    ids = _Ids(field=fields.id or "id", hint=hint)
    rows: list[dict[str, Any]] = []
    for index, (where, record) in enumerate(islice(source.records, limit)):
        text = _text(_field(record, fields.input, "--input", where), fields.input, "--input", where)
        if fields.id is None:
            row_id = f"{prefix}-{index:0{width}d}"
        else:
            value = _text(_field(record, fields.id, "--id", where), fields.id, "--id", where)
            row_id = ids.add(f"{fields.id_prefix}-{value}" if fields.id_prefix else value, where, value)
        gold = _field(record, fields.expected, "--expected", where)
        config: dict[str, Any] = {}
        if fields.choices:
            choices = _choices(record, fields.choices, where)
            answer = _gold(gold, choices, fields.expected, where)
            # Both, as lm-eval's converted rows have them: the position decides, the text is for readers.
            expected: str | list[str] = choices[answer]
            config = {"choices": choices, "answer_index": answer}
        else:
            expected = _expected(gold, fields.expected, kind, where)
        # The source goes into the tags, as HumanEval's rows carry source:humaneval: a row has no other field
        # for where it came from.
        tags = [f"source:{source.tag}"]
        if fields.tag is not None:
            value = _text(_field(record, fields.tag, "--tag", where), fields.tag, "--tag", where)
            tags.append(f"{fields.tag}:{value}")  # key:value, a slice of its key in the results
        rows.append(
            {
                "id": row_id,
                "instruction": fields.instruction,
                "input": text,
                "expected_output": expected,
                "evaluation_type": kind,
                **({"evaluation_config": config} if config else {}),
                "difficulty": fields.difficulty,
                "tags": tags,
            }
        )
    if not rows:
        raise ConvertError(source.label, "no records")
    return rows


_MISSING = object()


def _field(record: Mapping[str, Any], name: str, option: str, where: str) -> Any:
    """The record's field `name` (dots reach into nested objects); ConvertError when it is absent or null."""
    value: Any = record.get(name, _MISSING)
    if value is _MISSING and "." in name:
        value = record
        for part in name.split("."):
            value = value.get(part, _MISSING) if isinstance(value, Mapping) else _MISSING
            if value is _MISSING:
                break
    if value is _MISSING:
        fields = sorted(str(key) for key in record)
        shown = ", ".join(fields[:_SHOWN_FIELDS]) + (", ..." if len(fields) > _SHOWN_FIELDS else "")
        raise ConvertError(
            where,
            f"missing field '{name}' ({option}): give {option}=FIELD, one of the record's: {shown or 'none'}",
        )
    if value is None:
        raise ConvertError(
            where, f"field '{name}' ({option}) is null: give the record a value, or leave it out"
        )
    return value


def _text(value: Any, name: str, option: str, where: str) -> str:
    """A string, or a number written as text (a CSV's or parquet's numeric column); never empty."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    elif isinstance(value, float) and math.isfinite(value):
        text = str(value)
    elif isinstance(value, float):  # json.loads takes NaN and Infinity
        raise ConvertError(where, f"field '{name}' ({option}) is {value}, not a value")
    else:
        raise ConvertError(
            where, f"field '{name}' ({option}) must be a string or a number, got {_kind(value)}"
        )
    if not text.strip():
        raise ConvertError(where, f"field '{name}' ({option}) is empty")
    _check_encodable(text, name, where)
    return text


def _expected(value: Any, name: str, kind: str, where: str) -> str | list[str]:
    """A text row's expected answer; a list is its references (each a right answer: SQuAD's answers.text)."""
    if not isinstance(value, list):
        return _text(value, name, "--expected", where)
    if not value:
        raise ConvertError(where, f"field '{name}' (--expected) is an empty list: a row needs an answer")
    if len(value) > 1 and not SCORERS[kind].references:
        raise ConvertError(where, f"field '{name}' (--expected) is a list, and {kind} takes one answer")
    texts = [_text(v, f"{name}[{i}]", "--expected", where) for i, v in enumerate(value)]
    return texts[0] if len(texts) == 1 else texts


def _choices(record: Mapping[str, Any], names: Sequence[str], where: str) -> list[str]:
    """The row's choices: one list field's items, or one field per choice."""
    if len(names) == 1:
        value = _field(record, names[0], "--choices", where)
        if not isinstance(value, list):
            raise ConvertError(
                where,
                f"field '{names[0]}' (--choices) must be a list of the choices, got {_kind(value)} "
                "(one field per choice: --choices=A,B,C,D)",
            )
        if len(value) < 2:
            raise ConvertError(
                where, f"field '{names[0]}' (--choices) holds {len(value)} choice: a row needs two or more"
            )
        names = [f"{names[0]}[{i}]" for i in range(len(value))]
    else:
        value = [_field(record, name, "--choices", where) for name in names]
    choices = [_text(v, name, "--choices", where) for v, name in zip(value, names, strict=True)]
    for later, choice in enumerate(choices):
        if choice in choices[:later]:
            first = names[choices.index(choice)]
            raise ConvertError(
                where,
                f"fields '{first}' and '{names[later]}' (--choices) are the same choice {choice!r}: "
                "a row's choices must differ",
            )
    return choices


def _gold(value: Any, choices: Sequence[str], name: str, where: str) -> int:
    """The gold choice's position, from a position (0-based), a choice's text or its letter (A, B, ...)."""
    n = len(choices)
    letters = LETTERS[:n]
    what = f"field '{name}' (--expected) {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not value.is_integer():
            raise ConvertError(where, f"{what} is not a choice's position (0 to {n - 1})")
        if not 0 <= value < n:
            raise ConvertError(where, f"{what} is out of range for {n} choices (positions 0 to {n - 1})")
        return int(value)
    if not isinstance(value, str):
        raise ConvertError(where, f"{what} must be a choice's position, text or letter, got {_kind(value)}")
    text = value.strip()
    by_text = [i for i, choice in enumerate(choices) if choice.strip() == text]
    by_letter = [letters.index(text)] if len(text) == 1 and text in letters else []
    found = sorted(set(by_text + by_letter))
    if len(found) == 1:
        return found[0]
    if found:
        raise ConvertError(
            where,
            f"{what} names choices {' and '.join(map(str, found))} (by text or by letter): give a position",
        )
    last = f", a letter A-{letters[-1]}" if letters else ""
    raise ConvertError(
        where, f"{what} is not among the choices: give a choice's text{last}, or a position 0 to {n - 1}"
    )


def _kind(value: Any) -> str:
    """A value's JSON type name, or its Python type's for what JSON has none of (a parquet timestamp)."""
    if value is None or isinstance(value, (str, bool, int, float, list, dict)):
        return _json_type(value)
    return type(value).__name__


def _check_option_text(text: str, option: str) -> None:
    # An argument of undecodable bytes arrives as lone surrogates (os.fsdecode): refused here, by option.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{option}: not valid UTF-8 text") from None
