"""Several columns on the same rows: several adapters on one base, other full models, a reference; the
family of comparisons and Holm's adjustment; the interference matrix; each adapter's own document.

Pure parts on hand-made records; the plugin on tiny random models (tests/helpers.py). The real demo
adapters and a merged full model are in tests/test_several_models_e2e.py.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from helpers import build_tiny_adapter, build_tiny_model, jsonl, row, without_clocks
from hypothesis import given, settings
from hypothesis import strategies as st
from locollm import validate_locollm
from statsmodels.stats.multitest import multipletests

from pytest_llmeval import comparisons, gates
from pytest_llmeval.records import ADAPTER, BASE, BenchmarkInfo, gate_record, row_record
from pytest_llmeval.results import adapter_documents, build_results, interference_matrix, project
from pytest_llmeval.roster import RosterError, build_roster
from pytest_llmeval.stats import compare_paired, holm

pytest_plugins = ["pytester"]

# ---------------------------------------------------------------------------------------------------------
# Holm's adjustment


def statsmodels_holm(p_values: list[float]) -> list[float]:
    """statsmodels' Holm-adjusted p-values. Its Holm branch ends in gc.collect(), which in a process that
    holds torch and transformers takes ~50-300 ms: a full collection that changes no value, skipped here."""
    with mock.patch("gc.collect", lambda *_: 0):
        return [float(p) for p in multipletests(p_values, method="holm")[1]]


# 100 examples are enough to meet ties, zeros and ones.
@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30))
def test_holm_is_statsmodels_holm(p_values: list[float]) -> None:
    expected = statsmodels_holm(p_values)
    assert holm(p_values) == [float(p) for p in expected]  # the same products in the same order
    adjusted = holm(p_values)
    # What makes it Holm's: never below the raw p, at most 1, and the order of the raw p-values kept.
    assert all(a >= p for a, p in zip(adjusted, p_values, strict=True))
    assert all(a <= 1.0 for a in adjusted)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    assert all(adjusted[i] <= adjusted[j] for i, j in itertools.pairwise(order))


def test_holm_of_one_is_the_p_value_and_of_none_is_empty() -> None:
    assert holm([0.03]) == [0.03]
    assert holm([]) == []
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_holm_by_hand() -> None:
    # Sorted 0.01, 0.03, 0.04: 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04) -> 0.03, 0.06, 0.06.
    assert holm([0.04, 0.01, 0.03]) == pytest.approx([0.06, 0.03, 0.06])


# ---------------------------------------------------------------------------------------------------------
# Records of a run with two adapters and a full model, made by hand


def info(name: str, domains: dict[str, str]) -> BenchmarkInfo:
    return {
        "name": name,
        "sha256": "sha256:" + "0" * 64,
        "domain": None,
        "n_rows": 0,
        "domains": domains,  # type: ignore[typeddict-item]
    }


def record(bench: BenchmarkInfo, i: int, scores: dict[str, float], evaluated: str) -> Any:
    case = SimpleNamespace(
        id=f"r{i:03d}",
        line=i + 1,
        difficulty="easy",
        evaluation_type="exact_match",
        evaluation_config={},
        instruction="Say it.",
        input="",
        tags=[],
        expected_output="it",
    )
    models = {
        c: {"output": "it" if v else "no", "score": {"value": v, "threshold": 1.0, "passed": v >= 1.0}}
        for c, v in scores.items()
    }
    return row_record(
        nodeid=f"{bench['name']}::r{i:03d}",
        benchmark=bench,
        case=case,
        evaluated=evaluated,
        models=models,  # type: ignore[arg-type]
        passed=scores[evaluated] >= 1.0,
    )


KINDS = {"dates": "adapter", "sent": "adapter", "sft": "model", "frontier": "reference"}
META = {
    "base_model": "tiny",
    "models": [
        {"name": "base", "column": BASE, "kind": "base", "source": "tiny"},
        {"name": "dates", "column": "dates", "kind": "adapter", "source": "a/dates", "version": "1.0"},
        {"name": "sent", "column": "sent", "kind": "adapter", "source": "a/sent", "version": "2.0"},
        {"name": "sft", "column": "sft", "kind": "model", "source": "m/sft"},
        {"name": "frontier", "column": "frontier", "kind": "reference", "source": "m/frontier"},
    ],
}


def run_records() -> list[Any]:
    """dates.jsonl: the dates adapter gains 12 of 20 rows; sent.jsonl: the sent adapter gains 6 of 20."""
    dates = info("dates.jsonl", {"dates": "in", "sent": "out"})
    sent = info("sent.jsonl", {"dates": "out", "sent": "in"})
    out = []
    for i in range(20):
        gain = 1.0 if i < 12 else 0.0
        out.append(
            record(
                dates,
                i,
                {BASE: 0.0, "dates": gain, "sent": 0.0, "sft": 1.0 if i < 15 else 0.0, "frontier": 1.0},
                "dates",
            )
        )
    for i in range(20):
        base = 1.0 if i < 10 else 0.0
        gain = 1.0 if i < 16 else 0.0
        out.append(
            record(sent, i, {BASE: base, "dates": base, "sent": gain, "sft": base, "frontier": 1.0}, "sent")
        )
    return out


def grouped(records: list[Any]) -> dict[str, list[Any]]:
    by: dict[str, list[Any]] = {}
    for r in records:
        by.setdefault(r["benchmark"]["name"], []).append(r)
    return by


def test_plan_puts_in_domain_gates_in_their_own_family_and_leaves_the_reference_out() -> None:
    planned = comparisons.plan(grouped(run_records()), KINDS)
    gates_family = {(p.column, p.benchmark) for p in planned if p.family == comparisons.GATES_FAMILY}
    assert gates_family == {("dates", "dates.jsonl"), ("sent", "sent.jsonl")}
    assert not any("frontier" in (p.column, p.against) for p in planned)
    # The full model against the base and against each adapter, on each benchmark.
    sft = {(p.against, p.benchmark) for p in planned if p.column == "sft"}
    assert sft == {(a, b) for a in (BASE, "dates", "sent") for b in ("dates.jsonl", "sent.jsonl")}
    assert len(planned) == 2 * 2 + 2 * 3  # two adapters and sft against the base; sft against two adapters


def test_compare_adjusts_each_family_with_holm_and_only_within_it() -> None:
    by = grouped(run_records())
    entries = comparisons.compare(by, comparisons.plan(by, KINDS), alpha=0.05)
    for family in (comparisons.GATES_FAMILY, comparisons.REPORTED_FAMILY):
        members = [e for e in entries if e["family"] == family and e["p_value"] is not None]
        raw = [e["p_value"] for e in members]
        expected = statsmodels_holm(raw)
        assert [e["p_value_adjusted"] for e in members] == pytest.approx(list(expected))
        assert all(e["family_size"] == len(members) for e in members)
    # The same raw p-values as a paired comparison of those two columns alone.
    dates = comparisons.find(entries, "dates", BASE, "dates.jsonl")
    alone = compare_paired([1.0] * 12 + [0.0] * 8, [0.0] * 20)
    assert dates["p_value"] == alone.p_value and dates["statistics"]["discordant"] == [12, 0]
    # Holm by hand: the smaller p (12 wins of 12: 2 * 0.5**12) is doubled; the larger (6 of 6: 2 * 0.5**6
    # = 0.03125) is multiplied by 1, but never below the one before it.
    sent = comparisons.find(entries, "sent", BASE, "sent.jsonl")
    assert dates["p_value"] == pytest.approx(2 * 0.5**12) and sent["p_value"] == pytest.approx(0.03125)
    assert dates["p_value_adjusted"] == pytest.approx(4 * 0.5**12)
    assert sent["p_value_adjusted"] == pytest.approx(0.03125) and sent["significant"] is True
    unadjusted = comparisons.compare(by, comparisons.plan(by, KINDS), alpha=0.05, adjust="none")
    assert comparisons.find(unadjusted, "sent", BASE, "sent.jsonl")["p_value_adjusted"] == sent["p_value"]


def test_better_than_base_decides_on_the_adjusted_p_value() -> None:
    cmp = compare_paired([1.0] * 6 + [0.0] * 14, [0.0] * 20)
    assert gates.better_than_base(cmp).status == "pass"  # p = 0.03125 < 0.05
    adjusted = gates.Adjusted(0.0625, "holm", 2)
    verdict = gates.better_than_base(cmp, who="sent", adjusted=adjusted)
    assert verdict.status == "fail"
    assert "sent is better than base but not significantly" in verdict.message
    assert "McNemar exact p=0.031, Holm-adjusted over 2 comparisons p=0.062 >= 0.05" in verdict.message
    assert verdict.details["p_value_adjusted"] == 0.0625 and verdict.details["family_size"] == 2
    # The point criterion passes on the mean and says how much evidence there is after adjustment.
    point = gates.better_than_base(cmp, mode="point", adjusted=adjusted)
    assert point.status == "pass" and "not significant" in point.message


def test_the_matrix_is_every_column_on_every_benchmark_against_the_base() -> None:
    by = grouped(run_records())
    matrix = interference_matrix(by, KINDS, {"dates": "date-iso"})
    assert matrix is not None
    assert matrix["benchmarks"] == ["dates.jsonl", "sent.jsonl"]
    assert matrix["base"] == [0.0, 0.5]
    models = {m["column"]: m for m in matrix["models"]}
    assert models["dates"]["name"] == "date-iso" and models["dates"]["domain"] == ["in", "out"]
    assert models["dates"]["change"] == pytest.approx([0.6, 0.0])
    assert models["sent"]["change"] == pytest.approx([0.0, 0.3]) and models["sent"]["domain"] == ["out", "in"]
    assert models["frontier"]["kind"] == "reference" and models["frontier"]["values"] == [1.0, 1.0]
    assert models["sft"]["domain"] == [None, None] and models["sft"]["n"] == [20, 20]
    assert interference_matrix(by, {}) is None


def test_project_is_a_run_of_that_adapter_alone() -> None:
    r = run_records()[0]
    alone = project(r, "sent")
    assert set(alone["models"]) == {BASE, ADAPTER} and alone["models"][ADAPTER] == r["models"]["sent"]
    assert alone["evaluated"] == ADAPTER and alone["benchmark"]["domain"] == "out"
    assert alone["passed"] is False  # sent scores 0 on this row; the dates adapter, evaluated, scores 1
    assert r["passed"] is True


def gate_records() -> list[Any]:
    by = grouped(run_records())
    out = []
    for name, domains in (("dates.jsonl", {"dates": "in", "sent": "out"}), ("sent.jsonl", {"dates": "out"})):
        bench = by[name][0]["benchmark"]
        for column, domain in domains.items():
            gate = "better_than_base" if domain == "in" else "no_degradation"
            verdict = gates.Verdict(gate, "pass", f"{column} ok")
            out.append(gate_record(bench, verdict.to_json(), None, column))
        out.append(gate_record(bench, gates.size(20, minimum=5).to_json()))
    return out


def test_the_document_of_several_columns() -> None:
    doc = build_results(run_records(), meta=META, gates=gate_records(), complete=True)
    validate_locollm(doc)
    # The top level is the first adapter's LocoLLM document; rows keep every column.
    assert doc["adapter_name"] == "dates" and doc["adapter_version"] == "1.0"
    assert doc["benchmark_file"] == "dates.jsonl" and doc["results"]["adapter_score"] == 0.6
    assert doc["several_models"] is True and doc["mode"] == "adapter_vs_base"
    dates = next(b for b in doc["benchmarks"] if b["benchmark_file"] == "dates.jsonl")
    assert set(dates["rows"][0]["models"]) == {BASE, "dates", "sent", "sft", "frontier"}
    assert set(dates["gates"]) == {"better_than_base[dates]", "no_degradation[sent]", "size"}
    assert [m["kind"] for m in doc["models"]] == ["base", "adapter", "adapter", "model", "reference"]
    assert {(c["model"], c["against"]) for c in doc["comparisons"]} >= {("sft", "dates"), ("sent", BASE)}
    assert [m["column"] for m in doc["matrix"]["models"]] == ["dates", "sent", "sft", "frontier"]


def test_each_adapter_gets_its_own_locollm_document() -> None:
    docs = adapter_documents(run_records(), meta=META, gates=gate_records(), complete=True)
    assert set(docs) == {"dates", "sent"}
    sent = docs["sent"]
    validate_locollm(sent)
    assert sent["adapter_name"] == "sent" and sent["adapter_version"] == "2.0" and sent["column"] == "sent"
    assert sent["benchmark_file"] == "sent.jsonl"
    assert sent["results"]["adapter_score"] == 0.8 and sent["results"]["base_model_score"] == 0.5
    # Its rows hold the base and itself, as a run of it alone writes them; its gates without a column.
    rows = sent["benchmarks"][1]["rows"]
    assert set(rows[0]["models"]) == {BASE, ADAPTER}
    assert set(sent["benchmarks"][0]["gates"]) == {"no_degradation", "size"}
    assert sent["out_of_domain"]["benchmark"] == "dates.jsonl"
    # A run of one adapter and nothing else: results.json is its document.
    single = {**META, "models": META["models"][:2]}
    assert adapter_documents(run_records(), meta=single, complete=True) == {}


# ---------------------------------------------------------------------------------------------------------
# The roster: names, the reference, gated models, domains


def adapters(*names: str) -> dict[str, tuple[Path, str, list[str]]]:
    return {n: (Path(f"adapters/{n}"), n, [f"benchmarks/{n}.jsonl"]) for n in names}


def test_roster_names_kinds_and_domains(tmp_path: Path) -> None:
    roster = build_roster(
        adapters=adapters("dates", "sent"),
        models=["sft=models/sft", "gpt=org/frontier"],
        reference="gpt",
        gate_models=["sft"],
        domain=["sft=benchmarks/dates.jsonl", "benchmarks/extra*.jsonl"],
    )
    assert [(m.side, m.kind, m.gated) for m in roster.members] == [
        ("dates", "adapter", True),
        ("sent", "adapter", True),
        ("sft", "model", True),
        ("gpt", "reference", False),
    ]
    assert roster.reference is not None and roster.reference.source == "org/frontier"
    assert roster.sides() == [BASE, "dates", "sent", "sft", "gpt"]
    # A bare glob is the first adapter's; NAME=GLOB is that column's.
    assert roster.domains("benchmarks/extra1.jsonl", tmp_path) == {"dates": "in", "sent": "out", "sft": "out"}
    domains = roster.domains("benchmarks/dates.jsonl", tmp_path)
    assert domains == {"dates": "in", "sent": "out", "sft": "in"}
    assert roster.evaluated(domains) == "dates"
    assert roster.evaluated(roster.domains("benchmarks/sent.jsonl", tmp_path)) == "sent"
    assert roster.evaluated(roster.domains("benchmarks/other.jsonl", tmp_path)) == "dates"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"models": ["sft"]}, "expected NAME=PATH_OR_ID"),
        ({"models": ["base=x"]}, "the name 'base' is taken (reserved)"),
        ({"models": ["dates=x"]}, "the name 'dates' is taken by another column"),
        ({"models": ["a=x", "a=y"]}, "the name 'a' is taken by another column"),
        ({"models": ["a=x"], "reference": "b"}, "--llmeval-reference b: no --llmeval-model is named 'b'"),
        ({"models": ["a=x"], "gate_models": ["b"]}, "--llmeval-gate-model b: no --llmeval-model"),
        ({"models": ["a=x"], "reference": "a", "gate_models": ["a"]}, "the reference is reported, never"),
        ({"domain": ["nobody=benchmarks/x.jsonl"]}, "--llmeval-domain nobody=benchmarks/x.jsonl: no column"),
    ],
)
def test_roster_refuses_what_makes_no_run(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RosterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_roster(adapters=adapters("dates", "sent"), **options)


# ---------------------------------------------------------------------------------------------------------
# The plugin, on tiny random models: two adapters, a full model, a reference


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny base, two tiny adapters of it with their own names and domains, and another tiny model."""
    base = build_tiny_model(tmp_path_factory.mktemp("base"))
    out = {"base": base, "other": build_tiny_model(tmp_path_factory.mktemp("other"), seed=7)}
    for name, seed in (("alpha", 1), ("beta", 2)):
        path = build_tiny_adapter(base, tmp_path_factory.mktemp(name) / name, seed=seed)
        meta = {"name": name, "version": "0.1", "domain_benchmarks": [f"{name}.jsonl"]}
        (path / "metadata.json").write_text(json.dumps(meta))
        out[name] = path
    return out


