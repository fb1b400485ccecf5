"""Columns read from --llmeval-predictions: outputs made elsewhere, scored here; nothing is loaded or
generated. Its `generate` answers each request with the saved text: `prediction` plays the adapter when
`base_prediction` plays the base, else the base. A row's list of predictions is its samples (pass@k).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.backends import Capability, Source, capabilities, production, unavailable
from pytest_llmeval.backends.base import (
    BackendError,
    Columns,
    GenRequest,
    JudgeRuns,
    MeasureRequest,
    Prompted,
    Result,
    RowPrompt,
)
from pytest_llmeval.benchmark import Benchmark, Prediction, load_predictions
from pytest_llmeval.planning import RowRef, sampling_of
from pytest_llmeval.records import ADAPTER, BASE, FluencyRecord
from pytest_llmeval.roster import Member, Roster

if TYPE_CHECKING:
    from pytest_llmeval.benchmark import Case
    from pytest_llmeval.cache import FileIndex, ModelIdentity
    from pytest_llmeval.costs import Price


def predicts(prediction: Prediction, benchmark: str, row_id: str) -> bool:
    """A saved prediction is for a row: same id, and its optional `benchmark` is a suffix of the file's."""
    return prediction.id == row_id and (
        # A path suffix: "bench.jsonl" names "data/bench.jsonl", not "data/other_bench.jsonl".
        prediction.benchmark is None
        or benchmark == prediction.benchmark
        or benchmark.endswith("/" + prediction.benchmark)
    )


