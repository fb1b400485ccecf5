"""The evaluator: what one pytest process does to evaluate rows. It plans generation chunks, holds the
models and scorer resources, generates and measures, scores a row into a RowRecord, and gathers a gate's
rows for the pure verdicts of gates.py.

One per process (a worker under xdist, the only process serially), kept in config.stash. The controller's
side of a run is recorder.py; rows travel between them on test reports and, for gates, through
rowstore.py. No pytest here (plugin.py and items.py hold the glue) and no torch at import time.

Generation unit: a *chunk*, up to `batch_size` consecutive rows of one benchmark file in collection order
(after -k/-m deselection). When a row runs and its output is missing, its whole chunk is generated in one
batched call, base and adapter. Under xdist the plugin's scheduler sends whole chunks to one worker, so each
worker generates exactly the rows it runs; every process computes the same chunks from the same collection,
so a row is generated in the same batch with or without -n, and results.json is the same.
"""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval import gates
from pytest_llmeval.backends import Source, unavailable
from pytest_llmeval.benchmark import Benchmark, Case, Prediction, load_predictions
from pytest_llmeval.cache import (
    CacheStats,
    FileIndex,
    GenerationCache,
    ModelIdentity,
    adapter_files,
    fingerprint_files,
    identify,
    model_files,
)
from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.generation import DecodingConfig
from pytest_llmeval.history import Baselines, Identity
from pytest_llmeval.models import LLM, LoadedModel, ModelError, ModelSpec, adapter_metadata, resolve_base
from pytest_llmeval.records import (
    ADAPTER,
    BASE,
    BenchmarkInfo,
    Domain,
    FluencyRecord,
    RowRecord,
    SideRecord,
    evaluated_value,
    partner,
    row_record,
    variant_of,
)
from pytest_llmeval.results import comparison_blocks, previous_comparison, training_entry
from pytest_llmeval.roster import Member, Roster
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.scorers import SCORERS, Score
from pytest_llmeval.training import TrainingLog

if TYPE_CHECKING:
    # Imported where used: the plugin imports this module at pytest's start, and runs without an endpoint
    # never need the client.
    from pytest_llmeval import early_stop
    from pytest_llmeval.costs import Budget, Price
    from pytest_llmeval.endpoint import EndpointSettings, ServedModel
    from pytest_llmeval.prompts import BenchmarkPrompt, Example, Layer, PromptOptions, PromptSpec

GATE_PREFIX = "gate::"


@dataclass(frozen=True)
class GateOptions:
    """Command-line choices for the gates."""

    mode: str = "significant"  # better_than_base: "significant" (paired test) or "point" (LocoLLM criterion)
    alpha: float = 0.05
    warn_drop: float = 0.05
    fail_drop: float = 0.10
    min_rows: int = 50
    min_edge: int = 5
    domain_globs: tuple[str, ...] = ()  # benchmark paths (relative to the rootdir) that are in-domain
    train_data: Path | None = None  # --llmeval-train-data, else the adapter folder's training file
    slice_keys: tuple[str, ...] = ()  # --llmeval-slice-gate: no_degradation judges each slice of these keys
    # --llmeval-sequential: rows in a seeded planned order, a benchmark stops once its comparison gates are
    # decided by an anytime-valid test (early_stop); seed: --llmeval-seed.
    sequential: bool = False
    seed: int = 0
    # --llmeval-training-gates: converged and no_overfitting of a column with a training log warn (pass
    # with a warning), fail, or are not made ("off"); --llmeval-training-window: training.analyse's window.
    training_gates: str = "warn"
    training_window: int = 50


@dataclass(frozen=True)
class TrainingEvidence:
    """A column's training log, read when the run is configured (identically in every process)."""

    log: TrainingLog
    found: str  # "--llmeval-training-log", or "adapter folder" (found there without the option)


@dataclass(frozen=True)
class RunOptions:
    """Command-line choices that shape generation."""

    spec: ModelSpec
    predictions: Path | None = None  # --llmeval-predictions: score these outputs, load no model
    batch_size: int = 32
    max_new_tokens: int = 512
    gate_options: GateOptions = GateOptions()
    # --llmeval-fluency: perplexity of each model's generated outputs (and of the references) under that
    # same model, as the QA fine-tuning document asks; --llmeval-ppl-model names one external scorer
    # for every side instead (and turns fluency on).
    fluency: bool = False
    ppl_model: str | None = None
    judge_model: str | None = None  # --llmeval-judge-model; None: the base with the adapter off
    composite_weights: dict[str, float] | None = None  # None: results.DEFAULT_COMPOSITE_WEIGHTS
    sandbox_mode: str = "auto"  # --llmeval-sandbox: auto | strict | basic (code_execution rows)
    sandbox_jobs: int | None = None  # --llmeval-sandbox-jobs; None: sandbox.default_jobs()
    cache_dir: Path | None = None  # --llmeval-cache-dir (default: pytest's cache); None: --llmeval-no-cache
    context_overflow: str = "error"  # --llmeval-context-overflow: generation.OVERFLOW_POLICIES
    token_budget: int | None = 32768  # --llmeval-token-budget: padded tokens per generation batch
    # The columns beside the base (several --adapter, --llmeval-model, --llmeval-reference); empty: the
    # one --adapter of spec, if any (Evaluator.roster builds its column).
    roster: Roster = field(default_factory=Roster)
    adjust: str = "holm"  # --llmeval-adjust: how a run's family of p-values is adjusted (holm | none)
    # --llmeval-endpoint: every column (and the judge) is a model id served at these URLs; no weights here.
    endpoint: EndpointSettings | None = None
    quantization: str | None = None  # --llmeval-quantization: the served weights' format, when no server says
    # --llmeval-reasoning-tags: a leading reasoning block is cut off before scoring; None (--llmeval-keep-
    # reasoning): outputs are scored whole.
    reasoning_tags: tuple[str, str] | None = ("<think>", "</think>")
    # --llmeval-max-tokens / --llmeval-max-cost: no further chunk is sent to a model once this process has
    # spent its share (costs.Budget; `workers`: the xdist workers sharing the caps).
    max_tokens: int | None = None
    max_cost: float | None = None
    workers: int = 1
    prices: dict[str, Price] = field(default_factory=dict)  # [tool.llmeval.prices], by served model id
    # The command line's prompt settings and each adapter's declared prompt (prompts.py).
    prompt: PromptOptions = field(default_factory=lambda: _prompt_options())


def _prompt_options() -> PromptOptions:
    # Imported here: the plugin imports this module at pytest's start, and prompts.py need not load then.
    from pytest_llmeval.prompts import PromptOptions

    return PromptOptions()


@dataclass(frozen=True)
class RowRef:
    """One collected benchmark row, with what collection knew of its file."""

    nodeid: str
    benchmark: BenchmarkInfo
    case: Case


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


def _free_device_memory(loaded: LoadedModel) -> None:
    """After a failed batch on CUDA (out of memory, say): release what the failed forward held."""
    if loaded.device.type == "cuda":
        import torch

        torch.cuda.empty_cache()


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
    """A completion-style row: its input is sent raw for the model to continue (no chat template)."""
    from pytest_llmeval.scorers import code_execution

    return case.evaluation_type == "code_execution" and code_execution.completion_mode(case.evaluation_config)


def sampling_of(case: Case) -> tuple[int, float | None]:
    """(samples, temperature) of a row: (1, None) for a greedy one. Only code_execution rows sample."""
    if case.evaluation_type != "code_execution":
        return 1, None
    from pytest_llmeval.scorers import code_execution

    return code_execution.sampling(case.evaluation_config)


def sample_seed(row_id: str, index: int) -> int:
    """The seed of a row's `index`-th sample: the same on every run, worker, batch and model, so sampled
    rows repeat exactly (and fit the 32 bits servers accept)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{row_id}\0{index}".encode()).digest()[:4], "big")


@dataclass(frozen=True)
class _Job:
    """One output to generate: a row's (greedy) output, or one of its samples."""

    node: str
    prompt: str
    limit: int
    sampled: tuple[float, int] | None = None  # (temperature, seed)


def _job_keys(node: str, samples: int) -> list[str]:
    return [node] if samples == 1 else [f"{node}\0{i}" for i in range(samples)]


def _predicts(prediction: Prediction, benchmark: str, row_id: str) -> bool:
    """A saved prediction is for a row: same id, and its optional `benchmark` is a suffix of the file's."""
    return prediction.id == row_id and (
        # A path suffix: "bench.jsonl" names "data/bench.jsonl", not "data/other_bench.jsonl".
        prediction.benchmark is None
        or benchmark == prediction.benchmark
        or benchmark.endswith("/" + prediction.benchmark)
    )


def _served_seed(served: ServedModel) -> int | None:
    """The seed every request to a served model carries: 0 where the server accepts one (its greedy
    answers do not depend on it, but a server that samples anyway is then repeatable), else none."""
    return 0 if served.accepts_seed else None


class ServedLLM:
    """The `llm` fixtures' handle on a column served at --llmeval-endpoint: `generate` as LLM's (greedy,
    the row's prompt as the user message; chat=False sends it raw to /v1/completions), no perplexity."""

    def __init__(self, run: Evaluator, column: str) -> None:
        self.run = run
        self.column = column
        self.adapter = column != BASE
        self.max_new_tokens = run.options.max_new_tokens

    @property
    def name(self) -> str:
        return f"{self.run.served_id(self.column)} (served)"

    def __repr__(self) -> str:
        return f"<LLM {self.name}>"

    def generate(
        self, prompts: Sequence[str], *, max_new_tokens: int | None = None, chat: bool = True
    ) -> list[str]:
        """Greedy completions from the server; a request that fails after its retries raises RowError."""
        from pytest_llmeval.endpoint import Request

        model_id = self.run.served_id(self.column)
        seed = _served_seed(self.run.served_models()[model_id])
        limit = max_new_tokens or self.max_new_tokens
        answers = self.run.endpoint().complete(
            [Request(model=model_id, prompt=p, max_tokens=limit, chat=chat, seed=seed) for p in prompts]
        )
        failed = [a.error for a in answers if a.text is None]
        if failed:
            raise RowError(f"{model_id} at the endpoint: {len(failed)} of {len(answers)} failed: {failed[0]}")
        return [str(a.text).strip() for a in answers]  # stripped as generation.generate strips

    def perplexity(self, *args: Any, **kwargs: Any) -> Any:
        raise RowError(
            f"{self.name}: perplexity needs the model's log-likelihoods, which an OpenAI-compatible endpoint "
            "does not return; measure it on the model's folder"
        )


def _evidence(records: Sequence[RowRecord], scored: int) -> gates.Evidence:
    """What a comparison gate of these rows has to decide on (`scored`: the pairs it compares)."""
    return gates.Evidence(
        rows=len(records),
        scored=scored,
        errored=sum(1 for r in records if r["error"] is not None),
        skipped=sum(1 for r in records if r["skipped"] is not None),
    )


def _by_benchmark(rows: Sequence[RowRef]) -> dict[str, list[RowRef]]:
    out: dict[str, list[RowRef]] = {}
    for r in rows:
        out.setdefault(r.benchmark["name"], []).append(r)
    return out


