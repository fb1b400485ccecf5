"""The HTML report of a run made in the test, rendered in headless Chromium.

tests/test_report.py renders a frozen, hand-trimmed results file; here the plugin writes the page itself
(--llmeval-html) from a run on the tiny model with an adapter, and the browser (driven through chromedriver,
as test_report.py's table test does) must show every row of that run, as results.json has it, without a
console error, and without running what a row says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row
from test_report import CHROMEDRIVER, CHROMIUM, page_in_chromium

# A prompt and an expected answer that would run script or break the table if they were not escaped.
HOSTILE = "<script>console.error('injected')</script><img src=x onerror=console.error(1)>"
ROWS = [
    row("greet", instruction=HOSTILE, expected="</div></td></tr>&amp; \"quoted\" 'single'", tags=["edge"]),
    row("count", instruction="Count to three.", difficulty="medium"),
    row("colour", instruction="Name a colour.", input="Any colour.", difficulty="hard"),
    row("fruit", instruction="Name a fruit.", difficulty="medium"),
    row(
        "text",
        instruction="Text",
        input="The cat sat on the mat.",
        expected="",
        evaluation_type="perplexity",
        evaluation_config={"threshold": 1e9},
    ),
]

# Per row of the first table: [id, expected, base output, adapter output, result] as the page shows them.
READ_ROWS = """
const table = document.querySelectorAll('table.rows')[0];
return Array.from(table.tBodies[0].rows).filter(r => !r.hidden).map(r => [
  (r.cells[0].querySelector('summary') || r.cells[0]).textContent,
  r.cells[3].textContent, r.cells[4].textContent, r.cells[6].textContent, r.cells[8].textContent.trim()]);
"""


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def shown_output(record: dict[str, Any], who: str) -> str:
    """What the row table shows for one side: the generated text, or what a perplexity row measured."""
    side = record["models"][who]
    if side["output"] is not None:
        return str(side["output"])
    score = side["score"]
    bound = f"(bound {score['max_perplexity']:g})"
    return f"perplexity {score['perplexity']:.2f} over {score['n_tokens']} tokens {bound}"


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="headless Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
)
def test_report_of_a_tiny_model_run_renders_every_row(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, tmp_path: Path
) -> None:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    args = [*model_args(tiny_model, tiny_adapter, gates=True), "--llmeval-min-rows=3"]
    pytester.runpytest(*args, "--llmeval-html=report.html", "--llmeval-domain=bench*")
    doc = json.loads((pytester.path / "results.json").read_text())
    (bench,) = doc["benchmarks"]
    records = sorted(bench["rows"], key=lambda r: r["nodeid"])
    assert len(records) == len(ROWS) and all(
        r["models"]["adapter"]["output"] is not None for r in records[:-1]
    )
    page = pytester.path / "report.html"

    with page_in_chromium(page, tmp_path / "profile") as web:
        assert web.run("return document.documentElement.dataset.js") == "ready"  # the script ran to its end
        assert web.run("return document.scripts.length") == 1  # the page's own; no row's text became one
        assert web.run("return document.images.length") == 0
        assert web.run("return document.querySelector('.toolbar span').textContent") == (
            f"{len(ROWS)} of {len(ROWS)} rows shown"
        )
        # Every row of the run, in results.json's order, with its texts exactly as recorded.
        expected = [
            [
                r["id"],
                r["expected_output"],
                shown_output(r, "base"),
                shown_output(r, "adapter"),
                "✔ pass" if r["passed"] else "✘ fail",
            ]
            for r in records
        ]
        shown = web.run(READ_ROWS)
        assert [s[:2] for s in shown] == [e[:2] for e in expected]
        for got, want in zip(shown, expected, strict=True):
            assert got[2:4] == want[2:4], (got, want)
            assert got[4].startswith(want[4]), (got, want)  # then (better), (regression)... when it changed
        # The prompt, hostile as it is, is shown as text.
        greet = [s[0] for s in shown].index("greet")
        prompt = web.run(
            "return document.querySelectorAll('table.rows')[0].tBodies[0].rows[arguments[0]]"
            ".cells[0].querySelector('div.out').textContent",
            greet,
        )
        assert HOSTILE in prompt
        # The gates of the run are on the page, with their verdicts.
        text = web.run("return document.body.textContent")
        for name, verdict in bench["gates"].items():
            assert name in text, name
            assert verdict["status"] in ("pass", "fail", "warn", "skip")
        logs = web.call("POST", f"/session/{web.session}/se/log", {"type": "browser"})
        assert [entry for entry in logs if entry["level"] in ("SEVERE", "WARNING")] == []
