"""The training log in the plugin: found in the adapter folder or named by --llmeval-training-log, analysed
into results.json `training`, the gates `<adapter>::gate::converged` and `::no_overfitting` (warn only unless
--llmeval-training-gates=fail), the HTML report's curves and the summary line; bad logs refused (named) or
left out with a warning (found). The pure parts first (downsampling, the verdicts, the entry, the chart);
then LoRA adapters of a tiny model trained for real with transformers' Trainer and EvaluationCallback, one
that converges and one that overfits, evaluated through pytester serially and with -n 2."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row, without_clocks
from hypothesis import given
from hypothesis import strategies as st

# The real-training helpers of the training module's own tests: the same examples, the same benchmark texts.
from test_training_log import benchmark_inputs, curve, examples

from pytest_llmeval import gates
from pytest_llmeval.formatting import training_summary
from pytest_llmeval.reporting.html import html_report
from pytest_llmeval.reporting.summary import summary_lines
from pytest_llmeval.training import (
    LOG_NAME,
    MAX_CURVE_POINTS,
    STATE_NAME,
    TrainingLog,
    analyse,
    downsample,
    read_log,
    training_entry,
)

# --- downsampling ------------------------------------------------------------------------------------------

POINTS = st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=400).map(
    lambda values: [(step, value) for step, value in enumerate(values, start=1)]
)


@given(POINTS, st.integers(3, 120), st.sets(st.integers(1, 400), max_size=8))
def test_downsampling_keeps_the_ends_the_marked_steps_and_at_most_max_points_more(
    points: list[tuple[int, float]], max_points: int, keep: set[int]
) -> None:
    kept = downsample(points, max_points, keep=keep)
    marked = {p for p in points if p[0] in keep}
    if len(points) <= max_points:
        assert kept == points
        return
    assert set(kept) <= set(points) and kept == sorted(kept)  # points of the curve, in step order
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert marked <= set(kept)
    assert len(kept) <= max_points + len(marked)
    assert downsample(points, max_points, keep=keep) == kept  # deterministic


def test_downsampling_keeps_a_spike_that_every_nth_point_would_miss() -> None:
    points = [(step, 1.0 + 0.001 * math.sin(step)) for step in range(1, 10_001)]
    points[4_321] = (4_322, 50.0)
    kept = downsample(points, 100)
    assert len(kept) == 100 and (4_322, 50.0) in kept
    assert 4_322 not in range(1, 10_001, 100)  # a stride of 100 would have drawn a flat line
    with pytest.raises(ValueError, match="max_points must be >= 3"):
        downsample(points, 2)


# --- the verdicts and the results.json entry (pure) ---------------------------------------------------------

FLAT = [5.0, 4.0, 3.0, *[2.0] * 12]
RISING_EVALS = [(3, 3.0), (6, 2.0), (9, 2.2), (12, 2.4), (15, 2.6)]


def test_converged_passes_warns_or_fails_with_the_assertions_message() -> None:
    assert gates.converged(curve(FLAT), window=5).status == "pass"
    # The 5-step mean reaches 2 (within 5 %) at step 8, and stays there for 8 logged steps.
    assert "converged at step 8" in gates.converged(curve(FLAT), window=5).message
    falling = curve([10.0 - 0.1 * i for i in range(40)])
    warned = gates.converged(falling, window=5)
    assert warned.status == "warn" and warned.passed
    assert "training loss not converged: at step" in warned.message
    assert warned.message.endswith("(warn only: --llmeval-training-gates=fail makes it fail)")
    failed = gates.converged(falling, window=5, strict=True)
    assert failed.status == "fail" and not failed.passed and "warn only" not in failed.message


def test_no_overfitting_names_the_onset_and_skips_without_enough_evaluations() -> None:
    overfit = curve(FLAT, evals=RISING_EVALS)
    warned = gates.no_overfitting(overfit, smoothing=5)
    assert warned.status == "warn"
    assert "overfitting from step 6: eval loss rose by 0.6" in warned.message
    assert warned.details["onset_step"] == 6
    assert gates.no_overfitting(overfit, smoothing=5, strict=True).status == "fail"
    steady = curve(FLAT, evals=[(3, 3.0), (6, 2.5), (9, 2.2), (12, 2.1), (15, 2.1)])
    assert gates.no_overfitting(steady, smoothing=5).status == "pass"
    few = gates.no_overfitting(curve(FLAT, evals=[(5, 2.0)]), smoothing=5, strict=True)
    assert few.status == "skip" and "1 evaluation(s) in the log, 4 needed" in few.message


def test_the_entry_holds_the_analysis_the_verdicts_and_downsampled_curves() -> None:
    n = 2_000
    norms: list[float | None] = [1.0 + 0.01 * (i % 7) for i in range(n)]
    norms[1_234] = 80.0  # a spike, at step 1235
    norms[10] = math.inf  # not finite: a spike, but no point of the curve
    log = TrainingLog(
        source=Path("run/trainer_state.json"),
        steps=tuple(range(1, n + 1)),
        loss=tuple(3.0 + 1.0 / (1 + i) for i in range(n)),
        learning_rate=(1e-3,) * n,
        grad_norm=tuple(norms),
        eval_steps=(500, 1000, 1500, 2000),
        eval_loss=(3.1, 3.0, 3.05, math.nan),
    )
    verdict = gates.converged(log, window=50).to_json()
    entry = training_entry(log, found="adapter folder", window=50, gates={"converged": verdict})
    text = json.dumps(entry, allow_nan=False)  # NaN and inf became null
    assert json.loads(text) == entry
    analysis = analyse(log, window=50)
    assert entry["convergence_step"] == analysis["convergence_step"] is not None
    assert entry["grad_norm"]["spikes"] == [11, 1235]
    assert entry["log"] == "run/trainer_state.json" and entry["found"] == "adapter folder"
    assert entry["gates"]["converged"]["status"] == "pass"
    curves = entry["curves"]
    assert curves["max_points"] == MAX_CURVE_POINTS
    assert MAX_CURVE_POINTS <= len(curves["loss"]) <= MAX_CURVE_POINTS + 1
    assert [analysis["convergence_step"], log.loss[analysis["convergence_step"] - 1]] in curves["loss"]
    assert [1235, 80.0] in curves["grad_norm"] and not any(step == 11 for step, _ in curves["grad_norm"])
    assert curves["eval_loss"] == [[500, 3.1], [1000, 3.0], [1500, 3.05], [2000, None]]


def test_summary_and_html_of_a_document_with_training() -> None:
    log = curve(FLAT, [1.0, 1.1, 0.9, 1.0, 1.05, 1.0, 40.0, *[1.0] * 8], evals=RISING_EVALS)
    verdicts = {
        "converged": gates.converged(log, window=5).to_json(),
        "no_overfitting": gates.no_overfitting(log, smoothing=5).to_json(),
    }
    entry = training_entry(log, found="--llmeval-training-log", window=5, gates=verdicts)
    said = training_summary(entry)
    assert said == (
        "final loss 2, converged at step 8, overfitting from step 6, gradient spike at step 7 (15 steps)"
    )
    document = {
        "mode": "adapter_vs_base",
        "benchmarks": [],
        "complete": True,
        "models": [
            {"name": "base", "column": "base"},
            {"name": "ja", "column": "adapter", "training": entry},
        ],
    }
    assert f"training of ja: {said}; log run" in summary_lines(document)
    page = html_report(document)
    assert '<section aria-labelledby="training">' in page
    assert page.count("<polyline") == 3  # training loss, eval loss, gradient norm
    assert "<title>converged: from step 8</title>" in page
    assert "<title>overfitting: from step 6</title>" in page
    assert "<title>spike: step 7, norm 40</title>" in page
    assert "! WARN</span><strong>no_overfitting</strong>" in page


# --- real training: LoRA adapters of the tiny model, what a training script leaves in the adapter folder ----

WINDOW = 10  # --llmeval-training-window: the runs log 16 and 50 steps, the default window is 50


def train_adapter(
    out: Path,
    base: Path,
    train_texts: list[str],
    eval_texts: list[str],
    *,
    name: str,
    steps: int,
    lr: float,
    batch: int,
    eval_every: int,
    schedule: str,
) -> Path:
    """Train a LoRA adapter (r 8 on every projection) of the tiny model with the Trainer, every step logged
    and evaluated every `eval_every` steps, and save into `out` what a training script leaves: the adapter,
    trainer_state.json (save_state) and EvaluationCallback's training_log.jsonl."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        Trainer,
        TrainingArguments,
        default_data_collator,
    )

    from pytest_llmeval.training_callback import EvaluationCallback

    tokenizer = AutoTokenizer.from_pretrained(base)
    base_model = AutoModelForCausalLM.from_pretrained(base)
    torch.manual_seed(0)  # LoRA's A matrices are drawn now
    projections = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = get_peft_model(base_model, LoraConfig(r=8, lora_alpha=16, target_modules=projections))
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
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=examples(tokenizer, train_texts),
        eval_dataset=examples(tokenizer, eval_texts),
        processing_class=tokenizer,
        data_collator=default_data_collator,
        callbacks=[EvaluationCallback(out / LOG_NAME, eval_every=eval_every)],
    )
    trainer.train()
    trainer.save_state()
    trainer.save_model(str(out))  # the adapter: adapter_config.json names the tiny model as its base
    (out / "metadata.json").write_text(json.dumps({"name": name, "version": "0.0.1"}))
    return out


