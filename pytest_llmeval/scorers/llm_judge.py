"""evaluation_type `llm_judge` (LocoLLM standard): a judge model grades the output against a rubric.

The evaluator generates the row's output, then asks the judge (the base model with the adapter off, or
--llmeval-judge-model) `runs` times with sampling, run r with seed `seed + r`: three greedy runs would be
identical, so they would measure nothing about the judge's consistency. Each run's score is extracted with
`extract_score_pattern`; the row's score is the mean over the parseable runs divided by `max_score`, with
their standard deviation. A run whose score cannot be extracted (or falls outside 0..max_score) is counted
as unparseable and reported, never taken as 0; when no run is parseable the row is an error. The judge's
raw outputs go into results.json.

evaluation_config: rubric (required), extract_score_pattern, max_score, runs, temperature, seed,
judge_max_new_tokens, threshold, max_new_tokens (the graded output's generation limit).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys, compile_regex, find

DEFAULT_PATTERN = r"(?i)score\s*[:=]\s*(\d+(?:\.\d+)?)"
DEFAULTS: dict[str, Any] = {
    "extract_score_pattern": DEFAULT_PATTERN,
    "max_score": 10,
    "runs": 3,
    "temperature": 0.7,
    "seed": 0,
    "judge_max_new_tokens": 128,
    "threshold": 0.5,
}
KNOWN_KEYS = ("rubric", "max_new_tokens", *DEFAULTS)


def option(config: Mapping[str, Any], key: str) -> Any:
    """A config value or its default."""
    return config.get(key, DEFAULTS.get(key))


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason when the config is invalid."""
    check_keys(config, KNOWN_KEYS, "evaluation_config for llm_judge")
    rubric = config.get("rubric")
    if not isinstance(rubric, str) or not rubric.strip():
        raise ValueError("llm_judge needs 'rubric': the grading instructions for the judge")
    pattern = option(config, "extract_score_pattern")
    try:
        compiled = compile_regex(pattern) if isinstance(pattern, str) else None
    except re.error as exc:
        raise ValueError(f"'extract_score_pattern' is not a valid regex: {exc}") from None
    if compiled is None:
        raise ValueError("'extract_score_pattern' must be a string")
    for key, low in (("max_score", 0.0), ("temperature", 0.0)):
        value = option(config, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > low:
            raise ValueError(f"'{key}' must be a number > {low:g}, got {value!r}")
    for key, low in (("runs", 1), ("judge_max_new_tokens", 1), ("max_new_tokens", 1), ("seed", 0)):
        value = option(config, key)
        if key == "max_new_tokens" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"'{key}' must be an integer >= {low}, got {value!r}")
    threshold = option(config, "threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise ValueError(f"'threshold' must be a number in [0, 1], got {threshold!r}")


def judge_request(
    rubric: str, instruction: str, input: str, expected: str, output: str, config: Mapping[str, Any]
) -> str:
    """The judge's user message: rubric, the task, the reference and the response to grade."""
    parts = [rubric.strip(), "", "Task:", instruction.strip()]
    if input.strip():
        parts += ["", "Input:", input.strip()]
    if expected.strip():
        parts += ["", "Reference answer:", expected.strip()]
    parts += ["", "Response to grade:", output.strip() or "(empty response)"]
    if option(config, "extract_score_pattern") == DEFAULT_PATTERN:
        # The default pattern reads "Score: N": say so, or the judge cannot know the format.
        parts += [
            "",
            f"Grade the response. End with a line 'Score: N', N from 0 to {option(config, 'max_score')}.",
        ]
    return "\n".join(parts)


def extract(text: str, config: Mapping[str, Any]) -> float | None:
    """The score in one judge output (the first group, or the match); None if absent or out of range."""
    match = find(str(option(config, "extract_score_pattern")), text, "extract_score_pattern")
    if match is None:
        return None
    found = match.group(1) if match.groups() else match.group(0)
    try:
        value = float(found)
    except (TypeError, ValueError):
        return None
    return value if 0 <= value <= float(option(config, "max_score")) and math.isfinite(value) else None


def score_measurement(measurement: Mapping[str, Any], config: Mapping[str, Any]) -> Score:
    """Mean of the parseable runs / max_score; raises ValueError when no run gave a score."""
    runs = [dict(r) for r in measurement["runs"]]
    for run in runs:
        run["score"] = extract(str(run["output"]), config)
    values = [r["score"] for r in runs if r["score"] is not None]
    max_score = float(option(config, "max_score"))
    if not values:
        raise ValueError(
            f"the judge gave no score that extract_score_pattern {option(config, 'extract_score_pattern')!r} "
            f"finds in {len(runs)} run(s); first output: {str(runs[0]['output'])[:200]!r}"
        )
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else None
    return Score(
        value=mean / max_score,
        threshold=float(option(config, "threshold")),
        details={
            "judge_mean": mean,
            "judge_sd": sd,
            "max_score": max_score,
            "n_runs": len(runs),
            "n_unparseable": len(runs) - len(values),
            "judge": measurement.get("judge"),
            "runs": runs,
            # --llmeval-context-overflow truncate-*: the judge read a request whose input was cut to fit.
            **(
                {"judge_prompt_truncated": measurement["prompt_truncated"]}
                if "prompt_truncated" in measurement
                else {}
            ),
        },
    )


def explain(details: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A failing row's report: what the judge said in each run, and the score extracted."""
    return [
        f"judge run {run['run']} (seed {run['seed']}): {run['score']}: {run['output'][:160]!r}"
        for run in details["runs"]
    ]
