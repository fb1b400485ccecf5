"""The run plan and the row plan. The run plan (RunPlan) is the run's columns and which of them are gated;
the row plan (RowPlan) is which collected node ids are benchmark rows, how they are cut into generation
chunks, the sequential order, and what each row asks of generation (its mode, its samples and their seeds).
Every process computes the same plans from the same settings and collection: the xdist scheduler
(distribution.py) on the controller, the evaluator in each worker. Pure: no pytest, no torch.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.benchmark import Case
from pytest_llmeval.records import BASE, BenchmarkInfo, Domain, RowRecord
from pytest_llmeval.roster import Roster
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.run_options import RunOptions

if TYPE_CHECKING:
    from pytest_llmeval import early_stop
    from pytest_llmeval.prompts import Layer

GATE_PREFIX = "gate::"


@dataclass(frozen=True)
class RowRef:
    """One collected benchmark row, with what collection knew of its file."""

    nodeid: str
    benchmark: BenchmarkInfo
    case: Case


def row_predicate(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Is a node id a benchmark row? `file::id` where the file's name matches a `llmeval_files` pattern.

    The rule pytest_collect_file collects by, applied where only node ids are known (the xdist scheduler
    on the controller). `::id` too: pytest leaves the file part empty for files outside the rootdir.
    """

    def is_row(nodeid: str) -> bool:
        parts = nodeid.split("::")
        if len(parts) != 2:
            return False
        name = parts[0].rsplit("/", 1)[-1]
        return name == "" or any(fnmatch.fnmatch(name, p) for p in patterns)

    return is_row


def chunk_keys(nodeids: Sequence[str], size: int, is_row: Callable[[str], bool]) -> dict[str, str]:
    """Map every node id to its generation chunk: `file::chunk-N` for rows, the node id itself otherwise."""
    keys: dict[str, str] = {}
    seen: dict[str, int] = {}
    for nodeid in nodeids:
        if is_row(nodeid):
            file = nodeid.split("::", 1)[0]
            position = seen.get(file, 0)
            seen[file] = position + 1
            keys[nodeid] = f"{file}::chunk-{position // size}"
        else:
            keys[nodeid] = nodeid
    return keys


def completion_mode(case: Case) -> bool:
    """A completion-style row: its input is sent raw for the model to continue (no chat template), or (a
    multiple-choice row converted from lm-eval) to be followed by each choice (its scorer's `completion`)."""
    from pytest_llmeval.scorers import SCORERS

    completion = SCORERS[case.evaluation_type].completion
    return completion is not None and completion(case.evaluation_config)


def stop_of(case: Case) -> tuple[str, ...] | None:
    """The strings a row's output ends at and is cut before (its scorer's `stop`); None: EOS and its
    max_new_tokens only."""
    from pytest_llmeval.scorers import SCORERS

    stop = SCORERS[case.evaluation_type].stop
    return None if stop is None else stop(case.evaluation_config)


def sampling_of(case: Case) -> tuple[int, float | None]:
    """(samples, temperature) of a row: (1, None) for a greedy one. Only code_execution rows sample."""
    if case.evaluation_type != "code_execution":
        return 1, None
    from pytest_llmeval.scorers import code_execution

    return code_execution.sampling(case.evaluation_config)


def sample_seed(row_id: str, index: int) -> int:
    """The seed of a row's `index`-th sample: the same on every run, worker, batch and model, so sampled
    rows repeat exactly (and fit the 32 bits servers accept)."""
    return int.from_bytes(hashlib.sha256(f"{row_id}\0{index}".encode()).digest()[:4], "big")


def job_keys(node: str, samples: int) -> list[str]:
    """A row's job keys: its node id, or one per sample (`node\\0i`)."""
    return [node] if samples == 1 else [f"{node}\0{i}" for i in range(samples)]


def by_benchmark(rows: Sequence[RowRef]) -> dict[str, list[RowRef]]:
    out: dict[str, list[RowRef]] = {}
    for r in rows:
        out.setdefault(r.benchmark["name"], []).append(r)
    return out


