"""Models behind OpenAI-compatible URLs (vLLM, SGLang, TGI, llama.cpp server, Ollama, OpenAI): the client.

No pytest and no torch here, and `openai` is imported only inside the functions that talk to a server, so
importing this module costs nothing. The evaluator builds one `Endpoint` from `EndpointSettings`, calls
`probe(model_ids)` once before any test (it raises `EndpointError`, one line, when the run cannot work at
all) and then `complete(requests)` for batches of rows: answers come back in request order and a request
that fails after its retries is that row's `Answer.error`, never an exception.

Retries are ours, not the `openai` package's (`max_retries=0` on its client), because ours are shaped for a
batch rather than for one call: one deadline for the whole batch, one bound on requests in flight over all
URLs, a retry after a failed connection goes to the next URL (and the URL is passed over for a while, so a
machine that hangs costs one timeout, not one per request sent its way), and every row's attempts are
counted. What is retried: 408, 409, 429, 5xx, timeouts, refused or
dropped connections, and responses that are not a completion (undecodable JSON, an HTML page from a proxy,
JSON without choices). What is not: the other 4xx, which are answers about the request itself (a prompt longer
than the context) and would only be refused again.

Secrets. The key reaches the `openai` client and the Authorization header, nowhere else: every message we
build (errors, `EndpointError`) is scrubbed of it, because servers do echo keys ("Incorrect API key provided:
..."), and every URL we show goes through `redact`.

openai 3.57 facts this relies on (checked against the installed package, see tests/test_endpoint_client.py):
a base URL with a query string is joined wrongly (`/v1/?k=vchat/completions`), so the query travels as
`default_query`; a body that is not JSON under `application/json` raises a bare `json.JSONDecodeError`, and
under another content type `create()` returns the body as a `str`; valid JSON without `choices` comes back as
a completion whose `choices` is None (responses are not validated, which is what lets TGI's `eos_token`
finish reason through); `APIStatusError.response.headers` holds Retry-After; `APITimeoutError` is a subclass
of `APIConnectionError`, whose `__cause__` is the httpx error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import difflib
import email.utils
import functools
import importlib
import math
import os
import random
import re
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from pytest_llmeval.logprobs import Alignment

__all__ = [
    "Answer",
    "Endpoint",
    "EndpointError",
    "EndpointSettings",
    "Request",
    "ServedModel",
    "redact",
    "retry_after_seconds",
]

# The key sent when the environment has none: local servers want no key, and the openai client insists on one.
PLACEHOLDER_KEY = "EMPTY"

# Statuses worth asking again: timeout, conflict, rate limit, and the server's own failures (5xx).
_RETRY_STATUSES = frozenset({408, 409, 429})

# Longest server message kept in an error: enough for "maximum context length is 2048 tokens...", not a page.
_MESSAGE_CHARS = 300

# The most characters one token decodes to, as a bound on an answer's text: a server that ignores max_tokens
# (50 MB for a 16-token row, issue 53) is cut there. The longest tokens of the vocabularies in use are runs of
# spaces or punctuation well under this (SmolLM2's: 16 characters; cl100k's: 128).
MAX_CHARS_PER_TOKEN = 256

_T = TypeVar("_T")


class EndpointError(Exception):
    """Stops the run before any test: unreachable URL, authentication refused, unknown model id.

    Its message is one line naming the (redacted) URL, the model, the reason, and what to do.
    """


@dataclass(frozen=True)
class EndpointSettings:
    """Where the models are served and how hard to try."""

    # The /v1 base URLs; several = the same models served on several machines: requests spread over them.
    urls: tuple[str, ...]
    api_key_env: str = "OPENAI_API_KEY"  # absent from the environment -> PLACEHOLDER_KEY
    concurrency: int = 16  # requests in flight at once, over all URLs together
    timeout_s: float = 120.0  # one HTTP request
    deadline_s: float = 3600.0  # one complete() (or probe()) call as a whole
    max_retries: int = 5  # retries of one request, after the first attempt
    backoff_s: float = 0.5  # the first retry's wait; doubled each retry, with jitter
    max_backoff_s: float = 30.0  # the longest wait of our own (a server's Retry-After may ask for longer)

    def __post_init__(self) -> None:
        if isinstance(self.urls, str):
            raise ValueError("EndpointSettings.urls is a tuple of URLs, not one string")
        if not self.urls:
            raise ValueError("EndpointSettings.urls is empty: give at least one /v1 base URL")
        for url in self.urls:
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
                raise ValueError(f"{redact(url)!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, not {self.max_retries}")
        for name in ("timeout_s", "deadline_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        for name in ("backoff_s", "max_backoff_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be 0 or more, not {getattr(self, name)}")


@dataclass(frozen=True)
class Request:
    """One completion to ask for."""

    model: str  # served model id
    # chat=True: the user message content; chat=False: the raw prompt for /v1/completions (a tuple: token
    # ids, which vLLM and llama.cpp's servers take as the prompt itself, tokenised by nobody)
    prompt: str | tuple[int, ...]
    max_tokens: int
    chat: bool = True
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None  # sent only when probe() found the server accepts seeds
    # chat=True: the whole conversation (a system prompt, few-shot turns, then the user message `prompt`);
    # None: the user message alone.
    messages: tuple[dict[str, str], ...] | None = None
    # /v1/completions only: the prompt echoed before the output, with each token's log-probability and this
    # many alternatives (logprobs.py reads them); `prompt_logprobs` is vLLM's extension (token ids too).
    echo: bool = False
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    # chat=True only: the last message (the assistant's) is continued, not answered, and nothing is generated
    # after a new assistant turn (vLLM's continue_final_message): with prompt_logprobs, the log-likelihood of
    # an answer under the server's own chat template.
    continue_final: bool = False
    # The strings the server ends the output at (OpenAI's `stop`: the text comes back cut before them);
    # None or empty: none sent.
    stop: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Answer:
    """What came back for one request: its text, or why there is none."""

    text: str | None  # None when the request failed
    error: str | None  # one line: why it failed after the retries; never contains the API key
    model: str | None = None  # response.model as the server reported it
    system_fingerprint: str | None = None
    finish_reason: str | None = None
    attempts: int = 1
    # The tokens the server says it read and generated for this request (its `usage`); None when it says
    # nothing, as some servers do.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # A completion's log-probabilities as sent (OpenAI's legacy shape: tokens, token_logprobs, top_logprobs,
    # text_offset), and vLLM's prompt_logprobs; None where the server sent none.
    logprobs: dict[str, Any] | None = None
    prompt_logprobs: list[Any] | None = None
    # What was done to the answer on its way in: a text longer than `max_tokens` tokens can hold, cut.
    note: str | None = None


@dataclass(frozen=True)
class ServedModel:
    """What probe() learned about one model id."""

    id: str
    reported_model: str | None  # response.model of the probe request
    system_fingerprint: str | None
    accepts_seed: bool
    quantization: str | None  # only where the server says it (a /v1/models entry field); else None
    server: str | None = None  # the server's software and version where it says (server_software)
    listed: tuple[str, ...] | None = None  # the ids its /v1/models lists; None: it lists none
    # Whether its prompt log-probabilities can be used (logprobs.check_alignment); None: not probed (a judge).
    alignment: Alignment | None = None
    prompt_logprobs: bool = False  # it takes vLLM's prompt_logprobs: token ids come back with the echo
    # What the probe's one-token greedy answer to "Hi" said (None: no text): with the alignment's numbers, the
    # closest a client comes to a fingerprint of weights it never sees (the generation cache keys on it).
    probe_answer: str | None = None
    # The server's /v1/models entry for this id, less its clock (`created`): a vLLM's `root` (the weights'
    # folder) and `max_model_len`, a llama-server's GGUF metadata.
    entry: dict[str, Any] | None = None

    @property
    def loglikelihood_error(self) -> str | None:
        """Why this model's log-likelihood rows are refused, as their skip reason; None: they are not."""
        if self.alignment is None:
            return "its prompt log-probabilities were not checked"
        return self.alignment.reason


