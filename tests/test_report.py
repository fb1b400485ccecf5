"""reporting/ (spot_check.py, html.py, summary.py): the spot check's selection and Markdown, the HTML page's
structure, a real browser's render."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
import zlib
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval import formatting
from pytest_llmeval.benchmark import Case
from pytest_llmeval.formatting import CROSS_ENTROPY_MEASURE, md_block, md_escape
from pytest_llmeval.records import (
    ADAPTER,
    BASE,
    BenchmarkInfo,
    Domain,
    FluencyRecord,
    GateRecord,
    RowRecord,
    SideRecord,
    gate_record,
    row_record,
)
from pytest_llmeval.reporting.html import html_report
from pytest_llmeval.reporting.spot_check import (
    SELECTION_RULE,
    SpotCheckPick,
    select_spot_check,
    spot_check_markdown,
)
from pytest_llmeval.reporting.summary import summary_lines
from pytest_llmeval.results import Baseline, Previous, build_results

DATA = Path(__file__).parent / "data"
HOSTILE = "a|b `tick` **bold** <script>alert(1)</script>\nsecond line ``` fence"
WHEN = datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
ADAPTER_META: dict[str, Any] = {
    "adapter": "adapters/demo",
    "adapter_name": "demo",
    "adapter_version": "1.0",
    "base_model": "tiny-base",
    "hardware": {"device": "cpu", "device_name": "x86_64", "cpu_count": 2, "torch": "2.13.0"},
}
BASE_META: dict[str, Any] = {"adapter": None, "base_model": "tiny-base"}


def side(output: str | None, value: float, threshold: float = 1.0, **details: Any) -> SideRecord:
    """One model's side of a row: output and score, as evaluator.score_row records them."""
    score = {"value": value, "threshold": threshold, "passed": value >= threshold, **details}
    return {"output": output, "score": score}


def row(
    benchmark: str,
    row_id: str,
    base: float | None = 0.0,
    adapter: float | None = 0.0,
    *,
    threshold: float = 1.0,
    base_output: str | None = "base says",
    adapter_output: str | None = "adapter says",
    with_adapter: bool = True,
    difficulty: str = "easy",
    evaluation_type: str = "exact_match",
    evaluation_config: dict[str, Any] | None = None,
    expected: str = "right",
    instruction: str = "",
    input: str = "",
    domain: Domain = "in",
    error: str | None = None,
    skipped: str | None = None,
) -> RowRecord:
    """A row record made by records.row_record; base=None makes a row whose scoring failed or was skipped."""
    case = Case(
        id=row_id,
        instruction=instruction,
        input=input,
        expected_output=expected,
        evaluation_type=evaluation_type,
        difficulty=difficulty,
        line=1,
        evaluation_config=evaluation_config or {},
        tags=("t",),
    )
    models: dict[str, SideRecord] = {}
    if base is not None:
        models[BASE] = side(base_output, base, threshold)
        if adapter is not None and with_adapter:
            models[ADAPTER] = side(adapter_output, adapter, threshold)
    evaluated = ADAPTER if with_adapter else BASE
    decided = models.get(evaluated)
    info: BenchmarkInfo = {
        "name": benchmark,
        "sha256": "sha256:" + "0" * 64,
        "domain": domain if with_adapter else None,
        "n_rows": 1,
    }
    return row_record(
        nodeid=f"{benchmark}::{row_id}",
        benchmark=info,
        case=case,
        evaluated=evaluated,
        models=models,
        passed=bool(decided and decided["score"] and decided["score"]["passed"]),
        error=error,
        skipped=skipped,
    )


def gates_of(rows: Sequence[RowRecord]) -> list[GateRecord]:
    """A failed and a warning gate for each benchmark of `rows` (the failed one's message is markup)."""
    out = []
    for info in {r["benchmark"]["name"]: r["benchmark"] for r in rows}.values():
        for gate, status, message in (
            ("size", "fail", "<b>too</b> small"),
            ("held_out", "warn", "1 near dup"),
        ):
            verdict = {"gate": gate, "status": status, "passed": status != "fail", "message": message}
            out.append(gate_record(info, {**verdict, "details": {}}))
    return out


def document(
    rows: Sequence[RowRecord],
    *,
    complete: bool = True,
    reason: str | None = None,
    previous: Previous = None,
) -> dict[str, Any]:
    """The results.json document of `rows`, as results.build_results makes it, with gates_of(rows)."""
    adapter = any(r["evaluated"] == ADAPTER for r in rows)
    return build_results(
        rows,
        meta=ADAPTER_META if adapter else BASE_META,
        gates=gates_of(rows),
        complete=complete,
        incomplete_reason=reason,
        previous=previous,
        timestamp=WHEN,
    )


def ids(picks: Sequence[SpotCheckPick]) -> list[str]:
    return [str(p.row["id"]) for p in picks]


def real_document() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / "report_results.json").read_text(encoding="utf-8"))
    return doc


# ---------------------------------------------------------------------------------------------------------
# Selection


def test_selection_regressions_then_a_failure_then_improvements() -> None:
    rows = [
        row("a.jsonl", "same", 1.0, 1.0),
        row("a.jsonl", "fixed-small", 0.4, 0.6, threshold=0.5),
        row("a.jsonl", "both-fail", 0.0, 0.0),
        row("a.jsonl", "worse", 1.0, 0.6, threshold=0.5),
        row("a.jsonl", "flip", 1.0, 0.0),
        row("b.jsonl", "fixed-big", 0.0, 1.0),
        row("b.jsonl", "better", 0.1, 0.4, threshold=0.5),
    ]
    picks = select_spot_check(document(rows), 5)
    assert ids(picks) == ["flip", "worse", "both-fail", "fixed-big", "fixed-small"]
    whys = [p.why for p in picks]
    assert whys[0].startswith("Regression: the base passed (1.00) and the adapter fails (0.00)")
    assert whys[1].startswith("Regression: the adapter scores lower")
    assert whys[2].startswith("Still wrong: both fail")
    assert all(w.startswith("Improvement") for w in whys[3:])


