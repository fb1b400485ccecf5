"""The real servers people deploy small GGUF models on (issue 39): llama.cpp's llama-server and
llama-cpp-python's server, as `make llama` builds them, on the embedded GGUF and with a demo adapter
converted by llama.cpp's own convert_lora_to_gguf.py. Skipped, saying so, where .llama/ is not built (failed
instead under LLMEVAL_REQUIRE_LLAMA=1)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import llama_servers
import openai
import pytest
from helpers import REPO
from llama_servers import (
    LLAMA_CPP_PYTHON_VERSION,
    LlamaServer,
    ServerStartError,
    convert_lora,
    need_built,
    serve_llama_cpp_python,
    serve_llama_server,
)

from pytest_llmeval.generation import user_message
from pytest_llmeval.models import embedded_gguf_path, embedded_model_dir

# Every test here needs `make llama`'s build: make test builds it, make test-fast leaves them out.
pytestmark = pytest.mark.slow


class _Serve(Protocol):
    def __call__(self, gguf: Path, *, lora: Path | None = None) -> AbstractContextManager[LlamaServer]: ...


SERVE: dict[str, _Serve] = {"llama-server": serve_llama_server, "llama-cpp-python": serve_llama_cpp_python}


def _date_row(row_id: str) -> dict[str, Any]:
    """One row of the shipped dates benchmark, by id."""
    for line in (REPO / "benchmarks/dates.jsonl").read_text(encoding="utf-8").splitlines():
        row: dict[str, Any] = json.loads(line)
        if row["id"] == row_id:
            return row
    raise KeyError(row_id)


# "17/05/89 (UK format)" -> 1989-05-17. Measured on both servers: the base echoes the input back, the date-iso
# LoRA answers exactly (it gets 11 of the first 12 rows right where the base gets 1).
DATE_ROW = _date_row("dates-004")


@pytest.fixture(scope="module")
def gguf() -> Path:
    need_built()
    return embedded_gguf_path()


@pytest.fixture(scope="module", params=sorted(SERVE))
def kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture(scope="module")
def server(kind: str, gguf: Path) -> Iterator[LlamaServer]:
    """The base GGUF, served by `kind`: one process for every test of that kind."""
    with SERVE[kind](gguf) as running:
        yield running


@pytest.fixture(scope="module")
def date_lora(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """adapters/date-iso (peft, on the fp32 folder) as a LoRA GGUF, converted once for both servers."""
    out = tmp_path_factory.mktemp("date-lora") / "date-iso.gguf"
    return convert_lora(REPO / "adapters/date-iso", embedded_model_dir(), out)


def _client(server: LlamaServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def _greedy_answer(server: LlamaServer, content: str, max_tokens: int = 16) -> str:
    reply = _client(server).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": content}],
        max_tokens=max_tokens,
        temperature=0,
    )
    return reply.choices[0].message.content or ""


def test_lists_its_alias_and_says_what_it_is(kind: str, server: LlamaServer) -> None:
    with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
        listing = json.loads(response.read())
    assert [model["id"] for model in listing["data"]] == ["smol"] == [server.model]
    if kind == "llama-cpp-python":
        assert server.name == f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}"
    else:
        # /props build_info: "b<build number>-<commit>" of the vendored llama.cpp.
        assert server.name.startswith("llama-server b") and "unknown" not in server.name


def test_answers_a_greedy_chat_completion(server: LlamaServer) -> None:
    reply = _client(server).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=8,
        temperature=0,
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 8
    assert reply.choices[0].message.content
    # Greedy: the same request gets the same answer.
    assert (
        _greedy_answer(server, "What is the capital of France?", max_tokens=8)
        == reply.choices[0].message.content
    )


def test_the_converted_date_lora_is_applied(
    kind: str, server: LlamaServer, gguf: Path, date_lora: Path
) -> None:
    content = user_message(DATE_ROW["instruction"], DATE_ROW["input"])
    base = _greedy_answer(server, content)
    with SERVE[kind](gguf, lora=date_lora) as adapted:
        tuned = _greedy_answer(adapted, content)
    assert tuned.strip() == DATE_ROW["expected_output"], (base, tuned)
    assert base.strip() != tuned.strip()


def test_a_server_that_does_not_come_up_says_why(kind: str, gguf: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file at all")
    with pytest.raises(ServerStartError) as raised, SERVE[kind](broken):
        pass
    message = str(raised.value)
    assert f"{kind} exited with status" in message
    assert str(broken) in message.split("log tail:", 1)[1], "the server's own log is quoted"


def test_a_missing_build_skips_or_fails_as_required(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(llama_servers, "STAMP", tmp_path / "never-built")
    monkeypatch.delenv(llama_servers.REQUIRE_ENV, raising=False)
    # BaseException: a skip where a failure is due (or the other way round) must fail this test, not skip it.
    with pytest.raises(BaseException, match="run `make llama`") as skipped:
        need_built()
    assert skipped.type is pytest.skip.Exception
    monkeypatch.setenv(llama_servers.REQUIRE_ENV, "1")
    with pytest.raises(BaseException, match="run `make llama`") as failed:
        need_built()
    assert failed.type is pytest.fail.Exception
