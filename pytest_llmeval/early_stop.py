"""--llmeval-sequential: where a benchmark stops, and why, from its row records alone.

One pure function (`outcome`) decides, for one benchmark file, every gated column's anytime-valid decision
(sequential.py) over the rows in their planned order, looking only at chunk boundaries and only at the
prefix of planned rows that has finished. Three places call it and so agree: the worker that is about to
generate a chunk (it skips the rows past a decision), the gate item (its verdict), and results.json (rows a
worker computed past the decision, under xdist, become the same skipped rows a serial run has). A decision
depends on the rows up to its boundary only, so every process that sees that prefix reaches it, and a
serial run and a run with -n 2 stop at the same row.

Pure: no pytest, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmeval.records import partner, score

# Types whose scores are 0 or 1 by construction: their comparison is the test on discordant pairs. Any
# other bounded score (partial credit, similarity, pass@k) is compared by betting on the paired difference.
BINARY_TYPES = frozenset({"exact_match", "multiple_choice"})
QUESTIONS = {"in": "better_than_base", "out": "no_degradation"}


@dataclass(frozen=True)
class Settings:
    """What every process needs to reach the same decisions (results.json `sequential_settings`)."""

    seed: int  # --llmeval-seed: the planned order
    chunk: int  # rows per look (the generation chunk, --llmeval-batch-size)
    alpha: float  # --llmeval-alpha, before the split
    warn_drop: float
    fail_drop: float
    better_family: int  # gated comparisons of better_than_base in the run: alpha is split among them
    degradation_family: int  # gated comparisons of no_degradation, likewise

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "chunk": self.chunk,
            "alpha": self.alpha,
            "warn_drop": self.warn_drop,
            "fail_drop": self.fail_drop,
            "better_family": self.better_family,
            "degradation_family": self.degradation_family,
            "alpha_split": "bonferroni: each decision at alpha / (the comparisons of its gate in the run)",
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Settings:
        return cls(
            seed=int(data["seed"]),
            chunk=int(data["chunk"]),
            alpha=float(data["alpha"]),
            warn_drop=float(data["warn_drop"]),
            fail_drop=float(data["fail_drop"]),
            better_family=int(data["better_family"]),
            degradation_family=int(data["degradation_family"]),
        )

    def alpha_for(self, question: str) -> float:
        family = self.better_family if question == "better_than_base" else self.degradation_family
        return self.alpha / max(1, family)


@dataclass(frozen=True)
class Outcome:
    """One benchmark's sequential state: each gated column's decision, and where the rows stop."""

    order: tuple[str, ...]  # node ids in planned order
    decisions: Mapping[str, Any]  # column -> sequential.Decision
    questions: Mapping[str, str]  # column -> better_than_base | no_degradation
    stop: int | None  # planned rows run: every column decided after these; None: the file runs to its end
    reason: str | None  # why the rows past `stop` were not run

    def stopped(self, nodeid: str) -> bool:
        """Whether a row lies past the stop (and is, or becomes, a skipped row)."""
        return self.stop is not None and self.order.index(nodeid) >= self.stop

    def to_json(self, settings: Settings) -> dict[str, Any]:
        """results.json's per-benchmark `sequential` block."""
        return {
            "seed": settings.seed,
            "planned_rows": len(self.order),
            "stopped_after": self.stop,
            "early": self.stop is not None and self.stop < len(self.order),
            "reason": self.reason,
            "decisions": {
                column: {
                    "question": self.questions[column],
                    "alpha": settings.alpha_for(self.questions[column]),
                    **decision.to_json(),
                }
                for column, decision in self.decisions.items()
            },
        }


def shell(nodeid: str, benchmark: Mapping[str, Any], case: Any) -> dict[str, Any]:
    """What `planned` and `stops_early` read of a collected row (`case`: a benchmark.Case) before it has a
    record: the collection's order and the records' agree."""
    return {
        "nodeid": nodeid,
        "line": case.line,
        "difficulty": case.difficulty,
        "benchmark": benchmark,
        "evaluation_type": case.evaluation_type,
        "sequential": case.run_options.get("sequential"),
    }


