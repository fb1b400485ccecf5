"""The history of runs: every run's results.json document, kept as one file per run beside results.json.

results.json is "the latest run"; the history keeps every run, so that a `-k` selection, `--lf` or a Ctrl-C
never costs the last real result, and no_regression compares against the right run: the most recent
*complete* run of the same adapter on the same benchmark content (Baselines.for_benchmark).

Layout: `<folder of results.json>/.llmeval/history/<UTC time>_<adapter>[_<version>].json`, each written
atomically. The names start with the time, so name order is time order, and a folder listing is the
history. One file per run (not an append-only JSONL): a crash while writing one entry can never damage
another, retention is deleting files, and each entry is a results.json every tool already reads.

No pytest or torch import: the plugin's hooks write and read through these functions; `python -m
pytest_llmeval history` (cli/history.py) lists and compares entries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_llmeval.records import BenchmarkInfo
from pytest_llmeval.results import SCHEMA_VERSION, Baseline, previous_comparison
from pytest_llmeval.results_file import write_atomic
from pytest_llmeval.results_reader import ResultsFileError, read_results

HISTORY_DIR = Path(".llmeval") / "history"
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")


def history_dir(results_path: Path) -> Path:
    """The history folder of a results.json: `.llmeval/history/` beside it."""
    return results_path.parent / HISTORY_DIR


# Who a run evaluated: (adapter name, None) with an adapter, (None, base model name) for a base-only run.
Identity = tuple[str | None, str | None]


def identity_of(document: Mapping[str, Any]) -> Identity:
    """Who a run evaluated: (adapter name, None) for an adapter, (None, base model) for a base-only run."""
    adapter = document.get("adapter_name")
    if adapter is not None:
        return str(adapter), None
    base = document.get("base_model")
    return None, None if base is None else str(base)


def describe_identity(identity: Identity) -> str:
    adapter, base = identity
    return f"adapter '{adapter}'" if adapter is not None else f"base model '{base}'"


# What entry_name writes: the UTC time to the microsecond, then the run's label.
_ENTRY_NAME = re.compile(r"\d{8}T\d{6}\.\d{6}Z_[^/]+\.json")


def entry_name(document: Mapping[str, Any], when: datetime) -> str:
    """`20261126T173012.123456Z_math_0.2.json`: the UTC time (to the microsecond), adapter, version."""
    stamp = when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    adapter, base = identity_of(document)
    parts = [adapter if adapter is not None else f"base-{base or 'model'}"]
    if document.get("adapter_version") is not None:
        parts.append(str(document["adapter_version"]))
    label = "_".join(_UNSAFE.sub("-", p).strip("-.") or "x" for p in parts)
    return f"{stamp}_{label[:80]}.json"


def append(folder: Path, document: Mapping[str, Any], *, when: datetime | None = None) -> Path:
    """Write `document` as a new history entry (atomically) and return its path; never replaces one."""
    moment = when or datetime.now(timezone.utc)
    name = entry_name(document, moment)
    path = folder / name
    n = 1
    while path.exists():  # two runs in one microsecond (or a clock that went back): keep both
        n += 1
        path = folder / name.replace(".json", f"-{n}.json")
    write_atomic(path, document)
    return path


def entries(folder: Path) -> list[Path]:
    """The history's entries, oldest first (a missing folder is an empty history): the files named as
    entry_name names them, and no other. Pruning deletes only these: a `notes.json` someone keeps in the
    folder is never listed, compared or removed. (Temporary files of an atomic write start with a dot.)"""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if is_entry(p))


def is_entry(path: Path) -> bool:
    """Whether `path` is named as entry_name names a history entry (any other results.json is not)."""
    return _ENTRY_NAME.match(path.name) is not None


def read_checked(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """An entry's document, or None and why not (results_reader.read_results' message): damaged entries are
    passed over by name, never a reason to stop."""
    try:
        return read_results(path), None
    except ResultsFileError as exc:
        return None, str(exc)


def read_entry(path: Path) -> dict[str, Any] | None:
    """An entry's document; None when it cannot be read or is damaged (read_checked says why)."""
    return read_checked(path)[0]


