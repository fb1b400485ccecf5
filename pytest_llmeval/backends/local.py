"""Columns on weights in this process: the base with every adapter on one set of weights (peft toggles
them: `LoadedModel.active`), an adapter whose tokenizer added tokens on weights of its own, and each full
model (--llmeval-model), held one at a time. It implements the whole protocol (base.Backend): generation,
the options' log-likelihoods and rolling perplexity, the judge and fluency on its models.

No torch at import: models.py, generation.py and measures.py are imported where used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.backends import Capability, Source, capabilities, production, unavailable
from pytest_llmeval.backends.base import (
    BackendError,
    ColumnRequest,
    Columns,
    GenRequest,
    JudgeRuns,
    MeasureRequest,
    Prompted,
    Result,
    RowPrompt,
)
from pytest_llmeval.backends.weights import LocalWeights, ModelShelf, adapter_of
from pytest_llmeval.cache import (
    FileIndex,
    ModelIdentity,
    adapter_files,
    fingerprint_files,
    identify,
    sha256_json,
)
from pytest_llmeval.models import LLM, LoadedModel, ModelError, ModelSpec, adapter_metadata
from pytest_llmeval.planning import completion_mode
from pytest_llmeval.recall import Recall, nvidia_driver, setup_key
from pytest_llmeval.records import BASE, FluencyRecord
from pytest_llmeval.roster import Roster

if TYPE_CHECKING:
    from pytest_llmeval.benchmark import Case
    from pytest_llmeval.costs import Price
    from pytest_llmeval.run_options import RunOptions


# --llmeval-mixed-batches auto on CPU: whether every column of the shared weights is generated in one batch.
# Measured by bench/mixed_batches.py (BENCHMARKS.md, "Every column in one batch"): on 2 CPU cores one batch
# took 0.97x the time of three passes, the same outputs: slightly faster, so on. (A forward pass on CPU costs
# about its rows; what one batch saves is the per-step overhead.) On a GPU, where a step of a few rows leaves
# the device mostly idle, it is on by design: not measured yet.
MIXED_ON_CPU = True


class LocalBackend:
    """Every column on weights in this process (base.Backend)."""

    source: Source = "local"
    kind = "transformers"  # results.json's `backend`
    capabilities = capabilities("local")
    metered = True
    shapes_output = True

    def production(self, measure: str | None) -> Capability | None:
        return production(self.source, measure)

    def unavailable(self, measure: str | None, kind: str) -> str | None:
        return unavailable(self.source, measure, kind)

    def __init__(
        self, options: RunOptions, roster: Roster, columns: Sequence[str], shelf: ModelShelf
    ) -> None:
        self.options = options
        self.roster = roster
        self.columns = list(columns)
        self.shelf = shelf
        self.weights = LocalWeights(options, roster, columns)
        self._shared_identity: ModelIdentity | None = None
        self._identities: dict[str, ModelIdentity] = {}
        self._recalled: Recall | None = None

    # --- what the previous run worked out (recall.py) -----------------------------------------------------

    def recall(self) -> Recall:
        """This setup's recall file (recall.py): the tokenizer's, config's and placement's answers of an
        earlier run, so that a fully cached run loads none of them (transformers imports torch)."""
        if self._recalled is None:
            self._recalled = Recall(self._recall_path())
        return self._recalled

    def _recall_path(self) -> Path | None:
        root = self.options.cache_dir
        if root is None:  # --llmeval-no-cache: nothing kept between runs
            return None
        from pytest_llmeval import models

        spec = self.options.spec
        try:
            base = models.preflight(spec)
            key = setup_key(
                base=Path(base.path),
                adapters=models.adapter_sides(spec.adapters),
                models={
                    m.side: Path(
                        models.resolve_base(ModelSpec(base_model=m.source), f"--llmeval-model {m.name}").path
                    )
                    for m in self.roster.models
                    if m.side in self.columns
                },
                options={
                    "base_model": spec.base_model,
                    "adapters": [str(a) for a in spec.adapters],
                    "device": spec.device,
                    "dtype": spec.dtype,
                    # Under --llmeval-device auto a worker's number picks its GPU (models.gpu_for_worker);
                    # without a GPU driver every worker is on the CPU and they share one recall file.
                    "worker": spec.worker if spec.device != "cpu" and nvidia_driver() else None,
                },
                index=FileIndex(models.cache_dir() / "file-hashes.json"),
            )
        except (OSError, ModelError):
            return None  # the run finds out itself, and says so
        return root / "recall" / f"{key}.json"

    def _facts(self) -> dict[str, Any]:
        """What groups and mixes decide on: which adapters have a tokenizer of their own, which ones weights
        of their own (their tokenizer added tokens), the device's type, whether peft can mix the adapters."""
        facts = self.recall().get("facts", "setup")
        if not isinstance(facts, dict):
            loaded = self.weights.loaded()
            facts = {
                "own_tokenizer": sorted(loaded.tokenizers),
                "apart": sorted(loaded.apart),
                "device_type": loaded.device.type,
                "mixes_adapters": loaded.mixes_adapters(),
                "base_name": loaded.base.name,
            }
            self.recall().put("facts", "setup", facts)
        return facts

    def _own_weights(self, facts: Mapping[str, Any]) -> list[str]:
        """model_columns(), from the facts: known before the weights load."""
        return [c for c in self.columns if c in facts["apart"]] + [m.side for m in self.roster.models]

    def keep(self) -> None:
        """At the end of this process: what it worked out, for the next run (recall.py)."""
        if self._recalled is not None:
            self._recalled.save()

    # --- the weights -------------------------------------------------------------------------------------

    # --- the protocol ------------------------------------------------------------------------------------

    def groups(self, columns: Sequence[str], same_prompt: Callable[[str, str], bool]) -> list[list[str]]:
        """The shared weights' columns prompted alike with its tokenizer share a group (one per distinct
        prompt); an adapter with a tokenizer of its own, and each column on weights of its own, go alone."""
        facts = self._facts()
        own = self._own_weights(facts)
        shared = [c for c in columns if c not in own]
        groups: list[list[str]] = []
        for c in [c for c in shared if adapter_of(c) not in facts["own_tokenizer"]]:
            group = next((g for g in groups if same_prompt(c, g[0])), None)
            if group is None:
                groups.append([c])
            else:
                group.append(c)
        groups += [[c] for c in shared if adapter_of(c) in facts["own_tokenizer"]]
        return groups + [[c] for c in own if c in columns]

    def prompt(self, columns: Sequence[str], rows: Sequence[RowPrompt]) -> dict[str, Prompted | str]:
        """Each row's prompt rendered with the group's tokenizer and fitted to its context with `room`
        tokens after it (--llmeval-context-overflow); a row that cannot fit gets why. Only the shared
        tokenizer's cuts are reported as the row's (truncated): they are the base's prompt. Recalled from
        an earlier run of this setup when it rendered every one of these rows for these columns."""
        recall = self.recall()
        keys = {row.node: self._prompt_key(columns, row) for row in rows}
        known = {node: recall.get("prompts", key) for node, key in keys.items()}
        if all(isinstance(v, dict) for v in known.values()):
            return {
                node: str(v["error"])
                if "error" in v
                else Prompted(v["prompt"], v["prompt"], truncated=v["truncated"])
                for node, v in known.items()
            }
        out = self._prompt(columns, rows)
        for node, made in out.items():
            kept = (
                {"error": made}
                if isinstance(made, str)
                else {"prompt": made.prompt, "truncated": made.truncated}
            )
            recall.put("prompts", keys[node], kept)
        return out

    def _prompt_key(self, columns: Sequence[str], row: RowPrompt) -> str:
        """Everything a row's prompt is rendered and fitted from, beside the setup (recall.setup_key)."""
        case = row.case
        return sha256_json(
            {
                "columns": list(columns),
                "where": row.where,
                "instruction": case.instruction,
                "input": case.input,
                "completion": completion_mode(case),
                "spec": row.spec.to_json(),
                "examples": [e.to_json() for e in row.examples],
                "room": row.room,
                # What follows a measured row's prompt takes room: its options, each with what it is
                # followed by (a choice in the context: the row's continuation).
                "after": _after_prompt(case) if row.room is None else None,
                "overflow": self.options.context_overflow,
            }
        )

    def _prompt(self, columns: Sequence[str], rows: Sequence[RowPrompt]) -> dict[str, Prompted | str]:
        from pytest_llmeval.generation import build_prompt, context_length, fit_text, raw_prompt
        from pytest_llmeval.prompts import PromptError

        loaded = self.weights.model_of(columns[0])
        own = loaded is self.weights.shared
        context = context_length(loaded.config, loaded.tokenizer) or 2**62
        out: dict[str, Prompted | str] = {}
        for row in rows:
            case = row.case
            if row.room is None:  # room after the prompt for the longest option: each follows the same prompt
                reserved = "the longest choice"
                room = max(
                    len(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])
                    for text in _after_prompt(case)
                )
            else:
                reserved, room = "max_new_tokens", row.room

            def render(
                text: str, case: Case = case, tok: Any = loaded.tokenizer, row: RowPrompt = row
            ) -> str:
                if completion_mode(case):
                    return raw_prompt(tok, text)
                return build_prompt(
                    tok,
                    case.instruction,
                    text,
                    system=row.spec.system,
                    examples=list(row.examples),
                    template=row.spec.template,
                )

            try:
                prompt, truncated = fit_text(
                    loaded.tokenizer,
                    render,
                    case.input,
                    max_new_tokens=room,
                    context=context,
                    policy=self.options.context_overflow,
                    reserved=reserved,
                )
            except (ValueError, PromptError) as exc:
                out[row.node] = f"{row.where}: {exc}" if own else f"{row.where}: {exc} ({loaded.label})"
                continue
            out[row.node] = Prompted(prompt=prompt, shown=prompt, truncated=truncated if own else None)
        return out

    def generate(self, column: str, requests: Sequence[GenRequest]) -> list[Result]:
        """One batch through generation.generate, the column's adapter on (greedy, or sampled at the
        requests' one temperature, each with its seed); the tokens each request read and wrote."""
        return self._generated(self.weights.model_of(column), requests, side=adapter_of(column))

    def mixes(self, columns: Sequence[str]) -> bool:
        """Whether a group's columns are generated in one batch (--llmeval-mixed-batches; base.MixesColumns):
        several columns on the shared weights and their tokenizer, every adapter plain LoRA; under `auto`, on
        a GPU (on CPU: MIXED_ON_CPU)."""
        mode = self.options.mixed_batches
        if mode == "off" or len(columns) < 2:
            return False
        facts = self._facts()
        if any(c in self._own_weights(facts) for c in columns):
            return False
        own_tokenizer = any(adapter_of(c) in facts["own_tokenizer"] for c in columns)
        if own_tokenizer or not facts["mixes_adapters"]:
            return False
        return mode == "on" or facts["device_type"] == "cuda" or MIXED_ON_CPU

    def generate_columns(self, requests: Sequence[ColumnRequest]) -> list[Result]:
        """Several columns of one group (mixes) in one batch: each row through its column's adapter (peft's
        mixed-adapter batches), the rest as generate."""
        loaded = self.weights.model_of(requests[0][0])
        adapters = loaded.adapter_names([adapter_of(column) for column, _ in requests])
        return self._generated(loaded, [r for _, r in requests], adapters=adapters)

    def _generated(
        self,
        loaded: LoadedModel,
        requests: Sequence[GenRequest],
        *,
        side: str | None = None,
        adapters: list[str] | None = None,
    ) -> list[Result]:
        """`requests` in one generate() call: with adapter `side` on, or each row through its own adapter
        (`adapters`, peft names; the model's adapter setting is then not read)."""
        import contextlib

        from pytest_llmeval.generation import Sampling, Tokens, generate

        sampled = [r.sampled for r in requests]
        counts = Tokens()
        try:
            with loaded.active(side) if adapters is None else contextlib.nullcontext():
                texts = generate(
                    loaded.model,
                    loaded.tokenizer,
                    [r.prompted.prompt for r in requests],
                    max_new_tokens=[r.limit for r in requests],
                    batch_size=len(requests),
                    token_budget=self.options.token_budget,
                    sampling=None
                    if sampled[0] is None
                    else Sampling(temperature=sampled[0][0], seeds=[s[1] for s in sampled if s is not None]),
                    strip=False,
                    counts=counts,
                    adapters=adapters,
                    stops=[r.stop for r in requests],
                )
        except ModelError as exc:  # the weights did not load (on the first cache miss): no row can run
            raise BackendError(str(exc)) from None
        except Exception:  # out of memory, say: release what the failed forward held before the halves
            if loaded.device.type == "cuda":
                import torch

                torch.cuda.empty_cache()
            raise
        return [
            Result(value=text, tokens=(read, wrote))
            for text, read, wrote in zip(texts, counts.prompt, counts.generated, strict=True)
        ]

    def loglikelihood(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        """Every option's log-likelihood after each row's prompt, every column of the group in one call."""
        from pytest_llmeval.measures import choice_likelihoods

        loaded = self.weights.model_of(columns[0])
        prompts = [r.prompted.prompt for r in requests if r.prompted is not None]
        try:
            measured = choice_likelihoods(
                loaded, [r.row.case for r in requests], columns=list(columns), prompts=prompts
            )
        except ModelError as exc:
            raise BackendError(str(exc)) from None
        return {c: [Result(value=v, tokens=(None, None)) for v in values] for c, values in measured.items()}

    def loglikelihood_rolling(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        """The perplexity of each row's text under every column of the group; a window's rows share calls."""
        from pytest_llmeval.measures import rolling_perplexities, text_perplexities
        from pytest_llmeval.scorers import perplexity as ppl_scorer

        loaded = self.weights.model_of(columns[0])
        out: dict[str, dict[int, Result]] = {c: {} for c in columns}
        # Rows by how their texts are windowed: a sliding window (max_length, stride), or lm-eval's rolling.
        by_window: dict[tuple[bool, int | None, int | None], list[int]] = {}
        for i, r in enumerate(requests):
            config = r.row.case.evaluation_config
            by_window.setdefault((ppl_scorer.rolling(config), *ppl_scorer.window(config)), []).append(i)
        for (rolling, max_length, stride), group in by_window.items():
            cases = [requests[i].row.case for i in group]
            texts = [getattr(c, ppl_scorer.text_field(c.evaluation_config)) for c in cases]
            try:
                measured = (
                    rolling_perplexities(loaded, texts, columns=list(columns))
                    if rolling
                    else text_perplexities(loaded, texts, max_length, stride, columns=list(columns))
                )
            except ModelError as exc:
                raise BackendError(str(exc)) from None
            for column, values in measured.items():
                for i, value in zip(group, values, strict=True):
                    out[column][i] = Result(value=value, tokens=(None, None))
        return {c: [found[i] for i in range(len(requests))] for c, found in out.items()}

    def judge(self, cases: Sequence[Case], outputs: Sequence[Mapping[str, str]]) -> JudgeRuns:
        """--llmeval-judge-model loaded here, else the base with its adapters off."""
        from pytest_llmeval.measures import judge_runs

        name = self.options.judge_model
        judge = self.weights.loaded() if name is None else self.shelf.named(name)
        return judge_runs(
            judge,
            name or f"{judge.base.name} (the base model, adapter off)",
            cases,
            outputs,
            batch_size=self.options.batch_size,
            context_overflow=self.options.context_overflow,
        )

    def fluency(
        self, column: str, references: Sequence[str], texts: Sequence[str | None]
    ) -> list[FluencyRecord]:
        """The QA fine-tuning document's fix: each model's own outputs, measured by that same model (base
        outputs by the base, an adapter's by that adapter, a full model's by itself)."""
        from pytest_llmeval.measures import fluency

        if column in self.weights.model_columns():
            scorer = self.weights.column_model(column)
            on = column if column in scorer.adapters else None
            label = f"{scorer.label} (the model itself)"
        else:
            on = adapter_of(column)
            scorer = self.weights.loaded().for_column(on)
            label = (
                f"{scorer.base.name} (the base model itself)"
                if on is None
                else f"{scorer.base.name} + {column} (the adapter itself)"
            )
        return fluency(
            scorer,
            references,
            texts,
            column=on,
            scorer_name=label,
            max_length=self.options.ppl_max_length,
            stride=self.options.ppl_stride,
            batch_size=self.options.ppl_batch_size,
        )

    def identity(self, column: str, index: FileIndex) -> ModelIdentity | None:
        """A column's identity in the generation cache. An adapter's holds that adapter's files only, and a
        full model's its own files: changing one adapter regenerates that adapter's column and nothing else.
        OSError: a file could not be read (the cache is then off). Recalled from an earlier run of this
        setup, which worked it out from the same files, tokenizer and placement."""
        found = self.recall().get("identity", column)
        if isinstance(found, dict):
            return ModelIdentity(**found)
        identity = self._identity(column, index)
        if identity is not None:
            self.recall().put("identity", column, asdict(identity))
        return identity

    def _identity(self, column: str, index: FileIndex) -> ModelIdentity | None:
        if self._shared_identity is None:
            self._shared_identity = identify(self.weights.loaded(), index)
        shared = self._shared_identity
        if adapter_of(column) is None:  # the base, or the base prompted as an adapter declares
            return replace(shared, adapter=None)  # kept on the base side: no adapter's files in its key
        if column not in self._identities:
            if column in self.weights.loaded().adapters:
                files = adapter_files(self.weights.loaded().adapters[column])
                self._identities[column] = replace(shared, adapter=fingerprint_files(files, index))
            else:
                self._identities[column] = identify(self.weights.model_of(column), index)
        return self._identities[column]

    def price(self, column: str) -> Price | None:
        return None  # time is what weights here cost; costs.side_cost counts it

    # --- the fixtures' handles ---------------------------------------------------------------------------

    def handle(self, column: str) -> LLM:
        """A generation handle on one column (the `llm` fixtures): the adapters share the one loaded model."""
        opts = self.options
        if column == BASE:
            return LLM(
                self.weights.loaded(),
                adapter=False,
                max_new_tokens=opts.max_new_tokens,
                batch_size=opts.batch_size,
            )
        member = self.roster.member(column)
        if member.kind != "adapter":  # a full model, kept for the fixture's users (called at any time)
            model = self.weights.column_model(column, keep=True)
            return LLM(model, adapter=False, max_new_tokens=opts.max_new_tokens, batch_size=opts.batch_size)
        loaded = self.weights.loaded()
        if column in loaded.apart:  # its tokenizer added tokens: weights of its own
            loaded = self.weights.column_model(column, keep=True)
        return LLM(loaded, adapter=column, max_new_tokens=opts.max_new_tokens, batch_size=opts.batch_size)

    # --- provenance --------------------------------------------------------------------------------------

    def base_name(self) -> str | None:
        if self.weights.shared is not None:
            return self.weights.shared.base.name
        facts = self.recall().get("facts", "setup")
        return str(facts["base_name"]) if isinstance(facts, dict) else None

    def evaluated_names(self) -> tuple[str | None, str | None]:
        """(adapter, base) as history names this run, without loading: the adapter's metadata name, else
        the base model's (None when it cannot be resolved: meta() names no base model either)."""
        from pytest_llmeval.models import resolve_base

        spec = self.options.spec
        if spec.adapter is not None:
            return str(adapter_metadata(spec.adapter)["name"]), None
        try:
            return None, resolve_base(spec).name
        except ModelError:
            return None, None

    def describe(self, entry: dict[str, Any], column: str) -> None:
        """A column's results.json `models` entry: provenance, weights fingerprint, an adapter's version and
        parameter efficiency; for a column this process has not read (LocalWeights.knows), as an earlier run
        of this setup described it."""
        known = self.weights.knows(column)
        if not known:
            found = self.recall().get("describe", column)
            if isinstance(found, dict):
                entry |= found
                return
        before = dict(entry)
        self._describe(entry, column)
        if known:  # never a part: an entry without the tokenizer would be served to every later run
            self.recall().put(
                "describe", column, {k: v for k, v in entry.items() if k not in before or before[k] != v}
            )

    def _describe(self, entry: dict[str, Any], column: str) -> None:
        self.weights.provenance(entry, column)
        entry["fingerprint"] = self.weights.fingerprint(column)
        if entry["kind"] == "adapter":
            entry["version"] = adapter_metadata(Path(str(entry["source"])))["version"]
            if self.weights.shared is not None:
                from pytest_llmeval.models import lora_b_all_zero, parameter_efficiency

                entry["parameter_efficiency"] = parameter_efficiency(
                    Path(str(entry["source"])), self.weights.shared.base.path
                )
                # B = 0 (peft's initialisation, a save before training): the adapter changes nothing.
                # Read from the file: the same whether or not this run loaded the weights.
                zero = lora_b_all_zero(Path(str(entry["source"])))
                if zero is not None:
                    entry["lora_b_all_zero"] = zero

    def described(self) -> bool:
        """The `models` entries are final (memoised): every column is known to this process
        (LocalWeights.knows) or was described by an earlier run of this setup."""
        return all(
            self.weights.knows(c) or isinstance(self.recall().get("describe", c), dict) for c in self.columns
        )

    def load_seconds(self) -> dict[str, float]:
        return self.weights.load_seconds()

    def run_meta(self, meta: dict[str, Any], hardware: dict[str, Any] | None) -> dict[str, Any]:
        """results.json's model, hardware and inference settings as this process loaded them (`hardware`:
        worked out before, kept by the caller)."""
        if self.weights.shared is None:
            found = self.recall().get("facts", "run_meta")
            if not isinstance(found, dict):
                return meta
            # Nothing loaded: as an earlier run of this setup said, but for what this run loaded (a judge).
            meta |= {k: v for k, v in found.items() if k != "inference_config"}
            meta["hardware"] = dict(hardware if hardware is not None else found["hardware"])
            meta["inference_config"] |= found["inference_config"]
            meta["inference_config"]["weights_loaded"] = any(
                m.weights_loaded for m in [*self.weights.column_models.values(), *self.shelf.models.values()]
            )
            return meta
        import os
        import platform
        import sys

        import torch
        import transformers

        from pytest_llmeval.generation import template_info

        loaded = self.weights.shared
        device = loaded.device
        meta["base_model"] = loaded.base.name
        meta["base_model_note"] = loaded.base.note
        meta["quantization"] = loaded.base.quantization
        meta["adapter_name"] = None if loaded.adapter_meta is None else loaded.adapter_meta["name"]
        meta["adapter_version"] = None if loaded.adapter_meta is None else loaded.adapter_meta["version"]
        if hardware is None:
            device_name = (
                torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
            )
            hardware = {
                "device": str(device),
                "device_name": device_name or platform.machine(),
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
                "python": sys.version.split()[0],
                "torch": str(torch.__version__),  # a TorchVersion, which execnet cannot send
                "transformers": str(transformers.__version__),
            }
        meta["hardware"] = dict(hardware)
        meta["inference_config"]["device"] = str(device)
        meta["inference_config"]["dtype"] = str(loaded.dtype).removeprefix("torch.")
        meta["inference_config"]["prompt_template"] = template_info(loaded.tokenizer)
        # False when every output and measurement came from the generation cache: no weights were read.
        meta["inference_config"]["weights_loaded"] = loaded.weights_loaded or any(
            m.weights_loaded for m in [*self.weights.column_models.values(), *self.shelf.models.values()]
        )
        kept = (
            "base_model",
            "base_model_note",
            "quantization",
            "adapter_name",
            "adapter_version",
            "hardware",
        )
        self.recall().put(
            "facts",
            "run_meta",
            {k: meta[k] for k in kept}
            | {
                "inference_config": {
                    k: meta["inference_config"][k] for k in ("device", "dtype", "prompt_template")
                }
            },
        )
        return meta

    def peak_memory(self, memory: dict[str, Any]) -> dict[str, Any]:
        """On a GPU, the peak bytes torch allocated and reserved, beside the process's resident set."""
        loaded = self.weights.shared
        if loaded is not None and loaded.device.type == "cuda":
            import torch

            memory["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated(loaded.device) / 2**20
            memory["cuda_max_reserved_mb"] = torch.cuda.max_memory_reserved(loaded.device) / 2**20
        return memory


def _after_prompt(case: Case) -> list[str]:
    """What follows a measured row's prompt, per option (its scorer's options and pairs): a choice, or a
    choice and the continuation after it (a choice in the context)."""
    from pytest_llmeval.scorers import SCORERS

    spec = SCORERS[case.evaluation_type]
    assert spec.options is not None and spec.pair is not None, case.evaluation_type
    return [
        "".join(spec.pair(case.evaluation_config, "", o))
        for o in spec.options(case.expected_output, case.evaluation_config)
    ]
