"""What a benchmark's rows add up to: the figures of its entry in results.json, one function a block.

Mean scores per model and difficulty (`summarize`), corpus perplexity and the fluency of each model's own
outputs, corpus BLEU and chrF, the weighted composite, pass@k, unparsed answers, character accuracy, the
out-of-domain figure a no_degradation gate judges, and the isolation code rows ran under. Each takes rows
(records.RowRecord, or the rows of a document read back) and returns JSON-able figures, or None when no row
has anything to say; results.py puts them in place. Pure: no pytest, no torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmeval.benchmark import DIFFICULTIES
from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.records import ADAPTER, BASE, evaluated_value, metric_value, score, score_value, side

LN2 = math.log(2.0)
# A composite is reported only when the metrics present carry at least this share of the weights: a
# "composite" made of one 10% metric, renormalised to 100%, is that metric under another name.
COMPOSITE_MIN_WEIGHT = 0.5


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _corpus(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Token-weighted perplexity of texts from their summed NLL, tokens and characters (None: no text)."""
    tokens = sum(int(p["n_tokens"]) for p in parts)
    if not tokens:
        return None
    nll = math.fsum(float(p["nll"]) for p in parts)
    chars = sum(int(p["n_chars"]) for p in parts)
    cross_entropy = nll / tokens
    out: dict[str, Any] = {
        "perplexity": _exp(cross_entropy),
        "cross_entropy": cross_entropy,
        "bits_per_token": cross_entropy / LN2,
        "bits_per_character": nll / LN2 / chars if chars else None,
        "n_texts": len(parts),
        "n_tokens": tokens,
        "n_chars": chars,
    }
    if all("n_bytes" in p for p in parts):
        out["bits_per_byte"] = nll / LN2 / sum(int(p["n_bytes"]) for p in parts)
    if parts and all(p.get("scripts") for p in parts):
        out["bits_per_character_by_script"] = {}
        # Every text's scorer lists every script; a script some text lacks is not summed over the rest.
        for script in [s for s in parts[0]["scripts"] if all(s in p["scripts"] for p in parts)]:
            script_nll = math.fsum(float(p["scripts"][script]["nll"]) for p in parts)
            script_chars = sum(int(p["scripts"][script]["n_chars"]) for p in parts)
            # The adaptation document's character prediction accuracy (§4.2): top-1 next-token hits spread
            # over the characters each token covers, character-weighted over every text.
            hits = math.fsum(float(p["scripts"][script].get("hits", 0.0)) for p in parts)
            scored = math.fsum(float(p["scripts"][script].get("scored", 0.0)) for p in parts)
            out["bits_per_character_by_script"][script] = {
                "bits_per_character": script_nll / LN2 / script_chars if script_chars else None,
                "n_chars": script_chars,
                "top1_accuracy": hits / scored if scored else None,
            }
    return out


def perplexity_score(ppl: float) -> float:
    """The QA fine-tuning document's perplexity score, 100 * exp(-ppl / 300): 100 at ppl 1, falling slowly."""
    return 100.0 * math.exp(-ppl / 300.0)


def perplexity_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Corpus perplexity of a benchmark's perplexity rows, base and adapter: token-weighted, per script."""
    rows = [r for r in records if r["evaluation_type"] == "perplexity" and score(r, BASE) is not None]
    if not rows:
        return None
    from pytest_llmeval.scorers.perplexity import DEFAULT_BANDS, band

    bands = tuple(float(b) for b in (rows[0].get("evaluation_config") or {}).get("bands", DEFAULT_BANDS))
    out: dict[str, Any] = {}
    for who in (BASE, ADAPTER):
        parts = [found for r in rows if (found := score(r, who)) is not None]
        corpus = _corpus(parts)
        if corpus is not None:
            # Named so nobody takes it for the corpus value: every text counts alike, short or long.
            corpus["mean_text_perplexity"] = math.fsum(float(p["perplexity"]) for p in parts) / len(parts)
            corpus["band"] = band(corpus["perplexity"], (bands[0], bands[1], bands[2]))
        out[who] = corpus
    out["bands"] = {
        "excellent": f"< {bands[0]:g}",
        "good": f"< {bands[1]:g}",
        "acceptable": f"<= {bands[2]:g}",
    }
    first = score(rows[0], BASE)
    assert first is not None
    # What the scorer says of its window (None where a document read back lacks it): a description only.
    out["window"] = {key: first.get(key) for key in ("max_length", "stride", "first_token")}
    if out.get(ADAPTER) and out.get(BASE):
        out["perplexity_ratio"] = out[ADAPTER]["perplexity"] / out[BASE]["perplexity"]
        out["cross_entropy_difference"] = out[ADAPTER]["cross_entropy"] - out[BASE]["cross_entropy"]
    return out


