"""Hostile inputs, fuzzed: benchmark and predictions files through the loaders and through the real plugin.

A user's file may hold anything: random bytes, a valid row with one character deleted, a number where a
string belongs, a lone surrogate escaped in JSON, 100000 nested brackets. Every such input must end in one
of three ways: a valid run, `file:line` collection errors, or rows that fail with the plugin's message
(a bad predictions file stops the run before any row, in one `preds.jsonl:line:` usage error). Never a
Python traceback from our code, never an INTERNALERROR, never a hang, never a finished run lost.

The normal suite runs a few deterministic examples of each property (derandomized, no database). The long
campaign draws fresh random examples, that many of each loader property and a tenth (a twentieth for the
one that runs every evaluation type) of each plugin-level one:

    LLMEVAL_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz_inputs.py

Every input a campaign found breaking something stays below as an explicit regression example.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest
from helpers import jsonl, row
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st
from locollm import validate_locollm

from pytest_llmeval import scorers
from pytest_llmeval.benchmark import (
    DIFFICULTIES,
    MAX_DEPTH,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    BenchmarkError,
    load_predictions,
)
from pytest_llmeval.scorers import SCORERS, read_benchmark

# ---------------------------------------------------------------------------------------------------------
# Budget: the normal suite must stay fast (about 30 s for this module on 2 cores), a campaign goes long.

_CAMPAIGN = int(os.environ.get("LLMEVAL_FUZZ_EXAMPLES", "0") or "0")


def fuzz_settings(default: int, *, share: int = 1, pytester: bool = False) -> settings:
    """`default` examples in the normal suite; LLMEVAL_FUZZ_EXAMPLES / `share` fresh ones in a campaign."""
    return settings(
        max_examples=max(1, _CAMPAIGN // share) if _CAMPAIGN else default,
        deadline=None,  # a plugin run takes ~0.3 s and varies with the machine; hangs are caught below
        derandomize=not _CAMPAIGN,  # the normal suite sees the same examples on every run and machine
        database=None,  # no example database to replay: what a campaign finds is kept as an explicit example
        # Plugin-level properties share the function-scoped pytester folder across examples: every example
        # writes the same file names afresh and removes results.json first, so nothing carries over.
        suppress_health_check=[HealthCheck.function_scoped_fixture] if pytester else [],
    )


# A plugin run that takes longer than this is a hang: the longest legitimate one here is under 5 s.
EXAMPLE_SECONDS = 60.0


def outcome(name: str) -> None:
    """Count an outcome for --hypothesis-show-statistics (the regression tests run outside hypothesis)."""
    if currently_in_test_context():
        event(name)


class Hang(Exception):
    """An example ran longer than EXAMPLE_SECONDS."""


@contextmanager
def time_limit(seconds: float = EXAMPLE_SECONDS) -> Iterator[None]:
    """Raise Hang in the main thread when the block runs longer than `seconds` (in-process runs only)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"ran longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------------------------------------
# Strategies: valid rows first, then every way to spoil them.

# One valid evaluation_config per evaluation type (a new type fails test_every_type_has_a_valid_config).
VALID_CONFIGS: dict[str, dict[str, Any]] = {
    "exact_match": {"max_new_tokens": 4},
    "rouge": {"metric": "rouge1"},
    "bleu": {"tokenize": "char"},
    "chrf": {"word_order": 2},
    "fuzzy": {"threshold": 0.5},
    "char_accuracy": {"script_thresholds": {"kanji": 0.5}},
    "semantic": {},
    "bertscore": {"metric": "f1"},
    "custom": {"script": "score.py"},
    "code_execution": {"language": "python", "test_cases": [{"input": "", "expected_output": "hi"}]},
    "llm_judge": {"rubric": "Is the answer right?"},
    "multiple_choice": {"choices": ["hi", "bye"]},
    "perplexity": {"threshold": 50, "on": "reference"},  # expected_output is never empty here
    "lm_eval_exact_match": {"until": ["\n\n"], "max_new_tokens": 4},
    "loglikelihood": {},
}
# The script custom rows name: written next to every benchmark a plugin run reads.
SCORE_SCRIPT = "def evaluate(generated, expected):\n    return float(generated.strip() == expected.strip())\n"
# Embedding rows would load the sentence-embedding model into the in-process runs (torch, seconds each);
# their configs are still validated at collection, and tests/test_semantic.py scores them.
NOT_SCORED_HERE = ["-m", "not semantic and not bertscore"]