@dataclass
class Evaluator:
    """Everything one pytest process needs to evaluate rows and gates; kept in config.stash."""

    options: RunOptions
    store: RowStore = field(default_factory=RowStore)
    baselines: Baselines = field(default_factory=Baselines)  # earlier runs, for no_regression
    rows: dict[str, RowRef] = field(default_factory=dict)  # node id -> row, in collection order
    benchmarks: dict[str, Benchmark] = field(default_factory=dict)  # benchmark name -> the parsed file
    # benchmark name -> its sidecar's prompt settings and few-shot pool (prompts.load_benchmark_prompt)
    benchmark_prompts: dict[str, BenchmarkPrompt] = field(default_factory=dict)
    # node id -> column -> the prompt it was given (the text; a served chat row's messages as JSON)
    prompts: dict[str, dict[str, str]] = field(default_factory=dict)
    # (benchmark, row id, k) -> the row's few-shot examples (examples())
    _examples: dict[tuple[str, str, int], list[Example]] = field(default_factory=dict)
    outputs: dict[str, RowOutputs] = field(default_factory=dict)
    row_errors: dict[str, str] = field(default_factory=dict)  # rows of a computed chunk that have no output
    truncated: dict[str, dict[str, Any]] = field(default_factory=dict)  # rows whose prompt was cut to fit
    retries: list[dict[str, Any]] = field(default_factory=list)  # generation batches split after a failure
    notices: list[str] = field(default_factory=list)  # warnings for the plugin to show (once each)
    # What each row cost each column (costs.side_cost), node id -> column -> cost; the budget it spends.
    costs: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    _budget: Budget | None = None  # made from the options on first use (budget())
    stopped: str | None = None  # why later rows were not run (the budget ran out)
    _load_s: dict[str, float] = field(default_factory=dict)  # loading seconds of released column models
    # --llmeval-sequential: each sequential benchmark's rows in planned order (early_stop.planned)
    sequential_orders: dict[str, list[str]] = field(default_factory=dict)
    _sequential_stops: dict[str, early_stop.Outcome] = field(default_factory=dict)  # benchmarks decided
    cache: GenerationCache | None = None  # built on the first generated chunk (options.cache_dir)
    _chunks: dict[str, list[str]] = field(default_factory=dict)  # chunk key -> node ids
    _chunk_of: dict[str, str] = field(default_factory=dict)  # node id -> chunk key
    _loaded: LoadedModel | None = None
    _load_error: ModelError | None = None
    _other_models: dict[str, LoadedModel] = field(default_factory=dict)  # --llmeval-ppl/judge-model
    _column_models: dict[str, LoadedModel] = field(default_factory=dict)  # --llmeval-model columns held now
    _column_errors: dict[str, str] = field(default_factory=dict)  # --llmeval-model columns that cannot load
    _kept_columns: set[str] = field(default_factory=set)  # held for the llm_models fixture
    # Each own-weights column's provenance (_provenance), taken when it loads: it may be released since.
    _column_provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    _roster: Roster | None = None  # roster, worked out once
    _family: list[dict[str, Any]] | None = None  # the comparisons that decide gates (gate_family())
    _embedder: Any = None  # embeddings.Embedder, loaded on the first semantic or bertscore row
    _embedder_error: str | None = None
    _sandbox: Any = None  # sandbox.Sandbox, built on the first code_execution row
    _sandbox_unavailable: str | None = None
    _prefetched: Any = None  # sandbox.Prefetched: the code runs of the chunk being scored, run together
    _prefetched_chunk: str | None = None
    _predictions: list[Prediction] | None = None
    _training: list[gates.TrainingRow] | None = None
    # column -> its training log (plugin._training_logs); their results.json entries, worked out once.
    training_logs: dict[str, TrainingEvidence] = field(default_factory=dict)
    # Every training log named or found, read or not: data, never collected as a benchmark.
    training_files: tuple[Path, ...] = ()
    _training_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    _cache_identity: ModelIdentity | None = None
    _column_identities: dict[str, ModelIdentity] = field(default_factory=dict)
    _fingerprints: dict[str, str | None] = field(default_factory=dict)  # models_meta(), per column
    _models_meta: list[dict[str, Any]] | None = None  # models_meta(), once the model is loaded
    _cache_off: bool = False  # the model's files could not be fingerprinted: generate without the cache
    _endpoint: Any = None  # endpoint.Endpoint, built on first use (--llmeval-endpoint)
    _served: dict[str, ServedModel] | None = None  # served model id -> what the probe found
    _predictions_name: str | None = None
    _served_error: str | None = None  # the probe failed: every row that needs the endpoint fails with it
    _served_at: str | None = None  # when the probe ran (UTC, ISO 8601): results.json's date of the models
    _hardware: dict[str, Any] | None = None  # meta()'s hardware, worked out once
    _identity: Identity | None = None  # identity(), worked out once (a hub id's lookup reads the disk)
    shipped_meta: dict[str, Any] | None = None  # xdist worker: the metadata last sent on a report
    subset: dict[str, Any] | None = None  # --llmeval-sample: which rows ran (seed, sizes, the ids' digest)

    @property
    def has_adapter(self) -> bool:
        if self.options.predictions is not None:
            # With saved predictions, `prediction` plays the adapter when `base_prediction` plays the base.
            return any(p.base_prediction is not None for p in self.predictions())
        return bool(self.roster.adapters)

    @property
    def roster(self) -> Roster:
        """The columns beside the base: the options' roster, else the one --adapter's column (an evaluator
        made without the plugin), worked out once."""
        if self._roster is None:
            self._roster = self.options.roster
            path = self.options.spec.adapter
            if not self._roster.members and path is not None:
                meta = adapter_metadata(path)
                globs = (*meta.get("domain_benchmarks", []), *self.options.gate_options.domain_globs)
                member = Member(ADAPTER, str(meta["name"]), "adapter", str(path), True, tuple(globs), path)
                self._roster = Roster((member,))
        return self._roster

    def columns(self) -> list[str]:
        """Every column a row is generated or measured for, the base first (then the base prompted as an
        adapter declares, where one differs: base_variants)."""
        if self.options.predictions is not None:
            return [BASE, ADAPTER] if self.has_adapter else [BASE]
        sides = self.roster.sides()
        return [sides[0], *self.base_variants(), *sides[1:]]

    def base_variants(self) -> dict[str, str]:
        """`base@<adapter>` -> that adapter, for each distinct prompt declared by an adapter after the
        first that differs from the first's: the base is generated once more per such prompt, so that
        every adapter is compared with the base prompted alike (records.partner). None under
        --llmeval-prompt-per-model, where each model is prompted as it declares and the base as none."""
        declared = self.options.prompt.adapters
        if self.options.prompt.per_model or self.options.predictions is not None or not declared:
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

    def _adapter_of(self, column: str) -> str | None:
        """The adapter a column runs with on the shared weights: None for the base and its variants."""
        return None if column == BASE or variant_of(column) else column

    def evaluated_for(self, info: BenchmarkInfo) -> str:
        """The column whose score passes or fails the rows of one benchmark (roster.Roster.evaluated)."""
        if self.options.predictions is not None:
            return self.evaluated
        return self.roster.evaluated(info.get("domains") or {})

    def predictions_name(self) -> str:
        """--llmeval-predictions' identity (benchmark.predictions_identity), worked out once: meta() asks
        for it with every row's report under xdist, and it hashes every prediction."""
        if self._predictions_name is None:
            from pytest_llmeval.benchmark import predictions_identity

            assert self.options.predictions is not None
            self._predictions_name = predictions_identity(self.options.predictions, self.predictions())
        return self._predictions_name

    def identity(self) -> Identity:
        """Who this run evaluates, as its results.json names it (history.identity_of), without loading."""
        if self._identity is None:
            self._identity = self._find_identity()
        return self._identity

    def _find_identity(self) -> Identity:
        if self.options.predictions is not None:
            # meta(): the predictions play the adapter when there are base predictions, else the base model;
            # named by their `model` field, else by file name and a hash of their outputs.
            name = self.predictions_name()
            return (name, None) if self.has_adapter else (None, name)
        spec = self.options.spec
        if self.served:
            adapters = self.roster.adapters
            return (adapters[0].name, None) if adapters else (None, self.served_id(BASE))
        if spec.adapter is not None:
            return str(adapter_metadata(spec.adapter)["name"]), None
        try:
            return None, resolve_base(spec).name
        except ModelError:
            return None, None  # the model never loaded: meta() names no base model either

    @property
    def evaluated(self) -> str:
        """The model whose score decides a row: the adapter when there is one, else the base."""
        return ADAPTER if self.has_adapter else BASE

    def predictions(self) -> list[Prediction]:
        """The parsed --llmeval-predictions file (read once)."""
        if self._predictions is None:
            assert self.options.predictions is not None
            self._predictions = load_predictions(self.options.predictions)
        return self._predictions

    def _saved_output(self, nodeid: str) -> RowOutputs:
        ref = self.rows[nodeid]
        name = ref.benchmark["name"]
        matches = [p for p in self.predictions() if _predicts(p, name, ref.case.id)]
        if not matches:
            raise RowError(
                f"{name}:{ref.case.line}: no prediction for id '{ref.case.id}' in {self.options.predictions}"
            )
        if len(matches) > 1:
            lines = ", ".join(str(p.line) for p in matches)
            raise RowError(
                f"{name}:{ref.case.line}: id '{ref.case.id}' is on lines {lines} of "
                f"{self.options.predictions}: add a 'benchmark' field to say which file each belongs to"
            )
        p = matches[0]
        saved: dict[str, str | tuple[str, ...]] = {BASE: p.prediction}
        if self.has_adapter:
            if p.base_prediction is None:
                raise RowError(f"{self.options.predictions}:{p.line}: id '{p.id}' has no base_prediction")
            saved = {BASE: p.base_prediction, ADAPTER: p.prediction}
        lists = {c: v for c, v in saved.items() if not isinstance(v, str)}
        if not lists:
            return self._answers(
                RowOutputs(texts={c: v for c, v in saved.items() if isinstance(v, str)}), ref.case
            )
        case = ref.case
        where = f"{self.options.predictions}:{p.line}"
        if case.evaluation_type != "code_execution":
            raise RowError(
                f"{where}: a list of predictions (samples) is for code_execution rows, "
                f"not {case.evaluation_type}"
            )
        samples, _ = sampling_of(case)
        wanted = samples if "samples" in case.evaluation_config else None
        found = {c: list(v) if not isinstance(v, str) else [v] for c, v in saved.items()}
        for column, texts in found.items():
            if wanted is not None and len(texts) != wanted:
                raise RowError(
                    f"{where}: id '{p.id}' has {len(texts)} predictions for {column}, and its row "
                    f"({name}:{case.line}) asks for samples: {wanted}"
                )
        return self._answers(RowOutputs(texts={c: v[0] for c, v in found.items()}, samples=found), case)

    def unmatched_predictions(self) -> list[str]:
        """Ids of saved predictions that match no row of the benchmark files collected, for the report.
        Every row of those files counts, selected or not: a row left out by -k or --llmeval-sample is
        matched by its prediction, which is simply not scored in this run."""
        rows = {(name, case.id) for name, bench in self.benchmarks.items() for case in bench.cases}
        rows |= {(r.benchmark["name"], r.case.id) for r in self.rows.values()}
        return [p.id for p in self.predictions() if not any(_predicts(p, b, i) for b, i in rows)]

    def chunk_size(self) -> int:
        """Rows per generation chunk (and per xdist work unit): --llmeval-batch-size, and under an endpoint
        at least --llmeval-concurrency, since a chunk's requests are in flight together and a chunk smaller
        than the concurrency would leave it idle."""
        if self.served and self.options.endpoint is not None:
            return max(self.options.batch_size, self.options.endpoint.concurrency)
        return self.options.batch_size

    def set_rows(self, rows: Sequence[RowRef]) -> None:
        """Record the collected rows (in collection order) and split them into generation chunks."""
        self.rows = {r.nodeid: r for r in rows}
        keys = chunk_keys([r.nodeid for r in rows], self.chunk_size(), lambda n: n in self.rows)
        self._chunks = {}
        for r in rows:
            self._chunks.setdefault(keys[r.nodeid], []).append(r.nodeid)
        self._chunk_of = keys
        self.sequential_orders = self.planned_orders(rows) if self.sequential_settings() is not None else {}

    def planned_orders(self, rows: Sequence[RowRef]) -> dict[str, list[str]]:
        """--llmeval-sequential: each benchmark's rows (node ids) in the order they run, a seeded shuffle
        stratified by difficulty, for the benchmarks that can stop early; {} when it is off. The plugin
        places the collected items in this order, and set_rows keeps it for the anytime-valid looks."""
        if not self.sequential_on():
            return {}
        from pytest_llmeval import early_stop

        orders = {}
        for name, refs in _by_benchmark(rows).items():
            shells = [early_stop.shell(r.nodeid, r.benchmark, r.case) for r in refs]
            if early_stop.stops_early(shells):
                order = early_stop.planned(shells, self.options.gate_options.seed)
                orders[name] = [str(r["nodeid"]) for r in order]
        return orders

    def sequential_settings(self) -> early_stop.Settings | None:
        """--llmeval-sequential's settings; None when it is off, when nothing is gated, or when
        better_than_base decides on the point estimate (--llmeval-gate point: no test to stop on)."""
        if not self.sequential_on():
            return None
        from pytest_llmeval import early_stop

        opts = self.options.gate_options
        gated = self.gated_columns()

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

    def sequential_on(self) -> bool:
        """--llmeval-sequential applies: asked for, a column is gated, and better_than_base tests."""
        opts = self.options.gate_options
        if not opts.sequential or opts.mode != "significant":
            return False
        return bool(self.gated_columns())

    def gated_columns(self) -> list[str]:
        """The columns whose comparison with the base gates the run (every adapter, --llmeval-gate-model)."""
        if self.options.predictions is not None:
            return [ADAPTER] if self.has_adapter else []
        return [m.side for m in self.roster.gated]

    def _sequential_outcome(self, benchmark: str, records: Mapping[str, RowRecord]) -> early_stop.Outcome:
        from pytest_llmeval import early_stop

        settings = self.sequential_settings()
        assert settings is not None
        return early_stop.outcome(self.sequential_orders[benchmark], records, self.gated_columns(), settings)

    def _sequential_skip(self, nodeid: str) -> str | None:
        """Why this row is not run: its benchmark's gates were decided on the rows before it (None: run
        it). Decided on the finished prefix of the planned order, as every process sees it now."""
        benchmark = self.rows[nodeid].benchmark["name"]
        if benchmark not in self.sequential_orders:
            return None
        out = self._sequential_stops.get(benchmark)
        # Looked at when a chunk starts (a decision falls on chunk boundaries): reading every worker's
        # records for every row would cost more than the rows. A stop, once found, is final.
        if out is None and self._chunks[self._chunk_of[nodeid]][0] == nodeid:
            found = self._sequential_outcome(benchmark, self.store.peek(self.sequential_orders[benchmark]))
            if found.stop is not None:
                out = self._sequential_stops[benchmark] = found
        return out.reason if out is not None and out.stopped(nodeid) else None

    def rows_of(self, benchmark: str) -> list[str]:
        """Node ids of the collected rows of one benchmark file, in collection order."""
        return [n for n, r in self.rows.items() if r.benchmark["name"] == benchmark]

    def loaded(self) -> LoadedModel:
        """The model, loaded on first use; a failed load is remembered, not retried for every row."""
        if self._load_error is not None:
            raise self._load_error
        if self._loaded is None:
            from pytest_llmeval import models

            try:
                self._loaded = models.load(self.options.spec)
            except ModelError as exc:
                self._load_error = exc
                raise
        return self._loaded

    def llm(self, *, adapter: bool | str) -> LLM | ServedLLM:
        """A generation handle with an adapter on (True: the first; a column: that one) or off; every
        adapter shares the one loaded model. Under --llmeval-endpoint, a handle on the served model."""
        if self.served:
            adapters = [m.side for m in self.roster.adapters]
            if isinstance(adapter, str):
                column = adapter
            else:
                column = adapters[0] if adapter and adapters else BASE
            return ServedLLM(self, column)
        loaded = self.loaded()
        first = next(iter([m.side for m in self.roster.adapters]), None)
        side = adapter if isinstance(adapter, str) else (first if adapter else None)
        if side is not None and side in loaded.apart:  # its tokenizer added tokens: weights of its own
            loaded = self._column_model(side, keep=True)
        return LLM(
            loaded,
            adapter=False if side is None else side,
            max_new_tokens=self.options.max_new_tokens,
            batch_size=self.options.batch_size,
        )

    def llm_models(self) -> dict[str, LLM | ServedLLM]:
        """A handle per column (the `llm_models` fixture): the base, each adapter, each full model.

        Full models are loaded here and kept for the fixture's users (hand-written tests call them at any
        time); the evaluator itself holds one full model at a time (_column_model)."""
        handles: dict[str, LLM | ServedLLM] = {BASE: self.llm(adapter=False)}
        if self.served:
            return handles | {m.side: ServedLLM(self, m.side) for m in self.roster.members}
        for member in self.roster.members:
            if member.kind == "adapter":
                handles[member.side] = self.llm(adapter=member.side)  # shared weights, or load_apart's
            else:
                handles[member.side] = LLM(
                    self._column_model(member.side, keep=True),
                    adapter=False,
                    max_new_tokens=self.options.max_new_tokens,
                    batch_size=self.options.batch_size,
                )
        return handles

    def _column_model(self, side: str, *, keep: bool = False) -> LoadedModel:
        """The weights of a column with weights of its own (_model_columns): a --llmeval-model, or an
        adapter whose tokenizer added tokens. Held one at a time: loading the next releases the others, so
        a 7B model and two small ones never sit on one GPU together (keep: a fixture holds it for good)."""
        if side in self._column_errors:
            raise ModelError(self._column_errors[side])
        if side not in self._column_models:
            from pytest_llmeval import models

            for other in [o for o in self._column_models if o not in self._kept_columns]:
                released = self._column_models.pop(other)
                self._load_s[other] = self._load_s.get(other, 0.0) + released.load_seconds
                on_cuda = released.device.type == "cuda"
                del released  # the last reference: the weights go now, before the cache is emptied
                if on_cuda:
                    import torch

                    torch.cuda.empty_cache()
            member = self.roster.member(side)
            spec = self.options.spec
            try:
                if member.kind == "adapter":  # one whose tokenizer added tokens (models.load_apart)
                    self._column_models[side] = models.load_apart(spec, side)
                else:
                    self._column_models[side] = models.load(
                        ModelSpec(
                            base_model=member.source,
                            device=spec.device,
                            dtype=spec.dtype,
                            threads=spec.threads,
                            worker=spec.worker,
                        ),
                        option=f"--llmeval-model {member.name}",
                    )
            except ModelError as exc:
                self._column_errors[side] = str(exc)
                raise
            provenance: dict[str, Any] = {}
            self._provenance(provenance, side)
            self._column_provenance[side] = provenance
        if keep:
            self._kept_columns.add(side)
        return self._column_models[side]

    def _column_model_or_fail(self, column: str, rows: list[str]) -> LoadedModel | None:
        """A full model column's weights; None when they cannot load, and then `rows` fail with why (every
        column of a row is needed to compare it)."""
        try:
            return self._column_model(column)
        except ModelError as exc:
            for n in rows:
                self.row_errors[n] = f"{self._where(n)}: {exc}"
            return None

    def budget(self) -> Budget:
        """What this process may still spend (--llmeval-max-tokens, --llmeval-max-cost), and has spent."""
        if self._budget is None:
            from pytest_llmeval.costs import Budget

            self._budget = Budget(self.options.max_tokens, self.options.max_cost, share=self.options.workers)
        return self._budget

    def _spent(
        self,
        column: str,
        rows: Sequence[str],
        seconds: float,
        tokens: Mapping[str, tuple[int | None, int | None]],
        price: Price | None = None,
    ) -> None:
        """Record what one column spent on `rows` in `seconds` (shared equally among them): `tokens` holds
        each generated row's (prompt, generated) tokens, a row missing from it came from the cache."""
        from pytest_llmeval.costs import side_cost

        share = seconds / len(rows) if rows else 0.0
        for n in rows:
            prompt, generated = tokens.get(n, (0, 0))
            cost = side_cost(
                prompt_tokens=prompt,
                generated_tokens=generated,
                cached=n not in tokens,
                seconds=share,
                price=price,
            )
            self.costs.setdefault(n, {})[column] = cost
            self.budget().spend((prompt or 0) + (generated or 0), cost["usd"] or 0.0)

    def outputs_for(self, nodeid: str) -> RowOutputs:
        """The row's generated texts (or measurements), computing its whole chunk on first need."""
        spec = SCORERS[self.rows[nodeid].case.evaluation_type]
        decided = self._sequential_skip(nodeid)
        if decided is not None:  # its benchmark's gates need no more rows
            raise RowSkipped(decided)
        cannot = unavailable(self.source, spec.measure, self.rows[nodeid].case.evaluation_type)
        if cannot is not None:
            raise RowSkipped(cannot)
        if self.options.predictions is not None:
            return self._saved_output(nodeid)
        if nodeid in self.row_errors:
            raise RowError(self.row_errors[nodeid])
        if nodeid not in self.outputs:
            stop = self.budget().exhausted()
            if stop is not None:  # nothing more is sent to a model; the rows already scored are kept
                self.stopped = stop
                raise RowSkipped(stop)
            chunk = [
                n
                for n in self._chunks[self._chunk_of[nodeid]]
                if n not in self.outputs and n not in self.row_errors
            ]
            by_measure: dict[str | None, list[str]] = {}
            for n in chunk:
                by_measure.setdefault(SCORERS[self.rows[n].case.evaluation_type].measure, []).append(n)
            generated = by_measure.get(None, []) + by_measure.get("judge", [])
            if generated and self.served:
                self._generate_served(generated)
                self._warm_embeddings([n for n in generated if n in self.outputs])
            elif generated:
                self._generate(generated)
                # Rows whose generation failed (row_errors) have no outputs to embed or judge.
                self._warm_embeddings([n for n in generated if n in self.outputs])
            if "judge" in by_measure:
                self._judge([n for n in by_measure["judge"] if n in self.outputs])
            if "perplexity" in by_measure and not self.served:
                self._measure_perplexity(by_measure["perplexity"])
            if "choices" in by_measure and not self.served:
                self._measure_choices(by_measure["choices"])
        if nodeid in self.row_errors:
            raise RowError(self.row_errors[nodeid])
        return self.outputs[nodeid]

    def _where(self, nodeid: str) -> str:
        ref = self.rows[nodeid]
        return f"{ref.benchmark['name']}:{ref.case.line}"

    def _fit_rows(
        self,
        nodeids: list[str],
        room: Callable[[Case], int],
        reserved: str,
        loaded: LoadedModel | None = None,
        columns: Sequence[str] = (BASE,),
    ) -> tuple[list[str], list[str], list[int]]:
        """The rows whose prompt fits the model's context with `room(case)` tokens after it (fitted by
        --llmeval-context-overflow), their prompts and rooms; the others go to row_errors, and the rows
        whose prompt was cut to truncated. `loaded`: a column's own weights or tokenizer (a full model, an
        adapter's for_column view; None: the shared base's). `columns`: those given these prompts (alike:
        _same_prompt), the first's prompt settings; each one's prompt is kept for its record."""
        from pytest_llmeval.generation import build_prompt, context_length, fit_text, raw_prompt
        from pytest_llmeval.prompts import PromptError

        own = loaded is None
        loaded = self.loaded() if loaded is None else loaded
        context = context_length(loaded.config, loaded.tokenizer) or 2**62
        fitting: list[str] = []
        prompts: list[str] = []
        rooms: list[int] = []
        for n in nodeids:
            case = self.rows[n].case
            tokens = room(case)
            spec = self.prompt_spec(n, columns[0])
            examples = self.examples(self.rows[n].benchmark["name"], case, spec)

            def render(
                text: str,
                case: Case = case,
                tok: Any = loaded.tokenizer,
                spec: Any = spec,
                ex: Any = examples,
            ) -> str:
                if completion_mode(case):
                    return raw_prompt(tok, text)
                return build_prompt(
                    tok, case.instruction, text, system=spec.system, examples=ex, template=spec.template
                )

            try:
                prompt, truncated = fit_text(
                    loaded.tokenizer,
                    render,
                    case.input,
                    max_new_tokens=tokens,
                    context=context,
                    policy=self.options.context_overflow,
                    reserved=reserved,
                )
            except (ValueError, PromptError) as exc:
                where = "" if own else f" ({loaded.label})"
                self.row_errors[n] = f"{self._where(n)}: {exc}{where}"
                continue
            if truncated is not None and own:
                self.truncated[n] = truncated
            for column in columns:
                self.prompts.setdefault(n, {})[column] = prompt
            fitting.append(n)
            prompts.append(prompt)
            rooms.append(tokens)
        return fitting, prompts, rooms

    def _model_columns(self) -> list[str]:
        """The columns on weights of their own (_column_model): the adapters whose tokenizer added tokens
        (known once the model is loaded), then the --llmeval-model columns, in the order given."""
        if self.options.predictions is not None:
            return []
        apart = [] if self._loaded is None else [c for c in self.columns() if c in self._loaded.apart]
        return apart + [m.side for m in self.roster.models]

    def _shared_columns(self) -> list[str]:
        """The columns that run on the shared base weights: the base, then each adapter."""
        return [c for c in self.columns() if c not in self._model_columns()]

    def _generate(self, nodeids: list[str]) -> None:
        """Generate a chunk's rows for every column: the base, each adapter, each full model. A row whose
        prompt does not fit a model's context (--llmeval-context-overflow error), or on which generation
        fails in any column, becomes an error of its own (row_errors); every other row of the chunk is
        generated and scored as usual."""

        def limit(case: Case) -> int:
            return int(case.evaluation_config.get("max_new_tokens", self.options.max_new_tokens))

        loaded = self.loaded()
        shared = self._shared_columns()
        alike = [
            c
            for c in shared
            if self._same_prompt(c, BASE) and loaded.for_column(self._adapter_of(c)) is loaded
        ]
        fitting, prompts, limits = self._fit_rows(nodeids, limit, "max_new_tokens", columns=alike)
        keys = {n: _job_keys(n, sampling_of(self.rows[n].case)[0]) for n in nodeids}
        texts: dict[str, dict[str, str]] = {}  # job key -> column -> text
        ok = list(fitting)

        def generate_column(
            model: LoadedModel, column: str, rows: list[str], its_prompts: list[str], its_limits: list[int]
        ) -> None:
            nonlocal ok
            jobs = self._jobs(
                rows, dict(zip(rows, its_prompts, strict=True)), dict(zip(rows, its_limits, strict=True))
            )
            started = time.perf_counter()
            tokens: dict[str, tuple[int | None, int | None]] = {}
            produced = self._isolated(model, column, jobs, tokens)
            self._spent(column, rows, time.perf_counter() - started, tokens)
            ok = [n for n in ok if all(k in produced for k in keys[n])]
            for k, text in produced.items():
                texts.setdefault(k, {})[column] = text

        prompt_of = dict(zip(fitting, prompts, strict=True))
        limit_of = dict(zip(fitting, limits, strict=True))
        for column in shared:
            view = loaded.for_column(self._adapter_of(column))
            if column in alike:
                generate_column(loaded, column, ok, [prompt_of[n] for n in ok], [limit_of[n] for n in ok])
            else:  # its own prompt settings, or an adapter's own tokenizer: its prompts are built for it
                own = None if view is loaded else view
                generate_column(view, column, *self._fit_rows(ok, limit, "max_new_tokens", own, [column]))
        for column in self._model_columns():
            if not ok:
                break
            model = self._column_model_or_fail(column, ok)
            if model is None:
                ok = []
                break
            generate_column(model, column, *self._fit_rows(ok, limit, "max_new_tokens", model, [column]))
        self._keep_outputs(ok, keys, texts)

    def _jobs(
        self, rows: list[str], prompts_of: dict[str, str], limits_of: dict[str, int]
    ) -> dict[str, _Job]:
        """Job key -> what to generate: a greedy row's one output, a sampled row's n (seeded per sample)."""
        jobs: dict[str, _Job] = {}
        for n in rows:
            case = self.rows[n].case
            samples, temperature = sampling_of(case)
            for i, key in enumerate(_job_keys(n, samples)):
                sampled = None if temperature is None else (temperature, sample_seed(case.id, i))
                jobs[key] = _Job(n, prompts_of[n], limits_of[n], sampled)
        return jobs

    def _keep_outputs(
        self, ok: list[str], keys: dict[str, list[str]], texts: dict[str, dict[str, str]]
    ) -> None:
        """Every column's outputs of the rows generated in full: texts (whitespace stripped, but for a
        completion-style row, whose output continues its prompt), a sampled row's samples, fluency."""
        outputs: dict[str, RowOutputs] = {}
        for n in ok:
            completion = completion_mode(self.rows[n].case)

            def shaped(text: str, completion: bool = completion) -> str:
                return text if completion else text.strip()

            columns = list(texts[keys[n][0]])
            samples = {c: [shaped(texts[k][c]) for k in keys[n]] for c in columns}
            outputs[n] = self._answers(
                RowOutputs(
                    texts={c: samples[c][0] for c in columns},
                    samples=samples if len(keys[n]) > 1 else None,
                ),
                self.rows[n].case,
            )
        fluency: list[dict[str, FluencyRecord] | None] = [None] * len(ok)
        if self.options.fluency and ok:
            fluency = self._fluency(
                [self.rows[n].case.expected_output for n in ok], [outputs[n].texts for n in ok]
            )
        for n, f in zip(ok, fluency, strict=True):
            self.outputs[n] = replace(outputs[n], fluency=f)

    def _answers(self, out: RowOutputs, case: Case) -> RowOutputs:
        """The outputs with a leading reasoning block cut off (--llmeval-reasoning-tags), the raw outputs
        kept beside them. A completion-style row's output is code continuing its prompt: left whole."""
        tags = self.options.reasoning_tags
        if tags is None or completion_mode(case):
            return out
        from pytest_llmeval.reasoning import split_reasoning

        texts, raw, unterminated = dict(out.texts), {}, []
        for column, text in out.texts.items():
            split = split_reasoning(text, tags)
            if split.stripped:
                texts[column], raw[column] = split.answer, text
                if split.unterminated:
                    unterminated.append(column)
        samples = None
        if out.samples is not None:
            samples = {c: [split_reasoning(t, tags).answer for t in ts] for c, ts in out.samples.items()}
        return replace(out, texts=texts, samples=samples, raw=raw, unterminated=tuple(unterminated))

    def _isolated(
        self,
        loaded: LoadedModel,
        column: str,
        jobs: dict[str, _Job],
        tokens: dict[str, tuple[int | None, int | None]] | None = None,
    ) -> dict[str, str]:
        """One column's outputs of `jobs` (job key -> job), unstripped, generated in one batch per
        temperature (served from the generation cache where it can be); a batch that fails is split in
        halves until the failing row is alone, and that row becomes an error. `tokens` receives, per row
        that was generated (not served from the cache), the (prompt, generated) tokens it took."""
        from pytest_llmeval.generation import Sampling, Tokens, generate

        owners: dict[str, str] = {}  # prompt -> the row it belongs to (the first, for a repeated prompt)

        def produce(
            batch: list[str], batch_limits: list[int], samplings: list[tuple[float, int]] | None = None
        ) -> list[str]:
            counts = Tokens()
            with loaded.active(self._adapter_of(column)):
                texts = generate(
                    loaded.model,
                    loaded.tokenizer,
                    batch,
                    max_new_tokens=batch_limits,
                    batch_size=len(batch),
                    token_budget=self.options.token_budget,
                    sampling=None
                    if samplings is None
                    else Sampling(temperature=samplings[0][0], seeds=[seed for _, seed in samplings]),
                    strip=False,
                    counts=counts,
                )
            if tokens is not None:
                for prompt, read, wrote in zip(batch, counts.prompt, counts.generated, strict=True):
                    before = tokens.get(owners[prompt], (0, 0))
                    tokens[owners[prompt]] = ((before[0] or 0) + read, (before[1] or 0) + wrote)
            return texts

        def run(these: list[str]) -> list[str]:
            for k in reversed(these):
                owners[jobs[k].prompt] = jobs[k].node
            batch = [jobs[k].prompt for k in these]
            batch_limits = [jobs[k].limit for k in these]
            sampled = [jobs[k].sampled for k in these]
            samplings = None if sampled[0] is None else [x for x in sampled if x is not None]
            cached = self._generation_cache(column, loaded)
            if cached is None:
                return produce(batch, batch_limits, samplings)
            cache, identity, side = cached
            # Stored outputs are served; the misses are generated together, in one batch.
            texts = cache.generate(identity, side, batch, batch_limits, produce, samplings)
            self.notices.extend(cache.take_problems())
            return texts

        def isolated(these: list[str]) -> dict[str, str]:
            if not these:
                return {}
            try:
                return dict(zip(these, run(these), strict=True))
            except ModelError as exc:  # the weights did not load (on the first cache miss): no row can run
                for k in these:
                    self.row_errors[jobs[k].node] = f"{self._where(jobs[k].node)}: {exc}"
                return {}
            except Exception as exc:  # out of memory, a tokenizer or model error on one input; not Ctrl-C
                why = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[0]
                _free_device_memory(loaded)
                rows = list(dict.fromkeys(jobs[k].node for k in these))
                if len(rows) == 1:
                    n = rows[0]
                    self.row_errors[n] = f"{self._where(n)}: generation failed ({column}): {why}"
                    return {}
                self.retries.append({"side": column, "rows": len(rows), "error": why})
                # Halves of whole rows: a sampled row's samples stay together.
                first = set(rows[: len(rows) // 2])
                return isolated([k for k in these if jobs[k].node in first]) | isolated(
                    [k for k in these if jobs[k].node not in first]
                )

        # Greedy jobs first, then one batch per sampling temperature (a batch samples at one temperature).
        by_temperature: dict[float | None, list[str]] = {}
        for key, job in jobs.items():
            by_temperature.setdefault(None if job.sampled is None else job.sampled[0], []).append(key)
        produced: dict[str, str] = {}
        for group in by_temperature.values():
            produced |= isolated(group)
        return produced

    def _generation_cache(
        self, column: str, loaded: LoadedModel
    ) -> tuple[GenerationCache, ModelIdentity, str] | None:
        """The generation cache, a column's identity in it and the cache side it is stored under; None when
        off or unusable. An adapter's identity holds that adapter's files only, and a full model's its own
        files: changing one adapter regenerates that adapter's column and nothing else."""
        if self.options.cache_dir is None or self._cache_off:
            return None
        from pytest_llmeval import models

        try:
            if self.cache is None or self._cache_identity is None:
                # File hashes are kept beside the converted models: valid machine-wide, so a new project or
                # a pytester run in a fresh folder does not read a multi-GB model again.
                index = FileIndex(models.cache_dir() / "file-hashes.json")
                self._cache_identity = identify(self.loaded(), index)
                self.cache = GenerationCache(self.options.cache_dir, index=index)
            cache, shared = self.cache, self._cache_identity
            if self._adapter_of(column) is None:  # the base, or the base prompted as an adapter declares
                return cache, shared, "base"
            if column not in self._column_identities:
                if column in self.loaded().adapters:
                    files = adapter_files(self.loaded().adapters[column])
                    self._column_identities[column] = replace(
                        shared, adapter=fingerprint_files(files, cache.index)
                    )
                else:
                    self._column_identities[column] = identify(loaded, cache.index)
        except OSError as exc:
            self._cache_off = True
            self.notices.append(f"generation cache off: cannot read the model's files ({exc})")
            return None
        identity = self._column_identities[column]
        return cache, identity, "base" if identity.adapter is None else "adapter"

    @property
    def source(self) -> Source:
        """Where the columns' outputs come from (backends.Source)."""
        if self.options.predictions is not None:
            return "saved"
        return "served" if self.served else "local"

    @property
    def served(self) -> bool:
        """Every column is a model served at --llmeval-endpoint: nothing is loaded here."""
        return self.options.endpoint is not None and self.options.predictions is None

    def served_id(self, column: str) -> str:
        """The model id a column's requests name: --base-model for the base, else the column's source."""
        if column == BASE:
            return str(self.options.spec.base_model)
        return self.roster.member(column).source

    def served_ids(self) -> list[str]:
        """Every model id the run sends requests to, each once: the columns', then the judge's."""
        ids = [self.served_id(c) for c in self.columns()]
        if self.options.judge_model is not None:
            ids.append(self.options.judge_model)
        return list(dict.fromkeys(ids))

    def endpoint(self) -> Any:
        """The endpoint.Endpoint of --llmeval-endpoint, built once."""
        if self._endpoint is None:
            from pytest_llmeval.endpoint import Endpoint

            assert self.options.endpoint is not None
            self._endpoint = Endpoint(self.options.endpoint)
        return self._endpoint

    def served_models(self) -> dict[str, ServedModel]:
        """What the servers say of each model id (one tiny request each, once per process): an unreachable
        URL or an unknown id raises EndpointError, and is remembered for every later row."""
        from pytest_llmeval.endpoint import EndpointError

        if self._served_error is not None:
            raise EndpointError(self._served_error)
        if self._served is None:
            import datetime

            try:
                self._served = self.endpoint().probe(self.served_ids())
            except EndpointError as exc:
                self._served_error = str(exc)
                raise
            self._served_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return self._served

    def _served_identity(self, model_id: str) -> ModelIdentity:
        """A served model's identity in the generation cache: its id, what the server reports of it (model,
        system_fingerprint, quantization), the seed sent, and this client's code. No URL: the same model
        spread over several machines, or moved, is the same model."""
        from pytest_llmeval.cache import code_fingerprint, sha256_json

        served = self.served_models()[model_id]
        return ModelIdentity(
            base=sha256_json(
                {
                    "served_model": served.id,
                    "reported_model": served.reported_model,
                    "system_fingerprint": served.system_fingerprint,
                    "quantization": self._quantization(served),
                    "seed": _served_seed(served),
                }
            ),
            adapter=None,
            tokenizer="as served",
            dtype="as served",
            device="endpoint",
            software={"code": code_fingerprint(("endpoint.py", "generation.py"))},
            batch_invariant=True,  # each request stands alone: no batch of ours shapes its output
        )

    def _quantization(self, served: ServedModel) -> str | None:
        return served.quantization or self.options.quantization

    def _generate_served(self, nodeids: list[str]) -> None:
        """Generate a chunk's rows for every column at the endpoint, every column's requests in flight
        together (--llmeval-concurrency). Each row's user message is what build_prompt wraps in the chat
        template in-process; the server applies its own template. Outputs already in the generation cache
        are served from it; a request that still fails after its retries is that row's error."""
        from pytest_llmeval.cache import key_material
        from pytest_llmeval.endpoint import EndpointError, Request
        from pytest_llmeval.prompts import PromptError

        try:
            served = self.served_models()
        except EndpointError as exc:
            for n in nodeids:
                self.row_errors[n] = f"{self._where(n)}: {exc}"
            return
        if self.options.cache_dir is not None and self.cache is None:
            from pytest_llmeval import models

            index = FileIndex(models.cache_dir() / "file-hashes.json")
            self.cache = GenerationCache(self.options.cache_dir, index=index)
        cache = self.cache if self.options.cache_dir is not None else None
        texts: dict[str, dict[str, str]] = {}  # job key -> column -> text
        keys: dict[str, list[str]] = {}
        asked: list[tuple[str, str, str, dict[str, Any]]] = []  # (node id, job key, column, key material)
        requests: list[Request] = []
        for column in self.columns():
            model_id = self.served_id(column)
            identity = self._served_identity(model_id)
            for n in nodeids:
                case = self.rows[n].case
                try:
                    completion, prompt, messages = self._served_prompt(n, column)
                except PromptError as exc:
                    self.row_errors.setdefault(n, f"{self._where(n)}: {exc}")
                    continue
                self.prompts.setdefault(n, {})[column] = prompt if messages is None else json.dumps(messages)
                limit = int(case.evaluation_config.get("max_new_tokens", self.options.max_new_tokens))
                samples, temperature = sampling_of(case)
                keys[n] = _job_keys(n, samples)
                for i, key in enumerate(keys[n]):
                    sampled = None if temperature is None else (temperature, sample_seed(case.id, i))
                    material = key_material(identity, "base", prompt, limit, sampled=sampled)
                    if completion:
                        material["chat"] = False  # a raw prompt never shares a key with a chat message
                    if messages is not None:
                        material["messages"] = messages  # a system prompt, few-shot turns
                    found = None if cache is None else cache.get(material)
                    if found is not None:
                        texts.setdefault(key, {})[column] = found
                        continue
                    asked.append((n, key, column, material))
                    seed = _served_seed(served[model_id])
                    if sampled is not None and seed is not None:
                        seed = sampled[1]  # each sample its own seed: a rerun draws the same samples
                    requests.append(
                        Request(
                            model=model_id,
                            prompt=prompt,
                            max_tokens=limit,
                            chat=not completion,
                            messages=None if messages is None else tuple(messages),
                            temperature=0.0 if sampled is None else sampled[0],
                            seed=seed,
                        )
                    )
        started = time.perf_counter()
        answers = self.endpoint().complete(requests) if requests else []
        seconds = time.perf_counter() - started
        # The tokens each column's rows took, as the server reported them (None: it said nothing).
        spent: dict[str, dict[str, tuple[int | None, int | None]]] = {c: {} for c in self.columns()}
        for (n, _key, column, _material), answer in zip(asked, answers, strict=True):
            before = spent[column].get(n, (0, 0))
            spent[column][n] = (
                None
                if answer.prompt_tokens is None or before[0] is None
                else before[0] + answer.prompt_tokens,
                None
                if answer.completion_tokens is None or before[1] is None
                else before[1] + answer.completion_tokens,
            )
        for column in self.columns():
            # The columns' requests were in flight together: each column's rows share the wall time.
            price = self.options.prices.get(self.served_id(column))
            self._spent(column, nodeids, seconds / len(self.columns()), spent[column], price)
        for (n, key, column, material), answer in zip(asked, answers, strict=True):
            if answer.text is None:
                if n not in self.row_errors:
                    served_as = f"{column} ({self.served_id(column)})"
                    self.row_errors[n] = f"{self._where(n)}: {served_as} at the endpoint: {answer.error}"
                continue
            texts.setdefault(key, {})[column] = answer.text
            if cache is not None:
                cache.put(material, answer.text)
        if cache is not None:
            wanted = sum(len(keys.get(n, [])) for n in nodeids) * len(self.columns())
            cache.stats.hits["base"] += wanted - len(asked)
            cache.stats.misses["base"] += len(asked)
            self.notices.extend(cache.take_problems())
        columns = len(self.columns())
        ok = [
            n
            for n in nodeids
            if n not in self.row_errors and all(len(texts.get(k, {})) == columns for k in keys[n])
        ]
        self._keep_outputs(ok, keys, texts)

    def _served_prompt(self, nodeid: str, column: str) -> tuple[bool, str, list[dict[str, str]] | None]:
        """(raw, the prompt, the chat messages) a served column is sent for a row. A completion-style
        row's input and a row under a template of the run's (rendered whole) go raw to /v1/completions;
        the others are a chat request, the server applying its template: the user message alone, or with
        a system prompt and few-shot turns, the whole conversation (generation.chat_messages)."""
        from pytest_llmeval.generation import chat_messages, user_message
        from pytest_llmeval.prompts import render_template

        case = self.rows[nodeid].case
        if completion_mode(case):
            return True, case.input, None
        spec = self.prompt_spec(nodeid, column)
        examples = self.examples(self.rows[nodeid].benchmark["name"], case, spec)
        if spec.template is not None:
            text = render_template(
                spec.template,
                system=spec.system,
                instruction=case.instruction,
                input=case.input,
                examples=examples,
                eos_token=None,
            )
            return True, text, None
        if spec.system is None and not examples:
            return False, user_message(case.instruction, case.input), None
        messages = chat_messages(case.instruction, case.input, system=spec.system, examples=examples)
        return False, str(messages[-1]["content"]), messages

    def cache_info(self) -> dict[str, Any]:
        """results.json's inference_config.cache: where it is, and rows served or generated per side."""
        if self.options.cache_dir is None:
            return {"enabled": False}
        stats = self.cache.stats if self.cache is not None else CacheStats()
        return {"enabled": True, "dir": str(self.options.cache_dir), **stats.to_json()}

    def _fluency(
        self, references: list[str], outputs: list[dict[str, str]]
    ) -> list[dict[str, FluencyRecord] | None]:
        """Per row and column: the perplexity of its output and of the reference.

        The QA fine-tuning document's fix: each model's own generated text, measured by that same model
        (base outputs by the base, an adapter's by that adapter, a full model's by itself), with the
        reference measured by it too for comparison. --llmeval-ppl-model measures every column with one
        external model instead.
        """
        from pytest_llmeval.measures import fluency

        external = self.options.ppl_model
        per_column: dict[str, list[FluencyRecord]] = {}
        for column in outputs[0]:
            texts = [row.get(column) for row in outputs]
            if external is not None:
                scorer, on, label = self._model_named(external), None, external
            elif column in self._model_columns():
                scorer = self._column_model(column)
                on = column if column in scorer.adapters else None
                label = f"{scorer.label} (the model itself)"
            else:
                on = self._adapter_of(column)
                scorer = self.loaded().for_column(on)
                label = (
                    f"{scorer.base.name} (the base model itself)"
                    if on is None
                    else f"{scorer.base.name} + {column} (the adapter itself)"
                )
            per_column[column] = fluency(scorer, references, texts, column=on, scorer_name=label)
        return [{c: measured[i] for c, measured in per_column.items()} for i in range(len(references))]

    def _model_named(self, name: str | None) -> LoadedModel:
        """Another model (a scorer's or a judge's), loaded once; None: the evaluated model (adapter off)."""
        if name is None:
            return self.loaded()
        if name not in self._other_models:
            from pytest_llmeval import models

            spec = self.options.spec
            self._other_models[name] = models.load(
                ModelSpec(
                    base_model=name,
                    device=spec.device,
                    dtype=spec.dtype,
                    threads=spec.threads,
                    worker=spec.worker,
                )
            )
        return self._other_models[name]

    def _measured_columns(
        self, nodeids: list[str], measure: Callable[[LoadedModel, list[str], list[str]], dict[str, Any]]
    ) -> None:
        """A measured chunk for every column: `measure(loaded, rows, columns)` on the shared weights for
        the base and the adapters, then on each full model; a row is kept when every column measured it."""
        found: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in nodeids}
        ok = list(nodeids)

        def measured(model: LoadedModel, columns: list[str]) -> None:
            nonlocal ok
            started = time.perf_counter()
            values = self._cached_measure(measure, model, ok, columns)
            for column in columns:  # tokens read are not counted for measured rows: (None, None)
                self._spent(
                    column,
                    ok,
                    (time.perf_counter() - started) / len(columns),
                    dict.fromkeys(ok, (None, None)),
                )
            ok = [n for n in ok if all(n in values.get(c, {}) for c in columns)]
            for n in ok:
                found[n] |= {c: values[c][n] for c in columns}

        loaded = self.loaded()
        shared = self._shared_columns()
        # The base and the adapters prompted with its tokenizer share calls, one per distinct prompt
        # (_same_prompt); one with a tokenizer of its own, its own.
        groups: list[list[str]] = []
        for c in [c for c in shared if loaded.for_column(self._adapter_of(c)) is loaded]:
            group = next((g for g in groups if self._same_prompt(c, g[0])), None)
            if group is None:
                groups.append([c])
            else:
                group.append(c)
        for group in groups:
            if ok:
                measured(loaded, group)
        for column in [c for c in shared if c != BASE and loaded.for_column(c) is not loaded]:
            if ok:
                measured(loaded.for_column(column), [column])
        for column in self._model_columns():
            if not ok:
                break
            model = self._column_model_or_fail(column, ok)
            if model is None:
                return
            measured(model, [column])
        for n in ok:
            self.outputs[n] = RowOutputs(measures=found[n])

    def _cached_measure(
        self,
        measure: Callable[[LoadedModel, list[str], list[str]], dict[str, Any]],
        loaded: LoadedModel,
        rows: list[str],
        columns: list[str],
    ) -> dict[str, dict[str, Any]]:
        """`measure(loaded, rows, columns)` through the generation cache: a measurement (perplexity, the
        choices' log-likelihoods) is stored like an output, keyed by the column's identity and the row's
        content, so a re-run with nothing changed loads no weights. Only batch-invariant identities (exact
        float32) are served: elsewhere a value depends on the batch it was measured in."""
        from pytest_llmeval.cache import key_material, sha256_json

        out: dict[str, dict[str, Any]] = {c: {} for c in columns}
        keys: dict[tuple[str, str], tuple[GenerationCache, dict[str, Any]]] = {}
        todo: set[str] = set()
        for column in columns:
            cached = self._generation_cache(column, loaded)
            for n in rows:
                if cached is None or not cached[1].batch_invariant:
                    todo.add(n)
                    continue
                cache, identity, side = cached
                case = self.rows[n].case
                what: dict[str, Any] = {
                    "measured": case.evaluation_type,
                    "instruction": case.instruction,
                    "input": case.input,
                    "expected_output": case.expected_output,
                    "config": case.evaluation_config,
                    "context_overflow": self.options.context_overflow,
                }
                if SCORERS[case.evaluation_type].measure == "choices":
                    # The choices are read after the row's prompt: its settings decide the measurement.
                    spec = self.prompt_spec(n, column)
                    examples = self.examples(self.rows[n].benchmark["name"], case, spec)
                    what["prompt"] = [spec.to_json(), [e.to_json() for e in examples]]
                material = key_material(identity, side, sha256_json(what), 0)
                stored = cache.get(material)
                if stored is None:
                    todo.add(n)
                    keys[(column, n)] = (cache, material)
                else:
                    out[column][n] = json.loads(stored)
                    cache.stats.hits[side] += 1
        if todo:
            fresh = measure(loaded, [n for n in rows if n in todo], columns)
            for column, values in fresh.items():
                for n, value in values.items():
                    out[column][n] = value
                    if (column, n) in keys:
                        cache, material = keys[(column, n)]
                        cache.put(material, json.dumps(value))
                        cache.stats.misses[str(material["side"])] += 1
        if self.cache is not None:
            self.notices.extend(self.cache.take_problems())
        return out

    def _measure_perplexity(self, nodeids: list[str]) -> None:
        """Perplexity rows: each text measured by every column; rows of one window share calls."""
        from pytest_llmeval.measures import text_perplexities
        from pytest_llmeval.scorers import perplexity as ppl_scorer

        def measure(loaded: LoadedModel, rows: list[str], columns: list[str]) -> dict[str, Any]:
            out: dict[str, dict[str, Any]] = {c: {} for c in columns}
            by_window: dict[tuple[int | None, int | None], list[str]] = {}
            for n in rows:
                by_window.setdefault(ppl_scorer.window(self.rows[n].case.evaluation_config), []).append(n)
            for (max_length, stride), group in by_window.items():
                cases = [self.rows[n].case for n in group]
                texts = [getattr(c, ppl_scorer.text_field(c.evaluation_config)) for c in cases]
                measured = text_perplexities(loaded, texts, max_length, stride, columns=columns)
                for column, values in measured.items():
                    out[column].update(zip(group, values, strict=True))
            return out

        self._measured_columns(nodeids, measure)

    def _measure_choices(self, nodeids: list[str]) -> None:
        """Multiple-choice rows: every choice's log-likelihood after the row's prompt, for every column."""
        from pytest_llmeval.measures import choice_likelihoods

        def measure(loaded: LoadedModel, rows: list[str], columns: list[str]) -> dict[str, Any]:
            tok = loaded.tokenizer
            # Room after the prompt for the longest choice: every choice is scored after the same prompt.
            fitting, prompts, _ = self._fit_rows(
                rows,
                lambda case: max(
                    len(tok(c, add_special_tokens=False)["input_ids"])
                    for c in case.evaluation_config["choices"]
                ),
                "the longest choice",
                None if loaded is self._loaded else loaded,
                columns,
            )
            if not fitting:
                return {}
            cases = [self.rows[n].case for n in fitting]
            measured = choice_likelihoods(loaded, cases, columns=columns, prompts=prompts)
            return {c: dict(zip(fitting, values, strict=True)) for c, values in measured.items()}

        self._measured_columns(nodeids, measure)

    def _judge(self, nodeids: list[str]) -> None:
        """llm_judge rows: the judge grades every column's output, `runs` sampled runs each, batched."""
        from pytest_llmeval.measures import judge_runs

        if not nodeids:
            return
        cases = [self.rows[n].case for n in nodeids]
        outputs = [self.outputs[n].texts for n in nodeids]
        if self.served:
            from pytest_llmeval.measures import judge_runs_served

            # Under an endpoint the judge is served too: --llmeval-judge-model's id, else the base's.
            model_id = self.options.judge_model or self.served_id(BASE)
            graded, errors = judge_runs_served(
                self.endpoint().complete,
                model_id,
                f"{model_id} (served)"
                if self.options.judge_model
                else f"{model_id} (the base model, served)",
                cases,
                outputs,
            )
        else:
            judge = self._model_named(self.options.judge_model)
            name = self.options.judge_model or f"{judge.base.name} (the base model, adapter off)"
            graded, errors = judge_runs(
                judge,
                name,
                cases,
                outputs,
                batch_size=self.options.batch_size,
                context_overflow=self.options.context_overflow,
            )
        for i, (n, by_column) in enumerate(zip(nodeids, graded, strict=True)):
            if by_column is None:
                self.row_errors[n] = f"{self._where(n)}: {errors[i]}"
                continue
            self.outputs[n] = replace(self.outputs[n], measures=by_column)

    def score_row(self, nodeid: str) -> RowResult:
        """Generate (if needed) and score one row for every column; scorer errors become row errors."""
        ref = self.rows[nodeid]
        case = ref.case
        where = self._where(nodeid)
        evaluated = self.evaluated_for(ref.benchmark)

        scoring = 0.0

        def record(models: dict[str, SideRecord] | None = None, **outcome: Any) -> RowRecord:
            # Known once the row's chunk was prompted (outputs_for); a row skipped before has none.
            given = self.prompts.get(nodeid, {})
            row_prompt = given.get(BASE, next(iter(given.values()), None))
            for column, side_record in (models or {}).items():
                if given.get(column, row_prompt) != row_prompt:
                    side_record["prompt"] = given[column]
            made = row_record(
                nodeid=nodeid,
                benchmark=ref.benchmark,
                case=case,
                evaluated=evaluated,
                models=models,
                prompt=row_prompt,
                **outcome,
            )
            if self.base_variants():
                made["baselines"] = self.compared_with()
            spent = self.costs.get(nodeid)
            if spent:
                # Scoring judges every column at once: its seconds are shared among them.
                made["cost"] = {c: {**cost, "scoring_s": scoring / len(spent)} for c, cost in spent.items()}
            return made

        try:
            out = self.outputs_for(nodeid)
        except RowSkipped as exc:
            return RowResult(record=record(skipped=str(exc)), score=None, skipped=str(exc))
        except RowError as exc:
            return RowResult(record=record(error=str(exc)), score=None, error=str(exc))
        models: dict[str, SideRecord] = {
            column: {"output": out.raw.get(column, out.texts.get(column)), "score": None}
            for column in out.columns()
        }
        for column in out.raw:
            # The raw output stays `output`; what was scored, after the reasoning block, is beside it.
            models[column]["scored_output"] = out.texts[column]
            models[column]["reasoning_unterminated"] = column in out.unterminated
        for name, measured in (out.fluency or {}).items():
            models[name]["fluency"] = measured
        if nodeid in self.truncated:
            for side_record in models.values():
                side_record["prompt_truncated"] = self.truncated[nodeid]
        try:
            resources = {name: self._resource(name, ref) for name in SCORERS[case.evaluation_type].uses}
        except RowSkipped as exc:
            return RowResult(record=record(skipped=str(exc)), score=None, skipped=str(exc))
        except RowError as exc:
            error = f"{where}: {exc}"
            return RowResult(record=record(error=error), score=None, error=error)
        started = time.perf_counter()
        if "sandbox" in resources:
            resources["sandbox"] = self._chunk_runs(nodeid, resources["sandbox"])
        try:
            scores = self._scores(case, out, resources)
            scoring = time.perf_counter() - started
        except Exception as exc:  # a scorer bug or a custom scorer's error fails this row only
            raised = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            error = f"{where}: scorer '{case.evaluation_type}' raised {raised}"
            # What the model measured (the judge's raw outputs, say) stays in results.json: nothing is lost.
            for column, measurement in out.measures.items():
                models[column]["measurement"] = measurement
            return RowResult(record=record(models, error=error), score=None, error=error)
        for column, scored in scores.items():
            models[column]["score"] = scored.to_json()
        primary = scores.get(evaluated, scores[BASE])
        return RowResult(record=record(models, passed=primary.passed), score=primary)

    def _resource(self, name: str, ref: RowRef) -> Any:
        """What a scorer needs beside the texts (ScorerSpec.uses), built once per process or per script."""
        if name == "function":
            from pytest_llmeval.scorers import custom

            # Imported at collection already (errors are collection errors); cached per path and mtime.
            return custom.load_for_config(
                ref.case.evaluation_config, self.benchmarks[ref.benchmark["name"]].path.parent
            )
        if name == "embedder":
            return self._embedding_model()
        if name == "prompt":
            return ref.case.input  # a completion-style row's program starts with it
        if name != "sandbox":
            raise ValueError(f"unknown scorer resource {name!r}")
        if self._sandbox_unavailable is not None:
            raise RowSkipped(self._sandbox_unavailable)
        if self._sandbox is None:
            from pytest_llmeval.sandbox import Sandbox, SandboxUnavailable, detect

            mode = self.options.sandbox_mode
            try:
                isolation = detect(mode)
            except SandboxUnavailable as exc:
                self._sandbox_unavailable = f"--llmeval-sandbox {mode}: code is not run without it: {exc}"
                raise RowSkipped(self._sandbox_unavailable) from None
            if isolation.level != "strict":
                missing = ", ".join(isolation.missing)
                self.notices.append(
                    f"code_execution rows run with basic isolation only (missing: {missing}): "
                    f"{isolation.reason}. --llmeval-sandbox strict skips them instead"
                )
            self._sandbox = Sandbox(isolation)
        return self._sandbox

    def _chunk_runs(self, nodeid: str, sandbox: Any) -> Any:
        """The sandbox a code row's scorer gets. On the chunk's first code row, every run its code rows ask
        for (each case of each column's output, each sample) is run, up to --llmeval-sandbox-jobs at once;
        the scorers then find the results. Every run still gets its own process tree, uid and limits, and
        the same scorer reads the same results, so verdicts do not depend on the number of jobs."""
        from pytest_llmeval.sandbox import Prefetched, default_jobs
        from pytest_llmeval.scorers import code_execution

        chunk = self._chunk_of.get(nodeid)
        if chunk is None:
            return sandbox
        if self._prefetched_chunk != chunk:
            runs: list[tuple[str, str, Any]] = []
            for n in self._chunks[chunk]:
                case = self.rows[n].case
                if case.evaluation_type != "code_execution":
                    continue
                try:
                    out = self.outputs_for(n)
                except (RowError, RowSkipped):
                    continue  # the row reports it when it runs
                outputs = (
                    out.samples.values() if out.samples is not None else [[t] for t in out.texts.values()]
                )
                for text in (t for texts in outputs for t in texts):
                    planned = code_execution.planned_runs(text, case.evaluation_config, case.input)
                    runs += [(r.code, r.stdin, r.limits) for r in planned]
            unique = list(dict.fromkeys(runs))
            jobs = self.options.sandbox_jobs or default_jobs()
            self._prefetched = Prefetched(
                sandbox, dict(zip(unique, sandbox.run_all(unique, jobs), strict=True))
            )
            self._prefetched_chunk = chunk
        return self._prefetched

    def _embedding_model(self) -> Any:
        """The sentence-embedding model (semantic, bertscore), loaded once; a missing one fails those rows."""
        if self._embedder_error is not None:
            raise RowError(self._embedder_error)
        if self._embedder is None:
            from pytest_llmeval.embeddings import Embedder, EmbeddingModelError

            try:
                from pytest_llmeval.models import resolve_device

                spec = self.options.spec
                self._embedder = Embedder.load(device=resolve_device(spec.device, worker=spec.worker))
            except EmbeddingModelError as exc:
                # Fail these rows (CI must not pass without evaluating them), but keep the others going.
                self._embedder_error = str(exc)
                raise RowError(self._embedder_error) from None
        return self._embedder

    def _warm_embeddings(self, nodeids: list[str]) -> None:
        """Embed a generated chunk's outputs and references in batches, so rows score from the cache."""
        # semantic compares sentence vectors, bertscore token vectors: each type warms what it reads.
        wanted: dict[str, set[str]] = {"semantic": set(), "bertscore": set()}
        for n in nodeids:
            kind = self.rows[n].case.evaluation_type
            if kind in wanted:
                texts = [self.rows[n].case.expected_output, *self.outputs[n].texts.values()]
                wanted[kind].update(t for t in texts if t and t.strip())
        if not (wanted["semantic"] or wanted["bertscore"]):
            return
        try:
            embedder = self._embedding_model()
        except RowError:
            return  # each row reports it
        embedder.warm(sorted(wanted["semantic"]))
        embedder.warm(sorted(wanted["bertscore"]), sentence=False, tokens=True)

    @staticmethod
    def _scores(case: Case, out: RowOutputs, resources: dict[str, Any]) -> dict[str, Score]:
        """Every column's score of a row: from its measurement when it has one, from its n samples when it
        was sampled (pass@k), else from its text."""
        scorer = SCORERS[case.evaluation_type]
        config = case.evaluation_config
        if out.measures:
            assert scorer.score_measurement is not None
            return {c: scorer.score_measurement(m, config) for c, m in out.measures.items()}
        if out.samples is not None:
            assert scorer.score_samples is not None
            return {
                c: scorer.score_samples(texts, case.expected_output, config, **resources)
                for c, texts in out.samples.items()
            }
        assert scorer.score is not None
        return {
            c: scorer.score(text, case.expected_output, config, **resources) for c, text in out.texts.items()
        }

    def kinds(self) -> dict[str, str]:
        """Every column beside the base -> its kind (roster.KINDS), in the run's order."""
        if self.options.predictions is not None:
            return {ADAPTER: "adapter"} if self.has_adapter else {}
        return {m.side: m.kind for m in self.roster.members}

    # --- prompts (prompts.py decides; these apply it to the run's rows and columns) ---------------------

    def read_prompts(self, name: str, benchmark: Benchmark) -> list[tuple[int, str]]:
        """At collection: the benchmark's sidecar and few-shot file, and every row's prompt rendered once
        for each distinct prompt of the run's columns, so a template that does not compile or render fails
        this file's collection, (line, why) each, and no other file's."""
        from pytest_llmeval.prompts import PromptError, load_benchmark_prompt

        try:
            self.benchmark_prompts[name] = load_benchmark_prompt(benchmark.path)
        except PromptError as exc:
            return [(exc.line, str(exc))]
        self.benchmarks[name] = benchmark
        problems: list[tuple[int, str]] = []
        for case in benchmark.cases:
            try:
                for owner in dict.fromkeys(self._prompt_owner(c) for c in self.columns()):
                    spec = self._resolve(name, case, owner)
                    if spec.template is not None:
                        from pytest_llmeval.prompts import check

                        check(spec, case.instruction, case.input, self.examples(name, case, spec), case.line)
            except PromptError as exc:
                problems.append((case.line, str(exc)))
        return problems

    def _prompt_owner(self, column: str) -> str | None:
        """The adapter column whose declared prompt (metadata.json) a column is given: its own for an
        adapter; for the base and the full models, the first adapter's, so that a comparison prompts both
        sides alike, unless --llmeval-prompt-per-model (then none: only the row, benchmark, command line)."""
        declared = self.options.prompt.adapters
        if column in declared:
            return column
        if variant_of(column):
            return self.base_variants()[column]
        if self.options.prompt.per_model or not declared:
            return None
        return next(iter(declared))

    def _resolve(self, name: str, case: Case | None, owner: str | None) -> PromptSpec:
        """The prompt settings of a row of benchmark `name` (None: of the benchmark, its rows' own
        settings aside) under the declaration of the adapter column `owner` (_prompt_owner)."""
        from pytest_llmeval.prompts import ADAPTER as ADAPTER_LAYER
        from pytest_llmeval.prompts import BENCHMARK, COMMAND_LINE, ROW, Layer, resolve, row_layer

        bench = self.benchmark_prompts.get(name)
        prompt = self.options.prompt
        own = Layer() if case is None else row_layer(case.system, case.run_options, f"{name}:{case.line}")
        layers: list[tuple[str, Layer]] = [
            (ROW, own),
            (BENCHMARK, Layer() if bench is None else bench.layer),
            (ADAPTER_LAYER, Layer() if owner is None else prompt.adapters[owner]),
            (COMMAND_LINE, prompt.command_line),
        ]
        return resolve(layers, fewshot_override=prompt.fewshot)

    def prompt_spec(self, nodeid: str, column: str) -> PromptSpec:
        """The prompt settings of one row for one column."""
        ref = self.rows[nodeid]
        return self._resolve(ref.benchmark["name"], ref.case, self._prompt_owner(column))

    def examples(self, name: str, case: Case, spec: PromptSpec) -> list[Example]:
        """The row's few-shot examples: spec.fewshot of the benchmark's pool (its few-shot file, else the
        file's other rows), drawn by the row's id (prompts.pick_examples)."""
        from pytest_llmeval.prompts import Example, pick_examples

        if spec.fewshot == 0:
            return []
        # Drawn once per row and count: a draw hashes the row with every example of the pool, and a row's
        # examples are asked for at collection, per column prompted, and for a measurement's cache key.
        key = (name, case.id, spec.fewshot)
        if key not in self._examples:
            bench = self.benchmark_prompts.get(name)
            pool = None if bench is None else bench.pool
            if pool is None:
                pool = tuple(
                    Example(c.id, c.instruction, c.input, c.expected_output, c.line)
                    for c in self.benchmarks[name].cases
                )
            self._examples[key] = pick_examples(case.id, pool, spec.fewshot)
        return self._examples[key]

    def _same_prompt(self, column: str, other: str) -> bool:
        """Whether two columns are given the same prompt settings on every row (their owners' layers)."""
        declared = self.options.prompt.adapters
        a, b = self._prompt_owner(column), self._prompt_owner(other)
        return (None if a is None else declared[a]) == (None if b is None else declared[b])

    def prompts_meta(self) -> dict[str, Any]:
        """results.json's inference_config.prompt: the mode, the command line's settings, each adapter's
        declared prompt, and per benchmark its sidecar, few-shot pool and each column's settings (a row's
        own system prompt or template is in its record)."""
        out = self.options.prompt.to_json()
        benchmarks: dict[str, Any] = {}
        for name, bench in sorted(self.benchmark_prompts.items()):
            columns = {c: self._resolve(name, None, self._prompt_owner(c)).to_json() for c in self.columns()}
            benchmarks[name] = {**bench.to_json(), "columns": columns}
        out["benchmarks"] = benchmarks
        return out

    def domains_of(self, benchmark: str, rootdir: Path) -> dict[str, Domain]:
        """In or out of each gated column's domain, for a benchmark file (its path from the rootdir)."""
        if self.options.predictions is not None:
            if not self.has_adapter:
                return {}
            inside = gates.in_domain(benchmark, None, self.options.gate_options.domain_globs, rootdir)
            return {ADAPTER: "in" if inside else "out"}
        return self.roster.domains(benchmark, rootdir)

    def gate_family(self) -> list[dict[str, Any]]:
        """The comparisons whose p-values decide gates (comparisons.GATES_FAMILY), adjusted together.

        Needs the rows of every benchmark some gated column is in-domain on: under xdist they may still be
        scored on other workers, and RowStore.records_for waits for them as for a gate's own rows."""
        if self._family is None:
            from pytest_llmeval import comparisons

            names = sorted(
                {
                    r.benchmark["name"]
                    for r in self.rows.values()
                    if "in" in (r.benchmark.get("domains") or {}).values()
                }
            )
            records, _ = self.store.records_for([n for name in names for n in self.rows_of(name)])
            by_benchmark: dict[str, list[Any]] = {}
            for record in records:
                by_benchmark.setdefault(record["benchmark"]["name"], []).append(record)
            planned = [
                p
                for p in comparisons.plan(by_benchmark, self.kinds())
                if p.family == comparisons.GATES_FAMILY
            ]
            self._family = comparisons.compare(
                by_benchmark, planned, alpha=self.options.gate_options.alpha, adjust=self.options.adjust
            )
        return self._family

    def _adjusted(self, column: str, against: str, benchmark: str) -> gates.Adjusted | None:
        """The family-adjusted p-value of `column` against its base (records.partner) on `benchmark`,
        when in the family."""
        from pytest_llmeval.comparisons import find

        try:
            entry = find(self.gate_family(), column, against, benchmark)
        except KeyError:
            return None
        if entry["p_value_adjusted"] is None:
            return None
        return gates.Adjusted(
            float(entry["p_value_adjusted"]), self.options.adjust, int(entry["family_size"])
        )

    def evaluate_gate(
        self, benchmark: str, name: str, column: str | None = None
    ) -> tuple[gates.Verdict, dict[str, Any] | None]:
        """One gate's verdict for one benchmark file, and the results.json blocks of the comparison it
        decided on (`statistics` and `significance_test`, or `comparison_with_previous`), if any.

        `column`: the column a model gate compares with the base (None: the first adapter)."""
        opts = self.options.gate_options
        bench = self.benchmarks[benchmark]
        if name == "size":
            return gates.size(len(bench.cases), minimum=opts.min_rows), None
        if name == "difficulty_mix":
            counts: dict[str, int] = {}
            for case in bench.cases:
                counts[case.difficulty] = counts.get(case.difficulty, 0) + 1
            return gates.difficulty_mix(counts), None
        if name == "edge_cases":
            return gates.edge_cases(bench.cases, minimum=opts.min_edge), None
        if name == "held_out":
            # A few-shot file's examples are put into prompts too: they must be held out as well (the
            # benchmark's own rows, when they are the pool, are checked as rows).
            prompt = self.benchmark_prompts.get(benchmark)
            pool = () if prompt is None or prompt.pool is None else prompt.pool
            return gates.held_out(bench.cases, self.training_rows(), examples=pool), None
        # The comparison gates need the scored rows.
        wanted = self.rows_of(benchmark)
        records, missing = self.store.records_for(wanted)
        # Sorted as results.json sorts them: the seeded bootstrap then draws the same resamples here as
        # there, so the statistics a gate decided on are the ones results.json reports.
        records = sorted(records, key=lambda r: r["nodeid"])
        if missing:
            first, why = next(iter(missing.items()))
            return (
                gates.Verdict(
                    name,
                    "skip",
                    f"{len(missing)} of {len(wanted)} rows of {benchmark} did not finish "
                    f"({first.split('::')[-1]}: {why})",
                    {"missing_rows": sorted(missing)},
                ),
                None,
            )
        if not records:
            return gates.Verdict(
                name, "skip", f"no row of {benchmark} ran in this session (deselected?)", {}
            ), None
        from pytest_llmeval.stats import compare_paired

        if name == "no_regression":
            info = self.rows[wanted[0]].benchmark
            baseline = self.baselines.for_benchmark(info, self.identity())
            cmp, block = previous_comparison(info, records, baseline, opts.alpha)
            if baseline.document is not None and block["comparable"]:
                scored = sum(1 for r in records if evaluated_value(r) is not None)
                lacking = gates.without_evidence(
                    name, _evidence(records, scored), minimum=opts.min_rows, who="current", against="previous"
                )
                if lacking is not None:
                    return lacking, {"comparison_with_previous": block}
            verdict = gates.no_regression(
                cmp,
                previous_version=block["previous_version"],
                comparable=block["comparable"],
                reason=block["reason"],
                baseline=block["baseline"],
            )
            note = self.baselines.damage_note()
            if note is not None:
                verdict = replace(verdict, message=f"{verdict.message}; {note}")
            return verdict, {"comparison_with_previous": block}
        if column is None:
            column = (
                ADAPTER
                if self.options.predictions is not None
                else next((m.side for m in self.roster.adapters), ADAPTER)
            )
        decision = None
        if benchmark in self.sequential_orders and column in self.gated_columns():
            out = self._sequential_outcome(benchmark, {r["nodeid"]: r for r in records})
            # Rows another worker computed past the stop count for nothing (results.json drops them too).
            records = [r for r in records if not out.stopped(r["nodeid"])]
            found = out.decisions.get(column)
            decision = found if found is not None and found.decided is not None else None
        against = partner(records[0], column) if records else BASE
        adapter, base, bounded, measure = comparison_values(records, column, against)
        who = "adapter" if column == ADAPTER else column
        if column not in self.kinds():
            cmp = None  # no such column in this run: nothing to compare (a skip)
        else:
            lacking = gates.without_evidence(
                name, _evidence(records, len(adapter)), minimum=opts.min_rows, who=who, against=against
            )
            if lacking is not None and decision is None:
                return lacking, None
            cmp = compare_paired(adapter, base, alpha=opts.alpha, bounded=bounded) if adapter else None
        blocks = None if cmp is None else comparison_blocks(cmp, measure)
        if name == "better_than_base":
            adjusted = (
                None
                if cmp is None or self.options.adjust == "none"
                else self._adjusted(column, against, benchmark)
            )
            if blocks is not None and adjusted is not None:
                blocks["significance_test"].update(
                    p_value_adjusted=adjusted.p_value,
                    adjustment=adjusted.method,
                    family="gates",
                    family_size=adjusted.family_size,
                )
            verdict = gates.better_than_base(cmp, mode=opts.mode, who=who, adjusted=adjusted)
            if decision is not None:
                verdict = gates.sequential(name, decision, len(self.sequential_orders[benchmark]), who=who)
            return self._explain_no_effect(verdict, records, column), blocks
        verdict = gates.no_degradation(cmp, warn_drop=opts.warn_drop, fail_drop=opts.fail_drop, who=who)
        if decision is not None:
            verdict = gates.sequential(name, decision, len(self.sequential_orders[benchmark]), who=who)
        if opts.slice_keys and cmp is not None:
            verdict = self._slice_gate(verdict, records, column)
        return self._explain_no_effect(verdict, records, column), blocks

    def _slice_gate(self, overall: gates.Verdict, records: Sequence[RowRecord], column: str) -> gates.Verdict:
        """--llmeval-slice-gate: no_degradation of each slice of the keys given, on the slice's own rows; a
        slice fails when its drop passes the fail threshold and its paired test, Holm-adjusted over every
        slice judged, is significant (a 3-row slice dropping by chance fails nothing); the gate is the
        worst of the whole benchmark's verdict and the slices'."""
        from pytest_llmeval.formatting import p_value
        from pytest_llmeval.results import slice_comparison, slice_rows
        from pytest_llmeval.stats import holm

        opts = self.options.gate_options
        judged = [
            (f"{key}:{value}", slice_comparison(rows, opts.alpha, column))
            for key, values in slice_rows(records).items()
            if key in opts.slice_keys
            for value, rows in values.items()
        ]
        judged = [(name, entry) for name, entry in judged if entry.get("difference") is not None]
        if not judged:
            keys = ", ".join(opts.slice_keys)
            return replace(overall, message=f"{overall.message}; no row is tagged with a slice of {keys}")
        adjusted = holm([float(entry["p_value"]) for _, entry in judged])
        rank = {"pass": 0, "warn": 1, "fail": 2}
        status, notes, per_slice = overall.status, [], {}
        for (name, entry), p in zip(judged, adjusted, strict=True):
            drop = -float(entry["difference"])
            state = "pass"
            if drop > opts.fail_drop and p < opts.alpha:
                state = "fail"
            elif drop > opts.warn_drop:
                state = "warn"
            per_slice[name] = {**entry, "drop": drop, "p_value_adjusted": p, "status": state}
            if state != "pass":
                notes.append(f"{name} drop {drop:.3f} (n={entry['n']}, Holm p={p_value(p)}: {state})")
            if rank.get(state, 0) > rank.get(status, 0):
                status = state
        shown = "; slices: " + ("; ".join(notes) if notes else f"all {len(judged)} within the thresholds")
        return replace(
            overall,
            status=status,
            message=overall.message + shown,
            details={**overall.details, "slices": per_slice},
        )

    @property
    def backend(self) -> str:
        """Where outputs came from: "transformers" (in this process), "endpoint" (--llmeval-endpoint) or
        "predictions" (--llmeval-predictions): comparisons across backends compare the backends too."""
        if self.options.predictions is not None:
            return "predictions"
        return "endpoint" if self.served else "transformers"

    def _provenance(self, entry: dict[str, Any], column: str) -> None:
        """A column's tokenizer (BOS and EOS handling, chat template hash) and Hub revision, once loaded."""
        from pytest_llmeval.generation import tokenizer_provenance
        from pytest_llmeval.models import revision_of

        if column in self._column_provenance:
            entry |= self._column_provenance[column]
            return
        loaded = self._column_models.get(column) if column in self._model_columns() else self._loaded
        if loaded is None:
            return
        tokenizer = loaded.tokenizer_of(self._adapter_of(column))
        own = column in loaded.tokenizers or (loaded is not self._loaded and column in loaded.adapters)
        # "adapter": the adapter's folder shipped the tokenizer its prompts were built with.
        entry["tokenizer"] = tokenizer_provenance(tokenizer) | {"source": "adapter" if own else "model"}
        source = loaded.adapters.get(column) if column in loaded.adapters else loaded.base.path
        entry["revision"] = None if source is None else revision_of(source)

    @staticmethod
    def _explain_no_effect(
        verdict: gates.Verdict, records: Sequence[RowRecord], column: str
    ) -> gates.Verdict:
        """A comparison gate on rows where the column produced exactly what the base did says so: the
        usual cause is an adapter that was never applied, not an adapter that does nothing useful."""
        from pytest_llmeval.results import NO_EFFECT, adapter_effect

        if adapter_effect(records, column) != "none":
            return verdict
        return replace(
            verdict,
            message=f"{verdict.message}; {NO_EFFECT}",
            details={**verdict.details, "adapter_effect": "none"},
        )

    def models_meta(self) -> list[dict[str, Any]]:
        """results.json's `models`: every column with its kind, source, version and weights fingerprint
        (cache.fingerprint_files of the files it loads; None until this process loaded them). Worked out
        once the model is loaded: under xdist meta() runs for every row's report."""
        if self._models_meta is not None:
            return [dict(entry) for entry in self._models_meta]
        spec = self.options.spec
        base: dict[str, Any] = {"source": spec.base_model or "embedded:SmolLM2-135M-Instruct"}
        if self._loaded is not None:
            base["source"] = self._loaded.base.name
        entries = self.roster.to_json(base)
        for entry in entries:
            column = str(entry["column"])
            entry["backend"] = self.backend
            if column in self.training_logs:
                entry["training"] = self.training_meta(column)
            if self.served:
                entry["fingerprint"] = None
                entry["served"] = self._served_meta(column)
                continue
            self._provenance(entry, column)
            entry["fingerprint"] = self._fingerprint(column)
            if entry["kind"] == "adapter":
                entry["version"] = adapter_metadata(Path(str(entry["source"])))["version"]
                if self._loaded is not None:
                    from pytest_llmeval.models import lora_b_all_zero, parameter_efficiency

                    entry["parameter_efficiency"] = parameter_efficiency(
                        Path(str(entry["source"])), self._loaded.base.path
                    )
                    # B = 0 (peft's initialisation, a save before training): the adapter changes nothing.
                    # Read from the file: the same whether or not this run loaded the weights.
                    zero = lora_b_all_zero(Path(str(entry["source"])))
                    if zero is not None:
                        entry["lora_b_all_zero"] = zero
        if self._loaded is not None or self._served is not None:
            self._models_meta = [dict(entry) for entry in entries]
        return entries

    def _served_meta(self, column: str) -> dict[str, Any] | None:
        """A served column as results.json records it: the URLs without credentials, the id requested,
        what the server reported (model, system_fingerprint, quantization), when, and the settings sent.
        None before this process probed the endpoint. The API key is in none of it."""
        if self._served is None:
            return None
        served = self._served[self.served_id(column)]
        settings = self.options.endpoint
        assert settings is not None
        return {
            "urls": self.endpoint().public_urls(),
            "model": served.id,
            "reported_model": served.reported_model,
            "system_fingerprint": served.system_fingerprint,
            "quantization": self._quantization(served),
            "date": self._served_at,
            "settings": {
                "temperature": 0.0,
                "top_p": 1.0,
                "seed": _served_seed(served),
                "max_tokens": "evaluation_config.max_new_tokens, else --llmeval-max-new-tokens",
                "api": "chat.completions (each row as chat messages: system, few-shot turns, user)",
            },
        }

    def _fingerprint(self, column: str) -> str | None:
        """The content fingerprint of a column's own files: the base folder, an adapter's files, or a full
        model's folder. Read through the machine-wide file-hash index, so a large model is hashed once."""
        if self._loaded is None:
            return None
        if column not in self._fingerprints:
            from pytest_llmeval import models

            index = FileIndex(models.cache_dir() / "file-hashes.json")
            try:
                if column == BASE:
                    files = model_files(Path(self._loaded.base.path))
                elif column in self._loaded.adapters:
                    files = adapter_files(self._loaded.adapters[column])
                else:
                    source = self.roster.member(column).source
                    folder = models.resolve_base(
                        ModelSpec(base_model=source), f"--llmeval-model {column}"
                    ).path
                    files = model_files(Path(folder))
                self._fingerprints[column] = fingerprint_files(files, index)
            except (OSError, ModelError):
                self._fingerprints[column] = None
        return self._fingerprints[column]

    def _served_run_meta(self, meta: dict[str, Any]) -> dict[str, Any]:
        """meta() of a run at --llmeval-endpoint: the served ids as the base and adapter, the servers as
        the hardware, the client's settings as the inference config."""
        settings = self.options.endpoint
        assert settings is not None
        adapters = self.roster.adapters
        urls = ", ".join(self.endpoint().public_urls())
        meta["base_model"] = self.served_id(BASE)
        meta["adapter"] = adapters[0].source if adapters else None
        meta["adapter_name"] = adapters[0].name if adapters else None
        meta["adapter_version"] = None
        meta["quantization"] = self.options.quantization
        if self._served is not None:
            meta["quantization"] = self._quantization(self._served[self.served_id(BASE)])
        meta["hardware"] = {
            "device": "endpoint",
            "device_name": f"served at {urls}",
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        }
        inference = meta["inference_config"]
        inference["device"] = "endpoint"
        inference["dtype"] = "as served"
        inference["endpoint"] = {
            "urls": self.endpoint().public_urls(),
            "concurrency": settings.concurrency,
            "timeout_s": settings.timeout_s,
            "deadline_s": settings.deadline_s,
            "max_retries": settings.max_retries,
            "requests": dict(self.endpoint().stats),
            "models": {c: self._served_meta(c) for c in self.columns()},
        }
        inference["prompt_template"] = (
            "the server's: each row is sent as chat messages (its system prompt and few-shot turns, if any, "
            "then the user message); under a prompt template, its rendered text goes to /v1/completions"
        )
        return meta

    def training_rows(self) -> list[gates.TrainingRow]:
        """The adapter's training data (GateOptions.train_data), read once for every held_out gate."""
        if self._training is None:
            path = self.options.gate_options.train_data
            self._training = [] if path is None else gates.load_training_data(path)
        return self._training

    def training_gates(self) -> list[tuple[Member, str]]:
        """(column, gate) of every training gate item: each gated column with a training log, in the
        roster's order, unless --llmeval-training-gates=off."""
        if self.options.gate_options.training_gates == "off":
            return []
        return [
            (member, gate)
            for member in self.roster.gated
            if member.side in self.training_logs
            for gate in gates.TRAINING_GATES
        ]

    def training_verdict(self, column: str, gate: str) -> gates.Verdict:
        """A training gate's verdict for a column's log: "warn" where its criterion fails, unless
        --llmeval-training-gates=fail."""
        opts = self.options.gate_options
        log = self.training_logs[column].log
        strict = opts.training_gates == "fail"
        if gate == "converged":
            return gates.converged(log, window=opts.training_window, strict=strict)
        if gate == "no_overfitting":
            return gates.no_overfitting(log, smoothing=opts.training_window, strict=strict)
        raise ValueError(f"unknown training gate {gate!r} (known: {', '.join(gates.TRAINING_GATES)})")

    def training_meta(self, column: str) -> dict[str, Any] | None:
        """A column's results.json `training` (results.training_entry); None without a training log. The
        gates' verdicts are the ones its gate items give (computed alike, from the same log)."""
        evidence = self.training_logs.get(column)
        if evidence is None:
            return None
        if column not in self._training_meta:
            verdicts = {
                gate: self.training_verdict(column, gate).to_json()
                for member, gate in self.training_gates()
                if member.side == column
            }
            self._training_meta[column] = training_entry(
                evidence.log,
                found=evidence.found,
                window=self.options.gate_options.training_window,
                gates=verdicts,
            )
        return self._training_meta[column]

    def _sequential_meta(self) -> dict[str, Any] | None:
        """What results.json needs to reach the decisions the workers reached (early_stop.Settings)."""
        settings = self.sequential_settings() if self.rows else None
        if settings is None:
            return None
        return {
            **settings.to_json(),
            "columns": self.gated_columns(),
            "benchmarks": sorted(self.sequential_orders),
        }

    def spent(self) -> dict[str, Any]:
        """What this process spent beside the rows' own costs (results.json `cost`, costs.merge_spent): the
        seconds loading each column's weights, the caps, and why it stopped sending rows, if it did."""
        loads = dict(self._load_s)
        if self._loaded is not None and self._loaded.weights_loaded:
            # The shared weights: the base's, with every adapter on them.
            loads[BASE] = loads.get(BASE, 0.0) + self._loaded.load_seconds
        for column, held in self._column_models.items():
            loads[column] = loads.get(column, 0.0) + held.load_seconds
        return {
            "load_s": loads,
            "caps": self.budget().caps(),
            "stopped": self.stopped,
            "memory": self._peak_memory(),
        }

    def _peak_memory(self) -> dict[str, Any]:
        """This process's peak memory so far (the adaptation document's §2, of the evaluation itself): its
        resident set on the CPU, and on a GPU the peak bytes torch allocated and reserved."""
        import resource

        # ru_maxrss is in kilobytes on Linux (bytes on macOS).
        scale = 1 if sys.platform == "darwin" else 1024
        memory: dict[str, Any] = {
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20
        }
        loaded = self._loaded
        if loaded is not None and loaded.device.type == "cuda":
            import torch

            memory["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated(loaded.device) / 2**20
            memory["cuda_max_reserved_mb"] = torch.cuda.max_memory_reserved(loaded.device) / 2**20
        return memory

    def meta(self) -> dict[str, Any]:
        """Model, hardware and inference settings for results.json (from this process's loaded model)."""
        spec = self.options.spec
        decoding = DecodingConfig(max_new_tokens=self.options.max_new_tokens).to_json()
        meta: dict[str, Any] = {
            "adapter": None if spec.adapter is None else str(spec.adapter),
            "base_model": spec.base_model or "embedded:SmolLM2-135M-Instruct",
            "predictions_file": None if self.options.predictions is None else str(self.options.predictions),
            "subset": self.subset,
            "spent": self.spent(),
            "sequential": self._sequential_meta(),
            "inference_config": {
                "decoding": decoding,
                "max_new_tokens_per_row": "evaluation_config.max_new_tokens overrides the default",
                "batch_size": self.options.batch_size,
                "token_budget": self.options.token_budget,
                "context_overflow": self.options.context_overflow,
                "batch_retries": list(self.retries),
                "device": spec.device,
                "dtype": spec.dtype,
                "cache": self.cache_info(),
                "backend": self.backend,
                "prompt": self.prompts_meta(),
            },
        }
        if self.options.predictions is not None:
            source = str(self.options.predictions)
            # Worked out where the rows were collected (every xdist worker collects them all; the
            # controller collects none, and says nothing rather than "every prediction is unmatched").
            if self.rows:
                meta["unmatched_predictions"] = self.unmatched_predictions()
            meta["inference_config"] = {
                "source": f"saved predictions in {source}: nothing was generated",
                "backend": self.backend,
                "decoding": {"max_new_tokens": self.options.max_new_tokens, "temperature": 0.0, "top_p": 1.0},
            }
            if self.has_adapter:
                meta.update(adapter=f"predictions:{source}", adapter_name=self.predictions_name())
                meta["base_model"] = "base_prediction"
            else:
                meta["base_model"] = self.predictions_name()
            return meta
        if self.roster.members:
            meta["models"] = self.models_meta()
            # The top level's adapter (LocoLLM's document): the first adapter's, as results.json's top.
            first = next((m for m in meta["models"] if m.get("parameter_efficiency")), None)
            meta["parameter_efficiency"] = None if first is None else first["parameter_efficiency"]
            adapters = self.roster.adapters
            meta["training"] = self.training_meta(adapters[0].side) if adapters else None
        if self.served:
            return self._served_run_meta(meta)
        if self._loaded is None:
            return meta
        import torch
        import transformers

        from pytest_llmeval.generation import template_info

        loaded = self._loaded
        device = loaded.device
        meta["base_model"] = loaded.base.name
        meta["base_model_note"] = loaded.base.note
        meta["quantization"] = loaded.base.quantization
        meta["adapter_name"] = None if loaded.adapter_meta is None else loaded.adapter_meta["name"]
        meta["adapter_version"] = None if loaded.adapter_meta is None else loaded.adapter_meta["version"]
        if self._hardware is None:
            device_name = (
                torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
            )
            self._hardware = {
                "device": str(device),
                "device_name": device_name or platform.machine(),
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
                "python": sys.version.split()[0],
                "torch": str(torch.__version__),  # a TorchVersion, which execnet cannot send
                "transformers": str(transformers.__version__),
            }
        meta["hardware"] = dict(self._hardware)
        meta["inference_config"]["device"] = str(device)
        meta["inference_config"]["dtype"] = str(loaded.dtype).removeprefix("torch.")
        meta["inference_config"]["prompt_template"] = template_info(loaded.tokenizer)
        # False when every output and measurement came from the generation cache: no weights were read.
        meta["inference_config"]["weights_loaded"] = loaded.weights_loaded or any(
            m.weights_loaded for m in [*self._column_models.values(), *self._other_models.values()]
        )
        return meta
