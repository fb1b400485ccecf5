"""Reading a results.json back: the one validating reader (read_results) every command and the plugin
use. A document from disk is untrusted (a half-written file, a hand edit, another tool's output): every
field a reader of ours reads is checked for its kind before use (READ_FIELDS), and what is wrong is one
ResultsFileError naming the field. Pure: no pytest, no torch.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast


class ResultsFileError(ValueError):
    """A results.json that cannot be read, or is not one; the message names the file and says why."""


# What a results document read back may hold. Real ones nest about 8 levels and hold numbers far inside
# these bounds; a value past them (1e308, nested a thousand deep) is a damaged or hostile file, and would
# overflow a percentage or exhaust the stack in whatever reads it next (a report, a baseline comparison).
MAX_RESULTS_BYTES = 1 << 30
MAX_RESULTS_DEPTH = 64
MAX_RESULTS_NUMBER = 1e100


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def document_problem(document: Any) -> str | None:
    """What is wrong with a results document read back, in a few words naming the field; None when it
    holds what every reader of one relies on (a baseline comparison, the history, check, report)."""
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), list):
        return "no benchmarks list"
    # Every value of a large document is visited: its path is spelled out only for the one at fault
    # (issue 40: building each path's string was most of reading back a 10,000-row results.json).
    if not _sound(document):
        return _unsound_where(document)
    for i, bench in enumerate(document["benchmarks"]):
        if not isinstance(bench, dict) or not isinstance(bench.get("benchmark_file"), str):
            return f"benchmarks[{i}] has no benchmark_file"
    # The fields every reader relies on, checked in one walk that spells no place; only a document that
    # fails it is walked again, pattern by pattern, to name the first field at fault (issue 40).
    if _fields_fit(document, _field_tree()) and all(
        _score_missing(row) is None for bench in document["benchmarks"] for row in bench.get("rows", ())
    ):
        return None
    fields = _Fields(document)
    for pattern, kinds in READ_FIELDS:
        fits = _fits(kinds)
        for path, value in fields.found(pattern):
            if not fits(value):
                where = _spelled(path)
                return f"{where} is {_shown(value)}, not {' or '.join(_KIND_NAMES[k] for k in kinds)}"
    for pattern, keys in REQUIRED_FIELDS:
        for path, value in fields.found(pattern):
            for key in keys:
                if key not in value:
                    return f"{_spelled(path)} has no {key}"
    for path, row in fields.found(_ROW):
        missing = _score_missing(row)
        if missing is not None:
            return f"{_spelled(path)}.{missing}"
    return None


def _score_missing(row: dict[str, Any]) -> str | None:
    """What a row's scores lack that the corpus figures need (`models.base.score has no nll`), or None."""
    for name, given in row.get("models", {}).items():
        found = given.get("score")
        if not isinstance(found, dict):
            continue
        needed = ("value", *_SCORE_NEEDS.get(row["evaluation_type"], ()))
        if row["evaluation_type"] == "char_accuracy" and "scripts" in found:
            needed += ("aligned", "expected_chars", "output_chars")
        for key in needed:
            if found.get(key) is None:
                return f"models.{name}.score has no {key}"
        if row["evaluation_type"] == "perplexity":
            for script, share in (found.get("scripts") or {}).items():
                if share.get("nll") is None or share.get("n_chars") is None:
                    return f"models.{name}.score.scripts.{script} has no nll or n_chars"
    return None


@dataclass
class _FieldNode:
    """READ_FIELDS and REQUIRED_FIELDS as one tree: the tests of a place, the keys it must hold, and the
    places below it, named or `*`."""

    fits: list[Callable[[Any], bool]] = field(default_factory=list)
    required: tuple[str, ...] = ()
    named: dict[str, _FieldNode] = field(default_factory=dict)
    star: _FieldNode | None = None

    def below(self, part: str) -> _FieldNode:
        if part == "*":
            self.star = self.star or _FieldNode()
            return self.star
        return self.named.setdefault(part, _FieldNode())


@cache
def _field_tree() -> _FieldNode:
    root = _FieldNode()
    for pattern, kinds in READ_FIELDS:
        node = root
        for part in pattern.split("."):
            node = node.below(part)
        node.fits.append(_fits(kinds))
    for pattern, keys in REQUIRED_FIELDS:
        node = root
        for part in pattern.split("."):
            node = node.below(part)
        node.required += keys
    return root


def _fields_fit(value: Any, node: _FieldNode) -> bool:
    """Whether every field below `value` that READ_FIELDS and REQUIRED_FIELDS name is as they say: the
    same fields _Fields.found finds (a named key of an object; `*`: every value of an object or item of a
    list), without their places. False also where in doubt: the walk that names the fault then decides."""
    for fits in node.fits:
        if not fits(value):
            return False
    if isinstance(value, dict):
        for key in node.required:
            if key not in value:
                return False
        for key, child in node.named.items():
            if key in value and not _fields_fit(value[key], child):
                return False
        if node.star is not None:
            star = node.star
            return all(_fields_fit(item, star) for item in value.values())
    elif node.required:
        return False
    elif isinstance(value, list) and node.star is not None:
        star = node.star
        return all(_fields_fit(item, star) for item in value)
    return True


