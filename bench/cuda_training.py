"""Training evidence on a GPU: a LoRA run and a full fine-tune with EvaluationCallback, side by side.

    python bench/cuda_training.py --base DIR --out DIR [--steps 120] [--batch 16]

DIR (--base) is a model folder: on a lent GPU machine, the random-weight SmolLM2-135M that
bench/cuda_check.py builds (the real weights are too large to carry there). Trains it twice with the
Hugging Face Trainer on the date task's training rows (adapters/date-iso/data/train.jsonl), in bf16 mixed
precision on CUDA (fp32 on CPU): once as a LoRA adapter shaped like the demo adapter's, once in full. Each
run writes the callback's JSONL (`train_lora.jsonl`, `train_full.jsonl` in --out): every step's loss,
learning rate and gradient norm, validation loss and the memory split every --eval-every steps, the
Japanese benchmark's perplexity every --measure-every steps, and the totals. Prints training.analyse() of
each log and the PEFT-against-full-fine-tuning efficiency figures the adaptation document asks for (§2):
parameter reduction, memory saving (peak allocated CUDA memory), time per step. Exits non-zero when a
check of the callback's CUDA path fails (memory events without CUDA figures, negative activations, a LoRA
run whose gradients are not far smaller than the full run's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LENGTH = 64  # tokens per training example: the date rows are short


def rows() -> list[str]:
    """The date task's training rows as plain text (prompt and answer): the same text for both runs."""
    lines = (REPO / "adapters" / "date-iso" / "data" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [f"{r['instruction']}\n{r['input']}\n{r['output']}" for r in records]


def examples(tokenizer: Any, texts: list[str]) -> list[dict[str, Any]]:
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="pt")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)  # (N, LENGTH)
    return [
        {"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i], "labels": labels[i]}
        for i in range(len(texts))
    ]


def train(variant: str, base: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        Trainer,
        TrainingArguments,
        default_data_collator,
    )

    from pytest_llmeval.training import analyse, read_log
    from pytest_llmeval.training_callback import EvaluationCallback

    cuda = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if variant == "lora":
        # The demo adapter's shape: every projection of the top 10 of 30 layers.
        lora = LoraConfig(
            r=16,
            lora_alpha=32,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            layers_to_transform=list(range(20, 30)),
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    texts = rows()
    held = max(16, len(texts) // 10)
    log_path = out / f"train_{variant}.jsonl"
    targs = TrainingArguments(
        output_dir=str(out / f"trainer_{variant}"),
        max_steps=args.steps,
        per_device_train_batch_size=args.batch,
        per_device_eval_batch_size=32,
        learning_rate=2e-4 if variant == "lora" else 2e-5,
        lr_scheduler_type="constant",
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=args.eval_every,
        save_strategy="no",
        include_num_input_tokens_seen=True,
        report_to="none",
        bf16=cuda,
        use_cpu=not cuda,
        disable_tqdm=True,
        seed=0,
    )
    callback = EvaluationCallback(
        log_path,
        eval_every=args.eval_every,
        measure_every=args.measure_every,
        benchmark=REPO / "benchmarks" / "japanese_text.jsonl",
    )
    trainer = Trainer(
        model=model,
        args=targs,
        train_dataset=examples(tokenizer, texts[held:]),
        eval_dataset=examples(tokenizer, texts[:held]),
        processing_class=tokenizer,
        data_collator=default_data_collator,
        callbacks=[callback],
    )
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    log = read_log(log_path)
    events = [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines()]
    memory = [e for e in events if e["event"] == "memory"]
    measures = [e for e in events if e["event"] == "measure"]
    end = next(e for e in events if e["event"] == "end")
    summary = {
        "variant": variant,
        "trainable_params": trainable,
        "total_params": total,
        "wall_s": wall,
        "analysis": analyse(log, window=min(50, max(1, args.steps // 3))),
        "last_memory": memory[-1] if memory else None,
        "measures": [(m["step"], round(m["perplexity"], 2)) for m in measures],
        "measure_peaks": [m.get("peak_allocated_bytes") for m in measures],
        "end": end,
    }
    del trainer, model
    if cuda:
        torch.cuda.empty_cache()
    return summary


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--measure-every", type=int, default=60)
    args = parser.parse_args()

    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    print(
        f"device: {torch.cuda.get_device_name(0) if cuda else 'cpu'}; {args.steps} steps, batch {args.batch}"
    )
    results = {v: train(v, args.base, args.out, args) for v in ("lora", "full")}
    failures: list[str] = []
    for v, r in results.items():
        a, m, end = r["analysis"], r["last_memory"], r["end"]
        print(
            f"{v}: trainable {r['trainable_params']:,} of {r['total_params']:,}; wall {r['wall_s']:.1f} s, "
            f"{end.get('time_per_step_s', 0) * 1000:.0f} ms/step, "
            f"{end.get('tokens_per_second', 0):,.0f} tok/s; "
            f"final loss {a['final_loss']:.3f}, convergence step {a['convergence_step']}, "
            f"steps to 95% {a['steps_to_95']}, grad norm max {a['grad_norm']['max']:.2f}, "
            f"spikes {a['grad_norm']['spikes']}; perplexity {r['measures']}"
        )
        if m is None:
            failures.append(f"{v}: no memory event")
            continue
        print(
            f"  memory at step {m['step']}: parameters {mib(m['parameters_bytes'])}, gradients "
            f"{mib(m['gradients_bytes'])}, optimizer {mib(m['optimizer_state_bytes'])}, activations "
            f"{mib(m.get('activations_bytes'))}; allocated {mib(m.get('allocated_bytes'))}, reserved "
            f"{mib(m.get('reserved_bytes'))}, interval peak {mib(m.get('peak_allocated_bytes'))}; "
            f"run peak {mib(end.get('peak_allocated_bytes') or end.get('peak_rss_bytes'))}; the callback's "
            f"perplexity measurements' own peaks {[mib(p) for p in r['measure_peaks']]}"
        )
        if cuda and (m.get("device") != "cuda" or "allocated_bytes" not in m):
            failures.append(f"{v}: memory event without CUDA figures: {m}")
        if m.get("activations_bytes", 0) < 0:
            failures.append(f"{v}: negative activations")
        losses = [x for x in read_losses(args.out / f"train_{v}.jsonl")]
        if not losses[-1] < losses[0]:
            failures.append(f"{v}: loss did not fall ({losses[0]:.3f} -> {losses[-1]:.3f})")
    lora, full = results["lora"], results["full"]
    if lora["last_memory"] and full["last_memory"]:
        grads = lora["last_memory"]["gradients_bytes"] / max(1, full["last_memory"]["gradients_bytes"])
        if grads > 0.1:
            failures.append(f"LoRA gradients are {grads:.0%} of the full run's")
    peak = "peak_allocated_bytes" if cuda else "peak_rss_bytes"
    peak_lora, peak_full = lora["end"].get(peak), full["end"].get(peak)
    reduction = 1 - lora["trainable_params"] / full["trainable_params"]
    print(f"parameter reduction (trainable): {reduction:.2%}")
    if peak_lora and peak_full:
        print(
            f"memory saving ({peak}): {1 - peak_lora / peak_full:.1%} ({mib(peak_lora)} vs {mib(peak_full)})"
        )
    tl, tf = lora["end"].get("time_per_step_s"), full["end"].get("time_per_step_s")
    if tl and tf:
        print(f"time per step: LoRA {tl * 1000:.0f} ms vs full {tf * 1000:.0f} ms ({1 - tl / tf:+.1%} saved)")
    print(json.dumps({"failures": failures}))
    return 1 if failures else 0


def read_losses(path: Path) -> list[float]:
    return [
        float(e["loss"])
        for e in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
        if e["event"] == "step" and e.get("loss") is not None
    ]


if __name__ == "__main__":
    sys.exit(main())
