"""Collection: benchmark files become items, a --llmeval-sample subset is drawn, gates move to the end, the
training gates get a collector of their own, and the rows collected are planned and counted.

Nothing heavy is imported here at module level: `pytest --help` must not pay for torch or transformers.
"""

from __future__ import annotations

import fnmatch
import gc
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.evaluator import Evaluator
from pytest_llmeval.hooks.outputs import check_clashes, check_outputs, collected_inputs
from pytest_llmeval.hooks.xdist import is_worker
from pytest_llmeval.items import (
    EVALUATOR_KEY,
    RECORDER_KEY,
    RUN_NODE,
    TRAINING_NODE,
    BenchmarkFile,
    CaseItem,
    GateItem,
    RunGateItem,
    RunGates,
    TrainingGateItem,
    TrainingGates,
)
from pytest_llmeval.models import find_training_file
from pytest_llmeval.planning import RowRef
from pytest_llmeval.records import BenchmarkInfo
from pytest_llmeval.results import NotRun, Selection, not_run
from pytest_llmeval.settings import SETTINGS_KEY

# Every kind of gate item: they run after the rows, and one deselected is recorded as not run.
_GATES = (GateItem, TrainingGateItem, RunGateItem)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> BenchmarkFile | None:
    patterns: list[str] = parent.config.getini("llmeval_files")
    if not any(fnmatch.fnmatch(file_path.name, p) for p in patterns):
        return None
    # The adapter's training data and the saved predictions are JSONL too, but they are not benchmarks.
    options = parent.config.stash[EVALUATOR_KEY].options
    # Every adapter's training file is data, not a benchmark, whichever adapter the held_out gate reads.
    training = [find_training_file(a) for a in options.spec.adapters]
    # So are the training logs (EvaluationCallback's JSONL in an adapter folder), read or not.
    logs = parent.config.stash[EVALUATOR_KEY].training_files
    for other in (options.gate_options.train_data, options.predictions, *training, *logs):
        if other is not None and other.resolve() == file_path.resolve():
            return None
    from pytest_llmeval.prompts import is_fewshot_file

    if is_fewshot_file(file_path):  # a benchmark's few-shot examples: read with it, not rows of their own
        return None
    return BenchmarkFile.from_parent(parent, path=file_path)


@pytest.hookimpl(tryfirst=True)  # the subset is drawn from whole files, before -k and -m deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.stash[SETTINGS_KEY].sample is not None:
        _keep_subset(config, items)
    # Gates run after every row they depend on: move them to the end, keeping every other order. Under
    # xdist this also puts them last in the scheduler's queue, so a gate waits as little as possible.
    items[:] = [i for i in items if not isinstance(i, _GATES)] + [i for i in items if isinstance(i, _GATES)]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report = yield
    if isinstance(collector, BenchmarkFile) and report.failed:
        # A benchmark file that failed to collect (--continue-on-collection-errors runs the others) is
        # recorded as not run, from the report: under xdist only the workers collect, and a failed collect
        # report reaches the controller's pytest_collectreport with its attributes (_RecordSink).
        report.llmeval_not_run = not_run(file=collector.benchmark, gate=None, why=_one_line(report))
    # The training gates and the run gates (--llmeval-criteria locollm's out_of_domain_required) belong to
    # no benchmark file: they get collectors of their own beside the session's top-level ones, so that
    # pytest counts, selects (-k, -m) and reports them as every collected test. Every process collects the
    # same (the logs were read at configure, the roster is fixed), as xdist requires. Not when the command
    # line names only node ids (`bench.jsonl::r1`): those are the tests asked for.
    config = collector.config
    if isinstance(collector, pytest.Session) and report.passed and not all("::" in a for a in config.args):
        run = config.stash[EVALUATOR_KEY]
        if run.training_gates():
            report.result.append(TrainingGates.from_parent(collector, name="training", nodeid=TRAINING_NODE))
        if run.run_gates():
            report.result.append(RunGates.from_parent(collector, name="criteria", nodeid=RUN_NODE))
    return report


