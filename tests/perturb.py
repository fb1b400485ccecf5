"""One field of one answer perturbed: the fault campaign's vocabulary (issue 53, test_fault_campaign.py).

An answer of the test server (tests/vllm_format.py, real numbers from a real model) is perturbed in one field
at a time, in one of the ways servers have been seen to get it wrong, or could: the field missing, null, of
the wrong type, out of range (a log-probability positive, exactly zero throughout, hugely negative, NaN),
fewer or other tokens than the text sent, another model's name, a text far longer than max_tokens allows;
and the transport failing under it (an error status, a body that is not JSON, a dropped connection).

`FIELDS` says, for each kind of answer, which fields can be perturbed and how; `Perturbation.apply` returns
the perturbed copy of an answer (never the answer itself, which the server may reuse). Pure: no pytest.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from vllm_format import Raw

# The kinds of answer a row's requests get.
ECHO = "echo"  # /v1/completions with echo and logprobs: perplexity, and multiple choice under a template
CHOICE = "choice"  # /v1/chat/completions continuing an option, with vLLM's prompt_logprobs: multiple choice
GENERATE = "generate"  # /v1/chat/completions answered: a generated row, and the judge's verdicts

# Perturbations of any field.
WHOLE = ("missing", "null", "wrong_type")
# Of a list of log-probabilities: one element (at `at`), or every one of them.
NUMBERS = ("positive", "zero_all", "huge_negative", "nan", "element_wrong_type")
# Of the echoed tokens as a whole (every array kept aligned): fewer of them, one of another text.
TOKENS = ("fewer", "other")
MODEL = (*WHOLE, "other_model")
TRANSPORT = ("status_500", "not_json", "drop")
OVERSIZED_CHARS = 1_000_000  # a server ignoring max_tokens (issue 53 saw 50 MB); 1 MB keeps the test quick

LOGPROBS = "choices.0.logprobs"
FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    ECHO: {
        "model": MODEL,
        "choices": (*WHOLE, "empty"),
        LOGPROBS: (*WHOLE, *TOKENS),
        f"{LOGPROBS}.token_logprobs": (*WHOLE, *NUMBERS),
        f"{LOGPROBS}.tokens": (*WHOLE, "element_wrong_type", "other"),
        f"{LOGPROBS}.text_offset": (*WHOLE, "other"),
        f"{LOGPROBS}.top_logprobs": (*WHOLE, "positive", "huge_negative"),
        "choices.0.prompt_logprobs": (*WHOLE, "positive", "fewer"),
        "choices.0.text": (*WHOLE, "oversized"),
        "usage.prompt_tokens": (*WHOLE, "other"),
        "usage.completion_tokens": (*WHOLE, "other"),
        "transport": TRANSPORT,
    },
    CHOICE: {
        "model": MODEL,
        "choices": (*WHOLE, "empty"),
        "prompt_logprobs": (*WHOLE, *NUMBERS, "fewer", "other"),
        "usage.prompt_tokens": (*WHOLE, "other"),
        "transport": TRANSPORT,
    },
    GENERATE: {
        "model": MODEL,
        "choices": (*WHOLE, "empty"),
        "choices.0.message": WHOLE,
        "choices.0.message.content": (*WHOLE, "oversized"),
        "choices.0.finish_reason": (*WHOLE, "other"),
        "usage.completion_tokens": (*WHOLE, "other"),
        "transport": TRANSPORT,
    },
}


def kind_of(path: str, body: dict[str, Any]) -> str:
    """Which kind of answer a request gets (ECHO, CHOICE, GENERATE)."""
    if path.endswith("/completions") and not path.endswith("/chat/completions"):
        return ECHO
    return CHOICE if body.get("continue_final_message") else GENERATE


@dataclass(frozen=True)
class Perturbation:
    """One field of one kind of answer, perturbed one way; `at` picks the element of a list (modulo its
    length) where the perturbation touches one."""

    kind: str
    field: str
    how: str
    at: int = 0

    def __str__(self) -> str:
        return f"{self.kind}:{self.field}:{self.how}@{self.at}"

    def apply(self, answer: dict[str, Any]) -> dict[str, Any] | Raw:
        """The answer as it is sent, perturbed (a copy), or what is sent instead (Raw)."""
        if self.field == "transport":
            return {
                "status_500": Raw(500, b'{"error": {"message": "scripted failure", "code": 500}}'),
                "not_json": Raw(200, b"<html>a proxy's page</html>"),
                "drop": Raw(drop=True),
            }[self.how]
        out = copy.deepcopy(answer)
        *parents, last = self.field.split(".")
        holder: Any = out
        for part in parents:
            holder = holder[int(part)] if isinstance(holder, list) else holder.get(part)
            if holder is None:
                return out  # nothing there to perturb (an answer without that part)
        key: Any = int(last) if isinstance(holder, list) else last
        if isinstance(holder, dict) and key not in holder and self.how != "null":
            return out
        self._perturb(holder, key)
        return out

    def _perturb(self, holder: Any, key: Any) -> None:
        how = self.how
        if how == "missing":
            if isinstance(holder, dict):
                del holder[key]
            return
        if how == "null":
            holder[key] = None
            return
        if how == "wrong_type":
            value = holder[key]
            holder[key] = 7 if isinstance(value, (str, list, dict)) or value is None else "seven"
            return
        if how == "empty":
            holder[key] = []
            return
        if how == "other_model":
            holder[key] = "another-org/another-model"
            return
        if how == "oversized":
            holder[key] = f"{holder[key] or ''}{'x' * OVERSIZED_CHARS}"
            return
        value = holder[key]
        if self.field.endswith("prompt_logprobs") and isinstance(value, list):
            _prompt_logprobs(value, how, self.at)
        elif self.field == LOGPROBS and isinstance(value, dict):
            _aligned_tokens(value, how, self.at)
        elif isinstance(value, list):
            _elements(value, how, self.at, self.field)
        elif isinstance(value, int) and not isinstance(value, bool):
            holder[key] = value + 1 + self.at % 3  # another count
        elif isinstance(value, str):
            holder[key] = f"{value}-other"


def _number(how: str, old: Any) -> Any:
    """One log-probability perturbed (`old`, where it stays a number of another kind)."""
    return {
        "positive": 5.0,
        "huge_negative": -1e300,
        "nan": float("nan"),
        "element_wrong_type": "-0.5",
    }.get(how, old)


def _elements(values: list[Any], how: str, at: int, field: str) -> None:
    """A list of an echo perturbed in place: its log-probabilities (one, or all zero), its alternatives, its
    tokens or offsets (one of another text or value)."""
    if not values:
        return
    i = at % len(values)
    if how == "zero_all":
        values[:] = [None if v is None else 0.0 for v in values]
    elif field.endswith("top_logprobs"):
        # The first position lists none; another gets one alternative with an impossible number.
        j = next((k for k in range(i, i + len(values)) if isinstance(values[k % len(values)], dict)), None)
        if j is not None:
            values[j % len(values)] = {**values[j % len(values)], "zz-alternative": _number(how, -1.0)}
    elif field.endswith(".tokens"):
        values[i] = 17 if how == "element_wrong_type" else f"{values[i]}zz"
    elif field.endswith("text_offset"):
        values[i] = values[i] + 3
    else:
        values[i] = _number(how, values[i])


def _aligned_tokens(logprobs: dict[str, Any], how: str, at: int) -> None:
    """Every array of an echo's logprobs kept aligned: the first few tokens only (`fewer`: the text no
    longer covered), or one token of another text (`other`: the text no longer spelled)."""
    arrays = [k for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset") if k in logprobs]
    count = len(logprobs.get("tokens") or [])
    if count < 2:
        return
    if how == "fewer":
        keep = 1 + at % (count - 1)
        for name in arrays:
            if isinstance(logprobs[name], list):
                logprobs[name] = logprobs[name][:keep]
    elif how == "other":
        i = at % count
        tokens = logprobs["tokens"]
        tokens[i] = "zz" if tokens[i] != "zz" else "yy"


def _prompt_logprobs(entries: list[Any], how: str, at: int) -> None:
    """vLLM's prompt_logprobs perturbed in place: one entry's own log-probability (or all zero), one entry's
    decoded token of another text, the last entries dropped."""
    positions = [i for i, e in enumerate(entries) if isinstance(e, dict) and e]
    if not positions:
        return
    if how == "fewer":
        del entries[len(entries) - 1 - at % max(1, len(entries) - 1) :]
        return
    if how == "zero_all":
        for i in positions:
            token, value = next(iter(entries[i].items()))
            entries[i] = {token: {**value, "logprob": 0.0}}
        return
    i = positions[at % len(positions)]
    token, value = next(iter(entries[i].items()))
    if how == "other":
        entries[i] = {token: {**value, "decoded_token": f"{value.get('decoded_token')}zz"}}
    else:
        rest = {k: v for k, v in entries[i].items() if k != token}
        entries[i] = {token: {**value, "logprob": _number(how, value.get("logprob"))}, **rest}


def every_perturbation(kind: str) -> list[tuple[str, str]]:
    """Every (field, how) of one kind of answer."""
    return [(field, how) for field, hows in FIELDS[kind].items() for how in hows]


def marker(index: int) -> str:
    """The text that marks a row's requests (in its instruction or text): the server finds the row by it."""
    return f"[[r{index:03d}]]"


def row_of(body: dict[str, Any]) -> int | None:
    """The row a request belongs to, by the marker in it; None: no row's (the start-up probe's, a window
    sent as token ids)."""
    text = json.dumps(body, ensure_ascii=False)
    at = text.find("[[r")
    if at < 0 or text[at + 6 : at + 8] != "]]" or not text[at + 3 : at + 6].isdigit():
        return None
    return int(text[at + 3 : at + 6])
