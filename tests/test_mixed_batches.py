"""Every column of the shared weights in one generation batch (issue 40): peft's mixed-adapter batches.

The decoder on a tiny random Llama with two random LoRA adapters (one mixed batch gives each row the tokens
its own adapter gives it alone); the plugin end to end on the embedded SmolLM2 with both demo adapters
(results.json the same with --llmeval-mixed-batches on and off, serially and with -n 2).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import EXPLODER, REPO, build_tiny_adapter, build_tiny_model, jsonl, row

from pytest_llmeval.generation import BASE_ADAPTER, Tokens, build_prompt, generate
from pytest_llmeval.models import LoadedModel, ModelSpec, load

pytest_plugins = ["pytester"]

# One instruction (a shared prefix of the chat template's system turn and more), inputs of several lengths.
INSTRUCTION = "Rewrite the following text in plain English, keeping every number as it is."
INPUTS = [
    "Hi.",
    "The meeting moved to 3 pm on the 4th.",
    "Our quarterly revenue grew by 12 percent while costs stayed flat, which pleased the board a lot.",
    "OK",
    "Please send the 2 reports before Friday, or call me at noon.",
    "Done.",
]
# Per-row limits: short rows leave the batch while the others decode on.
LIMITS = [3, 12, 7, 1, 12, 5]


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny base and two random LoRA adapters of it (non-zero B), named alpha and beta."""
    out = {"base": build_tiny_model(tmp_path_factory.mktemp("mixed-base"))}
    for name, seed in (("alpha", 1), ("beta", 2)):
        path = build_tiny_adapter(out["base"], tmp_path_factory.mktemp(name) / name, seed=seed)
        (path / "metadata.json").write_text(json.dumps({"name": name, "version": "0.1"}))
        out[name] = path
    return out


@pytest.fixture(scope="module")
def two_adapters(tiny_pair: dict[str, Path]) -> LoadedModel:
    """The tiny base with both adapters loaded onto it, float32 on CPU."""
    return load(
        ModelSpec(
            base_model=str(tiny_pair["base"]),
            adapter=tiny_pair["alpha"],
            more_adapters=(tiny_pair["beta"],),
            dtype="float32",
            device="cpu",
        )
    )


def test_one_mixed_batch_equals_a_pass_per_adapter(two_adapters: LoadedModel) -> None:
    loaded = two_adapters
    prompts = [build_prompt(loaded.tokenizer, INSTRUCTION, x) for x in INPUTS]
    sides: list[str | None] = [None, "alpha", "beta"]
    separate: dict[str | None, tuple[list[str], list[int]]] = {}
    for side in sides:
        counts = Tokens()
        with loaded.active(side):
            texts = generate(
                loaded.model, loaded.tokenizer, prompts, max_new_tokens=LIMITS, batch_size=8, counts=counts
            )
        separate[side] = texts, counts.generated
    # The adapters change the outputs: otherwise a mixed batch that ignored them would pass too.
    assert separate["alpha"][0] != separate[None][0] and separate["beta"][0] != separate["alpha"][0]

    # Rows of the three columns interleaved, as the cache wrapper sends its misses.
    order = [(side, i) for i in range(len(prompts)) for side in sides]
    counts = Tokens()
    mixed = generate(
        loaded.model,
        loaded.tokenizer,
        [prompts[i] for _, i in order],
        max_new_tokens=[LIMITS[i] for _, i in order],
        batch_size=len(order),
        counts=counts,
        adapters=[BASE_ADAPTER if side is None else side for side, _ in order],
    )
    for k, (side, i) in enumerate(order):
        assert mixed[k] == separate[side][0][i], (side, INPUTS[i])
        assert counts.generated[k] == separate[side][1][i], (side, INPUTS[i])


def test_one_adapter_name_per_prompt(two_adapters: LoadedModel) -> None:
    loaded = two_adapters
    with pytest.raises(ValueError, match="one adapter per prompt"):
        generate(
            loaded.model, loaded.tokenizer, ["a", "b"], max_new_tokens=2, batch_size=2, adapters=["alpha"]
        )


