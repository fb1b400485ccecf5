"""Checks of what a run reads and writes, made before the first test: each failure is one clear sentence.

Pure file-system code (no pytest, no torch): the plugin turns an InputError into pytest's usage error
(`ERROR: llmeval: ...`, exit code 4), so a bad path or a broken model folder stops a run in its first
second instead of after an hour of generation, or as a wall of INTERNALERROR lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class InputError(ValueError):
    """A file, folder or option value the run cannot use; the message names it and says what to do."""


# A safetensors header is JSON describing the tensors; real ones are kilobytes to a few megabytes. A larger
# claimed length is a damaged or foreign file, and reading it would be a pointless multi-GB allocation.
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024


def check_safetensors(path: Path) -> dict[str, Any]:
    """Read a safetensors file's header (not its tensors): damaged or truncated files fail here. Returns
    the header, tensor name -> {dtype, shape, data_offsets} (and `__metadata__`).

    Format: 8 bytes little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
    then the data buffer, in which every tensor's [begin, end) offsets must lie.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise InputError(f"{path}: not a safetensors file ({size} bytes, too short for a header)")
            length = int.from_bytes(head, "little")
            if length > min(size - 8, MAX_SAFETENSORS_HEADER):
                raise InputError(
                    f"{path}: damaged safetensors file (its header claims {length} bytes, the file has "
                    f"{size}): truncated, or not safetensors; copy or save it again"
                )
            raw = f.read(length)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InputError(
            f"{path}: damaged safetensors file (its header is not JSON); save it again"
        ) from None
    if not isinstance(header, dict):
        raise InputError(f"{path}: damaged safetensors file (its header is not a JSON object)")
    data_size = size - 8 - length
    needed = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            raise InputError(f"{path}: damaged safetensors file (tensor {name!r} has no valid data_offsets)")
        needed = max(needed, offsets[1])
    if needed > data_size:
        raise InputError(
            f"{path}: truncated safetensors file (its tensors need {needed} bytes of data, it holds "
            f"{data_size}); copy or save it again"
        )
    return header


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON file that must hold one object (config.json, adapter_config.json, metadata.json, ...)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{what} {path}:{exc.lineno}: invalid JSON ({exc.msg}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise InputError(f"{what} {path}: invalid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} {path}: expected a JSON object, got {type(data).__name__}")
    return data


def _field_types(
    data: Mapping[str, Any], path: Path, what: str, fields: Mapping[str, tuple[type, ...]]
) -> None:
    for key, types in fields.items():
        if key in data and not isinstance(data[key], types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise InputError(f"{what} {path}: '{key}' must be {wanted}, got {json.dumps(data[key])[:60]}")


# What makes a folder loadable by transformers' Auto classes, in the order they look for it.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
# Every file a tokenizer's behaviour is read from: vocabulary, added and special tokens, chat template.
TOKENIZER_STATE_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
)


def check_model_folder(folder: Path, what: str) -> None:
    """A transformers model folder: config.json an object naming its model_type, weights, a tokenizer."""
    config = read_json_object(folder / "config.json", what) if (folder / "config.json").is_file() else None
    if config is None:
        raise InputError(f"{what} {folder}: no config.json; is it a transformers model folder?")
    if not isinstance(config.get("model_type"), str):
        raise InputError(
            f"{what} {folder / 'config.json'}: no 'model_type' string; transformers cannot tell the "
            "architecture (save the model again with save_pretrained)"
        )
    found = [name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not found:
        raise InputError(f"{what} {folder}: no weights ({', '.join(WEIGHT_FILES)})")
    for shard in safetensors_shards(folder, what):
        check_safetensors(shard)
    tokenizer = [name for name in TOKENIZER_FILES if (folder / name).is_file()]
    if not tokenizer:
        raise InputError(
            f"{what} {folder}: no tokenizer ({', '.join(TOKENIZER_FILES)}); save the tokenizer beside the "
            "model (tokenizer.save_pretrained)"
        )
    # tokenizer.json (megabytes) is parsed by the tokenizer itself; its small config is checked here.
    if "tokenizer_config.json" in tokenizer:
        read_json_object(folder / "tokenizer_config.json", what)


def safetensors_shards(folder: Path, what: str) -> list[Path]:
    """A model folder's safetensors weight files (one, or the shards its index names); [] when its weights
    are another format (pytorch_model.bin)."""
    found = [name for name in WEIGHT_FILES if (folder / name).is_file()]
    shards: list[Path] = []
    if not found:
        return shards
    if found[0] == "model.safetensors":
        shards = [folder / "model.safetensors"]
    elif found[0] == "model.safetensors.index.json":
        index = read_json_object(folder / found[0], what)
        weight_map = index.get("weight_map")
        if not (isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())):
            raise InputError(f"{what} {folder / found[0]}: no 'weight_map' of tensor name -> file name")
        shards = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [s.name for s in shards if not s.is_file()]
        if missing:
            raise InputError(
                f"{what} {folder}: weight files named in {found[0]} are missing: {', '.join(missing)}"
            )
    return shards


def adapter_weights(folder: Path) -> Path | None:
    """The weights file of a peft adapter folder (safetensors first, as peft loads them), or None."""
    return next(
        (folder / n for n in ("adapter_model.safetensors", "adapter_model.bin") if (folder / n).is_file()),
        None,
    )


def check_adapter_folder(folder: Path) -> dict[str, Any]:
    """A peft adapter folder: adapter_config.json of the right shape, readable weights, valid metadata.

    Returns adapter_config.json. Messages say `--adapter PATH`, the option the user typed.
    """
    what = "--adapter"
    if not folder.exists():
        raise InputError(f"{what} {folder}: no such folder")
    if not folder.is_dir():
        raise InputError(f"{what} {folder}: not a folder (pass the folder holding adapter_config.json)")
    config_path = folder / "adapter_config.json"
    if not config_path.is_file():
        raise InputError(
            f"{what} {folder}: no adapter_config.json; a peft adapter folder is what "
            "PeftModel.save_pretrained() writes"
        )
    config = read_json_object(config_path, what)
    if not isinstance(config.get("peft_type"), str):
        raise InputError(f"{what} {config_path}: no 'peft_type' string; is it a peft adapter's config?")
    _field_types(
        config,
        config_path,
        what,
        {
            "base_model_name_or_path": (str, type(None)),
            "r": (int,),
            "lora_alpha": (int, float),
            "target_modules": (list, str, type(None)),
        },
    )
    weights = adapter_weights(folder)
    if weights is None:
        raise InputError(f"{what} {folder}: no adapter_model.safetensors (or adapter_model.bin)")
    if weights.suffix == ".safetensors":
        check_safetensors(weights)
    metadata = folder / "metadata.json"
    if metadata.is_file():
        meta = read_json_object(metadata, what)
        _field_types(meta, metadata, what, {"name": (str,), "version": (str, int, float, type(None))})
        domain = meta.get("domain_benchmarks")
        if domain is not None and not (isinstance(domain, list) and all(isinstance(g, str) for g in domain)):
            raise InputError(f"{what} {metadata}: 'domain_benchmarks' must be a list of glob strings")
    if (folder / "tokenizer_config.json").is_file():
        read_json_object(folder / "tokenizer_config.json", what)
    return config


def check_output_file(path: Path, what: str) -> None:
    """A file the run will write at its end: its folder exists or can be made, and takes a new file."""
    if path.is_dir():
        raise InputError(f"{what} {path}: is a folder; pass a file path, e.g. {path / 'results.json'}")
    _check_folder_writable(path.parent, path, what)
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{what} {path}: the file exists and is not writable")


def check_output_folder(folder: Path, what: str) -> None:
    """A folder the run writes files in (a cache, the history): it is one, or can be made, and takes files."""
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{what} {folder}: is a file, not a folder")
    _check_folder_writable(folder, folder, what)


def _check_folder_writable(folder: Path, shown: Path, what: str) -> None:
    """`folder` exists or can be made, and takes a new file; messages name `shown`, what the user passed.

    The write is tried for real (a temporary file or folder made and removed at once), because permission
    bits say nothing about read-only mounts, and root passes every permission check.
    """
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(
            f"{what} {shown}: {existing} is a file, so the folder cannot be made; pick another path"
        )
    try:
        if existing == folder:
            with tempfile.TemporaryFile(dir=existing, prefix=".llmeval-probe-"):
                pass
        else:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".llmeval-probe-"))
    except OSError as exc:
        raise InputError(f"{what} {shown}: cannot write in {existing} ({exc.strerror or exc})") from None


