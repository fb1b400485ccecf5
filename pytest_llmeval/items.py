"""Collection nodes: a benchmark file (pytest.File) and one test item per row (pytest.Item).

Shaped after pytest's non-python example: collect() yields items with keyword-only data, runtest() raises
a domain exception, repr_failure() turns it into a short report, reportinfo() names the file and line.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.benchmark import BenchmarkError, Case
from pytest_llmeval.evaluation.outputs import RowError, RowResult
from pytest_llmeval.evaluator import Evaluator
from pytest_llmeval.formatting import shown
from pytest_llmeval.gates import Verdict, gate_names, in_domain
from pytest_llmeval.models import ModelError
from pytest_llmeval.planning import GATE_PREFIX
from pytest_llmeval.recorder import Recorder
from pytest_llmeval.records import BASE, BenchmarkInfo, GateRecord, RowRecord, gate_record, partner, score
from pytest_llmeval.roster import Member
from pytest_llmeval.scorers import SCORERS, custom, read_benchmark

# The evaluator of this process (every process), and the recorder (the controller only).
EVALUATOR_KEY = pytest.StashKey[Evaluator]()
RECORDER_KEY = pytest.StashKey[Recorder]()


class RowFailed(Exception):
    """The evaluated model's score is below the row's threshold."""

    def __init__(self, result: RowResult) -> None:
        self.result = result
        super().__init__(result.record["id"])


class GateFailed(Exception):
    """A gate's verdict is "fail"."""


class LLMEvalWarning(UserWarning):
    """Something about the evaluation the user should know (basic sandbox isolation, say)."""


class LLMEvalGateWarning(LLMEvalWarning):
    """A gate passed with a warning (a drop between the warn and fail thresholds, an odd difficulty mix)."""


class BenchmarkFile(pytest.File):
    """A JSONL benchmark: each valid row becomes a CaseItem, then one GateItem per gate of the file."""

    @property
    def benchmark(self) -> str:
        """The benchmark's name in reports and results.json: its path from the rootdir (else absolute).

        Not the node id: pytest gives files outside the rootdir an empty node id part.
        """
        path = self.path.resolve()
        root = self.config.rootpath.resolve()
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    def collect(self) -> Iterator[pytest.Item]:
        try:
            benchmark = read_benchmark(self.path)
        except BenchmarkError as exc:
            # Name the file relative to the rootdir, as the user typed it, with the line of every problem.
            rel = self.benchmark
            raise self.CollectError(
                "\n".join(f"{rel}:{line}: {reason}" for line, reason in exc.problems)
            ) from None
        except OSError as exc:
            raise self.CollectError(f"{self.benchmark}: cannot read ({exc})") from None
        # Custom rows import their scorer's script now: a script that cannot be imported is a collection
        # error at the row's line, not 60 identical row failures later.
        problems = []
        for case in benchmark.cases:
            if case.evaluation_type == "custom":
                try:
                    custom.load_for_config(case.evaluation_config, self.path.parent)
                except ValueError as exc:
                    problems.append(f"{self.benchmark}:{case.line}: {exc}")
        run = self.config.stash[EVALUATOR_KEY]
        # The prompt's sidecar, few-shot file and templates: one that does not render fails this file.
        problems += [
            f"{self.benchmark}:{line}: {why}" for line, why in run.read_prompts(self.benchmark, benchmark)
        ]
        if problems:
            raise self.CollectError("\n".join(problems))
        run.benchmarks[self.benchmark] = benchmark
        domains = run.domains_of(self.benchmark, self.config.rootpath)
        # What collection knows of this file travels with every row and gate record.
        info: BenchmarkInfo = {
            "name": self.benchmark,
            "sha256": benchmark.sha256,
            "domain": None,
            "n_rows": len(benchmark.cases),
        }
        if domains:
            info["domains"] = domains
            info["domain"] = domains.get(run.evaluated_for(info))
        for case in benchmark.cases:
            yield CaseItem.from_parent(self, name=case.id, case=case, info=info)
        # A model gate per gated column (better_than_base in its domain, no_degradation elsewhere), named
        # `gate::<gate>[<column>]` when the run has several columns; then the benchmark's own gates.
        several = run.roster.several
        model_gates: list[tuple[str | None, bool]] = [(c, d == "in") for c, d in domains.items()]
        if not model_gates:
            # Nothing to compare (the base alone): the gate a file would get, which skips and says why.
            opts = run.options.gate_options
            model_gates = [(None, in_domain(self.benchmark, None, opts.domain_globs, self.config.rootpath))]
        for column, inside in model_gates:
            name = gate_names(in_domain=inside, has_previous=False)[0]
            label = (
                f"{GATE_PREFIX}{name}[{column}]" if several and column is not None else f"{GATE_PREFIX}{name}"
            )
            yield GateItem.from_parent(self, name=label, gate=name, info=info, column=column)
            # --llmeval-gate-metric: the same gate on each named metric's scores, `[rouge]` or
            # `[date-iso:rouge]` (a metric no row of the file has skips, saying so).
            for metric in run.options.gate_options.gate_metrics if column is not None else ():
                which = f"{column}:{metric}" if several else metric
                yield GateItem.from_parent(
                    self,
                    name=f"{GATE_PREFIX}{name}[{which}]",
                    gate=name,
                    info=info,
                    column=column,
                    metric=metric,
                )
        for name in gate_names(in_domain=False, has_previous=run.baselines.available)[1:]:
            yield GateItem.from_parent(self, name=f"{GATE_PREFIX}{name}", gate=name, info=info)


