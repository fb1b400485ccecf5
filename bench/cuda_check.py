"""The CUDA path, checked on a GPU machine: device/dtype defaults, bf16 and fp32 batched generation, memory.

    python bench/cuda_check.py --config-dir DIR --work DIR

DIR holds the embedded model's config and tokenizer files (config.json, tokenizer*.json,
chat_template.jinja, generation_config.json) but no weights: a lent GPU machine cannot download, and the
weights are too large to carry there. So the model is SmolLM2-135M's exact architecture with random
weights (the same compute and memory as the real model; the text it writes is meaningless and never stops
early, so every row runs to its max_new_tokens, the worst case) plus a random LoRA adapter on the same
projections as the demo adapter. Prints what it finds; exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from pytest_llmeval.generation import build_prompt, generate
from pytest_llmeval.models import ModelSpec, load
from pytest_llmeval.scorers import SCORERS, read_benchmark

REPO = Path(__file__).resolve().parent.parent


def build(config_dir: Path, work: Path) -> tuple[Path, Path]:
    """Random-weight SmolLM2-135M and a random LoRA adapter for it, saved under `work` (and a second adapter,
    adapter-random2)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    base = work / "smol-random"
    adapter = work / "adapter-random"
    if base.exists():
        shutil.rmtree(base)
    shutil.copytree(config_dir, base)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(base), dtype=torch.float32)
    model.save_pretrained(base)
    lora = LoraConfig(
        r=16,
        lora_alpha=32,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        layers_to_transform=list(range(20, 30)),
        init_lora_weights=False,
    )
    get_peft_model(model, lora).save_pretrained(adapter)
    # A second adapter of other random weights, for the run with two adapters on one set of base weights.
    torch.manual_seed(1)
    again = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    get_peft_model(again, lora).save_pretrained(work / "adapter-random2")
    return base, adapter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-dir", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()

    import torch
    import transformers

    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"cuda {torch.cuda.is_available()}"
    )
    if not torch.cuda.is_available():
        print("FAIL: no CUDA device")
        return 1
    print(f"device: {torch.cuda.get_device_name(0)}")
    base, adapter = build(args.config_dir, args.work)
    failures: list[str] = []

    # 1. Defaults: auto device is CUDA, auto dtype is bfloat16.
    loaded = load(ModelSpec(base_model=str(base), adapter=adapter))
    print(f"auto -> device {loaded.device}, dtype {loaded.dtype}")
    if loaded.device.type != "cuda" or loaded.dtype != torch.bfloat16:
        failures.append("auto device/dtype is not cuda/bfloat16")

    cases = [
        c
        for p in sorted((REPO / "benchmarks").glob("*.jsonl"))
        for c in read_benchmark(p).cases
        if SCORERS[c.evaluation_type].measure is None  # perplexity rows generate nothing
    ]
    prompts = [build_prompt(loaded.tokenizer, c.instruction, c.input) for c in cases]
    limits = [int(c.evaluation_config.get("max_new_tokens", 32)) for c in cases]

    def run(model_loaded: object, batch_size: int, adapter_on: bool) -> tuple[float, list[str]]:
        assert hasattr(model_loaded, "adapter_enabled")
        start = time.perf_counter()
        with model_loaded.adapter_enabled(adapter_on):  # type: ignore[attr-defined]
            out = generate(
                model_loaded.model,  # type: ignore[attr-defined]
                model_loaded.tokenizer,  # type: ignore[attr-defined]
                prompts,
                max_new_tokens=limits,
                batch_size=batch_size,
            )
        return time.perf_counter() - start, out

    # 2. bf16: speed of batched vs one-at-a-time, peak memory, and how often batching changes a row.
    run(loaded, 8, True)  # warm-up (CUDA context, kernels)
    torch.cuda.reset_peak_memory_stats()
    t1, one = run(loaded, 1, True)
    for bs in (16, 64, 128):
        torch.cuda.reset_peak_memory_stats()
        tb, batched = run(loaded, bs, True)
        same = sum(a == b for a, b in zip(one, batched, strict=True))
        print(
            f"bf16 adapter: batch {bs:3d} {len(prompts) / tb:7.1f} rows/s "
            f"vs batch 1 {len(prompts) / t1:6.1f} rows/s "
            f"= {t1 / tb:5.1f}x; peak {torch.cuda.max_memory_allocated() / 2**20:6.0f} MiB; "
            f"rows identical to batch 1: {same}/{len(prompts)}"
        )
    _, base_out = run(loaded, 16, False)
    _, adapter_out = run(loaded, 16, True)
    differ = sum(a != b for a, b in zip(base_out, adapter_out, strict=True))
    print(f"adapter on vs off (same weights): {differ}/{len(prompts)} rows differ")
    if differ == 0:
        failures.append("disable_adapter() changed nothing")

    # 3. fp32 on the GPU: a row's output must not depend on its batch (the CPU guarantee, checked here too).
    del loaded
    torch.cuda.empty_cache()
    loaded32 = load(ModelSpec(base_model=str(base), adapter=adapter, dtype="float32"))
    _, one32 = run(loaded32, 1, True)
    _, eight32 = run(loaded32, 8, True)
    same32 = sum(a == b for a, b in zip(one32, eight32, strict=True))
    print(f"fp32: batch 8 rows identical to batch 1: {same32}/{len(prompts)}")
    if same32 != len(prompts):
        failures.append(f"fp32 batch 8 differs from batch 1 in {len(prompts) - same32} rows")

    summary = {"failures": failures, "device": torch.cuda.get_device_name(0)}
    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
