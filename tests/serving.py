"""Test helpers for endpoint models: full model folders, and real OpenAI-compatible servers over them.

The server is `transformers serve` (transformers >= 5.24, the `[serving]` extra), run on 127.0.0.1 as a
subprocess, one process per folder, each pinned to its folder (the FORCE_MODEL argument). Facts this
module relies on, read from transformers/cli/serving/ and checked against the running server:

- Pinned, the server loads the weights *before* uvicorn binds its port, so its first answer at all
  means the model is in memory: the startup wait below covers loading, and no request pays for it.
- A pinned server answers only for the exact string it was given (anything else is a 400 "Server is
  pinned to ..."), so a request can never load another model behind the test's back; hence the model id
  is `str(folder)` exactly as passed on the command line. `response.model` echoes that string,
  `system_fingerprint` is absent (None) in non-streaming replies and "" in stream chunks.
- Unpinned (no FORCE_MODEL), one process does serve several folders, each loaded on its first request
  with `model` = the local path; but then the first request pays the load, idle models are unloaded after
  --model-timeout, and a misspelt path is taken for a Hub repo. One pinned process per folder avoids all
  three for ~6 s of startup each, and the processes start in parallel.
- HF_HUB_OFFLINE=1: a folder that does not load must fail here, never wait on the network.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

# Loading a 135M float32 model takes ~6 s on 2 cores; a busy machine (other tests, xdist) may be far slower.
STARTUP_TIMEOUT_S = 180.0
# SIGTERM lets uvicorn shut down cleanly; a server that ignores it that long is killed.
STOP_TIMEOUT_S = 10.0
# The flags every test server gets; `extra_args` come after them, and click keeps the last value of a
# repeated option, so a caller can still override e.g. the device.
BASE_ARGS: tuple[str, ...] = ("--device", "cpu", "--dtype", "float32", "--log-level", "warning")


class ServerStartError(RuntimeError):
    """A test server did not come up; the message carries its command line and the tail of its log."""


@dataclass(frozen=True)
class Endpoint:
    """One running server: where to send requests for `folder`, and what to call the model."""

    folder: Path
    base_url: str  # http://127.0.0.1:PORT/v1, what openai.OpenAI(base_url=...) takes
    model: str  # the `model` field of every request: the pinned folder, spelled as on the command line
    log: Path  # the server's stdout and stderr


@dataclass(frozen=True)
class Served:
    """The servers started by `serve`, one per folder, in the order the folders were given."""

    endpoints: tuple[Endpoint, ...]

    def __getitem__(self, folder: Path) -> Endpoint:
        for endpoint in self.endpoints:
            if endpoint.folder == Path(folder):
                return endpoint
        raise KeyError(f"{folder} is not served; served: {[str(e.folder) for e in self.endpoints]}")

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self.endpoints)

    @property
    def only(self) -> Endpoint:
        """The endpoint of a single-folder `serve`."""
        if len(self.endpoints) != 1:
            raise ValueError(f"{len(self.endpoints)} endpoints are served; index by folder instead")
        return self.endpoints[0]


def merge_adapter(base_dir: Path, adapter_dir: Path, out_dir: Path) -> Path:
    """Merge a LoRA adapter into its base (peft's merge_and_unload) and save a full float32 model folder."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, local_files_only=True)
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(out_dir)
    # The tokenizer carries the chat template: without it a server would not template the prompts.
    AutoTokenizer.from_pretrained(base_dir, local_files_only=True).save_pretrained(out_dir)
    return out_dir


def serve_command(folder: Path | None, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    """The command line that serves `folder`, pinned, on 127.0.0.1:`port` (None: unpinned)."""
    # The console script of the running interpreter's environment, not whichever one PATH finds first.
    script = shutil.which("transformers", path=str(Path(sys.executable).parent))
    if script is None:
        raise ServerStartError(
            f"no `transformers` script next to {sys.executable}: install transformers[serving]"
        )
    pinned = [] if folder is None else [str(folder)]
    return [script, "serve", *pinned, "--host", "127.0.0.1", "--port", str(port), *BASE_ARGS, *extra_args]


@contextmanager
def serve(
    folders: Sequence[Path] | Path,
    *,
    extra_args: Sequence[str] = (),
    startup_timeout: float = STARTUP_TIMEOUT_S,
) -> Iterator[Served]:
    """Serve each folder from its own `transformers serve` process; stop them all on exit."""
    folders = [folders] if isinstance(folders, Path) else [Path(f) for f in folders]
    for folder in folders:
        # Not a folder: the server would take the string for a Hub repo id and fail on the offline Hub.
        if not (folder / "config.json").is_file():
            raise ServerStartError(f"{folder} is not a model folder (no config.json)")
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llmeval-serve-")))
        # Start every process before waiting on any: the loads overlap.
        starting = [
            _start(folder, logs / f"server-{i}.log", extra_args, stack) for i, folder in enumerate(folders)
        ]
        endpoints = [_wait_until_up(s, startup_timeout, stack, extra_args) for s in starting]
        yield Served(tuple(endpoints))


@dataclass(frozen=True)
class Unpinned:
    """One server for several folders: a request's `model` is the folder's path, as given."""

    base_url: str
    models: tuple[str, ...]
    log: Path


@contextmanager
def serve_unpinned(
    folders: Sequence[Path], *, extra_args: Sequence[str] = (), startup_timeout: float = STARTUP_TIMEOUT_S
) -> Iterator[Unpinned]:
    """One unpinned `transformers serve` for every folder, as one vLLM serves a base and its adapters.

    Each folder is loaded by a one-token request before the server is handed out (the first request of a
    model pays its load), and kept loaded for the test's life (--model-timeout). The folders are checked
    first: unpinned, a path that is no folder would be taken for a Hub id.
    """
    for folder in folders:
        if not (folder / "config.json").is_file():
            raise ServerStartError(f"{folder} is not a model folder (no config.json)")
    with ExitStack() as stack:
        log = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llmeval-serve-"))) / "server.log"
        starting = _start(None, log, ["--model-timeout", "86400", *extra_args], stack)
        deadline = time.monotonic() + startup_timeout
        while not _answers(starting.port):
            if starting.process.poll() is not None or time.monotonic() > deadline:
                raise ServerStartError(_failure(starting, "did not come up"))
            time.sleep(0.2)
        base_url = f"http://127.0.0.1:{starting.port}/v1"
        for folder in folders:
            body = json.dumps(
                {"model": str(folder), "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
            ).encode()
            request = urllib.request.Request(
                f"{base_url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=startup_timeout):
                    pass
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                raise ServerStartError(_failure(starting, f"did not load {folder} ({exc})")) from None
        yield Unpinned(base_url, tuple(str(f) for f in folders), log)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@dataclass
class _Starting:
    folder: Path | None
    log: Path
    port: int
    command: list[str]
    process: subprocess.Popen[bytes]
    attempts: int = 1


def _free_port() -> int:
    # Bound then released: another process could take it before the server does; _wait_until_up retries
    # when the server says the address is in use.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start(
    folder: Path | None, log: Path, extra_args: Sequence[str], stack: ExitStack, attempts: int = 1
) -> _Starting:
    port = _free_port()
    command = serve_command(folder, port, extra_args)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    # A file, not a pipe: uvicorn logs every request, and an unread pipe would block the server when full.
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    stack.callback(_stop, process)
    return _Starting(folder, log, port, command, process, attempts)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_until_up(
    starting: _Starting, timeout: float, stack: ExitStack, extra_args: Sequence[str]
) -> Endpoint:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = starting.process.poll()
        if code is not None:
            tail = _tail(starting.log)
            if "address already in use" in tail.lower() and starting.attempts < 3:
                # Lost the race for the port to another process: try again on a fresh one.
                starting = _start(starting.folder, starting.log, extra_args, stack, starting.attempts + 1)
                continue
            raise ServerStartError(_failure(starting, f"exited with status {code} before answering"))
        # /v1/models rather than /health: a 200 from a port some other test's server took in the meantime
        # would also say "ok", only our own server lists our folder.
        if str(starting.folder) in _listed_models(starting.port):
            return Endpoint(
                folder=starting.folder,
                base_url=f"http://127.0.0.1:{starting.port}/v1",
                model=str(starting.folder),
                log=starting.log,
            )
        time.sleep(0.2)
    url = f"http://127.0.0.1:{starting.port}/v1/models"
    raise ServerStartError(_failure(starting, f"did not list {starting.folder} at {url} in {timeout:.0f} s"))


def _listed_models(port: int) -> list[str]:
    """The model ids a server on `port` lists; none while nothing (or something else) answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as response:
            listing = json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return []  # not listening yet: the model is still loading
    data = listing.get("data") if isinstance(listing, dict) else None
    return [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def _failure(starting: _Starting, what: str) -> str:
    return (
        f"transformers serve {what}\ncommand: {' '.join(starting.command)}\nlog tail:\n{_tail(starting.log)}"
    )


def _tail(log: Path, chars: int = 4000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"(no log: {exc})"
