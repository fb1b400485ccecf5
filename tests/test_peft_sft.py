"""PEFT against SFT (reporting/peft_sft*.py, `python -m pytest_llmeval compare`, assert_peft_vs_sft): the
adaptation document's §5.1 ratio, §5.2 paired test, §6.2 report and §7.2 criteria.

The math on documents built by results.build_results from hand-made records (every number checked by
hand), training logs written by hand in EvaluationCallback's JSONL format; one end-to-end run of the plugin
on tiny random models, an adapter and a second model standing in for SFT.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import build_tiny_model, jsonl, row

import pytest_llmeval
from pytest_llmeval.assertions import assert_peft_vs_sft
from pytest_llmeval.cli import main
from pytest_llmeval.records import ADAPTER, BASE, BenchmarkInfo, RowRecord, row_record
from pytest_llmeval.reporting import peft_sft, peft_sft_sides
from pytest_llmeval.results import build_results
from pytest_llmeval.stats import compare_paired

JA_TEXTS = [
    "きょうは あめが ふっています。",
    "吾輩は猫である。",
    "カタカナのテキスト",
    "東京は日本の首都です。",
]
EN_TEXTS = ["The cat sat on the mat.", "A second short text.", "Numbers like 1,234.", "Short."]
PARAMS = {
    "total_params": 1_592_352,
    "base_params": 1_591_456,
    "trainable_params": 896,
    "efficiency_ratio": 896 / 1_592_352,
    "parameter_reduction": 1 - 896 / 1_592_352,
}
KINDS = {BASE: "base", ADAPTER: "adapter", "sft": "model"}


def ppl_score(cross_entropy: float, n_tokens: int = 10) -> dict[str, Any]:
    """A perplexity row's score as the scorer records it (every text n_tokens long)."""
    return {
        "value": 1.0,
        "threshold": 1.0,
        "passed": True,
        "perplexity": math.exp(cross_entropy),
        "cross_entropy": cross_entropy,
        "nll": cross_entropy * n_tokens,
        "n_tokens": n_tokens,
        "n_chars": 8,
        "max_length": 1024,
        "stride": 512,
        "first_token": "scored after BOS",
    }


def exact_score(value: float) -> dict[str, Any]:
    return {"value": value, "threshold": 1.0, "passed": value >= 1.0}


def records(
    values: dict[str, dict[str, list[float]]], evaluated: str, hashes: dict[str, str] | None = None
) -> list[RowRecord]:
    """Rows of ja.jsonl, en.jsonl (perplexity: each column's cross-entropy per row) and em.jsonl (exact
    match: each column's score per row), as the evaluator records them."""
    out = []
    for name, by_column in values.items():
        sha = (hashes or {}).get(name, "sha256:" + "0" * 64)
        bench: BenchmarkInfo = {"name": name, "sha256": sha, "domain": None, "n_rows": 4}
        n = len(next(iter(by_column.values())))
        for i in range(n):
            perplexity = name != "em.jsonl"
            texts = JA_TEXTS if name == "ja.jsonl" else EN_TEXTS
            case = SimpleNamespace(
                id=f"{name[:2]}-{i}",
                line=i + 1,
                difficulty="easy",
                evaluation_type="perplexity" if perplexity else "exact_match",
                evaluation_config={"threshold": 1e9} if perplexity else {},
                instruction="" if perplexity else "Say it.",
                input=texts[i % len(texts)] if perplexity else f"item {i}",
                tags=[],
                expected_output="" if perplexity else "it",
            )
            models = {
                column: {
                    "output": None if perplexity else "it",
                    "score": ppl_score(v[i]) if perplexity else exact_score(v[i]),
                }
                for column, v in by_column.items()
            }
            out.append(
                row_record(
                    nodeid=f"{name}::{case.id}",
                    benchmark=bench,
                    case=case,
                    evaluated=evaluated,
                    models=models,  # type: ignore[arg-type]
                    passed=True,
                )
            )
    return out


