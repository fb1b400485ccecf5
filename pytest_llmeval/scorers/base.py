"""The Score every scorer returns, and the ScorerSpec the registry holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Score:
    """The score of one prediction against one expected answer."""

    value: float  # in [0, 1]
    threshold: float  # the row passes when value >= threshold
    details: Mapping[str, Any] = field(default_factory=dict)  # JSON-able: extracted answer, normalised forms

    @property
    def passed(self) -> bool:
        return self.value >= self.threshold

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "threshold": self.threshold, "passed": self.passed, **self.details}


@dataclass(frozen=True)
class ScorerSpec:
    """What the collector and the runner need to know of one evaluation type."""

    # Raises ValueError with a one-line reason when evaluation_config is invalid (checked at collection).
    validate: Callable[[Mapping[str, Any]], None]
    # Scores one prediction; never sees the model.
    score: Callable[[str, str, Mapping[str, Any]], Score]
