"""lm-eval's `generate_until` tasks as benchmark rows (GSM8K first): lm_eval_tasks.ROW_BUILDERS' builder for
them, and the refusals of what a row cannot reproduce exactly.

Each document's one request, as lm-eval built it, becomes one `lm_eval_exact_match` row
(scorers/lm_eval_exact_match.py): its `input` the rendered context (sent raw: no chat template, as lm-eval's
`hf` model sends it), its expected_output the gold answer (doc_to_target, as lm-eval casts it to text), its
`until` and `max_new_tokens` the request's generation kwargs (lm-eval's default of 256 new tokens when the
task gives none; the model's EOS text is added where it is generated, as lm-eval's hf model adds it), the
task's filter_list and the exact_match options of its metric_list. The row's `lm_eval` block names lm-eval's
result keys, `exact_match,FILTER` for each filter, each aggregated by its mean; the first filter's exact
match passes or fails the row.

Refused, in one line naming the task and the field: sampling (do_sample, a temperature above 0), repeats
other than 1, generation kwargs other than until / do_sample / temperature / the token limit, a
process_results of the task's own, several gold answers, a metric other than exact_match (or one of its
options lm-eval's exact_match does not take), a filter this package does not compute, a pipeline that does
not end in take_first, an empty stop string.

No pytest, no torch; lm-eval's objects are read, never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmeval.lm_eval_requests import LmEvalError, by_document, row_id
from pytest_llmeval.models import _one_line  # an exception as one line, cut to 300 characters
from pytest_llmeval.scorers import lm_eval_exact_match

__all__ = ["DEFAULT_MAX_GEN_TOKS", "generate_rows"]

# lm-eval's hf model's max_gen_toks when a request gives none (HFLM's default, normalize_gen_kwargs').
DEFAULT_MAX_GEN_TOKS = 256
# The generation kwargs a row reproduces: the stop strings, the token limit (under any of lm-eval's
# aliases), and greedy decoding said either way.
_LIMIT_ALIASES = ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens")
_GENERATION_KEYS = ("until", "do_sample", "temperature", *_LIMIT_ALIASES)
# What a metric_list entry of exact_match may hold: lm-eval's own keys, and exact_match's options.
_METRIC_KEYS = ("metric", "aggregation", "higher_is_better", "hf_evaluate")
_EXACT_MATCH_OPTIONS = ("regexes_to_ignore", "ignore_case", "ignore_punctuation", "ignore_numbers")


def generate_rows(name: str, task: Any, block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One lm_eval_exact_match row per document, from the request lm-eval built for it."""
    config = task.config
    options = _metric_options(name, config)
    filters = _filters(name, config)
    if (config.repeats or 1) != 1:
        raise LmEvalError(f"lm-eval task {name}: repeats {config.repeats} (one answer per request only)")
    if config.process_results is not None:
        raise LmEvalError(f"lm-eval task {name}: process_results is the task's own Python function")
    if getattr(task, "multiple_target", False):
        raise LmEvalError(f"lm-eval task {name}: doc_to_target gives several gold answers (multiple_target)")
    keys = [f"exact_match,{f['name']}" for f in filters]
    origin = {
        **block,
        "metrics": keys,
        "aggregation": dict.fromkeys(keys, "mean"),
        "higher_is_better": dict.fromkeys(keys, True),
    }
    rows = []
    for doc_id, instances in by_document(task):
        where = f"lm-eval task {name}, document {doc_id}"
        if len(instances) != 1:
            raise LmEvalError(f"{where}: {len(instances)} requests (one per document only)")
        context, kwargs = instances[0].arguments
        if not isinstance(context, str) or not context:
            raise LmEvalError(f"{where}: its context is empty")
        until, limit = _generation(f"lm-eval task {name}", kwargs)
        evaluation_config: dict[str, Any] = {
            "prompt_mode": "completion",
            "until": until,
            "max_new_tokens": limit,
            "filter_list": filters,
            **options,
            "lm_eval": {**origin, "doc_id": doc_id},
        }
        try:
            lm_eval_exact_match.validate_config(evaluation_config)
        except ValueError as exc:  # a pattern Python cannot compile, a filter's bad argument
            raise LmEvalError(f"lm-eval task {name}: {exc}") from None
        rows.append(
            {
                "id": row_id(name, doc_id),
                # Every row needs one; a completion row's is not sent: it says what the row asks.
                "instruction": f"lm-eval task {name}: continue the input; its filters take the answer.",
                "input": context,
                "expected_output": _gold(where, task, instances[0].doc),
                "evaluation_type": "lm_eval_exact_match",
                "evaluation_config": evaluation_config,
                # Every row needs one; lm-eval's tasks grade none.
                "difficulty": "medium",
            }
        )
    return rows


