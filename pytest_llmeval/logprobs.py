"""Log-likelihoods from an OpenAI-compatible server's echoed prompts: reading them, and checking them first.

A server that runs `/v1/completions` with `echo=true` and `logprobs` returns each prompt token's
log-probability given the tokens before it (vLLM, and lm-evaluation-harness's `local-completions` reads them
so). Many servers answer that request with numbers that are wrong without saying so: llama-cpp-python's
server scores each token against the distribution after it, llama.cpp's `llama-server` returns none for the
prompt, `transformers serve` ignores both parameters. So nothing here is trusted before `check_alignment`
has passed on the same server and model: the log-probability a server reports for the token it generates
greedily must equal the one it reports for that token echoed at the end of the prompt, and be the largest of
that position's alternatives.

Where a continuation begins (multiple choice: each option after the row's prompt) is read off the server's
own tokens, never by tokenising again with another tokenizer: the tokens' texts, joined, spell the prompt
(after any token the server put before it, a BOS), so each token's place in the text is known; a token that
straddles the boundary is refused rather than guessed.

A probe that passed once proves nothing about the next answer (issue 53): every answer is checked here, where
its numbers enter, before anything is summed. Each log-probability must be a finite number no model can fail
to have (at most 0, a rounding artefact of LOGPROB_ROUNDING aside, and above LOGPROB_FLOOR); an answer whose
every log-probability is exactly 0 is a server returning no real values, not a perfect model; the echoed
tokens must cover exactly the text sent (no token missing, none added but one BOS, as many as the answer's
usage counts). An answer that fails is an EchoError naming the check, which becomes that row's error.

Pure: no pytest, no torch, no network (endpoint.py sends the requests).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# How far apart the generated and the echoed log-probability of the same token may be and still be the same
# number: servers compute the two in different batch shapes (one token against a whole prompt), so they may
# differ in the last digits, and a 4-bit model's kernels more. A misaligned server is off by whole nats
# (llama-cpp-python 0.3.36: -10.46 for -0.41).
ALIGNMENT_TOLERANCE = 0.05

# The prompt the probe continues: short, and with one clear greedy continuation for any model.
PROBE_PROMPT = "The capital of France is"

# The bounds of a log-probability a server may report. Above 0 is a probability above 1: a server rounding
# a certain token's log-probability may send a few millionths over, read as 0.0; more is refused. Below the
# floor no float32 softmax reaches (vLLM itself sends -9999.0 for -inf), and sums of such numbers would
# overflow whatever is computed from them (exp of a mean of -1e300).
LOGPROB_ROUNDING = 1e-4
LOGPROB_FLOOR = -1e5
# The largest cross-entropy (nats per token) whose perplexity a float holds (exp(709.7) is the last finite).
MAX_CROSS_ENTROPY = 700.0


class EchoError(ValueError):
    """A server's answer cannot give the log-likelihood asked for; the message says what it lacks."""


@dataclass(frozen=True)
class Echoed:
    """A prompt as a server echoed it: its tokens, each one's log-probability given the ones before (None
    where the server gives none: the first token of all), the alternatives it listed, and where each token
    starts in the prompt's text (negative: before the text, a BOS the server put there)."""

    tokens: tuple[str, ...]
    logprobs: tuple[float | None, ...]
    top: tuple[Mapping[str, float] | None, ...]
    starts: tuple[int | None, ...]  # None: the tokens do not spell the prompt (bytes of one character)
    # The token ids, where the server gives them (vLLM's prompt_logprobs): None at a position it gives none
    # for (the first, which has no log-probability either).
    ids: tuple[int | None, ...] | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    def head(self, count: int) -> Echoed:
        """The first `count` tokens (a window that starts at the text's beginning)."""
        return Echoed(
            tokens=self.tokens[:count],
            logprobs=self.logprobs[:count],
            top=self.top[:count],
            starts=self.starts[:count],
            ids=None if self.ids is None else self.ids[:count],
        )