def fluency_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """--llmeval-fluency, per model: corpus perplexity of its outputs and of the references, measured by the
    same scorer (the model itself unless --llmeval-ppl-model), their ratio and difference, each labelled
    with the QA fine-tuning document's band; and the chest X-ray document's per-study summary
    (chest_xray_summary)."""
    out: dict[str, Any] = {}
    for who in _fluency_models(records):
        rows = [(r, found["fluency"]) for r in records if (found := side(r, who)) and found.get("fluency")]
        measured = [m for _, m in rows]
        generated = _corpus([m["output"] for m in measured if m["output"]])
        reference = _corpus([m["reference"] for m in measured if m["reference"]])
        for corpus in (generated, reference):
            if corpus is not None:
                corpus["qa_band"] = qa_band(corpus["perplexity"])
        entry: dict[str, Any] = {
            "scorer": measured[0]["scorer"],
            "external": bool(measured[0].get("external", False)),
            "output": generated,
            "reference": reference,
            "n_empty_outputs": sum(1 for m in measured if not m["output"]),
            "perplexity_score": None if generated is None else perplexity_score(generated["perplexity"]),
        }
        if generated and reference:
            entry["ratio_to_reference"] = generated["perplexity"] / reference["perplexity"]
            entry["cross_entropy_difference"] = generated["cross_entropy"] - reference["cross_entropy"]
        entry["chest_xray"] = chest_xray_summary([(str(r["id"]), _study(m)) for r, m in rows])
        out[who] = entry
    return out or None