def _gold(where: str, task: Any, doc: Any) -> str:
    """The gold answer as lm-eval compares it: doc_to_target (a choice of doc_to_choice by its index), as
    text (process_results casts it to the type of the filtered answer, a string)."""
    try:
        gold = task.doc_to_target(doc)
        if task.config.doc_to_choice is not None:
            choices = task.doc_to_choice(doc)
            if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
                raise LmEvalError(f"{where}: doc_to_target gives {gold!r}, not an index of doc_to_choice")
            gold = choices[gold]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise LmEvalError(f"{where}: lacks what the task reads: {_one_line(exc)}") from None
    if isinstance(gold, (list, tuple, dict)):
        raise LmEvalError(f"{where}: doc_to_target gives several gold answers ({gold!r})")
    return str(gold)


def _generation(where: str, kwargs: Any) -> tuple[list[str], int]:
    """(until, max new tokens) of a request's generation kwargs; sampling and other knobs refused."""
    if not isinstance(kwargs, Mapping):
        raise LmEvalError(f"{where}: generation_kwargs is not a mapping ({kwargs!r})")
    other = [k for k in kwargs if k not in _GENERATION_KEYS]
    if other:
        raise LmEvalError(
            f"{where}: generation_kwargs has {other[0]!r} (until, do_sample, temperature and "
            "max_gen_toks only: greedy decoding to a stop string)"
        )
    if kwargs.get("do_sample"):
        raise LmEvalError(f"{where}: generation_kwargs do_sample is true (greedy decoding only)")
    temperature = kwargs.get("temperature") or 0.0
    if not isinstance(temperature, (int, float)) or temperature > 0:
        raise LmEvalError(f"{where}: generation_kwargs temperature {temperature!r} (greedy decoding: 0 only)")
    until = kwargs.get("until")
    until = [] if until is None else [until] if isinstance(until, str) else until
    if not isinstance(until, list) or not all(isinstance(s, str) for s in until):
        raise LmEvalError(f"{where}: generation_kwargs until is {until!r}, not a list of strings")
    if "" in until:
        raise LmEvalError(f"{where}: generation_kwargs until has an empty string (it would stop at once)")
    # lm-eval's priority among the aliases (normalize_gen_kwargs).
    given = [kwargs[k] for k in _LIMIT_ALIASES if kwargs.get(k) is not None]
    limit = given[0] if given else DEFAULT_MAX_GEN_TOKS
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise LmEvalError(f"{where}: generation_kwargs max_gen_toks is {limit!r}, not a positive integer")
    return list(until), limit


def _metric_options(name: str, config: Any) -> dict[str, Any]:
    """exact_match's options from the task's metric_list (none: lm-eval's default, exact_match alone)."""
    entries = config.metric_list or [{"metric": "exact_match"}]
    found: dict[str, Any] = {}
    for entry in entries:
        metric = entry.get("metric")
        if metric != "exact_match":
            shown = metric if isinstance(metric, str) else getattr(metric, "__name__", repr(metric))
            raise LmEvalError(f"lm-eval task {name}: metric_list has {shown!r} (exact_match only)")
        other = [k for k in entry if k not in (*_METRIC_KEYS, *_EXACT_MATCH_OPTIONS)]
        if other:
            raise LmEvalError(f"lm-eval task {name}: metric_list exact_match has {other[0]!r}")
        if entry.get("hf_evaluate"):
            raise LmEvalError(f"lm-eval task {name}: metric_list exact_match uses hf_evaluate's metric")
        if entry.get("aggregation", "mean") != "mean":
            raise LmEvalError(
                f"lm-eval task {name}: metric_list exact_match aggregation {entry['aggregation']!r} "
                "(mean only)"
            )
        if entry.get("higher_is_better", True) is not True:
            raise LmEvalError(f"lm-eval task {name}: metric_list exact_match higher_is_better is not true")
        if found:
            raise LmEvalError(f"lm-eval task {name}: metric_list names exact_match twice")
        found = {k: entry[k] for k in _EXACT_MATCH_OPTIONS if k in entry}
        if found.get("regexes_to_ignore") is None:
            found.pop("regexes_to_ignore", None)  # lm-eval's None: nothing to ignore
    return found


def _filters(name: str, config: Any) -> list[dict[str, Any]]:
    """The task's filter_list as rows carry it; lm-eval's default (`none`: take_first) when it has none."""
    entries = config.filter_list
    if entries is None:
        return [dict(f) for f in lm_eval_exact_match.DEFAULT_FILTER]
    out: list[dict[str, Any]] = []
    for entry in entries:
        label = entry.get("name")
        steps = [dict(step) for step in entry.get("filter") or []]
        for step in steps:
            function = step.get("function")
            if function not in lm_eval_exact_match.FILTERS:
                known = ", ".join(lm_eval_exact_match.FILTERS)
                raise LmEvalError(
                    f"lm-eval task {name}: filter_list {label!r} uses the filter {function!r} ({known} only)"
                )
        out.append({"name": label, "filter": steps})
    try:
        lm_eval_exact_match.validate_config({"filter_list": out})
    except ValueError as exc:
        raise LmEvalError(f"lm-eval task {name}: filter_list: {exc}") from None
    return out
