"""The OpenAI-compatible client (pytest_llmeval.endpoint) against a real local server that injects faults.

Every test talks HTTP to `fault_server.FaultServer` through the real `openai` package: what is checked is what
the client does with real status codes, headers, cut bodies, dropped sockets and silences, in bounded time
(timeouts of half a second, backoffs of milliseconds).
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fault_server import (
    Fault,
    FaultServer,
    Gauge,
    dead_url,
    drop,
    hang,
    malformed,
    no_choices,
    no_text,
    not_json,
    status,
)
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.endpoint import (
    Answer,
    Endpoint,
    EndpointError,
    EndpointSettings,
    Request,
    ServedModel,
    redact,
    retry_after_seconds,
)

# Timeouts of a quarter to half a second, and the bound on how long a fault takes: beside a busy worker a
# healthy answer can take that long, so make test runs this file alone, after the parallel run.
pytestmark = pytest.mark.serial

# A key that must never be printed: every message, answer, repr and counter is searched for it.
SENTINEL = "sk-SENTINEL-never-print-me-7f3a9c"


def fast(*urls: str, **overrides: Any) -> EndpointSettings:
    """Settings that make every fault end within a second or two."""
    values: dict[str, Any] = {
        "timeout_s": 0.5,
        "deadline_s": 20.0,
        "max_retries": 3,
        "backoff_s": 0.01,
        "max_backoff_s": 0.05,
        "concurrency": 4,
    }
    values.update(overrides)
    return EndpointSettings(urls=tuple(urls), **values)


def rows(n: int, prefix: str = "row", **fields: Any) -> list[Request]:
    return [Request(model="tiny", prompt=f"{prefix}-{i}", max_tokens=8, **fields) for i in range(n)]


def assert_answered(answers: list[Answer], requests: list[Request]) -> None:
    """Each answer is its own request's (the server answers the prompt reversed)."""
    assert [a.text for a in answers] == [r.prompt[::-1] for r in requests]
    assert all(a.error is None for a in answers)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


@pytest.fixture
def second() -> Iterator[FaultServer]:
    with FaultServer() as running:
        yield running


# -- answers, order, parameters ----------------------------------------------------------------------------


def test_answers_keep_request_order_under_concurrency() -> None:
    # Every third request is slow, so answers come back out of order and must be put back in order.
    def delay(prompt: str) -> float:
        return 0.05 if int(prompt.rsplit("-", 1)[1]) % 3 == 0 else 0.0

    with FaultServer(delay_s=delay) as server:
        requests = rows(30)
        answers = Endpoint(fast(server.url, concurrency=8)).complete(requests)
        finished_early = server.max_in_flight
    assert_answered(answers, requests)
    assert all(a.model == "served/tiny" for a in answers)
    assert all(a.system_fingerprint == "fp_fault_server" and a.finish_reason == "stop" for a in answers)
    assert all(a.attempts == 1 for a in answers)
    assert finished_early > 1  # requests really overlapped


def test_chat_and_raw_prompts_go_to_their_routes_with_every_sampling_parameter(server: FaultServer) -> None:
    requests = [
        Request(model="tiny", prompt="as chat", max_tokens=5, temperature=0.7, top_p=0.9, seed=3),
        Request(model="tiny", prompt="as raw", max_tokens=6, chat=False),
    ]
    answers = Endpoint(fast(server.url)).complete(requests)
    assert_answered(answers, requests)
    chat, raw = server.posts("as chat")[0], server.posts("as raw")[0]
    assert chat.path == "/v1/chat/completions"
    assert chat.body["messages"] == [{"role": "user", "content": "as chat"}]
    assert (chat.body["max_tokens"], chat.body["temperature"], chat.body["top_p"]) == (5, 0.7, 0.9)
    assert raw.path == "/v1/completions"
    assert raw.body["prompt"] == "as raw" and "messages" not in raw.body
    assert (raw.body["max_tokens"], raw.body["temperature"], raw.body["top_p"]) == (6, 0.0, 1.0)
    # No probe() was made: nobody knows whether the server takes a seed, so none is sent.
    assert "seed" not in chat.body


