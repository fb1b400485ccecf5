"""Test helpers: tiny random models built from a config (fast, honest), their adapters, benchmark rows.

The tiny models use the embedded SmolLM2 tokenizer (real chat template, real EOS `<|im_end|>`) with a
2-layer random Llama, so generation, padding and peft behave exactly as with the real model, only faster.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def load_script(path: Path, name: str) -> ModuleType:
    """A script that is no module of a package (tools/*.py, an adapter's train.py) imported under `name`,
    once per process."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def build_tiny_model(
    path: Path, *, hidden: int = 32, seed: int = 0, tokenizer_dir: Path | None = None, context: int = 1024
) -> Path:
    """Save a random 2-layer Llama with the embedded tokenizer (or the one in `tokenizer_dir`) to `path`, its
    context `context` positions."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from pytest_llmeval.models import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir or embedded_model_dir())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=context,
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
    if tokenizer_dir != path:
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


# Plugins an inner run does not use, which every xdist worker of it would import again (about half a worker's
# start): for the tests that make many `-n 2` runs (the fault campaign, the served checks).
LEAN = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:anyio")


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


def model_args(
    tiny_model: Path, tiny_adapter: Path | None = None, *, gates: bool = False, cache: Path | None = None
) -> list[str]:
    """Plugin arguments for a pytester run on the tiny model (and adapter), without gates unless asked."""
    # `--opt=value`: pytest takes separate path-like arguments into account when it picks the rootdir.
    # No generation cache unless a test names one: these tests run the plugin several times in one folder,
    # and each run must generate (tests/test_cache.py is about the cache).
    store = "--llmeval-no-cache" if cache is None else f"--llmeval-cache-dir={cache}"
    args = [f"--base-model={tiny_model}", "-p", "no:cacheprovider", store]
    if not gates:
        args += ["-m", "not gate"]  # these tests are about rows; tests/test_gate_items.py is about gates
    if tiny_adapter is not None:
        args.append(f"--adapter={tiny_adapter}")
    return args


def build_judge_model(path: Path, endings: tuple[str, ...] = ("4", "8", "?")) -> Path:
    """Save a 1-layer Llama (embedded tokenizer) that writes "Score: " then one of `endings`, then EOS.

    The layer's output projections are zero, so the last hidden state is the last token's embedding: each
    token of the text gets its own embedding direction ("state"), and lm_head maps a state to the next
    token with a margin of ~57 logits (nothing else is ever sampled at temperature 0.7). Every other token
    (the prompt's last one included) is state 0, which starts the text.
    """
    import itertools

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from pytest_llmeval.models import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())

    def ids(text: str) -> list[int]:
        found: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
        return found

    head = ids("Score: ")  # "Score", ":", " "
    last = [ids(e) for e in endings]
    assert all(len(e) == 1 for e in last), "each ending must be one token"
    hidden = 16
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    big = 10.0  # times sqrt(hidden) after the final RMSNorm
    with torch.no_grad():
        for p in model.model.layers.parameters():
            p.zero_()
        embed = model.model.embed_tokens.weight  # (V, hidden)
        lm_head = model.lm_head.weight  # (V, hidden)
        embed.zero_()
        lm_head.zero_()
        embed[:, 0] = 1.0
        lm_head[head[0], 0] = big
        for state, (current, following) in enumerate(itertools.pairwise(head), start=1):
            embed[current] = 0.0
            embed[current, state] = 1.0
            lm_head[following, state] = big
        choose = len(head)  # after "Score: ": every ending equally likely
        embed[head[-1]] = 0.0
        embed[head[-1], choose] = 1.0
        for (token,) in last:
            lm_head[token, choose] = big
            embed[token] = 0.0
            embed[token, choose + 1] = 1.0
        lm_head[tokenizer.eos_token_id, choose + 1] = big
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def strict_required() -> tuple[bool, str]:
    """Whether strict sandbox isolation must be detected on this machine, and why (or why not).

    Where bubblewrap is installed (or CI sets LLMEVAL_REQUIRE_STRICT=1), a test that finds no strict
    isolation fails instead of skipping: a bug in strict detection must not read as "not available here".
    """
    flag = os.environ.get("LLMEVAL_REQUIRE_STRICT", "")
    if flag == "1":
        return True, "LLMEVAL_REQUIRE_STRICT=1"
    if flag == "0":
        return False, "LLMEVAL_REQUIRE_STRICT=0"
    if flag:
        raise pytest.UsageError(f"LLMEVAL_REQUIRE_STRICT must be 1 or 0, not {flag!r}")
    where = shutil.which("bwrap")
    if where is not None:
        return True, f"bubblewrap is installed ({where}); LLMEVAL_REQUIRE_STRICT=0 allows a skip"
    return False, "bubblewrap is not installed and LLMEVAL_REQUIRE_STRICT is not set"


def without_timing(value: Any) -> Any:
    """A results.json part with what a clock measures (a sandbox run's `elapsed`) taken out: it differs
    between any two runs."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k != "elapsed"}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def without_clocks(document: dict[str, Any]) -> dict[str, Any]:
    """A results.json document less what differs between two runs of the same rows: when it ran, and
    its cost's clocks, cache hits and worker count. The tokens each model spent on each benchmark stay:
    they are the same however the rows are split among workers."""
    out = {k: v for k, v in document.items() if k not in ("timestamp", "cost")}
    if "cost" in document:
        out["tokens"] = {
            bench: {
                column: (c["prompt_tokens"], c["generated_tokens"], c["rows"])
                for column, c in columns.items()
            }
            for bench, columns in document["cost"]["benchmarks"].items()
        }
    return out


# A conftest for pytester: generate() raises on any batch holding an input with EXPLODE in it.
EXPLODER = """
from pytest_llmeval import generation

_original = generation.generate


def _exploding(model, tokenizer, prompts, **kwargs):
    # A fault in one input (as a tokenizer or model error on it would be): the whole batch raises.
    if any("EXPLODE" in p for p in prompts):
        raise RuntimeError("cannot generate this input")
    return _original(model, tokenizer, prompts, **kwargs)


def pytest_configure(config):
    generation.generate = _exploding


def pytest_unconfigure(config):
    generation.generate = _original
"""