def read_logprob(value: object, what: str) -> float | None:
    """A server's log-probability as a number that may be summed; None where it gives none (null or absent).
    EchoError for anything else no model can have: not a number, NaN, positive (beyond LOGPROB_ROUNDING, read
    as 0.0), below LOGPROB_FLOOR or -inf. `what` names it in the message (`token 3 (' Paris')`)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EchoError(f"the log-probability of {what} is {_shown(value)}, not a number")
    number = float(value)
    if math.isnan(number):
        raise EchoError(f"the log-probability of {what} is NaN")
    if number > LOGPROB_ROUNDING:
        raise EchoError(f"the log-probability of {what} is {number:g}: positive, a probability above 1")
    if not number >= LOGPROB_FLOOR:
        raise EchoError(
            f"the log-probability of {what} is {number:g}: below {LOGPROB_FLOOR:g}, which no model's softmax "
            "gives (vLLM sends -9999 for -inf)"
        )
    return min(number, 0.0)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _real_values(values: Sequence[float | None], what: str) -> None:
    """EchoError when every log-probability given is exactly 0: a server that returns no real values (a
    model certain of every token of a text does not exist), whatever it claims."""
    given = [v for v in values if v is not None]
    if given and all(v == 0.0 for v in given):
        raise EchoError(
            f"every log-probability of {what} is exactly 0 ({len(given)} tokens): the server returns no real "
            "values"
        )


def perplexity_of(nll: float, scored: int) -> float:
    """exp(nll / scored), the perplexity of `scored` tokens whose summed negative log-likelihood is `nll`;
    EchoError where no float holds it (a mean of more than MAX_CROSS_ENTROPY nats a token)."""
    cross_entropy = nll / scored
    if not cross_entropy <= MAX_CROSS_ENTROPY:
        raise EchoError(
            f"a cross-entropy of {cross_entropy:g} nats per token has no perplexity a number can hold: not a "
            "model's log-probabilities"
        )
    return math.exp(cross_entropy)


def parse_echo(
    logprobs: Mapping[str, Any] | None,
    prompt: str,
    completion_tokens: int | None,
    prompt_logprobs: Sequence[Any] | None = None,
    prompt_tokens: int | None = None,
) -> Echoed:
    """The prompt's tokens from a completion choice's `logprobs` (OpenAI's legacy shape: tokens,
    token_logprobs, top_logprobs, text_offset), the generated tokens after them dropped.

    `completion_tokens`, `prompt_tokens`: how many tokens were generated and read (the response's usage). The
    prompt's tokens are those that start inside its text where the tokens, joined, spell it (llama-cpp-python
    leaves the generated token out of the arrays while counting it in usage), else all but the generated ones.
    `prompt_logprobs`: vLLM's list of {token id: {logprob, ...}} per prompt token, which gives the ids.

    Checked here, every time (the module docstring): every number is a log-probability a model can have
    (read_logprob), not all of them 0, and, for a text prompt, the prompt's tokens cover it exactly: joined,
    they spell it (a run of U+FFFD, bytes of a character decoded one token at a time, standing for that
    character), after at most one token the server put before it, and they are as many as `prompt_tokens`
    says. EchoError: the answer has no log-probabilities for the prompt, or fails a check.
    """
    if not isinstance(logprobs, Mapping):
        raise EchoError("no log-probabilities in the answer (logprobs and echo were ignored)")
    if isinstance(logprobs.get("content"), list) and "tokens" not in logprobs:
        # llama.cpp's llama-server: chat-style log-probabilities of the generated tokens, the echo ignored.
        raise EchoError("echo is ignored: log-probabilities come back for the generated tokens only")
    tokens = logprobs.get("tokens")
    values = logprobs.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        raise EchoError("the answer's logprobs have no tokens with token_logprobs")
    top_raw = logprobs.get("top_logprobs")
    top: list[Mapping[str, float] | None] = [
        entry if isinstance(entry, Mapping) else None
        for entry in (top_raw if isinstance(top_raw, list) else [None] * len(tokens))
    ]
    top += [None] * (len(tokens) - len(top))
    if len(top) > len(tokens):
        raise EchoError(f"the answer lists alternatives for {len(top)} positions of {len(tokens)} tokens")
    texts = [t if isinstance(t, str) else _not_a_token(i, t) for i, t in enumerate(tokens)]
    spelled = _spelled(texts, prompt)
    if spelled is not None:
        starts: list[int | None] = list(spelled)
        count = sum(1 for start in spelled if start < len(prompt))
    else:
        count = len(texts)
        if completion_tokens is not None and 0 <= completion_tokens <= count:
            count -= completion_tokens
        starts = _starts(texts, prompt, logprobs.get("text_offset"), count)
        if completion_tokens is None and None not in starts:
            # No usage: the prompt's tokens are those that start inside its text (and any before it).
            count = sum(1 for start in starts if start is not None and start < len(prompt))
    if count == 0:
        raise EchoError("the answer scores no prompt token (echo was ignored)")
    read = [read_logprob(v, f"token {i} ({texts[i]!r})") for i, v in enumerate(values[:count])]
    echoed = Echoed(
        tokens=tuple(texts[:count]),
        logprobs=tuple(read),
        top=tuple(
            _alternatives(entry, i) if entry is not None else None for i, entry in enumerate(top[:count])
        ),
        starts=tuple(starts[:count]),
    )
    _real_values(echoed.logprobs, "the echoed text")
    if prompt:
        _check_coverage(echoed, prompt, spelled is not None)
    if prompt_tokens is not None and count != prompt_tokens:
        raise EchoError(
            f"the server echoed {count} tokens of the text sent, but its usage counts {prompt_tokens} prompt "
            "tokens"
        )
    ids = prompt_ids(prompt_logprobs, echoed)
    return echoed if ids is None else dataclasses.replace(echoed, ids=ids)


def _not_a_token(position: int, value: object) -> str:
    raise EchoError(f"the answer's token {position} is {_shown(value)}, not a string")


def _alternatives(entry: Mapping[str, Any], position: int) -> dict[str, float]:
    """One position's listed alternatives, each a log-probability a model can have (read_logprob)."""
    out: dict[str, float] = {}
    for token, value in entry.items():
        number = read_logprob(value, f"the alternative {str(token)!r} at token {position}")
        if number is not None:
            out[str(token)] = number
    return out


