"""The weights behind local columns: `LocalWeights` holds the base with every adapter on one set of weights
(peft toggles them), an adapter whose tokenizer added tokens on weights of its own, and each full model
(--llmeval-model), one at a time, with their fingerprints and provenance; `ModelShelf` holds the models a
run names besides its columns (a judge, an external perplexity model).

No torch at import: models.py loads them where used.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.backends.base import BackendError
from pytest_llmeval.cache import FileIndex, adapter_files, fingerprint_files, model_files
from pytest_llmeval.models import LoadedModel, ModelError, ModelSpec
from pytest_llmeval.records import BASE, variant_of
from pytest_llmeval.roster import Roster

if TYPE_CHECKING:
    from pytest_llmeval.run_options import RunOptions


def adapter_of(column: str) -> str | None:
    """The adapter a column runs with on the shared weights: None for the base and its variants."""
    return None if column == BASE or variant_of(column) else column


class ModelShelf:
    """Models other than the columns (a judge's, a fluency scorer's), loaded by name once."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.models: dict[str, LoadedModel] = {}

    def named(self, name: str) -> LoadedModel:
        if name not in self.models:
            from pytest_llmeval import models

            spec = self.spec
            self.models[name] = models.load(
                ModelSpec(
                    base_model=name,
                    device=spec.device,
                    dtype=spec.dtype,
                    threads=spec.threads,
                    worker=spec.worker,
                )
            )
        return self.models[name]