_MARKS_KEY = pytest.StashKey[dict[str, pytest.MarkDecorator]]()


def _mark(config: pytest.Config, name: str) -> pytest.MarkDecorator:
    """`pytest.mark.<name>`, made once per session: every row carries two, and pytest makes (and checks
    against the registered markers) a new one for each add_marker(name)."""
    made = config.stash.setdefault(_MARKS_KEY, {})
    if name not in made:
        made[name] = getattr(pytest.mark, name)
    return made[name]


class BenchmarkItem(pytest.Item):
    """What rows and gates share: the benchmark file they belong to, as collection knew it."""

    def __init__(self, *, info: BenchmarkInfo, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.info = info

    @property
    def benchmark(self) -> str:
        return self.info["name"]


class CaseItem(BenchmarkItem):
    """One benchmark row: generated in its chunk's batch, scored, passed when it reaches the threshold."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.llmeval_record: RowRecord | None = None
        # `-m hard`, `-m exact_match`: markers are registered in hooks.configure.pytest_configure.
        self.add_marker(_mark(self.config, case.difficulty))
        self.add_marker(_mark(self.config, case.evaluation_type))
        # Tags are free text, so they are keywords (`-k edge`) rather than markers that need registering.
        for tag in case.tags:
            self.extra_keyword_matches.add(tag)

    def runtest(self) -> None:
        run = self.config.stash[EVALUATOR_KEY]
        try:
            result = run.score_row(self.nodeid)
        except ModelError as exc:
            # The model is shared by every row: once it cannot load, stop instead of failing each row alike.
            self.session.shouldstop = f"llmeval: model could not be loaded: {exc}"
            raise RowError(str(exc)) from None
        self.llmeval_record = result.record
        run.store.publish(result.record)
        # JUnit XML (--junitxml) gets a few flat numbers per row, not the whole record.
        for who in result.record["models"]:
            found = score(result.record, who)
            if found is not None:
                self.user_properties.append((f"llmeval_{who}_score", found["value"]))
                if "perplexity" in found:
                    self.user_properties.append((f"llmeval_{who}_perplexity", found["perplexity"]))
        if result.score is not None:
            self.user_properties.append(("llmeval_threshold", result.score.threshold))
        while run.notices:
            warnings.warn_explicit(
                LLMEvalWarning(run.notices.pop(0)),
                LLMEvalWarning,
                filename=str(self.path),
                lineno=self.case.line,
            )
        if result.skipped is not None:
            pytest.skip(f"{self.benchmark}:{self.case.line}: {result.skipped}")
        if result.error is not None:
            raise RowError(result.error)
        if result.score is not None and not result.score.passed:
            raise RowFailed(result)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, RowFailed):
            return self._describe(excinfo.value.result)
        if isinstance(excinfo.value, RowError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def _describe(self, result: RowResult) -> str:
        """Prompt, output, extracted answer, expected answer, score and threshold: what a reader needs."""
        case = self.case
        record = result.record
        assert result.score is not None
        who = record["evaluated"]
        evaluated = record["models"][who]
        details = result.score.details
        if "max_perplexity" in details:
            return self._describe_perplexity(record, who)
        verdict = f"scored {result.score.value:.3g} < threshold {result.score.threshold:.3g}"
        if result.score.value >= result.score.threshold and details.get("failed_scripts"):
            # char_accuracy: the overall share passed, a script of the expected text did not.
            failed = ", ".join(details["failed_scripts"])
            verdict = (
                f"scored {result.score.value:.3g} >= threshold {result.score.threshold:.3g} "
                f"but {failed} below theirs"
            )
        lines = [
            f"{self.benchmark}:{case.line}: {case.id} [{case.evaluation_type}, {case.difficulty}] "
            f"{verdict} ({who})",
            f"  instruction: {shown(case.instruction)}",
        ]
        if case.input:
            lines.append(f"  input:       {shown(case.input)}")
        for i, reference in enumerate(case.references):  # a row may give several references
            label = "expected:" if len(case.references) == 1 else f"reference {i + 1}:"
            lines.append(f"  {label:<12} {shown(reference)}")
        if evaluated.get("output") is not None:  # measured types (multiple_choice) generate nothing
            lines.append(f"  output:      {shown(str(evaluated.get('output')))}")
        explain = SCORERS[case.evaluation_type].explain
        if explain is not None:
            lines.extend(f"  {line}" for line in explain(details, case.evaluation_config))
        if details.get("reason") is not None:
            lines.append(f"  reason:      {details['reason']}")
        if who != BASE:
            base = record["models"][partner(record, who)]
            base_score = score(record, partner(record, who))
            base_value = None if base_score is None else base_score["value"]
            if base.get("output") is None and base_score is not None:
                lines.append(f"  base:        {base_score.get('predicted')!r} (score {base_value})")
            else:
                output = base.get("output")
                quoted = "None" if output is None else shown(str(output))
                lines.append(f"  base output: {quoted} (score {base_value})")
        return "\n".join(lines)

    def _describe_perplexity(self, record: RowRecord, who: str) -> str:
        """A perplexity row above its bound: the values of both models and the text."""
        case = self.case
        found = score(record, who)
        assert found is not None
        text = case.expected_output if case.evaluation_config.get("on") == "reference" else case.input
        lines = [
            f"{self.benchmark}:{case.line}: {case.id} [perplexity, {case.difficulty}] perplexity "
            f"{found['perplexity']:.4g} > threshold {found['max_perplexity']:.4g} ({who}, "
            f"{found['n_tokens']} tokens, {found['bits_per_character']:.3f} bits per character)",
            f"  text: {text[:200]!r}{' ...' if len(text) > 200 else ''}",
        ]
        base_score = score(record, BASE)
        if who != BASE and base_score is not None:
            lines.append(f"  base perplexity: {base_score['perplexity']:.4g}")
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, self.case.line - 1, f"{self.benchmark}::{self.case.id}"


class _GateReport(pytest.Item):
    """A gate item's failure is its verdict's sentence (_conclude wrote it), not a traceback."""

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, GateFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))


class GateItem(_GateReport, BenchmarkItem):
    """One gate of a benchmark file (`<file>::gate::<name>`), run after every row (hooks/collection.py
    orders them)."""

    def __init__(
        self, *, gate: str, column: str | None = None, metric: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self.column = column  # the column a model gate compares with the base
        self.metric = metric  # --llmeval-gate-metric: the evaluation type whose scores it judges
        self.label = self.name.removeprefix(GATE_PREFIX)  # `better_than_base[date-iso]`
        self.llmeval_gate: GateRecord | None = None
        self.add_marker("gate")

    def runtest(self) -> None:
        run = self.config.stash[EVALUATOR_KEY]
        verdict, statistics = run.evaluate_gate(self.benchmark, self.gate, self.column, self.metric)
        model = self.column if run.roster.several else None
        self.llmeval_gate = gate_record(self.info, verdict.to_json(), statistics, model, self.metric)
        _conclude(verdict, self.label, self.path, where=self.benchmark)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.benchmark}::{self.name}"


# The node id of the collector of training gates (hooks.collection.pytest_make_collect_report): no path
# has "::".
TRAINING_NODE = "llmeval::training"


class TrainingGates(pytest.Collector):
    """The training gates of the run: each column with a training log gets converged and no_overfitting
    (Evaluator.training_gates), in the roster's order."""

    def collect(self) -> Iterator[pytest.Item]:
        for member, gate in self.config.stash[EVALUATOR_KEY].training_gates():
            yield TrainingGateItem.make(self, member, gate)


class TrainingGateItem(_GateReport):
    """A gate on how a column trained (`<name>::gate::converged`), judged from its training log.

    No benchmark file holds it: its node id is its own, under the collector TrainingGates. Its verdict is
    not sent to the recorder on the report: every process reads the same log, and results.json's `training`
    gives the same verdict (evaluation.gating.GateRunner.training_meta)."""

    def __init__(self, *, gate: str, column: str, shown: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self.column = column  # the column's key in row records (`adapter` for a lone adapter)
        self.shown = shown  # what reports call it (the adapter's name)
        self.add_marker("gate")
        self.extra_keyword_matches.add(shown)  # `-k date-iso` selects its training gates too

    @classmethod
    def make(cls, parent: TrainingGates, member: Member, gate: str) -> TrainingGateItem:
        """The training gate `gate` of a column (roster.Member) with a training log."""
        log = parent.config.stash[EVALUATOR_KEY].training_logs[member.side].log
        item: TrainingGateItem = cls.from_parent(
            parent,
            name=f"{GATE_PREFIX}{gate}",
            nodeid=f"{member.name}::{GATE_PREFIX}{gate}",
            path=log.source.absolute(),  # pytest wants absolute paths; the message keeps the log's own
            gate=gate,
            column=member.side,
            shown=member.name,
        )
        return item

    @property
    def label(self) -> str:
        """`converged[date-iso]`, as a benchmark's gates name their column (the message names the log)."""
        return f"{self.gate}[{self.shown}]"

    def runtest(self) -> None:
        verdict = self.config.stash[EVALUATOR_KEY].training_verdict(self.column, self.gate)
        _conclude(verdict, self.label, self.path)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.nodeid


# The node id of the collector of run gates (hooks.collection.pytest_make_collect_report).
RUN_NODE = "llmeval::criteria"


class RunGates(pytest.Collector):
    """The gates the criteria require of the run as a whole (Evaluator.run_gates): under --llmeval-criteria
    locollm, each gated column's out_of_domain_required, in the roster's order."""

    def collect(self) -> Iterator[pytest.Item]:
        for member, gate in self.config.stash[EVALUATOR_KEY].run_gates():
            item: RunGateItem = RunGateItem.from_parent(
                self,
                name=f"{GATE_PREFIX}{gate}",
                nodeid=f"{member.name}::{GATE_PREFIX}{gate}",
                gate=gate,
                member=member,
            )
            yield item


class RunGateItem(_GateReport):
    """A gate on the run as a whole (`<name>::gate::out_of_domain_required`), judged from the benchmarks
    collected. Like a training gate, its verdict is not sent on the report: results.json's `criteria`
    gives it over the rows that ran (gates.criteria_entry), which `pytest-llmeval check` reads."""

    def __init__(self, *, gate: str, member: Member, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self.member = member
        self.add_marker("gate")
        self.extra_keyword_matches.add(member.name)  # `-k date-iso` selects it, as its training gates

    @property
    def label(self) -> str:
        """`out_of_domain_required[date-iso]`, the key of its verdict in results.json's `criteria`."""
        return f"{self.gate}[{self.member.name}]"

    def runtest(self) -> None:
        verdict = self.config.stash[EVALUATOR_KEY].run_verdict(self.member, self.gate)
        _conclude(verdict, self.label, self.path)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.nodeid


def _conclude(verdict: Verdict, label: str, path: Path, *, where: str | None = None) -> None:
    """A gate item's outcome from its verdict: a skip, a pass with a warning, a failure, or a pass."""
    prefix = f"{where}: " if where else ""
    if verdict.status == "skip":
        pytest.skip(f"{prefix}gate {label}: {verdict.message}")
    if verdict.status == "warn":
        # Attributed to the file the gate judged (the benchmark, the training log), not to this line: that
        # is where the user has to look.
        warnings.warn_explicit(
            LLMEvalGateWarning(f"gate {label}: {verdict.message}"),
            LLMEvalGateWarning,
            filename=str(path),
            lineno=1,
        )
    if verdict.status == "fail":
        raise GateFailed(f"{prefix}gate {label} failed: {verdict.message}")
