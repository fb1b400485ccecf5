"""cache.identify() itself, on real LoadedModels: each change that can change a generated text changes the
identity the generation cache keys outputs by, in the field it should, and nothing else does.

tests/test_cache.py builds identities by hand for most of its key tests; here the model is loaded with
models.load from folders on disk, changed on disk (or loaded another way), loaded again, and identified.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.cache import FileIndex, ModelIdentity, identify
from pytest_llmeval.models import ModelSpec, load


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def nudge_tensor(path: Path, name_part: str) -> None:
    """Scale the first tensor whose name contains `name_part`: same file size, other weights."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path))
    name = sorted(n for n in tensors if name_part in n)[0]
    tensors[name] = tensors[name] * 1.5
    save_file(tensors, str(path), metadata={"format": "pt"})


def rename_a_special_token(base: Path) -> None:
    """A tokenizer that reads some text otherwise: special token `<empty_output>` becomes `<no_output>`."""

    def change(data: dict[str, Any]) -> None:
        (token,) = [t for t in data["added_tokens"] if t["content"] == "<empty_output>"]
        token["content"] = "<no_output>"
        vocab = data["model"]["vocab"]
        vocab["<no_output>"] = vocab.pop("<empty_output>")

    edit_json(base / "tokenizer.json", change)


def new_system_prompt(base: Path) -> None:
    template = base / "chat_template.jinja"
    text = template.read_text()
    assert "You are a helpful AI assistant" in text
    template.write_text(text.replace("You are a helpful AI assistant", "You are a terse assistant"))


def moved_and_documented(base: Path, adapter: Path) -> tuple[Path, Path]:
    """The same files elsewhere, plus files that cannot change a generated text."""
    new_base, new_adapter = base.with_name("moved-base"), adapter.with_name("moved-adapter")
    shutil.move(base, new_base)
    shutil.move(adapter, new_adapter)
    (new_base / "README.md").write_text("# a model card\n")
    (new_adapter / "metadata.json").write_text(json.dumps({"name": "renamed", "version": "9"}))
    (new_adapter / "train.jsonl").write_text('{"instruction": "a", "input": "", "output": "b"}\n')
    return new_base, new_adapter


# Each change: what it does to the folders (returning them, moved or not), the dtype to load in, and the
# identity fields it must change. The tokenizer's files live in the base model's folder, and every file of
# that folder counts for `base`: a tokenizer change is a change of both.
Change = Callable[[Path, Path], "tuple[Path, Path] | None"]
CHANGES: dict[str, tuple[Change, str, set[str]]] = {
    "nothing": (lambda base, adapter: None, "float32", set()),
    "moved": (moved_and_documented, "float32", set()),
    "base weights": (lambda b, a: nudge_tensor(b / "model.safetensors", "mlp"), "float32", {"base"}),
    "base config": (
        lambda b, a: edit_json(b / "config.json", lambda c: c.update(rms_norm_eps=1e-5)),
        "float32",
        {"base"},
    ),
    "adapter weights": (
        lambda b, a: nudge_tensor(a / "adapter_model.safetensors", "lora_B"),
        "float32",
        {"adapter"},
    ),
    "adapter config": (
        lambda b, a: edit_json(a / "adapter_config.json", lambda c: c.update(lora_alpha=16)),
        "float32",
        {"adapter"},
    ),
    "special token": (lambda b, a: rename_a_special_token(b), "float32", {"base", "tokenizer"}),
    "pad token": (
        lambda b, a: edit_json(b / "tokenizer_config.json", lambda c: c.update(pad_token="<|endoftext|>")),
        "float32",
        {"base", "tokenizer"},
    ),
    "chat template": (lambda b, a: new_system_prompt(b), "float32", {"base", "tokenizer"}),
    # bfloat16 rounding depends on the batch: its outputs are keyed by their batch too.
    "dtype": (lambda base, adapter: None, "bfloat16", {"dtype", "batch_invariant"}),
}


def differences(a: ModelIdentity, b: ModelIdentity) -> set[str]:
    return {f.name for f in dataclasses.fields(ModelIdentity) if getattr(a, f.name) != getattr(b, f.name)}


@pytest.mark.parametrize("change", list(CHANGES))
def test_identify_notices_each_change(
    change: str, tmp_path: Path, tiny_model: Path, tiny_adapter: Path
) -> None:
    base = Path(shutil.copytree(tiny_model, tmp_path / "base"))
    adapter = Path(shutil.copytree(tiny_adapter, tmp_path / "adapter"))
    index = FileIndex(tmp_path / "file-hashes.json")
    before = identify(load(ModelSpec(base_model=str(base), adapter=adapter, device="cpu")), index)
    assert before.adapter is not None and before.batch_invariant and before.dtype == "float32"

    apply, dtype, expected = CHANGES[change]
    base, adapter = apply(base, adapter) or (base, adapter)
    loaded = load(ModelSpec(base_model=str(base), adapter=adapter, device="cpu", dtype=dtype))
    after = identify(loaded, index)
    assert differences(before, after) == expected
    # The same files read again give the same identity: what changed is the change, not the reading.
    assert identify(loaded, FileIndex(tmp_path / "another-index.json")) == after


def test_changes_the_identity_sees_change_what_the_model_does(
    tmp_path: Path, tiny_model: Path, tiny_adapter: Path
) -> None:
    """Why these fields matter: a chat template changes the prompt, a special token how text is read, and
    weights the output."""
    from pytest_llmeval.generation import build_prompt, generate

    base = Path(shutil.copytree(tiny_model, tmp_path / "base"))
    before = load(ModelSpec(base_model=str(base), device="cpu"))
    prompt_before = build_prompt(before.tokenizer, "Say hello.")
    out_before = generate(before.model, before.tokenizer, [prompt_before], max_new_tokens=6, batch_size=1)
    new_system_prompt(base)
    nudge_tensor(base / "model.safetensors", "mlp")
    after = load(ModelSpec(base_model=str(base), device="cpu"))
    prompt_after = build_prompt(after.tokenizer, "Say hello.")
    assert prompt_after != prompt_before and "terse" in prompt_after
    rename_a_special_token(base)
    renamed = load(ModelSpec(base_model=str(base), device="cpu")).tokenizer
    assert len(renamed("<no_output>", add_special_tokens=False)["input_ids"]) == 1
    assert len(after.tokenizer("<no_output>", add_special_tokens=False)["input_ids"]) > 1
    assert (
        generate(after.model, after.tokenizer, [prompt_before], max_new_tokens=6, batch_size=1) != out_before
    )