def test_empty_batch() -> None:
    endpoint = Endpoint(fast(dead_url()))
    assert endpoint.complete([]) == []
    assert endpoint.stats == {"requests": 0, "retries": 0, "failures": 0}


# -- concurrency and several URLs --------------------------------------------------------------------------


def test_concurrency_bound_is_respected() -> None:
    with FaultServer(delay_s=0.05) as server:
        Endpoint(fast(server.url, concurrency=3)).complete(rows(24))
        assert server.max_in_flight == 3  # never more, and the bound is actually used


def test_concurrency_bound_holds_over_all_urls_together() -> None:
    shared = Gauge()
    with FaultServer(delay_s=0.05, gauge=shared) as one, FaultServer(delay_s=0.05, gauge=shared) as two:
        Endpoint(fast(one.url, two.url, concurrency=4)).complete(rows(24))
    assert shared.peak == 4


def test_requests_spread_over_several_urls(server: FaultServer, second: FaultServer) -> None:
    requests = rows(20)
    answers = Endpoint(fast(server.url, second.url)).complete(requests)
    assert_answered(answers, requests)
    assert len(server.posts()) == len(second.posts()) == 10


def test_a_dead_url_fails_over_to_the_live_one(server: FaultServer) -> None:
    requests = rows(10)
    endpoint = Endpoint(fast(dead_url(), server.url, max_retries=1))
    answers = endpoint.complete(requests)
    assert_answered(answers, requests)
    # Only even rows start on the dead URL; each of them that did went on to the live one.
    assert all(a.attempts == 1 for a in answers[1::2])
    assert {a.attempts for a in answers[0::2]} <= {1, 2} and answers[0].attempts == 2
    assert len(server.posts()) == 10
    assert endpoint.stats["failures"] == 0


def test_a_url_that_failed_is_passed_over_for_the_next_requests() -> None:
    with FaultServer() as hung, FaultServer() as live:
        hung.script.extend([hang(5)] * 10)
        requests = rows(8)
        started = time.monotonic()
        # One at a time, so the order is known: row 0 meets the silence, and nothing is sent there again.
        answers = Endpoint(fast(hung.url, live.url, concurrency=1, timeout_s=0.3)).complete(requests)
        elapsed = time.monotonic() - started
        assert len(hung.posts()) == 1
    assert_answered(answers, requests)
    assert [a.attempts for a in answers] == [2] + [1] * 7
    assert elapsed < 1.2  # not four more timeouts of 0.3 s on the even rows


def test_a_retry_after_an_error_status_stays_on_its_url(server: FaultServer, second: FaultServer) -> None:
    server.fail("row-0", status(503))
    answers = Endpoint(fast(server.url, second.url)).complete(rows(1))
    assert answers[0].text == "0-wor"
    assert len(server.posts("row-0")) == 2 and second.posts() == []


# -- retries -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        status(500),
        status(502),
        status(503),
        status(504),
        status(429),
        status(408),
        status(409),
        hang(5),
        drop(),
        malformed(),
        not_json(),
        no_choices(),
    ],
    ids=lambda fault: f"{fault.kind}-{fault.status}",
)
def test_transient_faults_are_retried(server: FaultServer, fault: Fault) -> None:
    server.fail("row-1", fault, fault)
    requests = rows(3)
    started = time.monotonic()
    answers = Endpoint(fast(server.url, timeout_s=0.25)).complete(requests)
    assert time.monotonic() - started < 2.0
    assert_answered(answers, requests)
    assert [a.attempts for a in answers] == [1, 3, 1]
    assert len(server.posts("row-1")) == 3


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (status(500, "the GPU fell off the bus"), "HTTP 500: the GPU fell off the bus"),
        (hang(5), "no response within 0.25s"),
        (drop(), "connection failed"),
        (malformed(), "malformed response (JSONDecodeError"),
        (not_json(), "malformed response"),
        (no_choices(), "malformed response"),
    ],
    ids=lambda value: value.kind if isinstance(value, Fault) else "",
)
def test_a_fault_that_persists_is_that_rows_error(server: FaultServer, fault: Fault, says: str) -> None:
    server.fail("row-1", *[fault] * 3)
    endpoint = Endpoint(fast(server.url, max_retries=2, timeout_s=0.25))
    answers = endpoint.complete(rows(3))
    assert [a.text for a in answers] == ["0-wor", None, "2-wor"]
    error = answers[1].error
    assert error is not None and says in error
    assert server.url in error and "3 attempts" in error and "\n" not in error
    assert answers[1].attempts == 3 and len(server.posts("row-1")) == 3
    assert endpoint.stats == {"requests": 3, "retries": 2, "failures": 1}


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(server: FaultServer, code: int) -> None:
    server.fail("row-0", status(code, "you asked wrongly"))
    answers = Endpoint(fast(server.url)).complete(rows(2))
    assert answers[0].text is None and answers[0].attempts == 1
    assert answers[0].error == f"HTTP {code}: you asked wrongly ({server.url}; 1 attempt)"
    assert len(server.posts("row-0")) == 1
    assert answers[1].text == "1-wor"


