"""The plugin over a real OpenAI-compatible server: `transformers serve` on the embedded model and on the
demo adapter merged into it, against the same rows generated in-process (greedy, float32, CPU).

One unpinned server process serves both folders (tests/serving.py): the plugin asks every URL for every
model id, as it would ask one vLLM serving a base and its LoRA adapters. Served outputs must equal the
in-process ones row for row, serially and under -n 2, and a re-run must be served from the generation cache
without asking the server again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from serving import Unpinned, serve_unpinned

from pytest_llmeval import models
from pytest_llmeval.scorers import SCORERS

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]


def demo_rows() -> str:
    """Every fourth generated row of the demo's dates and the first sentiment rows (a minute of serving)."""
    lines: list[str] = []
    for name, step, count in (("dates", 4, 15), ("sentiment", 1, 5)):
        rows = [
            r
            for r in map(json.loads, (REPO / "benchmarks" / f"{name}.jsonl").read_text().splitlines())
            if SCORERS[r["evaluation_type"]].measure is None
        ]
        lines += [json.dumps(r) for r in rows[::step][:count]]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def folders(merged_date_iso: Path) -> dict[str, Path]:
    return {"base": models.embedded_model_dir(), "merged": merged_date_iso}


@pytest.fixture(scope="module")
def server(folders: dict[str, Path]) -> Iterator[Unpinned]:
    with serve_unpinned(list(folders.values())) as endpoint:
        yield endpoint


def outputs(doc: dict[str, Any], columns: dict[str, str]) -> dict[str, dict[str, str]]:
    """Row id -> {our name: output} for the columns named (results.json column -> our name)."""
    return {
        r["id"]: {ours: r["models"][column]["output"] for column, ours in columns.items()}
        for b in doc["benchmarks"]
        for r in b["rows"]
    }


def test_served_outputs_equal_in_process_outputs(
    pytester: pytest.Pytester, folders: dict[str, Path], server: Unpinned
) -> None:
    pytester.makefile(".jsonl", demo=demo_rows())
    common = ["-m", "not gate", "-p", "no:cacheprovider", "demo.jsonl"]
    local = pytester.runpytest(
        f"--base-model={folders['base']}",
        f"--llmeval-model=merged={folders['merged']}",
        "--llmeval-no-cache",
        "--llmeval-results=local.json",
        *common,
    )
    assert local.ret in (0, 1)
    expected = outputs(
        json.loads((pytester.path / "local.json").read_text()), {"base": "base", "merged": "merged"}
    )
    served_args = [
        f"--llmeval-endpoint={server.base_url}",
        f"--base-model={folders['base']}",
        f"--adapter={folders['merged']}",
        "--llmeval-cache-dir=gen-cache",
        "--llmeval-concurrency=4",
    ]
    for workers, name in (((), "served.json"), (("-n", "2"), "served-xdist.json")):
        result = pytester.runpytest_subprocess(*served_args, *workers, f"--llmeval-results={name}", *common)
        assert result.ret in (0, 1), result.stdout.str()[-3000:]
        doc = json.loads((pytester.path / name).read_text())
        assert outputs(doc, {"base": "base", "adapter": "merged"}) == expected
        served = doc["inference_config"]["endpoint"]["models"]
        assert served["base"]["model"] == str(folders["base"])
        assert served["adapter"]["reported_model"] == str(folders["merged"])
    # The serial run generated every row; the -n 2 run found them all in the cache.
    cache = doc["inference_config"]["cache"]
    assert cache["misses"]["base"] == 0 and cache["hits"]["base"] == 2 * len(expected)
    # The adapter (date-iso, merged) answers the dates differently from the base: two models, not one.
    assert any(o["base"] != o["merged"] for o in expected.values())