def _check_coverage(echoed: Echoed, prompt: str, spelled: bool) -> None:
    """EchoError unless the prompt's echoed tokens are exactly the prompt: at most one token before its text
    (a BOS, which no log-probability can be given for), and the rest spelling the text to its last character,
    neither a token short nor one over (_covers)."""
    texts = list(echoed.tokens)
    if spelled:
        before = sum(1 for s in echoed.starts if s is not None and s < 0)
        last = echoed.starts[-1]
        ends = last is not None and last + len(texts[-1]) == len(prompt)
        if before <= 1 and ends:
            return
    elif _covers(texts, prompt) or (len(texts) > 1 and _covers(texts[1:], prompt)):
        return
    shown = "".join(texts)
    raise EchoError(
        f"the server's {len(texts)} echoed tokens do not spell the {len(prompt)} characters sent "
        f"({shown[:40]!r}{'...' if len(shown) > 40 else ''})"
    )


def _covers(texts: Sequence[str], text: str) -> bool:
    """Whether `texts`, joined, spell `text`, where a run of k U+FFFD stands for 1 to k non-ASCII characters
    of it: a server that decodes each token alone shows the bytes of a character split over tokens so (each
    incomplete byte sequence one U+FFFD), and never an ASCII character. The possible places in `text` after
    each piece are followed together, so no piece is matched twice."""
    joined = "".join(texts)
    if joined == text:
        return True
    places = {0}
    i = 0
    while i < len(joined) and places:
        j = i
        if joined[i] == "\ufffd":
            while j < len(joined) and joined[j] == "\ufffd":
                j += 1
            after: set[int] = set()
            for place in places:
                for k in range(place, min(place + (j - i), len(text))):
                    if text[k].isascii():
                        break
                    after.add(k + 1)
            places = after
        else:
            while j < len(joined) and joined[j] != "\ufffd":
                j += 1
            piece = joined[i:j]
            places = {p + len(piece) for p in places if text.startswith(piece, p)}
        i = j
    return len(text) in places


