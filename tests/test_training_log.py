"""Training evidence (pytest_llmeval.training, training_callback): the convergence, overfitting and gradient
math as properties; reading trainer_state.json and the callback's JSONL, and refusing bad ones with the file
(and line); then real training runs of a tiny Llama with transformers' Trainer, one normal, one that
overfits, one with a learning-rate spike, each read back from what the Trainer and the callback wrote."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.training import (
    LOG_NAME,
    MIN_HISTORY,
    STATE_NAME,
    TrainingLog,
    TrainingLogError,
    analyse,
    assert_converged,
    assert_no_overfitting,
    assert_stable_gradients,
    convergence_step,
    gradient_spikes,
    lr_sensitivity,
    overfitting,
    read_log,
    steps_to_95,
)


def curve(
    loss: Sequence[float],
    grad_norm: Sequence[float | None] | None = None,
    evals: Sequence[tuple[int, float]] = (),
) -> TrainingLog:
    """A log of steps 1..n with the given losses (and norms, and (step, eval loss) points)."""
    n = len(loss)
    return TrainingLog(
        source=Path("run"),
        steps=tuple(range(1, n + 1)),
        loss=tuple(loss),
        learning_rate=(1e-3,) * n,
        grad_norm=tuple(grad_norm) if grad_norm is not None else (None,) * n,
        eval_steps=tuple(s for s, _ in evals),
        eval_loss=tuple(v for _, v in evals),
    )


LOSS = st.floats(0.01, 100.0)
WINDOW = st.integers(1, 12)


# --- convergence -------------------------------------------------------------------------------------------


@given(LOSS, WINDOW, st.integers(0, 30))
def test_a_constant_loss_converges_at_the_first_step_with_stability_1(
    value: float, window: int, extra: int
) -> None:
    log = curve([value] * (window + extra))
    found = analyse(log, window=window)
    assert found["convergence_step"] == 1
    assert found["loss_stability"] == 1.0
    assert found["final_loss"] == pytest.approx(value)
    assert found["steps_to_95"] is None  # nothing fell
    json.dumps(found, allow_nan=False)


@given(
    st.lists(st.floats(0.0, 50.0), min_size=1, max_size=30),
    st.floats(0.1, 10.0),
    WINDOW,
    st.floats(0.0, 0.5),
)
def test_a_falling_then_flat_loss_converges_once_the_flat_part_is_reached(
    drops: list[float], flat: float, window: int, tolerance: float
) -> None:
    # Every falling value is above the tolerance band of the flat value: the plateau starts at the flat part.
    falling = sorted((flat * (1 + tolerance) + 0.01 + d for d in drops), reverse=True)
    log = curve([*falling, *[flat] * (2 * window)])
    first_flat = len(falling) + 1
    found = convergence_step(log, window=window, tolerance=tolerance)
    assert found is not None
    # The trailing mean reaches the flat value `window` steps into the flat part at the latest.
    assert first_flat <= found <= first_flat + window - 1
    reached = steps_to_95(log, window=window)
    assert reached is not None and 1 < reached <= first_flat + window - 1


@given(st.lists(LOSS, min_size=1, max_size=80), WINDOW, st.integers(-20, 20), st.floats(0.0, 0.3))
def test_scaling_the_loss_leaves_convergence_and_steps_to_95_unchanged(
    loss: list[float], window: int, power: int, tolerance: float
) -> None:
    # Scaling by a power of two is exact in floating point, so the comparison is of the definitions, not of
    # rounding: both use relative quantities only.
    scaled = curve([v * 2.0**power for v in loss])
    log = curve(loss)
    assert convergence_step(scaled, window=window, tolerance=tolerance) == convergence_step(
        log, window=window, tolerance=tolerance
    )
    assert steps_to_95(scaled, window=window) == steps_to_95(log, window=window)


@given(st.lists(LOSS, min_size=1, max_size=60), WINDOW)
def test_stability_is_1_only_for_a_flat_tail(loss: list[float], window: int) -> None:
    stability = analyse(curve(loss), window=window)["loss_stability"]
    assert 0.0 < stability <= 1.0
    assert (stability == 1.0) == (len(set(loss[-window:])) == 1)


def test_a_loss_still_falling_has_not_converged_and_the_message_names_the_step() -> None:
    log = curve([10.0 - 0.1 * i for i in range(60)])
    assert convergence_step(log, window=10) is None
    with pytest.raises(AssertionError, match=r"at step 5\d the smoothed loss .* fewer than window=10"):
        assert_converged(log, window=10)


def test_assert_converged_within_a_step() -> None:
    log = curve([*[5.0, 4.0, 3.0, 2.0], *[1.0] * 30])
    assert_converged(log, window=5, within=10)
    with pytest.raises(AssertionError, match=r"converged at step 9, later than step 6"):
        assert_converged(log, window=5, within=6)


def test_too_short_a_log_cannot_converge() -> None:
    with pytest.raises(AssertionError, match=r"only 3 logged steps, the plateau must last window=50"):
        assert_converged(curve([1.0, 1.0, 1.0]))


# --- overfitting -----------------------------------------------------------------------------------------


@given(
    st.lists(st.floats(0.05, 1.0), min_size=0, max_size=6),
    st.lists(st.floats(0.03, 1.0), min_size=3, max_size=6),
    st.floats(0.5, 5.0),
)
def test_eval_loss_rising_after_its_best_while_training_falls_is_overfitting(
    falls: list[float], rises: list[float], best: float
) -> None:
    before = [best + sum(falls[i:]) for i in range(len(falls))]  # falling to the best
    after = [best * (1 + sum(rises[: i + 1])) for i in range(len(rises))]  # each above the last
    evals = list(enumerate([*before, best, *after], start=1))
    evals = [(10 * i, v) for i, v in evals]
    n = 10 * len(evals)
    log = curve([10.0 / (1 + i) for i in range(n)], evals=evals)  # training keeps falling
    found = overfitting(log, patience=3, smoothing=5)
    assert found["detected"]
    assert found["onset_step"] == 10 * (len(before) + 1)
    assert found["eval_rise"] == pytest.approx(after[-1] - best)
    assert found["train_fall"] is not None and found["train_fall"] > 0
    with pytest.raises(AssertionError, match=rf"overfitting from step {found['onset_step']}: eval loss rose"):
        assert_no_overfitting(log, smoothing=5)


def test_eval_loss_that_keeps_falling_or_rises_too_little_is_not_overfitting() -> None:
    train = [10.0 / (1 + i) for i in range(50)]
    falling = curve(train, evals=[(10 * i, 5.0 - i) for i in range(1, 6)])
    assert not overfitting(falling)["detected"]
    assert_no_overfitting(falling)
    # Above its best for 3 evaluations, but by 1 %: a plateau's noise (min_rise 2 %).
    noisy = curve(train, evals=[(10, 2.0), (20, 1.0), (30, 1.005), (40, 1.01), (50, 1.01)])
    assert not overfitting(noisy)["detected"]
    assert overfitting(noisy, min_rise=0.001)["detected"]
    # Two evaluations after the best: not yet `patience`.
    short = curve(train, evals=[(10, 2.0), (20, 1.0), (30, 1.5), (40, 2.0)])
    assert not overfitting(short)["detected"]
    assert overfitting(short, patience=2)["onset_step"] == 20


def test_eval_loss_rising_while_training_loss_rises_too_is_not_overfitting() -> None:
    diverging = curve([1.0 + 0.1 * i for i in range(50)], evals=[(10 * i, 1.0 + i) for i in range(1, 6)])
    found = overfitting(diverging)
    assert not found["detected"] and found["train_fall"] is not None and found["train_fall"] < 0


def test_too_few_evaluations_fail_the_overfitting_check() -> None:
    with pytest.raises(AssertionError, match=r"1 evaluation\(s\) in the log, 4 needed"):
        assert_no_overfitting(curve([1.0] * 5, evals=[(5, 1.0)]))


# --- gradient norms ----------------------------------------------------------------------------------------


@given(
    st.floats(0.01, 100.0),
    st.integers(MIN_HISTORY, 60),
    st.integers(0, 20),
    st.floats(1.1, 1e6),
    st.integers(1, 60),
)
def test_one_spike_on_a_flat_series_is_found_at_its_step(
    flat: float, position: int, after: int, factor: float, window: int
) -> None:
    norms = [flat] * (position + 1 + after)
    norms[position] = flat * factor  # 10 % above: over the 6 % the MAD floor allows at k = 6
    log = curve([1.0] * len(norms), norms)
    if window >= MIN_HISTORY:
        assert [s.step for s in gradient_spikes(log, window=window)] == [position + 1]
    assert analyse(log)["grad_norm"]["spikes"] == [position + 1]


@given(
    st.lists(st.floats(0.5, 2.0), min_size=30, max_size=120),
    st.sets(st.integers(1, 11)),
    st.floats(1e3, 1e9),
)
def test_spikes_do_not_hide_later_spikes(baseline: list[float], tens: set[int], height: float) -> None:
    # The median and MAD are robust: an earlier spike does not raise the bar for the next (a mean + k sigma
    # threshold would, and the second spike of a pair would pass unnoticed).
    norms = list(baseline)
    positions = sorted(10 * t for t in tens if 10 * t < len(norms))
    for p in positions:
        norms[p] = height
    spikes = {s.step for s in gradient_spikes(curve([1.0] * len(norms), norms))}
    assert {p + 1 for p in positions} <= spikes
    without = {s.step for s in gradient_spikes(curve([1.0] * len(baseline), baseline))}
    # Away from the spikes, nothing else changes much: the flags elsewhere are the baseline's own.
    assert spikes - {p + 1 for p in positions} <= without | {p + 2 for p in positions}


def test_not_finite_norms_are_spikes_and_stay_out_of_the_summary() -> None:
    norms: list[float | None] = [1.0, None, 1.1, 0.9, 1.0, 1.05, math.inf, 1.0, math.nan]
    log = curve([1.0] * len(norms), norms)
    summary = analyse(log, window=5)["grad_norm"]
    assert summary["spikes"] == [7, 9]
    assert summary["count"] == 6
    assert summary["max"] == 1.1
    assert summary["mean"] == pytest.approx(np.mean([1.0, 1.1, 0.9, 1.0, 1.05, 1.0]))
    assert summary["variance"] == pytest.approx(np.var([1.0, 1.1, 0.9, 1.0, 1.05, 1.0]))
    with pytest.raises(AssertionError, match=r"step 7: inf \(not finite\); step 9: nan"):
        assert_stable_gradients(log)


def test_assert_stable_gradients_lists_spike_steps_and_norms() -> None:
    norms = [1.0, 1.2, 0.9, 1.1, 1.0, 0.95, 1.05, 40.0, 1.0, 1.1]
    log = curve([1.0] * len(norms), norms)
    with pytest.raises(
        AssertionError, match=r"1 gradient-norm spike\(s\), at most 0 allowed .*step 8: 40 > "
    ):
        assert_stable_gradients(log)
    assert_stable_gradients(log, max_spikes=1)
    with pytest.raises(AssertionError, match="no gradient norm in the log"):
        assert_stable_gradients(curve([1.0, 1.0]))


# --- learning-rate sensitivity --------------------------------------------------------------------------


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=20))
def test_lr_sensitivity_is_the_documents_std_over_mean(losses: list[float]) -> None:
    assert lr_sensitivity(losses) == pytest.approx(np.std(losses) / np.mean(losses), abs=1e-12)


def test_lr_sensitivity_refuses_what_has_no_coefficient() -> None:
    assert lr_sensitivity([2.0, 2.0]) == 0.0
    with pytest.raises(ValueError, match="at least one"):
        lr_sensitivity([])
    with pytest.raises(ValueError, match="mean test loss is 0"):
        lr_sensitivity([0.0, 0.0])


# --- reading ---------------------------------------------------------------------------------------------


def state_doc(history: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    """A trainer_state.json as transformers 5 writes it (the fields read, and some that are not)."""
    return {"best_metric": None, "epoch": 1.0, "global_step": 4, "log_history": history, **top}


HISTORY: list[dict[str, Any]] = [
    {"epoch": 0.25, "grad_norm": 3.5, "learning_rate": 1e-3, "loss": 4.0, "step": 1},
    {"epoch": 0.5, "grad_norm": 2.5, "learning_rate": 1e-3, "loss": 3.0, "step": 2},
    {"epoch": 0.5, "eval_loss": 3.2, "eval_runtime": 0.1, "eval_samples_per_second": 40.0, "step": 2},
    {"epoch": 0.75, "grad_norm": 2.0, "learning_rate": 5e-4, "loss": 2.5, "step": 3},
    {"epoch": 1.0, "learning_rate": 0.0, "loss": 2.25, "step": 4},
    {"epoch": 1.0, "eval_loss": 2.9, "step": 4},
    {
        "epoch": 1.0,
        "step": 4,
        "total_flos": 1.0,
        "train_loss": 2.9,
        "train_runtime": 2.0,
        "train_steps_per_second": 2.0,
    },
]


def test_reads_a_state_json(tmp_path: Path) -> None:
    path = tmp_path / STATE_NAME
    path.write_text(json.dumps(state_doc(HISTORY, num_input_tokens_seen=800)))
    log = read_log(path)
    assert log.source == path
    assert log.steps == (1, 2, 3, 4)
    assert log.loss == (4.0, 3.0, 2.5, 2.25)
    assert log.learning_rate == (1e-3, 1e-3, 5e-4, 0.0)
    assert log.grad_norm == (3.5, 2.5, 2.0, None)
    assert (log.eval_steps, log.eval_loss) == ((2, 4), (3.2, 2.9))
    assert log.totals == {
        "total_training_time_s": 2.0,
        "time_per_step_s": 0.5,
        "steps_per_hour": 7200.0,
        "tokens": 800.0,
        "tokens_per_second": 400.0,
    }
    found = analyse(log, window=2)
    assert found["final_loss"] == 2.375
    assert found["n_steps"] == 4 and found["totals"] == log.totals
    json.dumps(found, allow_nan=False)


def test_reads_the_callbacks_jsonl(tmp_path: Path) -> None:
    events = [
        {"event": "step", "step": 1, "loss": 4.0, "learning_rate": 1e-3, "grad_norm": 3.5},
        {"event": "memory", "step": 1, "device": "cpu", "parameters_bytes": 10, "peak_rss_bytes": 99},
        {"event": "step", "step": 2, "loss": 3.0, "learning_rate": 1e-3, "grad_norm": None},
        {"event": "eval", "step": 2, "eval_loss": 3.5},
        {
            "event": "measure",
            "step": 2,
            "perplexity": 20.0,
            "cross_entropy": 3.0,
            "character_accuracy": 0.4,
            "character_accuracy_by_script": {"hiragana": 0.5, "other": 0.25},
        },
        {"event": "end", "step": 2, "total_training_time_s": 1.0, "n_steps": 2, "steps_per_hour": 7200.0},
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + "\n")
    log = read_log(path)
    assert (log.steps, log.loss, log.grad_norm) == ((1, 2), (4.0, 3.0), (3.5, None))
    assert (log.eval_steps, log.eval_loss) == ((2,), (3.5,))
    assert log.totals == {"total_training_time_s": 1.0, "n_steps": 2.0, "steps_per_hour": 7200.0}


def test_a_folder_gives_its_jsonl_then_its_state_then_its_latest_checkpoint(tmp_path: Path) -> None:
    for step in (2, 10, 9):  # 10 is the latest although "checkpoint-10" sorts before "checkpoint-2"
        (tmp_path / f"checkpoint-{step}").mkdir()
        history = [{"loss": 1.0, "step": s} for s in range(1, step + 1)]
        (tmp_path / f"checkpoint-{step}" / STATE_NAME).write_text(json.dumps(state_doc(history)))
    (tmp_path / "checkpoint-11").mkdir()  # no state in it
    assert read_log(tmp_path).source == tmp_path / "checkpoint-10" / STATE_NAME
    (tmp_path / STATE_NAME).write_text(json.dumps(state_doc(HISTORY)))
    assert read_log(tmp_path).source == tmp_path / STATE_NAME
    (tmp_path / LOG_NAME).write_text(json.dumps({"event": "step", "step": 1, "loss": 2.0}) + "\n")
    assert read_log(tmp_path).source == tmp_path / LOG_NAME


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"trainer_state.json:1: not JSON: Expecting property name"),
        ("\n\n[1, 2]", r"trainer_state.json: expected a JSON object"),
        ('{"global_step": 3}', r"trainer_state.json: no 'log_history' list: not a transformers Trainer"),
        (
            json.dumps(state_doc([{"loss": "high", "step": 1}, {"loss": 1.0, "step": 2, "grad_norm": True}])),
            r"log_history\[0\]: 'loss' must be a number, got 'high'\n"
            r".*log_history\[1\]: 'grad_norm' must be a number, got True",
        ),
        (
            json.dumps(state_doc([{"loss": 1.0}])),
            r"log_history\[0\]: 'step' must be an integer >= 0, got None",
        ),
        (
            json.dumps(state_doc([{"loss": 1.0, "step": 5}, {"loss": 1.0, "step": 3}])),
            r"log_history\[1\]: training loss at step 3 after step 5 \(steps must increase\)",
        ),
        (json.dumps(state_doc([{"eval_loss": 1.0, "step": 5}])), r"trainer_state.json: no training loss"),
        (b"\xff\xfe{}", r"trainer_state.json: not UTF-8 text"),
    ],
    ids=[
        "not-json",
        "not-object",
        "no-history",
        "not-numbers",
        "no-step",
        "steps-back",
        "no-loss",
        "not-utf8",
    ],
)
def test_a_bad_state_file_names_the_file_and_entry(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = tmp_path / STATE_NAME
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(TrainingLogError, match=message) as error:
        read_log(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"event": "step", "step": 1, "loss": 1.0}', "{oops"], r"log.jsonl:2: invalid JSON"),
        (['{"event": "step", "step": 1, "loss": 1.0}', "", "[1]"], r"log.jsonl:3: expected a JSON object"),
        (['{"event": "stop", "step": 1}'], r"log.jsonl:1: 'event' must be one of step, eval, memory"),
        (['{"event": "step", "step": 1.5, "loss": 1.0}'], r"log.jsonl:1: 'step' must be an integer"),
        (['{"event": "eval", "step": 1}'], r"log.jsonl:1: 'eval_loss' must be a number, got None"),
        (
            [
                '{"event": "step", "step": 1, "loss": 1.0}',
                '{"event": "end", "step": 1, "total_training_time_s": "x"}',
            ],
            r"log.jsonl:2: 'total_training_time_s' must be a number",
        ),
        (
            ['{"event": "step", "step": 2, "loss": 1.0}', '{"event": "step", "step": 1, "loss": 1.0}'],
            r"log.jsonl:2: training loss at step 1 after step 2",
        ),
    ],
    ids=["bad-json", "not-object", "bad-event", "bad-step", "no-eval-loss", "bad-total", "steps-back"],
)
def test_a_bad_jsonl_names_the_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TrainingLogError, match=message):
        read_log(path)


def test_a_missing_file_or_an_empty_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(TrainingLogError, match=rf"{tmp_path / 'nope'}: no such file or folder"):
        read_log(tmp_path / "nope")
    with pytest.raises(
        TrainingLogError, match=r"no training_log.jsonl, trainer_state.json or checkpoint-\*/"
    ):
        read_log(tmp_path)
    (tmp_path / "bad.jsonl").write_bytes(b'{"event": "step"}\n\xff\n')
    with pytest.raises(TrainingLogError, match=r"bad.jsonl:2: not valid UTF-8"):
        read_log(tmp_path / "bad.jsonl")


# --- real training: a tiny Llama, transformers' Trainer, the callback ---------------------------------------

REPO = Path(__file__).resolve().parent.parent
# Tokens per example: every batch has batch x LENGTH input tokens (padded). Short, because the cost of a step
# is the logits over the embedded tokenizer's 49k-token vocabulary at every position.
LENGTH = 16


def benchmark_inputs(name: str) -> list[str]:
    lines = (REPO / "benchmarks" / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["input"] for line in lines if line.strip()]


def examples(tokenizer: Any, texts: list[str]) -> list[dict[str, Any]]:
    """Causal-LM examples of LENGTH tokens, padding masked out of the labels."""
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=LENGTH, return_tensors="pt")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)  # (N, LENGTH)
    return [
        {"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i], "labels": labels[i]}
        for i in range(len(texts))
    ]


def train(
    out: Path,
    model_dir: Path,
    train_texts: list[str],
    eval_texts: list[str],
    *,
    steps: int,
    lr: float,
    batch: int,
    eval_every: int,
    schedule: str = "constant",
    spike_at: int | None = None,
    save_steps: int | None = None,
    benchmark: Path | None = None,
) -> Any:
    """Train the tiny model with the Trainer and EvaluationCallback (every step logged); return the Trainer.

    spike_at: LambdaLR's update number (0-based) that runs at 100 times the learning rate; the Trainer
    counts that update as step spike_at + 1.
    """
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        Trainer,
        TrainingArguments,
        default_data_collator,
    )

    from pytest_llmeval.training_callback import EvaluationCallback

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=steps,
        per_device_train_batch_size=batch,
        per_device_eval_batch_size=16,
        learning_rate=lr,
        lr_scheduler_type=schedule,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=eval_every,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or steps,
        save_only_model=True,
        include_num_input_tokens_seen=True,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    optimizers: tuple[Any, Any] = (None, None)
    if spike_at is not None:
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda n: 100.0 if n == spike_at else 1.0)
        optimizers = (optimizer, scheduler)
    callback = EvaluationCallback(
        out / LOG_NAME, eval_every=eval_every, measure_every=max(1, steps // 2), benchmark=benchmark
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=examples(tokenizer, train_texts),
        eval_dataset=examples(tokenizer, eval_texts),
        processing_class=tokenizer,
        data_collator=default_data_collator,  # the examples are already of one length
        callbacks=[callback],
        optimizers=optimizers,
    )
    trainer.train()
    trainer.save_state()  # out/trainer_state.json, with the final train_runtime entry
    return trainer


NORMAL_STEPS, NORMAL_BATCH, NORMAL_EVAL = 60, 8, 10
# Perplexity rows of the benchmark the callback measures: Japanese benchmark rows, and training reviews
# (learnt, so the model's top-1 next token is right on some of them: a character accuracy above 0).
JAPANESE_ROWS, LEARNT_ROWS = 4, 2
MEASURED_ROWS = JAPANESE_ROWS + LEARNT_ROWS


def measured_texts() -> list[str]:
    """The texts of the measured benchmark's rows, in its order."""
    return (
        benchmark_inputs("japanese_text.jsonl")[:JAPANESE_ROWS]
        + benchmark_inputs("sentiment.jsonl")[:LEARNT_ROWS]
    )


