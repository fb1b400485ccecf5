"""Where a column's outputs come from: model weights in this process, a model behind an OpenAI-compatible
server, or saved predictions. Issue 37 puts the three behind one protocol; what each can produce is decided
here, once, and a row its source cannot produce is skipped with the one reason below.

Pure: no pytest, no torch.
"""

from __future__ import annotations

from typing import Literal

Source = Literal["local", "served", "saved"]

# What each source produces, by the scorer's `measure` (scorers.ScorerSpec): None is generated text, "judge"
# text then a judge model's verdict (the judge runs here whatever the source), "choices" the log-likelihood
# of each option, "perplexity" the log-likelihood of given text. Saved predictions are text only; a
# multiple-choice row is then scored on the option its saved text names.
PRODUCES: dict[Source, frozenset[str | None]] = {
    "local": frozenset({None, "judge", "choices", "perplexity"}),
    "served": frozenset({None, "judge"}),
    "saved": frozenset({None, "choices"}),
}

_WHY: dict[tuple[Source, str | None], str] = {
    ("saved", "judge"): "are graded by a judge model, and --llmeval-predictions loads none",
    ("saved", "perplexity"): "measure the model itself, and --llmeval-predictions loads none",
    ("served", "choices"): (
        "need the model's log-likelihood of given text, which an OpenAI-compatible endpoint does not "
        "return (--llmeval-endpoint): run them on the model's folder"
    ),
}
_WHY[("served", "perplexity")] = _WHY[("served", "choices")]


def unavailable(source: Source, measure: str | None, kind: str) -> str | None:
    """Why a row of evaluation type `kind` (its scorer's `measure`) cannot be produced from `source`, as
    the row's skip reason; None when it can."""
    if measure in PRODUCES[source]:
        return None
    return f"{kind} rows {_WHY[(source, measure)]}"
