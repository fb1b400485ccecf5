"""Test helpers: LoRA adapters that ship their own tokenizer, and what peft's own loader makes of them.

People save an adapter trained with added tokens (peft's "adding new tokens to the vocabulary") together
with its tokenizer: the tokenizer has one more token than the base's embedding matrix has rows, and
`AutoPeftModelForCausalLM.from_pretrained` resizes the base's embeddings to the adapter's tokenizer before
it loads the adapter. The adapter also carries its own chat template. `reference_outputs` is what peft's
loader and the adapter's tokenizer produce, the reference a plugin run on such an adapter must match;
`base_outputs` is the plain base, so that a test can tell that the adapter changed anything at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# A special token the base's tokenizer does not know: with it, the base tokenizer spells it in pieces.
ADDED_TOKEN = "<|calc|>"


def _chatml(system: str) -> str:
    """A ChatML template like SmolLM2's, whose system turn is always `system` (never the default one)."""
    return (
        "<|im_start|>system\n" + system + "<|im_end|>\n"
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )


# The template of an adapter with ADDED_TOKEN: every prompt holds the token, so the trained row matters.
TEMPLATE = _chatml(ADDED_TOKEN + " You answer with one number.")
# The template of an adapter without an added token (the base's tokenizer cannot hold ADDED_TOKEN whole).
TEMPLATE_NO_TOKEN = _chatml("You answer every question with one short number.")


def build_token_adapter(
    base: Path,
    path: Path,
    *,
    add_token: bool = True,
    template: str | None = TEMPLATE,
    seed: int = 3,
    name: str = "calc",
) -> Path:
    """Save to `path` a random LoRA for the model at `base`, with its own tokenizer (and chat template).

    add_token: the tokenizer gets ADDED_TOKEN (one id past the base's vocabulary), the embeddings are
    resized, and the LoRA trains the new row through peft's `trainable_token_indices` (tied embeddings
    included). The row is a seeded random vector as long as the mean row, so outputs depend on it. Only
    that row is saved (`save_embedding_layers=False`), not a copy of the whole resized embedding matrix:
    peft's AutoPeftModelForCausalLM resizes the base's embeddings from the adapter's tokenizer and then
    writes the saved row over the new one. Without add_token the adapter is a plain random LoRA that ships
    the base's vocabulary with its own template; pass `template=TEMPLATE_NO_TOKEN` then (TEMPLATE uses the
    token). template None keeps the base's template.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not add_token and template is not None and ADDED_TOKEN in template:
        raise ValueError(f"template uses {ADDED_TOKEN} but add_token is False: pass TEMPLATE_NO_TOKEN")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model: Any = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    torch.manual_seed(seed)  # resizing draws the new row at random; the LoRA init is random too
    trainable: dict[str, list[int]] | None = None
    row: torch.Tensor | None = None
    if add_token:
        # extend, not replace, the base's extra special tokens (transformers 5 name for "additional")
        tokenizer.add_special_tokens(
            {"extra_special_tokens": [ADDED_TOKEN]}, replace_extra_special_tokens=False
        )
        new_id = len(tokenizer) - 1  # the base's vocabulary is len(tokenizer): the new token comes last
        assert tokenizer.convert_tokens_to_ids(ADDED_TOKEN) == new_id
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)  # the row is replaced below
        trainable = {"embed_tokens": [new_id]}
        weight = model.get_input_embeddings().weight.detach()
        row = torch.randn(weight.shape[1], generator=torch.Generator().manual_seed(seed), dtype=weight.dtype)
        row *= weight[:new_id].norm(dim=1).mean() / row.norm()
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["q_proj", "v_proj"],
        init_lora_weights=False,
        trainable_token_indices=trainable,
    )
    peft_model: Any = get_peft_model(model, config)
    if row is not None:
        with torch.no_grad():
            peft_model.get_input_embeddings().token_adapter.trainable_tokens_delta["default"].copy_(row[None])
    peft_model.save_pretrained(str(path), save_embedding_layers=False)
    if template is not None:
        tokenizer.chat_template = template
    tokenizer.save_pretrained(path)
    cfg_path = path / "adapter_config.json"
    cfg: dict[str, Any] = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = str(base)
    cfg_path.write_text(json.dumps(cfg, indent=2))
    (path / "metadata.json").write_text(json.dumps({"name": name, "version": "0.0.1"}))
    return path


def reference_outputs(adapter: Path, prompts: list[str], max_new_tokens: int) -> list[str]:
    """Greedy answers of peft's own loader: AutoPeftModelForCausalLM and the adapter's own tokenizer."""
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    model = AutoPeftModelForCausalLM.from_pretrained(str(adapter))
    return _greedy(model, AutoTokenizer.from_pretrained(adapter), prompts, max_new_tokens)


def base_outputs(base: Path, prompts: list[str], max_new_tokens: int) -> list[str]:
    """Greedy answers of the plain base model with the base's tokenizer and template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base)
    return _greedy(model, AutoTokenizer.from_pretrained(base), prompts, max_new_tokens)


def _greedy(model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int) -> list[str]:
    """Each prompt as one user message in the tokenizer's template, generated alone (no padding to differ
    from a batched run), float32 on CPU, up to the tokenizer's EOS; the new text without special tokens."""
    import torch

    model = model.to(device="cpu", dtype=torch.float32).eval()
    answers: list[str] = []
    for prompt in prompts:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        answers.append(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip())
    return answers
