"""evaluation_type `perplexity`: the row's text must score at or below a perplexity bound.

Nothing is generated: the evaluator measures the text with the model (adapter off and on) through
pytest_llmeval.perplexity and hands the numbers here. A row's Score.value is 1.0 when the perplexity is at
or below `threshold`, else 0.0, so a benchmark's score is the fraction of its texts within the bound; the
token-weighted corpus perplexity and the paired comparison of per-text cross-entropy are in results.json
(summaries.perplexity_summary).

evaluation_config:
- threshold (required): the highest acceptable perplexity.
- on: "input" (default) scores the row's input, "reference" its expected_output.
- max_length, stride: the sliding window (defaults: the model's context capped at 1024, max_length / 2).
- rolling: true scores the text as lm-eval's loglikelihood_rolling does instead (every token once, the
  first after the model's BOS token, in disjoint windows of the model's whole context); not with
  max_length or stride. Local models only (a server's echo cannot read the first token after BOS).
- lm_eval: where a converted row came from (lm_eval_tasks.py), with the document's `word_count` and
  `byte_count`: the row records lm-eval's word_perplexity, byte_perplexity and bits_per_byte items. Such a
  row may leave out threshold: it then passes whenever it is measured, and its verdicts are the gates'
  (no_degradation compares the texts' cross-entropies, paired).
- bands: three increasing perplexities [a, b, c] that label a benchmark's corpus perplexity excellent (< a),
  good (< b), acceptable (<= c) or poor (> c); default the Japanese adaptation document's [10, 12, 15] (§7.1).
  Perplexities are comparable only within one tokenizer and language: set them for the benchmark's texts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys

TEXT_FIELDS = {"input": "input", "reference": "expected_output"}
KNOWN_KEYS = ("threshold", "on", "max_length", "stride", "bands", "rolling", "lm_eval")
# lm-eval's loglikelihood_rolling metrics, each with the count its (log-likelihood, count) item weighs by.
LM_EVAL_COUNTS = {
    "word_perplexity": "word_count",
    "byte_perplexity": "byte_count",
    "bits_per_byte": "byte_count",
}
DEFAULT_BANDS = (10.0, 12.0, 15.0)
BAND_NAMES = ("excellent", "good", "acceptable", "poor")


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason when the config is invalid."""
    check_keys(config, KNOWN_KEYS, "evaluation_config for perplexity")
    threshold = config.get("threshold")
    origin = config.get("lm_eval")
    if origin is not None and not isinstance(origin, dict):
        raise ValueError("'lm_eval' must be an object (where a converted row came from)")
    if threshold is None and origin is None:
        raise ValueError("perplexity needs 'threshold': the highest acceptable perplexity")
    rolling = config.get("rolling", False)
    if not isinstance(rolling, bool) or (rolling and ("max_length" in config or "stride" in config)):
        raise ValueError("'rolling' must be true or false, and takes no max_length or stride")
    if threshold is None:
        pass
    elif isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not threshold >= 1.0:
        raise ValueError(
            f"'threshold' must be a number >= 1 (a perplexity is never below 1), got {threshold!r}"
        )
    on = config.get("on", "input")
    if not isinstance(on, str) or on not in TEXT_FIELDS:  # a list or object is unhashable: no dict lookup
        raise ValueError(f"'on' must be one of {', '.join(TEXT_FIELDS)}, got {on!r}")
    max_length = config.get("max_length")
    if max_length is not None and (not _is_int(max_length) or max_length < 2):
        raise ValueError(f"'max_length' must be an integer >= 2, got {max_length!r}")
    stride = config.get("stride")
    if stride is not None:
        if not _is_int(stride) or stride < 1:
            raise ValueError(f"'stride' must be an integer >= 1, got {stride!r}")
        if max_length is not None and stride > max_length:
            raise ValueError(f"'stride' ({stride}) must not exceed 'max_length' ({max_length})")
    bands = config.get("bands")
    if bands is not None and not (
        isinstance(bands, list)
        and len(bands) == 3
        and all(isinstance(b, (int, float)) and not isinstance(b, bool) and b >= 1 for b in bands)
        and bands[0] < bands[1] < bands[2]
    ):
        raise ValueError(
            f"'bands' must be three increasing perplexities >= 1, like [10, 12, 15], got {bands!r}"
        )


def band(perplexity: float, bands: tuple[float, float, float] = DEFAULT_BANDS) -> str:
    """The adaptation document's label of a perplexity (§7.1): excellent below bands[0], good below
    bands[1], acceptable up to bands[2], poor above."""
    if perplexity < bands[0]:
        return BAND_NAMES[0]
    if perplexity < bands[1]:
        return BAND_NAMES[1]
    return BAND_NAMES[2] if perplexity <= bands[2] else BAND_NAMES[3]


def text_field(config: Mapping[str, Any]) -> str:
    """The row field whose text is scored: input or expected_output."""
    return TEXT_FIELDS[str(config.get("on", "input"))]


def field_rule(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(fields that may be empty, fields that must not be): only the scored text is needed."""
    scored = text_field(config)
    return frozenset({"instruction", "input", "expected_output"} - {scored}), frozenset({scored})


def window(config: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(max_length, stride) from the config; None means the default."""
    return config.get("max_length"), config.get("stride")


def score_measurement(measurement: Mapping[str, Any], config: Mapping[str, Any]) -> Score:
    """1.0 when the measured perplexity is at or below the threshold (a converted row without one: 1.0
    once measured); the measurement goes into details, and a converted row's lm-eval items beside it."""
    details: dict[str, Any] = dict(measurement)
    origin = config.get("lm_eval")
    if isinstance(origin, Mapping):
        loglik = -float(measurement["nll"])
        details["lm_eval"] = {
            metric: [loglik, int(origin[LM_EVAL_COUNTS[metric]])]
            for metric in origin.get("metrics") or []
            if metric in LM_EVAL_COUNTS and LM_EVAL_COUNTS[metric] in origin
        }
    if config.get("threshold") is None:
        return Score(value=1.0, threshold=1.0, details=details)
    bound = float(config["threshold"])
    value = 1.0 if measurement["perplexity"] <= bound else 0.0
    return Score(value=value, threshold=1.0, details={**details, "max_perplexity": bound})


def rolling(config: Mapping[str, Any]) -> bool:
    """The text is scored in lm-eval's rolling windows (rolling_perplexities), not the sliding window."""
    return bool(config.get("rolling", False))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
