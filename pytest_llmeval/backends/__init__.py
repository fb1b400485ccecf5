"""Where a column's outputs come from: model weights in this process (local.py), models behind
OpenAI-compatible servers (served.py), or saved predictions (saved.py), each implementing the one protocol of
base.py; caching.py wraps any of them with the generation cache. What each can produce is decided here, once,
and a row its source cannot produce is skipped with the one reason below.

Pure: no pytest, no torch.
"""

from __future__ import annotations

from typing import Literal

Source = Literal["local", "served", "saved"]
# The backend protocol's three batch methods (base.Backend): generate, loglikelihood, loglikelihood_rolling.
Capability = Literal["generate", "loglikelihood", "rolling"]

# How each source produces a row, by its scorer's `measure` (scorers.ScorerSpec): None is generated text,
# "judge" text then a judge model's verdict, "choices" the log-likelihood of each option ("continuation": of
# one, and whether it is the greedy one, through the same protocol method), "perplexity" the
# log-likelihood of given text. Saved predictions are text only; a multiple-choice row is then scored on the
# option its saved text names. A measure missing from a source's entry is a row it skips.
PRODUCTION: dict[Source, dict[str | None, Capability]] = {
    "local": {
        None: "generate",
        "judge": "generate",
        "choices": "loglikelihood",
        "continuation": "loglikelihood",
        "perplexity": "rolling",
    },
    # Served log-likelihood rows run where the probe found the server's log-probabilities usable; where not,
    # ServedBackend.unavailable skips them with the probe's finding.
    "served": {
        None: "generate",
        "judge": "generate",
        "choices": "loglikelihood",
        "continuation": "loglikelihood",
        "perplexity": "rolling",
    },
    "saved": {None: "generate", "choices": "generate"},
}

_WHY: dict[tuple[Source, str | None], str] = {
    ("saved", "judge"): "are graded by a judge model, and --llmeval-predictions loads none",
    ("saved", "perplexity"): "measure the model itself, and --llmeval-predictions loads none",
    ("saved", "continuation"): "measure the model itself, and --llmeval-predictions loads none",
}


def unavailable(source: Source, measure: str | None, kind: str) -> str | None:
    """Why a row of evaluation type `kind` (its scorer's `measure`) cannot be produced from `source`, as
    the row's skip reason; None when it can."""
    if measure in PRODUCTION[source]:
        return None
    return f"{kind} rows {_WHY[(source, measure)]}"


def capabilities(source: Source) -> frozenset[Capability]:
    """The protocol methods a source's backend implements (base.Backend.capabilities)."""
    return frozenset(PRODUCTION[source].values())


def production(source: Source, measure: str | None) -> Capability | None:
    """How a source produces a row whose scorer measures `measure`; None: it cannot (unavailable says why)."""
    return PRODUCTION[source].get(measure)
