"""What a run spent, and the caps that stop it: tokens read and generated, seconds, money.

The evaluator records, per row and column, the tokens a model read and generated for it (0 for an output
served from the generation cache), the seconds of generation (a batch's time shared among its rows) and of
scoring, and for a served model with a price the dollars. results.json's `cost` sums them per model and
per benchmark (run_cost); Budget is what --llmeval-max-tokens and --llmeval-max-cost check before each
chunk of rows is sent to a model.

Pure: no pytest, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MILLION = 1_000_000


class PriceError(ValueError):
    """A price table that cannot be read; the message names where and what."""


@dataclass(frozen=True)
class Price:
    """What one model id costs, in US dollars per million tokens (the unit every provider lists)."""

    prompt: float
    completion: float

    def usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / MILLION


def parse_prices(table: object, source: str) -> dict[str, Price]:
    """[tool.llmeval.prices]: `"model id" = {prompt = 0.15, completion = 0.60}` (USD per million tokens)."""
    if not isinstance(table, Mapping):
        raise PriceError(f"{source} must be a table of model id = {{prompt = ..., completion = ...}}")
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        where = f"{source}: {model!r}"
        if not isinstance(entry, Mapping) or set(entry) != {"prompt", "completion"}:
            raise PriceError(f"{where} must be {{prompt = USD per 1M tokens, completion = USD per 1M}}")
        values = []
        for name in ("prompt", "completion"):
            value = entry[name]
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value < 0:
                raise PriceError(f"{where}: {name} must be a price of 0 or more, got {value!r}")
            values.append(float(value))
        prices[str(model)] = Price(*values)
    return prices


def side_cost(
    *,
    prompt_tokens: int | None,
    generated_tokens: int | None,
    cached: bool,
    seconds: float,
    price: Price | None = None,
) -> dict[str, Any]:
    """One row's spending by one column (a row record's `cost` entry). Tokens None: the server did not
    report them; cached: the output came from the generation cache, and nothing was spent on it."""
    usd = None
    if price is not None and prompt_tokens is not None and generated_tokens is not None:
        usd = price.usd(prompt_tokens, generated_tokens)
    return {
        "prompt_tokens": prompt_tokens,
        "generated_tokens": generated_tokens,
        "cached": cached,
        "generation_s": seconds,
        "scoring_s": 0.0,
        "usd": usd,
    }


def summarize(costs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of rows' side costs: tokens (None when no row's were reported), rows from the cache,
    seconds, rows per second of generation and scoring, dollars (None without a price)."""
    rows = cached = 0
    tokens: dict[str, int | None] = {"prompt_tokens": None, "generated_tokens": None}
    generation = scoring = 0.0
    usd: float | None = None
    uncounted = 0
    for cost in costs:
        rows += 1
        cached += bool(cost.get("cached"))
        for name in tokens:
            value = cost.get(name)
            if value is not None:
                tokens[name] = (tokens[name] or 0) + int(value)
        uncounted += not cost.get("cached") and cost.get("prompt_tokens") is None
        generation += float(cost.get("generation_s") or 0.0)
        scoring += float(cost.get("scoring_s") or 0.0)
        if cost.get("usd") is not None:
            usd = (usd or 0.0) + float(cost["usd"])
    seconds = generation + scoring
    return {
        "rows": rows,
        "cached_rows": cached,
        **tokens,
        "uncounted_rows": uncounted,  # measured rows, and servers that report no usage
        "generation_s": round(generation, 6),
        "scoring_s": round(scoring, 6),
        "rows_per_s": round(rows / seconds, 3) if seconds > 0 else None,
        "generated_tokens_per_s": round(tokens["generated_tokens"] / generation, 3)
        if tokens["generated_tokens"] and generation > 0
        else None,
        "usd": None if usd is None else round(usd, 8),
    }


