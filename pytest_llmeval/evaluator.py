"""The evaluator: what one pytest process does to evaluate rows and gates, as the plugin and items.py see
it. A small facade over the roles that do it (evaluation/): the plans (planning.py), the prompt builder,
the output producer over the model backend (backends/), the row scorer, the gate runner, the cost ledger
and the metadata builder. One per process (a worker under xdist, the only process serially), kept in
config.stash; nothing is loaded until a row asks. The controller's side of a run is recorder.py; rows
travel between them on test reports and, for gates, through rowstore.py. No pytest here and no torch at
import time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval import gates, held_out
from pytest_llmeval.backends.base import Backend
from pytest_llmeval.backends.saved import SavedBackend
from pytest_llmeval.benchmark import Benchmark
from pytest_llmeval.evaluation.gating import GateRunner
from pytest_llmeval.evaluation.ledger import Ledger
from pytest_llmeval.evaluation.outputs import RowResult
from pytest_llmeval.evaluation.producer import Producer
from pytest_llmeval.evaluation.prompting import Prompter
from pytest_llmeval.evaluation.provenance import Provenance
from pytest_llmeval.evaluation.scoring import RowScorer
from pytest_llmeval.history import Baselines, Identity
from pytest_llmeval.models import adapter_metadata
from pytest_llmeval.planning import RowPlan, RowRef, RunPlan
from pytest_llmeval.records import ADAPTER, BenchmarkInfo, Domain
from pytest_llmeval.roster import Member, Roster
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.run_options import RunOptions, TrainingEvidence

if TYPE_CHECKING:
    from pytest_llmeval.backends.served import ServedLLM
    from pytest_llmeval.backends.weights import ModelShelf
    from pytest_llmeval.models import LLM


@dataclass
class Evaluator:
    """Everything one pytest process needs to evaluate rows and gates; kept in config.stash."""

    options: RunOptions
    store: RowStore = field(default_factory=RowStore)
    baselines: Baselines = field(default_factory=Baselines)  # earlier runs, for no_regression
    # column -> its training log (hooks.configure._training_logs), read when the run is configured.
    training_logs: dict[str, TrainingEvidence] = field(default_factory=dict)
    # Every training log named or found, read or not: data, never collected as a benchmark.
    training_files: tuple[Path, ...] = ()
    notices: list[str] = field(default_factory=list)  # warnings for the plugin to show (once each)
    shipped_meta: dict[str, Any] | None = None  # xdist worker: the metadata last sent on a report

    def __post_init__(self) -> None:
        opts = self.options
        self.plan = RunPlan(opts, self._find_roster)
        self.rowplan = RowPlan(opts, self.plan, self.store)
        self.prompter = Prompter(opts, self.plan, self.rowplan.rows)
        self.ledger = Ledger(opts)
        self.producer = Producer(opts, self.plan, self.rowplan, self.prompter, self.ledger, self.notices)
        self.scorer = RowScorer(
            opts, self.plan, self.rowplan, self.prompter, self.producer, self.ledger, self.notices
        )
        self.producer.warm = self.scorer.warm_embeddings
        self.gating = GateRunner(
            opts,
            self.plan,
            self.rowplan,
            self.prompter,
            self.store,
            self.baselines,
            self.identity,
            self.training_logs,
        )
        self.provenance = Provenance(
            opts, self.plan, self.rowplan, self.prompter, self.producer, self.ledger, self.gating
        )

    def _find_roster(self) -> Roster:
        """The columns beside the base: the options' roster, else the one --adapter's column (an evaluator
        made without the plugin), or the saved predictions' (backends.saved)."""
        opts = self.options
        backend = self.producer.backend() if opts.predictions is not None else None
        if isinstance(backend, SavedBackend):
            return backend.roster(opts.gate_options.domain_globs)
        path = opts.spec.adapter
        if not opts.roster.members and path is not None:
            meta = adapter_metadata(path)
            globs = (*meta.get("domain_benchmarks", []), *opts.gate_options.domain_globs)
            return Roster(
                (Member(ADAPTER, str(meta["name"]), "adapter", str(path), True, tuple(globs), path),)
            )
        return opts.roster

    # --- the plans ----------------------------------------------------------------------------------------

    @property
    def roster(self) -> Roster:
        return self.plan.roster

    @property
    def rows(self) -> dict[str, RowRef]:
        """The collected rows, node id -> row, in collection order."""
        return self.rowplan.rows

    @property
    def benchmarks(self) -> dict[str, Benchmark]:
        """Benchmark name -> the parsed file, as collected."""
        return self.prompter.benchmarks

    def columns(self) -> list[str]:
        return self.plan.columns()

    def evaluated_for(self, info: BenchmarkInfo) -> str:
        return self.plan.evaluated_for(info)

    def domains_of(self, benchmark: str, rootdir: Path) -> dict[str, Domain]:
        return self.plan.domains_of(benchmark, rootdir)

    def chunk_size(self) -> int:
        return self.rowplan.chunk_size()

    def set_rows(self, rows: Sequence[RowRef]) -> None:
        self.rowplan.set_rows(rows)

    def planned_orders(self, rows: Sequence[RowRef]) -> dict[str, list[str]]:
        return self.rowplan.planned_orders(rows)

    def sequential_on(self) -> bool:
        return self.rowplan.sequential_on()

    def read_prompts(self, name: str, benchmark: Benchmark) -> list[tuple[int, str]]:
        return self.prompter.read_prompts(name, benchmark)

    # --- the model backend ----------------------------------------------------------------------------------

    def backend(self) -> Backend:
        return self.producer.backend()

    @property
    def source(self) -> str:
        return self.producer.source

    def shelf(self) -> ModelShelf:
        return self.producer.shelf()

    def llm(self, *, adapter: bool | str) -> LLM | ServedLLM:
        return self.producer.llm(adapter=adapter)

    def llm_models(self) -> dict[str, LLM | ServedLLM]:
        return self.producer.llm_models()

    # --- rows and gates ------------------------------------------------------------------------------------

    def score_row(self, nodeid: str) -> RowResult:
        return self.scorer.score_row(nodeid)

    def evaluate_gate(
        self, benchmark: str, name: str, column: str | None = None, metric: str | None = None
    ) -> tuple[gates.Verdict, dict[str, Any] | None]:
        return self.gating.evaluate_gate(benchmark, name, column, metric)

    def training_rows(self) -> list[held_out.TrainingRow]:
        return self.gating.training_rows()

    def training_gates(self) -> list[tuple[Member, str]]:
        return self.gating.training_gates()

    def training_verdict(self, column: str, gate: str) -> gates.Verdict:
        return self.gating.training_verdict(column, gate)

    def run_gates(self) -> list[tuple[Member, str]]:
        return self.gating.run_gates()

    def run_verdict(self, member: Member, gate: str) -> gates.Verdict:
        return self.gating.run_verdict(member, gate)

    # --- provenance ----------------------------------------------------------------------------------------

    def identity(self) -> Identity:
        return self.provenance.identity()

    def meta(self) -> dict[str, Any]:
        return self.provenance.meta()

    @property
    def subset(self) -> dict[str, Any] | None:
        """--llmeval-sample: which rows ran (seed, sizes, the ids' digest), set by the plugin."""
        return self.provenance.subset

    @subset.setter
    def subset(self, value: dict[str, Any] | None) -> None:
        self.provenance.subset = value
