"""The spot check: which rows it shows and why (select_spot_check, SELECTION_RULE), and spot_check.md, the
base's and the adapter's answers side by side (LocoLLM's spot check).

Pure: takes the results.json document and returns text. No pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pytest_llmeval.formatting import md_block, md_code, md_escape, percent
from pytest_llmeval.records import ADAPTER, BASE
from pytest_llmeval.reporting.rows import (
    _answer,
    _expected,
    _fmt_score,
    _measurement,
    _one_line,
    _prompt,
    _Row,
    _rows,
    _score_note,
    _truncate,
)

# Characters of a model output the spot check shows in full; longer ones are cut, with a marker saying so.
_MD_MAX = 1200
# Outputs this short and on one line go into the side-by-side table; longer ones get two blocks below it.
_MD_INLINE = 100


# ---------------------------------------------------------------------------------------------------------
# The spot check's selection


@dataclass(frozen=True)
class _Pick:
    row: _Row
    why: str  # "regression", "failure", "improvement", "other"


_Key = Callable[[_Row], tuple[Any, ...]]


def _no_key(row: _Row) -> tuple[Any, ...]:
    return ()


def _pick_spread(
    candidates: Iterable[_Row],
    key: _Key,
    count: int,
    taken: dict[str, int],
    chosen: set[str],
    then: _Key = _no_key,
) -> list[_Row]:
    """Greedily the `count` best rows by `key`; among equals, the benchmark picked least so far, `then`."""
    pool = [r for r in candidates if r.nodeid not in chosen]
    out: list[_Row] = []
    while pool and len(out) < count:
        best = min(pool, key=lambda r: (*key(r), taken.get(r.benchmark, 0), *then(r), r.nodeid))
        pool.remove(best)
        out.append(best)
        chosen.add(best.nodeid)
        taken[best.benchmark] = taken.get(best.benchmark, 0) + 1
    return out


class SpotCheckPick(NamedTuple):
    """A row the spot check shows: its benchmark file, the row, and one sentence on why it was chosen."""

    benchmark: str
    row: Mapping[str, Any]
    why: str


def select_spot_check(document: Mapping[str, Any], n: int = 5) -> list[SpotCheckPick]:
    """The rows the spot check shows, with why each was chosen: see SELECTION_RULE."""
    rows = _rows(document)
    taken: dict[str, int] = {}
    chosen: set[str] = set()
    picks: list[_Pick] = []

    def add(why: str, candidates: Iterable[_Row], key: _Key, count: int, then: _Key = _no_key) -> None:
        found = _pick_spread(candidates, key, min(count, n - len(picks)), taken, chosen, then)
        picks.extend(_Pick(r, why) for r in found)

    scored = [r for r in rows if r.change not in ("error", "skipped")]
    unscored = [r for r in rows if r.change in ("error", "skipped")]
    if document.get("mode") == "base_only" or not any(r.has_adapter for r in rows):
        add("failure", [r for r in scored if not r.passed(BASE)], lambda r: (r.value(BASE),), n)
        add("other", scored, _no_key, n)
    else:
        # Perplexity rows score pass/fail against a bound: among equal drops, the larger move in
        # cross-entropy is the clearer example. It ranks after the benchmark spread, as other rows have none.
        worst: _Key = lambda r: (r.change != "regression", r.delta)  # noqa: E731
        lowest: _Key = lambda r: (r.value(ADAPTER),)  # noqa: E731
        best: _Key = lambda r: (r.change != "fixed", -(r.delta or 0.0))  # noqa: E731
        rise: _Key = lambda r: (-r.measure_delta,)  # noqa: E731
        fall: _Key = lambda r: (r.measure_delta,)  # noqa: E731
        regressions = [r for r in scored if r.change in ("regression", "worse")]
        failing = [r for r in scored if not r.passed(ADAPTER)]
        add("regression", regressions, worst, max(1, n // 2), rise)
        # Without a regression every row the adapter fails is one the base failed too.
        add("failure", [r for r in failing if not r.passed(BASE)], lowest, 1, rise)
        add("improvement", [r for r in scored if r.change in ("fixed", "better")], best, n, fall)
        add("regression", regressions, worst, n, rise)
        add("failure", failing, lowest, n, rise)
        add("other", scored, _no_key, n)
    add("other", unscored, _no_key, n)
    return [SpotCheckPick(p.row.benchmark, p.row.record, _why(p)) for p in picks]


SELECTION_RULE = (
    "Rows are chosen across all benchmarks, deterministically. With an adapter: (1) regressions, up to "
    "half the rows: the base passed and the adapter fails first, then the largest score drop; (2) one row "
    "the adapter still gets wrong (both fail; the lowest adapter score); (3) the clearest improvements: "
    "the base failed and the adapter passes first, then the largest score gain; (4) if rows are left: more "
    "regressions, more failures, then the rest. Base model only: failures first (lowest score first), then "
    "the rest. Among equal scores, perplexity rows with the larger change in cross-entropy come first, then "
    "the benchmark with the fewest rows picked so far, then node id. Rows that errored or were skipped come "
    "last."
)


def _why(pick: _Pick) -> str:
    """One sentence: why this row is in the spot check."""
    row = pick.row
    change = row.change
    if change in ("error", "skipped"):
        reason = row.record.get("skipped") or row.record.get("error") or "no score"
        return f"{'Skipped' if change == 'skipped' else 'Error'}: {_one_line(str(reason), 200)}"
    b = _fmt_score(row.value(BASE))
    if change == "base_only":
        verdict = "fails" if not row.passed(BASE) else "passes"
        return f"The base model {verdict} ({b})."
    a = _fmt_score(row.value(ADAPTER))
    text = {
        "regression": f"Regression: the base passed ({b}) and the adapter fails ({a}).",
        "worse": f"Regression: the adapter scores lower than the base ({b} → {a}).",
        "fixed": f"Improvement: the base failed ({b}) and the adapter passes ({a}).",
        "better": f"Improvement: the adapter scores higher than the base ({b} → {a}).",
    }.get(change)
    if text is None:
        both = "fail" if not row.passed(ADAPTER) else "pass"
        label = "Still wrong" if pick.why == "failure" else "Unchanged"
        text = f"{label}: both {both} (base {b}, adapter {a})."
    if row.measure_delta:
        ppl_b, ppl_a = row.score(BASE), row.score(ADAPTER)
        assert ppl_b is not None and ppl_a is not None  # measure_delta is nonzero only with both
        text += f" Perplexity {ppl_b['perplexity']:.2f} → {ppl_a['perplexity']:.2f}."
    return text


# ---------------------------------------------------------------------------------------------------------
# Markdown


def _md_value(text: str | None, *, empty: str = "*(empty)*") -> str:
    if text is None:
        return "-"
    return md_escape(text) if text.strip() else empty


def _md_header(document: Mapping[str, Any]) -> list[str]:
    name = document.get("adapter_name") or document.get("adapter_path")
    version = document.get("adapter_version")
    base = document.get("base_model") or "?"
    lines: list[str] = []
    if document.get("mode") == "base_only" or name is None:
        lines.append(f"# Spot check: {md_escape(str(base))} (base model only)")
        lines.append("")
        lines.append(
            f"No adapter: the base model's answers, failures first. Base model: **{md_escape(base)}**."
        )
    else:
        title = f"{name} {version}" if version else str(name)
        lines.append(f"# Spot check: {md_escape(title)}")
        lines.append("")
        where = f" ({md_code(str(document['adapter_path']))})" if document.get("adapter_path") else ""
        lines.append(
            f"Adapter **{md_escape(str(name))}**, version {md_escape(str(version or '?'))}{where}, "
            f"against the base model **{md_escape(str(base))}**."
        )
    facts = [f"Run of {document.get('timestamp', '?')}"]
    if document.get("quantization"):
        facts.append(f"quantization: {document['quantization']}")
    if document.get("hardware"):
        facts.append(f"hardware: {document['hardware']}")
    lines.append(md_escape("; ".join(facts)) + ".")
    lines += ["", _md_top_level(document)]
    if not document.get("complete", True):
        lines += ["", f"> **Incomplete run:** {md_escape(str(document.get('incomplete_reason') or '?'))}"]
    return lines


def _md_top_level(document: Mapping[str, Any]) -> str:
    """Which benchmark results.json's top level (the LocoLLM fields) describes, why, and its scores."""
    top = document.get("top_level") or {}
    reason = md_escape(str(top.get("reason") or "not recorded"))
    if not top.get("benchmark"):
        return f"Top level of results.json: none ({reason})."
    text = f"Top level of results.json: {md_code(str(top['benchmark']))} ({reason})"
    results = document.get("results") or {}
    scores = [f"base {percent(results.get('base_model_score'))}"]
    if document.get("mode") == "adapter_vs_base":
        scores.append(f"adapter {percent(results.get('adapter_score'))}")
    return f"{text}: {', '.join(scores)}."