# -- URLs and secrets --------------------------------------------------------------------------------------

# Query parameters whose values are secrets: a name containing one of these words (api_key, x-api-key, token,
# access_token, client_secret, password...) or one of the short names (sig: Azure SAS signatures).
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "credential", "signature")
_SECRET_NAMES = frozenset({"sig", "pwd", "pass", "code"})


def _secret_param(name: str) -> bool:
    lowered = name.lower()
    return lowered in _SECRET_NAMES or any(word in lowered for word in _SECRET_WORDS)


def redact(url: str) -> str:
    """The URL without credentials: userinfo removed, key-like query parameters' values replaced by '***'."""
    try:
        parts = urlsplit(url)
    except ValueError:
        # Unparseable (a broken IPv6 literal): keep only what surely is not a secret.
        return re.sub(r"//[^/?#]*@", "//", url).split("?", 1)[0]
    netloc = parts.netloc.rpartition("@")[2]
    query = "&".join(_redact_param(param) for param in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_param(param: str) -> str:
    name, equals, _ = param.partition("=")
    return f"{name}=***" if equals and _secret_param(name) else param


def _url_secrets(url: str) -> list[str]:
    """The secrets written into a URL: its userinfo password and its key-like query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [parts.password] if parts.password else []
    found += [value for name, value in parse_qsl(parts.query) if _secret_param(name) and value]
    # The encoded forms too: a server echoes the request line as it was sent. Values shorter than 4 characters
    # are no real secret, and replacing them ("1") would garble status codes and numbers in every message.
    return [secret for value in found for secret in (value, quote(value, safe="")) if len(value) >= 4]


def _split_query(url: str) -> tuple[str, dict[str, str]]:
    """The base URL without its query, and the query apart (the openai client mangles a query in a URL)."""
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return base, dict(parse_qsl(parts.query, keep_blank_values=True))


def _one_line(text: str, limit: int = _MESSAGE_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# -- Retry-After and backoff -------------------------------------------------------------------------------


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After value asks for (delay-seconds or an HTTP date); None when absent or invalid."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a date without a zone is read as one
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    # retry-after-ms is what OpenAI sends beside Retry-After; it is the more precise of the two.
    milliseconds = retry_after_seconds(headers.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    return retry_after_seconds(headers.get("retry-after"))


def _backoff(retry: int, settings: EndpointSettings) -> float:
    """The wait before retry number `retry` (1-based): exponential, capped, with jitter in [50%, 100%]."""
    # Jitter keeps the requests that failed together (a server restart) from coming back together.
    base = min(settings.max_backoff_s, settings.backoff_s * 2.0 ** min(retry - 1, 60))
    return base * (0.5 + 0.5 * random.random())


# -- one attempt and its outcome ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reply:
    text: str | None
    model: str | None
    system_fingerprint: str | None
    finish_reason: str | None
    url: str = ""  # redacted: where it came from
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    logprobs: dict[str, Any] | None = None
    prompt_logprobs: list[Any] | None = None


@dataclass(frozen=True)
class _Failure:
    cause: str  # one line, scrubbed of the key, without the URL: "HTTP 400: <the server's message>"
    url: str  # redacted: the URL of the attempt that failed
    retryable: bool
    next_url: bool = False  # the URL itself failed (refused, dropped, silent): try the next one
    status: int | None = None
    server_message: str = ""  # the server's own words, for probe()'s diagnosis
    retry_after: float | None = None
    attempts: int = 0  # set once the request is done

    @property
    def summary(self) -> str:
        """The one line an Answer carries: what, where, how many times."""
        noun = "attempt" if self.attempts == 1 else "attempts"
        where = f"{self.url}; " if self.url else ""
        return f"{self.cause} ({where}{self.attempts} {noun})"


class _Malformed(Exception):
    """A 200 response that is not a completion."""


def _extract(response: object, chat: bool) -> _Reply:
    """The text and identity of a completion response; `_Malformed` when it is not one."""
    if isinstance(response, str):
        raise _Malformed(f"the body is not JSON: {response[:80]!r}")
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _Malformed("no choices in the response")
    choice = choices[0]
    if chat:
        message = getattr(choice, "message", None)
        if message is None:
            raise _Malformed("the choice has no message")
        text = getattr(message, "content", None)
    else:
        text = getattr(choice, "text", None)
    if text is not None and not isinstance(text, str):
        raise _Malformed(f"the choice's text is a {type(text).__name__}")
    usage = getattr(response, "usage", None)
    logprobs = None if chat else _as_dict(getattr(choice, "logprobs", None))
    # vLLM puts prompt_logprobs on a completion's choice, and on a chat completion's response.
    prompt_logprobs = getattr(choice, "prompt_logprobs", None) or getattr(response, "prompt_logprobs", None)
    return _Reply(
        text=text,
        model=_str_or_none(getattr(response, "model", None)),
        system_fingerprint=_str_or_none(getattr(response, "system_fingerprint", None)),
        finish_reason=_str_or_none(getattr(choice, "finish_reason", None)),
        prompt_tokens=_count_or_none(getattr(usage, "prompt_tokens", None)),
        completion_tokens=_count_or_none(getattr(usage, "completion_tokens", None)),
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs if isinstance(prompt_logprobs, list) else None,
    )


def _as_dict(value: object) -> dict[str, Any] | None:
    """A response part as plain JSON: the openai package's model, or a dict where it left one."""
    if isinstance(value, dict):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        found = to_dict()
        return found if isinstance(found, dict) else None
    return None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count_or_none(value: object) -> int | None:
    """A token count as the server reported it; anything but a count of 0 or more is no report."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _server_message(body: object, fallback: str) -> str:
    # openai 3.57 hands over the "error" object itself when the body has one; vLLM's shape has no wrapper.
    if isinstance(body, dict):
        inner = body.get("error", body)
        # FastAPI's own errors (transformers serve, llama-cpp-python) say it in `detail`.
        message = (inner.get("message") or inner.get("detail")) if isinstance(inner, dict) else inner
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body
    return fallback


@dataclass
class _Progress:
    """One request's attempts so far: what a deadline reports about a request it cut short."""

    attempts: int = 0
    last: _Failure | None = None
    sending_to: str = ""  # redacted URL of the attempt in flight, "" between attempts


# How long a URL whose connection failed is passed over while other URLs are up.
_DOWN_FOR_S = 30.0


@dataclass(frozen=True)
class _Target:
    client: AsyncOpenAI
    url: str  # as configured: for messages, always through redact()


@dataclass
class _Run:
    """What the requests of one probe() or complete() call share; made inside that call's event loop."""

    targets: list[_Target]  # one client per URL, in settings order
    semaphore: asyncio.Semaphore  # settings.concurrency slots over all URLs together
    deadline: float  # on the loop's clock
    # Until when (loop clock) each URL is passed over after its connection failed or went silent: without
    # this, a machine that hangs costs every request sent its way a whole timeout before the failover.
    down_until: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.down_until = [0.0] * len(self.targets)

    def pick(self, preferred: int, now: float) -> int:
        """The preferred URL, or the next one that is not down; the preferred one when all are down."""
        count = len(self.targets)
        for step in range(count):
            candidate = (preferred + step) % count
            if self.down_until[candidate] <= now:
                return candidate
        return preferred


# -- the endpoint ------------------------------------------------------------------------------------------


class Endpoint:
    """The OpenAI-compatible URLs of one run: probe() once, then complete() batches of requests."""

    def __init__(self, settings: EndpointSettings, api_key: str | None = None) -> None:
        self.settings = settings
        key = api_key if api_key is not None else os.environ.get(settings.api_key_env)
        self._key = key or PLACEHOLDER_KEY
        # Everything a message must never show: the key, and the secrets written into the URLs themselves
        # (a server may echo its request line, query included). Longest first, so no secret is half-replaced.
        secrets = {self._key} | {secret for url in settings.urls for secret in _url_secrets(url)}
        secrets.discard(PLACEHOLDER_KEY)  # no secret, and replacing it would garble messages that say EMPTY
        self._secrets = sorted((secret for secret in secrets if secret), key=len, reverse=True)
        # Model id -> whether every URL took the seed parameter at probe(); unprobed models never get one.
        self._accepts_seed: dict[str, bool] = {}
        # Model id -> the model the probe's answer named: every later answer must name the same (or the id).
        self._reported: dict[str, str | None] = {}
        self.stats: dict[str, int] = {"requests": 0, "retries": 0, "failures": 0}

    def __repr__(self) -> str:
        return f"Endpoint(urls={self.public_urls()!r}, concurrency={self.settings.concurrency})"

    def public_urls(self) -> list[str]:
        """The URLs as they may be shown and recorded: redacted."""
        return [redact(url) for url in self.settings.urls]

    # -- probe -------------------------------------------------------------------------------------------

    def probe(
        self, model_ids: Sequence[str], *, chat: bool = True, scored: Sequence[str] | None = None
    ) -> dict[str, ServedModel]:
        """One tiny request per model id on each URL: what each serves, or `EndpointError` before any test.

        Each id must be one the server serves: where its /v1/models lists ids, one of them (a server that
        answers for any name, with whatever it loaded, stops the run here); where it lists none, the model its
        answer reports must be the one asked for. The ids in `scored` (default: all) also have their prompt
        log-probabilities checked (logprobs.check_alignment, two one-token requests): the finding is each
        ServedModel's `alignment`, which decides whether its log-likelihood rows run.

        `chat=False` probes /v1/completions instead, for base models a server has no chat template for.
        """
        ids = list(dict.fromkeys(model_ids))
        checked = ids if scored is None else [m for m in ids if m in scored]
        served = _run_sync(lambda: self._probe_all(ids, chat, checked))
        for model_id, model in served.items():
            self._accepts_seed[model_id] = model.accepts_seed
            self._reported[model_id] = model.reported_model
        return served

    async def _probe_all(
        self, model_ids: list[str], chat: bool, checked: list[str]
    ) -> dict[str, ServedModel]:
        async with self._run() as run:
            listings = await asyncio.gather(*(self._list_models(target) for target in run.targets))
            software = await asyncio.gather(*(self._software(target) for target in run.targets))
            pairs = [(u, model_id) for u in range(len(run.targets)) for model_id in model_ids]
            outcomes = await asyncio.gather(
                *(self._probe_one(run, u, model_id, chat) for u, model_id in pairs)
            )
            # Errors in URL order then model order, so the same misconfiguration always reads the same.
            replies: dict[str, list[tuple[int, _Reply, bool]]] = {model_id: [] for model_id in model_ids}
            for (u, model_id), (outcome, accepts_seed) in zip(pairs, outcomes, strict=True):
                if isinstance(outcome, _Failure):
                    raise EndpointError(self._scrub(self._diagnose(u, model_id, outcome, listings[u])))
                replies[model_id].append((u, outcome, accepts_seed))
            for u, listing in enumerate(listings):
                if listing and any(_listed(m, listing) is None for m in model_ids):
                    # A server that loads a model on its first request lists it only after the probe's.
                    listings[u] = await self._list_models(run.targets[u])
            for u, model_id in pairs:
                self._check_identity(u, model_id, listings[u], replies[model_id])
            scored = [(u, m) for u, m in pairs if m in checked]
            found = await asyncio.gather(*(self._probe_logprobs(run, u, m, software[u]) for u, m in scored))
        alignments: dict[str, list[tuple[Alignment, bool]]] = {}
        for (_, model_id), result in zip(scored, found, strict=True):
            alignments.setdefault(model_id, []).append(result)
        return {
            model_id: self._served(model_id, found_here, listings, software, alignments.get(model_id))
            for model_id, found_here in replies.items()
        }

    def _check_identity(
        self, url_index: int, model_id: str, listing: list[dict[str, Any]] | None, replies: list[Any]
    ) -> None:
        """EndpointError unless the server serves `model_id` itself: llama-cpp-python's server, asked for
        any name, answers with the one model it loaded and echoes the name back, so an answer proves nothing;
        the list of what it serves does. Where there is no list, the model its answer names must be the one
        asked for (a dated snapshot of it too: `gpt-4o` answered as `gpt-4o-2024-08-06`)."""
        where = f"endpoint {redact(self.settings.urls[url_index])} model {model_id!r}"
        if listing:
            if _listed(model_id, listing) is None:
                ids = [str(entry.get("id")) for entry in listing]
                close = difflib.get_close_matches(model_id, ids, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise EndpointError(
                    self._scrub(
                        f"{where}: not served there: the server answered, but its /v1/models lists only "
                        f"{_some(ids)}, so another model would answer under this name; {hint}ask for an id "
                        "it lists"
                    )
                )
            return
        for u, reply, _ in replies:
            if u != url_index or reply.model is None:
                continue
            if not _same_model(model_id, reply.model):
                raise EndpointError(
                    self._scrub(
                        f"{where}: the answer came from model {reply.model!r}, and the server lists no "
                        "models to tell what it serves; ask for the id it answers as"
                    )
                )

    async def _probe_logprobs(
        self, run: _Run, url_index: int, model_id: str, software: str | None
    ) -> tuple[Alignment, bool]:
        """Whether a server's prompt log-probabilities for `model_id` can be used, and whether it takes
        vLLM's prompt_logprobs: its greedy next token after logprobs.PROBE_PROMPT with that token's
        log-probability, then the prompt and that token echoed with theirs (logprobs.check_alignment). Every
        finding names the server and the URL, as the skip reason of the rows it refuses."""
        from pytest_llmeval.logprobs import (
            PROBE_PROMPT,
            Alignment,
            EchoError,
            check_alignment,
            parse_echo,
            read_logprob,
        )

        who = f"{software or 'the server'} at {redact(self.settings.urls[url_index])}"

        def refused(why: str) -> tuple[Alignment, bool]:
            return Alignment(ok=False, reason=f"{who} {why}"), False

        ask = Request(model=model_id, prompt=PROBE_PROMPT, max_tokens=1, chat=False, logprobs=5)
        generated = await self._attempts(run, url_index, ask, False, _Progress(), pinned=True)
        if isinstance(generated, _Failure):
            return refused(f"answers no /v1/completions request with logprobs ({generated.cause})")
        token, value = _generated_token(generated)
        if token is None:
            return refused("returns no log-probability for a generated token (logprobs is ignored)")
        try:
            value = read_logprob(value, f"the generated token {token!r}")
        except EchoError as exc:
            return refused(f"returns impossible log-probabilities: {exc}")
        echo = Request(
            model=model_id,
            prompt=PROBE_PROMPT + token,
            max_tokens=1,
            chat=False,
            echo=True,
            logprobs=5,
            prompt_logprobs=1,
        )
        echoed = await self._attempts(run, url_index, echo, False, _Progress(), pinned=True)
        if isinstance(echoed, _Failure) and echoed.status in (400, 422):
            # prompt_logprobs is vLLM's: a server that refuses unknown fields is asked without it.
            echo = dataclasses.replace(echo, prompt_logprobs=None)
            echoed = await self._attempts(run, url_index, echo, False, _Progress(), pinned=True)
        if isinstance(echoed, _Failure):
            return refused(f"answers no echo request with logprobs ({echoed.cause})")
        try:
            parsed = parse_echo(
                echoed.logprobs,
                PROBE_PROMPT + token,
                echoed.completion_tokens,
                echoed.prompt_logprobs,
                echoed.prompt_tokens,
            )
        except EchoError as exc:
            return refused(f"returns no prompt log-probabilities: {exc}")
        found = check_alignment(token, value, parsed, PROBE_PROMPT)
        if not found.ok:
            found = dataclasses.replace(found, reason=f"{who} {found.reason}")
        return found, parsed.ids is not None

    async def _software(self, target: _Target) -> str | None:
        """The server's software and version where it says: llama.cpp's llama-server (/props build_info),
        llama-cpp-python's (its OpenAPI title and version), vLLM (/version); None where none answers."""
        root = _root(target.url)
        headers = {"Authorization": f"Bearer {self._key}"} if self._key != PLACEHOLDER_KEY else {}
        timeout = min(self.settings.timeout_s, 10.0)
        props = await asyncio.to_thread(_get_json, f"{root}/props", headers, timeout)
        if isinstance(props, dict) and isinstance(props.get("build_info"), str):
            return self._scrub(f"llama-server {props['build_info']}")
        spec = await asyncio.to_thread(_get_json, f"{root}/openapi.json", headers, timeout)
        info = spec.get("info") if isinstance(spec, dict) else None
        if isinstance(info, dict) and "llama.cpp python" in str(info.get("title", "")).lower():
            return self._scrub(f"llama-cpp-python {info.get('version')}")
        version = await asyncio.to_thread(_get_json, f"{root}/version", headers, timeout)
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            return self._scrub(f"vLLM {version['version']}")
        paths = spec.get("paths") if isinstance(spec, dict) else None
        if isinstance(paths, dict) and "/load_model" in paths and "/v1/chat/completions" in paths:
            # transformers serve: a FastAPI app with no title or version of its own, but its own routes.
            return "transformers serve"
        return None

    async def _probe_one(
        self, run: _Run, url_index: int, model_id: str, chat: bool
    ) -> tuple[_Reply | _Failure, bool]:
        """The probe's reply (or failure) on one URL, and whether that URL took the seed."""
        request = Request(model=model_id, prompt="Hi", max_tokens=1, chat=chat, temperature=0.0, seed=0)
        # Pinned to its URL: every URL must serve every model, so no failover here.
        outcome = await self._attempts(run, url_index, request, True, _Progress(), pinned=True)
        if isinstance(outcome, _Failure) and _rejects_seed(outcome):
            outcome = await self._attempts(run, url_index, request, False, _Progress(), pinned=True)
            return outcome, False
        return outcome, True

    def _served(
        self,
        model_id: str,
        replies: list[tuple[int, _Reply, bool]],
        listings: list[list[dict[str, Any]] | None],
        software: list[str | None],
        alignments: list[tuple[Alignment, bool]] | None,
    ) -> ServedModel:
        if len({reply.model for _, reply, _ in replies}) > 1:
            # Replicas must serve the same model, or the rows spread over them measure a mixture.
            names = ", ".join(f"{redact(self.settings.urls[u])} -> {reply.model}" for u, reply, _ in replies)
            raise EndpointError(
                self._scrub(
                    f"model {model_id!r} is not the same model on every URL ({names}); "
                    "give only URLs that serve the same weights"
                )
            )
        stated = (_quantization(listings[u], model_id) for u, _, _ in replies)
        first = replies[0][1]
        listing = listings[replies[0][0]]
        alignment = None
        if alignments:
            # Every URL must pass: a row may be sent to any of them.
            alignment = next((a for a, _ in alignments if not a.ok), alignments[0][0])
        return ServedModel(
            id=model_id,
            reported_model=first.model,
            system_fingerprint=first.system_fingerprint,
            accepts_seed=all(accepts for _, _, accepts in replies),
            quantization=next((q for q in stated if q is not None), None),
            server=software[replies[0][0]],
            listed=tuple(str(entry.get("id")) for entry in listing) if listing else None,
            alignment=alignment,
            prompt_logprobs=alignments is not None and all(ids for _, ids in alignments),
            probe_answer=first.text,
            entry=_entry(listing, model_id),
        )

    async def _list_models(self, target: _Target) -> list[dict[str, Any]] | None:
        """The server's /v1/models entries, or None where it has no such list (it is only ever a hint)."""
        try:
            page = await asyncio.wait_for(target.client.models.list(), self.settings.timeout_s)
            return [entry.to_dict() for entry in page.data]
        except Exception:
            return None

    def _diagnose(
        self, url_index: int, model_id: str, failure: _Failure, listing: list[dict[str, Any]] | None
    ) -> str:
        """The one line `EndpointError` says: where, which model, what happened, what to do."""
        where = f"endpoint {redact(self.settings.urls[url_index])} model {model_id!r}"
        ids = [str(entry.get("id")) for entry in listing or ()]
        if failure.status in (401, 403):
            todo = f"set ${self.settings.api_key_env} to a key this server accepts"
            return f"{where}: authentication refused ({_tried(failure)}); {todo}"
        if _unknown_model(failure) and ids and model_id not in ids:
            close = difflib.get_close_matches(model_id, ids, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            return f"{where}: not served there ({_tried(failure)}); {hint}its /v1/models lists: {_some(ids)}"
        if _unknown_model(failure) and not ids:
            # Without the list we cannot tell an unknown id from a URL that is not the /v1 base.
            todo = "check the model id, and that the URL is the /v1 base (its /v1/models did not answer)"
            return f"{where}: not found ({_tried(failure)}); {todo}"
        if failure.status is None and failure.next_url:
            todo = "check that the server is running and the URL ends in /v1"
            return f"{where}: unreachable ({_tried(failure)}); {todo}"
        return f"{where}: the probe request failed ({_tried(failure)}); check the server's log"

    # -- complete ----------------------------------------------------------------------------------------

    def complete(self, requests: Sequence[Request]) -> list[Answer]:
        """Every request's answer, in request order; failures are answers with an error, never exceptions."""
        if not requests:
            return []
        answers = _run_sync(lambda: self._complete_all(list(requests)))
        self.stats["requests"] += len(answers)
        self.stats["retries"] += sum(max(answer.attempts - 1, 0) for answer in answers)
        self.stats["failures"] += sum(answer.error is not None for answer in answers)
        return answers

    async def _complete_all(self, requests: list[Request]) -> list[Answer]:
        async with self._run() as run:
            # Round robin: request i starts on URL i mod n.
            return await asyncio.gather(
                *(self._answer(run, i, request) for i, request in enumerate(requests))
            )

    async def _answer(self, run: _Run, index: int, request: Request) -> Answer:
        send_seed = request.seed is not None and self._accepts_seed.get(request.model, False)
        progress = _Progress()
        outcome = await self._attempts(run, index % len(run.targets), request, send_seed, progress)
        if isinstance(outcome, _Failure):
            return Answer(text=None, error=outcome.summary, attempts=progress.attempts)
        error = None
        text, note = outcome.text, None
        # Neither is retried: the server did answer, and at temperature 0 it would answer the same again.
        refused = self._refused(request, outcome)
        if refused is not None:  # nothing of it is used: no text, no log-probabilities
            failure = _Failure(cause=refused, url=outcome.url, retryable=False, attempts=progress.attempts)
            return Answer(text=None, error=failure.summary, model=outcome.model, attempts=progress.attempts)
        if text is None:
            cause = f"the response has no text (finish_reason={outcome.finish_reason})"
            error = _Failure(
                cause=cause, url=outcome.url, retryable=False, attempts=progress.attempts
            ).summary
        elif len(text) > (allowed := _allowed_chars(request)):
            note = (
                f"{outcome.url}: the answer held {len(text):,} characters, more than max_tokens="
                f"{request.max_tokens} tokens hold ({MAX_CHARS_PER_TOKEN} characters a token): cut to "
                f"{allowed:,}"
            )
            text = text[:allowed]
        return Answer(
            text=text,
            note=note,
            error=error,
            model=outcome.model,
            system_fingerprint=outcome.system_fingerprint,
            finish_reason=outcome.finish_reason,
            attempts=progress.attempts,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            logprobs=outcome.logprobs,
            prompt_logprobs=outcome.prompt_logprobs,
        )

    def _refused(self, request: Request, reply: _Reply) -> str | None:
        """Why an answer cannot be used whatever it says, checked on every answer after the probe: it names
        another model than the one the probe's answer named for this id (a server behind one URL that swapped
        its model, a load balancer mixing two). None: usable. Unprobed ids are not checked."""
        if request.model not in self._reported:
            return None
        probed = self._reported[request.model]
        said = reply.model
        if said == probed or (said is not None and _same_model(request.model, said)):
            return None
        return (
            f"the answer came from model {said!r}, not {request.model!r} (the probe's answer named "
            f"{probed!r}): another model answered"
        )

    # -- the retry loop, shared by probe() and complete() ------------------------------------------------

    async def _attempts(
        self,
        run: _Run,
        url_index: int,
        request: Request,
        send_seed: bool,
        progress: _Progress,
        pinned: bool = False,
    ) -> _Reply | _Failure:
        """The request tried until it succeeds, fails for good or the deadline passes (`progress` counts)."""
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                self._attempt_loop(run, url_index, request, send_seed, progress, pinned),
                timeout=max(0.0, run.deadline - loop.time()),
            )
        except asyncio.TimeoutError:
            return self._deadline_failure(progress)

    async def _attempt_loop(
        self, run: _Run, url_index: int, request: Request, send_seed: bool, progress: _Progress, pinned: bool
    ) -> _Reply | _Failure:
        loop = asyncio.get_running_loop()
        while True:
            # The slot is held for one attempt only: a request waiting out its backoff leaves it to others.
            async with run.semaphore:
                if not pinned:
                    url_index = run.pick(url_index, loop.time())
                target = run.targets[url_index]
                progress.attempts += 1
                # Left set if the deadline cancels this attempt, so the failure names the attempt it cut.
                progress.sending_to = redact(target.url)
                try:
                    response = await asyncio.wait_for(
                        self._send(target.client, request, send_seed), self.settings.timeout_s
                    )
                    reply = _extract(response, request.chat)
                except Exception as exc:
                    failure = self._classify(exc, target.url)
                else:
                    # The success path too: a server or proxy may repeat the key (or a URL's credentials)
                    # in any string it returns, and these are stored, printed and cached.
                    return dataclasses.replace(
                        reply,
                        url=progress.sending_to,
                        text=self._scrub_some(reply.text),
                        model=self._scrub_some(reply.model),
                        system_fingerprint=self._scrub_some(reply.system_fingerprint),
                    )
                progress.sending_to = ""
            progress.last = failure
            if failure.next_url:
                run.down_until[url_index] = loop.time() + _DOWN_FOR_S
            if not failure.retryable or progress.attempts > self.settings.max_retries:
                return dataclasses.replace(failure, retryable=False, attempts=progress.attempts)
            if failure.next_url and not pinned:
                url_index = (url_index + 1) % len(run.targets)
            wait = failure.retry_after
            if wait is None:
                wait = _backoff(progress.attempts, self.settings)
            if loop.time() + wait >= run.deadline:
                # Sleeping would pass the deadline: this request is done now, not at the deadline.
                return self._deadline_failure(progress, wait=wait)
            await asyncio.sleep(wait)

    async def _send(self, client: AsyncOpenAI, request: Request, send_seed: bool) -> object:
        extra: dict[str, Any] = {"seed": request.seed} if send_seed else {}
        if request.stop:
            extra["stop"] = list(request.stop)
        body: dict[str, Any] = {}
        if request.prompt_logprobs is not None:
            body["prompt_logprobs"] = request.prompt_logprobs
        if request.continue_final:
            body |= {"continue_final_message": True, "add_generation_prompt": False}
        if body:
            extra["extra_body"] = body
        if request.chat:
            return await client.chat.completions.create(
                model=request.model,
                messages=list(request.messages or ({"role": "user", "content": str(request.prompt)},)),  # type: ignore[arg-type]
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                top_p=request.top_p,
                **extra,
            )
        if request.echo:
            extra["echo"] = True
        if request.logprobs is not None:
            extra["logprobs"] = request.logprobs
        prompt = list(request.prompt) if isinstance(request.prompt, tuple) else request.prompt
        return await client.completions.create(
            model=request.model,
            prompt=prompt,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            **extra,
        )

    def _classify(self, exc: Exception, url: str) -> _Failure:
        """What one failed attempt means: its one-line cause, and whether (and where) to try again."""
        import openai

        shown = redact(url)
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            message = self._scrub(_one_line(_server_message(exc.body, exc.message)))
            retryable = code in _RETRY_STATUSES or code >= 500
            return _Failure(
                cause=f"HTTP {code}: {message}",
                url=shown,
                retryable=retryable,
                status=code,
                server_message=message,
                retry_after=_retry_after(exc.response.headers) if retryable else None,
            )
        if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError)):
            cause = f"no response within {self.settings.timeout_s:g}s"
            return _Failure(cause=cause, url=shown, retryable=True, next_url=True)
        if isinstance(exc, openai.APIConnectionError):
            inner = exc.__cause__
            detail = f"{type(inner).__name__}: {inner}" if inner is not None else exc.message
            cause = self._scrub(_one_line(f"connection failed ({detail})"))
            return _Failure(cause=cause, url=shown, retryable=True, next_url=True)
        # JSONDecodeError (a ValueError) is what openai lets through for a body cut short.
        if isinstance(exc, (_Malformed, ValueError, openai.APIResponseValidationError)):
            cause = self._scrub(_one_line(f"malformed response ({type(exc).__name__}: {exc})"))
            return _Failure(cause=cause, url=shown, retryable=True)
        # Anything else is unexpected: it is this request's error, and the other requests keep their answers.
        cause = self._scrub(_one_line(f"unexpected {type(exc).__name__}: {exc}"))
        return _Failure(cause=cause, url=shown, retryable=False)

    def _deadline_failure(self, progress: _Progress, wait: float | None = None) -> _Failure:
        when = f"deadline of {self.settings.deadline_s:g}s passed"
        if wait is not None:
            when += f" before the next retry (a {wait:.3g}s wait)"
        elif progress.sending_to:
            when += f" while attempt {progress.attempts} waited for its answer"
        elif progress.attempts == 0:
            when += " before the request was sent (all connections were busy)"
        last = progress.last
        url = progress.sending_to or (last.url if last is not None else "")
        if last is None:
            return _Failure(cause=when, url=url, retryable=False, attempts=progress.attempts)
        return dataclasses.replace(
            last,
            cause=f"{when}; last error: {last.cause}",
            url=url,
            retryable=False,
            attempts=progress.attempts,
        )

    # -- plumbing ----------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _run(self) -> AsyncIterator[_Run]:
        """One client per URL for this call, closed at its end (a client's connections belong to its loop)."""
        import openai

        context = _default_ssl_context()
        targets = []
        for url in self.settings.urls:
            base, query = _split_query(url)
            http_client = openai.DefaultAsyncHttpxClient(verify=context) if context is not None else None
            client = openai.AsyncOpenAI(
                base_url=base,
                default_query=query or None,
                api_key=self._key,
                max_retries=0,  # ours, not its: see the module docstring
                timeout=self.settings.timeout_s,
                http_client=http_client,
            )
            targets.append(_Target(client, url))
        loop = asyncio.get_running_loop()
        try:
            yield _Run(
                targets, asyncio.Semaphore(self.settings.concurrency), loop.time() + self.settings.deadline_s
            )
        finally:
            await asyncio.gather(*(target.client.close() for target in targets))

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _scrub_some(self, text: str | None) -> str | None:
        return None if text is None else self._scrub(text)


