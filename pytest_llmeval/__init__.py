"""pytest-llmeval: language-model evaluation as pytest tests."""

from __future__ import annotations

from pytest_llmeval.assertions import (
    assert_better_than_base,
    assert_no_degradation,
    assert_parameter_efficiency,
    assert_peft_vs_sft,
    assert_perplexity_below,
)
from pytest_llmeval.benchmark import Benchmark, BenchmarkError, Case, load_benchmark
from pytest_llmeval.models import LLM, ModelError, ModelSpec
from pytest_llmeval.scorers import SCORERS, Score
from pytest_llmeval.training import (
    analyse,
    assert_converged,
    assert_no_overfitting,
    assert_stable_gradients,
    lr_sensitivity,
    read_log,
)

__all__ = [
    "LLM",
    "SCORERS",
    "Benchmark",
    "BenchmarkError",
    "Case",
    "ModelError",
    "ModelSpec",
    "Score",
    "analyse",
    "assert_better_than_base",
    "assert_converged",
    "assert_no_degradation",
    "assert_no_overfitting",
    "assert_parameter_efficiency",
    "assert_peft_vs_sft",
    "assert_perplexity_below",
    "assert_stable_gradients",
    "load_benchmark",
    "lr_sensitivity",
    "read_log",
]
__version__ = "0.1.0"
