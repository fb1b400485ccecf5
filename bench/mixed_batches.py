"""Every column in one batch (issue 40): the base and both demo adapters in one mixed batch per chunk, against
three separate passes (one per column, its adapter set), on the same rows, in one process.

    python bench/mixed_batches.py [--device cpu|cuda] [--rows N] [--repeats 2] [--batch-size 32]

The rows are the shipped benchmarks' generation rows (benchmarks/*.jsonl whose evaluation type generates
text), prompted as the plugin prompts them (generation.build_prompt, each row's max_new_tokens), cut into
chunks of --batch-size rows per benchmark file as the plugin cuts them. The embedded SmolLM2 with
adapters/date-iso and adapters/sentiment loaded by the plugin's own loader (models.load), float32; each
chunk through generation.generate exactly as the local backend calls it (the default token budget): either
once per column, or once with every column's rows and one peft adapter name per row. The order of the two
ways alternates between repeats so that machine noise falls on both; the best of each is printed with the
ratio (mixed / separate), and the two ways' outputs are checked identical, row by row.

Never run it beside another benchmark or the test suite: on 2 cores a contended run reads as a regression.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from pytest_llmeval.backends import production
from pytest_llmeval.generation import BASE_ADAPTER, build_prompt, generate
from pytest_llmeval.models import LoadedModel, ModelSpec, load
from pytest_llmeval.scorers import SCORERS

REPO = Path(__file__).resolve().parent.parent
ADAPTERS = (REPO / "adapters/date-iso", REPO / "adapters/sentiment")
TOKEN_BUDGET = 32768  # --llmeval-token-budget's default
MAX_NEW_TOKENS = 512  # --llmeval-max-new-tokens's default


def chunks(loaded: LoadedModel, rows: int | None, batch_size: int) -> list[tuple[list[str], list[int]]]:
    """(prompts, limits) of each chunk: every generation row of each benchmark file (the first `rows` of
    them in all, taken evenly from the files), cut into chunks of `batch_size`."""
    files: list[list[dict[str, Any]]] = []
    for path in sorted((REPO / "benchmarks").glob("*.jsonl")):
        found = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        found = [r for r in found if production("local", SCORERS[r["evaluation_type"]].measure) == "generate"]
        if found:
            files.append(found)
    if rows is not None:
        files = [found[: rows // len(files)] for found in files]
    out: list[tuple[list[str], list[int]]] = []
    for found in files:
        for start in range(0, len(found), batch_size):
            part = found[start : start + batch_size]
            prompts = [build_prompt(loaded.tokenizer, r["instruction"], r["input"]) for r in part]
            limits = [int(r.get("evaluation_config", {}).get("max_new_tokens", MAX_NEW_TOKENS)) for r in part]
            out.append((prompts, limits))
    return out


def separate(loaded: LoadedModel, work: list[tuple[list[str], list[int]]]) -> list[list[str]]:
    """Each chunk once per column, its adapter set (as --llmeval-mixed-batches=off): the outputs, by column
    then row."""
    outputs: list[list[str]] = []
    for side in [None, *loaded.adapters]:
        texts: list[str] = []
        with loaded.active(side):
            for prompts, limits in work:
                texts += generate(
                    loaded.model,
                    loaded.tokenizer,
                    prompts,
                    max_new_tokens=limits,
                    batch_size=len(prompts),
                    token_budget=TOKEN_BUDGET,
                    strip=False,
                )
        outputs.append(texts)
    return outputs


def mixed(loaded: LoadedModel, work: list[tuple[list[str], list[int]]]) -> list[list[str]]:
    """Each chunk once, every column's rows in one batch (as --llmeval-mixed-batches=on)."""
    sides = [BASE_ADAPTER, *loaded.adapters]
    outputs: list[list[str]] = [[] for _ in sides]
    for prompts, limits in work:
        texts = generate(
            loaded.model,
            loaded.tokenizer,
            prompts * len(sides),
            max_new_tokens=limits * len(sides),
            batch_size=len(prompts) * len(sides),
            token_budget=TOKEN_BUDGET,
            strip=False,
            adapters=[side for side in sides for _ in prompts],
        )
        for k in range(len(sides)):
            outputs[k] += texts[k * len(prompts) : (k + 1) * len(prompts)]
    return outputs


def side_by_side(device: str, repeats: int, rows: int | None = None, batch_size: int = 32) -> list[str]:
    """Both ways over the same rows, alternating which goes first; the summary line (also printed)."""
    loaded = load(ModelSpec(adapter=ADAPTERS[0], more_adapters=ADAPTERS[1:], device=device, dtype="float32"))
    work = chunks(loaded, rows, batch_size)
    n = sum(len(p) for p, _ in work)
    print(f"{n} rows x {1 + len(loaded.adapters)} columns, {len(work)} chunks, on {loaded.device}")
    ways = {"separate": separate, "mixed": mixed}
    times: dict[str, list[float]] = {name: [] for name in ways}
    found: dict[str, list[list[str]]] = {}
    for repeat in range(repeats):
        for name in list(ways) if repeat % 2 == 0 else list(ways)[::-1]:
            start = time.perf_counter()
            found[name] = ways[name](loaded, work)
            times[name].append(time.perf_counter() - start)
            print(f"repeat {repeat + 1}: {name} {times[name][-1]:.1f} s", flush=True)
        if found["mixed"] != found["separate"]:
            pairs = zip(found["mixed"], found["separate"], strict=True)
            differ = sum(a != b for m, s in pairs for a, b in zip(m, s, strict=True))
            raise SystemExit(f"the mixed batch's outputs differ from the separate passes' on {differ} rows")
    best_separate, best_mixed = min(times["separate"]), min(times["mixed"])
    line = (
        f"mixed-adapter batch vs separate passes ({loaded.device}, best of {repeats}): three separate passes "
        f"{best_separate:.1f} s, one mixed batch {best_mixed:.1f} s: {best_separate / best_mixed:.2f}x "
        f"({n * (1 + len(loaded.adapters))} outputs, identical; GPU target >= 2x)"
    )
    print(line, flush=True)
    return [line]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--rows", type=int, default=None, help="generation rows in all (default: every one)")
    parser.add_argument("--repeats", type=int, default=2, help="repeats of each way (default 2)")
    parser.add_argument("--batch-size", type=int, default=32, help="rows per chunk (default 32)")
    args = parser.parse_args()
    side_by_side(args.device, args.repeats, args.rows, args.batch_size)


if __name__ == "__main__":
    main()
