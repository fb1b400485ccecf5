"""The servers people deploy small models on, as they are (issue 39): llama-cpp-python's server and
llama.cpp's llama-server (both built by `make llama` from the pinned llama-cpp-python sdist) on the embedded
Q4_1 GGUF, and `transformers serve` on its fp32 conversion.

Each runs generated rows; each has its log-likelihood rows refused with the probe's finding, which names what
is wrong with its log-probabilities (none of the three returns usable ones: tests/test_served_loglikelihood.py
has the server that does); each, asked for a model id it does not serve, stops the run in one line (two of
them answer anyway, with the one model they have). Then the LocoLLM question: the demo adapter converted to a
LoRA GGUF by llama.cpp's own converter and served on the 4-bit base by llama-server, beside the same adapter
in fp32 in process, in one run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, jsonl, row
from llama_servers import LlamaServer, convert_lora, need_built, serve_llama_cpp_python, serve_llama_server
from serving import serve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gguf() -> Path:
    from pytest_llmeval.models import embedded_gguf_path

    return embedded_gguf_path()


@pytest.fixture(scope="module")
def fp32() -> Path:
    from pytest_llmeval.models import embedded_model_dir

    return embedded_model_dir()


@pytest.fixture(scope="module")
def llama_cpp_python(gguf: Path) -> Iterator[LlamaServer]:
    need_built()
    with serve_llama_cpp_python(gguf) as server:
        yield server


@pytest.fixture(scope="module")
def llama_server(gguf: Path) -> Iterator[LlamaServer]:
    need_built()
    with serve_llama_server(gguf) as server:
        yield server


@pytest.fixture(scope="module")
def transformers_serve(fp32: Path) -> Iterator[tuple[str, str]]:
    with serve(fp32) as served:
        yield served.only.base_url, served.only.model


def rows() -> list[dict[str, Any]]:
    dates = [json.loads(line) for line in (REPO / "benchmarks/dates.jsonl").read_text().splitlines()[:2]]
    return [
        *dates,
        row("text", input="The quick brown fox jumps over the lazy dog.", evaluation_type="perplexity",
            evaluation_config={"threshold": 1000.0}),
        row("choice", instruction="What is the capital of France?", expected="Paris",
            evaluation_type="multiple_choice", evaluation_config={"choices": ["London", "Paris"]}),
    ]  # fmt: skip


def served_run(pytester: pytest.Pytester, url: str, model: str, *more: str) -> pytest.RunResult:
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    return pytester.runpytest(
        f"--llmeval-endpoint={url}",
        f"--base-model={model}",
        "--llmeval-no-cache",
        "-rs",
        "-k",
        "not gate",
        *more,
    )


# What each server does wrong, as the probe finds it (the skip reason of its log-likelihood rows).
DEFECTS = {
    "llama-cpp-python": "llama-cpp-python 0.3.36 at {url} returns misaligned prompt log-probabilities: "
    "log p(* | 'The capital of France is') is * echoed but * generated",
    "llama-server": "llama-server b* at {url} returns no prompt log-probabilities: echo is ignored: "
    "log-probabilities come back for the generated tokens only",
    "transformers serve": "transformers serve at {url} returns no log-probability for a generated token "
    "(logprobs is ignored)",
}


@pytest.fixture(params=sorted(DEFECTS))
def server(request: pytest.FixtureRequest) -> tuple[str, str, str]:
    """(which, URL, model id) of each real server."""
    which = str(request.param)
    if which == "transformers serve":
        url, model = request.getfixturevalue("transformers_serve")
        return which, url, model
    found: LlamaServer = request.getfixturevalue(which.replace("-", "_"))
    return which, found.base_url, found.model


def test_generated_rows_run_and_log_likelihood_rows_are_refused_with_the_servers_defect(
    pytester: pytest.Pytester, server: tuple[str, str, str]
) -> None:
    which, url, model = server
    result = served_run(pytester, url, model)
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 2 and outcomes.get("passed", 0) + outcomes.get("failed", 0) == 2, outcomes
    reason = DEFECTS[which].format(url=url)
    result.stdout.fnmatch_lines(
        [f"*bench.jsonl:3: perplexity rows need the log-likelihoods of base ({model}): {reason}"]
    )
    doc = json.loads((pytester.path / "results.json").read_text())
    scored = [r["id"] for b in doc["benchmarks"] for r in b["rows"] if r["models"]]
    assert scored == ["dates-001", "dates-002"]
    finding = doc["inference_config"]["endpoint"]["models"]["base"]["loglikelihood"]
    assert (
        finding["ok"] is False
        and finding["reason"] == result.stdout.str().split(f"({model}): ")[1].splitlines()[0]
    )


def test_an_id_the_server_does_not_serve_stops_the_run(
    pytester: pytest.Pytester, server: tuple[str, str, str]
) -> None:
    _, url, model = server
    result = served_run(pytester, url, "gpt-4o")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # One line naming the URL, the id and what the server does serve: llama-cpp-python and llama-server
    # answer "gpt-4o" with their one model; transformers serve, pinned, refuses it.
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.lines
    assert f"endpoint {url} model 'gpt-4o': not served there" in errors[0] and model in errors[0]
    assert not (pytester.path / "results.json").exists()


@pytest.fixture(scope="module")
def deployed(gguf: Path, fp32: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The demo adapter as LocoLLM ships one: a LoRA GGUF (llama.cpp's convert_lora_to_gguf.py) on the 4-bit
    base, served by llama-server."""
    need_built()
    lora = convert_lora(REPO / "adapters/date-iso", fp32, tmp_path_factory.mktemp("lora") / "date-iso.gguf")
    with serve_llama_server(gguf, alias="date-iso-q4", lora=lora) as server:
        yield server


