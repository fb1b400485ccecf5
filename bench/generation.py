"""Rows per second of batched generation against one-row-at-a-time, same rows, same run, embedded model.

    python bench/generation.py [--rows 64] [--batch-size 32] [--adapter adapters/date-iso]

Prints both rates and their ratio (the target is >= 4x on 2 CPU cores), and for context the time of plain
transformers generate() called once per row, as a user would write it. Both paths use the same prompts,
the same per-row max_new_tokens and the same model object; the one-at-a-time path is the same function with
batch_size=1, so the ratio measures batching alone. The two are run alternately (reference, batched,
reference, batched) and the best of each is kept, since these machines are noisy.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pytest_llmeval.generation import build_prompt, generate
from pytest_llmeval.models import ModelSpec, load
from pytest_llmeval.scorers import SCORERS, read_benchmark

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--adapter", type=Path, default=None)
    parser.add_argument(
        "--base-model", default=None, help="default: the embedded model (or the adapter's base)"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument(
        "--benchmarks", nargs="+", type=Path, default=sorted((REPO / "benchmarks").glob("*.jsonl"))
    )
    args = parser.parse_args()

    import torch

    cases = [
        c
        for path in args.benchmarks
        for c in read_benchmark(path).cases
        if SCORERS[c.evaluation_type].measure is None  # perplexity rows generate nothing
    ]
    # Interleave the files so both batched and reference see the same mix of prompt lengths.
    cases = sorted(cases, key=lambda c: (c.line, c.id))[: args.rows]
    loaded = load(
        ModelSpec(base_model=args.base_model, adapter=args.adapter, device=args.device, dtype=args.dtype)
    )
    prompts = [build_prompt(loaded.tokenizer, c.instruction, c.input) for c in cases]
    limits = [int(c.evaluation_config.get("max_new_tokens", 32)) for c in cases]
    print(
        f"model {loaded.base.name} adapter {args.adapter} on {loaded.device} {loaded.dtype}, "
        f"torch threads {torch.get_num_threads()}, {len(prompts)} rows, "
        f"max_new_tokens {min(limits)}-{max(limits)}"
    )

    def timed(batch_size: int) -> tuple[float, list[str]]:
        start = time.perf_counter()
        outputs = generate(
            loaded.model, loaded.tokenizer, prompts, max_new_tokens=limits, batch_size=batch_size
        )
        return time.perf_counter() - start, outputs

    def hf_one_at_a_time() -> tuple[float, list[str]]:
        """What a user would write instead: transformers' generate(), greedy, one prompt per call."""
        from transformers import GenerationConfig

        eos = loaded.tokenizer.eos_token_id
        start = time.perf_counter()
        outputs = []
        for prompt, limit in zip(prompts, limits, strict=True):
            ids = loaded.tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
            config = GenerationConfig(
                max_new_tokens=limit, do_sample=False, eos_token_id=eos, pad_token_id=eos
            )
            with torch.inference_mode():
                out = loaded.model.generate(input_ids=ids.to(loaded.device), generation_config=config)
            text = loaded.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
            outputs.append(str(text).strip())
        return time.perf_counter() - start, outputs

    generate(loaded.model, loaded.tokenizer, prompts[:2], max_new_tokens=2, batch_size=2)  # warm-up
    best_ref = best_batched = float("inf")
    for _ in range(args.repeats):
        t_ref, ref_out = timed(1)
        t_batched, batched_out = timed(args.batch_size)
        best_ref, best_batched = min(best_ref, t_ref), min(best_batched, t_batched)
        same = sum(a == b for a, b in zip(ref_out, batched_out, strict=True))
        print(
            f"  one-at-a-time {t_ref:6.2f}s   batched {t_batched:6.2f}s   "
            f"identical outputs {same}/{len(prompts)}"
        )
    t_hf, hf_out = hf_one_at_a_time()
    same_hf = sum(a == b for a, b in zip(hf_out, batched_out, strict=True))
    print(
        f"  transformers generate() one at a time {t_hf:6.2f}s   identical outputs {same_hf}/{len(prompts)}"
    )
    ref_rate = len(prompts) / best_ref
    batched_rate = len(prompts) / best_batched
    print(f"one-at-a-time: {ref_rate:.2f} rows/s")
    print(f"batched (batch {args.batch_size}): {batched_rate:.2f} rows/s")
    print(f"ratio batched / one-at-a-time: {batched_rate / ref_rate:.2f}x  (target >= 4x)")
    print(f"ratio batched / transformers generate() one at a time: {batched_rate * t_hf / len(prompts):.2f}x")
    if loaded.device.type == "cuda":  # generate() returns token lists, so every timing above is synchronised
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
