"""One long row among short ones: generation with the token budget against without it, same rows, same run.

    python bench/token_budget.py [--short 31] [--long-words 800] [--budget 32768]

The rows of a chunk: `--short` short rows from the shipped benchmarks and one row whose input is a long
document. The reference is what generation did before: one batch padded to the long row's length (every
short row pays for its attention and KV cache). Batched as now (token budget, and no row padded beyond 4x
its length), the long row is generated alone. Prints both times, the padded tokens each way, and the ratio
(reference / now). Outputs are checked identical (float32 on CPU).
The two are run alternately and the best of each is kept, since these machines are noisy.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pytest_llmeval.generation import build_prompt, generate, token_batches
from pytest_llmeval.models import ModelSpec, load
from pytest_llmeval.scorers import SCORERS, read_benchmark

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=31)
    parser.add_argument("--long-words", type=int, default=800)
    parser.add_argument("--budget", type=int, default=32768)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    cases = [
        c
        for path in sorted((REPO / "benchmarks").glob("*.jsonl"))
        for c in read_benchmark(path).cases
        if SCORERS[c.evaluation_type].measure is None
    ][: args.short]
    loaded = load(ModelSpec(dtype="float32", device="cpu"))
    tok = loaded.tokenizer
    document = " ".join(
        f"sentence {i} of a long report about dates and places." for i in range(args.long_words // 9)
    )
    prompts = [build_prompt(tok, "Summarise the report in one line.", document)]
    prompts += [build_prompt(tok, c.instruction, c.input) for c in cases]
    limits = [args.max_new_tokens] * len(prompts)
    lengths = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: (-lengths[i], i))

    def padded(budget: int | None) -> int:
        batches = token_batches(order, lengths, limits, len(prompts), budget, **old(budget))
        return sum(len(b) * (max(lengths[i] for i in b) + args.max_new_tokens) for b in batches)

    def old(budget: int | None) -> dict[str, float]:
        # The reference (budget None) is one batch whatever the lengths: no padding limit either.
        return {"max_padding": float("inf")} if budget is None else {}

    def timed(budget: int | None) -> tuple[float, list[str]]:
        start = time.perf_counter()
        out = generate(
            loaded.model,
            tok,
            prompts,
            max_new_tokens=limits,
            batch_size=len(prompts),
            token_budget=budget,
            **old(budget),
        )
        return time.perf_counter() - start, out

    print(
        f"{len(prompts)} rows on {loaded.device} {loaded.dtype}: one of {lengths[0]} prompt tokens, "
        f"{len(prompts) - 1} of {min(lengths[1:])}-{max(lengths[1:])}; max_new_tokens {args.max_new_tokens}"
    )
    best: dict[str, float] = {}
    outputs: dict[str, list[str]] = {}
    for _ in range(args.repeats):
        for name, budget in (
            ("one batch (reference)", None),
            (f"now (budget {args.budget}, 4x)", args.budget),
        ):
            seconds, out = timed(budget)
            best[name] = min(best.get(name, float("inf")), seconds)
            outputs[name] = out
    reference, budgeted = best.values()
    for (name, seconds), budget in zip(best.items(), (None, args.budget), strict=True):
        print(f"{name:28s} {seconds:7.2f} s   padded tokens {padded(budget):,}")
    same = len({tuple(o) for o in outputs.values()}) == 1
    print(f"ratio (reference / now): {reference / budgeted:.2f}x; outputs identical: {same}")


if __name__ == "__main__":
    main()
