"""PEFT against SFT for people: the comparison (peft_sft.compare) as a terminal table, the §6.2 Markdown
report, and the recommendations for each failed or unmeasured criterion.

Pure: takes the comparison and returns text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_llmeval import training
from pytest_llmeval.formatting import (
    MISSING,
    level,
    md_code,
    md_escape,
    measure_difference,
    measure_interval,
    name_of_test,
    p_value,
    percent,
)
from pytest_llmeval.perplexity import SCRIPTS
from pytest_llmeval.reporting.peft_sft import (
    PEAKS,
    Comparison,
    Criterion,
    PairedTest,
    _bytes,
    _count,
    _seconds,
    _value,
    primary_failed,
)
from pytest_llmeval.reporting.peft_sft_sides import PERPLEXITY_MEASURE

# The adaptation document's §7.1 character accuracy targets, shown beside the char_accuracy figures.
CHAR_TARGETS: Mapping[str, float] = {"character": 0.85, "hiragana": 0.90, "katakana": 0.88, "kanji": 0.80}


def _signed(share: float | None) -> str:
    return MISSING if share is None else f"{100 * share:+.1f}%"


def measured_text(c: Criterion) -> str:
    """A criterion's measured value as people read it: `12.3%`, `yes`, or the en dash."""
    measured = c["measured"]
    if measured is None:
        return MISSING
    if c["comparison"] == "yes":
        return "yes" if measured else "no"
    if c["name"] in ("performance_loss", "japanese_fluency"):
        return _signed(float(measured))
    return percent(float(measured), 2)


def threshold_text(c: Criterion) -> str:
    """A criterion's threshold: `< 10%`, `> 99%`, `yes`."""
    if c["threshold"] is None:
        return "yes"
    return f"{c['comparison']} {level(c['threshold'])}"


def criterion_line(c: Criterion) -> str:
    """One line for messages: `memory_saving (primary): 12.00%, needs > 40% (...)`."""
    return f"{c['name']} ({c['level']}): {measured_text(c)}, needs {threshold_text(c)} ({c['reason']})"