def orders(n: int) -> list[str]:
    """Texts of one pattern, numbers drawn by a seeded generator: held-out ones are learnable too."""
    rng = random.Random(0)
    return [
        f"Order {rng.randint(100, 999)}: {rng.randint(1, 9)} apples and {rng.randint(1, 9)} pears."
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def steady(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 texts of one pattern, 16 others held out: the eval loss falls with the training loss, which
    flattens as the learning rate decays to 0 (converged, not overfitting)."""
    texts = orders(64)
    out = tmp_path_factory.mktemp("steady")
    return train_adapter(
        out,
        tiny_model,
        texts[:48],
        texts[48:],
        name="steady",
        steps=50,
        lr=3e-2,
        batch=8,
        eval_every=10,
        schedule="linear",
    )


@pytest.fixture(scope="module")
def overfit(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two Japanese sentences learnt by heart, English reviews held out: the eval loss rises from the first
    evaluation on while the training loss falls (overfitting; too short a run to converge)."""
    out = tmp_path_factory.mktemp("overfit")
    japanese, reviews = benchmark_inputs("japanese_text.jsonl"), benchmark_inputs("sentiment.jsonl")
    return train_adapter(
        out,
        tiny_model,
        japanese[:2],
        reviews[48:56],
        name="overfit",
        steps=16,
        lr=2e-2,
        batch=2,
        eval_every=2,
        schedule="constant",
    )


# Six rows that always pass (threshold 0) and benchmark gates that pass or skip, so that the outcomes are
# the training gates' (difficulty 2/3/1, one edge case; no training data: held_out skips).
ROWS = [
    row(
        f"r{i}",
        input=f"Item {i}.",
        difficulty=d,
        tags=["edge"] if i == 0 else [],
        evaluation_config={"max_new_tokens": 4, "threshold": 0},
    )
    for i, d in enumerate(["easy", "easy", "medium", "medium", "medium", "hard"])
]
XDIST = pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])


