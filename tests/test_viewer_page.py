"""The page of `pytest-llmeval view` (reporting/viewer_page.py + viewer.js): escaping without a browser, and
the three views in headless Chromium on hand-built payloads that follow the contract of issue 41."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_report import CHROMEDRIVER, CHROMIUM, WebDriver, page_in_chromium

from pytest_llmeval.reporting.viewer_page import render

BENCH = "benchmarks/dates.jsonl"
BASE = "base"
ADAPTER = "date-iso"

Cell = tuple[str | None, float | None]  # (output, score) of one row in one column; None: absent / not scored


@dataclass
class Run:
    """One run of the hand-built history: per column, one (output, score) per row id (in the ids' order)."""

    cells: dict[str, list[Cell]]
    complete: bool = True
    hash: str | None = "sha256:aaaa"
    prompt: str | None = "3f2a9c000000"
    verdict: str | None = "pass"
    identity: str = f"adapter:{ADAPTER}"
    evaluated: str = ADAPTER
    name: str = ""
    label: str = ""
    errors: dict[str, str] = field(default_factory=dict)


def _stats(scores: Sequence[float | None]) -> dict[str, Any]:
    values = [s for s in scores if s is not None]
    mean = sum(values) / len(values) if values else None
    # Not the contract's Wilson interval: the page only draws what it is given.
    ci = None if mean is None or len(values) < 2 else [max(0.0, mean - 0.1), min(1.0, mean + 0.1)]
    return {"mean": mean, "ci": ci, "n": len(values)}


def make_payload(
    ids: Sequence[str],
    runs: Sequence[Run],
    *,
    bench: str = BENCH,
    inputs: Sequence[str] | None = None,
    expected: Sequence[str | None] | None = None,
    tags: Sequence[list[str]] | None = None,
    difficulty: Sequence[str | None] | None = None,
    pairs: Sequence[dict[str, Any]] = (),
    default_pair: list[int] | None = None,
) -> dict[str, Any]:
    """A version-1 viewer payload of one benchmark (spec of issue 41), texts interned as the contract says."""
    strings: list[str] = []
    index: dict[str, int] = {}

    def intern(text: str | None) -> int | None:
        if text is None:
            return None
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    out_runs: list[dict[str, Any]] = []
    cells: dict[str, dict[str, list[Any]]] = {}
    errors: dict[str, dict[str, str]] = {}
    for number, run in enumerate(runs):
        columns = list(run.cells)
        name = run.name or f"2026110{number % 10}T0800{number:04d}Z_{ADAPTER}_0.{number}.json"
        out_runs.append(
            {
                "name": name,
                "time": f"2026-11-01T08:{number % 60:02d}:00+00:00",
                "label": run.label or f"{ADAPTER} 0.{number}",
                "identity": run.identity,
                "complete": run.complete,
                "reason": None if run.complete else "stopped early: KeyboardInterrupt",
                "columns": columns,
                "evaluated": run.evaluated,
                "benchmarks": {
                    bench: {
                        "hash": run.hash,
                        "prompt": run.prompt,
                        "n": len(ids),
                        "scores": {c: _stats([s for _, s in run.cells[c]]) for c in columns},
                        "no_regression": None
                        if run.verdict is None
                        else {"status": run.verdict, "message": f"no_regression {run.verdict}"},
                    }
                },
            }
        )
        cells[str(number)] = {
            c: [v for out, score in run.cells[c] for v in (intern(out), score)] for c in columns
        }
        if run.errors:
            errors[str(number)] = dict(run.errors)
    return {
        "version": 1,
        "generated": "2026-11-29T08:40:00Z",
        "alpha": 0.05,
        "strings": strings,
        "runs": out_runs,
        "rows": {
            bench: {
                "ids": list(ids),
                "input": [intern(t) for t in (inputs or [f"input of {i}" for i in ids])],
                "expected": [intern(t) for t in (expected or [f"expected of {i}" for i in ids])],
                "difficulty": list(difficulty or [None] * len(ids)),
                "tags": [list(t) for t in (tags or [[] for _ in ids])],
            }
        },
        "cells": {bench: cells},
        "errors": {bench: errors} if errors else {},
        "pairs": list(pairs),
        "default_pair": default_pair,
    }


def both(outputs: Sequence[Cell]) -> dict[str, list[Cell]]:
    """Cells of a run with the base and the adapter column, the base answering "base" with score 0."""
    return {BASE: [("base", 0.0) for _ in outputs], ADAPTER: list(outputs)}


# ---------------------------------------------------------------------------------------------------------
# Without a browser: what render writes


HOSTILE = "</script><script>document.title='pwned'</script><img src=x onerror=\"document.title='img'\">"


def _data_block(page: str) -> str:
    found = re.search(r'<script type="application/json" id="llmeval-data">(.*?)</script>', page, re.S)
    assert found is not None
    return found.group(1)


def test_render_escapes_the_payload_so_no_text_can_close_the_script() -> None:
    odd = "a\u2028b\u2029c & <!-- --> <b>"
    payload = make_payload(
        ["r1", HOSTILE],
        [Run(both([(HOSTILE, 1.0), (odd, 0.0)])), Run(both([(HOSTILE + "\ud800", 1.0), (odd, 1.0)]))],
        inputs=[HOSTILE, odd],
    )
    page = render(payload)
    page.encode("utf-8")  # a lone surrogate would fail here: it is written as an escape
    # Exactly the page's two script elements (the data and the code): no output opened or closed one.
    assert page.count("<script") == 2
    assert page.count("</script") == 2
    block = _data_block(page)
    for raw in ("<", ">", "&", "\u2028", "\u2029", "\ud800"):
        assert raw not in block
    assert "\\u003c/script\\u003e" in block and "\\u2028" in block and "\\ud800" in block
    assert json.loads(block) == payload  # the escapes are JSON's own: the page reads back what was given
    # The header is escaped too (a run name is a file name, but a results.json path is the user's).
    named = make_payload(["r1"], [Run(both([("x", 1.0)]), name="<b>run</b>.json")])
    assert "<b>run</b>" not in render(named).split('id="llmeval-data"')[0]


def test_render_inlines_the_script_under_its_own_hash_and_refuses_other_versions() -> None:
    page = render(make_payload(["r1"], [Run(both([("x", 1.0)]))]))
    assert "<title>pytest-llmeval history: 1 run</title>" in page
    assert "generated</dt><dd>2026-11-29T08:40:00Z" in page
    # The CSP lets only this script run and nothing load: its hash must be the inlined text's.
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert policy is not None
    assert f"script-src 'sha256-{digest}'" in html.unescape(policy.group(1))
    assert "default-src 'none'" in html.unescape(policy.group(1))
    assert re.search(r"\b(https?:)?//", page.replace("http://www.w3.org/2000/svg", "")) is None
    with pytest.raises(ValueError, match="version 2"):
        render({**make_payload(["r1"], [Run(both([("x", 1.0)]))]), "version": 2})
    with pytest.raises(ValueError):
        render({**make_payload(["r1"], [Run(both([("x", 1.0)]))]), "alpha": float("nan")})


# ---------------------------------------------------------------------------------------------------------
# In headless Chromium

needs_browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="headless Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
)

