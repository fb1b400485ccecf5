"""The sandbox against hostile programs, run for real: each must end in time, score 0 with the right verdict,
leave no process behind and change no file outside its work directory.

Every hostile case runs under strict isolation when this machine has it, under basic isolation as detect()
gives it, and under basic isolation with a per-run uid (as on CI runners that run as root). Where an
isolation lacks the layer that stops an attack (basic and the network, say), the test checks that
`Isolation.missing` says so and that the attack really gets through, so the documentation stays true; an
attack that would harm the test run itself (a fork bomb, killing pytest) is then not launched.

"No process behind" is checked, not assumed: each hostile program first re-executes itself with a unique
marker in its argv, which every fork inherits; after the run, /proc is scanned for that marker.

Strict means strict: where bubblewrap is installed, or where LLMEVAL_REQUIRE_STRICT=1 (CI sets it), a strict
isolation that detect() does not give fails the strict tests instead of skipping them, so that a bug in
detection cannot turn ~30 tests into skips on a green run. LLMEVAL_REQUIRE_STRICT=0 allows the skip (a
container that has bwrap but no user namespaces). Tests that accept either level record the level they got
(a JUnit property `isolation_level`) and have a partner that requires strict.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pwd
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import strict_required

from pytest_llmeval import sandbox as sandbox_module
from pytest_llmeval.sandbox import (
    LAYERS,
    Isolation,
    Sandbox,
    SandboxUnavailable,
    detect,
)
from pytest_llmeval.sandbox import supervisor as supervisor_module
from pytest_llmeval.sandbox.runs import Limits, RunResult
from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.code_execution import score

TIMEOUT = 1.0  # seconds per case: short, to keep the suite fast; the bound asserted is TIMEOUT + 1


STRICT_REQUIRED, STRICT_WHY = strict_required()

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the suite scans Linux /proc")

# Every hostile program starts with this: re-exec with the marker in argv, so forks carry it too.
PREAMBLE = """\
import os, sys
if {marker!r} not in sys.argv:
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:], {marker!r}])
"""


@dataclass(frozen=True)
class Hostile:
    """One hostile program and what the sandbox must make of it."""

    name: str
    code: str  # formatted with the Context fields
    verdict: str  # when isolation has a layer of `needs` (or `needs` is empty)
    # Layers any one of which stops the attack; without them the attack gets through (documented).
    needs: tuple[str, ...] = ()
    escaped_verdict: str = "passed"  # the verdict when it gets through
    dangerous: bool = False  # when it gets through it would harm the test run: not launched then
    expected_output: str = "escaped"
    # When stopped, the reason must show in stderr: a NameError in the snippet must not pass for a block.
    because: str = ""
    signal: int | None = None  # the signal that must have ended it, when stopped


@dataclass
class Context:
    """What a hostile program is told about its surroundings, and what the test watches."""

    marker: str
    pytest_pid: int
    sentinel: str
    secret: str
    ssh_key: str
    tcp_port: int
    udp_port: int
    environ_hash: str


HOSTILE = [
    Hostile("infinite_loop", "while True:\n    pass\n", "timeout"),
    Hostile(
        "ignores_sigterm_sigxcpu_sigalrm",
        """\
import signal
for sig in (signal.SIGTERM, signal.SIGXCPU, signal.SIGALRM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
signal.alarm(1)
while True:
    pass
""",
        "timeout",
    ),
    Hostile("sleep_past_timeout", "import time\ntime.sleep(30)\nprint('escaped')\n", "timeout"),
    Hostile("c_level_loop", "import itertools\n(-1) in itertools.count()\n", "timeout"),
    Hostile(
        "fork_bomb",
        """\
while True:
    try:
        os.fork()
    except OSError:
        pass
""",
        "timeout",
        needs=("process-limit",),
        dangerous=True,  # uncontained, it would exhaust the machine's pids for everyone
    ),
    Hostile(
        "setsid_daemon",
        """\
import time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)  # the daemon: must not outlive the run
    os._exit(0)
