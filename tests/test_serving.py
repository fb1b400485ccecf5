"""Endpoint parity: a real `transformers serve` answers benchmark rows as in-process greedy generation does.

Why they agree (read in transformers/cli/serving/, then checked here): the server renders the model's own
chat template with add_generation_prompt=True and tokenizes it with add_special_tokens=False, as
generation.build_prompt + generation.generate do; temperature=0 sets do_sample=False (greedy); max_tokens
becomes max_new_tokens; it stops on generation_config.eos_token_id (<|im_end|> for SmolLM2, also the
tokenizer's EOS, which generate() stops on); and it decodes with skip_special_tokens=True. One difference:
the server does not strip the text, generate() does; so an endpoint's text is compared after .strip().
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai.types.chat import ChatCompletion
from serving import Endpoint, Served, serve

from pytest_llmeval import generation, models
from pytest_llmeval.benchmark import Case
from pytest_llmeval.scorers import SCORERS, read_benchmark

REPO = Path(__file__).resolve().parent.parent

# The real embedded model behind a real server: slow (`make test-fast` leaves it out).
pytestmark = pytest.mark.slow

# What the plugin falls back to when a row names no max_new_tokens, kept small to bound the test's time.
DEFAULT_MAX_TOKENS = 64


def generated_cases(path: Path) -> list[Case]:
    """The rows of `path` that are answered by generating text (not perplexity or multiple choice)."""
    return [c for c in read_benchmark(path).cases if SCORERS[c.evaluation_type].measure in (None, "judge")]


# ~20 rows per model keeps the test near a minute: every 4th date (one of each input format, spread over
# the file) and the first sentiment rows.
CASES: list[Case] = [
    *itertools.islice(generated_cases(REPO / "benchmarks/dates.jsonl"), 0, None, 4),
    *generated_cases(REPO / "benchmarks/sentiment.jsonl")[:5],
]


def limit(case: Case) -> int:
    return int(case.evaluation_config.get("max_new_tokens", DEFAULT_MAX_TOKENS))


@pytest.fixture(scope="module")
def folders(merged_date_iso: Path) -> dict[str, Path]:
    """The embedded base, and date-iso merged into it: two folders whose answers to dates differ."""
    return {"embedded": models.embedded_model_dir(), "merged": merged_date_iso}


@pytest.fixture(scope="module")
def served(folders: dict[str, Path]) -> Iterator[Served]:
    with serve(list(folders.values())) as running:
        yield running


def ask(endpoint: Endpoint, case: Case) -> ChatCompletion:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key="EMPTY", max_retries=0, timeout=120)
    return client.chat.completions.create(
        model=endpoint.model,
        messages=[{"role": "user", "content": generation.user_message(case.instruction, case.input)}],
        temperature=0,
        top_p=1,
        max_tokens=limit(case),
    )


def in_process(folder: Path, cases: list[Case]) -> list[str]:
    """Greedy completions the way the plugin makes them, from the same folder, float32 on the CPU."""
    loaded = models.load(models.ModelSpec(base_model=str(folder), device="cpu", dtype="float32"))
    prompts = [generation.build_prompt(loaded.tokenizer, c.instruction, c.input) for c in cases]
    limits = [limit(c) for c in cases]
    return generation.generate(loaded.model, loaded.tokenizer, prompts, max_new_tokens=limits, batch_size=8)


@pytest.mark.parametrize("name", ["embedded", "merged"])
def test_served_text_equals_in_process_greedy_generation(
    name: str, folders: dict[str, Path], served: Served
) -> None:
    endpoint = served[folders[name]]
    replies = [ask(endpoint, case) for case in CASES]
    expected = in_process(folders[name], CASES)
    for case, reply in zip(CASES, replies, strict=True):
        assert reply.model == endpoint.model
        assert reply.usage is not None and reply.usage.completion_tokens <= limit(case)
        # "length" exactly when the row ran into its limit: max_tokens counts new tokens, like max_new_tokens.
        assert (reply.choices[0].finish_reason == "length") == (reply.usage.completion_tokens == limit(case))
    texts = [(r.choices[0].message.content or "").strip() for r in replies]
    differ = [(c.id, s, e) for c, s, e in zip(CASES, texts, expected, strict=True) if s != e]
    assert not differ, "served != in-process:\n" + "\n".join(f"{i}: {s!r} != {e!r}" for i, s, e in differ)
    if name == "merged":
        # Two servers, two models: the base answers the first date with a time appended, date-iso does not.
        base_reply = ask(served[folders["embedded"]], CASES[0]).choices[0].message.content or ""
        assert texts[0] != base_reply.strip()


def test_a_pinned_server_lists_and_answers_only_its_folder(folders: dict[str, Path], served: Served) -> None:
    endpoint = served[folders["embedded"]]
    client = openai.OpenAI(base_url=endpoint.base_url, api_key="EMPTY", max_retries=0)
    assert [m.id for m in client.models.list()] == [endpoint.model]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model=str(folders["merged"]), messages=[{"role": "user", "content": "hi"}], max_tokens=1
        )
    # FastAPI's {"detail": ...}, not OpenAI's {"error": ...}: the client's message is just "Error code: 400".
    body = refused.value.body
    assert isinstance(body, dict) and "is pinned to" in body["detail"]
