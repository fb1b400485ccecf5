"""Test helpers for the servers people deploy small GGUF models on: llama.cpp's `llama-server` and
llama-cpp-python's server (`python -m llama_cpp.server`), both as `make llama` builds them into .llama/ from
one pinned source, the PyPI sdist of llama-cpp-python (which vendors llama.cpp, its LoRA converter and
gguf-py). Each server runs on 127.0.0.1 as a subprocess, one GGUF (and optionally one LoRA GGUF) per process.

Facts this module relies on, read from the sources in .llama/src and checked against the running servers
(issue 39):

- llama-cpp-python loads the GGUF before it binds the port; llama-server binds first and answers 503 until
  the model is loaded. So the wait below is on our alias appearing in a 200 from GET /v1/models, which also
  rules out some other test's server having taken the port in the meantime.
- Neither server is pinned the way `transformers serve` is: a request for a model id it does not serve is
  answered by its one model anyway, and llama-cpp-python even echoes the requested id as `model` (llama-server
  says its alias). What answered is known from the server started, never from the reply.
- A LoRA is given as a GGUF: `convert_lora` runs llama.cpp's own convert_lora_to_gguf.py on a peft folder,
  with the vendored gguf-py first on PYTHONPATH (the converter and its gguf library come from one commit).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO
from serving import ServerStartError as ServerStartError  # re-exported: the error both modules raise
from serving import _free_port, _stop, _tail

# Pinned in the Makefile too (LLAMA_CPP_PYTHON): `make llama` writes the stamp when everything is built.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_DIR = REPO / ".llama"
STAMP = LLAMA_DIR / f".built-{LLAMA_CPP_PYTHON_VERSION}"
LLAMA_SERVER = LLAMA_DIR / "build/bin/llama-server"
LLAMA_PYTHON = LLAMA_DIR / "venv/bin/python"
LLAMA_CPP = LLAMA_DIR / "src/vendor/llama.cpp"
CONVERT_LORA = LLAMA_CPP / "convert_lora_to_gguf.py"
GGUF_PY = LLAMA_CPP / "gguf-py"
# CI sets it: there a missing build is a broken setup, not a reason to skip.
REQUIRE_ENV = "LLMEVAL_REQUIRE_LLAMA"

# A 135M Q4 model loads in well under a second; the margin is for a machine busy with other tests.
STARTUP_TIMEOUT_S = 120.0
# What uvicorn (llama-cpp-python) and llama-server log when the port was taken between _free_port and bind.
PORT_TAKEN = ("address already in use", "couldn't bind http server socket")
# The converter imports torch and transformers (~10 s on 2 cores) before it writes a few MB.
CONVERT_TIMEOUT_S = 600.0

# One thread for generation and for the prompt. ggml's threads spin at every barrier, so when the cores are
# busy (xdist workers, another server, a compile) a descheduled thread stalls the others: measured on 2 cores
# at load 3.5, the 4 alias and chat tests took 99 s with 2 threads and 5.3 s with 1. A 135M model needs no
# more, and both servers' defaults (every core, or half of them) would spin the same way.
THREADS = "1"


@dataclass(frozen=True)
class LlamaServer:
    """One running server: where to send OpenAI requests, the model id it lists, its log, and what it is."""

    base_url: str  # http://127.0.0.1:PORT/v1, what openai.OpenAI(base_url=...) takes
    model: str  # the alias it serves the GGUF under
    log: Path  # the server's stdout and stderr
    name: str  # "llama-cpp-python 0.3.36" or "llama-server <version> (<commit>)", from the server itself


def built() -> bool:
    """Whether `make llama` has built both servers and the converter's sources into .llama/."""
    return STAMP.is_file() and LLAMA_SERVER.is_file() and LLAMA_PYTHON.is_file() and CONVERT_LORA.is_file()


def need_built() -> None:
    """Skip the calling test when .llama/ is not built; fail it instead where $LLMEVAL_REQUIRE_LLAMA=1."""
    if built():
        return
    message = f"llama-server and llama-cpp-python are not built in {LLAMA_DIR}: run `make llama`"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)")
    pytest.skip(message)