def _table(rows: Sequence[Sequence[str]], right: Callable[[int], bool]) -> list[str]:
    """Rows of cells, padded to aligned columns (columns where `right(i)` right-aligned)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            c.rjust(w) if right(i) else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]


def paired_test_text(test: PairedTest | None) -> str:
    if test is None:
        return MISSING
    return (
        f"{measure_difference(test['difference'], test['measure'])} "
        f"[{measure_interval(test['ci_low'], test['ci_high'], test['measure'])}], "
        f"{name_of_test(test['test'])} p={p_value(test['p_value'])}, n={test['n']}"
    )


def render_table(comparison: Comparison) -> str:
    """The comparison for the terminal: the sides, one line per benchmark, one line per criterion."""
    lines = [f"PEFT: {comparison['peft']['label']}", f"SFT:  {comparison['sft']['label']}"]
    rows: list[list[str]] = [
        ["benchmark", "measure", "PEFT", "SFT", "PEFT/SFT", "loss", "paired test (PEFT - SFT)"]
    ]
    for b in comparison["benchmarks"]:
        ratio = MISSING if b["performance_ratio"] is None else f"{b['performance_ratio']:.3f}"
        test = paired_test_text(b["paired_test"]) if b["comparable"] else f"not compared: {b['reason']}"
        rows.append(
            [
                b["benchmark"],
                b["measure"],
                _value(b["peft"], b["measure"]),
                _value(b["sft"], b["measure"]),
                ratio,
                _signed(b["performance_loss"]),
                test,
            ]
        )
    if len(rows) > 1:
        lines += _table(rows, lambda i: i in (2, 3, 4, 5))
    else:
        lines.append("no benchmark in both runs")
    for label, names in (
        ("only PEFT ran", comparison["only_peft"]),
        ("only SFT ran", comparison["only_sft"]),
    ):
        if names:
            lines.append(f"{label}: {', '.join(names)}")
    crit: list[list[str]] = [["criterion", "level", "threshold", "measured", "status"]]
    for c in comparison["criteria"]:
        crit.append(
            [c["name"], c["level"], threshold_text(c), measured_text(c), f"{c['status']}: {c['reason']}"]
        )
    lines += _table(crit, lambda i: i in (2, 3))
    lines += [f"note: {n}" for n in comparison["notes"]]
    failed = primary_failed(comparison)
    verdict = f"failed: {', '.join(failed)}" if failed else "none failed"
    lines.append(f"primary criteria: {verdict}{_unmeasured(comparison)}")
    return "\n".join(lines)


def _unmeasured(comparison: Comparison) -> str:
    names = [
        c["name"] for c in comparison["criteria"] if c["level"] == "primary" and c["status"] == "not measured"
    ]
    return f" ({', '.join(names)} not measured)" if names else ""


# Recommendations per failed criterion (§6.2 "recommendations"): what is known to move that number.
RECOMMENDATIONS: Mapping[str, str] = {
    "performance_loss": (
        "PEFT is further behind SFT than the tolerance: raise the LoRA rank r (and lora_alpha with it), add "
        "target modules (all attention and MLP projections), train longer or tune the learning rate; the "
        "paired tests say whether the gap is larger than these rows can resolve."
    ),
    "parameter_reduction": (
        "The adapter trains too large a share of the parameters: lower r, target fewer modules, and keep "
        "embeddings and lm_head frozen (no modules_to_save)."
    ),
    "memory_saving": (
        "LoRA saves the optimizer state and gradients of the frozen weights, not the weights or the "
        "activations: load the base quantized (4-bit or 8-bit, QLoRA), enable gradient checkpointing, or "
        "lower batch size x sequence length; a lower r or fewer target modules shrink only the adapter's "
        "share. Measure both peaks the same way, each training run in its own process."
    ),
    "time_reduction": (
        "LoRA still runs the full forward and backward pass through the frozen base; its time saving is "
        "the optimizer step: spend the saved memory on a larger batch, train in mixed precision, or target "
        "fewer modules."
    ),
    "stable_convergence": (
        "The PEFT loss did not settle or validation loss rose: lower the learning rate or add warmup, train "
        "for more steps, and against overfitting add lora_dropout, use fewer epochs or keep the best "
        "checkpoint (load_best_model_at_end)."
    ),
    "japanese_fluency": (
        "PEFT's perplexity on Japanese text is further above SFT's than the tolerance: add Japanese text "
        "to the training data, raise r or include the MLP projections, and check that the tokenizer covers "
        "kana and kanji without falling back to bytes."
    ),
}
# What to supply so that a criterion can be measured at all.
TO_MEASURE: Mapping[str, str] = {
    "performance_loss": "Evaluate both models on the same benchmark files (the same content hash).",
    "parameter_reduction": (
        "Evaluate the PEFT model as an adapter (--adapter): results.json then counts its parameters."
    ),
    "memory_saving": (
        "Train both with training_callback.EvaluationCallback on the same kind of device and pass both logs."
    ),
    "time_reduction": "Pass both training logs (--peft-training-log, --sft-training-log) of finished runs.",
    "stable_convergence": (
        "Pass the PEFT training log, with evaluations during training (eval_strategy='steps')."
    ),
    "japanese_fluency": (
        "Evaluate both on a perplexity benchmark of Japanese text (benchmarks/japanese_text.jsonl)."
    ),
}


def recommendations(comparison: Comparison) -> list[str]:
    """One fixed recommendation per failed criterion, then what would measure the unmeasured ones."""
    out = [
        f"{c['name']}: {RECOMMENDATIONS[c['name']]}" for c in comparison["criteria"] if c["status"] == "fail"
    ]
    out += [
        f"{c['name']} (not measured): {TO_MEASURE[c['name']]}"
        for c in comparison["criteria"]
        if c["status"] == "not measured"
    ]
    return out


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _num(value: Any, fmt: str = ".4g") -> str:
    return MISSING if value is None else format(float(value), fmt)


def markdown_report(comparison: Comparison) -> str:
    """The §6.2 report: executive summary, detailed metrics, statistical analysis, Japanese-specific metrics
    and recommendations, as Markdown."""
    peft, sft = comparison["peft"], comparison["sft"]
    by_name = {c["name"]: c for c in comparison["criteria"]}
    failed = primary_failed(comparison)
    lines = [
        "# PEFT against SFT",
        "",
        f"- PEFT: {md_escape(peft['label'])}"
        + (f", training log {md_code(peft['training_log'])}" if peft["training_log"] else ""),
        f"- SFT: {md_escape(sft['label'])}"
        + (f", training log {md_code(sft['training_log'])}" if sft["training_log"] else ""),
        "",
        "## Executive summary",
        "",
    ]
    ppl = [b for b in comparison["benchmarks"] if b["measure"] == PERPLEXITY_MEASURE]
    if ppl:
        for b in ppl:
            lines.append(
                f"- Final perplexity on {md_code(b['benchmark'])}: PEFT {_value(b['peft'], b['measure'])}, "
                f"SFT {_value(b['sft'], b['measure'])} (PEFT/SFT {_num(b['performance_ratio'], '.3f')})"
            )
    else:
        lines.append("- Final perplexity: no perplexity benchmark in both runs")
    params = comparison["parameters"]
    lines.append(
        f"- Parameter efficiency: PEFT trains {_count(params['peft_trainable_params'])} parameters, SFT "
        f"{_count(params['sft_trainable_params'])}: a reduction of "
        f"{percent(params['parameter_reduction'], 2)}"
        + (f" ({md_escape(params['reason'])})" if params["reason"] else "")
    )
    memory = comparison["memory"]
    lines.append(
        f"- Memory savings: {percent(memory['saving'], 1)}"
        + (f" ({md_escape(memory['reason'])})" if memory["reason"] else f" ({PEAKS[str(memory['peak'])]})")
    )
    conv = by_name["stable_convergence"]
    lines.append(f"- Convergence achieved: {measured_text(conv)} ({md_escape(conv['reason'])})")
    lines.append(
        f"- Primary criteria: **{'failed: ' + ', '.join(failed) if failed else 'none failed'}**"
        + md_escape(_unmeasured(comparison))
    )
    lines += ["", "### Success criteria (§7.2)", ""]
    lines += _md_table(
        ["criterion", "level", "threshold", "measured", "status", "why"],
        [
            [c["title"], c["level"], threshold_text(c), measured_text(c), c["status"], md_escape(c["reason"])]
            for c in comparison["criteria"]
        ],
    )
    lines += ["", "## Detailed metrics", "", "### Benchmarks (§5.1 performance ratio)", ""]
    if comparison["benchmarks"]:
        lines += _md_table(
            ["benchmark", "measure", "PEFT", "SFT", "PEFT/SFT", "performance loss", "note"],
            [
                [
                    md_code(b["benchmark"]),
                    b["measure"],
                    _value(b["peft"], b["measure"]),
                    _value(b["sft"], b["measure"]),
                    _num(b["performance_ratio"], ".3f"),
                    _signed(b["performance_loss"]),
                    md_escape(b["reason"] or ""),
                ]
                for b in comparison["benchmarks"]
            ],
        )
        lines += [
            "",
            "Performance loss: how much worse PEFT is, as a share of SFT's value (perplexity: PEFT/SFT - 1, "
            "lower is better; score: 1 - PEFT/SFT, higher is better); negative when PEFT is better.",
        ]
    else:
        lines.append("No benchmark in both runs.")
    for label, names in (
        ("Only PEFT ran", comparison["only_peft"]),
        ("Only SFT ran", comparison["only_sft"]),
    ):
        if names:
            lines += ["", f"{label}: {', '.join(md_code(n) for n in names)}"]
    time = comparison["training_time"]
    lines += ["", "### Efficiency (§2)", ""]
    lines += _md_table(
        ["metric", "PEFT", "SFT", "saving", "SFT/PEFT"],
        [
            [
                "trainable parameters",
                _count(params["peft_trainable_params"]),
                _count(params["sft_trainable_params"]),
                percent(params["parameter_reduction"], 2),
                _num(params["efficiency_gain"], ".1f"),
            ],
            [
                "peak memory" + (f" ({memory['peak']})" if memory["peak"] else ""),
                _bytes(memory["peft_bytes"]),
                _bytes(memory["sft_bytes"]),
                percent(memory["saving"]),
                _num(memory["efficiency_gain"], ".2f"),
            ],
            [
                "training time",
                _seconds(time["peft_s"]),
                _seconds(time["sft_s"]),
                percent(time["reduction"]),
                _num(time["efficiency_gain"], ".2f"),
            ],
        ],
    )
    for key in ("reason",):
        for label, found in (("parameters", params[key]), ("memory", memory[key]), ("time", time[key])):
            if found:
                lines.append(f"\n{label}: {md_escape(found)}")
    lines += ["", "### Training (§3)", ""]
    analyses = comparison["training"]
    if any(analyses.values()):
        lines += _md_table(
            ["", "PEFT", "SFT"],
            [
                [name, *(_analysis_cell(analyses[s], key) for s in ("peft", "sft"))]
                for name, key in _ANALYSIS_ROWS
            ],
        )
    else:
        lines.append("No training log was given.")
    lines += ["", "## Statistical analysis (§5.2)", ""]
    tested = [b for b in comparison["benchmarks"] if b["paired_test"] is not None]
    if tested:
        rows = []
        for b in tested:
            t = b["paired_test"]
            assert t is not None
            rows.append(
                [
                    md_code(b["benchmark"]),
                    md_escape(t["measure"]),
                    str(t["n"]),
                    measure_difference(t["difference"], t["measure"]),
                    measure_interval(t["ci_low"], t["ci_high"], t["measure"]),
                    name_of_test(t["test"]),
                    p_value(t["p_value"], comparison["alpha"]),
                    _num(t["effect_size"], ".3f"),
                    "yes" if t["significant"] else "no",
                ]
            )
        lines += _md_table(
            [
                "benchmark",
                "measure",
                "n",
                "PEFT - SFT",
                "CI",
                "test",
                "p",
                "Cohen's d_z",
                f"p < {comparison['alpha']:g}",
            ],
            rows,
        )
        lines += [
            "",
            "Paired on the rows both scored (matched by id); higher is better in both measures, so a "
            "positive difference favours PEFT. Perplexity rows compare each text's negative cross-entropy.",
        ]
    else:
        lines.append("No rows both sides scored.")
    lines += ["", "## Japanese-specific metrics (§4)", ""]
    lines += _japanese_lines(comparison)
    lines += ["", "## Recommendations", ""]
    found_recs = recommendations(comparison)
    lines += [f"- {md_escape(r)}" for r in found_recs] or ["- Every criterion passed: no change indicated."]
    if comparison["notes"]:
        lines += ["", "## Notes", "", *(f"- {md_escape(n)}" for n in comparison["notes"])]
    return "\n".join(lines) + "\n"


_ANALYSIS_ROWS: tuple[tuple[str, str], ...] = (
    ("logged steps", "n_steps"),
    ("final loss", "final_loss"),
    ("loss stability", "loss_stability"),
    ("convergence step", "convergence_step"),
    ("steps to 95%", "steps_to_95"),
    ("overfitting", "overfitting"),
    ("gradient norm mean / max / spikes", "grad_norm"),
)


def _analysis_cell(analysis: training.Analysis | None, key: str) -> str:
    if analysis is None:
        return MISSING
    if key == "overfitting":
        over = analysis["overfitting"]
        if over["best_step"] is None:
            return "not checked (no evaluation)"
        return f"from step {over['onset_step']}" if over["detected"] else "no"
    if key == "grad_norm":
        g = analysis["grad_norm"]
        return f"{_num(g['mean'])} / {_num(g['max'])} / {len(g['spikes'])}"
    value = analysis[key]  # type: ignore[literal-required]
    return MISSING if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))


def _japanese_lines(comparison: Comparison) -> list[str]:
    lines: list[str] = []
    japanese = [b for b in comparison["benchmarks"] if b["japanese"]]
    if not japanese:
        lines.append("No perplexity benchmark of Japanese text (kana or kanji in its texts) in both runs.")
    for b in japanese:
        figures = b["perplexity"] or {}
        peft, sft = figures.get("peft") or {}, figures.get("sft") or {}
        lines += [f"### {md_code(b['benchmark'])}", ""]
        lines += _md_table(
            ["", "PEFT", "SFT"],
            [
                ["perplexity (token-weighted)", _num(peft.get("perplexity")), _num(sft.get("perplexity"))],
                ["§7.1 band", str(peft.get("band", MISSING)), str(sft.get("band", MISSING))],
                [
                    "bits per character",
                    _num(peft.get("bits_per_character")),
                    _num(sft.get("bits_per_character")),
                ],
                ["bits per byte", _num(peft.get("bits_per_byte")), _num(sft.get("bits_per_byte"))],
            ],
        )
        found = set(peft.get("bits_per_character_by_script") or {}) | set(
            sft.get("bits_per_character_by_script") or {}
        )
        scripts = [s for s in SCRIPTS if s in found] + sorted(found - set(SCRIPTS))
        if scripts:
            rows = []
            for script in scripts:
                p = (peft.get("bits_per_character_by_script") or {}).get(script) or {}
                s = (sft.get("bits_per_character_by_script") or {}).get(script) or {}
                if not (p.get("n_chars") or s.get("n_chars")):
                    continue
                rows.append(
                    [
                        script,
                        str(p.get("n_chars", s.get("n_chars", MISSING))),
                        _num(p.get("bits_per_character")),
                        _num(s.get("bits_per_character")),
                        percent(p.get("top1_accuracy")),
                        percent(s.get("top1_accuracy")),
                    ]
                )
            lines += ["", "Per script (§4.2): bits per character and top-1 next-token accuracy", ""]
            lines += _md_table(
                ["script", "characters", "PEFT bits/char", "SFT bits/char", "PEFT top-1", "SFT top-1"], rows
            )
        lines.append("")
    chars = [b for b in comparison["benchmarks"] if b["char_accuracy"]]
    for b in chars:
        pair = b["char_accuracy"] or {}
        peft, sft = pair.get("peft") or {}, pair.get("sft") or {}
        rows = [
            [
                "character",
                percent(peft.get("character")),
                percent(sft.get("character")),
                f"> {level(CHAR_TARGETS['character'])}",
            ]
        ]
        for script in sorted(set(peft.get("scripts") or {}) | set(sft.get("scripts") or {})):
            target = CHAR_TARGETS.get(script)
            rows.append(
                [
                    script,
                    percent(((peft.get("scripts") or {}).get(script) or {}).get("accuracy")),
                    percent(((sft.get("scripts") or {}).get(script) or {}).get("accuracy")),
                    MISSING if target is None else f"> {level(target)}",
                ]
            )
        lines += [f"### Character accuracy (§4.1) on {md_code(b['benchmark'])}", ""]
        lines += _md_table(["", "PEFT", "SFT", "§7.1 target"], rows)
        lines.append("")
    return lines
