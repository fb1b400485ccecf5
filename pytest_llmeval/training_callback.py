"""EvaluationCallback: the adaptation document's evaluation schedule (§6.1), written as JSONL during training.

For training scripts: add `EvaluationCallback(path)` to a transformers Trainer's callbacks, with
logging_steps=1 (the document tracks every step) and an eval_dataset with eval_strategy="steps". One JSON
object per line, each with "event" and "step" (the optimizer step, the Trainer's global_step):

- "step", every logged step (§1.2, §3.2): loss, learning_rate, grad_norm, as the Trainer logs them.
- "eval", every evaluation (§1.2): eval_loss. The callback asks the Trainer to evaluate every `eval_every`
  steps (default 100) when it has an evaluation strategy; the Trainer's own evaluations are recorded too.
- "memory", every `eval_every` steps (§2.2), right after the optimizer step, while gradients and optimizer
  state are both there: parameters_bytes, gradients_bytes, optimizer_state_bytes (sums of tensor bytes).
  On CUDA also allocated_bytes and reserved_bytes, and peak_allocated_bytes since the previous memory event:
  activations_bytes is that peak less the three parts above (activations are freed by the time a callback
  runs, so the peak is where they show). On CPU, peak_rss_bytes: the process's peak resident memory.
- "measure", every `measure_every` steps (default 500) when `benchmark` names a benchmark file: the
  token-weighted perplexity of its perplexity rows under the model being trained (pytest_llmeval.perplexity,
  with each row's window), with cross_entropy, n_tokens and n_texts; from the same forward passes, the
  document's character accuracy (§4.1, §6.1) as results.json's perplexity block gives it per script
  (top1_accuracy): whether the model's top-1 next token was the right one, each scored token's hit shared
  out over the characters it covers (perplexity's by_script). character_accuracy is all scripts together
  (each scored token weighs one there: the top-1 next-token accuracy), character_accuracy_by_script each
  script the texts hold; both are null without a fast tokenizer (the shares need character offsets).
  On CUDA its own peak_allocated_bytes,
  which the memory events and the run's peak leave out (they are the training's; on CPU the process's peak
  resident memory cannot be reset, so there it includes the measurements).
- "end", when training ends (§2.3): total_training_time_s (wall clock from train begin to end, evaluations
  included, as the Trainer's train_runtime), n_steps, time_per_step_s, steps_per_hour; tokens and
  tokens_per_second when the Trainer counted input tokens (include_num_input_tokens_seen=True: transformers
  5 passes no batch to callbacks, so its count is the one there is); the memory peaks.

pytest_llmeval.training.read_log reads the file back. This module imports transformers at the top: the
plugin never imports it.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import IntervalStrategy

from pytest_llmeval.perplexity import PerplexityResult, ScriptShare, perplexity, sum_scripts
from pytest_llmeval.scorers import perplexity as ppl_scorer
from pytest_llmeval.scorers import read_benchmark

# The adaptation document's schedule (§6.1): validation loss and memory every 100 steps, perplexity every 500.
EVAL_EVERY = 100
MEASURE_EVERY = 500


class EvaluationCallback(TrainerCallback):
    """Writes the document's training evidence to `path` as JSONL (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        eval_every: int = EVAL_EVERY,
        measure_every: int = MEASURE_EVERY,
        benchmark: str | Path | None = None,
    ) -> None:
        for name, value in (("eval_every", eval_every), ("measure_every", measure_every)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.path = Path(path)
        self.eval_every = eval_every
        self.measure_every = measure_every
        self.benchmark = None if benchmark is None else Path(benchmark)
        # Read once, here: a bad benchmark fails before training starts, not hundreds of steps in.
        self._texts: dict[tuple[int | None, int | None], list[str]] = {}
        if self.benchmark is not None:
            for case in read_benchmark(self.benchmark).cases:
                if case.evaluation_type == "perplexity":
                    config = case.evaluation_config
                    text = getattr(case, ppl_scorer.text_field(config))
                    self._texts.setdefault(ppl_scorer.window(config), []).append(text)
            if not self._texts:
                raise ValueError(f"{self.benchmark}: no perplexity rows to measure")
        self._start = 0.0
        self._first_step = 0
        self._first_tokens = 0
        self._peak_allocated = 0  # the training's CUDA peak so far (the callback's own measurements aside)
        self._interval_peak = 0  # the current memory interval's peak up to a measurement, which resets it

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.benchmark is not None and kwargs.get("processing_class") is None:
            raise ValueError(
                "EvaluationCallback(benchmark=...) measures perplexity with the Trainer's tokenizer: "
                "pass processing_class=tokenizer to the Trainer"
            )
        self._start = time.perf_counter()
        self._first_step = state.global_step
        self._first_tokens = state.num_input_tokens_seen
        if state.is_world_process_zero:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("", encoding="utf-8")  # one file per run: a rerun starts it afresh

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if logs and "loss" in logs:
            keys = ("loss", "learning_rate", "grad_norm")
            self._write(state, "step", {key: _plain(logs.get(key)) for key in keys})

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if metrics and "eval_loss" in metrics:
            self._write(state, "eval", {"eval_loss": _plain(metrics["eval_loss"])})

    def on_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # Called after optimizer.step() and before zero_grad(), so gradients and optimizer state both exist;
        # global_step counts this step only after it.
        step = state.global_step + 1
        if step % self.eval_every == 0:
            self._write(state, "memory", self._memory(kwargs["model"], kwargs.get("optimizer")), step=step)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        step = state.global_step
        if step % self.eval_every == 0 and args.eval_strategy != IntervalStrategy.NO:
            control.should_evaluate = True  # the document's schedule, whatever eval_steps says
        if self.benchmark is not None and step % self.measure_every == 0:
            self._write(state, "measure", self._measure(kwargs["model"], kwargs["processing_class"]))
        return control

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        total = time.perf_counter() - self._start
        steps = state.global_step - self._first_step
        end: dict[str, Any] = {"total_training_time_s": total, "n_steps": steps}
        if steps > 0 and total > 0:
            end["time_per_step_s"] = total / steps
            end["steps_per_hour"] = 3600.0 * steps / total
        tokens = state.num_input_tokens_seen - self._first_tokens
        if tokens > 0 and total > 0:
            end["tokens"] = tokens
            end["tokens_per_second"] = tokens / total
        end.update(self._peaks(kwargs["model"]))
        self._write(state, "end", end)

    def _write(
        self, state: TrainerState, event: str, values: Mapping[str, Any], *, step: int | None = None
    ) -> None:
        if not state.is_world_process_zero:
            return
        record = {"event": event, "step": state.global_step if step is None else step, **values}
        # Appended and closed per event: a run that crashes leaves every event before the crash.
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")

    def _memory(self, model: torch.nn.Module, optimizer: Any) -> dict[str, Any]:
        """Bytes of the parameters, their gradients and the optimizer state (§2.2), and the device's view."""
        params = list(model.parameters())
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
        state: Iterable[Mapping[str, Any]] = inner.state.values() if inner is not None else ()
        parts = {
            "parameters_bytes": _bytes(params),
            "gradients_bytes": _bytes(p.grad for p in params if p.grad is not None),
            "optimizer_state_bytes": _bytes(
                t for values in state for t in values.values() if isinstance(t, torch.Tensor)
            ),
        }
        device = params[0].device if params else torch.device("cpu")
        if device.type != "cuda":
            return {"device": device.type, **parts, **self._peaks(model)}
        peak = max(self._interval_peak, torch.cuda.max_memory_allocated(device))
        self._peak_allocated = max(self._peak_allocated, peak)
        torch.cuda.reset_peak_memory_stats(device)  # the next event's peak is its own interval's
        self._interval_peak = 0
        return {
            "device": "cuda",
            **parts,
            "allocated_bytes": torch.cuda.memory_allocated(device),
            "reserved_bytes": torch.cuda.memory_reserved(device),
            "peak_allocated_bytes": peak,
            "activations_bytes": max(0, peak - sum(parts.values())),
        }

    def _peaks(self, model: torch.nn.Module) -> dict[str, int]:
        """The run's peak so far: CUDA allocated memory on a GPU, the process's resident memory on CPU."""
        device = next(model.parameters()).device
        if device.type == "cuda":
            self._peak_allocated = max(self._peak_allocated, torch.cuda.max_memory_allocated(device))
            return {"peak_allocated_bytes": self._peak_allocated}
        rss = _peak_rss()
        return {} if rss is None else {"peak_rss_bytes": rss}

    def _measure(self, model: Any, tokenizer: Any) -> dict[str, Any]:
        """Perplexity of the benchmark's perplexity rows, token-weighted over all rows (§1.1)."""
        device = next(model.parameters()).device
        if device.type == "cuda":
            # Training memory is the Trainer's, not this callback's: the peak so far is kept, and the
            # measurement's own peak is recorded apart and then forgotten (a GPU's counter can be reset;
            # a CPU process's peak resident memory cannot, so on CPU it includes the measurements).
            peak = torch.cuda.max_memory_allocated(device)
            self._interval_peak = max(self._interval_peak, peak)
            self._peak_allocated = max(self._peak_allocated, peak)
            torch.cuda.reset_peak_memory_stats(device)
        training = model.training
        model.eval()  # no dropout while measuring
        # Character accuracy comes from the same forward passes; it needs each token's character offsets,
        # which only a fast tokenizer gives (the plugin's perplexity rows follow the same rule).
        by_script = bool(getattr(tokenizer, "is_fast", False))
        try:
            results = [
                perplexity(model, tokenizer, texts, max_length=max_length, stride=stride, by_script=by_script)
                for (max_length, stride), texts in self._texts.items()
            ]
        finally:
            model.train(training)
        own: dict[str, Any] = {}
        if device.type == "cuda":
            own["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
        nll = math.fsum(r.total_nll for r in results)
        tokens = sum(r.n_tokens for r in results)
        cross_entropy = nll / tokens
        return {
            "benchmark": str(self.benchmark),
            "perplexity": math.exp(cross_entropy) if cross_entropy < 700 else math.inf,
            "cross_entropy": cross_entropy,
            "n_tokens": tokens,
            "n_texts": sum(len(texts) for texts in self._texts.values()),
            **_character_accuracy(results),
            **own,
        }


def _character_accuracy(results: Iterable[PerplexityResult]) -> dict[str, Any]:
    """The document's character accuracy (§4.1): perplexity's top-1 hits / scored over all scripts, and
    per script the texts hold (None for both without by_script)."""
    parts = [r.scripts for r in results if r.scripts is not None]
    if not parts:
        return {"character_accuracy": None, "character_accuracy_by_script": None}
    scripts = sum_scripts(parts)  # the windows' groups added up, as one perplexity() call adds its texts
    # All scripts as one share, so that the ratio (and its None) is ScriptShare's own.
    every = ScriptShare(
        nll=math.fsum(s.nll for s in scripts.values()),
        n_chars=sum(s.n_chars for s in scripts.values()),
        hits=math.fsum(s.hits for s in scripts.values()),
        scored=math.fsum(s.scored for s in scripts.values()),
    )
    return {
        "character_accuracy": every.top1_accuracy,
        "character_accuracy_by_script": {
            name: share.top1_accuracy for name, share in scripts.items() if share.n_chars
        },
    }


def _bytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _plain(value: Any) -> Any:
    """A logged value as JSON: tensors and numpy scalars become Python numbers."""
    return value.item() if hasattr(value, "item") else value


def _peak_rss() -> int | None:
    """The process's peak resident set size in bytes; None where `resource` does not exist (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # bytes on macOS, KiB on Linux
