"""The run's settings: every option parsed and checked once into typed objects, the same in every process.

pytest_configure calls Settings.from_config and keeps the result in config.stash[SETTINGS_KEY]; `RunOptions`
(run_options.py, pure) is the part the evaluation reads, `Settings` holds it and everything else the hooks
read. This is the one
module that reads pytest's parsed options (config.option): tests/test_layout.py holds every other module to
that, so an option has one parser and one check. No torch: the plugin imports this module at pytest's start.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmeval.gates import CRITERIA, DEFAULT_CRITERIA, Criteria, describe_criteria
from pytest_llmeval.inputs import option_path_values
from pytest_llmeval.models import ModelError, ModelSpec, adapter_metadata, adapter_sides, find_training_file
from pytest_llmeval.results_reader import MAX_RESULTS_NUMBER
from pytest_llmeval.roster import Roster, RosterError, build_roster, served_sides
from pytest_llmeval.run_options import GateOptions, RunOptions
from pytest_llmeval.scorers import SCORERS

if TYPE_CHECKING:
    from pytest_llmeval.costs import Price
    from pytest_llmeval.endpoint import EndpointSettings
    from pytest_llmeval.prompts import PromptOptions


PATH_OPTIONS = (
    "--adapter",
    "--base-model",
    "--llmeval-results",
    "--llmeval-html",
    "--llmeval-cache-dir",
    "--llmeval-train-data",
    "--llmeval-previous",
    "--llmeval-predictions",
    "--llmeval-ppl-model",
    "--llmeval-judge-model",
    "--llmeval-model",
    "--llmeval-training-log",
)


def partial_path(path: Path) -> Path:
    """Where a partial run's file goes when `path` holds a complete run: results.json ->
    results.partial.json, spot_check.md -> spot_check.partial.md."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


@dataclass(frozen=True)
class RunFiles:
    """The files the command line names for the run to write and to read, known before any file is read:
    the controller checks them before the project's files are read (hooks/configure.py), and again once
    collection found the benchmark files (hooks/collection.py)."""

    results: Path  # --llmeval-results, from the invocation folder
    html: Path | None  # --llmeval-html, from the invocation folder
    peft_vs_sft: bool  # --llmeval-peft-vs-sft: peft_vs_sft.md is written beside results.json
    junit: Path | None  # pytest's --junitxml, from the invocation folder
    no_history: bool  # --llmeval-no-history: no history folder beside results.json
    cache_dir: Path | None  # --llmeval-cache-dir when it is given and the cache is on
    # No --llmeval-predictions, --adapter or --base-model: the embedded default model is converted and cached.
    loads_embedded: bool
    # What the options name for the run to read (existing or not: checked when the run's files are checked).
    named_inputs: tuple[tuple[str, Path], ...]

    def outputs(self) -> list[tuple[str, Path]]:
        """The files a run writes at its end, each with the option (or rule) that names it."""
        from pytest_llmeval.reporting.spot_check import spot_check_path

        results = self.results
        spot = spot_check_path(results)
        out = [("--llmeval-results", results), ("the spot check", spot)]
        # Where a partial run goes when results.json holds a complete one (hooks/reporting.py's _write_run).
        out += [("a partial run's results", partial_path(results)), ("its spot check", partial_path(spot))]
        if self.html is not None:
            out.append(("--llmeval-html", self.html))
        if self.peft_vs_sft:
            out.append(("the PEFT against SFT report", results.parent / "peft_vs_sft.md"))
        if self.junit is not None:
            out.append(("--junitxml", self.junit))
        return out