def test_improvements_ordered_by_flip_then_gain_then_node_id() -> None:
    rows = [
        row("a.jsonl", "g2", 0.2, 0.4, threshold=0.9),
        row("a.jsonl", "g5", 0.1, 0.6, threshold=0.9),
        row("a.jsonl", "flip-b", 0.5, 1.0, threshold=0.9),
        row("a.jsonl", "flip-a", 0.5, 1.0, threshold=0.9),
        row("a.jsonl", "flip-big", 0.0, 1.0, threshold=0.9),
        row("a.jsonl", "still", 0.0, 0.0),
    ]
    picks = select_spot_check(document(rows), 6)
    assert ids(picks) == ["still", "flip-big", "flip-a", "flip-b", "g5", "g2"]


def test_regressions_take_at_most_half_and_a_failure_is_always_shown() -> None:
    rows = [row("a.jsonl", f"reg-{i}", 1.0, 0.0) for i in range(8)]
    rows += [row("a.jsonl", f"fix-{i}", 0.0, 1.0) for i in range(8)]
    picks = select_spot_check(document(rows), 5)
    assert ids(picks) == ["reg-0", "reg-1", "fix-0", "fix-1", "fix-2"]
    # A failure is among them: the regressions are rows the adapter fails.
    assert any(not p.row["passed"] for p in picks)


def test_spread_across_benchmarks_among_equals() -> None:
    rows = [row(f"{b}.jsonl", f"{b}-{i}", 0.0, 1.0) for b in ("a", "b", "c") for i in range(3)]
    assert ids(select_spot_check(document(rows), 5)) == ["a-0", "b-0", "c-0", "a-1", "b-1"]


def test_the_same_row_id_in_two_benchmarks_is_two_rows() -> None:
    rows = [row("a.jsonl", "x", 1.0, 0.0), row("b.jsonl", "x", 1.0, 1.0)]
    picks = select_spot_check(document(rows), 5)
    assert [(p.benchmark, p.row["nodeid"], p.why.split(":")[0]) for p in picks] == [
        ("a.jsonl", "a.jsonl::x", "Regression"),
        ("b.jsonl", "b.jsonl::x", "Unchanged"),
    ]


def test_selection_is_deterministic_whatever_the_row_order() -> None:
    rows = [row("a.jsonl", f"r{i}", float(i % 3 == 0), float(i % 2 == 0)) for i in range(30)]
    doc = document(rows)
    first = ids(select_spot_check(doc, 5))
    # results.json sorts rows by node id; the selection must not depend on it.
    random.Random(4).shuffle(doc["benchmarks"][0]["rows"])
    assert [r["id"] for r in doc["benchmarks"][0]["rows"]] != sorted(r["id"] for r in rows)
    assert ids(select_spot_check(doc, 5)) == first


def test_more_rows_asked_than_exist_gives_each_once() -> None:
    rows = [
        row("a.jsonl", "x", 0.0, 1.0),
        row("a.jsonl", "y", 1.0, 1.0),
        row("a.jsonl", "z", None, None, error="boom"),
    ]
    picks = select_spot_check(document(rows), 10)
    assert sorted(ids(picks)) == ["x", "y", "z"]
    assert ids(picks)[-1] == "z"  # an errored row is shown last, never as an improvement


def test_errors_and_skips_are_never_candidates_before_scored_rows() -> None:
    rows = [
        row("a.jsonl", "err", None, None, error="a.jsonl:1: scorer 'exact_match' raised ValueError"),
        row("a.jsonl", "skip", None, None, skipped="sandbox unavailable"),
        row("a.jsonl", "ok", 0.0, 1.0),
    ]
    picks = select_spot_check(document(rows), 2)
    assert ids(picks) == ["ok", "err"]
    assert picks[1].why.startswith("Error: a.jsonl:1: scorer")
    md = spot_check_markdown(document(rows), n=3)
    assert "Skipped: sandbox unavailable" in md
    assert "no score" in md


def test_base_only_failures_first() -> None:
    rows = [
        row("a.jsonl", "pass", 1.0, with_adapter=False),
        row("a.jsonl", "half", 0.5, with_adapter=False),
        row("a.jsonl", "zero", 0.0, with_adapter=False),
    ]
    doc = document(rows)
    assert doc["mode"] == "base_only"
    picks = select_spot_check(doc, 5)
    assert ids(picks) == ["zero", "half", "pass"]
    assert picks[0].why == "The base model fails (0.00)."
    md = spot_check_markdown(doc)
    assert "(base model only)" in md
    assert "| | Base |\n|---|---|\n" in md


def test_real_run_picks_regressions_a_failure_and_improvements() -> None:
    picks = select_spot_check(real_document(), 5)
    whys = [p.why.split(":")[0] for p in picks]
    assert whys == ["Regression", "Regression", "Still wrong", "Improvement", "Improvement"]
    benches = {p.benchmark for p in picks}
    assert benches == {
        "benchmarks/dates.jsonl",
        "benchmarks/japanese_text.jsonl",
        "benchmarks/sentiment.jsonl",
    }
    # Among perplexity regressions of equal score drop, the larger rise in perplexity comes first.
    assert ids(picks)[0] == "ja-014"