os.wait()
print("daemon started")
""",
        "wrong_output",
        needs=("reap-all",),
        escaped_verdict="wrong_output",
    ),
    Hostile(
        "allocate_6_gb",
        "block = bytearray(6 * 1024**3)\nprint('escaped')\n",
        "memory_limit",
        because="MemoryError",
    ),
    Hostile("endless_stdout", "while True:\n    sys.stdout.write('x' * 4096)\n", "output_limit"),
    Hostile("endless_stderr", "while True:\n    sys.stderr.write('x' * 4096)\n", "output_limit"),
    Hostile(
        "write_and_delete_outside_workdir",
        """\
import shutil
errors, done = [], []
actions = [
    lambda: open({sentinel!r} + "/benchmark.jsonl", "a").write('{{"prompt": "pwned"}}\\n'),
    lambda: os.remove({sentinel!r} + "/conftest.py"),
    lambda: open({sentinel!r} + "/new_file.py", "w").write("pwned"),
    lambda: os.utime({sentinel!r} + "/benchmark.jsonl", (0, 0)),
]
for action in actions:
    try:
        action()
        done.append(action)
    except OSError as error:
        errors.append(error)
if not done:
    raise errors[0]
print("escaped")
""",
        "runtime_error",
        needs=("filesystem", "unprivileged-uid"),
        because=r"FileNotFoundError|PermissionError|Read-only file system",
    ),
    Hostile(
        "write_100_mb_file",
        "with open('big.bin', 'wb') as handle:\n    handle.write(b'0' * 100 * 2**20)\nprint('escaped')\n",
        "runtime_error",
        because="File too large",
    ),
    Hostile(
        "secret_from_environment",
        "print(os.environ['LLMEVAL_TEST_SECRET'])\n",
        "runtime_error",
        because="KeyError: 'LLMEVAL_TEST_SECRET'",
    ),
    Hostile(
        "environ_of_the_test_process",
        """\
import contextlib
import fcntl
import hashlib
for pid in ({pytest_pid}, os.getppid()):
    try:
        with open(f"/proc/{{pid}}/environ", "rb") as handle:
            print(hashlib.sha256(handle.read()).hexdigest())
            break
    except OSError:
        pass
else:
    print("unreadable")
""",
        "wrong_output",
        needs=("pid-namespace", "unprivileged-uid"),
        expected_output="{environ_hash}",
    ),
    Hostile(
        "tcp_connect_to_host_listener",
        """\
import socket
connection = socket.create_connection(("127.0.0.1", {tcp_port}), timeout=0.5)
connection.sendall(b"escaped")
print("escaped")
""",
        "runtime_error",
        needs=("network-namespace",),
        because=r"ConnectionRefusedError|Network is unreachable",
    ),
    Hostile(
        "udp_sendto_host",
        """\