@dataclass(frozen=True)
class Settings:
    """Every option the plugin's hooks read, parsed and checked once (Settings.from_config, at
    pytest_configure) and kept in config.stash[SETTINGS_KEY]: no hook reads config.option after that."""

    run: RunOptions  # what the evaluation reads: the Evaluator's options, the same in every process
    files: RunFiles  # what the run writes and reads, by the options that name them
    overwrite: bool  # --llmeval-overwrite: a partial run replaces a complete results.json
    history_keep: int | None  # --llmeval-history-keep: older history entries pruned at the end
    previous: Path | None  # --llmeval-previous: no_regression's baseline, instead of the history's
    peft_vs_sft: str | None  # --llmeval-peft-vs-sft: the SFT column compared with the adapter
    sample: int | float | None  # --llmeval-sample: a stratified subset of each benchmark file's rows
    seed: int  # --llmeval-seed: the subset's and the sequential order's seed
    train_data: Path | None  # --llmeval-train-data as given (run.gate_options may hold the adapter's file)
    training_logs: tuple[str, ...]  # --llmeval-training-log values, NAME=PATH or PATH, as given
    # pytest's own options that select part of the collection (-k, -m, --lf, --sw, --deselect) and
    # --llmeval-sample, as results.json's `selection.how` names them.
    selected_by: tuple[str, ...]
    collect_only: bool  # --collect-only: nothing is evaluated, nothing is written
    dist: str | None  # pytest-xdist's --dist (None without xdist): distribution.py replaces only "load"

    @classmethod
    def from_config(
        cls, config: pytest.Config, *, check_files: Callable[[RunFiles], None] | None = None
    ) -> Settings:
        """The run's settings from pytest's parsed options; a value that cannot work is a pytest.UsageError
        naming the option. `check_files` (the controller's checks of the run's files) runs after every
        conflict between options is checked and before the project's own files (pyproject.toml, prompt
        templates, the cache folder) are read: a wrong rootdir brings another project's configuration."""
        threads = None
        worker = None
        if hasattr(config, "workerinput"):
            worker = int(str(config.workerinput["workerid"]).removeprefix("gw"))
            # N xdist workers on one machine: split the cores between them, or N torch thread pools (each as
            # large as the machine) fight over the same cores and every worker runs slower than one alone.
            workers = int(config.workerinput.get("workercount", 1))
            threads = max(1, (os.cpu_count() or 1) // workers)
        opt = config.option
        model_given = opt.adapter is not None or opt.base_model is not None or bool(opt.llmeval_model)
        if opt.llmeval_predictions is not None and (model_given or opt.llmeval_endpoint):
            # Before anything is looked for (an --adapter Hub id would be downloaded next).
            raise pytest.UsageError(
                "llmeval: --llmeval-predictions scores saved outputs and loads no model: "
                "leave out --adapter, --base-model, --llmeval-model and --llmeval-endpoint"
            )
        endpoint = _endpoint_settings(config)
        served_adapters = [str(a) for a in opt.adapter or []] if endpoint is not None else []
        adapters = [] if endpoint is not None else _adapter_folders(opt.adapter or [])
        first = adapters[0] if adapters else None
        spec = ModelSpec(
            base_model=config.option.base_model,
            adapter=first,
            more_adapters=tuple(adapters[1:]),
            device=config.option.llmeval_device,
            dtype=config.option.llmeval_dtype,
            threads=threads,
            worker=worker,
        )
        criteria = _criteria(opt)
        # Resolved once here, not per collected file: the adapter's declared domain and its training file.
        roster = _roster(config, adapters, served_adapters)
        if opt.llmeval_peft_vs_sft is not None:
            models = [m.name for m in roster.models]
            if not roster.adapters or opt.llmeval_peft_vs_sft not in models:
                raise pytest.UsageError(
                    f"llmeval: --llmeval-peft-vs-sft {opt.llmeval_peft_vs_sft}: needs an --adapter (PEFT) "
                    f"and the --llmeval-model of that name (SFT); this run has "
                    f"{len(roster.adapters)} adapter(s) and model(s) {models or 'none'}"
                )
        domain_globs = [g for g in opt.llmeval_domain if "=" not in g]
        if first is not None and first.is_dir():
            domain_globs += adapter_metadata(first).get("domain_benchmarks", [])
        gate_options = GateOptions(
            criteria=criteria,
            alpha=opt.llmeval_alpha,
            min_rows=opt.llmeval_min_rows,
            min_edge=opt.llmeval_min_edge_cases,
            domain_globs=tuple(domain_globs),
            train_data=opt.llmeval_train_data or find_training_file(first),
            slice_keys=tuple(opt.llmeval_slice_gate),
            gate_metrics=_gate_metrics(opt.llmeval_gate_metric),
            sequential=opt.llmeval_sequential,
            seed=opt.llmeval_seed,
            training_gates=opt.llmeval_training_gates,
            training_window=opt.llmeval_training_window,
        )
        if endpoint is not None and opt.llmeval_fluency and opt.llmeval_ppl_model is None:
            raise pytest.UsageError(
                "llmeval: --llmeval-fluency measures each model's outputs with that model's log-likelihoods, "
                "which an endpoint does not return:"
                " add --llmeval-ppl-model PATH (a local model scores every column)"
            )
        if opt.llmeval_predictions is not None and opt.llmeval_fluency and opt.llmeval_ppl_model is None:
            raise pytest.UsageError(
                "llmeval: --llmeval-fluency measures each model's outputs with that model, and "
                "--llmeval-predictions loads none: add --llmeval-ppl-model=NAME_OR_PATH (a Hub id, a folder "
                "or 'embedded') to score the saved outputs and their references with that model"
            )
        ppl_batch_size, ppl_max_length, ppl_stride = _fluency_window(config)
        files = _run_files(config)
        if check_files is not None:
            check_files(files)  # after the option conflicts above: a wrong combination says so first
        options = RunOptions(
            spec=spec,
            predictions=opt.llmeval_predictions,
            batch_size=opt.llmeval_batch_size,
            max_new_tokens=opt.llmeval_max_new_tokens,
            gate_options=gate_options,
            fluency=opt.llmeval_fluency or opt.llmeval_ppl_model is not None,
            ppl_model=opt.llmeval_ppl_model,
            ppl_batch_size=ppl_batch_size,
            ppl_max_length=ppl_max_length,
            ppl_stride=ppl_stride,
            sandbox_mode=opt.llmeval_sandbox,
            sandbox_jobs=opt.llmeval_sandbox_jobs,
            judge_model=opt.llmeval_judge_model,
            embedding_model=_embedding_model(opt.llmeval_embedding_model),
            embedding_layer=opt.llmeval_embedding_layer,
            composite_weights=_composite_weights(config),
            cache_dir=_generation_cache_dir(config),
            context_overflow=opt.llmeval_context_overflow,
            token_budget=opt.llmeval_token_budget,
            mixed_batches=opt.llmeval_mixed_batches,
            roster=roster,
            adjust=opt.llmeval_adjust,
            endpoint=endpoint,
            served_apart={m.side: _client_settings(opt, (str(m.url),)) for m in roster.served_apart},
            quantization=_quantization(opt.llmeval_quantization),
            reasoning_tags=None if opt.llmeval_keep_reasoning else opt.llmeval_reasoning_tags,
            max_tokens=opt.llmeval_max_tokens,
            max_cost=opt.llmeval_max_cost,
            workers=int(getattr(config, "workerinput", {}).get("workercount", 1)),
            prices=_prices(
                config,
                [str(opt.base_model), *(m.source for m in roster.members)]
                if endpoint is not None
                else [m.source for m in roster.served_apart],
            ),
            prompt=_prompt_of(config, roster),
        )
        return cls(
            run=options,
            files=files,
            overwrite=opt.llmeval_overwrite,
            history_keep=opt.llmeval_history_keep,
            previous=opt.llmeval_previous,
            peft_vs_sft=opt.llmeval_peft_vs_sft,
            sample=opt.llmeval_sample,
            seed=opt.llmeval_seed,
            train_data=opt.llmeval_train_data,
            training_logs=tuple(opt.llmeval_training_log or ()),
            selected_by=_selected_by(config),
            collect_only=bool(opt.collectonly),
            dist=getattr(opt, "dist", None),
        )


SETTINGS_KEY = pytest.StashKey[Settings]()  # set by pytest_configure, read by every hook after it


def offline_requested(config: pytest.Config) -> bool:
    """--llmeval-offline. Read before Settings.from_config, which may download an --adapter's Hub id: the
    one option acted on before the settings are built."""
    return bool(config.option.llmeval_offline)


def _fluency_window(config: pytest.Config) -> tuple[int | None, int | None, int | None]:
    """--llmeval-ppl-batch-size, --llmeval-ppl-max-length and --llmeval-ppl-stride (each a positive integer
    already, hooks/options.py), checked against each other and against fluency being on; None: the
    default of perplexity.perplexity."""
    opt = config.option
    given = {
        "--llmeval-ppl-batch-size": opt.llmeval_ppl_batch_size,
        "--llmeval-ppl-max-length": opt.llmeval_ppl_max_length,
        "--llmeval-ppl-stride": opt.llmeval_ppl_stride,
    }
    named = [name for name, value in given.items() if value is not None]
    if named and not (opt.llmeval_fluency or opt.llmeval_ppl_model is not None):
        raise pytest.UsageError(
            f"llmeval: {named[0]} sets the fluency scorer, and fluency is off: add --llmeval-fluency or "
            "--llmeval-ppl-model=NAME_OR_PATH, or leave it out"
        )
    max_length, stride = opt.llmeval_ppl_max_length, opt.llmeval_ppl_stride
    if max_length is not None and max_length < 2:
        raise pytest.UsageError(
            f"llmeval: --llmeval-ppl-max-length {max_length}: a window needs at least 2 tokens (a token "
            "and its context)"
        )
    if stride is not None and max_length is not None and stride > max_length:
        raise pytest.UsageError(
            f"llmeval: --llmeval-ppl-stride {stride} exceeds --llmeval-ppl-max-length {max_length}: the "
            "window would skip tokens; give a stride of at most the window"
        )
    return opt.llmeval_ppl_batch_size, max_length, stride


def _run_files(config: pytest.Config) -> RunFiles:
    """The files the options name for the run to write and to read (RunFiles)."""
    opt = config.option
    here = config.invocation_params.dir
    xml = getattr(opt, "xmlpath", None)
    named: list[tuple[str, Any]] = [
        ("--llmeval-predictions", opt.llmeval_predictions),
        ("--llmeval-train-data", opt.llmeval_train_data),
        ("--llmeval-previous", opt.llmeval_previous),
        ("--base-model", opt.base_model),
        *(("--adapter", a) for a in opt.adapter or []),
        *(("--llmeval-model", m.partition("=")[2]) for m in opt.llmeval_model or []),
        # NAME=PATH or a bare PATH (which may hold "=" itself): both readings; only existing paths count.
        *(
            ("--llmeval-training-log", v)
            for t in opt.llmeval_training_log or []
            for v in {t, t.partition("=")[2]}
        ),
    ]
    return RunFiles(
        results=_results_path(config),
        html=None if opt.llmeval_html is None else here / opt.llmeval_html,
        peft_vs_sft=opt.llmeval_peft_vs_sft is not None,
        junit=here / xml if xml else None,
        no_history=bool(opt.llmeval_no_history),
        cache_dir=(
            here / opt.llmeval_cache_dir
            if opt.llmeval_cache_dir is not None and not opt.llmeval_no_cache
            else None
        ),
        loads_embedded=opt.llmeval_predictions is None and not opt.adapter and opt.base_model is None,
        named_inputs=tuple((what, here / Path(value).expanduser()) for what, value in named if value),
    )


def _selected_by(config: pytest.Config) -> tuple[str, ...]:
    """The options that select part of the collection, as results.json's `selection.how` names them."""
    opt = config.option
    how = []
    if getattr(opt, "keyword", ""):
        how.append(f"-k '{opt.keyword}'")
    if getattr(opt, "markexpr", ""):
        how.append(f"-m '{opt.markexpr}'")
    if getattr(opt, "lf", False):
        how.append("--lf")
    if getattr(opt, "stepwise", False):
        how.append("--sw")
    if getattr(opt, "deselect", None):
        how.append("--deselect")
    if getattr(opt, "llmeval_sample", None) is not None:
        how.append(f"--llmeval-sample {opt.llmeval_sample} --llmeval-seed {opt.llmeval_seed}")
    return tuple(how)


def _results_path(config: pytest.Config) -> Path:
    return Path(config.invocation_params.dir / config.option.llmeval_results)


def _tool_table(config: pytest.Config) -> tuple[Path, dict[str, Any]]:
    """The rootdir's pyproject.toml and its [tool.llmeval] table (empty without either)."""
    pyproject = config.rootpath / "pyproject.toml"
    if not pyproject.is_file():
        return pyproject, {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("llmeval", {})
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"llmeval: {pyproject}: cannot read [tool.llmeval]: {exc}") from None
    return pyproject, table if isinstance(table, dict) else {}


def _prices(config: pytest.Config, served: Sequence[str]) -> dict[str, Price]:
    """[tool.llmeval.prices] (USD per million tokens by served model id); --llmeval-max-cost needs a
    price for every served model, and an endpoint to spend money at."""
    from pytest_llmeval.costs import PriceError, parse_prices

    pyproject, table = _tool_table(config)
    try:
        prices = parse_prices(table.get("prices", {}), f"{pyproject} [tool.llmeval.prices]")
    except PriceError as exc:
        raise pytest.UsageError(f"llmeval: {exc}") from None
    if config.option.llmeval_max_cost is not None:
        if not served:
            raise pytest.UsageError(
                "llmeval: --llmeval-max-cost caps the money spent at --llmeval-endpoint; models run here "
                "cost no tokens anyone bills: cap them with --llmeval-max-tokens"
            )
        missing = [m for m in served if m not in prices]
        if missing:
            raise pytest.UsageError(
                "llmeval: --llmeval-max-cost needs a price for every served model: add "
                f"{', '.join(map(repr, missing))} to [tool.llmeval.prices] in {pyproject} (prompt and "
                "completion, USD per million tokens)"
            )
    return prices


def _composite_weights(config: pytest.Config) -> dict[str, float] | None:
    """--llmeval-composite-weights, else pyproject.toml's [tool.llmeval] composite_weights, else None."""
    raw = config.option.llmeval_composite_weights
    source = "--llmeval-composite-weights"
    weights: dict[str, Any] = {}
    if raw is not None:
        for part in raw.split(","):
            name, sep, value = part.partition("=")
            if not sep:
                raise pytest.UsageError(f"llmeval: {source}: expected TYPE=WEIGHT, got {part!r}")
            weights[name.strip()] = value.strip()
    else:
        pyproject, table = _tool_table(config)
        if "composite_weights" not in table:
            return None
        source = f"{pyproject} [tool.llmeval] composite_weights"
        if not isinstance(table["composite_weights"], dict):
            raise pytest.UsageError(f"llmeval: {source} must be a table of evaluation type = weight")
        weights = dict(table["composite_weights"])
    out: dict[str, float] = {}
    for name, value in weights.items():
        if name not in SCORERS:
            raise pytest.UsageError(
                f"llmeval: {source}: unknown evaluation type {name!r} (known: {', '.join(SCORERS)})"
            )
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            raise pytest.UsageError(
                f"llmeval: {source}: weight of {name} must be a number, got {value!r}"
            ) from None
        if not 0 <= out[name] < math.inf:
            raise pytest.UsageError(
                f"llmeval: {source}: weight of {name} must be a finite number >= 0, got {value!r}"
            )
        if out[name] > MAX_RESULTS_NUMBER:
            # results.json records the weights, and its readers refuse numbers this large as damage.
            raise pytest.UsageError(
                f"llmeval: {source}: weight of {name} is {value!r}: weights are relative, scale them down"
            )
    if not any(out.values()):
        raise pytest.UsageError(f"llmeval: {source}: at least one weight must be above 0")
    return out


def _endpoint_settings(config: pytest.Config) -> EndpointSettings | None:
    """--llmeval-endpoint and its settings; None without it. Served models are named by id, so the base's
    id is required: nothing at an endpoint is a default."""
    opt = config.option
    if not opt.llmeval_endpoint:
        return None
    for url in opt.llmeval_endpoint:
        if not url.startswith(("http://", "https://")):
            raise pytest.UsageError(
                f"llmeval: --llmeval-endpoint {url}: expected an http(s) base URL such as "
                "http://127.0.0.1:8000/v1"
            )
    if opt.base_model is None:
        raise pytest.UsageError(
            "llmeval: --llmeval-endpoint: name the served base model with --base-model MODEL_ID (an id its "
            "/v1/models lists)"
        )
    return _client_settings(opt, tuple(opt.llmeval_endpoint))


def _quantization(value: str | None) -> str | None:
    """--llmeval-quantization: a text as given, or a .gguf file's own statement of its format."""
    if value is None or not value.endswith(".gguf"):
        return value
    from pytest_llmeval.gguf_header import GGUFError, quantization

    path = Path(value)
    if not path.is_file():
        raise pytest.UsageError(f"llmeval: --llmeval-quantization={value}: no such file")
    try:
        found = quantization(path)
    except (GGUFError, OSError) as exc:
        raise pytest.UsageError(f"llmeval: --llmeval-quantization={value}: {exc}") from None
    if found is None:
        raise pytest.UsageError(
            f"llmeval: --llmeval-quantization={value}: the file states no general.file_type; give the format "
            "as text"
        )
    return f"GGUF {found}"


def _client_settings(opt: Any, urls: tuple[str, ...]) -> EndpointSettings:
    """The client's settings for servers at `urls` (--llmeval-concurrency, the timeouts, the retries)."""
    from pytest_llmeval.endpoint import EndpointSettings

    try:
        return EndpointSettings(
            urls=urls,
            api_key_env=opt.llmeval_api_key_env,
            concurrency=opt.llmeval_concurrency,
            timeout_s=opt.llmeval_request_timeout,
            deadline_s=opt.llmeval_deadline,
            max_retries=opt.llmeval_retries,
        )
    except ValueError as exc:
        raise pytest.UsageError(f"llmeval: {exc}") from None


def _adapter_folders(values: Sequence[Path]) -> list[Path]:
    """--adapter values as folders: a Hub id of a peft adapter is downloaded (models.adapter_folder)."""
    from pytest_llmeval.models import adapter_folder

    try:
        return [adapter_folder(v) for v in values]
    except ModelError as exc:
        raise pytest.UsageError(f"llmeval: {exc}") from None


def _criteria(opt: Any) -> Criteria:
    """--llmeval-criteria's rules; under the default, --llmeval-gate and the drop options change them. A
    profile is a standard applied as written: an option that would change one of its rules is refused."""
    profile = CRITERIA[opt.llmeval_criteria]
    given = {
        "--llmeval-gate": opt.llmeval_gate,
        "--llmeval-warn-drop": opt.llmeval_warn_drop,
        "--llmeval-fail-drop": opt.llmeval_fail_drop,
    }
    if profile.name != DEFAULT_CRITERIA.name:
        named = [name for name, value in given.items() if value is not None]
        if named:
            raise pytest.UsageError(
                f"llmeval: {' and '.join(named)} would change a rule of --llmeval-criteria {profile.name}, "
                f"which applies as written ({describe_criteria(profile.to_json())}): leave "
                f"{'it' if len(named) == 1 else 'them'} out, or use --llmeval-criteria default"
            )
        return profile
    criteria = replace(
        profile,
        better_than_base=opt.llmeval_gate or profile.better_than_base,
        warn_drop=profile.warn_drop if opt.llmeval_warn_drop is None else opt.llmeval_warn_drop,
        fail_drop=profile.fail_drop if opt.llmeval_fail_drop is None else opt.llmeval_fail_drop,
    )
    if criteria.fail_drop < criteria.warn_at:
        raise pytest.UsageError(
            f"llmeval: --llmeval-fail-drop {criteria.fail_drop} is below --llmeval-warn-drop "
            f"{criteria.warn_at}: the fail threshold must be the larger drop"
        )
    return criteria


def _roster(config: pytest.Config, adapters: Sequence[Path], served: Sequence[str] = ()) -> Roster:
    """The columns beside the base, from --adapter (each), --llmeval-model, -reference, -gate-model.
    `served`: --adapter values under --llmeval-endpoint, model ids named by themselves."""
    opt = config.option
    try:
        sides = adapter_sides(adapters) if all(a.is_dir() for a in adapters) else {}
        named: dict[str, tuple[Path | str, str, Sequence[str]]] = {
            side: (path, str((meta := adapter_metadata(path))["name"]), meta.get("domain_benchmarks", []))
            for side, path in sides.items()
        }
        if served:
            named = {side: (model_id, model_id, []) for side, model_id in served_sides(served).items()}
        return build_roster(
            adapters=named,
            models=opt.llmeval_model,
            reference=opt.llmeval_reference,
            gate_models=opt.llmeval_gate_model,
            domain=opt.llmeval_domain,
        )
    except (RosterError, ModelError) as exc:
        raise pytest.UsageError(f"llmeval: {exc}") from None


def _prompt_of(config: pytest.Config, roster: Roster) -> PromptOptions:
    """The run's prompt settings: the command line's, and each adapter folder's metadata.json `prompt`
    (a usage error naming the option or the file when one is unusable)."""
    from pytest_llmeval.prompts import (
        Layer,
        PromptError,
        PromptOptions,
        adapter_layer,
        compile_template,
        template_from_file,
    )

    opt = config.option
    try:
        template = None
        if opt.llmeval_prompt_template is not None:
            path = opt.llmeval_prompt_template
            if not path.is_file():
                raise PromptError(f"{path} is not a file")
            template = template_from_file(path)
            compile_template(template)
        adapters = {
            m.side: adapter_layer(adapter_metadata(m.path), m.path)
            for m in roster.adapters
            if m.path is not None and m.path.is_dir()
        }
    except PromptError as exc:
        where = "--llmeval-prompt-template" if "metadata.json" not in str(exc) else "--adapter"
        raise pytest.UsageError(f"llmeval: {where}: {exc}") from None
    return PromptOptions(
        command_line=Layer(system=opt.llmeval_system_prompt, template=template),
        fewshot=opt.llmeval_fewshot,
        per_model=opt.llmeval_prompt_per_model,
        adapters=adapters,
    )


def _generation_cache_dir(config: pytest.Config) -> Path | None:
    """--llmeval-cache-dir, else pytest's cache folder; None with --llmeval-no-cache."""
    opt = config.option
    if opt.llmeval_no_cache:
        if opt.llmeval_cache_dir is not None:
            raise pytest.UsageError(
                "llmeval: --llmeval-no-cache and --llmeval-cache-dir contradict: pass one of them"
            )
        return None
    if opt.llmeval_cache_dir is not None:
        return Path(config.invocation_params.dir / opt.llmeval_cache_dir)
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("llmeval"))
    # -p no:cacheprovider: the folder the cacheprovider uses by default, so that turning it off neither
    # loses the outputs nor moves them elsewhere; --llmeval-no-cache is how to keep none.
    return config.rootpath / ".pytest_cache" / "d" / "llmeval"