def _allowed_chars(request: Request) -> int:
    """The most characters an answer to `request` can hold: its max_tokens at MAX_CHARS_PER_TOKEN each, and
    an echoed prompt (a text as sent; token ids at MAX_CHARS_PER_TOKEN each)."""
    allowed = max(request.max_tokens, 1) * MAX_CHARS_PER_TOKEN
    if request.echo:
        prompt = request.prompt
        allowed += len(prompt) if isinstance(prompt, str) else len(prompt) * MAX_CHARS_PER_TOKEN
    return allowed


def _generated_token(reply: _Reply) -> tuple[str | None, float | None]:
    """The token a one-token completion generated and its log-probability, from its logprobs."""
    found = reply.logprobs or {}
    content = found.get("content")
    if isinstance(content, list) and content and isinstance(content[-1], dict) and "tokens" not in found:
        # llama.cpp's llama-server answers /v1/completions with chat-style log-probabilities.
        last = content[-1]
        found = {"tokens": [last.get("token")], "token_logprobs": [last.get("logprob")]}
    tokens, values = found.get("tokens"), found.get("token_logprobs")
    if (
        not isinstance(tokens, list)
        or not isinstance(values, list)
        or not tokens
        or len(values) != len(tokens)
    ):
        return None, None
    value = values[-1]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return str(tokens[-1]), None
    return str(tokens[-1]), float(value)


