"""tools/test_profile.py: the JUnit XML of a run read back into seconds by test and by file, and the
durations file the suite's schedule and fast tier read (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REPO, load_script

TOOL = load_script(REPO / "tools" / "test_profile.py", "test_profile_tool")


def _junit(folder: Path, name: str, cases: list[tuple[str, str, float]]) -> None:
    body = "".join(f'<testcase classname="{c}" name="{n}" time="{t}"/>' for c, n, t in cases)
    (folder / name).write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')


def test_seconds_by_test_and_file_and_the_slow_ones_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _junit(
        tmp_path,
        "parallel.xml",
        [
            ("tests.test_e2e", "test_main_job_generated_every_output", 150.0),
            ("tests.test_e2e", "test_adapter_beats_base_on_its_task", 0.5),
            ("tests.test_stats", "test_wilcoxon_signed_rank_matches_scipy[d2]", 1.4),
        ],
    )
    _junit(tmp_path, "serial.xml", [("tests.test_endpoint_client", "test_retry[status-409]", 1.5)])
    (tmp_path / "fixtures.json.gw0").write_text(json.dumps({"main_job (module)": 149.0}))
    (tmp_path / "fixtures.json.gw1").write_text(json.dumps({"main_job (module)": 1.0}))
    out = tmp_path / "durations.json"
    assert TOOL.main([str(tmp_path), "--write", str(out)]) == 0
    stored = json.loads(out.read_text())
    assert stored["files"] == {
        "tests/test_e2e.py": 150.5,
        "tests/test_endpoint_client.py": 1.5,
        "tests/test_stats.py": 1.4,
    }
    # 1.5 s or more: slow (the fast tier leaves it out); under it, fast.
    assert stored["slow_tests"] == {
        "tests/test_e2e.py::test_main_job_generated_every_output": 150.0,
        "tests/test_endpoint_client.py::test_retry[status-409]": 1.5,
    }
    printed = capsys.readouterr().out
    assert "150.0" in printed and "main_job (module)" in printed and "150.0  " in printed


def test_a_test_once_slow_stays_slow_until_it_takes_under_half_the_line(tmp_path: Path) -> None:
    """A profile on a faster machine must not move tests of 1-1.5 s back into make test-fast at once."""
    _junit(
        tmp_path,
        "parallel.xml",
        [
            ("tests.test_stats", "test_was_slow_still_near", 1.0),
            ("tests.test_stats", "test_was_slow_now_quick", 0.7),
            ("tests.test_stats", "test_was_fast_near", 1.0),
            ("tests.test_stats", "test_new_slow", 2.0),
        ],
    )
    out = tmp_path / "durations.json"
    before = {
        "tests/test_stats.py::test_was_slow_still_near": 2.0,
        "tests/test_stats.py::test_was_slow_now_quick": 2.0,
    }
    out.write_text(json.dumps({"slow_over": 1.5, "files": {}, "slow_tests": before}))
    assert TOOL.main([str(tmp_path), "--write", str(out)]) == 0
    assert json.loads(out.read_text())["slow_tests"] == {
        "tests/test_stats.py::test_new_slow": 2.0,
        "tests/test_stats.py::test_was_slow_still_near": 1.0,
    }


def test_a_folder_without_junit_xml_is_an_error(tmp_path: Path) -> None:
    assert TOOL.main([str(tmp_path)]) == 2


def test_the_committed_durations_name_files_that_exist() -> None:
    """A renamed or removed test file leaves its entry behind: make test-profile renews the file."""
    stored = json.loads((REPO / "tests" / "durations.json").read_text(encoding="utf-8"))
    missing = [name for name in stored["files"] if not (REPO / name).is_file()]
    assert not missing, f"tests/durations.json names files that are gone: {missing}; run make test-profile"


def test_every_serial_mark_is_where_the_makefile_looks() -> None:
    """make test's serial run collects only the files that hold the text "pytest" "." "mark.serial"
    (Makefile, SERIAL): a test marked serial any other way (`mark.serial` imported alone, a marker added in
    a hook) would run in neither of make test's runs."""
    import re

    text = "pytest." + "mark.serial"  # spelt in two parts: this file itself is not one to collect
    sources = {path.name: path.read_text("utf-8") for path in sorted((REPO / "tests").glob("*.py"))}
    del sources[Path(__file__).name]  # it names the marker in this check, and marks no test
    marked = {
        name
        for name, source in sources.items()
        if re.search(r"\bmark\.serial\b|add_marker\([^)]*serial", source)
    }
    found = {name for name, source in sources.items() if name.startswith("test_") and text in source}
    assert found, "no test is marked serial: the Makefile's serial run would collect the whole suite"
    assert marked == found, f"marked serial: {sorted(marked)}; found by the Makefile: {sorted(found)}"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert f'grep -l "{text}" tests/test_*.py' in makefile
