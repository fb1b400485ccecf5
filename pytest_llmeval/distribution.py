"""pytest-xdist glue: ship whole generation chunks to one worker, and bring worker metadata home.

Registered by plugin.pytest_configure only when xdist is installed (its hook names would be unknown
otherwise). Imports xdist lazily inside the hooks.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.items import RUN_KEY
from pytest_llmeval.runner import chunk_keys, is_row_nodeid


class XdistHooks:
    """xdist hooks of pytest-llmeval."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        # Only the default `-n N` distribution (load) is replaced: a --dist the user chose is respected (rows
        # then still work, a worker may just generate a few rows of a chunk it does not run).
        if config.option.dist != "load":
            return None
        from xdist.scheduler import LoadScopeScheduling

        size = config.stash[RUN_KEY].options.batch_size

        class ChunkScheduling(LoadScopeScheduling):  # type: ignore[misc]
            """LoadScope, one scope per generation chunk: a chunk's rows run where they are generated."""

            _keys: dict[str, str] | None = None

            def _split_scope(self, nodeid: str) -> str:
                if self._keys is None:
                    self._keys = chunk_keys(self.collection or [], size)
                return self._keys.get(nodeid, nodeid)

        return ChunkScheduling(config, log)

    def pytest_configure_node(self, node: Any) -> None:
        # Gates need every row of their file, and rows run on several workers: each worker appends the rows
        # it scores to a shared spool folder, which gates read (runner.EvalRun.records_for).
        run = config_of(node).stash[RUN_KEY]
        if run.spool is None:
            run.spool = Path(tempfile.mkdtemp(prefix="llmeval-spool-"))
        node.workerinput["llmeval_spool"] = str(run.spool)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        run = config_of(node).stash[RUN_KEY]
        if run.expected_rows is None:
            run.expected_rows = sum(1 for n in ids if is_row_nodeid(n))

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        meta = getattr(node, "workeroutput", {}).get("llmeval_meta")
        run = config_of(node).stash[RUN_KEY]
        # Every worker that loaded the model reports the same metadata; keep the richest one.
        if meta and (run.worker_meta is None or len(meta) > len(run.worker_meta)):
            run.worker_meta = meta
        # Cache counts differ per worker (each generated its own chunks): summed, not picked.
        cache = ((meta or {}).get("inference_config") or {}).get("cache") or {}
        if cache.get("enabled"):
            run.add_worker_cache(cache)


def config_of(node: Any) -> pytest.Config:
    """The controller's config from an xdist WorkerController."""
    config: pytest.Config = node.config
    return config