@pytest.fixture(autouse=True)
def _project(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl(ROWS))


def run(pytester: pytest.Pytester, tiny_model: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        f"--base-model={tiny_model}",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-cache",
        "--llmeval-no-history",
        "--llmeval-min-rows=1",
        "--llmeval-min-edge-cases=1",
        f"--llmeval-training-window={WINDOW}",
        "-rA",
        *args,
        "bench.jsonl",
    )


def results(pytester: pytest.Pytester, name: str = "results.json") -> dict[str, Any]:
    document: dict[str, Any] = json.loads((pytester.path / name).read_text(encoding="utf-8"))
    return document


def training_of(document: dict[str, Any], name: str) -> dict[str, Any]:
    entry: dict[str, Any] = next(m for m in document["models"] if m["name"] == name)["training"]
    return entry


def test_a_steady_run_passes_its_training_gates_serially_and_with_xdist_alike(
    pytester: pytest.Pytester, tiny_model: Path, steady: Path
) -> None:
    adapter = f"--adapter={steady}"
    serial = run(pytester, tiny_model, adapter, "--llmeval-results=serial.json", "--llmeval-html=report.html")
    xdist = run(pytester, tiny_model, adapter, "--llmeval-results=xdist.json", "-n", "2")
    log = read_log(steady)  # the folder's training_log.jsonl, as the plugin found it
    analysis = analyse(log, window=WINDOW)
    assert analysis["convergence_step"] is not None and not analysis["overfitting"]["detected"]
    for result in (serial, xdist):
        assert result.ret == 0, result.stdout.str()
        result.assert_outcomes(
            passed=6 + 4 + 2, skipped=1, warnings=result.parseoutcomes().get("warnings", 0)
        )
        result.stdout.fnmatch_lines(["PASSED steady::gate::converged", "PASSED steady::gate::no_overfitting"])
        assert "gate converged[steady]" not in result.stdout.str()  # no warning: the criteria hold
        converged = f"converged at step {analysis['convergence_step']}, no overfitting detected"
        result.stdout.fnmatch_lines(
            [f"training of steady: final loss *, {converged}, * (50 steps); log {steady / LOG_NAME}"]
        )
    a, b = results(pytester, "serial.json"), results(pytester, "xdist.json")
    assert without_clocks(a) == without_clocks(b)
    entry = a["training"]
    assert entry == training_of(a, "steady")  # the top level is the lone adapter's
    assert entry["log"] == str(steady / LOG_NAME) and entry["found"] == "adapter folder"
    assert entry["window"] == WINDOW
    assert {k: entry[k] for k in analysis} == analysis
    assert entry["curves"]["loss"] == [[s, v] for s, v in zip(log.steps, log.loss, strict=True)]
    assert entry["curves"]["eval_loss"] == [
        [s, v] for s, v in zip(log.eval_steps, log.eval_loss, strict=True)
    ]
    assert {g: v["status"] for g, v in entry["gates"].items()} == {
        "converged": "pass",
        "no_overfitting": "pass",
    }
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert '<h2 id="training">Training</h2>' in page and 'id="training0-loss-t"' in page
    assert f"<title>converged: from step {analysis['convergence_step']}</title>" in page
    assert page.count("<polyline") == 3


