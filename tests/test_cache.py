"""The generation cache: what misses, what hits, the file index, concurrent writers, damaged entries."""

from __future__ import annotations

import ast
import copy as copy_module
import dataclasses
import inspect
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

from pytest_llmeval import cache as cache_module
from pytest_llmeval.cache import (
    CODE_PATHS,
    OUTSIDE_THE_KEY,
    SERVED_CODE_PATHS,
    SIDES,
    CacheStats,
    FileIndex,
    GenerationCache,
    ModelIdentity,
    adapter_files,
    batch_digest,
    batch_invariant,
    entry_key,
    fingerprint_files,
    identify,
    key_material,
    model_files,
    summary_line,
)
from pytest_llmeval.models import LoadedModel, ModelSpec, ResolvedBase, load

PROMPTS = ["<user>Convert: Jan 5th, 2024", "<user>Convert: August 24, 2003", "<user>Say hello."]
LIMITS = [16, 16, 4]
SOFTWARE = {"torch": "2.13.0+cpu", "transformers": "5.24.0", "peft": "0.21.2", "code": "c" * 64}
# For the tests that need no files: an identity as identify() would make one.
FIXED = ModelIdentity(
    base="b" * 64,
    adapter="a" * 64,
    tokenizer="t" * 64,
    dtype="float32",
    device="cpu/x86_64",
    software=SOFTWARE,
    batch_invariant=True,
)


class Generator:
    """A stand-in for generation.generate that records its calls: output = tag + prompt + limit."""

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.calls: list[list[str]] = []

    def __call__(self, prompts: list[str], limits: list[int]) -> list[str]:
        self.calls.append(list(prompts))
        return [f"{self.tag}{p}|{n}" for p, n in zip(prompts, limits, strict=True)]


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def make_folders(root: Path) -> tuple[Path, Path]:
    """A model folder and an adapter folder with the files that matter and some that do not."""
    base, adapter = root / "base", root / "adapter"
    write(base / "config.json", b'{"model_type": "llama"}')
    write(base / "model.safetensors", bytes(range(256)) * 64)
    write(base / "tokenizer.json", b'{"model": {"vocab": {"a": 0}}}')
    write(base / "README.md", b"a model")
    write(adapter / "adapter_config.json", b'{"r": 4}')
    write(adapter / "adapter_model.safetensors", bytes(range(128)) * 16)
    write(adapter / "metadata.json", b'{"version": "1.0.0"}')
    return base, adapter


def identity_of(base: Path, adapter: Path | None, index: FileIndex, **changes: Any) -> ModelIdentity:
    """What identify() computes, from folders alone (the tokenizer from its files)."""
    tokenizer = [base / "tokenizer.json"]
    identity = ModelIdentity(
        base=fingerprint_files(model_files(base), index),
        adapter=None if adapter is None else fingerprint_files(adapter_files(adapter), index),
        tokenizer=fingerprint_files(tokenizer, index),
        dtype="float32",
        device="cpu/x86_64",
        software=SOFTWARE,
        batch_invariant=True,
    )
    return dataclasses.replace(identity, **changes)


def run_both(
    cache: GenerationCache,
    identity: ModelIdentity,
    prompts: list[str] = PROMPTS,
    limits: list[int] = LIMITS,
) -> tuple[list[str], list[str]]:
    """Base and adapter outputs of one batch through the cache, as the evaluator makes them."""
    base = cache.generate(identity, "base", prompts, limits, Generator("base:"))
    adapter = cache.generate(identity, "adapter", prompts, limits, Generator("adapter:"))
    return base, adapter


def same_size_edit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


# --- keys -------------------------------------------------------------------------------------------------


