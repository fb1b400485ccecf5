"""A results.json row as the reports read it: its scores, what changed between the base and the adapter, what
each side answered, and its score in a few words, whatever the evaluation type.

Pure: no pytest, no torch. The spot check (spot_check.py) and the HTML page (html.py, html_charts.py) read
rows through these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmeval import records
from pytest_llmeval.records import ADAPTER, BASE

# Scores that agree to within this are equal: means of floats are not exact (see stats._NOISE).
_EPS = 1e-9


@dataclass(frozen=True)
class _Row:
    benchmark: str  # the benchmark entry's benchmark_file: results.json rows leave it to their parent
    record: Mapping[str, Any]

    @property
    def nodeid(self) -> str:
        return str(self.record["nodeid"])

    def score(self, who: str) -> Mapping[str, Any] | None:
        return records.score(self.record, who)

    def value(self, who: str) -> float | None:
        return records.score_value(self.record, who)

    def passed(self, who: str) -> bool | None:
        score = self.score(who)
        if score is None:
            return None
        return bool(score.get("passed", float(score["value"]) >= float(score.get("threshold", 1.0))))

    @property
    def has_adapter(self) -> bool:
        return str(self.record["evaluated"]) == ADAPTER

    @property
    def delta(self) -> float | None:
        """Adapter score - base score; None unless both were scored."""
        a, b = self.value(ADAPTER), self.value(BASE)
        return None if a is None or b is None else a - b

    @property
    def measure_delta(self) -> float:
        """Perplexity rows: the adapter's rise in cross-entropy (nats per token); 0 for other rows."""
        a, b = self.score(ADAPTER), self.score(BASE)
        if a is None or b is None or "cross_entropy" not in a or "cross_entropy" not in b:
            return 0.0
        return float(a["cross_entropy"]) - float(b["cross_entropy"])

    @property
    def change(self) -> str:
        """regression (pass -> fail), worse, fixed (fail -> pass), better, same, base_only, error, skipped."""
        if self.record.get("skipped"):
            return "skipped"
        if self.record.get("error") or self.value(BASE) is None:
            return "error"
        if not self.has_adapter:
            return "base_only"
        delta = self.delta
        if delta is None:
            return "error"
        base, adapter = self.passed(BASE), self.passed(ADAPTER)
        if base and not adapter:
            return "regression"
        if adapter and not base:
            return "fixed"
        if delta < -_EPS:
            return "worse"
        if delta > _EPS:
            return "better"
        return "same"


def _rows(document: Mapping[str, Any]) -> list[_Row]:
    return [
        _Row(str(bench["benchmark_file"]), row)
        for bench in document.get("benchmarks", [])
        for row in bench.get("rows", [])
    ]


# ---------------------------------------------------------------------------------------------------------
# What a side of a row answered, and a short note on its score, whatever the evaluation type


def _answer(record: Mapping[str, Any], who: str) -> tuple[str | None, str]:
    """(text the model wrote, or None for measured rows; a language for a code block)."""
    side = records.side(record, who)
    if not side:
        return None, ""
    score = side.get("score") or {}
    if record.get("evaluation_type") == "code_execution":
        # A sampled row's first sample stands for it (all of them are in results.json).
        first = (score.get("per_sample") or [score])[0]
        if isinstance(first.get("code"), str):
            return str(first["code"]), "python"
    output = side.get("output")
    return (None if output is None else str(output)), ""


def _measurement(record: Mapping[str, Any], who: str) -> str | None:
    """What a measured row measured (perplexity, the chosen choice), as one line; None for generated rows."""
    side = records.side(record, who)
    if not side:
        return None
    score = side.get("score") or {}
    if "perplexity" in score and side.get("output") is None:
        text = f"perplexity {float(score['perplexity']):.2f} over {score.get('n_tokens', '?')} tokens"
        if score.get("max_perplexity") is not None:
            text += f" (bound {float(score['max_perplexity']):g})"
        return text
    if "predicted_index" in score and side.get("output") is None:
        choices = (record.get("evaluation_config") or {}).get("choices") or []
        index = score["predicted_index"]
        if index is None:
            return "chose no choice"
        where = f" (choice {int(index) + 1} of {len(choices)})" if choices else ""
        return f"chose {json.dumps(score.get('predicted'), ensure_ascii=False)}{where}"
    if side.get("output") is None and side.get("measurement") is not None:
        return _one_line(json.dumps(side["measurement"], ensure_ascii=False), 200)
    return None


def _score_note(record: Mapping[str, Any], who: str) -> str:
    """Score, verdict and the type's own details in a few words: '0.00, fail (threshold 1.00); ...'."""
    side = records.side(record, who)
    if not side:
        return "no score" if record.get("error") or record.get("skipped") else "-"
    score = side.get("score")
    if not score:
        return "no score" + (f" ({_one_line(str(record['error']), 120)})" if record.get("error") else "")
    passed = score.get("passed", float(score["value"]) >= float(score.get("threshold", 1.0)))
    text = f"{float(score['value']):.2f}, {'pass' if passed else 'fail'}"
    if float(score.get("threshold", 1.0)) != 1.0:
        text += f" (threshold {float(score['threshold']):.2f})"
    extra: list[str] = []
    if "verdicts" in score:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(score["verdicts"].items()))
        if "per_sample" in score:
            ks = ", ".join(f"pass@{k} {float(v):.3f}" for k, v in score.get("pass_at_k", {}).items())
            extra.append(
                f"{score.get('correct_samples')} of {score.get('samples')} samples passed every case "
                f"({ks}; {verdicts})"
            )
        else:
            extra.append(
                f"{score.get('passed_cases')} of {score.get('counted_cases')} test cases passed ({verdicts})"
            )
    if "judge_mean" in score:
        extra.append(f"judge {float(score['judge_mean']):.2f} of {score.get('max_score')}")
    if score.get("extracted") is not None and score["extracted"] != side.get("output"):
        extra.append(f"extracted {json.dumps(score['extracted'], ensure_ascii=False)}")
    if score.get("reason"):
        extra.append(str(score["reason"]))
    # The row's `metrics`: reported beside the score that decided, never instead of it.
    also = ", ".join(f"{kind} {float(m['value']):.2f}" for kind, m in (side.get("metrics") or {}).items())
    if also:
        extra.append(f"also {also}")
    return text + "".join(f"; {e}" for e in extra)


def _fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a marker that says how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… truncated: {len(text) - limit} more characters]"


def _expected(record: Mapping[str, Any]) -> list[str]:
    """A row's expected answers as results.json records them: every reference when it gives several, else
    its one expected_output ("" when it has none)."""
    return [str(r) for r in record.get("references") or [record.get("expected_output") or ""]]


def _prompt(record: Mapping[str, Any]) -> str:
    """Instruction and input of a row, as results.json records them ("" when both are empty)."""
    parts = [str(record["instruction"]), str(record["input"])]
    return "\n\n".join(p for p in parts if p)