import socket
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.sendto(b"escaped", ("127.0.0.1", {udp_port}))
print("sent")
""",
        "wrong_output",
        needs=("network-namespace",),
        escaped_verdict="wrong_output",
    ),
    Hostile(
        "read_ssh_key",
        "print(open({ssh_key!r}).read().strip())\n",
        "runtime_error",
        needs=("filesystem", "unprivileged-uid"),
        expected_output="{secret}",
        because=r"FileNotFoundError|PermissionError",
    ),
    Hostile(
        "kill_the_test_process",
        "import signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
        "os.kill({pytest_pid}, signal.SIGKILL)\nprint('escaped')\n",
        "runtime_error",
        needs=("pid-namespace", "unprivileged-uid"),
        dangerous=True,  # it would kill this pytest process
        because=r"ProcessLookupError|PermissionError",
    ),
    Hostile(
        "segfault_through_ctypes",
        "import ctypes\nctypes.string_at(0)\nprint('escaped')\n",
        "runtime_error",
        signal=11,
    ),
    Hostile(
        "unbounded_recursion",
        "def f(n):\n    return f(n + 1)\nf(0)\n",
        "runtime_error",
        because="RecursionError",
    ),
    Hostile("close_stdout_then_loop", "os.close(1)\nwhile True:\n    pass\n", "timeout"),
    Hostile("syntax_error", "def f(:\n    pass\n", "compile_error", because="SyntaxError"),
]


@pytest.fixture(scope="module", params=["strict", "basic", "basic-uid"])
def box(request: pytest.FixtureRequest) -> Sandbox:
    """A sandbox of each kind: strict and basic as detect() gives them, and basic with the per-run uid.

    Here the interpreter lives under /root (0700), which a per-run uid cannot enter, so detect("basic") runs
    the code as root; "basic-uid" is basic isolation as CI gives it (Python under /usr or /opt), with the
    system interpreter.
    """
    if request.param != "basic-uid":
        try:
            isolation = detect(request.param)
        except SandboxUnavailable as error:
            if request.param == "strict" and not STRICT_REQUIRED:
                pytest.skip(f"strict isolation is not available on this machine ({STRICT_WHY}): {error}")
            # Strict where it is required, and basic always (on Linux): a failure, never a skip.
            pytest.fail(
                f"{request.param} isolation not detected, yet required ({STRICT_WHY}): {error}", pytrace=False
            )
        assert isolation.level == request.param, f"detect({request.param!r}) gave {isolation}"
        return Sandbox(isolation)
    if os.geteuid() != 0 or "unprivileged-uid" in detect("basic").layers:
        pytest.skip("basic-uid is detect('basic') itself here, or needs root")
    layers = [*sandbox_module._BASE_LAYERS, "no-new-privileges", *sandbox_module._UID_LAYERS]
    isolation = sandbox_module._isolation("basic", layers, "test: basic with a per-run uid")
    for python in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(python) and not sandbox_module._probe(isolation, python):
            return Sandbox(isolation, python=python)
    pytest.skip("no interpreter here that an unprivileged uid can run")


@pytest.fixture(scope="module")
def isolation(box: Sandbox) -> Isolation:
    return box.isolation


@pytest.fixture(autouse=True)
def _record_isolation_level(request: pytest.FixtureRequest) -> None:
    """Every test run under a sandbox says which isolation it ran under (a property in JUnit)."""
    if "box" in request.fixturenames:
        _say(request, "isolation_level", request.getfixturevalue("isolation").level)


@pytest.mark.parametrize("case", HOSTILE, ids=[case.name for case in HOSTILE])
def test_hostile_program(
    case: Hostile, isolation: Isolation, box: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hostile program ends in time with its verdict, scores 0, leaves no process and no file changed."""
    protected = not case.needs or any(layer in isolation.layers for layer in case.needs)
    if not protected:
        # The documented gap: isolation must say it lacks every layer that would have stopped this.
        assert set(case.needs) <= set(isolation.missing), isolation
        if case.dangerous:
            pytest.skip(
                f"{case.name} not launched: {isolation.level} isolation here lacks {', '.join(case.needs)}"
            )
    secret = f"llmeval-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("LLMEVAL_TEST_SECRET", secret)  # in os.environ: the sandbox must not pass it on
    with _fake_ssh_key(secret) as ssh_key, _listeners() as (tcp, udp):
        ctx = _context(tmp_path, secret, ssh_key, tcp, udp)
        before = _snapshot(Path(ctx.sentinel))
        code = PREAMBLE.format(marker=ctx.marker) + case.code.format(**vars(ctx))
        expected = case.expected_output.format(**vars(ctx))
        started = time.monotonic()
        result = _score(code, [expected], box)
        elapsed = time.monotonic() - started
        leftovers = _marked_processes(ctx.marker)
        _kill(leftovers)  # so that a failing assertion below leaves nothing running either
        tcp_hits, udp_hits = _accepted(tcp), _datagrams(udp)

    verdict = result.details["cases"][0]["verdict"]
    assert elapsed < TIMEOUT + 1, f"took {elapsed:.2f} s"
    changed = _snapshot(Path(ctx.sentinel)) != before
    escaped = changed or tcp_hits > 0 or udp_hits > 0
    if protected:
        assert verdict == case.verdict, _describe(result)
        assert re.search(case.because, result.details["cases"][0]["stderr"]), _describe(result)
        if case.signal is not None:
            assert result.details["cases"][0]["signal"] == case.signal, _describe(result)
        assert result.value == 0.0
        assert not leftovers, f"processes left behind: {leftovers}"
        assert not escaped, (
            f"changed files: {changed}, tcp connections: {tcp_hits}, udp datagrams: {udp_hits}"
        )
    else:
        # Not stopped, as documented: check the attack really got through, so the documentation is true.
        assert verdict == case.escaped_verdict, _describe(result)
        assert escaped or leftovers or verdict == "passed"


