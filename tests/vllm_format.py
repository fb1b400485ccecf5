"""A real HTTP server that answers in vLLM's OpenAI-compatible format, every number from a real model.

No server that runs here returns correct prompt log-probabilities (`transformers serve` has no `echo` nor
`prompt_logprobs`; llama-cpp-python scores each echoed token against the wrong distribution), yet the
product's endpoint client scores choices and perplexity through them. This module serves a model folder
(the embedded SmolLM2 in float32 on CPU, loaded with transformers in the test process) with vLLM's
response format, so the client can be tested against a correct server, and against a broken one
(`misaligned=True`, llama-cpp-python's defect).

What is reproduced from vLLM (vllm/entrypoints/openai/serving_completion.py, protocol.py,
vllm/tokenizers/detokenizer_utils.py), and what the tests rely on:

- A string prompt is tokenised as vLLM does, `tokenizer(prompt, add_special_tokens=True)`: whatever the
  tokenizer adds (SmolLM2's adds nothing). A token-id prompt is used as it is.
- Each position's candidates are {the actual token, then the top-k by rank}, a dict keyed by token id (so
  the actual token is not repeated when it is in the top-k). `logprobs.top_logprobs` keeps its first k+1
  entries keyed by each token decoded alone (`tokenizer.decode([id])`, two ids decoding alike collapse
  into one key, as in vLLM); log-probabilities are clamped at -9999.0 as vLLM clamps -inf.
- `echo` with `logprobs` returns the prompt's log-probabilities too (vLLM sets prompt_logprobs = logprobs
  when echo asks and prompt_logprobs is not given), first token None; `text_offset` starts at 0 and adds
  the length of each previous token string.
- `prompt_logprobs` entries are `{str(id): {"logprob", "rank", "decoded_token"}}`, rank 1-based over the
  whole vocabulary (vLLM counts the tokens at least as likely as the actual one).
- `max_tokens=0` is allowed only with `echo` (the prompt alone comes back); `logprobs` and
  `prompt_logprobs` are capped at 20 (vLLM's default --max-logprobs).
- A `stop` string ends the generation at the token that completes it; the text is cut before it
  (finish_reason "stop", stop_reason the string); the tokens and their log-probabilities keep that token.
- Generation is greedy (`model.generate(do_sample=False)`) whatever the temperature; an eos token ends it
  and stays in the token ids and log-probabilities but not in the text (skip_special_tokens).

Deliberate differences: no streaming, n must be 1, a chat request without max_tokens gets at most
`DEFAULT_CHAT_MAX_TOKENS` (vLLM would fill the context), and an echo with max_tokens 0 reports 0
completion tokens.

It is also the suite's fault server for answers (issue 53; tests/fault_server.py scripts transport faults
for the client alone): several models may be served by id (`also`), and `VllmFormat.perturb`, when set, is
given every request and its correct answer and returns what is sent instead: the answer with one field
perturbed (tests/perturb.py), or a `Raw` status and body, or a dropped connection. The start-up probe's
requests get correct answers unless the hook changes them too.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

__all__ = ["VllmFormat", "serve_vllm_format"]

VERSION = "0.0.0+llmeval-test-vllm-format"
MAX_LOGPROBS = 20  # vLLM's --max-logprobs default
DEFAULT_COMPLETION_MAX_TOKENS = 16  # vLLM's (and OpenAI's) default for /v1/completions
DEFAULT_CHAT_MAX_TOKENS = 256  # vLLM fills the context instead: too long for a test that forgot max_tokens
LOGPROB_FLOOR = -9999.0  # what vLLM sends for -inf, which JSON cannot carry


@dataclass(frozen=True)
class Raw:
    """What a perturbation hook may send instead of an answer: a status and body, or nothing at all."""

    status: int = 200
    body: bytes = b""
    drop: bool = False  # close the connection without a byte of response


# (path, request body, its correct answer) -> the answer to send, or a Raw; None: the correct answer.
Perturb = Callable[[str, dict[str, Any], dict[str, Any]], "dict[str, Any] | Raw | None"]


@dataclass
class VllmFormat:
    """One running server: its /v1 URL, the model id it answers for, and every JSON body it received;
    `perturb` may be set (and changed) while it runs."""

    base_url: str  # "http://127.0.0.1:PORT/v1"
    model: str
    requests: list[dict[str, Any]] = field(default_factory=list)  # in arrival order
    perturb: Perturb | None = None


class RequestError(Exception):
    """A request vLLM would refuse: its status and vLLM's error type go into the JSON error body."""

    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@contextmanager
