"""Unit tests and hypothesis properties of benchmark.py: JSONL -> Case, validation with `file:line` errors."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmeval.benchmark import (
    DIFFICULTIES,
    REQUIRED_FIELDS,
    Benchmark,
    BenchmarkError,
    Case,
    ConfigValidator,
    file_hash,
    load_benchmark,
)
from pytest_llmeval.scorers import SCORERS, read_benchmark

REAL_VALIDATORS: dict[str, ConfigValidator] = {name: s.validate for name, s in SCORERS.items()}


def _fake_validate(config: Mapping[str, Any]) -> None:
    """A stand-in scorer validator: refuses any config holding the key "bad"."""
    if "bad" in config:
        raise ValueError(f"bad is not allowed here, got {config['bad']!r}")


# Two fake evaluation types, so the "supported" list in messages has an order to check.
FAKE_VALIDATORS: dict[str, ConfigValidator] = {"fake": _fake_validate, "alpha": lambda config: None}

_DROP = object()  # an override value meaning "leave this field out"


def row(**overrides: Any) -> dict[str, Any]:
    """A valid exact_match row; keyword arguments replace fields (`_DROP` removes one)."""
    obj: dict[str, Any] = {
        "id": "q1",
        "instruction": "Add the numbers.",
        "input": "2 + 2",
        "expected_output": "4",
        "evaluation_type": "exact_match",
        "difficulty": "easy",
    }
    obj.update(overrides)
    return {k: v for k, v in obj.items() if v is not _DROP}


def write_rows(path: Path, lines: list[Any], *, ending: str = "\n", final_newline: bool = True) -> Path:
    """Write JSONL: dicts are JSON-encoded, strings are written as they are (blank lines, broken JSON)."""
    texts = [x if isinstance(x, str) else json.dumps(x) for x in lines]
    path.write_bytes((ending.join(texts) + (ending if final_newline else "")).encode("utf-8"))
    return path


def problems(
    path: Path, validators: Mapping[str, ConfigValidator] = REAL_VALIDATORS
) -> list[tuple[int, str]]:
    """The (line, reason) pairs load_benchmark refuses `path` with."""
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(path, validators)
    err = info.value
    assert err.path == path
    # str(exc) is exactly one `<path>:<line>: <reason>` line per problem, in the same order.
    assert str(err).split("\n") == [f"{path}:{line}: {reason}" for line, reason in err.problems]
    return err.problems


def only_problem(path: Path, validators: Mapping[str, ConfigValidator] = REAL_VALIDATORS) -> tuple[int, str]:
    found = problems(path, validators)
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    return tmp_path / "bench.jsonl"


# ---------------------------------------------------------------------------------------------------------
# valid files


def test_valid_file_gives_cases_with_every_field(bench: Path) -> None:
    write_rows(
        bench,
        [
            row(),
            row(
                id="q2",
                input="",
                difficulty="hard",
                evaluation_config={"extract_pattern": r"answer: (\d+)", "threshold": 1},
                tags=["math", "arith"],
            ),
        ],
    )
    result = load_benchmark(bench, REAL_VALIDATORS)

    assert isinstance(result, Benchmark)
    assert result.path == bench
    first, second = result.cases
    assert first == Case(
        id="q1",
        instruction="Add the numbers.",
        input="2 + 2",
        expected_output="4",
        evaluation_type="exact_match",
        difficulty="easy",
        line=1,
    )
    assert first.evaluation_config == {}
    assert first.tags == ()
    assert second.line == 2
    assert second.input == ""
    assert second.difficulty == "hard"
    assert second.evaluation_config == {"extract_pattern": r"answer: (\d+)", "threshold": 1}
    assert second.tags == ("math", "arith")
    assert isinstance(second.tags, tuple)


def test_cases_are_frozen(bench: Path) -> None:
    write_rows(bench, [row()])
    case = load_benchmark(bench, REAL_VALIDATORS).cases[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.id = "other"  # type: ignore[misc]


def test_sha256_is_the_hash_of_the_file_bytes(bench: Path) -> None:
    write_rows(bench, [row(), "", row(id="q2")], ending="\r\n")
    expected = "sha256:" + hashlib.sha256(bench.read_bytes()).hexdigest()
    assert load_benchmark(bench, REAL_VALIDATORS).sha256 == expected
    assert file_hash(bench.read_bytes()) == expected


def test_every_difficulty_is_accepted(bench: Path) -> None:
    write_rows(bench, [row(id=f"q{i}", difficulty=d) for i, d in enumerate(DIFFICULTIES)])
    cases = load_benchmark(bench, REAL_VALIDATORS).cases
    assert [c.difficulty for c in cases] == list(DIFFICULTIES)


@pytest.mark.parametrize("value", ["", "   ", "\t\n"])
def test_input_may_be_empty(bench: Path, value: str) -> None:
    write_rows(bench, [row(input=value)])
    assert load_benchmark(bench, REAL_VALIDATORS).cases[0].input == value


@pytest.mark.parametrize("row_id", ["a", "A1", "1abc", "q.1_2+3-4", "gsm8k-0001", "x" * 200])
def test_valid_ids(bench: Path, row_id: str) -> None:
    write_rows(bench, [row(id=row_id)])
    assert load_benchmark(bench, REAL_VALIDATORS).cases[0].id == row_id


def test_empty_tags_list_is_accepted(bench: Path) -> None:
    write_rows(bench, [row(tags=[])])
    assert load_benchmark(bench, REAL_VALIDATORS).cases[0].tags == ()


def test_blank_lines_are_skipped_but_counted(bench: Path) -> None:
    write_rows(bench, ["", row(id="a"), "   ", "\t", row(id="b"), "", ""])
    cases = load_benchmark(bench, REAL_VALIDATORS).cases
    assert [(c.id, c.line) for c in cases] == [("a", 2), ("b", 5)]


def test_crlf_line_endings(bench: Path) -> None:
    write_rows(bench, [row(id="a"), "", row(id="b", expected_output="x")], ending="\r\n")
    cases = load_benchmark(bench, REAL_VALIDATORS).cases
    assert [(c.id, c.line) for c in cases] == [("a", 1), ("b", 3)]
    assert cases[1].expected_output == "x"


def test_crlf_error_lines_are_counted_like_lf(bench: Path) -> None:
    write_rows(bench, [row(id="a"), "", "{broken"], ending="\r\n")
    line, reason = only_problem(bench)
    assert line == 3
    assert "\r" not in reason


def test_utf8_bom_is_ignored_but_hashed(bench: Path) -> None:
    body = json.dumps(row(id="a")) + "\n" + json.dumps(row(id="b")) + "\n"
    data = b"\xef\xbb\xbf" + body.encode("utf-8")
    bench.write_bytes(data)
    result = load_benchmark(bench, REAL_VALIDATORS)
    assert [(c.id, c.line) for c in result.cases] == [("a", 1), ("b", 2)]
    assert result.sha256 == "sha256:" + hashlib.sha256(data).hexdigest()


def test_final_line_without_newline(bench: Path) -> None:
    write_rows(bench, [row(id="a"), row(id="b")], final_newline=False)
    cases = load_benchmark(bench, REAL_VALIDATORS).cases
    assert [(c.id, c.line) for c in cases] == [("a", 1), ("b", 2)]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0c"])
def test_only_newline_ends_a_row(bench: Path, separator: str) -> None:
    # str.splitlines() would split these; json.dumps(ensure_ascii=False) leaves them raw inside a string.
    text = f"before{separator}after"
    write_rows(bench, [json.dumps(row(instruction=text), ensure_ascii=False), row(id="q2")])
    cases = load_benchmark(bench, REAL_VALIDATORS).cases
    assert cases[0].instruction == text
    assert [c.line for c in cases] == [1, 2]


def test_non_ascii_text_round_trips(bench: Path) -> None:
    write_rows(
        bench, [json.dumps(row(instruction="Größe? 日本語 🙂", expected_output="é"), ensure_ascii=False)]
    )
    case = load_benchmark(bench, REAL_VALIDATORS).cases[0]
    assert (case.instruction, case.expected_output) == ("Größe? 日本語 🙂", "é")


def test_validator_receives_the_rows_config(bench: Path) -> None:
    seen: list[Mapping[str, Any]] = []
    write_rows(
        bench,
        [row(evaluation_type="spy", evaluation_config={"k": [1, 2]}), row(id="q2", evaluation_type="spy")],
    )
    load_benchmark(bench, {"spy": seen.append})
    assert seen == [{"k": [1, 2]}, {}]


# ---------------------------------------------------------------------------------------------------------
# one problem per bad line, with its line number


def test_invalid_json(bench: Path) -> None:
    write_rows(bench, [row(), '{"id": '])
    line, reason = only_problem(bench)
    assert line == 2
    assert reason.startswith("invalid JSON: ")
    assert reason.endswith("(column 8)")


@pytest.mark.parametrize("text", ["[1, 2]", '"a string"', "3", "null", "true"])
def test_a_line_that_is_not_an_object(bench: Path, text: str) -> None:
    write_rows(bench, [row(), "", text])
    line, reason = only_problem(bench)
    assert line == 3
    assert reason.startswith("expected a JSON object, got ")


@pytest.mark.parametrize("key", REQUIRED_FIELDS)
def test_missing_required_field(bench: Path, key: str) -> None:
    write_rows(bench, [row(), row(**{"id": "q2", key: _DROP})])
    assert only_problem(bench) == (2, f"missing required field '{key}'")


@pytest.mark.parametrize("key", [k for k in REQUIRED_FIELDS if k != "input"])
@pytest.mark.parametrize("value", ["", "   ", "\t\n"])
def test_empty_required_field(bench: Path, key: str, value: str) -> None:
    write_rows(bench, [row(**{key: value})])
    assert only_problem(bench) == (1, f"field '{key}' is empty")


@pytest.mark.parametrize("key", REQUIRED_FIELDS)
@pytest.mark.parametrize(
    ("value", "json_type"),
    [
        (42, "number"),
        (1.5, "number"),
        (None, "null"),
        (True, "boolean"),
        (["a"], "array"),
        ({"a": 1}, "object"),
    ],
)
def test_required_field_of_wrong_type(bench: Path, key: str, value: object, json_type: str) -> None:
    write_rows(bench, [row(**{key: value})])
    assert only_problem(bench) == (1, f"field '{key}' must be a string, got {json_type}")


@pytest.mark.parametrize(
    ("value", "json_type"), [([1], "array"), ("x", "string"), (3, "number"), (None, "null")]
)
def test_evaluation_config_not_an_object(bench: Path, value: object, json_type: str) -> None:
    write_rows(bench, [row(evaluation_config=value)])
    assert only_problem(bench) == (1, f"field 'evaluation_config' must be an object, got {json_type}")


@pytest.mark.parametrize("tags", ["math", [1], ["ok", 2], [""], ["ok", "  "], {"a": 1}, None, [["nested"]]])
def test_tags_not_a_list_of_non_empty_strings(bench: Path, tags: object) -> None:
    write_rows(bench, [row(tags=tags)])
    assert only_problem(bench) == (
        1,
        f"field 'tags' must be a list of non-empty strings, got {json.dumps(tags)}",
    )


def test_unknown_field(bench: Path) -> None:
    write_rows(bench, [row(), row(id="q2", extra=1)])
    line, reason = only_problem(bench)
    assert line == 2
    assert reason.startswith("unknown field 'extra' (known: ")
    # The message lists every field a row may have.
    for key in (*REQUIRED_FIELDS, "evaluation_config", "tags"):
        assert key in reason


def test_unknown_evaluation_type_lists_the_supported_ones(bench: Path) -> None:
    write_rows(bench, [row(evaluation_type="nope")])
    assert only_problem(bench, REAL_VALIDATORS) == (
        1,
        f"unknown evaluation_type 'nope' (supported: {', '.join(sorted(REAL_VALIDATORS))})",
    )
    assert only_problem(bench, FAKE_VALIDATORS) == (
        1,
        "unknown evaluation_type 'nope' (supported: alpha, fake)",
    )


@pytest.mark.parametrize("difficulty", ["Easy", "trivial", "EASY"])
def test_unknown_difficulty(bench: Path, difficulty: str) -> None:
    write_rows(bench, [row(difficulty=difficulty)])
    assert only_problem(bench) == (
        1,
        f"unknown difficulty '{difficulty}' (expected one of: easy, medium, hard)",
    )


def test_duplicate_id_names_the_first_line(bench: Path) -> None:
    write_rows(bench, [row(id="a"), "", row(id="b"), row(id="a"), row(id="a")])
    assert problems(bench) == [
        (4, "duplicate id 'a' (first used on line 1)"),
        (5, "duplicate id 'a' (first used on line 1)"),
    ]


def test_ids_are_case_sensitive(bench: Path) -> None:
    write_rows(bench, [row(id="a"), row(id="A")])
    assert [c.id for c in load_benchmark(bench, REAL_VALIDATORS).cases] == ["a", "A"]


@pytest.mark.parametrize("row_id", ["a b", "a::b", "a/b", "a:b", "-a", ".a", "_a", "a[1]", " a", "a\tb", "é"])
def test_invalid_id(bench: Path, row_id: str) -> None:
    write_rows(bench, [row(id=row_id)])
    line, reason = only_problem(bench)
    assert line == 1
    assert reason.startswith(f"invalid id {row_id!r}: ")


def test_id_with_trailing_newline_is_invalid(bench: Path) -> None:
    write_rows(bench, [row(id="a\n")])
    line, reason = only_problem(bench)
    assert line == 1
    assert reason.startswith("invalid id ")


def test_invalid_regex_in_evaluation_config(bench: Path) -> None:
    config = {"extract_pattern": r"(\d+"}
    with pytest.raises(ValueError) as info:
        REAL_VALIDATORS["exact_match"](config)
    write_rows(bench, [row(), "", row(id="q2", evaluation_config=config)])
    assert only_problem(bench) == (3, f"evaluation_config: {info.value}")
    assert "extract_pattern" in str(info.value)


def test_fake_validator_error_becomes_the_reason(bench: Path) -> None:
    write_rows(bench, [row(evaluation_type="fake", evaluation_config={"bad": 1})])
    assert only_problem(bench, FAKE_VALIDATORS) == (1, "evaluation_config: bad is not allowed here, got 1")


def test_invalid_utf8_reports_its_line(bench: Path) -> None:
    bench.write_bytes(json.dumps(row()).encode() + b"\n\n" + b'{"id": "caf\xe9"}\n')
    line, reason = only_problem(bench)
    assert line == 3
    assert reason.startswith("not valid UTF-8 (")


def test_invalid_utf8_after_a_bom_reports_its_line(bench: Path) -> None:
    bench.write_bytes(b"\xef\xbb\xbf\n\n\xff\n")
    assert only_problem(bench)[0] == 3


@pytest.mark.parametrize("content", [b"", b"\n", b"\n  \n\r\n\t\n", b"\xef\xbb\xbf"])
def test_empty_file_is_an_error(bench: Path, content: bytes) -> None:
    bench.write_bytes(content)
    assert only_problem(bench) == (1, "empty benchmark file: expected one JSON object per line")


# ---------------------------------------------------------------------------------------------------------
# several problems at once


def test_every_bad_line_is_reported_in_order(bench: Path) -> None:
    write_rows(
        bench,
        [
            row(id="ok"),
            "not json",
            "",
            row(id="q3", difficulty="impossible"),
            "[1, 2]",
            row(id="ok"),
            row(id="q7", evaluation_config={"extract_pattern": "(x"}),
            row(id="fine"),
        ],
    )
    assert [line for line, _ in problems(bench)] == [2, 4, 5, 6, 7]


def test_one_row_can_have_several_reasons(bench: Path) -> None:
    write_rows(bench, [row(extra=1, instruction=_DROP, difficulty=3)])
    found = problems(bench)
    assert [line for line, _ in found] == [1, 1, 1]
    assert found[0][1].startswith("unknown field 'extra'")
    assert found[1:] == [
        (1, "missing required field 'instruction'"),
        (1, "field 'difficulty' must be a string, got number"),
    ]


def test_id_difficulty_type_config_and_tags_reasons_are_all_reported(bench: Path) -> None:
    write_rows(bench, [row(id="a b", difficulty="x", evaluation_type="nope", evaluation_config=[], tags="t")])
    reasons = [reason for line, reason in problems(bench) if line == 1]
    assert len(reasons) == 5
    assert reasons[0].startswith("invalid id 'a b'")
    assert reasons[1].startswith("unknown difficulty 'x'")
    assert reasons[2] == "field 'evaluation_config' must be an object, got array"
    assert reasons[3].startswith("unknown evaluation_type 'nope'")
    assert reasons[4] == "field 'tags' must be a list of non-empty strings, got \"t\""


def test_an_invalid_row_does_not_claim_its_id(bench: Path) -> None:
    # The first "a" is refused (bad difficulty), so the second "a" is not reported as a duplicate.
    write_rows(bench, [row(id="a", difficulty="x"), row(id="a")])
    assert [line for line, _ in problems(bench)] == [1]


# ---------------------------------------------------------------------------------------------------------
# property: ids in order, each Case.line points at the line holding its row

_ALNUM = "abcXYZ0189"
_ids = st.builds(str.__add__, st.sampled_from(_ALNUM), st.text(_ALNUM + "._+-", max_size=12))
_non_blank = st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != "")
_rows = st.fixed_dictionaries(
    {
        "instruction": _non_blank,
        "input": st.text(max_size=10),
        "expected_output": _non_blank,
        "evaluation_type": st.sampled_from(sorted(FAKE_VALIDATORS)),
        "difficulty": st.sampled_from(DIFFICULTIES),
    },
    optional={
        "evaluation_config": st.dictionaries(st.sampled_from(["k", "threshold"]), st.integers()),
        "tags": st.lists(_non_blank, max_size=3),
    },
)


@st.composite
def _jsonl_files(draw: st.DrawFn) -> tuple[bytes, list[dict[str, Any]]]:
    ids = draw(st.lists(_ids, min_size=1, max_size=8, unique=True))
    rows = [{"id": i, **draw(_rows)} for i in ids]
    blank = st.sampled_from(["", " ", "\t", "  \t "])
    lines: list[str] = []
    for r in rows:
        lines += draw(st.lists(blank, max_size=2))
        lines.append(json.dumps(r, ensure_ascii=draw(st.booleans())))
    lines += draw(st.lists(blank, max_size=2))
    endings = [draw(st.sampled_from(["\n", "\r\n"])) for _ in lines]
    text = "".join(line + end for line, end in zip(lines, endings, strict=True))
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # a final line without newline
    return text.encode("utf-8"), rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=_jsonl_files())
def test_property_ids_in_order_and_lines_point_at_their_rows(
    tmp_path: Path, file: tuple[bytes, list[dict[str, Any]]]
) -> None:
    data, rows = file
    path = tmp_path / "prop.jsonl"  # rewritten by every example
    path.write_bytes(data)
    result = load_benchmark(path, FAKE_VALIDATORS)

    assert [c.id for c in result.cases] == [r["id"] for r in rows]
    assert result.sha256 == "sha256:" + hashlib.sha256(data).hexdigest()
    file_lines = data.split(b"\n")
    for case, r in zip(result.cases, rows, strict=True):
        assert json.loads(file_lines[case.line - 1].rstrip(b"\r")) == r
        assert case.evaluation_config == r.get("evaluation_config", {})
        assert case.tags == tuple(r.get("tags", []))


# ---------------------------------------------------------------------------------------------------------
# details the mutation run showed were unpinned: columns, byte offsets, field rules, row validators


def test_a_crlf_file_reports_the_same_json_column_as_an_lf_file(bench: Path) -> None:
    # The "\r" of CRLF is stripped before parsing: left in, json would count it and move the column.
    write_rows(bench, [row(), '{"id": '], ending="\r\n")
    assert only_problem(bench) == (2, "invalid JSON: Expecting value (column 8)")


def test_text_after_the_object_is_invalid_json(bench: Path) -> None:
    # Only "\r" is stripped from a row's end: trailing garbage ("X") must not be trimmed into a valid row.
    text = json.dumps(row(id="q2"))
    write_rows(bench, [row(), text + "X"])
    assert only_problem(bench) == (2, f"invalid JSON: Extra data (column {len(text) + 1})")


def test_invalid_utf8_right_after_a_bom_names_its_own_line(bench: Path) -> None:
    # The newlines after the bad byte must not be counted: the offset is exactly the BOM's 3 bytes.
    bench.write_bytes(b"\xef\xbb\xbf\n\xff\n\n\n")
    assert only_problem(bench)[0] == 2


def test_invalid_utf8_without_a_bom_is_not_shifted_by_one(bench: Path) -> None:
    bench.write_bytes(b"\xff\n\n\n")
    assert only_problem(bench) == (1, "not valid UTF-8 (invalid start byte)")


def _needs_expected_only_when_asked(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """A field rule: expected_output may be empty unless the config says "strict"; input must be given."""
    if config.get("strict"):
        return frozenset(), frozenset({"input"})
    return frozenset({"input", "expected_output"}), frozenset({"input"})


RULES = {"fake": _needs_expected_only_when_asked}


def test_a_field_rule_lets_its_type_leave_a_field_empty(bench: Path) -> None:
    write_rows(bench, [row(evaluation_type="fake", expected_output="", input="x")])
    cases = load_benchmark(bench, FAKE_VALIDATORS, RULES).cases
    assert [(c.id, c.expected_output) for c in cases] == [("q1", "")]


def test_a_field_rule_reads_the_rows_config_and_can_require_a_field(bench: Path) -> None:
    write_rows(
        bench,
        [
            row(id="a", evaluation_type="fake", input=""),
            row(id="b", evaluation_type="fake", expected_output="", evaluation_config={"strict": True}),
        ],
    )
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(bench, FAKE_VALIDATORS, RULES)
    assert info.value.problems == [(1, "field 'input' is empty"), (2, "field 'expected_output' is empty")]


def test_a_field_rule_only_applies_to_its_own_type(bench: Path) -> None:
    write_rows(bench, [row(evaluation_type="alpha", expected_output="")])
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(bench, FAKE_VALIDATORS, RULES)
    assert info.value.problems == [(1, "field 'expected_output' is empty")]


def test_a_config_that_is_not_an_object_is_reported_not_passed_to_the_field_rule(bench: Path) -> None:
    # perplexity's rule calls config.get: given a list it would crash collection instead of naming the row.
    write_rows(bench, [row(evaluation_type="perplexity", evaluation_config=[1])])
    with pytest.raises(BenchmarkError) as info:
        read_benchmark(bench)
    assert (1, "field 'evaluation_config' must be an object, got array") in info.value.problems


def _answer_in_config(config: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
    """A row validator: the row's expected_output must be one of the config's "answers"."""
    if obj["expected_output"] not in config.get("answers", []):
        raise ValueError(f"expected_output {obj['expected_output']!r} is not one of the answers")


def test_a_row_validator_sees_the_config_and_the_row(bench: Path) -> None:
    write_rows(
        bench,
        [
            row(
                id="a", evaluation_type="fake", expected_output="B", evaluation_config={"answers": ["A", "B"]}
            ),
            row(
                id="b", evaluation_type="fake", expected_output="C", evaluation_config={"answers": ["A", "B"]}
            ),
            row(id="c", evaluation_type="alpha", expected_output="C"),  # no validator for alpha
        ],
    )
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(bench, FAKE_VALIDATORS, None, {"fake": _answer_in_config})
    assert info.value.problems == [(2, "evaluation_config: expected_output 'C' is not one of the answers")]


def test_unknown_field_lists_the_known_ones_comma_separated(bench: Path) -> None:
    write_rows(bench, [row(extra=1)])
    assert only_problem(bench) == (
        1,
        "unknown field 'extra' (known: id, instruction, input, expected_output, evaluation_type, "
        "difficulty, evaluation_config, tags, system, metrics)",
    )


def test_invalid_id_message_says_what_an_id_may_hold(bench: Path) -> None:
    write_rows(bench, [row(id="a b")])
    assert only_problem(bench) == (
        1,
        "invalid id 'a b': use letters, digits and . _ + - (no spaces, '/' or '::'), "
        "starting with a letter or digit",
    )


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(st.sampled_from(["a", "\ud800", "\udfff", "é", "😀", "\\"]), max_size=4),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=80,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.dictionaries(st.text(max_size=3), _JSON_VALUES, max_size=3),
    st.integers(0, 70),
    st.booleans(),
)
def test_a_line_is_walked_for_surrogates_and_depth_whenever_it_could_hold_them(
    obj: dict[str, Any], extra_depth: int, ascii_only: bool
) -> None:
    # jsonl_objects walks a parsed line only when its text could hold a lone surrogate (a \uD800-style
    # escape) or nesting past MAX_DEPTH (that many brackets): its verdict must be the full walk's.
    from pytest_llmeval.benchmark import _unusable, jsonl_objects

    for _ in range(extra_depth):
        obj = {"k": [obj]} if extra_depth % 2 else {"k": obj}
    try:
        line = json.dumps(obj, ensure_ascii=ascii_only)
        line.encode("utf-8")  # a raw lone surrogate is not UTF-8: no file holds this line
    except (RecursionError, UnicodeEncodeError):
        return
    [(_, parsed, why)] = list(jsonl_objects(line))
    try:
        expected = _unusable(json.loads(line))
    except RecursionError:
        return
    assert why == expected
    assert (parsed is None) == (expected is not None)
