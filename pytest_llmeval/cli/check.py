"""`pytest-llmeval check RESULTS_JSON` (and its alias `python -m pytest_llmeval.ci check`): CI's gate."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_llmeval import ci
from pytest_llmeval.cli.common import _exit_codes, _not_results, _read_results, _Refused, _subcommand

ALLOW_UNRUN = "--allow-unrun-gates"


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    check = _subcommand(
        commands,
        "check",
        help="CI's gate: exit 1 when a gate failed or did not run, or the run is incomplete",
        description="Print every failed gate of a results.json, every benchmark file that failed to collect, "
        "every gate the run deselected (-m 'not gate', -k, --deselect), and the reason when the run is "
        "incomplete; exit 1 when there is one.\n"
        "A gate that did not run gave no verdict, so it fails the check: to accept that knowingly (a run of "
        f"rows only), give {ALLOW_UNRUN}; the gates are still listed. A benchmark file that failed to "
        "collect cannot be accepted: the run is incomplete.\n"
        "pytest's own exit status also counts rows the model answered wrong, which are results, not "
        "failures: CI gates on this instead.\n"
        "`python -m pytest_llmeval.ci check RESULTS_JSON` is the same command.",
        epilog=_exit_codes(
            "0  every gate passed, warned or was skipped, every gate collected ran (or was accepted with "
            f"{ALLOW_UNRUN}), and the run is complete",
            "1  a gate failed, or did not run, or a benchmark file failed to collect, or the run is "
            "incomplete (interrupted, stopped early)",
            "2  RESULTS_JSON cannot be read, or is not a results.json",
        ),
    )
    check.add_argument("results", type=Path, metavar="RESULTS_JSON", help="the results.json of a run")
    check.add_argument(
        ALLOW_UNRUN,
        action="store_true",
        help="accept gates the run deselected (results.json's not_run) instead of failing on them",
    )
    return check


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    document = _read_results(args.results)
    try:
        failures = ci.failed_gates(document, allow_unrun_gates=args.allow_unrun_gates)
        gates = sum(len(b["gates"]) for b in document["benchmarks"])
        gates += len((document.get("criteria") or {}).get("gates") or {})
        unrun = ci.unrun_gates(document)
    except (LookupError, TypeError, AttributeError) as exc:
        raise _Refused(_not_results(args.results, exc)) from None
    for failure in failures:
        print(f"FAILED {failure}")
    if args.allow_unrun_gates:
        # Accepted, not hidden: the log of the check still says which gates gave no verdict.
        for entry in unrun:
            print(f"ACCEPTED {ci.not_run_line(entry)}")
    criteria = document.get("criteria")
    decided = f" (criteria {criteria['name']})" if isinstance(criteria, dict) and "name" in criteria else ""
    accepted = (
        f", {len(unrun)} gate(s) not run, accepted ({ALLOW_UNRUN})"
        if unrun and args.allow_unrun_gates
        else ""
    )
    print(
        f"llmeval: {len(failures)} failure(s), {gates} gate verdict(s){accepted} in {args.results}{decided}"
    )
    return 1 if failures else 0
