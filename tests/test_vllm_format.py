"""tests/vllm_format.py, the vLLM-format server the endpoint client is tested against: its numbers are the
embedded model's own (checked against a forward pass made here, independently of the server), its shapes
are what the `openai` client parses, and its `misaligned` mode has exactly llama-cpp-python's defect."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import torch
from helpers import REPO
from openai.types.chat import ChatCompletionMessageParam
from vllm_format import VllmFormat, serve_vllm_format

from pytest_llmeval.models import embedded_model_dir

pytestmark = pytest.mark.slow  # the real embedded model, loaded by each server and once more here

TEXT = "The quick brown fox jumps over the lazy dog, and the dog sleeps on."
# A prompt whose greedy next token is clearly likely (" Paris", about -0.26 nats): scored against the
# distribution after it instead, the same token is far less likely.
PROBE = "The capital of France is"
TOLERANCE = 1e-5


class Reference:
    """The embedded model loaded here, apart from the server's copy: what the server's numbers must equal."""

    def __init__(self, folder: Path, adapter: Path | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        self.model = model.eval()

    def ids(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer(text, add_special_tokens=True).input_ids]

    def log_probs(self, ids: list[int]) -> torch.Tensor:
        """(T, V): row t is log p(next token | ids[: t + 1])."""
        with torch.inference_mode():
            return torch.log_softmax(self.model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)

    def greedy(self, ids: list[int], max_new_tokens: int) -> list[int]:
        inputs = torch.tensor([ids])
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.eos_token_id,
            )
        return [int(t) for t in out[0, len(ids) :]]

    def decode_one(self, token_id: int) -> str:
        return str(self.tokenizer.decode([token_id]))


@pytest.fixture(scope="module")
def folder() -> Path:
    return embedded_model_dir()


@pytest.fixture(scope="module")
def reference(folder: Path) -> Reference:
    return Reference(folder)


@pytest.fixture(scope="module")
def served(folder: Path) -> Iterator[VllmFormat]:
    with serve_vllm_format(folder) as server:
        yield server


@pytest.fixture(scope="module")
def misaligned(folder: Path) -> Iterator[VllmFormat]:
    with serve_vllm_format(folder, model_id="broken", misaligned=True) as server:
        yield server


def client_for(server: VllmFormat) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0, timeout=120)


def http(server: VllmFormat, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """Status and decoded body of a GET (no body) or POST to the server's /v1 `path`, or its root for /x."""
    root = server.base_url.removesuffix("/v1")
    url = root + path if path in ("/version", "/health") else server.base_url + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_echo_logprobs_are_the_models_own_in_vllms_shape(served: VllmFormat, reference: Reference) -> None:
    ids = reference.ids(TEXT)
    expected = reference.log_probs(ids)  # (T, V)
    answer = client_for(served).completions.create(
        model=served.model, prompt=TEXT, max_tokens=0, echo=True, logprobs=3, temperature=0
    )
    choice = answer.choices[0]
    assert choice.text == TEXT
    assert answer.usage is not None and (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
        len(ids),
        0,
    )
    logprobs = choice.logprobs
    assert logprobs is not None and logprobs.tokens is not None and logprobs.token_logprobs is not None
    assert logprobs.top_logprobs is not None and logprobs.text_offset is not None
    assert len(logprobs.tokens) == len(ids)
    assert logprobs.tokens == [reference.decode_one(i) for i in ids]
    assert "".join(logprobs.tokens) == TEXT
    # The first token has no context: no log-probability, as in vLLM (and OpenAI).
    assert logprobs.token_logprobs[0] is None and logprobs.top_logprobs[0] is None
    for i in range(1, len(ids)):
        # Token i under the distribution before it: row i - 1.
        assert logprobs.token_logprobs[i] == pytest.approx(float(expected[i - 1, ids[i]]), abs=TOLERANCE)
        top = logprobs.top_logprobs[i]
        assert top[logprobs.tokens[i]] == logprobs.token_logprobs[i]  # the actual token is always there
        best = torch.topk(expected[i - 1], 3)
        wanted = {
            reference.decode_one(int(t)): float(v) for v, t in zip(best.values, best.indices, strict=True)
        }
        assert set(top) - set(wanted) <= {logprobs.tokens[i]}
        for token, value in wanted.items():
            assert top[token] == pytest.approx(value, abs=TOLERANCE)
    assert logprobs.text_offset[0] == 0
    for i in range(1, len(ids)):
        assert logprobs.text_offset[i] == logprobs.text_offset[i - 1] + len(logprobs.tokens[i - 1])


