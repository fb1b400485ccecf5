"""Benchmark files: JSONL rows -> Case dataclasses, validated, with `file:line` errors.

Pure: no pytest, no torch. The collector in items.py turns each Case into one test item.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard")

REQUIRED_FIELDS: tuple[str, ...] = (
    "id",
    "instruction",
    "input",
    "expected_output",
    "evaluation_type",
    "difficulty",
)
# `system`: the row's own system prompt (prompts.py: the row is the most specific layer of its prompt).
# `metrics`: more evaluation types scored on the same output (Metric); the row's own evaluation_type still
# decides whether it passes.
OPTIONAL_FIELDS: tuple[str, ...] = ("evaluation_config", "tags", "system", "metrics")
# evaluation_config keys about how the run treats the row, not how it is scored: checked here and kept
# apart (Case.run_options), so that no scorer sees them. sequential: false opts the file out of
# --llmeval-sequential; prompt_template is the row's own Jinja prompt template (prompts.py).
RUN_KEYS: dict[str, type] = {"sequential": bool, "prompt_template": str}
# `input` may be empty: instruction-only prompts are common in the LocoLLM format.
MAY_BE_EMPTY: frozenset[str] = frozenset({"input"})

# Ids become the last part of a pytest node id (`file::id`): "::", "/", whitespace and brackets would make
# node ids ambiguous for -k, --lf and xdist, so they are refused at collection.
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")

# Rows nested deeper than this are refused as a problem of their line. json.loads recurses once per level
# and raises RecursionError near the interpreter's limit, at a depth that depends on how deep the caller's
# stack already is (pytest's is deep); a fixed bound far above any real row gives the same verdict everywhere
# and leaves room for the code that walks the values later (repr and json.dumps in messages, results.json).
MAX_DEPTH = 64
_TOO_DEEP = f"invalid JSON: nested too deeply (more than {MAX_DEPTH} levels)"
# A lone surrogate ("\ud800" escaped in a string) is valid JSON but not text: it cannot be written as UTF-8
# (results.json, the terminal) nor tokenized, so it is refused where it is read, not where it would crash.
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how JSON text spells one

# A validator raises ValueError with a one-line reason when an evaluation_config is invalid.
ConfigValidator = Callable[[Mapping[str, Any]], None]
# (evaluation_config) -> (text fields that may be empty, fields that must not be empty), for evaluation
# types that read other fields than a generation row does (a perplexity row scores one text).
FieldRule = Callable[[Mapping[str, Any]], tuple[frozenset[str], frozenset[str]]]
# (evaluation_config, the row object) -> None, raising ValueError: checks that need the config and the row.
RowValidator = Callable[[Mapping[str, Any], Mapping[str, Any]], None]


@dataclass(frozen=True)
class Metric:
    """One more evaluation type a row is scored by, on the same output as its own (a row's `metrics`)."""

    evaluation_type: str
    evaluation_config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One benchmark row."""

    id: str
    instruction: str
    input: str
    expected_output: str
    evaluation_type: str
    difficulty: str
    line: int  # 1-based line number in the file, for error messages
    evaluation_config: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    run_options: Mapping[str, Any] = field(default_factory=dict)  # RUN_KEYS found in evaluation_config
    system: str | None = None  # the row's own system prompt
    # More metrics on the same output, reported beside the row's own score; evaluation_type decides the pass.
    metrics: tuple[Metric, ...] = ()
    # Every reference when expected_output was a list (its first is expected_output, which whatever shows or
    # prompts with the expected answer uses); filled with (expected_output,) when not given.
    references: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.references:
            object.__setattr__(self, "references", (self.expected_output,))
        elif self.references[0] != self.expected_output:
            raise ValueError("references[0] must be expected_output")

    @property
    def expected(self) -> str | tuple[str, ...]:
        """What a scorer compares with: expected_output, or the tuple of references when there are several
        (only a type whose ScorerSpec takes references gets several: checked at collection)."""
        return self.expected_output if len(self.references) == 1 else self.references


@dataclass(frozen=True)
class Benchmark:
    """A parsed benchmark file."""

    path: Path
    sha256: str  # "sha256:<hex>" of the file's bytes, as results.json reports it
    cases: tuple[Case, ...]


class BenchmarkError(Exception):
    """A benchmark file is invalid; `problems` holds every `file:line: reason` found."""

    def __init__(self, path: Path, problems: list[tuple[int, str]]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(f"{path}:{line}: {reason}" for line, reason in problems))


class JsonlDecodeError(ValueError):
    """A JSONL file's bytes are not UTF-8: `line` holds the first bad byte."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


def jsonl_text(data: bytes) -> str:
    """The text of a JSONL file's bytes; raises JsonlDecodeError naming the line of the first bad byte."""
    try:
        # utf-8-sig drops a leading BOM, which editors on Windows like to write.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # utf-8-sig counts positions after the BOM it skipped.
        offset = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        raise JsonlDecodeError(data[:offset].count(b"\n") + 1, f"not valid UTF-8 ({exc.reason})") from None


def jsonl_objects(text: str) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(line number, object, None) for every JSON-object line, (line, None, reason) for a bad one.

    Blank lines are skipped and CRLF accepted. Only "\\n" ends a row: splitlines() would also split on
    \\x0b, \\x1c and friends inside JSON strings. Every JSONL reader of the project goes through here.
    """
    for lineno, raw in enumerate(text.split("\n"), start=1):
        row = raw.rstrip("\r")
        if not row.strip():
            continue
        try:
            obj = json.loads(row)
        except json.JSONDecodeError as exc:
            yield lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
            continue
        except RecursionError:
            yield lineno, None, _TOO_DEEP
            continue
        except ValueError:
            # Not a syntax error: int() refuses a number with more digits than this limit (CVE-2020-10735).
            limit = sys.get_int_max_str_digits()
            yield lineno, None, f"invalid JSON: a number with more than {limit} digits"
            continue
        if not isinstance(obj, dict):
            yield lineno, None, f"expected a JSON object, got {_json_type(obj)}"
            continue
        # Walked only when the line could hold either fault: a lone surrogate comes from a \uD800-style
        # escape (the text itself is decoded UTF-8), and nesting past MAX_DEPTH needs that many brackets.
        if row.count("{") + row.count("[") > MAX_DEPTH or _SURROGATE_ESCAPE.search(row):
            unusable = _unusable(obj)
            if unusable is not None:
                yield lineno, None, unusable
                continue
        yield lineno, obj, None


def _unusable(obj: dict[str, Any]) -> str | None:
    """Why a parsed line cannot be used although it is JSON: nested too deeply, or a lone surrogate."""
    # A loop, not recursion: the point is to refuse what would overflow the stack of recursive code.
    pending: list[tuple[Any, int]] = [(obj, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            bad = _SURROGATE.search(value)
            if bad is not None:
                return f"a string holds a lone surrogate {ascii(bad.group())[1:-1]} (not Unicode text)"
        elif isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return _TOO_DEEP
            children = [*value, *value.values()] if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in children)
    return None


def file_hash(data: bytes) -> str:
    """The content hash results.json records for a benchmark file."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def load_benchmark(
    path: Path,
    validators: Mapping[str, ConfigValidator],
    field_rules: Mapping[str, FieldRule] | None = None,
    row_validators: Mapping[str, RowValidator] | None = None,
    metric_types: Collection[str] = (),
    reference_types: Collection[str] = (),
) -> Benchmark:
    """Parse and validate a JSONL benchmark; raises BenchmarkError listing every bad line.

    metric_types: the evaluation types a row may name in `metrics` (those that score a generated text).
    reference_types: the evaluation types that take several references (expected_output a list)."""
    data = path.read_bytes()
    problems: list[tuple[int, str]] = []
    try:
        text = jsonl_text(data)
    except JsonlDecodeError as exc:
        raise BenchmarkError(path, [(exc.line, exc.reason)]) from None

    cases: list[Case] = []
    first_line_of_id: dict[str, int] = {}
    for lineno, obj, bad in jsonl_objects(text):
        if obj is None:
            problems.append((lineno, str(bad)))
            continue
        case, reasons = _parse_row(
            obj, lineno, validators, field_rules or {}, row_validators or {}, metric_types, reference_types
        )
        problems.extend((lineno, r) for r in reasons)
        if case is None:
            continue
        if case.id in first_line_of_id:
            problems.append(
                (lineno, f"duplicate id '{case.id}' (first used on line {first_line_of_id[case.id]})")
            )
            continue
        first_line_of_id[case.id] = lineno
        cases.append(case)

    if not problems and not cases:
        problems.append((1, "empty benchmark file: expected one JSON object per line"))
    if problems:
        raise BenchmarkError(path, problems)
    return Benchmark(path=path, sha256=file_hash(data), cases=tuple(cases))


