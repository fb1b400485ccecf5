"""Each row's prompt settings and few-shot examples, per column: prompts.py decides how the layers (row,
benchmark sidecar, an adapter's declared prompt, the command line) combine; this applies it to the run's
rows and columns. Read at collection (a template that does not render fails its file's collection), asked
again when a chunk is prompted, and described in results.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_llmeval.benchmark import Benchmark, Case
from pytest_llmeval.planning import RowRef, RunPlan
from pytest_llmeval.records import variant_of
from pytest_llmeval.run_options import RunOptions

if TYPE_CHECKING:
    from pytest_llmeval.prompts import BenchmarkPrompt, Example, PromptSpec


class Prompter:
    """The run's benchmarks (as collected) and each row's prompt settings for each column."""

    def __init__(self, options: RunOptions, plan: RunPlan, rows: Mapping[str, RowRef]) -> None:
        self.options = options
        self.plan = plan
        self.rows = rows  # node id -> row: the row plan's
        self.benchmarks: dict[str, Benchmark] = {}  # benchmark name -> the parsed file
        # benchmark name -> its sidecar's prompt settings and few-shot pool (prompts.load_benchmark_prompt)
        self.benchmark_prompts: dict[str, BenchmarkPrompt] = {}
        # (benchmark, row id, k) -> the row's few-shot examples (examples())
        self._examples: dict[tuple[str, str, int], list[Example]] = {}
        # (benchmark, owner) -> the settings of its rows that have no layer of their own (_resolve): most
        # rows, asked for at collection and again when prompted (issue 40: 20,000 resolutions at 10k rows).
        self._shared_specs: dict[tuple[str, str | None], PromptSpec] = {}

    def read_prompts(self, name: str, benchmark: Benchmark) -> list[tuple[int, str]]:
        """At collection: the benchmark's sidecar and few-shot file, and every row's prompt rendered once
        for each distinct prompt of the run's columns, so a template that does not compile or render fails
        this file's collection, (line, why) each, and no other file's."""
        from pytest_llmeval.prompts import PromptError, load_benchmark_prompt

        self._shared_specs = {key: spec for key, spec in self._shared_specs.items() if key[0] != name}
        try:
            self.benchmark_prompts[name] = load_benchmark_prompt(benchmark.path)
        except PromptError as exc:
            return [(exc.line, str(exc))]
        self.benchmarks[name] = benchmark
        problems: list[tuple[int, str]] = []
        for case in benchmark.cases:
            try:
                for owner in dict.fromkeys(self._prompt_owner(c) for c in self.plan.columns()):
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
            return self.plan.base_variants()[column]
        if self.options.prompt.per_model or not declared:
            return None
        return next(iter(declared))

    def _resolve(self, name: str, case: Case | None, owner: str | None) -> PromptSpec:
        """The prompt settings of a row of benchmark `name` (None: of the benchmark, its rows' own
        settings aside) under the declaration of the adapter column `owner` (_prompt_owner)."""
        from pytest_llmeval.prompts import ADAPTER as ADAPTER_LAYER
        from pytest_llmeval.prompts import BENCHMARK, COMMAND_LINE, ROW, Layer, resolve, row_layer

        shared = case is None or (case.system is None and "prompt_template" not in case.run_options)
        if shared and (name, owner) in self._shared_specs:
            return self._shared_specs[(name, owner)]
        bench = self.benchmark_prompts.get(name)
        prompt = self.options.prompt
        own = Layer() if case is None else row_layer(case.system, case.run_options, f"{name}:{case.line}")
        layers: list[tuple[str, Layer]] = [
            (ROW, own),
            (BENCHMARK, Layer() if bench is None else bench.layer),
            (ADAPTER_LAYER, Layer() if owner is None else prompt.adapters[owner]),
            (COMMAND_LINE, prompt.command_line),
        ]
        spec = resolve(layers, fewshot_override=prompt.fewshot)
        if shared:
            self._shared_specs[(name, owner)] = spec
        return spec

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

    def same_prompt(self, column: str, other: str) -> bool:
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
            columns = {
                c: self._resolve(name, None, self._prompt_owner(c)).to_json() for c in self.plan.columns()
            }
            benchmarks[name] = {**bench.to_json(), "columns": columns}
        out["benchmarks"] = benchmarks
        return out