@XDIST
def test_overfitting_warns_by_default_and_fails_when_asked(
    pytester: pytest.Pytester, tiny_model: Path, overfit: Path, workers: tuple[str, ...]
) -> None:
    onset = analyse(read_log(overfit), window=WINDOW)["overfitting"]["onset_step"]
    assert onset is not None
    warned = run(pytester, tiny_model, f"--adapter={overfit}", *workers)
    assert warned.ret == 0, warned.stdout.str()
    warned.stdout.fnmatch_lines(["PASSED overfit::gate::converged", "PASSED overfit::gate::no_overfitting"])
    log = overfit / LOG_NAME
    warned.stdout.fnmatch_lines(
        [
            f"*LLMEvalGateWarning: gate converged[[]overfit]: {log}: training loss not converged: at step *",
            f"*LLMEvalGateWarning: gate no_overfitting[[]overfit]: {log}: overfitting from step {onset}: "
            "eval loss rose by * while the training loss fell by * (warn only: --llmeval-training-gates=fail "
            "makes it fail)",
        ]
    )
    gated = results(pytester)["training"]["gates"]
    assert {g: v["status"] for g, v in gated.items()} == {"converged": "warn", "no_overfitting": "warn"}
    # Another results file: the first is no baseline of this one (no no_regression gate).
    strict = ("--llmeval-training-gates=fail", "--llmeval-results=strict.json")
    failed = run(pytester, tiny_model, f"--adapter={overfit}", *strict, *workers)
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    failed.assert_outcomes(
        passed=6 + 4, failed=2, skipped=1, warnings=failed.parseoutcomes().get("warnings", 0)
    )
    failed.stdout.fnmatch_lines(["FAILED overfit::gate::converged*", "FAILED overfit::gate::no_overfitting*"])
    failed.stdout.fnmatch_lines(
        [f"gate no_overfitting[[]overfit] failed: {overfit / LOG_NAME}: overfitting from step {onset}: *"]
    )
    gated = results(pytester, "strict.json")["training"]["gates"]
    assert {g: v["status"] for g, v in gated.items()} == {"converged": "fail", "no_overfitting": "fail"}


def test_a_named_log_with_the_gates_off_is_analysed_all_the_same(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, overfit: Path
) -> None:
    """tiny_adapter's folder has no log: --llmeval-training-log names one (a Trainer's state, by path)."""
    state = overfit / STATE_NAME
    result = run(
        pytester,
        tiny_model,
        f"--adapter={tiny_adapter}",
        f"--llmeval-training-log={state}",
        "--llmeval-training-gates=off",
    )
    assert result.ret == 0, result.stdout.str()
    assert "::gate::converged" not in result.stdout.str()  # no gate items
    result.assert_outcomes(passed=6 + 4, skipped=1, warnings=result.parseoutcomes().get("warnings", 0))
    entry = results(pytester)["training"]
    assert entry["log"] == str(state) and entry["found"] == "--llmeval-training-log"
    assert entry["gates"] == {}
    assert entry["overfitting"] == analyse(read_log(state), window=WINDOW)["overfitting"]
    result.stdout.fnmatch_lines(["training of tiny-adapter: final loss *, overfitting from step *"])


