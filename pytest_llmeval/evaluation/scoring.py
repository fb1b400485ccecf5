"""A row's outputs scored into its RowRecord: every column by the row's scorer (scorers.SCORERS), with
the resources a scorer uses beside the texts (a custom function, the sentence-embedding model, the code
sandbox), built once per process. A scorer's error fails its row only; what the model produced stays in
the record."""

from __future__ import annotations

import time
import traceback
from typing import Any

from pytest_llmeval.benchmark import Case, Metric
from pytest_llmeval.evaluation.ledger import Ledger
from pytest_llmeval.evaluation.outputs import RowError, RowOutputs, RowResult, RowSkipped
from pytest_llmeval.evaluation.producer import Producer
from pytest_llmeval.evaluation.prompting import Prompter
from pytest_llmeval.planning import RowPlan, RowRef, RunPlan
from pytest_llmeval.records import BASE, RowRecord, SideRecord, row_record
from pytest_llmeval.run_options import RunOptions
from pytest_llmeval.scorers import SCORERS, Score


class RowScorer:
    """Scores rows as they run; holds the scorers' resources."""

    def __init__(
        self,
        options: RunOptions,
        plan: RunPlan,
        rowplan: RowPlan,
        prompter: Prompter,
        producer: Producer,
        ledger: Ledger,
        notices: list[str],
    ) -> None:
        self.options = options
        self.plan = plan
        self.rowplan = rowplan
        self.rows = rowplan.rows
        self.prompter = prompter
        self.producer = producer
        self.ledger = ledger
        self.notices = notices
        self._embedder: Any = None  # embeddings.Embedder, loaded on the first semantic or bertscore row
        self._embedder_error: str | None = None
        self._sandbox: Any = None  # sandbox.Sandbox, built on the first code_execution row
        self._sandbox_unavailable: str | None = None
        self._prefetched: Any = (
            None  # sandbox.Prefetched: the code runs of the chunk being scored, run together
        )
        self._prefetched_chunk: str | None = None

    def score_row(self, nodeid: str) -> RowResult:
        """Generate (if needed) and score one row for every column; scorer errors become row errors."""
        ref = self.rows[nodeid]
        case = ref.case
        where = self.rowplan.where(nodeid)
        evaluated = self.plan.evaluated_for(ref.benchmark)

        scoring = 0.0

        def record(models: dict[str, SideRecord] | None = None, **outcome: Any) -> RowRecord:
            # Known once the row's chunk was prompted (outputs_for); a row skipped before has none.
            given = self.producer.prompts.get(nodeid, {})
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
            if self.plan.base_variants():
                made["baselines"] = self.plan.compared_with()
            spent = self.ledger.costs.get(nodeid)
            if spent:
                # Scoring judges every column at once: its seconds are shared among them.
                made["cost"] = {c: {**cost, "scoring_s": scoring / len(spent)} for c, cost in spent.items()}
            return made

        try:
            out = self.producer.outputs_for(nodeid)
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
        if nodeid in self.producer.truncated:
            for side_record in models.values():
                side_record["prompt_truncated"] = self.producer.truncated[nodeid]
        for column, notes in self.producer.notes.get(nodeid, {}).items():
            if column in models:
                models[column]["notes"] = list(notes)
        try:
            uses = SCORERS[case.evaluation_type].uses.union(
                *(SCORERS[m.evaluation_type].uses for m in case.metrics)
            )
            resources = {name: self._resource(name, ref) for name in uses}
        except RowSkipped as exc:
            return RowResult(record=record(skipped=str(exc)), score=None, skipped=str(exc))
        except RowError as exc:
            error = f"{where}: {exc}"
            return RowResult(record=record(error=error), score=None, error=error)
        started = time.perf_counter()
        if "sandbox" in resources:
            resources["sandbox"] = self._chunk_runs(nodeid, resources["sandbox"])
        try:
            kind = case.evaluation_type
            own = {n: r for n, r in resources.items() if n in SCORERS[kind].uses}
            scores = self._scores(case, out, own)
            metrics: dict[str, dict[str, Score]] = {}
            for metric in case.metrics:
                kind = metric.evaluation_type
                metrics[kind] = self._metric_scores(case, metric, out, resources)
            scoring = time.perf_counter() - started
        except Exception as exc:  # a scorer bug or a custom scorer's error fails this row only
            raised = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            error = f"{where}: scorer '{kind}' raised {raised}"
            # What the model measured (the judge's raw outputs, say) stays in results.json: nothing is lost.
            for column, measurement in out.measures.items():
                models[column]["measurement"] = measurement
            return RowResult(record=record(models, error=error), score=None, error=error)
        for column, scored in scores.items():
            models[column]["score"] = scored.to_json()
            if metrics:
                models[column]["metrics"] = {
                    k: by_column[column].to_json() for k, by_column in metrics.items()
                }
        primary = scores.get(evaluated, scores[BASE])
        return RowResult(record=record(models, passed=primary.passed), score=primary)

    def _resource(self, name: str, ref: RowRef) -> Any:
        """What a scorer needs beside the texts (ScorerSpec.uses), built once per process or per script."""
        if name == "function":
            from pytest_llmeval.scorers import custom

            # Imported at collection already (errors are collection errors); cached per path and mtime.
            return custom.load_for_config(
                ref.case.evaluation_config, self.prompter.benchmarks[ref.benchmark["name"]].path.parent
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

        chunk = self.rowplan.chunk_key(nodeid)
        if chunk is None:
            return sandbox
        if self._prefetched_chunk != chunk:
            runs: list[tuple[str, str, Any]] = []
            for n in self.rowplan.chunk(nodeid):
                case = self.rows[n].case
                if case.evaluation_type != "code_execution":
                    continue
                try:
                    out = self.producer.outputs_for(n)
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
                self._embedder = Embedder.load(
                    device=resolve_device(spec.device, worker=spec.worker),
                    choice=self.options.embedding_model,
                    layer=self.options.embedding_layer,
                )
            except (EmbeddingModelError, ValueError) as exc:
                # Fail these rows (CI must not pass without evaluating them), but keep the others going.
                # ValueError: a layer the model does not have.
                said = (
                    str(exc) if isinstance(exc, EmbeddingModelError) else f"--llmeval-embedding-layer: {exc}"
                )
                self._embedder_error = said
                raise RowError(self._embedder_error) from None
        return self._embedder

    def warm_embeddings(self, nodeids: list[str]) -> None:
        """Embed a generated chunk's outputs and references in batches, so rows score from the cache."""
        # semantic compares sentence vectors, bertscore token vectors: each type warms what it reads.
        wanted: dict[str, set[str]] = {"semantic": set(), "bertscore": set()}
        for n in nodeids:
            case = self.rows[n].case
            for kind in (case.evaluation_type, *(m.evaluation_type for m in case.metrics)):
                if kind in wanted:
                    texts = [*case.references, *self.producer.outputs[n].texts.values()]
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
    def _metric_scores(
        case: Case, metric: Metric, out: RowOutputs, resources: dict[str, Any]
    ) -> dict[str, Score]:
        """Every column's score by one of the row's `metrics`, on the same text its own type scored (a
        sampled row's first sample, the one output it shows)."""
        scorer = SCORERS[metric.evaluation_type]
        assert scorer.score is not None  # benchmark.load_benchmark admits only METRIC_TYPES
        needed = {n: r for n, r in resources.items() if n in scorer.uses}
        return {
            c: scorer.score(text, case.expected, metric.evaluation_config, **needed)
            for c, text in out.texts.items()
        }

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
        return {c: scorer.score(text, case.expected, config, **resources) for c, text in out.texts.items()}
