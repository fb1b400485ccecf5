"""Content-addressed store of generated texts: an output is served only to a run that would produce it.

A row's output is stored under the sha256 of its *key material* (`key_material`): fingerprints of the base
model's files (their contents, not their paths), of the adapter's files (adapter side only), of the
tokenizer; the exact prompt; the decoding settings; dtype and device; the versions of torch and transformers
(and peft, adapter side only) and of the generation code; and, where outputs depend on the batch a row is
generated in (anything but exact float32), the whole batch. The base side leaves the adapter out, so
evaluating a new version of an adapter reuses the base's outputs.

Store: one JSON file per entry at `v1/<key[:2]>/<key[2:4]>/<key>.json`, written to a temporary file in the
same folder and renamed over the old one (atomic on POSIX, so xdist workers may write the same entries at
once, and a reader sees a whole entry or none). Each entry carries its full key material and a checksum,
both verified on read: a truncated, garbled or misplaced entry is a miss plus a warning in `problems`, and
is deleted, so the next write repairs the store.

File fingerprints are remembered in a small JSON index keyed by (size, mtime, ctime, inode, device), so a
multi-GB model is read in full once, not on every run.

No pytest here and no torch at import time: the evaluator hands over what it loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.generation import DecodingConfig
from pytest_llmeval.inputs import TOKENIZER_STATE_FILES, write_bytes_atomic

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from pytest_llmeval.models import LoadedModel

FORMAT = 1
SIDES = ("base", "adapter")
# Linux stamps files from a coarse clock (a few ms): a file rewritten within the same tick keeps its
# mtime. An index entry is trusted only when the file's mtime is this far before it was hashed (the "racy
# git" problem); a file written just before hashing is hashed again on the next run, which is cheap.
RACY_NS = 2_000_000_000
# What from_pretrained reads from a model folder is not listed anywhere, so every top-level file counts
# except documentation and formats it does not load from there: hashing too much costs time once,
# hashing too little could serve one model's outputs for another.
SKIPPED_PREFIXES = (".", "README", "LICENSE", "NOTICE", "USE_POLICY")
SKIPPED_SUFFIXES = (".md", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".gguf", ".onnx", ".h5", ".msgpack")
# What peft reads from an adapter folder; metadata.json, training data and READMEs do not change outputs.
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
# The code, by path in the package, that turns weights and a row into text or a measurement (perplexity,
# the choices' log-likelihoods, kept in the cache too): an edit to it (a decoding fix, a new measured field,
# another pairing of context and choice) must not be served results of the old code. A measurement is keyed
# by the row's content, not by the pairs read, so the code from a row to its pairs is here too: the prompt
# mode (planning), the templates (prompts) and each scorer's request hooks (options, pair, completion).
# tests/test_cache.py holds every package module these import to this list or to OUTSIDE_THE_KEY, so code
# moved into a new file cannot silently drop out of the key.
_ROW_TO_REQUEST = (
    "generation.py",
    "prompts.py",
    "planning.py",
    "scorers/__init__.py",
    "scorers/base.py",
    "scorers/config.py",
    "scorers/multiple_choice.py",
    "scorers/loglikelihood.py",
    "scorers/perplexity.py",
    "scorers/lm_eval_exact_match.py",
    "scorers/code_execution.py",
)
CODE_PATHS = (
    *_ROW_TO_REQUEST,
    "backends/local.py",
    "backends/weights.py",
    "models.py",
    "perplexity.py",
    "continuations.py",
    "measures.py",
)
# A served model's outputs depend on our client, its parsing and the requests built, not on our weights code.
SERVED_CODE_PATHS = (*_ROW_TO_REQUEST, "backends/served.py", "endpoint.py", "logprobs.py", "perplexity.py")
# Package modules the code above imports that cannot change an output or a measurement, and why.
OUTSIDE_THE_KEY: dict[str, str] = {
    "__init__.py": "the package's version and exports",
    "backends/__init__.py": "the backends' names",
    "backends/base.py": "the protocol's types",
    "benchmark.py": "reads rows; what it reads (the row's content) is in the key itself",
    "cache.py": "the cache itself",
    "costs.py": "the time and token ledger",
    "early_stop.py": "which rows run, not what a row gives",
    "endpoint.py": "the served client (in SERVED_CODE_PATHS; a local column sends nothing)",
    "formatting.py": "text for people: numbers and lists in messages",
    "inputs.py": "input checks that refuse, never change, a row",
    "measures.py": "runs local models (in CODE_PATHS); a served column uses its judge alone",
    "models.py": "loads weights (in CODE_PATHS); a served column loads none",
    "recall.py": "a memo of set-up facts",
    "records.py": "the record types outputs are put in",
    "roster.py": "which columns run",
    "rowstore.py": "where scored rows are kept",
    "run_options.py": "the options; those that change an output are in the key material themselves",
    "scorers/llm_judge.py": "the judge's prompt, which is keyed by its own text",
    "summaries.py": "aggregates after scoring",
    "sandbox/__init__.py": "runs generated code to score it; scores are not cached",
    "sandbox/runs.py": "runs generated code to score it; scores are not cached",
    **{
        f"scorers/{name}.py": "scores an output once it is made; scores are not cached"
        for name in ("bleu", "char_accuracy", "custom", "exact_match", "fuzzy", "rouge", "semantic")
    },
}


def canonical(value: Any) -> bytes:
    """The one byte string of a JSON value that every process computes alike (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_json(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class FileIndex:
    """sha256 of files' contents, remembered by (size, mtime_ns, ctime_ns, inode, device) in a JSON file.

    A file is read again when any of these changed, or when it was written so shortly before it was hashed
    that a later write could keep its mtime (RACY_NS). ctime cannot be set by `touch -d` or a copy that
    keeps times, so a same-size edit with the old mtime restored is still seen. The index is updated under
    a lock held while hashing: xdist workers starting together read a large model once, not once each.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []
        self.hashed = 0  # files read in full by this object; the rest came from the index

    def digests(self, files: Sequence[Path]) -> list[str]:
        """Content hashes of `files`, in order; only files changed since they were last hashed are read."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.path.with_name(self.path.name + ".lock"), "a")
        except OSError as exc:
            self.problems.append(f"file hash index {self.path} unusable ({exc}): every file is read in full")
            return [self._hash(f) for f in files]
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            entries = self._load()
            out: list[str] = []
            changed = False
            for file in files:
                real = file.resolve()  # hub snapshots are symlinks into a blob store
                st = real.stat()
                stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
                known = entries.get(str(real))
                if known and known["stat"] == stamp and known["hashed_ns"] - st.st_mtime_ns > RACY_NS:
                    out.append(known["sha256"])
                    continue
                hashed_ns = time.time_ns()
                digest = self._hash(real)
                entries[str(real)] = {"stat": stamp, "sha256": digest, "hashed_ns": hashed_ns}
                out.append(digest)
                changed = True
            if changed:
                self._save(entries)
            return out

    def _hash(self, path: Path) -> str:
        self.hashed += 1
        return _sha256_file(path)

    def _load(self) -> dict[str, dict[str, Any]]:
        """The index's entries; a damaged index is reported and rebuilt from nothing (files are re-read)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self.problems.append(f"file hash index {self.path} unreadable ({exc}): rebuilding it")
            return {}
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError("not an index of this format")
            files = data["files"]
            if not isinstance(files, dict):
                raise ValueError("'files' is not an object")
        except (ValueError, KeyError) as exc:
            self.problems.append(f"file hash index {self.path} damaged ({exc}): rebuilding it")
            return {}
        valid = {path: entry for path, entry in files.items() if _valid_index_entry(entry)}
        if len(valid) < len(files):
            self.problems.append(
                f"file hash index {self.path}: {len(files) - len(valid)} damaged entries dropped (re-read)"
            )
        return valid

    def _save(self, entries: dict[str, dict[str, Any]]) -> None:
        # Entries of files that are gone (temporary models of a test run) would only grow the index.
        kept = {path: entry for path, entry in entries.items() if os.path.exists(path)}
        try:
            write_bytes_atomic(self.path, canonical({"format": FORMAT, "files": kept}))
        except OSError as exc:
            self.problems.append(f"file hash index {self.path} not written ({exc}): files are read again")


def _valid_index_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("stat"), list)
        and len(entry["stat"]) == 5
        and all(isinstance(v, int) for v in entry["stat"])
        and isinstance(entry.get("sha256"), str)
        and len(entry["sha256"]) == 64
        and isinstance(entry.get("hashed_ns"), int)
    )


def model_files(folder: Path) -> list[Path]:
    """The files of a model folder that can change what it generates (top level, sorted by name)."""
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file()
        and not p.name.startswith(SKIPPED_PREFIXES)
        and not p.name.lower().endswith(SKIPPED_SUFFIXES)
    )


def adapter_files(folder: Path) -> list[Path]:
    """The files an adapter is loaded from: peft's config and weights, and the tokenizer it ships, if any
    (models.adapter_tokenizer: prompts of its column are built and read with it)."""
    return [folder / n for n in (*ADAPTER_FILES, *TOKENIZER_STATE_FILES) if (folder / n).is_file()]


def fingerprint_files(files: Sequence[Path], index: FileIndex) -> str:
    """sha256 over the files' names and contents: the same for a copy of the folder elsewhere."""
    digests = index.digests(files)
    return sha256_json(sorted([f.name, d] for f, d in zip(files, digests, strict=True)))


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase, folder: Path, index: FileIndex) -> str:
    """The tokenizer's files in `folder` and the state the loader set on it (padding side, pad token)."""
    files = [folder / n for n in TOKENIZER_STATE_FILES if (folder / n).is_file()]
    template = getattr(tokenizer, "chat_template", None)
    state = {
        "files": sorted([f.name, d] for f, d in zip(files, index.digests(files), strict=True)),
        "class": type(tokenizer).__name__,
        "chat_template": None if template is None else str(template),
        "padding_side": str(tokenizer.padding_side),
        "size": len(tokenizer),
        "ids": {n: getattr(tokenizer, f"{n}_token_id", None) for n in ("bos", "eos", "pad", "unk")},
    }
    return sha256_json(state)


def batch_invariant(dtype: str, device_type: str, *, tf32: bool = False) -> bool:
    """Whether a row's output is the same in any batch: exact float32 on CPU or CUDA, nothing else.

    bf16/fp16 rounding depends on the batch's shapes (BENCHMARKS.md: 3 to 5 of 120 rows differ between
    batch 1 and a larger batch on an H100), so their outputs are keyed by the batch too. float32 gave the
    same text in every batch measured (120/120 rows on CUDA, 64/64 on CPU); TF32 matmuls are not float32.
    """
    return dtype == "float32" and (device_type == "cpu" or (device_type == "cuda" and not tf32))


def installed_version(dist: str) -> str:
    """An installed distribution's version, or "absent"."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def code_fingerprint(paths: Sequence[str] = CODE_PATHS) -> str:
    """sha256 of the modules, by path in the package, that turn weights (or a server's answers) and rows into
    text or a measurement."""
    package = Path(__file__).resolve().parent
    return sha256_json([[path, _sha256_file(package / path)] for path in paths])


@dataclass(frozen=True)
class ModelIdentity:
    """Everything beside the prompt and the decoding settings that decides a generated text."""

    base: str  # fingerprint_files of the base model folder
    adapter: str | None  # fingerprint_files of the adapter folder; None without an adapter
    tokenizer: str
    dtype: str  # "float32", "bfloat16", ...
    device: str  # "cpu/x86_64", "cuda/NVIDIA H100 80GB HBM3": kernels differ between GPU models
    software: Mapping[str, str]  # torch, transformers, peft, pytest-llmeval's generation code
    batch_invariant: bool  # False: outputs are keyed by the whole batch they were generated in


def identify(loaded: LoadedModel, index: FileIndex) -> ModelIdentity:
    """The identity of a loaded model and adapter, from the contents of the files they were loaded from."""
    base_dir = Path(loaded.base.path)
    device_type = loaded.device.type
    tf32 = False
    if device_type == "cuda":
        import torch

        device = f"cuda/{torch.cuda.get_device_name(loaded.device)}"
        # "high" or "medium" matmul precision, or the older allow_tf32 switch, lets float32 matmuls use TF32.
        precision = torch.get_float32_matmul_precision()
        tf32 = precision != "highest" or bool(torch.backends.cuda.matmul.allow_tf32)
    else:
        device = f"{device_type}/{platform.machine()}"
    dtype = str(loaded.dtype).removeprefix("torch.")
    return ModelIdentity(
        base=fingerprint_files(model_files(base_dir), index),
        adapter=None if loaded.adapter is None else fingerprint_files(adapter_files(loaded.adapter), index),
        tokenizer=tokenizer_fingerprint(loaded.tokenizer, base_dir, index),
        dtype=dtype,
        device=device,
        software={
            "torch": installed_version("torch"),
            "transformers": installed_version("transformers"),
            "peft": installed_version("peft"),
            "code": code_fingerprint(),
        },
        batch_invariant=batch_invariant(dtype, device_type, tf32=tf32),
    )


def batch_digest(
    prompts: Sequence[str], limits: Sequence[int], stops: Sequence[Sequence[str] | None] | None = None
) -> str:
    """The batch a row was generated in: its prompts and limits (and stop strings, where any row has
    some: a row that ends early leaves the batch, which changes the others' shapes), in the order of the
    generate() call."""
    if stops is None or all(s is None for s in stops):
        return sha256_json([[p, n] for p, n in zip(prompts, limits, strict=True)])
    listed = [None if s is None else list(s) for s in stops]
    return sha256_json([[p, n, s] for p, n, s in zip(prompts, limits, listed, strict=True)])


def key_material(
    identity: ModelIdentity,
    side: str,
    prompt: str,
    max_new_tokens: int,
    batch: str | None = None,
    sampled: Sampled | None = None,
    stop: Sequence[str] | None = None,
) -> dict[str, Any]:
    """What one output depends on; its sha256 is the entry's key, and the entry keeps it whole. A sampled
    output (pass@k's n samples) also depends on its temperature and seed, one with stop strings (an lm-eval
    row's `until`) on them, in order (where it ends, and where it is cut); an output without either is
    keyed as it always was, so stored outputs stay valid."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if side == "adapter" and identity.adapter is None:
        raise ValueError("the adapter side needs an identity with an adapter")
    # The base side leaves out what only the adapter changes: a new adapter version reuses base outputs.
    software = {k: v for k, v in identity.software.items() if side == "adapter" or k != "peft"}
    decoding = (
        DecodingConfig(max_new_tokens=max_new_tokens).to_json()
        if sampled is None
        else {
            **DecodingConfig(max_new_tokens=max_new_tokens, do_sample=True, temperature=sampled[0]).to_json(),
            "seed": sampled[1],
        }
    )
    if stop is not None:
        decoding["until"] = list(stop)
    return {
        "format": FORMAT,
        "side": side,
        "base": identity.base,
        "adapter": identity.adapter if side == "adapter" else None,
        "tokenizer": identity.tokenizer,
        "dtype": identity.dtype,
        "device": identity.device,
        "software": software,
        "prompt": prompt,
        "decoding": decoding,
        "batch": batch,
    }


def entry_key(material: Mapping[str, Any]) -> str:
    return sha256_json(material)


@dataclass
class CacheStats:
    """Rows served from the store (hits) and generated (misses) per side, and damaged entries found."""

    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    misses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    damaged: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"hits": dict(self.hits), "misses": dict(self.misses), "damaged": self.damaged}

    def add(self, data: Mapping[str, Any]) -> None:
        """Add another process's to_json() (the xdist controller sums its workers')."""
        for side in SIDES:
            self.hits[side] += int(data.get("hits", {}).get(side, 0))
            self.misses[side] += int(data.get("misses", {}).get(side, 0))
        self.damaged += int(data.get("damaged", 0))


def summary_line(info: Mapping[str, Any]) -> str:
    """One terminal line from results.json's inference_config.cache."""
    parts = []
    for side in SIDES:
        hits, misses = info["hits"][side], info["misses"][side]
        if hits + misses:
            parts.append(f"{side} {hits} of {hits + misses} rows from the cache")
    text = ", ".join(parts) or "no row generated"
    damaged = f"; {info['damaged']} damaged entries regenerated" if info.get("damaged") else ""
    return f"generation cache {info.get('dir', '')}: {text}{damaged}"


@dataclass(frozen=True)
class Lookup:
    """One batch's look in the store (GenerationCache.lookup)."""

    side: str
    materials: list[dict[str, Any]]  # each output's key material
    found: list[str | None]  # each output as stored, None where missing
    todo: list[int]  # the outputs to make: the misses, or the whole batch when its key names the batch


# (prompts, limits) -> outputs; with samplings, (prompts, limits, samplings) -> outputs.
Produce = Callable[..., list[str]]
Sampled = tuple[float, int]  # (temperature, seed) of one sampled output


class GenerationCache:
    """Generated texts on disk under `root`, one JSON file per entry, keyed by entry_key(key material)."""

    def __init__(self, root: Path, *, index: FileIndex | None = None) -> None:
        self.root = root
        self.index = index if index is not None else FileIndex(root / "file-hashes.json")
        self.stats = CacheStats()
        self.problems: list[str] = []
        self._write_error = False
        self._marked = False

    def path_for(self, key: str) -> Path:
        # Two levels of fan-out keep folders small (a few thousand rows give a few entries per folder).
        return self.root / f"v{FORMAT}" / key[:2] / key[2:4] / f"{key}.json"

    def get(self, material: Mapping[str, Any]) -> str | None:
        """The stored output for this key material, or None; a damaged entry is reported and deleted."""
        key = entry_key(material)
        path = self.path_for(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._damaged(path, f"unreadable ({exc})")
            return None
        output, why = _check_entry(raw, key, material)
        if why is not None:
            self._damaged(path, why)
        return output

    def put(self, material: Mapping[str, Any], output: str) -> None:
        """Store an output (atomically); a store that cannot be written is reported once, never fatal."""
        key = entry_key(material)
        entry: dict[str, Any] = {"format": FORMAT, "key": key, "material": dict(material), "output": output}
        entry["checksum"] = sha256_json(entry)
        try:
            write_bytes_atomic(self.path_for(key), canonical(entry))
        except OSError as exc:
            if not self._write_error:
                self._write_error = True
                self.problems.append(f"generation cache {self.root} not written ({exc}): outputs not kept")
            return
        if not self._marked:
            self._marked = True
            self._mark_root()

    def _mark_root(self) -> None:
        """A .gitignore and a CACHEDIR.TAG in the store's folder: never committed, skipped by backups."""
        # Inside .pytest_cache pytest has written both already; --llmeval-cache-dir may point anywhere.
        for name, text in (
            (".gitignore", "# generated outputs of pytest-llmeval, safe to delete\n*\n"),
            ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# pytest-llmeval generations\n"),
        ):
            path = self.root / name
            if not path.exists():
                with contextlib.suppress(OSError):
                    path.write_text(text, encoding="utf-8")

    def lookup(
        self,
        identity: ModelIdentity,
        side: str,
        prompts: Sequence[str],
        limits: Sequence[int],
        samplings: Sequence[Sampled | None] | None = None,
        extra: Sequence[Mapping[str, Any]] | None = None,
        stops: Sequence[Sequence[str] | None] | None = None,
    ) -> Lookup:
        """What one batch finds in the store, and which of its outputs must be made (Lookup.todo).

        Batch-invariant identities (float32, a server) make the misses only. Otherwise a row's key includes
        the whole batch, and when any row misses, the whole batch is made again, so that every row comes
        from the batch its key names. `extra`: per output, key material beyond its prompt (a served raw
        prompt, chat messages). `stops`: per output, its stop strings (None: none)."""
        batch = None if identity.batch_invariant else batch_digest(prompts, limits, stops)
        each = [None] * len(prompts) if samplings is None else list(samplings)
        ends = [None] * len(prompts) if stops is None else list(stops)
        materials = [
            key_material(identity, side, p, n, batch, sampled, stop)
            for p, n, sampled, stop in zip(prompts, limits, each, ends, strict=True)
        ]
        if extra is not None:
            materials = [{**m, **more} for m, more in zip(materials, extra, strict=True)]
        found = [self.get(m) for m in materials]
        misses = [i for i, text in enumerate(found) if text is None]
        todo = misses if batch is None or not misses else list(range(len(prompts)))
        return Lookup(side, materials, found, todo)

    def settle(self, looked: Lookup, fresh: Sequence[str | None]) -> list[str | None]:
        """The batch's outputs: the stored ones, with `fresh` (one per Lookup.todo, None where making it
        failed) in their places, the new ones kept. Counted here, once the batch is made: a batch that
        raises is retried in halves (the evaluator), and its rows must not count as generated twice."""
        if len(fresh) != len(looked.todo):
            raise ValueError(f"produce returned {len(fresh)} outputs for {len(looked.todo)} prompts")
        self.stats.hits[looked.side] += len(looked.found) - len(looked.todo)
        self.stats.misses[looked.side] += len(looked.todo)
        out = list(looked.found)
        for i, text in zip(looked.todo, fresh, strict=True):
            out[i] = text
            if text is not None and looked.found[i] is None:
                self.put(looked.materials[i], text)
        return out

    def generate(
        self,
        identity: ModelIdentity,
        side: str,
        prompts: Sequence[str],
        limits: Sequence[int],
        produce: Produce,
        samplings: Sequence[Sampled] | None = None,
    ) -> list[str]:
        """Outputs of one batch: stored ones served, the others made by `produce(prompts, limits)` as one
        batch and kept (`produce(prompts, limits, samplings)` for sampled outputs, one (temperature, seed)
        per prompt). The batch rules are lookup()'s."""
        looked = self.lookup(identity, side, prompts, limits, samplings)
        fresh: list[str] = []
        if looked.todo:
            chosen = ([prompts[i] for i in looked.todo], [limits[i] for i in looked.todo])
            picked = None if samplings is None else [samplings[i] for i in looked.todo]
            fresh = produce(*chosen) if picked is None else produce(*chosen, picked)
        return [str(text) for text in self.settle(looked, fresh)]

    def take_problems(self) -> list[str]:
        """Warnings since the last call (damaged entries, a damaged index, an unwritable folder)."""
        taken = self.problems + self.index.problems
        self.problems.clear()
        self.index.problems.clear()
        return taken

    def _damaged(self, path: Path, why: str) -> None:
        self.stats.damaged += 1
        self.problems.append(f"generation cache: damaged entry {path} ({why}): not used, generated again")
        # Deleted rather than left: the row is a miss now and its fresh output is written in its place.
        with contextlib.suppress(OSError):
            path.unlink()


def _check_entry(raw: bytes, key: str, material: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(output, None) for a sound entry of this key, else (None, what is wrong with it)."""
    try:
        entry = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "not valid JSON: truncated or garbled"
    if not isinstance(entry, dict) or set(entry) != {"format", "key", "material", "output", "checksum"}:
        return None, "not an entry of this store"
    if entry["format"] != FORMAT or not isinstance(entry["output"], str):
        return None, "not an entry of this format"
    checksum = entry.pop("checksum")
    if checksum != sha256_json(entry):
        return None, "checksum mismatch: its bytes changed after it was written"
    if entry["key"] != key or entry_key(entry["material"]) != key:
        return None, "holds the entry of another key"
    if entry["material"] != dict(material):
        return None, "its key material differs from the one asked for"
    output: str = entry["output"]
    return output, None