def test_a_prompt_longer_than_the_context_is_its_rows_error_at_once() -> None:
    with FaultServer(max_prompt_chars=20) as server:
        requests = [
            Request("tiny", "short", 4),
            Request("tiny", "x" * 50, 4),
            Request("tiny", "also short", 4),
        ]
        answers = Endpoint(fast(server.url)).complete(requests)
        assert len(server.posts("x" * 50)) == 1
    assert [a.text for a in answers] == ["trohs", None, "trohs osla"]
    assert answers[1].error is not None and "maximum context length is 20" in answers[1].error


def test_a_response_without_text_is_an_error_not_an_empty_answer(server: FaultServer) -> None:
    server.fail("row-0", no_text())
    answers = Endpoint(fast(server.url)).complete(rows(1))
    assert answers[0].text is None and answers[0].attempts == 1
    assert answers[0].error is not None and "no text" in answers[0].error
    assert answers[0].model == "served/tiny"  # what the server did say is kept
    assert len(server.posts("row-0")) == 1


@pytest.mark.parametrize("header", ["seconds", "http-date"])
def test_retry_after_is_honoured(server: FaultServer, header: str) -> None:
    if header == "seconds":
        value, least = "1", 1.0
    else:
        # HTTP dates have whole seconds: two seconds ahead is between one and two seconds from now.
        value, least = email.utils.formatdate(time.time() + 2, usegmt=True), 1.0
    server.fail("row-0", status(429, "slow down", {"Retry-After": value}))
    started = time.monotonic()
    answers = Endpoint(fast(server.url)).complete(rows(1))
    elapsed = time.monotonic() - started
    assert answers[0].text == "0-wor" and answers[0].attempts == 2
    assert least <= elapsed < least + 1.5
    first, retry = server.posts("row-0")
    assert retry.at - first.at >= least


def test_retry_after_on_503_is_honoured_too(server: FaultServer) -> None:
    server.fail("row-0", status(503, "loading the model", {"Retry-After": "0.4"}))
    started = time.monotonic()
    answers = Endpoint(fast(server.url)).complete(rows(1))
    assert answers[0].text == "0-wor"
    assert time.monotonic() - started >= 0.4


# -- the deadline ------------------------------------------------------------------------------------------


def test_the_deadline_ends_every_request_in_bounded_time(server: FaultServer) -> None:
    server.script.extend([hang(30)] * 20)
    endpoint = Endpoint(fast(server.url, timeout_s=10.0, deadline_s=0.6, concurrency=2))
    started = time.monotonic()
    answers = endpoint.complete(rows(6))
    elapsed = time.monotonic() - started
    assert 0.6 <= elapsed < 2.0
    assert all(
        a.text is None and a.error is not None and "deadline of 0.6s passed" in a.error for a in answers
    )
    errors = [a.error or "" for a in answers]
    # Two were cut in flight; the other four never had a connection to go out on.
    assert sum("while attempt 1 waited" in e for e in errors) == 2
    assert sum("before the request was sent" in e for e in errors) == 4
    assert endpoint.stats["failures"] == 6


