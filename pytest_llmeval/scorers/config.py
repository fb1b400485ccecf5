"""Checks every scorer's evaluation_config shares: unknown keys, the threshold, max_new_tokens, and how
values are shown in the one-line messages the collector prefixes with `file:line:`."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import regex  # re's syntax, with a timeout


def check_keys(mapping: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    """Raise ValueError naming the first unknown key (with the closest known one as a hint)."""
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(f"unknown key {quote(str(key))} in {where}; {hint}known: {', '.join(known)}")


def threshold(config: Mapping[str, Any], default: float) -> float:
    """The row's threshold in [0, 1] (default if absent); also checks max_new_tokens when present."""
    if "max_new_tokens" in config:
        tokens = config["max_new_tokens"]
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
            raise ValueError(f"max_new_tokens must be a positive integer, not {describe(tokens)}")
    value = config.get("threshold", default)
    # bool is an int subclass: `threshold: true` is a typo, not 1.0.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"threshold must be a number in [0, 1], not {describe(value)}")
    if not 0.0 <= value <= 1.0:  # also false for nan
        raise ValueError(f"threshold must be a number in [0, 1], not {value!r}")
    return float(value)


# Seconds one pattern may spend on one model output. The `regex` engine (re's syntax) already avoids most
# catastrophic backtracking ((a+)+$ ends at once); what it cannot avoid ((a|aa)+$ on 60 a's and a !) must
# not hang the run at 100% CPU: past this the row is an error naming the pattern, and the run goes on.
REGEX_TIMEOUT_S = 2.0


def compile_regex(pattern: str) -> Any:
    """Compile a benchmark's pattern with the `regex` engine (re's syntax: its version 0), as scoring will
    run it; every way the pattern itself can be refused raises re.error."""
    try:
        re.compile(pattern)  # re's own messages for a pattern re refuses: the syntax users know
        return regex.compile(pattern)
    except regex.error as exc:
        raise re.error(str(exc)) from None
    except RecursionError:
        # The parser recurses once per nested group: a thousand "(" exhaust the stack.
        raise re.error("groups nested too deeply") from None
    except OverflowError as exc:
        # A repetition count past the engine's limit, such as a{4294967296}.
        raise re.error(str(exc)) from None


def find(pattern: str, text: str, what: str, *, last: bool = False) -> Any:
    """The first (or the last) match of a benchmark's pattern in a model's output, None without one;
    ValueError naming the pattern when the search runs past REGEX_TIMEOUT_S (the row errors, the run goes
    on)."""
    compiled = compile_regex(pattern)
    try:
        if not last:
            return compiled.search(text, timeout=REGEX_TIMEOUT_S)
        found = None
        for found in compiled.finditer(text, timeout=REGEX_TIMEOUT_S):  # noqa: B007 - the last one is kept
            pass
        return found
    except TimeoutError:
        raise ValueError(
            f"{what} {quote(pattern)} ran past {REGEX_TIMEOUT_S:g} s on this output ({len(text)} "
            "characters): it backtracks without end; rewrite it without nested repetition (such as (a|aa)+ "
            "or (a+)+)"
        ) from None


def quote(text: str) -> str:
    """Quote as written ('(\\d+', not repr's '(\\\\d+') but keep the message on one line."""
    # Every unprintable character escaped, not only \r and \n: \x0b, \x1c, \x85 and U+2028 break lines
    # too (str.splitlines, terminals, CI logs), and a right-to-left override would reorder the message.
    return "'" + "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text) + "'"


def describe(value: Any) -> str:
    """A value and its type for a message, e.g. `'x' (str)`, `1.5 (float)`; long values are cut."""
    if isinstance(value, str):
        return f"{quote(value)} (str)"
    if value is None:
        return "null"  # what the user wrote in their JSON
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


Parsed = TypeVar("Parsed")
# How many distinct configs a memo keeps: configs that vary row by row are parsed again, never hoarded.
MEMO_SIZE = 1024


def memoised(
    memo: dict[Hashable, Parsed], key: Hashable | None, config: Any, parse: Callable[[Any], Parsed]
) -> Parsed:
    """parse(config), kept in `memo` by `key` (a benchmark's rows mostly share one evaluation_config); a
    config without a key (None: one that cannot be hashed) is parsed each time."""
    if key is None:
        return parse(config)
    if key not in memo:
        if len(memo) >= MEMO_SIZE:  # configs that vary row by row: bounded, not a leak
            memo.clear()
        memo[key] = parse(config)
    return memo[key]
