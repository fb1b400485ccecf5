"""The code_execution scorer: code extraction, verdicts, partial credit, harness failures, config validation.

Verdicts and scores are tested on scripted RunResults (a stand-in for the sandbox, which is the harness, not
the model); a few rows go through the real sandbox end to end. tests/test_sandbox.py holds the hostile ones.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.sandbox import Isolation, Limits, RunResult, Sandbox, SandboxError, detect
from pytest_llmeval.scorers.code_execution import VERDICTS, extract_code, score, validate_config, verdict


def config(*cases: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "language": "python",
        "timeout_seconds": 2,
        "test_cases": [{"input": given, "expected_output": want} for given, want in cases],
        **extra,
    }


def ran(stdout: str = "", exit_code: int | None = 0, **facts: Any) -> RunResult:
    return RunResult(
        exit_code=exit_code, signal=facts.pop("signal", None), stdout=stdout, stderr="", elapsed=0.01, **facts
    )


class ScriptedSandbox:
    """Hands back prepared results (or raises prepared errors) in order, and records what it was asked."""

    isolation = Isolation(level="strict", layers=("fresh-interpreter",), missing=(), reason="")

    def __init__(self, *outcomes: RunResult | Exception) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, str, Limits]] = []

    def run(self, code: str, stdin: str, limits: Limits) -> RunResult:
        self.calls.append((code, stdin, limits))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


# --- extraction ----------------------------------------------------------------------------------------


def test_output_without_a_fence_is_the_program() -> None:
    assert extract_code("print(1)\nprint(2)") == "print(1)\nprint(2)"


def test_the_python_block_is_preferred_over_an_earlier_untagged_one() -> None:
    text = (
        "Input format:\n```\n3 4\n```\nSolution:\n```python\nprint(7)\n```\nThen:\n```python\nprint(8)\n```"
    )
    assert extract_code(text) == "print(7)\n"


def test_without_a_python_block_the_first_block_is_taken() -> None:
    assert extract_code("Here:\n```\nprint(1)\n```\nand\n```js\nx\n```") == "print(1)\n"
    assert extract_code("```text\nhello\n```") == "hello\n"


@pytest.mark.parametrize("tag", ["python", "Python", "py", "python3", "python title=solution.py"])
def test_python_tags(tag: str) -> None:
    assert extract_code(f"```\nnope\n```\n```{tag}\nprint(1)\n```") == "print(1)\n"


def test_an_unclosed_block_runs_to_the_end() -> None:
    assert extract_code("Sure!\n```python\nprint(1)\nprint(2)") == "print(1)\nprint(2)\n"


def test_an_indented_block_is_dedented_and_a_longer_fence_may_close() -> None:
    assert (
        extract_code("1. Code:\n   ```python\n   if True:\n       print(1)\n   ````\n")
        == "if True:\n    print(1)\n"
    )


def test_a_fence_with_text_after_it_does_not_close_a_block() -> None:
    text = "```python\ns = '''\n```inner\n'''\nprint(s)\n```"
    assert extract_code(text) == "s = '''\n```inner\n'''\nprint(s)\n"


@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_characters="`\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"))
    )
)
def test_a_fenced_program_comes_back_unchanged(lines: list[str]) -> None:
    program = "\n".join(["x = 1", *lines])  # a first line at column 0: nothing to dedent
    assert extract_code(f"Answer:\n```python\n{program}\n```\nDone.") == program + "\n"


# --- verdicts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (ran("4\n"), "passed"),
        (ran("4  \r\n\r\n"), "passed"),  # trailing whitespace and CRLF do not count
        (ran("a\r\nb\n"), "passed"),
        (ran(" 4"), "wrong_output"),  # leading whitespace does
        (ran("5\n"), "wrong_output"),
        (ran("4\n", exit_code=1), "runtime_error"),  # right output, then a crash
        (ran("", exit_code=None, signal=signal.SIGSEGV), "runtime_error"),
        (ran("4\n", exit_code=None, signal=signal.SIGKILL, timed_out=True), "timeout"),
        (ran("", exit_code=None, signal=signal.SIGXCPU, cpu_limited=True), "timeout"),
        (ran("x" * 100, exit_code=None, signal=signal.SIGKILL, output_truncated=True), "output_limit"),
        (ran("", exit_code=1, memory_exceeded=True), "memory_limit"),
        (ran("", exit_code=1, compile_error=True), "compile_error"),
        (ran("4\n", exit_code=None, sandbox_error="bwrap: no permission"), "sandbox_error"),
    ],
)
def test_verdict(result: RunResult, expected: str) -> None:
    assert verdict(result, "4\n" if "b" not in result.stdout else "a\nb") == expected
    assert expected in VERDICTS


def test_expected_output_is_stripped_the_same_way() -> None:
    assert verdict(ran("4"), "4\r\n\n  ") == "passed"


# --- scores ----------------------------------------------------------------------------------------------


def test_partial_credit_and_pass_at_1() -> None:
    box = ScriptedSandbox(ran("1"), ran("x"), ran("3"), ran("", exit_code=1))
    result = score("print(1)", "", config(("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")), sandbox=box)
    assert result.value == 0.5
    assert result.details["pass_at_1"] == 0.0
    assert [case["verdict"] for case in result.details["cases"]] == [
        "passed",
        "wrong_output",
        "passed",
        "runtime_error",
    ]
    assert result.details["verdicts"] == {"passed": 2, "wrong_output": 1, "runtime_error": 1}
    assert [stdin for _, stdin, _ in box.calls] == ["a", "b", "c", "d"]
    assert all(limits.wall_seconds == 2 for _, _, limits in box.calls)


def test_all_passed_and_the_threshold() -> None:
    box = ScriptedSandbox(ran("1"), ran("2"))
    result = score("code", "", config(("", "1"), ("", "2")), sandbox=box)
    assert result.value == 1.0 and result.details["pass_at_1"] == 1.0 and result.passed
    lenient = score(
        "code", "", config(("", "1"), ("", "2"), threshold=0.5), sandbox=ScriptedSandbox(ran("1"), ran("x"))
    )
    assert lenient.value == 0.5 and lenient.passed


def test_a_compile_error_scores_zero_and_runs_once() -> None:
    box = ScriptedSandbox(ran("", exit_code=1, compile_error=True))
    result = score("def f(:", "", config(("", "1"), ("", "2"), ("", "3")), sandbox=box)
    assert result.value == 0.0
    assert [case["verdict"] for case in result.details["cases"]] == ["compile_error"] * 3
    assert len(box.calls) == 1  # compiling is deterministic: no need to fail three times


def test_sandbox_errors_are_left_out_of_the_fraction_and_reported() -> None:
    box = ScriptedSandbox(
        ran("1"), ran("", exit_code=None, sandbox_error="bwrap died"), OSError("fork failed")
    )
    result = score("code", "", config(("", "1"), ("", "2"), ("", "3")), sandbox=box)
    assert result.value == 1.0  # 1 of 1 counted case
    assert result.details["sandbox_errors"] == 2 and result.details["counted_cases"] == 1
    assert result.details["cases"][1]["reason"] == "bwrap died"
    assert result.details["cases"][2]["reason"] == "OSError: fork failed"


def test_a_harness_that_fails_every_case_raises_instead_of_scoring() -> None:
    box = ScriptedSandbox(
        ran(sandbox_error="bwrap: setting up uid map: Permission denied"), RuntimeError("boom")
    )
    with pytest.raises(SandboxError, match="every test case: bwrap: setting up uid map"):
        score("code", "", config(("", "1"), ("", "2")), sandbox=box)


def test_details_are_json_and_excerpts_are_short() -> None:
    box = ScriptedSandbox(
        RunResult(
            exit_code=1,
            signal=None,
            stdout="o" * 5000,
            stderr="e" * 4000 + "ValueError: end",
            elapsed=0.123456,
        )
    )
    result = score("```python\nprint(1)\n```", "", config(("", "1")), sandbox=box)
    record = json.loads(json.dumps(result.to_json()))
    case = record["cases"][0]
    assert len(case["stdout"]) <= 500 and len(case["stderr"]) <= 500
    assert case["stderr"].endswith("ValueError: end") and case["stdout"].startswith("ooo")
    assert case["elapsed"] == 0.1235 and case["exit_code"] == 1 and case["signal"] is None
    assert record["code"] == "print(1)\n"
    assert record["isolation"]["level"] == "strict"
    assert record["timeout_seconds"] == 2.0


def test_rows_through_the_real_sandbox() -> None:
    box = Sandbox(detect("auto"))
    answer = "Here you go:\n```python\nimport sys\nprint(sum(map(int, sys.stdin.read().split())))\n```\nDone."
    result = score(answer, "", config(("1 2 3", "6"), ("10\n20\n", "30"), ("", "0")), sandbox=box)
    assert result.value == 1.0, result.details
    assert result.details["isolation"] == box.isolation.to_json()
    partial = score("print(6)", "", config(("1 2 3", "6"), ("10 20", "30")), sandbox=box)
    assert partial.value == 0.5
    crlf = score("import sys\nsys.stdout.write('6\\r\\n\\r\\n')", "", config(("", "6")), sandbox=box)
    assert crlf.value == 1.0


# --- config ----------------------------------------------------------------------------------------------


def test_a_valid_config() -> None:
    validate_config(config(("1", "2")))
    validate_config({"language": "python", "test_cases": [{"input": "", "expected_output": ""}]})
    validate_config(config(("1", "2"), threshold=0.5, timeout_seconds=0.5, max_new_tokens=256))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"language": None}, "language is required"),
        ({"language": "javascript"}, "language must be 'python'"),
        ({"timeout_seconds": 0}, "timeout_seconds must be a positive number"),
        ({"timeout_seconds": -1}, "timeout_seconds must be a positive number"),
        ({"timeout_seconds": "5"}, "timeout_seconds must be a positive number of seconds, not '5' \\(str\\)"),
        ({"timeout_seconds": True}, "timeout_seconds must be a positive number"),
        ({"timeout_seconds": float("nan")}, "timeout_seconds must be a positive number"),
        ({"timeout_seconds": float("inf")}, "timeout_seconds must be a positive number"),
        ({"test_cases": None}, "test_cases is required"),
        ({"test_cases": []}, "test_cases must not be empty"),
        ({"test_cases": "1 -> 2"}, "test_cases must be a non-empty list"),
        ({"test_cases": {"input": "1", "expected_output": "2"}}, "test_cases must be a non-empty list"),
        ({"test_cases": ["1"]}, r"test_cases\[0\] must be an object"),
        ({"test_cases": [{"input": "1"}]}, r"test_cases\[0\] has no expected_output"),
        (
            {"test_cases": [{"input": 1, "expected_output": "2"}]},
            r"test_cases\[0\].input must be a string, not 1",
        ),
        (
            {"test_cases": [{"input": "", "expected_output": ""}, {"input": "", "expected": "2"}]},
            r"unknown key 'expected' in test_cases\[1\]; did you mean 'expected_output'\?",
        ),
        (
            {"timeout": 5},
            "unknown key 'timeout' in evaluation_config for code_execution; did you mean 'timeout_seconds'",
        ),
        ({"threshold": 1.5}, r"threshold must be a number in \[0, 1\]"),
        ({"threshold": True}, r"threshold must be a number in \[0, 1\]"),
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive integer"),
    ],
)
def test_an_invalid_config_names_what_is_wrong_on_one_line(change: dict[str, Any], message: str) -> None:
    bad = {key: value for key, value in {**config(("1", "2")), **change}.items() if value is not None}
    with pytest.raises(ValueError, match=message) as error:
        validate_config(bad)
    assert "\n" not in str(error.value)


def test_a_config_that_is_not_a_mapping() -> None:
    with pytest.raises(ValueError, match="must be a mapping, not list"):
        validate_config([])


# --- details the mutation run showed were unpinned -------------------------------------------------------


def test_a_block_of_only_blank_lines_is_kept_as_it_is() -> None:
    assert extract_code("```python\n   \n```") == "   \n"


def test_dedent_removes_the_indent_all_lines_share_even_when_they_differ() -> None:
    assert extract_code("```python\n    x = 1\n   y = 2\n```") == " x = 1\ny = 2\n"


def test_harness_failures_and_skipped_cases_keep_the_record_shape() -> None:
    box = ScriptedSandbox(
        OSError("fork failed"), ran("1", signal=signal.SIGTERM), ran("", compile_error=True)
    )
    result = score("code", "", config(("", "1"), ("", "1"), ("", "1"), ("", "1")), sandbox=box)
    failure, signalled, compiled, skipped = result.details["cases"]
    assert failure == {
        "index": 0,
        "verdict": "sandbox_error",
        "elapsed": 0.0,
        "exit_code": None,
        "signal": None,
        "stdout": "",
        "stderr": "",
        "reason": "OSError: fork failed",
    }
    assert (signalled["index"], signalled["signal"]) == (1, 15)
    assert compiled["index"] == 2
    # not run: compiling is deterministic, so the record is copied, with its own index and no time
    assert skipped == {**compiled, "index": 3, "elapsed": 0.0}
    assert result.details["passed_cases"] == 1 and result.details["counted_cases"] == 3
    assert len(box.calls) == 3


def test_an_output_of_exactly_the_excerpt_length_is_kept_whole() -> None:
    box = ScriptedSandbox(ran("a" * 500))
    assert score("code", "", config(("", "x")), sandbox=box).details["cases"][0]["stdout"] == "a" * 500


def test_a_long_output_keeps_its_head_and_tail_around_a_marker() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(2000))
    box = ScriptedSandbox(ran(text))
    excerpt = score("code", "", config(("", "x")), sandbox=box).details["cases"][0]["stdout"]
    assert excerpt == text[:246] + "\n[...]\n" + text[-247:]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"language": None},
            "language is required in evaluation_config for code_execution (only 'python' runs)",
        ),
        ({"language": "java"}, "language must be 'python' (the only one the sandbox runs), not 'java' (str)"),
        (
            {"test_cases": None},
            "test_cases is required: a non-empty list of {input, expected_output} objects",
        ),
        ({"test_cases": "1 -> 2"}, "test_cases must be a non-empty list of objects, not '1 -> 2' (str)"),
        ({"test_cases": []}, "test_cases must not be empty: a row with no case could never fail"),
        ({"test_cases": [3]}, "test_cases[0] must be an object with input and expected_output, not 3 (int)"),
    ],
)
def test_config_messages_in_full(change: dict[str, Any], message: str) -> None:
    bad = {key: value for key, value in {**config(("1", "2")), **change}.items() if value is not None}
    with pytest.raises(ValueError) as error:
        validate_config(bad)
    assert str(error.value) == message
