"""How a row is put to a model: a system prompt, a template, few-shot examples, and where each came from.

A prompt is decided field by field from four layers, the most specific first: the row (its `system` field,
`evaluation_config.prompt_template`), the benchmark (the sidecar `NAME.llmeval.toml` beside `NAME.jsonl`),
the adapter (`prompt` in its metadata.json, written by its training script: the adapter knows how it was
trained), the command line (--llmeval-system-prompt, --llmeval-prompt-template). The number of few-shot
examples is the exception: --llmeval-fewshot, when given, overrides the benchmark's default, because asking
for K examples on the command line is the experiment of that run.

Few-shot examples come from the benchmark's few-shot file (`NAME.fewshot.jsonl`, or the sidecar's
`fewshot_file`) when there is one, else from the other rows of the same file; which ones a row gets is
drawn from its id alone (never the row itself), and they are shown in the pool's order, so a pool of
exactly K examples gives every row the same prefix (and the shared-prefix speed-up).

Rendering without a template of our own: the tokenizer's chat template over [system] + (user, assistant)
per example + the row's user turn; without a chat template, generation.PLAIN_TEMPLATE per turn, joined.
A Jinja template (a sandboxed environment, undefined variables are errors) renders the whole prompt from
`system`, `instruction`, `input`, `examples` (each with instruction, input, output) and `eos_token`.

Pure: no pytest, no torch; jinja2 is imported when a template is compiled.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# The layers, most specific first, as results.json names where a field came from.
ROW, BENCHMARK, ADAPTER, COMMAND_LINE = "row", "benchmark", "adapter", "command line"
SIDECAR_SUFFIX = ".llmeval.toml"
FEWSHOT_SUFFIX = ".fewshot.jsonl"
SIDECAR_KEYS = ("system", "template", "template_file", "fewshot", "fewshot_file")
# What a template may read; anything else is an undefined variable, an error at collection.
TEMPLATE_VARIABLES = ("system", "instruction", "input", "examples", "eos_token")


class PromptError(ValueError):
    """A prompt setting that cannot be used: a template that does not compile or render, a bad sidecar.
    `line`: the benchmark line it belongs to (1 for a benchmark-wide setting)."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Template:
    """A Jinja prompt template and where it was written (a file, a sidecar, `bench.jsonl:3`)."""

    source: str
    origin: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {"origin": self.origin, "sha256": self.sha256, "source": self.source}


@dataclass(frozen=True)
class Layer:
    """What one layer says about the prompt; None: it says nothing, a less specific layer decides."""

    system: str | None = None
    template: Template | None = None
    fewshot: int | None = None

    @property
    def empty(self) -> bool:
        return self.system is None and self.template is None and self.fewshot is None


@dataclass(frozen=True)
class Example:
    """One few-shot example: a solved row."""

    id: str
    instruction: str
    input: str
    output: str
    line: int = 0  # where it is written (its few-shot file's line, or its benchmark row's), for messages

    def to_json(self) -> dict[str, str]:
        return {"instruction": self.instruction, "input": self.input, "output": self.output}


@dataclass(frozen=True)
class PromptSpec:
    """The prompt settings of one row for one model, resolved from the layers."""

    system: str | None = None
    template: Template | None = None
    fewshot: int = 0
    sources: Mapping[str, str] = field(default_factory=dict)  # field -> the layer that set it

    @property
    def plain(self) -> bool:
        """No system prompt, no template, no examples: the prompt every row had before any of these."""
        return self.system is None and self.template is None and self.fewshot == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "template": None if self.template is None else self.template.to_json(),
            "fewshot": self.fewshot,
            "sources": dict(self.sources),
        }

    def key(self) -> str:
        """What decides the rendered prompt: equal keys render every row alike."""
        settings = {
            "system": self.system,
            "template": None if self.template is None else self.template.sha256,
        }
        return hashlib.sha256(json.dumps([settings, self.fewshot], sort_keys=True).encode()).hexdigest()