# ---------------------------------------------------------------------------------------------------------
# Markdown


def test_markdown_header_prompt_expected_and_side_by_side() -> None:
    r = row(
        "benchmarks/d.jsonl",
        "d-1",
        0.0,
        1.0,
        base_output="2024-1-5",
        adapter_output="2024-01-05",
        instruction="Convert the date.",
        input="Jan 5th, 2024",
        expected="2024-01-05",
    )
    md = spot_check_markdown(document([r]))
    assert md.startswith("# Spot check: demo 1.0\n")
    assert "Adapter **demo**, version 1.0 (`adapters/demo`), against the base model **tiny-base**." in md
    assert "## 1. `benchmarks/d.jsonl` :: `d-1`" in md
    assert "```\nConvert the date.\n\nJan 5th, 2024\n```" in md
    assert "**Expected:** 2024-01-05" in md
    assert "| Answer | 2024-1-5 | 2024-01-05 |" in md
    assert "| Score | 0.00, fail | 1.00, pass |" in md
    assert md.rstrip().endswith(md_escape(SELECTION_RULE))


def test_markdown_prompt_from_the_row_or_empty() -> None:
    md = spot_check_markdown(document([row("a.jsonl", "x", 0.0, 1.0, instruction="Do it")]))
    assert "**Prompt**\n\n```\nDo it\n```" in md
    assert "**Prompt**\n\n*(empty)*" in spot_check_markdown(document([row("a.jsonl", "x", 0.0, 1.0)]))


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_markdown_escapes_hostile_outputs_in_the_table() -> None:
    short = "a|b <script>alert(1)</script> `x` *y* [z](http://e.com)"
    md = spot_check_markdown(
        document([row("a.jsonl", "x", 0.0, 1.0, base_output=short, adapter_output="ok")])
    )
    answer = next(line for line in md.splitlines() if line.startswith("| Answer"))
    assert _unescaped_pipes(answer) == 4  # | Answer | base | adapter |: the output's own pipe is escaped
    assert re.search(r"(?<!\\)<(?!br>)", md) is None  # the only raw tag is the <br> of a newline
    assert r"a\|b \<script>alert(1)\</script>" in answer
    assert r"\`x\`" in answer and r"\*y\*" in answer and r"\[z\]" in answer


def test_markdown_puts_multiline_outputs_in_fences_longer_than_any_backtick_run() -> None:
    md = spot_check_markdown(
        document([row("a.jsonl", "x", 0.0, 1.0, base_output=HOSTILE, adapter_output="ok")])
    )
    assert "| Answer | see base answer below | see adapter answer below |" in md
    assert "**Base answer**\n\n````\n" + HOSTILE + "\n````" in md
    assert md_block("has ````` five") == "``````\nhas ````` five\n``````"


def test_markdown_renders_to_the_intended_structure() -> None:
    markdown_it = pytest.importorskip("markdown_it")
    short = "a|b <script>alert(1)</script> `x`"
    rows = [
        row("a.jsonl", "x", 0.0, 1.0, base_output=short, adapter_output="fine"),
        row("a.jsonl", "y", 1.0, 0.0, base_output=HOSTILE, adapter_output="</td></tr></table>"),
    ]
    rendered = (
        markdown_it.MarkdownIt("commonmark").enable("table").render(spot_check_markdown(document(rows)))
    )
    assert "<script>" not in rendered
    assert rendered.count("<table>") == 2
    assert rendered.count("<h2>") == 2
    for table in re.findall(r"<table>.*?</table>", rendered, flags=re.S):
        for tr in re.findall(r"<tr>.*?</tr>", table, flags=re.S):
            assert len(re.findall(r"<t[hd][ >]", tr)) == 3, tr
    assert "a|b &lt;script&gt;alert(1)&lt;/script&gt; <code>" not in rendered  # backticks escaped, not code
    assert "a|b &lt;script&gt;alert(1)&lt;/script&gt; `x`" in rendered


def test_markdown_truncates_long_outputs_with_a_marker() -> None:
    md = spot_check_markdown(document([row("a.jsonl", "x", 0.0, 1.0, base_output="x" * 5000)]))
    assert "[… truncated: 3800 more characters]" in md
    assert "x" * 5000 not in md


def test_markdown_measured_and_code_rows() -> None:
    ppl = row(
        "p.jsonl", "p", evaluation_type="perplexity", expected="", base_output=None, adapter_output=None
    )
    for who, ppl_value, cross_entropy, value in ((BASE, 20.0, 3.0, 1.0), (ADAPTER, 70.5, 4.25, 0.0)):
        ppl["models"][who]["score"].update(
            value=value, passed=bool(value), perplexity=ppl_value, cross_entropy=cross_entropy, n_tokens=9
        )
        ppl["models"][who]["score"].update(nll=9 * cross_entropy, n_chars=30, max_perplexity=60)
        ppl["models"][who]["score"].update(max_length=1024, stride=512, first_token="after BOS")
    mc = row(
        "m.jsonl",
        "m",
        0.0,
        1.0,
        evaluation_type="multiple_choice",
        evaluation_config={"choices": ["red", "blue"]},
        base_output=None,
        adapter_output=None,
    )
    mc["models"][BASE]["score"].update(predicted_index=0, predicted="red")
    mc["models"][ADAPTER]["score"].update(predicted_index=1, predicted="blue")
    code = row(
        "c.jsonl", "c", 0.0, 1.0, evaluation_type="code_execution", base_output="```python\nprint(1)\n```"
    )
    code["models"][BASE]["score"].update(
        code="print(1)", passed_cases=0, counted_cases=2, verdicts={"wrong_output": 2}
    )
    code["models"][ADAPTER]["score"].update(
        code="print(2)", passed_cases=2, counted_cases=2, verdicts={"passed": 2}
    )
    md = spot_check_markdown(document([ppl, mc, code]))
    assert (
        "| Answer | perplexity 20.00 over 9 tokens (bound 60) | perplexity 70.50 over 9 tokens (bound 60) |"
        in md
    )
    assert "Perplexity 20.00 → 70.50." in md
    assert '| Answer | chose "red" (choice 1 of 2) | chose "blue" (choice 2 of 2) |' in md
    assert "**Base answer**\n\n```python\nprint(1)\n```" in md
    assert "0 of 2 test cases passed (wrong\\_output 2)" in md


