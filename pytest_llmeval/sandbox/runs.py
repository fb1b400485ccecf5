"""What one run is given and what it gives back: `Limits` in, `RunResult` out.

`RunResult` holds facts (how the code ended, what it wrote, which limit stopped it), never a verdict: the
scorer decides what they mean. No pytest and no torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Limits", "RunResult"]


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
