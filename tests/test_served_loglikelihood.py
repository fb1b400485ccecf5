"""Log-likelihood rows over a server that returns correct log-probabilities, beside the same weights in
process, and over one that returns them shifted by a position (issue 39).

No server that runs here returns correct prompt log-probabilities (tests/test_real_servers.py), so the
correct one is tests/vllm_format.py: vLLM's documented response format, every number computed by the real
SmolLM2 in float32 in this process. One run puts the base evaluated in process beside the same weights served
(`--llmeval-model=served=smol@URL`): each perplexity and multiple-choice row's NLL must be the same in both
columns to 1e-4 nats. The same run against a copy of the server that scores each echoed token against the
distribution after it (llama-cpp-python 0.3.36's defect) must skip those rows with the probe's finding, and
still run the generated rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vllm_format import VllmFormat, serve_vllm_format

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


def rows() -> list[dict[str, Any]]:
    """The shipped Japanese perplexity rows (multi-byte text: tokens that are parts of one character), an
    English text long enough for several windows, multiple-choice rows, and one generated row."""
    shipped = [
        json.loads(line) for line in (REPO / "benchmarks/japanese_text.jsonl").read_text().splitlines()
    ]
    out = shipped[:3]
    out.append(
        {
            "id": "windows",
            "instruction": "",
            "input": "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat.",
            "expected_output": "",
            "evaluation_type": "perplexity",
            # Windows of 12 tokens every 5: the served text is cut into windows of the server's own token ids.
            "evaluation_config": {"threshold": 1000.0, "max_length": 12, "stride": 5},
        }
    )
    for i, (question, answer, options) in enumerate(
        [
            (
                "Is the sentence 'I loved this film' positive or negative?",
                "positive",
                ["positive", "negative"],
            ),
            ("What is the capital of France?", "Paris", ["London", "Paris", "Berlin"]),
            ("Which is a fruit: apple or car?", "apple", ["apple", "car"]),
        ]
    ):
        out.append(
            {
                "id": f"choice-{i}",
                "instruction": question,
                "input": "",
                "expected_output": answer,
                "evaluation_type": "multiple_choice",
                "evaluation_config": {"choices": options},
            }
        )
    out.append(
        {
            "id": "say",
            "instruction": "Reply with the single word: yes",
            "input": "",
            "expected_output": "yes",
            "evaluation_type": "exact_match",
            "evaluation_config": {"normalize": True, "max_new_tokens": 4},
        }
    )
    for row in out:
        row.setdefault("difficulty", "medium")
        row.setdefault("tags", [])
    return out


@pytest.fixture(scope="module")
def folder() -> Path:
    from pytest_llmeval.models import embedded_model_dir

    return embedded_model_dir()


@pytest.fixture(scope="module")
def correct(folder: Path) -> Iterator[VllmFormat]:
    # add_bos: as vLLM serves a model whose tokenizer adds a BOS; the in-process perplexity puts SmolLM2's
    # BOS before a text, so the two compute the same quantity (without it, see the test at the end).
    with serve_vllm_format(folder, add_bos=True) as served:
        yield served


def run(pytester: pytest.Pytester, url: str, *more: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makefile(".jsonl", bench="\n".join(json.dumps(r, ensure_ascii=False) for r in rows()))
    result = pytester.runpytest(
        f"--llmeval-model=served=smol@{url}",
        "--llmeval-dtype=float32",
        "--llmeval-no-cache",
        "-rs",
        "-p",
        "no:randomly",
        *more,
        "bench.jsonl",
    )
    return result, json.loads((pytester.path / "results.json").read_text())


def measured(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per row id, each column's score, which holds its measurement."""
    out: dict[str, dict[str, Any]] = {}
    for bench in doc["benchmarks"]:
        for row in bench["rows"]:
            out[row["id"]] = {column: side["score"] for column, side in row["models"].items()}
    return out


