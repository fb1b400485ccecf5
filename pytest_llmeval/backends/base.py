"""The model-backend protocol: what every source of a column's outputs implements, and the typed requests
and results that cross it (the shape of lm-evaluation-harness's `LM` and inspect-ai's `ModelAPI`).

A backend serves every column of a run from one place: weights in this process (local.py), models behind
OpenAI-compatible servers (served.py), or saved predictions (saved.py). The evaluator asks it for three
things, each a batch: `generate` (text), `loglikelihood` (each option after a prompt: multiple choice) and
`loglikelihood_rolling` (the perplexity of given text). Before either, `prompt` renders each row for a
column as that source takes it (a chat template and a context fit in-process, chat messages for a server,
nothing for saved outputs). What a backend cannot do is in its `capabilities` and decided once, in
backends/__init__.py; caching and budgets wrap a backend (caching.py), they are not inside one.

Pure: no pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pytest_llmeval.backends import Capability, Source
    from pytest_llmeval.benchmark import Case
    from pytest_llmeval.cache import FileIndex, ModelIdentity
    from pytest_llmeval.costs import Price
    from pytest_llmeval.prompts import Example, PromptSpec
    from pytest_llmeval.records import FluencyRecord

Sampled = tuple[float, int]  # (temperature, seed) of one sampled output
# measures.judge_runs: per row, each column's verdict (None: it failed), and the failed rows' errors by index
JudgeRuns = tuple[list[dict[str, dict[str, Any]] | None], dict[int, str]]


class BackendError(Exception):
    """A source cannot produce anything now (weights that do not load, an endpoint that does not answer):
    every row that asks fails with this message, which says what to do."""


@dataclass(frozen=True)
class RowPrompt:
    """What the prompt builder decided for one row and one column: the settings and few-shot examples it
    is prompted with, and the room its output needs after the prompt."""

    node: str
    where: str  # `benchmark:line`, which begins every message about the row
    case: Case
    spec: PromptSpec
    examples: Sequence[Example]
    # Tokens kept free after the prompt: the output's limit; None for a multiple-choice row, whose room is
    # its longest option as the column's tokenizer counts it.
    room: int | None


@dataclass(frozen=True)
class Prompted:
    """A row's prompt as one column is given it."""

    prompt: str  # what generate() sends: the whole rendered prompt, or a server's user message
    shown: str | None  # what the row's record shows as the column's prompt; None: it was given none
    chat: bool = True  # False: sent raw (a completion-style row, a run's own template rendered whole)
    messages: tuple[dict[str, str], ...] | None = None  # a served chat with a system prompt or examples
    # Key material beyond the prompt text that the output depends on (a served raw prompt, chat messages).
    key: Mapping[str, Any] = field(default_factory=dict)
    truncated: dict[str, Any] | None = None  # how the prompt was cut to fit (generation.fit_text)
    # Saved outputs: how many samples each column holds, the row then scored on its samples; None: as many
    # as the row asks (sampling.of), scored on them when more than one.
    samples: Mapping[str, int] | None = None


@dataclass(frozen=True)
class GenRequest:
    """One output to generate: a row's greedy output, or one of its samples."""

    node: str
    prompted: Prompted
    limit: int  # new tokens at most
    index: int = 0  # which sample (0 for a greedy row)
    sampled: Sampled | None = None
    # The strings the output ends at and is cut before (an lm-eval row's `until`: planning.stop_of); None:
    # it ends at EOS or its limit only.
    stop: tuple[str, ...] | None = None


@dataclass(frozen=True)
class MeasureRequest:
    """One row to measure: its options' log-likelihoods after its prompt (multiple choice), or the
    log-likelihood of its text (perplexity: `prompted` is None)."""

    row: RowPrompt
    prompted: Prompted | None = None


@dataclass(frozen=True)
class Result:
    """What a request gave: its value (a text; a measurement) or why it failed."""

    value: Any = None
    error: str | None = None
    # (prompt, generated) tokens it took, each None where the source does not say; None: nothing was
    # spent on it (served from the cache), or what it spent is not known (it failed).
    tokens: tuple[int | None, int | None] | None = None
    cached: bool = False  # served from the generation cache: nothing was spent on it
    note: str | None = None  # what was done to the value on its way in (a served text cut to its max_tokens)


Columns = dict[str, list[Result]]  # column -> one result per request, in request order
ColumnRequest = tuple[str, GenRequest]  # one output of one column, in a batch that holds several columns