KEYS = {"Tab": "\ue004", "Enter": "\ue007", "Space": "\ue00d", "ArrowLeft": "\ue012", "ArrowRight": "\ue014"}
KEYS["Home"] = "\ue011"


class Page:
    """The viewer open in one chromedriver session, shared by this module's browser tests."""

    def __init__(self, web: WebDriver, folder: Path) -> None:
        self.web = web
        self.folder = folder
        self.count = 0

    def open(self, payload: dict[str, Any]) -> Path:
        self.count += 1
        path = self.folder / f"viewer-{self.count}.html"
        path.write_text(render(payload), encoding="utf-8")
        self.goto(path)
        return path

    def goto(self, path: Path) -> None:
        """Open the page at `path` and wait until its script says it is ready."""
        self.web.call("POST", f"/session/{self.web.session}/url", {"url": path.as_uri()})
        # chromedriver can return from a navigation to a large page before its script ran (seen under load).
        state = None
        for _ in range(600):
            state = self.run(
                "return document.URL === arguments[0] && document.documentElement.dataset.js || null",
                path.as_uri(),
            )
            if state is not None:
                break
            time.sleep(0.05)
        assert state == "ready", self.run("return document.body ? document.body.innerText.slice(0, 500) : ''")

    def run(self, script: str, *args: Any) -> Any:
        return self.web.run(script, *args)

    def keys(self, *names: str) -> None:
        actions: list[dict[str, str]] = []
        for name in names:
            actions += [{"type": "keyDown", "value": KEYS[name]}, {"type": "keyUp", "value": KEYS[name]}]
        self.web.call(
            "POST",
            f"/session/{self.web.session}/actions",
            {"actions": [{"type": "key", "id": "keyboard", "actions": actions}]},
        )

    def type_in(self, field: str, value: str) -> None:
        """Set the input of id `field` to `value`, as typing would (an input event follows)."""
        self.run(
            "const i = document.getElementById(arguments[0]); i.value = arguments[1];"
            "i.dispatchEvent(new Event('input'))",
            field,
            value,
        )

    def choose(self, select: str, value: object) -> None:
        """Pick `value` in the <select> of id `select`, as a reader would (a change event follows)."""
        self.run(
            "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
            "s.dispatchEvent(new Event('change'))",
            select,
            str(value),
        )

    def tab(self, key: str) -> None:
        self.run(f"document.getElementById('tab-{key}').click()")

    def errors(self) -> list[Any]:
        logs = self.web.call("POST", f"/session/{self.web.session}/se/log", {"type": "browser"})
        return [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")]

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.web.call("GET", f"/session/{self.web.session}/screenshot")))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    folder = tmp_path_factory.mktemp("viewer")
    blank = folder / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title>", encoding="utf-8")
    with page_in_chromium(blank, folder / "profile") as web:
        web.call("POST", f"/session/{web.session}/window/rect", {"width": 1400, "height": 1000})
        yield Page(web, folder)