def test_a_retry_after_past_the_deadline_ends_the_request_at_once(server: FaultServer) -> None:
    server.fail("row-0", status(429, "come back in a minute", {"Retry-After": "60"}))
    started = time.monotonic()
    answers = Endpoint(fast(server.url, deadline_s=5.0)).complete(rows(2))
    assert time.monotonic() - started < 2.5  # neither the minute nor the deadline was slept through
    error = answers[0].error
    assert error is not None and "deadline of 5s passed before the next retry (a 60s wait)" in error
    assert "HTTP 429: come back in a minute" in error
    assert answers[1].text == "1-wor"


# -- calling conventions -----------------------------------------------------------------------------------


def test_complete_runs_again_from_a_thread_and_from_inside_a_running_loop(server: FaultServer) -> None:
    endpoint = Endpoint(fast(server.url))
    requests = rows(3)
    assert_answered(endpoint.complete(requests), requests)
    assert_answered(endpoint.complete(requests), requests)

    from_thread: list[list[Answer]] = []
    thread = threading.Thread(target=lambda: from_thread.append(endpoint.complete(requests)))
    thread.start()
    thread.join(timeout=10)
    assert_answered(from_thread[0], requests)

    async def inside_a_loop() -> list[Answer]:
        return endpoint.complete(requests)

    assert_answered(asyncio.run(inside_a_loop()), requests)
    assert endpoint.stats == {"requests": 12, "retries": 0, "failures": 0}