def _fluency_models(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The models with a fluency measurement on some row: the base, the adapter, then the others as met."""
    found = {who: None for r in records for who, s in (r.get("models") or {}).items() if s.get("fluency")}
    return [w for w in (BASE, ADAPTER) if w in found] + [w for w in found if w not in (BASE, ADAPTER)]


# The QA fine-tuning document's bands ("Understanding Perplexity"): 10-100 low, 100-300 medium, 300+ high
# (below 10 is lower still: low). Its vocabulary, kept apart from the chest X-ray document's ranges below.
QA_BANDS: tuple[tuple[float, str], ...] = ((100.0, "low"), (300.0, "medium"))
QA_TOP_BAND = "high"


def qa_band(perplexity: float) -> str:
    """The QA fine-tuning document's label of a perplexity: low below 100, medium below 300, else high."""
    return next((name for bound, name in QA_BANDS if perplexity < bound), QA_TOP_BAND)


# The chest X-ray document's "Score Interpretation" for medical text: perplexity < 20 very fluent, 20-50 good,
# 50-100 acceptable, > 100 poor; cross-entropy < 3 high confidence, 3-4 moderate, > 4 low. A value on a
# bound takes the better label (50 is good, 100 acceptable), as its Error Detection's `> 50` / `> 100` do.
CHEST_XRAY_PERPLEXITY: tuple[tuple[float, str], ...] = (
    (20.0, "very_fluent"),
    (50.0, "good"),
    (100.0, "acceptable"),
)
CHEST_XRAY_TOP_PERPLEXITY = "poor"
CHEST_XRAY_CROSS_ENTROPY: tuple[tuple[float, str], ...] = ((3.0, "high"), (4.0, "moderate"))
CHEST_XRAY_TOP_CROSS_ENTROPY = "low"
# Its Error Detection: generated perplexity above 100 "potential issues", else above 50 "review recommended".
CHEST_XRAY_REVIEW = 50.0
CHEST_XRAY_ISSUES = 100.0
# "ratio ~1.0: similar fluency" does not say how near: within 10% of 1 (0.9 to 1.1) is read as similar.
RATIO_TOLERANCE = 0.10
# The per-row figures the chest X-ray document reports per study (its compute_metric's columns).
STUDY_FIGURES = (
    "perplexity_generated",
    "perplexity_reference",
    "perplexity_ratio",
    "cross_entropy_generated",
    "cross_entropy_reference",
    "cross_entropy_difference",
)


def chest_xray_range(perplexity: float) -> str:
    """The chest X-ray document's label of a perplexity: very_fluent, good, acceptable or poor."""
    if perplexity < CHEST_XRAY_PERPLEXITY[0][0]:
        return CHEST_XRAY_PERPLEXITY[0][1]
    return next((n for b, n in CHEST_XRAY_PERPLEXITY[1:] if perplexity <= b), CHEST_XRAY_TOP_PERPLEXITY)


def chest_xray_confidence(cross_entropy: float) -> str:
    """The chest X-ray document's label of a cross-entropy (nats per token): high, moderate or low."""
    if cross_entropy < CHEST_XRAY_CROSS_ENTROPY[0][0]:
        return CHEST_XRAY_CROSS_ENTROPY[0][1]
    return next(
        (n for b, n in CHEST_XRAY_CROSS_ENTROPY[1:] if cross_entropy <= b), CHEST_XRAY_TOP_CROSS_ENTROPY
    )


def ratio_label(ratio: float, tolerance: float = RATIO_TOLERANCE) -> str:
    """The chest X-ray document's reading of generated / reference perplexity: similar (within `tolerance`
    of 1), more_fluent (below), less_fluent (above)."""
    if 1.0 - tolerance <= ratio <= 1.0 + tolerance:  # not abs(ratio - 1): 1.1 - 1 is above 0.1 in floats
        return "similar"
    return "more_fluent" if ratio < 1.0 else "less_fluent"


def study_figures(
    output: Mapping[str, Any] | None, reference: Mapping[str, Any] | None
) -> dict[str, float | None]:
    """One row's figures as the chest X-ray document reports them per study, from the NLL and token count
    of its output and of its reference (measures.fluency's): each text's perplexity and cross-entropy (nats
    per token), the ratio generated / reference and the difference generated - reference; None where a text
    has no scored token."""
    ce_gen = _cross_entropy(output)
    ce_ref = _cross_entropy(reference)
    ppl_gen = None if ce_gen is None else _exp(ce_gen)
    ppl_ref = None if ce_ref is None else _exp(ce_ref)
    # A perplexity is >= 1 (NLL >= 0): the ratio is defined wherever both texts were scored.
    ratio = None if ppl_gen is None or ppl_ref is None or math.isinf(ppl_ref) else ppl_gen / ppl_ref
    return {
        "perplexity_generated": ppl_gen,
        "perplexity_reference": ppl_ref,
        "perplexity_ratio": ratio,
        "cross_entropy_generated": ce_gen,
        "cross_entropy_reference": ce_ref,
        "cross_entropy_difference": None if ce_gen is None or ce_ref is None else ce_gen - ce_ref,
    }


def _cross_entropy(text: Mapping[str, Any] | None) -> float | None:
    return float(text["nll"]) / int(text["n_tokens"]) if text and int(text["n_tokens"]) else None


def _study(measured: Mapping[str, Any]) -> Mapping[str, float | None]:
    """A fluency record's per-study figures: as recorded, or worked out for a record from before they were."""
    if all(key in measured for key in STUDY_FIGURES):
        return {key: measured[key] for key in STUDY_FIGURES}
    return study_figures(measured.get("output"), measured.get("reference"))


def spread(values: Sequence[float]) -> dict[str, Any] | None:
    """mean, median, std (sample: n - 1, as pandas' .std()), min and max of per-study values; None: none."""
    import statistics

    if not values:
        return None
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "min": min(values),
        "max": max(values),
    }


