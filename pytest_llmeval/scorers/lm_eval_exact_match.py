"""evaluation_type `lm_eval_exact_match`: a generated answer scored as lm-evaluation-harness 0.4.13 scores a
`generate_until` task: each filter pipeline of the row turns the output into an answer, and lm-eval's
`exact_match` compares that answer with the gold one.

The row is generated greedily up to `max_new_tokens`, ends at the first of its `until` strings (or at EOS),
and the output is cut before that string, as lm-eval's `hf` model cuts it (generation.cut_at_stops). Then:

- `filter_list` (lm-eval's own shape): `[{"name": ..., "filter": [{"function": ..., ...}, ...]}, ...]`. The
  functions are lm-eval's `regex` (`regex_pattern`, `group_select`, `fallback`), `lowercase`, `uppercase`,
  `remove_whitespace`, and `take_first` (the last step of every pipeline: one answer per request). Without a
  filter_list the pipeline is lm-eval's default, `none`: take_first alone.
- `ignore_case`, `ignore_punctuation`, `ignore_numbers`, `regexes_to_ignore`: lm-eval's exact_match options
  (lm_eval/api/metrics.py exact_match_hf_evaluate): each pattern of regexes_to_ignore removed from both
  sides in turn, then case, then punctuation, then digits.

The row's score is the first filter's exact match (it passes or fails the row); every filter's answer and
exact match is in the details, under `lm_eval` as lm-eval names its results (`exact_match,FILTER`), beside
`filtered_resps` (FILTER -> the answer), so that summaries.lm_eval_summary reports each as lm-eval does.

Python's `re`, not the `regex` engine the other scorers use: the patterns are lm-eval's, and which
characters `\\d` or `\\w` match must be exactly what lm-eval's `re` matches (the engines' Unicode tables
differ).

Pure: no pytest, no torch.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pytest_llmeval.formatting import shown
from pytest_llmeval.scorers.base import Score
from pytest_llmeval.scorers.config import check_keys, describe, memoised, quote
from pytest_llmeval.scorers.config import threshold as _threshold

__all__ = [
    "DEFAULT_FILTER",
    "FILTERS",
    "KNOWN_KEYS",
    "apply_pipeline",
    "exact_match",
    "regex_filter",
    "score",
    "validate_config",
]

KNOWN_KEYS = (
    "filter_list",
    "ignore_case",
    "ignore_numbers",
    "ignore_punctuation",
    "lm_eval",
    "max_new_tokens",
    "prompt_mode",
    "regexes_to_ignore",
    "until",
)
PROMPT_MODES = ("chat", "completion")
# lm-eval's filters this scorer computes, each with the arguments it takes.
FILTERS: dict[str, tuple[str, ...]] = {
    "regex": ("regex_pattern", "group_select", "fallback"),
    "lowercase": (),
    "uppercase": (),
    "remove_whitespace": (),
    "take_first": (),
}
# lm-eval's RegexFilter defaults (lm_eval/filters/extraction.py).
REGEX_PATTERN = r"#### (\-?[0-9\.\,]+)"
FALLBACK = "[invalid]"
# What lm-eval runs when a task has no filter_list: take_first, named "none" (its result keys end in ",none").
DEFAULT_FILTER: list[dict[str, Any]] = [{"name": "none", "filter": [{"function": "take_first"}]}]
_BOOL_KEYS = ("ignore_case", "ignore_punctuation", "ignore_numbers")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_DIGITS = str.maketrans("", "", string.digits)


@dataclass(frozen=True)
class _Step:
    function: str
    pattern: str = REGEX_PATTERN
    group_select: int = 0
    fallback: str = FALLBACK


@dataclass(frozen=True)
class _Options:
    filters: tuple[tuple[str, tuple[_Step, ...]], ...]  # (name, pipeline), in the row's order
    regexes_to_ignore: tuple[str, ...] = ()
    ignore_case: bool = False
    ignore_punctuation: bool = False
    ignore_numbers: bool = False


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse(config)


def completion_mode(config: Mapping[str, Any]) -> bool:
    """The row's input is its whole context, sent raw (no chat template): a converted lm-eval row's."""
    return bool(config.get("prompt_mode", "chat") == "completion")


def stop(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The strings generation stops at and the output is cut before (lm-eval's `until`, in its order)."""
    return tuple(str(s) for s in config.get("until") or ())


