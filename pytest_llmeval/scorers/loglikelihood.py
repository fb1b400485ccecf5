"""evaluation_type `loglikelihood`: the expected continuation must be what the model would write next.

Nothing is generated. The evaluator scores the row's continuation after its prompt with the model itself,
adapter off and on, as a multiple-choice row's one option (measures.choice_likelihoods, the "choices"
measurement): its summed log-likelihood, its tokens, and whether every token is the model's most likely
next one (greedy decoding would write it). A row's value is 1.0 when it is, else 0.0: lm-eval's
`loglikelihood` output type (LAMBADA's acc), whose perplexity is the benchmark's exp(-mean log-likelihood).

evaluation_config:
- continuation: the exact text scored after the prompt, its leading space and all (default: the row's
  expected_output).
- prompt_mode: "chat" (default: the continuation is the assistant's answer under the chat template) or
  "completion" (the input is the whole context, sent raw, and the pair is encoded as lm-eval encodes it:
  continuations.encode_pair).
- lm_eval: where a converted row came from (lm_eval_tasks.py); its row records lm-eval's per-row items
  (perplexity: the log-likelihood; acc: greedy or not).

Saved predictions have no likelihoods: such rows are skipped for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys

KNOWN_KEYS = ("continuation", "prompt_mode", "lm_eval")
PROMPT_MODES = ("chat", "completion")


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason when the config is invalid."""
    check_keys(config, KNOWN_KEYS, "evaluation_config for loglikelihood")
    cont = config.get("continuation")
    if cont is not None and (not isinstance(cont, str) or not cont):
        raise ValueError("'continuation' must be a non-empty string")
    mode = config.get("prompt_mode", "chat")
    if mode not in PROMPT_MODES:
        raise ValueError(f"'prompt_mode' must be one of {', '.join(PROMPT_MODES)}, got {mode!r}")
    origin = config.get("lm_eval")
    if origin is not None and not isinstance(origin, dict):
        raise ValueError("'lm_eval' must be an object (where a converted row came from)")


def field_rule(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(fields that may be empty, fields that must not be): a completion row's input is its whole context;
    with its own continuation, expected_output may be empty, else it is the continuation."""
    must = {"input"} if completion_mode(config) else set()
    if config.get("continuation") is not None:
        return frozenset({"expected_output"} - must), frozenset(must)
    return frozenset(set() if must else {"input"}), frozenset(must | {"expected_output"})


def completion_mode(config: Mapping[str, Any]) -> bool:
    """The row's input is its whole context, sent raw (no chat template)."""
    return bool(config.get("prompt_mode", "chat") == "completion")


def continuation_of(config: Mapping[str, Any], expected: str) -> str:
    """The text scored after the prompt."""
    found = config.get("continuation")
    return str(found) if found is not None else expected


def score_measurement(measurement: Mapping[str, Any], config: Mapping[str, Any]) -> Score:
    """1.0 when the continuation is the model's greedy one; its log-likelihood and tokens in details."""
    scored = measurement["choices"][0]
    greedy = bool(scored["greedy"])
    loglik = -float(scored["nll"])
    details: dict[str, Any] = {
        "continuation": scored["text"],
        "nll": float(scored["nll"]),
        "n_tokens": int(scored["n_tokens"]),
        "greedy": greedy,
    }
    if config.get("lm_eval") is not None:
        details["lm_eval"] = {"perplexity": loglik, "acc": int(greedy)}
    return Score(value=1.0 if greedy else 0.0, threshold=1.0, details=details)


def explain(details: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A failing row's report: the continuation's log-likelihood, and that it is not the greedy one."""
    return [
        f"continuation: {details['continuation']!r} (log-likelihood {-details['nll']:.3f} over "
        f"{details['n_tokens']} tokens; not what greedy decoding writes)"
    ]