class RunPlan:
    """The run's columns: the base, the base prompted as each adapter declares (where one differs), the
    adapters and full models beside it, which of them are gated and which decides a row. Worked out from
    the settings alone, the same in every process; the roster is read once, on first use."""

    def __init__(self, options: RunOptions, roster: Callable[[], Roster]) -> None:
        self.options = options
        self._find_roster = roster
        self._roster: Roster | None = None

    @property
    def roster(self) -> Roster:
        if self._roster is None:
            self._roster = self._find_roster()
        return self._roster

    def columns(self) -> list[str]:
        """Every column a row is generated or measured for, the base first (then the base prompted as an
        adapter declares, where one differs: base_variants)."""
        sides = self.roster.sides()
        return [sides[0], *self.base_variants(), *sides[1:]]

    def base_variants(self) -> dict[str, str]:
        """`base@<adapter>` -> that adapter, for each distinct prompt declared by an adapter after the
        first that differs from the first's: the base is generated once more per such prompt, so that
        every adapter is compared with the base prompted alike (records.partner). None under
        --llmeval-prompt-per-model, where each model is prompted as it declares and the base as none."""
        declared = self.options.prompt.adapters
        if self.options.prompt.per_model or not declared:
            return {}
        first, *rest = declared
        named: dict[Layer, str] = {declared[first]: BASE}
        out: dict[str, str] = {}
        for side in rest:
            if declared[side] not in named:
                named[declared[side]] = f"{BASE}@{side}"
                out[named[declared[side]]] = side
        return out

    def compared_with(self) -> dict[str, str]:
        """Each adapter compared with a base variant -> that variant (RowRecord `baselines`)."""
        declared = self.options.prompt.adapters
        variants = {declared[side]: variant for variant, side in self.base_variants().items()}
        return {side: variants[layer] for side, layer in declared.items() if layer in variants}

    def evaluated_for(self, info: BenchmarkInfo) -> str:
        """The column whose score passes or fails the rows of one benchmark (roster.Roster.evaluated)."""
        return self.roster.evaluated(info.get("domains") or {})

    def gated_columns(self) -> list[str]:
        """The columns whose comparison with the base gates the run (every adapter, --llmeval-gate-model)."""
        return [m.side for m in self.roster.gated]

    def kinds(self) -> dict[str, str]:
        """Every column beside the base -> its kind (roster.KINDS), in the run's order."""
        return {m.side: m.kind for m in self.roster.members}

    def domains_of(self, benchmark: str, rootdir: Path) -> dict[str, Domain]:
        """In or out of each gated column's domain, for a benchmark file (its path from the rootdir)."""
        return self.roster.domains(benchmark, rootdir)