def close(a: Any, b: Any, tolerance: float = 1e-4) -> bool:
    """Two JSON values equal but for floats within `tolerance`."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= tolerance
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tolerance) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tolerance) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_served_log_likelihoods_equal_the_in_process_ones(
    pytester: pytest.Pytester, correct: VllmFormat
) -> None:
    result, doc = run(pytester, correct.base_url)
    assert result.ret in (0, 1), (
        result.stdout.str()
    )  # 1: rows the model gets wrong, and the small file's gates
    assert [r["id"] for b in doc["benchmarks"] for r in b["rows"] if r["error"] is not None] == []
    found = measured(doc)
    assert len(found) == 8
    for row_id, by_column in found.items():
        if row_id == "say":
            continue
        local, served = by_column["base"], by_column["served"]
        if row_id.startswith("choice"):
            assert [c["text"] for c in served["choices"]] == [c["text"] for c in local["choices"]]
            for here, there in zip(local["choices"], served["choices"], strict=True):
                assert there["nll"] == pytest.approx(here["nll"], abs=1e-4), (row_id, here, there)
                assert there["n_tokens"] == here["n_tokens"]
        else:
            assert served["nll"] == pytest.approx(local["nll"], abs=1e-4), (row_id, local, served)
            assert served["n_tokens"] == local["n_tokens"]
            assert served["first_token"] == "scored after the server's BOS"
    assert found["windows"]["served"]["n_tokens"] > 12  # several windows, each of the server's ids
    # The probe's findings are the served column's provenance.
    entry = next(m for m in doc["models"] if m["column"] == "served")
    assert entry["backend"] == "endpoint"
    assert entry["served"]["server"] == "vLLM 0.0.0+llmeval-test-vllm-format"
    assert entry["served"]["loglikelihood"]["ok"] is True
    assert entry["served"]["prompt_logprobs"] is True
    # Under xdist, each worker probes and measures on its own: the same numbers in the same record.
    # (--llmeval-overwrite: a -k run keeps the complete results.json of the run above; before issue 53 that
    # document, refused by the reader for its `"scripts": null`, was not seen as a complete run at all.)
    _, parallel = run(
        pytester, correct.base_url, "-n", "2", "-k", "choice-1 or ja-001 or windows", "--llmeval-overwrite"
    )
    again = measured(parallel)
    assert set(again) == {"choice-1", "ja-001", "windows"}
    # The same numbers; the in-process ones may differ in the last digits (other rows, other batches).
    assert close(again, {row_id: found[row_id] for row_id in again})
    assert (
        next(m for m in parallel["models"] if m["column"] == "served")["served"]["loglikelihood"]
        == (entry["served"]["loglikelihood"])
    )


def test_a_server_whose_log_probabilities_are_shifted_is_caught(
    pytester: pytest.Pytester, folder: Path
) -> None:
    with serve_vllm_format(folder, misaligned=True) as shifted:
        result, doc = run(pytester, shifted.base_url, "-k", "not gate")
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 7 and outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1
    result.stdout.fnmatch_lines(
        [
            "*bench.jsonl:1: perplexity rows need the log-likelihoods of served (smol): vLLM "
            "0.0.0+llmeval-test-vllm-format at http://127.0.0.1:*/v1 returns misaligned prompt "
            "log-probabilities: log p(* | 'The capital of France is') is * echoed but * generated",
        ]
    )
    entry = next(m for m in doc["models"] if m["column"] == "served")
    finding = entry["served"]["loglikelihood"]
    assert finding["ok"] is False and abs(finding["echoed_logprob"] - finding["generated_logprob"]) > 1.0
    # The generated row ran in both columns; every measured row is recorded as skipped, with the reason.
    assert {row_id for row_id, by_column in measured(doc).items() if by_column} == {"say"}
    skipped = [r for b in doc["benchmarks"] for r in b["rows"] if r["skipped"]]
    assert len(skipped) == 7 and all(
        "returns misaligned prompt log-probabilities" in r["skipped"] for r in skipped
    )


def test_without_the_servers_bos_the_first_token_is_not_scored(
    pytester: pytest.Pytester, folder: Path
) -> None:
    """SmolLM2's tokenizer adds no BOS, so vLLM serving it scores a text from its second token: the record
    says so, one token fewer than in process (where the BOS is put before the text)."""
    with serve_vllm_format(folder) as plain:
        _, doc = run(pytester, plain.base_url, "-k", "ja-001")
    found = measured(doc)["ja-001"]
    assert found["served"]["first_token"] == "not scored (the server adds no BOS)"
    assert found["served"]["n_tokens"] == found["base"]["n_tokens"] - 1
