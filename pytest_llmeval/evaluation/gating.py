"""A gate's rows gathered for the pure verdicts of gates.py: the file gates (size, difficulty mix, edge
cases, held out) on the benchmark as collected, the comparison gates on its scored rows (waiting for rows
other workers score: RowStore.records_for), adjusted together over the run's family of comparisons, and
the training gates on each column's training log."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

from pytest_llmeval import gates, held_out
from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.evaluation.prompting import Prompter
from pytest_llmeval.history import Baselines, Identity
from pytest_llmeval.planning import RowPlan, RunPlan
from pytest_llmeval.records import ADAPTER, BASE, RowRecord, as_metric, evaluated_value, partner, score
from pytest_llmeval.results import comparison_blocks, previous_comparison
from pytest_llmeval.roster import Member
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.run_options import RunOptions, TrainingEvidence
from pytest_llmeval.training import training_entry


def _evidence(records: Sequence[RowRecord], scored: int) -> gates.Evidence:
    """What a comparison gate of these rows has to decide on (`scored`: the pairs it compares)."""
    return gates.Evidence(
        rows=len(records),
        scored=scored,
        errored=sum(1 for r in records if r["error"] is not None),
        skipped=sum(1 for r in records if r["skipped"] is not None),
    )


class GateRunner:
    """Every gate's verdict in this process, with the comparison it decided on."""

    def __init__(
        self,
        options: RunOptions,
        plan: RunPlan,
        rowplan: RowPlan,
        prompter: Prompter,
        store: RowStore,
        baselines: Baselines,
        identity: Callable[[], Identity],
        training_logs: dict[str, TrainingEvidence],
    ) -> None:
        self.options = options
        self.plan = plan
        self.rowplan = rowplan
        self.prompter = prompter
        self.store = store
        self.baselines = baselines  # earlier runs, for no_regression
        self.identity = identity  # who this run evaluates (provenance): its earlier runs are its baseline
        # column -> its training log (hooks.configure._training_logs); their results.json entries, worked
        # out once.
        self.training_logs = training_logs
        self._family: list[dict[str, Any]] | None = None  # the comparisons that decide gates (gate_family())
        self._training: list[held_out.TrainingRow] | None = None
        self._training_meta: dict[str, dict[str, Any]] = {}

    def gate_family(self) -> list[dict[str, Any]]:
        """The comparisons whose p-values decide gates (comparisons.GATES_FAMILY), adjusted together.

        Needs the rows of every benchmark some gated column is in-domain on: under xdist they may still be
        scored on other workers, and RowStore.records_for waits for them as for a gate's own rows."""
        if self._family is None:
            from pytest_llmeval import comparisons

            names = sorted(
                {
                    r.benchmark["name"]
                    for r in self.rowplan.rows.values()
                    if "in" in (r.benchmark.get("domains") or {}).values()
                }
            )
            records, _ = self.store.records_for([n for name in names for n in self.rowplan.rows_of(name)])
            by_benchmark: dict[str, list[Any]] = {}
            for record in records:
                by_benchmark.setdefault(record["benchmark"]["name"], []).append(record)
            planned = [
                p
                for p in comparisons.plan(
                    by_benchmark, self.plan.kinds(), self.options.gate_options.gate_metrics
                )
                if p.family == comparisons.GATES_FAMILY
            ]
            self._family = comparisons.compare(
                by_benchmark, planned, alpha=self.options.gate_options.alpha, adjust=self.options.adjust
            )
        return self._family

    def _adjusted(
        self, column: str, against: str, benchmark: str, metric: str | None = None
    ) -> gates.Adjusted | None:
        """The family-adjusted p-value of `column` against its base (records.partner) on `benchmark`,
        when in the family."""
        from pytest_llmeval.comparisons import find

        try:
            entry = find(self.gate_family(), column, against, benchmark, metric)
        except KeyError:
            return None
        if entry["p_value_adjusted"] is None:
            return None
        return gates.Adjusted(
            float(entry["p_value_adjusted"]), self.options.adjust, int(entry["family_size"])
        )

    def evaluate_gate(
        self, benchmark: str, name: str, column: str | None = None, metric: str | None = None
    ) -> tuple[gates.Verdict, dict[str, Any] | None]:
        """One gate's verdict for one benchmark file, and the results.json blocks of the comparison it
        decided on (`statistics` and `significance_test`, or `comparison_with_previous`), if any.

        `column`: the column a model gate compares with the base (None: the first adapter); `metric`: a
        model gate judges that evaluation type's scores instead of the rows' own (--llmeval-gate-metric)."""
        if metric is not None:
            verdict, blocks = self._model_gate(benchmark, name, column, metric)
            return replace(verdict, message=f"on {metric} scores: {verdict.message}"), blocks
        return self._model_gate(benchmark, name, column, None)

    def _model_gate(
        self, benchmark: str, name: str, column: str | None, metric: str | None
    ) -> tuple[gates.Verdict, dict[str, Any] | None]:
        opts = self.options.gate_options
        bench = self.prompter.benchmarks[benchmark]
        if name == "size":
            return gates.size(len(bench.cases), minimum=opts.min_rows), None
        if name == "difficulty_mix":
            counts: dict[str, int] = {}
            for case in bench.cases:
                counts[case.difficulty] = counts.get(case.difficulty, 0) + 1
            return gates.difficulty_mix(counts, easy_base=self._easy_base(benchmark)), None
        if name == "edge_cases":
            return gates.edge_cases(bench.cases, minimum=opts.min_edge), None
        if name == "held_out":
            # A few-shot file's examples are put into prompts too: they must be held out as well (the
            # benchmark's own rows, when they are the pool, are checked as rows).
            prompt = self.prompter.benchmark_prompts.get(benchmark)
            pool = () if prompt is None or prompt.pool is None else prompt.pool
            return held_out.held_out(bench.cases, self.training_rows(), examples=pool), None
        # The comparison gates need the scored rows.
        wanted = self.rowplan.rows_of(benchmark)
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
        if name == "no_regression":
            info = self.rowplan.rows[wanted[0]].benchmark
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
            column = next((m.side for m in self.plan.roster.adapters), ADAPTER)
        decision = None
        if benchmark in self.rowplan.sequential_orders and column in self.plan.gated_columns():
            out = self.rowplan.sequential_outcome(benchmark, {r["nodeid"]: r for r in records})
            # Rows another worker computed past the stop count for nothing (results.json drops them too).
            records = [r for r in records if not out.stopped(r["nodeid"])]
            found = out.decisions.get(column)
            decision = found if found is not None and found.decided is not None else None
        if metric is not None:
            # The sequential test decided on the rows' own scores, not on this metric's.
            decision = None
            # The same rows, re-scored by the metric: RowRecords still (records.as_metric keeps the shape).
            records = cast(list[RowRecord], [m for r in records if (m := as_metric(r, metric)) is not None])
            if not records:
                return gates.Verdict(name, "skip", f"no row of {benchmark} is scored by {metric}", {}), None
        against = partner(records[0], column) if records else BASE
        adapter, base, bounded, measure = comparison_values(records, column, against)
        who = "adapter" if column == ADAPTER else column
        if column not in self.plan.kinds():
            cmp = None  # no such column in this run: nothing to compare (a skip)
        else:
            lacking = gates.without_evidence(
                name, _evidence(records, len(adapter)), minimum=opts.min_rows, who=who, against=against
            )
            if lacking is not None and decision is None:
                return lacking, None
            # Imported where a comparison is made: scipy costs 0.6 s of a base-only run that makes none.
            from pytest_llmeval.stats import compare_paired

            cmp = compare_paired(adapter, base, alpha=opts.alpha, bounded=bounded) if adapter else None
        blocks = None if cmp is None else comparison_blocks(cmp, measure)
        if name == "better_than_base":
            adjusted = (
                None
                if cmp is None or self.options.adjust == "none"
                else self._adjusted(column, against, benchmark, metric)
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
                verdict = gates.sequential(
                    name, decision, len(self.rowplan.sequential_orders[benchmark]), who=who
                )
            return self._explain_no_effect(verdict, records, column), blocks
        verdict = gates.no_degradation(
            cmp,
            warn_drop=opts.criteria.warn_drop,
            fail_drop=opts.fail_drop,
            problem_drop=opts.criteria.problem_drop,
            who=who,
        )
        if decision is not None:
            verdict = gates.sequential(
                name, decision, len(self.rowplan.sequential_orders[benchmark]), who=who
            )
        if opts.slice_keys and cmp is not None:
            verdict = self._slice_gate(verdict, records, column)
        return self._explain_no_effect(verdict, records, column), blocks

    def _easy_base(self, benchmark: str) -> tuple[int, int] | None:
        """(right, scored) of the base model over the benchmark's easy rows that ran, for difficulty_mix's
        check of the LocoLLM standard's "base model should get ~50%+ of these right"; None when none ran.
        Waits for rows other workers score, as the comparison gates do."""
        wanted = self.rowplan.rows_of(benchmark)
        if not any(self.rowplan.rows[n].case.difficulty == "easy" for n in wanted):
            return None
        records, _ = self.store.records_for(wanted)
        if benchmark in self.rowplan.sequential_orders:
            # Rows another worker computed past a sequential stop count for nothing, as in results.json.
            out = self.rowplan.sequential_outcome(benchmark, {r["nodeid"]: r for r in records})
            records = [r for r in records if not out.stopped(r["nodeid"])]
        scores = [
            found for r in records if r["difficulty"] == "easy" and (found := score(r, BASE)) is not None
        ]
        if not scores:
            return None
        return sum(1 for found in scores if found["passed"]), len(scores)

    def _slice_gate(self, overall: gates.Verdict, records: Sequence[RowRecord], column: str) -> gates.Verdict:
        """--llmeval-slice-gate: no_degradation of each slice of the keys given, on the slice's own rows; a
        slice fails when its drop passes the fail threshold and its paired test, Holm-adjusted over every
        slice judged, is significant (a 3-row slice dropping by chance fails nothing); the gate is the
        worst of the whole benchmark's verdict and the slices'."""
        from pytest_llmeval.formatting import p_value
        from pytest_llmeval.slices import slice_comparison, slice_rows
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

    def run_gates(self) -> list[tuple[Member, str]]:
        """(column, gate) of every run gate item (gates.RUN_GATES) the criteria require: each gated column's
        out_of_domain_required under --llmeval-criteria locollm, in the roster's order."""
        if not self.options.gate_options.criteria.out_of_domain_required:
            return []
        return [(member, "out_of_domain_required") for member in self.plan.roster.gated]

    def run_verdict(self, member: Member, gate: str) -> gates.Verdict:
        """A run gate's verdict over the benchmarks whose rows this run collected (results.json gives the
        same verdict over the rows that ran: gates.criteria_entry)."""
        if gate != "out_of_domain_required":
            raise ValueError(f"unknown run gate {gate!r} (known: {', '.join(gates.RUN_GATES)})")
        infos = [ref.benchmark for ref in self.rowplan.rows.values()]
        return gates.out_of_domain_required(gates.run_domains(infos, member.side), who=member.name)

    def training_rows(self) -> list[held_out.TrainingRow]:
        """The adapter's training data (GateOptions.train_data), read once for every held_out gate."""
        if self._training is None:
            path = self.options.gate_options.train_data
            self._training = [] if path is None else held_out.load_training_data(path)
        return self._training

    def training_gates(self) -> list[tuple[Member, str]]:
        """(column, gate) of every training gate item: each gated column with a training log, in the
        roster's order, unless --llmeval-training-gates=off."""
        if self.options.gate_options.training_gates == "off":
            return []
        return [
            (member, gate)
            for member in self.plan.roster.gated
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
        """A column's results.json `training` (training.training_entry); None without a training log. The
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
