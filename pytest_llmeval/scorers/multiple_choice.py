"""evaluation_type `multiple_choice`: the choice the model finds most likely must be the expected one.

Nothing is generated. The evaluator scores every choice's tokens after the row's prompt (the chat template
with the instruction and input, as for generation) with the model itself, adapter off and on, all choices
of a chunk in shared forward passes (continuations.continuation_nll), and hands the log-likelihoods here.

evaluation_config:
- choices (required): two or more distinct non-empty strings.
- answer_index: the expected choice's position (0-based); else expected_output must be one of the choices.
- answer_indices: several right choices' positions (lm-eval's multiple_target, TruthfulQA MC2's true
  answers): the row is right when the most likely choice is one of them (instead of answer_index).
- gold_mass (with answer_indices): the row's value is the right choices' share of the probability mass
  over all choices (each choice's probability exp(log-likelihood), normalised over the choices: TruthfulQA
  MC2's score), passing at 0.5 or more, instead of 1 or 0 by the most likely choice.
- normalize: "sum" (default: total log-likelihood), "token" (per token) or "char" (per character, which
  does not depend on the tokenizer: lm-evaluation-harness's acc_norm).
- prompt_mode: "chat" (default: the chat template over the instruction and input) or "completion" (the
  input is the whole context, sent raw, and each choice follows it as lm-evaluation-harness scores a pair:
  the context's trailing spaces move to the choice, and the choice's tokens are those the context and the
  choice make together, after the context's own).
- target_delimiter (completion rows): text between the context and each choice (lm-eval's, often " ").
- choices_in_context (completion rows): each choice completes the input instead of following it, and the
  row's `continuation` is scored after input + choice (lm-eval's multiple_input: WinoGrande's sentence
  filled with each option, then the rest of the sentence); normalize must be "sum" (the scored text is the
  same for every choice).
- lm_eval: where a converted row came from (lm_eval_tasks.py: task, version, shots, seed, document); its
  row also records lm-eval's per-row metrics (acc, acc_norm) beside the score.

With saved predictions (--llmeval-predictions) there is no model: the prediction text is matched to a
choice instead (the choice itself, case and spaces aside, or its letter: "B", "(B)", "B.").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys

KNOWN_KEYS = (
    "choices",
    "answer_index",
    "answer_indices",
    "gold_mass",
    "normalize",
    "prompt_mode",
    "target_delimiter",
    "choices_in_context",
    "continuation",
    "lm_eval",
)
# A gold_mass row passes when its right choices hold at least this share of the probability.
GOLD_MASS_PASS = 0.5
NORMALIZE = ("sum", "token", "char")
PROMPT_MODES = ("chat", "completion")
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
    golds = config.get("answer_indices")
    if golds is not None:
        if index is not None:
            raise ValueError("give 'answer_index' (one right choice) or 'answer_indices' (several), not both")
        if (
            not isinstance(golds, list)
            or not golds
            or not all(
                isinstance(g, int) and not isinstance(g, bool) and 0 <= g < len(choices) for g in golds
            )
            or len(set(golds)) != len(golds)
        ):
            raise ValueError(
                f"'answer_indices' must be a non-empty list of distinct choice positions below {len(choices)}"
            )
    gold_mass = config.get("gold_mass", False)
    if not isinstance(gold_mass, bool) or (gold_mass and golds is None and index is None):
        raise ValueError("'gold_mass' must be true or false, and needs 'answer_indices' or 'answer_index'")
    normalize = config.get("normalize", "sum")
    if normalize not in NORMALIZE:
        raise ValueError(f"'normalize' must be one of {', '.join(NORMALIZE)}, got {normalize!r}")
    mode = config.get("prompt_mode", "chat")
    if mode not in PROMPT_MODES:
        raise ValueError(f"'prompt_mode' must be one of {', '.join(PROMPT_MODES)}, got {mode!r}")
    delimiter = config.get("target_delimiter")
    if delimiter is not None and (not isinstance(delimiter, str) or mode != "completion"):
        raise ValueError("'target_delimiter' must be a string, and is for prompt_mode completion only")
    in_context = config.get("choices_in_context", False)
    if not isinstance(in_context, bool):
        raise ValueError(f"'choices_in_context' must be true or false, got {in_context!r}")
    cont = config.get("continuation")
    if in_context != (cont is not None) or (in_context and (mode != "completion" or normalize != "sum")):
        raise ValueError(
            "'choices_in_context' and 'continuation' go together, with prompt_mode completion and normalize "
            "sum (the text scored after each choice is the same)"
        )
    if cont is not None and (not isinstance(cont, str) or not cont):
        raise ValueError("'continuation' must be a non-empty string")
    origin = config.get("lm_eval")
    if origin is not None and not isinstance(origin, dict):
        raise ValueError("'lm_eval' must be an object (where a converted row came from)")


def completion_mode(config: Mapping[str, Any]) -> bool:
    """The row's input is its whole context, sent raw (no chat template)."""
    return bool(config.get("prompt_mode", "chat") == "completion")


def continuation(config: Mapping[str, Any], choice: str) -> str:
    """What is scored after a completion row's context: the target delimiter, then the choice."""
    return str(config.get("target_delimiter") or "") + choice