def _parse_row(
    obj: dict[str, Any],
    lineno: int,
    validators: Mapping[str, ConfigValidator],
    field_rules: Mapping[str, FieldRule],
    row_validators: Mapping[str, RowValidator],
    metric_types: Collection[str] = (),
    reference_types: Collection[str] = (),
) -> tuple[Case | None, list[str]]:
    """Validate one row; returns the Case (None when invalid) and every reason it is invalid."""
    reasons: list[str] = []
    known = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS)
    for key in obj:
        if key not in known:
            # repr: a value from the file is shown escaped, so that a "\n" in it cannot split the message.
            reasons.append(f"unknown field {key!r} (known: {', '.join(REQUIRED_FIELDS + OPTIONAL_FIELDS)})")
    may_be_empty, must_have = MAY_BE_EMPTY, frozenset[str]()
    evaluation_type = obj.get("evaluation_type")
    rule = field_rules.get(evaluation_type) if isinstance(evaluation_type, str) else None
    config = obj.get("evaluation_config", {})
    if rule is not None and isinstance(config, dict):
        try:
            may_be_empty, must_have = rule(config)
        except (KeyError, TypeError, ValueError):
            pass  # an invalid config is reported by its validator below
    for key in REQUIRED_FIELDS:
        if key not in obj:
            reasons.append(f"missing required field '{key}'")
        elif key == "expected_output" and isinstance(obj[key], list) and reference_types:
            reasons.extend(_reference_problems(obj[key], evaluation_type, validators, reference_types))
        elif not isinstance(obj[key], str):
            reasons.append(f"field '{key}' must be a string, got {_json_type(obj[key])}")
        elif (key not in may_be_empty or key in must_have) and not obj[key].strip():
            reasons.append(f"field '{key}' is empty")
    if reasons:
        return None, reasons

    row_id: str = obj["id"]
    if not _ID_RE.fullmatch(row_id):
        reasons.append(
            f"invalid id {row_id!r}: use letters, digits and . _ + - (no spaces, '/' or '::'), "
            "starting with a letter or digit"
        )
    difficulty: str = obj["difficulty"]
    if difficulty not in DIFFICULTIES:
        reasons.append(f"unknown difficulty {difficulty!r} (expected one of: {', '.join(DIFFICULTIES)})")

    if not isinstance(config, dict):
        reasons.append(f"field 'evaluation_config' must be an object, got {_json_type(config)}")
        config = {}
    run_options = {key: config[key] for key in RUN_KEYS if key in config}
    for key, kind in RUN_KEYS.items():
        if key in run_options and not isinstance(run_options[key], kind):
            what = "true or false" if kind is bool else "a string"
            reasons.append(f"evaluation_config: {key} must be {what}, got {json.dumps(run_options[key])}")
    system = obj.get("system")
    if system is not None and not isinstance(system, str):
        reasons.append(f"field 'system' must be a string, got {_json_type(system)}")
    config = {k: v for k, v in config.items() if k not in RUN_KEYS}
    validator = validators.get(obj["evaluation_type"])
    if validator is None:
        reasons.append(
            f"unknown evaluation_type {evaluation_type!r} (supported: {', '.join(sorted(validators))})"
        )
    else:
        try:
            validator(config)
            row_validator = row_validators.get(obj["evaluation_type"])
            if row_validator is not None:
                row_validator(config, obj)
        except ValueError as exc:
            reasons.append(f"evaluation_config: {exc}")

    metrics, why = _metrics(obj, validators, metric_types)
    reasons.extend(why)

    tags = obj.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t.strip() for t in tags):
        reasons.append(f"field 'tags' must be a list of non-empty strings, got {json.dumps(tags)}")
        tags = []

    if reasons:
        return None, reasons
    given = obj["expected_output"]
    references = (given,) if isinstance(given, str) else tuple(given)  # a one-item list is the string
    return (
        Case(
            id=row_id,
            instruction=obj["instruction"],
            input=obj["input"],
            expected_output=references[0],
            evaluation_type=obj["evaluation_type"],
            difficulty=difficulty,
            line=lineno,
            evaluation_config=config,
            tags=tuple(tags),
            run_options=run_options,
            system=system,
            metrics=metrics,
            references=references,
        ),
        [],
    )


