"""The pytest11 entry point of pytest-llmeval: every hook and fixture, imported from pytest_llmeval/hooks/.

pytest registers this one module (pyproject's `[project.entry-points.pytest11]`) and finds the hooks by their
`pytest_` names and the fixtures by their definitions among its attributes, imported ones included: what is
not named here is not part of the plugin. The hooks live by concern in hooks/ (options, configure, collection,
fixtures, reporting); the hooks modules are never registered themselves, so each hook runs once.

Nothing heavy is imported here, nor by the hooks modules at module level: `pytest --help` and test runs that
evaluate no model must not pay for torch or transformers.
"""

from __future__ import annotations

from pytest_llmeval.hooks.collection import (
    pytest_collect_file,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_deselected,
    pytest_make_collect_report,
)
from pytest_llmeval.hooks.configure import pytest_configure, pytest_sessionstart, pytest_unconfigure
from pytest_llmeval.hooks.fixtures import llm, llm_base, llm_models
from pytest_llmeval.hooks.options import pytest_addoption
from pytest_llmeval.hooks.reporting import (
    pytest_report_header,
    pytest_runtest_makereport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

__all__ = [
    "llm",
    "llm_base",
    "llm_models",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_deselected",
    "pytest_make_collect_report",
    "pytest_report_header",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_terminal_summary",
    "pytest_unconfigure",
]