def _listed(model_id: str, listing: list[dict[str, Any]]) -> str | None:
    """The listed id `model_id` names: itself, or Ollama's `name:latest` for `name`; None: not listed."""
    ids = {str(entry.get("id")) for entry in listing}
    for candidate in (model_id, f"{model_id}:latest"):
        if candidate in ids:
            return candidate
    return None


def _same_model(asked: str, reported: str) -> bool:
    """Whether an answer's model names the one asked for: the same id, a dated snapshot of it, or a path
    ending in it (servers that name a model by its file)."""
    return (
        reported == asked
        or reported.startswith(f"{asked}-")
        or reported.rstrip("/").endswith(f"/{asked}")
        or asked.rstrip("/").endswith(f"/{reported}")
    )


def _root(url: str) -> str:
    """The server's root from a /v1 base URL (its own endpoints, /props or /version, live there)."""
    base, _ = _split_query(url)
    base = base.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _get_json(url: str, headers: Mapping[str, str], timeout: float) -> object:
    """A GET's JSON body, or None whatever went wrong (these are only ever hints about the server)."""
    import json
    import urllib.request

    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=_default_ssl_context()) as response:
            return json.loads(response.read(1_000_000))
    except Exception:
        return None


def _tried(failure: _Failure) -> str:
    noun = "attempt" if failure.attempts == 1 else "attempts"
    return f"{failure.cause}; {failure.attempts} {noun}"


