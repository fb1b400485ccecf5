"""Golden outputs of the main paths: captured before a refactoring, compared after each of its steps.

    python tools/goldens.py capture .goldens                 # run every scenario, keep each results.json
    python tools/goldens.py compare .goldens                 # run them again: every field that differs
    python tools/goldens.py compare .goldens predictions     # the scenarios whose name contains a word

The scenarios are the paths a change to the model code can break (issue 37): the demo (both adapters, one
base, no cache) serially and with -n 2, saved predictions, a sequential run, a cached re-run, and the
embedded model behind a real OpenAI-compatible server (`transformers serve` on 127.0.0.1). Each runs the
installed pytest on the repository's own benchmarks in a fresh temporary folder; what is kept is its
results.json without its clocks (the timestamp, seconds, rates, memory peaks), so that two runs of the same
code on this machine are equal field for field. Besides the goldens, each run checks what must hold
whatever the code: its results.json passes the plugin's own reader (results_reader.read_results), -n 2
equals serial, a cached re-run generates nothing and equals the run that filled the cache.

The goldens are this machine's (CPU numerics): capture and compare on one machine, and keep them out of
git (.goldens/ is ignored). A comparison prints each differing field and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest"]
COMMON = ["-q", "--tb=no", "-p", "no:cacheprovider", "--llmeval-no-history"]
DEMO = ["--adapter=adapters/date-iso", "--adapter=adapters/sentiment", "benchmarks/"]

# Fields that say how many processes ran (-n 2 against serial), and what a run served from the cache spent
# (nothing: no tokens, no weights loaded) against the run that filled it: expected to differ.
_WORKER_FIELDS = ("cost.caps.workers", "inference_config.workers", "inference_config.xdist")
_CACHE_FIELDS = ("cost.", "inference_config.cache", "inference_config.weights_loaded")
# Fields that hold clocks, rates or memory peaks: they differ between two runs of the same code.
_VOLATILE = re.compile(r"(^timestamp$|_s$|_seconds$|per_s$|per_second|^rows_per|peak|memory|rss|^date$)")
# Strings that name where this run happened: the scenario's temporary folder, the local server's port.
_PLACES = (
    (re.compile(r"/tmp/llmeval-golden-[\w-]+?-[a-z0-9_]{8}"), "{tmp}"),
    (re.compile(r"http://127\.0\.0\.1:\d+"), "{url}"),
)


@dataclass(frozen=True)
class Scenario:
    name: str
    args: list[str]  # after pytest, before the common options; {cache} is the scenario's cache folder
    workers: tuple[str, ...] = ()
    runs: int = 1  # a cached re-run: 2, the second is the golden and must generate nothing
    served: bool = False  # the embedded model behind `transformers serve`: {url} and {model} filled in
    same_as: str | None = None  # another scenario whose results this one must equal (-n 2 and serial)


SCENARIOS = [
    Scenario("demo", [*DEMO, "--llmeval-no-cache"]),
    Scenario("demo-xdist", [*DEMO, "--llmeval-no-cache"], workers=("-n", "2"), same_as="demo"),
    Scenario(
        "predictions",
        [
            "benchmarks/dates.jsonl",
            "--llmeval-predictions=examples/saved-predictions/dates.predictions.jsonl",
        ],
    ),
    Scenario(
        "sequential",
        [
            "--adapter=adapters/date-iso",
            "benchmarks/dates.jsonl",
            "--llmeval-sequential",
            "--llmeval-no-cache",
        ],
    ),
    Scenario(
        "cached",
        ["--adapter=adapters/date-iso", "benchmarks/dates.jsonl", "--llmeval-cache-dir={cache}"],
        runs=2,
    ),
    Scenario(
        "endpoint",
        ["benchmarks/dates.jsonl", "--llmeval-endpoint={url}", "--base-model={model}", "--llmeval-no-cache"],
        served=True,
    ),
]


def normalized(value: Any) -> Any:
    """The document without the fields that differ between two runs of the same code."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if not _VOLATILE.search(str(k))}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, str):
        for where, placeholder in _PLACES:
            value = where.sub(placeholder, value)
    return value