# A run writes its spot check beside results.json; `pytest-llmeval report` writes it there again.
SPOT_CHECK_NAME = "spot_check.md"


def spot_check_path(results: Path) -> Path:
    """The spot check beside a results.json: where the run writes it, and `pytest-llmeval report` too."""
    return results.parent / SPOT_CHECK_NAME


def spot_check_markdown(
    document: Mapping[str, Any],
    *,
    n: int = 5,
) -> str:
    """spot_check.md: n rows with the base's and the adapter's answers side by side (LocoLLM's spot check)."""
    lines = _md_header(document)
    total = len(_rows(document))
    picked = select_spot_check(document, n)
    adapter = document.get("mode") == "adapter_vs_base"
    lines += ["", f"{len(picked)} of {total} rows, chosen by the rule at the end of this page.", ""]
    if not picked:
        lines += ["No benchmark rows in this run: nothing to check.", ""]
    for index, (bench, record, why) in enumerate(picked, start=1):
        lines.append(f"## {index}. {md_code(bench)} :: {md_code(str(record.get('id')))}")
        lines.append("")
        lines.append(md_escape(why))
        lines.append("")
        facts = [
            f"Difficulty {md_escape(str(record.get('difficulty')))}",
            md_code(str(record.get("evaluation_type"))),
            f"line {record.get('line')}",
        ]
        if record.get("tags"):
            facts.append("tags: " + ", ".join(md_code(str(t)) for t in record["tags"]))
        lines.append(" · ".join(facts) + ".")
        lines.append("")
        prompt = _prompt(record)
        lines += [
            "**Prompt**",
            "",
            md_block(_truncate(prompt, _MD_MAX)) if prompt else "*(empty)*",
            "",
        ]
        references = _expected(record)
        expected = references[0]
        if len(references) > 1:
            lines += [f"**Expected** ({len(references)} references)", ""]
            lines += [part for r in references for part in (md_block(_truncate(r, _MD_MAX)), "")]
        elif expected and ("\n" in expected or len(expected) > _MD_INLINE):
            lines += ["**Expected**", "", md_block(_truncate(expected, _MD_MAX)), ""]
        else:
            lines += [f"**Expected:** {_md_value(expected, empty='*(none)*')}", ""]
        sides = [BASE, ADAPTER] if adapter else [BASE]
        answers = {who: _answer(record, who) for who in sides}
        blocks = any(
            text is not None and ("\n" in text or len(text) > _MD_INLINE or lang)
            for text, lang in answers.values()
        )
        lines.append("| | " + " | ".join(who.capitalize() for who in sides) + " |")
        lines.append("|---|" + "---|" * len(sides))
        cells = []
        for who in sides:
            text, _ = answers[who]
            measured = _measurement(record, who)
            if measured is not None:
                cells.append(md_escape(measured))
            elif text is None:
                cells.append("-")
            elif blocks:
                cells.append(f"see {who} answer below")
            else:
                cells.append(_md_value(_truncate(text, _MD_INLINE)))
        lines.append("| Answer | " + " | ".join(cells) + " |")
        lines.append("| Score | " + " | ".join(md_escape(_score_note(record, who)) for who in sides) + " |")
        lines.append("")
        if blocks:
            for who in sides:
                text, lang = answers[who]
                if text is None or _measurement(record, who) is not None:
                    continue
                label = f"{who.capitalize()} answer"
                lines += [
                    f"**{label}**",
                    "",
                    md_block(_truncate(text, _MD_MAX), lang) if text else "*(empty)*",
                    "",
                ]
    lines += ["---", "", f"*Selection rule.* {md_escape(SELECTION_RULE)}", ""]
    return "\n".join(lines)
