"""Test helpers: tiny random models built from a config (fast, honest), their adapters, benchmark rows.

The tiny models use the embedded SmolLM2 tokenizer (real chat template, real EOS `<|im_end|>`) with a
2-layer random Llama, so generation, padding and peft behave exactly as with the real model, only faster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def build_tiny_model(path: Path, *, hidden: int = 32, seed: int = 0) -> Path:
    """Save a random 2-layer Llama with the embedded tokenizer to `path`."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from pytest_llmeval.models import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    # Random init gives near-uniform logits; a larger scale makes greedy choices well separated, so that
    # float32 rounding differences between batch shapes cannot flip an argmax in the tests.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_adapter(base: Path, path: Path, *, seed: int = 1) -> Path:
    """Save a random LoRA adapter (non-zero B, so it changes outputs) for the model at `base`."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base)
    torch.manual_seed(seed)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(model, config)
    peft_model.save_pretrained(path)
    cfg_path = path / "adapter_config.json"
    cfg: dict[str, Any] = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = str(base)
    cfg_path.write_text(json.dumps(cfg, indent=2))
    (path / "metadata.json").write_text(json.dumps({"name": "tiny-adapter", "version": "0.0.1"}))
    return path


def row(
    row_id: str,
    *,
    instruction: str = "Say hello.",
    input: str = "",
    expected: str = "hello",
    difficulty: str = "easy",
    **extra: Any,
) -> dict[str, Any]:
    """A valid benchmark row with short generation (tiny models never stop on their own)."""
    data: dict[str, Any] = {
        "id": row_id,
        "instruction": instruction,
        "input": input,
        "expected_output": expected,
        "evaluation_type": "exact_match",
        "evaluation_config": {"max_new_tokens": 4},
        "difficulty": difficulty,
    }
    data.update(extra)
    return data


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def model_args(tiny_model: Path, tiny_adapter: Path | None = None, *, gates: bool = False) -> list[str]:
    """Plugin arguments for a pytester run on the tiny model (and adapter), without gates unless asked."""
    # `--opt=value`: pytest takes separate path-like arguments into account when it picks the rootdir.
    # No generation cache: these tests run the plugin several times in one folder, and each run must
    # generate (tests/test_cache.py is about the cache).
    args = [f"--base-model={tiny_model}", "-p", "no:cacheprovider", "--llmeval-no-cache"]
    if not gates:
        args += ["-m", "not gate"]  # these tests are about rows; tests/test_gate_items.py is about gates
    if tiny_adapter is not None:
        args.append(f"--adapter={tiny_adapter}")
    return args
