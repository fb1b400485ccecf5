"""--llmeval-criteria locollm: the LocoLLM standard's pass criteria applied as written, against the default.

The standard: better_than_base "Adapter score must be higher than base model score"; out of domain "within 5
percentage points of the base model's score", more than 10 points "indicates a problem with training"; "Run
the adapter on at least one other domain's benchmark". And of the easy rows: "base model should get ~50%+
of these right" (a warning of difficulty_mix).

The runs are saved predictions (no model is loaded). The out-of-domain files use a custom scorer that
returns the prediction as its score, so each file's drop is exactly the one written here (4.9, 5.1, 10.1
points); the in-domain file is exact_match rows where the adapter gets one row more than the base (a point
improvement, McNemar p = 1).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from helpers import jsonl, row

from pytest_llmeval import gates
from pytest_llmeval.cli import main as cli
from pytest_llmeval.stats import PairedComparison

N = 10  # rows per file: --llmeval-min-rows is set to it
SCRIPT = "def evaluate(generated, expected):\n    return float(generated)\n"
OUT_OF_DOMAIN = {"ood49": 0.049, "ood51": 0.051, "ood101": 0.101}  # file -> the adapter's drop


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def write_run(pytester: pytest.Pytester, drops: dict[str, float]) -> None:
    """dom.jsonl (in the adapter's domain: the adapter right on 6 rows, the base on 5) and one custom-scored
    file per entry of `drops`, whose adapter mean is exactly that much below the base's."""
    dom = [row(f"d{i}", expected=f"a{i}") for i in range(N)]
    files: dict[str, str] = {"dom": jsonl(dom)}
    preds = [
        {
            "id": f"d{i}",
            "prediction": f"a{i}" if i < 6 else "no",
            "base_prediction": f"a{i}" if i < 5 else "no",
        }
        for i in range(N)
    ]
    config = {"script": "score.py", "function": "evaluate"}
    for name, drop in drops.items():
        rows = [
            row(f"{name}-{i}", expected="x", evaluation_type="custom", evaluation_config=config)
            for i in range(N)
        ]
        files[name] = jsonl(rows)
        # Paired differences spread around the drop (a constant one has no variance to test), mean exact.
        for i in range(N):
            base = 0.8 - 0.02 * (i % 2)
            spread = 0.01 if i % 2 else -0.01
            preds.append(
                {"id": f"{name}-{i}", "prediction": repr(base - drop + spread), "base_prediction": repr(base)}
            )
    pytester.makefile(".jsonl", **files)
    (pytester.path / "score.py").write_text(SCRIPT)
    (pytester.path / "preds.txt").write_text(jsonl(preds))


def run(pytester: pytest.Pytester, *extra: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = pytester.runpytest(
        "--llmeval-predictions=preds.txt",
        "--llmeval-domain=dom*",
        f"--llmeval-min-rows={N}",
        "--llmeval-min-edge-cases=0",
        "--llmeval-no-history",
        "-rA",
        *extra,
    )
    document: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    return result, document


def verdicts(document: dict[str, Any], gate: str) -> dict[str, str]:
    return {
        b["benchmark_file"]: b["gates"][gate]["status"] for b in document["benchmarks"] if gate in b["gates"]
    }


def check(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    status = cli(["check", str(pytester.path / "results.json")])
    return status, capsys.readouterr().out


# --- whole runs --------------------------------------------------------------------------------------------


def test_locollm_passes_and_fails_as_the_standard_reads(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(pytester, OUT_OF_DOMAIN)
    result, document = run(pytester, "--llmeval-criteria=locollm")
    # The header and the summary say which criteria decide.
    result.stdout.fnmatch_lines(
        [
            "llmeval: criteria locollm (the LocoLLM standard): better_than_base on the point estimate "
            "(adapter mean > base mean); no_degradation fails above a 5-point drop, no warn band (above 10: "
            "a training problem); an out-of-domain benchmark is required",
            "gates decided by criteria locollm (the LocoLLM standard): *",
        ]
    )
    name = document["adapter_name"]  # the predictions' name: preds.txt@<hash of the outputs>
    assert {k: v for k, v in document["criteria"].items() if k != "gates"} == {
        "name": "locollm",
        "better_than_base": "point",
        "fail_drop": 0.05,
        "warn_drop": None,
        "training_problem_drop": 0.10,
        "out_of_domain_required": True,
    }
    # A point improvement without significance passes (McNemar p = 1 on one discordant row).
    better = document["benchmarks"][0]["gates"]["better_than_base"]
    assert better["status"] == "pass" and "better on the point estimate (not significant" in better["message"]
    # Out of domain: 4.9 points pass, 5.1 fail, 10.1 fail as a training problem; no warning band.
    assert verdicts(document, "no_degradation") == {
        "ood101.jsonl": "fail",
        "ood49.jsonl": "pass",
        "ood51.jsonl": "fail",
    }
    messages = {
        b["benchmark_file"]: b["gates"].get("no_degradation", {}).get("message", "")
        for b in document["benchmarks"]
    }
    assert "drop 0.049 <= 0.050" in messages["ood49.jsonl"]
    assert "drop 0.051 > fail threshold 0.050" in messages["ood51.jsonl"]
    assert "training" not in messages["ood51.jsonl"]
    assert messages["ood101.jsonl"].endswith(
        "drop 0.101 > fail threshold 0.050; more than 10 points, which the LocoLLM standard calls a problem "
        "with training"
    )
    assert "LLMEvalGateWarning: gate no_degradation" not in result.stdout.str()
    # The out-of-domain check ran: its item passes, and results.json holds the same verdict.
    result.stdout.fnmatch_lines(["PASSED *::gate::out_of_domain_required"])
    required = document["criteria"]["gates"][f"out_of_domain_required[{name}]"]
    assert required["status"] == "pass" and "3 benchmarks out of its domain" in required["message"]
    status, out = check(pytester, capsys)
    assert status == 1
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert [line.split(":")[0] for line in failed] == ["FAILED ood101.jsonl", "FAILED ood51.jsonl"]
    assert out.rstrip().endswith("(criteria locollm)")


def test_the_default_differs_where_the_docs_say(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(pytester, OUT_OF_DOMAIN)
    result, document = run(pytester)
    result.stdout.fnmatch_lines(
        ["llmeval: criteria default: better_than_base needs a higher mean and a significant*"]
    )
    assert document["criteria"] == {
        "name": "default",
        "better_than_base": "significant",
        "fail_drop": 0.10,
        "warn_drop": 0.05,
        "training_problem_drop": None,
        "out_of_domain_required": False,
    }
    # The same point improvement is not significant: it fails under the default.
    better = document["benchmarks"][0]["gates"]["better_than_base"]
    assert better["status"] == "fail" and "better than base but not significantly" in better["message"]
    # 5.1 points warn (the band), 10.1 fail; no out-of-domain item is made.
    assert verdicts(document, "no_degradation") == {
        "ood101.jsonl": "fail",
        "ood49.jsonl": "pass",
        "ood51.jsonl": "warn",
    }
    assert "out_of_domain_required" not in result.stdout.str()
    status, out = check(pytester, capsys)
    assert status == 1 and out.rstrip().endswith("(criteria default)")


def test_locollm_requires_an_out_of_domain_benchmark(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(pytester, {})
    result, document = run(pytester, "--llmeval-criteria=locollm")
    name = document["adapter_name"]
    # No benchmark gate fails (dom.jsonl's difficulty mix warns); the run gate fails and says what to do.
    assert all(v["status"] != "fail" for b in document["benchmarks"] for v in b["gates"].values())
    result.stdout.fnmatch_lines(
        [
            f"*gate out_of_domain_required[[]{name}[]] failed: {name} ran on no benchmark out of its domain "
            "(in it: dom.jsonl); the LocoLLM standard (--llmeval-criteria locollm) requires an out-of-domain "
            "check: add another domain's benchmark to the run (*--llmeval-domain GLOB*",
        ]
    )
    result.stdout.fnmatch_lines([f"FAILED {name}::gate::out_of_domain_required*"])
    verdict = document["criteria"]["gates"][f"out_of_domain_required[{name}]"]
    assert verdict["status"] == "fail" and verdict["details"] == {
        "out_of_domain": [],
        "in_domain": ["dom.jsonl"],
    }
    # The summary says so, and `check` fails on it alone.
    result.stdout.fnmatch_lines([f"  out_of_domain_required[[]{name}[]] fail: {name} ran on no benchmark*"])
    status, out = check(pytester, capsys)
    assert status == 1
    assert out.splitlines()[0].startswith(
        f"FAILED out_of_domain_required[{name}]: {name} ran on no benchmark"
    )
    # GitHub: the step summary names the criteria and the failed run gate; an annotation without a file.
    from pytest_llmeval import ci

    summary = ci.step_summary(document)
    assert "Gates decided by criteria locollm (the LocoLLM standard): " in summary
    assert f"**out_of_domain_required[{name}]**: {name} ran on no benchmark out of its domain" in summary
    assert f"::error::gate out_of_domain_required[{name}] failed: {name} ran on no benchmark" in "\n".join(
        ci.error_annotations(document)
    )


def test_locollm_refuses_the_options_that_would_change_its_rules(pytester: pytest.Pytester) -> None:
    write_run(pytester, {})
    result = pytester.runpytest(
        "--llmeval-predictions=preds.txt",
        "--llmeval-criteria=locollm",
        "--llmeval-gate=point",
        "--llmeval-fail-drop=0.1",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: llmeval: --llmeval-gate and --llmeval-fail-drop would change a rule of "
            "--llmeval-criteria locollm, which applies as written (criteria locollm (the LocoLLM "
            "standard): *): leave them out, or use --llmeval-criteria default"
        ]
    )
    # Under the default they still change its rules, and a fail threshold below the warn one is refused.
    low = pytester.runpytest("--llmeval-predictions=preds.txt", "--llmeval-fail-drop=0.01")
    assert low.ret == pytest.ExitCode.USAGE_ERROR
    low.stderr.fnmatch_lines(["*--llmeval-fail-drop 0.01 is below --llmeval-warn-drop 0.05*"])


def test_easy_rows_the_base_gets_under_half_of_warn(pytester: pytest.Pytester) -> None:
    # Both files on the standard's mix (30/50/20): only the easy rows can make difficulty_mix warn. The
    # predictions are the base's (no base_prediction: the base alone is evaluated).
    levels = ["easy"] * 3 + ["medium"] * 5 + ["hard"] * 2
    under = [row(f"u{i}", expected=f"a{i}", difficulty=level) for i, level in enumerate(levels)]
    half = [row(f"h{i}", expected=f"a{i}", difficulty=level) for i, level in enumerate(levels * 2)]
    pytester.makefile(".jsonl", under=jsonl(under), half=jsonl(half))
    right = {"u0"} | {f"h{i}" for i in (0, 1, 10)}  # under: 1 of 3 easy rows; half: 3 of 6
    preds = [
        {"id": r["id"], "prediction": r["expected_output"] if r["id"] in right else "no"}
        for r in under + half
    ]
    (pytester.path / "preds.txt").write_text(jsonl(preds))
    result = pytester.runpytest(
        "--llmeval-predictions=preds.txt",
        "--llmeval-no-history",
        "--llmeval-min-rows=0",
        "--llmeval-min-edge-cases=0",
        "-rA",
    )
    document: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    mix = {b["benchmark_file"]: b["gates"]["difficulty_mix"] for b in document["benchmarks"]}
    assert mix["under.jsonl"]["status"] == "warn"
    assert mix["under.jsonl"]["message"].endswith(
        "within 15 points of target; the base model got 1 of 3 easy rows right (33%), under the 50% the "
        "LocoLLM standard expects: the benchmark's easy rows may not be easy"
    )
    assert mix["under.jsonl"]["details"]["easy_base"] == {
        "right": 1,
        "scored": 3,
        "rate": 1 / 3,
        "expected": 0.5,
    }
    assert mix["half.jsonl"]["status"] == "pass"
    assert mix["half.jsonl"]["message"].endswith("; the base model got 3 of 6 easy rows right (50%)")
    # The warning shows as the other gates' do, at the benchmark file, and never fails the gate.
    result.stdout.fnmatch_lines(
        ["*under.jsonl:1: LLMEvalGateWarning: gate difficulty_mix: *easy rows may not be easy"]
    )
    assert "half.jsonl:1: LLMEvalGateWarning" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*PASSED under.jsonl::gate::difficulty_mix*"])


# --- the pure rules ---------------------------------------------------------------------------------------


def _drop(drop: float) -> PairedComparison:
    """A comparison whose adapter mean is `drop` below the base's."""
    return PairedComparison(
        n=100,
        kind="continuous",
        mean_adapter=0.6 - drop,
        mean_base=0.6,
        difference=-drop,
        ci_low=-drop - 0.02,
        ci_high=-drop + 0.02,
        confidence=0.95,
        test="paired_t",
        statistic=-3.0,
        p_value=0.01,
        wilcoxon_p=0.01,
        effect_size=-0.3,
        effect_size_pooled=-0.3,
        discordant=None,
        alpha=0.05,
        significant=True,
        min_detectable_difference=None,
        n_for_10_points=None,
        t_statistic=-3.0,
    )


@pytest.mark.parametrize(
    ("drop", "status", "problem"),
    [
        (0.0, "pass", False),
        (0.049, "pass", False),
        (0.05, "pass", False),
        (0.0501, "fail", False),
        (0.051, "fail", False),
        (0.10, "fail", False),
        (0.101, "fail", True),
    ],
)
def test_locollm_out_of_domain_thresholds(drop: float, status: str, problem: bool) -> None:
    rules = gates.LOCOLLM_CRITERIA
    verdict = gates.no_degradation(
        _drop(drop), warn_drop=rules.warn_drop, fail_drop=rules.fail_drop, problem_drop=rules.problem_drop
    )
    assert verdict.status == status
    assert ("a problem with training" in verdict.message) is problem
    assert verdict.details["training_problem_drop"] == 0.10 and verdict.details["warn_drop"] is None


def test_locollm_point_rule_and_the_default_significance_rule() -> None:
    cmp = dataclasses.replace(_drop(-0.01), p_value=0.6, significant=False)  # +1 point, not significant
    assert gates.better_than_base(cmp, mode=gates.LOCOLLM_CRITERIA.better_than_base).status == "pass"
    assert gates.better_than_base(cmp, mode=gates.DEFAULT_CRITERIA.better_than_base).status == "fail"


def test_out_of_domain_required_verdicts() -> None:
    infos = [
        {"name": "a.jsonl", "domains": {"adapter": "in", "other": "out"}},
        {"name": "b.jsonl", "domains": {"adapter": "in", "other": "in"}},
    ]
    assert gates.run_domains(infos, "adapter") == {"a.jsonl": "in", "b.jsonl": "in"}
    failed = gates.out_of_domain_required(gates.run_domains(infos, "adapter"), who="date-iso")
    assert failed.status == "fail" and "(in it: a.jsonl, b.jsonl)" in failed.message
    assert "--llmeval-domain" in failed.message and "domain_benchmarks" in failed.message
    passed = gates.out_of_domain_required(gates.run_domains(infos, "other"), who="other")
    assert passed.status == "pass" and passed.message == "other ran on 1 benchmark out of its domain: a.jsonl"
    assert gates.out_of_domain_required({}).status == "skip"
    # results.json: the rules, with a verdict per gated column where they require the check.
    entry = gates.criteria_entry(
        gates.LOCOLLM_CRITERIA.to_json(), infos, {"adapter": "date-iso", "other": "o"}
    )
    assert entry is not None
    assert {k: v["status"] for k, v in entry["gates"].items()} == {
        "out_of_domain_required[date-iso]": "fail",
        "out_of_domain_required[o]": "pass",
    }
    assert gates.criteria_entry(gates.DEFAULT_CRITERIA.to_json(), infos, {"adapter": "x"}) == (
        gates.DEFAULT_CRITERIA.to_json()
    )
    assert gates.criteria_entry(None, infos, {}) is None


@pytest.mark.parametrize(
    ("easy_base", "status"),
    [((1, 3), "warn"), ((4, 9), "warn"), ((1, 2), "pass"), ((3, 3), "pass"), ((0, 0), "pass")],
)
def test_difficulty_mix_easy_rows(easy_base: tuple[int, int], status: str) -> None:
    verdict = gates.difficulty_mix({"easy": 3, "medium": 5, "hard": 2}, easy_base=easy_base)
    assert verdict.status == status
    assert ("may not be easy" in verdict.message) is (status == "warn")
    assert gates.difficulty_mix({"easy": 3, "medium": 5, "hard": 2}).message.endswith(
        "within 15 points of target"
    )
    with pytest.raises(ValueError, match=r"easy_base must be \(right, scored\)"):
        gates.difficulty_mix({"easy": 1}, easy_base=(2, 1))