def _scorer_keys() -> list[str]:
    """Every evaluation_config key some scorer knows (its modules' *KEYS tuples), to try on every type."""
    found: set[str] = set()
    for module in vars(scorers).values():
        if isinstance(module, ModuleType):
            for name, value in vars(module).items():
                if name.endswith("KEYS") and isinstance(value, tuple):
                    found.update(key for key in value if isinstance(key, str))
    return sorted(found)


CONFIG_KEYS = _scorer_keys()


def _keys_of(kind: str) -> list[str]:
    """The keys of CONFIG_KEYS `kind` knows: its validator names an unknown key before it reads any value."""
    known = []
    for key in CONFIG_KEYS:
        try:
            SCORERS[kind].validate({key: None})
        except ValueError as exc:
            if str(exc).startswith("unknown key"):
                continue
        known.append(key)
    return known


# Most edits use a key the type knows: an unknown key is refused before any value is looked at.
KEYS_OF = {kind: _keys_of(kind) for kind in SCORERS}
# A tuple: `in` compares, where a set or dict would hash a list or object and raise TypeError. exact_match
# first: hypothesis starts from (and shrinks towards) the first choice.
SCORER_NAMES = tuple(sorted(SCORERS, key=lambda kind: (kind != "exact_match", kind)))
FIELDS = [*REQUIRED_FIELDS, *OPTIONAL_FIELDS]


class Raw(str):
    """JSON text written into a row as it is: what json.dumps cannot make (100000 brackets, 1e999999)."""


RAW_VALUES = [
    Raw("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)),  # the row's object plus these: exactly the limit
    Raw("[" * MAX_DEPTH + "]" * MAX_DEPTH),  # one level too deep
    Raw('{"a":' * 900 + "1" + "}" * 900),  # parses, but recursive code walking it would be near the limit
    Raw("[" * 100_000 + "]" * 100_000),  # json.loads itself runs out of stack
    Raw("1" * 4301),  # more digits than int() converts
    Raw("-" + "9" * 4300),
    Raw("1e999999"),
    Raw("-0"),
    Raw("NaN"),
    Raw("-Infinity"),
    Raw('"\\ud800"'),  # lone surrogates, escaped as JSON allows
    Raw('"x\\udfffy"'),
    Raw('"\\udc00\\ud800"'),  # a pair in the wrong order
    Raw('"\\ud83d\\ude00"'),  # a real pair: one emoji, valid
    Raw('"\\u0000"'),
]
SPECIAL_TEXT = [
    "",
    " ",
    "\t\n",
    "\x00",
    "a\x00b",
    "\ufeff",
    "x\ufeffy",  # a BOM inside a value
    "\u200f",  # right-to-left mark
    "\u202eevil",  # right-to-left override
    "e\u0301",  # combining acute accent
    "\u0301",
    "r\u0301ow",
    "\u2028",  # line separator: a line break to splitlines(), not to JSONL
    "\x0b\x1c\x85",
    "::",
    "a/b",
    "[x]",
    "\U0001f600",
    "NaN",
    "easy",
    "exact_match",
    "score.py",
    "../score.py",
    "/etc/passwd.py",
]
HUGE_TEXT = ["x" * 100_000, "\u00e9" * 10_000]
texts = st.one_of(
    st.sampled_from(SPECIAL_TEXT + HUGE_TEXT),
    st.text(max_size=12),
    st.lists(st.sampled_from(SPECIAL_TEXT) | st.characters(), max_size=6).map("".join),
)
numbers = st.one_of(
    st.integers(),
    st.sampled_from([0, 1, -1, 2**31, 2**63, -(2**63) - 1, 10**400, 10**4299]),
    st.floats(),  # nan and infinities included: json.dumps writes NaN and Infinity, json.loads reads them
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts, st.sampled_from(RAW_VALUES))
values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=8,
)
# Ids the pattern accepts, and ones it must refuse with a message (not a crash, not a strange node id).
valid_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,8}", fullmatch=True)
ids = st.one_of(
    valid_ids,
    st.sampled_from(["r\u0301", "\u200fr", "r\u202e", "a::b", "a b", "a/b", "[a]", "-a", "\x00", "\ufeffa"]),
)