# The fields some reader of a results document relies on (the baseline comparison, the history, check,
# report, compare), each with the kinds of value it may hold when present; `*` is every key of an object
# or item of a list. Missing fields are each reader's business (most have a default); a field of another
# kind is a damaged document, refused here in one line naming it rather than a traceback deep in a reader.
_TRAINING = ("final_loss", "loss_stability", "n_steps", "n_logged", "convergence_step", "steps_to_95")
_COUNTS = ("trainable_params", "total_params", "base_params", "all_params")
_SCORE_NUMBERS = ("cross_entropy", "nll", "perplexity", "threshold")
_SCORE_COUNTS = ("n_tokens", "n_chars", "n_bytes", "aligned", "expected_chars", "output_chars")
_SCRIPT_NUMBERS = ("nll", "hits", "scored", "n_chars", "correct", "chars")
# What a row's score of a type must hold for the corpus figures (perplexity_summary) to be computed.
_SCORE_NEEDS = {"perplexity": ("cross_entropy", "nll", "perplexity", "n_tokens", "n_chars")}
_ROW = "benchmarks.*.rows.*"
READ_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("benchmarks.*.benchmark_hash", ("string", "null")),
    ("benchmarks.*.rows", ("list",)),
    ("benchmarks.*.gates", ("object",)),
    ("benchmarks.*.gates.*", ("object",)),
    ("benchmarks.*.gates.*.status", ("string",)),
    (_ROW, ("object",)),
    (f"{_ROW}.id", ("string",)),
    (f"{_ROW}.evaluated", ("string",)),
    (f"{_ROW}.evaluation_type", ("string",)),
    (f"{_ROW}.evaluation_config", ("object",)),
    (f"{_ROW}.evaluation_config.bands", ("bands",)),
    (f"{_ROW}.difficulty", ("string", "null")),
    (f"{_ROW}.tags", ("strings",)),
    (f"{_ROW}.references", ("strings",)),
    (f"{_ROW}.models", ("object",)),
    (f"{_ROW}.models.*", ("object",)),
    (f"{_ROW}.models.*.output", ("string", "null")),
    (f"{_ROW}.models.*.score", ("object", "null")),
    (f"{_ROW}.models.*.score.value", ("score",)),
    *((f"{_ROW}.models.*.score.{k}", ("number", "null")) for k in _SCORE_NUMBERS),
    *((f"{_ROW}.models.*.score.{k}", ("count",)) for k in _SCORE_COUNTS),
    # null: the text's tokens could not be attributed to scripts (a served text: no offsets of ours).
    (f"{_ROW}.models.*.score.scripts", ("object", "null")),
    (f"{_ROW}.models.*.score.scripts.*", ("object",)),
    *((f"{_ROW}.models.*.score.scripts.*.{k}", ("number",)) for k in _SCRIPT_NUMBERS),
    ("models", ("list", "null")),
    ("models.*", ("object",)),
    ("models.*.column", ("string",)),
    ("models.*.name", ("string",)),
    ("models.*.kind", ("string",)),
    *((f"{where}parameter_efficiency", ("object", "null")) for where in ("", "models.*.")),
    *(
        (f"{where}parameter_efficiency.{k}", ("count", "null"))
        for where in ("", "models.*.")
        for k in _COUNTS
    ),
    ("models.*.training", ("object", "null")),
    *((f"models.*.training.{k}", ("number", "null")) for k in _TRAINING),
    ("models.*.training.totals", ("object",)),
    ("models.*.training.totals.*", ("number", "null")),
    ("models.*.training.overfitting", ("object",)),
    ("models.*.training.grad_norm", ("object",)),
    ("complete", ("bool",)),
    ("incomplete_reason", ("string", "null")),
    ("timestamp", ("string", "null")),
    ("schema_version", ("string", "number")),
    ("adapter_name", ("string", "null")),
    ("benchmarks.*.benchmark_file", ("string",)),
    # --llmeval-criteria's rules and run gates (gates.criteria_entry): `check` fails on a failed one.
    ("criteria", ("object", "null")),
    ("criteria.name", ("string",)),
    ("criteria.gates", ("object",)),
    ("criteria.gates.*", ("object",)),
    ("criteria.gates.*.status", ("string",)),
    ("criteria.gates.*.message", ("string",)),
    # What the run was given and did not run (results.NotRun): `check` fails on each (a gate: unless told
    # to accept it). Absent from documents written before it was recorded: a reader's default is [].
    ("not_run", ("list",)),
    ("not_run.*", ("object",)),
    ("not_run.*.file", ("string", "null")),
    ("not_run.*.gate", ("string", "null")),
    ("not_run.*.why", ("string",)),
)

# The fields readers take without a default, wherever the object holding them is present.
REQUIRED_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (_ROW, ("id", "evaluation_type", "evaluated", "models")),
    ("models.*", ("column", "kind")),
    ("criteria.gates.*", ("status", "message")),
    ("not_run.*", ("file", "gate", "why")),
)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_KINDS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "number": _is_number,
    "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "score": lambda v: _is_number(v) and 0 <= v <= 1,
    "bands": lambda v: isinstance(v, list) and len(v) == 3 and all(_is_number(x) for x in v),
    "strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