def test_identical_inputs_hit(tmp_path: Path) -> None:
    base, adapter = make_folders(tmp_path)
    cache = GenerationCache(tmp_path / "store")
    identity = identity_of(base, adapter, cache.index)
    first = run_both(cache, identity)
    assert cache.stats.misses == {"base": 3, "adapter": 3} and cache.stats.hits == {"base": 0, "adapter": 0}

    again = GenerationCache(tmp_path / "store")  # a new process: only the files carry over
    gen = Generator("never:")
    assert again.generate(identity_of(base, adapter, again.index), "base", PROMPTS, LIMITS, gen) == first[0]
    assert again.generate(identity, "adapter", PROMPTS, LIMITS, gen) == first[1]
    assert gen.calls == []
    assert again.stats.hits == {"base": 3, "adapter": 3} and again.stats.misses == {"base": 0, "adapter": 0}
    assert first[0][0] == "base:" + PROMPTS[0] + "|16"
    assert (tmp_path / "store" / ".gitignore").read_text().endswith("*\n")  # never committed by mistake


# (what changes, whether the base side still hits): every change below must miss where it matters.
CHANGES: list[tuple[str, bool]] = [
    ("base weights", False),
    ("base config", False),
    ("tokenizer file", False),
    ("adapter weights", True),
    ("adapter config", True),
    ("prompt", False),
    ("max_new_tokens", False),
    ("dtype", False),
    ("device", False),
    ("torch version", False),
    ("transformers version", False),
    ("generation code", False),
    ("peft version", True),
]


@pytest.mark.parametrize(("change", "base_hits"), CHANGES, ids=[c for c, _ in CHANGES])
def test_each_change_misses(tmp_path: Path, change: str, base_hits: bool) -> None:
    base, adapter = make_folders(tmp_path)
    cache = GenerationCache(tmp_path / "store")
    run_both(cache, identity_of(base, adapter, cache.index))
    prompts, limits = list(PROMPTS), list(LIMITS)
    edits: dict[str, Any] = {}
    if change == "base weights":
        same_size_edit(base / "model.safetensors")
    elif change == "base config":
        (base / "config.json").write_bytes(b'{"model_type": "llama", "rope_theta": 1}')
    elif change == "tokenizer file":
        same_size_edit(base / "tokenizer.json")
    elif change == "adapter weights":
        same_size_edit(adapter / "adapter_model.safetensors")
    elif change == "adapter config":
        (adapter / "adapter_config.json").write_bytes(b'{"r": 8}')
    elif change == "prompt":
        prompts = [p + " " for p in prompts]
    elif change == "max_new_tokens":
        limits = [n + 1 for n in limits]
    elif change == "dtype":
        edits["dtype"] = "float16"
    elif change == "device":
        edits["device"] = "cuda/NVIDIA H100 80GB HBM3"
    else:
        name = {"torch version": "torch", "transformers version": "transformers", "peft version": "peft"}
        key = name.get(change, "code")
        edits["software"] = {**SOFTWARE, key: SOFTWARE[key] + "-changed"}
    after = GenerationCache(tmp_path / "store")
    run_both(after, identity_of(base, adapter, after.index, **edits), prompts, limits)
    assert after.stats.hits["base"] == (3 if base_hits else 0)
    assert after.stats.misses["base"] == (0 if base_hits else 3)
    assert after.stats.hits["adapter"] == 0 and after.stats.misses["adapter"] == 3


def test_contents_not_paths_and_only_files_that_matter(tmp_path: Path) -> None:
    base, adapter = make_folders(tmp_path)
    cache = GenerationCache(tmp_path / "store")
    run_both(cache, identity_of(base, adapter, cache.index))
    # A copy of both folders elsewhere, with a changed README and adapter metadata: still the same model.
    moved = tmp_path / "moved"
    shutil.copytree(base, moved / "b")
    shutil.copytree(adapter, moved / "a")
    (moved / "b" / "README.md").write_text("new docs")
    (moved / "a" / "metadata.json").write_text('{"version": "1.0.1"}')
    after = GenerationCache(tmp_path / "store")
    run_both(after, identity_of(moved / "b", moved / "a", after.index))
    assert after.stats.hits == {"base": 3, "adapter": 3}