def chest_xray_summary(studies: Sequence[tuple[str, Mapping[str, float | None]]]) -> dict[str, Any]:
    """The chest X-ray document's summary of one model's rows, (id, study_figures) each: per-study
    statistics (every row counts once, unlike the token-weighted corpus figures beside it), how many rows
    fall in each of its ranges, and its review flags (generated perplexity > 50, > 100) by row id."""

    def values(key: str) -> list[float]:
        return [float(v) for _, f in studies if (v := f.get(key)) is not None]

    def counts(names: Sequence[str], labels: Sequence[str]) -> dict[str, int]:
        return {name: sum(1 for label in labels if label == name) for name in names}

    perplexity_names = [n for _, n in CHEST_XRAY_PERPLEXITY] + [CHEST_XRAY_TOP_PERPLEXITY]
    confidence_names = [n for _, n in CHEST_XRAY_CROSS_ENTROPY] + [CHEST_XRAY_TOP_CROSS_ENTROPY]
    generated = [(i, float(p)) for i, f in studies if (p := f.get("perplexity_generated")) is not None]
    return {
        "n_studies": len(studies),
        "per_study": {key: spread(values(key)) for key in STUDY_FIGURES},
        "perplexity_ranges": {
            which: counts(perplexity_names, [chest_xray_range(v) for v in values(f"perplexity_{which}")])
            for which in ("generated", "reference")
        },
        "cross_entropy_ranges": {
            which: counts(
                confidence_names, [chest_xray_confidence(v) for v in values(f"cross_entropy_{which}")]
            )
            for which in ("generated", "reference")
        },
        "ratio_ranges": counts(
            ["similar", "more_fluent", "less_fluent"], [ratio_label(v) for v in values("perplexity_ratio")]
        ),
        "ratio_tolerance": RATIO_TOLERANCE,
        "review_recommended": [i for i, p in generated if CHEST_XRAY_REVIEW < p <= CHEST_XRAY_ISSUES],
        "potential_issues": [i for i, p in generated if p > CHEST_XRAY_ISSUES],
    }


_NOT_METRIC = ("threshold", "max_new_tokens")  # evaluation_config keys that do not change a corpus value


