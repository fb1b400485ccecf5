"""What a run worked out from the tokenizer, the model config and torch, kept for the next run: a fully
cached re-run then loads none of them (issue 40).

Every output of a cached row is found by its prompt and its model's identity (cache.py), and results.json
describes each column by its tokenizer, device and dtype. Working those out needs transformers' tokenizer and
config, and transformers imports torch: about 4 s of a 13 s cached re-run on 2 CPU cores, for answers the
previous run already had. So the local backend (backends/local.py) keeps them here, beside the generation
cache, under a *setup key*: the contents of every file they are read from (the base folder, each adapter's
folder, this package's source), the options that decide them (device and dtype; not the CPU threads, which
xdist workers each set their own and which change none of them), the installed versions of what computes
them, and what decides where torch would put the model (CUDA_VISIBLE_DEVICES, whether an NVIDIA driver is
there). Any change to those is another key, and the run works them out again.

One JSON file per setup key, `recall/<key>.json`, written whole and atomically when a process is done with
the backend; processes of one run (xdist workers) merge what they add. A damaged file is read as empty.
Pure: no pytest, no torch.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_llmeval.cache import FileIndex, fingerprint_files, installed_version, model_files, sha256_json

# Installed software whose version can change a prompt, a tokenizer's state or a placement.
SOFTWARE = ("torch", "transformers", "tokenizers", "peft", "jinja2", "safetensors")
# The sections of a recall file: facts of the setup (a value each), and per-key memos.
SECTIONS = ("facts", "identity", "describe", "prompts")


def source_fingerprint(index: FileIndex) -> str:
    """The contents of this package's Python files: any change to the code may change a prompt."""
    package = Path(__file__).resolve().parent
    files = sorted(package.rglob("*.py"))
    digests = index.digests(files)
    return sha256_json(sorted([str(f.relative_to(package)), d] for f, d in zip(files, digests, strict=True)))


def setup_key(
    *,
    base: Path,
    adapters: dict[str, Path],
    options: dict[str, Any],
    index: FileIndex,
    models: dict[str, Path] | None = None,
) -> str:
    """The key of everything the tokenizer, config and placement facts of a run depend on: the contents of
    every column's files (the base, each adapter, each full model's folder, under its column's name), never a
    column's name or path alone. OSError when a file cannot be read (the caller then works them out as
    usual)."""
    return sha256_json(
        {
            "base": fingerprint_files(model_files(base), index),
            "adapters": {
                side: fingerprint_files(model_files(path), index) for side, path in adapters.items()
            },
            # A full model column (--llmeval-model NAME=PATH or a hub id): the files of the folder it resolves
            # to. Its identity, description and prompts are memoised under its name in this file, so the
            # name is bound to these contents here: another folder, or one edited in place, is another key.
            "models": {
                side: fingerprint_files(model_files(path), index) for side, path in (models or {}).items()
            },
            "options": options,
            "software": {name: installed_version(name) for name in SOFTWARE},
            "python": sys.version,
            "machine": platform.machine(),
            # Where torch would put the model under --llmeval-device auto, without importing it.
            "cuda": [os.environ.get("CUDA_VISIBLE_DEVICES"), nvidia_driver()],
            "code": source_fingerprint(index),
        }
    )


def nvidia_driver() -> bool:
    """Whether an NVIDIA driver is loaded (its control device exists): without one, torch has no CUDA."""
    return os.path.exists("/dev/nvidiactl")


class Recall:
    """The recall file of one setup key: read once, added to, written by `save`."""

    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: nothing is kept (no cache, or the key could not be computed)
        self.data: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        self._added: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
        if path is not None:
            self.data = _read(path)

    def get(self, section: str, key: str) -> Any:
        return self.data[section].get(key)

    def put(self, section: str, key: str, value: Any) -> None:
        if self.path is None or self.data[section].get(key) == value:
            return
        self.data[section][key] = value
        self._added[section][key] = value

    def save(self) -> None:
        """Write what this process added, merged over what the file holds now (another worker may have
        written it since): atomically, so a reader never sees half a file. A failure to write loses
        nothing but the next run's head start."""
        if self.path is None or not any(self._added.values()):
            return
        merged = _read(self.path)
        for section, added in self._added.items():
            merged[section].update(added)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".recall-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(merged, out, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            return
        self.data = merged
        self._added = {s: {} for s in SECTIONS}


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """A recall file's sections; empty ones for a missing or damaged file (worked out again, then)."""
    empty: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return empty
    if not isinstance(data, dict):
        return empty
    return {s: data[s] if isinstance(data.get(s), dict) else {} for s in SECTIONS}