class Backend(Protocol):
    """Every column of a run, served from one source."""

    source: Source
    kind: str  # results.json's `backend`: "transformers", "endpoint" or "predictions"
    capabilities: frozenset[Capability]
    metered: bool  # its work is time and tokens spent: costs and the budget count it
    shapes_output: bool  # outputs are trimmed as generation trims (False: saved text is scored as saved)

    def production(self, measure: str | None) -> Capability | None:
        """How a row whose scorer measures `measure` is produced (backends.production); None: it is not."""
        ...

    def unavailable(self, measure: str | None, kind: str) -> str | None:
        """Why rows of evaluation type `kind` (its scorer's `measure`) are skipped here, as their skip
        reason; None: they run (backends.unavailable, and a probe's finding on a server's logprobs)."""
        ...

    def groups(self, columns: Sequence[str], same_prompt: Callable[[str, str], bool]) -> list[list[str]]:
        """The columns in the order they are produced, grouped where one prompt serves several: same
        prompt settings and the same tokenizer. A group is prompted once and measured in one call."""
        ...

    def prompt(self, columns: Sequence[str], rows: Sequence[RowPrompt]) -> dict[str, Prompted | str]:
        """Each row's prompt for these columns (one group), or the whole message why it cannot have one."""
        ...

    def generate(self, column: str, requests: Sequence[GenRequest]) -> list[Result]:
        """One batch of outputs of one column; raises (BackendError, or what the model raised) when the
        batch as a whole failed."""
        ...

    def loglikelihood(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        """Each option's log-likelihood after its row's prompt, for every column of one group."""
        ...

    def loglikelihood_rolling(self, columns: Sequence[str], requests: Sequence[MeasureRequest]) -> Columns:
        """The perplexity of each row's text, for every column of one group."""
        ...

    def judge(self, cases: Sequence[Case], outputs: Sequence[Mapping[str, str]]) -> JudgeRuns:
        """The judge's verdicts on every column's output of these rows."""
        ...

    def fluency(
        self, column: str, references: Sequence[str], texts: Sequence[str | None]
    ) -> list[FluencyRecord]:
        """Perplexity of a column's outputs and of the references, under that column's own model."""
        ...

    def identity(self, column: str, index: FileIndex) -> ModelIdentity | None:
        """A column's model identity in the generation cache (file hashes read through `index`); None: its
        outputs are not cached. OSError: a file could not be read."""
        ...

    def price(self, column: str) -> Price | None:
        """What a column's tokens cost (a served model's price), None where they cost nothing."""
        ...

    def handle(self, column: str) -> Any:
        """The `llm` fixtures' generation handle on a column (models.LLM, served.ServedLLM)."""
        ...

    # --- provenance: what results.json says of the columns and of the run --------------------------------

    def evaluated_names(self) -> tuple[str | None, str | None]:
        """(adapter, base) as the history names this run (history.Identity), without loading anything."""
        ...

    def base_name(self) -> str | None:
        """The base model's name once known here (None: not loaded, or not ours to know)."""
        ...

    def describe(self, entry: dict[str, Any], column: str) -> None:
        """Fill a column's results.json `models` entry: its fingerprint, provenance, what served it."""
        ...

    def described(self) -> bool:
        """The `models` entries are final and may be memoised (the weights loaded; the servers probed)."""
        ...

    def load_seconds(self) -> dict[str, float]:
        """Seconds spent loading each column's weights in this process."""
        ...

    def peak_memory(self, memory: dict[str, Any]) -> dict[str, Any]:
        """The process's peak memory with what this backend adds (a GPU's peaks)."""
        ...

    def keep(self) -> None:
        """At the end of the process: keep what the next run can reuse (the local backend's recall.py)."""
        ...

    def run_meta(self, meta: dict[str, Any], hardware: dict[str, Any] | None) -> dict[str, Any]:
        """results.json's run-level settings as this backend sets them (`hardware`: as worked out before)."""
        ...


@runtime_checkable
class MixesColumns(Protocol):
    """An optional capability beside Backend: several columns of one group generated in one batch (the
    local backend's base and adapters on the shared weights, each row through its own adapter). A backend
    without it is asked one column at a time (Backend.generate), which gives the same outputs."""

    def mixes(self, columns: Sequence[str]) -> bool:
        """Whether these columns (one group) are generated together by generate_columns."""
        ...

    def generate_columns(self, requests: Sequence[ColumnRequest]) -> list[Result]:
        """One batch of outputs of several columns, one result per request in request order; raises like
        Backend.generate when the batch as a whole failed."""
        ...
