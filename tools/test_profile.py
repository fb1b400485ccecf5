"""Where the test suite's time goes: by file, by test and by fixture, from a `make test-profile` run.

    python tools/test_profile.py .profile                 # the tables (make test-profile prints them)
    python tools/test_profile.py .profile --write tests/durations.json

It reads every JUnit XML in the folder (a testcase's time is its set-up, call and tear-down together) and
every `fixtures.json*` that tests/conftest.py's `--fixture-durations` wrote (one per xdist worker). With
--write it stores the seconds of each test file, which tests/conftest.py reads to send the longest files to
the workers first, and the tests that took 1.5 s or more (--slow-over), which it marks `slow`: make test-fast
leaves them out (they start processes: an xdist run's workers, a subprocess, a server). A test the file
being replaced marked slow stays slow while it still takes half the line (STAY_SLOW): a profile made on a
faster or quieter machine than the last one would otherwise move dozens of 1-2 s tests back into the quick
loop at once (issue 53: make test-fast grew by 15 s that way, with no test changed).
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# make test-fast leaves out the tests that took this long or longer in the last profile (tests/conftest.py).
SLOW_OVER = 1.5
# A test already marked slow is unmarked only once it takes less than this share of the line.
STAY_SLOW = 0.5


def test_seconds(folder: Path) -> dict[str, float]:
    """Seconds by test node id (file::name), over every JUnit XML in `folder`."""
    found: dict[str, float] = {}
    for xml in sorted(folder.glob("*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            # JUnit XML names tests/test_x.py::Class::test by the classname tests.test_x.Class.
            parts = (case.get("classname") or "").split(".")
            inner: list[str] = []
            while len(parts) > 1 and not (REPO / Path(*parts).with_suffix(".py")).is_file():
                inner.insert(0, parts.pop())
            nodeid = "::".join(["/".join(parts) + ".py", *inner, case.get("name") or ""])
            found[nodeid] = found.get(nodeid, 0.0) + float(case.get("time") or 0.0)
    return found


def fixture_seconds(folder: Path) -> Counter[str]:
    """Seconds by fixture (name and scope), summed over the workers' files."""
    total: Counter[str] = Counter()
    for path in sorted(folder.glob("fixtures.json*")):
        for name, seconds in json.loads(path.read_text(encoding="utf-8")).items():
            total[name] += float(seconds)
    return total


def by_file(tests: dict[str, float]) -> Counter[str]:
    files: Counter[str] = Counter()
    for nodeid, seconds in tests.items():
        files[nodeid.split("::", 1)[0]] += seconds
    return files


def table(title: str, rows: list[tuple[str, float]], total: float) -> str:
    lines = [f"{title}", f"{'seconds':>9} {'share':>6}  name"]
    lines += [f"{seconds:9.1f} {seconds / total:6.1%}  {name}" for name, seconds in rows]
    return "\n".join(lines)


def previously_slow(path: Path) -> set[str]:
    """The tests the durations file about to be replaced marks slow (none if there is no readable one)."""
    try:
        return set(json.loads(path.read_text(encoding="utf-8"))["slow_tests"])
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="what make test-profile wrote (.profile)")
    parser.add_argument("--top", type=int, default=30, help="rows of each table (default 30)")
    parser.add_argument("--write", type=Path, help="store the seconds of each file and slow test here (JSON)")
    parser.add_argument(
        "--slow-over",
        type=float,
        default=SLOW_OVER,
        help=f"with --write: a test that took this many seconds or more is slow (default {SLOW_OVER})",
    )
    args = parser.parse_args(argv)
    tests = test_seconds(args.folder)
    if not tests:
        print(f"error: no JUnit XML with test cases in {args.folder}", file=sys.stderr)
        return 2
    total = sum(tests.values())
    files = by_file(tests)
    print(
        f"{len(tests)} tests, {total:.0f} s of test time (set-up, call and tear-down; summed over workers)\n"
    )
    print(table("By file", files.most_common(args.top), total), end="\n\n")
    slowest = sorted(tests.items(), key=lambda kv: -kv[1])[: args.top]
    print(table("By test", slowest, total), end="\n\n")
    fixtures = fixture_seconds(args.folder)
    if fixtures:
        print(table("By fixture (set-up only)", fixtures.most_common(args.top), total))
    if args.write is not None:
        was_slow = previously_slow(args.write)
        stored = {
            "slow_over": args.slow_over,
            "files": {name: round(seconds, 1) for name, seconds in sorted(files.items())},
            "slow_tests": {
                n: round(s, 1)
                for n, s in sorted(tests.items())
                if s >= args.slow_over or (n in was_slow and s >= STAY_SLOW * args.slow_over)
            },
        }
        args.write.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
        slow = len(stored["slow_tests"])
        print(
            f"\nseconds by file, and the {slow} slow tests ({args.slow_over} s or more, or slow before and"
            f" {STAY_SLOW * args.slow_over:g} s or more): {args.write}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