@pytest.fixture(scope="module")
def normal_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """English reviews, 48 to train on and 12 held out, the learning rate decaying to 0; the callback
    measures a few Japanese benchmark rows and two of the training reviews on the way."""
    reviews = benchmark_inputs("sentiment.jsonl")
    out = tmp_path_factory.mktemp("normal-run")
    rows = (REPO / "benchmarks" / "japanese_text.jsonl").read_text(encoding="utf-8").splitlines()
    # The reviews with a window of their own: the callback measures each window's rows apart and adds them
    # up. 128 tokens hold a whole review, so one call with the default window gives the same numbers.
    learnt = [
        json.dumps(
            {
                "id": f"learnt-{i}",
                "instruction": "",
                "input": text,
                "expected_output": "",
                "evaluation_type": "perplexity",
                "evaluation_config": {"threshold": 1e9, "max_length": 128},
                "difficulty": "easy",
            }
        )
        for i, text in enumerate(reviews[:LEARNT_ROWS])
    ]
    benchmark = out.parent / "measured.jsonl"
    benchmark.write_text("\n".join(rows[:JAPANESE_ROWS] + learnt) + "\n", encoding="utf-8")
    trainer = train(
        out,
        tiny_model,
        reviews[:48],
        reviews[48:],
        steps=NORMAL_STEPS,
        lr=3e-3,
        batch=NORMAL_BATCH,
        eval_every=NORMAL_EVAL,
        schedule="linear",
        save_steps=NORMAL_STEPS // 2,
        benchmark=benchmark,
    )
    return out, trainer