def option_path_values(args: Sequence[str], options: Sequence[str]) -> list[tuple[str, str]]:
    """(option, value) for each of `options` given as two words (`--adapter PATH`) in a command line."""
    pairs = []
    for i, arg in enumerate(args[:-1]):
        if arg == "--":
            break
        if arg in options:
            pairs.append((arg, args[i + 1]))
    return pairs


def _same(a: Path, b: Path) -> bool:
    """One file under two names: equal resolved paths, or (both existing) the same inode (a hard link)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def path_clashes(outputs: Sequence[tuple[str, Path]], inputs: Sequence[tuple[str, Path]]) -> list[str]:
    """Each output file that would replace an input or another output, as one sentence each.

    `outputs`: (what, file) the run writes; `inputs`: (what, file or folder) it reads. An output clashes
    with an input file that is the same file, with a file already at the top of an input folder (a model's
    or an adapter's own files, which loading reads and the generation cache fingerprints; a subfolder such
    as eval/ is the user's), and with another output written to the same file (the second would replace the
    first). Nothing here writes or reads a file's content.
    """
    found: list[str] = []
    for i, (what, out) in enumerate(outputs):
        for name, source in inputs:
            if source.is_dir():
                clash = out.exists() and out.resolve().parent == source.resolve()
            else:
                clash = _same(out, source)
            if clash:
                found.append(
                    f"{what} {out} is {name} {source}"
                    + ("" if not source.is_dir() else " (a file in it)")
                    + ": the run would replace what it reads; write it elsewhere"
                )
                break
        else:
            for other, earlier in outputs[:i]:
                if _same(out, earlier):
                    found.append(
                        f"{what} {out} is also {other}: one would replace the other; give each its own file"
                    )
                    break
    return found


def _umask() -> int:
    """The process's umask (read by setting it, at once set back: there is no other way to read it)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`: readers never see half a file.

    The file gets the mode of the file it replaces, else what the user's umask gives a new file, as open()
    would: mkstemp's 0600 would make a team's shared results.json (or a web server's report) unreadable.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