def test_a_fork_bomb_does_not_stop_the_next_row(isolation: Isolation, box: Sandbox) -> None:
    if "process-limit" not in isolation.layers:
        assert "process-limit" in isolation.missing
        pytest.skip(f"fork bomb not launched: {isolation.level} isolation here has no process-limit")
    marker = f"llmeval-marker-{uuid.uuid4().hex}"
    bomb = PREAMBLE.format(marker=marker) + HOSTILE[4].code
    assert _score(bomb, ["x"], box).details["cases"][0]["verdict"] == "timeout"
    assert not _marked_processes(marker)
    good = _score("print(sum(map(int, input().split())))", ["5"], box, inputs=["2 3"])
    assert good.value == 1.0, good.details


def test_a_fork_bomb_beside_a_normal_run_in_parallel(isolation: Isolation, box: Sandbox) -> None:
    """Two rows at once (as under xdist): a fork bomb in one does not make the other fail."""
    if "process-limit" not in isolation.layers:
        pytest.skip(f"fork bomb not launched: {isolation.level} isolation here has no process-limit")
    marker = f"llmeval-marker-{uuid.uuid4().hex}"
    bomb = PREAMBLE.format(marker=marker) + HOSTILE[4].code
    thread = threading.Thread(target=box.run, args=(bomb, "", Limits(wall_seconds=2.0)))
    thread.start()
    try:
        time.sleep(0.3)  # the bomb is at its limit by now
        good = _score("import threading\nprint(sum(map(int, input().split())))", ["5"], box, inputs=["2 3"])
    finally:
        thread.join()
    assert good.value == 1.0, good.details
    assert not _marked_processes(marker)


def test_exit_after_correct_output_for_one_case_only(box: Sandbox) -> None:
    """os._exit(0) skips the flush: only the case that flushed first keeps its output (partial credit)."""
    code = "import os, sys\nn = int(input())\nprint(n * 2)\nif n == 1:\n    sys.stdout.flush()\nos._exit(0)\n"
    result = _score(code, ["2", "4", "6"], box, inputs=["1", "2", "3"])
    assert [case["verdict"] for case in result.details["cases"]] == ["passed", "wrong_output", "wrong_output"]
    assert result.value == pytest.approx(1 / 3)
    assert result.details["pass_at_1"] == 0.0


def test_ordinary_rows(box: Sandbox) -> None:
    add = "a, b = map(int, input().split())\nprint(a + b)\n"
    assert _score(add, ["3", "10"], box, inputs=["1 2", "4 6"]).value == 1.0
    wrong = _score("print(42)", ["3", "10"], box, inputs=["1 2", "4 6"])
    assert [case["verdict"] for case in wrong.details["cases"]] == ["wrong_output", "wrong_output"]
    half = _score("print(3)", ["3", "10"], box, inputs=["1 2", "4 6"])
    assert half.value == 0.5 and not half.passed


def test_unread_large_stdin_and_exact_bytes(box: Sandbox) -> None:
    """A program that ignores a large stdin does not block the harness; output bytes come back as written."""
    result = box.run("print('héllo\\r')\nprint('  ')\n", "x" * 2_000_000, Limits(wall_seconds=5))
    assert result.exit_code == 0
    assert result.stdout == "héllo\r\n  \n"


def test_the_work_directory_is_private_and_removed(box: Sandbox, isolation: Isolation) -> None:
    result = box.run(
        "import os\nopen('f.txt', 'w').write('x')\nprint(os.getcwd())", "", Limits(wall_seconds=5)
    )
    assert result.exit_code == 0, result
    workdir = result.stdout.strip()
    if "filesystem" in isolation.layers:
        assert workdir == "/sandbox"  # a tmpfs inside the sandbox: nothing of it is on the host
    assert not Path(workdir, "f.txt").exists()


