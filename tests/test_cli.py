"""The one command line, `pytest-llmeval` (`python -m pytest_llmeval`): every subcommand's help and exit
statuses; `report` writes from results.json the very files the run wrote; `check` and its old alias
`python -m pytest_llmeval.ci check` are one code path; the installed console script runs it.

The runs are saved predictions (--llmeval-predictions): no model is loaded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, jsonl, row

from pytest_llmeval.ci.__main__ import main as ci_main
from pytest_llmeval.cli import main

SUBCOMMANDS = ("check", "report", "history", "view", "compare", "convert")
# The statuses each subcommand's --help lists: 1 only where there is a verdict to fail.
STATUSES = {"check": "012", "report": "02", "history": "02", "view": "02", "compare": "012", "convert": "02"}


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def a_run(pytester: pytest.Pytester, *args: str) -> Path:
    """14 rows, the adapter right on 13, the base on 6: every gate passes (7 discordant rows, p = 0.016),
    one row fails for both; its results.json."""
    rows = [
        row(f"r{i:02d}", expected=f"a{i}", difficulty=("easy", "medium", "hard")[i % 3], tags=["edge"])
        for i in range(14)
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    predictions = [
        {
            "id": f"r{i:02d}",
            "prediction": f"a{i}" if i < 13 else "no",
            "base_prediction": f"a{i}" if i < 6 else "no",
        }
        for i in range(14)
    ]
    (pytester.path / "preds.txt").write_text(jsonl(predictions))
    options = ["--llmeval-predictions=preds.txt", "--llmeval-domain=bench*", "--llmeval-min-rows=12"]
    pytester.runpytest(*options, "--llmeval-no-history", *args)
    results = pytester.path / "results.json"
    assert results.is_file()
    return results


# --- help -------------------------------------------------------------------------------------------------


def test_the_top_level_help_lists_every_subcommand_and_the_convention(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pytest-llmeval ")
    for name in SUBCOMMANDS:
        assert f"\n    {name} " in out, name
    assert (
        "exit status:\n  0  done" in out and "\n  1  the verdict failed" in out and "\n  2  bad input" in out
    )


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_help_describes_it_and_lists_its_exit_statuses(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    usage, description = out.split("\n\n")[:2]
    assert usage.startswith(f"usage: pytest-llmeval {name} ")
    assert len(description.split()) > 8  # a sentence, not an empty line
    epilog = out[out.index("\nexit status:\n") :]
    assert [line[2] for line in epilog.splitlines() if line[:3].strip().isdigit()] == list(STATUSES[name])


# --- report -----------------------------------------------------------------------------------------------


def test_report_writes_the_files_the_run_wrote(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    results = a_run(pytester, "--llmeval-html=run.html")
    ran_html = (pytester.path / "run.html").read_bytes()
    ran_spot = (pytester.path / "spot_check.md").read_bytes()
    assert b"<svg" in ran_html and b"r0" in ran_spot  # a report worth comparing: charts, and picked rows
    capsys.readouterr()
    out = pytester.path / "again"
    args = ["report", str(results), "--html", str(out / "page.html"), "--spot-check", str(out / "spot.md")]
    assert main(args) == 0
    assert (out / "page.html").read_bytes() == ran_html
    assert (out / "spot.md").read_bytes() == ran_spot
    err = capsys.readouterr().err
    assert (
        err
        == f"llmeval: wrote the HTML report to {out / 'page.html'} and the spot check to {out / 'spot.md'}\n"
    )
    # By default both go beside results.json (not into the current folder): the spot check where a run
    # with results.json there would have written it.
    elsewhere = pytester.mkdir("elsewhere")
    results.rename(elsewhere / "results.json")
    assert main(["report", "elsewhere/results.json"]) == 0
    assert sorted(p.name for p in elsewhere.iterdir()) == ["report.html", "results.json", "spot_check.md"]
    assert (elsewhere / "report.html").read_bytes() == ran_html
    assert (elsewhere / "spot_check.md").read_bytes() == ran_spot


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "No such file or directory"),
        ('{"complete": tr', "not JSON (Expecting value, line 1 column 14)"),
        (b"\xff\xfe{}", "not UTF-8 text (invalid start byte): not a results.json"),
        ("[]", "not a results.json (no benchmarks list)"),
        ('{"benchmarks": "none"}', "not a results.json (no benchmarks list)"),
        ("[" * 100_000, "not a results.json (JSON nested too deeply)"),
    ],
)
def test_report_and_check_refuse_what_is_no_results_json_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes | None, message: str
) -> None:
    path = tmp_path / "results.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    for command in ("report", "check"):
        assert main([command, str(path)]) == 2
        assert capsys.readouterr().err == f"llmeval: cannot read {path}: {message}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == (["results.json"] if content is not None else [])
    path.unlink(missing_ok=True)  # the conftest's schema check reads every *.json left behind


def test_a_damaged_results_json_is_bad_input_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A traceback exits 1, which CI reads as a failed gate: a damaged document is bad input, 2.
    path = tmp_path / "results.json"
    path.write_text('{"benchmarks": [{"gates": {}}]}')
    assert main(["report", str(path)]) == 2
    expected = f"llmeval: cannot read {path}: not a results.json (benchmarks[0] has no benchmark_file)\n"
    assert capsys.readouterr().err == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # neither file written
    path.write_text('{"benchmarks": [{"benchmark_file": "b.jsonl"}]}')
    assert main(["check", str(path)]) == 2
    expected = f"llmeval: cannot read {path}: not a results.json this version can read (no 'gates')\n"
    assert capsys.readouterr().err == expected


def test_report_names_the_file_it_cannot_write(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    results = a_run(pytester)
    (pytester.path / "a-file").write_text("")
    capsys.readouterr()
    assert main(["report", str(results), "--html", str(pytester.path / "a-file" / "report.html")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"llmeval: cannot write {pytester.path / 'a-file' / 'report.html'}: ")
        and err.count("\n") == 1
    )


# --- check and its alias ----------------------------------------------------------------------------------


def test_check_and_the_old_alias_are_one_command(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    passed = a_run(pytester)
    failed = pytester.path / "failed.json"
    document = json.loads(passed.read_text())
    document["benchmarks"][0]["gates"]["size"] = {"status": "fail", "message": "benchmark has 14 rows"}
    failed.write_text(json.dumps(document))
    capsys.readouterr()
    seen = []
    for path, status in ((passed, 0), (failed, 1), (pytester.path / "missing.json", 2)):
        assert main(["check", str(path)]) == status
        new = capsys.readouterr()
        assert ci_main(["check", str(path)]) == status
        old = capsys.readouterr()
        assert (new.out, new.err) == (old.out, old.err)
        seen.append(new.out + new.err)
    assert "llmeval: 0 failure(s), " in seen[0]
    assert "FAILED bench.jsonl: size: benchmark has 14 rows\nllmeval: 1 failure(s), " in seen[1]
    assert seen[2] == f"llmeval: cannot read {pytester.path / 'missing.json'}: No such file or directory\n"
    # The alias takes check only; its own usage mistakes are statuses too, never a raised SystemExit.
    assert ci_main(["report", str(passed)]) == 2
    assert ci_main(["check"]) == 2
    usage = " ".join(capsys.readouterr().err.split())  # argparse wraps it at the terminal's width
    assert "usage: python -m pytest_llmeval.ci check [-h] [--allow-unrun-gates] RESULTS_JSON" in usage


def test_the_installed_console_script_runs_the_command(pytester: pytest.Pytester) -> None:
    script = Path(sys.executable).with_name("pytest-llmeval")
    assert script.is_file(), f"{script}: not installed (pip install -e . installs the console script)"
    results = a_run(pytester)
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, capture_output=True, text=True, cwd=pytester.path, env=env, timeout=120, check=False
        )

    check = run(script, "check", results)
    assert check.returncode == 0 and "llmeval: 0 failure(s)" in check.stdout, check.stdout + check.stderr
    # `python -m pytest_llmeval` names itself as it was typed.
    usage = run(sys.executable, "-m", "pytest_llmeval", "report", "--help")
    assert usage.returncode == 0 and usage.stdout.startswith("usage: python -m pytest_llmeval report "), (
        usage.stdout
    )


@pytest.mark.parametrize("name", ["", *SUBCOMMANDS])
def test_the_command_line_page_shows_every_option_and_exit_status(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cli.md pastes each --help (at 100 columns): its options and its exit statuses must be today's.

    Not the whole text: argparse lays help out a little differently from one Python version to the next.
    """
    monkeypatch.setenv("COLUMNS", "100")
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    with pytest.raises(SystemExit):
        main([name, "--help"] if name else ["--help"])
    out = capsys.readouterr().out
    # The page's part on this command: up to the first subcommand's heading, or from its own to the next.
    parts = re.split(r"^## (" + "|".join(SUBCOMMANDS) + r")$", page, flags=re.MULTILINE)
    section = dict(zip(parts[1::2], parts[2::2], strict=True)).get(name, parts[0])
    assert set(re.findall(r"--[a-z][a-z-]+", out)) <= set(re.findall(r"--[a-z][a-z-]+", section))
    assert out[out.index("exit status:\n") :] in section
