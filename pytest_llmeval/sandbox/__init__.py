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

The package: this module holds the levels, each proven by a probe (`detect`), and `Sandbox`, which builds a
run's isolated command; `runs` the `Limits` a run is given and the `RunResult` facts it gives back;
`launcher` the script that runs inside the sandbox; `supervisor` the host side that watches a run and
reaps everything it started.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

from pytest_llmeval.sandbox.launcher import _LAUNCHER
from pytest_llmeval.sandbox.runs import Limits, RunResult
from pytest_llmeval.sandbox.supervisor import _excerpt_line, _kill_uid, _Supervisor

__all__ = [
    "LAYERS",
    "MAX_JOBS",
    "MODES",
    "Isolation",
    "Prefetched",
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
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")


class SandboxUnavailable(Exception):
    """Strict isolation was asked for and this machine cannot provide it; the message says why."""


class SandboxError(RuntimeError):
    """The harness failed (not the code it ran): never to be counted against the model."""


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
