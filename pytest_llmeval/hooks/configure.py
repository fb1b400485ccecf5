"""pytest_configure, and the checks before the run: the settings built once, the evaluator and the
recorder put in config.stash, then what can be checked before the first test (the run's files, the training
data, the models at session start).

Nothing heavy is imported here at module level: `pytest --help` must not pay for torch or transformers.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_llmeval.backends.saved import SavedBackend
from pytest_llmeval.backends.served import ServedBackend
from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.evaluator import Evaluator
from pytest_llmeval.history import Baselines, entries, history_dir
from pytest_llmeval.hooks.collection import thaw_earlier_session
from pytest_llmeval.hooks.outputs import cause, check_clashes, check_outputs
from pytest_llmeval.hooks.reporting import _RecordSink
from pytest_llmeval.hooks.xdist import is_worker
from pytest_llmeval.items import EVALUATOR_KEY, RECORDER_KEY, LLMEvalWarning
from pytest_llmeval.models import OFFLINE_ENV, ModelError, ModelSpec
from pytest_llmeval.recorder import Recorder
from pytest_llmeval.roster import Roster
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.run_options import TrainingEvidence
from pytest_llmeval.scorers import SCORERS
from pytest_llmeval.settings import (
    SETTINGS_KEY,
    RunFiles,
    Settings,
    offline_requested,
    rootdir_from_option,
)


def pytest_configure(config: pytest.Config) -> None:
    thaw_earlier_session()
    for difficulty in DIFFICULTIES:
        config.addinivalue_line("markers", f"{difficulty}: benchmark rows of difficulty '{difficulty}'")
    for name in SCORERS:
        config.addinivalue_line("markers", f"{name}: benchmark rows scored by {name}")
    if offline_requested(config):
        # Read by models.downloads_off, and by transformers and huggingface_hub in worker processes; put
        # back as it was when the session ends (pytest may run in a process that goes on, as pytester's do).
        # Before the settings are built: building them downloads an --adapter given as a Hub id.
        config.stash[_OFFLINE_BEFORE_KEY] = os.environ.get(OFFLINE_ENV)
        os.environ[OFFLINE_ENV] = "1"
    # Every option parsed and checked once; the controller checks the run's files on the way (before the
    # project's own files are read), workers trust the controller's checks.
    settings = Settings.from_config(
        config, check_files=None if is_worker(config) else lambda files: _check_before_the_run(config, files)
    )
    config.stash[SETTINGS_KEY] = settings
    options = settings.run
    baselines = _baselines(settings)
    store = RowStore()
    if is_worker(config):
        spool = config.workerinput.get("llmeval_spool")  # type: ignore[attr-defined]
        if spool:
            store = RowStore(Path(spool), str(config.workerinput["workerid"]))  # type: ignore[attr-defined]
    config.addinivalue_line("markers", "gate: a gate of a benchmark file (better_than_base, size, ...)")
    logs, unread = _training_logs(config, settings.training_logs, options.roster)
    run = Evaluator(
        options=options,
        store=store,
        baselines=baselines,
        training_logs=logs,
        training_files=(*(e.log.source for e in logs.values()), *unread),
    )
    config.stash[EVALUATOR_KEY] = run
    if not is_worker(config):
        _check_training_data(settings, run)
        recorder = Recorder(
            alpha=options.gate_options.alpha,
            composite_weights=options.composite_weights,
            baselines=baselines,
            adjust=options.adjust,
        )
        config.stash[RECORDER_KEY] = recorder
        config.pluginmanager.register(_RecordSink(recorder, store, config), "llmeval-records")
    if config.pluginmanager.hasplugin("xdist"):
        # xdist's hooks exist only when xdist is installed; registering them otherwise is an error.
        from pytest_llmeval.distribution import XdistHooks

        config.pluginmanager.register(XdistHooks(), "llmeval-xdist")


def _training_logs(
    config: pytest.Config, values: Sequence[str], roster: Roster
) -> tuple[dict[str, TrainingEvidence], list[Path]]:
    """Each column's training log: --llmeval-training-log's, else the one its adapter folder holds; and the
    logs found in adapter folders that could not be read.

    Read in every process alike (xdist workers run the training gates), from the same files: the same
    verdicts and results.json entries everywhere. A log the option names must be readable (a usage error
    naming the option and the file otherwise); one found in an adapter folder that cannot be read is left
    out with a warning, and the run goes on without it.
    """
    from pytest_llmeval.training import TrainingLogError, find_log, read_log

    out: dict[str, TrainingEvidence] = {}
    unread: list[Path] = []
    for side, value in _training_log_options(values, roster).items():
        path = config.invocation_params.dir / Path(value).expanduser()
        try:
            out[side] = TrainingEvidence(read_log(path), "--llmeval-training-log")
        except TrainingLogError as exc:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: {_first_problem(exc)}"
            ) from None
        except OSError as exc:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: cannot read {exc.filename or path} ({cause(exc)})"
            ) from None
    for member in roster.members:
        if member.side in out or member.path is None or not member.path.is_dir():
            continue
        try:
            found = find_log(member.path)
        except TrainingLogError:
            continue  # no log in the folder: nothing to analyse
        try:
            out[member.side] = TrainingEvidence(read_log(found), "adapter folder")
        except (TrainingLogError, OSError) as exc:
            unread.append(found)
            problem = _first_problem(exc) if isinstance(exc, TrainingLogError) else f"{found}: {cause(exc)}"
            if not is_worker(config):  # said once, by the controller: every worker reads the same file
                config.issue_config_time_warning(
                    LLMEvalWarning(
                        f"the training log in adapter {member.name}'s folder cannot be read, so the run has "
                        f"no training analysis or gates for it: {problem} (fix the file, or name another "
                        f"with --llmeval-training-log {member.name}=PATH)"
                    ),
                    stacklevel=2,
                )
    return out, unread


def _training_log_options(values: Sequence[str], roster: Roster) -> dict[str, str]:
    """--llmeval-training-log values by column: `NAME=PATH` for the column NAME (a name or column key),
    a bare PATH for the only column beside the base."""
    names = {m.name: m.side for m in roster.members} | {m.side: m.side for m in roster.members}
    known = ", ".join(m.name for m in roster.members) or "none"
    given: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if sep and name in names:
            side, path = names[name], rest
        elif sep and name and "/" not in name and not Path(value).expanduser().exists():
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: no column is named '{name}' (columns: {known})"
            )
        elif len(roster.members) == 1:
            side, path = roster.members[0].side, value
        elif not roster.members:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: a training log belongs to a model beside the "
                "base: add the --adapter (or --llmeval-model) it trained"
            )
        else:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: several columns run ({known}): write NAME=PATH "
                "to say whose log it is"
            )
        if side in given:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log: two logs for {roster.member(side).name} ({given[side]} "
                f"and {path}): give one"
            )
        given[side] = path
    return given


def _first_problem(exc: Exception) -> str:
    """The first line of a multi-line error, and how many more there are: a usage error is one line."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    more = f" (and {len(lines) - 1} more problem(s))" if len(lines) > 1 else ""
    return lines[0] + more