def _one_line(report: pytest.CollectReport) -> str:
    """A failed collection in one line: the first of the file's `file:line: what` problems, with how many
    more there are; for an exception that is no CollectError, its type and message."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(crash.message) if crash is not None else str(report.longrepr)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "it failed to collect"
    more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
    return lines[0] + more


def _plan_order(items: list[pytest.Item], run: Evaluator) -> None:
    """--llmeval-sequential: each benchmark file's rows in their planned order (Evaluator.planned_orders),
    in the places the file's rows held: chunks, and so the looks of the anytime-valid test, follow it. Runs
    at the end of collection, before xdist workers report theirs."""
    if not run.sequential_on():
        return  # no order to plan: leave a large collection's items untouched
    placed: dict[str, list[tuple[int, CaseItem]]] = {}
    for index, item in enumerate(items):
        if isinstance(item, CaseItem):
            placed.setdefault(item.info["name"], []).append((index, item))
    refs = [
        RowRef(nodeid=r.nodeid, benchmark=r.info, case=r.case) for rows in placed.values() for _, r in rows
    ]
    for name, order in run.planned_orders(refs).items():
        slots = [index for index, _ in placed[name]]
        by_node = {r.nodeid: r for _, r in placed[name]}
        for slot, nodeid in zip(slots, order, strict=True):
            items[slot] = by_node[nodeid]


def _keep_subset(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--llmeval-sample: deselect all but a seeded, difficulty-stratified subset of each benchmark file's
    rows. It depends on the files, the size and the seed only: every model, worker and run gets the same."""
    from pytest_llmeval.subsets import pick, subset_digest

    settings = config.stash[SETTINGS_KEY]
    size, seed = settings.sample, settings.seed
    assert size is not None  # pytest_collection_modifyitems draws a subset only with --llmeval-sample
    by_file: dict[str, list[CaseItem]] = {}
    for item in items:
        if isinstance(item, CaseItem):
            by_file.setdefault(item.info["name"], []).append(item)
    kept: set[tuple[str, str]] = set()
    sizes: dict[str, dict[str, int]] = {}
    for name, rows in by_file.items():
        chosen = pick([(r.case.id, r.case.difficulty) for r in rows], size, seed=seed, salt=name)
        kept |= {(name, row_id) for row_id in chosen}
        sizes[name] = {"rows": len(chosen), "of": len(rows)}
    dropped = [i for i in items if isinstance(i, CaseItem) and (i.info["name"], i.case.id) not in kept]
    if dropped:
        items[:] = [i for i in items if i not in dropped]
        config.hook.pytest_deselected(items=dropped)
    config.stash[EVALUATOR_KEY].subset = {
        "size": size,
        "seed": seed,
        "stratified_by": "difficulty",
        "benchmarks": sizes,
        "ids_sha256": subset_digest(sorted(kept)),
    }


_DESELECTED_KEY = pytest.StashKey[list[BenchmarkInfo]]()
# Gates collected and deselected: (benchmark file, or None for a training or run gate; the gate's key).
_DESELECTED_GATES_KEY = pytest.StashKey[list[tuple[str | None, str]]]()


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    # -k, -m, --lf, --deselect: rows collected but not run make a run partial (selection_of).
    rows = [item for item in items if isinstance(item, CaseItem)]
    if rows:
        rows[0].config.stash.setdefault(_DESELECTED_KEY, []).extend(r.info for r in rows)
    # A gate deselected gives no verdict, and results.json would not show its absence: it is recorded as
    # not run, and `pytest-llmeval check` fails on it unless told to accept it.
    gates = [item for item in items if isinstance(item, _GATES)]
    if gates:
        gates[0].config.stash.setdefault(_DESELECTED_GATES_KEY, []).extend(
            (g.benchmark if isinstance(g, GateItem) else None, g.label) for g in gates
        )


