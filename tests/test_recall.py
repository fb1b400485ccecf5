"""A fully cached re-run loads no model code (issue 40): the tokenizer's, config's and placement's answers of
the previous run come from recall.py's file, and results.json says what it said when they were worked out."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row, without_clocks

from pytest_llmeval.cache import FileIndex
from pytest_llmeval.recall import Recall, setup_key

# Written by the run itself at its very end: which model code this process imported. A separate process
# (runpytest_subprocess): this one has torch imported already.
IMPORTS_PROBE = """
import os
import sys


def pytest_unconfigure(config):
    code = ("torch", "transformers", "peft", "safetensors.torch")
    with open(f"imported-{os.getpid()}.txt", "w") as out:
        out.write(" ".join(m for m in code if m in sys.modules))
"""


def rows(n: int = 6) -> str:
    cases = [row(f"r{i}", instruction=f"Say {i}.", evaluation_config={"max_new_tokens": 3}) for i in range(n)]
    cases.append(
        row("long", instruction="Say it.", input="word " * 3000, evaluation_config={"max_new_tokens": 3})
    )
    return jsonl(cases)


def run(pytester: pytest.Pytester, args: list[str], out: str) -> tuple[str, dict[str, Any]]:
    """A run in its own process: (the model code any of its processes imported, its results.json)."""
    for old in pytester.path.glob("imported-*.txt"):
        old.unlink()
    pytester.runpytest_subprocess(*args, f"--llmeval-results={out}", "--llmeval-no-history")
    doc: dict[str, Any] = json.loads((pytester.path / out).read_text())
    imported = {m for f in pytester.path.glob("imported-*.txt") for m in f.read_text().split()}
    return " ".join(sorted(imported)), doc


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """results.json less what a cached run changes by design: its cache counts, whether it loaded, and the
    tokens it spent (none: a stored output spent nothing)."""
    out = without_clocks(doc)
    out.pop("tokens")
    config = dict(out["inference_config"])
    for key in ("cache", "weights_loaded"):
        config.pop(key)
    return out | {"inference_config": config}


def test_a_fully_cached_rerun_imports_no_model_code(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    pytester.makeconftest(IMPORTS_PROBE)
    pytester.makefile(".jsonl", bench=rows())
    args = [
        *model_args(tiny_model, tiny_adapter, cache=pytester.path / "cache"),
        "--llmeval-context-overflow=truncate-left",
    ]
    imported, first = run(pytester, args, "first.json")
    assert "torch" in imported.split()  # it generated
    imported, again = run(pytester, args, "again.json")
    assert imported == ""
    assert again["inference_config"]["weights_loaded"] is False
    assert sum(again["inference_config"]["cache"]["misses"].values()) == 0
    # The same document: prompts (the long row's cut too), models, tokenizer provenance, device and dtype.
    assert comparable(again) == comparable(first)
    long = next(r for r in again["benchmarks"][0]["rows"] if r["id"] == "long")
    assert long["models"]["base"]["prompt_truncated"]["policy"] == "truncate-left"
    # The workers of -n 2 share the recall of a serial run (no GPU: every process on the CPU).
    imported, parallel = run(pytester, [*args, "-n", "2"], "parallel.json")
    assert imported == ""
    assert comparable(parallel) == comparable(first)


def test_a_changed_input_works_everything_out_again(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    """Another row, or another option that decides a prompt: worked out from the tokenizer (torch imported),
    and the rows that were there before still come from the cache."""
    pytester.makeconftest(IMPORTS_PROBE)
    pytester.makefile(".jsonl", bench=rows())
    args = model_args(tiny_model, tiny_adapter, cache=pytester.path / "cache")
    run(pytester, args, "first.json")
    pytester.makefile(".jsonl", bench=rows(7))
    imported, grown = run(pytester, args, "grown.json")
    assert "torch" in imported.split()
    assert grown["inference_config"]["cache"]["misses"] == {"base": 1, "adapter": 1}
    # Only a row's input changed: its prompt is another, never the one recalled for its old input.
    edited = rows(7).replace('"input": ""', '"input": "now with an input"', 1)
    assert edited != rows(7)
    pytester.makefile(".jsonl", bench=edited)
    _, changed = run(pytester, args, "changed.json")
    assert changed["inference_config"]["cache"]["misses"] == {"base": 1, "adapter": 1}
    imported, _ = run(pytester, [*args, "--llmeval-dtype=bfloat16"], "bf16.json")
    assert "transformers" in imported.split()  # another setup key: its placement is worked out again


def test_the_setup_key_follows_every_file_and_option(
    tmp_path: Path, tiny_model: Path, tiny_adapter: Path
) -> None:
    index = FileIndex(tmp_path / "index.json")

    def key(**changes: Any) -> str:
        parts: dict[str, Any] = {
            "base": tiny_model,
            "adapters": {"adapter": tiny_adapter},
            "options": {"device": "auto"},
            "index": index,
        }
        return setup_key(**(parts | changes))

    first = key()
    assert key() == first
    assert key(options={"device": "cpu"}) != first
    assert key(adapters={}) != first
    copy = tmp_path / "model"
    copy.mkdir()
    for f in tiny_model.iterdir():
        if f.is_file():
            (copy / f.name).write_bytes(f.read_bytes())
    assert key(base=copy) == first  # contents, not paths
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 64}))
    assert key(base=copy) != first


def test_a_damaged_recall_file_is_worked_out_again(tmp_path: Path) -> None:
    path = tmp_path / "recall" / "k.json"
    path.parent.mkdir()
    path.write_text("{not json")
    recall = Recall(path)
    assert recall.get("prompts", "x") is None
    recall.put("prompts", "x", {"prompt": "p", "truncated": None})
    recall.save()
    # Another worker's additions in between are kept: each process merges what it added.
    other = Recall(path)
    other.put("identity", "base", {"base": "b"})
    recall.put("prompts", "y", {"error": "too long"})
    other.save()
    recall.save()
    merged = Recall(path)
    assert merged.get("prompts", "x") == {"prompt": "p", "truncated": None}
    assert merged.get("prompts", "y") == {"error": "too long"}
    assert merged.get("identity", "base") == {"base": "b"}


def outputs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per row id, each column's output and score (what a stale cache would get wrong)."""
    return {
        r["id"]: {c: (s.get("output"), (s.get("score") or {}).get("value")) for c, s in r["models"].items()}
        for b in doc["benchmarks"]
        for r in b["rows"]
    }