def _spelled(texts: list[str], prompt: str) -> list[int] | None:
    """Where each token starts in the prompt when the tokens, joined, spell a prefix (a BOS: negative starts),
    then the prompt, then what was generated; None when they do not (bytes of a character decoded alone)."""
    if not prompt:
        return None
    at = "".join(texts).find(prompt)
    starts = _offsets(texts)
    if at < 0 or at not in starts:
        return None
    return [start - at for start in starts]


def _offsets(texts: Sequence[str]) -> list[int]:
    """Where each text starts when they are joined."""
    out, at = [], 0
    for text in texts:
        out.append(at)
        at += len(text)
    return out


def _starts(texts: list[str], prompt: str, offsets: object, count: int) -> list[int | None]:
    """Where each echoed token starts in the prompt when the texts do not spell it (_spelled): from the
    server's text_offset when that reads as positions in the prompt; else None for every token (multi-byte
    characters split over tokens, decoded one by one), but for a first token that is not the text's own."""
    if isinstance(offsets, list) and len(offsets) == len(texts):
        found = [o if isinstance(o, int) and not isinstance(o, bool) else None for o in offsets]
        numbers = [o for o in found[:count] if o is not None]
        if numbers and len(numbers) == count and numbers == sorted(numbers) and numbers[-1] <= len(prompt):
            return found
    unknown: list[int | None] = [None] * len(texts)
    first = texts[0] if texts else ""
    if first and not prompt.startswith(first) and "\ufffd" not in first:
        # A whole token that is not the text's beginning: one the server put before it (a BOS).
        unknown[0] = -len(first)
    return unknown


def prompt_ids(prompt_logprobs: Sequence[Any] | None, echoed: Echoed) -> tuple[int | None, ...] | None:
    """Each prompt token's id from vLLM's prompt_logprobs, read as parse_prompt_logprobs reads them (the
    first position's is None: vLLM gives it no entry), when they are the echo's tokens: as many, with the same
    log-probabilities. None when absent or not the same."""
    try:
        listed = parse_prompt_logprobs(prompt_logprobs)
    except EchoError:
        return None
    if len(listed) != len(echoed):
        return None
    for mine, theirs in zip(listed.logprobs[1:], echoed.logprobs[1:], strict=True):
        if mine is None or theirs is None or abs(mine - theirs) > 1e-6:
            return None
    return listed.ids


def continuation_greedy(echoed: Echoed, boundary: int) -> bool | None:
    """Whether every token from character `boundary` on is the server's most likely one at its place (its
    log-probability at least that of every alternative it listed); None where it listed none. The tokens'
    positions are continuation_nll's (call it first: it refuses what cannot be told apart)."""
    greedy = True
    for start, logprob, top in zip(echoed.starts, echoed.logprobs, echoed.top, strict=True):
        if start is None or start < boundary:
            continue
        if top is None or not top or logprob is None:
            return None
        greedy = greedy and logprob >= max(float(v) for v in top.values())
    return greedy


def continuation_nll(echoed: Echoed, boundary: int) -> tuple[float, int]:
    """(NLL in nats, tokens) of the text from character `boundary` of the prompt to its end: the summed
    negative log-probabilities of the tokens starting there or later. EchoError: a token straddles the
    boundary (the option's first characters merged with the prompt's last ones: the option's tokens are not
    the model's own split of it), the positions are unknown, or a token has no log-probability."""
    if any(s is None for s in echoed.starts):
        raise EchoError(
            "the server's echoed tokens do not spell the prompt and it gives no usable text_offset: where "
            "the option begins is unknown"
        )
    starts = [int(s) for s in echoed.starts if s is not None]
    for start, token in zip(starts, echoed.tokens, strict=True):
        if start < boundary < start + len(token):
            raise EchoError(
                f"the server's token {token!r} spans the end of the prompt and the start of the option: the "
                "option's log-likelihood cannot be separated from the prompt's"
            )
    inside = [i for i, s in enumerate(starts) if s >= boundary]
    if not inside:
        raise EchoError("no token of the option was echoed")
    first = inside[0]
    if starts[first] != boundary:
        raise EchoError(f"no echoed token starts where the option does (character {boundary})")
    total = 0.0
    for i in inside:
        value = echoed.logprobs[i]
        if value is None:
            raise EchoError(f"the server gave no log-probability for the option's token {echoed.tokens[i]!r}")
        total -= value
    return total, len(inside)