def test_markdown_empty_and_incomplete_runs() -> None:
    md = spot_check_markdown(
        document([], complete=False, reason="stopped early: KeyboardInterrupt; 0 of 9 rows")
    )
    assert "No benchmark rows in this run" in md
    assert "> **Incomplete run:** stopped early: KeyboardInterrupt; 0 of 9 rows" in md


# ---------------------------------------------------------------------------------------------------------
# HTML structure

VOID = {"meta", "br", "input", "img", "link", "hr", "col", "wbr", "source", "area", "base", "embed", "track"}
SVG_EMPTY = {"rect", "line", "path", "circle"}  # written as <x/>: html.parser reports them as startend


class Structure(HTMLParser):
    """Checks nesting (every opened tag closed in order) and collects what the assertions need."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.svg_children: list[list[str]] = []
        self.title = ""
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "svg":
            self.svg_children.append([])
        elif self.svg_children and "svg" in self.stack:
            self.svg_children[-1].append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if self.svg_children and "svg" in self.stack:
            self.svg_children[-1].append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1] == "title" and "svg" not in self.stack:
            self.title += data
        if "script" not in self.stack and "style" not in self.stack:
            self.text.append(data)


def parse(page: str) -> Structure:
    parser = Structure()
    parser.feed(page)
    parser.close()
    assert parser.errors == []
    assert parser.stack == []
    return parser


def check_self_contained(parsed: Structure) -> None:
    """No resource from elsewhere: no http(s) in src/href, no <script src>, no stylesheet link, no @import."""
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "xlink:href", "action", "data"):
            value = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", value), (tag, name, value)
        assert not (tag == "script" and "src" in attrs)
        assert tag not in ("link", "iframe", "object", "embed", "img")


def test_html_is_well_formed_self_contained_and_accessible() -> None:
    page = html_report(real_document())
    assert page.startswith('<!DOCTYPE html>\n<html lang="en">')
    parsed = parse(page)
    check_self_contained(parsed)
    assert "@import" not in page and "url(http" not in page
    assert parsed.title == "Evaluation report: date-iso 1.0.0 against embedded:SmolLM2-135M-Instruct"
    assert [t for t, _ in parsed.tags].count("h1") == 1
    assert [t for t, _ in parsed.tags].count("script") == 1
    svgs = [a for t, a in parsed.tags if t == "svg"]
    assert len(svgs) == 6  # per benchmark: difficulty bars and the distribution of differences
    for attrs, children in zip(svgs, parsed.svg_children, strict=True):
        assert attrs["role"] == "img"
        labelled = (attrs["aria-labelledby"] or "").split()
        assert children[:2] == ["title", "desc"]
        assert [a.get("id") for t, a in parsed.tags if t in ("title", "desc") and a.get("id") in labelled]
    ids_ = [a["id"] for _, a in parsed.tags if a.get("id")]
    assert len(ids_) == len(set(ids_))
    text = "".join(parsed.text)
    for gate in ("better_than_base", "no_degradation", "held_out"):
        assert gate in text
    assert "✔ PASS" in text and "! WARN" in text
    assert "McNemar exact p = 1.4e-14" in text
    assert "Corpus perplexity" in text
    assert "benchmarks/dates.jsonl (the adapter's in-domain benchmark)" in text  # top_level
    assert "cpu (x86_64, 2 cores), Linux-6.18.44" in text  # hardware, a string now
    assert "1.0.0: adapter 85.0%, base 6.7%" in text  # current_version, an object now
    # The run had no --llmeval-fluency, so nothing carries the composite's weight: no composite to show.
    assert "Weighted composite score" not in text and "Fluency" not in text
    tables = [a for t, a in parsed.tags if t == "table" and a.get("class") == "rows"]
    assert len(tables) == 3
    assert len([a for t, a in parsed.tags if t == "tr" and a.get("data-change")]) == 14


def test_html_row_table_columns_and_escaping() -> None:
    rows = [
        row("a.jsonl", "x", 0.0, 1.0, base_output=HOSTILE, adapter_output="fine", expected="<b>e</b>"),
        row("a.jsonl", "y", 1.0, 0.0, base_output="", adapter_output="</td></tr></table>"),
        row("a.jsonl", "z", None, None, error="boom <i>"),
    ]
    page = html_report(document(rows))
    parsed = parse(page)
    check_self_contained(parsed)
    assert [t for t, _ in parsed.tags].count("script") == 1
    assert [t for t, _ in parsed.tags].count("b") == 0 and [t for t, _ in parsed.tags].count("i") == 0
    heads = re.findall(r'<th scope="col">([^<]*)</th>', page.split('class="rows"')[1].split("</thead>")[0])
    assert heads == [
        "id",
        "difficulty",
        "type",
        "expected",
        "base output",
        "base score",
        "adapter output",
        "adapter score",
        "result",
    ]
    assert "a|b `tick` **bold** &lt;script&gt;alert(1)&lt;/script&gt;\nsecond line ``` fence" in page
    assert "&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;" in page
    text = "".join(parsed.text)
    assert "✘ FAIL" in text and "<b>too</b> small" in text  # the gate's message is text, not markup
    assert "⚠ error boom <i>" in text
    changes = [a["data-change"] for t, a in parsed.tags if t == "tr" and a.get("data-change")]
    assert changes == ["fixed", "regression", "error"]


def test_html_base_only_has_no_adapter_columns_and_one_chart() -> None:
    rows = [row("a.jsonl", "x", 0.0, with_adapter=False), row("a.jsonl", "y", 1.0, with_adapter=False)]
    page = html_report(document(rows))
    parsed = parse(page)
    assert parsed.title == "Evaluation report: tiny-base (base model only)"
    assert [t for t, _ in parsed.tags].count("svg") == 1
    assert "adapter output" not in page and "adapter score" not in page


def test_html_empty_and_incomplete() -> None:
    page = html_report(document([], complete=False, reason="stopped early: -x; 0 of 12 rows finished"))
    parsed = parse(page)
    alert = [a for t, a in parsed.tags if a.get("role") == "alert"]
    assert len(alert) == 1
    assert "Incomplete run: stopped early: -x; 0 of 12 rows finished." in "".join(parsed.text)
    assert "No benchmark rows in this run" in page
    assert [t for t, _ in parsed.tags].count("svg") == 0
    # What the run did not run (results.json's not_run) is said at the top, as text.
    unrun = document([], complete=False, reason="bad.jsonl failed to collect")
    unrun["not_run"] = [
        {"file": "bad.jsonl", "gate": None, "why": "bad.jsonl:1: invalid JSON <x>"},
        {"file": "bench.jsonl", "gate": "size", "why": "deselected by --deselect"},
    ]
    text = "".join(parse(html_report(unrun)).text)
    assert "bad.jsonl: did not run: it failed to collect (bad.jsonl:1: invalid JSON <x>)" in text
    assert "bench.jsonl: gate size did not run: deselected by --deselect" in text


# ---------------------------------------------------------------------------------------------------------
# What results.json says beyond the rows: top level, out of domain, fluency, composite


def perplexity_row(benchmark: str, row_id: str, base: float, adapter: float, *, domain: Domain) -> RowRecord:
    """A perplexity row: each model's per-token cross-entropy (nats) of a 9-token reference text."""
    r = row(benchmark, row_id, 1.0, 1.0, evaluation_type="perplexity", expected="", domain=domain)
    for who, cross_entropy in ((BASE, base), (ADAPTER, adapter)):
        r["models"][who] = side(
            None,
            1.0,
            perplexity=math.exp(cross_entropy),
            cross_entropy=cross_entropy,
            nll=9 * cross_entropy,
            n_tokens=9,
            n_chars=30,
            max_perplexity=1000.0,
            max_length=1024,
            stride=512,
            first_token="scored after BOS",
        )
    return r