def test_several_adapters_each_get_their_own_training(
    pytester: pytest.Pytester, tiny_model: Path, steady: Path, overfit: Path
) -> None:
    result = run(
        pytester,
        tiny_model,
        f"--adapter={steady}",
        f"--adapter={overfit}",
        f"--llmeval-training-log=overfit={overfit / STATE_NAME}",
        "--llmeval-html=report.html",
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"PASSED {name}::gate::{gate}" for name in ("steady", "overfit") for gate in gates.TRAINING_GATES]
    )
    document = results(pytester)
    assert document["training"] == training_of(document, "steady")  # the top level is the first adapter's
    assert training_of(document, "steady")["log"] == str(steady / LOG_NAME)
    assert training_of(document, "overfit")["log"] == str(overfit / STATE_NAME)
    # Each adapter's own document (results.<name>.json) carries its own training.
    for name in ("steady", "overfit"):
        assert results(pytester, f"results.{name}.json")["training"] == training_of(document, name)
    result.stdout.fnmatch_lines(["training of steady: *", "training of overfit: *overfitting from step*"])
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert "<h3>steady</h3>" in page and "<h3>overfit</h3>" in page and 'id="training1-grad-t"' in page
    # -k selects an adapter's training gates by its name.
    picked = pytester.runpytest(
        f"--base-model={tiny_model}",
        f"--adapter={steady}",
        f"--adapter={overfit}",
        "--co",
        "-q",
        "-k",
        "overfit and converged",
        "bench.jsonl",
    )
    assert [line for line in picked.outlines if "::" in line] == ["overfit::gate::converged"]


# (id, the option's value, what the one-line usage error says after "--llmeval-training-log VALUE: ")
BAD_OPTIONS = [
    ("missing", "nope.json", "*/nope.json: no such file or folder"),
    ("not-json", "bad.json", "*/bad.json:1: not JSON: *"),
    ("unknown-name", "ghost=x.json", "no column is named 'ghost' (columns: tiny-adapter)"),
    ("empty-folder", "empty", "*/empty: no training_log.jsonl, trainer_state.json or checkpoint-*"),
]


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
@pytest.mark.parametrize(("value", "message"), [b[1:] for b in BAD_OPTIONS], ids=[b[0] for b in BAD_OPTIONS])
def test_a_bad_training_log_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester,
    tiny_model: Path,
    tiny_adapter: Path,
    value: str,
    message: str,
    workers: tuple[str, ...],
) -> None:
    (pytester.path / "bad.json").write_text("{not json")
    (pytester.path / "empty").mkdir()
    result = run(
        pytester, tiny_model, f"--adapter={tiny_adapter}", f"--llmeval-training-log={value}", *workers
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: llmeval: --llmeval-training-log {value}: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "results.json").exists()


def test_a_bare_path_with_several_adapters_must_say_whose(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, steady: Path
) -> None:
    adapters = [f"--adapter={tiny_adapter}", f"--adapter={steady}"]
    result = run(pytester, tiny_model, *adapters, f"--llmeval-training-log={steady}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: llmeval: --llmeval-training-log {steady}: several columns run (tiny-adapter, steady): "
            "write NAME=PATH to say whose log it is"
        ]
    )


@XDIST
def test_an_unreadable_log_in_the_adapter_folder_warns_and_the_run_goes_on(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, workers: tuple[str, ...]
) -> None:
    folder = pytester.path / "adapters" / "broken"
    shutil.copytree(tiny_adapter, folder)
    (folder / LOG_NAME).write_text(
        '{"event": "step", "step": 1, "loss": 2.0}\n{"event": "step", "step": 2}\n'
    )
    # No file named: the whole project is collected, the adapter folder too; the log is not a benchmark.
    result = pytester.runpytest(
        f"--base-model={tiny_model}",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-cache",
        "--llmeval-no-history",
        "--llmeval-min-rows=1",
        "--llmeval-min-edge-cases=1",
        f"--adapter={folder}",
        "-rA",
        *workers,
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=6 + 4, skipped=1, warnings=result.parseoutcomes().get("warnings", 0))
    said = (
        "*LLMEvalWarning: the training log in adapter tiny-adapter's folder cannot be read, so the run has "
        f"no training analysis or gates for it: {folder / LOG_NAME}:2: 'loss' must be a number, got None *"
    )
    result.stdout.fnmatch_lines([said])
    assert result.stdout.str().count("the training log in adapter") == 1  # once, not once per worker
    assert results(pytester)["training"] is None
