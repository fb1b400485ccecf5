"""What every lm-eval output type's row builder shares (lm_eval_tasks.ROW_BUILDERS, lm_eval_generate): the
one error a conversion raises, the requests lm-eval built grouped by document, and the row id.

Its own module so that a builder in a module of its own (lm_eval_generate.py) and the converter that
registers it (lm_eval_tasks.py) both import it, and neither the other: no import cycle.

No pytest, no torch, no lm-eval: the requests are read, never made, here.
"""

from __future__ import annotations

from typing import Any

from pytest_llmeval.benchmark import _ID_RE

__all__ = ["LmEvalError", "by_document", "row_id"]


class LmEvalError(Exception):
    """A task that cannot be converted exactly, or input that cannot be read: one line, nothing written."""


def by_document(task: Any) -> list[tuple[int, list[Any]]]:
    """The task's requests grouped by document, in document order, each document's in request order."""
    found: dict[int, list[Any]] = {}
    for instance in task.instances:
        found.setdefault(int(instance.doc_id), []).append(instance)
    return [(doc_id, sorted(found[doc_id], key=lambda i: i.idx)) for doc_id in sorted(found)]


def row_id(name: str, doc_id: int) -> str:
    """TASK-DOC: the row id every converted row has; refused if a benchmark would refuse it."""
    found = f"{name}-{doc_id}"
    if not _ID_RE.match(found):
        raise LmEvalError(f"lm-eval task {name}: makes the row id {found!r}, which a benchmark refuses")
    return found