def rolling_nll(echoed: Echoed, *, skip: int = 0) -> tuple[float, int, bool]:
    """(NLL in nats, tokens scored, whether the text's first token was scored) over a whole echoed text:
    every token with a log-probability, from position `skip` on. The first token of a text has one only
    when the server put a token (a BOS) before it; its absence is not an error, the others' is."""
    total = 0.0
    scored = 0
    first_scored = False
    # The text's first token: after the tokens before the text (negative starts: a BOS), when there are any.
    first_text = next((i for i, s in enumerate(echoed.starts) if s is None or s >= 0), 0)
    # The first token of all has no context: whatever a server says of it is not a log-likelihood.
    for i in range(max(skip, 1), len(echoed)):
        value = echoed.logprobs[i]
        if value is None:
            if i <= first_text:
                continue  # the text's first token, after no token of the server's
            raise EchoError(f"the server gave no log-probability for token {i} ({echoed.tokens[i]!r})")
        if i == first_text:
            first_scored = True
        total -= value
        scored += 1
    if scored == 0:
        raise EchoError("no token of the text has a log-probability (the text is a single token)")
    return total, scored, first_scored


@dataclass(frozen=True)
class Alignment:
    """What the probe found of one server's prompt log-probabilities (results.json provenance)."""

    ok: bool
    reason: str | None  # why log-likelihood rows are refused (None: they are not)
    generated_token: str | None = None
    generated_logprob: float | None = None
    echoed_logprob: float | None = None
    echoed_best: float | None = None  # the largest alternative listed at that position
    prompt_tokens: int | None = None
    scored_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason,
            "probe_prompt": PROBE_PROMPT,
            "generated_token": self.generated_token,
            "generated_logprob": self.generated_logprob,
            "echoed_logprob": self.echoed_logprob,
            "echoed_best_alternative": self.echoed_best,
            "prompt_tokens": self.prompt_tokens,
            "scored_tokens": self.scored_tokens,
            "tolerance": ALIGNMENT_TOLERANCE,
        }


def check_alignment(
    generated_token: str, generated_logprob: float | None, echoed: Echoed, prompt: str = PROBE_PROMPT
) -> Alignment:
    """Are a server's echoed log-probabilities those of each token given the ones before it?

    `generated_token`/`generated_logprob`: the greedy token the server generated after `prompt` and the
    log-probability it reported for it; `echoed`: the server's echo of `prompt + generated_token`. Aligned:
    every prompt token after the first has a log-probability, the generated token's echoed one equals the
    generated one (within ALIGNMENT_TOLERANCE), and it is the largest of its position's alternatives (the
    greedy token is the most likely one).
    """
    given = sum(v is not None for v in echoed.logprobs)
    base = Alignment(ok=False, reason=None, generated_token=generated_token, prompt_tokens=len(echoed))
    if generated_logprob is None:
        return _failed(base, "returns no log-probability for a generated token (logprobs is ignored)")
    if given < len(echoed) - 1:
        return _failed(
            base,
            f"returns log-probabilities for {given} of {len(echoed)} prompt tokens "
            "(echo with logprobs does not score the prompt)",
        )
    position = next(
        (i for i, s in enumerate(echoed.starts) if s is not None and s == len(prompt)), len(echoed) - 1
    )
    echoed_value = echoed.logprobs[position]
    alternatives = echoed.top[position]
    best = max(alternatives.values()) if alternatives else None
    found = Alignment(
        ok=False,
        reason=None,
        generated_token=generated_token,
        generated_logprob=generated_logprob,
        echoed_logprob=echoed_value,
        echoed_best=best,
        prompt_tokens=len(echoed),
        scored_tokens=given,
    )
    if echoed_value is None:
        return _failed(found, "returns no log-probability for the last prompt token")
    said = (
        f"log p({generated_token!r} | {prompt!r}) is {echoed_value:.2f} echoed but "
        f"{generated_logprob:.2f} generated"
    )
    if abs(echoed_value - generated_logprob) > ALIGNMENT_TOLERANCE:
        return _failed(found, f"returns misaligned prompt log-probabilities: {said}")
    if best is not None and echoed_value < best - ALIGNMENT_TOLERANCE:
        return _failed(
            found,
            f"returns misaligned prompt log-probabilities: the greedy token {generated_token!r} echoes "
            f"{echoed_value:.2f}, below an alternative at {best:.2f}",
        )
    return dataclasses.replace(found, ok=True)