def serve_vllm_format(
    folder: Path,
    *,
    model_id: str = "smol",
    misaligned: bool = False,
    adapter: Path | None = None,
    add_bos: bool = False,
    also: dict[str, Path] | None = None,
) -> Iterator[VllmFormat]:
    """Serve `folder` (optionally with a peft LoRA `adapter`) on 127.0.0.1 in vLLM's format until exit, and
    each folder of `also` under its id beside it.

    `add_bos`: a text prompt to /v1/completions gets the tokenizer's BOS first, as vLLM does for a model whose
    tokenizer adds one (Llama, Mistral, Gemma); SmolLM2's adds none, so vLLM would score its text's first
    token with no context at all, where the in-process perplexity scores it after the BOS. Chat prompts never
    get one (vLLM's chat add_special_tokens defaults to False: the template writes its own)."""
    engine = _Engine(Path(folder), model_id=model_id, misaligned=misaligned, adapter=adapter)
    engine.add_bos = add_bos
    engines = {model_id: engine}
    for other, path in (also or {}).items():
        engines[other] = _Engine(Path(path), model_id=other, misaligned=misaligned, adapter=None)
        engines[other].add_bos = add_bos
    served = VllmFormat(base_url="", model=model_id)
    httpd = _Server(("127.0.0.1", 0), _handler_for(engines, served))
    # Handlers on idle keep-alive connections must not hold up the shutdown.
    httpd.daemon_threads = True
    httpd.block_on_close = False
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        served.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        yield served
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops a burst of connections, and a dropped SYN costs a one-second retransmit.
    request_queue_size = 128


# ---------------------------------------------------------------------------------------------------------
# The model side: one loaded model, one lock around every call into it.

# One position's candidates, as vLLM keeps them: the actual token first, then the top-k by rank; token id ->
# (log-probability, rank).
_Step = dict[int, tuple[float, int]]


@dataclass
class _Generated:
    ids: list[int]  # the new tokens, an eos or the token that completed a stop string included
    text: str  # as the answer shows it: special tokens skipped, cut before a stop string
    finish_reason: str  # "length" | "stop"
    stop_reason: str | None  # the stop string that ended it


