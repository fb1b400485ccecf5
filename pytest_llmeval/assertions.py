"""Assertions on paired adapter/base scores for use in tests: each raises AssertionError with the statistics.

Pure: no pytest import, so these work in any test runner; the comparison they return can be inspected further.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # scipy is imported on first use, not when the plugin (which re-exports these helpers) is loaded.
    from pytest_llmeval.models import LLM
    from pytest_llmeval.perplexity import PerplexityResult
    from pytest_llmeval.reporting.peft_sft import Comparison, Criteria
    from pytest_llmeval.reporting.peft_sft_sides import Log, Results
    from pytest_llmeval.stats import PairedComparison, Values


def assert_better_than_base(
    adapter_scores: Values, base_scores: Values, *, alpha: float = 0.05
) -> PairedComparison:
    """Pass when the adapter's mean score is higher than the base's and the paired test has p < alpha."""
    from pytest_llmeval.stats import compare_paired

    comparison = compare_paired(adapter_scores, base_scores, alpha=alpha)
    if not (comparison.difference > 0.0 and comparison.p_value < alpha):
        raise AssertionError(f"adapter is not significantly better than base: {comparison.describe()}")
    return comparison


def assert_no_degradation(
    adapter_scores: Values, base_scores: Values, *, max_drop: float = 0.05
) -> PairedComparison:
    """Pass when the adapter's mean score is at most max_drop below the base's."""
    if not 0.0 <= max_drop <= 1.0:
        raise ValueError(f"max_drop must be in [0, 1] (a drop in mean score), got {max_drop}")
    from pytest_llmeval.stats import compare_paired

    comparison = compare_paired(adapter_scores, base_scores)
    # A point estimate, not a test: "no degradation" cannot be proven significant with benchmark-sized n,
    # and failing only on significant drops would let small benchmarks hide any loss.
    if comparison.difference < -max_drop:
        raise AssertionError(
            f"adapter is worse than base by more than {max_drop:.3f}: {comparison.describe()}"
        )
    return comparison


def assert_perplexity_below(
    llm: LLM,
    texts: Sequence[str],
    threshold: float,
    *,
    max_length: int | None = None,
    stride: int | None = None,
    batch_size: int | None = None,
) -> PerplexityResult:
    """Pass when the token-weighted perplexity of `texts` under `llm` is at most `threshold`."""
    result = llm.perplexity(texts, max_length=max_length, stride=stride, batch_size=batch_size)
    if not result.perplexity <= threshold:
        worst = "; ".join(
            f"text {t.index} ({t.n_tokens} tokens): {t.perplexity:.4g} {_preview(texts[t.index])}"
            for t in result.worst(3)
        )
        raise AssertionError(
            f"perplexity {result.perplexity:.4g} > threshold {threshold:g} over {result.n_tokens} tokens "
            f"of {len(texts)} texts (window {result.max_length}, stride {result.stride}); worst: {worst}"
        )
    return result


def assert_parameter_efficiency(llm: LLM, *, max_ratio: float = 0.01) -> dict[str, Any]:
    """Pass when the adapter of `llm` (the `llm` fixture with an adapter, or an adapter of `llm_models`)
    holds at most `max_ratio` of the whole model's parameters: the adaptation document's parameter
    efficiency (§2; its success criterion is a reduction above 99%, max_ratio 0.01). Returns the counts."""
    if not 0.0 < max_ratio <= 1.0:
        raise ValueError(f"max_ratio must be in (0, 1] (a share of the parameters), got {max_ratio}")
    from pytest_llmeval.models import parameter_efficiency

    side = getattr(llm, "side", None)
    if side is None or not hasattr(llm, "loaded"):
        raise AssertionError(f"{llm!r} has no adapter of its own here: parameter efficiency is an adapter's")
    found = parameter_efficiency(llm.loaded.adapters[side], llm.loaded.base.path)
    ratio = found["efficiency_ratio"]
    if ratio is None:
        raise AssertionError(f"{llm.name}: its weights are not safetensors, whose tensors could be counted")
    if ratio > max_ratio:
        raise AssertionError(
            f"{llm.name} holds {ratio:.3%} of the parameters ({found['trainable_params']:,} of "
            f"{found['total_params']:,}), more than max_ratio {max_ratio:.3%}"
        )
    return found


def assert_peft_vs_sft(
    peft: Results,
    sft: Results | None = None,
    *,
    peft_column: str | None = None,
    sft_column: str | None = None,
    peft_training_log: Log | None = None,
    sft_training_log: Log | None = None,
    criteria: Criteria | None = None,
    alpha: float = 0.05,
    sft_params: int | None = None,
    require_measured: bool = False,
) -> Comparison:
    """Pass unless a primary success criterion of the adaptation document (§7.2) fails for the PEFT side
    against the SFT side (pytest_llmeval.reporting.peft_sft.compare); returns the comparison.

    peft, sft: results.json paths or documents (sft None: two columns of one document); the training logs
    (a trainer_state.json, an EvaluationCallback JSONL, a folder) measure memory, time and convergence.
    require_measured: a primary criterion that could not be measured fails too.
    """
    from pytest_llmeval.reporting import peft_sft, peft_sft_report, peft_sft_sides

    sides = peft_sft_sides.load_sides(
        peft,
        sft,
        peft_column=peft_column,
        sft_column=sft_column,
        peft_training_log=peft_training_log,
        sft_training_log=sft_training_log,
    )
    found = peft_sft.compare(
        *sides, criteria or peft_sft.DEFAULT_CRITERIA, alpha=alpha, sft_params=sft_params
    )
    failed = peft_sft.primary_failed(found, require_measured=require_measured)
    if failed:
        lines = [peft_sft_report.criterion_line(c) for c in found["criteria"] if c["name"] in failed]
        raise AssertionError(
            f"PEFT {sides[0].label} against SFT {sides[1].label}: {len(failed)} primary criterion(s) "
            "not met:\n  " + "\n  ".join(lines)
        )
    return found


def _preview(text: str, width: int = 40) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= width else flat[: width - 3] + "...")
