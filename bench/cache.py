"""A new version of an adapter evaluated with a warm generation cache, against the first evaluation.

    python bench/cache.py [--adapter adapters/date-iso] [--repeats 2] [--batch-size 32]

Run 1 evaluates the adapter on the generation rows of benchmarks/dates.jsonl and benchmarks/sentiment.jsonl,
base and adapter, with an empty cache (an empty store and an empty file-hash index, as on a new machine).
Run 2 evaluates a new version of the adapter (a copy with one LoRA tensor nudged by 1%) with what run 1
left: the base's outputs are served from the store, the adapter's are generated. Both go through the
library as the evaluator does: chunks of --batch-size rows of each file in file order, one batched generate()
per chunk and side for the misses. Timed: fingerprinting the model files plus generation; loading the
model, the same for both runs, is printed apart. Target: run 2 at least 1.8x faster than run 1.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from pytest_llmeval.benchmark import Case
from pytest_llmeval.cache import FileIndex, GenerationCache, Produce, identify
from pytest_llmeval.generation import build_prompt, generate
from pytest_llmeval.models import LoadedModel, ModelSpec, load
from pytest_llmeval.scorers import SCORERS, read_benchmark

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MAX_NEW_TOKENS = 512  # the evaluator's default for rows without evaluation_config.max_new_tokens


def nudged_copy(adapter: Path, target: Path) -> str:
    """Copy the adapter and scale its first LoRA B tensor by 1.01: a new version of it. Returns the name."""
    from safetensors.torch import load_file, save_file

    for name in ("adapter_config.json", "adapter_model.safetensors", "metadata.json"):
        if (adapter / name).is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(adapter / name, target / name)
    weights = target / "adapter_model.safetensors"
    tensors = load_file(str(weights))
    name = sorted(n for n in tensors if "lora_B" in n)[0]
    tensors[name] = tensors[name] * 1.01
    save_file(tensors, str(weights), metadata={"format": "pt"})
    return name


def producer(loaded: LoadedModel, *, adapter: bool) -> Produce:
    """What the evaluator passes to the cache: one batched generate() of the prompts it is given."""

    def produce(prompts: list[str], limits: list[int]) -> list[str]:
        with loaded.adapter_enabled(adapter):
            return generate(
                loaded.model, loaded.tokenizer, prompts, max_new_tokens=limits, batch_size=len(prompts)
            )

    return produce


def evaluate(
    loaded: LoadedModel, chunks: list[list[Case]], cache: GenerationCache
) -> tuple[float, float, list[str], list[str]]:
    """(seconds in all, seconds fingerprinting, base outputs, adapter outputs) of one cached evaluation."""
    start = time.perf_counter()
    identity = identify(loaded, cache.index)
    fingerprinting = time.perf_counter() - start
    base: list[str] = []
    adapter: list[str] = []
    for chunk in chunks:
        prompts = [build_prompt(loaded.tokenizer, c.instruction, c.input) for c in chunk]
        limits = [int(c.evaluation_config.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)) for c in chunk]
        base += cache.generate(identity, "base", prompts, limits, producer(loaded, adapter=False))
        adapter += cache.generate(identity, "adapter", prompts, limits, producer(loaded, adapter=True))
    return time.perf_counter() - start, fingerprinting, base, adapter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", type=Path, default=REPO / "adapters" / "date-iso")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument(
        "--benchmarks",
        nargs="+",
        type=Path,
        default=[REPO / "benchmarks" / "dates.jsonl", REPO / "benchmarks" / "sentiment.jsonl"],
    )
    args = parser.parse_args()

    import torch

    chunks: list[list[Case]] = []
    for path in args.benchmarks:
        cases = [c for c in read_benchmark(path).cases if SCORERS[c.evaluation_type].measure is None]
        chunks += [cases[i : i + args.batch_size] for i in range(0, len(cases), args.batch_size)]
    rows = sum(len(c) for c in chunks)

    with tempfile.TemporaryDirectory(prefix="llmeval-bench-cache-") as tmp:
        work = Path(tmp)
        tensor = nudged_copy(args.adapter, work / "adapter-v2")
        start = time.perf_counter()
        first = load(ModelSpec(adapter=args.adapter, device=args.device, dtype=args.dtype))
        load_seconds = time.perf_counter() - start
        second = load(ModelSpec(adapter=work / "adapter-v2", device=args.device, dtype=args.dtype))
        print(
            f"model {first.base.name} on {first.device} {first.dtype}, "
            f"torch threads {torch.get_num_threads()}, "
            f"{rows} generation rows in {len(chunks)} chunks of <= {args.batch_size}, base and adapter; "
            f"new adapter version: {tensor} x 1.01; model load {load_seconds:.1f} s (not timed below)"
        )
        best1 = best2 = float("inf")
        for repeat in range(args.repeats):
            # Each repeat starts from nothing: a new store and a new file-hash index.
            store, index = work / f"store-{repeat}", work / f"file-hashes-{repeat}.json"
            cache1 = GenerationCache(store, index=FileIndex(index))
            t1, f1, base1, adapter1 = evaluate(first, chunks, cache1)
            cache2 = GenerationCache(store, index=FileIndex(index))
            t2, f2, base2, adapter2 = evaluate(second, chunks, cache2)
            best1, best2 = min(best1, t1), min(best2, t2)
            changed = sum(a != b for a, b in zip(adapter1, adapter2, strict=True))
            print(
                f"repeat {repeat + 1}: run 1 {t1:.1f} s (fingerprint {f1:.2f} s, "
                f"{cache1.index.hashed} files read) | run 2 {t2:.1f} s (fingerprint {f2:.2f} s, "
                f"{cache2.index.hashed} files read) | ratio {t1 / t2:.2f}x"
            )
            print(f"  run 1 cache: {cache1.stats.to_json()}")
            print(f"  run 2 cache: {cache2.stats.to_json()}")
            print(
                f"  run 2 base outputs equal run 1's: {base1 == base2} ({len(base1)} rows); "
                f"new adapter's outputs differ from the old one's on {changed} rows; "
                f"problems: {cache1.take_problems() + cache2.take_problems() or 'none'}"
            )
            if base1 != base2:
                raise SystemExit("run 2 served base outputs that differ from run 1's")
        print(
            f"best of {args.repeats}: run 1 {best1:.1f} s, run 2 {best2:.1f} s: "
            f"{best1 / best2:.2f}x (target 1.8x)"
        )


if __name__ == "__main__":
    main()
