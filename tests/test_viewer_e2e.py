"""The history viewer on a history made by real runs of the demo (issue 41): the embedded SmolLM2 with two
versions of the date-iso adapter (the second with its LoRA weights halved), the second run again with a
changed system prompt, and, first, a run of saved predictions holding a hostile output.

The page is opened in headless Chromium: the regressed rows come first and the pair's numbers are the ones
`pytest-llmeval history --diff` prints, the over-time chart has one point per complete run, the hostile
output is text, and each view's screenshot goes to docs/images/ (so the docs show the page as it is).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_report import page_in_chromium
from test_viewer_page import Page, needs_browser

REPO = Path(__file__).resolve().parent.parent
# The docs show the viewer as this test saw it (docs/cli.md#view).
SHOTS = REPO / "docs" / "images"
ROWS = 12
HOSTILE = "</script><script>document.title='pwned'</script><img src=x onerror=alert(1)>"
SYSTEM = "You convert dates. Answer with YYYY-MM-DD and nothing else."

# The real embedded model, end to end: the slow part of the suite (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow


def pytest_run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "--tb=no", "-p", "no:cacheprovider", "-p", "no:randomly"]
    command += [f"--llmeval-cache-dir={folder / 'cache'}", *args]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    return done


def llmeval(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def halved_adapter(source: Path, target: Path, version: str) -> None:
    """A second version of an adapter: its LoRA B matrices halved (a weaker adapter), its version new."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target, ignore=shutil.ignore_patterns("data", "*.py"))
    weights = load_file(target / "adapter_model.safetensors")
    save_file(
        {k: v * 0.5 if "lora_B" in k else v for k, v in weights.items()}, target / "adapter_model.safetensors"
    )
    metadata = json.loads((target / "metadata.json").read_text())
    metadata["version"] = version
    (target / "metadata.json").write_text(json.dumps(metadata, indent=2))


@pytest.fixture(scope="module")
def demo_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("viewer-demo")
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "benchmarks").mkdir()
    rows = (REPO / "benchmarks" / "dates.jsonl").read_text().splitlines()[:ROWS]
    (folder / "benchmarks" / "dates.jsonl").write_text("\n".join(rows) + "\n")
    ids = [json.loads(line)["id"] for line in rows]
    # 1. Saved predictions, one of them hostile: an output is untrusted text.
    predictions = [{"id": i, "prediction": HOSTILE if n == 0 else "2024-01-05"} for n, i in enumerate(ids)]
    (folder / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in predictions))
    pytest_run(folder, "benchmarks/dates.jsonl", "--llmeval-predictions=preds.jsonl")
    # 2. and 3. The demo adapter, then a weaker second version of it.
    shutil.copytree(
        REPO / "adapters" / "date-iso",
        folder / "v1" / "date-iso",
        ignore=shutil.ignore_patterns("data", "*.py"),
    )
    halved_adapter(REPO / "adapters" / "date-iso", folder / "v2" / "date-iso", "1.1.0")
    pytest_run(folder, "--adapter=v1/date-iso", "benchmarks/dates.jsonl")
    pytest_run(folder, "--adapter=v2/date-iso", "benchmarks/dates.jsonl")
    # 4. The second version again, with another system prompt.
    pytest_run(folder, "--adapter=v2/date-iso", "benchmarks/dates.jsonl", f"--llmeval-system-prompt={SYSTEM}")
    assert len(list((folder / ".llmeval" / "history").glob("*.json"))) == 4
    return folder


def payload_of(page: Path) -> dict[str, Any]:
    found = re.search(
        r'<script type="application/json" id="llmeval-data">(.*?)</script>', page.read_text(), re.S
    )
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def test_the_viewer_pairs_runs_as_history_diff_does(demo_history: Path) -> None:
    written = llmeval(demo_history, "view", ".llmeval/history", "--out=history.html", "--pair", "2", "3")
    assert written.returncode == 0, written.stdout + written.stderr
    payload = payload_of(demo_history / "history.html")
    runs = payload["runs"]
    assert [r["label"].split()[0] for r in runs][1:] == ["date-iso"] * 3
    # The default pair: the last two complete runs of the newest run's adapter.
    assert payload["default_pair"] == [2, 3]
    # The prompt change is marked on the benchmark of the last run, and nowhere before it.
    prompts = [r["benchmarks"]["benchmarks/dates.jsonl"]["prompt"] for r in runs[1:]]
    assert prompts[0] == prompts[1] != prompts[2]
    for a, b in ((1, 2), (2, 3)):
        diff = llmeval(demo_history, "history", "--diff", str(a + 1), str(b + 1))
        assert diff.returncode == 0, diff.stderr
        shown = next(line for line in diff.stdout.splitlines() if "B vs A on" in line)
        pair = next(p for p in payload["pairs"] if (p["a"], p["b"]) == (a, b))
        assert shown.endswith(pair["text"]), (shown, pair)
        assert f"B vs A on {pair['n']} shared rows" in shown