class LocalWeights:
    """The weights held in this process: the shared weights (the base, every adapter on them, toggled by
    peft) loaded once, and the columns on weights of their own, held one at a time."""

    def __init__(self, options: RunOptions, roster: Roster, columns: Sequence[str]) -> None:
        self.options = options
        self.roster = roster
        self.columns = list(columns)
        self._loaded: LoadedModel | None = None
        self._load_error: ModelError | None = None
        self.column_models: dict[str, LoadedModel] = {}  # --llmeval-model columns held now
        self._column_errors: dict[str, str] = {}  # own-weights columns that cannot load
        self._kept: set[str] = set()  # held for the llm_models fixture
        self.load_s: dict[str, float] = {}  # loading seconds of released column models
        # Each own-weights column's provenance, taken when it loads: it may be released since.
        self._column_provenance: dict[str, dict[str, Any]] = {}
        self._fingerprints: dict[str, str | None] = {}

    def loaded(self) -> LoadedModel:
        """The shared weights, loaded on first use; a failed load is remembered, not retried for every row."""
        if self._load_error is not None:
            raise self._load_error
        if self._loaded is None:
            from pytest_llmeval import models

            try:
                self._loaded = models.load(self.options.spec)
            except ModelError as exc:
                self._load_error = exc
                raise
        return self._loaded

    @property
    def shared(self) -> LoadedModel | None:
        """The shared weights if this process loaded them (their tokenizer at least), else None."""
        return self._loaded

    def model_columns(self) -> list[str]:
        """The columns on weights of their own (column_model): the adapters whose tokenizer added tokens
        (known once the model is loaded), then the --llmeval-model columns, in the order given."""
        apart = [] if self._loaded is None else [c for c in self.columns if c in self._loaded.apart]
        return apart + [m.side for m in self.roster.models]

    def column_model(self, side: str, *, keep: bool = False) -> LoadedModel:
        """The weights of a column with weights of its own: a --llmeval-model, or an adapter whose tokenizer
        added tokens. Held one at a time: loading the next releases the others, so a 7B model and two small
        ones never sit on one GPU together (keep: a fixture holds it for good)."""
        if side in self._column_errors:
            raise ModelError(self._column_errors[side])
        if side not in self.column_models:
            from pytest_llmeval import models

            for other in [o for o in self.column_models if o not in self._kept]:
                released = self.column_models.pop(other)
                self.load_s[other] = self.load_s.get(other, 0.0) + released.load_seconds
                on_cuda = released.device.type == "cuda"
                del released  # the last reference: the weights go now, before the cache is emptied
                if on_cuda:
                    import torch

                    torch.cuda.empty_cache()
            member = self.roster.member(side)
            spec = self.options.spec
            try:
                if member.kind == "adapter":  # one whose tokenizer added tokens (models.load_apart)
                    self.column_models[side] = models.load_apart(spec, side)
                else:
                    self.column_models[side] = models.load(
                        ModelSpec(
                            base_model=member.source,
                            device=spec.device,
                            dtype=spec.dtype,
                            threads=spec.threads,
                            worker=spec.worker,
                        ),
                        option=f"--llmeval-model {member.name}",
                    )
            except ModelError as exc:
                self._column_errors[side] = str(exc)
                raise
            provenance: dict[str, Any] = {}
            self.provenance(provenance, side)
            self._column_provenance[side] = provenance
        if keep:
            self._kept.add(side)
        return self.column_models[side]

    def model_of(self, column: str) -> LoadedModel:
        """The weights (or the tokenizer view of them) a column runs on. A column on weights of its own that
        cannot load is BackendError (its rows fail, with why); the shared weights' ModelError is raised as
        it is: every row needs them, and the plugin stops the run (items.CaseItem.runtest)."""
        if column in self.model_columns():
            try:
                return self.column_model(column)
            except ModelError as exc:
                raise BackendError(str(exc)) from None
        return self.loaded().for_column(adapter_of(column))

    def provenance(self, entry: dict[str, Any], column: str) -> None:
        """A column's tokenizer (BOS and EOS handling, chat template hash) and Hub revision, once loaded."""
        from pytest_llmeval.generation import tokenizer_provenance
        from pytest_llmeval.models import revision_of

        if column in self._column_provenance:
            entry |= self._column_provenance[column]
            return
        loaded = self.column_models.get(column) if column in self.model_columns() else self._loaded
        if loaded is None:
            return
        tokenizer = loaded.tokenizer_of(adapter_of(column))
        own = column in loaded.tokenizers or (loaded is not self._loaded and column in loaded.adapters)
        # "adapter": the adapter's folder shipped the tokenizer its prompts were built with.
        entry["tokenizer"] = tokenizer_provenance(tokenizer) | {"source": "adapter" if own else "model"}
        source = loaded.adapters.get(column) if column in loaded.adapters else loaded.base.path
        entry["revision"] = None if source is None else revision_of(source)

    def knows(self, column: str) -> bool:
        """Whether this process read what a column is described from: the shared weights' tokenizer for a
        column on them, the column's own for one on weights of its own (loaded here at some point). A cached
        run may load the shared tokenizer (a prompt of theirs to render) and never a full model's (its
        prompts recalled, its outputs stored): that column's description is then the recall's."""
        if self._loaded is None:
            return False
        return column in self._column_provenance or column not in self.model_columns()

    def fingerprint(self, column: str) -> str | None:
        """The content fingerprint of a column's own files: the base folder, an adapter's files, or a full
        model's folder. Read through the machine-wide file-hash index, so a large model is hashed once."""
        if self._loaded is None:
            return None
        if column not in self._fingerprints:
            from pytest_llmeval import models

            index = FileIndex(models.cache_dir() / "file-hashes.json")
            try:
                if column == BASE:
                    files = model_files(Path(self._loaded.base.path))
                elif column in self._loaded.adapters:
                    files = adapter_files(self._loaded.adapters[column])
                else:
                    source = self.roster.member(column).source
                    folder = models.resolve_base(
                        ModelSpec(base_model=source), f"--llmeval-model {column}"
                    ).path
                    files = model_files(Path(folder))
                self._fingerprints[column] = fingerprint_files(files, index)
            except (OSError, ModelError):
                self._fingerprints[column] = None
        return self._fingerprints[column]

    def load_seconds(self) -> dict[str, float]:
        """Seconds spent loading each column's weights in this process (the shared ones under the base)."""
        loads = dict(self.load_s)
        if self._loaded is not None and self._loaded.weights_loaded:
            # The shared weights: the base's, with every adapter on them.
            loads[BASE] = loads.get(BASE, 0.0) + self._loaded.load_seconds
        for column, held in self.column_models.items():
            loads[column] = loads.get(column, 0.0) + held.load_seconds
        return loads