# Values a config key may well expect, so that edits get past the first check more often than noise would.
PLAUSIBLE: list[Any] = [
    *[0, 1, 2, -1, 0.5, 1.5, 1e-300, 512, True, False, None, [], {}],
    *["python", "input", "reference", "first", "last", "sum", "token", "char", "rouge1", "f1", "13a"],
    *[
        "score.py",
        "a\nb.py",
        "\u202escore.py",
        "x\x0by.py",
        "evaluate",
        r"(\d+)",
        "(",
        "a{2,1}",
        "Grade it.",
        ["hi", "bye"],
        ["hi", "hi"],
        ["hi", ""],
    ],
    [{"input": "", "expected_output": "hi"}],
    [{"input": 1, "expected_output": "hi"}],
    [{"input": "", "expected_output": "hi", "extra": 1}],
]
config_values = st.sampled_from(PLAUSIBLE) | values


@st.composite
def configs(draw: st.DrawFn, kind: str) -> dict[Any, Any]:
    """A few keys of `kind` (now and then any key) with plausible or any values."""
    keys = st.sampled_from(KEYS_OF[kind]) if draw(st.integers(0, 4)) else st.sampled_from(CONFIG_KEYS) | texts
    return draw(st.dictionaries(keys, config_values, max_size=3))


def dumps(obj: Any, *, ascii_only: bool = True) -> str:
    """One JSON line for `obj`, with every Raw value spliced in as written."""
    raws: list[str] = []

    def mark(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(str(value))
            return f"RAW{len(raws) - 1}RAW"
        if isinstance(value, dict):
            return {key: mark(item) for key, item in value.items()}
        if isinstance(value, list):
            return [mark(item) for item in value]
        return value

    text = json.dumps(mark(obj), ensure_ascii=ascii_only)
    return re.sub(r'"RAW(\d+)RAW"', lambda match: raws[int(match[1])], text)


def encode(text: str) -> bytes:
    # surrogatepass: a lone surrogate written raw (ensure_ascii off) becomes bytes that are not UTF-8.
    return text.encode("utf-8", "surrogatepass")


@st.composite
def valid_rows(draw: st.DrawFn, row_id: str) -> dict[str, Any]:
    """A valid row of any evaluation type."""
    kind = draw(st.sampled_from(SCORER_NAMES))
    config = VALID_CONFIGS[kind]
    expected = "hi" if kind != "code_execution" else draw(st.sampled_from(["hi", ""]))
    return row(
        row_id,
        instruction=draw(st.sampled_from(["Say hi.", "Say hi. " * 50, "\u202eSay hi\u0301."])),
        input=draw(st.sampled_from(["", "hi there", "\u3053\u3093\u306b\u3061\u306f"])),
        expected=expected,
        difficulty=draw(st.sampled_from(DIFFICULTIES)),
        evaluation_type=kind,
        evaluation_config=dict(config),
        **({"tags": tags} if (tags := draw(st.sampled_from([["edge"], ["a", "b"], None]))) else {}),
    )


@st.composite
def hostile_rows(draw: st.DrawFn, row_id: str) -> dict[str, Any]:
    """A valid row, then a few of: a field set to any value or removed, a config key set to any value."""
    obj = draw(valid_rows(row_id))
    for _ in range(draw(st.integers(0, 3))):
        edit = draw(st.sampled_from(["field", "drop", "unknown", "config", "config_key", "id"]))
        if edit == "field":
            obj[draw(st.sampled_from(FIELDS))] = draw(values)
        elif edit == "drop":
            obj.pop(draw(st.sampled_from(FIELDS)), None)
        elif edit == "unknown":
            obj[draw(texts)] = draw(values)
        elif edit == "config":
            obj["evaluation_config"] = draw(values)
        elif edit == "id":
            obj["id"] = draw(ids)
        elif isinstance(obj.get("evaluation_config"), dict):
            kind = obj.get("evaluation_type")  # another edit may have made it anything
            obj["evaluation_config"].update(draw(configs(kind if kind in SCORER_NAMES else "exact_match")))
    return obj


@st.composite
def benchmark_texts(draw: st.DrawFn, hostile: bool = True) -> tuple[str, list[str]]:
    """(benchmark JSONL text, its row ids): 1 to 4 rows, hostile or valid, maybe with blank lines."""
    row_ids = draw(st.lists(ids if hostile else valid_ids, min_size=1, max_size=4))
    rows = [draw(hostile_rows(i) if hostile else valid_rows(i)) for i in row_ids]
    ascii_only = draw(st.booleans())
    lines = [dumps(r, ascii_only=ascii_only) for r in rows]
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["", "  ", "\r"])))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n", "\n\n"])), row_ids