def _some(ids: list[str], limit: int = 12) -> str:
    """At most `limit` ids, so that a frontier API's hundred models keep the message one readable line."""
    shown = ", ".join(ids[:limit])
    return shown if len(ids) <= limit else f"{shown} and {len(ids) - limit} more"


def _rejects_seed(failure: _Failure) -> bool:
    return failure.status in (400, 422) and "seed" in failure.server_message.lower()


_UNKNOWN_MODEL = re.compile(
    r"model.*(not found|does not exist|not exist|unknown|invalid|not served)|unknown model"
    # transformers serve pinned to one model: "Server is pinned to '<folder>'; requested 'gpt-4o'."
    r"|pinned to .*; requested",
    re.I,
)


def _unknown_model(failure: _Failure) -> bool:
    if failure.status == 404:
        return True
    return failure.status in (400, 422) and bool(_UNKNOWN_MODEL.search(failure.server_message))


# The fields of a /v1/models entry that describe the model served, and stay put while it does: vLLM's root
# (the weights' folder or hub id), parent (a LoRA's base) and max_model_len, llama-server's GGUF `meta`,
# Ollama's `details`, LM Studio's quantization. Not `created`, nor vLLM's `permission` (a fresh id per call).
_ENTRY_FIELDS = ("root", "parent", "max_model_len", "meta", "details", "quantization", "quantization_level")


