"""An adapter that changes nothing is said to: one whose LoRA B weights are all zero (peft's initialisation,
an adapter saved before training) produces exactly the base's outputs, and the run says so loudly (summary,
results.json's adapter_effect, the comparison gate's message) instead of reporting a plain "not better"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import jsonl, row

from pytest_llmeval.results import adapter_effect

pytest_plugins = ["pytester"]


def noop_adapter(base: Path, path: Path) -> Path:
    """A LoRA adapter as peft initialises it: A random, B zero."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base)
    get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])).save_pretrained(
        str(path)
    )
    config = json.loads((path / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(base)
    (path / "adapter_config.json").write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def noop(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return noop_adapter(tiny_model, tmp_path_factory.mktemp("noop") / "noop")


def run(
    pytester: pytest.Pytester, tiny_model: Path, adapter: Path, *, cache: bool = False
) -> tuple[pytest.RunResult, dict]:
    pytester.makeini("[pytest]\n")
    config = {"max_new_tokens": 4}
    pytester.makefile(
        ".jsonl", task=jsonl([row(f"r{i}", input=f"item {i}", evaluation_config=config) for i in range(4)])
    )
    result = pytester.runpytest(
        f"--base-model={tiny_model}",
        f"--adapter={adapter}",
        "--llmeval-domain=task*",
        *([] if cache else ["--llmeval-no-cache"]),
        "-k",
        "not size and not difficulty and not edge and not held",
    )
    return result, json.loads((pytester.path / "results.json").read_text())


def test_a_noop_lora_is_flagged(pytester: pytest.Pytester, tiny_model: Path, noop: Path) -> None:
    result, doc = run(pytester, tiny_model, noop)
    bench = doc["benchmarks"][0]
    assert bench["adapter_effect"] == "none"
    assert all(r["models"]["base"]["output"] == r["models"]["adapter"]["output"] for r in bench["rows"])
    adapter_entry = next(m for m in doc["models"] if m["kind"] == "adapter")
    assert adapter_entry["lora_b_all_zero"] is True
    result.stdout.fnmatch_lines(
        [
            "*gate better_than_base failed: *; its outputs equal the base*s on every row (*: none)*",
            "*NO ADAPTER EFFECT: its outputs equal the base*s on every row (adapter_effect: none): is*",
        ]
    )


def test_a_trained_lora_is_not(pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path) -> None:
    result, doc = run(pytester, tiny_model, tiny_adapter)
    assert doc["benchmarks"][0]["adapter_effect"] == "changed"
    assert next(m for m in doc["models"] if m["kind"] == "adapter")["lora_b_all_zero"] is False
    assert "NO ADAPTER EFFECT" not in result.stdout.str()


def test_lora_b_all_zero_is_read_from_the_file(tiny_adapter: Path, noop: Path, tmp_path: Path) -> None:
    from pytest_llmeval.models import lora_b_all_zero

    assert lora_b_all_zero(noop) is True
    assert lora_b_all_zero(tiny_adapter) is False
    assert lora_b_all_zero(tmp_path) is None  # no weights file


def test_a_run_served_from_the_cache_says_the_same(
    pytester: pytest.Pytester, tiny_model: Path, noop: Path
) -> None:
    """The second run loads no weights (every output is cached): results.json must not lose the flag."""
    _, first = run(pytester, tiny_model, noop, cache=True)
    _, again = run(pytester, tiny_model, noop, cache=True)
    assert again["inference_config"]["cache"]["misses"] == {"base": 0, "adapter": 0}
    assert [m.get("lora_b_all_zero") for m in again["models"]] == [None, True]
    assert first["models"] == again["models"]


def test_adapter_effect_compares_texts_and_measurements() -> None:
    def record(base: object, adapter: object, measured: bool = False) -> dict:
        def its(x: object) -> dict:
            return {"output": None, "score": {"value": x}} if measured else {"output": x, "score": None}

        return {"models": {"base": its(base), "adapter": its(adapter)}}

    assert adapter_effect([record("a", "a"), record(0.5, 0.5, measured=True)]) == "none"
    assert adapter_effect([record("a", "a"), record(0.5, 0.25, measured=True)]) == "changed"
    assert adapter_effect([record("a", "b")]) == "changed"
    assert adapter_effect([]) is None


def test_zero_is_read_from_raw_bytes_as_torch_reads_it() -> None:
    """lora_b_all_zero reads the file's bytes (no torch): -0.0 is zero, as torch's any() counts it."""
    import struct

    from pytest_llmeval.models import _all_zero

    assert _all_zero(struct.pack("<4f", 0.0, -0.0, 0.0, -0.0), "F32")
    assert not _all_zero(struct.pack("<4f", 0.0, -0.0, 1e-30, 0.0), "F32")
    assert _all_zero(bytes([0, 0x80, 0, 0]), "BF16") and not _all_zero(bytes([1, 0x80, 0, 0]), "BF16")
    assert not _all_zero(bytes([0, 0x80]), "I16")  # an integer's sign bit alone is a value
    assert _all_zero(bytes(16), "I64")
