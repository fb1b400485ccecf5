"""Shared fixtures: tiny random models and adapters, built once per test session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import build_tiny_adapter, build_tiny_model


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
