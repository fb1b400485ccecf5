"""pytest-xdist glue: ship whole generation chunks to one worker, and bring worker metadata home.

Registered by pytest_configure (hooks/configure.py) only when xdist is installed (its hook names would be
unknown otherwise). Imports xdist lazily inside the hooks.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmeval.items import EVALUATOR_KEY, RECORDER_KEY
from pytest_llmeval.planning import GATE_PREFIX, chunk_keys, row_predicate
from pytest_llmeval.rowstore import RowStore
from pytest_llmeval.settings import SETTINGS_KEY


class XdistHooks:
    """xdist hooks of pytest-llmeval."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        # Only the default `-n N` distribution (load) is replaced: a --dist the user chose is respected (rows
        # then still work, a worker may just generate a few rows of a chunk it does not run).
        if config.stash[SETTINGS_KEY].dist != "load":
            return None
        from xdist.scheduler import LoadScopeScheduling

        size = config.stash[EVALUATOR_KEY].chunk_size()
        # The controller collects nothing: rows are told from the node ids by the rule they were collected by.
        is_row = row_predicate(config.getini("llmeval_files"))

        class ChunkScheduling(LoadScopeScheduling):  # type: ignore[misc]
            """LoadScope, one scope per generation chunk: a chunk's rows run where they are generated."""

            _keys: dict[str, str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self._keys is None:
                    self._keys = chunk_keys(self.collection or [], size, is_row)
                return self._keys.get(nodeid, nodeid)

            def _reschedule(self, node: Any) -> None:
                """LoadScope's, with the two rules a worker blocked in a gate needs (see _next_unit).

                An xdist worker runs an item only once it has the next one (or a shutdown): a worker left
                with a single item (a requeued row, say) would hold it while a gate elsewhere waits for it.
                So a worker is topped up to two items where the queue allows, and one left with a single
                row and an empty queue while another worker holds a gate is shut down, which runs the row.

                LoadScope also shuts a worker down as soon as the queue is empty. If another worker then
                dies, its unfinished chunks and gates come back to the queue with no live worker to take
                them (xdist's replacement may never register): an idle worker is kept until no worker has
                work left; DSession shuts them all down once the tests are finished.
                """
                if node.shutting_down:
                    return
                work = self.assigned_work[node]
                if self.workqueue and self._pending_of(work) <= 2:
                    self._assign_work_unit(node)
                    while self._pending_of(work) < 2 and not node.shutting_down and self._next_unit(node):
                        self._assign_work_unit(node)
                if self.workqueue or node.shutting_down:
                    return
                pending = self._pending(node)
                gate_elsewhere = any(
                    GATE_PREFIX in n
                    for other in self.assigned_work
                    if other is not node
                    for n in self._pending(other)
                )
                lone_row = len(pending) == 1 and is_row(pending[0])
                if (lone_row and gate_elsewhere) or not any(
                    self._pending_of(w) for w in self.assigned_work.values()
                ):
                    node.shutdown()

            def _pending(self, node: Any) -> list[str]:
                """The items sent to `node` and not finished, in the order it runs them."""
                return [
                    n
                    for unit in self.assigned_work.get(node, {}).values()
                    for n, done in unit.items()
                    if not done
                ]

            def _next_unit(self, node: Any) -> str | None:
                """The first unit in the queue `node` may take: a worker that holds a gate gets no rows.

                A gate blocks its worker until every row of its file is settled, and a worker runs what it
                was sent in order: a row sent behind a gate (rows requeued after a crash, while the others
                already hold gates) would wait for the gate that waits for it. Such rows wait in the queue
                for a worker without gates (xdist's replacement of the crashed one).
                """
                holds_gate = any(GATE_PREFIX in nodeid for nodeid in self._pending(node))
                for scope, unit in self.workqueue.items():
                    if not holds_gate or not any(is_row(nodeid) for nodeid in unit):
                        return str(scope)
                return None

            def _assign_work_unit(self, node: Any) -> None:
                chosen = self._next_unit(node)
                if chosen is None:
                    return
                self.workqueue.move_to_end(chosen, last=False)  # LoadScope sends the queue's first unit
                # A worker killed mid-row may have reported the row before it: the controller answers that
                # report with the next unit before xdist has seen the worker go down, and execnet raises
                # OSError on the send (an INTERNALERROR that ends the run). The unit goes back to the front
                # of the queue, nothing more is sent to the dead worker, and xdist's node-down event follows
                # (remove_node: the row it died on, then the rest of its work, go to the others).
                scope, unit = next(iter(self.workqueue.items()))
                try:
                    super()._assign_work_unit(node)
                except OSError:
                    self.assigned_work[node].pop(scope, None)
                    self.workqueue[scope] = unit
                    self.workqueue.move_to_end(scope, last=False)
                    node.shutdown()

            def remove_node(self, node: Any) -> str | None:
                """A worker finished or crashed: requeue its unfinished rows, except the one it died on.

                LoadScope puts a crashed worker's whole work unit back, the row that killed it included, so
                that row kills a worker after another until xdist runs out of restarts (and with xdist
                3.8 ends in an INTERNALERROR: a replacement worker is rescheduled before its collection
                is registered). xdist's plain load scheduler never reruns the crashed test; nor do we.
                """
                workload = self.assigned_work.pop(node)
                pending = [n for unit in workload.values() for n, done in unit.items() if not done]
                if not pending:
                    return None
                crashed: str = pending[0]
                for unit in workload.values():
                    if crashed in unit:
                        unit[crashed] = True
                # Back at the front of the queue, not behind the gates: a gate blocks its worker while it
                # waits for its file's rows, so a row queued behind a gate on the same worker would stall.
                requeued = [(s, u) for s, u in workload.items() if not all(u.values())]
                for scope, unit in reversed(requeued):
                    self.workqueue[scope] = unit
                    self.workqueue.move_to_end(scope, last=False)
                for other in self.assigned_work:
                    if other in self.registered_collections:
                        self._reschedule(other)
                return crashed

        return ChunkScheduling(config, log)

    def pytest_configure_node(self, node: Any) -> None:
        # Gates need every row of their file, and rows run on several workers: each worker appends the rows
        # it scores to a shared spool folder, which gates read (rowstore.RowStore.records_for).
        store = config_of(node).stash[EVALUATOR_KEY].store
        if store.spool is None:
            store.spool = RowStore.create()
        node.workerinput["llmeval_spool"] = str(store.spool)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        config = config_of(node)
        recorder = config.stash[RECORDER_KEY]
        if recorder.selection is None:
            # Written by the worker before it reported its collection (hooks/collection.py): the rows it
            # selected and the gates it deselected (results.json's `not_run`).
            recorder.selection = config.stash[EVALUATOR_KEY].store.read_selection()
        if recorder.expected_rows is None:
            is_row = row_predicate(config.getini("llmeval_files"))
            recorder.expected_rows = sum(1 for n in ids if is_row(n))

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        meta = getattr(node, "workeroutput", {}).get("llmeval_meta")
        if meta:
            config_of(node).stash[RECORDER_KEY].add_meta(meta, process=str(node.gateway.id))


def config_of(node: Any) -> pytest.Config:
    """The controller's config from an xdist WorkerController."""
    config: pytest.Config = node.config
    return config