class SavedBackend:
    """Every column a field of a saved predictions file (base.Backend)."""

    source: Source = "saved"
    kind = "predictions"  # results.json's `backend`
    capabilities = capabilities("saved")
    metered = False  # nothing is spent: the outputs were made and paid for elsewhere
    shapes_output = False  # a saved text is scored as it was saved

    def production(self, measure: str | None) -> Capability | None:
        return production(self.source, measure)

    def unavailable(self, measure: str | None, kind: str) -> str | None:
        return unavailable(self.source, measure, kind)

    def __init__(
        self, path: Path, rows: Mapping[str, RowRef], benchmarks: Mapping[str, Benchmark], max_new_tokens: int
    ) -> None:
        self.path = path
        self.rows = rows  # node id -> row: the evaluator's, filled at collection
        self.benchmarks = benchmarks  # benchmark name -> the parsed file: the evaluator's
        self.max_new_tokens = max_new_tokens
        self._predictions: list[Prediction] | None = None
        # Id -> its predictions, in file order: a row's lookup reads its id's few, not the whole file.
        self._by_id: dict[str, list[Prediction]] | None = None
        self._has_base: bool | None = None
        self._name: str | None = None
        # node id -> column -> the row's saved texts, found by prompt() for generate()
        self._found: dict[str, dict[str, list[str]]] = {}

    def predictions(self) -> list[Prediction]:
        """The parsed predictions file (read once)."""
        if self._predictions is None:
            self._predictions = load_predictions(self.path)
        return self._predictions

    def by_id(self) -> dict[str, list[Prediction]]:
        """The predictions grouped by id, in file order (built once)."""
        if self._by_id is None:
            self._by_id = {}
            for p in self.predictions():
                self._by_id.setdefault(p.id, []).append(p)
        return self._by_id

    def has_base(self) -> bool:
        """Base predictions are saved beside the predictions: these then play an adapter."""
        if self._has_base is None:  # asked once per row: the answer is the file's, worked out once
            self._has_base = any(p.base_prediction is not None for p in self.predictions())
        return self._has_base

    def columns(self) -> list[str]:
        return [BASE, ADAPTER] if self.has_base() else [BASE]

    def name(self) -> str:
        """The predictions' identity (benchmark.predictions_identity), worked out once: meta() asks for it
        with every row's report under xdist, and it hashes every prediction."""
        if self._name is None:
            from pytest_llmeval.benchmark import predictions_identity

            self._name = predictions_identity(self.path, self.predictions())
        return self._name

    def unmatched(self) -> list[str]:
        """Ids of saved predictions that match no row of the benchmark files collected, for the report.
        Every row of those files counts, selected or not: a row left out by -k or --llmeval-sample is
        matched by its prediction, which is simply not scored in this run."""
        rows = {(name, case.id) for name, bench in self.benchmarks.items() for case in bench.cases}
        rows |= {(r.benchmark["name"], r.case.id) for r in self.rows.values()}
        # Each prediction is matched against the benchmarks holding its id only: linear in rows + predictions.
        names: dict[str, list[str]] = {}
        for b, i in rows:
            names.setdefault(i, []).append(b)
        return [
            p.id for p in self.predictions() if not any(predicts(p, b, p.id) for b in names.get(p.id, ()))
        ]

    def roster(self, domain_globs: tuple[str, ...]) -> Roster:
        """The columns: with base predictions saved, `prediction` plays an adapter, gated like one (its
        domain: --llmeval-domain-benchmarks); else the base alone."""
        if not self.has_base():
            return Roster()
        return Roster(
            (Member(ADAPTER, self.name(), "adapter", f"predictions:{self.path}", True, domain_globs),)
        )

    def evaluated_names(self) -> tuple[str | None, str | None]:
        """(adapter, base) as history names this run: the predictions play the adapter when there are base
        predictions, else the base model; named by their `model` field, else file name and outputs' hash."""
        return (self.name(), None) if self.has_base() else (None, self.name())

    # --- the protocol ------------------------------------------------------------------------------------

    def groups(self, columns: Sequence[str], same_prompt: Callable[[str, str], bool]) -> list[list[str]]:
        return [list(columns)]  # one lookup serves every column

    def prompt(self, columns: Sequence[str], rows: Sequence[RowPrompt]) -> dict[str, Prompted | str]:
        """No prompt is given: each row's saved outputs are looked up, and a row without one (or with two,
        or with samples it does not ask for) gets why. `samples` says how many the row holds."""
        out: dict[str, Prompted | str] = {}
        for row in rows:
            try:
                found, listed = self._lookup(row.node)
            except BackendError as exc:
                out[row.node] = str(exc)
                continue
            self._found[row.node] = found
            counts = {c: len(texts) for c, texts in found.items()} if listed else None
            out[row.node] = Prompted(prompt="", shown=None, samples=counts)
        return out

    def _lookup(self, node: str) -> tuple[dict[str, list[str]], bool]:
        """A row's saved texts per column, and whether they were saved as lists (samples)."""
        ref = self.rows[node]
        name = ref.benchmark["name"]
        matches = [p for p in self.by_id().get(ref.case.id, ()) if predicts(p, name, ref.case.id)]
        if not matches:
            raise BackendError(f"{name}:{ref.case.line}: no prediction for id '{ref.case.id}' in {self.path}")
        if len(matches) > 1:
            lines = ", ".join(str(p.line) for p in matches)
            raise BackendError(
                f"{name}:{ref.case.line}: id '{ref.case.id}' is on lines {lines} of {self.path}: "
                "add a 'benchmark' field to say which "
                "file each belongs to"
            )
        p = matches[0]
        saved: dict[str, str | tuple[str, ...]] = {BASE: p.prediction}
        if self.has_base():
            if p.base_prediction is None:
                raise BackendError(f"{self.path}:{p.line}: id '{p.id}' has no base_prediction")
            saved = {BASE: p.base_prediction, ADAPTER: p.prediction}
        if all(isinstance(v, str) for v in saved.values()):
            return {c: [str(v)] for c, v in saved.items()}, False
        case = ref.case
        where = f"{self.path}:{p.line}"
        if case.evaluation_type != "code_execution":
            raise BackendError(
                f"{where}: a list of predictions (samples) is for code_execution rows, "
                f"not {case.evaluation_type}"
            )
        samples, _ = sampling_of(case)
        wanted = samples if "samples" in case.evaluation_config else None
        found = {c: list(v) if not isinstance(v, str) else [v] for c, v in saved.items()}
        for column, texts in found.items():
            if wanted is not None and len(texts) != wanted:
                raise BackendError(
                    f"{where}: id '{p.id}' has {len(texts)} predictions for {column}, and its row "
                    f"({name}:{case.line}) asks for samples: {wanted}"
                )
        return found, True

    def generate(self, column: str, requests: Sequence[GenRequest]) -> list[Result]:
        """Each request's saved text (its sample's, for a row saved with a list)."""
        return [Result(value=self._found[r.node][column][r.index]) for r in requests]

    def loglikelihood(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        raise BackendError("saved predictions hold text, not log-likelihoods")

    loglikelihood_rolling = loglikelihood

    def judge(self, cases: Sequence[Case], outputs: Sequence[Mapping[str, str]]) -> JudgeRuns:
        raise BackendError("--llmeval-predictions loads no judge model")

    def fluency(
        self, column: str, references: Sequence[str], texts: Sequence[str | None]
    ) -> list[FluencyRecord]:
        raise BackendError("--llmeval-predictions loads no model to measure fluency")

    def handle(self, column: str) -> Any:
        raise BackendError(
            "--llmeval-predictions loads no model: the llm fixtures need --base-model, --adapter or "
            "--llmeval-endpoint instead"
        )

    def identity(self, column: str, index: FileIndex) -> ModelIdentity | None:
        return None  # read from the file every run: nothing to cache

    def price(self, column: str) -> Price | None:
        return None

    def base_name(self) -> str | None:
        return None

    def describe(self, entry: dict[str, Any], column: str) -> None:
        entry["fingerprint"] = None

    def described(self) -> bool:
        return True

    def load_seconds(self) -> dict[str, float]:
        return {}

    def run_meta(self, meta: dict[str, Any], hardware: dict[str, Any] | None) -> dict[str, Any]:
        """results.json's settings of a run on saved outputs: nothing generated, no model, no hardware."""
        source = str(self.path)
        for key in ("models", "parameter_efficiency", "training"):  # no model of ours to describe
            meta.pop(key, None)
        # Worked out where the rows were collected (every xdist worker collects them all; the controller
        # collects none, and says nothing rather than "every prediction is unmatched").
        if self.rows:
            meta["unmatched_predictions"] = self.unmatched()
        meta["inference_config"] = {
            "source": f"saved predictions in {source}: nothing was generated",
            "backend": self.kind,
            "decoding": {"max_new_tokens": self.max_new_tokens, "temperature": 0.0, "top_p": 1.0},
        }
        if self.has_base():
            meta.update(adapter=f"predictions:{source}", adapter_name=self.name())
            meta["base_model"] = "base_prediction"
        else:
            meta["base_model"] = self.name()
        return meta

    def peak_memory(self, memory: dict[str, Any]) -> dict[str, Any]:
        return memory

    def keep(self) -> None:
        return None  # saved outputs are read again: nothing is worked out from a model
