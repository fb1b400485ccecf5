"""Training evidence from what trainers already write: loss curves, gradient norms, overfitting, speed.

The Japanese adaptation document tracks training loss every step and validation loss every 100 steps (§1.2,
§6.1), judges convergence and stability from the loss curve (§3.1), watches gradient norms for instabilities
(§3.2), compares learning rates by the spread of their test losses (§3.3) and reports training time per step
(§2.3). All of it can be read back from files a run leaves anyway:

- a transformers Trainer's `trainer_state.json` (its `log_history`: `loss`, `learning_rate`, `grad_norm`
  per logged step, `eval_loss` per evaluation, `train_runtime` at the end), or
- the JSONL that `training_callback.EvaluationCallback` writes (one event per line).

`read_log` turns either into a `TrainingLog`; `analyse` computes the numbers; the `assert_*` functions turn
them into test failures that name the steps to look at. Every definition is in the docstring that computes it.

Pure: no torch, no transformers, no pytest. Losses are expected finite: the Trainer replaces a NaN or inf
step loss by the running mean before logging it (`logging_nan_inf_filter`, on by default).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeGuard, cast

from pytest_llmeval.benchmark import JsonlDecodeError, jsonl_objects, jsonl_text

STATE_NAME = "trainer_state.json"  # what transformers' Trainer writes into output_dir and each checkpoint
LOG_NAME = "training_log.jsonl"  # EvaluationCallback's default file name
EVENTS: tuple[str, ...] = ("step", "eval", "memory", "measure", "end")
# The median absolute deviation of normal data is 0.6745 sigma: scaled by 1/0.6745, k reads in sigmas.
MAD_TO_SIGMA = 1.4826
# A spike is judged against the earlier norms only once there are this many of them.
MIN_HISTORY = 5
# Where at least half of the recent norms are identical their MAD is 0, and any larger norm would be a
# "spike": the spread is floored at this fraction of the median (k = 6 then asks for 6 % above it).
MAD_FLOOR = 0.01
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_TRAIN_KEYS = ("loss", "learning_rate", "grad_norm")


class TrainingLogError(ValueError):
    """A training log cannot be read; the message names the file (and the line of a JSONL)."""


@dataclass(frozen=True)
class TrainingLog:
    """The training curve of one run: per logged step, and per evaluation."""

    source: Path
    steps: tuple[int, ...]  # optimizer steps with a logged training loss, increasing
    loss: tuple[float, ...]
    learning_rate: tuple[float | None, ...]  # None where the log has none
    grad_norm: tuple[float | None, ...]  # pre-clipping total norm, as the Trainer logs it
    eval_steps: tuple[int, ...] = ()
    eval_loss: tuple[float, ...] = ()
    # Run totals (training time, time per step, steps per hour, tokens per second, peak memory), as the
    # callback's "end" event or the Trainer's final log entry gives them; empty when the run did not finish.
    totals: Mapping[str, float] = field(default_factory=dict)


class Overfitting(TypedDict):
    detected: bool
    onset_step: int | None  # the best evaluation's step, when detected
    best_step: int | None  # step of the lowest eval loss (the latest, on ties); None without evaluations
    eval_rise: float | None  # last eval loss - best eval loss
    train_fall: float | None  # smoothed training loss at best_step - at the last evaluation's step


class GradNormSummary(TypedDict):
    count: int  # logged finite norms
    mean: float | None
    variance: float | None  # population variance, as np.var in the document's §3.1
    max: float | None
    spikes: list[int]  # steps


class Analysis(TypedDict):
    n_steps: int  # the last logged step
    n_logged: int  # logged training losses
    final_loss: float
    loss_stability: float
    convergence_step: int | None
    steps_to_95: int | None
    overfitting: Overfitting
    grad_norm: GradNormSummary
    totals: dict[str, float]


# --- reading ---------------------------------------------------------------------------------------------


def read_log(path: str | os.PathLike[str]) -> TrainingLog:
    """Read a trainer_state.json, an EvaluationCallback JSONL, or a folder holding one (see find_log)."""
    found = find_log(Path(path))
    if found.suffix == ".jsonl":
        return _read_jsonl(found)
    return _read_state(found)


def find_log(path: Path) -> Path:
    """The log file that `path` names, or the one a run's folder holds.

    In a folder: its own training_log.jsonl first (the callback's record of the whole run), then its own
    trainer_state.json (written by Trainer.save_state() after training), then the trainer_state.json of the
    checkpoint-N subfolder with the highest N (a checkpoint's state ends at its step).
    """
    if not path.exists():
        raise TrainingLogError(f"{path}: no such file or folder")
    if not path.is_dir():
        return path
    for name in (LOG_NAME, STATE_NAME):
        if (path / name).is_file():
            return path / name
    checkpoints = sorted(
        (int(match.group(1)), child)
        for child in path.iterdir()
        if (match := _CHECKPOINT.fullmatch(child.name)) and (child / STATE_NAME).is_file()
    )
    if checkpoints:
        return checkpoints[-1][1] / STATE_NAME
    raise TrainingLogError(f"{path}: no {LOG_NAME}, {STATE_NAME} or checkpoint-*/{STATE_NAME} in this folder")


class _Builder:
    """Collects a log's entries, checking each; `problems` holds every `where: what is wrong`."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.problems: list[str] = []
        self.steps: list[int] = []
        self.loss: list[float] = []
        self.learning_rate: list[float | None] = []
        self.grad_norm: list[float | None] = []
        self.eval_steps: list[int] = []
        self.eval_loss: list[float] = []
        self.totals: dict[str, float] = {}

    def train(self, where: str, entry: Mapping[str, Any]) -> None:
        step = self._step(where, entry, self.steps, "training loss")
        ok = [self._number(where, entry, key, required=key == "loss") for key in _TRAIN_KEYS]
        if step is not None and all(good for good, _ in ok):
            loss, lr, norm = (value for _, value in ok)
            assert loss is not None  # required: _number reported it otherwise
            self.steps.append(step)
            self.loss.append(loss)
            self.learning_rate.append(lr)
            self.grad_norm.append(norm)

    def eval(self, where: str, entry: Mapping[str, Any]) -> None:
        step = self._step(where, entry, self.eval_steps, "eval loss")
        good, loss = self._number(where, entry, "eval_loss", required=True)
        if step is not None and good and loss is not None:
            self.eval_steps.append(step)
            self.eval_loss.append(loss)

    def total(self, where: str, key: str, value: Any) -> None:
        if _is_number(value):
            self.totals[key] = float(value)
        else:
            self.problems.append(f"{where}: {key!r} must be a number, got {value!r}")

    def build(self) -> TrainingLog:
        if not self.steps and not self.problems:
            self.problems.append(f"{self.source}: no training loss in the log (nothing to analyse)")
        if self.problems:
            raise TrainingLogError("\n".join(self.problems))
        return TrainingLog(
            source=self.source,
            steps=tuple(self.steps),
            loss=tuple(self.loss),
            learning_rate=tuple(self.learning_rate),
            grad_norm=tuple(self.grad_norm),
            eval_steps=tuple(self.eval_steps),
            eval_loss=tuple(self.eval_loss),
            totals=dict(self.totals),
        )

    def _step(self, where: str, entry: Mapping[str, Any], seen: list[int], what: str) -> int | None:
        step = entry.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            self.problems.append(f"{where}: 'step' must be an integer >= 0, got {step!r}")
            return None
        if seen and step <= seen[-1]:
            # Two runs appended to one file, or a resumed run's history twice: the curve would fold back.
            self.problems.append(
                f"{where}: {what} at step {step} after step {seen[-1]} (steps must increase)"
            )
            return None
        return step

    def _number(
        self, where: str, entry: Mapping[str, Any], key: str, *, required: bool
    ) -> tuple[bool, float | None]:
        """(whether the value is usable, the value as a float or None when absent and optional)."""
        value = entry.get(key)
        if value is None and not required:
            return True, None
        if not _is_number(value):
            self.problems.append(f"{where}: {key!r} must be a number, got {value!r}")
            return False, None
        return True, float(value)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_state(path: Path) -> TrainingLog:
    """A Trainer's trainer_state.json: training entries carry `loss`, evaluation entries `eval_loss`."""
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TrainingLogError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise TrainingLogError(f"{path}:{exc.lineno}: not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(doc, dict):
        raise TrainingLogError(f"{path}: expected a JSON object (a Trainer's {STATE_NAME}), got {doc!r:.40}")
    history = doc.get("log_history")
    if not isinstance(history, list):
        raise TrainingLogError(f"{path}: no 'log_history' list: not a transformers Trainer's {STATE_NAME}")
    out = _Builder(path)
    for index, entry in enumerate(history):
        where = f"{path}: log_history[{index}]"
        if not isinstance(entry, dict):
            out.problems.append(f"{where}: expected an object, got {entry!r:.40}")
            continue
        if "loss" in entry:
            out.train(where, entry)
        if "eval_loss" in entry:
            out.eval(where, entry)
        if "train_runtime" in entry:
            _trainer_totals(out, where, entry, doc.get("num_input_tokens_seen"))
    return out.build()


def _trainer_totals(out: _Builder, where: str, entry: Mapping[str, Any], tokens: object) -> None:
    """The Trainer's final entry in the callback's terms (§2.3): its own runtime and step rate, which it
    rounds to 3 decimals, and the tokens it counted (include_num_input_tokens_seen) when it counted any."""
    out.total(where, "total_training_time_s", entry["train_runtime"])
    rate = entry.get("train_steps_per_second")
    if _is_number(rate) and rate > 0:
        out.totals["time_per_step_s"] = 1.0 / rate
        out.totals["steps_per_hour"] = 3600.0 * rate
    runtime = out.totals.get("total_training_time_s")
    if _is_number(tokens) and tokens > 0 and runtime:
        out.totals["tokens"] = float(tokens)
        out.totals["tokens_per_second"] = tokens / runtime


def _read_jsonl(path: Path) -> TrainingLog:
    """EvaluationCallback's JSONL: `step` and `eval` events make the curve, `end` the totals; `memory` and
    `measure` events are for people reading the file and are checked for their step only."""
    try:
        text = jsonl_text(path.read_bytes())
    except JsonlDecodeError as exc:
        raise TrainingLogError(f"{path}:{exc.line}: {exc.reason}") from None
    out = _Builder(path)
    for lineno, obj, reason in jsonl_objects(text):
        where = f"{path}:{lineno}"
        if obj is None:
            out.problems.append(f"{where}: {reason}")
            continue
        event = obj.get("event")
        if event not in EVENTS:
            out.problems.append(f"{where}: 'event' must be one of {', '.join(EVENTS)}, got {event!r}")
        elif event == "step":
            out.train(where, obj)
        elif event == "eval":
            out.eval(where, obj)
        elif event == "end":
            for key, value in obj.items():
                if key not in ("event", "step"):
                    out.total(where, key, value)
    return out.build()


# --- analysis ----------------------------------------------------------------------------------------------


def smooth(values: Sequence[float], width: int) -> list[float]:
    """Trailing moving average: entry i is the mean of values[i - width + 1 : i + 1] (fewer at the start).

    The document smooths with np.convolve(..., mode="valid") (§3.1), which drops the first width - 1 points;
    a trailing mean keeps one value per logged step, so every step can be named, and its last value is the
    mean of the last `width` losses: the document's final_loss.
    """
    if width < 1:
        raise ValueError(f"the smoothing width must be >= 1, got {width}")
    return [_mean(values[max(0, i - width + 1) : i + 1]) for i in range(len(values))]


def _mean(values: Sequence[float]) -> float:
    """fmean, kept within [min, max]: the mean of n equal losses is that loss, not one ulp off it."""
    return min(max(statistics.fmean(values), min(values)), max(values))


@dataclass(frozen=True)
class _Convergence:
    step: int | None
    final: float  # the smoothed loss's last value
    last_outside: int | None  # index of the last smoothed value outside the tolerance
    smoothed: list[float]


def _convergence(log: TrainingLog, window: int, tolerance: float, smoothing: int | None) -> _Convergence:
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    smoothed = smooth(log.loss, smoothing or window)
    final = smoothed[-1]
    outside = [i for i, s in enumerate(smoothed) if abs(s - final) > tolerance * abs(final)]
    first_inside = outside[-1] + 1 if outside else 0
    # The last value is always within tolerance of itself: a plateau counts only once it lasted a window.
    step = log.steps[first_inside] if len(smoothed) - first_inside >= window else None
    return _Convergence(step, final, outside[-1] if outside else None, smoothed)


def convergence_step(
    log: TrainingLog, *, window: int = 50, tolerance: float = 0.05, smoothing: int | None = None
) -> int | None:
    """The first step after which the smoothed loss stays within `tolerance` of its final value (§1.2, §3.1).

    Smoothed: the trailing mean over `smoothing` steps (default `window`, as the document smooths and
    averages over one window_size). Within tolerance: |smoothed - final| <= tolerance * |final|, relative, so
    the step does not change when the loss is scaled. The plateau must last at least `window` logged steps:
    a loss still falling is within tolerance of itself at its last step and has not converged. None if not.
    """
    return _convergence(log, window, tolerance, smoothing).step


def steps_to_95(log: TrainingLog, *, window: int = 50, smoothing: int | None = None) -> int | None:
    """The first step where the smoothed loss achieved 95 % of the run's loss reduction (§2.3, "steps to
    reach 95% of final performance"): first loss - smoothed loss >= 0.95 * (first loss - final_loss).

    final_loss is the mean of the last `window` losses; smoothing as convergence_step. None when the loss
    did not fall (first loss <= final_loss) or the smoothed curve never gets there.
    """
    final = _mean(log.loss[-window:])
    total = log.loss[0] - final
    if not total > 0:
        return None
    for step, value in zip(log.steps, smooth(log.loss, smoothing or window), strict=True):
        if log.loss[0] - value >= 0.95 * total:
            return step
    return None


def overfitting(
    log: TrainingLog, *, patience: int = 3, min_rise: float = 0.02, smoothing: int = 50
) -> Overfitting:
    """Validation loss rising while training loss falls (§3.1's overfitting indicator), from evaluations.

    best_step is the evaluation with the lowest eval loss (the latest one on ties), so every later eval loss
    is above it. Overfitting is detected, with onset_step = best_step, when all three hold:
    - at least `patience` evaluations came after it (the eval loss stayed above its best for them);
    - eval_rise = last eval loss - best eval loss > min_rise * best eval loss (relative: a plateau's noise
      is not a rise);
    - train_fall = training loss at best_step - training loss at the last evaluation's step > 0, each the
      trailing mean over `smoothing` logged losses at the last logged step <= that step (the first logged
      loss for an evaluation before it).
    The onset is where the best checkpoint was: from there on the eval loss never came back down.
    """
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    none: Overfitting = {
        "detected": False,
        "onset_step": None,
        "best_step": None,
        "eval_rise": None,
        "train_fall": None,
    }
    if not log.eval_loss:
        return none
    lowest = min(log.eval_loss)
    best = max(i for i, v in enumerate(log.eval_loss) if v == lowest)
    smoothed = smooth(log.loss, smoothing)

    def train_at(step: int) -> float:
        before = [i for i, s in enumerate(log.steps) if s <= step]
        return smoothed[before[-1] if before else 0]

    rise = log.eval_loss[-1] - lowest
    fall = train_at(log.eval_steps[best]) - train_at(log.eval_steps[-1])
    detected = len(log.eval_loss) - 1 - best >= patience and rise > min_rise * abs(lowest) and fall > 0
    return {
        "detected": detected,
        "onset_step": log.eval_steps[best] if detected else None,
        "best_step": log.eval_steps[best],
        "eval_rise": rise,
        "train_fall": fall,
    }


@dataclass(frozen=True)
class Spike:
    """A gradient norm above its threshold (or not finite), with the threshold it was judged by."""

    step: int
    norm: float
    threshold: float
    median: float


def gradient_spikes(log: TrainingLog, *, k: float = 6.0, window: int = 50) -> list[Spike]:
    """Steps whose gradient norm is a spike (§3.2): above median + k * scale of the norms just before it.

    Reference: up to `window` finite norms logged before the step, judged once there are MIN_HISTORY of
    them. Local rather than global because norms trend (they fall fast early in training; a global median
    would call the first steps spikes). scale = max(1.4826 * MAD, MAD_FLOOR * median), MAD = the median
    absolute deviation from the median: robust, so earlier spikes do not raise the bar, and in sigmas of
    normal noise. A norm that is not finite (inf or NaN from an overflow) is always a spike.
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    found: list[Spike] = []
    history: list[float] = []
    for step, norm in zip(log.steps, log.grad_norm, strict=True):
        if norm is None:
            continue
        if not math.isfinite(norm):
            found.append(Spike(step, norm, math.nan, math.nan))
            continue
        recent = history[-window:]
        if len(recent) >= MIN_HISTORY:
            median = statistics.median(recent)
            mad = statistics.median(abs(v - median) for v in recent)
            threshold = median + k * max(MAD_TO_SIGMA * mad, MAD_FLOOR * abs(median))
            if norm > threshold:
                found.append(Spike(step, norm, threshold, median))
        history.append(norm)
    return found


def gradient_summary(log: TrainingLog, *, k: float = 6.0, window: int = 50) -> GradNormSummary:
    """Mean, population variance and max of the finite logged gradient norms, and the spike steps."""
    finite = [g for g in log.grad_norm if g is not None and math.isfinite(g)]
    return {
        "count": len(finite),
        "mean": statistics.fmean(finite) if finite else None,
        "variance": statistics.pvariance(finite) if finite else None,
        "max": max(finite) if finite else None,
        "spikes": [s.step for s in gradient_spikes(log, k=k, window=window)],
    }


def analyse(
    log: TrainingLog,
    *,
    window: int = 50,
    tolerance: float = 0.05,
    smoothing: int | None = None,
    patience: int = 3,
    min_rise: float = 0.02,
    k: float = 6.0,
) -> Analysis:
    """The document's convergence analysis (§3.1) with gradient norms (§3.2) and totals (§2.3), JSON-ready.

    final_loss: the mean of the last `window` losses. loss_stability: 1 / (1 + their population variance),
    1 for a flat tail. convergence_step, steps_to_95, overfitting, grad_norm: the functions of those names.
    """
    tail = log.loss[-window:]
    return {
        "n_steps": log.steps[-1],
        "n_logged": len(log.steps),
        "final_loss": _mean(tail),
        "loss_stability": 1.0 / (1.0 + statistics.pvariance(tail)),
        "convergence_step": convergence_step(log, window=window, tolerance=tolerance, smoothing=smoothing),
        "steps_to_95": steps_to_95(log, window=window, smoothing=smoothing),
        "overfitting": overfitting(log, patience=patience, min_rise=min_rise, smoothing=smoothing or window),
        "grad_norm": gradient_summary(log, k=k, window=window),
        "totals": dict(log.totals),
    }


def downsample(
    points: Sequence[tuple[int, float]], max_points: int, *, keep: Collection[int] = ()
) -> list[tuple[int, float]]:
    """At most `max_points` of a curve's (step, value) points, plus the steps in `keep`, for drawing it.

    Largest-triangle-three-buckets (Steinarsson 2013): the points between the first and the last are cut
    into max_points - 2 buckets, and each bucket keeps the point that makes the largest triangle with the
    point kept before it and the mean of the next bucket. Unlike every n-th point, it keeps what shapes
    the line (a spike, a sudden drop) at any length. Deterministic: ties keep the earliest point. `keep`
    adds points that a chart marks (spikes) whichever bucket they fell in.
    """
    if max_points < 3:
        raise ValueError(f"max_points must be >= 3, got {max_points}")
    n = len(points)
    if n <= max_points:
        return list(points)
    every = (n - 2) / (max_points - 2)
    chosen = [0]
    for bucket in range(max_points - 2):
        start, end = int(bucket * every) + 1, int((bucket + 1) * every) + 1
        following = points[end : min(int((bucket + 2) * every) + 1, n)] or points[-1:]
        mean_x = statistics.fmean(float(x) for x, _ in following)
        mean_y = statistics.fmean(y for _, y in following)
        ax, ay = points[chosen[-1]]
        # Twice the area of the triangle (previous point, candidate, next bucket's mean); max keeps the
        # first of equal ones.
        areas = [abs((ax - mean_x) * (y - ay) - (ax - x) * (mean_y - ay)) for x, y in points[start:end]]
        chosen.append(start + areas.index(max(areas)))
    chosen.append(n - 1)
    kept = set(chosen) | {i for i, (step, _) in enumerate(points) if step in keep}
    return [points[i] for i in sorted(kept)]


def lr_sensitivity(test_losses: Sequence[float]) -> float:
    """Coefficient of variation of the test losses over a learning-rate grid (§3.3): std / mean.

    The population standard deviation (ddof = 0), as the document's np.std: the grid is every learning rate
    under study, not a sample of them, and the number then compares with the document's.
    """
    if not test_losses:
        raise ValueError("lr_sensitivity needs the test loss of at least one learning rate")
    mean = statistics.fmean(test_losses)
    if mean == 0:
        raise ValueError("lr_sensitivity: the mean test loss is 0, std / mean is undefined")
    return statistics.pstdev(test_losses) / mean


# --- assertions ---------------------------------------------------------------------------------------------


def assert_converged(
    log: TrainingLog,
    *,
    within: int | None = None,
    window: int = 50,
    tolerance: float = 0.05,
    smoothing: int | None = None,
) -> None:
    """Fail unless the loss converged (convergence_step), and, with `within`, by that step at the latest."""
    found = _convergence(log, window, tolerance, smoothing)
    where = f"{log.source}: "
    if found.step is None:
        if found.last_outside is None:
            raise AssertionError(
                f"{where}training loss not converged: only {len(log.loss)} logged steps, the plateau "
                f"must last window={window}"
            )
        i = found.last_outside
        away = abs(found.smoothed[i] - found.final) / abs(found.final)
        raise AssertionError(
            f"{where}training loss not converged: at step {log.steps[i]} the smoothed loss "
            f"{found.smoothed[i]:.4g} was {away:.1%} from the final {found.final:.4g} (tolerance "
            f"{tolerance:.1%}); it stayed within tolerance for {len(log.loss) - 1 - i} logged steps after "
            f"that, fewer than window={window}"
        )
    if within is not None and found.step > within:
        raise AssertionError(
            f"{where}training loss converged at step {found.step}, later than step {within} "
            f"(final smoothed loss {found.final:.4g}, tolerance {tolerance:.1%})"
        )


def assert_no_overfitting(
    log: TrainingLog, *, patience: int = 3, min_rise: float = 0.02, smoothing: int = 50
) -> None:
    """Fail when overfitting() detects validation loss rising while training loss falls; also when the log
    has too few evaluations to tell (patience + 1)."""
    if len(log.eval_loss) < patience + 1:
        raise AssertionError(
            f"{log.source}: {len(log.eval_loss)} evaluation(s) in the log, {patience + 1} needed to check "
            "overfitting (evaluate during training: eval_strategy='steps')"
        )
    found = overfitting(log, patience=patience, min_rise=min_rise, smoothing=smoothing)
    if not found["detected"]:
        return
    onset = found["onset_step"]
    later = [
        f"{s}: {v:.4g}"
        for s, v in zip(log.eval_steps, log.eval_loss, strict=True)
        if onset is not None and s >= onset
    ]
    raise AssertionError(
        f"{log.source}: overfitting from step {onset}: eval loss rose by {found['eval_rise']:.4g} "
        f"({', '.join(later)}) while the training loss fell by {found['train_fall']:.4g}"
    )


def assert_stable_gradients(
    log: TrainingLog, *, max_spikes: int = 0, k: float = 6.0, window: int = 50
) -> None:
    """Fail when more than `max_spikes` gradient-norm spikes (gradient_spikes) are in the log."""
    if not any(g is not None for g in log.grad_norm):
        raise AssertionError(f"{log.source}: no gradient norm in the log (the Trainer logs 'grad_norm')")
    spikes = gradient_spikes(log, k=k, window=window)
    if len(spikes) <= max_spikes:
        return
    listed = "; ".join(
        f"step {s.step}: {s.norm:.4g}"
        + (f" > {s.threshold:.4g} (median {s.median:.4g})" if math.isfinite(s.threshold) else " (not finite)")
        for s in spikes
    )
    raise AssertionError(
        f"{log.source}: {len(spikes)} gradient-norm spike(s), at most {max_spikes} allowed (k={k}): {listed}"
    )


# Points each training curve keeps in results.json (training.downsample): more than a page-wide chart can
# show, and a log of 100k steps does not make results.json a copy of itself.
MAX_CURVE_POINTS = 500


def training_entry(
    log: TrainingLog,
    *,
    found: str,
    window: int,
    gates: Mapping[str, Mapping[str, Any]],
    max_points: int = MAX_CURVE_POINTS,
) -> dict[str, Any]:
    """A column's `training` in results.json: which log, training.analyse()'s numbers, its gates' verdicts,
    and the curves (downsampled; the points the report marks kept), so that the HTML report is rebuilt
    from results.json alone. Values that are not finite (a NaN loss a log may hold) are null: JSON has none.

    found: how the log was found ("--llmeval-training-log", or "adapter folder").
    """
    analysis = analyse(log, window=window)
    # The steps the report marks on the loss chart: where the loss converged, where overfitting began.
    steps = (analysis["convergence_step"], analysis["overfitting"]["onset_step"])
    marked = {step for step in steps if step is not None}
    norms = [
        (step, norm)
        for step, norm in zip(log.steps, log.grad_norm, strict=True)
        if norm is not None and math.isfinite(norm)
    ]
    curves = {
        "loss": downsample(list(zip(log.steps, log.loss, strict=True)), max_points, keep=marked),
        "eval_loss": downsample(
            list(zip(log.eval_steps, log.eval_loss, strict=True)), max_points, keep=marked
        ),
        "grad_norm": downsample(norms, max_points, keep=set(analysis["grad_norm"]["spikes"])),
    }
    entry = {
        "log": str(log.source),
        "found": found,
        "window": window,
        **analysis,
        "gates": {name: dict(verdict) for name, verdict in gates.items()},
        "curves": {
            "max_points": max_points,
            # [step, value] pairs, in step order.
            **{name: [[step, value] for step, value in points] for name, points in curves.items()},
        },
    }
    return cast(dict[str, Any], _finite(entry))


def _finite(value: Any) -> Any:
    """`value` with every float that is not finite replaced by None, in nested dicts and lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