@st.composite
def predictions_texts(draw: st.DrawFn, row_ids: Sequence[str], hostile: bool = True) -> str:
    """Predictions JSONL for some of `row_ids` (and strays): any texts, and now and then (`hostile`) a field
    of any type."""
    objs: list[dict[str, Any]] = []
    for row_id in [*row_ids, *draw(st.lists(ids, max_size=2))]:
        if draw(st.integers(0, 4)) == 4:
            continue  # a row without a prediction
        obj: dict[str, Any] = {"id": row_id, "prediction": draw(st.sampled_from(["hi", "bye", "1"]) | texts)}
        if draw(st.booleans()):
            obj["base_prediction"] = draw(st.sampled_from(["hi", "no"]) | texts)
        if not draw(st.integers(0, 5)):
            obj["benchmark"] = draw(st.sampled_from(["bench.jsonl", "other.jsonl"]) | texts)
        if hostile and not draw(st.integers(0, 3)):
            obj[draw(st.sampled_from(["id", "prediction", "base_prediction", "benchmark", "extra"]))] = draw(
                values
            )
        objs.append(obj)
    ascii_only = draw(st.booleans())
    return "".join(dumps(o, ascii_only=ascii_only) + "\n" for o in objs)


# Bytes a mangled file gets: NUL, a BOM mid-line, bytes that are never UTF-8 (0xff, an encoded surrogate),
# JSON punctuation, an escaped lone surrogate, a right-to-left mark, a combining accent, a huge number.
PIECES = [
    b"\x00",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xed\xa0\x80",
    b"\\ud800",
    "\u200f".encode(),
    "\u0301".encode(),
]
PIECES += [b"\n", b"\r", b'"', b"{", b"[", b"]", b"\\", b",", b":", b"0" * 5000]


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with 1 to 4 byte-level edits: delete, duplicate, insert, replace a span, or truncate."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "duplicate", "insert", "replace", "truncate"]))
        at = draw(st.integers(0, len(out)))
        width = draw(st.integers(1, 8))
        if op == "delete":
            del out[at : at + width]
        elif op == "duplicate":
            out[at:at] = out[at : at + width]
        elif op == "truncate":
            del out[at:]
        else:
            piece = draw(st.sampled_from(PIECES) | st.binary(min_size=1, max_size=4))
            out[at : at + (width if op == "replace" else 0)] = piece
    return bytes(out)


@st.composite
def hostile_files(draw: st.DrawFn) -> bytes:
    """A benchmark or predictions file's bytes: random, or a valid or hostile file, then maybe mangled."""
    how = draw(st.sampled_from(["random", "hostile", "mutated", "mutated_hostile"]))
    if how == "random":
        return draw(st.binary(max_size=200))
    text, row_ids = draw(benchmark_texts(hostile=how != "mutated"))
    if draw(st.booleans()):
        text = draw(predictions_texts(row_ids))
    data = encode(text)
    return draw(mutated(data)) if how.startswith("mutated") else data


# ---------------------------------------------------------------------------------------------------------
# What is allowed to come out.

# A frame of a traceback as pytest shows it (long or short style), or Python's own.
_TRACEBACK = re.compile(r"^E   |\.py:\d+: in |^Traceback \(most recent call last\)|INTERNALERROR|^\s+File \"")
_SECTION = re.compile(r"^_{2,} (.+?) _{2,}$")


def sections(lines: Sequence[str]) -> dict[str, list[str]]:
    """The "___ title ___" sections of a pytest report (errors, failures), each with its body lines."""
    found: dict[str, list[str]] = {}
    body: list[str] | None = None
    for line in lines:
        title = _SECTION.match(line)
        if title:
            body = found.setdefault(title[1], [])
        elif line.startswith("=" * 4):
            body = None
        elif body is not None:
            body.append(line)
    return found