class RowPlan:
    """The collected rows in collection order, cut into generation chunks, and under --llmeval-sequential
    each benchmark's planned order and the stops decided on it. The xdist scheduler cuts the same chunks
    (chunk_keys) from the same collection, so a row is generated in the same batch with or without -n."""

    def __init__(self, options: RunOptions, plan: RunPlan, store: RowStore) -> None:
        self.options = options
        self.plan = plan
        self.store = store  # the scored rows every process sees (for the sequential looks)
        self.rows: dict[str, RowRef] = {}  # node id -> row, in collection order (filled in place)
        # --llmeval-sequential: each sequential benchmark's rows in planned order (early_stop.planned)
        self.sequential_orders: dict[str, list[str]] = {}
        self._stops: dict[str, early_stop.Outcome] = {}  # benchmarks decided
        self._chunks: dict[str, list[str]] = {}  # chunk key -> node ids
        self._chunk_of: dict[str, str] = {}  # node id -> chunk key

    def chunk_size(self) -> int:
        """Rows per generation chunk (and per xdist work unit): --llmeval-batch-size, and under an endpoint
        at least --llmeval-concurrency, since a chunk's requests are in flight together and a chunk smaller
        than the concurrency would leave it idle."""
        if self.options.endpoint is not None:
            return max(self.options.batch_size, self.options.endpoint.concurrency)
        return self.options.batch_size

    def set_rows(self, rows: Sequence[RowRef]) -> None:
        """Record the collected rows (in collection order) and split them into generation chunks."""
        self.rows.clear()  # in place: the saved-predictions backend reads this mapping
        self.rows.update({r.nodeid: r for r in rows})
        keys = chunk_keys([r.nodeid for r in rows], self.chunk_size(), lambda n: n in self.rows)
        self._chunks = {}
        for r in rows:
            self._chunks.setdefault(keys[r.nodeid], []).append(r.nodeid)
        self._chunk_of = keys
        self.sequential_orders = self.planned_orders(rows) if self.sequential_settings() is not None else {}

    def chunk_key(self, nodeid: str) -> str | None:
        """The chunk a row belongs to (None: not a row of this plan)."""
        return self._chunk_of.get(nodeid)

    def chunk(self, nodeid: str) -> list[str]:
        """The node ids of a row's chunk, in collection order."""
        return self._chunks[self._chunk_of[nodeid]]

    def rows_of(self, benchmark: str) -> list[str]:
        """Node ids of the collected rows of one benchmark file, in collection order."""
        return [n for n, r in self.rows.items() if r.benchmark["name"] == benchmark]

    def where(self, nodeid: str) -> str:
        """`benchmark:line` of a row, which begins every message about it."""
        ref = self.rows[nodeid]
        return f"{ref.benchmark['name']}:{ref.case.line}"

    def planned_orders(self, rows: Sequence[RowRef]) -> dict[str, list[str]]:
        """--llmeval-sequential: each benchmark's rows (node ids) in the order they run, a seeded shuffle
        stratified by difficulty, for the benchmarks that can stop early; {} when it is off. The plugin
        places the collected items in this order, and set_rows keeps it for the anytime-valid looks."""
        if not self.sequential_on():
            return {}
        from pytest_llmeval import early_stop

        orders = {}
        for name, refs in by_benchmark(rows).items():
            shells = [early_stop.shell(r.nodeid, r.benchmark, r.case) for r in refs]
            if early_stop.stops_early(shells):
                order = early_stop.planned(shells, self.options.gate_options.seed)
                orders[name] = [str(r["nodeid"]) for r in order]
        return orders

    def sequential_on(self) -> bool:
        """--llmeval-sequential applies: asked for, a column is gated, and better_than_base tests."""
        opts = self.options.gate_options
        if not opts.sequential or opts.mode != "significant":
            return False
        return bool(self.plan.gated_columns())

    def sequential_settings(self) -> early_stop.Settings | None:
        """--llmeval-sequential's settings; None when it is off, when nothing is gated, or when
        better_than_base decides on the point estimate (--llmeval-gate point: no test to stop on)."""
        if not self.sequential_on():
            return None
        from pytest_llmeval import early_stop

        opts = self.options.gate_options
        gated = self.plan.gated_columns()

        infos = {r.benchmark["name"]: r.benchmark for r in self.rows.values()}
        domains = [early_stop.domain_of(info, column) for info in infos.values() for column in gated]
        return early_stop.Settings(
            seed=opts.seed,
            chunk=self.chunk_size(),
            alpha=opts.alpha,
            warn_drop=opts.warn_drop,
            fail_drop=opts.fail_drop,
            better_family=domains.count("in"),
            degradation_family=domains.count("out"),
        )

    def sequential_outcome(self, benchmark: str, records: Mapping[str, RowRecord]) -> early_stop.Outcome:
        """The anytime-valid decisions on a benchmark's finished prefix of its planned order."""
        from pytest_llmeval import early_stop

        settings = self.sequential_settings()
        assert settings is not None
        return early_stop.outcome(
            self.sequential_orders[benchmark], records, self.plan.gated_columns(), settings
        )

    def sequential_skip(self, nodeid: str) -> str | None:
        """Why this row is not run: its benchmark's gates were decided on the rows before it (None: run
        it). Decided on the finished prefix of the planned order, as every process sees it now."""
        benchmark = self.rows[nodeid].benchmark["name"]
        if benchmark not in self.sequential_orders:
            return None
        out = self._stops.get(benchmark)
        # Looked at when a chunk starts (a decision falls on chunk boundaries): reading every worker's
        # records for every row would cost more than the rows. A stop, once found, is final.
        if out is None and self.chunk(nodeid)[0] == nodeid:
            found = self.sequential_outcome(benchmark, self.store.peek(self.sequential_orders[benchmark]))
            if found.stop is not None:
                out = self._stops[benchmark] = found
        return out.reason if out is not None and out.stopped(nodeid) else None

    def sequential_meta(self) -> dict[str, Any] | None:
        """What results.json needs to reach the decisions the workers reached (early_stop.Settings)."""
        settings = self.sequential_settings() if self.rows else None
        if settings is None:
            return None
        return {
            **settings.to_json(),
            "columns": self.plan.gated_columns(),
            "benchmarks": sorted(self.sequential_orders),
        }
