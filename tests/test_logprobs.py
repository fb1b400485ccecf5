"""Reading a server's echoed log-probabilities, and the check that decides whether they are used (issue 39).

The shapes are those the servers send (vLLM's legacy completion logprobs and its prompt_logprobs, llama-cpp-
python's misaligned ones, a server that ignores echo); the real servers answer in tests/test_served_*.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmeval.endpoint import _listed, _same_model
from pytest_llmeval.logprobs import (
    PROBE_PROMPT,
    EchoError,
    answer_nll,
    check_alignment,
    continuation_nll,
    parse_echo,
    parse_prompt_logprobs,
    rolling_nll,
)
from pytest_llmeval.roster import served_at


def legacy(
    tokens: list[str], values: list[float | None], top: list[dict[str, float] | None] | None = None
) -> dict[str, Any]:
    """A /v1/completions choice's logprobs as vLLM sends them: offsets cumulative over the token texts."""
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return {
        "tokens": tokens,
        "token_logprobs": values,
        "top_logprobs": top
        if top is not None
        else [None, *({t: v} for t, v in zip(tokens[1:], values[1:], strict=True))],
        "text_offset": offsets,
    }


PROMPT = "Q: 2+2? A:"
TOKENS = ["Q", ":", " 2", "+", "2", "?", " A", ":"]
VALUES: list[float | None] = [None, -1.0, -2.0, -0.5, -0.25, -0.125, -3.0, -0.1]


def test_the_prompt_is_the_echo_without_the_generated_tokens() -> None:
    echoed = parse_echo(legacy([*TOKENS, " 4"], [*VALUES, -0.2]), PROMPT, completion_tokens=1)
    assert echoed.tokens == tuple(TOKENS) and echoed.logprobs == tuple(VALUES)
    assert echoed.starts[:3] == (0, 1, 2)
    # Without usage, the tokens past the prompt's text are the generated ones.
    assert parse_echo(
        legacy([*TOKENS, " 4"], [*VALUES, -0.2]), PROMPT, completion_tokens=None
    ).tokens == tuple(TOKENS)


def test_an_ignored_echo_or_logprobs_is_an_error_not_a_number() -> None:
    with pytest.raises(EchoError, match="logprobs and echo were ignored"):
        parse_echo(None, PROMPT, completion_tokens=1)
    # echo ignored: only the generated token comes back.
    with pytest.raises(EchoError, match="echo was ignored"):
        parse_echo(legacy([" 4"], [-0.2]), PROMPT, completion_tokens=1)


def test_an_option_is_the_tokens_from_its_first_character() -> None:
    echoed = parse_echo(legacy(TOKENS, VALUES), PROMPT, completion_tokens=0)
    nll, count = continuation_nll(echoed, len("Q: 2+2?"))
    assert nll == pytest.approx(3.1) and count == 2


def test_a_token_across_the_boundary_is_refused_rather_than_guessed() -> None:
    # " A:" as one token: the option ":" cannot be told apart from the prompt's " A".
    merged = parse_echo(
        legacy(["Q", ":", " 2", "+", "2", "?", " A:"], VALUES[:7]), PROMPT, completion_tokens=0
    )
    with pytest.raises(EchoError, match="spans the end of the prompt"):
        continuation_nll(merged, len("Q: 2+2? A"))


def test_a_bos_before_the_text_makes_its_first_token_scored() -> None:
    with_bos = parse_echo(legacy(["<s>", *TOKENS], [None, -0.7, *VALUES[1:]]), PROMPT, completion_tokens=0)
    assert with_bos.starts[0] == -3 and with_bos.starts[1] == 0
    nll, count, first = rolling_nll(with_bos)
    assert nll == pytest.approx(0.7 + 6.975) and (count, first) == (8, True)
    plain = parse_echo(legacy(TOKENS, VALUES), PROMPT, completion_tokens=0)
    assert rolling_nll(plain)[1:] == (7, False)
    missing = parse_echo(legacy(TOKENS, [None, -1.0, None, *VALUES[3:]]), PROMPT, completion_tokens=0)
    with pytest.raises(EchoError, match="no log-probability for token 2"):
        rolling_nll(missing)


def probe_echo(last: float, best: float) -> Any:
    tokens = ["The", " capital", " of", " France", " is", " Paris"]
    values: list[float | None] = [None, -5.0, -0.4, -2.0, -0.9, last]
    top: list[dict[str, float] | None] = [
        None,
        {" capital": -5.0},
        {" of": -0.4},
        {" France": -2.0},
        {" is": -0.9},
    ]
    top.append({" Paris": last, " the": best})
    return parse_echo(legacy(tokens, values, top), PROBE_PROMPT + " Paris", completion_tokens=0)


def test_aligned_log_probabilities_pass_the_check() -> None:
    found = check_alignment(" Paris", -0.41, probe_echo(-0.4101, -2.3))
    assert found.ok and found.reason is None and found.echoed_logprob == -0.4101