def test_the_adapter_as_deployed_beside_the_adapter_in_process(
    pytester: pytest.Pytester, deployed: LlamaServer
) -> None:
    """One run: the base and the date-iso adapter in fp32 in process, and the same adapter on the Q4_1 base
    behind llama-server. The paired comparison of the two adapters is in results.json; the perplexity rows are
    refused with llama-server's defect; quantization comes from the GGUF file's own metadata."""
    for name in ("dates.jsonl", "japanese_text.jsonl"):
        (pytester.path / name).write_text((REPO / "benchmarks" / name).read_text())
    result = pytester.runpytest(
        f"--adapter={REPO / 'adapters/date-iso'}",
        f"--llmeval-model=q4=date-iso-q4@{deployed.base_url}",
        "--llmeval-dtype=float32",
        "-rs",
        "dates.jsonl",
        "japanese_text.jsonl",
    )
    assert result.ret in (0, 1), result.stdout.str()
    doc = json.loads((pytester.path / "results.json").read_text())  # schema-checked by conftest.py
    dates = next(b for b in doc["benchmarks"] if b["benchmark_file"] == "dates.jsonl")
    assert all(r["error"] is None and set(r["models"]) == {"base", "adapter", "q4"} for r in dates["rows"])
    japanese = next(b for b in doc["benchmarks"] if b["benchmark_file"] == "japanese_text.jsonl")
    assert all(
        "llama-server b" in r["skipped"] and "echo is ignored" in r["skipped"] for r in japanese["rows"]
    )
    pair = next(
        c
        for c in doc["comparisons"]
        if c["benchmark"] == "dates.jsonl" and {c["model"], c["against"]} == {"q4", "adapter"}
    )
    assert pair["statistics"]["n"] == 60 and pair["p_value"] is not None
    entry = next(m for m in doc["models"] if m["column"] == "q4")
    assert entry["backend"] == "endpoint" and entry["served"]["quantization"] == "GGUF Q4_1"
    assert entry["served"]["server"].startswith("llama-server b")
    # The figures BENCHMARKS.md records (tests/test_real_servers.py -s prints them).
    means = {
        c: sum(r["models"][c]["score"]["value"] for r in dates["rows"]) / 60
        for c in ("base", "adapter", "q4")
    }
    print(f"\ndates.jsonl: {json.dumps(means)}; q4 vs adapter: {json.dumps(pair)}")