def llama_cpp_python_command(
    gguf: Path, port: int, *, alias: str, lora: Path | None, n_ctx: int
) -> list[str]:
    """The command line of llama-cpp-python's server on 127.0.0.1:`port` (its flags are its settings'
    field names: `python -m llama_cpp.server --help`)."""
    command = [str(LLAMA_PYTHON), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    command += ["--n_threads", THREADS, "--n_threads_batch", THREADS]
    return command + (["--lora_path", str(lora)] if lora is not None else [])


def llama_server_command(gguf: Path, port: int, *, alias: str, lora: Path | None, n_ctx: int) -> list[str]:
    """The command line of llama.cpp's llama-server on 127.0.0.1:`port`."""
    command = [str(LLAMA_SERVER), "-m", str(gguf), "--alias", alias, "--host", "127.0.0.1"]
    command += ["--port", str(port), "-c", str(n_ctx), "--threads", THREADS, "--threads-batch", THREADS]
    # One slot, as llama-cpp-python has: the default (auto) is 4 slots sharing one unified KV cache.
    command += ["--parallel", "1"]
    return command + (["--lora", str(lora)] if lora is not None else [])


@contextmanager
def serve_llama_cpp_python(
    gguf: Path,
    *,
    alias: str = "smol",
    lora: Path | None = None,
    n_ctx: int = 2048,
    startup_timeout: float = STARTUP_TIMEOUT_S,
) -> Iterator[LlamaServer]:
    """Serve `gguf` (with the LoRA GGUF `lora` applied) from llama-cpp-python's server; stop it on exit."""

    def command(port: int) -> list[str]:
        return llama_cpp_python_command(gguf, port, alias=alias, lora=lora, n_ctx=n_ctx)

    with _serve("llama-cpp-python", command, gguf, lora, alias, startup_timeout) as server:
        yield server


@contextmanager
def serve_llama_server(
    gguf: Path,
    *,
    alias: str = "smol",
    lora: Path | None = None,
    n_ctx: int = 2048,
    startup_timeout: float = STARTUP_TIMEOUT_S,
) -> Iterator[LlamaServer]:
    """Serve `gguf` (with the LoRA GGUF `lora` applied) from llama.cpp's llama-server; stop it on exit."""

    def command(port: int) -> list[str]:
        return llama_server_command(gguf, port, alias=alias, lora=lora, n_ctx=n_ctx)

    with _serve("llama-server", command, gguf, lora, alias, startup_timeout) as server:
        yield server


def convert_lora(adapter: Path, base: Path, out: Path) -> Path:
    """Convert the peft LoRA folder `adapter` of the transformers folder `base` into the LoRA GGUF `out`."""
    if not (adapter / "adapter_config.json").is_file():
        raise ValueError(f"{adapter} is not a peft adapter folder (no adapter_config.json)")
    if not (base / "config.json").is_file():
        # Without --base the converter would look the base up on the Hub by the adapter's config.
        raise ValueError(f"{base} is not a model folder (no config.json)")
    # The project's interpreter: it has torch, transformers and safetensors, which the converter imports.
    command = [sys.executable, str(CONVERT_LORA), "--base", str(base), "--outfile", str(out)]
    command += ["--outtype", "f32", str(adapter)]
    # The vendored gguf-py first: the converter must use the gguf library of its own commit, not the
    # venv's (transformers installs one for its GGUF loader).
    pythonpath = os.pathsep.join(p for p in (str(GGUF_PY), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=CONVERT_TIMEOUT_S
    )
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(
            f"convert_lora_to_gguf.py failed (status {done.returncode})\ncommand: {' '.join(command)}\n"
            f"stderr tail:\n{done.stderr[-4000:]}"
        )
    return out


@contextmanager
def _serve(
    kind: str,
    command_for: Callable[[int], list[str]],
    gguf: Path,
    lora: Path | None,
    alias: str,
    startup_timeout: float,
) -> Iterator[LlamaServer]:
    for path in (gguf, lora):
        # Checked here: either server would exit with a loader error deep in its log instead.
        if path is not None and not path.is_file():
            raise ServerStartError(f"{path} is not a file")
    with ExitStack() as stack:
        log = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llmeval-llama-"))) / "server.log"
        for attempt in range(1, 4):
            port = _free_port()
            command = command_for(port)
            with log.open("wb") as out:
                # A file, not a pipe: both servers log every request, and an unread pipe would block them.
                process = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
                )
            stack.callback(_stop, process)
            failure = _wait_until_listed(process, port, alias, startup_timeout)
            if failure is None:
                base_url = f"http://127.0.0.1:{port}/v1"
                yield LlamaServer(base_url, alias, log, _identify(kind, port))
                return
            tail = _tail(log)
            if any(said in tail.lower() for said in PORT_TAKEN) and attempt < 3:
                continue  # lost the race for the port to another process: try again on a fresh one
            raise ServerStartError(f"{kind} {failure}\ncommand: {' '.join(command)}\nlog tail:\n{tail}")


def _wait_until_listed(process: subprocess.Popen[bytes], port: int, alias: str, timeout: float) -> str | None:
    """None once the server on `port` lists `alias`, else why not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            return f"exited with status {code} before answering"
        if alias in _listed_models(port):
            return None
        time.sleep(0.2)
    _stop(process)  # before the log is read: its last lines may say where it hung
    return f"did not list {alias} at http://127.0.0.1:{port}/v1/models in {timeout:.0f} s"


def _listed_models(port: int) -> list[str]:
    listing = _get_json(port, "/v1/models")
    data = listing.get("data") if isinstance(listing, dict) else None
    return [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def _get_json(port: int, path: str) -> object:
    """The JSON body of GET `path` on `port`; None while nothing answers there (or answers 503 loading)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


def _identify(kind: str, port: int) -> str:
    """The server's own word on what it is: the version in its OpenAPI document or its /props."""
    if kind == "llama-cpp-python":
        openapi = _get_json(port, "/openapi.json")
        info = openapi.get("info") if isinstance(openapi, dict) else None
        version = info.get("version") if isinstance(info, dict) else None
        return f"llama-cpp-python {version or 'unknown'}"
    props = _get_json(port, "/props")
    build = props.get("build_info") if isinstance(props, dict) else None
    return f"llama-server {build or 'unknown'}"