def _fits(kinds: tuple[str, ...]) -> Callable[[Any], bool]:
    """One test for a field that may hold any of `kinds` (a single kind's test itself, the common case)."""
    if len(kinds) == 1:
        return _KINDS[kinds[0]]
    tests = [_KINDS[kind] for kind in kinds]
    return lambda value: any(test(value) for test in tests)


_KIND_NAMES = {
    "string": "a string",
    "null": "null",
    "bool": "true or false",
    "list": "a list",
    "object": "an object",
    "number": "a number",
    "count": "a count (a whole number >= 0)",
    "score": "a score in [0, 1]",
    "bands": "three numbers",
    "strings": "a list of strings",
}


def _sound(document: Any) -> bool:
    """No value nested deeper than MAX_RESULTS_DEPTH and no number out of range: one pass, no paths."""
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_RESULTS_DEPTH:
            return False
        if isinstance(value, float) and not -MAX_RESULTS_NUMBER <= value <= MAX_RESULTS_NUMBER:
            return False
        if isinstance(value, (dict, list)) and value and depth >= MAX_RESULTS_DEPTH:
            return False  # its children are nested too deep, whatever they are
        # Strings, ints, booleans and null can be neither too deep (above) nor out of range: not stacked.
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values() if isinstance(v, (dict, list, float))]
        elif isinstance(value, list):
            stack += [(v, depth + 1) for v in value if isinstance(v, (dict, list, float))]
    return True


def _unsound_where(document: Any) -> str:
    """What _sound refused, named by its path (the same walk, spelling out every path)."""
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_RESULTS_DEPTH:
            top = re.split(r"[.\[]", where, maxsplit=1)[0]
            return f"{top or 'the document'} is nested more than {MAX_RESULTS_DEPTH} levels deep"
        if isinstance(value, float) and not -MAX_RESULTS_NUMBER <= value <= MAX_RESULTS_NUMBER:
            return f"{where} is {value!r}, out of any range a results.json holds"
        if isinstance(value, dict):
            stack += [(v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise AssertionError("_unsound_where called on a sound document")


# A field's place: None for the document, else (its parent's place, its key or index). Linked rather than
# spelled out: only the place an error names is ever spelled (_spelled).
FieldPath = tuple["FieldPath", str | int] | None


class _Fields:
    """The fields patterns name in one document; every prefix is expanded once for all patterns sharing it
    (READ_FIELDS has dozens under `benchmarks.*.rows.*`: each row is found once, not once per pattern)."""

    def __init__(self, document: Any) -> None:
        self._levels: dict[tuple[str, ...], list[tuple[FieldPath, Any]]] = {(): [(None, document)]}

    def found(self, pattern: str) -> list[tuple[FieldPath, Any]]:
        """(place, value) of each field `pattern` names ("*": every key or item), in document order (the
        order a depth-first walk finds them); absent: none."""
        parts = tuple(pattern.split("."))
        done = len(parts)
        while parts[:done] not in self._levels:
            done -= 1
        level = self._levels[parts[:done]]
        for n in range(done, len(parts)):
            head = parts[n]
            below: list[tuple[FieldPath, Any]] = []
            for path, item in level:
                if isinstance(item, dict):
                    if head == "*":
                        below += [((path, str(k)), v) for k, v in item.items()]  # ints: indexes
                    elif head in item:
                        below.append(((path, head), item[head]))
                elif isinstance(item, list) and head == "*":
                    below += [((path, i), v) for i, v in enumerate(item)]
            level = self._levels[parts[: n + 1]] = below
        return level


def _spelled(path: FieldPath) -> str:
    """A place as messages name it: `benchmarks[0].rows[3].id`."""
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    where = ""
    for key in reversed(keys):
        if isinstance(key, int):
            where += f"[{key}]"
        else:
            where = f"{where}.{key}" if where else key
    return where


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The results.json document at `path` (every command that reads one reads it here, and every
    baseline and history entry): ResultsFileError naming the file and the field when it is damaged."""
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise ResultsFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size > MAX_RESULTS_BYTES:
        raise ResultsFileError(f"cannot read {path}: {size} bytes, more than any results.json holds")
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f, parse_constant=_not_json_constant)
    except OSError as exc:
        raise ResultsFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ResultsFileError(
            f"cannot read {path}: not UTF-8 text ({exc.reason}): not a results.json"
        ) from None
    except json.JSONDecodeError as exc:
        raise ResultsFileError(
            f"cannot read {path}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:  # NaN or Infinity: Python reads them, JSON has no such values
        raise ResultsFileError(f"cannot read {path}: not strict JSON ({exc})") from None
    except RecursionError:
        raise ResultsFileError(f"cannot read {path}: not a results.json (JSON nested too deeply)") from None
    problem = document_problem(document)
    if problem is not None:
        raise ResultsFileError(f"cannot read {path}: not a results.json ({problem})")
    return cast(dict[str, Any], document)