def test_strict_sandbox_sees_nothing_of_the_host(isolation: Isolation, box: Sandbox) -> None:
    if isolation.level != "strict":
        pytest.skip("only strict isolation hides the host")
    probe = (
        f"REPO_FILE = {str(Path(__file__).resolve())!r}\n"
        + """\
import json, os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
print(json.dumps({
    "uid": os.getuid(),
    "root": sorted(os.listdir("/")),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "cap_eff": status["CapEff"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "repo": os.path.exists(REPO_FILE),
    "home": os.path.exists(os.path.expanduser("~root") + "/.ssh"),
    "env": sorted(os.environ),
}))
"""
    )
    result = box.run(probe, "", Limits(wall_seconds=5))
    assert result.exit_code == 0, result
    seen = json.loads(result.stdout)
    assert not seen["repo"] and not seen["home"]
    assert set(seen["root"]) <= {
        "usr",
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "etc",
        "proc",
        "dev",
        "tmp",
    } | {
        "sandbox",
        *{Path(p).parts[1] for p in sandbox_module._python_dirs(box.python)},
    }
    assert max(seen["pids"]) < 10  # a fresh pid namespace: bwrap's init, the code, not the host
    assert seen["cap_eff"] == "0000000000000000" and seen["no_new_privs"] == "1"
    if "unprivileged-uid" in isolation.layers:
        assert seen["uid"] != 0
    assert "LLMEVAL_TEST_SECRET" not in seen["env"]


def test_the_leak_scan_sees_a_live_marked_process() -> None:
    """The positive control of 'no process left behind': a marked process is found, and gone once killed."""
    marker = f"llmeval-marker-{uuid.uuid4().hex}"
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        deadline = time.monotonic() + 5
        while not _marked_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _marked_processes(marker) == [process.pid]
    finally:
        process.kill()
        process.wait()
    assert not _marked_processes(marker)


def test_isolation_says_what_it_is(isolation: Isolation, request: pytest.FixtureRequest) -> None:
    """Either level, as the `box` parameter asked for it (recorded as isolation_level); strict is required
    where STRICT_REQUIRED by the box fixture itself and by test_strict_is_detected_where_required."""
    asked = request.node.callspec.params["box"]
    assert isolation.level == ("strict" if asked == "strict" else "basic"), f"{asked} gave {isolation}"
    record = json.loads(json.dumps(isolation.to_json()))
    assert record["level"] == isolation.level
    assert set(isolation.layers) <= set(LAYERS) | {"user-namespace"}
    assert set(isolation.missing) == set(LAYERS) - set(isolation.layers)
    if isolation.level == "strict":
        assert {"network-namespace", "filesystem", "pid-namespace"} <= set(isolation.layers)
    else:
        assert {"network-namespace", "filesystem"} <= set(isolation.missing)
        assert isolation.reason  # basic always says why it is not strict


def test_detect_is_cached_and_auto_prefers_strict(request: pytest.FixtureRequest) -> None:
    """Either level (recorded as isolation_level); test_strict_is_detected_where_required requires strict."""
    assert detect("basic") is detect("basic")
    auto = detect("auto")
    _say(request, "isolation_level", auto.level)
    try:
        strict = detect("strict")
    except SandboxUnavailable as error:
        assert auto.level == "basic", f"auto gave {auto.level} although strict is unavailable: {error}"
        assert str(error) in auto.reason, f"auto is basic, and says why: {auto.reason!r}"
    else:
        assert auto == strict, f"auto gave {auto.level} although strict is available"
    with pytest.raises(ValueError, match="auto, strict, basic"):
        detect("paranoid")


def test_strict_is_detected_where_required(request: pytest.FixtureRequest) -> None:
    """The partner of the tests that accept either level: where strict is required, it is what we get."""
    _say(request, "strict_required", STRICT_WHY)
    if not STRICT_REQUIRED:
        pytest.skip(f"strict isolation is not required here: {STRICT_WHY}")
    try:
        strict = detect("strict")
    except SandboxUnavailable as error:
        pytest.fail(f"strict isolation not detected, yet required ({STRICT_WHY}): {error}", pytrace=False)
    assert strict.level == "strict" and set(sandbox_module._STRICT_NEEDS) <= set(strict.layers), strict
    assert detect("auto") == strict, f"auto gave {detect('auto')}"
    _say(request, "isolation_level", strict.level)


