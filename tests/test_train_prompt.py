"""The demo adapters' training scripts and the prompt they train with: --system reaches every training prompt
and the replay cache's key, and metadata.json records it as `prompt`, which the plugin reads.

Nothing here trains: the scripts' pure parts are tested, and the replay cache on a tiny random model.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import fields, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import REPO, load_script

from pytest_llmeval.prompts import Layer, adapter_layer

ADAPTERS = ("date-iso", "sentiment")
SYSTEM = "Answer with the result only."


def train_script(adapter: str) -> ModuleType:
    """adapters/<adapter>/train.py as a module (its folder name is no package name)."""
    return load_script(REPO / "adapters" / adapter / "train.py", "train_" + adapter.replace("-", "_"))


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from pytest_llmeval.models import embedded_model_dir

    return AutoTokenizer.from_pretrained(embedded_model_dir())


def rebuild(script: ModuleType, committed: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """What the script's build_metadata writes for the committed file's training record (and `changes`)."""
    training = committed["training"]
    cfg = script.TrainConfig(**{f.name: training[f.name] for f in fields(script.TrainConfig)})
    if changes:
        cfg = replace(cfg, **changes)
    metadata: dict[str, Any] = script.build_metadata(
        cfg,
        base_model=committed["base_model"],
        layers=training["lora"]["layers"],
        data=training["data"],
        threads=training["threads"],
        train_seconds=training["train_seconds"],
        wall_seconds=training["wall_seconds"],
        versions=training["versions"],
        command=training["command"],
    )
    return metadata


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_committed_metadata_is_what_train_py_writes(adapter: str) -> None:
    script = train_script(adapter)
    path = REPO / "adapters" / adapter / "metadata.json"
    text = path.read_text(encoding="utf-8")
    committed = json.loads(text)
    # Byte for byte, key order included: `prompt` right after `task`, `system` among the training knobs.
    assert json.dumps(rebuild(script, committed), indent=2) + "\n" == text
    assert committed["prompt"] == {"system": None}
    assert committed["training"]["system"] is None


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_committed_metadata_declares_no_prompt_to_the_plugin(adapter: str) -> None:
    folder = REPO / "adapters" / adapter
    layer = adapter_layer(json.loads((folder / "metadata.json").read_text(encoding="utf-8")), folder)
    assert layer == Layer()
    assert layer.empty


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_metadata_records_the_system_prompt_trained_with(adapter: str) -> None:
    script = train_script(adapter)
    folder = REPO / "adapters" / adapter
    committed = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    metadata = rebuild(script, committed, system=SYSTEM)
    assert metadata["prompt"] == {"system": SYSTEM}
    assert metadata["training"]["system"] == SYSTEM
    # Through JSON, as the plugin reads the file.
    assert adapter_layer(json.loads(json.dumps(metadata)), folder) == Layer(system=SYSTEM)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_system_option(adapter: str) -> None:
    script = train_script(adapter)
    assert script.parse_args([]).system is None
    assert script.parse_args(["--system", SYSTEM]).system == SYSTEM


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_system_prompt_reaches_the_training_prompts(adapter: str, tokenizer: Any) -> None:
    from pytest_llmeval.generation import build_prompt

    script = train_script(adapter)
    answer_key = "output" if adapter == "date-iso" else "expected_output"
    row = {"instruction": "Normalise the date.", "input": "3rd of May 2021", answer_key: "2021-05-03"}

    def prompt_ids(system: str | None) -> list[int]:
        ids: list[int] = tokenizer(
            build_prompt(tokenizer, row["instruction"], row["input"], system=system), add_special_tokens=False
        )["input_ids"]
        return ids

    kwargs = {} if adapter == "date-iso" else {"answer_key": answer_key}
    plain = script.build_examples(tokenizer, [row], eos=[True], system=None, **kwargs)[0]
    told = script.build_examples(tokenizer, [row], eos=[True], system=SYSTEM, **kwargs)[0]
    # Exactly the plugin's prompt for that system prompt; the answer (the loss) is untouched.
    assert plain.prompt_ids == prompt_ids(None)
    assert told.prompt_ids == prompt_ids(SYSTEM)
    assert SYSTEM in tokenizer.decode(told.prompt_ids)
    assert SYSTEM not in tokenizer.decode(plain.prompt_ids)
    assert told.target_ids == plain.target_ids


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_replay_key_holds_the_system_prompt_and_is_unchanged_without_one(adapter: str) -> None:
    script = train_script(adapter)
    assert script.replay_key("Add.", "2 + 2", 48, None) == ("Add.", "2 + 2", 48)  # the key before --system
    keys = {script.replay_key("Add.", "2 + 2", 48, s) for s in (None, "", SYSTEM, SYSTEM + " ")}
    assert len(keys) == 4
    # Every committed cached answer keeps the key it had: none of them needs generating again.
    for row in script.read_jsonl(script.REPLAY_ANSWERS_FILE):
        assert "system" not in row
        assert script.cache_key(row) == (row["instruction"], row["input"], row["max_new_tokens"])


def isolate_cache(script: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Point the script's replay files into tmp_path, so that nothing here rewrites the committed ones."""
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "REPLAY_PROMPTS_FILE", tmp_path / "replay_prompts.jsonl")
    monkeypatch.setattr(script, "REPLAY_ANSWERS_FILE", tmp_path / "replay_answers.jsonl")
    if hasattr(script, "SHARED_REPLAY_ANSWERS"):
        monkeypatch.setattr(script, "SHARED_REPLAY_ANSWERS", tmp_path / "absent.jsonl")


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_committed_replay_cache_serves_a_run_without_system_prompt(
    adapter: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = train_script(adapter)
    committed = script.REPLAY_ANSWERS_FILE.read_bytes()
    shutil.copy(script.REPLAY_PROMPTS_FILE, tmp_path / "replay_prompts.jsonl")
    isolate_cache(script, monkeypatch, tmp_path)
    (tmp_path / "replay_answers.jsonl").write_bytes(committed)
    # No model: every answer must come from the cache.
    rows = script.replay_answers(None, None, max_new_tokens=48, regenerate=False, system=None)
    assert len(rows) == len(script.read_jsonl(tmp_path / "replay_prompts.jsonl"))
    assert (tmp_path / "replay_answers.jsonl").read_bytes() == committed  # served as is, not rewritten


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_replay_cache_does_not_serve_answers_given_under_another_system_prompt(
    adapter: str, tiny_model: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pytest_llmeval.models import ModelSpec, load

    script = train_script(adapter)
    isolate_cache(script, monkeypatch, tmp_path)
    prompts = [
        {"instruction": "Answer the question.", "input": "What colour is the sky?"},
        {"instruction": "Add the numbers.", "input": "2 + 3"},
    ]
    (tmp_path / "replay_prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    cached = [{**p, "output": "CACHED", "stopped": True, "max_new_tokens": 4} for p in prompts]
    (tmp_path / "replay_answers.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cached))
    assert script.replay_answers(None, None, max_new_tokens=4, regenerate=False, system=None) == cached

    loaded = load(ModelSpec(base_model=str(tiny_model), device="cpu", dtype="float32"))
    rows = script.replay_answers(
        loaded.model, loaded.tokenizer, max_new_tokens=4, regenerate=False, system=SYSTEM
    )
    assert all(r["output"] != "CACHED" for r in rows)  # generated, not served
    assert all(r["system"] == SYSTEM for r in rows)
    assert [script.cache_key(r) for r in rows] == [
        script.replay_key(p["instruction"], p["input"], 4, SYSTEM) for p in prompts
    ]
    # Now cached under that system prompt: served again without a model.
    assert script.replay_answers(None, None, max_new_tokens=4, regenerate=False, system=SYSTEM) == rows