def field_rule(config: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """expected_output may be empty (a gold answer can be); a completion row's input is its context, so it
    must not be."""
    if isinstance(config, Mapping) and config.get("prompt_mode") == "completion":
        return frozenset({"expected_output"}), frozenset({"input"})
    return frozenset({"input", "expected_output"}), frozenset()


def regex_filter(text: str, pattern: str, group_select: int = 0, fallback: str = FALLBACK) -> str:
    """lm-eval's `regex` filter on one response: every match of `pattern` (findall: the whole match, the
    one group, or a tuple of the groups), the `group_select`-th of them (negative: from the end); of a
    tuple, its first non-empty group (the fallback when none is); stripped of whitespace. `fallback` when
    nothing matches. ValueError when group_select is past the matches (lm-eval stops with an IndexError)."""
    found = _compiled(pattern).findall(text)
    if not found:
        return fallback
    try:
        match = found[group_select]
    except IndexError:
        raise ValueError(
            f"regex filter {quote(pattern)}: group_select {group_select} is past its {len(found)} matches"
        ) from None
    if isinstance(match, tuple):
        groups = [g for g in match if g]
        match = groups[0] if groups else fallback
    return str(match).strip()


def apply_pipeline(text: str, steps: Sequence[Mapping[str, Any]]) -> str:
    """One filter pipeline (lm-eval's `filter` list of one filter_list entry) on one response."""
    return _apply(text, _pipeline(steps, "filter"))


def exact_match(
    prediction: str,
    reference: str,
    *,
    regexes_to_ignore: Sequence[str] = (),
    ignore_case: bool = False,
    ignore_punctuation: bool = False,
    ignore_numbers: bool = False,
) -> float:
    """lm-eval's exact_match of one prediction: 1.0 when it equals the reference after each pattern of
    regexes_to_ignore is removed from both (in order), then case is lowered, then punctuation and then
    digits are removed, each as asked; else 0.0."""
    pair = [_stored(prediction), _stored(reference)]
    for pattern in regexes_to_ignore:
        pair = [_stored(_compiled(pattern).sub("", text)) for text in pair]
    if ignore_case:
        pair = [_stored(text.lower()) for text in pair]  # numpy's char.lower is str.lower
    if ignore_punctuation:
        pair = [_stored(text.translate(_PUNCTUATION)) for text in pair]
    if ignore_numbers:
        pair = [_stored(text.translate(_DIGITS)) for text in pair]
    return 1.0 if pair[0] == pair[1] else 0.0


def score(prediction: str, expected: str, config: Mapping[str, Any]) -> Score:
    """Every filter's answer and exact match; the row's score is the first filter's."""
    options = _options(config)
    filtered: dict[str, str] = {}
    metrics: dict[str, float] = {}
    for name, steps in options.filters:
        answer = _apply(prediction, steps)
        filtered[name] = answer
        metrics[f"exact_match,{name}"] = exact_match(
            answer,
            expected,
            regexes_to_ignore=options.regexes_to_ignore,
            ignore_case=options.ignore_case,
            ignore_punctuation=options.ignore_punctuation,
            ignore_numbers=options.ignore_numbers,
        )
    first = options.filters[0][0]
    return Score(
        value=metrics[f"exact_match,{first}"],
        threshold=1.0,
        details={
            "filter": first,
            "extracted": filtered[first],
            "lm_eval": {**metrics, "filtered_resps": filtered},
        },
    )


def explain(details: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A failing row's report: each filter's answer and its exact match."""
    found = details.get("lm_eval") or {}
    answers = found.get("filtered_resps") or {}
    return [
        f"filter {name}: {shown(str(answer))} (exact_match {found.get(f'exact_match,{name}')})"
        for name, answer in answers.items()
    ]


def _stored(text: str) -> str:
    """A text as lm-eval's numpy arrays hold it: a numpy str array drops trailing NUL characters."""
    return text.rstrip("\x00")


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _apply(text: str, steps: Sequence[_Step]) -> str:
    for step in steps:
        if step.function == "regex":
            text = regex_filter(text, step.pattern, step.group_select, step.fallback)
        elif step.function == "lowercase":
            text = text.lower()
        elif step.function == "uppercase":
            text = text.upper()
        elif step.function == "remove_whitespace":
            text = text.strip()
        # take_first: the one response of the row is the answer (the last step, checked by _pipeline)
    return text


# A benchmark's rows share one evaluation_config but for the lm_eval block's doc_id: parsed once per config.
_PARSED: dict[Hashable, _Options] = {}


def _options(config: Mapping[str, Any]) -> _Options:
    try:
        key: str | None = json.dumps({k: v for k, v in config.items() if k != "lm_eval"}, sort_keys=True)
    except (TypeError, ValueError, RecursionError, AttributeError):
        key = None
    return memoised(_PARSED, key, config, _parse)


def _parse(config: Mapping[str, Any]) -> _Options:
    if not isinstance(config, Mapping):
        raise ValueError(
            f"evaluation_config for lm_eval_exact_match must be a mapping, not {type(config).__name__}"
        )
    check_keys(config, KNOWN_KEYS, "evaluation_config for lm_eval_exact_match")
    _threshold(config, 1.0)  # checks max_new_tokens
    mode = config.get("prompt_mode", "chat")
    if mode not in PROMPT_MODES:
        raise ValueError(f"prompt_mode must be 'chat' or 'completion', not {describe(mode)}")
    until = config.get("until", [])
    if not isinstance(until, list) or not all(isinstance(s, str) and s for s in until):
        # An empty string would be found in every text: lm-eval's stopping criteria end at the first token.
        raise ValueError(f"until must be a list of non-empty strings, not {describe(until)}")
    for key in _BOOL_KEYS:
        if key in config and not isinstance(config[key], bool):
            raise ValueError(f"{key} must be true or false, not {describe(config[key])}")
    ignore = config.get("regexes_to_ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise ValueError(f"regexes_to_ignore must be a list of patterns, not {describe(ignore)}")
    for pattern in ignore:
        _check_pattern(pattern, "regexes_to_ignore")
    entries = config.get("filter_list", DEFAULT_FILTER)
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"filter_list must be a non-empty list of filters, not {describe(entries)}")
    filters: list[tuple[str, tuple[_Step, ...]]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or set(entry) != {"name", "filter"}:
            raise ValueError(f"filter_list[{i}] must be an object of 'name' and 'filter'")
        name = entry["name"]
        if not isinstance(name, str) or not name or "," in name:
            raise ValueError(
                f"filter_list[{i}].name must be a non-empty string without ',', not {describe(name)}"
            )
        if name in (n for n, _ in filters):
            raise ValueError(f"filter_list names {quote(name)} twice")
        filters.append((name, _pipeline(entry["filter"], f"filter {quote(name)}")))
    return _Options(
        filters=tuple(filters),
        regexes_to_ignore=tuple(ignore),
        ignore_case=config.get("ignore_case", False),
        ignore_punctuation=config.get("ignore_punctuation", False),
        ignore_numbers=config.get("ignore_numbers", False),
    )


def _pipeline(steps: Any, where: str) -> tuple[_Step, ...]:
    """A filter's steps, checked: known functions with known arguments, take_first last and only there."""
    if not isinstance(steps, list) or not steps:
        raise ValueError(f"{where}: 'filter' must be a non-empty list of steps")
    out: list[_Step] = []
    for i, step in enumerate(steps):
        if not isinstance(step, Mapping) or not isinstance(step.get("function"), str):
            raise ValueError(f"{where}: step {i} must be an object with a 'function'")
        function = step["function"]
        if function not in FILTERS:
            raise ValueError(
                f"{where}: function {quote(function)} is not computed here ({', '.join(FILTERS)})"
            )
        check_keys(
            {k: v for k, v in step.items() if k != "function"}, FILTERS[function], f"{where} {function}"
        )
        last = i == len(steps) - 1
        if (function == "take_first") != last:
            # After take_first lm-eval's filters see a string where they expect a list of responses.
            raise ValueError(f"{where}: take_first must be its last step, and only there")
        if function != "regex":
            out.append(_Step(function))
            continue
        pattern = step.get("regex_pattern", REGEX_PATTERN)
        group = step.get("group_select", 0)
        fallback = step.get("fallback", FALLBACK)
        if not isinstance(pattern, str):
            raise ValueError(f"{where}: regex_pattern must be a string, not {describe(pattern)}")
        _check_pattern(pattern, f"{where} regex_pattern")
        if isinstance(group, bool) or not isinstance(group, int):
            raise ValueError(f"{where}: group_select must be an integer, not {describe(group)}")
        if not isinstance(fallback, str):
            raise ValueError(f"{where}: fallback must be a string, not {describe(fallback)}")
        out.append(_Step("regex", pattern, group, fallback))
    return tuple(out)


def _check_pattern(pattern: str, where: str) -> None:
    try:
        _compiled(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError(f"{where}: invalid regex {quote(pattern)}: {exc}") from None
