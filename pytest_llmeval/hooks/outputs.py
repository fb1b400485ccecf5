"""The run's files at the pytest level: checked before the first test (every output writable, none of them
one of the run's inputs), pytest's JUnit XML writer kept off an input, and each file written at the end with
a fallback, so that a full disk or a bad folder loses nothing.

Which files those are comes from the options (settings.RunFiles); the checks and the writing are here, used
by hooks/configure.py, hooks/collection.py and hooks/reporting.py.
"""

from __future__ import annotations

import fnmatch
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.history import history_dir
from pytest_llmeval.inputs import InputError, check_output_file, check_output_folder, path_clashes
from pytest_llmeval.models import ModelError
from pytest_llmeval.settings import RunFiles

_OUTPUTS_CHECKED = pytest.StashKey[bool]()


def check_outputs(config: pytest.Config, files: RunFiles) -> None:
    """The files and folders the run writes (results, history, HTML, caches) can be written."""
    if config.stash.get(_OUTPUTS_CHECKED, False):
        return
    config.stash[_OUTPUTS_CHECKED] = True
    results = files.results
    try:
        check_output_file(results, "--llmeval-results")
        if not files.no_history:
            check_output_folder(history_dir(results), "the history folder beside --llmeval-results")
        if files.html is not None:
            check_output_file(files.html, "--llmeval-html")
        if files.cache_dir is not None:
            check_output_folder(files.cache_dir, "--llmeval-cache-dir")
        if files.loads_embedded:
            # The embedded default, converted on first use by the process that loads it. (A named model is
            # resolved at session start, which converts the embedded one if it is that.)
            from pytest_llmeval.models import check_embedded_cache

            check_embedded_cache()
    except (InputError, ModelError) as exc:
        raise pytest.UsageError(f"llmeval: {exc}") from None


def _inputs(
    config: pytest.Config, files: RunFiles, outputs: Sequence[tuple[str, Path]]
) -> list[tuple[str, Path]]:
    """What the command line names for the run to read: files and model folders that exist, and the
    benchmark files it would collect (a folder argument collects each output that would match a pattern)."""
    here = config.invocation_params.dir
    found = list(files.named_inputs)
    patterns: list[str] = config.getini("llmeval_files")
    for arg in config.args:
        path = here / str(arg).split("::", 1)[0]
        if path.is_file():
            found.append(("the benchmark file", path))
        elif path.is_dir():
            found += [
                ("the benchmark file", out)
                for _, out in outputs
                if out.is_file()
                and out.resolve().is_relative_to(path.resolve())
                and any(fnmatch.fnmatch(out.name, p) for p in patterns)
            ]
    return [(what, path) for what, path in found if path.exists()]


def check_clashes(config: pytest.Config, files: RunFiles, collected: Sequence[tuple[str, Path]] = ()) -> None:
    """No output of the run is one of its inputs, or another output: checked before the first test (with
    the files collection found, `collected`, once they are known)."""
    outputs = files.outputs()
    inputs = [*_inputs(config, files, outputs), *collected]
    clashes = path_clashes(outputs, inputs)
    if clashes:
        junit = [(what, out) for what, out in outputs if what == "--junitxml"]
        if junit and path_clashes(junit, [*inputs, *((w, o) for w, o in outputs if w != "--junitxml")]):
            junit_writer(config, None)  # pytest writes its XML at the end of even a refused session
        raise pytest.UsageError(f"llmeval: {clashes[0]}")


def junit_writer(config: pytest.Config, logfile: str | None) -> None:
    """Send pytest's JUnit XML to `logfile` instead of --junitxml's path; None: write none at all.

    pytest's writer keeps its path on the object it registers under this stash key (_pytest.junitxml's
    xml_key, not a public API) and writes at the end of the session whatever happened: the only way to
    keep it off a file the run reads is to move it, or to unregister it.
    """
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    if logfile is not None:
        xml.logfile = logfile
        return
    del config.stash[xml_key]
    config.pluginmanager.unregister(xml)


def collected_inputs(
    config: pytest.Config, rows: Iterable[tuple[str, str, Mapping[str, Any]]]
) -> list[tuple[str, Path]]:
    """The benchmark files rows came from and the custom scorers' scripts they name, from each row's
    (benchmark name, evaluation type, evaluation config)."""
    found: dict[Path, str] = {}
    seen: set[tuple[str, str | None]] = set()  # a path made once per file and script, not once per row
    for name, kind, evaluation_config in rows:
        script = evaluation_config.get("script") if kind == "custom" else None
        if not isinstance(script, str):
            script = None
        if (name, script) in seen:
            continue
        seen.add((name, script))
        bench = config.rootpath / name
        found.setdefault(bench, "the benchmark file")
        if script is not None:
            found.setdefault(bench.parent / script, "the custom scorer")
    return [(what, path) for path, what in found.items() if path.exists()]


def cause(exc: OSError) -> str:
    """What went wrong with a file, in words for a one-line error."""
    # mkdir(parents=True) met a file on the way: say so, not "File exists".
    if isinstance(exc, FileExistsError) and exc.filename:
        return f"{exc.filename} is not a folder"
    if isinstance(exc, NotADirectoryError) and exc.filename:
        return f"a part of {exc.filename} is a file, not a folder"
    return exc.strerror or str(exc) or type(exc).__name__


def write_or_fallback(
    path: Path, text: str, what: str, failures: list[str], forbidden: Mapping[Path, str] | None = None
) -> Path:
    """Write `text` to `path` atomically; when that fails, to the temporary folder, and say so.

    The end of a run is the worst moment to lose it (a disk filled up, a folder's permissions changed):
    whatever was computed is kept, and the one-line error names where. `forbidden`: paths that are inputs
    of the run (with the option naming them), never written, whatever is asked.
    """
    from pytest_llmeval.results_file import write_text_atomic

    if forbidden and path.resolve() in forbidden:
        why = forbidden[path.resolve()]
    else:
        try:
            write_text_atomic(path, text)
            return path
        except OSError as exc:
            why = cause(exc)
    fd, name = tempfile.mkstemp(prefix=f"llmeval-{path.stem}-", suffix=path.suffix or ".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        failures.append(f"cannot write {what} to {path} ({why}), nor to {name} ({cause(exc)}): it is lost")
        return path
    failures.append(f"cannot write {what} to {path} ({why}): written to {name} instead")
    return Path(name)
