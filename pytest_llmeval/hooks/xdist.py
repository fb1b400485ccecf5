"""Which process a hook runs in under pytest-xdist: the controller, or one of its workers.

The hooks ask before doing what only one process may (checking files, writing results.json, warning once).
The xdist hooks themselves (the chunk scheduler, the spool folder, worker metadata) are distribution.py's,
registered by pytest_configure when xdist is installed.
"""

from __future__ import annotations

import pytest


def is_worker(config: pytest.Config) -> bool:
    """Is this an xdist worker (xdist gives each worker its `workerinput`)?"""
    return hasattr(config, "workerinput")
