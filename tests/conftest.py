"""Shared fixtures: tiny random models and adapters, built once per test session."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

# numpy, torch and what transformers and peft register in torch cannot be imported twice in one process
# ("bad call flags", "Only a single TORCH_LIBRARY"), and pytester's in-process runs forget the modules
# they imported: import them once here, before any run needs them, whichever test file runs first.
import peft  # noqa: F401
import pytest
import torch  # noqa: F401
from helpers import REPO, build_tiny_adapter, build_tiny_model
from locollm import validate_locollm
from transformers import LlamaForCausalLM  # noqa: F401

import pytest_llmeval.stats  # noqa: F401

if TYPE_CHECKING:
    from pytest_llmeval.models import LoadedModel


@pytest.fixture(scope="session")
def real_model() -> LoadedModel:
    """The embedded SmolLM2-135M-Instruct in float32 on CPU, loaded once for every test that reads it."""
    from pytest_llmeval.models import ModelSpec, load

    return load(ModelSpec(dtype="float32", device="cpu"))


@pytest.fixture(scope="session")
def merged_date_iso(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo adapter date-iso merged into the embedded base (peft's merge_and_unload), saved once as a
    full float32 model folder: a full model whose answers to dates differ from the base's."""
    from serving import merge_adapter

    from pytest_llmeval.models import embedded_model_dir

    folder = tmp_path_factory.mktemp("merged-date-iso")
    return merge_adapter(embedded_model_dir(), REPO / "adapters/date-iso", folder)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_adapter(tiny_model, tmp_path_factory.mktemp("tiny-adapter"))


@pytest.fixture(scope="session")
def other_arch_adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An adapter made for a model of another hidden size: must be refused for tiny_model."""
    other = build_tiny_model(tmp_path_factory.mktemp("other-model"), hidden=48)
    adapter = build_tiny_adapter(other, tmp_path_factory.mktemp("other-adapter"))
    shutil.rmtree(other)  # its base is gone too: only --base-model tiny_model can be tried
    return adapter


@pytest.fixture(autouse=True)
def _every_results_json_follows_locollm(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every results.json a test makes the plugin write is checked against the LocoLLM schema."""
    # Taken before the test: after it, the fixtures may already be torn down.
    folders = [
        request.getfixturevalue(name).path if name == "pytester" else request.getfixturevalue(name)
        for name in ("pytester", "tmp_path")
        if name in request.fixturenames
    ]
    yield
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.json")):
            try:
                document = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(document, dict) and "schema_version" in document and "benchmarks" in document:
                try:
                    # History entries keep every run, also one whose rows all failed or were skipped.
                    validate_locollm(document, unscored_top_level=True)
                except AssertionError as exc:
                    raise AssertionError(f"{path}: {exc}") from None
