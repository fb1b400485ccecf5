"""Hand-made mutants of the plugin's distinctive promises: each must make at least one test fail.

    python tools/hand_mutants.py            # every mutant
    python tools/hand_mutants.py scheduler  # the mutants whose name contains "scheduler"

Each mutant is one exact text replacement in one file. It is applied to a fresh copy of the working tree
(the files git tracks or would track, as they are now), never to the tree itself, and the tests named for
it run in that copy (its own `pytest_llmeval` first on PYTHONPATH). A mutant is *killed* when those tests
fail. The script prints a line per mutant and exits 1 if any survived: a test suite that still passes with
the feature broken is not testing the feature.

These complement mutmut (which mutates the pure modules operator by operator, see TESTING.md): they break
the seams between processes, files and the sandbox, where a one-token mutation says little.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str
    warm_cache: bool = False  # run the main job once in the copy first (the repository's own cache filled)


MUTANTS = (
    Mutant(
        name="scheduler-off",
        file="pytest_llmeval/distribution.py",
        old='        if config.stash[SETTINGS_KEY].dist != "load":\n            return None',
        new="        return None",
        tests=("tests/test_distribution.py",),
        why="xdist's default scheduler instead of whole chunks per worker",
    ),
    Mutant(
        name="scheduler-split-rows",
        file="pytest_llmeval/distribution.py",
        old="                return self._keys.get(nodeid, nodeid)",
        new="                return nodeid",
        tests=("tests/test_distribution.py",),
        why="every row its own scope: chunks split between workers",
    ),
    Mutant(
        name="requeue-behind-gates",
        file="pytest_llmeval/distribution.py",
        old=(
            "                requeued = [(s, u) for s, u in workload.items() if not all(u.values())]\n"
            "                for scope, unit in reversed(requeued):\n"
            "                    self.workqueue[scope] = unit\n"
            "                    self.workqueue.move_to_end(scope, last=False)\n"
        ),
        new=(
            "                self.workqueue.update(\n"
            "                    (s, u) for s, u in workload.items() if not all(u.values())\n"
            "                )\n"
        ),
        tests=("tests/test_distribution.py",),
        why="a crashed worker's rows queued behind the gates: a gate can wait on rows queued behind it",
    ),
    Mutant(
        name="sides-swapped",
        file="pytest_llmeval/comparisons.py",
        old="    adapter, base = paired_scores(records, column, against)\n    return adapter, base, True,",
        new="    adapter, base = paired_scores(records, column, against)\n    return base, adapter, True,",
        tests=("tests/test_gate_statistics.py",),
        why="gates and statistics compare base against adapter",
    ),
    Mutant(
        name="gates-ignore-spool",
        file="pytest_llmeval/rowstore.py",
        old="        while self.spool is not None and len(found) + len(lost) < len(wanted):",
        new="        while False:",
        tests=("tests/test_gate_statistics.py",),
        why="under -n a gate sees only the rows its own worker scored",
    ),
    Mutant(
        name="plain-write",
        file="pytest_llmeval/inputs.py",
        old='    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)\n',
        new=(
            "    path.write_bytes(data)\n"
            "    return\n"
            '    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)\n'
        ),
        tests=("tests/test_atomic_write.py",),
        why="results.json written in place: a failed write destroys the previous file",
    ),
    Mutant(
        name="strict-detection-fails",
        file="pytest_llmeval/sandbox/__init__.py",
        old='def detect(mode: str = "auto") -> Isolation:\n',
        new=(
            'def detect(mode: str = "auto") -> Isolation:\n'
            '    if mode == "strict":\n'
            '        raise SandboxUnavailable("mutant: strict detection always fails")\n'
        ),
        tests=("tests/test_sandbox.py",),
        why="strict isolation never detected: its tests must fail, not skip",
    ),
    Mutant(
        name="rows-by-suffix",
        file="pytest_llmeval/planning.py",
        old='        return name == "" or any(fnmatch.fnmatch(name, p) for p in patterns)',
        new='        return name == "" or name.endswith(".jsonl")',
        tests=("tests/test_run_state.py::test_rows_of_any_file_pattern_generate_in_batches",),
        why="rows recognised by a .jsonl suffix: *.ndjson rows run one per batch under -n",
    ),
    Mutant(
        name="served-bypasses-cache",
        file="pytest_llmeval/backends/served.py",
        old="        served = self._probed(column)\n        alignment = served.alignment",
        new=(
            "        return None\n        served = self._probed(column)\n        alignment = served.alignment"
        ),
        tests=("tests/test_endpoints.py::test_served_outputs_are_cached",),
        why="served text skips the generation cache wrapper: every re-run asks the servers again",
    ),
    Mutant(
        name="probe-trusts-logprobs",
        file="pytest_llmeval/endpoint.py",
        old="        found = check_alignment(token, value, parsed, PROBE_PROMPT)\n",
        new="        found = Alignment(ok=True, reason=None)\n",
        tests=(
            "tests/test_served_loglikelihood.py::test_a_server_whose_log_probabilities_are_shifted_is_caught",
        ),
        why="a server's echoed log-probabilities taken at face value: a shifted server's rows are scored",
    ),
    Mutant(
        name="no-lost-markers",
        file="pytest_llmeval/rowstore.py",
        old="        if self.spool is not None:\n            with open(self.spool / _LOST",
        new="        if False:\n            with open(self.spool / _LOST",
        tests=("tests/test_run_state.py::test_a_worker_killed_mid_run_loses_only_its_row",),
        why="a killed worker's row is never settled: gates wait on it (the test's timeout kills the run)",
    ),
    Mutant(
        name="e2e-served-from-cache",
        file="tests/test_e2e.py",
        old="        f\"--llmeval-cache-dir={folder / 'cache'}\",\n",
        new="",
        tests=("tests/test_e2e.py::test_main_job_generated_every_output",),
        why="the main-job test reads the repository's warm cache and generates nothing",
        warm_cache=True,
    ),
    # Issue 53: every value from outside checked where it enters, every identity taken from content.
    Mutant(
        name="recall-by-name",
        file="pytest_llmeval/backends/local.py",
        old="                    if m.side in self.columns\n",
        new="                    if False\n",
        tests=(
            "tests/test_recall.py::test_a_model_column_pointed_elsewhere_or_edited_is_never_served_stale",
        ),
        why="a model column recalled by its name: another folder answered with the old model's outputs",
    ),
    Mutant(
        name="positive-logprobs",
        file="pytest_llmeval/logprobs.py",
        old="LOGPROB_ROUNDING = 1e-4",
        new="LOGPROB_ROUNDING = 10.0",
        tests=(
            "tests/test_served_checks.py::test_impossible_values_from_a_server_are_row_errors_never_scores",
        ),
        why="a server's +5 a token summed: a perplexity below 1, and a gate passed on it",
    ),
    Mutant(
        name="echo-not-covered",
        file="pytest_llmeval/logprobs.py",
        old="        if before <= 1 and ends:",
        new="        if before <= 1:",
        tests=("tests/test_logprobs.py::test_echoed_tokens_must_cover_exactly_the_text",),
        why="an echo whose last token runs past the text sent scored as the text",
    ),
    Mutant(
        name="another-model-answers",
        file="pytest_llmeval/endpoint.py",
        old="        if request.model not in self._reported:\n            return None",
        new="        if True:\n            return None",
        tests=(
            "tests/test_served_checks.py::test_impossible_values_from_a_server_are_row_errors_never_scores",
        ),
        why="an answer from another model than the probe's used as the column's",
    ),
    Mutant(
        name="unrun-gate-passes-check",
        file="pytest_llmeval/ci/__init__.py",
        old='if entry["gate"] is not None]',
        new="if False]",
        tests=("tests/test_not_run.py",),
        why="a deselected gate gives check nothing to fail on",
    ),
)


def copy_tree(target: Path) -> None:
    """The working tree's tracked and untracked-but-not-ignored files, as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = Path(os.fsdecode(raw))
        source = REPO / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)


def run(mutant: Mutant) -> tuple[bool, float, str]:
    """(killed, seconds, last lines of pytest's output) for one mutant."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        path = tree / mutant.file
        text = path.read_text(encoding="utf-8")
        if text.count(mutant.old) != 1:
            raise SystemExit(f"{mutant.name}: the text to replace is not in {mutant.file} exactly once")
        path.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(tree)}
        if mutant.warm_cache:
            subprocess.run(
                [sys.executable, "-m", "pytest", "--adapter=adapters/date-iso", "benchmarks/", "-q"],
                cwd=tree,
                env=env,
                capture_output=True,
                check=False,
            )
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *mutant.tests],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        return proc.returncode not in (0, 5), time.perf_counter() - start, tail


def main() -> int:
    wanted = sys.argv[1:]
    chosen = [m for m in MUTANTS if not wanted or any(w in m.name for w in wanted)]
    survived = []
    for mutant in chosen:
        killed, seconds, tail = run(mutant)
        print(f"{'killed  ' if killed else 'SURVIVED'} {mutant.name:<24} {seconds:6.1f} s  {mutant.why}")
        if not killed:
            survived.append(mutant.name)
            print(f"         {tail}")
    print(f"{len(chosen) - len(survived)} of {len(chosen)} mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
