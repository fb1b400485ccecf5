"""Multiple-choice log-likelihoods: ours against lm-evaluation-harness's HFLM.loglikelihood, in one run.

    python bench/loglikelihood.py [--repeats 2] [--device auto] [--dtype auto] [--rows 120]

Pairs come from the shipped benchmarks (dates and sentiment rows, in file order): each row's prompt as
generation sees it (the chat template) is the context, and its choices are its expected output plus
others' expected outputs of the same file (distinct, deterministic). Two workloads: two choices per row
and four choices per row. Both tools score the same (context, continuation) strings with the same model
object:
- ours: pytest_llmeval.continuations.continuation_nll, as multiple_choice rows use it (each context computed
  once for all its choices through a KV cache, the batch's shared prefix once per batch).
- lm-eval: HFLM.loglikelihood (batch size 16), which runs every pair as a full window (its own
  one-context-many-continuations trick only applies to one-token continuations, through logits reuse).
- windows: our path before issue 21, every pair one full window in batches of about 512 positions.
Each runs `--repeats` times, alternating, best time kept. Values: ours and lm-eval against a float64,
one-pair-at-a-time reference on a sample of pairs (max |difference| in nats), and picks agreement (the
choice each tool ranks first). Target: ours >= 3x lm-eval on two-choice rows, more on four-choice rows.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

# bench/ is the script's folder, first on sys.path: one best_of for every benchmark that alternates variants.
from perplexity import best_of

from pytest_llmeval.continuations import continuation_nll
from pytest_llmeval.generation import build_prompt
from pytest_llmeval.models import ModelSpec, load

REPO = Path(__file__).resolve().parent.parent
FILES = ("dates.jsonl", "sentiment.jsonl")


def rows_with_choices(n_rows: int, n_choices: int) -> list[tuple[str, str, list[str]]]:
    """(instruction, input, choices) per row: the row's expected output first, then others' from its file."""
    out: list[tuple[str, str, list[str]]] = []
    for name in FILES:
        rows = [json.loads(line) for line in (REPO / "benchmarks" / name).read_text().splitlines() if line]
        answers = list(dict.fromkeys(r["expected_output"] for r in rows))
        for i, row in enumerate(rows):
            others = [a for a in answers[i:] + answers[:i] if a != row["expected_output"]]
            out.append((row["instruction"], row["input"], [row["expected_output"], *others[: n_choices - 1]]))
    return out[:n_rows]


def lm_eval_loglikelihood(lm: Any, requests: list[tuple[str, str]]) -> list[float]:
    """NLL of each (context, continuation) through HFLM.loglikelihood (it returns log-likelihoods)."""
    from lm_eval.api.instance import Instance

    instances = [
        Instance(request_type="loglikelihood", doc={}, arguments=pair, idx=i)
        for i, pair in enumerate(requests)
    ]
    return [-ll for ll, _ in lm.loglikelihood(instances, disable_tqdm=True)]


def one_window_per_pair(model: Any, tokenizer: Any, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
    """The path before issue 21: every pair a full window (context and continuation) in shared batches."""
    from pytest_llmeval.perplexity import Window, _score_windows

    ids = [c + k for c, k in pairs]
    windows = [
        Window(text=i, begin=0, end=len(r), first_scored=len(c))
        for i, (r, (c, _)) in enumerate(zip(ids, pairs, strict=True))
    ]
    return _score_windows(model, tokenizer, ids, windows, batch_size=None)[0]


def reference_nll(model64: Any, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
    """float64, one pair per forward pass, no cache: the definition itself."""
    import torch

    out = []
    for context, continuation in pairs:
        ids = torch.tensor([context + continuation])  # (1, T)
        with torch.inference_mode():
            logp = torch.log_softmax(model64(ids).logits[0], dim=-1)  # (T, V) float64
        out.append(-sum(float(logp[len(context) - 1 + j, t]) for j, t in enumerate(continuation)))
    return out


def picks(nll: list[float], sizes: list[int]) -> list[int]:
    """Index of the lowest-NLL choice of each row."""
    out, start = [], 0
    for size in sizes:
        row = nll[start : start + size]
        out.append(row.index(min(row)))
        start += size
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--rows", type=int, default=120)
    parser.add_argument("--sample", type=int, default=24, help="pairs checked against the float64 reference")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    os.environ["TQDM_DISABLE"] = "1"  # lm-eval shows progress bars it offers no switch for

    import torch
    import transformers
    from lm_eval.models.huggingface import HFLM

    transformers.logging.set_verbosity_error()
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    loaded = load(ModelSpec(base_model="embedded", device=args.device, dtype=args.dtype))
    model, tok = loaded.model, loaded.tokenizer
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=16, device=str(loaded.device))
    model64 = copy.deepcopy(model).to(device="cpu", dtype=torch.float64).eval()
    print(
        f"{loaded.base.name} on {loaded.device} {loaded.dtype}, torch {torch.__version__}, threads "
        f"{torch.get_num_threads()}, lm-eval HFLM batch 16"
    )
    for n_choices, target in ((2, 3.0), (4, 3.0)):
        rows = rows_with_choices(args.rows, n_choices)
        strings: list[tuple[str, str]] = []
        pairs: list[tuple[list[int], list[int]]] = []
        for instruction, inp, choices in rows:
            prompt = build_prompt(tok, instruction, inp)
            context = tok(prompt, add_special_tokens=False)["input_ids"]
            for choice in choices:
                strings.append((prompt, choice))
                pairs.append((context, tok(choice, add_special_tokens=False)["input_ids"]))
        sizes = [len(c) for _, _, c in rows]
        res = best_of(
            args.repeats,
            {
                "ours": lambda pairs=pairs: continuation_nll(model, tok, pairs),
                "lm-eval": lambda strings=strings: lm_eval_loglikelihood(lm, strings),
                "windows": lambda pairs=pairs: one_window_per_pair(model, tok, pairs),
            },
        )
        step = max(1, len(pairs) // args.sample)
        sample = list(range(0, len(pairs), step))[: args.sample]
        reference = reference_nll(model64, [pairs[i] for i in sample])
        print(f"\n{len(rows)} rows x {n_choices} choices = {len(pairs)} pairs")
        print(
            f"  {'variant':<8} {'seconds':>8} {'pairs/s':>8}  max |nll - float64 ref| on {len(sample)} pairs"
        )
        for name, (seconds, values) in res.items():
            error = max(abs(values[i] - r) for i, r in zip(sample, reference, strict=True))
            print(f"  {name:<8} {seconds:>8.2f} {len(pairs) / seconds:>8.1f}  {error:.2e}")
        ratio = res["lm-eval"][0] / res["ours"][0]
        agree = sum(
            a == b for a, b in zip(picks(res["ours"][1], sizes), picks(res["lm-eval"][1], sizes), strict=True)
        )
        print(
            f"  ratio ours / lm-eval: {ratio:.2f}x (target >= {target:.0f}x); "
            f"same pick on {agree}/{len(rows)} rows"
        )


if __name__ == "__main__":
    main()
