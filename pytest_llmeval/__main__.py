"""`python -m pytest_llmeval`: the `pytest-llmeval` command line, which lives in pytest_llmeval/cli/."""

from __future__ import annotations

from pytest_llmeval.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