def check_outcome(
    result: pytest.RunResult,
    benchmarks: Sequence[str],
    predictions: str,
    *,
    collection_errors_continue: bool = False,
) -> None:
    """A valid run, `file:line` collection errors, rows failing with the plugin's message, or one usage error
    naming the predictions file's lines; nothing else, and never a traceback.

    With --continue-on-collection-errors (`collection_errors_continue`) the valid files run beside the
    collection errors, and the run exits 1 instead of 2.
    """
    lines = [*result.outlines, *result.errlines]
    shown = "\n".join(lines)[-6000:]
    for line in lines:
        assert not _TRACEBACK.search(line), f"traceback in the output:\n{shown}"
    names = "|".join(re.escape(b) for b in benchmarks)
    found = sections(result.outlines)
    collection_errors = [t for t in found if t.startswith("ERROR collecting ")]
    for title, body in found.items():
        # Under xdist each report starts with the worker that ran it: "[gw0] linux -- Python 3.11.7 ...".
        text = [line for line in body if line.strip() and not re.match(r"\[gw\d+\] ", line)]
        if title.startswith("ERROR collecting "):
            name = re.escape(title.removeprefix("ERROR collecting "))
            bad = [line for line in text if not re.match(rf"{name}:\d+: ", line)]
            assert not bad, f"collection error lines without file:line: {bad[:3]}\n{shown}"
        elif title.startswith("ERROR"):
            raise AssertionError(f"an error outside collection: {title}\n{shown}")
        elif title == "warnings summary":
            # The plugin's own warnings point at a benchmark line; one raised in our code is a bug.
            ours = [line for line in text if re.search(r"pytest_llmeval/\S+\.py:\d+: \w*Warning", line)]
            assert not ours, f"a warning from our code: {ours[0]}\n{shown}"
        elif title != "llmeval":
            # A row names its line in the benchmark (or the predictions line it lacks); a gate its file.
            first = text[0] if text else ""
            allowed = rf"^(?:(?:{names}|{re.escape(predictions)}):\d+: |(?:{names}): gate \w+ failed: )"
            assert re.match(allowed, first), (
                f"{title} failed without the plugin's message: {first!r}\n{shown}"
            )
            # A built-in scorer that raises is a bug of ours (a custom script's error is the user's).
            builtin = "|".join(kind for kind in SCORERS if kind != "custom")
            assert not re.search(rf"scorer '(?:{builtin})' raised", first), (
                f"scorer crashed: {first}\n{shown}"
            )
    if result.ret == pytest.ExitCode.USAGE_ERROR:
        problems = [line for line in result.errlines if line.strip()]
        head = f"ERROR: llmeval: --llmeval-predictions: {predictions}:"
        assert problems and problems[0].startswith(head), f"usage error not about {predictions}:\n{shown}"
        pattern = rf"(?:ERROR: llmeval: --llmeval-predictions: )?{re.escape(predictions)}:\d+: "
        assert all(re.match(pattern, line) for line in problems), f"usage error lines:\n{shown}"
    elif result.ret == pytest.ExitCode.INTERRUPTED:
        assert collection_errors, f"exit 2 without a collection error:\n{shown}"
    else:
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), (
            f"exit {result.ret}:\n{shown}"
        )
        if result.ret == pytest.ExitCode.OK or not collection_errors_continue:
            assert not collection_errors, f"collection errors but exit {result.ret}:\n{shown}"


RUN_ARGS = ["--llmeval-predictions=preds.jsonl", "--llmeval-no-history", "-p", "no:cacheprovider"]
# Gates a one-row benchmark can pass, so that a run with every row right exits 0.
SMALL_GATES = ["--llmeval-min-rows=1", "--llmeval-min-edge-cases=1"]


def run_plugin(
    pytester: pytest.Pytester, files: dict[str, bytes], *, continue_on_collection_errors: bool = False
) -> pytest.RunResult:
    """Write the benchmark files, preds.jsonl and the custom rows' script, run the plugin in-process, check
    what came out."""
    for name, data in files.items():
        (pytester.path / name).write_bytes(data)
    (pytester.path / "score.py").write_text(SCORE_SCRIPT)
    results = pytester.path / "results.json"
    results.unlink(missing_ok=True)  # each example stands alone: no previous run to compare with
    with time_limit():
        flags = ["--continue-on-collection-errors"] if continue_on_collection_errors else []
        result = pytester.runpytest(*RUN_ARGS, *SMALL_GATES, *NOT_SCORED_HERE, *flags)
    # --hypothesis-show-statistics tells how often each outcome was reached.
    outcome(f"exit {int(result.ret)}")
    benchmarks = [name for name in files if name != "preds.jsonl"]
    check_outcome(result, benchmarks, "preds.jsonl", collection_errors_continue=continue_on_collection_errors)
    if result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        # A finished run is never lost: a run in which a row ran (not only gates) writes a results.json that
        # follows the standard. (With every row deselected there is nothing to record, and none is written.)
        reports = result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
        if any(report.when == "call" and "gate" not in report.keywords for report in reports):
            assert results.is_file(), "a finished run wrote no results.json"
            validate_locollm(json.loads(results.read_text(encoding="utf-8")), unscored_top_level=True)
    return result


@pytest.fixture(autouse=True)
def _rootdir(request: pytest.FixtureRequest) -> None:
    # Without an ini file, pytester's --basetemp argument would make the rootdir the parent folder.
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").makeini("[pytest]\n")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the loader-level properties (module-scoped: hypothesis reruns the test body)."""
    return tmp_path_factory.mktemp("fuzz")


