"""results.json: pure aggregation of per-row records, an atomic write, and the terminal summary lines.

No pytest, no torch: records are plain JSON-able dicts made by runner.EvalRun.score_row.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_llmeval.benchmark import DIFFICULTIES, file_hash

SCHEMA_VERSION = 1
LN2 = math.log(2.0)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def score_of(record: Mapping[str, Any], who: str) -> float | None:
    """A record's score value for "adapter" or "base"; None when absent or errored."""
    side = record.get(who)
    if not side or not side.get("score"):
        return None
    value = side["score"]["value"]
    return float(value)


def paired_scores(records: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[float]]:
    """Adapter and base scores of the rows that have both (rows whose scorer failed are left out)."""
    adapter: list[float] = []
    base: list[float] = []
    for record in records:
        a, b = score_of(record, "adapter"), score_of(record, "base")
        if a is not None and b is not None:
            adapter.append(a)
            base.append(b)
    return adapter, base


def comparison_values(records: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[float], bool, str]:
    """(adapter values, base values, bounded, measure) that gates and statistics compare, row by row.

    Scores in [0, 1] as a rule. A benchmark of perplexity rows compares per-text negative cross-entropy
    (nats per token; higher is better) instead of pass/fail against the bound, which would throw away how
    much each text moved: a drop of 0.05 in it is a 5% rise in perplexity (e^0.05 = 1.051).
    """
    scored = [r for r in records if score_of(r, "base") is not None]
    if scored and all(r["evaluation_type"] == "perplexity" for r in scored):
        adapter: list[float] = []
        base: list[float] = []
        for r in scored:
            if r.get("adapter") and r["adapter"].get("score"):
                adapter.append(-float(r["adapter"]["score"]["cross_entropy"]))
                base.append(-float(r["base"]["score"]["cross_entropy"]))
        return adapter, base, False, "negative cross-entropy (nats per token) of each text"
    adapter, base = paired_scores(records)
    return adapter, base, True, "score"


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
        for script in parts[0]["scripts"]:
            script_nll = math.fsum(float(p["scripts"][script]["nll"]) for p in parts)
            script_chars = sum(int(p["scripts"][script]["n_chars"]) for p in parts)
            out["bits_per_character_by_script"][script] = {
                "bits_per_character": script_nll / LN2 / script_chars if script_chars else None,
                "n_chars": script_chars,
            }
    return out


def perplexity_score(ppl: float) -> float:
    """The QA fine-tuning document's perplexity score, 100 * exp(-ppl / 300): 100 at ppl 1, falling slowly."""
    return 100.0 * math.exp(-ppl / 300.0)


def perplexity_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Corpus perplexity of a benchmark's perplexity rows, base and adapter: token-weighted, per script."""
    rows = [r for r in records if r["evaluation_type"] == "perplexity" and score_of(r, "base") is not None]
    if not rows:
        return None
    out: dict[str, Any] = {}
    for who in ("base", "adapter"):
        parts = [r[who]["score"] for r in rows if r.get(who) and r[who].get("score")]
        corpus = _corpus(parts)
        if corpus is not None:
            # Named so nobody takes it for the corpus value: every text counts alike, short or long.
            corpus["mean_text_perplexity"] = math.fsum(float(p["perplexity"]) for p in parts) / len(parts)
        out[who] = corpus
    first = rows[0]["base"]["score"]
    out["window"] = {
        "max_length": first["max_length"],
        "stride": first["stride"],
        "first_token": first["first_token"],
    }
    if out.get("adapter") and out.get("base"):
        out["perplexity_ratio"] = out["adapter"]["perplexity"] / out["base"]["perplexity"]
        out["cross_entropy_difference"] = out["adapter"]["cross_entropy"] - out["base"]["cross_entropy"]
    return out