def copy_model(source: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file():
            shutil.copy2(f, target / f.name)
    return target


def test_a_model_column_pointed_elsewhere_or_edited_is_never_served_stale(
    pytester: pytest.Pytester, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`--llmeval-model=big=DIR` is recalled by what DIR holds, not by the column's name (issue 53): pointed
    at another folder (serially, and with -n 2), or its weights rewritten in place (same size, old mtime
    restored), the next cached run answers as a run without the cache does."""
    from helpers import build_tiny_model

    first = build_tiny_model(tmp_path_factory.mktemp("big-1"), seed=11)
    second = build_tiny_model(tmp_path_factory.mktemp("big-2"), seed=12)
    third = build_tiny_model(tmp_path_factory.mktemp("big-3"), seed=13)
    pytester.makefile(".jsonl", bench=rows(3))
    cache = pytester.path / "cache"

    def run(folder: Path, out: str, store: list[str], *more: str) -> dict[str, Any]:
        pytester.runpytest(
            *store, "--llmeval-no-history", f"--llmeval-model=big={folder}", f"--llmeval-results={out}", *more
        )
        return json.loads((pytester.path / out).read_text())

    def cached(folder: Path, out: str, *more: str) -> dict[str, Any]:
        return run(folder, out, model_args(tiny_model, cache=cache), *more)

    def fresh(folder: Path, out: str) -> dict[str, Any]:
        return run(folder, out, model_args(tiny_model))

    before = cached(first, "first.json")
    truth = fresh(second, "second-fresh.json")
    assert outputs(truth) != outputs(before)  # the two models answer differently: a stale answer shows
    moved = cached(second, "second.json")
    assert outputs(moved) == outputs(truth)
    described = {m["column"]: m for m in moved["models"]}["big"]
    assert described["fingerprint"] == {m["column"]: m for m in truth["models"]}["big"]["fingerprint"]
    # The same with -n 2: each worker recalls by contents too.
    cached(first, "first-again.json")
    assert outputs(cached(second, "second-xdist.json", "-n", "2")) == outputs(truth)
    # The folder's weights rewritten in place: same size, the old mtime put back.
    weights = second / "model.safetensors"
    stat = weights.stat()
    replacement = (third / "model.safetensors").read_bytes()
    assert len(replacement) == stat.st_size
    weights.write_bytes(replacement)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    edited = cached(second, "edited.json")
    assert outputs(edited) == outputs(fresh(second, "edited-fresh.json"))
    assert outputs(edited) != outputs(moved)


def test_a_model_column_the_cached_run_never_loads_is_described_as_before(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A cached run that reads the shared tokenizer but never `big`'s describes big as a run without the cache
    does (issue 53, found by tests/test_cache_campaign.py). --llmeval-prompt-per-model parts the base from the
    adapter (each its own declared prompt), so their prompts are rendered again with the shared tokenizer,
    while big's prompts are recalled and its outputs stored: big's `models` entry came out without its
    tokenizer and revision, and was kept so for every later run of this setup."""
    from helpers import build_tiny_model

    big = build_tiny_model(tmp_path_factory.mktemp("big"), seed=11)
    cases = [row(f"r{i}", instruction=f"Say {i}.", evaluation_config={"max_new_tokens": 3}) for i in range(2)]
    pytester.makefile(".jsonl", bench=jsonl(cases))
    cache = pytester.path / "cache"

    def run(out: str, *more: str, cached: bool = True) -> dict[str, Any]:
        store = model_args(tiny_model, tiny_adapter, cache=cache if cached else None)
        pytester.runpytest(
            *store, "--llmeval-no-history", f"--llmeval-model=big={big}", f"--llmeval-results={out}", *more
        )
        return json.loads((pytester.path / out).read_text())

    def models(doc: dict[str, Any]) -> dict[str, Any]:
        return {m["column"]: m for m in doc["models"]}

    run("shared.json")
    truth = run("fresh.json", "--llmeval-prompt-per-model", cached=False)
    assert "tokenizer" in models(truth)["big"]
    for out in ("per-model.json", "again.json"):  # the second: from the recall the first one kept
        doc = run(out, "--llmeval-prompt-per-model")
        assert sum(doc["inference_config"]["cache"]["misses"].values()) == 0  # every output was stored
        assert models(doc) == models(truth)