def test_base_side_ignores_the_adapter() -> None:
    other = dataclasses.replace(FIXED, adapter="d" * 64)
    no_adapter = dataclasses.replace(FIXED, adapter=None)
    keys = {entry_key(key_material(i, "base", "p", 8)) for i in (FIXED, other, no_adapter)}
    assert len(keys) == 1
    adapter_keys = {entry_key(key_material(i, "adapter", "p", 8)) for i in (FIXED, other)}
    assert len(adapter_keys) == 2
    with pytest.raises(ValueError, match="adapter side"):
        key_material(no_adapter, "adapter", "p", 8)
    with pytest.raises(ValueError, match="side must be"):
        key_material(FIXED, "judge", "p", 8)


KEY_SCRIPT = """
import sys
from pathlib import Path
from pytest_llmeval.cache import FileIndex, GenerationCache, entry_key, key_material
sys.path.insert(0, sys.argv[1])
from test_cache import identity_of
identity = identity_of(Path(sys.argv[2]), Path(sys.argv[3]), FileIndex(Path(sys.argv[4])))
print(entry_key(key_material(identity, "adapter", "Jan 5th, 2024 \\u2192 ?", 16, "batch")))
"""


def test_key_is_the_same_in_another_process(tmp_path: Path) -> None:
    base, adapter = make_folders(tmp_path)
    identity = identity_of(base, adapter, FileIndex(tmp_path / "index.json"))
    here = entry_key(key_material(identity, "adapter", "Jan 5th, 2024 → ?", 16, "batch"))
    args = [str(Path(__file__).parent), str(base), str(adapter), str(tmp_path / "other-index.json")]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # dict and set order must not leak into the key
    out = subprocess.run(
        [sys.executable, "-c", KEY_SCRIPT, *args], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == here


# --- batch composition ------------------------------------------------------------------------------------


PACKAGE = Path(cache_module.__file__).resolve().parent


def package_imports(path: str) -> set[str]:
    """The package modules a module imports, at its top or inside its functions, by path in the package."""
    found: set[str] = set()

    def add(dotted: str) -> None:
        parts = dotted.split(".")[1:]  # without "pytest_llmeval"
        for candidate in (
            Path(*parts, "__init__.py"),
            Path(*parts[:-1], f"{parts[-1]}.py") if parts else None,
        ):
            if candidate is not None and (PACKAGE / candidate).is_file():
                found.add(candidate.as_posix())
                return

    for node in ast.walk(ast.parse((PACKAGE / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_llmeval"):
            add(node.module or "")
            for alias in node.names:  # `from pytest_llmeval.scorers import multiple_choice` names a module
                add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pytest_llmeval"):
                    add(alias.name)
    return found


@pytest.mark.parametrize("paths", [CODE_PATHS, SERVED_CODE_PATHS], ids=["weights", "served"])
def test_every_module_the_code_fingerprint_hashes_exists(paths: tuple[str, ...]) -> None:
    """The cache's code fingerprint hashes modules by path: a module moved elsewhere would leave a path that
    hashes nothing, and the cache would silently stop seeing code changes."""
    assert [path for path in paths if not (PACKAGE / path).is_file()] == []
    assert cache_module.code_fingerprint(paths) == cache_module.code_fingerprint(paths)  # reads them all


@pytest.mark.parametrize("paths", [CODE_PATHS, SERVED_CODE_PATHS], ids=["weights", "served"])
def test_every_module_on_the_path_is_in_the_code_fingerprint(paths: tuple[str, ...]) -> None:
    """Code moved out of a fingerprinted module into a new one (which it then imports) must join the key, or
    be named, with the reason, as unable to change an output: else the cache serves the old code's values."""
    unlisted = {
        f"{path} imports {imported}"
        for path in paths
        for imported in package_imports(path)
        if imported not in paths and imported not in OUTSIDE_THE_KEY
    }
    assert sorted(unlisted) == []
    assert package_imports("measures.py") >= {"perplexity.py", "generation.py"}  # the walk finds imports


def test_every_scorers_request_hooks_are_in_the_code_fingerprint() -> None:
    """A measurement is keyed by its row's content: the hooks that turn a row into what a model is asked
    (the options and their pairs, the expected option, the prompt mode, the stop strings) decide its value."""
    from pytest_llmeval.scorers import SCORERS

    hooks = ("options", "pair", "expected_option", "completion", "stop", "needs_greedy")
    files = {
        f"{name}.{hook}": Path(inspect.getfile(function)).resolve().relative_to(PACKAGE).as_posix()
        for name, spec in SCORERS.items()
        for hook in hooks
        if callable(function := getattr(spec, hook, None))
    }
    assert "multiple_choice.pair" in files  # the hooks are found
    for paths in (CODE_PATHS, SERVED_CODE_PATHS):
        assert {hook: path for hook, path in files.items() if path not in paths} == {}


def test_the_code_fingerprint_follows_a_request_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit to a scorer's pairing of context and choice changes the key (it was outside it before)."""
    copy = tmp_path / "pytest_llmeval"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache_module, "__file__", str(copy / "cache.py"))
    before = cache_module.code_fingerprint()
    target = copy / "scorers" / "multiple_choice.py"
    target.write_text(target.read_text(encoding="utf-8") + "\n# an edit\n", encoding="utf-8")
    assert cache_module.code_fingerprint() != before


def test_batch_invariance_only_for_exact_float32() -> None:
    assert batch_invariant("float32", "cpu")
    assert batch_invariant("float32", "cuda")
    assert not batch_invariant("float32", "cuda", tf32=True)
    assert not batch_invariant("bfloat16", "cuda")
    assert not batch_invariant("float16", "cuda")
    assert not batch_invariant("bfloat16", "cpu")
    assert not batch_invariant("float32", "mps")


def test_float32_generates_only_the_misses(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path / "store")
    cache.generate(FIXED, "base", PROMPTS[:2], LIMITS[:2], Generator())
    gen = Generator()
    out = cache.generate(FIXED, "base", PROMPTS, LIMITS, gen)
    # The two known rows are served although they were generated in another batch: float32 outputs do
    # not depend on it. Only the new row is generated.
    assert gen.calls == [PROMPTS[2:]]
    assert out == [f"{p}|{n}" for p, n in zip(PROMPTS, LIMITS, strict=True)]
    assert cache.stats.hits["base"] == 2 and cache.stats.misses["base"] == 3


def test_bfloat16_outputs_are_keyed_by_their_batch(tmp_path: Path) -> None:
    bf16 = dataclasses.replace(FIXED, dtype="bfloat16", device="cuda/NVIDIA H100", batch_invariant=False)
    cache = GenerationCache(tmp_path / "store")
    cache.generate(bf16, "base", PROMPTS, LIMITS, Generator())
    # The same rows in another batch are not served: in bf16 they could come out differently there.
    gen = Generator()
    cache.generate(bf16, "base", PROMPTS[:2], LIMITS[:2], gen)
    assert gen.calls == [PROMPTS[:2]]
    # The same batch again: all served.
    gen = Generator()
    cache.generate(bf16, "base", PROMPTS, LIMITS, gen)
    assert gen.calls == []
    # One entry of the batch lost: the whole batch is generated again, so every row comes from the batch
    # its key names (the other two are not generated in a batch of one).
    lost = key_material(bf16, "base", PROMPTS[1], LIMITS[1], batch_digest(PROMPTS, LIMITS))
    cache.path_for(entry_key(lost)).unlink()
    gen = Generator()
    cache.generate(bf16, "base", PROMPTS, LIMITS, gen)
    assert gen.calls == [PROMPTS]


# --- file index -------------------------------------------------------------------------------------------


def test_same_size_edit_is_seen_at_once(tmp_path: Path) -> None:
    path = write(tmp_path / "model.safetensors", b"x" * 4096)
    index = FileIndex(tmp_path / "index.json")
    before = index.digests([path])
    same_size_edit(path)  # within the same clock tick, possibly with the same mtime
    assert index.digests([path]) != before
    assert FileIndex(tmp_path / "index.json").digests([path]) == index.digests([path])


def test_same_size_edit_with_mtime_restored_is_seen(tmp_path: Path) -> None:
    path = write(tmp_path / "model.safetensors", b"x" * 4096)
    old = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(old, old))
    index = FileIndex(tmp_path / "index.json")
    before = index.digests([path])
    same_size_edit(path)
    os.utime(path, ns=(old, old))  # what `cp -p` or `touch -d` would leave: only ctime tells
    assert index.digests([path]) != before


def test_unchanged_files_are_not_read_again(tmp_path: Path) -> None:
    old = time.time_ns() - 3600 * 10**9
    files = [write(tmp_path / f"shard-{i}.safetensors", bytes([i]) * 1000) for i in range(3)]
    for f in files:
        os.utime(f, ns=(old, old))
    first = FileIndex(tmp_path / "index.json")
    digests = first.digests(files)
    assert first.hashed == 3
    second = FileIndex(tmp_path / "index.json")
    assert second.digests(files) == digests
    assert second.hashed == 0
    # A file written just now is read every time until it is older than the clock's granularity.
    fresh = write(tmp_path / "fresh.json", b"{}")
    second.digests([fresh])
    second.digests([fresh])
    assert second.hashed == 2


def test_damaged_index_is_reported_and_rebuilt(tmp_path: Path) -> None:
    path = write(tmp_path / "model.safetensors", b"weights")
    index_path = tmp_path / "index.json"
    right = FileIndex(index_path).digests([path])
    index_path.write_bytes(b'{"format": 1, "files": {"/x": {"stat": [1')  # truncated
    index = FileIndex(index_path)
    assert index.digests([path]) == right
    assert any("damaged" in p for p in index.problems)
    assert json.loads(index_path.read_text())["format"] == 1  # rewritten whole
    # An entry that lies about the hash of a file is never trusted blindly: a wrong type is dropped.
    data = json.loads(index_path.read_text())
    data["files"][str(path.resolve())]["sha256"] = 42
    index_path.write_text(json.dumps(data))
    again = FileIndex(index_path)
    assert again.digests([path]) == right
    assert any("dropped" in p for p in again.problems)


# --- concurrent writers -----------------------------------------------------------------------------------


def _concurrent_writer(root: str, start: int, barrier: Any, results: Any) -> None:
    """One xdist worker's share: write and read back 40 keys, half of them another process's too."""
    cache = GenerationCache(Path(root))
    wrong = 0
    barrier.wait()
    for _ in range(3):
        for k in range(start, start + 40):
            material = key_material(FIXED, SIDES[k % 2], f"prompt {k}", 8)
            cache.put(material, f"output {k} " + "x" * (k * 37 % 500))
            if cache.get(material) != f"output {k} " + "x" * (k * 37 % 500):
                wrong += 1
    results.put((start, wrong, cache.take_problems()))


def test_concurrent_writers_leave_every_entry_whole(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch threads
    barrier = context.Barrier(4)
    results = context.Queue()
    starts = [0, 20, 40, 60]  # keys 0-99, most written by two processes at once
    procs = [
        context.Process(target=_concurrent_writer, args=(str(tmp_path / "store"), s, barrier, results))
        for s in starts
    ]
    for p in procs:
        p.start()
    reports = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(r[0] for r in reports) == starts
    assert all(wrong == 0 and problems == [] for _, wrong, problems in reports)
    cache = GenerationCache(tmp_path / "store")
    for k in range(100):
        assert cache.get(key_material(FIXED, SIDES[k % 2], f"prompt {k}", 8)) == f"output {k} " + "x" * (
            k * 37 % 500
        )
    assert cache.take_problems() == []
    # No temporary file left behind, and one entry per key.
    entries = [p for p in (tmp_path / "store" / "v1").rglob("*") if p.is_file()]
    assert len(entries) == 100 and all(p.suffix == ".json" and not p.name.startswith(".") for p in entries)


# --- damaged entries --------------------------------------------------------------------------------------


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_output(path: Path) -> None:
    # Still valid JSON with every field in place: only the checksum can tell.
    path.write_bytes(path.read_bytes().replace(b"base:<user>Say hello.", b"base:<user>Say HELLO."))


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[10] ^= 0x55
    path.write_bytes(bytes(data))


def other_key(path: Path) -> None:
    # A sound entry (its own checksum is right) in the file of another key.
    other = next(p for p in path.parent.parent.parent.rglob("*.json") if p != path)
    path.write_bytes(other.read_bytes())


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (truncate, "not valid JSON"),
    "flipped output": (flip_output, "checksum mismatch"),
    "flipped byte": (flip_byte, ""),
    "wrong key inside": (other_key, "another key"),
    "empty": (lambda p: p.write_bytes(b""), "not valid JSON"),
    "not an entry": (lambda p: p.write_text("[1, 2]"), "not an entry"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entry_is_a_reported_miss_and_repaired(tmp_path: Path, damage: str) -> None:
    cache = GenerationCache(tmp_path / "store")
    first, _ = run_both(cache, FIXED)
    material = key_material(FIXED, "base", PROMPTS[2], LIMITS[2])
    damage_fn, message = DAMAGE[damage]
    damage_fn(cache.path_for(entry_key(material)))

    after = GenerationCache(tmp_path / "store")
    gen = Generator("base:")
    assert after.generate(FIXED, "base", PROMPTS, LIMITS, gen) == first
    assert gen.calls == [PROMPTS[2:]]  # only the damaged row is generated again, never served
    problems = after.take_problems()
    assert len(problems) == 1 and "damaged entry" in problems[0] and message in problems[0]
    assert str(after.path_for(entry_key(material))) in problems[0]
    assert after.stats.damaged == 1 and after.stats.hits["base"] == 2

    repaired = GenerationCache(tmp_path / "store")
    assert repaired.generate(FIXED, "base", PROMPTS, LIMITS, Generator("never:")) == first
    assert repaired.take_problems() == [] and repaired.stats.hits["base"] == 3


def test_unwritable_store_is_reported_once_and_not_fatal(tmp_path: Path) -> None:
    blocker = write(tmp_path / "store", b"a file where the folder should be")
    cache = GenerationCache(blocker)
    assert run_both(cache, FIXED)[0][0] == "base:" + PROMPTS[0] + "|16"
    problems = cache.take_problems()
    assert len([p for p in problems if "not written" in p]) == 1


def test_stats_sum_over_workers_and_summary() -> None:
    total = CacheStats()
    total.add({"hits": {"base": 60, "adapter": 0}, "misses": {"base": 4, "adapter": 64}, "damaged": 1})
    total.add(CacheStats(hits={"base": 56, "adapter": 0}, misses={"base": 0, "adapter": 56}).to_json())
    info = {"dir": ".pytest_cache/d/llmeval", **total.to_json()}
    assert info["hits"] == {"base": 116, "adapter": 0}
    line = summary_line(info)
    assert "base 116 of 120 rows from the cache" in line and "adapter 0 of 120" in line
    assert "1 damaged" in line


# --- on a real (tiny) model -------------------------------------------------------------------------------


def changed_adapter(adapter: Path, target: Path) -> Path:
    """A copy of the adapter with one LoRA tensor nudged: a new version of it."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(adapter, target)
    weights = target / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    name = sorted(n for n in tensors if "lora_B" in n)[0]
    tensors[name] = tensors[name] * 1.5
    save_file(tensors, str(weights), metadata={"format": "pt"})
    return target


@pytest.fixture(scope="module")
def tiny_with_adapter(tiny_model: Path, tiny_adapter: Path) -> LoadedModel:
    return load(ModelSpec(base_model=str(tiny_model), adapter=tiny_adapter, device="cpu"))


def cached_run(cache: GenerationCache, loaded: LoadedModel) -> tuple[list[str], list[str]]:
    """The evaluator's _generate through the cache: one batch per side, misses generated together."""
    from pytest_llmeval.generation import build_prompt, generate

    prompts = [build_prompt(loaded.tokenizer, "Convert the date.", d) for d in ("Jan 5", "May 7", "today")]
    limits = [4, 4, 3]
    identity = identify(loaded, cache.index)

    def side(adapter: bool) -> list[str]:
        def produce(batch: list[str], batch_limits: list[int]) -> list[str]:
            with loaded.adapter_enabled(adapter):
                return generate(
                    loaded.model, loaded.tokenizer, batch, max_new_tokens=batch_limits, batch_size=len(batch)
                )

        return cache.generate(identity, "adapter" if adapter else "base", prompts, limits, produce)

    return side(False), side(True)


def test_tiny_model_second_run_is_served_and_identical(
    tmp_path: Path, tiny_with_adapter: LoadedModel
) -> None:
    first = GenerationCache(tmp_path / "store")
    base, adapter = cached_run(first, tiny_with_adapter)
    assert first.stats.misses == {"base": 3, "adapter": 3}
    assert base != adapter and all(base) and all(adapter)
    second = GenerationCache(tmp_path / "store")
    assert cached_run(second, tiny_with_adapter) == (base, adapter)
    assert second.stats.hits == {"base": 3, "adapter": 3} and second.stats.misses == {"base": 0, "adapter": 0}
    assert second.take_problems() == []


def test_tiny_model_new_adapter_reuses_base_outputs(
    tmp_path: Path, tiny_model: Path, tiny_adapter: Path, tiny_with_adapter: LoadedModel
) -> None:
    cache = GenerationCache(tmp_path / "store")
    base, _ = cached_run(cache, tiny_with_adapter)
    new = changed_adapter(tiny_adapter, tmp_path / "adapter-v2")
    loaded = load(ModelSpec(base_model=str(tiny_model), adapter=new, device="cpu"))
    after = GenerationCache(tmp_path / "store")
    base2, adapter2 = cached_run(after, loaded)
    assert after.stats.hits == {"base": 3, "adapter": 0} and after.stats.misses == {"base": 0, "adapter": 3}
    assert base2 == base
    # What was generated for the new adapter is what it generates without any cache.
    uncached = cached_run(GenerationCache(tmp_path / "empty"), loaded)
    assert adapter2 == uncached[1]
    assert identify(loaded, after.index).base == identify(tiny_with_adapter, after.index).base


def test_identify_reads_contents_not_paths(tmp_path: Path, tiny_with_adapter: LoadedModel) -> None:
    index = FileIndex(tmp_path / "index.json")
    identity = identify(tiny_with_adapter, index)
    assert identity.dtype == "float32" and identity.device.startswith("cpu/") and identity.batch_invariant
    assert identity.adapter is not None
    assert set(identity.software) == {"torch", "transformers", "peft", "code"}
    copy = Path(shutil.copytree(tiny_with_adapter.base.path, tmp_path / "copy"))
    elsewhere = ResolvedBase(name="copy", path=str(copy), quantization=None)
    moved = copy_module.copy(tiny_with_adapter)  # the same loaded model, said to come from the copy
    moved.base = elsewhere
    assert identify(moved, index) == identity
    same_size_edit(copy / "model.safetensors")
    changed = identify(moved, index)
    assert changed.base != identity.base and changed.tokenizer == identity.tokenizer


# --- through the plugin --------------------------------------------------------------------------------


def plugin_outputs(pytester: pytest.Pytester, name: str) -> tuple[dict[str, Any], list[list[Any]]]:
    """results.json's inference_config.cache, and each row's [id, base output, adapter output]."""
    doc = json.loads((pytester.path / name).read_text())
    rows = [
        [r["id"], r["models"]["base"]["output"], r["models"].get("adapter", {}).get("output")]
        for r in doc["benchmarks"][0]["rows"]
    ]
    return doc["inference_config"]["cache"], rows


def test_plugin_second_run_and_new_adapter_version(
    pytester: pytest.Pytester, tmp_path: Path, tiny_model: Path, tiny_adapter: Path
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}", input=f"item {i}") for i in range(6)]))
    args = [f"--base-model={tiny_model}", "-m", "not gate", "--llmeval-batch-size=4"]
    first = pytester.runpytest(*args, f"--adapter={tiny_adapter}", "--llmeval-results=first.json")
    cache, rows = plugin_outputs(pytester, "first.json")
    assert cache["misses"] == {"base": 6, "adapter": 6} and cache["hits"] == {"base": 0, "adapter": 0}
    first.stdout.fnmatch_lines(["*generation cache *: base 0 of 6 rows from the cache, adapter 0 of 6*"])
    # Under xdist every worker serves its own chunks; the controller sums their counts.
    pytester.runpytest(*args, f"--adapter={tiny_adapter}", "-n", "2", "--llmeval-results=second.json")
    cache2, rows2 = plugin_outputs(pytester, "second.json")
    assert cache2["hits"] == {"base": 6, "adapter": 6} and cache2["misses"] == {"base": 0, "adapter": 0}
    assert rows2 == rows
    new = changed_adapter(tiny_adapter, tmp_path / "adapter-v2")
    pytester.runpytest(*args, f"--adapter={new}", "--llmeval-results=third.json")
    cache3, rows3 = plugin_outputs(pytester, "third.json")
    assert cache3["hits"] == {"base": 6, "adapter": 0} and cache3["misses"] == {"base": 0, "adapter": 6}
    assert [r[:2] for r in rows3] == [r[:2] for r in rows]


def test_plugin_damaged_entry_warns_and_no_cache(pytester: pytest.Pytester, tiny_model: Path) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}", input=f"item {i}") for i in range(3)]))
    # Without the cacheprovider the cache stays where the cacheprovider would put it.
    args = [f"--base-model={tiny_model}", "-m", "not gate", "-p", "no:cacheprovider"]
    pytester.runpytest(*args)
    _, rows = plugin_outputs(pytester, "results.json")
    entries = sorted((pytester.path / ".pytest_cache" / "d" / "llmeval" / "v1").rglob("*.json"))
    assert len(entries) == 3
    truncate(entries[0])
    damaged = pytester.runpytest(*args)
    damaged.stdout.fnmatch_lines(["*LLMEvalWarning: generation cache: damaged entry*not valid JSON*"])
    cache, rows2 = plugin_outputs(pytester, "results.json")
    assert cache["damaged"] == 1 and cache["misses"]["base"] == 1 and rows2 == rows
    pytester.runpytest(*args, "--llmeval-no-cache")
    assert plugin_outputs(pytester, "results.json")[0] == {"enabled": False}
    both = pytester.runpytest(*args, "--llmeval-no-cache", "--llmeval-cache-dir=elsewhere")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*--llmeval-no-cache and --llmeval-cache-dir*"])


def test_plugin_fully_cached_rerun_loads_no_weights(
    pytester: pytest.Pytester, tmp_path: Path, tiny_model: Path, tiny_adapter: Path
) -> None:
    """Generated, perplexity and multiple-choice rows: the second run finds every output and measurement in
    the cache and never loads the weights (results.json says so), with the same rows; a new adapter
    version loads them again, on its first miss."""
    pytester.makeini("[pytest]\n")
    measured = [
        row(
            "p1",
            instruction="",
            input="Some text to measure, twice over.",
            expected="",
            evaluation_type="perplexity",
            evaluation_config={"threshold": 1e9},
        ),
        row(
            "m1",
            instruction="Pick a colour",
            expected="red",
            evaluation_type="multiple_choice",
            evaluation_config={"choices": ["red", "green"]},
        ),
    ]
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}", input=f"item {i}") for i in range(3)] + measured))
    args = [f"--base-model={tiny_model}", "-m", "not gate"]

    def run(name: str, adapter: Path = tiny_adapter) -> dict[str, Any]:
        pytester.runpytest(*args, f"--adapter={adapter}", f"--llmeval-results={name}")
        return json.loads((pytester.path / name).read_text())

    def rows(doc: dict[str, Any]) -> list[Any]:
        return [[r["id"], r["models"]] for r in doc["benchmarks"][0]["rows"]]

    first = run("first.json")
    assert first["inference_config"]["weights_loaded"] is True
    assert first["inference_config"]["cache"]["misses"] == {"base": 5, "adapter": 5}
    second = run("second.json")
    assert second["inference_config"]["weights_loaded"] is False
    assert second["inference_config"]["cache"]["hits"] == {"base": 5, "adapter": 5}
    assert second["inference_config"]["cache"]["misses"] == {"base": 0, "adapter": 0}
    assert rows(second) == rows(first)
    new = changed_adapter(tiny_adapter, tmp_path / "adapter-v2")
    third = run("third.json", new)
    assert third["inference_config"]["weights_loaded"] is True
    assert third["inference_config"]["cache"]["hits"]["base"] == 5