def fluency_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """--llmeval-fluency: corpus perplexity of references and of base and adapter outputs; their ratios."""
    rows = [r for r in records if r.get("fluency")]
    if not rows:
        return None
    out: dict[str, Any] = {}
    for side in ("reference", "base", "adapter"):
        parts = [r["fluency"][side] for r in rows if r["fluency"].get(side)]
        corpus = _corpus(parts)
        if corpus is not None:
            corpus["perplexity_score"] = perplexity_score(corpus["perplexity"])
            corpus["n_empty"] = sum(1 for r in rows if side in r["fluency"] and not r["fluency"][side])
        out[side] = corpus
    reference = out.get("reference")
    for side in ("base", "adapter"):
        generated = out.get(side)
        if reference and generated:
            generated["ratio_to_reference"] = generated["perplexity"] / reference["perplexity"]
            generated["cross_entropy_difference"] = generated["cross_entropy"] - reference["cross_entropy"]
    return out


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
        if r["evaluation_type"] in ("bleu", "chrf") and r.get("base") and r["base"].get("output") is not None:
            config = {k: v for k, v in r.get("evaluation_config", {}).items() if k not in _NOT_METRIC}
            groups.setdefault((r["evaluation_type"], json.dumps(config, sort_keys=True)), []).append(r)
    if not groups:
        return None
    out: dict[str, Any] = {}
    for (kind, settings), rows in sorted(groups.items()):
        config = json.loads(settings)
        references = [r["expected_output"] for r in rows]
        entry: dict[str, Any] = {"settings": config}
        for who in ("base", "adapter"):
            outputs = [r[who]["output"] for r in rows if r.get(who)]
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
    """Weighted composite (0-100) of metric scores (0-100), renormalised over the metrics present."""
    present = {m: w for m, w in weights.items() if w > 0 and metrics.get(m) is not None}
    total = sum(present.values())
    value = None if not total else math.fsum(w * float(metrics[m] or 0.0) for m, w in present.items()) / total
    return {
        "value": value,
        "metrics": {m: metrics.get(m) for m in weights},
        "weights": dict(weights),
        "missing": [m for m, w in weights.items() if w > 0 and metrics.get(m) is None],
    }


def composite_summary(
    records: Sequence[Mapping[str, Any]], weights: Mapping[str, float]
) -> dict[str, Any] | None:
    """Base and adapter composites of these rows; None when no weighted metric has rows.

    Each metric is its rows' mean score x 100; `perplexity` is the perplexity score of the token-weighted
    perplexity of the perplexity rows, else of the outputs --llmeval-fluency measured.
    """
    out: dict[str, Any] = {}
    ppl = perplexity_summary(records)
    fluency = fluency_summary(records)
    for who in ("base", "adapter"):
        metrics: dict[str, float | None] = {}
        for metric in weights:
            if metric == "perplexity":
                corpus = (ppl or {}).get(who) or (fluency or {}).get(who)
                metrics[metric] = None if not corpus else perplexity_score(corpus["perplexity"])
                continue
            values = [
                v for r in records if r["evaluation_type"] == metric and (v := score_of(r, who)) is not None
            ]
            metrics[metric] = 100.0 * math.fsum(values) / len(values) if values else None
        out[who] = composite_score(metrics, weights)
    if all(out[w]["value"] is None for w in out):
        return None
    return out


def evaluated_score(record: Mapping[str, Any]) -> float | None:
    """The evaluated model's score: the adapter's when there is one, else the base's."""
    return score_of(record, "adapter") if record.get("adapter") is not None else score_of(record, "base")