def stops_early(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a benchmark file (its rows' `shell`s) may stop early. Not when a row says
    `"sequential": false` in evaluation_config (the file opts out), nor when every row is a perplexity row:
    those are compared on cross-entropy, which no bounded test covers."""
    opted_out = any(r.get("sequential") is False for r in rows)
    return not opted_out and not all(r["evaluation_type"] == "perplexity" for r in rows)


def domain_of(info: Mapping[str, Any], column: str) -> str | None:
    """A gated column's domain on a benchmark: its entry of `domains` (several gated columns), else the
    evaluated column's `domain`."""
    domains = info.get("domains")
    if isinstance(domains, Mapping):
        found = domains.get(column)
        return None if found is None else str(found)
    domain = info.get("domain")
    return None if domain is None else str(domain)


def planned(records: Sequence[Mapping[str, Any]], seed: int) -> list[Mapping[str, Any]]:
    """The rows in their planned order: a seeded shuffle of the file's rows, stratified by difficulty, that
    depends on the file's rows, its name and the seed only (sequential.planned_order)."""
    from pytest_llmeval.sequential import planned_order

    if not records:
        return []
    in_file = sorted(records, key=lambda r: (int(r["line"]), str(r["nodeid"])))
    order = planned_order([str(r["difficulty"]) for r in in_file], seed, str(in_file[0]["benchmark"]["name"]))
    return [in_file[i] for i in order]


def boundaries(planned_rows: int, chunk: int) -> list[int]:
    """Where the looks are: after every whole chunk of the planned order, and at its end."""
    ends = list(range(chunk, planned_rows, chunk))
    return [*ends, planned_rows] if planned_rows else []


def outcome(
    order: Sequence[str],
    records: Mapping[str, Mapping[str, Any]],
    columns: Sequence[str],
    settings: Settings,
) -> Outcome:
    """The decisions on the finished prefix of `order` (node ids in planned order; `records` by node id may
    lack rows still running elsewhere): a look at a boundary sees only rows before it, so a longer prefix
    only adds looks. `columns`: the gated columns compared with the base on this benchmark."""
    from pytest_llmeval.sequential import decide_better, decide_no_degradation

    prefix = 0
    while prefix < len(order) and order[prefix] in records:
        prefix += 1
    looks = [b for b in boundaries(len(order), settings.chunk) if b <= prefix]
    done = [records[n] for n in order[:prefix]]
    info = done[0]["benchmark"] if done else {}
    binary = bool(done) and all(r["evaluation_type"] in BINARY_TYPES for r in done)
    decisions: dict[str, Any] = {}
    questions: dict[str, str] = {}
    for column in columns if looks else []:  # before the first boundary there is nothing to look at
        domain = domain_of(info, column)
        if domain not in QUESTIONS:
            continue
        question = questions[column] = QUESTIONS[domain]
        base = [_value(r, partner(r, column)) for r in done]
        adapter = [_value(r, column) for r in done]
        alpha = settings.alpha_for(question)
        if question == "better_than_base":
            decisions[column] = decide_better(base, adapter, binary=binary, alpha=alpha, boundaries=looks)
        else:
            decisions[column] = decide_no_degradation(
                base,
                adapter,
                alpha=alpha,
                warn_drop=settings.warn_drop,
                fail_drop=settings.fail_drop,
                boundaries=looks,
            )
    stop: int | None = None
    reason: str | None = None
    if decisions and all(d.decided is not None for d in decisions.values()):
        stop = max(int(d.at) for d in decisions.values())
        if stop < len(order):
            said = "; ".join(
                f"{column}: {d.message(len(order))}" if len(decisions) > 1 else d.message(len(order))
                for column, d in decisions.items()
            )
            reason = f"not run: --llmeval-sequential {said}"
        else:
            stop = None  # decided at the very end: nothing was left to skip
    return Outcome(tuple(order), decisions, questions, stop, reason)


def _value(record: Mapping[str, Any], column: str) -> float:
    """A side's score value, NaN when the row has none (skipped, errored): it keeps its place in the order
    and counts for nothing."""
    found = score(record, column)
    if found is None:
        return math.nan
    value = float(found["value"])
    return value if 0.0 <= value <= 1.0 else math.nan


def skipped(record: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """A row computed past the stop (another worker ran it before the decision was known), as a serial run
    records a row it skipped: no model outputs, not passed, the reason."""
    return {
        **{k: v for k, v in record.items() if k != "cost"},
        "models": {},
        "passed": False,
        "error": None,
        "skipped": reason,
    }


def apply(
    records: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None
) -> tuple[list[Mapping[str, Any]], dict[str, dict[str, Any]], int]:
    """results.json's view of a sequential run (`config`: the run's meta `sequential`, None when off): the
    records with every row past its benchmark's stop as a skipped row, each benchmark's `sequential` block,
    and how many rows were computed past a stop (under xdist) and discarded."""
    if not config:
        return list(records), {}, 0
    settings = Settings.from_json(config)
    columns = [str(c) for c in config.get("columns") or []]
    by_benchmark: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_benchmark.setdefault(str(record["benchmark"]["name"]), []).append(record)
    kept: list[Mapping[str, Any]] = []
    blocks: dict[str, dict[str, Any]] = {}
    discarded = 0
    sequential = set(config.get("benchmarks") or [])
    for name, rows in by_benchmark.items():
        if name not in sequential:  # opted out, or not compared with the base
            kept += rows
            continue
        order = [str(r["nodeid"]) for r in planned(rows, settings.seed)]
        result = outcome(order, {str(r["nodeid"]): r for r in rows}, columns, settings)
        blocks[name] = result.to_json(settings)
        for row in rows:
            if result.stopped(str(row["nodeid"])) and result.reason is not None:
                discarded += bool(row.get("models"))
                row = skipped(row, result.reason)
            kept.append(row)
    return kept, blocks, discarded