def fluency(scorer: str, output: float | None, reference: float) -> FluencyRecord:
    """A side's --llmeval-fluency record: perplexity of its output and of the reference, 10 tokens each."""
    return {
        "scorer": scorer,
        "output": None if output is None else {"nll": 10 * math.log(output), "n_tokens": 10, "n_chars": 40},
        "reference": {"nll": 10 * math.log(reference), "n_tokens": 10, "n_chars": 40},
    }


def html_text(page: str) -> str:
    return "".join(parse(page).text)


def test_top_level_reason_in_every_header() -> None:
    inside = document([row("a.jsonl", "x", 0.0, 1.0), row("b.jsonl", "y", 1.0, 1.0, domain="out")])
    assert inside["top_level"] == {"benchmark": "a.jsonl", "reason": "the adapter's in-domain benchmark"}
    md = spot_check_markdown(inside)
    assert (
        "Top level of results.json: `a.jsonl` (the adapter's in-domain benchmark): base 0.0%, adapter 100.0%."
        in md
    )
    assert "<dt>top level</dt><dd>a.jsonl (the adapter&#x27;s in-domain benchmark)</dd>" in html_report(
        inside
    )
    assert "top level of results.json: a.jsonl (the adapter's in-domain benchmark)" in summary_lines(inside)
    # Without an in-domain benchmark the reason says which one stands in, and how to mark one.
    outside = document([row("b.jsonl", "y", 1.0, 1.0, domain="out")])
    reason = outside["top_level"]["reason"]
    assert reason.startswith("no in-domain benchmark ran: the top level describes b.jsonl")
    assert md_escape(reason) in spot_check_markdown(outside)
    assert f"b.jsonl ({reason})" in html_text(html_report(outside))


def test_out_of_domain_perplexity_figure_is_in_nats_never_points() -> None:
    rows = [
        perplexity_row("ja.jsonl", "j1", 3.0, 3.5, domain="out"),
        perplexity_row("ja.jsonl", "j2", 2.0, 2.1, domain="out"),
        row("s.jsonl", "s1", 1.0, 0.0, domain="out"),
        row("s.jsonl", "s2", 1.0, 1.0, domain="out"),
    ]
    doc = document(rows)
    assert [b["out_of_domain"]["measure"] for b in doc["benchmarks"]] == [CROSS_ENTROPY_MEASURE, "score"]
    nats = (
        "negative cross-entropy (higher is better): adapter -2.800 nats/token vs base -2.500 nats/token, "
        "degradation (adapter − base) -0.300 nats/token, 2 rows"
    )
    points_ = "score: adapter 50.0% vs base 100.0%, degradation (adapter − base) -50.0 pt, 2 rows"
    text = html_text(html_report(doc))
    assert f"Out of domain: {nats}." in text
    assert f"Out of domain: {points_}." in text
    lines = summary_lines(doc)
    assert f"  out of domain: {nats}" in lines and f"  out of domain: {points_}" in lines
    # -0.300 nats/token is no -30.0 points, whatever the score of the perplexity rows did.
    assert "-30.0" not in text and "-30.0" not in "\n".join(lines)