def compare_with_previous(
    benchmark: str,
    sha256: str,
    records: Sequence[Mapping[str, Any]],
    previous: Mapping[str, Any] | None,
    alpha: float,
) -> tuple[Any, bool, str | None, str | None]:
    """(comparison or None, comparable, reason, previous version) of this run against previous results."""
    if previous is None:
        return None, True, None, None
    version = previous.get("adapter_version")
    entry = next((b for b in previous.get("benchmarks", []) if b.get("benchmark_file") == benchmark), None)
    if entry is None:
        return None, True, None, version
    if entry.get("benchmark_hash") != sha256:
        reason = f"{benchmark} changed since the previous results ({entry.get('benchmark_hash')} -> {sha256})"
        return None, False, reason, version
    before = {r["id"]: evaluated_score(r) for r in entry.get("rows", [])}
    now_scores: list[float] = []
    then_scores: list[float] = []
    for record in records:
        current, old = evaluated_score(record), before.get(record["id"])
        if current is not None and old is not None:
            now_scores.append(current)
            then_scores.append(old)
    if not now_scores:
        return None, True, None, version
    from pytest_llmeval.stats import compare_paired

    return compare_paired(now_scores, then_scores, alpha=alpha), True, None, version


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Scores of one benchmark: means over scored rows (rows whose scorer failed are counted apart)."""
    adapter_scores = [s for r in records if (s := score_of(r, "adapter")) is not None]
    base_scores = [s for r in records if (s := score_of(r, "base")) is not None]
    adapter = _mean(adapter_scores)
    base = _mean(base_scores)
    per_difficulty: dict[str, dict[str, Any]] = {}
    for difficulty in DIFFICULTIES:
        rows = [r for r in records if r["difficulty"] == difficulty]
        a = [s for r in rows if (s := score_of(r, "adapter")) is not None]
        b = [s for r in rows if (s := score_of(r, "base")) is not None]
        per_difficulty[difficulty] = {"adapter": _mean(a), "base": _mean(b), "n": len(rows)}
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


def build_results(
    records: Iterable[Mapping[str, Any]],
    *,
    meta: Mapping[str, Any],
    rootdir: Path,
    gates: Iterable[Mapping[str, Any]] = (),
    previous: Mapping[str, Any] | None = None,
    alpha: float = 0.05,
    composite_weights: Mapping[str, float] | None = None,
    complete: bool,
    incomplete_reason: str | None = None,
    timestamp: datetime | None = None,
) -> dict[str, Any]:
    """The results.json document: run metadata, then one entry per benchmark file with its rows."""
    weights = DEFAULT_COMPOSITE_WEIGHTS if composite_weights is None else composite_weights
    by_benchmark: dict[str, list[Mapping[str, Any]]] = {}
    ordered = sorted(records, key=lambda r: r["nodeid"])
    for record in ordered:
        by_benchmark.setdefault(record["benchmark"], []).append(record)
    gates = list(gates)
    gates_of: dict[str, dict[str, Any]] = {}
    for verdict in sorted(gates, key=lambda g: (g["benchmark"], g["gate"])):
        gates_of.setdefault(verdict["benchmark"], {})[verdict["gate"]] = {
            k: v for k, v in verdict.items() if k not in ("benchmark", "in_domain")
        }
    domain_of: dict[str, bool] = {g["benchmark"]: g["in_domain"] for g in gates if "in_domain" in g}
    has_adapter = meta.get("adapter") is not None
    benchmarks = []
    out_of_domain = []
    for name in sorted(by_benchmark):
        rows = by_benchmark[name]
        path = rootdir / name
        sha256 = file_hash(path.read_bytes()) if path.is_file() else None
        types = sorted({r["evaluation_type"] for r in rows})
        entry: dict[str, Any] = {
            "benchmark_file": name,
            "benchmark_hash": sha256,
            "n_examples": len(rows),
            "evaluation_type": types[0] if len(types) == 1 else "mixed",
            "evaluation_types": types,
            "domain": None if name not in domain_of else ("in" if domain_of[name] else "out"),
            "results": summarize(rows),
            "statistics": None,
            "significance_test": None,
            "gates": gates_of.get(name, {}),
        }
        adapter_values, base_values, bounded, measure = comparison_values(rows)
        if has_adapter and adapter_values:
            from pytest_llmeval.stats import compare_paired

            cmp = compare_paired(adapter_values, base_values, alpha=alpha, bounded=bounded)
            entry["statistics"] = {"measure": measure, **cmp.to_json()}
            entry["significance_test"] = cmp.significance_report()
        ppl = perplexity_summary(rows)
        if ppl is not None:
            entry["perplexity"] = ppl
        fluency = fluency_summary(rows)
        if fluency is not None:
            entry["fluency"] = fluency
        corpus = corpus_scores(rows)
        if corpus is not None:
            entry["corpus"] = corpus
        composite = composite_summary(rows, weights)
        if composite is not None:
            entry["composite"] = composite
        if previous is not None and sha256 is not None:
            prev_cmp, comparable, reason, version = compare_with_previous(name, sha256, rows, previous, alpha)
            entry["comparison_with_previous"] = {
                "previous_version": version,
                "comparable": comparable,
                "reason": reason,
                "statistics": None if prev_cmp is None else prev_cmp.to_json(),
            }
        if domain_of.get(name) is False:
            res = entry["results"]
            out_of_domain.append(
                {
                    "benchmark_file": name,
                    "base_model_score": res["base_model_score"],
                    "adapter_score": res["adapter_score"],
                    "degradation": None
                    if res["improvement_absolute"] is None
                    else -res["improvement_absolute"],
                    "verdict": entry["gates"].get("no_degradation", {}).get("status"),
                }
            )
        entry["rows"] = [_row(r) for r in rows]
        benchmarks.append(entry)
    when = timestamp or datetime.now(timezone.utc)
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": "adapter_vs_base" if has_adapter else "base_only",
        "adapter_name": meta.get("adapter_name"),
        "adapter_version": meta.get("adapter_version"),
        "adapter_path": meta.get("adapter"),
        "base_model": meta.get("base_model"),
        "base_model_note": meta.get("base_model_note"),
        "quantization": meta.get("quantization"),
        "timestamp": when.isoformat(timespec="seconds"),
        "hardware": meta.get("hardware"),
        "inference_config": meta.get("inference_config"),
        "previous_version": None if previous is None else previous.get("adapter_version"),
        "current_version": meta.get("adapter_version"),
        "complete": complete,
        "incomplete_reason": None if complete else incomplete_reason,
        "sandbox": sandbox_isolation(ordered),
        # Over every row of the run: the QA document scores one model with several metrics at once.
        "composite": composite_summary(ordered, weights),
        "out_of_domain": out_of_domain,
        "benchmarks": benchmarks,
    }


def sandbox_isolation(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The isolation code_execution rows ran under (level, layers, missing), or None without such rows."""
    for record in records:
        for who in ("adapter", "base"):
            side = record.get(who)
            if side and side.get("score") and "isolation" in side["score"]:
                isolation: dict[str, Any] = side["score"]["isolation"]
                return isolation
    return None