def _check_before_the_run(config: pytest.Config, files: RunFiles) -> None:
    """Checks before anything reads the project's files, on the controller: one usage-error line.

    The rootdir first (a wrong one brings another project's configuration), then the output paths where it
    is known that rows will run (hooks/outputs.py). The adapter and model folders are checked when the session
    starts (models.preflight, inputs.py), the training file once the evaluator exists (_check_training_data).
    """
    problem = rootdir_from_option(config)
    if problem is not None:
        raise pytest.UsageError(f"llmeval: {problem}")
    if _evaluates_rows(config):
        check_outputs(config, files)
        check_clashes(config, files)


def _check_training_data(settings: Settings, run: Evaluator) -> None:
    """The held_out gates' training file, read now through the evaluator, which keeps it for the gates."""
    train = run.options.gate_options.train_data
    if train is None:
        return
    what = "--llmeval-train-data" if settings.train_data else "the adapter's training file"
    if not train.is_file():
        raise pytest.UsageError(f"llmeval: {what} {train}: no such file")
    try:
        run.training_rows()
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"llmeval: {what} (read by the held_out gate): {exc}") from None


def _evaluates_rows(config: pytest.Config) -> bool:
    """Does this run evaluate benchmark rows, as far as the command line says before collection?

    True when any llmeval option is given or a benchmark file is named. A bare folder (`pytest
    benchmarks/`) is known only once collected: pytest_collection_finish checks the outputs then.
    """
    given = [a.split("=", 1)[0] for a in config.invocation_params.args if a.startswith("--")]
    if any(a == "--adapter" or a == "--base-model" or a.startswith("--llmeval-") for a in given):
        return True
    patterns: list[str] = config.getini("llmeval_files")
    names = [Path(str(a).split("::", 1)[0]).name for a in config.args]
    return any(fnmatch.fnmatch(name, p) for name in names for p in patterns)


