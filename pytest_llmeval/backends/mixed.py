"""Columns from two places in one run: the base and its adapters (and any local model) evaluated in this
process (local.py), beside models served at their own URLs (served.py, `--llmeval-model=NAME=ID@URL`): the
fp32 adapter beside the same adapter as deployed, a 4-bit GGUF behind llama.cpp.

Each column keeps its own backend: every protocol call about one column (or one group of columns, which never
mixes the two: groups are made per backend) goes to the backend that owns it, so the rows, the paired
statistics, Holm and the reports see columns as they always do. What the run as a whole says (its base, its
hardware, the judge) is the local backend's; the served columns add their servers to results.json.

Pure: no pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_llmeval.backends import Capability, Source, capabilities
from pytest_llmeval.backends.base import (
    Backend,
    Columns,
    GenRequest,
    JudgeRuns,
    MeasureRequest,
    Prompted,
    Result,
    RowPrompt,
)

if TYPE_CHECKING:
    from pytest_llmeval.backends.local import LocalBackend
    from pytest_llmeval.backends.served import ServedBackend
    from pytest_llmeval.benchmark import Case
    from pytest_llmeval.cache import FileIndex, ModelIdentity
    from pytest_llmeval.costs import Price
    from pytest_llmeval.records import FluencyRecord


class MixedBackend:
    """Local columns and served ones (base.Backend), each call routed to the backend of its column."""

    source: Source = "local"  # the run's base is here: its header, preflight and hardware are the local ones
    kind = "transformers"  # results.json's run-level `backend`; each served column's entry says "endpoint"
    capabilities = capabilities("local") & capabilities("served")
    metered = True
    shapes_output = True

    def __init__(self, local: LocalBackend, served: ServedBackend) -> None:
        self.local = local
        self.served = served
        self._served_columns = frozenset(served.columns)

    def _of(self, column: str) -> Backend:
        return self.served if column in self._served_columns else self.local

    # --- what it can produce: a row runs only where every column can produce it ---------------------------

    def production(self, measure: str | None) -> Capability | None:
        return self.local.production(measure)

    def unavailable(self, measure: str | None, kind: str) -> str | None:
        return self.local.unavailable(measure, kind) or self.served.unavailable(measure, kind)

    # --- the protocol, routed ------------------------------------------------------------------------------

    def groups(self, columns: Sequence[str], same_prompt: Callable[[str, str], bool]) -> list[list[str]]:
        """The local columns' groups, then each served column alone."""
        local = [c for c in columns if c not in self._served_columns]
        served = [c for c in columns if c in self._served_columns]
        return self.local.groups(local, same_prompt) + self.served.groups(served, same_prompt)

    def prompt(self, columns: Sequence[str], rows: Sequence[RowPrompt]) -> dict[str, Prompted | str]:
        return self._of(columns[0]).prompt(columns, rows)

    def generate(self, column: str, requests: Sequence[GenRequest]) -> list[Result]:
        return self._of(column).generate(column, requests)

    def loglikelihood(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        return self._of(columns[0]).loglikelihood(columns, requests)

    def loglikelihood_rolling(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        return self._of(columns[0]).loglikelihood_rolling(columns, requests)

    def judge(self, cases: Sequence[Case], outputs: Sequence[Mapping[str, str]]) -> JudgeRuns:
        """The judge is the local one (--llmeval-judge-model, else the base here)."""
        return self.local.judge(cases, outputs)

    def fluency(
        self, column: str, references: Sequence[str], texts: Sequence[str | None]
    ) -> list[FluencyRecord]:
        return self._of(column).fluency(column, references, texts)

    def identity(self, column: str, index: FileIndex) -> ModelIdentity | None:
        return self._of(column).identity(column, index)

    def price(self, column: str) -> Price | None:
        return self._of(column).price(column)

    def handle(self, column: str) -> Any:
        return self._of(column).handle(column)

    # --- provenance --------------------------------------------------------------------------------------

    def evaluated_names(self) -> tuple[str | None, str | None]:
        return self.local.evaluated_names()

    def base_name(self) -> str | None:
        return self.local.base_name()

    def describe(self, entry: dict[str, Any], column: str) -> None:
        self._of(column).describe(entry, column)
        if column in self._served_columns:
            entry["backend"] = self.served.kind

    def described(self) -> bool:
        return self.local.described() and self.served.described()

    def load_seconds(self) -> dict[str, float]:
        return self.local.load_seconds()

    def peak_memory(self, memory: dict[str, Any]) -> dict[str, Any]:
        return self.local.peak_memory(memory)

    def keep(self) -> None:
        self.local.keep()

    def run_meta(self, meta: dict[str, Any], hardware: dict[str, Any] | None) -> dict[str, Any]:
        """The local run's settings, and the served columns' servers under inference_config.endpoint."""
        meta = self.local.run_meta(meta, hardware)
        meta["inference_config"]["endpoint"] = self.served.endpoint_meta(self.served.first_settings())
        return meta
