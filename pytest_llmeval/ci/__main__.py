"""`python -m pytest_llmeval.ci check RESULTS_JSON`: the alias of `pytest-llmeval check`, kept for the
workflows written before the one command line. It runs that command's code; it is a module of its own so
that the command line can import the pure functions of `pytest_llmeval.ci` without importing itself back.
"""

from __future__ import annotations

import sys

from pytest_llmeval.cli import main as cli


def main(argv: list[str] | None = None) -> int:
    """`python -m pytest_llmeval.ci check RESULTS_JSON`: the alias of `pytest-llmeval check`, same code.

    Kept for the workflows written before the one command line; every status is returned, usage errors too.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "check":
        usage = (
            "usage: python -m pytest_llmeval.ci check RESULTS_JSON [--allow-unrun-gates] "
            "(the same as: pytest-llmeval check)"
        )
        print(usage, file=sys.stderr)
        return 2
    try:
        return cli(args, prog="python -m pytest_llmeval.ci")
    except SystemExit as exc:  # argparse's --help (0) and usage errors (2)
        return exc.code if isinstance(exc.code, int) else 2


if __name__ == "__main__":
    raise SystemExit(main())