def test_misaligned_log_probabilities_fail_with_the_numbers() -> None:
    # llama-cpp-python 0.3.36: the echoed token scored against the distribution after it.
    found = check_alignment(" Paris", -0.41, probe_echo(-10.46, -0.2))
    assert not found.ok
    assert found.reason == (
        "returns misaligned prompt log-probabilities: log p(' Paris' | 'The capital of France is') is -10.46 "
        "echoed but -0.41 generated"
    )
    # Equal numbers, but not the best of its position: the greedy token cannot be less likely than another.
    below = check_alignment(" Paris", -3.0, probe_echo(-3.0, -0.5))
    assert not below.ok and "below an alternative at -0.50" in str(below.reason)


def test_a_server_without_prompt_log_probabilities_fails_the_check() -> None:
    tokens = ["The", " capital", " of", " France", " is", " Paris"]
    none = parse_echo(legacy(tokens, [None] * 6, [None] * 6), PROBE_PROMPT + " Paris", completion_tokens=0)
    found = check_alignment(" Paris", -0.41, none)
    assert not found.ok and found.reason == (
        "returns log-probabilities for 0 of 6 prompt tokens (echo with logprobs does not score the prompt)"
    )
    assert "logprobs is ignored" in str(check_alignment(" Paris", None, none).reason)


def test_prompt_logprobs_give_ids_and_an_answer_under_the_servers_template() -> None:
    entries: list[Any] = [
        None,
        {
            "17": {"logprob": -1.5, "rank": 3, "decoded_token": "user"},
            "9": {"logprob": -0.1, "rank": 1, "decoded_token": "x"},
        },
        {"5": {"logprob": -0.2, "rank": 1, "decoded_token": "\n"}},
        {"88": {"logprob": -2.0, "rank": 4, "decoded_token": "yes"}},
    ]
    # vLLM gives the first position no entry: its token is unknown, and an answer at the end is still found.
    assert answer_nll(parse_prompt_logprobs(entries), "yes") == pytest.approx((2.0, 1))
    entries[0] = {"1": {"logprob": 0.0, "rank": 1, "decoded_token": "<|im_start|>"}}
    echoed = parse_prompt_logprobs(entries)
    assert echoed.ids == (1, 17, 5, 88) and echoed.tokens == ("<|im_start|>", "user", "\n", "yes")
    assert answer_nll(echoed, "yes") == pytest.approx((2.0, 1))
    with pytest.raises(EchoError, match="does not end with the option"):
        answer_nll(echoed, "no")


def test_echo_ids_are_read_from_prompt_logprobs() -> None:
    prompt_logprobs = [
        None,
        *(
            {str(i + 10): {"logprob": v, "decoded_token": t}}
            for i, (t, v) in enumerate(zip(TOKENS[1:], VALUES[1:], strict=True))
        ),
    ]
    prompt_logprobs[0] = {"3": {"logprob": None, "decoded_token": "Q"}}
    echoed = parse_echo(legacy(TOKENS, VALUES), PROMPT, 0, prompt_logprobs)
    assert echoed.ids == (3, *range(10, 17))


def test_who_serves_what() -> None:
    assert served_at("smol@http://127.0.0.1:8080/v1") == ("smol", "http://127.0.0.1:8080/v1")
    assert served_at("org/model@https://u:p@host/v1") == ("org/model", "https://u:p@host/v1")
    assert served_at("adapters/date-iso") == ("adapters/date-iso", None)
    listing = [{"id": "smol"}, {"id": "llama3:latest"}]
    assert _listed("smol", listing) == "smol" and _listed("llama3", listing) == "llama3:latest"
    assert _listed("gpt-4o", listing) is None
    assert _same_model("gpt-4o", "gpt-4o-2024-08-06") and not _same_model("gpt-4o", "smol")


# What the servers that run here answered (issue 39's measurements, tests/test_real_servers.py runs them).
LLAMA_CPP_PYTHON_ECHO = {
    # The echo of "The capital of France is Paris" (max_tokens 1): the generated "." is in usage, not in the
    # arrays, and each token is scored against the distribution after it (" Paris" at -8.45, where its
    # generated log-probability is -0.26).
    "text_offset": [0, 3, 11, 14, 21, 24],
    "token_logprobs": [None, -9.5999, -10.4624, -11.2255, -11.7948, -8.4526],
    "tokens": ["The", " capital", " of", " France", " is", " Paris"],
    "top_logprobs": [
        None,
        {" of": -0.41},
        {" the": -1.98},
        {" is": -0.43},
        {" Paris": -0.2644},
        {".": -0.37},
    ],
}


def test_llama_cpp_pythons_answer_is_read_whole_and_found_misaligned() -> None:
    echoed = parse_echo(LLAMA_CPP_PYTHON_ECHO, PROBE_PROMPT + " Paris", completion_tokens=1)
    assert len(echoed) == 6  # the usage's generated token is not among the arrays: nothing is cut
    found = check_alignment(" Paris", -0.264419287443161, echoed)
    assert not found.ok and "is -8.45 echoed but -0.26 generated" in str(found.reason)


def test_llama_servers_chat_style_log_probabilities_say_the_echo_was_ignored() -> None:
    content = {"content": [{"id": 7042, "token": " Paris", "logprob": -0.2589, "top_logprobs": []}]}
    with pytest.raises(
        EchoError, match="echo is ignored: log-probabilities come back for the generated tokens only"
    ):
        parse_echo(content, PROBE_PROMPT + " Paris", completion_tokens=1)