def _reference_problems(
    value: list[Any],
    evaluation_type: Any,
    validators: Mapping[str, ConfigValidator],
    accepting: Collection[str],
) -> list[str]:
    """Why a list expected_output is invalid: empty, an item not a non-empty string, or a type that takes
    one reference (an unknown type is reported by itself)."""
    if not value:
        return ["field 'expected_output' is an empty list: give the expected answer, or a list of references"]
    for i, item in enumerate(value):
        if not isinstance(item, str):
            return [f"field 'expected_output': item [{i}] must be a string, got {_json_type(item)}"]
        if not item.strip():
            return [f"field 'expected_output': item [{i}] is empty (each reference must hold text)"]
    if evaluation_type in validators and evaluation_type not in accepting:
        return [
            f"field 'expected_output' is a list, but evaluation_type {evaluation_type!r} takes one expected "
            f"answer: give a string (a list of references suits {', '.join(sorted(accepting))})"
        ]
    return []


def _metrics(
    obj: Mapping[str, Any], validators: Mapping[str, ConfigValidator], metric_types: Collection[str]
) -> tuple[tuple[Metric, ...], list[str]]:
    """A row's `metrics`: each an evaluation type ("rouge") or {"evaluation_type", "evaluation_config"},
    validated like the row's own; returns them and every reason they are invalid."""
    raw = obj.get("metrics", [])
    if not isinstance(raw, list):
        return (), [f"field 'metrics' must be a list of evaluation types, got {_json_type(raw)}"]
    own = obj.get("evaluation_type")
    if raw and own not in metric_types:
        # A measured row (perplexity, multiple_choice) or a judged or run one has no one text to score.
        return (), [
            f"field 'metrics': a {own} row generates no text the metrics could score; "
            f"metrics go on rows of {', '.join(sorted(metric_types))}"
        ]
    found: list[Metric] = []
    reasons: list[str] = []
    for i, entry in enumerate(raw):
        kind: Any
        config: Any
        if isinstance(entry, str):
            kind, config = entry, {}
        elif isinstance(entry, dict) and set(entry) <= {"evaluation_type", "evaluation_config"}:
            kind, config = entry.get("evaluation_type"), entry.get("evaluation_config", {})
        else:
            reasons.append(
                f"metrics[{i}] must be an evaluation type or an object with evaluation_type and "
                f"evaluation_config, got {json.dumps(entry)[:80]}"
            )
            continue
        if kind not in metric_types:
            reasons.append(
                f"metrics[{i}]: {json.dumps(kind)[:80]} cannot score a row's output "
                f"(one of: {', '.join(sorted(metric_types))})"
            )
            continue
        if kind == own or any(m.evaluation_type == kind for m in found):
            reasons.append(f"metrics[{i}]: {kind} is already scored on this row (each type once)")
            continue
        if not isinstance(config, dict):
            reasons.append(f"metrics[{i}]: evaluation_config must be an object, got {_json_type(config)}")
            continue
        try:
            validators[kind](config)
        except ValueError as exc:
            reasons.append(f"metrics[{i}] ({kind}): evaluation_config: {exc}")
            continue
        found.append(Metric(kind, config))
    return tuple(found), reasons


