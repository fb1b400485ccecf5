"""lm-eval's `loglikelihood` and `loglikelihood_rolling` tasks as benchmark rows (LAMBADA, WikiText):
lm_eval_tasks.ROW_BUILDERS' builders for them, and the refusals of what a row cannot reproduce exactly.

- `loglikelihood`: each document's one request (context, target) becomes a `loglikelihood` row
  (scorers/loglikelihood.py): its input the context, sent raw, its continuation the target, leading space
  and all. The row records lm-eval's items: perplexity (the log-likelihood, aggregated as exp(-mean)) and
  acc (whether the target is the greedy continuation).
- `loglikelihood_rolling`: each document's one text becomes a `perplexity` row scored in lm-eval's rolling
  windows (`rolling: true`): the text from the model's BOS token on, in disjoint windows of the model's
  context. The row records the log-likelihood with the document's word and byte counts, which
  word_perplexity, byte_perplexity and bits_per_byte weigh it by (summaries.lm_eval_aggregate).

What a row records of a document is what the task's own process_results makes of it, asked here with two
made-up results: the row reproduces the task only if the function passes the log-likelihood through and
its other values (the counts, greedy as 0 or 1) are what the row computes; anything else is refused.

No pytest, no torch; lm-eval's objects are read, never imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmeval.lm_eval_requests import LmEvalError, by_document, row_id
from pytest_llmeval.models import _one_line  # an exception as one line, cut to 300 characters

__all__ = ["likelihood_rows", "rolling_rows"]

# The metrics each output type's rows reproduce.
LIKELIHOOD_METRICS = frozenset({"perplexity", "acc"})
ROLLING_METRICS = {
    "word_perplexity": "word_count",
    "byte_perplexity": "byte_count",
    "bits_per_byte": "byte_count",
}
# Two made-up log-likelihoods a task's process_results is asked about (exact in binary: compared with ==).
_PROBES = (-1.25, -0.5)


def _common(name: str, task: Any, allowed: frozenset[str] | set[str]) -> list[str]:
    """The task's metrics, refused where a row cannot reproduce them, its repeats or its filters."""
    config = task.config
    metrics = [m["metric"] for m in (config.metric_list or [])]
    other = [m for m in metrics if not isinstance(m, str) or m not in allowed]
    if other:
        raise LmEvalError(
            f"lm-eval task {name}: metric_list has {other[0]!r} ({', '.join(sorted(allowed))} only)"
        )
    if (config.repeats or 1) != 1:
        raise LmEvalError(f"lm-eval task {name}: repeats {config.repeats} (one answer per request only)")
    if config.filter_list:
        raise LmEvalError(f"lm-eval task {name}: filter_list is not converted for {config.output_type}")
    return [str(m) for m in metrics]


def _results(name: str, task: Any, doc: Any, doc_id: int, result: Any) -> Mapping[str, Any]:
    try:
        found = task.process_results(doc, [result])
    except Exception as exc:  # the task's own function, on a document it may not read
        raise LmEvalError(
            f"lm-eval task {name}, document {doc_id}: its process_results fails: {_one_line(exc)}"
        ) from None
    if not isinstance(found, Mapping):
        raise LmEvalError(f"lm-eval task {name}: process_results gives {type(found).__name__}, not a dict")
    return found


def likelihood_rows(name: str, task: Any, block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One loglikelihood row per document, from the (context, target) request lm-eval built for it."""
    metrics = _common(name, task, LIKELIHOOD_METRICS)
    rows = []
    for doc_id, instances in by_document(task):
        where = f"lm-eval task {name}, document {doc_id}"
        if len(instances) != 1 or len(instances[0].arguments) != 2:
            raise LmEvalError(f"{where}: its requests are not one (context, target) pair")
        context, target = (str(a) for a in instances[0].arguments)
        if not context or not target:
            raise LmEvalError(f"{where}: its context or its target is empty")
        for loglik, greedy in zip(_PROBES, (True, False), strict=True):
            found = _results(name, task, instances[0].doc, doc_id, (loglik, greedy))
            expected = {"perplexity": loglik, "acc": int(greedy)}
            if {m: found.get(m) for m in metrics} != {m: expected[m] for m in metrics}:
                raise LmEvalError(
                    f"lm-eval task {name}: process_results is not the log-likelihood and greedy or not"
                )
        rows.append(
            {
                "id": row_id(name, doc_id),
                # Every row needs one; a completion row's is not sent: it says what the row asks.
                "instruction": f"lm-eval task {name}: the text most likely to follow the input.",
                "input": context,
                "expected_output": target.strip() or target,
                "evaluation_type": "loglikelihood",
                "evaluation_config": {
                    "continuation": target,
                    "prompt_mode": "completion",
                    "lm_eval": {**block, "doc_id": doc_id},
                },
                "difficulty": "medium",
            }
        )
    return rows


def rolling_rows(name: str, task: Any, block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One perplexity row per document, scored in lm-eval's rolling windows, from the text lm-eval built."""
    metrics = _common(name, task, set(ROLLING_METRICS))
    if int(task.config.num_fewshot or 0):
        raise LmEvalError(
            f"lm-eval task {name}: loglikelihood_rolling scores a text alone: give --num-fewshot=0"
        )
    rows = []
    for doc_id, instances in by_document(task):
        where = f"lm-eval task {name}, document {doc_id}"
        if len(instances) != 1 or len(instances[0].arguments) != 1:
            raise LmEvalError(f"{where}: its requests are not one text")
        text = str(instances[0].arguments[0])
        if not text.strip():
            raise LmEvalError(f"{where}: its text is empty")
        counts: dict[str, int] = {}
        for loglik in _PROBES:
            found = _results(name, task, instances[0].doc, doc_id, loglik)
            for metric in metrics:
                item = found.get(metric)
                paired = isinstance(item, (tuple, list)) and len(item) == 2 and item[0] == loglik
                count = item[1] if paired and item is not None else None
                if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                    raise LmEvalError(
                        f"lm-eval task {name}: process_results' {metric} is not (log-likelihood, a count)"
                    )
                if counts.setdefault(ROLLING_METRICS[metric], count) != count:
                    raise LmEvalError(f"lm-eval task {name}: process_results' counts disagree for {metric}")
        rows.append(
            {
                "id": row_id(name, doc_id),
                "instruction": f"lm-eval task {name}: the text's log-likelihood, every token once.",
                "input": text,
                "expected_output": "",
                "evaluation_type": "perplexity",
                "evaluation_config": {"rolling": True, "lm_eval": {**block, "doc_id": doc_id, **counts}},
                "difficulty": "medium",
            }
        )
    return rows
