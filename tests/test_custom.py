"""Unit tests of the custom scorer: config checks, loading a benchmark's script, its function's results."""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.scorers.custom import load_for_config, load_function, score, validate_config

SCRIPT = """\
import math
from dataclasses import dataclass
from fractions import Fraction

# how many times this module body ran, seen from outside through a file
with open(__file__ + ".loads", "a") as log:
    log.write("x")


@dataclass
class Verdict:
    value: float


def evaluate(generated, expected):
    return 1.0 if generated.strip().lower() == expected.strip().lower() else 0.0


def partial(generated, expected):
    shared = set(generated.split()) & set(expected.split())
    return Verdict(len(shared) / max(len(set(expected.split())), 1)).value


def raises(generated, expected):
    if generated == "ok":
        return 1
    return helper(generated)


def helper(generated):
    return int(generated)  # ValueError for anything but digits


def too_big(generated, expected):
    return 1.5


def negative(generated, expected):
    return -0.1


def text(generated, expected):
    return "x"


def none(generated, expected):
    return None


def nan(generated, expected):
    return math.nan


def boolean(generated, expected):
    return generated == expected


def fraction(generated, expected):
    return Fraction(1, 3)


def exits(generated, expected):
    raise SystemExit(3)


def one_argument(generated):
    return 1.0


def flexible(*args):
    return 0.25


not_callable = 3
"""