def pair_history() -> tuple[list[str], dict[str, Any]]:
    """Two runs of eight rows: regressed, improved and unchanged rows interleaved, one row only in run B."""
    ids = [f"dates-{i:03d}" for i in range(1, 9)]
    a: list[Cell] = [("same", 1.0), ("wrong", 0.0), ("right", 1.0), ("x", 0.5), ("ok", 1.0)]
    a += [("meh", 0.0), (None, None), ("the cat sat", 1.0)]
    b: list[Cell] = [("same", 1.0), ("right", 1.0), ("wrong", 0.0), ("x", 0.5), ("nope", 0.0)]
    b += [("good", 1.0), ("new", 1.0), ("the bat sat on", 0.0)]
    tags = [["edge"] if i % 2 else [] for i in range(8)]
    difficulty: list[str | None] = ["easy", "hard"] * 4
    payload = make_payload(ids, [Run(both(a)), Run(both(b))], tags=tags, difficulty=difficulty)
    return ids, payload


PAIR_ORDER = ["dates-003", "dates-005", "dates-008", "dates-002", "dates-006", "dates-001", "dates-004"]
ROWS_OF = "return Array.from(document.querySelectorAll('#panel-pair .pair-table tbody tr'))"


@pytest.mark.slow
@needs_browser
def test_hostile_texts_are_shown_as_text_in_every_view(page: Page) -> None:
    ids = ["r1", HOSTILE]
    runs = [
        Run(both([(HOSTILE, 1.0), ("fine", 1.0)]), label=HOSTILE),
        Run(both([("fine", 0.0), (HOSTILE, 0.0)]), errors={"r1": HOSTILE}),
    ]
    payload = make_payload(
        ids, runs, inputs=[HOSTILE, HOSTILE], expected=[HOSTILE, None], tags=[[HOSTILE], []]
    )
    page.open(payload)
    title = "pytest-llmeval history: 2 runs"
    for key in ("time", "pair", "row"):
        page.tab(key)
        assert page.run(f"return document.getElementById('panel-{key}').textContent").count(HOSTILE) >= 1, key
    page.type_in("r-id", HOSTILE)
    assert HOSTILE in page.run("return document.querySelector('.row-history .row-table').textContent")
    assert page.run("return document.title") == title
    assert page.run("return document.querySelectorAll('img').length") == 0
    # Only the page's own two script elements, and no element any text would have made.
    assert page.run("return document.querySelectorAll('script').length") == 2
    assert page.errors() == []


