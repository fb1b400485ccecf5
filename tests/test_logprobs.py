"""Reading a server's echoed log-probabilities, and the check that decides whether they are used (issue 39).

The shapes are those the servers send (vLLM's legacy completion logprobs and its prompt_logprobs, llama-cpp-
python's misaligned ones, a server that ignores echo); the real servers answer in tests/test_served_*.py.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_llmeval.endpoint import _listed, _same_model
from pytest_llmeval.logprobs import (
    PROBE_PROMPT,
    EchoError,
    _covers,
    answer_nll,
    check_alignment,
    continuation_nll,
    parse_echo,
    parse_prompt_logprobs,
    perplexity_of,
    read_logprob,
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


# --- every answer checked where it enters (issue 53) -------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (5.0, "positive, a probability above 1"),
        (float("nan"), "is NaN"),
        (-1e300, "below -100000"),
        (float("-inf"), "below -100000"),
        ("-0.5", "not a number"),
        (True, "not a number"),
    ],
)
def test_a_log_probability_no_model_can_have_is_refused(value: Any, says: str) -> None:
    with pytest.raises(EchoError, match=says):
        read_logprob(value, "token 1")
    echo = legacy(TOKENS, [None, value, *VALUES[2:]])
    with pytest.raises(EchoError, match=says):
        parse_echo(echo, PROMPT, completion_tokens=0)


def test_rounding_above_zero_reads_as_zero_and_the_floor_is_allowed() -> None:
    assert read_logprob(5e-5, "t") == 0.0 and read_logprob(-9999.0, "t") == -9999.0
    assert read_logprob(None, "t") is None


def test_a_text_of_exact_zeros_is_no_measurement() -> None:
    with pytest.raises(EchoError, match="exactly 0"):
        parse_echo(legacy(TOKENS, [None] + [0.0] * 7), PROMPT, completion_tokens=0)
    # One certain token among real ones is a real value.
    assert parse_echo(legacy(TOKENS, [None, 0.0, *VALUES[2:]]), PROMPT, completion_tokens=0)
    entries = [
        None,
        {"5": {"logprob": 0.0, "decoded_token": "a"}},
        {"6": {"logprob": 0.0, "decoded_token": "b"}},
    ]
    with pytest.raises(EchoError, match="exactly 0"):
        parse_prompt_logprobs(entries)


@pytest.mark.parametrize(
    ("tokens", "values"),
    [
        (TOKENS[:2], VALUES[:2]),  # only the text's first two tokens
        (["Q", ":", " 2+2?"], [None, -1.0, -2.0]),  # three tokens for the whole text: they do not spell it
        (["<s>", "<s>", *TOKENS], [None, None, *VALUES]),  # two tokens before the text: one BOS at most
        (["Q", ":", " 2", "+", "2", "?", " A:x"], [*VALUES[:7]]),  # the last token runs past the text
    ],
)
def test_echoed_tokens_must_cover_exactly_the_text(tokens: list[str], values: list[float | None]) -> None:
    with pytest.raises(EchoError, match="do not spell"):
        parse_echo(legacy(tokens, values), PROMPT, completion_tokens=0)


def test_the_echo_must_count_what_the_usage_counts() -> None:
    assert len(parse_echo(legacy(TOKENS, VALUES), PROMPT, 0, None, prompt_tokens=8)) == 8
    with pytest.raises(EchoError, match="usage counts 9 prompt tokens"):
        parse_echo(legacy(TOKENS, VALUES), PROMPT, 0, None, prompt_tokens=9)
    entries = [None, {"5": {"logprob": -1.0, "decoded_token": "a"}}]
    with pytest.raises(EchoError, match="usage counts 3"):
        parse_prompt_logprobs(entries, prompt_tokens=3)


def test_bytes_of_a_character_split_over_tokens_cover_it() -> None:
    text = "日本語です"
    data = text.encode()
    # Byte-level tokens, each decoded alone as a server that decodes tokens one by one shows them.
    pieces = [data[0:2], data[2:4], data[4:9], data[9:15]]
    tokens = [p.decode("utf-8", errors="replace") for p in pieces]
    assert "\ufffd" in "".join(tokens)
    echoed = parse_echo(legacy(tokens, [None, -1.0, -2.0, -0.5]), text, completion_tokens=0)
    assert len(echoed) == 4
    with pytest.raises(EchoError, match="do not spell"):
        parse_echo(legacy(tokens[:3], [None, -1.0, -2.0]), text, completion_tokens=0)
    with pytest.raises(EchoError, match="do not spell"):  # a replacement character is never ASCII
        parse_echo(legacy(tokens, [None, -1.0, -2.0, -0.5]), "abcdefghijklmno", completion_tokens=0)


@given(
    text=st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 120), max_size=8),
)
def test_any_split_of_a_texts_bytes_covers_it_and_a_missing_piece_does_not(
    text: str, cuts: list[int]
) -> None:
    data = text.encode()
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
    tokens = [p.decode("utf-8", errors="replace") for p in pieces]
    assert _covers(tokens, text)
    # The last piece dropped where it ends in an ASCII character, which no run of U+FFFD stands for: the
    # text's end is no longer spelled. (A piece of bytes alone may be absorbed by the run before it: the
    # usage's token count catches that, test_the_echo_must_count_what_the_usage_counts.)
    if len(tokens) > 1 and tokens[-1][-1:].isascii() and tokens[-1]:
        assert not _covers(tokens[:-1], text)


def test_a_perplexity_no_float_holds_is_refused() -> None:
    assert perplexity_of(2.0, 2) == pytest.approx(2.718281828)
    with pytest.raises(EchoError, match="no perplexity a number can hold"):
        perplexity_of(1e6, 1)
