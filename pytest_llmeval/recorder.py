"""The recorder: the controller's side of a run. It keeps every row record and gate verdict the test reports
carry (serially this process's, under xdist every worker's, replayed here), the workers' metadata and cache
counts, and builds the results.json document once at the end.

Only the controller has one (serially the only process is the controller). hooks/reporting.py feeds it
from the hooks; nothing here imports pytest or torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmeval.cache import CacheStats
from pytest_llmeval.history import Baselines, Identity
from pytest_llmeval.records import GateRecord, RowRecord
from pytest_llmeval.results import NotRun, Selection, adapter_documents, build_results, not_run_order


@dataclass
class Recorder:
    """Records, verdicts and metadata of one run, on the controller."""

    alpha: float
    composite_weights: dict[str, float] | None
    baselines: Baselines  # earlier runs, for comparison_with_previous
    adjust: str = "holm"  # --llmeval-adjust
    records: dict[str, RowRecord] = field(default_factory=dict)  # node id -> record
    gates: dict[str, GateRecord] = field(default_factory=dict)  # node id -> verdict
    expected_rows: int | None = None  # rows collected (under xdist: from a worker's collection)
    # Serially, rows collected per benchmark (for progress lines); under xdist the controller collects none.
    expected_by_benchmark: dict[str, int] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)  # rows whose test ended without a record, and why
    # The collection's selection (selection_of): rows selected, rows in the collected files, how, and the
    # gates deselected.
    selection: Selection | None = None
    # Benchmark files that failed to collect (pytest_collectreport: serially this process's, under xdist
    # the workers' replayed here), by file.
    uncollected: dict[str, NotRun] = field(default_factory=dict)
    _metas: dict[str, dict[str, Any]] = field(default_factory=dict)  # process -> its latest metadata

    def add_row(self, record: RowRecord) -> None:
        self.records[record["nodeid"]] = record
        self.lost.pop(record["nodeid"], None)

    def add_gate(self, nodeid: str, gate: GateRecord) -> None:
        self.gates[nodeid] = gate

    def add_uncollected(self, entry: NotRun) -> None:
        """A benchmark file that failed to collect: none of its rows or gates ran."""
        self.uncollected[str(entry["file"])] = entry

    def not_run(self) -> list[NotRun]:
        """What the run was given and did not run: files that failed to collect, gates deselected."""
        deselected = [] if self.selection is None else self.selection["not_run"]
        return not_run_order([*self.uncollected.values(), *deselected])

    def add_meta(self, meta: dict[str, Any], *, process: str) -> None:
        """A process's latest metadata (Evaluator.meta()): the controller's, or a worker's."""
        # Workers send theirs on their reports as it changes (so an interrupted run that never sees a
        # worker finish still has it) and once more when they finish: the latest of each process counts.
        self._metas[process] = meta

    def rows_done(self, benchmark: str | None = None) -> int:
        """Rows recorded so far, of one benchmark or of all."""
        if benchmark is None:
            return len(self.records)
        return sum(1 for r in self.records.values() if r["benchmark"]["name"] == benchmark)

    def incomplete_reasons(self) -> list[str]:
        """Why the recorded rows are not the whole run (the session's own stop reasons come on top)."""
        reasons = self.partial_reasons()
        errored = sum(1 for r in self.records.values() if r["error"] is not None)
        if errored:
            # An errored row is a row without a score: the run did not measure what it was asked to.
            reasons.append(f"{errored} of {len(self.records)} rows errored")
        return reasons

    def partial_reasons(self) -> list[str]:
        """Why not every row of the benchmark files given ran: a file that failed to collect, a selection, a
        sample, a stop. (A row that ran and errored is not among them: such a run measured the model as it
        is now, and fails on it.)"""
        # A file that failed to collect (--continue-on-collection-errors) would have had rows and gates:
        # without it the run is not the one asked for, whatever its other files say.
        reasons = [f"{file} failed to collect" for file in sorted(self.uncollected)]
        selection = self.selection
        if selection is not None and selection["selected"] < selection["total"]:
            selected, total, how = selection["selected"], selection["total"], selection["how"]
            reasons.append(f"{selected} of {total} rows selected ({how})")
        if self.expected_rows is not None and len(self.records) < self.expected_rows:
            reasons.append(f"{len(self.records)} of {self.expected_rows} rows finished")
        stopped = self._spent().get("stopped")
        if stopped:
            reasons.append(stopped)
        return reasons

    def _spent(self) -> dict[str, Any]:
        """Every process's `spent` as one (costs.merge_spent)."""
        from pytest_llmeval.costs import merge_spent

        return merge_spent(m["spent"] for m in self._metas.values() if m.get("spent"))

    def meta(self) -> dict[str, Any]:
        """The richest process metadata (every process that loaded the model reports the same; one that
        loaded none, such as the xdist controller, reports less), with every process's cache counts summed."""
        if not self._metas:
            return {}
        richest: dict[str, Any] = max(self._metas.values(), key=_richness)
        meta = dict(richest)
        meta["spent"] = self._spent()
        # --llmeval-sequential's settings come from a process that collected rows (not the xdist controller).
        found = [m["sequential"] for m in self._metas.values() if m.get("sequential")]
        meta["sequential"] = found[0] if found else None
        caches = [
            cache
            for m in self._metas.values()
            if (cache := (m.get("inference_config") or {}).get("cache") or {}).get("enabled")
        ]
        if caches and isinstance(meta.get("inference_config"), dict):
            total = CacheStats()
            for cache in caches:
                total.add(cache)
            meta["inference_config"] = {**meta["inference_config"], "cache": {**caches[0], **total.to_json()}}
        served = [e for m in self._metas.values() if (e := (m.get("inference_config") or {}).get("endpoint"))]
        if served and isinstance(meta.get("inference_config"), dict):
            # Every process sent its own requests: the run's counts are their sums.
            counts: dict[str, int] = {}
            for endpoint in served:
                for name, value in (endpoint.get("requests") or {}).items():
                    counts[name] = counts.get(name, 0) + int(value)
            endpoint = {**meta["inference_config"]["endpoint"], "requests": counts}
            meta["inference_config"] = {**meta["inference_config"], "endpoint": endpoint}
        return meta

    def _options(self, reasons: Sequence[str], identity: Identity) -> dict[str, Any]:
        reasons = [*reasons, *self.incomplete_reasons()]
        return {
            "gates": self.gates.values(),
            "previous": (
                (lambda benchmark: self.baselines.for_benchmark(benchmark, identity))
                if self.baselines.available
                else None
            ),
            "alpha": self.alpha,
            "composite_weights": self.composite_weights,
            "complete": not reasons,
            "incomplete_reason": "; ".join(reasons) or None,
            "not_run": self.not_run(),
        }

    def adapter_documents(self, *, reasons: Sequence[str], identity: Identity) -> dict[str, dict[str, Any]]:
        """Each adapter's own LocoLLM document of a run with several columns (results.adapter_documents)."""
        return adapter_documents(self.records.values(), meta=self.meta(), **self._options(reasons, identity))

    def document(self, *, reasons: Sequence[str], identity: Identity) -> dict[str, Any]:
        """The results.json document of everything recorded; `identity` picks baselines in the history."""
        meta = self.meta()
        document = build_results(
            self.records.values(), meta=meta, adjust=self.adjust, **self._options(reasons, identity)
        )
        if meta.get("predictions_file") is not None:
            document["predictions"] = {
                "file": meta["predictions_file"],
                "unmatched_ids": meta.get("unmatched_predictions", []),
            }
        return document


def _richness(meta: dict[str, Any]) -> tuple[int, bool]:
    """How much a process's metadata says: its fields, then whether it knows the served models (an xdist
    worker that got no row never asked the endpoint about them)."""
    endpoint = (meta.get("inference_config") or {}).get("endpoint") or {}
    served = endpoint.get("models") or {}
    return len(meta), bool(served) and all(v is not None for v in served.values())