def _baselines(settings: Settings) -> Baselines:
    """Where no_regression finds its baseline: --llmeval-previous, else the history (history.Baselines).

    Listed once, at configure: the entry this run writes at its end is never its own baseline, and every
    xdist worker sees the same candidates as the controller.
    """
    explicit: Path | None = settings.previous
    if explicit is not None:
        if not explicit.is_file():
            raise pytest.UsageError(f"llmeval: --llmeval-previous {explicit}: no such file")
        from pytest_llmeval.results_reader import ResultsFileError, read_results

        try:
            data = read_results(explicit)
        except ResultsFileError as exc:
            raise pytest.UsageError(f"llmeval: --llmeval-previous: {exc}") from None
        return Baselines(explicit=data, explicit_source=str(explicit))
    results = settings.files.results
    folder = history_dir(results)
    candidates = [] if settings.files.no_history else list(reversed(entries(folder)))
    if candidates:
        return Baselines(candidates=candidates, where=str(folder))
    # No history yet (or --llmeval-no-history): the results.json this run replaces, by the same rules.
    return Baselines(candidates=[results] if results.is_file() else [], where=str(results))


def pytest_sessionstart(session: pytest.Session) -> None:
    # Check what can be checked without weights before any test runs: a wrong adapter path, an adapter for
    # another architecture, a base, judge or scoring model that is not on this machine or whose folder is
    # broken, a bad predictions file: each stops the run with one message.
    # Workers skip it: the controller already did, and a usage error there would end in a traceback wall.
    config = session.config
    if is_worker(config):
        return
    run = config.stash[EVALUATOR_KEY]
    spec = run.options.spec
    if run.options.predictions is not None:
        try:
            saved = run.backend()
            assert isinstance(saved, SavedBackend)
            saved.predictions()
        except OSError as exc:
            raise pytest.UsageError(
                f"llmeval: --llmeval-predictions {run.options.predictions}: "
                f"cannot read ({exc.strerror or exc})"
            ) from None
        except ValueError as exc:
            raise pytest.UsageError(f"llmeval: --llmeval-predictions: {exc}") from None
    from pytest_llmeval import models

    backend = run.backend()
    served = backend if isinstance(backend, ServedBackend) else getattr(backend, "served", None)
    if isinstance(served, ServedBackend):
        from pytest_llmeval.endpoint import EndpointError

        # A few tiny requests per served id: an unreachable URL, a refused key, an id the server does not
        # serve stops here; what its log-probabilities are worth is found out here too (Endpoint.probe).
        try:
            served.probe()
        except EndpointError as exc:
            raise pytest.UsageError(f"llmeval: {exc}") from None
    if isinstance(backend, ServedBackend):
        if run.options.ppl_model is not None:
            try:
                models.resolve_base(ModelSpec(base_model=run.options.ppl_model), "--llmeval-ppl-model")
            except ModelError as exc:
                raise pytest.UsageError(f"llmeval: {exc}") from None
        return
    # The evaluated model when one was named (the embedded default needs no check), then the judge and the
    # scoring model: each resolved (downloaded on first use) and its folder checked (inputs.py).
    checks: list[tuple[str, ModelSpec]] = []
    if spec.adapter is not None or spec.base_model is not None:
        checks.append(("--adapter" if spec.adapter is not None else "--base-model", spec))
    for option, name in (
        ("--llmeval-judge-model", run.options.judge_model),
        ("--llmeval-ppl-model", run.options.ppl_model),
        *((f"--llmeval-model {m.name}", m.source) for m in run.options.roster.models if m.url is None),
    ):
        if name is not None:
            checks.append((option, ModelSpec(base_model=name)))
    for option, checked in checks:
        try:
            if checked is spec:
                models.preflight(spec)
            else:
                models.resolve_base(checked, option)
        except ModelError as exc:
            raise pytest.UsageError(f"llmeval: {exc}") from None
        except Exception as exc:  # a config that transformers or safetensors refuses: one line, no traceback
            raise pytest.UsageError(
                f"llmeval: {option}: the model cannot be used ({type(exc).__name__}: {exc})"
            ) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(EVALUATOR_KEY, None)
    if run is not None:
        run.producer.finish()  # every process that produced rows: an xdist worker too
    if run is not None and not is_worker(config):
        run.store.remove()
    if _OFFLINE_BEFORE_KEY in config.stash:
        before = config.stash[_OFFLINE_BEFORE_KEY]
        if before is None:
            os.environ.pop(OFFLINE_ENV, None)
        else:
            os.environ[OFFLINE_ENV] = before


_OFFLINE_BEFORE_KEY = pytest.StashKey[str | None]()  # HF_HUB_OFFLINE before --llmeval-offline set it