def _entry(listing: list[dict[str, Any]] | None, model_id: str) -> dict[str, Any] | None:
    """What the /v1/models entry of `model_id` says of the model (_ENTRY_FIELDS); None: it is not listed."""
    listed = _listed(model_id, listing or [])
    for entry in listing or ():
        if str(entry.get("id")) == listed:
            return {k: entry[k] for k in _ENTRY_FIELDS if k in entry}
    return None


def _quantization(listing: list[dict[str, Any]] | None, model_id: str) -> str | None:
    """The quantization a /v1/models entry states (LM Studio `quantization`, Ollama `details`, llama-server
    `meta.ftype`), if any."""
    for entry in listing or ():
        if entry.get("id") != model_id:
            continue
        details = entry.get("details")
        candidates = [entry.get("quantization"), entry.get("quantization_level")]
        if isinstance(details, dict):
            candidates.append(details.get("quantization_level"))
        meta = entry.get("meta")
        if isinstance(meta, dict) and isinstance(meta.get("ftype"), str) and meta["ftype"]:
            # llama.cpp's llama-server: the GGUF file's own general.file_type, as it read it.
            candidates.append(f"GGUF {meta['ftype']}")
        for candidate in candidates:
            if isinstance(candidate, str) and candidate:
                return candidate
    return None


@functools.cache
def _default_ssl_context() -> ssl.SSLContext | None:
    """The context the openai client would build for itself (its HTTP library's, honouring SSL_CERT_FILE)."""
    # Made once per process: loading the CA certificates takes 50 to 100 ms, every call makes one client per
    # URL, and a process may make many endpoints. An SSLContext may be shared by threads and event loops.
    # openai 3 sends through httpx2, openai 1 and 2 through httpx: both have create_ssl_context().
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        make = getattr(module, "create_ssl_context", None)
        if make is not None:
            context = make()
            return context if isinstance(context, ssl.SSLContext) else None
    return None


def _run_sync(make: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine to the end from synchronous code, whether or not this thread already runs a loop."""

    async def main() -> _T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    # Called from inside a running loop (a notebook, an async test): asyncio.run would refuse there.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()