CONFIG = {"script": "eval/custom_eval.py", "function": "evaluate"}


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    """A benchmark directory with eval/custom_eval.py beside where the .jsonl would be."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "custom_eval.py").write_text(SCRIPT)
    return tmp_path


def _line(code: str) -> int:
    """The line of SCRIPT that holds `code`, as a traceback numbers it."""
    return next(number for number, line in enumerate(SCRIPT.splitlines(), start=1) if code in line)


def _load(bench: Path, function: str) -> Callable[[str, str], Any]:
    return load_for_config({**CONFIG, "function": function}, bench)


def _score(bench: Path, function: str, prediction: str = "a", expected: str = "a") -> float:
    config = {**CONFIG, "function": function}
    return score(prediction, expected, config, function=load_for_config(config, bench)).value


def _write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


# ---------------------------------------------------------------------------------------------------------
# validate_config


@pytest.mark.parametrize(
    "config",
    [
        {"script": "eval/custom_eval.py"},
        {"script": "eval/custom_eval.py", "function": "evaluate"},
        {"script": "../shared/score.py", "function": "score_it", "threshold": 1, "max_new_tokens": 32},
    ],
)
def test_valid_configs_pass(config: dict[str, Any]) -> None:
    validate_config(config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "script is required"),
        ({"function": "evaluate"}, "script is required"),
        ({"script": 3}, "script must be a path to a .py file, not 3 (int)"),
        ({"script": " "}, "script must be a path"),
        ({"script": "/abs/eval.py"}, "script must be relative to the benchmark file"),
        ({"script": "C:\\eval\\x.py"}, "script must be relative to the benchmark file"),
        ({"script": "eval/custom_eval"}, "script must be a .py file"),
        ({"script": "e.py", "function": "not a name"}, "function must be the name of a function"),
        (
            {"script": "e.py", "function": 1},
            "function must be the name of a function in the script, not 1 (int)",
        ),
        ({"script": "e.py", "threshold": 2}, "threshold"),
        ({"script": "e.py", "max_new_tokens": 0}, "max_new_tokens"),
        ({"script": "e.py", "fn": "evaluate"}, "unknown key 'fn' in evaluation_config for custom"),
    ],
)
def test_wrong_configs_say_what_is_wrong(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")) as info:
        validate_config(config)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------------------
# loading


def test_good_function_scores(bench: Path) -> None:
    function = _load(bench, "evaluate")
    result = score(" Paris ", "paris", CONFIG, function=function)
    assert result.value == 1.0
    assert result.threshold == 0.5
    assert result.details == {"script": "eval/custom_eval.py", "function": "evaluate"}
    assert json.loads(json.dumps(result.to_json())) == result.to_json()
    assert score("Lyon", "Paris", CONFIG, function=function).value == 0.0
    assert score("Lyon", "Paris", {**CONFIG, "threshold": 0}, function=function).passed


def test_function_defaults_to_evaluate(bench: Path) -> None:
    function = load_for_config({"script": "eval/custom_eval.py"}, bench)
    assert function("a", "a") == 1.0


def test_partial_credit_and_numbers_other_than_float(bench: Path) -> None:
    assert _score(bench, "partial", "the cat sat", "the cat slept") == pytest.approx(2 / 3)
    assert _score(bench, "fraction") == pytest.approx(1 / 3)
    assert _score(bench, "raises", "ok") == 1.0  # an int is a number
    assert _score(bench, "flexible") == 0.25


def test_the_script_is_imported_once_for_many_rows(bench: Path) -> None:
    functions = {_load(bench, "evaluate") for _ in range(60)}
    assert len(functions) == 1
    assert (bench / "eval" / "custom_eval.py.loads").read_text() == "x"


def test_an_edited_script_is_imported_again(bench: Path) -> None:
    script = bench / "eval" / "custom_eval.py"
    assert _load(bench, "evaluate")("a", "a") == 1.0
    before = script.stat().st_mtime_ns
    script.write_text(SCRIPT.replace("return 1.0 if", "return 0.5 if"))
    os.utime(script, ns=(before + 1_000_000_000, before + 1_000_000_000))
    assert _load(bench, "evaluate")("a", "a") == 0.5
    assert (bench / "eval" / "custom_eval.py.loads").read_text() == "xx"


def test_modules_get_unique_names_that_shadow_nothing(tmp_path: Path) -> None:
    first = _write(tmp_path / "a" / "eval" / "json.py", "def evaluate(g, e):\n    return 0.1\n")
    second = _write(tmp_path / "b" / "eval" / "json.py", "def evaluate(g, e):\n    return 0.9\n")
    one, two = load_function(first, "evaluate"), load_function(second, "evaluate")
    assert (one("", ""), two("", "")) == (0.1, 0.9)
    assert sys.modules["json"].__name__ == "json"  # the stdlib module is untouched
    assert one.__module__ != two.__module__
    assert one.__module__.startswith("pytest_llmeval_custom_")
    assert sys.modules[one.__module__].__file__ == str(first.resolve())


def test_script_relative_to_the_benchmark_directory_not_the_cwd(
    bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_for_config(CONFIG, bench)("x", "x") == 1.0


# ---------------------------------------------------------------------------------------------------------
# load errors (collection fails with these)


def test_syntax_error_names_script_and_line(tmp_path: Path) -> None:
    _write(tmp_path / "eval" / "custom_eval.py", "x = 1\n\ndef evaluate(g, e)\n    return 1\n")
    before = set(sys.modules)
    with pytest.raises(ValueError) as info:
        load_for_config(CONFIG, tmp_path)
    assert str(info.value) == "cannot import eval/custom_eval.py: SyntaxError: expected ':' (line 3)"
    assert set(sys.modules) == before


def test_syntax_error_elsewhere_points_at_the_script_line_that_ran_it(tmp_path: Path) -> None:
    _write(tmp_path / "eval" / "custom_eval.py", "x = 1\nexec(compile('y = (', 'other.py', 'exec'))\n")
    with pytest.raises(ValueError) as info:
        load_for_config(CONFIG, tmp_path)
    assert str(info.value) == (
        "cannot import eval/custom_eval.py: SyntaxError: '(' was never closed (other.py, line 1) (line 2)"
    )


def test_error_at_import_names_the_exception_and_line(tmp_path: Path) -> None:
    _write(tmp_path / "eval" / "custom_eval.py", "import os\nimport no_such_module_here\n")
    with pytest.raises(ValueError) as info:
        load_for_config(CONFIG, tmp_path)
    assert str(info.value) == (
        "cannot import eval/custom_eval.py: "
        "ModuleNotFoundError: No module named 'no_such_module_here' (line 2)"
    )


def test_exit_at_import_is_an_import_error(tmp_path: Path) -> None:
    _write(tmp_path / "eval" / "custom_eval.py", "import sys\nsys.exit(2)\n")
    with pytest.raises(ValueError, match=r"^cannot import eval/custom_eval.py: SystemExit: 2 \(line 2\)$"):
        load_for_config(CONFIG, tmp_path)


def test_failed_import_leaves_nothing_in_sys_modules(tmp_path: Path) -> None:
    before = set(sys.modules)
    _write(tmp_path / "eval" / "custom_eval.py", "raise RuntimeError('no')\n")
    with pytest.raises(ValueError, match="RuntimeError: no"):
        load_for_config(CONFIG, tmp_path)
    assert set(sys.modules) - before == set()


def test_missing_script(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^cannot import eval/custom_eval.py: No such file or directory$"):
        load_for_config(CONFIG, tmp_path)


def test_script_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "eval" / "custom_eval.py").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"^cannot import eval/custom_eval.py: not a file$"):
        load_for_config(CONFIG, tmp_path)


def test_missing_function_suggests_the_close_one(bench: Path) -> None:
    with pytest.raises(ValueError) as info:
        _load(bench, "evalute")
    assert str(info.value) == "eval/custom_eval.py has no function 'evalute' (did you mean 'evaluate'?)"
    with pytest.raises(ValueError, match=r"^eval/custom_eval.py has no function 'score'$"):
        _load(bench, "score")


def test_not_callable(bench: Path) -> None:
    with pytest.raises(
        ValueError, match=r"^'not_callable' in eval/custom_eval.py is not callable: it is 3 \(int\)$"
    ):
        _load(bench, "not_callable")


def test_wrong_arity_is_caught_at_load(bench: Path) -> None:
    with pytest.raises(ValueError, match=r"^'one_argument' in eval/custom_eval.py must take two arguments"):
        _load(bench, "one_argument")


def test_load_function_names_the_path_as_given(bench: Path) -> None:
    path = bench / "eval" / "custom_eval.py"
    assert load_function(path, "evaluate")("a", "a") == 1.0
    with pytest.raises(ValueError, match=f"^{re.escape(str(path))} has no function 'grade'$"):
        load_function(path, "grade")


# ---------------------------------------------------------------------------------------------------------
# bad results (the row fails, the others go on)


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("too_big", "too_big in eval/custom_eval.py returned 1.5; it must return a number in [0, 1]"),
        ("negative", "negative in eval/custom_eval.py returned -0.1; it must return a number in [0, 1]"),
        ("nan", "nan in eval/custom_eval.py returned nan; it must return a number in [0, 1]"),
        ("text", "text in eval/custom_eval.py returned 'x' (str); it must return a number in [0, 1]"),
        ("none", "none in eval/custom_eval.py returned None (NoneType); it must return a number in [0, 1]"),
        ("boolean", "boolean in eval/custom_eval.py returned True (bool); it must return a number in [0, 1]"),
        ("exits", f"exits in eval/custom_eval.py raised SystemExit: 3 (line {_line('raise SystemExit(3)')})"),
    ],
)
def test_bad_results_raise_a_clear_error(bench: Path, function: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        _score(bench, function)
    assert str(info.value) == message


def test_a_raising_function_fails_its_row_only(bench: Path) -> None:
    config = {**CONFIG, "function": "raises"}
    function = load_for_config(config, bench)
    with pytest.raises(ValueError) as info:
        score("seven", "7", config, function=function)
    # the line is the innermost one in the script: helper's, where int() raised
    assert str(info.value) == (
        "raises in eval/custom_eval.py raised "
        f"ValueError: invalid literal for int() with base 10: 'seven' (line {_line('return int(generated)')})"
    )
    assert isinstance(info.value.__cause__, ValueError)
    assert score("ok", "7", config, function=function).value == 1.0  # the next row goes on


def test_score_checks_the_config_too(bench: Path) -> None:
    with pytest.raises(ValueError, match="unknown key"):
        score("a", "a", {**CONFIG, "extra": 1}, function=_load(bench, "evaluate"))


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_in_range_passes_through_and_others_are_refused(value: float) -> None:
    def constant(generated: str, expected: str) -> float:
        return value

    if 0.0 <= value <= 1.0:
        assert score("a", "b", CONFIG, function=constant).value == value
    else:
        with pytest.raises(ValueError, match=r"it must return a number in \[0, 1\]"):
            score("a", "b", CONFIG, function=constant)


# ---------------------------------------------------------------------------------------------------------
# details the mutation run showed were unpinned


def test_a_config_that_is_not_a_mapping_names_its_type() -> None:
    with pytest.raises(ValueError, match=r"^evaluation_config for custom must be a mapping, not list$"):
        validate_config([])  # type: ignore[arg-type]


def test_only_public_callables_are_suggested_for_a_missing_function(tmp_path: Path) -> None:
    # A private helper or a constant is never what the benchmark meant to name.
    _write(tmp_path / "eval" / "custom_eval.py", "def _evaluate(g, e):\n    return 1.0\n\nevaluates = 3\n")
    with pytest.raises(ValueError) as info:
        load_for_config(CONFIG, tmp_path)
    assert str(info.value) == "eval/custom_eval.py has no function 'evaluate'"


def test_a_builtin_without_a_signature_is_accepted_at_load(tmp_path: Path) -> None:
    # inspect.signature(max) raises: the arity check is skipped, and the call itself will tell.
    _write(tmp_path / "eval" / "custom_eval.py", "evaluate = max\n")
    assert load_for_config(CONFIG, tmp_path) is max


def test_load_function_imports_a_script_without_the_py_suffix(tmp_path: Path) -> None:
    # load_function takes any path; spec_from_file_location alone finds no loader for a name without .py.
    script = _write(tmp_path / "grader", "def evaluate(g, e):\n    return 0.75\n")
    assert load_function(script, "evaluate")("a", "b") == 0.75


def test_an_edited_script_drops_its_previous_module(bench: Path) -> None:
    script = bench / "eval" / "custom_eval.py"
    old = _load(bench, "evaluate").__module__
    before = script.stat().st_mtime_ns
    script.write_text(SCRIPT + "\n")
    os.utime(script, ns=(before + 1_000_000_000, before + 1_000_000_000))
    new = _load(bench, "evaluate").__module__
    assert new != old
    assert new in sys.modules and old not in sys.modules


class _Grader:
    """A callable object: no __code__, so no script line can be named."""

    def __call__(self, generated: str, expected: str) -> float:
        raise RuntimeError("no model")


def test_a_raising_callable_without_code_is_reported_without_a_line() -> None:
    with pytest.raises(ValueError) as info:
        score("a", "b", CONFIG, function=_Grader())
    assert str(info.value) == "evaluate in eval/custom_eval.py raised RuntimeError: no model"


def test_a_function_that_cannot_be_called_is_reported_without_a_line() -> None:
    # The TypeError comes from the call itself: no frame of the function is in the traceback.
    def one_argument(generated: str) -> float:
        return 1.0

    with pytest.raises(ValueError) as info:
        score("a", "b", CONFIG, function=one_argument)  # type: ignore[arg-type]
    assert str(info.value).startswith("evaluate in eval/custom_eval.py raised TypeError: ")
    assert "(line" not in str(info.value)


def test_an_exception_without_a_message_is_named_alone() -> None:
    def silent(generated: str, expected: str) -> float:
        raise KeyError

    with pytest.raises(ValueError) as info:
        score("a", "b", CONFIG, function=silent)
    assert re.fullmatch(r"evaluate in eval/custom_eval.py raised KeyError \(line \d+\)", str(info.value))