def test_trainer_state_and_callback_jsonl_tell_the_same_run(normal_run: tuple[Path, Any]) -> None:
    out, _ = normal_run
    state = read_log(out / STATE_NAME)
    jsonl = read_log(out)  # the folder: its training_log.jsonl
    assert jsonl.source == out / LOG_NAME
    assert state.steps == jsonl.steps == tuple(range(1, NORMAL_STEPS + 1))
    assert state.loss == jsonl.loss
    assert state.learning_rate == jsonl.learning_rate
    assert state.grad_norm == jsonl.grad_norm and None not in jsonl.grad_norm
    assert state.eval_steps == jsonl.eval_steps == tuple(range(10, NORMAL_STEPS + 1, 10))
    assert state.eval_loss == jsonl.eval_loss
    # A checkpoint's state is the run up to its step.
    assert read_log(out / "checkpoint-30").loss == state.loss[:30]
    tokens = NORMAL_STEPS * NORMAL_BATCH * LENGTH
    assert state.totals["tokens"] == jsonl.totals["tokens"] == tokens
    end = jsonl.totals
    assert end["n_steps"] == NORMAL_STEPS
    assert end["time_per_step_s"] == pytest.approx(end["total_training_time_s"] / NORMAL_STEPS)
    assert end["steps_per_hour"] == pytest.approx(3600 / end["time_per_step_s"])
    assert end["tokens_per_second"] == pytest.approx(tokens / end["total_training_time_s"])
    assert end["peak_rss_bytes"] > 0
    # Same numbers, the same analysis; the totals are each file's own clock.
    by_state, by_jsonl = analyse(state, window=10), analyse(jsonl, window=10)
    assert {**by_state, "totals": None} == {**by_jsonl, "totals": None}
    json.dumps(by_jsonl, allow_nan=False)