def resolve(layers: Sequence[tuple[str, Layer]], *, fewshot_override: int | None = None) -> PromptSpec:
    """The prompt from (layer name, layer) pairs, the most specific first: each field from the first layer
    that sets it. `fewshot_override` (--llmeval-fewshot) wins over every layer's few-shot count."""
    system: str | None = None
    template: Template | None = None
    fewshot: int | None = None
    sources: dict[str, str] = {}
    for name, layer in layers:
        if system is None and layer.system is not None:
            system, sources["system"] = layer.system, name
        if template is None and layer.template is not None:
            template, sources["template"] = layer.template, name
        if fewshot is None and layer.fewshot is not None:
            fewshot, sources["fewshot"] = layer.fewshot, name
    if fewshot_override is not None:
        fewshot, sources["fewshot"] = fewshot_override, COMMAND_LINE
    return PromptSpec(system=system, template=template, fewshot=fewshot or 0, sources=sources)


def pick_examples(row_id: str, pool: Sequence[Example], k: int) -> list[Example]:
    """The row's k examples from the pool: never the row itself (by id), chosen by a hash of the row's id
    with each example's (the same on every run, worker and machine, and unmoved by rows added elsewhere
    in the pool), returned in the pool's order. Fewer than k when the pool holds fewer other rows."""
    if k <= 0:
        return []
    others = [(i, e) for i, e in enumerate(pool) if e.id != row_id]

    def draw(item: tuple[int, Example]) -> bytes:
        return hashlib.sha256(f"{row_id}\0{item[1].id}".encode()).digest()

    chosen = sorted(others, key=draw)[:k]
    return [e for _, e in sorted(chosen, key=lambda item: item[0])]


@lru_cache(maxsize=64)
def _compiled(source: str) -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # The sandbox: a template from a benchmark or an adapter folder is data, not code to trust.
    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)
    return env.from_string(source)


def compile_template(template: Template) -> None:
    """Raise PromptError (the template's origin, its line, Jinja's message) when it does not compile."""
    from jinja2 import TemplateSyntaxError

    try:
        _compiled(template.source)
    except TemplateSyntaxError as exc:
        raise PromptError(f"prompt template {template.origin}, line {exc.lineno}: {exc.message}") from None


def render_template(
    template: Template,
    *,
    system: str | None,
    instruction: str,
    input: str,
    examples: Sequence[Example],
    eos_token: str | None,
) -> str:
    """The whole prompt from a Jinja template; PromptError (with Jinja's message) when it does not render."""
    from jinja2 import TemplateError

    compile_template(template)
    try:
        text = _compiled(template.source).render(
            system=system,
            instruction=instruction,
            input=input,
            examples=[e.to_json() for e in examples],
            eos_token=eos_token or "",
        )
    except TemplateError as exc:
        raise PromptError(f"prompt template {template.origin} does not render: {exc}") from None
    except Exception as exc:  # the template's own arithmetic or calls: `{{ 1 / 0 }}`, `{{ input + 1 }}`
        raise PromptError(
            f"prompt template {template.origin} does not render: {type(exc).__name__}: {exc}"
        ) from None
    return str(text)


def check(spec: PromptSpec, instruction: str, input: str, examples: Sequence[Example], line: int) -> None:
    """Render a row's template once with its own values (raising PromptError at `line`), so a template
    that cannot render fails its benchmark's collection rather than its rows one by one."""
    if spec.template is None:
        return
    try:
        render_template(
            spec.template,
            system=spec.system,
            instruction=instruction,
            input=input,
            examples=examples,
            eos_token="</s>",
        )
    except PromptError as exc:
        raise PromptError(str(exc), line) from None


# --- the benchmark's layer: the sidecar and the few-shot file --------------------------------------------


@dataclass(frozen=True)
class BenchmarkPrompt:
    """A benchmark's own prompt settings (its sidecar) and its few-shot pool (None: the file's rows)."""

    layer: Layer = Layer()
    pool: tuple[Example, ...] | None = None
    sidecar: Path | None = None
    fewshot_file: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sidecar": None if self.sidecar is None else self.sidecar.name,
            "fewshot_pool": "the benchmark's other rows"
            if self.fewshot_file is None
            else f"{self.fewshot_file.name} ({len(self.pool or ())} examples)",
        }