def test_the_key_comes_from_the_named_environment_variable(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMEVAL_TEST_KEY", "key-from-env")
    Endpoint(fast(server.url, api_key_env="LLMEVAL_TEST_KEY")).complete(rows(1))
    assert server.posts()[-1].headers["authorization"] == "Bearer key-from-env"
    monkeypatch.delenv("LLMEVAL_TEST_KEY")
    Endpoint(fast(server.url, api_key_env="LLMEVAL_TEST_KEY")).complete(rows(1))
    assert server.posts()[-1].headers["authorization"] == "Bearer EMPTY"


def test_a_query_in_the_url_reaches_the_server_and_is_redacted(server: FaultServer) -> None:
    # openai would join "/v1?x=y" and "chat/completions" into "/v1/?x=ychat/completions": the query is moved.
    endpoint = Endpoint(fast(server.url + "?api-key=url-secret-42&deployment=a"))
    answers = endpoint.complete(rows(1))
    assert answers[0].text == "0-wor"
    assert server.posts()[0].path == "/v1/chat/completions?api-key=url-secret-42&deployment=a"
    assert endpoint.public_urls() == [server.url + "?api-key=***&deployment=a"]


# -- probe -------------------------------------------------------------------------------------------------


def test_probe_reports_what_is_served_and_unlocks_seeds() -> None:
    with FaultServer(models=("tiny", "other"), quantization="Q4_K_M") as server:
        endpoint = Endpoint(fast(server.url))
        served = endpoint.probe(["tiny", "other"], scored=["tiny"])
        # The probe's check of prompt log-probabilities, on the scored ids only: this server sends none.
        alignment = served["tiny"].alignment
        assert alignment is not None and not alignment.ok
        assert alignment.reason == (
            f"the server at {server.url} returns no log-probability for a generated token "
            "(logprobs is ignored)"
        )
        assert served["other"].alignment is None
        assert {model: dataclasses.replace(found, alignment=None) for model, found in served.items()} == {
            model: ServedModel(
                id=model,
                reported_model=f"served/{model}",
                system_fingerprint="fp_fault_server",
                accepts_seed=True,
                quantization="Q4_K_M",
                listed=("tiny", "other"),
                # The probe's greedy answer (the fault server reverses "Hi"), and what /v1/models says.
                probe_answer="iH",
                entry={"quantization": "Q4_K_M"},
            )
            for model in ("tiny", "other")
        }
        probe = server.posts()[0]
        assert (probe.body["max_tokens"], probe.body["temperature"], probe.body["seed"]) == (1, 0.0, 0)
        endpoint.complete([Request("tiny", "seeded", 4, seed=7), Request("tiny", "unseeded", 4)])
        assert server.posts("seeded")[0].body["seed"] == 7
        assert "seed" not in server.posts("unseeded")[0].body


def test_probe_asks_every_url_and_is_retried_like_any_request(
    server: FaultServer, second: FaultServer
) -> None:
    second.fail("Hi", status(503), drop())
    served = Endpoint(fast(server.url, second.url)).probe(["tiny"])
    assert served["tiny"].reported_model == "served/tiny"
    # One probe request each (the second retried twice), then the check of its log-probabilities on each.
    assert len(server.posts()) == 2 and len(second.posts()) == 4
    assert served["tiny"].quantization is None  # these servers do not say


def test_probe_can_use_raw_completions(server: FaultServer) -> None:
    Endpoint(fast(server.url)).probe(["tiny"], chat=False)
    assert server.posts()[0].path == "/v1/completions"


def test_a_server_that_rejects_seeds_is_probed_again_without_and_never_sent_one() -> None:
    with FaultServer(reject_seed=True) as server:
        endpoint = Endpoint(fast(server.url))
        served = endpoint.probe(["tiny"])
        assert served["tiny"].accepts_seed is False
        assert served["tiny"].reported_model == "served/tiny"
        answers = endpoint.complete(rows(3, seed=5))
        assert all(a.error is None for a in answers)
        assert all("seed" not in post.body for post in server.posts()[2:])


def test_seeds_are_sent_only_when_every_url_takes_them(server: FaultServer) -> None:
    with FaultServer(reject_seed=True) as refusing:
        endpoint = Endpoint(fast(server.url, refusing.url))
        assert endpoint.probe(["tiny"])["tiny"].accepts_seed is False
        endpoint.complete(rows(2, seed=5))
    assert "seed" not in server.posts()[-1].body


def one_line_error(endpoint: Endpoint, models: list[str]) -> str:
    with pytest.raises(EndpointError) as raised:
        endpoint.probe(models)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_probe_of_an_unreachable_url_stops_the_run(server: FaultServer) -> None:
    dead = dead_url()
    message = one_line_error(Endpoint(fast(server.url, dead, max_retries=1)), ["tiny"])
    assert message.startswith(f"endpoint {dead} model 'tiny': unreachable (connection failed")
    assert "2 attempts" in message and "check that the server is running" in message


def test_probe_of_a_silent_url_stops_the_run(server: FaultServer) -> None:
    server.script.extend([hang(5)] * 3)
    message = one_line_error(Endpoint(fast(server.url, max_retries=1, timeout_s=0.3)), ["tiny"])
    assert "unreachable (no response within 0.3s; 2 attempts)" in message


def test_probe_of_an_unknown_model_lists_the_served_ids() -> None:
    with FaultServer(models=("tiny", "other")) as server:
        message = one_line_error(Endpoint(fast(server.url)), ["tiny", "tinny"])
    assert message == (
        f"endpoint {server.url} model 'tinny': not served there "
        "(HTTP 404: The model `tinny` does not exist.; 1 attempt); "
        "did you mean 'tiny'? its /v1/models lists: tiny, other"
    )


def test_a_long_model_list_is_cut_short() -> None:
    with FaultServer(models=[f"model-{i:02}" for i in range(30)]) as server:
        message = one_line_error(Endpoint(fast(server.url)), ["gpt-x"])
    listed = ", ".join(f"model-{i:02}" for i in range(12))
    assert message.endswith(f"; its /v1/models lists: {listed} and 18 more")
    assert "did you mean" not in message


def test_probe_of_an_unknown_model_where_the_server_lists_nothing() -> None:
    with FaultServer(list_models=False) as server:
        message = one_line_error(Endpoint(fast(server.url)), ["tinny"])
    assert "model 'tinny': not found (HTTP 404: The model `tinny` does not exist.; 1 attempt)" in message
    assert "that the URL is the /v1 base (its /v1/models did not answer)" in message


def test_probe_of_a_url_that_is_not_the_v1_base(server: FaultServer) -> None:
    message = one_line_error(Endpoint(fast(server.url.removesuffix("/v1"))), ["tiny"])
    assert "not found (HTTP 404: no route /chat/completions; 1 attempt)" in message
    assert "the URL is the /v1 base" in message


@pytest.mark.parametrize("code", [401, 403])
def test_probe_refused_credentials_stop_the_run_without_the_key(code: int) -> None:
    with FaultServer() as server:
        server.fail("Hi", status(code, f"Incorrect API key provided: {SENTINEL}"))
        settings = fast(server.url, api_key_env="MY_SERVER_KEY")
        message = one_line_error(Endpoint(settings, api_key=SENTINEL), ["tiny"])
    assert SENTINEL not in message
    assert f"authentication refused (HTTP {code}: Incorrect API key provided: ***; 1 attempt)" in message
    assert "set $MY_SERVER_KEY to a key this server accepts" in message


def test_probe_refuses_urls_that_serve_different_models(server: FaultServer) -> None:
    with FaultServer(report_model_as="someone/else") as other:
        message = one_line_error(Endpoint(fast(server.url, other.url)), ["tiny"])
    assert "not the same model on every URL" in message
    assert f"{server.url} -> served/tiny" in message and f"{other.url} -> someone/else" in message


def test_a_server_that_lists_nothing_must_answer_as_the_model_asked_for() -> None:
    """Without a /v1/models list, the answer's own `model` is the only word on what served it: another name
    stops the run; the id itself, a dated snapshot of it, or a path ending in it is the model asked for."""
    with FaultServer(models=("gpt-4o",), list_models=False, report_model_as="smol") as swapped:
        message = one_line_error(Endpoint(fast(swapped.url)), ["gpt-4o"])
    assert message == (
        f"endpoint {swapped.url} model 'gpt-4o': the answer came from model 'smol', and the server lists no "
        "models to tell what it serves; ask for the id it answers as"
    )
    for reported in ("gpt-4o", "gpt-4o-2024-08-06", "/models/gpt-4o"):
        with FaultServer(models=("gpt-4o",), list_models=False, report_model_as=reported) as honest:
            served = Endpoint(fast(honest.url)).probe(["gpt-4o"], scored=[])
            assert served["gpt-4o"].reported_model == reported and served["gpt-4o"].listed is None


# -- the key never shows -----------------------------------------------------------------------------------


def test_the_key_never_appears_in_messages_answers_repr_or_stats() -> None:
    seen: list[str] = []
    with FaultServer(api_key=SENTINEL) as server, FaultServer(api_key="another-key") as refusing:
        url = server.url + f"?api_key={SENTINEL}-in-url"
        endpoint = Endpoint(fast(url, max_retries=1), api_key=SENTINEL)
        served = endpoint.probe(["tiny"])
        server.fail("row-0", *[status(500, f"backend rejected key {SENTINEL}")] * 2)
        server.fail("row-1", status(400, f"bad request from {SENTINEL}; url {url}"))
        server.fail("row-2", drop(), drop())
        server.fail("row-3", malformed(), malformed())
        server.fail("row-4", no_text())
        answers = endpoint.complete(rows(6))
        # The key was really used: the test would prove nothing if it never left the process.
        assert all(post.headers["authorization"] == f"Bearer {SENTINEL}" for post in server.posts())
        assert [a.error is None for a in answers] == [False] * 5 + [True]
        seen += [repr(answer) for answer in answers] + [repr(served), repr(endpoint), str(endpoint.stats)]
        seen += endpoint.public_urls()

        for failing in (
            Endpoint(fast(refusing.url), api_key=SENTINEL),  # the server says the key back
            Endpoint(fast(dead_url(), max_retries=0), api_key=SENTINEL),
            Endpoint(fast(url, max_retries=0), api_key=SENTINEL),
        ):
            with pytest.raises(EndpointError) as raised:
                failing.probe(["tiny", "missing"])
            seen += [str(raised.value), repr(raised.value), repr(failing)]
    assert "***" in " ".join(seen)  # the echoed key was replaced, not the message dropped
    for text in seen:
        assert SENTINEL not in text, text


# -- redact and Retry-After --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("http://user:pa55@host:8000/v1", "http://host:8000/v1"),
        ("https://token@host/v1", "https://host/v1"),
        ("http://u:p@[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("https://h/v1?api_key=abc&x=1", "https://h/v1?api_key=***&x=1"),
        ("https://h/v1?api-key=abc", "https://h/v1?api-key=***"),
        ("https://h/v1?key=abc&token=def", "https://h/v1?key=***&token=***"),
        ("https://h/v1?X-API-KEY=abc", "https://h/v1?X-API-KEY=***"),
        ("https://h/v1?access_token=abc&sig=def", "https://h/v1?access_token=***&sig=***"),
        ("https://h/v1?api-version=2024-06-01", "https://h/v1?api-version=2024-06-01"),
        ("https://h/v1?flag&key=", "https://h/v1?flag&key=***"),
        ("http://a:b@h/v1?key=s#frag", "http://h/v1?key=***#frag"),
    ],
)
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_redact_of_an_unparseable_url_keeps_no_secret() -> None:
    shown = redact("http://user:secret@[::1/v1?key=secret")
    assert "secret" not in shown