def differences(old: Any, new: Any, at: str = "") -> Iterator[str]:
    """Each field where `new` differs from `old`, as `path: old -> new`."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            here = f"{at}.{key}" if at else str(key)
            if key not in new:
                yield f"{here}: removed"
            elif key not in old:
                yield f"{here}: added ({_short(new[key])})"
            else:
                yield from differences(old[key], new[key], here)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from differences(a, b, f"{at}[{i}]")
    elif old != new:
        yield f"{at}: {_short(old)} -> {_short(new)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


@contextmanager
def _server() -> Iterator[dict[str, str]]:
    """The embedded model served by `transformers serve` (the tests' own helper, tests/serving.py)."""
    sys.path.insert(0, str(REPO / "tests"))
    from serving import serve  # type: ignore[import-not-found]

    from pytest_llmeval.models import embedded_model_dir

    folder = embedded_model_dir()
    with serve(folder) as served:
        (endpoint,) = served.endpoints
        yield {"url": endpoint.base_url, "model": endpoint.model}


def run(scenario: Scenario) -> dict[str, Any]:
    """Run the scenario; its last results.json, normalized. RuntimeError when a run went wrong."""
    with tempfile.TemporaryDirectory(prefix=f"llmeval-golden-{scenario.name}-") as tmp:
        context: AbstractContextManager[dict[str, str]] = _server() if scenario.served else nullcontext({})
        with context as fill:
            documents = []
            for i in range(scenario.runs):
                results = Path(tmp) / f"results-{i}.json"
                args = [a.format(cache=Path(tmp) / "cache", **fill) for a in scenario.args]
                command = [*PYTEST, *args, *scenario.workers, *COMMON, f"--llmeval-results={results}"]
                started = time.monotonic()
                done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=_env())
                took = time.monotonic() - started
                print(f"  {scenario.name} run {i + 1}: exit {done.returncode}, {took:.0f} s", flush=True)
                if done.returncode not in (0, 1) or not results.is_file():
                    raise RuntimeError(f"{' '.join(command)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
                documents.append(_read(results, scenario))
    if scenario.runs == 2:
        _check_cached(scenario, documents[0], documents[1])
    return normalized(documents[-1])  # type: ignore[no-any-return]


def _read(results: Path, scenario: Scenario) -> dict[str, Any]:
    """A scenario's results.json through the plugin's own reader (what every command, baseline and history
    entry reads it with): a document it refuses fails the scenario, whatever the goldens say."""
    from pytest_llmeval.results_reader import ResultsFileError, read_results

    try:
        return read_results(results)
    except ResultsFileError as exc:
        raise RuntimeError(f"{scenario.name}: the run wrote what its own reader refuses: {exc}") from None


def _check_cached(scenario: Scenario, first: dict[str, Any], again: dict[str, Any]) -> None:
    """The re-run generated nothing (every row from the cache) and scored what the first run did."""
    cache = (again.get("inference_config") or {}).get("cache") or {}
    misses = {column: n for column, n in (cache.get("misses") or {}).items() if n}
    if misses:
        raise RuntimeError(f"{scenario.name}: the re-run generated rows again: misses {misses}")
    changed = [
        d for d in differences(normalized(first), normalized(again)) if not d.startswith(_CACHE_FIELDS)
    ]
    if changed:
        raise RuntimeError(
            f"{scenario.name}: the re-run differs from the run that filled the cache:\n" + "\n".join(changed)
        )


def _env() -> dict[str, str]:
    # Nothing of a calling pytest (a worker's variables) and no network: the hub is never reached here.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["HF_HUB_OFFLINE"] = "1"
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("command", choices=("capture", "compare"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("names", nargs="*", help="only the scenarios whose name contains one of these")
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.names or any(n in s.name for n in args.names)]
    args.folder.mkdir(parents=True, exist_ok=True)
    failed = 0
    results: dict[str, Any] = {}
    for scenario in chosen:
        try:
            results[scenario.name] = document = run(scenario)
        except RuntimeError as exc:
            print(f"FAILED {scenario.name}: {exc}")
            failed += 1
            continue
        if scenario.same_as in results:
            unequal = list(differences(results[scenario.same_as], document))
            unequal = [d for d in unequal if not d.startswith(_WORKER_FIELDS)]
            if unequal:
                print(
                    f"FAILED {scenario.name} differs from {scenario.same_as}:\n  " + "\n  ".join(unequal[:40])
                )
                failed += 1
        golden = args.folder / f"{scenario.name}.json"
        if args.command == "capture":
            golden.write_text(json.dumps(document, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
            print(f"captured {scenario.name}: {golden}")
            continue
        if not golden.is_file():
            print(f"FAILED {scenario.name}: no golden at {golden} (capture first)")
            failed += 1
            continue
        found = list(differences(normalized(json.loads(golden.read_text(encoding="utf-8"))), document))
        if found:
            print(
                f"FAILED {scenario.name}: {len(found)} field(s) differ from {golden}:\n  "
                + "\n  ".join(found[:40])
            )
            failed += 1
        else:
            print(f"equal  {scenario.name}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