def rootdir_from_option(config: pytest.Config) -> str | None:
    """Why pytest's rootdir (or configfile) came from one of our options' values, or None.

    pytest picks its rootdir before plugins define their options, so the value of `--adapter PATH` counts
    as a test path; an adapter kept in its training repository makes that repository the rootdir, with its
    pyproject.toml as configfile, and every row's node id loses its file part. The check asks pytest's
    own rule what it would have chosen from the positional arguments alone.
    """
    opt = config.option
    if getattr(opt, "rootdir", None) or getattr(opt, "inifilename", None):
        return None  # chosen explicitly
    spaced = option_path_values(list(config.invocation_params.args), PATH_OPTIONS)
    if not spaced:
        return None
    try:
        from _pytest.config.findpaths import determine_setup

        positional = [str(a) for a in (getattr(opt, "file_or_dir", None) or [])]
        kwargs: dict[str, Any] = {
            "inifile": None,
            "args": positional,
            "rootdir_cmd_arg": None,
            "invocation_dir": config.invocation_params.dir,
        }
        try:
            found = determine_setup(override_ini=None, **kwargs)
        except TypeError:  # pytest 8: no override_ini argument
            found = determine_setup(**kwargs)
    except Exception:  # pytest's private API moved: no check rather than a false alarm
        return None
    rootdir, inipath = Path(found[0]), found[1]
    if rootdir == config.rootpath and inipath == config.inipath:
        return None
    base = config.invocation_params.dir
    option, value = next(
        (
            (o, v)
            for o, v in spaced
            if config.rootpath == (base / v).resolve() or config.rootpath in (base / v).resolve().parents
        ),
        spaced[0],
    )
    chosen = f"rootdir {config.rootpath}" + (f" and configfile {config.inipath}" if config.inipath else "")
    return (
        f"pytest took its {chosen} from the value of `{option} {value}` (it reads an option's value as a "
        f"test path before plugins define their options), so node ids, -k, --lf and JUnit names would "
        f"change; write `{option}={value}`, or add --rootdir=."
    )


def _embedding_model(name: str | None) -> str | None:
    """--llmeval-embedding-model, checked for its shape here (a folder, or a Hub id fetched on first use)."""
    if name is None:
        return None
    from pytest_llmeval.models import looks_like_hub_id

    if not name.strip() or not (Path(name).expanduser().is_dir() or looks_like_hub_id(name)):
        raise pytest.UsageError(
            f"llmeval: --llmeval-embedding-model '{name}': no such folder (and not a Hugging Face Hub id); "
            "name a sentence-embedding model's folder or Hub id, or leave it out for the shipped "
            "all-MiniLM-L6-v2"
        )
    return name


def _gate_metrics(names: list[str]) -> tuple[str, ...]:
    """--llmeval-gate-metric: evaluation types that score a text, each once, in the order given."""
    from pytest_llmeval.scorers import METRIC_TYPES

    for name in names:
        if name not in METRIC_TYPES:
            raise pytest.UsageError(
                f"llmeval: --llmeval-gate-metric {name!r}: not a metric a row's output is scored by "
                f"(one of: {', '.join(sorted(METRIC_TYPES))})"
            )
    return tuple(dict.fromkeys(names))
