"""The public fixtures: the models of the run, for ordinary test functions beside the benchmark files.

They return the evaluator's own handles (config.stash[EVALUATOR_KEY]): a model is loaded once per process
whether rows or tests ask for it first (benchmark items get no fixtures: pytest issues #2471, #3639).
"""

from __future__ import annotations

import pytest

from pytest_llmeval.backends.base import BackendError
from pytest_llmeval.backends.served import ServedLLM
from pytest_llmeval.items import EVALUATOR_KEY
from pytest_llmeval.models import LLM, ModelError


@pytest.fixture(scope="session")
def llm(pytestconfig: pytest.Config) -> LLM | ServedLLM:
    """The evaluated model: the adapter when --adapter is given, else the base model."""
    return _handle(pytestconfig, adapter=True)


@pytest.fixture(scope="session")
def llm_base(pytestconfig: pytest.Config) -> LLM | ServedLLM:
    """The base model: same weights as `llm`, adapter disabled."""
    return _handle(pytestconfig, adapter=False)


@pytest.fixture(scope="session")
def llm_models(pytestconfig: pytest.Config) -> dict[str, LLM | ServedLLM]:
    """Every column of the run by name (`base`, each adapter, each --llmeval-model), each with the
    `generate` and `perplexity` of `llm`; adapters share the base's weights."""
    try:
        return pytestconfig.stash[EVALUATOR_KEY].llm_models()
    except (ModelError, BackendError) as exc:
        pytest.fail(f"llmeval: {exc}", pytrace=False)


def _handle(config: pytest.Config, *, adapter: bool) -> LLM | ServedLLM:
    try:
        return config.stash[EVALUATOR_KEY].llm(adapter=adapter)
    except (ModelError, BackendError) as exc:
        pytest.fail(f"llmeval: {exc}", pytrace=False)
