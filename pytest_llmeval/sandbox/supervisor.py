"""Watching one run from the host: its pipes and deadlines, the launcher's token lines, the `RunResult`
made of them, and every process the run started killed and reaped (those of its per-run uid included).

The launcher (launcher.py) writes "<token> <word> <text>" lines to stderr; no line after "ready" is
trusted. Nothing here raises for what the code does: a run always ends in a `RunResult`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import time
from typing import IO, Any

from pytest_llmeval.sandbox.runs import Limits, RunResult

_STARTUP_BUDGET = 15.0  # seconds for the sandbox to reach the code; a loaded CI runner can be slow
_DRAIN_GRACE = 0.5  # seconds to read what is left in the pipes once every writer should be dead


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
