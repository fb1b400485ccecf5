"""Atomic writes interrupted for real: after part of the new text is on disk, the old file is still there,
byte for byte, and no temporary file is left beside it.

A fault is injected where a write can fail in life: in the middle of the file object's write (after half the
text reached the disk: ENOSPC, or Ctrl-C), at the final rename, and, without any patching, by the kernel
itself (RLIMIT_FSIZE makes write(2) fail with EFBIG after a partial write, as a full disk does). The
positive control shows the same faults do damage a plain, non-atomic write, so these tests can fail.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval import inputs, results_file

OLD = '{"old": "the previous results.json", "größe": "日本語"}\n'.encode()
NEW = "".join(f'{{"row": {i}, "text": "Größe 日本語 {i}"}}\n' for i in range(2000))  # ~70 kB

Writer = Callable[[Path, str], None]

WRITERS: dict[str, Writer] = {
    "results_file.write_text_atomic": results_file.write_text_atomic,
    "results_file.write_atomic": lambda path, text: results_file.write_atomic(
        path, {"rows": text.splitlines()}
    ),
    "inputs.write_bytes_atomic": lambda path, text: inputs.write_bytes_atomic(path, text.encode()),
}

FAULTS: dict[str, BaseException] = {
    "ENOSPC": OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    "KeyboardInterrupt": KeyboardInterrupt(),
}


class _HalfThenFail:
    """A file opened for writing whose first write puts half the data on disk, then raises `error`."""

    def __init__(self, handle: Any, error: BaseException, struck: list[int]) -> None:
        self._handle = handle
        self._error = error
        self._struck = struck

    def write(self, data: Any) -> int:
        self._handle.write(data[: len(data) // 2])
        self._handle.flush()
        # What reached the file when the fault struck: proof that it struck after partial output.
        self._struck.append(os.fstat(self._handle.fileno()).st_size)
        raise self._error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> _HalfThenFail:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._handle.close()


@contextlib.contextmanager
def _writes_fail_halfway(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> Iterator[list[int]]:
    """Every file opened for writing (os.fdopen, Path.open, open) fails halfway through its first write.

    io.open is what os.fdopen and Path.write_text call, and builtins.open is the same function under the
    name a plain `open` uses: patching both reaches any way the code under test opens its file.
    """
    real_open = io.open
    struck: list[int] = []

    def faulty_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if any(flag in mode for flag in "wax+"):
            return _HalfThenFail(handle, error, struck)
        return handle

    with monkeypatch.context() as patch:
        patch.setattr(io, "open", faulty_open)
        patch.setattr(builtins, "open", faulty_open)
        yield struck


def _old_file(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "results.json"
    path.write_bytes(OLD)
    return path


def _assert_untouched(path: Path) -> None:
    assert path.read_bytes() == OLD, "the old file did not survive the failed write"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "a temporary file was left behind"


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
@pytest.mark.parametrize("writer", WRITERS, ids=list(WRITERS))
def test_a_write_interrupted_after_partial_output_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str, fault: str
) -> None:
    path = _old_file(tmp_path)
    error = FAULTS[fault]
    with _writes_fail_halfway(monkeypatch, error) as struck, pytest.raises(type(error)):
        WRITERS[writer](path, NEW)
    assert len(struck) == 1 and struck[0] > 1000, f"the fault struck after {struck} bytes, not halfway"
    _assert_untouched(path)


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
@pytest.mark.parametrize("writer", WRITERS, ids=list(WRITERS))
def test_a_failed_rename_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str, fault: str
) -> None:
    """The new text is complete in the temporary file, and the rename over the old one fails."""
    path = _old_file(tmp_path)
    error = FAULTS[fault]
    renamed: list[bytes] = []

    def failing_rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        renamed.append(Path(src).read_bytes())
        raise error

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", failing_rename)
        patch.setattr(os, "rename", failing_rename)
        with pytest.raises(type(error)):
            WRITERS[writer](path, NEW)
    assert len(renamed) == 1 and len(renamed[0]) > len(OLD), "the write never reached its rename"
    _assert_untouched(path)


@pytest.mark.parametrize("writer", WRITERS, ids=list(WRITERS))
def test_the_kernel_stops_the_write_halfway(tmp_path: Path, writer: str) -> None:
    """No patching: RLIMIT_FSIZE makes write(2) fail (EFBIG) once 16 KiB are written, as a full disk does."""
    path = _old_file(tmp_path)
    assert _write_under_a_file_size_limit(path, writer) == errno.EFBIG
    _assert_untouched(path)


def test_the_faults_do_damage_a_plain_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The positive control: under the same faults, a plain write leaves part of a file where the old was."""
    path = _old_file(tmp_path)
    with _writes_fail_halfway(monkeypatch, FAULTS["ENOSPC"]), pytest.raises(OSError):
        plain_write(path, NEW)
    damaged = path.read_bytes()
    assert damaged != OLD and 0 < len(damaged) < len(NEW.encode())
    path = _old_file(tmp_path / "kernel")
    assert _write_under_a_file_size_limit(path, "plain") == errno.EFBIG
    assert path.read_bytes() == NEW.encode()[:_FILE_SIZE_LIMIT]


def plain_write(path: Path, text: str) -> None:
    """What the atomic writers must not be: the old file truncated first, then written over."""
    path.write_text(text, encoding="utf-8")


_FILE_SIZE_LIMIT = 16 * 1024


def _write_under_a_file_size_limit(path: Path, writer: str) -> int | None:
    """Run WRITERS[writer] (or plain_write) on NEW in a child whose RLIMIT_FSIZE is 16 KiB; its errno."""
    child = textwrap.dedent(
        f"""
        import resource, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_atomic_write import NEW, WRITERS, plain_write

        write = plain_write if {writer!r} == "plain" else WRITERS[{writer!r}]
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the process dies instead of seeing EFBIG
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({_FILE_SIZE_LIMIT}, hard))
        try:
            write(Path({str(path)!r}), NEW)
        except OSError as error:
            print(error.errno)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, cwd=path.parent
    )
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout) if proc.stdout.strip() else None


@pytest.mark.parametrize("writer", WRITERS, ids=list(WRITERS))
def test_the_temporary_file_is_made_beside_the_target(
    tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.replace is atomic only within one filesystem: a temporary file in $TMPDIR (another mount, often
    tmpfs) would make the rename fail with EXDEV, or a copy fall back to a plain write. So the file must be
    made in the target's own folder, whatever TMPDIR says."""
    elsewhere = tmp_path / "tmpdir"
    elsewhere.mkdir()
    monkeypatch.setenv("TMPDIR", str(elsewhere))
    monkeypatch.setattr("tempfile.tempdir", None)  # tempfile caches the folder it read from TMPDIR
    renamed: list[tuple[Path, Path]] = []
    real_replace = os.replace

    def recording_replace(src: Any, dst: Any) -> None:
        renamed.append((Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", recording_replace)
    path = _old_file(tmp_path / "out")
    WRITERS[writer](path, NEW)
    assert [(src.parent, dst) for src, dst in renamed] == [(path.parent, path)]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name] and not list(elsewhere.iterdir())


def test_a_written_file_keeps_the_mode_of_the_one_it_replaces_else_the_umask(tmp_path: Path) -> None:
    shared = tmp_path / "results.json"
    shared.write_text("{}")
    shared.chmod(0o644)
    results_file.write_text_atomic(shared, "{}\n")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    old = os.umask(0o027)
    try:
        results_file.write_text_atomic(tmp_path / "new.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