# ---------------------------------------------------------------------------------------------------------
# The loaders, directly: many examples.


def check_benchmark(path: Path, data: bytes) -> None:
    """read_benchmark loads `data` or reports one-line `file:line` problems, each on a line the file has."""
    path.write_bytes(data)
    n_lines = data.count(b"\n") + 1
    try:
        benchmark = read_benchmark(path)
    except BenchmarkError as exc:
        outcome("benchmark refused")
        assert exc.problems
        for line, reason in exc.problems:
            assert 1 <= line <= n_lines, (line, reason)
            # One line by every definition of a line break (\x0b, \x85 and U+2028 too, as splitlines has it).
            assert len(reason.splitlines()) == 1, reason
            reason.encode("utf-8")  # printable to a UTF-8 terminal: no lone surrogate echoed back
        return
    outcome("benchmark loaded")
    assert benchmark.cases
    for case in benchmark.cases:
        for text in (case.id, case.instruction, case.input, case.expected_output, *case.tags):
            text.encode("utf-8")
        # results.json (UTF-8, ensure_ascii off) can hold the config.
        json.dumps(dict(case.evaluation_config), ensure_ascii=False).encode("utf-8")


def check_predictions(path: Path, data: bytes) -> None:
    """load_predictions loads `data` or raises ValueError whose every line is `path:line: reason`."""
    path.write_bytes(data)
    try:
        found = load_predictions(path)
    except ValueError as exc:
        outcome("predictions refused")
        for line in str(exc).split("\n"):
            assert re.match(rf"{re.escape(str(path))}:\d+: \S", line), line
            assert len(line.splitlines()) == 1, line
            line.encode("utf-8")
        return
    outcome("predictions loaded")
    for p in found:
        for text in (p.id, p.prediction, p.base_prediction or "", p.benchmark or ""):
            text.encode("utf-8")


def one_row(**fields: Any) -> bytes:
    """A benchmark file of one row: helpers.row("a") with `fields` set."""
    return encode(dumps({**row("a"), **fields}) + "\n")


DEEP_REGEX = "(" * 1000 + ")" * 1000
# Inputs that broke the loaders before they were fixed: what happened is in the comment above each group.
LOADER_REGRESSIONS = {
    # A RecursionError traceback out of json.loads ended collection.
    "deep-line": b"[" * 100_000 + b"\n",
    "deep-field": one_row(tags=Raw("[" * 100_000 + "]" * 100_000)),
    # A ValueError traceback out of json.loads (int() refuses more than 4300 digits).
    "huge-int": b'{"id": ' + b"1" * 5000 + b"}\n",
    # Loaded, then results.json could not be written (UnicodeEncodeError): the finished run was lost.
    "surrogate-expected": one_row(expected_output="\ud800"),
    "surrogate-tag": one_row(tags=["\udfff"]),
    "surrogate-key": one_row(**{"\ud800": 1}),
    # A line break in a value the message echoes split the `file:line:` message in two.
    "newline-key": one_row(**{"\t\n": None}),
    "newline-difficulty": one_row(difficulty="easy\r\nhard"),
    "newline-type": one_row(evaluation_type="exact\nmatch"),
    "vertical-tab-config-key": one_row(evaluation_type="semantic", evaluation_config={"x\x0b\x1c\x85y": 1}),
    "newline-duplicate-prediction": encode(dumps({"id": "a\nb", "prediction": "x"}) + "\n") * 2,
    # load_predictions: a ValueError without file:line for a byte that is not UTF-8.
    "bad-utf8": b'{"id": "a", "prediction": "x"}\n\xff\n',
    # Tracebacks out of config validators: RecursionError and OverflowError from re.compile, TypeError
    # (unhashable list) from perplexity's `on`, OverflowError from math.isfinite on a huge int.
    "deep-regex": one_row(evaluation_config={"extract_pattern": DEEP_REGEX}),
    "huge-repeat-regex": one_row(evaluation_config={"extract_pattern": "a{4294967296}"}),
    "judge-deep-regex": one_row(
        evaluation_type="llm_judge", evaluation_config={"rubric": "r", "extract_score_pattern": DEEP_REGEX}
    ),
    "perplexity-on-list": one_row(evaluation_type="perplexity", evaluation_config={"threshold": 2, "on": []}),
    "huge-timeout": one_row(
        evaluation_type="code_execution",
        evaluation_config={**VALID_CONFIGS["code_execution"], "timeout_seconds": 10**400},
    ),
}