_lower = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
_secret = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=4, max_size=12).map(lambda s: "SECRET" + s)
_secret_name = st.sampled_from(
    ["key", "api_key", "api-key", "apikey", "token", "access_token", "sig", "secret"]
)


@given(
    host=_lower,
    port=st.none() | st.integers(1, 65535),
    path=st.lists(_lower, max_size=3),
    user=st.none() | _lower,
    password=st.none() | _secret,
    params=st.lists(
        st.tuples(_secret_name, _secret) | st.tuples(_lower.filter(lambda n: "key" not in n), _lower),
        max_size=4,
    ),
)
def test_redact_property(
    host: str,
    port: int | None,
    path: list[str],
    user: str | None,
    password: str | None,
    params: list[tuple[str, str]],
) -> None:
    userinfo = "" if user is None else user + ("" if password is None else f":{password}") + "@"
    netloc = host + ("" if port is None else f":{port}")
    query = "&".join(f"{name}={value}" for name, value in params)
    url = f"https://{userinfo}{netloc}/{'/'.join(path)}" + (f"?{query}" if query else "")
    shown = redact(url)
    assert "SECRET" not in shown  # no password, no key-like value survives
    assert netloc in shown and "@" not in shown
    assert redact(shown) == shown  # what is shown is already safe to show
    if user is None and not any(value.startswith("SECRET") for _, value in params):
        assert shown == url  # nothing secret: nothing changed