@pytest.mark.slow
@needs_browser
def test_two_runs_list_regressed_then_improved_then_unchanged_with_a_character_diff(page: Page) -> None:
    _, payload = pair_history()
    page.open(payload)
    page.tab("pair")
    rows = page.run(ROWS_OF + ".map(r => [r.dataset.id, r.className])")
    assert rows == [
        [i, f"row-{kind}"]
        for i, kind in zip(PAIR_ORDER, ["regressed"] * 3 + ["improved"] * 2 + ["unchanged"] * 2, strict=True)
    ]
    # No pair entry: the page says how to get one, naming the runs as history does.
    missing = page.run("return document.querySelector('#panel-pair .pair-missing').textContent")
    names = [r["name"] for r in payload["runs"]]
    command = f"pytest-llmeval view --pair {names[0]} {names[1]}"
    assert missing == f"paired statistics not computed for this pair: run {command}"
    # The diff: A's own characters struck out, B's inserted, the rest shared.
    cells = page.run(
        "const r = document.querySelector('#panel-pair tr[data-id=\"dates-008\"]');"
        "return [r.querySelector('.a-out').textContent, r.querySelector('.b-out').textContent,"
        " Array.from(r.querySelectorAll('del')).map(e => e.textContent),"
        " Array.from(r.querySelectorAll('ins')).map(e => e.textContent)]"
    )
    assert cells == ["the cat sat", "the bat sat on", ["c"], ["b", " on"]]
    # Filters: outcome, then tag (odd rows carry "edge").
    page.choose("f-outcome", "improved")
    assert page.run(ROWS_OF + ".map(r => r.dataset.id)") == ["dates-002", "dates-006"]
    page.choose("f-tag", "edge")
    assert page.run(ROWS_OF + ".map(r => r.dataset.id)") == ["dates-002", "dates-006"]
    page.choose("f-outcome", "failed")
    assert page.run(ROWS_OF + ".map(r => r.dataset.id)") == ["dates-008", "dates-004"]
    page.choose("f-outcome", "")
    page.choose("f-tag", "")
    page.choose("f-difficulty", "easy")
    assert page.run(ROWS_OF + ".map(r => r.dataset.id)") == ["dates-003", "dates-005", "dates-001"]
    # Another model column: the base answered the same in both runs, so every row is unchanged.
    page.choose("f-difficulty", "")
    page.choose("f-column", BASE)
    assert page.run(ROWS_OF + ".map(r => [r.dataset.id, r.className])") == [
        [f"dates-{i:03d}", "row-unchanged"] for i in range(1, 9)
    ]
    # The paired statistics from the payload when it has them.
    stats = {"a": 0, "b": 1, "benchmark": BENCH, "n": 7, "mean_a": 0.5, "mean_b": 0.5, "difference": 0.0}
    stats |= {"ci": [-0.3, 0.3], "p_value": 1.0, "test": "mcnemar_exact", "significant": False, "text": "T"}
    page.open({**payload, "pairs": [stats]})
    page.tab("pair")
    shown = page.run("return document.querySelector('#panel-pair .pair-stats').textContent")
    assert "mcnemar_exact" in shown and "[-0.300, 0.300]" in shown and "B vs A on 7 shared rows: T" in shown
    page.open({**payload, "pairs": [{"a": 0, "b": 1, "benchmark": BENCH, "reason": "not comparable: hash"}]})
    page.tab("pair")
    assert page.run("return document.querySelector('#panel-pair .pair-reason').textContent") == (
        "not comparable: hash"
    )
    assert page.errors() == []


@pytest.mark.slow
@needs_browser
def test_passed_and_failed_follow_each_runs_thresholds(page: Page) -> None:
    # The runs' own verdicts (payload.passed), not full marks: here a score of 0.5 reached its threshold.
    _, payload = pair_history()
    payload["passed"] = {
        BENCH: {
            run: {
                column: [None if s is None else int(s >= 0.5) for s in flat[1::2]]
                for column, flat in columns.items()
            }
            for run, columns in payload["cells"][BENCH].items()
        }
    }
    page.open(payload)
    page.tab("pair")
    page.choose("f-outcome", "failed")
    assert page.run(ROWS_OF + ".map(r => r.dataset.id)") == ["dates-003", "dates-005", "dates-008"]
    page.choose("f-outcome", "passed")
    assert page.run(ROWS_OF + ".map(r => r.dataset.id)") == [
        "dates-002",
        "dates-006",
        "dates-001",
        "dates-004",
    ]
    page.choose("f-outcome", "")


