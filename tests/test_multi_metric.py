"""Several metrics per row: a row's `metrics` are scored on the same output as its own type, which alone
decides the pass; results.json, the composite and the reports carry every metric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

from pytest_llmeval.scorers import SCORERS, read_benchmark
from pytest_llmeval.stats import holm

# Saved outputs (no model loads): the QA document scores one answer by BERTScore and ROUGE-L together.
ANSWERS = {
    "q1": ("Paris is the capital of France.", "The capital of France is Paris.", "It is Lyon."),
    "q2": ("Water boils at 100 degrees Celsius.", "At sea level water boils at 100 C.", "Water is wet."),
    "q3": ("The Earth orbits the Sun.", "Earth goes around the Sun once a year.", "The Sun orbits Earth."),
}


# A metric's own settings travel with it (ROUGE-1 here, where the row's own type would not know the key).
CONFIGS: dict[str, dict[str, Any]] = {"rouge": {"metric": "rouge1"}}


def _rows(kinds: tuple[str, ...], *, together: bool) -> list[dict[str, Any]]:
    """The same questions as one row scored by every kind (`together`), or as one row per kind."""
    rows: list[dict[str, Any]] = []
    for qid, (expected, _, _) in ANSWERS.items():
        base = row(qid, instruction=f"Answer {qid}.", expected=expected, evaluation_config={})
        if together:
            metrics = [
                {"evaluation_type": k, "evaluation_config": CONFIGS[k]} if k in CONFIGS else k
                for k in kinds[1:]
            ]
            rows.append({**base, "evaluation_type": kinds[0], "metrics": metrics})
        else:
            rows += [
                {**base, "id": f"{qid}-{k}", "evaluation_type": k, "evaluation_config": CONFIGS.get(k, {})}
                for k in kinds
            ]
    return rows


def _predictions(*, together: bool, kinds: tuple[str, ...]) -> list[dict[str, str]]:
    ids = [(q, q) for q in ANSWERS] if together else [(f"{q}-{k}", q) for q in ANSWERS for k in kinds]
    return [{"id": i, "prediction": ANSWERS[q][1], "base_prediction": ANSWERS[q][2]} for i, q in ids]


def _run(
    pytester: pytest.Pytester,
    name: str,
    rows: list[dict[str, Any]],
    preds: list[Any],
    *args: str,
    outcome: bool = False,
    gates: bool = False,
) -> Any:
    """results.json of a run on saved outputs in its own folder (`outcome`: the run's output instead)."""
    folder = pytester.path / name
    folder.mkdir()
    (folder / "qa.jsonl").write_text(jsonl(rows))
    (folder / "preds.jsonl").write_text(jsonl(preds))
    result = pytester.runpytest(
        str(folder / "qa.jsonl"),
        f"--llmeval-predictions={folder / 'preds.jsonl'}",
        f"--llmeval-results={folder / 'results.json'}",
        *(() if gates else ("-m", "not gate")),
        "-p",
        "no:cacheprovider",
        *args,
    )
    if outcome:
        return result.stdout.str()
    document: dict[str, Any] = json.loads((folder / "results.json").read_text())
    return document


def test_a_multi_metric_row_scores_as_the_separate_rows_it_replaces(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    kinds = ("bertscore", "rouge", "bleu", "semantic")
    together = _run(
        pytester, "together", _rows(kinds, together=True), _predictions(together=True, kinds=kinds)
    )
    apart = _run(pytester, "apart", _rows(kinds, together=False), _predictions(together=False, kinds=kinds))
    [bench] = together["benchmarks"]
    [separate] = apart["benchmarks"]
    by_id = {r["id"]: r for r in separate["rows"]}
    for record in bench["rows"]:
        for who in ("base", "adapter"):
            side = record["models"][who]
            # The row's own type decides its pass; the others are reported beside it.
            assert side["score"] == by_id[f"{record['id']}-bertscore"]["models"][who]["score"]
            assert set(side["metrics"]) == {"rouge", "bleu", "semantic"}
            for kind, scored in side["metrics"].items():
                assert scored == by_id[f"{record['id']}-{kind}"]["models"][who]["score"], (record["id"], kind)
        assert record["passed"] == by_id[f"{record['id']}-bertscore"]["passed"]
    # One mean per metric, as the separate rows' per-type means.
    for kind in kinds:
        mine = bench["metrics"][kind]
        rows = [r for r in separate["rows"] if r["evaluation_type"] == kind]
        for who in ("base", "adapter"):
            expected = sum(r["models"][who]["score"]["value"] for r in rows) / len(rows)
            assert mine[who] == pytest.approx(expected, abs=1e-12)
        assert mine["n_deciding"] == (3 if kind == "bertscore" else 0)
    # The composite over bertscore and rouge reads the metrics of the one row as the separate rows' scores.
    assert bench["composite"] == separate["composite"]
    assert bench["composite"]["adapter"]["metrics"]["rouge"] is not None
    # The reports show every metric: the benchmark's table, and each row's score note.
    from pytest_llmeval.reporting.html import html_report

    page = html_report(together)
    assert "Every metric of the rows (mean over the rows each scored)" in page
    assert "also rouge 0." in page and "bleu 0." in page
    from pytest_llmeval.reporting.summary import _metrics_text

    line = _metrics_text(bench["metrics"])
    assert line.startswith("bertscore base 0.") and "(decides 3 rows); bleu base " in line
    # The embedding model that scored is named in results.json.
    assert together["embedding_model"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    # Under xdist every worker scores its rows' metrics alike: the same rows, the same blocks.
    spread = _run(
        pytester, "xdist", _rows(kinds, together=True), _predictions(together=True, kinds=kinds), "-n", "2"
    )
    assert [r["models"] for r in spread["benchmarks"][0]["rows"]] == [r["models"] for r in bench["rows"]]
    assert spread["benchmarks"][0]["metrics"] == bench["metrics"]


@pytest.mark.parametrize(
    ("metrics", "reason"),
    [
        ("rouge", "field 'metrics' must be a list of evaluation types, got string"),
        (
            ["rogue"],
            'metrics[0]: "rogue" cannot score a row\'s output (one of: bertscore, bleu, char_accuracy',
        ),
        (["exact_match"], "metrics[0]: exact_match is already scored on this row (each type once)"),
        (["llm_judge"], 'metrics[0]: "llm_judge" cannot score'),
        ([{"evaluation_type": "rouge", "evaluation_config": {"threshold": 2}}], "metrics[0] (rouge): "),
        ([{"type": "rouge"}], "metrics[0] must be an evaluation type or an object with evaluation_type"),
    ],
)
def test_bad_metrics_are_refused_at_collection(tmp_path: Path, metrics: Any, reason: str) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(jsonl([row("a"), row("b", metrics=metrics)]))
    with pytest.raises(Exception) as caught:
        read_benchmark(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: ") and reason in message, message


def test_metrics_on_a_measured_row_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    measured = row(
        "p", input="A text.", evaluation_type="perplexity", evaluation_config={}, metrics=["rouge"]
    )
    path.write_text(jsonl([measured]))
    with pytest.raises(Exception, match="a perplexity row generates no text the metrics could score"):
        read_benchmark(path)
    assert all(SCORERS[k].measure is None for k in ("rouge", "bertscore"))


def _tiny_encoder(path: Path) -> Path:
    """A random 2-layer BERT with MiniLM's tokenizer: another embedding model, so its scores differ."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from pytest_llmeval.embeddings import model_dir

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir()))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    import torch

    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def test_the_embedding_model_is_selectable_and_recorded(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    encoder = _tiny_encoder(pytester.path / "encoder")
    kinds = ("semantic", "bertscore")
    rows = _rows(kinds, together=True)
    preds = _predictions(together=True, kinds=kinds)
    shipped = _run(pytester, "shipped", rows, preds)
    chosen = _run(pytester, "chosen", rows, preds, f"--llmeval-embedding-model={encoder}")
    assert chosen["embedding_model"] == {"model": str(encoder), "source": str(encoder.resolve())}
    for mine, theirs in zip(chosen["benchmarks"][0]["rows"], shipped["benchmarks"][0]["rows"], strict=True):
        side, other = mine["models"]["adapter"], theirs["models"]["adapter"]
        assert side["score"]["model"] == str(encoder) and side["metrics"]["bertscore"]["layer"] == 2
        assert side["score"]["value"] != other["score"]["value"]
    # A layer the model lacks fails the rows that need it, naming the option.
    result = _run(pytester, "layer", rows, preds, "--llmeval-embedding-layer=9", outcome=True)
    assert "--llmeval-embedding-layer: layer must be an integer from 0 (embeddings) to 6, not 9" in result
    result = pytester.runpytest("qa.jsonl", "--llmeval-embedding-model=no/such/folder/x")
    result.stderr.fnmatch_lines(["*--llmeval-embedding-model 'no/such/folder/x': no such folder*"])


def test_a_gate_per_metric_judges_that_metrics_scores_in_the_same_family(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    # Neither model gets one date exactly right, but the adapter's answers are close (ROUGE), the base's
    # not: better_than_base fails on the rows' own scores and passes on rouge's.
    rows = [
        row(f"d{i}", expected=f"the meeting is on day {i} of june", evaluation_config={}, metrics=["rouge"])
        for i in range(12)
    ]
    preds = [
        {"id": f"d{i}", "prediction": f"meeting on day {i} of june", "base_prediction": "no idea at all"}
        for i in range(12)
    ]
    args = ("--llmeval-domain=*qa.jsonl", "--llmeval-min-rows=12", "--llmeval-min-edge-cases=0")
    gated = ("--llmeval-gate-metric=rouge", "--llmeval-gate-metric=bleu")
    out = _run(pytester, "serial", rows, preds, *args, *gated, "-rA", outcome=True, gates=True)
    assert "PASSED serial/qa.jsonl::gate::better_than_base[rouge]" in out
    assert "FAILED serial/qa.jsonl::gate::better_than_base - " in out
    assert "SKIPPED" in out and "on bleu scores: no row of serial/qa.jsonl is scored by bleu" in out
    document = json.loads((pytester.path / "serial" / "results.json").read_text())
    [bench] = document["benchmarks"]
    assert bench["gates"]["better_than_base[rouge]"]["metric"] == "rouge"
    assert bench["gates"]["better_than_base[rouge]"]["message"].startswith("on rouge scores: ")
    # The rouge comparison is one more member of the gates' Holm family, not a family of its own.
    family = [c for c in document["comparisons"] if c["family"] == "gates"]
    assert [c.get("metric") for c in family] == [None, "rouge"]
    assert all(c["family_size"] == 2 for c in family)
    adjusted = holm([c["p_value"] for c in family])
    assert [c["p_value_adjusted"] for c in family] == pytest.approx(adjusted)
    # The benchmark's own statistics stay those of the rows' own scores.
    assert {k: v for k, v in bench["statistics"].items() if k != "measure"} == family[0]["statistics"]
    # Under xdist the same verdicts.
    _run(pytester, "xdist", rows, preds, *args, *gated, "-n", "2", outcome=True, gates=True)
    spread = json.loads((pytester.path / "xdist" / "results.json").read_text())
    assert {k: g["status"] for k, g in spread["benchmarks"][0]["gates"].items()} == {
        k: g["status"] for k, g in bench["gates"].items()
    }
    result = pytester.runpytest("serial/qa.jsonl", "--llmeval-gate-metric=perplexity")
    result.stderr.fnmatch_lines(
        ["*--llmeval-gate-metric 'perplexity': not a metric a row's output is scored by*"]
    )