def test_prompt_logprobs_are_keyed_by_token_id_and_agree_with_echo(
    served: VllmFormat, reference: Reference
) -> None:
    ids = reference.ids(TEXT)
    expected = reference.log_probs(ids)  # (T, V)
    client = client_for(served)
    echoed = client.completions.create(
        model=served.model,
        prompt=TEXT,
        max_tokens=1,
        echo=True,
        logprobs=1,
        extra_body={"prompt_logprobs": 2},
    ).choices[0]
    assert served.requests[-1]["prompt_logprobs"] == 2  # every body is kept for tests to read
    prompt_logprobs = (echoed.model_extra or {})["prompt_logprobs"]
    assert echoed.logprobs is not None and echoed.logprobs.token_logprobs is not None
    assert len(prompt_logprobs) == len(ids) and prompt_logprobs[0] is None
    for i in range(1, len(ids)):
        entry = prompt_logprobs[i]
        actual = entry[str(ids[i])]
        assert actual["logprob"] == echoed.logprobs.token_logprobs[i]
        assert actual["decoded_token"] == reference.decode_one(ids[i])
        assert actual["rank"] == int((expected[i - 1] > expected[i - 1, ids[i]]).sum()) + 1
        best = torch.topk(expected[i - 1], 2).indices.tolist()
        assert set(entry) == {str(ids[i]), *map(str, best)}
        for rank, token in enumerate(best, start=1):
            assert entry[str(token)]["rank"] == rank
            assert entry[str(token)]["logprob"] == pytest.approx(float(expected[i - 1, token]), abs=TOLERANCE)

    # Asked alone (no echo, no logprobs), prompt_logprobs come all the same, and the same numbers.
    body = {"model": served.model, "prompt": TEXT, "max_tokens": 1, "prompt_logprobs": 0}
    alone = http(served, "/completions", body)[1]
    assert alone["choices"][0]["logprobs"] is None
    # k = 0: the actual token alone at each position.
    assert alone["choices"][0]["prompt_logprobs"] == [None] + [
        {str(t): prompt_logprobs[i][str(t)]} for i, t in enumerate(ids) if i > 0
    ]


def test_a_generated_token_scores_the_same_echoed_after_its_prompt(served: VllmFormat) -> None:
    client = client_for(served)
    generated = client.completions.create(
        model=served.model, prompt=PROBE, max_tokens=1, logprobs=1, temperature=0
    ).choices[0]
    assert generated.logprobs is not None and generated.logprobs.token_logprobs is not None
    assert generated.text == " Paris"
    echoed = client.completions.create(
        model=served.model, prompt=PROBE + generated.text, max_tokens=0, echo=True, logprobs=1
    ).choices[0]
    assert echoed.logprobs is not None and echoed.logprobs.tokens is not None
    assert echoed.logprobs.token_logprobs is not None
    assert echoed.logprobs.tokens[-1] == " Paris"
    assert echoed.logprobs.token_logprobs[-1] == pytest.approx(generated.logprobs.token_logprobs[0], abs=1e-4)


