"""The plugin's own cost per row, against bare pytest collecting the same JSONL (issue 40).

    python bench/overhead.py [--rows 10000 100000] [--repeats 2]

For each N this writes, in a temp folder, an N-row exact-match benchmark and a predictions file (80% of the
predictions correct, so rows pass and fail), then runs two subprocesses, each timed from launch to exit with
its peak RSS from `os.wait4`:

- bare: pytest's own non-python example (a conftest.py whose `pytest_collect_file` yields one Item per
  JSONL row; `runtest` compares the saved prediction with the expected answer), with `-p no:llmeval`;
- ours: `pytest bench.jsonl --llmeval-predictions=preds.jsonl --llmeval-no-history`, with its default
  outputs (results.json, the HTML report) on, since a user gets them; the benchmark's gates run too.

Printed per N: both wall times, their ratio, the overhead in ms per row, both peak RSS, and how each grows
from the smallest N to the largest (linear: time and RSS growth scale with N). Best of `--repeats`.
Target: ratio <= 1.3 at 10,000 rows, and linear to 100,000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Bare pytest: pytest's non-python example, collecting benchmark rows as a minimal plugin would.
BARE_CONFTEST = """
from __future__ import annotations

import json

import pytest


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".jsonl" and file_path.name != "preds.jsonl":
        return RowFile.from_parent(parent, path=file_path)
    return None


class RowFile(pytest.File):
    def collect(self):
        predictions = {}
        with open(self.path.parent / "preds.jsonl", encoding="utf-8") as handle:
            for line in handle:
                saved = json.loads(line)
                predictions[saved["id"]] = saved["prediction"]
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                saved = predictions.get(row["id"])
                expected = row["expected_output"]
                yield RowItem.from_parent(self, name=row["id"], expected=expected, prediction=saved)


class RowItem(pytest.Item):
    def __init__(self, *, expected, prediction, **kwargs):
        super().__init__(**kwargs)
        self.expected = expected
        self.prediction = prediction

    def runtest(self):
        if self.prediction is None or self.prediction.strip() != self.expected.strip():
            raise RowMismatch(self.prediction, self.expected)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, RowMismatch):
            return f"output {excinfo.value.args[0]!r} != expected {excinfo.value.args[1]!r}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, 0, f"row: {self.name}"


class RowMismatch(Exception):
    pass
"""

COMMON = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--tb=no"]


def write_inputs(folder: Path, n: int) -> None:
    """The N-row benchmark and its predictions in `folder`, and the bare example beside it in `bare/`."""
    rows: list[str] = []
    predictions: list[str] = []
    for i in range(n):
        answer = f"answer-{i % 97}"
        rows.append(
            json.dumps(
                {
                    "id": f"row-{i:06d}",
                    "instruction": "Reply with the answer only.",
                    "input": f"Question number {i}?",
                    "expected_output": answer,
                    "evaluation_type": "exact_match",
                    "difficulty": ("easy", "medium", "hard")[i % 3],
                }
            )
        )
        # Every fifth prediction is wrong: ~80% of the rows pass.
        said = answer if i % 5 else f"wrong-{i}"
        predictions.append(json.dumps({"id": f"row-{i:06d}", "prediction": said}))
    for where in (folder / "ours", folder / "bare"):
        where.mkdir(parents=True, exist_ok=True)
        (where / "bench.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
        (where / "preds.jsonl").write_text("\n".join(predictions) + "\n", encoding="utf-8")
    (folder / "bare" / "conftest.py").write_text(BARE_CONFTEST, encoding="utf-8")


def timed(command: list[str], cwd: Path) -> tuple[float, int, int]:
    """(wall seconds from launch to exit, peak RSS in bytes, exit status) of one child process."""
    env = os.environ.copy()
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_AUTO_NUM_WORKERS", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as on a user's machine (this sandbox sets it)
    start = time.perf_counter()
    with open(cwd / "out.txt", "wb") as out:
        child = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is in kilobytes on Linux.
    return seconds, usage.ru_maxrss * 1024, child.returncode


def measure(folder: Path, repeats: int) -> dict[str, float]:
    """Best wall time and lowest peak RSS over `repeats` of each side."""
    bare_cmd = [sys.executable, "-m", "pytest", "bench.jsonl", *COMMON, "-p", "no:llmeval"]
    ours_cmd = [sys.executable, "-m", "pytest", "bench.jsonl", *COMMON]
    ours_cmd += ["--llmeval-predictions=preds.jsonl", "--llmeval-no-history"]
    best: dict[str, float] = {}
    for _ in range(repeats):
        for side, command in (("bare", bare_cmd), ("ours", ours_cmd)):
            seconds, rss, code = timed(command, folder / side)
            if code not in (0, 1):  # 1: some rows failed, which is the point
                tail = (folder / side / "out.txt").read_text(encoding="utf-8", errors="replace")[-3000:]
                raise SystemExit(f"{side} exited {code}:\n{tail}")
            best[f"{side}_s"] = min(best.get(f"{side}_s", seconds), seconds)
            best[f"{side}_rss"] = min(best.get(f"{side}_rss", rss), rss)
    results = folder / "ours" / "results.json"
    if not results.is_file():
        raise SystemExit(f"ours wrote no results.json in {folder / 'ours'}")
    return best


def baseline_rss() -> int:
    """Peak RSS of a pytest that collects nothing: what growth with N is measured from."""
    with tempfile.TemporaryDirectory() as tmp:
        _, rss, _ = timed([sys.executable, "-m", "pytest", "--co", *COMMON, "-p", "no:llmeval"], Path(tmp))
    return rss


def side_by_side(rows: list[int], repeats: int) -> list[str]:
    """The table, one printed line per N, then the linearity lines (bench/iteration.py prints them too)."""
    floor = baseline_rss()
    table: dict[int, dict[str, float]] = {}
    lines = [
        f"{'rows':>8} {'bare s':>8} {'ours s':>8} {'ratio':>6} {'ms/row':>7} {'bare MB':>8} {'ours MB':>8}"
    ]
    print(lines[-1], flush=True)
    for n in rows:
        with tempfile.TemporaryDirectory(prefix="llmeval-overhead-") as tmp:
            write_inputs(Path(tmp), n)
            got = measure(Path(tmp), repeats)
        table[n] = got
        ms_row = (got["ours_s"] - got["bare_s"]) / n * 1000
        lines.append(
            f"{n:>8} {got['bare_s']:>8.2f} {got['ours_s']:>8.2f} {got['ours_s'] / got['bare_s']:>6.2f} "
            f"{ms_row:>7.3f} {got['bare_rss'] / 2**20:>8.0f} {got['ours_rss'] / 2**20:>8.0f}"
            + "  (plugin overhead: target ratio <= 1.3)"
        )
        print(lines[-1], flush=True)
    if len(table) >= 2:
        small, large = min(table), max(table)
        lines.append(f"linearity, {large} rows against {small} (linear: {large / small:.0f}x):")
        for side in ("bare", "ours"):
            time_x = table[large][f"{side}_s"] / table[small][f"{side}_s"]
            rss_x = (table[large][f"{side}_rss"] - floor) / max(table[small][f"{side}_rss"] - floor, 1)
            lines.append(f"  {side}: time {time_x:.1f}x, RSS growth over an empty pytest {rss_x:.1f}x")
        print("\n".join(lines[-3:]), flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    side_by_side(args.rows, args.repeats)


if __name__ == "__main__":
    main()