def test_trainer_run_converges_with_stable_gradients(normal_run: tuple[Path, Any]) -> None:
    log = read_log(normal_run[0])
    assert log.loss[-1] < log.loss[0] / 2
    # Generous: the last 10 steps' mean within 20 % of the final one for 10 steps (batches differ, so the
    # loss is noisy even as the rate goes to 0).
    assert_converged(log, window=10, tolerance=0.2, within=NORMAL_STEPS)
    found = analyse(log, window=10, tolerance=0.2)
    assert found["steps_to_95"] is not None and found["steps_to_95"] <= NORMAL_STEPS
    assert_stable_gradients(log, window=10)
    assert_stable_gradients(log)


def test_trainer_callback_memory_and_perplexity_events(normal_run: tuple[Path, Any]) -> None:
    from pytest_llmeval.perplexity import perplexity

    out, trainer = normal_run
    events = [json.loads(line) for line in (out / LOG_NAME).read_text().splitlines()]
    model = trainer.model
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    memory = [e for e in events if e["event"] == "memory"]
    assert [e["step"] for e in memory] == list(range(10, NORMAL_STEPS + 1, 10))
    for event in memory:
        assert event["device"] == "cpu" and event["peak_rss_bytes"] > params
        assert event["parameters_bytes"] == event["gradients_bytes"] == params  # every weight trains
        # AdamW: two moments per weight, and a step counter per tensor.
        assert 2 * params <= event["optimizer_state_bytes"] < 2 * params + 1024
    measured = [e for e in events if e["event"] == "measure"]
    assert [e["step"] for e in measured] == [NORMAL_STEPS // 2, NORMAL_STEPS]
    assert all(e["n_texts"] == MEASURED_ROWS for e in measured)
    # The last measurement is of the model as training left it.
    final = perplexity(model, trainer.processing_class, measured_texts(), by_script=True)
    assert measured[-1]["perplexity"] == pytest.approx(final.perplexity, rel=1e-6)
    assert all(1 < e["perplexity"] < math.inf for e in measured)
    # The document's character accuracy on the same schedule is perplexity's own top-1 figure on the same
    # texts: per script as results.json's perplexity block gives it, and over every script hits / scored.
    assert final.scripts is not None
    present = {s: share for s, share in final.scripts.items() if share.n_chars}
    assert set(present) == {"hiragana", "katakana", "latin", "other"}  # kana, English, spaces, punctuation
    by_script = measured[-1]["character_accuracy_by_script"]
    assert by_script == pytest.approx({s: share.top1_accuracy for s, share in present.items()}, rel=1e-9)
    hits = math.fsum(share.hits for share in final.scripts.values())
    scored = math.fsum(share.scored for share in final.scripts.values())
    assert scored == pytest.approx(final.n_tokens)  # each scored token weighs one, shared over its characters
    assert measured[-1]["character_accuracy"] == pytest.approx(hits / scored, rel=1e-9)
    assert all(0 < e["character_accuracy"] < 1 for e in measured)
    assert measured[-1]["character_accuracy_by_script"]["latin"] > 0, measured[-1]


@pytest.fixture(scope="module")
def overfit_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two Japanese sentences learnt by heart, evaluated on ten others: the eval loss falls for a few steps
    (Japanese tokens become likelier), then rises as the two sentences are memorised."""
    out = tmp_path_factory.mktemp("overfit-run")
    japanese = benchmark_inputs("japanese_text.jsonl")
    train(out, tiny_model, japanese[:2], japanese[30:40], steps=40, lr=1e-2, batch=2, eval_every=2)
    return out


def test_trainer_overfitting_is_found_at_the_best_evaluation(overfit_run: Path) -> None:
    log = read_log(overfit_run)
    best = min(range(len(log.eval_loss)), key=lambda i: (log.eval_loss[i], -i))
    assert 0 < best < len(log.eval_loss) - 3  # it fell first, then rose: the onset is not the first point
    found = overfitting(log, smoothing=5)
    assert found["detected"] and found["onset_step"] == log.eval_steps[best]
    with pytest.raises(
        AssertionError, match=rf"overfitting from step {log.eval_steps[best]}: eval loss rose"
    ):
        assert_no_overfitting(log, smoothing=5)


SPIKE_AT = 24  # LambdaLR's update 24 is the Trainer's step 25; its effect shows in step 26's gradients


@pytest.fixture(scope="module")
def spike_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight reviews, one batch per step (smooth gradient norms), one update at 100 times the rate."""
    out = tmp_path_factory.mktemp("spike-run")
    reviews = benchmark_inputs("sentiment.jsonl")
    train(
        out,
        tiny_model,
        reviews[:8],
        reviews[48:],
        steps=32,
        lr=1e-3,
        batch=8,
        eval_every=8,
        spike_at=SPIKE_AT,
    )
    return out


def test_trainer_learning_rate_spike_is_a_gradient_spike(spike_run: Path) -> None:
    log = read_log(spike_run)
    rates = dict(zip(log.steps, log.learning_rate, strict=True))
    assert rates[SPIKE_AT + 1] == pytest.approx(100 * 1e-3) and rates[SPIKE_AT] == pytest.approx(1e-3)
    spikes = gradient_spikes(log, window=10)
    assert spikes and spikes[0].step == SPIKE_AT + 2
    with pytest.raises(
        AssertionError, match=rf"gradient-norm spike\(s\), at most 0 allowed .*step {SPIKE_AT + 2}: "
    ):
        assert_stable_gradients(log, window=10)


def test_the_package_exports_the_training_evidence() -> None:
    import pytest_llmeval
    from pytest_llmeval import training

    names = ("read_log", "analyse", "lr_sensitivity", "assert_converged", "assert_no_overfitting")
    for name in (*names, "assert_stable_gradients"):
        assert name in pytest_llmeval.__all__
        assert getattr(pytest_llmeval, name) is getattr(training, name)