class _Engine:
    def __init__(self, folder: Path, *, model_id: str, misaligned: bool, adapter: Path | None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.folder = folder
        self.model_id = model_id
        self.misaligned = misaligned
        self.add_bos = False
        self.lock = threading.Lock()
        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        # Any: a transformers model, or a PeftModel around it; both generate and run forward alike.
        model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
        model.eval()
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter)).eval()
        self.model = model
        config = model.config
        self.max_model_len = int(config.max_position_embeddings)
        self.vocab_size = int(config.vocab_size)
        eos = model.generation_config.eos_token_id
        eos_ids = eos if isinstance(eos, list) else [eos] if eos is not None else []
        if self.tokenizer.eos_token_id is not None:
            eos_ids.append(self.tokenizer.eos_token_id)
        self.eos_ids = {int(i) for i in eos_ids}

    def decode_one(self, token_id: int) -> str:
        # vLLM's convert_ids_list_to_tokens: each id decoded alone, special tokens kept.
        return str(self.tokenizer.decode([token_id]))

    def generate(self, ids: list[int], max_tokens: int, stop: Sequence[str]) -> _Generated:
        """Greedy continuation of `ids`: at most `max_tokens` new tokens, ended by eos or a stop string."""
        new: list[int] = []
        if max_tokens > 0:
            inputs = torch.tensor([ids])  # (1, T)
            # Ended where a stop string is complete, as vLLM ends it (not generated to max_tokens and cut):
            # the text is cut below exactly as it would be after a longer generation.
            ends = {"stop_strings": list(stop), "tokenizer": self.tokenizer} if any(stop) else {}
            with self.lock, torch.inference_mode():
                out = self.model.generate(
                    input_ids=inputs,
                    attention_mask=torch.ones_like(inputs),
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    pad_token_id=min(self.eos_ids) if self.eos_ids else None,
                    **ends,
                )
            new = [int(t) for t in out[0, len(ids) :]]
        for end in range(1, len(new) + 1) if stop else ():
            text = str(self.tokenizer.decode(new[:end], skip_special_tokens=True))
            found = [(text.find(s), s) for s in stop if s and s in text]
            if found:
                at, string = min(found)
                return _Generated(new[:end], text[:at], "stop", string)
        text = str(self.tokenizer.decode(new, skip_special_tokens=True))
        finish = "stop" if new and new[-1] in self.eos_ids else "length"
        return _Generated(new, text, finish, None)

    def log_probs(self, ids: list[int]) -> torch.Tensor:
        """log_softmax of the logits at every position of `ids`, one forward pass in float32: (T, V)."""
        with self.lock, torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([ids])).logits[0]  # (T, V)
            return torch.log_softmax(logits.float(), dim=-1)

    def step(self, row: torch.Tensor, actual: int, k: int) -> _Step:
        """One position's candidates from its distribution `row` (V,): the actual token, then the top-k."""
        actual_logprob = row[actual]
        # vLLM's rank: how many tokens are at least as likely as the actual one (1 for the argmax).
        found: _Step = {actual: (float(actual_logprob), int((row >= actual_logprob).sum()))}
        if k > 0:
            top = torch.topk(row, k)
            pairs = zip(top.values.tolist(), top.indices.tolist(), strict=True)
            for rank, (value, token) in enumerate(pairs, start=1):
                found.setdefault(int(token), (float(value), rank))
        return found


# ---------------------------------------------------------------------------------------------------------
# The request side: vLLM's checks and response bodies.