def test_strict_without_bubblewrap_is_unavailable_and_auto_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = sandbox_module.shutil.which
    monkeypatch.setattr(
        sandbox_module.shutil, "which", lambda name, *a, **k: None if name == "bwrap" else original(name)
    )
    sandbox_module._strict.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
            detect("strict")
        fallback = detect("auto")
        assert fallback.level == "basic" and "bubblewrap is not installed" in fallback.reason
    finally:
        sandbox_module._strict.cache_clear()


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="wall_seconds"):
        Limits(wall_seconds=0)
    with pytest.raises(ValueError, match="open_files"):
        Limits(open_files=-1)
    assert Limits(wall_seconds=1.5).cpu == 3


# --- helpers -------------------------------------------------------------------------------------------


def _say(request: pytest.FixtureRequest, name: str, value: str) -> None:
    """A JUnit property of the running test (record_property without its warning under xunit2)."""
    request.node.user_properties.append((name, value))


def _score(code: str, expected: list[str], box: Sandbox, *, inputs: list[str] | None = None) -> Score:
    cases = [
        {"input": given, "expected_output": want}
        for given, want in zip(inputs or [""] * len(expected), expected, strict=True)
    ]
    return score(
        code, "", {"language": "python", "timeout_seconds": TIMEOUT, "test_cases": cases}, sandbox=box
    )


def _context(tmp_path: Path, secret: str, ssh_key: Path, tcp: socket.socket, udp: socket.socket) -> Context:
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "benchmark.jsonl").write_text('{"prompt": "2+2", "expected": "4"}\n')
    (sentinel / "conftest.py").write_text("# the repository's conftest\n")
    return Context(
        marker=f"llmeval-marker-{uuid.uuid4().hex}",
        pytest_pid=os.getpid(),
        sentinel=str(sentinel),
        secret=secret,
        ssh_key=str(ssh_key),
        tcp_port=tcp.getsockname()[1],
        udp_port=udp.getsockname()[1],
        # /proc/<pid>/environ is the environment the process started with: hash that, not os.environ.
        environ_hash=hashlib.sha256(Path("/proc/self/environ").read_bytes()).hexdigest(),
    )


@contextlib.contextmanager
def _fake_ssh_key(secret: str) -> Iterator[Path]:
    """A fake private key in the real home's ~/.ssh (what a sandbox must hide), removed afterwards.

    xdist workers share the home: a lock keeps one worker from removing the ~/.ssh another is using, and a
    flag file marks a ~/.ssh that the tests created, so that only such a one is removed again.
    """
    ssh = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ssh"
    flag = ssh / ".created-by-llmeval-tests"
    path = ssh / f"id_llmeval_test_{uuid.uuid4().hex[:12]}"
    with _home_lock():
        if not ssh.exists():
            ssh.mkdir(mode=0o700)
            flag.touch()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secret + "\n")
    try:
        yield path
    finally:
        with _home_lock():
            path.unlink(missing_ok=True)
            if flag.exists() and {entry.name for entry in ssh.iterdir()} == {flag.name}:
                flag.unlink()
                ssh.rmdir()


@contextlib.contextmanager
def _home_lock() -> Iterator[None]:
    with open(os.path.join(tempfile.gettempdir(), "llmeval-tests-home.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def _listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A TCP listener and a UDP socket on 127.0.0.1 that a sandboxed program must not reach."""
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
    ):
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(8)
        udp.bind(("127.0.0.1", 0))
        yield tcp, udp


def _accepted(tcp: socket.socket) -> int:
    tcp.setblocking(False)
    count = 0
    while True:
        try:
            connection, _ = tcp.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def _datagrams(udp: socket.socket) -> int:
    udp.settimeout(0.05)  # a datagram sent during the run is already queued; this only absorbs scheduling
    count = 0
    while True:
        try:
            udp.recv(4096)
        except (TimeoutError, BlockingIOError):
            return count
        count += 1


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(directory.iterdir())}