def document(
    values: dict[str, dict[str, list[float]]],
    *,
    params: dict[str, Any] | None = None,
    hashes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A results.json of the columns in `values` (base, adapter, sft), built as the plugin builds it."""
    columns = list(next(iter(values.values())))
    models: list[dict[str, Any]] = [{"name": "base", "column": BASE, "kind": "base", "source": "tiny-base"}]
    meta: dict[str, Any] = {"base_model": "tiny-base", "models": models}
    if ADAPTER in columns:
        pe = PARAMS if params is None else params
        models.append(
            {
                "name": "lora",
                "column": ADAPTER,
                "kind": "adapter",
                "source": "a/lora",
                "parameter_efficiency": pe,
            }
        )
        meta.update(adapter_name="lora", adapter_version="1.0", parameter_efficiency=pe)
    for column in columns:
        if KINDS.get(column, "model") == "model":
            models.append({"name": column, "column": column, "kind": "model", "source": f"m/{column}"})
    if len(models) == 1:
        meta["models"] = []  # a base-only run lists no columns
    evaluated = ADAPTER if ADAPTER in columns else BASE
    return build_results(records(values, evaluated, hashes), meta=meta, complete=True)


# PEFT's cross-entropy 0.05 nats above SFT's on every Japanese text: perplexity e^0.05 = 1.0513 times SFT's.
CLOSE = {
    "ja.jsonl": {BASE: [3.0, 3.1, 3.2, 3.3], ADAPTER: [2.05, 2.15, 2.25, 2.35], "sft": [2.0, 2.1, 2.2, 2.3]},
    "em.jsonl": {BASE: [0.0, 0.0, 1.0, 0.0], ADAPTER: [1.0, 1.0, 1.0, 0.0], "sft": [1.0, 1.0, 1.0, 0.0]},
}
# Worse on both: ja 0.2 nats per token above SFT (x1.2214), em 2 of 4 against SFT's 4 of 4 (-50%).
FAR = {
    "ja.jsonl": {BASE: [3.0, 3.1, 3.2, 3.3], ADAPTER: [2.2, 2.3, 2.4, 2.5], "sft": [2.0, 2.1, 2.2, 2.3]},
    "em.jsonl": {BASE: [0.0, 0.0, 1.0, 0.0], ADAPTER: [1.0, 1.0, 0.0, 0.0], "sft": [1.0, 1.0, 1.0, 1.0]},
}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def callback_log(
    path: Path,
    *,
    evals: list[tuple[int, float]],
    seconds: float | None = 60.0,
    peak: tuple[str, float] | None = ("peak_rss_bytes", 4 * 2**30),
    steps: int = 200,
) -> Path:
    """An EvaluationCallback JSONL: a loss falling to 2.0 (it converges at step 64), the given evaluations
    and an end event with the time and peak memory."""
    events: list[dict[str, Any]] = [
        {
            "event": "step",
            "step": i + 1,
            "loss": 2.0 + 3.0 * math.exp(-i / 8),
            "learning_rate": 1e-4,
            "grad_norm": 1.0,
        }
        for i in range(steps)
    ]
    events += [{"event": "eval", "step": s, "eval_loss": v} for s, v in evals]
    end: dict[str, Any] = {"event": "end", "step": steps, "n_steps": steps}
    if seconds is not None:
        end["total_training_time_s"] = seconds
    if peak is not None:
        end[peak[0]] = peak[1]
    path.write_text("".join(json.dumps(e) + "\n" for e in [*events, end]), encoding="utf-8")
    return path


GOOD_EVALS = [(40, 3.0), (80, 2.5), (120, 2.2), (160, 2.15), (200, 2.1)]
# Best at step 120, then rising for three evaluations while the training loss still falls.
OVERFIT_EVALS = [(40, 3.0), (80, 2.2), (120, 2.1), (140, 2.3), (160, 2.5), (180, 2.7)]


def criteria_of(comparison: peft_sft.Comparison) -> dict[str, peft_sft.Criterion]:
    return {c["name"]: c for c in comparison["criteria"]}


def bench(comparison: peft_sft.Comparison, name: str) -> peft_sft.BenchmarkComparison:
    return next(b for b in comparison["benchmarks"] if b["benchmark"] == name)


# ---------------------------------------------------------------------------------------------------------
# The math, by hand


def test_ratios_follow_each_measures_direction() -> None:
    """Perplexity: lower is better, loss = PEFT/SFT - 1; score: higher is better, loss = 1 - PEFT/SFT."""
    peft, sft = peft_sft_sides.load_sides(document(FAR), sft_column="sft")
    found = peft_sft.compare(peft, sft)
    ja, em = bench(found, "ja.jsonl"), bench(found, "em.jsonl")
    # Every text is 10 tokens: the corpus cross-entropy is the mean, 2.35 against 2.15.
    assert ja["measure"] == "perplexity"
    assert ja["peft"] == pytest.approx(math.exp(2.35)) and ja["sft"] == pytest.approx(math.exp(2.15))
    assert ja["performance_ratio"] == pytest.approx(math.exp(0.2))
    assert ja["performance_loss"] == pytest.approx(math.exp(0.2) - 1)  # +22.1%: PEFT worse
    assert em["measure"] == "score" and em["peft"] == 0.5 and em["sft"] == 1.0
    assert em["performance_ratio"] == pytest.approx(0.5) and em["performance_loss"] == pytest.approx(0.5)
    # The same documents the other way round: PEFT better, the losses negative.
    swapped = peft_sft.compare(sft, peft)
    assert bench(swapped, "ja.jsonl")["performance_loss"] == pytest.approx(math.exp(-0.2) - 1)
    assert bench(swapped, "em.jsonl")["performance_loss"] == pytest.approx(1 - 2.0)
    worst = criteria_of(found)["performance_loss"]
    assert worst["measured"] == pytest.approx(0.5) and worst["status"] == "fail"
    assert "em.jsonl" in worst["reason"]


def test_the_paired_test_is_compare_paired_on_the_shared_rows() -> None:
    peft, sft = peft_sft_sides.load_sides(document(FAR), sft_column="sft")
    found = peft_sft.compare(peft, sft)
    ja_test = bench(found, "ja.jsonl")["paired_test"]
    em_test = bench(found, "em.jsonl")["paired_test"]
    assert ja_test is not None and em_test is not None
    # Perplexity rows compare negative cross-entropy per text (higher is better): PEFT is 0.2 below.
    by_hand = compare_paired([-2.2, -2.3, -2.4, -2.5], [-2.0, -2.1, -2.2, -2.3], bounded=False)
    assert ja_test["n"] == 4 and ja_test["test"] == "paired_t"
    assert ja_test["difference"] == pytest.approx(-0.2) and ja_test["p_value"] == by_hand.p_value
    # Scores: McNemar on 2 rows SFT-only right.
    assert em_test["test"] == "mcnemar_exact" and em_test["difference"] == pytest.approx(-0.5)
    assert em_test["p_value"] == compare_paired([1, 1, 0, 0], [1, 1, 1, 1]).p_value == 0.5


def test_only_rows_both_sides_scored_are_paired(tmp_path: Path) -> None:
    peft_doc = document({"em.jsonl": {BASE: [0.0] * 4, ADAPTER: [1.0, 1.0, 1.0, 0.0]}})
    sft_doc = document({"em.jsonl": {BASE: [1.0, 1.0, 0.0, 0.0]}})
    # The SFT run errored on its last row: no score, no pair, and no part in its mean.
    sft_doc["benchmarks"][0]["rows"][3]["models"][BASE]["score"] = None
    peft, sft = peft_sft_sides.load_sides(peft_doc, sft_doc)
    em = bench(peft_sft.compare(peft, sft), "em.jsonl")
    assert em["sft"] == pytest.approx(2 / 3) and em["peft"] == pytest.approx(0.75)
    assert em["paired_test"] is not None and em["paired_test"]["n"] == 3


def test_an_sft_score_of_zero_gives_no_ratio_and_no_loss() -> None:
    values = {"em.jsonl": {BASE: [0.0] * 4, ADAPTER: [1.0, 0.0, 0.0, 0.0], "sft": [0.0] * 4}}
    found = peft_sft.compare(*peft_sft_sides.load_sides(document(values)))
    em = bench(found, "em.jsonl")
    assert em["performance_ratio"] is None and em["performance_loss"] == 0.0
    assert em["reason"] is not None and "SFT scores 0" in em["reason"]


def test_parameter_reduction_against_every_parameter_of_the_sft_model() -> None:
    found = peft_sft.compare(*peft_sft_sides.load_sides(document(CLOSE)))
    params = found["parameters"]
    # SFT trains the whole base: 1,591,456 parameters against the adapter's 896.
    assert params["sft_trainable_params"] == 1_591_456 and params["peft_trainable_params"] == 896
    assert params["parameter_reduction"] == pytest.approx(1 - 896 / 1_591_456)
    assert params["efficiency_gain"] == pytest.approx(1_591_456 / 896)
    assert criteria_of(found)["parameter_reduction"]["status"] == "pass"
    given = peft_sft.compare(*peft_sft_sides.load_sides(document(CLOSE)), sft_params=50_000)
    assert given["parameters"]["parameter_reduction"] == pytest.approx(1 - 896 / 50_000)  # 98.2%
    assert criteria_of(given)["parameter_reduction"]["status"] == "fail"


def test_memory_time_and_convergence_from_the_training_logs(tmp_path: Path) -> None:
    peft_log = callback_log(tmp_path / "peft.jsonl", evals=GOOD_EVALS, seconds=60.0)
    sft_log = callback_log(
        tmp_path / "sft.jsonl", evals=GOOD_EVALS, seconds=100.0, peak=("peak_rss_bytes", 10 * 2**30)
    )
    sides = peft_sft_sides.load_sides(document(CLOSE), peft_training_log=peft_log, sft_training_log=sft_log)
    found = peft_sft.compare(*sides)
    judged = criteria_of(found)
    assert found["memory"]["saving"] == pytest.approx(0.6) and found["memory"]["peak"] == "peak_rss_bytes"
    assert found["training_time"]["reduction"] == pytest.approx(0.4)
    assert judged["memory_saving"]["status"] == "pass" and judged["time_reduction"]["status"] == "pass"
    assert judged["stable_convergence"]["measured"] is True
    assert "converged at step 64" in judged["stable_convergence"]["reason"]
    # ja: e^0.05 - 1 = 5.1% above SFT, under 10%; em equal.
    assert judged["performance_loss"]["measured"] == pytest.approx(math.exp(0.05) - 1)
    assert judged["japanese_fluency"]["measured"] == pytest.approx(math.exp(0.05) - 1)
    assert {c["status"] for c in found["criteria"]} == {"pass"}
    assert peft_sft.primary_failed(found) == []
    # Stricter thresholds turn the same numbers into failures.
    strict = peft_sft.Criteria(max_performance_loss=0.05, min_memory_saving=0.7, min_time_reduction=0.5)
    assert peft_sft.primary_failed(peft_sft.compare(*sides, strict)) == ["performance_loss", "memory_saving"]


def test_time_per_step_times_steps_when_the_total_is_missing(tmp_path: Path) -> None:
    peft_log = callback_log(tmp_path / "peft.jsonl", evals=GOOD_EVALS, seconds=None)
    text = peft_log.read_text(encoding="utf-8").replace(
        '"n_steps": 200', '"n_steps": 200, "time_per_step_s": 0.25'
    )
    peft_log.write_text(text, encoding="utf-8")
    sft_log = callback_log(tmp_path / "sft.jsonl", evals=GOOD_EVALS, seconds=100.0)
    time = peft_sft.compare(
        *peft_sft_sides.load_sides(document(CLOSE), peft_training_log=peft_log, sft_training_log=sft_log)
    )["training_time"]
    assert time["peft_s"] == pytest.approx(50.0) and time["peft_source"] == "time_per_step_s x 200 steps"
    assert time["reduction"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("peft_kwargs", "sft_kwargs", "criterion", "status", "reason"),
    [
        ({"evals": OVERFIT_EVALS}, {}, "stable_convergence", "fail", "overfitting from step 120"),
        ({"evals": []}, {}, "stable_convergence", "not measured", "no evaluation"),
        ({"evals": GOOD_EVALS, "steps": 20}, {}, "stable_convergence", "fail", "did not converge"),
        (
            {"evals": GOOD_EVALS},
            {"peak": ("peak_allocated_bytes", 2**33)},
            "memory_saving",
            "not measured",
            "not comparable",
        ),
        ({"evals": GOOD_EVALS}, {"peak": None}, "memory_saving", "not measured", "records no peak memory"),
        ({"evals": GOOD_EVALS}, {"seconds": None}, "time_reduction", "not measured", "no training time"),
    ],
)
def test_what_a_training_log_cannot_tell(
    tmp_path: Path,
    peft_kwargs: dict[str, Any],
    sft_kwargs: dict[str, Any],
    criterion: str,
    status: str,
    reason: str,
) -> None:
    peft_log = callback_log(tmp_path / "peft.jsonl", **peft_kwargs)
    sft_log = callback_log(tmp_path / "sft.jsonl", **{"evals": GOOD_EVALS, **sft_kwargs})
    sides = peft_sft_sides.load_sides(document(CLOSE), peft_training_log=peft_log, sft_training_log=sft_log)
    found = criteria_of(peft_sft.compare(*sides))[criterion]
    assert found["status"] == status and reason in found["reason"]
    assert (found["measured"] is None) == (status == "not measured")


def test_without_training_logs_those_criteria_are_not_measured() -> None:
    found = peft_sft.compare(*peft_sft_sides.load_sides(document(CLOSE)))
    judged = criteria_of(found)
    for name in ("memory_saving", "time_reduction", "stable_convergence"):
        assert judged[name]["status"] == "not measured"
        assert "no training log for the PEFT side" in judged[name]["reason"]
    assert peft_sft.primary_failed(found) == []
    assert peft_sft.primary_failed(found, require_measured=True) == ["memory_saving"]


def test_a_trainer_state_json_gives_time_but_no_peak(tmp_path: Path) -> None:
    state = {
        "log_history": [
            *({"step": i + 1, "loss": 2.0 + math.exp(-i / 8), "grad_norm": 1.0} for i in range(120)),
            {"step": 120, "train_runtime": 80.0, "train_steps_per_second": 1.5},
        ]
    }
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "trainer_state.json").write_text(json.dumps(state), encoding="utf-8")
    peft_log = callback_log(tmp_path / "peft.jsonl", evals=GOOD_EVALS, seconds=60.0)
    found = peft_sft.compare(
        *peft_sft_sides.load_sides(
            document(CLOSE), peft_training_log=peft_log, sft_training_log=tmp_path / "sft"
        )
    )
    assert found["training_time"]["sft_s"] == 80.0 and found["training_time"]["reduction"] == pytest.approx(
        0.25
    )
    assert "trainer_state.json has none" in (found["memory"]["reason"] or "")


def test_japanese_fluency_is_judged_on_the_japanese_perplexity_benchmarks_only() -> None:
    # English texts far worse under PEFT (+0.3 nats), Japanese texts within 5%: fluency passes, the
    # performance criterion (every benchmark) fails on en.jsonl.
    values = {
        **CLOSE,
        "en.jsonl": {BASE: [3.0] * 4, ADAPTER: [2.3] * 4, "sft": [2.0] * 4},
    }
    found = peft_sft.compare(*peft_sft_sides.load_sides(document(values)))
    assert bench(found, "ja.jsonl")["japanese"] and not bench(found, "en.jsonl")["japanese"]
    assert not bench(found, "em.jsonl")["japanese"]
    judged = criteria_of(found)
    assert judged["japanese_fluency"]["status"] == "pass"
    assert judged["japanese_fluency"]["measured"] == pytest.approx(math.exp(0.05) - 1)
    assert judged["performance_loss"]["status"] == "fail"
    assert judged["performance_loss"]["measured"] == pytest.approx(math.exp(0.3) - 1)
    no_japanese = {"em.jsonl": CLOSE["em.jsonl"]}
    alone = criteria_of(peft_sft.compare(*peft_sft_sides.load_sides(document(no_japanese))))
    assert alone["japanese_fluency"]["status"] == "not measured"


def test_a_benchmark_whose_content_changed_is_not_compared() -> None:
    peft_doc = document({k: {c: v[c] for c in (BASE, ADAPTER)} for k, v in FAR.items()})
    sft_doc = document(
        {k: {BASE: v["sft"]} for k, v in FAR.items()}, hashes={"em.jsonl": "sha256:" + "1" * 64}
    )
    found = peft_sft.compare(*peft_sft_sides.load_sides(peft_doc, sft_doc))
    em = bench(found, "em.jsonl")
    assert not em["comparable"] and em["paired_test"] is None and em["performance_loss"] is None
    assert em["reason"] is not None and "never compared" in em["reason"]
    loss = criteria_of(found)["performance_loss"]
    # Judged on ja.jsonl alone (e^0.2 - 1 = 22%), and the skipped file named.
    assert loss["measured"] == pytest.approx(math.exp(0.2) - 1) and "not compared: em.jsonl" in loss["reason"]


# ---------------------------------------------------------------------------------------------------------
# Sides and columns


def test_columns_by_default_and_by_name() -> None:
    both = document(CLOSE)
    peft, sft = peft_sft_sides.load_sides(both)
    assert (peft.column.column, sft.column.column) == (ADAPTER, "sft")
    assert peft.parameter_efficiency == PARAMS and sft.parameter_efficiency is None
    named, _ = peft_sft_sides.load_sides(both, peft_column="lora", sft_column="sft")
    assert named.column.column == ADAPTER
    # Two files: the SFT run evaluated its model as the base.
    sft_only = document({k: {BASE: v["sft"]} for k, v in CLOSE.items()})
    _, base = peft_sft_sides.load_sides(both, sft_only)
    assert base.column.column == BASE and base.column.kind == "base"


@pytest.mark.parametrize(
    ("sft_values", "options", "message"),
    [
        (None, {"sft_column": "nobody"}, "no column 'nobody'; its columns: base (base 'tiny-base'), adapter"),
        (None, {"peft_column": "sft", "sft_column": "sft"}, "PEFT and SFT are both column sft"),
        ({BASE: [0.0] * 4, "sft": [1.0] * 4, "other": [1.0] * 4}, {}, "which column is SFT?"),
    ],
)
def test_columns_that_cannot_be_told(
    sft_values: dict[str, list[float]] | None, options: dict[str, str], message: str
) -> None:
    peft_doc = document(CLOSE)
    sft_doc = None if sft_values is None else document({"em.jsonl": sft_values})
    with pytest.raises(peft_sft_sides.PeftSftError, match=message.replace("(", r"\(").replace(")", r"\)")):
        peft_sft_sides.load_sides(peft_doc, sft_doc, **options)


def test_one_file_without_a_model_column_says_what_to_do() -> None:
    peft_doc = document({"em.jsonl": {BASE: [0.0] * 4, ADAPTER: [1.0] * 4}})
    with pytest.raises(
        peft_sft_sides.PeftSftError, match=r"no model column to compare adapter with.*--llmeval-model"
    ):
        peft_sft_sides.load_sides(peft_doc)


# ---------------------------------------------------------------------------------------------------------
# The command and the report


def test_cli_exit_status_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    close, far = write(tmp_path / "close.json", document(CLOSE)), write(tmp_path / "far.json", document(FAR))
    assert main(["compare", str(close)]) == 0
    out = capsys.readouterr().out
    assert "PEFT: adapter 'lora' (column adapter)" in out and "SFT:  model 'sft' (column sft)" in out
    assert "performance_loss     primary        < 10%     +5.1%  pass" in out
    assert "memory_saving        primary        > 40%         –  not measured: no training log" in out
    assert main(["compare", str(close), "--require-measured"]) == 1
    capsys.readouterr()
    assert main(["compare", str(far)]) == 1
    assert "primary criteria: failed: performance_loss" in capsys.readouterr().out
    # A looser threshold lets the same run pass.
    assert main(["compare", str(far), "--max-performance-loss", "0.6"]) == 0


@pytest.mark.parametrize(
    ("files", "options", "message"),
    [
        (["missing.json"], [], "missing.json: No such file or directory"),
        (["notes.json"], [], "notes.json: not a results.json (no benchmarks list)"),
        (["broken.json"], [], "broken.json: not JSON (Expecting property name"),
        (["close.json"], ["--sft-column", "nobody"], "close.json: no column 'nobody'; its columns: base"),
        (["close.json"], ["--peft-training-log", "nolog"], "nolog: no such file or folder"),
    ],
)
def test_cli_bad_input_is_status_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: list[str], options: list[str], message: str
) -> None:
    write(tmp_path / "close.json", document(CLOSE))
    (tmp_path / "notes.json").write_text('{"hello": 1}', encoding="utf-8")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    arguments = [str(tmp_path / f) for f in files] + [
        str(tmp_path / o) if o == "nolog" else o for o in options
    ]
    assert main(["compare", *arguments]) == 2
    err = capsys.readouterr().err
    assert message in err and str(tmp_path) in err
    assert err.count("\n") == 1  # one line, no traceback


def test_cli_refuses_a_threshold_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    close = write(tmp_path / "close.json", document(CLOSE))
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(close), "--min-memory-saving", "40"])
    assert exc.value.code == 2
    assert "min-memory-saving must be within [0, 1)" in capsys.readouterr().err


def test_markdown_report_has_every_section_of_the_document(tmp_path: Path) -> None:
    peft_log = callback_log(tmp_path / "peft.jsonl", evals=OVERFIT_EVALS, seconds=90.0)
    sft_log = callback_log(
        tmp_path / "sft.jsonl", evals=GOOD_EVALS, seconds=100.0, peak=("peak_rss_bytes", 5 * 2**30)
    )
    far = write(tmp_path / "far.json", document(FAR))
    report = tmp_path / "out" / "report.md"
    status = main(
        [
            "compare",
            str(far),
            "--peft-training-log",
            str(peft_log),
            "--sft-training-log",
            str(sft_log),
            "--markdown",
            str(report),
        ]
    )
    assert status == 1
    text = report.read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings[:7] == [
        "# PEFT against SFT",
        "## Executive summary",
        "### Success criteria (§7.2)",
        "## Detailed metrics",
        "### Benchmarks (§5.1 performance ratio)",
        "### Efficiency (§2)",
        "### Training (§3)",
    ]
    assert "## Statistical analysis (§5.2)" in headings and "## Recommendations" in headings
    assert "## Japanese-specific metrics (§4)" in headings and "### `ja.jsonl`" in headings
    assert f"- Final perplexity on `ja.jsonl`: PEFT {math.exp(2.35):.2f}, SFT {math.exp(2.15):.2f}" in text
    assert "- Memory savings: 20.0%" in text
    assert "- Convergence achieved: no (converged at step 64, but overfitting from step 120)" in text
    # One recommendation per failed criterion: performance, memory (20% < 40%), time (10% < 20%),
    # convergence, fluency (+22% on ja.jsonl).
    recs = text.split("## Recommendations")[1].split("## Notes")[0].splitlines()
    failed = [line for line in recs if line.startswith("- ")]
    assert [line.split(":")[0] for line in failed] == [
        "- performance\\_loss",
        "- memory\\_saving",
        "- time\\_reduction",
        "- stable\\_convergence",
        "- japanese\\_fluency",
    ]


# ---------------------------------------------------------------------------------------------------------
# The assertion


def test_assert_peft_vs_sft_names_each_failed_primary_criterion(tmp_path: Path) -> None:
    assert "assert_peft_vs_sft" in pytest_llmeval.__all__
    far = write(tmp_path / "far.json", document(FAR))
    sft_log = callback_log(tmp_path / "sft.jsonl", evals=GOOD_EVALS, peak=("peak_rss_bytes", 5 * 2**30))
    peft_log = callback_log(tmp_path / "peft.jsonl", evals=GOOD_EVALS)
    with pytest.raises(AssertionError) as exc:
        assert_peft_vs_sft(far, None, peft_training_log=peft_log, sft_training_log=sft_log)
    message = str(exc.value)
    assert "2 primary criterion(s) not met" in message
    assert (
        "performance_loss (primary): +50.0%, needs < 10% (worst of 2: em.jsonl: 50.0% vs SFT 100.0%"
        in message
    )
    assert "memory_saving (primary): 20.00%, needs > 40%" in message
    assert "parameter_reduction" not in message
    found = assert_peft_vs_sft(document(CLOSE), None)
    assert peft_sft.primary_failed(found) == []
    with pytest.raises(AssertionError, match=r"memory_saving \(primary\): –, needs > 40% \(no training log"):
        assert_peft_vs_sft(document(CLOSE), None, require_measured=True)


# ---------------------------------------------------------------------------------------------------------
# End to end: the plugin's own results.json on tiny random models


def perplexity_rows(texts: list[str]) -> list[dict[str, Any]]:
    """Perplexity rows that always pass (threshold 1e9): a run whose only verdicts are the comparison's."""
    config = {"threshold": 1e9}
    return [
        row(
            f"t{i}",
            instruction="",
            input=t,
            expected="",
            evaluation_type="perplexity",
            evaluation_config=config,
        )
        for i, t in enumerate(texts)
    ]


@pytest.fixture(scope="module")
def sft_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another tiny random model, standing in for the fully fine-tuned one. Built before pytester moves
    HOME (and with it the Hugging Face cache) into the test's folder."""
    return build_tiny_model(tmp_path_factory.mktemp("sft-model"), seed=7)


def test_a_real_run_compares_in_one_file_and_in_two(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, sft_model: Path
) -> None:
    pytester.makeini("[pytest]\n")
    ppl = perplexity_rows([*JA_TEXTS, "ひらがなとカタカナと漢字。"])
    pytester.makefile(".jsonl", ja=jsonl(ppl), em=jsonl([row(f"e{i}", input=f"item {i}") for i in range(4)]))
    common = ["-p", "no:cacheprovider", "--llmeval-no-cache", "--llmeval-no-history", "-m", "not gate"]
    pytester.runpytest(
        f"--base-model={tiny_model}",
        f"--adapter={tiny_adapter}",
        f"--llmeval-model=sft={sft_model}",
        "--llmeval-results=both.json",
        *common,
    )
    pytester.runpytest(f"--base-model={sft_model}", "--llmeval-results=sft.json", *common)
    both = json.loads((pytester.path / "both.json").read_text(encoding="utf-8"))
    alone = json.loads((pytester.path / "sft.json").read_text(encoding="utf-8"))

    one = peft_sft.compare(*peft_sft_sides.load_sides(pytester.path / "both.json"))
    two = peft_sft.compare(
        *peft_sft_sides.load_sides(pytester.path / "both.json", pytester.path / "sft.json")
    )
    assert one["sft"]["column"] == "sft" and two["sft"]["column"] == BASE
    block = next(b for b in both["benchmarks"] if b["benchmark_file"] == "ja.jsonl")["perplexity"]
    sft_block = next(b for b in alone["benchmarks"] if b["benchmark_file"] == "ja.jsonl")["perplexity"]
    # Each side's corpus perplexity is the one results.json reports for that model.
    assert bench(one, "ja.jsonl")["peft"] == block[ADAPTER]["perplexity"]
    assert bench(two, "ja.jsonl")["sft"] == sft_block[BASE]["perplexity"]
    assert bench(one, "ja.jsonl")["sft"] == pytest.approx(sft_block[BASE]["perplexity"], rel=1e-5)
    ja = bench(one, "ja.jsonl")
    assert ja["japanese"] and ja["paired_test"] is not None and ja["paired_test"]["n"] == 5
    rows = next(b for b in both["benchmarks"] if b["benchmark_file"] == "ja.jsonl")["rows"]
    by_hand = [
        -r["models"][ADAPTER]["score"]["cross_entropy"] + r["models"]["sft"]["score"]["cross_entropy"]
        for r in rows
    ]
    assert ja["paired_test"]["difference"] == pytest.approx(sum(by_hand) / 5)
    efficiency = both["parameter_efficiency"]
    assert one["parameters"]["parameter_reduction"] == pytest.approx(
        1 - efficiency["trainable_params"] / efficiency["base_params"]
    )
    assert ja["perplexity"] is not None and ja["perplexity"]["peft"]["bits_per_character_by_script"]["kanji"]
    status = main(["compare", str(pytester.path / "both.json"), str(pytester.path / "sft.json")])
    assert status == (1 if peft_sft.primary_failed(two) else 0)


@pytest.fixture(scope="module")
def wide_adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rank-64 LoRA on every linear layer of the tiny model: far more than 1% of its parameters, so
    the parameter_reduction criterion (> 99%) fails. Built before pytester moves HOME."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    path = tmp_path_factory.mktemp("wide") / "wide"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    lora = LoraConfig(r=64, lora_alpha=64, target_modules="all-linear", init_lora_weights=False)
    get_peft_model(model, lora).save_pretrained(str(path))
    config = json.loads((path / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tiny_model)
    (path / "adapter_config.json").write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_run_itself_compares_with_llmeval_peft_vs_sft(
    pytester: pytest.Pytester,
    tiny_model: Path,
    tiny_adapter: Path,
    wide_adapter: Path,
    sft_model: Path,
    workers: str,
) -> None:
    """--llmeval-peft-vs-sft: the table in the summary, results.json's peft_vs_sft, peft_vs_sft.md and the
    HTML section, serially and with -n; every row passes, so the run's status is the comparison's: green
    for the tiny adapter (0.06% of the parameters), failed for the wide one (a primary criterion). Under
    -n 2 the failing comparison alone: the rows come from the workers and the comparison is the
    controller's, the same code for either adapter (each -n 2 run is two fresh processes, 10 s of CPU)."""
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", ja=jsonl(perplexity_rows(JA_TEXTS)))
    common = [
        f"--base-model={tiny_model}",
        f"--llmeval-model=sft={sft_model}",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-history",
        "-m",
        "not gate",
        "-n",
        workers,
    ]
    cases = [(wide_adapter, "fail")]
    if workers == "0":
        plain = pytester.runpytest(f"--adapter={wide_adapter}", *common)
        assert plain.ret == pytest.ExitCode.OK  # every row passes: without the comparison, a green run
        assert "PEFT against SFT" not in plain.stdout.str()
        cases.insert(0, (tiny_adapter, "pass"))
    for adapter, reduction in cases:
        result = pytester.runpytest(
            f"--adapter={adapter}", *common, "--llmeval-peft-vs-sft=sft", "--llmeval-html=r.html"
        )
        result.assert_outcomes(passed=len(JA_TEXTS))
        doc = json.loads((pytester.path / "results.json").read_text(encoding="utf-8"))
        criteria = {c["name"]: c for c in doc["peft_vs_sft"]["criteria"]}
        assert criteria["parameter_reduction"]["status"] == reduction
        assert criteria["memory_saving"]["status"] == "not measured"  # no training logs in this run
        assert doc["peft_vs_sft"]["sft"]["column"] == "sft"
        assert doc["peft_vs_sft"] == peft_sft.compare(*peft_sft_sides.load_sides(doc))
        failed = peft_sft.primary_failed(doc["peft_vs_sft"])
        assert ("parameter_reduction" in failed) == (reduction == "fail")
        assert result.ret == (pytest.ExitCode.TESTS_FAILED if failed else pytest.ExitCode.OK)
        result.stdout.fnmatch_lines([f"*parameter_reduction*primary*{reduction}*"])
        if failed:
            result.stdout.fnmatch_lines(["*PEFT against SFT: primary criteria failed: *parameter_reduction*"])
        assert "## Executive summary" in (pytester.path / "peft_vs_sft.md").read_text(encoding="utf-8")
        html = (pytester.path / "r.html").read_text(encoding="utf-8")
        assert 'id="peft-vs-sft"' in html and "parameter_reduction" in html


def test_llmeval_peft_vs_sft_needs_an_adapter_and_that_model(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, sft_model: Path
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", em=jsonl([row("e0", input="item 0")]))
    result = pytester.runpytest(
        f"--base-model={tiny_model}",
        f"--adapter={tiny_adapter}",
        f"--llmeval-model=sft={sft_model}",
        "--llmeval-peft-vs-sft=full",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--llmeval-peft-vs-sft full: needs an --adapter (PEFT) and the --llmeval-model*"]
    )