def _int_or_none(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, got {value!r}")
    return value


def _check_logprobs(value: int | None, what: str) -> None:
    if value is None:
        return
    if value < 0:
        raise RequestError(f"{what} logprobs must be non-negative, got {value}.")
    if value > MAX_LOGPROBS:
        raise RequestError(f"Requested {what} logprobs of {value}, which is greater than max allowed: 20")


def _stop_strings(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return list(stop)
    raise RequestError(f"stop must be a string or a list of strings, got {stop!r}")


def _engine_for(engines: dict[str, _Engine], body: dict[str, Any]) -> _Engine:
    """The engine serving the request's model; vLLM's 404 for a model it does not serve."""
    engine = engines.get(str(body.get("model")))
    if engine is None:
        raise RequestError(f"The model `{body.get('model')}` does not exist.", 404, "NotFoundError")
    _check_common(engine, body)
    return engine


def _check_common(engine: _Engine, body: dict[str, Any]) -> None:
    if body.get("stream"):
        raise RequestError("this test server does not stream; send stream=false")
    if body.get("n", 1) not in (1, None):
        raise RequestError("this test server answers n=1 only (it is greedy)")


def _check_length(engine: _Engine, n_prompt: int, max_tokens: int) -> None:
    if n_prompt + max_tokens > engine.max_model_len:
        raise RequestError(
            f"This model's maximum context length is {engine.max_model_len} tokens. However, you requested "
            f"{n_prompt + max_tokens} tokens ({n_prompt} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion."
        )


def _prompts(engine: _Engine, prompt: Any) -> list[tuple[str | None, list[int]]]:
    """The request's prompts, each as (its text if it was given as text, its token ids): a string, a list of
    ids, or a list of either (a batch)."""
    if isinstance(prompt, str):
        batch: list[Any] = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        batch = [prompt]
    elif isinstance(prompt, list) and prompt:
        batch = prompt
    else:
        raise RequestError(f"prompt must be a string, a list of token ids, or a list of those: {prompt!r}")
    out: list[tuple[str | None, list[int]]] = []
    for one in batch:
        if isinstance(one, str):
            text: str | None = one
            ids = [int(i) for i in engine.tokenizer(one, add_special_tokens=True).input_ids]
            bos = engine.tokenizer.bos_token_id
            if engine.add_bos and bos is not None and ids[:1] != [bos]:
                ids = [int(bos), *ids]
        elif isinstance(one, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in one):
            bad = [t for t in one if not 0 <= t < engine.vocab_size]
            if bad:
                raise RequestError(f"Token id {bad[0]} is out of vocabulary")
            text, ids = None, list(one)
        else:
            raise RequestError(f"a prompt must be a string or a list of token ids, got {one!r}")
        if not ids:
            raise RequestError("The prompt cannot be empty")
        out.append((text, ids))
    return out


def _completion_logprobs(
    engine: _Engine, token_ids: list[int], steps: list[_Step | None], k: int
) -> dict[str, Any]:
    """vLLM's _create_completion_logprobs: tokens, token_logprobs, top_logprobs and text_offset."""
    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    top_logprobs: list[dict[str, float] | None] = []
    text_offset: list[int] = []
    last_len = 0
    for token_id, step in zip(token_ids, steps, strict=True):
        token = engine.decode_one(token_id)
        tokens.append(token)
        if step is None:
            token_logprobs.append(None)
            top_logprobs.append(None)
        else:
            token_logprobs.append(max(step[token_id][0], LOGPROB_FLOOR))
            # The actual token plus the top-k: the first k+1 candidates (k when the actual one is among them).
            top_logprobs.append(
                {
                    engine.decode_one(t): max(lp, LOGPROB_FLOOR)
                    for i, (t, (lp, _)) in enumerate(step.items())
                    if k >= i
                }
            )
        text_offset.append(0 if not text_offset else text_offset[-1] + last_len)
        last_len = len(token)
    return {
        "text_offset": text_offset,
        "token_logprobs": token_logprobs,
        "tokens": tokens,
        "top_logprobs": top_logprobs,
    }


def _prompt_logprobs_json(engine: _Engine, steps: list[_Step | None]) -> list[dict[str, Any] | None]:
    return [
        None
        if step is None
        else {
            str(t): {"logprob": max(lp, LOGPROB_FLOOR), "rank": rank, "decoded_token": engine.decode_one(t)}
            for t, (lp, rank) in step.items()
        }
        for step in steps
    ]


def _one_completion(
    engine: _Engine, body: dict[str, Any], given: str | None, ids: list[int], index: int
) -> tuple[dict[str, Any], int]:
    """One prompt's choice and how many tokens it generated; `given`: the prompt's text if it came as text."""
    echo = bool(body.get("echo"))
    max_tokens = _int_or_none(body, "max_tokens")
    max_tokens = DEFAULT_COMPLETION_MAX_TOKENS if max_tokens is None else max_tokens
    logprobs = _int_or_none(body, "logprobs")
    prompt_k = _int_or_none(body, "prompt_logprobs")
    if prompt_k is None and echo:
        prompt_k = logprobs  # vLLM: echo with logprobs scores the prompt with the same k
    _check_length(engine, len(ids), max_tokens)

    generated = engine.generate(ids, max_tokens, _stop_strings(body))
    all_ids = ids + generated.ids
    n = len(ids)
    prompt_steps: list[_Step | None] | None = None
    generated_steps: list[_Step | None] = []
    if logprobs is not None or prompt_k is not None:
        table = engine.log_probs(all_ids)  # (T, V): row t is the distribution of token t+1
        if prompt_k is not None:
            # The defect reproduced: prompt token i scored against row i, the distribution after it.
            shift = 0 if engine.misaligned else 1
            prompt_steps = [None] + [engine.step(table[i - shift], ids[i], prompt_k) for i in range(1, n)]
        if logprobs is not None:
            generated_steps = [
                engine.step(table[n + j - 1], t, logprobs) for j, t in enumerate(generated.ids)
            ]

    if echo:
        # vLLM echoes a text prompt as it was given, and decodes a token-id one.
        text = (given if given is not None else str(engine.tokenizer.decode(ids))) + generated.text
    else:
        text = generated.text
    choice_logprobs = None
    if logprobs is not None:
        shown_ids = all_ids if echo else generated.ids
        shown_steps = ([*(prompt_steps or [None] * n), *generated_steps]) if echo else generated_steps
        choice_logprobs = _completion_logprobs(engine, shown_ids, shown_steps, logprobs)
    choice = {
        "index": index,
        "text": text,
        "logprobs": choice_logprobs,
        "finish_reason": generated.finish_reason,
        "stop_reason": generated.stop_reason,
        # llama-cpp-python returns no prompt_logprobs at all: the misaligned server neither.
        "prompt_logprobs": None
        if prompt_steps is None or engine.misaligned
        else _prompt_logprobs_json(engine, prompt_steps),
    }
    return choice, len(generated.ids)


def completion(engines: dict[str, _Engine], body: dict[str, Any]) -> dict[str, Any]:
    """The answer to POST /v1/completions."""
    engine = _engine_for(engines, body)
    max_tokens = _int_or_none(body, "max_tokens")
    if max_tokens is not None and max_tokens < 0:
        raise RequestError(f"max_tokens must be at least 0, got {max_tokens}.")
    if max_tokens == 0 and not body.get("echo"):
        raise RequestError("max_tokens must be at least 1, got 0.")
    _check_logprobs(_int_or_none(body, "logprobs"), "sample")
    _check_logprobs(_int_or_none(body, "prompt_logprobs"), "prompt")
    # A batch of prompts is answered one choice per prompt, in order.
    choices = []
    n_prompt = n_generated = 0
    for index, (given, ids) in enumerate(_prompts(engine, body.get("prompt"))):
        choice, count = _one_completion(engine, body, given, ids, index)
        choices.append(choice)
        n_prompt += len(ids)
        n_generated += count
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": engine.model_id,
        "choices": choices,
        "usage": {
            "prompt_tokens": n_prompt,
            "completion_tokens": n_generated,
            "total_tokens": n_prompt + n_generated,
            "prompt_tokens_details": None,
        },
        "system_fingerprint": None,
        "kv_transfer_params": None,
    }


def chat_completion(engines: dict[str, _Engine], body: dict[str, Any]) -> dict[str, Any]:
    """The answer to POST /v1/chat/completions."""
    engine = _engine_for(engines, body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    max_tokens = _int_or_none(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _int_or_none(body, "max_tokens")
    if max_tokens is not None and max_tokens < 1:
        raise RequestError(f"max_tokens must be at least 1, got {max_tokens}.")
    want_logprobs = bool(body.get("logprobs"))
    top_k = _int_or_none(body, "top_logprobs")
    if top_k is not None and not want_logprobs:
        raise RequestError("when using `top_logprobs`, `logprobs` must be set to true.")
    _check_logprobs(top_k, "sample")
    # vLLM's chat extensions: the last (assistant) message continued rather than answered, the prompt's
    # own log-probabilities returned beside the answer (on the response, not the choice).
    continue_final = bool(body.get("continue_final_message", False))
    add_generation_prompt = bool(body.get("add_generation_prompt", True))
    if continue_final and add_generation_prompt:
        raise RequestError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
    prompt_k = _int_or_none(body, "prompt_logprobs")
    _check_logprobs(prompt_k, "prompt")
    try:
        prompt = engine.tokenizer.apply_chat_template(
            messages,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final,
            tokenize=False,
        )
    except Exception as exc:  # a template refusing the messages is the client's error, as in vLLM
        raise RequestError(f"the chat template refused the messages: {exc}") from None
    ids = [int(i) for i in engine.tokenizer(prompt, add_special_tokens=False).input_ids]
    prompt_logprobs = None
    if prompt_k is not None:
        table = engine.log_probs(ids)  # (T, V)
        shift = 0 if engine.misaligned else 1
        steps: list[_Step | None] = [None] + [
            engine.step(table[i - shift], ids[i], prompt_k) for i in range(1, len(ids))
        ]
        prompt_logprobs = None if engine.misaligned else _prompt_logprobs_json(engine, steps)
    if max_tokens is None:
        max_tokens = min(DEFAULT_CHAT_MAX_TOKENS, engine.max_model_len - len(ids))
    _check_length(engine, len(ids), max_tokens)
    generated = engine.generate(ids, max_tokens, _stop_strings(body))

    choice_logprobs = None
    if want_logprobs:
        k = top_k or 0
        table = engine.log_probs(ids + generated.ids)  # (T, V)
        content = []
        for j, token_id in enumerate(generated.ids):
            step = engine.step(table[len(ids) + j - 1], token_id, k)
            token = engine.decode_one(token_id)
            content.append(
                {
                    "token": token,
                    "logprob": max(step[token_id][0], LOGPROB_FLOOR),
                    "bytes": list(token.encode("utf-8", errors="replace")),
                    # vLLM's _get_top_logprobs: the first k candidates (the greedy token is the first).
                    "top_logprobs": [
                        {
                            "token": engine.decode_one(t),
                            "logprob": max(lp, LOGPROB_FLOOR),
                            "bytes": list(engine.decode_one(t).encode("utf-8", errors="replace")),
                        }
                        for i, (t, (lp, _)) in enumerate(step.items())
                        if i < k
                    ],
                }
            )
        choice_logprobs = {"content": content}
    n_prompt, n_generated = len(ids), len(generated.ids)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": engine.model_id,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": generated.text,
                    "refusal": None,
                    "tool_calls": [],
                    "reasoning_content": None,
                },
                "logprobs": choice_logprobs,
                "finish_reason": generated.finish_reason,
                "stop_reason": generated.stop_reason,
            }
        ],
        "usage": {
            "prompt_tokens": n_prompt,
            "completion_tokens": n_generated,
            "total_tokens": n_prompt + n_generated,
            "prompt_tokens_details": None,
        },
        "system_fingerprint": None,
        "prompt_logprobs": prompt_logprobs,
        "kv_transfer_params": None,
    }