def _describe(result: Score) -> str:
    case = result.details["cases"][0]
    return f"{case['verdict']}, exit {case['exit_code']}, signal {case['signal']}, stderr: {case['stderr']!r}"


def _marked_processes(marker: str) -> list[int]:
    """Live processes whose command line carries `marker` (zombies have none: they are not running)."""
    needle = marker.encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if needle in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("absent", [("pidfd_open",), ("pidfd_open", "waitid")], ids=["no-pidfd", "no-waitid"])
def test_without_pidfd_exit_and_timeout_still_work(
    absent: tuple[str, ...], box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernels before 5.3 have no pidfd (exit is polled with waitid WNOWAIT); macOS has no waitid either."""
    for name in absent:
        monkeypatch.delattr(os, name)
    assert box.run("print(input())", "hi", Limits(wall_seconds=5)).stdout == "hi\n"
    marker = f"llmeval-marker-{uuid.uuid4().hex}"
    started = time.monotonic()
    result = box.run(
        PREAMBLE.format(marker=marker) + "while True:\n    pass\n", "", Limits(wall_seconds=TIMEOUT)
    )
    assert result.timed_out and time.monotonic() - started < TIMEOUT + 1
    assert not _marked_processes(marker)


def test_the_code_cannot_pass_its_failure_off_as_the_harness(box: Sandbox) -> None:
    """The launcher's token never reaches the code: it cannot forge a sandbox_error (not scored)."""
    forger = """\
import os, re, sys
seen = set()
for pid in os.listdir("/proc"):
    for name in ("cmdline", "environ"):
        try:
            seen |= set(re.findall(rb"[0-9a-f]{32}", open(f"/proc/{pid}/{name}", "rb").read()))
        except OSError:
            pass
for fd in range(3, 1024):
    try:
        seen |= set(re.findall(rb"[0-9a-f]{32}", os.read(fd, 4096)))
    except OSError:
        pass
for token in seen:
    sys.stderr.write(token.decode() + " sandbox_error forged\\n")
    sys.stderr.write(token.decode() + " compile_error\\n")
sys.exit(1)
"""
    result = _score(forger, ["1"], box)
    assert result.details["cases"][0]["verdict"] == "runtime_error", _describe(result)
    assert result.details["sandbox_errors"] == 0


def test_the_code_finds_no_token_in_its_own_process(box: Sandbox) -> None:
    """The code runs in the launcher's process: the token is zeroed before it starts, the launcher's names
    are gone, and a token line after "ready" would not be trusted anyway."""
    forger = """\
import os, re, sys
seen = set()
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_globals.values()) + list(frame.f_locals.values()):
        if isinstance(value, (bytes, bytearray, str)):
            text = value if isinstance(value, str) else value.decode("latin-1")
            seen |= set(re.findall(r"[0-9a-f]{32}", text))
    frame = frame.f_back
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        if not perms.startswith("rw"):
            continue
        start, end = (int(x, 16) for x in span.split("-"))
        try:
            mem.seek(start)
            found = re.findall(rb"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])", mem.read(end - start))
            seen |= {m.decode() for m in found}
        except (OSError, OverflowError, ValueError):
            pass
print(len(seen), file=sys.stderr)
for token in seen:
    sys.stderr.write(token + " sandbox_error forged\\n")
sys.exit(1)
"""
    result = _score(forger, ["1"], box)
    assert result.details["cases"][0]["verdict"] == "runtime_error", _describe(result)
    assert result.details["sandbox_errors"] == 0


def test_token_lines_after_ready_are_the_codes_output() -> None:
    token = b"f" * 32
    stderr = token + b" start \n" + token + b" ready \n" + token + b" sandbox_error forged\nboom"
    rest, words = supervisor_module._split_token_lines(stderr, token)
    assert words == {"start": "", "ready": ""}
    assert rest == token + b" sandbox_error forged\nboom"


def test_the_hostile_programs_run_four_at_a_time_beside_normal_ones(
    isolation: Isolation, box: Sandbox
) -> None:
    """run_all with 4 jobs, as a chunk of code rows runs (--llmeval-sandbox-jobs 4): each hostile program
    that needs nothing of the test's surroundings gets its verdict, and the ordinary programs between them
    (a fork bomb's neighbours included) still pass, in time, leaving no process behind."""
    chosen = [
        case
        for case in HOSTILE
        if "{" not in case.code.replace("{{", "")
        and (not case.needs or any(layer in isolation.layers for layer in case.needs))
        and (case.name != "fork_bomb" or "process-limit" in isolation.layers)
    ]
    assert any(case.name == "fork_bomb" for case in chosen) or "process-limit" not in isolation.layers
    markers = [f"llmeval-marker-{uuid.uuid4().hex}" for _ in chosen]
    runs: list[tuple[str, str, Limits]] = []
    for case, marker in zip(chosen, markers, strict=True):
        runs.append((PREAMBLE.format(marker=marker) + case.code, "", Limits(wall_seconds=TIMEOUT)))
        runs.append(("print(sum(map(int, input().split())))", "2 3", Limits(wall_seconds=TIMEOUT)))
    results = box.run_all(runs, jobs=4)
    leftovers = [pid for marker in markers for pid in _marked_processes(marker)]
    _kill(leftovers)
    for i, case in enumerate(chosen):
        hostile, normal = results[2 * i], results[2 * i + 1]
        assert normal.exit_code == 0 and normal.stdout == "5\n", (case.name, normal)
        got = _verdict_of(hostile, case)
        assert got == case.verdict, (case.name, hostile)
    assert not leftovers, leftovers


def _verdict_of(result: RunResult, case: Hostile) -> str:
    from pytest_llmeval.scorers.code_execution import verdict

    return verdict(result, case.expected_output)


def test_run_all_runs_up_to_jobs_at_once_in_order(box: Sandbox) -> None:
    """Each program prints when it started and ended (CLOCK_MONOTONIC is the host's, namespaces or not):
    with 3 jobs, some runs overlap and never more than 3; results come back in the order asked."""
    code = "import time\nstart = time.monotonic()\ntime.sleep(0.3)\nprint(start, time.monotonic(), {i})\n"
    runs = [(code.replace("{i}", str(i)), "", Limits(wall_seconds=5.0)) for i in range(9)]
    results = box.run_all(runs, jobs=3)
    spans = [tuple(float(x) for x in r.stdout.split()) for r in results]
    assert [int(span[2]) for span in spans] == list(range(9))
    most = max(sum(s[0] <= t[0] < s[1] for s in spans) for t in spans)
    assert 2 <= most <= 3, spans
    assert box.run_all(runs[:2], jobs=1)[1].stdout.split()[2] == "1"


@pytest.mark.parametrize(
    ("code", "exit_code", "stdout"),
    [
        ("import sys\nsys.stdout.write('no newline, buffered')", 0, "no newline, buffered"),
        ("import atexit\natexit.register(print, 'at exit')\nprint('body')", 0, "body\nat exit\n"),
        (
            "import threading, time\n"
            "t = threading.Thread(target=lambda: (time.sleep(0.2), print('thread done')))\nt.start()",
            0,
            "thread done\n",
        ),
        ("import sys\nprint('x')\nsys.exit(3)", 3, "x\n"),
        ("print('x')\nraise AssertionError('no')", 1, "x\n"),
    ],
    ids=["flush", "atexit", "thread", "exit-status", "exception"],
)
def test_skipping_the_teardown_keeps_what_the_exit_does(
    box: Sandbox, code: str, exit_code: int, stdout: str
) -> None:
    """finalize=False (function tests) skips the interpreter's teardown of its modules only: output is
    flushed, atexit handlers run, threads are joined, and the exit status is the code's, as with it."""
    for finalize in (True, False):
        result = box.run(code, "", Limits(wall_seconds=5.0, finalize=finalize))
        assert (result.exit_code, result.stdout) == (exit_code, stdout), (finalize, result)