def selection_of(config: pytest.Config, selected: Sequence[BenchmarkInfo]) -> Selection:
    """Rows selected, rows in the benchmark files they came from, what selected them, and the gates
    deselected (as results.json's `not_run` lists them).

    Node ids on the command line collect only their rows (the others are never items, never deselected):
    the files' row counts tell those apart, so every way of running part of a benchmark is caught.
    """
    deselected = config.stash.get(_DESELECTED_KEY, [])
    files = {info["name"]: info["n_rows"] for info in [*selected, *deselected]}
    options = config.stash[SETTINGS_KEY].selected_by  # -k, -m, --lf, --sw, --deselect, --llmeval-sample
    how = list(options)
    if any("::" in arg for arg in config.args):
        how.append("node ids on the command line")
    # Node ids never deselect (what they leave out is never collected): the options did, or a plugin.
    why = f"deselected by {', '.join(options) or 'a plugin'}"
    gates: list[NotRun] = [
        not_run(file=file, gate=gate, why=why) for file, gate in config.stash.get(_DESELECTED_GATES_KEY, [])
    ]
    return {
        "selected": len(selected),
        "total": sum(files.values()),
        "how": ", ".join(how) or "a selection",
        "not_run": gates,
    }


@pytest.hookimpl(tryfirst=True)  # under xdist: before the worker reports its collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    run = session.config.stash[EVALUATOR_KEY]
    # After -k and -m deselected: the order planned over the rows that run is the one every process (and
    # results.json) plans over them.
    _plan_order(session.items, run)
    rows = [
        RowRef(nodeid=item.nodeid, benchmark=item.info, case=item.case)
        for item in session.items
        if isinstance(item, CaseItem)
    ]
    if rows and not is_worker(session.config):
        settings = session.config.stash[SETTINGS_KEY]
        check_outputs(session.config, settings.files)  # `pytest benchmarks/`: known to evaluate rows only now
        seen = ((r.benchmark["name"], r.case.evaluation_type, r.case.evaluation_config) for r in rows)
        check_clashes(session.config, settings.files, collected_inputs(session.config, seen))
    run.set_rows(rows)
    selection = selection_of(session.config, [r.benchmark for r in rows])
    if is_worker(session.config):
        run.store.publish_selection(selection)
    if RECORDER_KEY in session.config.stash:  # serially the controller collects too
        recorder = session.config.stash[RECORDER_KEY]
        recorder.selection = selection
        recorder.expected_rows = len(rows)
        for r in rows:
            name = r.benchmark["name"]
            recorder.expected_by_benchmark[name] = recorder.expected_by_benchmark.get(name, 0) + 1
    if rows:
        _freeze_collected()


# The collector's thresholds before this process froze a session's objects (_freeze_collected); None when
# it has not, or has thawed them since.
_thresholds_before: tuple[int, int, int] | None = None
# Objects allocated between young collections while rows run (Python's default is 700).
YOUNG_THRESHOLD = 10_000


def _freeze_collected() -> None:
    """Move every object alive now out of the cyclic collector's sight (gc.freeze), and collect the young
    generation less often while rows run.

    What collection built (items, cases, the benchmarks' rows) lives until the process ends, and the
    collector's full passes walked all of it again and again while rows ran, and once more at exit. Each
    row then adds its record and pytest's reports, which live to the end too, and a young collection every
    700 allocations promoted them into ever more full passes. At 10,000 rows the collector took 1.5 s of a
    6 s run with neither, 0.6 s with both (issue 40, bench/overhead.py). Objects made later are collected
    as usual, and reference counting still frees what is frozen. A freeze someone else made is theirs: left
    alone.
    """
    global _thresholds_before
    if gc.get_freeze_count() == 0:
        gc.freeze()
        _thresholds_before = gc.get_threshold()
        young, *older = _thresholds_before
        gc.set_threshold(max(young, YOUNG_THRESHOLD), *older)


def freeze_the_run() -> None:
    """At the end of a session that froze its collection (_freeze_collected), freeze what its rows added
    too: their records and pytest's reports live to the end, and the full passes still to come (pytest's
    own at unconfigure, the one at exit) walked all of them again, about 0.9 s at 10,000 rows. The young
    generation is collected first, so the run's recent garbage (and anything its finalizers would say) is
    not frozen with it."""
    if _thresholds_before is not None:
        gc.collect(1)
        gc.freeze()


def thaw_earlier_session() -> None:
    """Undo an earlier session's _freeze_collected when the same process starts another (pytester's
    in-process runs): that session's leftovers are then collected, at the thresholds of before. Not at the
    end of the session itself, where thawing would make the exit walk everything again."""
    global _thresholds_before
    if _thresholds_before is not None:
        gc.unfreeze()
        gc.set_threshold(*_thresholds_before)
        _thresholds_before = None