def benchmark_entry(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """A document's entry for the benchmark file `name`, if it has one."""
    found: Mapping[str, Any] | None = next(
        (b for b in document.get("benchmarks", []) if b.get("benchmark_file") == name), None
    )
    return found


@dataclass
class Baselines:
    """Where a run finds, for each benchmark, the earlier run its no_regression compares against.

    `--llmeval-previous FILE` (explicit) is the baseline of every benchmark. Otherwise the candidates are
    the history's entries, newest first (with the history off or still empty: the results.json this run
    replaces); a benchmark's baseline is the newest candidate that is complete, evaluated the same adapter
    (a base-only run: the same base model), and holds the benchmark at the same content hash. A partial,
    interrupted or crashed run is never a baseline.
    """

    candidates: Sequence[Path] = ()  # newest first
    explicit: Mapping[str, Any] | None = None
    explicit_source: str | None = None
    where: str = "the history"  # for messages: the folder (or file) candidates came from
    _documents: dict[Path, dict[str, Any] | None] = field(default_factory=dict)
    # Entries passed over because they are damaged (a value out of range, a field of the wrong type,
    # nested too deep): path -> why. A damaged entry is no baseline, and never stops a run.
    damaged: dict[Path, str] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        """Whether there is anything to compare with at all (no_regression is collected only then)."""
        return self.explicit is not None or bool(self.candidates)

    def _document(self, path: Path) -> dict[str, Any] | None:
        if path not in self._documents:
            self._documents[path], problem = read_checked(path)
            if problem is not None:
                self.damaged[path] = problem
        return self._documents[path]

    def damage_note(self) -> str | None:
        """One sentence naming the damaged entries passed over so far, or None."""
        if not self.damaged:
            return None
        first = next(iter(self.damaged.values()))
        more = f" (and {len(self.damaged) - 1} more)" if len(self.damaged) > 1 else ""
        return f"passed over a damaged history entry{more}: {first}"

    def for_benchmark(self, benchmark: BenchmarkInfo, identity: Identity) -> Baseline:
        """The baseline of one benchmark of a run evaluating `identity`, or why there is none."""
        if self.explicit is not None:
            return Baseline(self.explicit, source=self.explicit_source)
        name, sha = benchmark["name"], benchmark["sha256"]
        who = describe_identity(identity)
        partial = 0
        changed: tuple[Path, Any] | None = None
        for path in self.candidates:
            document = self._document(path)
            if document is None or identity_of(document) != identity:
                continue
            entry = benchmark_entry(document, name)
            if entry is None:
                continue
            if document.get("complete") is not True:
                partial += 1
                continue
            if entry.get("benchmark_hash") != sha:
                changed = changed or (path, entry.get("benchmark_hash"))
                continue
            return Baseline(document, source=path.name)
        if changed is not None:
            path, old = changed
            reason = (
                f"{name} changed since the last complete run of {who} ({path.name}: "
                f"{_short(old)} -> {_short(sha)}); runs on other content are never compared"
            )
        elif partial:
            reason = (
                f"no complete earlier run of {who} on {name} in {self.where}: "
                f"{partial} partial run(s), which are never a baseline"
            )
        else:
            reason = f"no earlier run of {who} on {name} in {self.where}"
        return Baseline(None, reason=reason)


def _short(sha: object) -> str:
    """`sha256:b2933f449f95`: enough of a content hash to tell two apart in a message."""
    return str(sha)[:19]


def prune(folder: Path, keep: int) -> list[Path]:
    """Delete all but the `keep` newest entries, except any entry that is still a baseline.

    Kept whatever `keep` says: for each (identity, benchmark, hash), the newest complete entry holding it;
    a string of partial runs must never cost the last run a regression is judged against. The removed
    paths, oldest first.
    """
    paths = entries(folder)
    newest = set(paths[-keep:]) if keep > 0 else set()
    seen: set[tuple[Any, ...]] = set()
    needed: set[Path] = set()
    for path in reversed(paths):
        document = read_entry(path)
        if document is None or document.get("complete") is not True:
            continue
        keys = {
            (identity_of(document), b.get("benchmark_file"), b.get("benchmark_hash"))
            for b in document.get("benchmarks", [])
        }
        if keys - seen:
            needed.add(path)
        seen |= keys
    removed = [p for p in paths if p not in newest and p not in needed]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


# --- listing and comparing (python -m pytest_llmeval history) ---------------------------------------------


@dataclass(frozen=True)
class Run:
    """One history entry as `history` lists it."""

    index: int  # 1 = oldest
    path: Path
    document: dict[str, Any]


def runs(folder: Path, damaged: dict[Path, str] | None = None) -> list[Run]:
    """The readable entries of a history, oldest first, numbered from 1; the damaged ones, with why, go
    into `damaged` when given."""
    out: list[Run] = []
    for path in entries(folder):
        document, problem = read_checked(path)
        if document is not None:
            out.append(Run(len(out) + 1, path, document))
        elif damaged is not None and problem is not None:
            damaged[path] = problem
    return out


def find_run(all_runs: Sequence[Run], key: str) -> Run:
    """A run by its number (1 = oldest, -1 = newest), its file name, or a unique prefix of its name."""
    try:
        number = int(key)
    except ValueError:
        matches = [r for r in all_runs if r.path.name == key or r.path.name.startswith(key)]
        exact = [r for r in matches if r.path.name == key]
        if len(exact) == 1 or len(matches) == 1:
            return (exact or matches)[0]
        if not matches:
            raise LookupError(f"no run named {key!r} in the history") from None
        raise LookupError(f"{key!r} names {len(matches)} runs: give more of the name") from None
    if number == 0 or abs(number) > len(all_runs):
        raise LookupError(f"no run number {number}: the history holds {len(all_runs)} run(s)")
    return all_runs[number - 1 if number > 0 else number]


def _score(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3f}"


def label_of(document: Mapping[str, Any]) -> str:
    """Who a run evaluated, as a listing names it: `math 0.2` (adapter and version), `base smol`."""
    adapter, base = identity_of(document)
    return f"{adapter} {document.get('adapter_version') or ''}".strip() if adapter else f"base {base}"


def list_lines(all_runs: Sequence[Run]) -> list[str]:
    """One block per run: number, time, adapter and version, complete or why not, each benchmark's scores."""
    if not all_runs:
        return ["no runs in the history"]
    lines = []
    for run in all_runs:
        doc = run.document
        who = label_of(doc)
        state = "complete" if doc.get("complete") is True else f"partial: {doc.get('incomplete_reason')}"
        lines.append(f"{run.index:>3}  {doc.get('timestamp')}  {who}  [{state}]  {run.path.name}")
        for bench in doc.get("benchmarks", []):
            results = bench.get("results") or {}
            lines.append(
                f"       {bench.get('benchmark_file')} ({str(bench.get('benchmark_hash'))[:12]}): "
                f"{bench.get('n_examples')} rows, adapter {_score(results.get('adapter_score'))}, "
                f"base {_score(results.get('base_model_score'))}"
            )
    return lines


def diff_lines(a: Run, b: Run, *, alpha: float = 0.05) -> list[str]:
    """Two runs side by side: each benchmark's scores in both, and B against A on the rows they share."""
    lines = [f"A: #{a.index} {a.path.name}", f"B: #{b.index} {b.path.name}"]
    for run, label in ((a, "A"), (b, "B")):
        if run.document.get("complete") is not True:
            lines.append(f"note: {label} is partial ({run.document.get('incomplete_reason')})")
    backends = [(d.get("inference_config") or {}).get("backend") for d in (a.document, b.document)]
    if None not in backends and backends[0] != backends[1]:
        lines.append(
            f"warning: A ran on backend {backends[0]}, B on {backends[1]}: the differences below include the "
            "backend's (its tokenizer, template and numerics), not only the model's"
        )
    if run_schema := {d.get("schema_version") for d in (a.document, b.document)} - {SCHEMA_VERSION}:
        shown = ", ".join(sorted(map(str, run_schema)))
        lines.append(f"note: schema_version {shown} is not this version's ({SCHEMA_VERSION})")
    names = sorted(
        {str(x.get("benchmark_file")) for d in (a.document, b.document) for x in d.get("benchmarks", [])}
    )
    for name in names:
        ea, eb = benchmark_entry(a.document, name), benchmark_entry(b.document, name)
        lines.append(f"{name}:")
        for label, e in (("A", ea), ("B", eb)):
            if e is None:
                lines.append(f"  {label}: not in this run")
                continue
            results = e.get("results") or {}
            lines.append(
                f"  {label}: {e.get('n_examples')} rows, adapter {_score(results.get('adapter_score'))}, "
                f"base {_score(results.get('base_model_score'))}"
            )
        if ea is None or eb is None:
            continue
        cmp, why_not = compare_entries(a.document, eb, alpha=alpha)
        if cmp is None:
            lines.append(f"  B vs A: {why_not}")
        else:
            lines.append(f"  B vs A on {cmp.n} shared rows: {comparison_text(cmp)}")
    return lines


def compare_entries(a: Mapping[str, Any], entry_b: Mapping[str, Any], *, alpha: float) -> tuple[Any, str]:
    """Run B's benchmark entry `entry_b` against run A's document on the rows both scored (no_regression's
    comparison, results.previous_comparison): (stats.PairedComparison, "") or (None, why there is none).
    One place for `history --diff` and the viewer (viewer.py), so the two never give different figures."""
    info: BenchmarkInfo = {
        "name": str(entry_b.get("benchmark_file")),
        "sha256": str(entry_b.get("benchmark_hash")),
        "domain": entry_b.get("domain"),
        "n_rows": int(entry_b.get("n_examples") or 0),
    }
    cmp, block = previous_comparison(info, list(entry_b.get("rows", [])), Baseline(a), alpha)
    if not block["comparable"]:
        return None, f"not comparable: {block['reason']}"
    if cmp is None:
        return None, "no scored row in common"
    return cmp, ""


def comparison_text(cmp: Any) -> str:
    """B against A in one line: means, difference with its interval, the test's p and the verdict."""
    from pytest_llmeval.formatting import name_of_test, p_value

    sign = "+" if cmp.difference >= 0 else ""
    verdict = (
        ("B better" if cmp.difference > 0 else "B worse") + " (significant)"
        if cmp.significant
        else "no significant difference"
    )
    return (
        f"{_score(cmp.mean_adapter)} vs {_score(cmp.mean_base)}, difference {sign}{cmp.difference:.3f} "
        f"[{cmp.ci_low:+.3f}, {cmp.ci_high:+.3f}], {name_of_test(cmp.test)} "
        f"p={p_value(cmp.p_value, cmp.alpha)}: {verdict}"
    )