def write_benchmarks(pytester: pytest.Pytester) -> None:
    for name in ("alpha", "beta"):
        rows = [row(f"{name}-{i:02d}", input=f"item {i}", expected=f"word{i % 3}") for i in range(6)]
        pytester.makefile(".jsonl", **{name: jsonl(rows)})


def several_args(models: dict[str, Path], out: str, *extra: str) -> list[str]:
    return [
        f"--base-model={models['base']}",
        f"--adapter={models['alpha']}",
        f"--adapter={models['beta']}",
        f"--llmeval-model=other={models['other']}",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-cache",
        "--llmeval-no-history",
        "--llmeval-batch-size=4",
        f"--llmeval-results={out}",
        *extra,
    ]


def test_two_adapters_and_a_model_in_one_run(pytester: pytest.Pytester, tiny_run: dict[str, Path]) -> None:
    write_benchmarks(pytester)
    result = pytester.runpytest(*several_args(tiny_run, "results.json"), "-v")
    # Each adapter is gated on its own domain and against degradation on the other; the model is not gated.
    result.stdout.fnmatch_lines(
        [
            "alpha*gate::better_than_base?alpha? *",
            "alpha*gate::no_degradation?beta? *",
            "beta*gate::no_degradation?alpha? *",
            "beta*gate::better_than_base?beta? *",
            "*interference matrix*",
            "*model*kind*alpha.jsonl*beta.jsonl*",
            "*alpha*adapter*",
            "*other*model*",
        ]
    )
    assert "[other]" not in result.stdout.str()
    doc = json.loads((pytester.path / "results.json").read_text())
    # Each adapter's in-domain gate decided on a p-value adjusted over both in-domain comparisons.
    for bench, name in zip(doc["benchmarks"], ("alpha", "beta"), strict=True):
        details = bench["gates"][f"better_than_base[{name}]"]["details"]
        assert details["family_size"] == 2 and details["adjustment"] == "holm"
        entry = comparisons.find(doc["comparisons"], name, BASE, bench["benchmark_file"])
        assert entry["family"] == comparisons.GATES_FAMILY
        assert details["p_value_adjusted"] == entry["p_value_adjusted"]
    row0 = doc["benchmarks"][0]["rows"][0]
    assert set(row0["models"]) == {BASE, "alpha", "beta", "other"}
    assert row0["evaluated"] == "alpha"
    assert [m["kind"] for m in doc["models"]] == ["base", "adapter", "adapter", "model"]
    assert all(m["fingerprint"] for m in doc["models"])
    # Two adapter folders of one base: their weights differ, and so do their outputs on some row.
    alpha, beta = (
        next(m for m in doc["models"] if m["column"] == c)["fingerprint"] for c in ("alpha", "beta")
    )
    assert alpha != beta
    rows = [r for b in doc["benchmarks"] for r in b["rows"]]
    assert any(r["models"]["alpha"]["output"] != r["models"]["beta"]["output"] for r in rows)
    for name in ("alpha", "beta"):
        own = json.loads((pytester.path / f"results.{name}.json").read_text())
        assert own["adapter_name"] == name and own["benchmark_file"] == f"{name}.jsonl"
        assert [r["models"]["adapter"]["output"] for b in own["benchmarks"] for r in b["rows"]] == [
            r["models"][name]["output"] for r in rows
        ]