def _failed(found: Alignment, reason: str) -> Alignment:
    return dataclasses.replace(found, ok=False, reason=reason)


def parse_prompt_logprobs(prompt_logprobs: Sequence[Any] | None, prompt_tokens: int | None = None) -> Echoed:
    """A prompt's tokens from vLLM's `prompt_logprobs` alone (a chat completion's: its rendered prompt is the
    server's, so the tokens' own texts, joined, are where positions are read). Each position lists its own
    token first (vLLM's order), then its top alternatives. EchoError: absent, not readable so, a number no
    model can have (read_logprob), every one exactly 0, or not as many positions as the answer's usage counts
    prompt tokens (`prompt_tokens`, where given)."""
    if not isinstance(prompt_logprobs, Sequence) or isinstance(prompt_logprobs, str) or not prompt_logprobs:
        raise EchoError("no prompt_logprobs in the answer (the server does not return them)")
    if prompt_tokens is not None and len(prompt_logprobs) != prompt_tokens:
        raise EchoError(
            f"the server's prompt_logprobs has {len(prompt_logprobs)} positions, but its usage counts "
            f"{prompt_tokens} prompt tokens"
        )
    tokens: list[str] = []
    values: list[float | None] = []
    ids: list[int | None] = []
    for position, entry in enumerate(prompt_logprobs):
        if entry is None and position == 0:
            # The first token has no context and, in vLLM, no entry: its id and text are unknown (an answer
            # at the end of the prompt is found from its end).
            tokens.append("")
            values.append(None)
            ids.append(None)
            continue
        if not isinstance(entry, Mapping) or not entry:
            raise EchoError(f"the answer's prompt_logprobs have no entry at position {position}")
        # vLLM lists the position's own token first, then the top alternatives.
        key, value = next(iter(entry.items()))
        if not isinstance(value, Mapping):
            raise EchoError(f"the answer's prompt_logprobs entry at position {position} is not an object")
        try:
            ids.append(int(key))
        except (TypeError, ValueError):
            raise EchoError(f"the answer's prompt_logprobs key {_shown(key)} is not a token id") from None
        decoded = value.get("decoded_token")
        if decoded is not None and not isinstance(decoded, str):
            raise EchoError(f"the answer's prompt_logprobs token at position {position} is not a string")
        tokens.append(decoded or "")
        # The first position has no context: a value there is nothing (vLLM gives it no entry at all).
        what = f"prompt token {position} ({decoded!r})"
        values.append(read_logprob(value.get("logprob"), what) if position else None)
    _real_values(values, "the prompt")
    return Echoed(
        tokens=tuple(tokens),
        logprobs=tuple(values),
        top=(None,) * len(tokens),
        starts=tuple(_offsets(tokens)),
        ids=tuple(ids),
    )


def answer_nll(echoed: Echoed, answer: str) -> tuple[float, int]:
    """(NLL, tokens) of `answer` where it ends the echoed prompt (a chat answer continued under the
    server's template): continuation_nll from where the answer's text begins in the joined tokens."""
    joined = "".join(echoed.tokens)
    if not answer or not joined.endswith(answer):
        raise EchoError(f"the server's rendered prompt does not end with the option: {joined[-60:]!r}")
    return continuation_nll(echoed, len(joined) - len(answer))


def window_nll(echoed: Echoed, first_scored: int) -> tuple[float, int]:
    """(NLL, tokens) of a window's tokens from position `first_scored` on (perplexity.Window: the earlier
    ones are its context)."""
    total = 0.0
    for i in range(first_scored, len(echoed)):
        value = echoed.logprobs[i]
        if value is None:
            raise EchoError(f"the server gave no log-probability for token {i} of a window")
        total -= value
    return total, len(echoed) - first_scored