@pytest.mark.slow
@needs_browser
def test_each_benchmark_is_compared_on_its_own_evaluated_column(page: Page) -> None:
    # In a run of several adapters each benchmark's rows pass or fail by its own adapter: the payload says
    # which per benchmark, and the two-runs list follows it (here the base, unchanged on every row).
    _, payload = pair_history()
    payload["runs"][1]["benchmarks"][BENCH]["evaluated"] = BASE
    page.open(payload)
    page.tab("pair")
    assert (
        page.run("return document.querySelector('#panel-pair .pair-column').textContent") == f"column {BASE}"
    )
    assert page.run(ROWS_OF + ".map(r => r.className)") == ["row-unchanged"] * 8


def _lcs(a: str, b: str) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b):
            prev, row[j + 1] = row[j + 1], prev + 1 if x == y else max(row[j + 1], row[j])
    return row[-1]


@pytest.mark.slow
@needs_browser
def test_the_character_diff_is_a_shortest_edit_and_keeps_both_texts(page: Page) -> None:
    rng = random.Random(41)
    alphabet = "ab c😀\n"
    pairs = [
        (
            "".join(rng.choices(alphabet, k=rng.randint(0, 25))),
            "".join(rng.choices(alphabet, k=rng.randint(0, 25))),
        )
        for _ in range(60)
    ]
    # Long texts: a change inside a long common prefix and suffix is still found; where what differs is
    # longer than 3000 characters on both sides, the texts are shown whole (2 edits would do here).
    long = {
        len(pairs): ("x" * 3500 + "a" + "x" * 9, "x" * 3500 + "b" + "x" * 9, "a", "b"),
        len(pairs) + 1: ("ab" * 1600, "ba" * 1600, "ab" * 1600, "ba" * 1600),
    }
    pairs += [(a, b) for a, b, _, _ in long.values()]
    ids = [f"r{i}" for i in range(len(pairs))]
    page.open(
        make_payload(ids, [Run(both([(a, 1.0) for a, _ in pairs])), Run(both([(b, 1.0) for _, b in pairs]))])
    )
    page.tab("pair")
    shown = page.run(
        ROWS_OF + ".map(r => [r.dataset.id, r.querySelector('.a-out').textContent,"
        " r.querySelector('.b-out').textContent,"
        " Array.from(r.querySelectorAll('del')).map(e => e.textContent).join(''),"
        " Array.from(r.querySelectorAll('ins')).map(e => e.textContent).join('')])"
    )
    assert len(shown) == len(pairs)
    for row_id, a_text, b_text, deleted, inserted in shown:
        a, b = pairs[int(row_id[1:])]
        assert (a_text, b_text) == (a, b)
        if int(row_id[1:]) in long:
            assert (deleted, inserted) == long[int(row_id[1:])][2:]
        else:
            assert len(deleted) + len(inserted) == len(a) + len(b) - 2 * _lcs(a, b), (a, b)


@pytest.mark.slow
@needs_browser
def test_over_time_draws_one_point_per_complete_run_and_breaks_where_the_benchmark_changed(
    page: Page,
) -> None:
    ids = ["r1", "r2", "r3"]
    scores = [
        [1.0, 0.0, 0.0],
        [1.0, 1.0, 0.0],
        [0.0, 0.0, 0.0],
        [1.0, 1.0, 1.0],
        [1.0, 0.0, 1.0],
        [0.0, 1.0, 1.0],
    ]
    runs = [Run(both([("o", s) for s in row])) for row in scores]
    runs[2].complete = False  # partial: no point
    runs[3].hash = "sha256:bbbb"  # the benchmark file changed before run 3
    runs[4].hash = "sha256:bbbb"
    runs[5].hash = "sha256:bbbb"
    runs[5].prompt = "000000000000"  # and the prompt before run 5
    for run, verdict in zip(runs, ["pass", "fail", "pass", "warn", None, "skip"], strict=True):
        run.verdict = verdict
    page.open(make_payload(ids, runs))
    chart = "document.querySelector('#panel-time svg.time-chart')"
    points = page.run(
        f"return Array.from({chart}.querySelectorAll('.point[data-column=\"{ADAPTER}\"]'))"
        ".map(p => Number(p.dataset.run))"
    )
    assert points == [0, 1, 3, 4, 5]
    assert page.run(f"return {chart}.querySelectorAll('.point').length") == 10  # base and adapter
    assert page.run(
        f"return Array.from({chart}.querySelectorAll('.break')).map(b => Number(b.dataset.run))"
    ) == [3, 5]
    titles = page.run(f"return Array.from({chart}.querySelectorAll('.break title')).map(t => t.textContent)")
    assert titles == ["benchmark file changed between #2 and #4", "prompt changed between #5 and #6"]
    # Segments are not joined across a break: one line through runs 0-1, one through 3-4; run 5 stands alone.
    lines = page.run(
        f"return Array.from({chart}.querySelectorAll('polyline.line.c1'))"
        ".map(l => l.getAttribute('points').split(' ').length)"
    )
    assert lines == [2, 2]
    verdicts = page.run(
        f"return Array.from({chart}.querySelectorAll('.verdict'))"
        ".map(v => [Number(v.dataset.run), v.getAttribute('class')])"
    )
    assert verdicts == [
        [0, "verdict verdict-pass"],
        [1, "verdict verdict-fail"],
        [3, "verdict verdict-warn"],
        [5, "verdict verdict-skip"],
    ]
    table = page.run(
        "return Array.from(document.querySelectorAll('#panel-time .time-table tbody tr'))"
        ".map(r => Array.from(r.cells).map(c => c.textContent))"
    )
    assert [r[0].split()[0] for r in table] == ["#1", "#2", "#4", "#5", "#6"]
    assert table[2][2:] == [
        "0.000 [0.000, 0.100]",
        "1.000 [0.900, 1.000]",
        "! warn",
        "benchmark file changed",
    ]
    assert page.errors() == []


