"""Batched deterministic generation: prompts built one way, batches sorted by length, greedy decoding.

torch is imported inside the functions; shapes are noted as (B, T) = (batch, tokens).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# Used when the tokenizer has no chat template (base, non-instruct models). Alpaca-style, since that is
# what most instruction-tuned adapters of plain models were trained on.
PLAIN_TEMPLATE = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
PLAIN_TEMPLATE_NO_INPUT = "### Instruction:\n{instruction}\n\n### Response:\n"


@dataclass(frozen=True)
class DecodingConfig:
    """Deterministic decoding, enforced: greedy, no sampling knobs, stop at EOS or max_new_tokens."""

    max_new_tokens: int = 512
    do_sample: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    num_beams: int = 1
    stop: str = "eos"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def user_message(instruction: str, input: str = "") -> str:
    """The user turn of a benchmark row: the instruction, then the input after a blank line."""
    return f"{instruction}\n\n{input}" if input.strip() else instruction


def build_prompt(tokenizer: PreTrainedTokenizerBase, instruction: str, input: str = "") -> str:
    """The prompt: the chat template (with the generation prompt) when there is one, else PLAIN_TEMPLATE."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": user_message(instruction, input)}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert isinstance(text, str)
        return text
    if input.strip():
        return PLAIN_TEMPLATE.format(instruction=instruction, input=input)
    return PLAIN_TEMPLATE_NO_INPUT.format(instruction=instruction)


def template_info(tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """How prompts were built, for results.json: the chat template's hash, or the plain template itself."""
    template = getattr(tokenizer, "chat_template", None)
    if template:
        return {
            "kind": "chat_template",
            "sha256": hashlib.sha256(str(template).encode()).hexdigest(),
            "message": "user: {instruction}\\n\\n{input}",
            "add_generation_prompt": True,
        }
    return {"kind": "plain", "template": PLAIN_TEMPLATE, "template_no_input": PLAIN_TEMPLATE_NO_INPUT}


def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    *,
    max_new_tokens: int | Sequence[int],
    batch_size: int,
    add_special_tokens: bool = False,
) -> list[str]:
    """Greedy completions of `prompts`, in their order, batched by sorted length with left padding.

    `max_new_tokens` may differ per prompt: a batch decodes up to its largest limit and each row is cut at
    its own, which gives exactly what decoding with the smaller limit gives (greedy decoding is causal).
    Chat-templated prompts carry their own special tokens, hence add_special_tokens=False by default.
    """
    import torch
    from transformers import GenerationConfig

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    limits = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if len(limits) != len(prompts):
        raise ValueError("max_new_tokens must be an int or one limit per prompt")
    encoded: list[list[int]] = tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    # Longest first: similar lengths share a batch (little padding), and a too-large batch fails at once.
    order = sorted(range(len(prompts)), key=lambda i: (-len(encoded[i]), i))
    device = next(model.parameters()).device
    outputs: list[str] = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        width = max(len(encoded[i]) for i in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, T), left padded
        mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T)
        for r, i in enumerate(rows):
            n = len(encoded[i])
            ids[r, width - n :] = torch.tensor(encoded[i], dtype=torch.long)
            mask[r, width - n :] = 1
        limit = max(limits[i] for i in rows)
        config = GenerationConfig(
            max_new_tokens=limit,
            do_sample=False,
            num_beams=1,
            repetition_penalty=1.0,
            eos_token_id=eos_ids,
            pad_token_id=pad_id,
        )
        with torch.inference_mode(), warnings.catch_warnings():
            # peft asks transformers a deprecated question on every generate(); users cannot act on it.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            out = model.generate(  # type: ignore[operator]
                input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config
            )  # (B, T + new)
        new = out[:, width:].tolist()  # (B, new)
        for r, i in enumerate(rows):
            tokens = new[r][: limits[i]]
            for k, tok in enumerate(tokens):
                if tok in eos_ids:
                    tokens = tokens[:k]
                    break
            text = tokenizer.decode(tokens, skip_special_tokens=True)
            outputs[i] = str(text).strip()
    return outputs


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Every token that ends a turn: the tokenizer's EOS and the model's generation_config EOS ids."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in cfg_eos if isinstance(cfg_eos, list) else [cfg_eos]:
        if value is not None and int(value) not in ids:
            ids.append(int(value))
    if not ids:
        raise ValueError("the tokenizer has no EOS token: generation could not stop")
    return ids