def run_cost(records: Sequence[Mapping[str, Any]], spent: Mapping[str, Any] | None) -> dict[str, Any]:
    """results.json's `cost`: per model, per benchmark and model, and in total; with the weights' loading
    time per model, the caps and why the run stopped early, from the processes' `spent` (merge_spent)."""
    spent = spent or {}
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    by_benchmark: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for record in sorted(records, key=lambda r: str(r["nodeid"])):
        for column, cost in (record.get("cost") or {}).items():
            by_model.setdefault(column, []).append(cost)
            by_benchmark.setdefault(record["benchmark"]["name"], {}).setdefault(column, []).append(cost)
    loads: Mapping[str, float] = spent.get("load_s") or {}
    models = {
        column: summarize(costs) | {"load_s": round(float(loads.get(column, 0.0)), 6)}
        for column, costs in by_model.items()
    }
    total = summarize(cost for costs in by_model.values() for cost in costs)
    return {
        "models": models,
        "benchmarks": {
            name: {column: summarize(costs) for column, costs in columns.items()}
            for name, columns in sorted(by_benchmark.items())
        },
        "total": {
            "prompt_tokens": total["prompt_tokens"],
            "generated_tokens": total["generated_tokens"],
            "usd": total["usd"],
            "load_s": round(sum(float(v) for v in loads.values()), 6),
            "generation_s": total["generation_s"],
            "scoring_s": total["scoring_s"],
        },
        "caps": spent.get("caps") or {"max_tokens": None, "max_cost_usd": None},
        # Peak memory of the process that needed most (MB): resident on the CPU, torch's on a GPU.
        "memory": {k: round(float(v), 1) for k, v in (spent.get("memory") or {}).items()},
        "stopped": spent.get("stopped"),
        "note": "tokens and dollars are what was spent: an output served from the generation cache "
        "counts 0; a batch's seconds are shared among its rows",
    }


def merge_spent(processes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Every process's `spent` (evaluation.provenance.Provenance.spent) as one: loading seconds summed per
    model, the caps, and each process's stop reason, once."""
    loads: dict[str, float] = {}
    caps: Mapping[str, Any] | None = None
    stopped: list[str] = []
    memory: dict[str, float] = {}
    for spent in processes:
        # Each process's peak, and of those the largest: what one process (one GPU) needed at most.
        for name, value in (spent.get("memory") or {}).items():
            memory[name] = max(memory.get(name, 0.0), float(value))
        for column, seconds in (spent.get("load_s") or {}).items():
            loads[column] = loads.get(column, 0.0) + float(seconds)
        # Every process has the same caps; the xdist controller's names no workers (it runs no rows).
        if spent.get("caps") and (caps is None or spent["caps"].get("workers", 1) > caps.get("workers", 1)):
            caps = spent["caps"]
        if spent.get("stopped") and spent["stopped"] not in stopped:
            stopped.append(str(spent["stopped"]))
    return {"load_s": loads, "caps": caps, "stopped": "; ".join(stopped) or None, "memory": memory}


@dataclass
class Budget:
    """--llmeval-max-tokens and --llmeval-max-cost for one process: under xdist each of `share` workers
    gets an equal part, so that together they never pass the cap by more than a chunk each."""

    max_tokens: int | None = None
    max_usd: float | None = None
    share: int = 1
    tokens: int = 0
    usd: float = 0.0

    def spend(self, tokens: int, usd: float = 0.0) -> None:
        self.tokens += tokens
        self.usd += usd

    def exhausted(self) -> str | None:
        """Why no further rows may be sent to a model, or None while there is budget left."""
        part = "" if self.share == 1 else f" (this worker's 1/{self.share} share)"
        if self.max_tokens is not None and self.tokens >= self.max_tokens / self.share:
            return (
                f"--llmeval-max-tokens {self.max_tokens} reached{part}: {self.tokens} tokens spent; "
                "the remaining rows were not run"
            )
        if self.max_usd is not None and self.usd >= self.max_usd / self.share:
            return (
                f"--llmeval-max-cost {self.max_usd:g} reached{part}: ${self.usd:.4f} spent; "
                "the remaining rows were not run"
            )
        return None

    def caps(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "max_cost_usd": self.max_usd, "workers": self.share}


def summary_line(cost: Mapping[str, Any]) -> str | None:
    """One terminal line from results.json's `cost`: per model, tokens, seconds and rows per second."""
    models = cost.get("models") or {}
    if not models:
        return None
    parts = []
    for column, c in models.items():
        text = f"{column} "
        if c["prompt_tokens"] is not None or c["generated_tokens"] is not None:
            text += f"{c['prompt_tokens'] or 0:,} prompt + {c['generated_tokens'] or 0:,} generated tokens, "
        text += f"{c['generation_s'] + c['scoring_s']:.1f} s"
        if c["rows_per_s"] is not None:
            text += f" ({c['rows_per_s']:g} rows/s)"
        if c["cached_rows"]:
            text += f", {c['cached_rows']} rows from the cache"
        if c["usd"] is not None:
            text += f", ${c['usd']:.4f}"
        parts.append(text)
    return "cost: " + "; ".join(parts)
