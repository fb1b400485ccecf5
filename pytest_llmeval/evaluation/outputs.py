"""What one row produced, and the outcomes a row can have before it is scored. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmeval.records import FluencyRecord, RowRecord
from pytest_llmeval.scorers import Score


@dataclass(frozen=True)
class RowOutputs:
    """What each column produced on one row: its generated text, or for a measured type (perplexity,
    multiple choice) and a judged one (llm_judge, beside the text) what was measured."""

    texts: dict[str, str] = field(default_factory=dict)  # column -> generated text (a sampled row's first)
    # A sampled row (pass@k): column -> its n sampled texts, in sample order.
    samples: dict[str, list[str]] | None = None
    measures: dict[str, dict[str, Any]] = field(default_factory=dict)  # column -> measurement
    # --llmeval-fluency: per column, its output's and the reference's perplexity
    fluency: dict[str, FluencyRecord] | None = None
    # Columns whose output opened with a reasoning block: column -> the raw output (texts holds the answer).
    raw: dict[str, str] = field(default_factory=dict)
    unterminated: tuple[str, ...] = ()  # columns whose reasoning block never closed (no answer: unparsed)

    def columns(self) -> list[str]:
        return list(self.texts) if self.texts else list(self.measures)


class RowError(Exception):
    """A row cannot be scored (no saved prediction, a scorer raised, no model); the message is complete."""


class RowSkipped(Exception):
    """A row cannot be evaluated in this run (a perplexity row without a model); the message says why."""


@dataclass(frozen=True)
class RowResult:
    """A scored row: its record, and what decides pass or fail."""

    record: RowRecord
    score: Score | None  # the evaluated model's score (adapter when given, else base); None on error
    error: str | None = None
    skipped: str | None = None  # why the row cannot be evaluated in this run