def _error_body(message: str, status: int, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _handler_for(engines: dict[str, _Engine], served: VllmFormat) -> type[BaseHTTPRequestHandler]:
    record_lock = threading.Lock()
    requests = served.requests

    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as uvicorn in front of vLLM does, so the client's connection pool is exercised too.
        protocol_version = "HTTP/1.1"
        # Headers and body leave in separate writes: with Nagle on, each body waits out a delayed ACK.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test output stays clean

        def _send_json(self, status: int, payload: Any) -> None:
            # NaN and Infinity as Python writes them: a perturbed answer may hold them, as careless servers'
            # do, and the openai client reads them.
            self._send_bytes(status, json.dumps(payload).encode())

        def _send_bytes(self, status: int, data: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                self.close_connection = True  # the client hung up: nothing to answer

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/v1/models":
                entries = [
                    {
                        "id": engine.model_id,
                        "object": "model",
                        "created": 0,
                        "owned_by": "vllm",
                        "root": str(engine.folder),
                        "parent": None,
                        "max_model_len": engine.max_model_len,
                    }
                    for engine in engines.values()
                ]
                self._send_json(200, {"object": "list", "data": entries})
            elif path == "/version":
                self._send_json(200, {"version": VERSION})
            elif path == "/health":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._send_json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                self._send_json(400, _error_body("the body is not JSON", 400, "BadRequestError"))
                return
            if isinstance(body, dict):
                with record_lock:
                    requests.append(body)
            path = self.path.split("?")[0]
            answer = {"/v1/completions": completion, "/v1/chat/completions": chat_completion}.get(path)
            if answer is None:
                self._send_json(404, {"detail": "Not Found"})
                return
            if not isinstance(body, dict):
                self._send_json(400, _error_body("the body is not a JSON object", 400, "BadRequestError"))
                return
            try:
                made = answer(engines, body)
                hook = served.perturb
                sent = None if hook is None else hook(path, body, made)
                if isinstance(sent, Raw):
                    if sent.drop:
                        self.close_connection = True
                        return
                    self._send_bytes(sent.status, sent.body)
                    return
                self._send_json(200, made if sent is None else sent)
            except RequestError as exc:
                self._send_json(exc.status, _error_body(str(exc), exc.status, exc.kind))
            except Exception as exc:  # a bug here must reach the test as a 500 with its message, not a hang
                self._send_json(500, _error_body(f"{type(exc).__name__}: {exc}", 500, "InternalServerError"))

    return Handler
