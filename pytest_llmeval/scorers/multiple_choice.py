"""evaluation_type `multiple_choice`: the choice the model finds most likely must be the expected one.

Nothing is generated. The evaluator scores every choice's tokens after the row's prompt (the chat template
with the instruction and input, as for generation) with the model itself, adapter off and on, all choices
of a chunk in shared forward passes (perplexity.continuation_nll), and hands the log-likelihoods here.

evaluation_config:
- choices (required): two or more distinct non-empty strings.
- answer_index: the expected choice's position (0-based); else expected_output must be one of the choices.
- normalize: "sum" (default: total log-likelihood), "token" (per token) or "char" (per character, which
  does not depend on the tokenizer: lm-evaluation-harness's acc_norm).

With saved predictions (--llmeval-predictions) there is no model: the prediction text is matched to a
choice instead (the choice itself, case and spaces aside, or its letter: "B", "(B)", "B.").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys

KNOWN_KEYS = ("choices", "answer_index", "normalize")
NORMALIZE = ("sum", "token", "char")
_LETTER = re.compile(r"\(?([A-Za-z])[).:]?")


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason when the config is invalid."""
    check_keys(config, KNOWN_KEYS, "evaluation_config for multiple_choice")
    choices = config.get("choices")
    if not isinstance(choices, list) or len(choices) < 2:
        raise ValueError("multiple_choice needs 'choices': a list of two or more strings")
    if not all(isinstance(c, str) and c.strip() for c in choices):
        raise ValueError("every entry of 'choices' must be a non-empty string")
    if len(set(choices)) != len(choices):
        raise ValueError("'choices' has duplicates")
    index = config.get("answer_index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        raise ValueError(f"'answer_index' must be an integer, got {index!r}")
    if index is not None and not 0 <= index < len(choices):
        raise ValueError(f"'answer_index' {index} is out of range for {len(choices)} choices")
    normalize = config.get("normalize", "sum")
    if normalize not in NORMALIZE:
        raise ValueError(f"'normalize' must be one of {', '.join(NORMALIZE)}, got {normalize!r}")


def validate_row(config: Mapping[str, Any], row: Mapping[str, Any]) -> None:
    """The expected answer must name exactly one choice (by text or answer_index, agreeing if both)."""
    choices: list[str] = list(config["choices"])
    expected = str(row.get("expected_output", "")).strip()
    index = config.get("answer_index")
    if index is None:
        if expected not in [c.strip() for c in choices]:
            raise ValueError(
                f"expected_output {expected!r} is not one of the choices (give its text, or answer_index)"
            )
    elif expected and expected != choices[index].strip():
        raise ValueError(
            f"expected_output {expected!r} disagrees with answer_index {index} ({choices[index]!r})"
        )


def field_rule(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """expected_output may be empty when answer_index names the answer."""
    if config.get("answer_index") is not None:
        return frozenset({"input", "expected_output"}), frozenset()
    return frozenset({"input"}), frozenset()


def expected_index(expected: str, config: Mapping[str, Any]) -> int:
    """Position of the expected choice."""
    index = config.get("answer_index")
    if index is not None:
        return int(index)
    return [c.strip() for c in config["choices"]].index(expected.strip())


def score_measurement(measurement: Mapping[str, Any], config: Mapping[str, Any]) -> Score:
    """1.0 when the most likely choice (by the configured normalisation) is the expected one."""
    normalize = str(config.get("normalize", "sum"))
    scored = []
    for choice in measurement["choices"]:
        loglik = -float(choice["nll"])
        length = {"sum": 1, "token": choice["n_tokens"], "char": choice["n_chars"]}[normalize]
        scored.append(loglik / length)
    best = max(range(len(scored)), key=lambda i: (scored[i], -i))  # ties go to the first choice
    expected = int(measurement["expected_index"])
    return Score(
        value=1.0 if best == expected else 0.0,
        threshold=1.0,
        details={
            "predicted_index": best,
            "predicted": config["choices"][best],
            "expected_index": expected,
            "normalize": normalize,
            "scores": scored,
            "choices": [dict(c) for c in measurement["choices"]],
        },
    )


def score(prediction: str, expected: str, config: Mapping[str, Any]) -> Score:
    """Saved predictions: the prediction names a choice by its text or its letter; else it scores 0."""
    choices = [c.strip().casefold() for c in config["choices"]]
    text = " ".join(prediction.split()).casefold().rstrip(".")
    picked: int | None = choices.index(text) if text in choices else None
    letter = _LETTER.fullmatch(prediction.strip())
    if picked is None and letter is not None:
        position = ord(letter.group(1).upper()) - ord("A")
        picked = position if position < len(choices) else None
    answer = expected_index(expected, config)
    return Score(
        value=1.0 if picked == answer else 0.0,
        threshold=1.0,
        details={
            "predicted_index": picked,
            "predicted": None if picked is None else config["choices"][picked],
            "expected_index": answer,
            "reason": None if picked is not None else "the prediction names no choice",
            "unparsed": picked is None,
        },
    )


def explain(details: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A failing row's report: the pick, and every choice's (normalised) log-likelihood."""
    if "scores" not in details:  # a saved prediction matched to a choice: nothing was measured
        return [f"predicted:   {details['predicted']!r}"]
    ranked = ", ".join(
        f"{c['text']!r} {v:.3f}" for c, v in zip(details["choices"], details["scores"], strict=True)
    )
    return [f"predicted:   {details['predicted']!r} (log-likelihood, {details['normalize']}: {ranked})"]