def _row(record: Mapping[str, Any]) -> dict[str, Any]:
    """A row as results.json shows it (the benchmark name is the parent's)."""
    return {k: v for k, v in record.items() if k not in ("benchmark",)}


def write_atomic(path: Path, document: Mapping[str, Any]) -> None:
    """Write JSON atomically (write_text_atomic)."""
    write_text_atomic(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temp file beside `path`, then os.replace: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _pct(value: float | None) -> str:
    return "   -  " if value is None else f"{100 * value:5.1f}%"


def summary_lines(document: Mapping[str, Any], *, verbose: bool = True) -> list[str]:
    """A compact table for the terminal: per benchmark, base and adapter score, the difference, the gates."""
    adapter = document["mode"] == "adapter_vs_base"
    lines = []
    header = f"{'benchmark':<40} {'rows':>5} {'base':>7}"
    if adapter:
        header += f" {'adapter':>8} {'diff':>8}  95% CI, p"
    lines.append(header)
    for bench in document["benchmarks"]:
        res = bench["results"]
        line = f"{bench['benchmark_file']:<40} {bench['n_examples']:>5} {_pct(res['base_model_score']):>7}"
        if adapter:
            diff = res["improvement_absolute"]
            diff_s = "   -" if diff is None else f"{100 * diff:+6.1f}pt"
            line += f" {_pct(res['adapter_score']):>8} {diff_s:>8}"
            stats = bench.get("statistics")
            if stats and stats.get("measure", "score") == "score":
                ci = f"[{100 * stats['ci_low']:+.1f}, {100 * stats['ci_high']:+.1f}]"
                line += f"  {ci}, p={stats['p_value']:.2g}"
            elif stats:
                line += f"  p={stats['p_value']:.2g} (cross-entropy)"
        if res["n_errors"]:
            line += f"  ({res['n_errors']} rows errored)"
        lines.append(line)
        ppl = bench.get("perplexity")
        if ppl and ppl.get("base"):
            text = f"  perplexity (token-weighted): base {ppl['base']['perplexity']:.2f}"
            if ppl.get("adapter"):
                text += f", adapter {ppl['adapter']['perplexity']:.2f} (x{ppl['perplexity_ratio']:.3f})"
            lines.append(text)
        fluency = bench.get("fluency")
        if fluency and fluency.get("reference"):
            parts = [
                f"{side} {fluency[side]['perplexity']:.2f}"
                for side in ("reference", "base", "adapter")
                if fluency.get(side)
            ]
            lines.append(f"  fluency perplexity: {', '.join(parts)}")
        if verbose and bench.get("gates"):
            verdicts = ", ".join(f"{name} {v['status']}" for name, v in bench["gates"].items())
            lines.append(f"  gates: {verdicts}")
    composite = document.get("composite")
    if composite:
        parts = [
            f"{who} {composite[who]['value']:.2f}"
            for who in ("base", "adapter")
            if composite[who]["value"] is not None
        ]
        missing = composite["base"]["missing"]
        lines.append(
            f"composite score: {', '.join(parts)}"
            + (f" (no rows for: {', '.join(missing)})" if missing else "")
        )
    if not document["complete"]:
        lines.append(f"INCOMPLETE: {document['incomplete_reason']}")
    return lines
