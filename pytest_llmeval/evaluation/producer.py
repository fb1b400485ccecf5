"""One path from a chunk of rows to every column's outputs, over the backend protocol (backends/base.py):
generation, measurement (the options' log-likelihoods, a text's perplexity), the judge, fluency. Whatever
the source (weights here, a server, saved predictions), a chunk goes through the same steps: its rows are
grouped by what they need (backends.production), each group of columns is prompted once (Backend.prompt),
asked through the generation cache (backends.caching), and every failure becomes one row's error.

Generation unit: a *chunk*, up to `batch_size` consecutive rows of one benchmark file in collection order
(planning.RowPlan). When a row runs and its output is missing, its whole chunk is produced in one batched
call per column, so a row is generated in the same batch with or without -n, and results.json is the same.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_llmeval.backends import Capability, Source
from pytest_llmeval.backends.base import (
    Backend,
    BackendError,
    ColumnRequest,
    GenRequest,
    MeasureRequest,
    Prompted,
    Result,
    RowPrompt,
)
from pytest_llmeval.backends.saved import SavedBackend
from pytest_llmeval.benchmark import Case
from pytest_llmeval.cache import CacheStats
from pytest_llmeval.evaluation.ledger import Ledger
from pytest_llmeval.evaluation.outputs import RowError, RowOutputs, RowSkipped
from pytest_llmeval.evaluation.prompting import Prompter
from pytest_llmeval.models import ModelError
from pytest_llmeval.planning import RowPlan, RunPlan, completion_mode, sample_seed, sampling_of, stop_of
from pytest_llmeval.records import BASE, FluencyRecord
from pytest_llmeval.run_options import RunOptions
from pytest_llmeval.scorers import SCORERS

if TYPE_CHECKING:
    from pytest_llmeval.backends.caching import Cached
    from pytest_llmeval.backends.served import ServedLLM
    from pytest_llmeval.backends.weights import ModelShelf
    from pytest_llmeval.models import LLM


class Producer:
    """This process's backend and every output it produced: the texts and measurements of each row, the
    prompts given, the rows that could not be produced and why."""

    def __init__(
        self,
        options: RunOptions,
        plan: RunPlan,
        rowplan: RowPlan,
        prompter: Prompter,
        ledger: Ledger,
        notices: list[str],
    ) -> None:
        self.options = options
        self.plan = plan
        self.rowplan = rowplan
        self.rows = rowplan.rows  # node id -> row (the row plan's mapping, filled in place)
        self.prompter = prompter
        self.ledger = ledger
        self.notices = notices  # warnings for the plugin to show (once each)
        # Called with each generated chunk's rows that have outputs: the scorer embeds them in batches.
        self.warm: Callable[[list[str]], None] = lambda nodeids: None
        self.outputs: dict[str, RowOutputs] = {}
        self.row_errors: dict[str, str] = {}  # rows of a produced chunk that have no output
        self.truncated: dict[str, dict[str, Any]] = {}  # rows whose prompt was cut to fit
        # node id -> column -> what was done to its outputs on their way in (a served text cut to max_tokens)
        self.notes: dict[str, dict[str, list[str]]] = {}
        self.retries: list[dict[str, Any]] = []  # generation batches split after a failure
        # node id -> column -> the prompt it was given (the text; a served chat row's messages as JSON)
        self.prompts: dict[str, dict[str, str]] = {}
        self._backend: Backend | None = None
        self._cached: Cached | None = None
        self._shelf: ModelShelf | None = None

    # --- the backend: where the columns' outputs come from (backends/) ------------------------------------

    def backend(self) -> Backend:
        """This process's backend (base.Backend), made on first use: nothing loads until a row asks."""
        if self._backend is None:
            self._backend = self._make_backend()
        return self._backend

    def finish(self) -> None:
        """The end of this process: the backend keeps what the next run can reuse (Backend.keep)."""
        if self._backend is not None:
            self._backend.keep()

    def _make_backend(self) -> Backend:
        # The one place the source is decided; the plugin has refused --llmeval-predictions with a model or
        # an endpoint already.
        opts = self.options
        if opts.predictions is not None:
            return SavedBackend(
                opts.predictions, self.rowplan.rows, self.prompter.benchmarks, opts.max_new_tokens
            )
        columns = self.plan.columns()
        apart = opts.served_apart
        if opts.endpoint is not None:
            from pytest_llmeval.backends.served import ServedBackend

            urls = {c: apart.get(c, opts.endpoint) for c in columns} if apart else None
            return ServedBackend(opts, self.plan.roster, columns, urls)
        from pytest_llmeval.backends.local import LocalBackend

        local = [c for c in columns if c not in apart]
        backend = LocalBackend(opts, self.plan.roster, local, self.shelf())
        if not apart:
            return backend
        from pytest_llmeval.backends.mixed import MixedBackend
        from pytest_llmeval.backends.served import ServedBackend

        served = [c for c in columns if c in apart]
        return MixedBackend(backend, ServedBackend(opts, self.plan.roster, served, apart))

    def shelf(self) -> ModelShelf:
        """The models loaded here by name beside the columns (a judge, --llmeval-ppl-model), whatever the
        backend: backends.weights.ModelShelf."""
        if self._shelf is None:
            from pytest_llmeval.backends.weights import ModelShelf

            self._shelf = ModelShelf(self.options.spec)
        return self._shelf

    def cached(self) -> Cached:
        """The backend through the generation cache (backends.caching)."""
        if self._cached is None:
            from pytest_llmeval.backends.caching import Cached

            self._cached = Cached(
                self.backend(),
                self.options.cache_dir,
                context_overflow=self.options.context_overflow,
                notices=self.notices,
            )
        return self._cached

    @property
    def source(self) -> Source:
        """Where the columns' outputs come from (backends.Source)."""
        return self.backend().source

    def llm(self, *, adapter: bool | str) -> LLM | ServedLLM:
        """A generation handle with an adapter on (True: the first; a column: that one) or off; every
        adapter shares the one loaded model. Under --llmeval-endpoint, a handle on the served model."""
        if isinstance(adapter, str):
            column = adapter
        else:
            first = next(iter([m.side for m in self.plan.roster.adapters]), None)
            column = first if adapter and first is not None else BASE
        handle: LLM | ServedLLM = self.backend().handle(column)
        return handle

    def llm_models(self) -> dict[str, LLM | ServedLLM]:
        """A handle per column (the `llm_models` fixture): the base, each adapter, each full model. Full
        models are loaded here and kept for the fixture's users (hand-written tests call them any time)."""
        backend = self.backend()
        return {BASE: backend.handle(BASE)} | {
            m.side: backend.handle(m.side) for m in self.plan.roster.members
        }

    # --- producing a chunk's outputs: one path over the backend protocol ---------------------------------

    def outputs_for(self, nodeid: str) -> RowOutputs:
        """The row's generated texts (or measurements), computing its whole chunk on first need."""
        kind = self.rows[nodeid].case.evaluation_type
        decided = self.rowplan.sequential_skip(nodeid)
        if decided is not None:  # its benchmark's gates need no more rows
            raise RowSkipped(decided)
        cannot = self.backend().unavailable(SCORERS[kind].measure, kind)
        if cannot is not None:
            raise RowSkipped(cannot)
        if nodeid in self.row_errors:
            raise RowError(self.row_errors[nodeid])
        if nodeid not in self.outputs:
            backend = self.backend()
            stop = self.ledger.exhausted() if backend.metered else None
            if stop is not None:  # nothing more is sent to a model; the rows already scored are kept
                raise RowSkipped(stop)
            chunk = [
                n for n in self.rowplan.chunk(nodeid) if n not in self.outputs and n not in self.row_errors
            ]
            by_how: dict[Capability | None, list[str]] = {}
            # Text rows first, then judged ones: the order a chunk's batch has always had.
            order = {None: 0, "judge": 1}
            for n in sorted(chunk, key=lambda n: order.get(self._measure_of(n), 2)):
                by_how.setdefault(backend.production(self._measure_of(n)), []).append(n)
            generated = by_how.get("generate", [])
            if generated:
                self._generate(generated)
                # Rows whose generation failed (row_errors) have no outputs to embed or judge.
                self.warm([n for n in generated if n in self.outputs])
                judged = [n for n in generated if n in self.outputs and self._measure_of(n) == "judge"]
                if judged:
                    self._judge(judged)
            for measured in ("rolling", "loglikelihood"):
                if by_how.get(measured):
                    self._measure(measured, by_how[measured])
        if nodeid in self.row_errors:
            raise RowError(self.row_errors[nodeid])
        return self.outputs[nodeid]

    def _measure_of(self, nodeid: str) -> str | None:
        """What a row's scorer reads beside text (scorers.ScorerSpec.measure): how it is produced."""
        return SCORERS[self.rows[nodeid].case.evaluation_type].measure

    def _row_prompt(self, nodeid: str, column: str, room: int | None) -> RowPrompt:
        """What the prompt builder decided for a row and a column (backends.base.RowPrompt)."""
        ref = self.rows[nodeid]
        spec = self.prompter.prompt_spec(nodeid, column)
        examples = self.prompter.examples(ref.benchmark["name"], ref.case, spec)
        return RowPrompt(
            node=nodeid,
            where=self.rowplan.where(nodeid),
            case=ref.case,
            spec=spec,
            examples=examples,
            room=room,
        )

    def _prompted(
        self, group: list[str], nodeids: list[str], room: Callable[[Case], int | None]
    ) -> dict[str, Prompted]:
        """Each row's prompt for one group of columns (backends.base.Backend.prompt); a row that cannot be
        given one becomes an error of its own, and a prompt cut to fit is noted (truncated). Each column's
        prompt is kept for its record."""
        asked = [self._row_prompt(n, group[0], room(self.rows[n].case)) for n in nodeids]
        given = self.backend().prompt(group, asked)
        fitted: dict[str, Prompted] = {}
        for n in nodeids:
            prompted = given[n]
            if isinstance(prompted, str):
                self.row_errors.setdefault(n, prompted)
                continue
            if prompted.truncated is not None:
                self.truncated[n] = prompted.truncated
            if prompted.shown is not None:
                for column in group:
                    self.prompts.setdefault(n, {})[column] = prompted.shown
            fitted[n] = prompted
        return fitted

    def _fail(self, nodeids: Sequence[str], why: str) -> None:
        """Rows that cannot be produced, each with why (the first reason found stays)."""
        for n in nodeids:
            self.row_errors.setdefault(n, f"{self.rowplan.where(n)}: {why}")

    def _generate(self, nodeids: list[str]) -> None:
        """Generate a chunk's rows for every column, group by group (Backend.groups). A row that cannot be
        prompted (--llmeval-context-overflow error), or on which generation fails in any column, becomes an
        error of its own (row_errors); every other row of the chunk is generated and scored as usual.
        A group the backend generates together (--llmeval-mixed-batches; base.MixesColumns) is one batch of
        every column's rows, with the same outputs."""
        backend = self.backend()
        texts: dict[tuple[str, str], list[str]] = {}  # (node id, column) -> its outputs, one per sample
        listed: set[str] = set()  # rows whose outputs are samples (pass@k), scored as such
        ok = list(nodeids)
        for group in backend.groups(self.plan.columns(), self.prompter.same_prompt):
            if not ok:
                break
            try:
                fitted = self._prompted(group, ok, self._limit)
            except BackendError as exc:
                self._fail(ok, str(exc))
                break
            ok = [n for n in ok if n in fitted]
            if self.cached().mixes(group):
                self._generate_mixed(group, ok, fitted, listed, texts)
                ok = [n for n in ok if n not in self.row_errors]
                continue
            for column in group:
                requests = self._requests(column, ok, fitted, listed)
                started = time.perf_counter()
                results = self._isolated(column, requests)
                tokens = self._kept(column, requests, results, texts)
                if backend.metered:
                    seconds = time.perf_counter() - started
                    self.ledger.spend(column, ok, seconds, tokens, backend.price(column))
                ok = [n for n in ok if n not in self.row_errors]
        self._keep_outputs(ok, texts, listed)

    def _generate_mixed(
        self,
        group: list[str],
        ok: list[str],
        fitted: dict[str, Prompted],
        listed: set[str],
        texts: dict[tuple[str, str], list[str]],
    ) -> None:
        """Every column of a group in one batch (Cached.generate_columns): each column's outputs kept and
        its spending recorded as if it had been generated alone."""
        backend = self.backend()
        tagged = [(column, r) for column in group for r in self._requests(column, ok, fitted, listed)]
        started = time.perf_counter()
        results = self._isolated_columns(group, tagged)
        spent: dict[str, dict[str, tuple[int | None, int | None]]] = {}
        for column in group:
            mine = [(r, result) for (c, r), result in zip(tagged, results, strict=True) if c == column]
            spent[column] = self._kept(column, [r for r, _ in mine], [result for _, result in mine], texts)
        if not backend.metered:
            return
        seconds = time.perf_counter() - started
        # One batch made every column's outputs, so its seconds are split across the columns in proportion
        # to the tokens each generated (decoding steps are most of the time); equally when none generated
        # any (every output from the cache).
        made = {c: sum(t[1] or 0 for t in spent[c].values()) for c in group}
        total = sum(made.values())
        for column in group:
            share = made[column] / total if total else 1 / len(group)
            self.ledger.spend(column, ok, seconds * share, spent[column], backend.price(column))

    def _kept(
        self,
        column: str,
        requests: Sequence[GenRequest],
        results: Sequence[Result],
        texts: dict[tuple[str, str], list[str]],
    ) -> dict[str, tuple[int | None, int | None]]:
        """A column's outputs into `texts` (a failed request fails its row), their notes into `notes`; the
        (prompt, generated) tokens each row spent (None where not known: a failed request), a row served
        wholly from the cache absent."""
        tokens: dict[str, tuple[int | None, int | None]] = {}
        for request, result in zip(requests, results, strict=True):
            if not result.cached:
                spent = result.tokens if result.tokens is not None else (None, None)
                tokens[request.node] = _summed(tokens.get(request.node, (0, 0)), spent)
            if result.error is not None:
                self._fail([request.node], result.error)
                continue
            texts.setdefault((request.node, column), []).append(str(result.value))
            if result.note is not None:
                self.notes.setdefault(request.node, {}).setdefault(column, []).append(result.note)
        return tokens

    def _requests(
        self, column: str, nodeids: list[str], fitted: dict[str, Prompted], listed: set[str]
    ) -> list[GenRequest]:
        """A column's requests for these rows: a greedy row's one output, a sampled row's n (each seeded by
        its row and index, the same on every run, worker and model); `listed` gets the rows whose outputs
        are samples (asked for several, or saved as a list)."""
        requests: list[GenRequest] = []
        for n in nodeids:
            case, prompted = self.rows[n].case, fitted[n]
            samples, temperature = sampling_of(case)
            if prompted.samples is not None:
                samples = prompted.samples[column]
            if prompted.samples is not None or samples > 1:
                listed.add(n)
            stop = stop_of(case)
            for i in range(samples):
                sampled = None if temperature is None else (temperature, sample_seed(case.id, i))
                requests.append(GenRequest(n, prompted, self._limit(case), i, sampled, stop))
        return requests

    def _limit(self, case: Case) -> int:
        """A row's output limit: its evaluation_config's max_new_tokens, else --llmeval-max-new-tokens."""
        return int(case.evaluation_config.get("max_new_tokens", self.options.max_new_tokens))

    def _isolated(self, column: str, requests: list[GenRequest]) -> list[Result]:
        """One column's outputs of `requests`, in one batch per temperature (through the generation cache);
        a batch that raises is split in halves until the failing row is alone, and that row becomes an
        error. A backend that cannot produce anything (BackendError) fails every row asked."""
        cached = self.cached()
        return self._split_on_failure(
            requests,
            lambda these: cached.generate(column, [requests[i] for i in these]),
            side=lambda these: column,
            alone=lambda these, why: dict.fromkeys(
                these, Result(error=f"generation failed ({column}): {why}")
            ),
        )

    def _isolated_columns(self, group: list[str], tagged: list[ColumnRequest]) -> list[Result]:
        """Every column's outputs of `tagged` in one mixed batch per temperature (Cached.generate_columns);
        a batch that raises is split in halves of whole rows (each row's every column and sample together)
        until the failing row is alone, which is then generated column by column as without mixed batches
        (_isolated), so that its error names the column it failed in."""
        cached = self.cached()

        def alone(these: list[int], why: str) -> dict[int, Result]:
            # One row: column by column in the group's order; once a column fails, the row is an error and
            # the later columns are not asked (as without mixed batches).
            results: dict[int, Result] = {}
            failed: Result | None = None
            for column in group:
                mine = [i for i in these if tagged[i][0] == column]
                if failed is not None:
                    results.update(dict.fromkeys(mine, failed))
                    continue
                found = self._isolated(column, [tagged[i][1] for i in mine])
                results.update(zip(mine, found, strict=True))
                failed = next((r for r in found if r.error is not None), None)
            return results

        return self._split_on_failure(
            [request for _, request in tagged],
            lambda these: cached.generate_columns([tagged[i] for i in these]),
            side=lambda these: "+".join(dict.fromkeys(tagged[i][0] for i in these)),
            alone=alone,
        )

    def _split_on_failure(
        self,
        requests: Sequence[GenRequest],
        produce: Callable[[list[int]], list[Result]],
        *,
        side: Callable[[list[int]], str],
        alone: Callable[[list[int], str], dict[int, Result]],
    ) -> list[Result]:
        """`requests` produced by `produce` (given their indices) in one batch per temperature, greedy ones
        first (a batch samples at one temperature). A batch that raises is recorded as a retry under
        `side` and split in halves of whole rows (a sampled row's samples stay together) until the failing
        row is alone, which `alone` answers given why. BackendError fails every request asked."""
        results: dict[int, Result] = {}

        def isolated(these: list[int]) -> None:
            if not these:
                return
            try:
                found = produce(these)
            except BackendError as exc:
                results.update({i: Result(error=str(exc)) for i in these})
                return
            except Exception as exc:  # out of memory, a tokenizer or model error on one input; not Ctrl-C
                why = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[0]
                rows = list(dict.fromkeys(requests[i].node for i in these))
                if len(rows) == 1:
                    results.update(alone(these, why))
                    return
                self.retries.append({"side": side(these), "rows": len(rows), "error": why})
                first = set(rows[: len(rows) // 2])
                isolated([i for i in these if requests[i].node in first])
                isolated([i for i in these if requests[i].node not in first])
                return
            results.update(zip(these, found, strict=True))

        by_temperature: dict[float | None, list[int]] = {}
        for i, request in enumerate(requests):
            by_temperature.setdefault(None if request.sampled is None else request.sampled[0], []).append(i)
        for these in by_temperature.values():
            isolated(these)
        return [results[i] for i in range(len(requests))]

    def _keep_outputs(self, ok: list[str], texts: dict[tuple[str, str], list[str]], listed: set[str]) -> None:
        """Every column's outputs of the rows produced in full: texts (whitespace stripped, but for a
        completion-style row, whose output continues its prompt, and saved text, scored as saved), a
        sampled row's samples, fluency."""
        shapes = self.backend().shapes_output
        outputs: dict[str, RowOutputs] = {}
        for n in ok:
            keep = not shapes or completion_mode(self.rows[n].case)
            columns = [c for c in self.plan.columns() if (n, c) in texts]
            samples = {c: [t if keep else t.strip() for t in texts[(n, c)]] for c in columns}
            outputs[n] = self._answers(
                RowOutputs(
                    texts={c: samples[c][0] for c in columns},
                    samples=samples if n in listed else None,
                ),
                self.rows[n].case,
            )
        fluency: list[dict[str, FluencyRecord] | None] = [None] * len(ok)
        if self.options.fluency and ok:
            try:
                fluency = self._fluency(
                    [self.rows[n].case.expected_output for n in ok], [outputs[n].texts for n in ok]
                )
            except (BackendError, ModelError, ValueError) as exc:
                # The scorer cannot load, or its window does not fit it: asked for, fluency is part of the
                # row, so the chunk's rows are errors that say why rather than rows scored without it.
                window = self.options.ppl_max_length is not None or self.options.ppl_stride is not None
                hint = (
                    " (--llmeval-ppl-max-length, --llmeval-ppl-stride)"
                    if isinstance(exc, ValueError) and window
                    else ""
                )
                self._fail(ok, f"fluency: {exc}{hint}")
                return
        for n, f in zip(ok, fluency, strict=True):
            self.outputs[n] = outputs[n] if f is None else replace(outputs[n], fluency=f)

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

    def _fluency(
        self, references: list[str], outputs: list[dict[str, str]]
    ) -> list[dict[str, FluencyRecord] | None]:
        """Per row and column: the perplexity of its output and of the reference.

        The QA fine-tuning document's fix: each model's own generated text, measured by that same model
        (Backend.fluency). --llmeval-ppl-model measures every column with one external model instead, loaded
        on the shelf whatever the backend: so saved predictions (which load no model) are scored too, the
        chest X-ray document's workflow.
        """
        from pytest_llmeval.measures import fluency

        opts = self.options
        external = opts.ppl_model
        per_column: dict[str, list[FluencyRecord]] = {}
        for column in outputs[0]:
            texts = [row.get(column) for row in outputs]
            if external is not None:
                per_column[column] = fluency(
                    self.shelf().named(external),
                    references,
                    texts,
                    column=None,
                    scorer_name=external,
                    external=True,
                    max_length=opts.ppl_max_length,
                    stride=opts.ppl_stride,
                    batch_size=opts.ppl_batch_size,
                )
            else:
                per_column[column] = self.backend().fluency(column, references, texts)
        return [{c: measured[i] for c, measured in per_column.items()} for i in range(len(references))]

    def _measure(self, how: str, nodeids: list[str]) -> None:
        """A measured chunk (Backend.loglikelihood: multiple choice; loglikelihood_rolling: perplexity) for
        every column, one call per group of columns; a row is kept when every column measured it."""
        backend = self.backend()
        cached = self.cached()
        found: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in nodeids}
        ok = list(nodeids)
        for group in backend.groups(self.plan.columns(), self.prompter.same_prompt):
            if not ok:
                break
            started = time.perf_counter()
            try:
                if how == "loglikelihood":  # the options follow the row's prompt, fitted with room for them
                    fitted = self._prompted(group, ok, lambda case: None)
                    ok = [n for n in ok if n in fitted]
                    requests = [MeasureRequest(self._row_prompt(n, group[0], None), fitted[n]) for n in ok]
                    measured = cached.loglikelihood(group, requests)
                else:
                    requests = [MeasureRequest(self._row_prompt(n, group[0], 0)) for n in ok]
                    measured = cached.loglikelihood_rolling(group, requests)
            except BackendError as exc:
                self._fail(ok, str(exc))
                return
            for column in group:  # tokens read are not counted for measured rows: (None, None)
                if backend.metered:
                    seconds = (time.perf_counter() - started) / len(group)
                    self.ledger.spend(column, ok, seconds, dict.fromkeys(ok, (None, None)))
            for column, results in measured.items():
                for request, result in zip(requests, results, strict=True):
                    if result.error is None:
                        found[request.row.node][column] = result.value
                    else:
                        self._fail([request.row.node], result.error)
            ok = [n for n in ok if n not in self.row_errors]
        for n in ok:
            self.outputs[n] = RowOutputs(measures=found[n])

    def _judge(self, nodeids: list[str]) -> None:
        """llm_judge rows: the judge grades every column's output, `runs` sampled runs each, batched."""
        cases = [self.rows[n].case for n in nodeids]
        outputs = [self.outputs[n].texts for n in nodeids]
        graded, errors = self.backend().judge(cases, outputs)
        for i, (n, by_column) in enumerate(zip(nodeids, graded, strict=True)):
            if by_column is None:
                self.row_errors[n] = f"{self.rowplan.where(n)}: {errors[i]}"
                continue
            self.outputs[n] = replace(self.outputs[n], measures=by_column)

    def cache_info(self) -> dict[str, Any]:
        """results.json's inference_config.cache: where it is, and rows served or generated per side."""
        if self.options.cache_dir is None:
            return {"enabled": False}
        stats = self._cached.stats() if self._cached is not None else CacheStats()
        return {"enabled": True, "dir": str(self.options.cache_dir), **stats.to_json()}


def _summed(
    a: tuple[int | None, int | None], b: tuple[int | None, int | None]
) -> tuple[int | None, int | None]:
    """(prompt, generated) tokens added up; None where either side does not say (a server that did not)."""
    return (
        None if a[0] is None or b[0] is None else a[0] + b[0],
        None if a[1] is None or b[1] is None else a[1] + b[1],
    )
