"""results.json's metadata of this process's run: who it evaluates, its models (kind, source, version,
fingerprint, provenance), the hardware, the inference settings and what was spent. The backend describes its
own columns and settings (Backend.describe, run_meta); this puts the document's parts together. Under xdist
every row's report carries it, so what is costly is worked out once."""

from __future__ import annotations

import sys
from typing import Any

from pytest_llmeval.evaluation.gating import GateRunner
from pytest_llmeval.evaluation.ledger import Ledger
from pytest_llmeval.evaluation.producer import Producer
from pytest_llmeval.evaluation.prompting import Prompter
from pytest_llmeval.generation import DecodingConfig
from pytest_llmeval.history import Identity
from pytest_llmeval.planning import RowPlan, RunPlan
from pytest_llmeval.run_options import RunOptions


class Provenance:
    """The metadata builder: one per process."""

    def __init__(
        self,
        options: RunOptions,
        plan: RunPlan,
        rowplan: RowPlan,
        prompter: Prompter,
        producer: Producer,
        ledger: Ledger,
        gating: GateRunner,
    ) -> None:
        self.options = options
        self.plan = plan
        self.rowplan = rowplan
        self.prompter = prompter
        self.producer = producer
        self.ledger = ledger
        self.gating = gating
        self.subset: dict[str, Any] | None = None  # --llmeval-sample: which rows ran (seed, sizes, digest)
        self._models_meta: list[dict[str, Any]] | None = None  # models_meta(), once the model is loaded
        self._hardware: dict[str, Any] | None = None  # meta()'s hardware, worked out once
        self._identity: Identity | None = (
            None  # identity(), worked out once (a hub id's lookup reads the disk)
        )

    def identity(self) -> Identity:
        """Who this run evaluates, as its results.json names it (history.identity_of), without loading."""
        if self._identity is None:
            self._identity = self.producer.backend().evaluated_names()
        return self._identity

    @property
    def backend_kind(self) -> str:
        """Where outputs came from: "transformers" (in this process), "endpoint" (--llmeval-endpoint) or
        "predictions" (--llmeval-predictions): comparisons across backends compare the backends too."""
        return self.producer.backend().kind

    def models_meta(self) -> list[dict[str, Any]]:
        """results.json's `models`: every column with its kind, source, version and weights fingerprint
        (cache.fingerprint_files of the files it loads; None until this process loaded them). Worked out
        once the model is loaded: under xdist meta() runs for every row's report."""
        if self._models_meta is not None:
            return [dict(entry) for entry in self._models_meta]
        backend = self.producer.backend()
        spec = self.options.spec
        base: dict[str, Any] = {
            "source": backend.base_name() or spec.base_model or "embedded:SmolLM2-135M-Instruct"
        }
        entries = self.plan.roster.to_json(base)
        for entry in entries:
            column = str(entry["column"])
            entry["backend"] = backend.kind
            if column in self.gating.training_logs:
                entry["training"] = self.gating.training_meta(column)
            backend.describe(entry, column)
        if backend.described():
            self._models_meta = [dict(entry) for entry in entries]
        return entries

    def spent(self) -> dict[str, Any]:
        """What this process spent beside the rows' own costs (results.json `cost`, costs.merge_spent): the
        seconds loading each column's weights, the caps, and why it stopped sending rows, if it did."""
        return {
            "load_s": self.producer.backend().load_seconds(),
            "caps": self.ledger.budget().caps(),
            "stopped": self.ledger.stopped,
            "memory": self._peak_memory(),
        }

    def _peak_memory(self) -> dict[str, Any]:
        """This process's peak memory so far (the adaptation document's §2, of the evaluation itself): its
        resident set on the CPU, and on a GPU the peak bytes torch allocated and reserved (the backend's)."""
        import resource

        # ru_maxrss is in kilobytes on Linux (bytes on macOS).
        scale = 1 if sys.platform == "darwin" else 1024
        memory: dict[str, Any] = {
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20
        }
        return self.producer.backend().peak_memory(memory)

    def meta(self) -> dict[str, Any]:
        """Model, hardware and inference settings for results.json (from this process's backend)."""
        from pytest_llmeval import embeddings

        spec = self.options.spec
        decoding = DecodingConfig(max_new_tokens=self.options.max_new_tokens).to_json()
        meta: dict[str, Any] = {
            "adapter": None if spec.adapter is None else str(spec.adapter),
            "base_model": spec.base_model or "embedded:SmolLM2-135M-Instruct",
            "predictions_file": None if self.options.predictions is None else str(self.options.predictions),
            "subset": self.subset,
            # Recorded when a row used it (results.py); described, not loaded, here.
            "embedding_model": embeddings.describe(self.options.embedding_model),
            "spent": self.spent(),
            "sequential": self.rowplan.sequential_meta(),
            "criteria": self.options.gate_options.criteria.to_json(),  # the rules the gates applied
            "gate_metrics": list(self.options.gate_options.gate_metrics),  # in the gates' Holm family
            "inference_config": {
                "decoding": decoding,
                "max_new_tokens_per_row": "evaluation_config.max_new_tokens overrides the default",
                "batch_size": self.options.batch_size,
                "token_budget": self.options.token_budget,
                "context_overflow": self.options.context_overflow,
                "batch_retries": list(self.producer.retries),
                "device": spec.device,
                "dtype": spec.dtype,
                "cache": self.producer.cache_info(),
                "backend": self.backend_kind,
                "prompt": self.prompter.prompts_meta(),
            },
        }
        if self.plan.roster.members:
            meta["models"] = self.models_meta()
            # The top level's adapter (LocoLLM's document): the first adapter's, as results.json's top.
            first = next((m for m in meta["models"] if m.get("parameter_efficiency")), None)
            meta["parameter_efficiency"] = None if first is None else first["parameter_efficiency"]
            adapters = self.plan.roster.adapters
            meta["training"] = self.gating.training_meta(adapters[0].side) if adapters else None
        meta = self.producer.backend().run_meta(meta, self._hardware)
        if "hardware" in meta:
            self._hardware = meta["hardware"]
        return meta