@pytest.mark.parametrize("name", sorted(LOADER_REGRESSIONS))
def test_loader_regressions(scratch: Path, name: str) -> None:
    check_benchmark(scratch / "regression.jsonl", LOADER_REGRESSIONS[name])
    check_predictions(scratch / "regression-preds.jsonl", LOADER_REGRESSIONS[name])


@fuzz_settings(300)
@given(data=hostile_files())
def test_any_file_loads_or_names_its_bad_lines(scratch: Path, data: bytes) -> None:
    check_benchmark(scratch / "bench.jsonl", data)
    check_predictions(scratch / "preds.jsonl", data)


@fuzz_settings(150)
@given(data=st.data(), kind=st.sampled_from(SCORER_NAMES), base=st.booleans())
def test_any_evaluation_config_is_accepted_or_refused_in_one_line(
    scratch: Path, data: st.DataObject, kind: str, base: bool
) -> None:
    """Every key any scorer knows, with any value, on every evaluation type (alone or over a valid config)."""
    config = data.draw(configs(kind))
    full = {**VALID_CONFIGS[kind], **config} if base else config
    check_benchmark(
        scratch / "config.jsonl", encode(dumps(row("a", evaluation_type=kind, evaluation_config=full)))
    )


def test_every_type_has_a_valid_config(scratch: Path) -> None:
    assert set(VALID_CONFIGS) == set(SCORERS), "add the new evaluation type to VALID_CONFIGS"
    path = scratch / "valid.jsonl"
    rows = [
        row(f"r-{kind}", expected="hi", evaluation_type=kind, evaluation_config=config)
        for kind, config in VALID_CONFIGS.items()
    ]
    path.write_text(jsonl(rows))
    assert len(read_benchmark(path).cases) == len(VALID_CONFIGS)


# ---------------------------------------------------------------------------------------------------------
# The real plugin through pytester: collection and predictions-mode scoring, few examples.


