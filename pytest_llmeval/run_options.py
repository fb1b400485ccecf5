"""The typed choices the evaluation reads (RunOptions, and the gates' GateOptions), built once by
settings.Settings.from_config and the same in every process. Pure: no pytest, no torch; the evaluation
(planning.py, evaluation/, backends/) depends on this, never on pytest's parsed options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_llmeval.gates import DEFAULT_CRITERIA, Criteria
from pytest_llmeval.models import ModelSpec
from pytest_llmeval.roster import Roster
from pytest_llmeval.training import TrainingLog

if TYPE_CHECKING:
    from pytest_llmeval.costs import Price
    from pytest_llmeval.endpoint import EndpointSettings
    from pytest_llmeval.prompts import PromptOptions


@dataclass(frozen=True)
class GateOptions:
    """Command-line choices for the gates."""

    # --llmeval-criteria's rules (gates.CRITERIA), with --llmeval-gate and the drop options applied to the
    # default's: better_than_base's mode, no_degradation's thresholds, the run gates required.
    criteria: Criteria = DEFAULT_CRITERIA
    alpha: float = 0.05
    min_rows: int = 50
    min_edge: int = 5
    domain_globs: tuple[str, ...] = ()  # benchmark paths (relative to the rootdir) that are in-domain
    train_data: Path | None = None  # --llmeval-train-data, else the adapter folder's training file
    slice_keys: tuple[str, ...] = ()  # --llmeval-slice-gate: no_degradation judges each slice of these keys
    # --llmeval-gate-metric: a model gate per evaluation type, on the rows' scores by it (records.as_metric).
    gate_metrics: tuple[str, ...] = ()
    # --llmeval-sequential: rows in a seeded planned order, a benchmark stops once its comparison gates are
    # decided by an anytime-valid test (early_stop); seed: --llmeval-seed.
    sequential: bool = False
    seed: int = 0
    # --llmeval-training-gates: converged and no_overfitting of a column with a training log warn (pass
    # with a warning), fail, or are not made ("off"); --llmeval-training-window: training.analyse's window.
    training_gates: str = "warn"
    training_window: int = 50

    @property
    def mode(self) -> str:
        """better_than_base: "significant" (a paired test) or "point" (the LocoLLM criterion)."""
        return self.criteria.better_than_base

    @property
    def warn_drop(self) -> float:
        """no_degradation passes plainly up to this drop (the fail threshold where there is no warn band)."""
        return self.criteria.warn_at

    @property
    def fail_drop(self) -> float:
        return self.criteria.fail_drop


@dataclass(frozen=True)
class TrainingEvidence:
    """A column's training log, read when the run is configured (identically in every process)."""

    log: TrainingLog
    found: str  # "--llmeval-training-log", or "adapter folder" (found there without the option)


@dataclass(frozen=True)
class RunOptions:
    """Command-line choices that shape generation."""

    spec: ModelSpec
    predictions: Path | None = None  # --llmeval-predictions: score these outputs, load no model
    batch_size: int = 32
    max_new_tokens: int = 512
    gate_options: GateOptions = GateOptions()
    # --llmeval-fluency: perplexity of each model's generated outputs (and of the references) under that
    # same model, as the QA fine-tuning document asks; --llmeval-ppl-model names one external scorer
    # for every side instead (and turns fluency on).
    fluency: bool = False
    ppl_model: str | None = None
    # --llmeval-ppl-batch-size / -max-length / -stride: the fluency scorer's windows per forward pass, window
    # and stride (perplexity.perplexity's batch_size, max_length, stride); None: its defaults.
    ppl_batch_size: int | None = None
    ppl_max_length: int | None = None
    ppl_stride: int | None = None
    judge_model: str | None = None  # --llmeval-judge-model; None: the base with the adapter off
    # --llmeval-embedding-model: semantic and bertscore rows' model; None: the shipped all-MiniLM-L6-v2.
    embedding_model: str | None = None
    embedding_layer: int | None = None  # --llmeval-embedding-layer: bertscore's layer; None: the last
    composite_weights: dict[str, float] | None = None  # None: results.DEFAULT_COMPOSITE_WEIGHTS
    sandbox_mode: str = "auto"  # --llmeval-sandbox: auto | strict | basic (code_execution rows)
    sandbox_jobs: int | None = None  # --llmeval-sandbox-jobs; None: sandbox.default_jobs()
    cache_dir: Path | None = None  # --llmeval-cache-dir (default: pytest's cache); None: --llmeval-no-cache
    context_overflow: str = "error"  # --llmeval-context-overflow: generation.OVERFLOW_POLICIES
    token_budget: int | None = 32768  # --llmeval-token-budget: padded tokens per generation batch
    # --llmeval-mixed-batches: every column of the shared weights in one generation batch (auto | on | off;
    # auto: backends.local.LocalBackend.mixes decides by the device).
    mixed_batches: str = "auto"
    # The columns beside the base (several --adapter, --llmeval-model, --llmeval-reference); empty: the
    # one --adapter of spec, if any (Evaluator.roster builds its column).
    roster: Roster = field(default_factory=Roster)
    adjust: str = "holm"  # --llmeval-adjust: how a run's family of p-values is adjusted (holm | none)
    # --llmeval-endpoint: every column (and the judge) is a model id served at these URLs; no weights here.
    endpoint: EndpointSettings | None = None
    # `--llmeval-model=NAME=ID@URL`: each such column's servers (the client settings of --llmeval-endpoint's
    # options); beside columns evaluated in this process, or beside --llmeval-endpoint's.
    served_apart: dict[str, EndpointSettings] = field(default_factory=dict)
    quantization: str | None = None  # --llmeval-quantization: the served weights' format, when no server says
    # --llmeval-reasoning-tags: a leading reasoning block is cut off before scoring; None (--llmeval-keep-
    # reasoning): outputs are scored whole.
    reasoning_tags: tuple[str, str] | None = ("<think>", "</think>")
    # --llmeval-max-tokens / --llmeval-max-cost: no further chunk is sent to a model once this process has
    # spent its share (costs.Budget; `workers`: the xdist workers sharing the caps).
    max_tokens: int | None = None
    max_cost: float | None = None
    workers: int = 1
    prices: dict[str, Price] = field(default_factory=dict)  # [tool.llmeval.prices], by served model id
    # The command line's prompt settings and each adapter's declared prompt (prompts.py).
    prompt: PromptOptions = field(default_factory=lambda: _prompt_options())


def _prompt_options() -> PromptOptions:
    # Imported here: the plugin imports this module at pytest's start, and prompts.py need not load then.
    from pytest_llmeval.prompts import PromptOptions

    return PromptOptions()


# Options whose value is a path or a model folder: written as two words (`--adapter PATH`), pytest reads the
# value as a test path while it picks its rootdir, before the plugin has defined the option.