def test_fluency_per_model_beside_its_own_reference() -> None:
    rows = [
        row("g.jsonl", "g1", 0.0, 1.0, evaluation_type="rouge", domain="in"),
        row("g.jsonl", "g2", 0.0, 1.0, evaluation_type="rouge", domain="in", adapter_output=""),
    ]
    rows[0]["models"][BASE]["fluency"] = fluency("tiny-base", 20.0, 10.0)
    rows[0]["models"][ADAPTER]["fluency"] = fluency("tiny-base+demo", 12.0, 8.0)
    rows[1]["models"][BASE]["fluency"] = fluency("tiny-base", 20.0, 10.0)
    rows[1]["models"][ADAPTER]["fluency"] = fluency("tiny-base+demo", None, 8.0)
    doc = document(rows)
    assert (
        "  fluency, perplexity of each model's own outputs: base 20.00 [QA band low] (reference 10.00 "
        "[QA band low]), adapter 12.00 [QA band low] (reference 8.00 [QA band low]) [1 empty outputs]"
    ) in summary_lines(doc)
    page = html_report(doc)
    table = page.split("<h3>Fluency</h3>")[1].split("</table>")[0]
    cells = [re.findall(r"<td>([^<]*)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", table)]
    assert ["scored by", "tiny-base", "tiny-base+demo"] in cells
    assert ["perplexity of its own outputs", "20.00", "12.00"] in cells
    assert ["perplexity of the references", "10.00", "8.00"] in cells
    assert ["outputs / references", "2.000", "1.500"] in cells
    assert ["empty outputs", "0", "1"] in cells


def test_composite_without_a_value_shows_its_reason() -> None:
    rows = [row("g.jsonl", "g1", 0.5, 1.0, evaluation_type="rouge", threshold=0.5)]
    for who in (BASE, ADAPTER):
        rows[0]["models"][who]["fluency"] = fluency("tiny", 20.0, 10.0)
    doc = document(rows)
    composite = doc["composite"]
    assert composite[BASE]["value"] is None and composite[ADAPTER]["value"] is None
    reason = composite[BASE]["reason"]
    assert reason.startswith("the metrics measured carry 30% of the weight")
    assert f"composite score: none for base and adapter ({reason})" in summary_lines(doc)
    text = html_text(html_report(doc))
    assert f"composite (0–100)none ({reason})none ({reason})" in text
    assert "weights renormalised" not in text  # nothing was renormalised: there is no value


def test_composite_with_a_value_shows_the_number() -> None:
    rows = [row("m.jsonl", "m1", 0.0, 1.0, evaluation_type="multiple_choice")]
    rows[0]["evaluation_config"] = {"choices": ["a", "b"]}
    for who in (BASE, ADAPTER):
        rows[0]["models"][who]["fluency"] = fluency("tiny", 300.0, 10.0)
    doc = document(rows)
    assert doc["composite"][ADAPTER]["value"] is not None
    base, adapter = (doc["composite"][w]["value"] for w in (BASE, ADAPTER))
    line = next(x for x in summary_lines(doc) if x.startswith("composite score"))
    assert line == f"composite score: base {base:.2f}, adapter {adapter:.2f} (no rows for: bertscore, rouge)"
    assert "No rows for: bertscore, rouge (weights renormalised)." in html_text(html_report(doc))


def test_base_only_composite_shows_the_base_alone() -> None:
    rows = [
        row("m.jsonl", f"m{i}", float(i % 2), evaluation_type="multiple_choice", with_adapter=False)
        for i in range(4)
    ]
    rows[0]["models"][BASE]["fluency"] = fluency("tiny", 300.0, 10.0)
    doc = document(rows)
    assert doc["composite"][ADAPTER]["value"] is None  # results.json has the entry, the adapter never ran
    base = doc["composite"][BASE]["value"]
    assert f"composite score: base {base:.2f} (no rows for: bertscore, rouge)" in summary_lines(doc)
    table = html_report(doc).split("<caption>Weighted composite score</caption>")[1].split("</table>")[0]
    assert re.findall(r'<th scope="col">([^<]*)</th>', table) == ["metric", "weight", "base"]


def test_header_shows_hardware_string_and_version_objects() -> None:
    doc = document([row("a.jsonl", "x", 0.0, 1.0)])
    doc["previous_version"] = {"version": "0.9", "adapter_score": 0.5, "base_model_score": 0.25}
    text = html_text(html_report(doc))
    assert "hardwarecpu (x86_64, 2 cores), torch 2.13.0" in text
    assert "this version1.0: adapter 100.0%, base 0.0%" in text
    assert "previous version0.9: adapter 50.0%, base 25.0%" in text
    assert "hardware: cpu (x86\\_64, 2 cores), torch 2.13.0" in spot_check_markdown(doc)