@needs_browser
def test_the_demo_history_in_chromium(demo_history: Path, tmp_path: Path) -> None:
    page_file = demo_history / "history.html"
    written = llmeval(demo_history, "view", ".llmeval/history", f"--out={page_file}")
    assert written.returncode == 0, written.stdout + written.stderr
    payload = payload_of(page_file)
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title>", encoding="utf-8")
    with page_in_chromium(blank, tmp_path / "profile") as web:
        web.call("POST", f"/session/{web.session}/window/rect", {"width": 1400, "height": 1000})
        page = Page(web, tmp_path)
        page.goto(page_file)
        # Over time: the adapter's series (the newest run's), one point per complete run in each column.
        page.tab("time")
        points = page.run(
            "return Array.from(document.querySelectorAll('#panel-time svg.time-chart .point'))"
            ".map(p => [p.dataset.column, Number(p.dataset.run)])"
        )
        columns = payload["runs"][3]["columns"]
        assert columns == ["base", "adapter"]
        assert sorted(points) == sorted([c, r] for c in columns for r in (1, 2, 3))
        # The changed system prompt breaks the series before the last run.
        breaks = page.run(
            "return Array.from(document.querySelectorAll('#panel-time .break'))"
            ".map(b => Number(b.dataset.run))"
        )
        assert breaks == [3]
        page.screenshot(SHOTS / "viewer-over-time.png")
        # Two runs: v1 against v2 (weaker): the regressed rows first, as the cells say, with the pair's
        # numbers as `history --diff` prints them.
        page.tab("pair")
        page.choose("p-a", 1)
        page.choose("p-b", 2)
        kinds = page.run(
            "return Array.from(document.querySelectorAll('#panel-pair .pair-table tbody tr'))"
            ".map(r => [r.dataset.id, r.className])"
        )
        expected = expected_order(payload, 1, 2)
        assert [tuple(k) for k in kinds] == expected
        assert expected[0][1] == "row-regressed", (
            "the weaker adapter regressed no row: the test shows nothing"
        )
        pair = next(p for p in payload["pairs"] if (p["a"], p["b"]) == (1, 2))
        shown = page.run("return document.getElementById('panel-pair').textContent")
        assert f"{pair['difference']:+.3f}" in shown or f"{pair['difference']:.3f}" in shown, shown[:2000]
        page.screenshot(SHOTS / "viewer-two-runs.png")
        # A row across runs: the hostile saved output is text, in its own run's line.
        page.tab("row")
        page.type_in("r-id", "dates-001")
        table = page.run("return document.querySelector('.row-history .row-table').textContent")
        assert HOSTILE in table
        assert page.run("return document.querySelectorAll('.row-history .row-table tbody tr').length") == 4
        assert page.run("return document.title") == "pytest-llmeval history: 4 runs"
        assert page.run("return document.querySelectorAll('img').length") == 0
        page.screenshot(SHOTS / "viewer-row.png")
        assert page.errors() == []


def expected_order(payload: dict[str, Any], a: int, b: int) -> list[tuple[str, str]]:
    """The rows both runs scored in run B's evaluated column: regressed, then improved, then unchanged, each
    in the benchmark's row order (what the page must list)."""
    bench = "benchmarks/dates.jsonl"
    column = payload["runs"][b]["evaluated"]
    ids = payload["rows"][bench]["ids"]
    cells = payload["cells"][bench]
    groups: dict[str, list[tuple[str, str]]] = {"regressed": [], "improved": [], "unchanged": []}
    for position, row_id in enumerate(ids):
        sa = cells[str(a)][column][2 * position + 1]
        sb = cells[str(b)][column][2 * position + 1]
        if sa is None or sb is None:
            continue
        kind = "regressed" if sb < sa else "improved" if sb > sa else "unchanged"
        groups[kind].append((row_id, f"row-{kind}"))
    return groups["regressed"] + groups["improved"] + groups["unchanged"]