def option_pair(config: Mapping[str, Any], prompt: str, choice: str) -> tuple[str, str]:
    """(the context, the text scored after it) for one choice of a completion row: the prompt, then the
    delimiter and the choice; with choices_in_context, the prompt and the choice, then the delimiter and the
    row's continuation (lm-eval's multiple_input requests)."""
    if config.get("choices_in_context"):
        return prompt + choice, str(config.get("target_delimiter") or "") + str(config["continuation"])
    return prompt, continuation(config, choice)


def validate_row(config: Mapping[str, Any], row: Mapping[str, Any]) -> None:
    """The expected answer must name exactly one choice (by text or answer_index, agreeing if both)."""
    choices: list[str] = list(config["choices"])
    expected = str(row.get("expected_output", "")).strip()
    index = config.get("answer_index")
    golds = config.get("answer_indices")
    if golds is not None:
        if expected and expected not in [choices[g].strip() for g in golds]:
            raise ValueError(f"expected_output {expected!r} is none of the choices answer_indices names")
        return
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
    """expected_output may be empty when answer_index (or answer_indices) names the answer."""
    if config.get("answer_index") is not None or config.get("answer_indices") is not None:
        return frozenset({"input", "expected_output"}), frozenset()
    return frozenset({"input"}), frozenset()


def expected_index(expected: str, config: Mapping[str, Any]) -> int:
    """Position of the expected choice (the first of several right ones)."""
    return expected_indices(expected, config)[0]


def expected_indices(expected: str, config: Mapping[str, Any]) -> list[int]:
    """Positions of the right choices: answer_indices, or the one answer_index or expected_output names."""
    if config.get("answer_indices") is not None:
        return [int(g) for g in config["answer_indices"]]
    return [_one_index(expected, config)]


def _one_index(expected: str, config: Mapping[str, Any]) -> int:
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
    best = _first_best(scored)
    golds = _golds(measurement, config)
    details: dict[str, Any] = {
        "predicted_index": best,
        "predicted": config["choices"][best],
        "expected_index": golds[0],
        "normalize": normalize,
        "scores": scored,
        "choices": [dict(c) for c in measurement["choices"]],
    }
    if len(golds) > 1:
        details["expected_indices"] = golds
    if config.get("gold_mass"):
        mass = gold_mass([-float(c["nll"]) for c in measurement["choices"]], golds)
        details["gold_mass"] = mass
        value, threshold = mass, GOLD_MASS_PASS
    else:
        value, threshold = (1.0 if best in golds else 0.0), 1.0
    if config.get("lm_eval") is not None:
        details["lm_eval"] = lm_eval_metrics(measurement, golds, config)
    return Score(value=value, threshold=threshold, details=details)


def _golds(measurement: Mapping[str, Any], config: Mapping[str, Any]) -> list[int]:
    """The right choices' positions: the config's answer_indices, else the measured expected index."""
    if config.get("answer_indices") is not None:
        return [int(g) for g in config["answer_indices"]]
    return [int(measurement["expected_index"])]


def gold_mass(logliks: Sequence[float], golds: Sequence[int]) -> float:
    """The right choices' share of the probability over all choices, as TruthfulQA MC2's process_results
    computes it (numpy: exp of each log-likelihood, divided by their sum, the right ones summed)."""
    import numpy as np

    probs = np.exp(np.array(logliks, dtype=np.float64))
    share = probs / np.sum(probs)
    return float(np.sum(share[np.array(sorted(set(golds)), dtype=np.int64)]))


def _first_best(values: list[float]) -> int:
    """The position of the largest value, the first of equals (numpy's argmax, as lm-eval picks)."""
    return max(range(len(values)), key=lambda i: (values[i], -i))


def lm_eval_metrics(
    measurement: Mapping[str, Any], golds: Sequence[int], config: Mapping[str, Any]
) -> dict[str, float]:
    """lm-eval's multiple_choice process_results: acc (the summed log-likelihoods' argmax is a right
    choice), acc_norm (each divided by its choice's length in characters, the delimiter left out) and
    acc_bytes (in UTF-8 bytes); with gold_mass, TruthfulQA MC2's process_results instead (acc: the right
    choices' probability share)."""
    lls = [-float(c["nll"]) for c in measurement["choices"]]
    if config.get("gold_mass"):
        return {"acc": gold_mass(lls, golds)}
    texts = [str(c["text"]) for c in measurement["choices"]]
    chars = [float(len(t)) for t in texts]
    size = [float(len(t.encode("utf-8"))) for t in texts]
    return {
        "acc": 1.0 if _first_best(lls) in golds else 0.0,
        "acc_norm": 1.0 if _first_best([ll / n for ll, n in zip(lls, chars, strict=True)]) in golds else 0.0,
        "acc_bytes": 1.0 if _first_best([ll / n for ll, n in zip(lls, size, strict=True)]) in golds else 0.0,
    }


def score(prediction: str, expected: str, config: Mapping[str, Any]) -> Score:
    """Saved predictions: the prediction names a choice by its text or its letter; else it scores 0."""
    choices = [c.strip().casefold() for c in config["choices"]]
    text = " ".join(prediction.split()).casefold().rstrip(".")
    picked: int | None = choices.index(text) if text in choices else None
    letter = _LETTER.fullmatch(prediction.strip())
    if picked is None and letter is not None:
        position = ord(letter.group(1).upper()) - ord("A")
        picked = position if position < len(choices) else None
    answers = expected_indices(expected, config)
    return Score(
        value=1.0 if picked in answers else 0.0,
        threshold=1.0,
        details={
            "predicted_index": picked,
            "predicted": None if picked is None else config["choices"][picked],
            "expected_index": answers[0],
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
