"""custom: a benchmark's own Python function scores each output (the LocoLLM custom-evaluation standard).

Pure: no pytest, no torch. evaluation_config names a script, relative to the benchmark file, and a
function in it: `{"script": "eval/custom_eval.py", "function": "evaluate"}`. The function is called as
`function(generated, expected)` and returns a number in [0, 1].

The collector calls `validate_config` (keys and types) and then `load_for_config` (or `load_function`)
once per row: an import error fails the file's collection, and the import is cached per path and mtime,
so 60 rows import the script once. The evaluator calls `score` with the loaded function; a function that
raises or returns anything but a number in [0, 1] makes `score` raise ValueError for that row alone.
The script runs in this process, unsandboxed: it is part of the benchmark, trusted like a conftest.py.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.machinery
import importlib.util
import inspect
import numbers
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from types import ModuleType, TracebackType
from typing import Any

from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys as _check_keys
from pytest_llmeval.scorers.config import describe as _describe
from pytest_llmeval.scorers.config import quote as _quote
from pytest_llmeval.scorers.config import threshold as _threshold

__all__ = ["load_for_config", "load_function", "score", "validate_config"]

_KNOWN_KEYS = ("function", "max_new_tokens", "script", "threshold")
_DEFAULT_FUNCTION = "evaluate"
# Most custom functions return 0 or 1, which any threshold in (0, 1] treats alike; 0.5 gives a function
# with partial credit the natural "more right than wrong" reading.
_DEFAULT_THRESHOLD = 0.5
_MODULE_PREFIX = "pytest_llmeval_custom_"

# resolved path -> (mtime_ns, size, module): a script edited between runs of one process is imported anew.
_MODULES: dict[Path, tuple[int, int, ModuleType]] = {}


@dataclass(frozen=True)
class _Options:
    script: str
    function: str = _DEFAULT_FUNCTION
    threshold: float = _DEFAULT_THRESHOLD


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse(config)


def load_function(script: Path, function: str) -> Callable[[str, str], Any]:
    """Import `script` (once per path and mtime) and return its `function`; ValueError says what is wrong."""
    return _load(Path(script), function, shown=str(script))


def load_for_config(config: Mapping[str, Any], benchmark_dir: Path) -> Callable[[str, str], Any]:
    """Validate `config`, then load its function from its script, resolved against `benchmark_dir`."""
    options = _parse(config)
    # Messages name the script as the benchmark wrote it: the collector prefixes the row's file:line.
    return _load(Path(benchmark_dir) / options.script, options.function, shown=options.script)


def score(
    prediction: str, expected: str, config: Mapping[str, Any], *, function: Callable[[str, str], Any]
) -> Score:
    """Score what `function(prediction, expected)` returns; ValueError when it raises or is not in [0, 1]."""
    options = _parse(config)
    where = f"{options.function} in {options.script}"
    try:
        returned = function(prediction, expected)
    except (Exception, SystemExit) as error:  # SystemExit too: a stray exit() must not end the session
        line = _line_in(
            error.__traceback__, getattr(getattr(function, "__code__", None), "co_filename", None)
        )
        raise ValueError(f"{where} raised {_exception(error)}{line}") from error
    # bool is a number to Python, but True from a scorer is a bug (a comparison returned), not 1.0.
    if isinstance(returned, bool) or not isinstance(returned, numbers.Real):
        # A Python value, not a JSON one: None stays None here.
        shown = "None (NoneType)" if returned is None else _describe(returned)
        raise ValueError(f"{where} returned {shown}; it must return a number in [0, 1]")
    value = float(returned)
    if not 0.0 <= value <= 1.0:  # also false for nan
        raise ValueError(f"{where} returned {returned!r}; it must return a number in [0, 1]")
    return Score(
        value=value,
        threshold=options.threshold,
        details={"script": options.script, "function": options.function},
    )


def _load(path: Path, function: str, *, shown: str) -> Callable[[str, str], Any]:
    module = _import(path, shown)
    if not hasattr(module, function):
        names = [name for name, value in vars(module).items() if callable(value) and not name.startswith("_")]
        close = difflib.get_close_matches(function, names, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"{shown} has no function {_quote(function)}{hint}")
    found = getattr(module, function)
    if not callable(found):
        raise ValueError(f"{_quote(function)} in {shown} is not callable: it is {_describe(found)}")
    try:
        signature = inspect.signature(found)
    except (TypeError, ValueError):
        signature = None  # some builtins have none; the call itself will tell
    if signature is not None:
        try:
            signature.bind("generated", "expected")
        except TypeError as error:
            raise ValueError(
                f"{_quote(function)} in {shown} must take two arguments (generated, expected): {error}"
            ) from None
    return found  # type: ignore[no-any-return]


def _import(path: Path, shown: str) -> ModuleType:
    try:
        resolved = path.resolve(strict=True)
        stat = resolved.stat()
    except OSError as error:
        raise ValueError(f"cannot import {shown}: {error.strerror or error}") from None
    if not resolved.is_file():
        raise ValueError(f"cannot import {shown}: not a file")
    cached = _MODULES.get(resolved)
    if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
        return cached[2]

    # A name no other module has: the script's own stem ("custom_eval", "utils") could shadow or be
    # shadowed by a real module, and two benchmarks' eval/custom_eval.py must not share one entry. It stays
    # registered, as a normal import does, so that pickle, dataclasses and typing find the module.
    digest = hashlib.sha256(f"{resolved}\0{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    name = f"{_MODULE_PREFIX}{digest}"
    # An explicit loader: spec_from_file_location returns None for a name not ending in .py.
    loader = importlib.machinery.SourceFileLoader(name, str(resolved))
    spec = importlib.util.spec_from_file_location(name, resolved, loader=loader)
    if spec is None:  # pragma: no cover - never None when a loader is given
        raise ValueError(f"cannot import {shown}: no import spec for it")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except (Exception, SystemExit) as error:  # SystemExit: a script that calls exit() at import time
        sys.modules.pop(name, None)
        if isinstance(error, SyntaxError) and error.filename == str(resolved):
            # The script's own syntax error has no frame in it to point at: the error holds the line.
            line = f" (line {error.lineno})" if error.lineno else ""
            raise ValueError(f"cannot import {shown}: SyntaxError: {error.msg}{line}") from None
        raise ValueError(
            f"cannot import {shown}: {_exception(error)}{_line_in(error.__traceback__, str(resolved))}"
        ) from error
    if cached is not None:
        sys.modules.pop(cached[2].__name__, None)  # the edited script's previous version
    _MODULES[resolved] = (stat.st_mtime_ns, stat.st_size, module)
    return module


def _line_in(trace: TracebackType | None, filename: str | None) -> str:
    """' (line N)' for the innermost frame of `trace` in `filename`, else ''."""
    if filename is None:
        return ""
    lines = [frame.lineno for frame in traceback.extract_tb(trace) if frame.filename == filename]
    return f" (line {lines[-1]})" if lines and lines[-1] is not None else ""


def _exception(error: BaseException) -> str:
    text = " ".join(str(error).split())  # one line, whatever the exception's message holds
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _parse(config: Mapping[str, Any]) -> _Options:
    if not isinstance(config, Mapping):
        raise ValueError(f"evaluation_config for custom must be a mapping, not {type(config).__name__}")
    _check_keys(config, _KNOWN_KEYS, "evaluation_config for custom")

    if "script" not in config:
        raise ValueError(
            "script is required in evaluation_config for custom: the .py file, relative to the benchmark"
        )
    script = config["script"]
    if not isinstance(script, str) or not script.strip():
        raise ValueError(f"script must be a path to a .py file, not {_describe(script)}")
    if PurePosixPath(script).is_absolute() or PureWindowsPath(script).is_absolute():
        # Relative paths travel with the benchmark; an absolute one works on its author's machine only.
        raise ValueError(f"script must be relative to the benchmark file, not absolute: {_quote(script)}")
    if not script.endswith(".py"):
        raise ValueError(f"script must be a .py file, not {_quote(script)}")

    function = config.get("function", _DEFAULT_FUNCTION)
    if not isinstance(function, str) or not function.isidentifier():
        raise ValueError(f"function must be the name of a function in the script, not {_describe(function)}")

    return _Options(script=script, function=function, threshold=_threshold(config, _DEFAULT_THRESHOLD))