def sidecar_path(benchmark: Path) -> Path:
    """`dates.jsonl` -> `dates.llmeval.toml`, beside it."""
    return benchmark.with_name(benchmark.stem + SIDECAR_SUFFIX)


def load_benchmark_prompt(benchmark: Path) -> BenchmarkPrompt:
    """The benchmark's sidecar and few-shot file, when it has them; PromptError naming the file and what
    is wrong (TOML's own line and column for a syntax error)."""
    sidecar = sidecar_path(benchmark)
    table: dict[str, Any] = {}
    if sidecar.is_file():
        try:
            document = tomllib.loads(sidecar.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise PromptError(f"{sidecar.name}: {exc}") from None
        unknown = [k for k in document if k != "prompt"]
        if unknown:
            raise PromptError(f"{sidecar.name}: unknown table or key {unknown[0]!r} (known: [prompt])")
        table = document.get("prompt", {})
        if not isinstance(table, dict):
            raise PromptError(f"{sidecar.name}: `prompt` must be a table ([prompt])")
    layer = layer_from_table(table, f"{sidecar.name}", sidecar.parent)
    fewshot_file = benchmark.with_name(benchmark.stem + FEWSHOT_SUFFIX)
    if "fewshot_file" in table:
        if not isinstance(table["fewshot_file"], str):
            raise PromptError(f"{sidecar.name}: fewshot_file must be a path (a string)")
        fewshot_file = sidecar.parent / table["fewshot_file"]
        if not fewshot_file.is_file():
            raise PromptError(f"{sidecar.name}: fewshot_file {table['fewshot_file']} is not a file")
    pool = load_examples(fewshot_file) if fewshot_file.is_file() else None
    return BenchmarkPrompt(
        layer=layer,
        pool=pool,
        sidecar=sidecar if sidecar.is_file() else None,
        fewshot_file=fewshot_file if pool is not None else None,
    )


def layer_from_table(table: Mapping[str, Any], origin: str, folder: Path | None) -> Layer:
    """A layer from a sidecar's [prompt] table or an adapter metadata's `prompt` object: `system`,
    `template` (the Jinja text) or `template_file` (relative to `folder`), `fewshot`."""
    unknown = [k for k in table if k not in SIDECAR_KEYS]
    if unknown:
        raise PromptError(f"{origin}: unknown prompt key {unknown[0]!r} (known: {', '.join(SIDECAR_KEYS)})")
    system = table.get("system")
    if system is not None and not isinstance(system, str):
        raise PromptError(f"{origin}: prompt system must be a string")
    if "template" in table and "template_file" in table:
        raise PromptError(f"{origin}: give the prompt's template or template_file, not both")
    template: Template | None = None
    if isinstance(table.get("template"), str):
        template = Template(table["template"], origin)
    elif table.get("template") is not None:
        raise PromptError(f"{origin}: prompt template must be a string (the Jinja text)")
    if table.get("template_file") is not None:
        name = table["template_file"]
        path = (folder or Path(".")) / str(name)
        if not isinstance(name, str) or not path.is_file():
            raise PromptError(f"{origin}: template_file {name} is not a file")
        template = template_from_file(path)
    fewshot = table.get("fewshot")
    if fewshot is not None and (isinstance(fewshot, bool) or not isinstance(fewshot, int) or fewshot < 0):
        raise PromptError(f"{origin}: fewshot must be a whole number >= 0, got {fewshot!r}")
    if template is not None:
        compile_template(template)
    return Layer(system=system, template=template, fewshot=fewshot)


def template_from_file(path: Path) -> Template:
    """A template file, read as UTF-8; PromptError when it cannot be read."""
    try:
        return Template(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"prompt template {path}: {exc}") from None


def load_examples(path: Path) -> tuple[Example, ...]:
    """A few-shot file: JSONL rows with `id`, `instruction`, `input` and `expected_output` (a benchmark's
    rows qualify; other fields are ignored). PromptError naming the file and line of a bad row."""
    from pytest_llmeval.benchmark import JsonlDecodeError, jsonl_objects, jsonl_text

    try:
        text = jsonl_text(path.read_bytes())
    except JsonlDecodeError as exc:
        raise PromptError(f"{path.name}:{exc.line}: {exc.reason}") from None
    examples: list[Example] = []
    for line, obj, bad in jsonl_objects(text):
        if obj is None:
            raise PromptError(f"{path.name}:{line}: {bad}")
        missing = [k for k in ("id", "instruction", "expected_output") if not isinstance(obj.get(k), str)]
        if missing or not isinstance(obj.get("input", ""), str):
            what = missing[0] if missing else "input"
            raise PromptError(f"{path.name}:{line}: a few-shot example needs a string '{what}'")
        examples.append(
            Example(obj["id"], obj["instruction"], obj.get("input", ""), obj["expected_output"], line)
        )
    if not examples:
        raise PromptError(f"{path.name}: no few-shot examples in the file")
    return tuple(examples)


def row_layer(system: str | None, config: Mapping[str, Any], origin: str) -> Layer:
    """The row's own layer: its `system` field, its evaluation_config.prompt_template (the Jinja text)."""
    source = config.get("prompt_template")
    template = None if source is None else Template(str(source), origin)
    if template is not None:
        compile_template(template)
    return Layer(system=system, template=template)


@dataclass(frozen=True)
class PromptOptions:
    """The run's prompt settings: the command line's layer, --llmeval-fewshot, --llmeval-prompt-per-model,
    and each adapter column's layer (its metadata.json `prompt`)."""

    command_line: Layer = Layer()
    fewshot: int | None = None  # --llmeval-fewshot; None: each benchmark's default (0 without one)
    per_model: bool = False  # each model its own declared prompt; default: one rendered prompt per row
    adapters: Mapping[str, Layer] = field(default_factory=dict)  # adapter column -> its metadata's layer

    def to_json(self) -> dict[str, Any]:
        cli = self.command_line
        return {
            "mode": "per_model" if self.per_model else "shared",
            "command_line": {
                "system": cli.system,
                "template": None if cli.template is None else cli.template.to_json(),
                "fewshot": self.fewshot,
            },
            "adapters": {
                side: {
                    "system": layer.system,
                    "template": None if layer.template is None else layer.template.to_json(),
                }
                for side, layer in self.adapters.items()
            },
        }


def adapter_layer(metadata: Mapping[str, Any], folder: Path) -> Layer:
    """An adapter's layer: its metadata.json `prompt` ({system, template or template_file}); an empty
    layer when it declares none. PromptError naming the file when the entry is unusable."""
    table = metadata.get("prompt")
    if table is None:
        return Layer()
    origin = str(folder / "metadata.json")
    if not isinstance(table, dict):
        raise PromptError(f"{origin}: `prompt` must be an object with system and/or template")
    return layer_from_table({k: v for k, v in table.items() if k != "fewshot"}, origin, folder)


def is_fewshot_file(path: Path) -> bool:
    """Whether a JSONL file holds few-shot examples rather than benchmark rows: `NAME.fewshot.jsonl`, or
    the fewshot_file a sidecar in its folder names (a sidecar that cannot be read says nothing here; its
    benchmark's collection reports it)."""
    if path.name.endswith(FEWSHOT_SUFFIX):
        return True
    target = path.resolve()
    for sidecar in path.parent.glob(f"*{SIDECAR_SUFFIX}"):
        try:
            table = tomllib.loads(sidecar.read_text(encoding="utf-8")).get("prompt", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        named = table.get("fewshot_file") if isinstance(table, dict) else None
        if isinstance(named, str) and (sidecar.parent / named).resolve() == target:
            return True
    return False