def test_the_misaligned_server_scores_each_prompt_token_against_the_distribution_after_it(
    misaligned: VllmFormat, reference: Reference
) -> None:
    client = client_for(misaligned)
    generated = client.completions.create(
        model=misaligned.model, prompt=PROBE, max_tokens=1, logprobs=1, temperature=0
    ).choices[0]
    assert generated.logprobs is not None and generated.logprobs.token_logprobs is not None
    # Generated tokens stay right, as in llama-cpp-python.
    probe_ids = reference.ids(PROBE)
    right = reference.log_probs(probe_ids)
    paris = reference.ids(PROBE + " Paris")[-1]
    assert generated.text == " Paris"
    assert generated.logprobs.token_logprobs[0] == pytest.approx(float(right[-1, paris]), abs=TOLERANCE)

    echoed = client.completions.create(
        model=misaligned.model,
        prompt=PROBE + " Paris",
        max_tokens=0,
        echo=True,
        logprobs=2,
        extra_body={"prompt_logprobs": 2},
    ).choices[0]
    assert (echoed.model_extra or {}).get("prompt_logprobs") is None  # llama-cpp-python has none
    assert echoed.logprobs is not None and echoed.logprobs.token_logprobs is not None
    assert echoed.logprobs.top_logprobs is not None
    token_logprobs = echoed.logprobs.token_logprobs
    # The defect: the echoed " Paris" is far from the probability it was generated with...
    assert abs(token_logprobs[-1] - generated.logprobs.token_logprobs[0]) > 0.5
    # ...because every prompt token i is scored against row i, the distribution that follows it.
    ids = reference.ids(PROBE + " Paris")
    wrong = reference.log_probs(ids)  # (T, V)
    assert token_logprobs[0] is None and echoed.logprobs.top_logprobs[0] is None
    for i in range(1, len(ids)):
        assert token_logprobs[i] == pytest.approx(float(wrong[i, ids[i]]), abs=TOLERANCE)
        best = torch.topk(wrong[i], 2).indices.tolist()
        assert set(echoed.logprobs.top_logprobs[i]) >= {reference.decode_one(t) for t in best}


def test_chat_is_transformers_greedy_generation_with_its_logprobs(
    served: VllmFormat, reference: Reference
) -> None:
    question = "What is the capital of France?"
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": question}]
    answer = client_for(served).chat.completions.create(
        model=served.model, messages=messages, max_tokens=8, temperature=0, logprobs=True, top_logprobs=2
    )
    prompt = reference.tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
    )
    ids = [int(i) for i in reference.tokenizer(prompt, add_special_tokens=False).input_ids]
    new = reference.greedy(ids, 8)
    choice = answer.choices[0]
    assert choice.message.content == reference.tokenizer.decode(new, skip_special_tokens=True)
    assert choice.finish_reason == ("stop" if new[-1] == reference.tokenizer.eos_token_id else "length")
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (len(ids), len(new))
    expected = reference.log_probs(ids + new)  # (T, V)
    assert choice.logprobs is not None and choice.logprobs.content is not None
    content = choice.logprobs.content
    assert [c.token for c in content] == [reference.decode_one(t) for t in new]
    for j, (entry, token) in enumerate(zip(content, new, strict=True)):
        row = expected[len(ids) + j - 1]
        assert entry.logprob == pytest.approx(float(row[token]), abs=TOLERANCE)
        assert entry.bytes == list(entry.token.encode())
        best = torch.topk(row, 2).indices.tolist()
        assert [t.token for t in entry.top_logprobs] == [reference.decode_one(t) for t in best]


def test_unknown_models_get_vllms_404_and_the_listing_names_the_served_one(
    served: VllmFormat, folder: Path
) -> None:
    with pytest.raises(openai.NotFoundError, match=r"The model `nope` does not exist\."):
        client_for(served).completions.create(model="nope", prompt="hi", max_tokens=1)
    status, body = http(served, "/chat/completions", {"model": "nope", "messages": [{"role": "user"}]})
    assert status == 404
    assert body == {
        "error": {
            "message": "The model `nope` does not exist.",
            "type": "NotFoundError",
            "param": None,
            "code": 404,
        }
    }
    listed = client_for(served).models.list().data
    assert [(m.id, m.owned_by) for m in listed] == [("smol", "vllm")]
    assert (listed[0].model_extra or {})["root"] == str(folder)
    assert (listed[0].model_extra or {})["max_model_len"] == 8192
    assert http(served, "/version") == (200, {"version": "0.0.0+llmeval-test-vllm-format"})
    assert http(served, "/health") == (200, None)


