"""The only transport of row records between processes: a spool folder that xdist workers append to.

Gates need every row of their benchmark, and under `-n` those rows are scored on several workers. Each
worker appends the records it scores to its own JSONL file in one folder the controller created; a gate
reads the folder until each of its rows is *settled*: scored (a record) or lost (the controller saw its
test end without one: a worker killed mid-row, a row that failed before scoring). The controller writes
the lost markers because only it sees every report, including xdist's report of a crashed worker. So a
gate never waits on a row that will not come, and a killed worker cannot hang the run.

Each worker also writes there what its collection selected and the gates it deselected (publish_selection):
under xdist the controller collects nothing, and results.json's incomplete_reason and `not_run` need it.

Serially there is no spool: rows run before gates in the same process (hooks/collection.py orders
them), and the store answers from what this process scored.

No pytest, no torch.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytest_llmeval.records import RowRecord

if TYPE_CHECKING:
    from pytest_llmeval.results import Selection

# How often a gate looks for rows other workers are still scoring, and for how long at most without any
# row settling before it gives up (a last resort: lost markers normally settle every row).
POLL_SECONDS = 0.2
STALL_SECONDS = 1800.0

_LOST = "lost.jsonl"


class RowStore:
    """Records of the rows this process scored, and under xdist every worker's, read from the spool."""

    def __init__(self, spool: Path | None = None, worker_id: str | None = None) -> None:
        self.spool = spool
        self.worker_id = worker_id
        self.local: dict[str, RowRecord] = {}

    @staticmethod
    def create() -> Path:
        """A fresh spool folder (the controller's, before workers start)."""
        return Path(tempfile.mkdtemp(prefix="llmeval-spool-"))

    def publish(self, record: RowRecord) -> None:
        """Keep a scored row for this process's gates; under xdist also append it to the spool."""
        self.local[record["nodeid"]] = record
        if self.spool is not None and self.worker_id is not None:
            with open(self.spool / f"{self.worker_id}.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def mark_lost(self, nodeid: str, why: str) -> None:
        """Controller: this row's test ended without a record; gates must not wait for it."""
        if self.spool is not None:
            with open(self.spool / _LOST, "a", encoding="utf-8") as f:
                f.write(json.dumps({"nodeid": nodeid, "why": why}) + "\n")

    def records_for(self, nodeids: Sequence[str]) -> tuple[list[RowRecord], dict[str, str]]:
        """Records of these rows (in their order) and the rows that will have none, with why.

        Under xdist, waits in the spool until every row is settled, or nothing settled for STALL_SECONDS.
        """
        wanted = set(nodeids)
        found = {n: self.local[n] for n in nodeids if n in self.local}
        lost: dict[str, str] = {}
        last_progress = time.monotonic()
        while self.spool is not None and len(found) + len(lost) < len(wanted):
            before = len(found) + len(lost)
            for is_lost, entry in self._spool_entries():
                nodeid = entry.get("nodeid")
                if nodeid not in wanted or nodeid in found:
                    continue
                if is_lost:
                    lost[nodeid] = str(entry.get("why"))
                else:
                    found[nodeid] = entry
                    lost.pop(nodeid, None)  # rerun elsewhere after all
            settled = len(found) + len(lost)
            if settled == len(wanted):
                break
            if settled > before:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_SECONDS:
                break
            time.sleep(POLL_SECONDS)
        missing = {n: lost.get(n, "no record arrived") for n in nodeids if n not in found}
        return [found[n] for n in nodeids if n in found], missing

    def peek(self, nodeids: Sequence[str]) -> dict[str, RowRecord]:
        """The records of these rows that exist now (this process's, and under xdist the spool's), without
        waiting for the others: what --llmeval-sequential decides on before each chunk."""
        wanted = set(nodeids)
        found = {n: self.local[n] for n in nodeids if n in self.local}
        for is_lost, entry in self._spool_entries():
            if not is_lost and entry.get("nodeid") in wanted:
                found.setdefault(entry["nodeid"], entry)
        return found

    def _spool_entries(self) -> Iterator[tuple[bool, Any]]:
        """Every entry in the spool now, with whether it is a lost marker; none without a spool."""
        for path in sorted(self.spool.glob("*.jsonl")) if self.spool is not None else []:
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line another process is still writing
                if isinstance(entry, dict):
                    yield path.name == _LOST, entry

    def publish_selection(self, selection: Selection) -> None:
        """Worker: what its collection selected and deselected, gates included (the controller collects
        nothing under xdist)."""
        if self.spool is not None and self.worker_id is not None:
            from pytest_llmeval.results_file import write_atomic

            write_atomic(self.spool / f"selection-{self.worker_id}.json", selection)

    def read_selection(self) -> Selection | None:
        """Controller: a worker's selection (every worker collects the same), once one has written it."""
        for path in sorted(self.spool.glob("selection-*.json")) if self.spool is not None else []:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and isinstance(data.get("not_run"), list):
                return cast("Selection", data)  # written by publish_selection of this same version
        return None

    def remove(self) -> None:
        """Controller, at the end: the spool is gone with the run."""
        if self.spool is not None:
            shutil.rmtree(self.spool, ignore_errors=True)
