"""code_execution: extract the program from the model output, run it on each test case in the sandbox.

Pure but for the sandbox it is handed: no pytest, no torch. The collector calls `validate_config` once per
row; the evaluator calls `score` with the `Sandbox` it built once per process from `sandbox.detect(option)`.

Each test case runs in a fresh process with the case's input on stdin; its stdout, with \\r\\n made \\n and
trailing whitespace stripped, must equal expected_output stripped the same way. The row's score is the
fraction of cases that passed (partial credit); `pass_at_1` in the details is 1.0 only when all did.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmeval.sandbox import Limits, RunResult, Sandbox, SandboxError
from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys as _check_keys
from pytest_llmeval.scorers.config import describe as _describe
from pytest_llmeval.scorers.config import threshold as _threshold

__all__ = ["VERDICTS", "extract_code", "field_rule", "score", "validate_config", "verdict"]

# Kept distinct so that a report tells a slow solution from a wrong one, and the harness's faults
# (sandbox_error) from the model's.
VERDICTS = (
    "passed",
    "wrong_output",
    "compile_error",
    "runtime_error",
    "timeout",
    "memory_limit",
    "output_limit",
    "sandbox_error",
)
_KNOWN_KEYS = ("language", "max_new_tokens", "test_cases", "threshold", "timeout_seconds")
_CASE_KEYS = ("expected_output", "input")
_LANGUAGES = ("python",)
_DEFAULT_TIMEOUT = 5.0
_EXCERPT = 500  # longest stdout/stderr excerpt kept per case in the details

# A fence line: three or more backticks, then an optional info string whose first word is the language.
_FENCE = re.compile(r"^[ \t]*(`{3,})[ \t]*([^`\s]*)[^`\n]*$")
_PYTHON_TAGS = ("python", "python3", "py", "py3")


@dataclass(frozen=True)
class _Case:
    input: str
    expected_output: str


@dataclass(frozen=True)
class _Options:
    test_cases: tuple[_Case, ...]
    timeout: float = _DEFAULT_TIMEOUT
    threshold: float = 1.0


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse(config)


def field_rule(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """expected_output may be empty: the test cases define correctness (input may be, as always)."""
    return frozenset({"input", "expected_output"}), frozenset()


def extract_code(text: str) -> str:
    """Return the program in a model output: the first ```python block, else the first fenced block, else all.

    A block the model never closed (it ran out of tokens) runs to the end of the output. An indented block
    (inside a list item, say) is dedented.
    """
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    fence = ""
    for line in text.splitlines():
        match = _FENCE.match(line)
        if current is None:
            if match:
                fence = match.group(1)
                current = []
                blocks.append((match.group(2).lower(), current))
        elif match and not match.group(2) and len(match.group(1)) >= len(fence):
            current = None
        else:
            current.append(line)
    if not blocks:
        return text
    chosen = next((lines for tag, lines in blocks if tag in _PYTHON_TAGS), blocks[0][1])
    return "\n".join(_dedent(chosen)) + "\n"


def _dedent(lines: list[str]) -> list[str]:
    # Not textwrap.dedent: it also blanks whitespace-only lines, which may sit inside a string literal.
    indents = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    prefix = indents[0] if indents else ""
    for indent in indents:
        while not indent.startswith(prefix):
            prefix = prefix[:-1]
    if not prefix:
        return lines
    return [line[len(prefix) :] if line.startswith(prefix) else line.lstrip() for line in lines]


def verdict(result: RunResult, expected_output: str) -> str:
    """The verdict of one run against the output expected of it."""
    if result.sandbox_error is not None:
        return "sandbox_error"
    if result.compile_error:
        return "compile_error"
    if result.timed_out or result.cpu_limited:
        return "timeout"
    if result.output_truncated:
        return "output_limit"
    if result.memory_exceeded:
        return "memory_limit"
    if result.exit_code != 0:
        return "runtime_error"
    return "passed" if _normalize(result.stdout) == _normalize(expected_output) else "wrong_output"


def score(prediction: str, expected: str, config: Mapping[str, Any], *, sandbox: Sandbox) -> Score:
    """Run the program in `prediction` on every test case; the score is the fraction of cases passed.

    `expected` (the row's reference answer) is not used: the test cases define correctness. Cases the
    harness failed on (sandbox_error) are reported but left out of the fraction; if every case failed that
    way, SandboxError is raised, so the row becomes an error of the harness rather than a score of 0.
    """
    options = _parse(config)
    code = extract_code(prediction)
    limits = Limits(wall_seconds=options.timeout)
    cases: list[dict[str, Any]] = []
    compile_failure: dict[str, Any] | None = None
    for index, case in enumerate(options.test_cases):
        if compile_failure is not None:
            # Compiling is deterministic: the other cases would fail the same way, so they are not run.
            cases.append({**compile_failure, "index": index, "elapsed": 0.0})
            continue
        try:
            result = sandbox.run(code, case.input, limits)
        except Exception as error:  # any failure of the harness is a sandbox_error, never the model's
            cases.append(_sandbox_failure(index, f"{type(error).__name__}: {error}"))
            continue
        record = _record(index, result, verdict(result, case.expected_output))
        if record["verdict"] == "compile_error":
            compile_failure = record
        cases.append(record)

    counted = [case for case in cases if case["verdict"] != "sandbox_error"]
    if not counted:
        raise SandboxError(f"the sandbox failed on every test case: {cases[0]['reason']}")
    passed = sum(case["verdict"] == "passed" for case in counted)
    value = passed / len(counted)
    tally = {name: sum(case["verdict"] == name for case in cases) for name in VERDICTS}
    return Score(
        value=value,
        threshold=options.threshold,
        details={
            "pass_at_1": 1.0 if passed == len(counted) else 0.0,
            "passed_cases": passed,
            "counted_cases": len(counted),
            "sandbox_errors": len(cases) - len(counted),
            "verdicts": {name: count for name, count in tally.items() if count},
            "cases": cases,
            "code": code,
            "timeout_seconds": options.timeout,
            "isolation": sandbox.isolation.to_json(),
        },
    )


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n").rstrip()


def _excerpt(text: str) -> str:
    if len(text) <= _EXCERPT:
        return text
    # Head and tail: the start of stdout and the end of a traceback are what explain a failure.
    marker = "\n[...]\n"
    half = (_EXCERPT - len(marker)) // 2
    return text[:half] + marker + text[-(_EXCERPT - len(marker) - half) :]


def _record(index: int, result: RunResult, name: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "index": index,
        "verdict": name,
        "elapsed": round(result.elapsed, 4),
        "exit_code": result.exit_code,
        "signal": int(result.signal) if result.signal is not None else None,
        "stdout": _excerpt(result.stdout),
        "stderr": _excerpt(result.stderr),
    }
    if result.sandbox_error is not None:
        record["reason"] = result.sandbox_error
    return record


def _sandbox_failure(index: int, reason: str) -> dict[str, Any]:
    return {
        "index": index,
        "verdict": "sandbox_error",
        "elapsed": 0.0,
        "exit_code": None,
        "signal": None,
        "stdout": "",
        "stderr": "",
        "reason": reason,
    }


def _parse(config: Mapping[str, Any]) -> _Options:
    if not isinstance(config, Mapping):
        raise ValueError(
            f"evaluation_config for code_execution must be a mapping, not {type(config).__name__}"
        )
    _check_keys(config, _KNOWN_KEYS, "evaluation_config for code_execution")

    if "language" not in config:
        raise ValueError("language is required in evaluation_config for code_execution (only 'python' runs)")
    if config["language"] not in _LANGUAGES:
        raise ValueError(
            f"language must be 'python' (the only one the sandbox runs), not {_describe(config['language'])}"
        )

    timeout = config.get("timeout_seconds", _DEFAULT_TIMEOUT)
    # The bound is false for nan and inf, and for an int too large to become a float (math.isfinite would
    # raise OverflowError on it).
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout <= sys.float_info.max
    ):
        raise ValueError(f"timeout_seconds must be a positive number of seconds, not {_describe(timeout)}")

    threshold = _threshold(config, 1.0)  # also checks max_new_tokens

    return _Options(
        test_cases=_parse_cases(config.get("test_cases")), timeout=float(timeout), threshold=threshold
    )


def _parse_cases(raw: Any) -> tuple[_Case, ...]:
    if raw is None:
        raise ValueError("test_cases is required: a non-empty list of {input, expected_output} objects")
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise ValueError(f"test_cases must be a non-empty list of objects, not {_describe(raw)}")
    if not raw:
        raise ValueError("test_cases must not be empty: a row with no case could never fail")
    cases = []
    for index, case in enumerate(raw):
        where = f"test_cases[{index}]"
        if not isinstance(case, Mapping):
            raise ValueError(
                f"{where} must be an object with input and expected_output, not {_describe(case)}"
            )
        _check_keys(case, _CASE_KEYS, where)
        for key in _CASE_KEYS:
            if key not in case:
                raise ValueError(f"{where} has no {key}")
            if not isinstance(case[key], str):
                raise ValueError(f"{where}.{key} must be a string, not {_describe(case[key])}")
        cases.append(_Case(input=case["input"], expected_output=case["expected_output"]))
    return tuple(cases)


def explain(details: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A failing row's report: each failed test case's verdict, and what the program printed."""
    lines = [f"test cases:  {details['passed_cases']} of {details['counted_cases']} passed"]
    test_cases = config.get("test_cases", [])
    for run in details["cases"]:
        if run["verdict"] == "passed":
            continue
        if run["verdict"] == "compile_error" and run["index"] > 0:
            break  # the same code fails to compile for every case: once is enough
        expected = test_cases[run["index"]]["expected_output"] if run["index"] < len(test_cases) else "?"
        shown = f"stdout {run['stdout'].rstrip()!r}, expected {expected.rstrip()!r}"
        if run["verdict"] != "wrong_output":
            shown = f"exit {run['exit_code']}, signal {run['signal']}, stderr {run['stderr'][-200:]!r}"
        lines.append(f"  case {run['index']}: {run['verdict']}: {shown}")
    return lines