def test_adapters_alone_give_the_outputs_they_give_together(
    pytester: pytest.Pytester, tiny_run: dict[str, Path]
) -> None:
    """Loading a second adapter onto the same PeftModel does not change the first one's outputs, and the
    base generated once serves every adapter."""
    write_benchmarks(pytester)
    pytester.runpytest(*several_args(tiny_run, "together.json"), "-m", "not gate")
    alone = [
        f"--base-model={tiny_run['base']}",
        f"--adapter={tiny_run['beta']}",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-cache",
        "--llmeval-no-history",
        "--llmeval-batch-size=4",
        "--llmeval-results=alone.json",
        "-m",
        "not gate",
    ]
    pytester.runpytest(*alone)
    together = json.loads((pytester.path / "together.json").read_text())
    single = json.loads((pytester.path / "alone.json").read_text())
    for t, s in zip(together["benchmarks"], single["benchmarks"], strict=True):
        for tr, sr in zip(t["rows"], s["rows"], strict=True):
            assert tr["models"]["beta"]["output"] == sr["models"][ADAPTER]["output"]
            assert tr["models"][BASE]["output"] == sr["models"][BASE]["output"]


def test_serial_and_xdist_write_the_same_results(
    pytester: pytest.Pytester, tiny_run: dict[str, Path]
) -> None:
    write_benchmarks(pytester)
    pytester.runpytest(*several_args(tiny_run, "serial.json"))
    pytester.runpytest(*several_args(tiny_run, "parallel.json"), "-n", "2")

    def stable(name: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((pytester.path / name).read_text())
        for key in ("timestamp", "inference_config", "hardware", "hardware_detail", "top_level"):
            doc.pop(key, None)
        return without_clocks(doc)

    serial, parallel = stable("serial.json"), stable("parallel.json")
    assert serial["comparisons"] == parallel["comparisons"]
    assert serial["matrix"] == parallel["matrix"]
    assert serial == parallel


def test_llm_models_fixture(pytester: pytest.Pytester, tiny_run: dict[str, Path]) -> None:
    pytester.makepyfile(
        """
        def test_columns(llm_models, llm):
            assert list(llm_models) == ["base", "alpha", "beta", "other"]
            outs = {name: m.generate(["Say hello."], max_new_tokens=4)[0] for name, m in llm_models.items()}
            assert outs["alpha"] == llm.generate(["Say hello."], max_new_tokens=4)[0]
            assert llm_models["alpha"].loaded is llm_models["beta"].loaded  # one copy of the base weights
            assert llm_models["other"].loaded is not llm_models["base"].loaded
            assert llm_models["beta"].perplexity(["hello there"]).perplexity > 0
            assert "alpha" in llm_models["alpha"].name and "beta" in llm_models["beta"].name
        """
    )
    result = pytester.runpytest(*several_args(tiny_run, "results.json"))
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--llmeval-reference=nobody"], "--llmeval-reference nobody: no --llmeval-model is named 'nobody'"),
        (["--llmeval-model=alpha=x"], "the name 'alpha' is taken by another column"),
        (
            ["--llmeval-model=ghost=/no/such/model"],
            "--llmeval-model ghost*: no such folder (and not a Hugging*",
        ),
    ],
)
def test_bad_columns_stop_the_run_in_one_line(
    pytester: pytest.Pytester, tiny_run: dict[str, Path], extra: list[str], message: str
) -> None:
    write_benchmarks(pytester)
    result = pytester.runpytest(*several_args(tiny_run, "results.json"), *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*llmeval: *{message}*"])


def test_two_adapters_with_one_name_stop_the_run(
    pytester: pytest.Pytester, tiny_run: dict[str, Path], tmp_path: Path
) -> None:
    write_benchmarks(pytester)
    twin = tmp_path / "twin"
    shutil.copytree(tiny_run["alpha"], twin)
    args = [*several_args(tiny_run, "results.json"), f"--adapter={twin}"]
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*are both named 'alpha'*rename one*"])


def test_full_models_are_held_one_at_a_time(tiny_run: dict[str, Path]) -> None:
    """Loading the next --llmeval-model column releases the one before; the fixture's stay."""
    from pytest_llmeval.backends.local import LocalBackend
    from pytest_llmeval.evaluator import Evaluator
    from pytest_llmeval.models import ModelSpec
    from pytest_llmeval.run_options import RunOptions

    roster = build_roster(adapters={}, models=[f"one={tiny_run['other']}", f"two={tiny_run['base']}"])
    run = Evaluator(options=RunOptions(spec=ModelSpec(base_model=str(tiny_run["base"])), roster=roster))
    local = run.backend()
    assert isinstance(local, LocalBackend)
    first = local.weights.column_model("one")
    assert set(local.weights.column_models) == {"one"}
    local.weights.column_model("two")
    assert set(local.weights.column_models) == {"two"}
    assert local.weights.column_model("one") is not first  # loaded again, the other released
    assert set(local.weights.column_models) == {"one"}
    kept = run.llm_models()
    assert set(kept) == {BASE, "one", "two"} and set(local.weights.column_models) == {"one", "two"}


def test_a_gated_model_and_a_reference(pytester: pytest.Pytester, tiny_run: dict[str, Path]) -> None:
    """--llmeval-gate-model gates a full model like an adapter on its --llmeval-domain; the reference is
    reported in the matrix and the rows, and neither gated nor tested."""
    write_benchmarks(pytester)
    args = [
        f"--base-model={tiny_run['base']}",
        f"--adapter={tiny_run['alpha']}",
        f"--llmeval-model=sft={tiny_run['other']}",
        f"--llmeval-model=top={tiny_run['base']}",
        "--llmeval-gate-model=sft",
        "--llmeval-domain=sft=beta.jsonl",
        "--llmeval-reference=top",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-cache",
        "--llmeval-no-history",
        "--llmeval-results=results.json",
        "-v",
    ]
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(
        [
            "alpha*gate::better_than_base?adapter? *",
            "alpha*gate::no_degradation?sft? *",
            "beta*gate::no_degradation?adapter? *",
            "beta*gate::better_than_base?sft? *",
        ]
    )
    assert "[top]" not in result.stdout.str()
    doc = json.loads((pytester.path / "results.json").read_text())
    assert [(m["column"], m["kind"]) for m in doc["models"]] == [
        (BASE, "base"),
        (ADAPTER, "adapter"),
        ("sft", "model"),
        ("top", "reference"),
    ]
    assert not any("top" in (c["model"], c["against"]) for c in doc["comparisons"])
    gated = {(c["model"], c["benchmark"]) for c in doc["comparisons"] if c["family"] == "gates"}
    assert gated == {(ADAPTER, "alpha.jsonl"), ("sft", "beta.jsonl")}
    assert ("sft", ADAPTER) in {(c["model"], c["against"]) for c in doc["comparisons"]}
    top = next(m for m in doc["matrix"]["models"] if m["column"] == "top")
    # The reference is the base model itself here: no change anywhere, on every row.
    assert top["kind"] == "reference" and top["change"] == [0.0, 0.0] and top["n"] == [6, 6]
    # One adapter among several columns: its own document beside results.json, named by its metadata.
    own = json.loads((pytester.path / "results.alpha.json").read_text())
    assert own["adapter_name"] == "alpha" and own["column"] == ADAPTER


def test_html_rows_show_every_column() -> None:
    from pytest_llmeval.reporting.html import html_report

    doc = build_results(run_records(), meta=META, gates=gate_records(), complete=True)
    page = html_report(doc)
    for column in ("base", "dates", "sent", "sft", "frontier"):
        assert f'<th scope="col">{column} output</th>' in page
    assert 'id="interference-matrix"' in page