def test_retry_after_values() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds("3", now) == 3.0
    assert retry_after_seconds(" 0.25 ", now) == 0.25
    assert retry_after_seconds(email.utils.formatdate(now + 30, usegmt=True), now) == 30.0
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    for invalid in (None, "", "soon", "-1", "inf", "nan"):
        assert retry_after_seconds(invalid, now) is None


# -- settings and imports ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"urls": ()}, "urls is empty"),
        ({"urls": "http://h/v1"}, "not one string"),
        ({"urls": ("h:8000/v1",)}, "is not an http(s) URL"),
        ({"urls": ("ftp://u:pw@h/v1",)}, "'ftp://h/v1' is not an http(s) URL"),
        ({"urls": ("http://h/v1",), "concurrency": 0}, "concurrency"),
        ({"urls": ("http://h/v1",), "max_retries": -1}, "max_retries"),
        ({"urls": ("http://h/v1",), "timeout_s": 0}, "timeout_s"),
        ({"urls": ("http://h/v1",), "deadline_s": -1}, "deadline_s"),
        ({"urls": ("http://h/v1",), "backoff_s": -1}, "backoff_s"),
    ],
)
def test_settings_are_checked(settings: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        EndpointSettings(**settings)


def test_importing_the_module_imports_no_client_library() -> None:
    code = (
        "import sys, pytest_llmeval; before = set(sys.modules); import pytest_llmeval.endpoint; "
        "heavy = ('openai', 'httpx2', 'torch', 'pytest'); "
        "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