# ---------------------------------------------------------------------------------------------------------
# The plugin on the tiny models: the cache, a failing batch.


def tiny_run(
    pytester: pytest.Pytester, models: dict[str, Path], mode: str, out: str, *extra: str
) -> dict[str, Any]:
    """One run of bench.jsonl on the tiny base and both adapters; its results.json."""
    pytester.runpytest(
        f"--base-model={models['base']}",
        f"--adapter={models['alpha']}",
        f"--adapter={models['beta']}",
        f"--llmeval-mixed-batches={mode}",
        "--llmeval-no-history",
        "--llmeval-batch-size=8",
        "-m",
        "not gate",
        "-p",
        "no:cacheprovider",
        f"--llmeval-results={out}",
        *extra,
    )
    doc: dict[str, Any] = json.loads((pytester.path / out).read_text(encoding="utf-8"))
    return doc


def tiny_rows(pytester: pytest.Pytester, *, explode: int | None = None) -> None:
    rows = [
        row(f"r{i}", instruction=f"Question {i}?", evaluation_config={"max_new_tokens": 2 + i % 4})
        for i in range(8)
    ]
    if explode is not None:
        rows[explode]["instruction"] = "EXPLODE please"
    pytester.makefile(".jsonl", bench=jsonl(rows))


def test_mixed_and_separate_runs_serve_each_other_from_the_cache(
    pytester: pytest.Pytester, tiny_pair: dict[str, Path]
) -> None:
    tiny_rows(pytester)
    for first, second in (("on", "off"), ("off", "on")):
        cache = f"--llmeval-cache-dir={pytester.path / f'cache-{first}'}"
        made = tiny_run(pytester, tiny_pair, first, f"{first}-first.json", cache)
        served = tiny_run(pytester, tiny_pair, second, f"{second}-second.json", cache)
        assert made["inference_config"]["cache"]["misses"] == {"base": 8, "adapter": 16}
        assert served["inference_config"]["cache"]["misses"] == {"base": 0, "adapter": 0}
        assert served["inference_config"]["cache"]["hits"] == {"base": 8, "adapter": 16}
        assert rows_of(made) == rows_of(served)


def test_a_failing_mixed_batch_is_split_by_rows(
    pytester: pytest.Pytester, tiny_pair: dict[str, Path]
) -> None:
    pytester.makeconftest(EXPLODER)
    tiny_rows(pytester, explode=5)
    mixed = tiny_run(pytester, tiny_pair, "on", "on.json", "--llmeval-no-cache")
    alone = tiny_run(pytester, tiny_pair, "off", "off.json", "--llmeval-no-cache")
    # The failing row is the same error (the column it failed in first), every other row the same outputs.
    assert rows_of(mixed) == rows_of(alone)
    errors = {r["id"]: r["error"] for r in mixed["benchmarks"][0]["rows"]}
    assert errors == {r["id"]: r["error"] for r in alone["benchmarks"][0]["rows"]}
    assert (
        errors.pop("r5")
        == "bench.jsonl:6: generation failed (base): RuntimeError: cannot generate this input"
    )
    assert set(errors.values()) == {None}
    # 8 rows of three columns -> 4 + 4 -> the failing 4 -> 2 + 2 -> the failing 2 -> 1 + 1, all columns of a
    # row together; the row alone is then generated column by column (the base fails: the others are not).
    retries = mixed["inference_config"]["batch_retries"]
    assert [(r["side"], r["rows"]) for r in retries] == [("base+alpha+beta", n) for n in (8, 4, 2)]


# ---------------------------------------------------------------------------------------------------------
# End to end: the embedded SmolLM2 with both demo adapters, results.json the same with and without.

ROWS = 3  # per benchmark: a handful keeps the runs short