def test_comparison_with_the_previous_version_in_points() -> None:
    before = document([row("a.jsonl", f"r{i}", 0.0, float(i < 2)) for i in range(4)])
    now = document([row("a.jsonl", f"r{i}", 0.0, 1.0) for i in range(4)], previous=before)
    stats = now["benchmarks"][0]["comparison_with_previous"]["statistics"]
    ci = f"{100 * stats['ci_low']:+.1f} to {100 * stats['ci_high']:+.1f} pt"
    expected = f"Against version 1.0: +50.0 pt (95% CI {ci}), McNemar exact p = {stats['p_value']:.2g}"
    assert expected in html_text(html_report(now))
    assert "previous version1.0: adapter 50.0%, base 0.0%" in html_text(html_report(now))


def test_the_baseline_run_is_named_and_its_absence_explained() -> None:
    before = document([row("a.jsonl", f"r{i}", 0.0, float(i < 2)) for i in range(4)])
    rows = [row("a.jsonl", f"r{i}", 0.0, 1.0) for i in range(4)]
    named = document(rows, previous=lambda _bench: Baseline(before, source="20261126T173012.123456Z_a.json"))
    shown = html_text(html_report(named))
    assert "Against version 1.0 (run 20261126T173012.123456Z_a.json): +50.0 pt" in shown
    why = "no earlier run of adapter 'a' on a.jsonl in the history"
    none = document(rows, previous=lambda _bench: Baseline(None, reason=why))
    assert f"No baseline to compare against: {why}" in html_text(html_report(none))


# ---------------------------------------------------------------------------------------------------------
# The terminal summary


def test_summary_lines_adapter_mode() -> None:
    rows = [row("a.jsonl", "r1", 1.0, 1.0), row("a.jsonl", "r2", 0.0, 1.0), row("b.jsonl", "r1", None)]
    rows[2]["error"] = "b.jsonl:1: scorer 'exact_match' raised ValueError: boom"
    doc = document(rows)
    header, a, _, b, _, top = summary_lines(doc)
    assert header.split() == ["benchmark", "rows", "base", "adapter", "diff", "CI,", "p"]
    assert a.split()[:6] == ["a.jsonl", "2", "50.0%", "100.0%", "+50.0", "pt"]
    stats = doc["benchmarks"][0]["statistics"]
    ci = f"{100 * stats['ci_low']:+.1f} to {100 * stats['ci_high']:+.1f} pt"
    assert a.endswith(f"  95% CI {ci}, p=1")
    assert b.split()[:5] == ["b.jsonl", "1", "-", "-", "-"]
    assert b.endswith("(1 rows errored)")
    assert top.startswith("top level of results.json: a.jsonl")


def test_summary_lines_base_only_and_quiet() -> None:
    doc = document([row("a.jsonl", "r1", 0.25, with_adapter=False)])
    header, a = summary_lines(doc, verbose=False)
    assert header.split() == ["benchmark", "rows", "base"]
    assert a.split() == ["a.jsonl", "1", "25.0%"]


def test_summary_lines_incomplete_and_empty() -> None:
    doc = document([row("a.jsonl", "r1", 1.0, 0.0)], complete=False, reason="worker gw1 crashed")
    assert summary_lines(doc)[-1] == "INCOMPLETE: worker gw1 crashed"
    assert summary_lines(doc)[1].split()[4:6] == ["-100.0", "pt"]
    assert summary_lines(document([]), verbose=False) == [
        "benchmark                                 rows    base"
    ]


# ---------------------------------------------------------------------------------------------------------
# formatting.py: each number reads one way everywhere


@pytest.mark.parametrize(
    ("p", "alpha", "shown"),
    [
        (0.0496, 0.05, "0.0496"),  # "0.05" would read as not below alpha
        (0.0504, 0.05, "0.05"),
        (0.04999, 0.05, "0.04999"),
        (1.4210854715202004e-14, 0.05, "1.4e-14"),
        (1.0, 0.05, "1"),
        (0.123, None, "0.12"),
        (None, 0.05, "–"),
    ],
)
def test_p_values_never_cross_alpha_by_rounding(p: float | None, alpha: float | None, shown: str) -> None:
    assert formatting.p_value(p, alpha) == shown


def test_shares_points_levels_and_test_names() -> None:
    assert formatting.percent(0.85) == "85.0%" and formatting.percent(None) == "–"
    assert formatting.percent(None, missing="-") == "-"
    assert formatting.points(-0.0667) == "-6.7 pt" and formatting.points(None) == "–"
    assert formatting.level(0.95) == "95%" and formatting.level(0.995) == "99.5%"
    assert formatting.name_of_test("mcnemar_exact") == "McNemar exact"
    assert formatting.name_of_test("paired_t") == "paired t-test"
    assert formatting.name_of_test("wilcoxon") == "wilcoxon"
    nats = formatting.CROSS_ENTROPY_MEASURE
    assert formatting.measure_difference(-0.047, nats) == "-0.047 nats/token"
    assert formatting.measure_interval(-0.054, -0.04, nats) == "-0.054 to -0.040 nats/token"
    assert formatting.measure_interval(0.683, 0.883, "score") == "+68.3 to +88.3 pt"
    assert formatting.composite_value({"value": None, "reason": "why"}) == "none (why)"
    assert formatting.composite_value({"value": 12.345, "reason": None}) == "12.35"


# ---------------------------------------------------------------------------------------------------------
# A real browser: headless Chromium renders the page without console errors and paints something