@pytest.mark.slow
@needs_browser
def test_a_row_across_runs_has_one_line_per_run(page: Page) -> None:
    ids = ["r1", "r2"]
    runs = [Run(both([(f"out {n}", float(n % 2)), ("r2 out", 1.0)])) for n in range(5)]
    runs[2].complete = False
    runs[3].cells[ADAPTER][0] = (None, None)  # the row errored in run 3
    runs[3].errors = {"r1": "timeout"}
    page.open(make_payload(ids, runs, default_pair=[1, 3]))
    page.tab("row")
    lines = "return Array.from(document.querySelectorAll('#panel-row .row-table tbody tr'))"
    got = page.run(
        lines
        + ".map(r => [Number(r.dataset.run), r.className, r.cells[3].textContent, r.cells[5].textContent])"
    )
    assert got == [
        [0, "row-unchanged", "base", "out 0"],
        [1, "row-improved changed", "base", "out 1"],
        [2, "row-regressed changed", "base", "out 2"],
        [3, "row-unchanged", "base", "error: timeout"],
        [4, "row-unchanged changed", "base", "out 4"],
    ]
    assert "partial" in page.run(lines + "[2].cells[2].textContent")
    page.type_in("r-id", "r2")
    assert page.run("return document.querySelector('#panel-row .row-history').dataset.id") == "r2"
    assert page.run(lines + ".length") == 5
    # From the two-runs view (runs #1 and #2: row r1 errored in #4), a row's id opens its history.
    page.tab("pair")
    assert page.run(
        "return [document.getElementById('p-a').value, document.getElementById('p-b').value]"
    ) == [
        "1",
        "3",
    ]
    page.choose("p-a", 0)
    page.choose("p-b", 1)
    page.run("document.querySelector('#panel-pair tr[data-id=\"r1\"] button.link').click()")
    assert page.run("return document.getElementById('tab-row').getAttribute('aria-selected')") == "true"
    assert page.run("return document.querySelector('#panel-row .row-history').dataset.id") == "r1"
    assert page.errors() == []


@pytest.mark.slow
@needs_browser
def test_tabs_are_keyboard_usable(page: Page) -> None:
    page.open(pair_history()[1])
    visible = "return ['time', 'pair', 'row'].filter(k => !document.getElementById('panel-' + k).hidden)"
    active = "return document.activeElement.id"
    page.run("document.activeElement.blur()")
    page.keys("Tab")
    assert page.run(active) == "tab-time"
    page.keys("ArrowRight")  # moves the focus; Enter shows the view (manual activation)
    assert (page.run(active), page.run(visible)) == ("tab-pair", ["time"])
    assert page.run("return document.getElementById('panel-pair').childElementCount") == 0  # not built yet
    page.keys("Enter")
    assert page.run(visible) == ["pair"]
    assert page.run("return document.getElementById('tab-pair').getAttribute('aria-selected')") == "true"
    assert page.run(ROWS_OF + ".length") == 7
    page.keys("ArrowRight", "Space")
    assert (page.run(active), page.run(visible)) == ("tab-row", ["row"])
    page.keys("ArrowRight", "Enter")  # wraps around
    assert page.run(visible) == ["time"]
    page.keys("ArrowLeft", "Enter")
    assert page.run(visible) == ["row"]
    page.keys("Home", "Enter")
    assert page.run(visible) == ["time"]
    assert page.run("return document.querySelectorAll('[role=tab][tabindex=\"0\"]').length") == 1
    assert page.errors() == []


