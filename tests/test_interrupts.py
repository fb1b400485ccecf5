"""Ctrl-C for real: a SIGINT sent to a pytest run of the plugin, in a subprocess, while it generates and while
a sandboxed program runs; serially, under xdist to the controller alone (`kill -INT <pid>`), and under xdist
to the whole process group (what a terminal's Ctrl-C does: the workers get it too).

Each run must end in a bounded time with results.json marked `complete: false` ("interrupted ..."), holding
exactly the rows pytest reported before the end, each of them whole (scored, not half-scored), and must leave
nothing behind: no xdist worker, no sandboxed program, no spool or work folder in its TMPDIR.

"During" is observed, not guessed: generation by a conftest that wraps Producer._generate and touches a file
when a slow chunk starts; the sandboxed program by the name it gives itself once it runs (prctl PR_SET_NAME,
seen in /proc/<pid>/comm), which also finds it if it outlives the run. The rows that finished before are read
from the -v output.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="scans Linux /proc")


@dataclass(frozen=True)
class How:
    """How a run is made and interrupted."""

    workers: tuple[str, ...]
    group: bool  # SIGINT to the run's whole process group (a terminal's Ctrl-C), else to pytest alone
    # Seconds from the SIGINT to the end of the run. Sent to the xdist controller alone, it asks its workers
    # to stop; one busy generating interrupts itself after 5 s (execnet) and is killed after 10 (xdist).
    bound: float


# Measured alone: serial ends in ~3 s, xdist in ~6-11 s. The bounds leave room for a suite that runs
# under -n 2 beside this test on 2 cores (a contended run is slower, not broken).
HOWS = [
    pytest.param(How((), group=False, bound=30.0), id="serial"),
    pytest.param(How(("-n", "2"), group=False, bound=60.0), id="xdist-controller"),
    pytest.param(How(("-n", "2"), group=True, bound=60.0), id="xdist-ctrl-c"),
]
STARTUP = 180.0  # seconds for the run to reach the moment of the interrupt (torch imports, a busy runner)
MARKER_ENV = "LLMEVAL_INTERRUPT_TEST_MARKER"
OUTCOME = re.compile(r"\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
# `-v` prints a row as bench::jsonl::id today (pytest turns the dots of reportinfo's domain into ::).
ROW = re.compile(r"bench(?:\.|::)jsonl::([\w-]+)")
# The plugin's temporary folders: xdist's row spool, a basic sandbox's work directory.
TEMPORARY = "llmeval-"


@dataclass
class Run:
    """A pytest subprocess of the plugin, its output read as it comes."""

    proc: subprocess.Popen[bytes]
    marker: str  # in the environment of the run and of every process it starts (xdist workers)
    tmpdir: Path  # its TMPDIR
    others: tuple[str, ...]  # names of processes the run starts without its environment (sandboxed code)
    chunks: list[str] = field(default_factory=list)  # the output as read, partial last line included
    reader: threading.Thread | None = None

    def output(self, tail: int = 6000) -> str:
        return "".join(self.chunks)[-tail:]

    def reported(self) -> set[str]:
        """Rows with an outcome in the output so far (serial and xdist -v lines alike)."""
        lines = "".join(list(self.chunks)).split("\n")
        return {m.group(1) for line in lines if OUTCOME.search(line) for m in ROW.finditer(line)}


def _start(
    request: pytest.FixtureRequest,
    folder: Path,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    others: tuple[str, ...] = (),
) -> Run:
    """Start pytest with `args` in `folder`; whatever happens to the test, nothing of the run outlives it."""
    marker = f"llmeval-interrupt-{uuid.uuid4().hex}"
    tmpdir = folder / "tmp"
    tmpdir.mkdir()
    environ = {**os.environ, **(env or {}), MARKER_ENV: marker, "TMPDIR": str(tmpdir)}
    environ["PYTHONUNBUFFERED"] = "1"  # each line as it is written: the test reads the progress
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        environ.pop(name, None)  # this test may itself run under xdist
    (folder / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a shell job: only our signals reach it
    )
    run = Run(proc, marker, tmpdir, others)
    request.addfinalizer(lambda: _kill_everything(run))
    stdout = proc.stdout
    assert stdout is not None

    def read() -> None:
        # Chunks as they come, not lines: under -v, xdist writes "[gw1] PASSED row" and ends that line only
        # when the next report arrives, which behind a sleeping program is half a minute later.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while chunk := os.read(stdout.fileno(), 65536):
            run.chunks.append(decoder.decode(chunk))

    run.reader = threading.Thread(target=read, daemon=True)
    run.reader.start()
    return run


def _wait_until(run: Run, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STARTUP
    while not condition():
        if run.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the run never reached {what}:\n{run.output()}", pytrace=False)
        time.sleep(0.05)


def _interrupt(run: Run, how: How, request: pytest.FixtureRequest) -> None:
    """SIGINT the run as `how` says; assert it ends within how.bound seconds, with pytest's exit status 2."""
    sent = time.monotonic()
    if how.group:
        os.killpg(run.proc.pid, signal.SIGINT)
    else:
        os.kill(run.proc.pid, signal.SIGINT)
    try:
        run.proc.wait(timeout=how.bound + 60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run did not end within {how.bound + 60} s of SIGINT:\n{run.output()}")
    elapsed = time.monotonic() - sent
    request.node.user_properties.append(("seconds_from_sigint_to_exit", round(elapsed, 2)))
    assert run.reader is not None
    run.reader.join(timeout=10)
    assert elapsed < how.bound, f"the run took {elapsed:.1f} s to end after SIGINT"
    assert run.proc.returncode == pytest.ExitCode.INTERRUPTED, run.output()


def _processes(marker: str) -> list[str]:
    """Live processes with `marker` as their name or in their environment, as 'pid: command line'."""
    needle = marker.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            comm = Path(f"/proc/{name}/comm").read_bytes().strip()
        except OSError:
            continue  # gone already
        # Each file on its own: a sandboxed program under another uid may be non-dumpable, and then its
        # environ is unreadable even for root without CAP_SYS_PTRACE, while its name still shows.
        environ = _read_or_empty(Path(f"/proc/{name}/environ"))
        if comm == needle or needle in environ:
            command = (
                _read_or_empty(Path(f"/proc/{name}/cmdline")).replace(b"\0", b" ").decode(errors="replace")
            )
            found.append(f"{name}: {command[:200]}")
    return found


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _kill_everything(run: Run) -> None:
    """Kill every process of the run that is still there, then the run itself (after a failure)."""
    for marker in (run.marker, *run.others):
        for entry in _processes(marker):
            try:
                os.kill(int(entry.split(":", 1)[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
    if run.proc.poll() is None:
        run.proc.kill()
    run.proc.wait()


def _assert_nothing_left(run: Run) -> None:
    # Dead processes are reaped as the run ends; a pid namespace may take the kernel a moment to tear down.
    deadline = time.monotonic() + 2.0
    left = [p for m in (run.marker, *run.others) for p in _processes(m)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for m in (run.marker, *run.others) for p in _processes(m)]
    assert not left, f"processes left behind after the interrupted run: {left}\n{run.output(3000)}"
    leftovers = sorted(p.name for p in run.tmpdir.iterdir() if p.name.startswith(TEMPORARY))
    assert not leftovers, f"left in the run's TMPDIR: {leftovers}"


def _interrupted_results(
    folder: Path, run: Run, before: set[str]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """results.json of the interrupted run (checked), and its rows by id."""
    path = folder / "results.json"
    assert path.is_file(), f"no results.json after the interrupt:\n{run.output()}"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert doc["complete"] is False, doc.get("incomplete_reason")
    assert doc["incomplete_reason"].startswith("interrupted"), doc["incomplete_reason"]
    rows = {r["id"]: r for bench in doc["benchmarks"] for r in bench["rows"]}
    # Every row reported before the interrupt is there, and only rows that pytest reported at all.
    assert before <= set(rows), f"rows reported before SIGINT: {sorted(before)}; written: {sorted(rows)}"
    assert set(rows) == run.reported(), f"written: {sorted(rows)}; reported: {sorted(run.reported())}"
    return doc, rows


def _worker_metadata_lost(how: How, problem: str | None) -> None:
    """The workers' metadata (model, hardware, unmatched predictions) rides on their reports, so an
    interrupted controller that never sees pytest_testnodedown still writes what ran; serially too."""
    assert problem is None, f"{problem} ({'-n 2' if how.workers else 'serial'})"


# --- during generation ---------------------------------------------------------------------------------

FAST, SLOW = 4, 400  # max_new_tokens: the first two chunks take a moment, any later one a long while
GENERATION_CONFTEST = """
import json
import os
import uuid
from pathlib import Path

from pytest_llmeval.evaluation import producer

_original = producer.Producer._generate


def _noted(self, nodeids):
    # Each chunk leaves <key>.start (its rows) as it starts generating and <key>.end once it has: the test
    # sees which chunks are generating at the moment it sends SIGINT.
    folder = Path(os.environ["GENERATING"])
    key = uuid.uuid4().hex
    (folder / f"{key}.start").write_text(json.dumps(list(nodeids)))
    try:
        return _original(self, nodeids)
    finally:
        (folder / f"{key}.end").touch()


def pytest_configure(config):
    producer.Producer._generate = _noted


def pytest_unconfigure(config):
    producer.Producer._generate = _original
"""


def _generating(folder: Path) -> set[str]:
    """Ids of the rows whose chunk has started generating and not yet ended."""
    ids: set[str] = set()
    for start in folder.glob("*.start"):
        try:
            nodeids = json.loads(start.read_text())
        except (OSError, ValueError):  # being written right now: seen on the next look
            continue
        if not start.with_suffix(".end").exists():
            ids |= {nodeid.rsplit("::", 1)[-1] for nodeid in nodeids}
    return ids


@pytest.mark.parametrize("how", HOWS)
def test_sigint_during_generation(
    tmp_path: Path, tiny_model: Path, how: How, request: pytest.FixtureRequest
) -> None:
    fast = [row(f"fast{i}", input=f"item {i}", evaluation_config={"max_new_tokens": FAST}) for i in range(4)]
    slow = [row(f"slow{i}", input=f"item {i}", evaluation_config={"max_new_tokens": SLOW}) for i in range(6)]
    (tmp_path / "bench.jsonl").write_text(jsonl(fast + slow))
    (tmp_path / "conftest.py").write_text(GENERATION_CONFTEST)
    generating = tmp_path / "generating"
    generating.mkdir()
    args = [f"--base-model={tiny_model}", "--llmeval-no-cache", "--llmeval-device=cpu"]
    args += ["--llmeval-batch-size=2", "-m", "not gate", *how.workers]  # chunks of two rows
    run = _start(request, tmp_path, args, env={"GENERATING": str(generating)})
    fast_ids = {r["id"] for r in fast}
    in_flight: set[str] = set()

    def slow_chunk_generating() -> bool:
        nonlocal in_flight
        in_flight = {i for i in _generating(generating) if i.startswith("slow")}
        return bool(in_flight) and fast_ids <= run.reported()

    # Observed right before the signal: a slow chunk that finished while the fast rows were still being
    # reported (under -n 2, on a loaded machine) is a finished chunk, not the one being interrupted.
    _wait_until(run, slow_chunk_generating, "a slow chunk's generation, with every fast row reported")
    before = run.reported()
    _interrupt(run, how, request)

    doc, rows = _interrupted_results(tmp_path, run, before)
    assert fast_ids <= set(rows)
    if not (how.workers and not how.group):
        # SIGINT reached the process generating (serially, or the whole group): the chunk it was generating
        # (on the CPU, 400 tokens a row) cannot have finished. To the xdist controller alone, a worker may
        # still finish its chunk in the seconds before it is asked to stop; its rows are then kept, scored.
        finished = in_flight & set(rows)
        assert not finished, f"generating at SIGINT: {sorted(in_flight)}; written: {sorted(rows)}"
    for record in rows.values():
        assert record["error"] is None and record["models"]["base"]["output"], record
        assert record["models"]["base"]["score"]["value"] == 0.0, record  # scored: the tiny model is random
    _assert_nothing_left(run)
    device = doc["hardware_detail"].get("device")
    _worker_metadata_lost(how, None if device == "cpu" else f"hardware_detail is {doc['hardware_detail']}")


# --- during a sandboxed program ------------------------------------------------------------------------

# The name is set once the program runs: an interrupt before that could find it still starting, and a
# program whose work directory is removed before its interpreter has read it never runs at all.
SLEEPER = """\
import ctypes, time
ctypes.CDLL(None).prctl(15, {name!r}.encode(), 0, 0, 0)  # PR_SET_NAME: /proc/<pid>/comm
time.sleep(30)
print(3)
"""
RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"


def code_row(row_id: str) -> dict[str, Any]:
    return row(
        row_id,
        instruction="Write a Python program that reads two integers from one line and prints their sum.",
        expected="",
        evaluation_type="code_execution",
        evaluation_config={
            "language": "python",
            "timeout_seconds": 60,  # the sleeper's timeout is not what ends it
            "test_cases": [{"input": "1 2\n", "expected_output": "3"}],
        },
    )


@pytest.mark.parametrize("sandbox", ["auto", "basic"])
@pytest.mark.parametrize("how", HOWS)
def test_sigint_during_a_sandboxed_program(
    tmp_path: Path, how: How, sandbox: str, request: pytest.FixtureRequest
) -> None:
    sleeper = f"llm{uuid.uuid4().hex[:12]}"  # a process name: 15 characters at most
    ids = ["ok0", "ok1", "sleeper", "ok2", "ok3"]
    predictions = {i: RIGHT for i in ids} | {"sleeper": SLEEPER.format(name=sleeper)}
    (tmp_path / "bench.jsonl").write_text(jsonl([code_row(i) for i in ids]))
    (tmp_path / "preds.jsonl").write_text(
        "".join(json.dumps({"id": i, "prediction": p}) + "\n" for i, p in predictions.items())
    )
    args = ["--llmeval-predictions=preds.jsonl", f"--llmeval-sandbox={sandbox}", "bench.jsonl"]
    # One row per chunk: under xdist the rows spread over both workers, and ok2 may run beside the sleeper.
    args += ["--llmeval-batch-size=1", "-m", "not gate", *how.workers]
    run = _start(request, tmp_path, args, others=(sleeper,))
    _wait_until(
        run,
        lambda: bool(_processes(sleeper)) and {"ok0", "ok1"} <= run.reported(),
        "the sleeping program in its sandbox, with the rows before it reported",
    )
    before = run.reported()
    _interrupt(run, how, request)

    doc, rows = _interrupted_results(tmp_path, run, before)
    assert "sleeper" not in rows, rows.get("sleeper")
    for record in rows.values():
        score = record["models"]["base"]["score"]
        assert record["error"] is None and score["value"] == 1.0, record
        assert [case["verdict"] for case in score["cases"]] == ["passed"], record
        assert score["isolation"] == doc["sandbox"], record
    assert sandbox == "auto" or doc["sandbox"]["level"] == "basic", doc["sandbox"]
    _assert_nothing_left(run)
    unmatched = doc["predictions"]["unmatched_ids"]
    _worker_metadata_lost(how, f"predictions.unmatched_ids is {unmatched}" if unmatched else None)