@st.composite
def benchmark_and_predictions(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Valid files with odd texts (the run scores them), hostile fields, or mangled bytes: a third each."""
    how = draw(st.sampled_from(["valid", "hostile", "mangled"]))
    text, row_ids = draw(benchmark_texts(hostile=how == "hostile"))
    bench = encode(text)
    preds = encode(draw(predictions_texts(row_ids, hostile=how == "hostile")))
    if how == "mangled":
        # One file or both, so that collection errors and predictions usage errors are both reached.
        which = draw(st.sampled_from(["bench", "preds", "both"]))
        bench = draw(mutated(bench)) if which != "preds" else bench
        preds = draw(mutated(preds)) if which != "bench" else preds
    return bench, preds


@fuzz_settings(12, share=10, pytester=True)
@given(files=benchmark_and_predictions())
def test_plugin_collects_and_scores_any_files(pytester: pytest.Pytester, files: tuple[bytes, bytes]) -> None:
    bench, preds = files
    run_plugin(pytester, {"bench.jsonl": bench, "preds.jsonl": preds})


@st.composite
def every_type_with_hostile_configs(draw: st.DrawFn) -> dict[str, bytes]:
    """A benchmark file per evaluation type, its row `r-<type>`'s config spoilt by a few keys (or not)."""
    files = {}
    for kind in SCORER_NAMES:
        config = {**VALID_CONFIGS[kind], **draw(configs(kind))}
        line = dumps(
            row(f"r-{kind}", input="hi there", expected="hi", evaluation_type=kind, evaluation_config=config)
        )
        files[f"bench-{kind}.jsonl"] = encode(line + "\n")
    return files


@fuzz_settings(6, share=20, pytester=True)
@given(
    files=every_type_with_hostile_configs(),
    predictions=st.lists(
        st.sampled_from(["hi", "bye", ""]) | texts, min_size=len(SCORERS), max_size=len(SCORERS)
    ),
)
def test_plugin_refuses_or_scores_any_config_of_every_type(
    pytester: pytest.Pytester, files: dict[str, bytes], predictions: list[str]
) -> None:
    """A file per type: the valid ones are scored (--continue-on-collection-errors) beside the others."""
    preds = "".join(
        dumps({"id": f"r-{kind}", "prediction": p}) + "\n"
        for kind, p in zip(SCORER_NAMES, predictions, strict=True)
    )
    run_plugin(pytester, {**files, "preds.jsonl": encode(preds)}, continue_on_collection_errors=True)


# Inputs that broke a plugin run before they were fixed: (benchmark, predictions).
PLUGIN_REGRESSIONS = {
    # results.json could not be written (UnicodeEncodeError at sessionfinish): the finished run was lost.
    "lone-surrogate-expected": (
        encode(dumps({**row("a"), "expected_output": "\ud800"})),
        b'{"id": "a", "prediction": "x"}\n',
    ),
    "lone-surrogate-prediction": (
        encode(jsonl([row("a")])),
        encode(dumps({"id": "a", "prediction": "x\udfff"})),
    ),
    # Collection ended in a RecursionError traceback.
    "deep-line": (encode(jsonl([row("a")])) + b"[" * 100_000 + b"\n", b'{"id": "a", "prediction": "x"}\n'),
    "deep-regex": (
        encode(dumps(row("a", evaluation_config={"extract_pattern": "(" * 1000 + ")" * 1000}))),
        b'{"id": "a", "prediction": "x"}\n',
    ),
    # A usage error without the line of the bad byte.
    "bad-utf8-predictions": (encode(jsonl([row("a")])), b'{"id": "a", "prediction": "x"}\n\xc3\x28\n'),
    # "unhashable type: 'list'" out of the perplexity validator, as a collection traceback.
    "perplexity-on-list": (
        encode(
            dumps(row("a", evaluation_type="perplexity", evaluation_config={"threshold": 2, "on": ["input"]}))
        ),
        b'{"id": "a", "prediction": "x"}\n',
    ),
}


@pytest.mark.parametrize("name", sorted(PLUGIN_REGRESSIONS))
def test_plugin_regressions(pytester: pytest.Pytester, name: str) -> None:
    bench, preds = PLUGIN_REGRESSIONS[name]
    result = run_plugin(pytester, {"bench.jsonl": bench, "preds.jsonl": preds})
    assert result.ret in (
        pytest.ExitCode.INTERRUPTED,
        pytest.ExitCode.USAGE_ERROR,
    )  # refused, in one line each


def test_hostile_files_under_xdist(pytester: pytest.Pytester) -> None:
    """Two workers, good and hostile files side by side: the same outcomes as in one process."""
    good = [
        row("g1", expected="hi", tags=["edge"]),
        row("g2", expected="hi", evaluation_type="fuzzy", evaluation_config={}),
        row(
            "g3",
            expected="hi",
            evaluation_type="multiple_choice",
            evaluation_config=VALID_CONFIGS["multiple_choice"],
        ),
        row("g4", expected="r\u0301\u200f", evaluation_type="chrf", evaluation_config={}),
    ]
    pytester.makefile(".jsonl", good=jsonl(good))
    (pytester.path / "deep.jsonl").write_bytes(
        b"[" * 100_000 + b"\n" + encode(dumps({**row("d1"), "tags": ["\ud800"]})) + b"\n"
    )
    (pytester.path / "bytes.jsonl").write_bytes(b'{"id": "b1"}\n\xff\xfe\x00garbage\n')
    (pytester.path / "config.jsonl").write_bytes(
        encode(
            dumps(row("c1", evaluation_type="perplexity", evaluation_config={"on": {}, "threshold": 10**400}))
        )
    )
    preds = [
        {"id": "g1", "prediction": "hi"},
        {"id": "g2", "prediction": "h\x00i"},
        {"id": "g4", "prediction": "\u202e"},
        {"id": "x\u0301", "prediction": ""},
    ]
    (pytester.path / "preds.jsonl").write_text(jsonl(preds))
    # A subprocess, so that a hang is a timeout, not a stuck suite.
    result = pytester.runpytest_subprocess(
        *RUN_ARGS, "-n", "2", "--continue-on-collection-errors", timeout=120
    )
    names = ["good.jsonl", "deep.jsonl", "bytes.jsonl", "config.jsonl"]
    check_outcome(result, names, "preds.jsonl", collection_errors_continue=True)
    result.stdout.fnmatch_lines_random(
        [
            "deep.jsonl:1: invalid JSON: nested too deeply (more than 64 levels)",
            "deep.jsonl:2: a string holds a lone surrogate \\ud800 (not Unicode text)",
            "bytes.jsonl:2: not valid UTF-8 (invalid start byte)",
            "config.jsonl:1: evaluation_config: 'on' must be one of input, reference, got {}",
            "good.jsonl:3: no prediction for id 'g3' in preds.jsonl",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    validate_locollm(
        json.loads((pytester.path / "results.json").read_text(encoding="utf-8")), unscored_top_level=True
    )