def corpus_scores(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Corpus BLEU and chrF of a benchmark's bleu and chrf rows, base and adapter, beside the sentence mean.

    The corpus value pools n-gram counts over all rows, so it is not the mean of sentence scores; both are
    reported, labelled. Rows are grouped by the settings that change the metric (tokenize, lowercase, ...):
    one corpus value per group.
    """
    from pytest_llmeval.scorers import bleu

    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in records:
        base_side = side(r, BASE)
        if r["evaluation_type"] in ("bleu", "chrf") and base_side and base_side.get("output") is not None:
            config = {k: v for k, v in r.get("evaluation_config", {}).items() if k not in _NOT_METRIC}
            groups.setdefault((r["evaluation_type"], json.dumps(config, sort_keys=True)), []).append(r)
    if not groups:
        return None
    out: dict[str, Any] = {}
    for (kind, settings), rows in sorted(groups.items()):
        config = json.loads(settings)
        # Every reference of a row that gives several (RowRecord `references`), else its one expected_output.
        references = [r.get("references") or r["expected_output"] for r in rows]
        entry: dict[str, Any] = {"settings": config}
        for who in (BASE, ADAPTER):
            outputs = [found["output"] for r in rows if (found := side(r, who))]
            entry[who] = (
                bleu.corpus_score(kind, outputs, references, config) if len(outputs) == len(rows) else None
            )
        alone = sum(1 for k, _ in groups if k == kind) == 1
        out[kind if alone else f"{kind} {settings}"] = entry
    return out


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


# The QA fine-tuning document's revised weights: MCQ accuracy, BERTScore F1, ROUGE-L F1, perplexity score.
DEFAULT_COMPOSITE_WEIGHTS: dict[str, float] = {
    "multiple_choice": 0.40,
    "bertscore": 0.30,
    "rouge": 0.20,
    "perplexity": 0.10,
}


def composite_score(metrics: Mapping[str, float | None], weights: Mapping[str, float]) -> dict[str, Any]:
    """Weighted composite (0-100) of metric scores (0-100), renormalised over the metrics present.

    Reported only when the metrics present carry at least COMPOSITE_MIN_WEIGHT of the total weight; below
    that `value` is None and `reason` says which metrics are missing.
    """
    weighted = {m: w for m, w in weights.items() if w > 0}
    present = {m: w for m, w in weighted.items() if metrics.get(m) is not None}
    total = sum(present.values())
    share = total / sum(weighted.values()) if weighted else 0.0
    missing = [m for m in weighted if metrics.get(m) is None]
    value = None
    reason = None
    if not total:
        reason = f"no metric of the composite was measured (missing: {', '.join(missing)})"
    elif share < COMPOSITE_MIN_WEIGHT - 1e-12:
        reason = (
            f"the metrics measured carry {share:.0%} of the weight, under {COMPOSITE_MIN_WEIGHT:.0%}: "
            f"missing {', '.join(missing)}"
        )
    else:
        # Each weight as its share first: w * score of a huge weight would overflow where w / total cannot.
        value = math.fsum(w / total * float(metrics[m] or 0.0) for m, w in present.items())
    return {
        "value": value,
        "metrics": {m: metrics.get(m) for m in weights},
        "weights": dict(weights),
        "present_weight": share,
        "missing": missing,
        "reason": reason,
    }


def composite_summary(
    records: Sequence[Mapping[str, Any]], weights: Mapping[str, float]
) -> dict[str, Any] | None:
    """Base and adapter composites of these rows; None when no weighted metric has rows.

    Each metric is its rows' mean score x 100. `perplexity` is the perplexity score of each model's own
    generated outputs (--llmeval-fluency), never of fixed reference texts: the QA fine-tuning document's
    Fix #1. Perplexity rows (reference texts) are reported beside it, not in it.
    """
    out: dict[str, Any] = {}
    fluency = fluency_summary(records) or {}
    any_metric = False
    # The kinds any row was scored by: a weighted metric that no row has is None without a pass over them.
    scored = {r["evaluation_type"] for r in records}
    scored.update(
        kind
        for r in records
        for found in (r.get("models") or {}).values()
        if isinstance(found, Mapping)
        for kind in (found.get("metrics") or {})
    )
    for who in (BASE, ADAPTER):
        metrics: dict[str, float | None] = {}
        for metric in weights:
            if metric == "perplexity":
                metrics[metric] = (fluency.get(who) or {}).get("perplexity_score")
            elif metric not in scored:
                metrics[metric] = None
            else:
                # A row's own type's score or one of its `metrics`: a row scored by BERTScore and ROUGE-L
                # counts in both, as the separate rows it replaces would.
                values = [v for r in records if (v := metric_value(r, who, metric)) is not None]
                metrics[metric] = 100.0 * math.fsum(values) / len(values) if values else None
            any_metric = any_metric or metrics[metric] is not None
        out[who] = composite_score(metrics, weights)
    return out if any_metric else None


def metrics_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per evaluation type, base and adapter: the mean score over the rows scored by it, as their own type
    or as one of their `metrics`. None unless some row has `metrics` (else `results` says it all)."""
    if not any(m for r in records for s in (r.get("models") or {}).values() if (m := s.get("metrics"))):
        return None
    kinds = sorted({r["evaluation_type"] for r in records} | {k for r in records for k in _metric_kinds(r)})
    out: dict[str, Any] = {}
    for kind in kinds:
        entry: dict[str, Any] = {}
        for who in (BASE, ADAPTER):
            values = [v for r in records if (v := metric_value(r, who, kind)) is not None]
            entry[who] = _mean(values)
            entry[f"n_{who}"] = len(values)
        deciding = sum(1 for r in records if r["evaluation_type"] == kind)
        entry["n_deciding"] = deciding  # rows whose pass this type decided (the others only report it)
        out[kind] = entry
    return out


def _metric_kinds(record: Mapping[str, Any]) -> set[str]:
    return {k for s in (record.get("models") or {}).values() for k in (s.get("metrics") or {})}


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Scores of one benchmark: means over scored rows (rows whose scorer failed are counted apart)."""
    adapter = _mean([s for r in records if (s := score_value(r, ADAPTER)) is not None])
    base = _mean([s for r in records if (s := score_value(r, BASE)) is not None])
    per_difficulty: dict[str, dict[str, Any]] = {}
    for difficulty in DIFFICULTIES:
        rows = [r for r in records if r["difficulty"] == difficulty]
        a = [s for r in rows if (s := score_value(r, ADAPTER)) is not None]
        b = [s for r in rows if (s := score_value(r, BASE)) is not None]
        # n: the rows the means are over (the evaluated model's scored rows); errored rows counted apart.
        scored = sum(1 for r in rows if evaluated_value(r) is not None)
        errored = sum(1 for r in rows if r["error"])
        per_difficulty[difficulty] = {"adapter": _mean(a), "base": _mean(b), "n": scored, "n_errors": errored}
    absolute = None if adapter is None or base is None else adapter - base
    relative = None if absolute is None or not base else absolute / base
    return {
        "adapter_score": adapter,
        "base_model_score": base,
        "improvement_absolute": absolute,
        "improvement_relative": relative,
        "per_difficulty": per_difficulty,
        "n_passed": sum(1 for r in records if r["passed"]),
        "n_errors": sum(1 for r in records if r["error"]),
        "n_skipped": sum(1 for r in records if r.get("skipped")),
    }


def out_of_domain_figure(
    name: str, records: Sequence[Mapping[str, Any]], verdict: str | None
) -> dict[str, Any] | None:
    """The standard's out_of_domain object for one benchmark, in the unit its no_degradation gate judges.

    Scores for scored benchmarks; for perplexity benchmarks, negative cross-entropy in nats per token (so
    that, as for scores, higher is better and degradation = adapter - base is negative when it got worse).
    None when no row has both scores.
    """
    adapter, base, _, measure = comparison_values(records)
    if not adapter:
        return None
    a, b = math.fsum(adapter) / len(adapter), math.fsum(base) / len(base)
    return {
        "benchmark": name,
        "adapter_score": a,
        "base_model_score": b,
        "degradation": a - b,
        "measure": measure,
        "n_rows": len(adapter),
        "verdict": verdict,
    }


def pass_at_k_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """code_execution rows' pass@k per model: for each k, the mean over rows of each row's unbiased
    estimate (a greedy row's is pass@1 of its one output), with the rows it averages; None without code
    rows. Rows with fewer samples than k (a k another row asked for) are left out of that k's mean."""
    summary: dict[str, Any] = {}
    for who in (BASE, ADAPTER):
        per_k: dict[int, list[float]] = {}
        for record in records:
            found = score(record, who) if record["evaluation_type"] == "code_execution" else None
            if not found:
                continue
            estimates = found.get("pass_at_k") or {"1": found.get("pass_at_1")}
            for k, value in estimates.items():
                if value is not None:
                    per_k.setdefault(int(k), []).append(float(value))
        if per_k:
            summary[who] = {
                str(k): {"value": sum(values) / len(values), "n_rows": len(values)}
                for k, values in sorted(per_k.items())
            }
    return summary or None


def unparsed_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per model, the share of rows whose answer could not be extracted (an extract_pattern that matched
    nothing, a saved prediction naming no choice, a reasoning block that never closed), among the rows
    that extract an answer: wrong answers and unparsed ones told apart. None when no row extracts."""
    summary: dict[str, Any] = {}
    for who in (BASE, ADAPTER):
        counted = unparsed = 0
        for record in records:
            found, its = score(record, who), side(record, who)
            truncated_thought = bool(its and its.get("reasoning_unterminated"))
            if found is None or ("unparsed" not in found and not truncated_thought):
                continue
            counted += 1
            unparsed += bool(found.get("unparsed")) or truncated_thought
        if counted:
            summary[who] = {"rate": unparsed / counted, "n_unparsed": unparsed, "n_rows": counted}
    return summary or None


def char_accuracy_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """char_accuracy rows pooled per model, character-weighted (the adaptation document's §4.1): the share of
    characters aligned to an identical one over every row's longer text, and per script the share of the
    expected texts' characters of that script aligned correctly. None when no row is char_accuracy."""
    summary: dict[str, Any] = {}
    for who in (BASE, ADAPTER):
        aligned = longer = 0
        scripts: dict[str, list[int]] = {}
        for record in records:
            found = score(record, who)
            if record["evaluation_type"] != "char_accuracy" or found is None or "scripts" not in found:
                continue
            aligned += int(found["aligned"])
            longer += max(int(found["expected_chars"]), int(found["output_chars"]))
            for name, counts in found["scripts"].items():
                pooled = scripts.setdefault(name, [0, 0])
                pooled[0] += int(counts["correct"])
                pooled[1] += int(counts["chars"])
        if longer or scripts:
            summary[who] = {
                "character": aligned / longer if longer else 1.0,
                "scripts": {name: {"accuracy": c / n, "chars": n} for name, (c, n) in scripts.items() if n},
            }
    return summary or None


def sandbox_isolation(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The isolation code_execution rows ran under (level, layers, missing), or None without such rows."""
    for record in records:
        for who in (ADAPTER, BASE):
            found = score(record, who)
            if found and "isolation" in found:
                isolation: dict[str, Any] = dict(found["isolation"])
                return isolation
    return None


# lm-eval's aggregations (lm_eval/api/metrics.py) of one metric's per-row items: "mean" over numbers, the
# perplexities over log-likelihoods (perplexity) or [log-likelihood, weight] pairs (the weighted ones:
# words or bytes). A converted row's lm_eval block names each of its metrics' aggregation.
LM_EVAL_AGGREGATIONS = ("mean", "perplexity", "weighted_perplexity", "bits_per_byte")


def lm_eval_aggregate(aggregation: str, items: Sequence[Any]) -> float:
    """One metric's aggregate over its rows' items, as lm-eval computes it (its own order of summing)."""
    if aggregation == "mean":
        return float(sum(float(v) for v in items) / len(items))
    if aggregation == "perplexity":
        return math.exp(-(sum(float(v) for v in items) / len(items)))
    # weighted_mean: sum of the log-likelihoods over the sum of the weights
    lls, weights = zip(*((float(a), float(b)) for a, b in items), strict=True)
    weighted = float(sum(lls) / sum(weights))
    if aggregation == "weighted_perplexity":
        return math.exp(-weighted)
    if aggregation == "bits_per_byte":
        return -weighted / math.log(2)
    raise ValueError(f"unknown lm-eval aggregation {aggregation!r}")


def lm_eval_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Rows converted from lm-eval tasks (lm_eval_tasks.py), each task's figures as lm-eval reports them
    (lm_eval_task_figures); a benchmark of one task's rows is that task's block, one of several tasks' (a
    group written as one file) has them under `tasks`. None when no row came from lm-eval."""
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        origin = (record.get("evaluation_config") or {}).get("lm_eval")
        if isinstance(origin, Mapping):
            by_task.setdefault(str(origin.get("task")), []).append(record)
    if not by_task:
        return None
    if len(by_task) == 1:
        return lm_eval_task_figures(next(iter(by_task.values())))
    return {"tasks": {name: lm_eval_task_figures(rows) for name, rows in sorted(by_task.items())}}


def lm_eval_task_figures(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One task's rows: where they came from (task, version, lm-eval version, shots, seed, the data's
    sha256, the groups it is in) and, per model, each metric over its scored rows by the metric's own
    aggregation (lm_eval_aggregate), with lm-eval's standard error where it has a closed form: the mean's
    (the sample standard deviation over the square root of n: `mean_stderr`). lm-eval bootstraps the
    perplexities' errors at random: those are left out."""
    first = records[0]["evaluation_config"]["lm_eval"]
    summary: dict[str, Any] = {
        k: first.get(k)
        for k in (
            "task",
            "version",
            "lm_eval_version",
            "num_fewshot",
            "fewshot_seed",
            "data_sha256",
            "groups",
        )
        if k in first
    }
    metrics = [str(m) for m in first.get("metrics") or ["acc"]]
    aggregations: Mapping[str, str] = first.get("aggregation") or {}
    for who in (BASE, ADAPTER):
        values: dict[str, list[Any]] = {m: [] for m in metrics}
        for record in records:
            found = score(record, who)
            per_row = None if found is None else found.get("lm_eval")
            if isinstance(per_row, Mapping):
                for metric in metrics:
                    if metric in per_row:
                        values[metric].append(per_row[metric])
        n = max(len(v) for v in values.values())
        if not n:
            continue
        figures: dict[str, Any] = {"n": n}
        for metric, found_values in values.items():
            if not found_values:  # a metric no row of this model recorded
                continue
            aggregation = str(aggregations.get(metric, "mean"))
            figures[metric] = lm_eval_aggregate(aggregation, found_values)
            if aggregation == "mean":
                mean = figures[metric]
                count = len(found_values)
                spread = sum((float(v) - mean) ** 2 for v in found_values) / (count - 1) if count > 1 else 0.0
                figures[lm_eval_stderr_key(metric)] = math.sqrt(spread / count)
        summary[who] = figures
    return summary


def lm_eval_stderr_key(metric: str) -> str:
    """A metric's standard error's key, as lm-eval names it: acc_stderr, exact_match_stderr,strict-match."""
    name, comma, kept = metric.partition(",")
    return f"{name}_stderr{comma}{kept}"


def lm_eval_groups(blocks: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """lm-eval's groups over the benchmarks' task blocks (lm_eval_summary), each as lm-eval's Group.aggregate
    computes it: per model, each aggregated metric over the group's tasks that ran, weighted by their rows
    (weight_by_size) or not, with the pooled standard error (or the unweighted mean's). `missing` names
    the group's tasks that did not run: a group figure over some of its tasks is not lm-eval's. None when
    no task of a group ran."""
    tasks: dict[str, Mapping[str, Any]] = {}
    for block in blocks:
        if block is not None:
            tasks.update(block["tasks"] if "tasks" in block else {str(block.get("task")): block})
    groups: dict[str, tuple[Mapping[str, Any], dict[str, Mapping[str, Any]]]] = {}
    for name, block in tasks.items():
        for group in block.get("groups") or []:
            groups.setdefault(str(group["group"]), (group, {}))[1][name] = block
    if not groups:
        return None
    out: dict[str, Any] = {}
    for name, (group, members) in sorted(groups.items()):
        entry: dict[str, Any] = {
            "version": group.get("version"),
            "tasks": sorted(members),
            "missing": sorted(set(group.get("tasks") or []) - set(members)),
        }
        for who in (BASE, ADAPTER):
            figures: dict[str, Any] = {}
            for rule in group.get("aggregate") or []:
                metric = str(rule["metric"])
                ran = [b[who] for _, b in sorted(members.items()) if metric in (b.get(who) or {})]
                if not ran:
                    continue
                sizes = [int(f["n"]) for f in ran]
                weights = sizes if rule.get("weight_by_size", True) else [1] * len(sizes)
                figures[metric] = sum(float(f[metric]) * w for f, w in zip(ran, weights, strict=True)) / sum(
                    weights
                )
                stderrs = [f.get(lm_eval_stderr_key(metric)) for f in ran]
                weighted = bool(rule.get("weight_by_size", True))
                if all(e is not None for e in stderrs):
                    error = _group_stderr([float(e) for e in stderrs if e is not None], sizes, weighted)
                    if error is not None:
                        figures[lm_eval_stderr_key(metric)] = error
                figures["n"] = sum(sizes)
            if figures:
                entry[who] = figures
        out[name] = entry
    return out


def _group_stderr(stderrs: Sequence[float], sizes: Sequence[int], weight_by_size: bool) -> float | None:
    """lm-eval's group standard error: the pooled sample variance's for a size-weighted mean
    (pooled_sample_stderr), the unweighted mean's of independent task means otherwise."""
    if not weight_by_size:
        return math.sqrt(sum(e**2 for e in stderrs)) / len(stderrs)
    if sum(sizes) <= len(sizes):  # every task one row: no variance to pool (lm-eval divides by zero)
        return None
    pooled = sum((n - 1) * e**2 * n for n, e in zip(sizes, stderrs, strict=True)) / (sum(sizes) - len(sizes))
    return math.sqrt(pooled / sum(sizes))


# Fewer multiple-choice rows than this cannot tell a model at chance from one above it reliably: no verdict.
CHANCE_MIN_ROWS = 20
CHANCE_ALPHA = 0.05
NEAR_CHANCE = (
    "a multiple-choice accuracy no better than answering at random usually means the model never saw its "
    "prompt as meant: a server that returns no prompt log-probabilities (llama.cpp's, for one), a chat "
    "template that is missing or wrong, or a model too small for the task"
)


def chance_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Per model, its multiple-choice rows against answering at random (each row right with probability
    its right choices over its choices; a gold_mass row's value is a share, not right or wrong, and is left
    out): rows, right, the accuracy chance would give, and the one-sided p-value of doing this well by
    chance (stats.above_chance_p). `above_chance` is false when that p is CHANCE_ALPHA or more over at
    least CHANCE_MIN_ROWS rows, None with fewer rows. None when no row is multiple choice."""
    from pytest_llmeval.stats import above_chance_p

    summary: dict[str, Any] = {}
    for who in (BASE, ADAPTER):
        chances: list[float] = []
        right = 0
        for record in records:
            found = score(record, who)
            if record["evaluation_type"] != "multiple_choice" or found is None:
                continue
            config = record.get("evaluation_config") or {}
            choices = config.get("choices")
            if not isinstance(choices, list) or len(choices) < 2 or config.get("gold_mass"):
                continue  # without its config (a summary of summaries), or a share, not right or wrong
            golds = config.get("answer_indices")
            chances.append((len(golds) if isinstance(golds, list) and golds else 1) / len(choices))
            right += int(float(found["value"]) >= 1.0)
        if not chances:
            continue
        p_value = above_chance_p(chances, right)
        summary[who] = {
            "n": len(chances),
            "correct": right,
            "accuracy": right / len(chances),
            "chance_accuracy": sum(chances) / len(chances),
            "p_value": p_value,
            "above_chance": None if len(chances) < CHANCE_MIN_ROWS else p_value < CHANCE_ALPHA,
        }
    return summary or None