def _json_type(value: object) -> str:
    """The JSON name of a Python value's type, for messages users read against their file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


@dataclass(frozen=True)
class Prediction:
    """An output produced elsewhere (an API model, another harness), scored like a generated one."""

    id: str
    # A list: n sampled outputs of a row (pass@k); the first plays the row's one output elsewhere.
    prediction: str | tuple[str, ...]
    base_prediction: str | tuple[str, ...] | None
    benchmark: str | None  # optional: which benchmark file the id belongs to (a path suffix)
    line: int
    model: str | None = None  # optional: the model whose outputs these are (the run's history identity)


# The fields a predictions line may have: any other is a typo (`base_predicton`) that would otherwise make a
# base-only run of an adapter's outputs, its gates skipped.
PREDICTION_FIELDS = ("id", "prediction", "base_prediction", "benchmark", "model")


def load_predictions(path: Path) -> list[Prediction]:
    """Parse a predictions JSONL ({id, prediction, base_prediction?, benchmark?}); errors name file:line.

    prediction and base_prediction are strings, or non-empty lists of strings: a row's n samples (pass@k)."""
    problems: list[str] = []
    found: list[Prediction] = []
    seen: dict[tuple[str | None, str], int] = {}
    try:
        text = jsonl_text(path.read_bytes())
    except JsonlDecodeError as exc:
        raise ValueError(f"{path}:{exc.line}: {exc.reason}") from None
    for lineno, obj, reason in jsonl_objects(text):
        if obj is None:
            problems.append(f"{path}:{lineno}: {reason}")
            continue
        unknown = [key for key in obj if key not in PREDICTION_FIELDS]
        if unknown:
            close = difflib.get_close_matches(unknown[0], PREDICTION_FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                f"{path}:{lineno}: unknown field {unknown[0]!r}{hint}; a line has "
                f"{', '.join(PREDICTION_FIELDS)}"
            )
            continue
        bad = [
            key
            for key in ("id", "prediction", "base_prediction", "benchmark", "model")
            if (key in obj or key in ("id", "prediction"))
            and not isinstance(obj.get(key), str)
            and not (key in ("prediction", "base_prediction") and _sample_list(obj.get(key)))
        ]
        if bad:
            problems.append(
                f"{path}:{lineno}: {', '.join(bad)} must be strings, or for predictions non-empty lists of "
                "strings (one per sample) (id and prediction required)"
            )
            continue
        key = (obj.get("benchmark"), obj["id"])
        if key in seen:
            problems.append(f"{path}:{lineno}: duplicate id {obj['id']!r} (first on line {seen[key]})")
            continue
        seen[key] = lineno
        found.append(
            Prediction(
                obj["id"],
                _as_saved(obj["prediction"]),
                None if obj.get("base_prediction") is None else _as_saved(obj["base_prediction"]),
                obj.get("benchmark"),
                lineno,
                obj.get("model"),
            )
        )
    models = {p.model for p in found}
    if len(models) > 1:
        first = next(p for p in found if p.model != found[0].model)
        problems.append(
            f"{path}:{first.line}: model {first.model!r} differs from line {found[0].line}'s "
            f"{found[0].model!r}: one predictions file holds one model's outputs"
        )
    if not found and not problems:
        problems.append(f"{path}:1: no predictions in the file")
    if problems:
        raise ValueError("\n".join(problems))
    return found


def predictions_identity(path: Path, predictions: Sequence[Prediction]) -> str:
    """Who saved predictions are, for the history: the `model` their lines name, else the file's name and
    a hash of the outputs it holds (two files of different outputs are never one model's runs)."""
    if predictions and predictions[0].model is not None:
        return predictions[0].model
    outputs = sorted(
        (p.benchmark or "", p.id, json.dumps(p.prediction), json.dumps(p.base_prediction))
        for p in predictions
    )
    digest = hashlib.sha256(json.dumps(outputs, ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"{path.name}@{digest[:12]}"


def _sample_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _as_saved(value: str | list[str]) -> str | tuple[str, ...]:
    return value if isinstance(value, str) else tuple(value)
