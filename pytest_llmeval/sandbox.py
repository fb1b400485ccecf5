"""Running untrusted, model-written Python: a fresh interpreter behind every isolation layer the machine has.

No pytest and no torch here. The evaluator builds one `Sandbox` per process from `detect(mode)`; scorers call
`Sandbox.run(code, stdin, limits)` once per test case and turn the `RunResult` facts into a verdict.

Levels. "strict" means the code has no network and sees no file of the host it could use: bubblewrap (bwrap)
puts it in fresh pid, network, mount, ipc and uts namespaces with a minimal read-only view of the system (the
interpreter's own files, /usr, a few /etc files) and a small private tmpfs as its only writable place; $HOME,
the repository, /tmp and the parent's /proc are not there. "basic" is what any POSIX machine gives: a fresh
interpreter in its own session, resource limits, a wall-clock timeout, capped output, an allow-listed
environment and a throw-away working directory; the network and the user's files stay reachable. When we run
as root (CI runners, containers) both levels also run the code as an unused per-run uid: RLIMIT_NPROC does not
apply to uid 0, so that is what contains a fork bomb, and every process of that uid can be found and killed.
`Isolation.layers` lists exactly what was active; `Isolation.missing` what was not.

The pytest process never runs the code and never forks a Python child: subprocess spawns bwrap or a fresh
interpreter from C. A tiny launcher script (`_LAUNCHER`), run by that fresh interpreter inside the sandbox,
applies the rlimits, drops to the per-run uid, compiles the code (so a syntax error is told apart from a
runtime error) and runs it as `__main__` of that same interpreter (one interpreter start per run). It proves
itself by writing a per-run token to stderr: no token, no code ran, and the failure is the harness's
(`sandbox_error`). The token comes through a pipe the launcher empties, not argv (/proc/1/cmdline, bwrap's
init, is readable by the code), is zeroed before the code runs, and no token line after "ready" is trusted:
a code that found it still could not pass its failures off as the harness's.

`run_all` runs many at once (a chunk of code rows), each with its own process tree, per-run uid, limits and
deadline; `Prefetched` hands their results to the scorers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import queue
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "LAYERS",
    "MAX_JOBS",
    "MODES",
    "Isolation",
    "Limits",
    "Prefetched",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "default_jobs",
    "detect",
]

MODES = ("auto", "strict", "basic")

# Every layer the sandbox knows, strongest last; `Isolation.missing` is this minus what is active.
LAYERS: tuple[str, ...] = (
    "fresh-interpreter",  # a new interpreter exec'd from C, never a fork of the pytest process
    "session",  # own session and process group, killed as a whole
    "rlimits",  # CPU seconds, address space, file size, open files, no core dumps
    "wall-timeout",
    "output-cap",  # stdout and stderr read as they come; the run is killed past the cap
    "clean-env",  # an allow-listed environment: no tokens, no PYTHON* from the parent
    "temp-workdir",  # a private working directory, gone after the run
    "no-new-privileges",  # setuid binaries cannot raise privileges
    "unprivileged-uid",  # the code runs as an unused per-run uid (only when we are root)
    "process-limit",  # RLIMIT_NPROC that really applies: fork bombs are contained, per run
    "reap-all",  # every descendant is killed after the run, daemons that called setsid included
    "pid-namespace",  # the code sees no host process and cannot signal the test run
    "network-namespace",  # no network: only a private loopback
    "filesystem",  # minimal read-only view of the host; only a private size-capped tmpfs is writable
    "ipc-namespace",
    "uts-namespace",
)
# Not a protection in itself: how process-limit works for a non-root user under bwrap.
_EXTRA_LAYERS = ("user-namespace",)
_STRICT_NEEDS = ("network-namespace", "filesystem", "pid-namespace")

_WORKDIR = "/sandbox"  # where the code runs under bwrap: a tmpfs, nothing of the host
# Per-run uids: unused by distributions and below systemd's 0x7FFE0000 "foreign" range; uid + gid alike.
# pid * 16 + slot keeps concurrent runs (threads, xdist workers) on distinct uids, so RLIMIT_NPROC, which
# counts per uid, never lets one row's fork bomb starve the next row.
_UID_BASE = 0x70000000
_UID_SLOTS = 16
MAX_JOBS = _UID_SLOTS  # runs in flight at once per process: each holds one of the per-run uids
_STARTUP_BUDGET = 15.0  # seconds for the sandbox to reach the code; a loaded CI runner can be slow
_DRAIN_GRACE = 0.5  # seconds to read what is left in the pipes once every writer should be dead
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")


class SandboxUnavailable(Exception):
    """Strict isolation was asked for and this machine cannot provide it; the message says why."""


class SandboxError(RuntimeError):
    """The harness failed (not the code it ran): never to be counted against the model."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run; each process of the code gets them (rlimits are per process)."""

    wall_seconds: float = 5.0  # from the moment the code is compiled (sandbox start-up is not counted)
    cpu_seconds: int | None = None  # None: ceil(wall_seconds) + 1, a backstop behind the wall clock
    address_space_bytes: int = 512 * 2**20  # a 6 GB allocation gets MemoryError
    file_size_bytes: int = 16 * 2**20  # largest file the code may write
    open_files: int = 64
    output_bytes: int = 2**20  # cap on stdout, and separately on stderr
    # Tasks (processes and threads) of the run; applies only with process-limit. Memory is limited per
    # process, so a fork bomb's total is at most processes x address_space_bytes (8 GiB).
    processes: int = 16
    disk_bytes: int = 64 * 2**20  # size of the private tmpfs work dir and /tmp under bwrap
    # False: when the code ends normally, its threads are joined, atexit handlers run and stdio flushed,
    # and the interpreter's teardown of every module is skipped (a third of a short run's CPU). For
    # programs whose verdict is their exit status (function tests): a finalizer's side effect, such as an
    # unclosed file flushed at exit, does not happen.
    finalize: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.wall_seconds) and self.wall_seconds > 0):
            raise ValueError(f"wall_seconds must be a positive number, not {self.wall_seconds!r}")
        for name in (
            "address_space_bytes",
            "file_size_bytes",
            "open_files",
            "output_bytes",
            "processes",
            "disk_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if self.cpu_seconds is not None and (isinstance(self.cpu_seconds, bool) or self.cpu_seconds <= 0):
            raise ValueError(f"cpu_seconds must be a positive integer or None, not {self.cpu_seconds!r}")

    @property
    def cpu(self) -> int:
        """CPU seconds of the soft limit (SIGXCPU); the hard limit (SIGKILL) is one more."""
        return self.cpu_seconds if self.cpu_seconds is not None else math.ceil(self.wall_seconds) + 1


@dataclass(frozen=True)
class Isolation:
    """How strongly code is isolated: the level, the layers active, and those this machine lacks."""

    level: str  # "strict" (no network, no host files) or "basic" (process-level only)
    layers: tuple[str, ...]
    missing: tuple[str, ...]
    reason: str = ""  # why the level is not strict, or why a layer is missing; empty when nothing is

    def to_json(self) -> dict[str, Any]:
        """The JSON-able form results.json records."""
        return {
            "level": self.level,
            "layers": list(self.layers),
            "missing": list(self.missing),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class RunResult:
    """What happened to one run: the facts a scorer turns into a verdict."""

    exit_code: int | None  # None when the code was killed by a signal or by us
    signal: int | None  # the signal that ended the code, when one did
    stdout: str
    stderr: str  # without the launcher's token lines
    elapsed: float  # seconds from the code's start to its end (or to our kill)
    timed_out: bool = False  # we killed it at the wall-clock limit
    output_truncated: bool = False  # stdout or stderr passed output_bytes; we killed it
    memory_exceeded: bool = False  # it died of MemoryError (the address-space limit)
    compile_error: bool = False  # the code does not compile; it never ran
    sandbox_error: str | None = None  # the harness failed before the code started: why
    cpu_limited: bool = False  # SIGXCPU: the CPU-seconds limit ended it


def default_jobs() -> int:
    """Runs at once by default: the cores this process may use, split between pytest-xdist's workers
    (each runs its own chunks), at least 1 and at most MAX_JOBS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        cores = os.cpu_count() or 1
    try:
        workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        workers = 1
    return max(1, min(MAX_JOBS, cores // workers))


def detect(mode: str = "auto") -> Isolation:
    """Return the isolation this machine gives for `mode` ("auto", "strict" or "basic"); cached per process.

    "auto" is strict when the machine supports it, else basic; "strict" raises SandboxUnavailable with the
    reason when it does not; "basic" is process-level isolation even where strict is possible. Each level
    is proven by running a probe through the real sandbox, not guessed from what is installed.
    """
    if mode not in MODES:
        raise ValueError(f"isolation mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode != "basic":
        strict, reason = _strict()
        if strict is not None:
            return strict
        if mode == "strict":
            raise SandboxUnavailable(reason)
        return _basic(reason)
    return _basic("basic isolation was asked for")


class Sandbox:
    """Runs untrusted Python code, one fresh process tree per run, under an `Isolation` from `detect`."""

    def __init__(self, isolation: Isolation, *, python: str | None = None) -> None:
        unknown = set(isolation.layers) - set(LAYERS) - set(_EXTRA_LAYERS)
        if unknown or isolation.level not in ("strict", "basic"):
            raise ValueError(f"not an isolation detect() returns: {isolation!r}")
        self.isolation = isolation
        # The base interpreter, not the venv's: the code gets the standard library, not our dependencies.
        self.python = os.path.realpath(python) if python else _python()
        self._bwrap = shutil.which("bwrap") if "filesystem" in isolation.layers else None
        if "filesystem" in isolation.layers and self._bwrap is None:
            raise SandboxUnavailable("bwrap is no longer on PATH")
        self._uids: queue.SimpleQueue[int] | None = None
        if "unprivileged-uid" in isolation.layers:
            self._uids = queue.SimpleQueue()
            for slot in range(_UID_SLOTS):
                self._uids.put(_UID_BASE + (os.getpid() % 2**22) * _UID_SLOTS + slot)
        # Without a pid namespace, the per-run uid is how every leftover process is found and killed.
        self._sweep = "pid-namespace" not in isolation.layers
        self._swept: set[int] = set()

    def run(self, code: str, stdin: str, limits: Limits) -> RunResult:
        """Run `code` with `stdin` as standard input under `limits`; never raises for what the code does."""
        uid = self._uids.get() if self._uids is not None else None  # blocks when 16 runs are in flight
        try:
            if uid is not None and self._sweep and uid not in self._swept:
                _kill_uid(uid)  # a process a crashed predecessor with our pid left under this uid
                self._swept.add(uid)
            return self._run(code, stdin, limits, uid)
        finally:
            if uid is not None and self._uids is not None:
                self._uids.put(uid)

    def run_all(self, runs: Sequence[tuple[str, str, Limits]], jobs: int) -> list[RunResult]:
        """`run(code, stdin, limits)` for each of `runs`, up to `jobs` at once, results in their order.

        Each run keeps every layer it has alone: its own fresh process tree, its own per-run uid (so
        RLIMIT_NPROC, counted per uid, lets a fork bomb starve nobody else), its own limits and deadline.
        A run that raises (the harness) gives a sandbox_error result, never an exception."""
        if jobs < 1:
            raise ValueError(f"jobs must be >= 1, not {jobs}")

        def one(run: tuple[str, str, Limits]) -> RunResult:
            try:
                return self.run(*run)
            except Exception as error:  # the harness failed: the scorer makes it a sandbox_error
                return _harness_failure(f"{type(error).__name__}: {error}")

        if jobs == 1 or len(runs) <= 1:
            return [one(run) for run in runs]
        with ThreadPoolExecutor(max_workers=min(jobs, MAX_JOBS, len(runs))) as pool:
            return list(pool.map(one, runs))

    def _run(self, code: str, stdin: str, limits: Limits, uid: int | None) -> RunResult:
        token = secrets.token_hex(16)
        with contextlib.ExitStack() as stack:
            token_fd = _token_pipe(token)
            stack.callback(_close, token_fd)
            # stdin is a file, not a pipe: nothing to write while the code runs, no blocking on unread input.
            stdin_file = stack.enter_context(_read_only_file(stdin.encode("utf-8")))
            if self._bwrap is not None:
                code_file = stack.enter_context(_read_only_file(code.encode("utf-8")))
                info_read, info_write = os.pipe()
                stack.callback(_close, info_read)
                argv, env = self._bwrap_argv(token_fd, limits, uid, code_file.fileno(), info_write)
                cwd, pass_fds = "/", [token_fd, code_file.fileno(), info_write]
            else:
                info_read, info_write = -1, -1
                workdir = tempfile.mkdtemp(prefix="llmeval-sandbox-")
                stack.callback(_remove_tree, workdir)
                path = os.path.join(workdir, "solution.py")
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(code)
                if uid is not None:
                    os.chown(workdir, uid, uid)
                argv, env = self._basic_argv(token_fd, limits, uid, workdir, path)
                cwd, pass_fds = workdir, [token_fd]
            try:
                process = subprocess.Popen(
                    argv,
                    stdin=stdin_file,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=cwd,
                    close_fds=True,
                    pass_fds=pass_fds,
                    start_new_session=True,  # setsid() done in C by CPython: no Python runs in the child
                )
            except OSError as error:
                return _harness_failure(f"could not start the sandbox: {error}")
            finally:
                if info_write >= 0:
                    os.close(info_write)
            sweep_uid = uid if self._sweep else None
            supervisor = _Supervisor(
                process, token, limits, info_read, sweep_uid, bwrap=self._bwrap is not None
            )
            try:
                return supervisor.watch()
            finally:
                supervisor.kill_all()
                for pipe in (process.stdout, process.stderr):
                    if pipe is not None:
                        pipe.close()

    def _environment(self, home: str) -> dict[str, str]:
        # Not -I, which would ignore the PYTHON* variables: the environment is ours alone, and
        # PYTHONHASHSEED=0 makes set and dict-of-str orders, hence outputs, reproducible run to run.
        return {
            "PATH": f"{os.path.dirname(self.python)}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": home,
            "TMPDIR": home if self._bwrap is None else "/tmp",
            "USER": "sandbox",
            "LOGNAME": "sandbox",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONHASHSEED": "0",
            "PYTHONSAFEPATH": "1",
        }

    def _launcher_config(self, token_fd: int, limits: Limits, uid: int | None, path: str) -> str:
        nproc = limits.processes if "process-limit" in self.isolation.layers else None
        rlimits = [
            ("RLIMIT_CPU", limits.cpu, limits.cpu + 1),
            ("RLIMIT_AS", limits.address_space_bytes, limits.address_space_bytes),
            ("RLIMIT_FSIZE", limits.file_size_bytes, limits.file_size_bytes),
            ("RLIMIT_NOFILE", limits.open_files, limits.open_files),
            ("RLIMIT_CORE", 0, 0),
        ]
        if nproc is not None:
            rlimits.append(("RLIMIT_NPROC", nproc, nproc))
        return repr(
            {
                "token_fd": token_fd,
                "rlimits": rlimits,
                "strict_rlimits": sys.platform.startswith("linux"),
                "uid": uid,
                "nnp": self._bwrap is None and "no-new-privileges" in self.isolation.layers,
                "path": path,
                "finalize": limits.finalize,
            }
        )

    def _basic_argv(
        self, token_fd: int, limits: Limits, uid: int | None, workdir: str, path: str
    ) -> tuple[list[str], dict[str, str]]:
        config = self._launcher_config(token_fd, limits, uid, path)
        return [self.python, "-S", "-s", "-c", _LAUNCHER, config], self._environment(workdir)

    def _bwrap_argv(
        self, token_fd: int, limits: Limits, uid: int | None, code_fd: int, info_fd: int
    ) -> tuple[list[str], dict[str, str]]:
        assert self._bwrap is not None
        path = f"{_WORKDIR}/solution.py"
        env = self._environment(_WORKDIR)
        argv = [self._bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
        argv += ["--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
        if "user-namespace" in self.isolation.layers:
            argv += ["--unshare-user"]
        else:
            # Root: the launcher needs these two to switch to the per-run uid; setuid then drops them.
            argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        argv += ["--clearenv"]
        for name, value in env.items():
            argv += ["--setenv", name, value]
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):  # merged /usr: keep the symlink, not a second mount
                argv += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                argv += ["--ro-bind", top, top]
        for etc in _ETC_FILES:
            argv += ["--ro-bind-try", etc, etc]
        made: set[str] = set()
        for directory in _python_dirs(self.python):
            # bwrap makes missing parents 0700, which the per-run uid could not cross (/root/.pyenv/...).
            parts = directory.strip("/").split("/")
            for depth in range(1, len(parts)):
                parent = "/" + "/".join(parts[:depth])
                if parent not in made:
                    made.add(parent)
                    argv += ["--perms", "0755", "--dir", parent]
            argv += ["--ro-bind", directory, directory]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        # Bind mounts and tmpfs are cheap (no copying); the sizes cap what the code can write in total.
        argv += ["--perms", "1777", "--size", str(limits.disk_bytes), "--tmpfs", "/tmp"]
        argv += ["--perms", "1777", "--size", str(limits.disk_bytes), "--tmpfs", _WORKDIR]
        argv += ["--perms", "0444", "--file", str(code_fd), path, "--chdir", _WORKDIR]
        argv += ["--info-fd", str(info_fd), "--"]
        argv += [self.python, "-S", "-s", "-c", _LAUNCHER, self._launcher_config(token_fd, limits, uid, path)]
        return argv, {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


# Runs in the fresh interpreter (-S -s, our allow-listed environment) inside the sandbox, then runs the code
# in the same process: one interpreter start per run, not two (the start is most of a short run's cost).
# Order matters: limits first (they bound the compile too), then the uid switch (it needs CAP_SETUID, lost
# right after), then compile, then the code. The token is read into one mutable buffer, written without
# copies (writev) and zeroed before the code runs, so the code cannot find it in memory; the supervisor also
# trusts no token line that comes after "ready".
_LAUNCHER = r"""
import os, sys
c = eval(sys.argv[1], {"__builtins__": {}})  # our own repr() of literals; json would cost 14 ms of imports
token = bytearray(32)
os.readv(c["token_fd"], [token])
os.close(c["token_fd"])
def say(word, text=""):
    os.writev(2, [token, (" %s %s\n" % (word, text.replace("\n", " "))).encode()])
try:
    import resource
    for name, soft, hard in c["rlimits"]:
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            if c["strict_rlimits"]:
                raise
    if c["nnp"]:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if c["uid"] is not None:
        uid = c["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    with open(c["path"], "rb") as handle:
        source = handle.read()
except BaseException as error:
    say("sandbox_error", repr(error))
    os._exit(70)
say("start")
try:
    code = compile(source, c["path"], "exec", dont_inherit=True)
except BaseException as error:
    say("compile_error")
    import traceback
    sys.stderr.write("".join(traceback.format_exception_only(type(error), error)))
    sys.stderr.flush()
    os._exit(1)
try:
    # What `python -s solution.py` gives a script, bar .pth files: exit() and quit(), help(), the base
    # interpreter's site-packages on sys.path (the script's folder is not: PYTHONSAFEPATH), a fresh
    # __main__, and sys.argv / sys.orig_argv naming the script.
    import builtins, site, types
    site.setquit()
    site.sethelper()
    sys.path.extend(p for p in site.getsitepackages() if p not in sys.path)
    main = types.ModuleType("__main__")
    main.__file__ = c["path"]
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = [c["path"]]
    sys.orig_argv = [sys.executable, "-S", "-s", c["path"]]
    def hook(kind, value, tb, shown=sys.__excepthook__):
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next  # this launcher's frame: not the code's
        shown(kind, value.with_traceback(tb), tb)  # the display reads __traceback__
    sys.excepthook = hook
except BaseException as error:
    say("sandbox_error", "setup: " + repr(error))
    os._exit(70)
say("ready")
token[:] = bytes(len(token))
os.closerange(3, 65536)
finalize = c["finalize"]
del c, source, token, say, hook, handle, types
exec(code, main.__dict__)
if not finalize:
    # The code ended normally: do what the interpreter's exit does first (join threads, run atexit
    # handlers, flush stdio), then skip its teardown of every module (7 ms once typing is imported).
    import atexit
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    atexit._run_exitfuncs()
    status = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120  # what Python exits with when flushing stdio fails at exit
    os._exit(status)
"""


class Prefetched:
    """A sandbox whose answers to some runs are known already (run together beforehand by `run_all`): a
    scorer handed this one finds them, and any other run is passed through to the real sandbox. The same
    program on the same input, asked twice (two models that wrote the same code), is run once."""

    def __init__(self, sandbox: Sandbox, results: dict[tuple[str, str, Limits], RunResult]) -> None:
        self.sandbox = sandbox
        self.isolation = sandbox.isolation
        self.results = results

    def run(self, code: str, stdin: str, limits: Limits) -> RunResult:
        found = self.results.get((code, stdin, limits))
        return found if found is not None else self.sandbox.run(code, stdin, limits)


class _Capture:
    """One output stream, read as it comes and kept up to a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.overflow = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.overflow = True
        self.data += chunk[: max(room, 0)]


class _Supervisor:
    """Watches one run: pipes, exit, deadlines; then kills and reaps everything the run started."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        token: str,
        limits: Limits,
        info_fd: int,
        sweep_uid: int | None,
        *,
        bwrap: bool,
    ) -> None:
        self.process = process
        self.bwrap = bwrap
        self.token = token.encode()
        self.limits = limits
        self.info_fd = info_fd
        self.info = bytearray()
        self.child_pid: int | None = None  # bwrap's init in the new pid namespace, as the host sees it
        self.uid = sweep_uid  # every process of this uid is killed after the run
        assert process.stdout is not None and process.stderr is not None
        self.stdout, self.stderr = process.stdout, process.stderr
        self.out = _Capture(limits.output_bytes)
        # Leave room for the launcher's token lines, which are not the code's output.
        self.err = _Capture(limits.output_bytes + 4096)
        self.killed = False

    def watch(self) -> RunResult:
        selector = selectors.DefaultSelector()
        streams: dict[int, tuple[IO[bytes], _Capture]] = {
            self.stdout.fileno(): (self.stdout, self.out),
            self.stderr.fileno(): (self.stderr, self.err),
        }
        for fd in streams:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        if self.info_fd >= 0:
            selector.register(self.info_fd, selectors.EVENT_READ)
        if self.info_fd >= 0:
            os.set_blocking(self.info_fd, False)
        # The exit is noticed without reaping (pidfd, or waitid WNOWAIT), so our pid stays ours until
        # kill_all has signalled its process group: a reaped pid could be reused by a stranger.
        pidfd = _pidfd(self.process.pid)
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ)
        code_started: float | None = None
        started = time.monotonic()
        deadline = started + _STARTUP_BUDGET
        timed_out = exited = False
        ended = started
        try:
            while not exited:
                now = time.monotonic()
                if now >= deadline:
                    timed_out, ended = True, now
                    break
                wait = deadline - now if pidfd is not None else min(deadline - now, 0.01)
                for key, _ in selector.select(wait):
                    fd = int(key.fd)
                    if fd == pidfd:
                        exited = True
                    elif fd == self.info_fd:
                        self._read_info(selector)
                    else:
                        self._read(fd, streams[fd][1], selector)
                if pidfd is None and _exited(self.process):
                    exited = True
                if code_started is None and self.token + b" start" in self.err.data:
                    code_started = time.monotonic()
                    deadline = code_started + self.limits.wall_seconds
                if exited:
                    ended = time.monotonic()
                if self.out.overflow or self.err.overflow:
                    ended = time.monotonic()
                    break
            self.kill_all()
            self._drain(streams, selector)
        finally:
            selector.close()
            if pidfd is not None:
                os.close(pidfd)
        return self._result(code_started, started, ended, timed_out and code_started is not None)

    def _read(self, fd: int, capture: _Capture, selector: selectors.BaseSelector) -> None:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        if chunk:
            capture.add(chunk)
        else:
            selector.unregister(fd)

    def _read_info(self, selector: selectors.BaseSelector | None = None) -> None:
        # bwrap writes {"child-pid": N, ...} before the code starts; nothing later is trusted or read.
        try:
            chunk = os.read(self.info_fd, 4096)
        except (BlockingIOError, OSError):
            return
        self.info += chunk
        with contextlib.suppress(ValueError, KeyError, TypeError):
            self.child_pid = int(json.loads(self.info.decode())["child-pid"])
        if selector is not None and (not chunk or self.child_pid is not None):
            selector.unregister(self.info_fd)

    def _drain(
        self, streams: dict[int, tuple[IO[bytes], _Capture]], selector: selectors.BaseSelector
    ) -> None:
        # Every writer is dead now (or, in basic mode without reap-all, escaped): read what the pipes hold.
        until = time.monotonic() + _DRAIN_GRACE
        while any(fd in streams for fd in selector.get_map()) and time.monotonic() < until:
            for key, _ in selector.select(until - time.monotonic()):
                fd = int(key.fd)
                if fd in streams:
                    self._read(fd, streams[fd][1], selector)

    def kill_all(self) -> None:
        """Kill every process of the run and reap the one we started; idempotent."""
        if self.killed:
            return
        self.killed = True
        process = self.process
        if self.bwrap and self.child_pid is None and self.info_fd >= 0:
            self._read_info()
        if self.child_pid is not None:
            # Killing the namespace's init kills every process in it; bwrap reaps init, then exits. So
            # once bwrap has exited, nothing of the run is left, daemons that called setsid included.
            _signal_child_of(self.child_pid, process.pid)
        else:
            # Not reaped yet (see watch), so this group id cannot belong to anyone else.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if self.uid is not None:
            _kill_uid(self.uid)  # what called setsid or setpgid and left the group

    def _result(self, code_started: float | None, started: float, ended: float, timed_out: bool) -> RunResult:
        stdout = bytes(self.out.data)
        stderr, words = _split_token_lines(bytes(self.err.data), self.token)
        elapsed = max(0.0, ended - (code_started if code_started is not None else started))
        returncode = self.process.returncode
        exit_code: int | None = returncode
        signum: int | None = None
        if returncode is not None and returncode < 0:
            exit_code, signum = None, -returncode
        elif self.bwrap and returncode is not None and 128 < returncode <= 128 + 64:
            # bwrap reports a child killed by signal N as exit status 128 + N (so does a shell).
            exit_code, signum = None, returncode - 128
        truncated = self.out.overflow or self.err.overflow
        if timed_out or truncated:
            exit_code, signum = None, signal.SIGKILL
        text_err = stderr.decode("utf-8", "replace")
        common: dict[str, Any] = {
            "stdout": stdout.decode("utf-8", "replace"),
            "stderr": text_err,
            "elapsed": elapsed,
        }
        if "sandbox_error" in words or "start" not in words:
            if code_started is None and ended - started >= _STARTUP_BUDGET:
                reason = f"the sandbox did not start the code within {_STARTUP_BUDGET:.0f} s"
            else:
                detail = words.get("sandbox_error") or _excerpt_line(text_err) or f"exit status {returncode}"
                reason = f"the sandbox failed before the code ran: {detail}"
            return RunResult(exit_code=exit_code, signal=signum, sandbox_error=reason, **common)
        if "compile_error" in words or ("ready" not in words and not timed_out):
            # Also a compile that the limits killed (SIGXCPU, SIGKILL): the code's fault, not the harness's.
            return RunResult(exit_code=exit_code, signal=signum, compile_error=True, **common)
        memory = not timed_out and not truncated and exit_code != 0 and _MEMORY_ERROR.search(text_err[-4096:])
        return RunResult(
            exit_code=exit_code,
            signal=signum,
            timed_out=timed_out,
            output_truncated=truncated and not timed_out,
            memory_exceeded=bool(memory),
            cpu_limited=signum == signal.SIGXCPU,
            **common,
        )


_MEMORY_ERROR = re.compile(r"^MemoryError\b", re.MULTILINE)


def _split_token_lines(stderr: bytes, token: bytes) -> tuple[bytes, dict[str, str]]:
    """Remove the launcher's "<token> <word> <text>" lines from stderr; return the rest and {word: text}.

    Lines after "ready" are the code's, whatever they hold: the code runs in the launcher's process, and a
    code that found the token anyway still could not pass its failure off as the harness's."""
    words: dict[str, str] = {}
    kept: list[bytes] = []
    for line in stderr.split(b"\n"):
        if "ready" not in words and line.startswith(token + b" "):
            word, _, text = line[len(token) + 1 :].decode("utf-8", "replace").partition(" ")
            words[word] = text.strip()
        else:
            kept.append(line)
    return b"\n".join(kept), words


def _excerpt_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _harness_failure(reason: str) -> RunResult:
    return RunResult(exit_code=None, signal=None, stdout="", stderr="", elapsed=0.0, sandbox_error=reason)


def _token_pipe(token: str) -> int:
    """The read end of a pipe that holds `token` and nothing more (the write end is closed)."""
    read, write = os.pipe()
    try:
        os.write(write, token.encode() + b"\n")  # far below the pipe buffer: never blocks
    finally:
        os.close(write)
    return read


@contextlib.contextmanager
def _read_only_file(data: bytes) -> Iterator[IO[bytes]]:
    """An unlinked temporary file holding `data`, opened read-only (the code cannot write through it)."""
    fd, path = tempfile.mkstemp(prefix="llmeval-sandbox-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        reader = open(path, "rb")
    finally:
        os.unlink(path)
    with reader:
        yield reader


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _remove_tree(path: str) -> None:
    def make_writable(function: Any, failed: str, _: Any) -> None:
        # The code may leave read-only directories behind; as their owner (or root) we can open them again.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(failed), 0o700)
            os.chmod(failed, 0o700)
            function(failed)

    shutil.rmtree(path, onerror=make_writable)


def _pidfd(pid: int) -> int | None:
    """A pidfd (readable once `pid` exits, without reaping it), or None where the platform has none."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether our child has exited, without reaping it where the platform allows (no pidfd here)."""
    if not hasattr(os, "waitid"):
        # macOS (CPython leaves waitid out there): poll() reaps, so the group id is ours a moment less.
        return process.poll() is not None
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _signal_child_of(pid: int, parent: int) -> None:
    """SIGKILL `pid` if it is still the child of `parent` (so a reused pid is never hit)."""
    # With a pidfd, the process checked is the process signalled; without one (kernels before 5.3) a
    # window of microseconds remains between the check and the kill.
    pidfd = _pidfd(pid)
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            # "pid (comm) state ppid ...": comm may hold spaces or parentheses, so split after the last ')'.
            ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        if ppid == parent:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _uid_processes(uid: int) -> list[int]:
    """Pids of live (not zombie) processes whose real, effective or saved uid is `uid` (Linux /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        state = re.search(rb"^State:\s+(\S)", status, re.MULTILINE)
        uids = re.search(rb"^Uid:\s+(\d+)\s+(\d+)\s+(\d+)", status, re.MULTILINE)
        if uids and str(uid).encode() in uids.groups() and not (state and state.group(1) in (b"Z", b"X")):
            found.append(int(name))
    return found


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of the per-run `uid` until none is left (RLIMIT_NPROC bounds how many)."""
    if not os.path.isdir("/proc"):
        return
    for _ in range(200):
        pids = _uid_processes(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def _python_dirs(python: str) -> list[str]:
    """Host directories the interpreter needs that /usr does not cover: its prefix, mounted read-only."""
    candidates = {os.path.dirname(os.path.dirname(python))}
    if python == _python():
        candidates |= {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    dirs: list[str] = []
    for path in sorted(candidates):
        if path in ("/", "") or path == "/usr" or path.startswith("/usr/"):
            continue
        if any(path.startswith(kept.rstrip("/") + "/") for kept in dirs):
            continue
        dirs.append(path)
    return dirs


def _python() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _isolation(level: str, layers: list[str], reason: str) -> Isolation:
    active = tuple(layer for layer in (*LAYERS, *_EXTRA_LAYERS) if layer in layers)
    missing = tuple(layer for layer in LAYERS if layer not in layers)
    return Isolation(level=level, layers=active, missing=missing, reason=reason)


_BASE_LAYERS = [
    "fresh-interpreter",
    "session",
    "rlimits",
    "wall-timeout",
    "output-cap",
    "clean-env",
    "temp-workdir",
]
_UID_LAYERS = ["unprivileged-uid", "process-limit", "reap-all"]
_NAMESPACE_LAYERS = [
    "no-new-privileges",
    "reap-all",
    "pid-namespace",
    "network-namespace",
    "filesystem",
    "ipc-namespace",
    "uts-namespace",
]


def _probe(isolation: Isolation, python: str | None = None) -> str:
    """Run a trivial program through `isolation`; return "" when it worked, else what went wrong."""
    try:
        # The code runs in the launcher's interpreter, so a per-run uid that cannot enter the interpreter's
        # folder would still run it; but the code's own `sys.executable` (subprocess, multiprocessing's
        # spawn) would not start. Such a uid is not offered.
        probe = (
            "import os, sys\n"
            "ok = os.access(sys.executable, os.X_OK)\n"
            "print('ok' if ok else 'the per-run uid cannot run ' + sys.executable)"
        )
        result = Sandbox(isolation, python=python).run(probe, "", Limits(wall_seconds=10.0))
    except (OSError, SandboxUnavailable, ValueError) as error:
        return str(error)
    if result.sandbox_error:
        return result.sandbox_error
    if result.exit_code == 0 and result.stdout.strip() not in ("", "ok"):
        return result.stdout.strip()
    if result.exit_code != 0 or result.stdout.strip() != "ok":
        return f"the probe program failed (exit {result.exit_code}): {_excerpt_line(result.stderr)}"
    return ""


@functools.cache
def _strict() -> tuple[Isolation | None, str]:
    """The strict isolation this machine gives, or None and the reason it gives none."""
    if not sys.platform.startswith("linux"):
        return None, f"strict isolation needs Linux namespaces (bubblewrap); this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return None, "bubblewrap is not installed (bwrap not on PATH): apt-get install bubblewrap"
    if _is_root():
        candidates = [
            (_UID_LAYERS, ""),
            (["reap-all"], "unprivileged-uid: {why}; only the timeout bounds a fork bomb"),
        ]
    else:
        # A non-root user: bwrap makes a user namespace, and RLIMIT_NPROC set inside it counts only that
        # namespace's processes, so it contains a fork bomb per run.
        candidates = [
            (
                ["user-namespace", "process-limit"],
                "unprivileged-uid: not root, the code keeps your uid (in a user namespace)",
            )
        ]
    why = ""
    for extra, note in candidates:
        isolation = _isolation("strict", _BASE_LAYERS + _NAMESPACE_LAYERS + extra, note.format(why=why))
        why = _probe(isolation)
        if not why:
            return isolation, ""
    return None, f"bubblewrap cannot create the sandbox here: {why}"


@functools.cache
def _basic(strict_reason: str) -> Isolation:
    """The basic isolation this machine gives (process-level), proven by a probe."""
    layers = list(_BASE_LAYERS)
    if sys.platform.startswith("linux"):
        layers.append("no-new-privileges")
    notes = [strict_reason]
    if _is_root() and sys.platform.startswith("linux"):
        with_uid = _isolation("basic", layers + _UID_LAYERS, "")
        why = _probe(with_uid)
        if not why:
            return _isolation("basic", layers + _UID_LAYERS, "; ".join(notes))
        notes.append(
            f"unprivileged-uid: a per-run uid cannot run {_python()} ({why}), so the code runs as root and "
            "only the timeout bounds a fork bomb"
        )
    isolation = _isolation("basic", layers, "; ".join(note for note in notes if note))
    why = _probe(isolation)
    if why:
        raise SandboxUnavailable(f"even basic isolation fails here: {why}")
    return isolation
