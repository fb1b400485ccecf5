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

__all__ = [
    "LLM",
    "SCORERS",
    "Benchmark",
    "BenchmarkError",
    "Case",
    "ModelError",
    "ModelSpec",
    "Score",
    "assert_better_than_base",
    "assert_no_degradation",
    "assert_parameter_efficiency",
    "assert_peft_vs_sft",
    "assert_perplexity_below",
    "load_benchmark",
]
__version__ = "0.1.0"