def big_payload(n_runs: int, n_rows: int) -> dict[str, Any]:
    """A history of n_runs x n_rows, two columns, short outputs; built directly (Run objects are slow)."""
    outputs = [f"2026-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29, 3)]
    rng = random.Random(5)
    ids = [f"row-{i:05d}" for i in range(n_rows)]
    runs: list[dict[str, Any]] = []
    cells: dict[str, dict[str, list[float | int]]] = {}
    for r in range(n_runs):
        # strings: outputs first, so an output's string index is its position in `outputs`.
        flat: dict[str, list[float | int]] = {BASE: [], ADAPTER: []}
        for _ in range(n_rows):
            for column, p in ((BASE, 0.3), (ADAPTER, 0.8)):
                good = rng.random() < p
                flat[column] += [rng.randrange(len(outputs)), 1.0 if good else 0.0]
        cells[str(r)] = flat
        scores = {c: _stats(flat[c][1::2]) for c in flat}
        runs.append(
            {
                "name": f"run-{r:04d}.json",
                "time": None,
                "label": f"{ADAPTER} 0.{r}",
                "identity": f"adapter:{ADAPTER}",
                "complete": r % 50 != 7,
                "reason": None,
                "columns": [BASE, ADAPTER],
                "evaluated": ADAPTER,
                "benchmarks": {
                    BENCH: {
                        "hash": "sha256:" + ("a" if r < 250 else "b"),
                        "prompt": None,
                        "n": n_rows,
                        "scores": scores,
                        "no_regression": {"status": "pass", "message": "ok"},
                    }
                },
            }
        )
    strings = outputs + [f"input {i}" for i in ids]
    return {
        "version": 1,
        "generated": "2026-11-29T08:40:00Z",
        "alpha": 0.05,
        "strings": strings,
        "runs": runs,
        "rows": {
            BENCH: {
                "ids": ids,
                "input": [len(outputs) + i for i in range(n_rows)],
                "expected": [0] * n_rows,
                "difficulty": [None] * n_rows,
                "tags": [[] for _ in ids],
            }
        },
        "cells": {BENCH: cells},
        "errors": {},
        "pairs": [],
        "default_pair": [n_runs - 2, n_runs - 1],
    }


@pytest.mark.slow
@needs_browser
def test_a_history_of_500_runs_by_1000_rows_opens(page: Page) -> None:
    payload = big_payload(500, 1000)
    started = time.perf_counter()
    path = page.open(payload)
    opened = time.perf_counter() - started
    times = page.run("return window.llmevalTimes")
    for _ in range(100):
        if page.run("return document.documentElement.dataset.painted") == "yes":
            break
        time.sleep(0.05)
    times = page.run("return window.llmevalTimes")
    complete = sum(1 for r in payload["runs"] if r["complete"])
    assert page.run("return document.querySelectorAll('#panel-time .point').length") == 2 * complete
    assert page.run("return document.querySelectorAll('#panel-time .break').length") == 1
    pair_ms = page.run(
        "const t = performance.now(); document.getElementById('tab-pair').click();"
        "return performance.now() - t"
    )
    assert page.run(ROWS_OF + ".length") == 200  # the first page of the 1000 rows
    page.run("document.querySelector('#panel-pair button.more').click()")
    assert page.run(ROWS_OF + ".length") == 400
    row_ms = page.run(
        "const t = performance.now(); document.getElementById('tab-row').click();return performance.now() - t"
    )
    assert page.run("return document.querySelectorAll('#panel-row .row-table tbody tr').length") == 200
    assert page.errors() == []
    size = path.stat().st_size
    print(
        f"\nviewer 500 runs x 1000 rows x 2 columns: {size / 1e6:.1f} MB; JSON parsed at"
        f" {times['parsed']:.0f} ms, first view drawn at {times['firstView']:.0f} ms, painted at"
        f" {times['painted']:.0f} ms after navigation (navigation returned after {opened:.1f} s);"
        f" two-runs view {pair_ms:.0f} ms, row view {row_ms:.0f} ms"
    )