def test_token_id_prompts_and_an_echo_without_generation(served: VllmFormat, reference: Reference) -> None:
    client = client_for(served)
    ids = reference.ids(PROBE)
    by_ids = client.completions.create(model=served.model, prompt=ids, max_tokens=0, echo=True, logprobs=0)
    by_text = client.completions.create(model=served.model, prompt=PROBE, max_tokens=0, echo=True, logprobs=0)
    assert by_ids.choices[0].text == reference.tokenizer.decode(ids) == PROBE  # the prompt, and nothing more
    assert by_ids.choices[0].logprobs == by_text.choices[0].logprobs
    assert by_ids.usage is not None and by_ids.usage.completion_tokens == 0
    # No BOS is added to token ids (nor to text: this tokenizer adds none).
    assert by_ids.usage.prompt_tokens == len(ids)
    # max_tokens 0 means something only with echo, as in vLLM.
    with pytest.raises(openai.BadRequestError, match="max_tokens must be at least 1"):
        client.completions.create(model=served.model, prompt=PROBE, max_tokens=0)
    with pytest.raises(openai.BadRequestError, match="greater than max allowed: 20"):
        client.completions.create(model=served.model, prompt=PROBE, max_tokens=1, logprobs=21)


def test_completions_are_greedy_stop_at_stop_strings_and_answer_batches(
    served: VllmFormat, reference: Reference
) -> None:
    client = client_for(served)
    ids = reference.ids(PROBE)
    new = reference.greedy(ids, 4)
    plain = client.completions.create(model=served.model, prompt=PROBE, max_tokens=4, temperature=0.7, seed=3)
    assert plain.choices[0].text == reference.tokenizer.decode(new, skip_special_tokens=True)
    assert plain.choices[0].finish_reason == "length"
    # " Paris." - the stop string ends the generation and is cut from the text.
    stopped = client.completions.create(model=served.model, prompt=PROBE, max_tokens=4, stop=["."])
    assert stopped.choices[0].text == " Paris" and stopped.choices[0].finish_reason == "stop"
    assert (stopped.choices[0].model_extra or {})["stop_reason"] == "."
    # A batch: one choice per prompt, in order, each what the prompt alone gets.
    other = "Two plus two is"
    batch = client.completions.create(model=served.model, prompt=[PROBE, other], max_tokens=3)
    alone = client.completions.create(model=served.model, prompt=other, max_tokens=3)
    assert [c.index for c in batch.choices] == [0, 1]
    assert [c.text for c in batch.choices] == [
        reference.tokenizer.decode(new[:3], skip_special_tokens=True),
        alone.choices[0].text,
    ]
    assert batch.usage is not None and batch.usage.prompt_tokens == len(ids) + len(reference.ids(other))


def test_a_served_adapter_is_applied(folder: Path, reference: Reference) -> None:
    adapter = REPO / "adapters" / "date-iso"
    adapted = Reference(folder, adapter)
    ids = reference.ids(TEXT)
    with serve_vllm_format(folder, model_id="date-iso", adapter=adapter) as server:
        answer = http(
            server,
            "/completions",
            {"model": "date-iso", "prompt": TEXT, "max_tokens": 0, "echo": True, "logprobs": 0},
        )[1]
    got = answer["choices"][0]["logprobs"]["token_logprobs"][1:]
    want = adapted.log_probs(ids)
    base = reference.log_probs(ids)
    assert got == pytest.approx([float(want[i - 1, ids[i]]) for i in range(1, len(ids))], abs=TOLERANCE)
    # And the adapter does change them: the base's numbers are not what came back.
    assert max(abs(g - float(base[i, ids[i + 1]])) for i, g in enumerate(got)) > 1e-3