CHROMIUM = next(
    (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)),
    None,
)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # No name resolves: anything off this machine could not load, so a clean render shows none is needed.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
]


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def png_rows(data: bytes, count: int) -> tuple[int, int, list[list[bytes]]]:
    """(width, height, the first `count` rows as lists of RGB pixels) of an 8-bit RGB/RGBA PNG, by hand."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[list[bytes]] = []
    prev = bytearray(stride)
    for y in range(min(count, height)):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append([bytes(line[i : i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    doc = real_document()
    doc["complete"] = False
    doc["incomplete_reason"] = "stopped early: KeyboardInterrupt; 14 of 180 rows finished"
    # Model outputs that would run script if they were not escaped: any of them would log to the console.
    hostile = doc["benchmarks"][0]["rows"][0]
    hostile["models"][BASE]["output"] = (
        "<script>console.error('injected')</script><img src=x onerror=console.error(1)>"
    )
    page = tmp_path / "report.html"
    page.write_text(html_report(doc), encoding="utf-8")
    url = page.as_uri()

    dom = chromium(["--dump-dom", url], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    consoles = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert consoles == [], consoles  # uncaught exceptions and console.error both land here
    assert 'data-js="ready"' in dom.stdout  # the inline script ran to its end
    assert 'class="toolbar"' in dom.stdout
    shown = re.findall(r">(\d+) of (\d+) rows shown</span>", dom.stdout)
    assert shown == [(str(len(b["rows"])),) * 2 for b in doc["benchmarks"]]
    assert dom.stdout.count("<svg") == 6

    shot = tmp_path / "report.png"
    run = chromium([f"--screenshot={shot}", "--window-size=1280,2000", url], tmp_path / "profile-shot")
    assert run.returncode == 0, run.stderr[-2000:]
    assert [line for line in run.stderr.splitlines() if ":CONSOLE" in line] == []
    data = shot.read_bytes()
    width, height, rows = png_rows(data, 420)
    assert (width, height) == (1280, 2000)
    assert len(data) > 20_000  # a blank page compresses to a few kB
    pixels = {pixel for line in rows[::3] for pixel in line[::5]}
    assert len(pixels) > 20  # text, the incomplete-run banner, borders: not one colour
    assert any(p[0] > 200 and p[2] < 120 for p in pixels)  # the banner's orange-red border painted
    keep = os.environ.get("LLMEVAL_REPORT_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


CHROMEDRIVER = shutil.which("chromedriver")


class WebDriver:
    """The few W3C WebDriver calls the test needs, over plain HTTP (no selenium)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.session = ""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())["value"]

    def run(self, script: str, *args: Any) -> Any:
        return self.call(
            "POST", f"/session/{self.session}/execute/sync", {"script": script, "args": list(args)}
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def page_in_chromium(page: Path, profile: Path) -> Iterator[WebDriver]:
    """A chromedriver session with `page` open in headless Chromium; closed (and the driver ended) after."""
    port = free_port()
    assert CHROMEDRIVER is not None and CHROMIUM is not None
    driver = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    web = WebDriver(port)
    try:
        for _ in range(100):
            try:
                if web.call("GET", "/status")["ready"]:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        args = [a for a in CHROMIUM_FLAGS if not a.startswith(("--enable-logging", "--v="))]
        options = {"binary": CHROMIUM, "args": [*args, f"--user-data-dir={profile}"]}
        capabilities = {"browserName": "chrome", "goog:chromeOptions": options}
        capabilities["goog:loggingPrefs"] = {"browser": "ALL"}
        web.session = web.call("POST", "/session", {"capabilities": {"alwaysMatch": capabilities}})[
            "sessionId"
        ]
        web.call("POST", f"/session/{web.session}/url", {"url": page.as_uri()})
        yield web
    finally:
        if web.session:
            web.call("DELETE", f"/session/{web.session}")
        driver.terminate()
        driver.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="headless Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
)
def test_row_table_sorts_and_filters_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html_report(real_document()), encoding="utf-8")
    with page_in_chromium(page, tmp_path / "profile") as web:
        ids_of = "return Array.from(document.querySelectorAll('table.rows')[0].tBodies[0].rows)" + (
            ".filter(r => !r.hidden).map(r => r.cells[0].querySelector('summary').textContent.trim())"
        )
        assert web.run(ids_of) == [
            "dates-001",
            "dates-002",
            "dates-003",
            "dates-005",
            "dates-009",
            "dates-015",
        ]
        # Sort by the base score, twice: ascending, then descending (ties keep their order).
        web.run(
            "document.querySelectorAll('table.rows')[0].tHead.rows[0].cells[5].querySelector('button').click()"
        )
        assert web.run(ids_of)[-2:] == ["dates-002", "dates-015"]
        web.run(
            "document.querySelectorAll('table.rows')[0].tHead.rows[0].cells[5].querySelector('button').click()"
        )
        assert web.run(ids_of)[:2] == ["dates-002", "dates-015"]
        sort = web.run("return document.querySelectorAll('table.rows')[0].tHead.rows[0].cells[5].ariaSort")
        assert sort == "descending"
        # Show failed rows only, then filter by text.
        web.run(
            "const s = document.querySelectorAll('.toolbar select')[0];"
            "s.value = 'fail'; s.dispatchEvent(new Event('change'));"
        )
        assert web.run(ids_of) == ["dates-005"]
        web.run(
            "const s = document.querySelectorAll('.toolbar select')[0]; s.value = 'all';"
            "s.dispatchEvent(new Event('change')); const i = document.querySelectorAll('.toolbar input')[0];"
            "i.value = 'T00:00'; i.dispatchEvent(new Event('input'));"
        )
        assert web.run(ids_of) == ["dates-001"]
        assert web.run("return document.querySelector('.toolbar span').textContent") == "1 of 6 rows shown"
        logs = web.call("POST", f"/session/{web.session}/se/log", {"type": "browser"})
        assert [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")] == []