def rows_of(doc: dict[str, Any]) -> list[Any]:
    """bench/cached_rerun.py's comparison: every row's every column, clocks aside."""
    return sorted(
        (b["benchmark_file"], r["id"], json.dumps(r["models"], sort_keys=True))
        for b in doc["benchmarks"]
        for r in b["rows"]
    )


@pytest.mark.slow
def test_results_are_the_same_with_and_without_mixed_batches(pytester: pytest.Pytester) -> None:
    for name in ("dates", "sentiment"):
        lines = (REPO / "benchmarks" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        (pytester.path / f"{name}.jsonl").write_text("\n".join(lines[:ROWS]) + "\n", encoding="utf-8")
    for name in ("date-iso", "sentiment"):
        shutil.copytree(REPO / "adapters" / name, pytester.path / "adapters" / name)
    docs: dict[str, list[Any]] = {}
    # Off with -n 2 is off serially (tests/test_several_models.py): on serially, off, on with -n 2.
    for mode, workers in (("on", ()), ("off", ()), ("on", ("-n", "2"))):
        out = f"{mode}-{len(workers)}.json"
        result = pytester.runpytest(
            "--adapter=adapters/date-iso",
            "--adapter=adapters/sentiment",
            "dates.jsonl",
            "sentiment.jsonl",
            f"--llmeval-mixed-batches={mode}",
            "--llmeval-device=cpu",
            "--llmeval-dtype=float32",
            "--llmeval-no-cache",
            "--llmeval-no-history",
            "--llmeval-batch-size=4",
            "-m",
            "not gate",
            "-p",
            "no:cacheprovider",
            f"--llmeval-results={out}",
            *workers,
        )
        assert (pytester.path / out).is_file(), result.stdout.str()[-3000:]
        doc = json.loads((pytester.path / out).read_text(encoding="utf-8"))
        assert len(doc["benchmarks"]) == 2 and all(len(b["rows"]) == ROWS for b in doc["benchmarks"])
        docs[out] = rows_of(doc)
    first = docs["on-0.json"]
    # The adapters answer differently from the base on some row: the comparison compares columns that differ.
    columns = [json.loads(models) for _, _, models in first]
    assert any(len({m[c]["output"] for c in m}) > 1 for m in columns)
    for name, rows in docs.items():
        assert rows == first, name


RECORDER = """
from pytest_llmeval import generation

_original = generation.generate


def _recording(model, tokenizer, prompts, **kwargs):
    with open("calls.txt", "a") as out:
        out.write(("mixed" if kwargs.get("adapters") else "alone") + "\\n")
    return _original(model, tokenizer, prompts, **kwargs)


def pytest_configure(config):
    generation.generate = _recording


def pytest_unconfigure(config):
    generation.generate = _original
"""


def test_rounding_dtypes_with_the_cache_generate_column_by_column(
    pytester: pytest.Pytester, tiny_pair: dict[str, Path]
) -> None:
    """A bfloat16 output is keyed by the batch it was made in (cache.batch_digest); one made in a mixed
    batch is not the batch its key names, so with the cache on the columns go one at a time; without it
    (nothing stored under a wrong key) they share the batch."""
    pytester.makeconftest(RECORDER)
    tiny_rows(pytester)
    calls = pytester.path / "calls.txt"
    cache = f"--llmeval-cache-dir={pytester.path / 'cache'}"
    tiny_run(pytester, tiny_pair, "on", "cached.json", "--llmeval-dtype=bfloat16", cache)
    assert set(calls.read_text().split()) == {"alone"}
    calls.unlink()
    tiny_run(pytester, tiny_pair, "on", "uncached.json", "--llmeval-dtype=bfloat16", "--llmeval-no-cache")
    assert set(calls.read_text().split()) == {"mixed"}
    calls.unlink()
    tiny_run(pytester, tiny_pair, "on", "float32.json", "--llmeval-dtype=float32", cache)
    assert set(calls.read_text().split()) == {"mixed"}
