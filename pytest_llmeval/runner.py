"""State of one evaluation process: the lazily loaded model, chunked generation, per-row scoring.

No pytest here (plugin.py and items.py hold the glue) and no torch at import time.

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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_llmeval import gates
from pytest_llmeval.benchmark import Benchmark, Case, Prediction, load_predictions
from pytest_llmeval.cache import CacheStats, FileIndex, GenerationCache, ModelIdentity, identify
from pytest_llmeval.generation import DecodingConfig
from pytest_llmeval.models import LLM, LoadedModel, ModelError, ModelSpec
from pytest_llmeval.results import compare_with_previous, comparison_values
from pytest_llmeval.scorers import SCORERS, Score

BENCHMARK_SUFFIX = ".jsonl"
GATE_PREFIX = "gate::"
# How often a gate under xdist looks for rows other workers are still scoring, and for how long at most
# without any new row arriving before it gives up (a worker that crashed never reports its rows).
SPOOL_POLL_SECONDS = 0.2
SPOOL_STALL_SECONDS = 1800.0


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


@dataclass(frozen=True)
class RunOptions:
    """Command-line choices that shape generation."""

    spec: ModelSpec
    predictions: Path | None = None  # --llmeval-predictions: score these outputs, load no model
    batch_size: int = 32
    max_new_tokens: int = 512
    gate_options: GateOptions = GateOptions()
    # --llmeval-fluency: perplexity of generated and reference texts under a scoring model, which is the
    # base with the adapter off unless --llmeval-ppl-model names another (then fluency is on too).
    fluency: bool = False
    ppl_model: str | None = None
    judge_model: str | None = None  # --llmeval-judge-model; None: the base with the adapter off
    composite_weights: dict[str, float] | None = None  # None: results.DEFAULT_COMPOSITE_WEIGHTS
    sandbox_mode: str = "auto"  # --llmeval-sandbox: auto | strict | basic (code_execution rows)
    cache_dir: Path | None = None  # --llmeval-cache-dir (default: pytest's cache); None: --llmeval-no-cache


@dataclass(frozen=True)
class RowRef:
    """One collected benchmark row."""

    nodeid: str
    benchmark: str  # the file part of the node id, as results.json names the benchmark
    case: Case


@dataclass(frozen=True)
class RowOutputs:
    """Generated texts of one row, or for a measured type (perplexity) what the model measured."""

    base: str | None  # None for a measured row
    adapter: str | None  # None when no adapter is evaluated, and for a measured row
    base_measure: dict[str, Any] | None = None
    adapter_measure: dict[str, Any] | None = None
    # --llmeval-fluency: {"reference"|"base"|"adapter": {nll, n_tokens, n_chars} or None for an empty text}
    fluency: dict[str, dict[str, Any] | None] | None = None


class RowError(Exception):
    """A row cannot be scored (no saved prediction, a scorer raised, no model); the message is complete."""


class RowSkipped(Exception):
    """A row cannot be evaluated in this run (a perplexity row without a model); the message says why."""


@dataclass(frozen=True)
class RowResult:
    """A scored row: its results.json record, and what decides pass or fail."""

    record: dict[str, Any]
    score: Score | None  # the evaluated model's score (adapter when given, else base); None on error
    error: str | None = None
    skipped: str | None = None  # why the row cannot be evaluated in this run


def is_row_nodeid(nodeid: str) -> bool:
    """`file.jsonl::id`: a benchmark row (gates and hand-written tests have other shapes).

    `::id` too: pytest leaves the file part of the node id empty for files outside the rootdir.
    """
    parts = nodeid.split("::")
    return len(parts) == 2 and (parts[0].endswith(BENCHMARK_SUFFIX) or parts[0] == "")


def chunk_keys(nodeids: Sequence[str], size: int) -> dict[str, str]:
    """Map every node id to its generation chunk: `file::chunk-N` for rows, the node id itself otherwise."""
    keys: dict[str, str] = {}
    seen: dict[str, int] = {}
    for nodeid in nodeids:
        if is_row_nodeid(nodeid):
            file = nodeid.split("::", 1)[0]
            position = seen.get(file, 0)
            seen[file] = position + 1
            keys[nodeid] = f"{file}::chunk-{position // size}"
        else:
            keys[nodeid] = nodeid
    return keys


@dataclass
class EvalRun:
    """Everything one pytest process knows about the evaluation; kept in config.stash."""

    options: RunOptions
    rows: dict[str, RowRef] = field(default_factory=dict)
    outputs: dict[str, RowOutputs] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # controller: node id -> record
    gate_records: dict[str, dict[str, Any]] = field(default_factory=dict)  # controller: node id -> verdict
    local_records: dict[str, dict[str, Any]] = field(default_factory=dict)  # rows scored in this process
    benchmarks: dict[str, Benchmark] = field(default_factory=dict)  # benchmark name -> the parsed file
    previous: dict[str, Any] | None = None  # results.json of a previous run, for no_regression
    spool: Path | None = None  # xdist: folder where every worker appends its rows, for gates elsewhere
    worker_id: str | None = None
    worker_meta: dict[str, Any] | None = None  # controller under xdist: what a worker reported
    expected_rows: int | None = None  # rows collected (xdist controller learns it from a worker)
    _chunks: dict[str, list[str]] = field(default_factory=dict)  # chunk key -> node ids
    _chunk_of: dict[str, str] = field(default_factory=dict)  # node id -> chunk key
    _loaded: LoadedModel | None = None
    _other_models: dict[str, LoadedModel] = field(default_factory=dict)  # --llmeval-ppl/judge-model
    _embedder: Any = None  # embeddings.Embedder, loaded on the first semantic or bertscore row
    _embedder_error: str | None = None
    _sandbox: Any = None  # sandbox.Sandbox, built on the first code_execution row
    _sandbox_unavailable: str | None = None
    notices: list[str] = field(default_factory=list)  # warnings for the plugin to show (once each)
    _predictions: list[Prediction] | None = None
    _training: list[gates.TrainingRow] | None = None
    _load_error: ModelError | None = None
    cache: GenerationCache | None = None  # built on the first generated chunk (options.cache_dir)
    _cache_identity: ModelIdentity | None = None
    _cache_off: bool = False  # the model's files could not be fingerprinted: generate without the cache
    worker_cache: dict[str, Any] | None = None  # xdist controller: the workers' cache counts, summed

    @property
    def has_adapter(self) -> bool:
        if self.options.predictions is not None:
            # With saved predictions, `prediction` plays the adapter when `base_prediction` plays the base.
            return any(p.base_prediction is not None for p in self.predictions())
        return self.options.spec.adapter is not None

    def predictions(self) -> list[Prediction]:
        """The parsed --llmeval-predictions file (read once)."""
        if self._predictions is None:
            assert self.options.predictions is not None
            self._predictions = load_predictions(self.options.predictions)
        return self._predictions

    def _saved_output(self, nodeid: str) -> RowOutputs:
        ref = self.rows[nodeid]
        matches = [
            p
            for p in self.predictions()
            if p.id == ref.case.id and (p.benchmark is None or ref.benchmark.endswith(p.benchmark))
        ]
        if not matches:
            raise RowError(
                f"{ref.benchmark}:{ref.case.line}: no prediction for id '{ref.case.id}' "
                f"in {self.options.predictions}"
            )
        if len(matches) > 1:
            lines = ", ".join(str(p.line) for p in matches)
            raise RowError(
                f"{ref.benchmark}:{ref.case.line}: id '{ref.case.id}' is on lines {lines} of "
                f"{self.options.predictions}: add a 'benchmark' field to say which file each belongs to"
            )
        p = matches[0]
        if self.has_adapter:
            if p.base_prediction is None:
                raise RowError(f"{self.options.predictions}:{p.line}: id '{p.id}' has no base_prediction")
            return RowOutputs(base=p.base_prediction, adapter=p.prediction)
        return RowOutputs(base=p.prediction, adapter=None)

    def unmatched_predictions(self, row_ids: Sequence[tuple[str, str]]) -> list[str]:
        """Prediction ids that match no collected row ((benchmark, id) pairs), for the report."""
        if self.options.predictions is None:
            return []
        return [
            p.id
            for p in self.predictions()
            if not any(i == p.id and (p.benchmark is None or b.endswith(p.benchmark)) for b, i in row_ids)
        ]

    def set_rows(self, rows: Sequence[RowRef]) -> None:
        """Record the collected rows (in collection order) and split them into generation chunks."""
        self.rows = {r.nodeid: r for r in rows}
        self.expected_rows = len(rows)
        keys = chunk_keys([r.nodeid for r in rows], self.options.batch_size)
        self._chunks = {}
        for r in rows:
            self._chunks.setdefault(keys[r.nodeid], []).append(r.nodeid)
        self._chunk_of = keys

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

    def llm(self, *, adapter: bool) -> LLM:
        """A generation handle with the adapter on or off; both share the one loaded model."""
        return LLM(
            self.loaded(),
            adapter=adapter,
            max_new_tokens=self.options.max_new_tokens,
            batch_size=self.options.batch_size,
        )

    def outputs_for(self, nodeid: str) -> RowOutputs:
        """The row's generated texts (or measurements), computing its whole chunk on first need."""
        spec = SCORERS[self.rows[nodeid].case.evaluation_type]
        if self.options.predictions is not None:
            if spec.score is None:
                why = "are graded by a judge model" if spec.measure == "judge" else "measure the model itself"
                kind = self.rows[nodeid].case.evaluation_type
                raise RowSkipped(f"{kind} rows {why}, and --llmeval-predictions loads none")
            return self._saved_output(nodeid)
        if nodeid not in self.outputs:
            chunk = [n for n in self._chunks[self._chunk_of[nodeid]] if n not in self.outputs]
            by_measure: dict[str | None, list[str]] = {}
            for n in chunk:
                by_measure.setdefault(SCORERS[self.rows[n].case.evaluation_type].measure, []).append(n)
            generated = by_measure.get(None, []) + by_measure.get("judge", [])
            if generated:
                self._generate(generated)
                self._warm_embeddings(generated)
            if "judge" in by_measure:
                self._judge(by_measure["judge"])
            if "perplexity" in by_measure:
                self._measure_perplexity(by_measure["perplexity"])
            if "choices" in by_measure:
                self._measure_choices(by_measure["choices"])
        return self.outputs[nodeid]

    def _generate(self, nodeids: list[str]) -> None:
        from pytest_llmeval.generation import build_prompt, generate

        loaded = self.loaded()
        cases = [self.rows[n].case for n in nodeids]
        prompts = [build_prompt(loaded.tokenizer, c.instruction, c.input) for c in cases]
        limits = [int(c.evaluation_config.get("max_new_tokens", self.options.max_new_tokens)) for c in cases]

        def run(adapter: bool) -> list[str]:
            def produce(batch: list[str], batch_limits: list[int]) -> list[str]:
                with loaded.adapter_enabled(adapter):
                    return generate(
                        loaded.model,
                        loaded.tokenizer,
                        batch,
                        max_new_tokens=batch_limits,
                        batch_size=len(batch),
                    )

            cached = self._generation_cache()
            if cached is None:
                return produce(prompts, limits)
            cache, identity = cached
            # Stored outputs are served; the misses are generated together, in one batch.
            texts = cache.generate(identity, "adapter" if adapter else "base", prompts, limits, produce)
            self.notices.extend(cache.take_problems())
            return texts

        base = run(False)
        adapter: list[str | None] = list(run(True)) if self.has_adapter else [None] * len(nodeids)
        fluency: list[dict[str, dict[str, Any] | None] | None] = [None] * len(nodeids)
        if self.options.fluency or self.options.ppl_model is not None:
            fluency = self._fluency([c.expected_output for c in cases], base, adapter)
        for n, b, a, f in zip(nodeids, base, adapter, fluency, strict=True):
            self.outputs[n] = RowOutputs(base=b, adapter=a, fluency=f)

    def _generation_cache(self) -> tuple[GenerationCache, ModelIdentity] | None:
        """The generation cache and the loaded model's identity in it; None when off or unusable."""
        if self.options.cache_dir is None or self._cache_off:
            return None
        if self.cache is None or self._cache_identity is None:
            from pytest_llmeval import models

            # File hashes are kept beside the converted models: valid machine-wide, so a new project or a
            # pytester run in a fresh folder does not read a multi-GB model again.
            index = FileIndex(models.cache_dir() / "file-hashes.json")
            cache = GenerationCache(self.options.cache_dir, index=index)
            try:
                self._cache_identity = identify(self.loaded(), index)
            except OSError as exc:
                self._cache_off = True
                self.notices.append(f"generation cache off: cannot read the model's files ({exc})")
                return None
            self.cache = cache
        return self.cache, self._cache_identity

    def cache_info(self) -> dict[str, Any]:
        """results.json's inference_config.cache: where it is, and rows served or generated per side."""
        if self.options.cache_dir is None:
            return {"enabled": False}
        if self.worker_cache is not None:
            return self.worker_cache
        stats = self.cache.stats if self.cache is not None else CacheStats()
        return {"enabled": True, "dir": str(self.options.cache_dir), **stats.to_json()}

    def add_worker_cache(self, info: dict[str, Any]) -> None:
        """Add one xdist worker's cache counts (its cache_info()) to the run's."""
        total = CacheStats()
        for part in (self.worker_cache, info):
            if part is not None:
                total.add(part)
        self.worker_cache = {**info, **total.to_json()}

    def _fluency(
        self, references: list[str], base: list[str], adapter: list[str | None]
    ) -> list[dict[str, dict[str, Any] | None] | None]:
        """Per row: NLL and tokens of the reference, base and adapter texts under the scoring model."""
        from pytest_llmeval.measures import fluency

        return list(
            fluency(
                self._model_named(self.options.ppl_model),
                references,
                base,
                adapter if self.has_adapter else None,
            )
        )

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

    def _measure_perplexity(self, nodeids: list[str]) -> None:
        """Perplexity rows: each text measured with the adapter off and on; rows of one window share calls."""
        from pytest_llmeval.measures import text_perplexities
        from pytest_llmeval.scorers import perplexity as ppl_scorer

        by_window: dict[tuple[int | None, int | None], list[str]] = {}
        for n in nodeids:
            by_window.setdefault(ppl_scorer.window(self.rows[n].case.evaluation_config), []).append(n)
        for (max_length, stride), group in by_window.items():
            cases = [self.rows[n].case for n in group]
            texts = [getattr(c, ppl_scorer.text_field(c.evaluation_config)) for c in cases]
            base, adapter = text_perplexities(
                self.loaded(), texts, max_length, stride, with_adapter=self.has_adapter
            )
            self._store_measures(group, base, adapter)

    def _measure_choices(self, nodeids: list[str]) -> None:
        """Multiple-choice rows: every choice's log-likelihood after the row's prompt, adapter off and on."""
        from pytest_llmeval.measures import choice_likelihoods

        cases = [self.rows[n].case for n in nodeids]
        base, adapter = choice_likelihoods(self.loaded(), cases, with_adapter=self.has_adapter)
        self._store_measures(nodeids, base, adapter)

    def _store_measures(
        self, nodeids: list[str], base: list[dict[str, Any]], adapter: list[dict[str, Any] | None]
    ) -> None:
        for n, b, a in zip(nodeids, base, adapter, strict=True):
            self.outputs[n] = RowOutputs(base=None, adapter=None, base_measure=b, adapter_measure=a)

    def _judge(self, nodeids: list[str]) -> None:
        """llm_judge rows: the judge grades base and adapter outputs, `runs` sampled runs each, batched."""
        from pytest_llmeval.measures import judge_runs

        judge = self._model_named(self.options.judge_model)
        name = self.options.judge_model or f"{judge.base.name} (the base model, adapter off)"
        cases = [self.rows[n].case for n in nodeids]
        outputs = [(self.outputs[n].base, self.outputs[n].adapter) for n in nodeids]
        graded = judge_runs(judge, name, cases, outputs, batch_size=self.options.batch_size)
        for n, (base, adapter) in zip(nodeids, graded, strict=True):
            self.outputs[n] = replace(self.outputs[n], base_measure=base, adapter_measure=adapter)

    def score_row(self, nodeid: str) -> RowResult:
        """Generate (if needed) and score one row for base and adapter; scorer errors become row errors."""
        ref = self.rows[nodeid]
        case = ref.case
        try:
            out = self.outputs_for(nodeid)
        except (RowError, RowSkipped) as exc:
            reason = str(exc)
            skipped = isinstance(exc, RowSkipped)
            failed: dict[str, Any] = {"nodeid": nodeid, "benchmark": ref.benchmark, "id": case.id}
            failed.update(line=case.line, difficulty=case.difficulty, evaluation_type=case.evaluation_type)
            failed.update(
                evaluation_config=dict(case.evaluation_config), instruction=case.instruction, input=case.input
            )
            failed.update(tags=list(case.tags), expected_output=case.expected_output, base=None, adapter=None)
            failed.update(passed=False, error=None if skipped else reason)
            if skipped:
                failed["skipped"] = reason
                return RowResult(record=failed, score=None, skipped=reason)
            return RowResult(record=failed, score=None, error=reason)
        record: dict[str, Any] = {
            "nodeid": nodeid,
            "benchmark": ref.benchmark,
            "id": case.id,
            "line": case.line,
            "difficulty": case.difficulty,
            "evaluation_type": case.evaluation_type,
            "evaluation_config": dict(case.evaluation_config),
            "instruction": case.instruction,
            "input": case.input,
            "tags": list(case.tags),
            "expected_output": case.expected_output,
            "base": {"output": out.base, "score": None},
            "adapter": None
            if out.adapter is None and out.adapter_measure is None
            else {"output": out.adapter, "score": None},
            "passed": False,
            "error": None,
        }
        if out.fluency is not None:
            record["fluency"] = out.fluency
        try:
            resources = {name: self._resource(name, ref) for name in SCORERS[case.evaluation_type].uses}
        except RowSkipped as exc:
            record["skipped"] = str(exc)
            return RowResult(record=record, score=None, skipped=str(exc))
        except RowError as exc:
            record["error"] = f"{ref.benchmark}:{case.line}: {exc}"
            return RowResult(record=record, score=None, error=record["error"])
        try:
            base_score, adapter_score = self._scores(case, out, resources)
        except Exception as exc:  # a scorer bug or a custom scorer's error fails this row only
            where = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            error = f"{ref.benchmark}:{case.line}: scorer '{case.evaluation_type}' raised {where}"
            record["error"] = error
            # What the model measured (the judge's raw outputs, say) stays in results.json: nothing is lost.
            if out.base_measure is not None:
                record["base"]["measurement"] = out.base_measure
            if out.adapter_measure is not None:
                record["adapter"]["measurement"] = out.adapter_measure
            return RowResult(record=record, score=None, error=error)
        record["base"]["score"] = base_score.to_json()
        if adapter_score is not None:
            record["adapter"]["score"] = adapter_score.to_json()
        primary = adapter_score if adapter_score is not None else base_score
        record["passed"] = primary.passed
        return RowResult(record=record, score=primary)

    def _resource(self, name: str, ref: RowRef) -> Any:
        """What a scorer needs beside the texts (ScorerSpec.uses), built once per process or per script."""
        if name == "function":
            from pytest_llmeval.scorers import custom

            # Imported at collection already (errors are collection errors); cached per path and mtime.
            return custom.load_for_config(
                ref.case.evaluation_config, self.benchmarks[ref.benchmark].path.parent
            )
        if name == "embedder":
            return self._embedding_model()
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
                out = self.outputs[n]
                texts = [self.rows[n].case.expected_output, out.base, out.adapter]
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
    def _scores(case: Case, out: RowOutputs, resources: dict[str, Any]) -> tuple[Score, Score | None]:
        """Base and adapter scores of a row: from its texts, or from its measurements."""
        scorer = SCORERS[case.evaluation_type]
        config = case.evaluation_config
        if out.base_measure is not None:
            assert scorer.score_measurement is not None
            base = scorer.score_measurement(out.base_measure, config)
            adapter = (
                None if out.adapter_measure is None else scorer.score_measurement(out.adapter_measure, config)
            )
            return base, adapter
        assert scorer.score is not None and out.base is not None
        base = scorer.score(out.base, case.expected_output, config, **resources)
        adapter = (
            None
            if out.adapter is None
            else scorer.score(out.adapter, case.expected_output, config, **resources)
        )
        return base, adapter

    def publish(self, record: dict[str, Any]) -> None:
        """Keep a scored row for this process's gates; under xdist also append it to the shared spool."""
        self.local_records[record["nodeid"]] = record
        if self.spool is not None and self.worker_id is not None:
            with open(self.spool / f"{self.worker_id}.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def finish_worker(self) -> None:
        """Tell gates waiting on other workers that this one will score no more rows."""
        if self.spool is not None and self.worker_id is not None:
            (self.spool / f"{self.worker_id}.done").touch()

    def rows_of(self, benchmark: str) -> list[str]:
        """Node ids of the collected rows of one benchmark file, in collection order."""
        return [n for n, r in self.rows.items() if r.benchmark == benchmark]

    def records_for(self, benchmark: str, workers: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Records of every collected row of a benchmark, and how many rows have none (did not run).

        Serially the rows ran before the gates (plugin.py moves gates last). Under xdist, rows of this file
        may still be running on other workers: wait for them in the spool until all are there, every other
        worker has finished, or nothing arrived for SPOOL_STALL_SECONDS.
        """
        wanted = self.rows_of(benchmark)
        found = {n: self.local_records[n] for n in wanted if n in self.local_records}
        last_progress = time.monotonic()
        while self.spool is not None and len(found) < len(wanted):
            before = len(found)
            for path in sorted(self.spool.glob("*.jsonl")):
                for line in path.read_text(encoding="utf-8").splitlines():
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue  # a line another worker is still writing
                    if record.get("nodeid") in self.rows and record["nodeid"] in wanted:
                        found[record["nodeid"]] = record
            if len(found) == len(wanted):
                break
            if len(found) > before:
                last_progress = time.monotonic()
            others_done = len(list(self.spool.glob("*.done"))) >= workers - 1
            if others_done or time.monotonic() - last_progress > SPOOL_STALL_SECONDS:
                break
            time.sleep(SPOOL_POLL_SECONDS)
        return [found[n] for n in wanted if n in found], len(wanted) - len(found)

    def evaluate_gate(self, benchmark: str, name: str, *, workers: int = 1) -> gates.Verdict:
        """One gate's verdict for one benchmark file."""
        opts = self.options.gate_options
        bench = self.benchmarks[benchmark]
        if name == "size":
            return gates.size(len(bench.cases), minimum=opts.min_rows)
        if name == "difficulty_mix":
            counts: dict[str, int] = {}
            for case in bench.cases:
                counts[case.difficulty] = counts.get(case.difficulty, 0) + 1
            return gates.difficulty_mix(counts)
        if name == "edge_cases":
            return gates.edge_cases(bench.cases, minimum=opts.min_edge)
        if name == "held_out":
            return gates.held_out(bench.cases, self.training_rows())
        # The comparison gates need the scored rows.
        records, missing = self.records_for(benchmark, workers)
        if missing:
            return gates.Verdict(
                name, "skip", f"{missing} of {missing + len(records)} rows of {benchmark} did not finish", {}
            )
        if not records:
            return gates.Verdict(name, "skip", f"no row of {benchmark} ran in this session (deselected?)", {})
        from pytest_llmeval.stats import compare_paired

        if name == "no_regression":
            cmp, comparable, reason, version = compare_with_previous(
                benchmark, bench.sha256, records, self.previous, opts.alpha
            )
            return gates.no_regression(cmp, previous_version=version, comparable=comparable, reason=reason)
        adapter, base, bounded, _ = comparison_values(records)
        cmp = (
            compare_paired(adapter, base, alpha=opts.alpha, bounded=bounded)
            if self.has_adapter and adapter
            else None
        )
        if name == "better_than_base":
            return gates.better_than_base(cmp, mode=opts.mode)
        return gates.no_degradation(cmp, warn_drop=opts.warn_drop, fail_drop=opts.fail_drop)

    def training_rows(self) -> list[gates.TrainingRow]:
        """The adapter's training data (GateOptions.train_data), read once for every held_out gate."""
        if self._training is None:
            path = self.options.gate_options.train_data
            self._training = [] if path is None else gates.load_training_data(path)
        return self._training

    def meta(self) -> dict[str, Any]:
        """Model, hardware and inference settings for results.json (from this process's loaded model)."""
        spec = self.options.spec
        decoding = DecodingConfig(max_new_tokens=self.options.max_new_tokens).to_json()
        meta: dict[str, Any] = {
            "adapter": None if spec.adapter is None else str(spec.adapter),
            "predictions_file": None if self.options.predictions is None else str(self.options.predictions),
            "inference_config": {
                "decoding": decoding,
                "max_new_tokens_per_row": "evaluation_config.max_new_tokens overrides the default",
                "batch_size": self.options.batch_size,
                "device": spec.device,
                "dtype": spec.dtype,
                "cache": self.cache_info(),
            },
        }
        if self.options.predictions is not None:
            source = str(self.options.predictions)
            meta["inference_config"] = {"source": f"saved predictions in {source}: nothing was generated"}
            if self.has_adapter:
                meta.update(adapter=f"predictions:{source}", adapter_name="prediction")
                meta["base_model"] = "base_prediction"
            else:
                meta["base_model"] = "prediction"
            return meta
        if self._loaded is None:
            return meta
        import torch
        import transformers

        from pytest_llmeval.generation import template_info

        loaded = self._loaded
        device = loaded.device
        device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
        meta["base_model"] = loaded.base.name
        meta["base_model_note"] = loaded.base.note
        meta["quantization"] = loaded.base.quantization
        meta["adapter_name"] = None if loaded.adapter_meta is None else loaded.adapter_meta["name"]
        meta["adapter_version"] = None if loaded.adapter_meta is None else loaded.adapter_meta["version"]
        meta["hardware"] = {
            "device": str(device),
            "device_name": device_name or platform.machine(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "torch": str(torch.__version__),  # a TorchVersion, which execnet cannot send
            "transformers": str(transformers.__version__),
        }
        meta["inference_config"]["device"] = str(device)
        meta["inference_config"]["dtype"] = str(loaded.dtype).removeprefix("torch.")
        meta["inference_config"]["prompt_template"] = template_info(loaded.tokenizer)
        return meta


# --- gates ------------------------------------------------------------------------------------------------


def in_domain(benchmark: str, adapter: Path | None, globs: Sequence[str], rootdir: Path) -> bool:
    """In-domain: under the adapter's folder (adapters/<domain>/eval/...), or matched by a domain glob."""
    path = (rootdir / benchmark).resolve()
    if adapter is not None and path.is_relative_to(adapter.resolve()):
        return True
    return any(fnmatch.fnmatch(benchmark, g) or fnmatch.fnmatch(str(path), g) for g in globs)


def gate_names(*, in_domain: bool, has_previous: bool) -> list[str]:
    """The gates a benchmark file gets, in the order they run."""
    names = ["better_than_base" if in_domain else "no_degradation"]
    if has_previous:
        names.append("no_regression")
    return [*names, "size", "difficulty_mix", "edge_cases", "held_out"]


TRAINING_FILES = ("train.jsonl", "data/train.jsonl", "training.jsonl", "data/training.jsonl")


def find_training_file(adapter: Path | None) -> Path | None:
    """The LocoLLM layout keeps an adapter's training data beside it; the first of TRAINING_FILES found."""
    if adapter is None:
        return None
    return next((adapter / n for n in TRAINING_FILES if (adapter / n).is_file()), None)
