"""What each model source can produce, decided in one place (backends.unavailable; issue 37)."""

from __future__ import annotations

import pytest

from pytest_llmeval.backends import PRODUCTION, unavailable
from pytest_llmeval.scorers import SCORERS


@pytest.mark.parametrize("source", sorted(PRODUCTION))
def test_every_type_is_produced_or_skipped_with_a_reason_on_every_source(source: str) -> None:
    for kind, spec in SCORERS.items():
        why = unavailable(source, spec.measure, kind)  # type: ignore[arg-type]
        assert why is None or why.startswith(f"{kind} rows "), (source, kind, why)


def test_what_each_source_cannot_produce() -> None:
    skipped = {
        source: sorted(k for k, s in SCORERS.items() if unavailable(source, s.measure, k))  # type: ignore[arg-type]
        for source in PRODUCTION
    }
    assert skipped == {
        "local": [],
        # Saved text scores a multiple-choice row by the option it names; nothing here judges or measures it.
        "saved": ["llm_judge", "loglikelihood", "perplexity"],
        # Served log-likelihood rows run where the probe found the server's log-probabilities usable: that
        # is decided per server (ServedBackend.unavailable, tests/test_served_loglikelihood.py), not here.
        "served": [],
    }
    assert unavailable("saved", "judge", "llm_judge") == (
        "llm_judge rows are graded by a judge model, and --llmeval-predictions loads none"
    )
