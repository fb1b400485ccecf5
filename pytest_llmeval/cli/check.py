"""`pytest-llmeval check RESULTS_JSON` (and its alias `python -m pytest_llmeval.ci check`): CI's gate."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_llmeval import ci
from pytest_llmeval.cli.common import _exit_codes, _not_results, _read_results, _Refused, _subcommand


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    check = _subcommand(
        commands,
        "check",
        help="CI's gate: exit 1 when a gate failed or the run is incomplete",
        description="Print every failed gate of a results.json (and the reason when the run is incomplete), "
        "and exit 1 when there is one.\npytest's own exit status also counts rows the model answered "
        "wrong, which are results, not failures: CI gates on this instead.\n"
        "`python -m pytest_llmeval.ci check RESULTS_JSON` is the same command.",
        epilog=_exit_codes(
            "0  every gate passed, warned or was skipped, and the run is complete",
            "1  a gate failed, or the run is incomplete (interrupted, stopped early)",
            "2  RESULTS_JSON cannot be read, or is not a results.json",
        ),
    )
    check.add_argument("results", type=Path, metavar="RESULTS_JSON", help="the results.json of a run")
    return check


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    document = _read_results(args.results)
    try:
        failures = ci.failed_gates(document)
        gates = sum(len(b["gates"]) for b in document["benchmarks"])
        gates += len((document.get("criteria") or {}).get("gates") or {})
    except (LookupError, TypeError, AttributeError) as exc:
        raise _Refused(_not_results(args.results, exc)) from None
    for failure in failures:
        print(f"FAILED {failure}")
    criteria = document.get("criteria")
    decided = f" (criteria {criteria['name']})" if isinstance(criteria, dict) and "name" in criteria else ""
    print(f"llmeval: {len(failures)} failure(s), {gates} gate verdict(s) in {args.results}{decided}")
    return 1 if failures else 0
