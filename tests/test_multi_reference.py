"""Several references per row: expected_output as a list, used by each metric as its library does.

BLEU and chrF must equal sacrebleu's own multi-reference results (sentence and corpus, rows with different
numbers of references too), ROUGE rouge-score's score_multi, the others the best reference; a one-item list
is the plain string; collection refuses a list where it cannot be used; results.json, the failure report
and the reports carry every reference. No model: the one run scores saved predictions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from helpers import jsonl, row
from rouge_score import rouge_scorer

from pytest_llmeval.benchmark import BenchmarkError, Case
from pytest_llmeval.records import BASE, row_record
from pytest_llmeval.reporting.spot_check import spot_check_markdown
from pytest_llmeval.scorers import (
    METRIC_TYPES,
    SCORERS,
    bleu,
    char_accuracy,
    exact_match,
    fuzzy,
    read_benchmark,
)
from pytest_llmeval.scorers import rouge as rouge_module
from pytest_llmeval.summaries import corpus_scores

HYPOTHESES = [
    "the cat sat on the mat",
    "a quick brown fox jumps over a lazy dog",
    "hello there world",
    "it is raining heavily in the north today",
]
# 2, 1, 3 and 2 references: a corpus with a variable number of references per row.
REFERENCES: list[list[str]] = [
    ["the cat is on the mat", "there is a cat on the mat"],
    ["the quick brown fox jumped over the lazy dog"],
    ["hello world", "hi there world", "hello there, everyone"],
    ["heavy rain falls in the north today", "it rains hard up north today"],
]
INFO = {"benchmark_file": "b.jsonl", "benchmark_hash": "sha256:0"}


def streams(references: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu's reference streams for rows with different numbers of references: None past a row's own."""
    most = max(len(refs) for refs in references)
    return [[refs[j] if j < len(refs) else None for refs in references] for j in range(most)]


# ---------------------------------------------------------------------------------------------------------
# BLEU and chrF: sacrebleu's multi-reference results


@pytest.mark.parametrize(("hypothesis", "references"), list(zip(HYPOTHESES, REFERENCES, strict=True)))
def test_sentence_bleu_and_chrf_are_sacrebleus_multi_reference(
    hypothesis: str, references: list[str]
) -> None:
    got = bleu.score_bleu(hypothesis, references, {})
    assert got.value == pytest.approx(sacrebleu.sentence_bleu(hypothesis, references).score / 100, abs=1e-12)
    assert got.details["signature"].startswith(f"nrefs:{len(references)}|")
    chrf = bleu.score_chrf(hypothesis, references, {"word_order": 2})
    want = sacrebleu.sentence_chrf(hypothesis, references, word_order=2).score / 100
    assert chrf.value == pytest.approx(want, abs=1e-12)


def test_a_second_reference_changes_sentence_bleu() -> None:
    # The output is the second reference word for word: one reference gives a low score, both give 1.
    output = "there is a cat on the mat"
    assert bleu.score_bleu(output, REFERENCES[0][0], {}).value < 0.5
    assert bleu.score_bleu(output, REFERENCES[0], {}).value == 1.0


def test_corpus_bleu_and_chrf_pool_every_reference_as_sacrebleu_does() -> None:
    for kind, corpus in (("bleu", sacrebleu.corpus_bleu), ("chrf", sacrebleu.corpus_chrf)):
        got = bleu.corpus_score(kind, HYPOTHESES, REFERENCES, {})
        want = corpus(HYPOTHESES, streams(REFERENCES))
        assert got["corpus"] == pytest.approx(want.score / 100, abs=1e-12)
        assert got["signature"].startswith("nrefs:var|")
        sentence = sacrebleu.sentence_bleu if kind == "bleu" else sacrebleu.sentence_chrf
        means = [sentence(h, r).score / 100 for h, r in zip(HYPOTHESES, REFERENCES, strict=True)]
        assert got["mean_sentence"] == pytest.approx(sum(means) / len(means), abs=1e-12)
    # The same number of references on every row: plain streams, no None.
    two = [refs[:2] if len(refs) > 1 else [refs[0], refs[0] + " indeed"] for refs in REFERENCES]
    got = bleu.corpus_score("bleu", HYPOTHESES, two, {})
    assert got["corpus"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, streams(two)).score / 100)
    assert got["signature"].startswith("nrefs:2|")


def test_a_row_short_of_references_counts_only_its_own() -> None:
    # Independent of how sacrebleu marks the gap: repeating a row's own first reference in the empty slots
    # changes no clipped count and no closest length, so the corpus BLEU must be the same.
    padded = [refs + [refs[0]] * (3 - len(refs)) for refs in REFERENCES]
    assert bleu.corpus_score("bleu", HYPOTHESES, REFERENCES, {})["corpus"] == pytest.approx(
        bleu.corpus_score("bleu", HYPOTHESES, padded, {})["corpus"], abs=1e-12
    )


def test_corpus_scores_of_a_benchmark_use_every_reference() -> None:
    records = []
    for i, (hypothesis, references) in enumerate(zip(HYPOTHESES, REFERENCES, strict=True)):
        case = Case(f"r{i}", "i", "", references[0], "bleu", "easy", i + 1, references=tuple(references))
        record = row_record(nodeid=f"b.jsonl::r{i}", benchmark=INFO, case=case, evaluated=BASE)
        record["models"] = {BASE: {"output": hypothesis}}
        records.append(record)
    found = corpus_scores(records)
    assert found is not None
    want = sacrebleu.corpus_bleu(HYPOTHESES, streams(REFERENCES))
    assert found["bleu"][BASE]["corpus"] == pytest.approx(want.score / 100, abs=1e-12)


# ---------------------------------------------------------------------------------------------------------
# ROUGE, fuzzy, exact match, character accuracy


@pytest.mark.parametrize("metric", ["rouge1", "rouge2", "rougeL"])
def test_rouge_is_rouge_scores_score_multi(metric: str) -> None:
    scorer = rouge_scorer.RougeScorer([metric])
    for hypothesis, references in zip(HYPOTHESES, REFERENCES, strict=True):
        got = rouge_module.score(hypothesis, references, {"metric": metric})
        want = scorer.score_multi(references, hypothesis)[metric]
        assert (got.value, got.details["precision"], got.details["recall"]) == (
            want.fmeasure,
            want.precision,
            want.recall,
        )
        if len(references) > 1:
            best = got.details["best_reference"]
            assert scorer.score(references[best], hypothesis)[metric] == want


def test_fuzzy_and_char_accuracy_score_the_best_reference() -> None:
    references = ["colour", "color"]
    got = fuzzy.score("colr", references, {})
    assert got.value == max(fuzzy.score("colr", r, {}).value for r in references) == 0.8
    assert (got.details["best_reference"], got.details["n_references"]) == (1, 2)
    # Character accuracy: the output is written as the second reference is, in kanji; against the first,
    # in kana, it fails.
    kana, kanji = "とうきょうです", "東京です"
    scored = char_accuracy.score("東京です", [kana, kanji], {})
    assert scored.passed and scored.value == 1.0 and scored.details["best_reference"] == 1
    assert not char_accuracy.score("東京です", kana, {}).passed


def test_char_accuracy_prefers_a_passing_reference_to_a_higher_failing_one() -> None:
    # Against the first reference 13 of 14 characters align (0.93) but one of its two kanji is wrong (0.5 <
    # 0.8): it fails. Against the second, 12 of 14 (0.86) and every script passes: the row passes on that one.
    output = "ありがとうございます日本です"
    first, second = "ありがとうございます日米です", "ありがとうございます日本"
    assert char_accuracy.score(output, first, {}).value > char_accuracy.score(output, second, {}).value
    assert not char_accuracy.score(output, first, {}).passed
    scored = char_accuracy.score(output, [first, second], {})
    assert scored.passed and scored.details["best_reference"] == 1


def test_exact_match_passes_on_any_reference_with_the_rows_options() -> None:
    config = {"extract_pattern": r"answer is (\S+)", "percent": True}
    got = exact_match.score("The answer is 50%.", ["one half", "0.5"], config)
    assert got.value == 1.0 and got.details["best_reference"] == 1
    assert got.details["normalized_references"] == ["one half", "0.5"]
    missed = exact_match.score("The answer is 40%.", ["one half", "0.5"], config)
    assert missed.value == 0.0
    assert exact_match.explain(missed.details, config)[-1] == "compared:    '0.4' vs 'one half' or '0.5'"
    unparsed = exact_match.score("no idea", ["a", "b"], config)
    assert unparsed.details["unparsed"] and unparsed.details["n_references"] == 2


@pytest.mark.parametrize(
    ("kind", "config", "prediction", "expected"),
    [
        ("bleu", {}, "the cat sat on a mat", "the cat sat on the mat"),
        ("chrf", {"word_order": 2}, "the cat sat on a mat", "the cat sat on the mat"),
        ("rouge", {"metric": "rouge2"}, "the cat sat on a mat", "the cat sat on the mat"),
        ("fuzzy", {}, "colr", "colour"),
        ("exact_match", {"extract_pattern": r"is (\d+)"}, "it is 4", "4"),
        ("char_accuracy", {}, "こんにちは世界", "こんにちわ世界"),
    ],
)
def test_a_one_item_list_scores_as_the_plain_string(
    kind: str, config: dict[str, Any], prediction: str, expected: str
) -> None:
    score = SCORERS[kind].score
    assert score is not None
    assert score(prediction, [expected], config) == score(prediction, expected, config)
    assert score(prediction, (expected,), config) == score(prediction, expected, config)
    # and says nothing of references: a one-reference row's details are what they always were
    assert not {"best_reference", "n_references"} & set(score(prediction, expected, config).details)


def test_every_type_a_row_may_add_as_a_metric_takes_references() -> None:
    # A row with several references may name any `metrics`: each of them must be able to use the list.
    assert all(SCORERS[kind].references for kind in METRIC_TYPES)


# ---------------------------------------------------------------------------------------------------------
# collection


def problems(tmp_path: Path, *rows: dict[str, Any]) -> list[str]:
    path = tmp_path / "b.jsonl"
    path.write_text(jsonl(list(rows)))
    with pytest.raises(BenchmarkError) as info:
        read_benchmark(path)
    return str(info.value).splitlines()


def test_collection_refuses_a_list_where_it_cannot_be_used(tmp_path: Path) -> None:
    accepting = ", ".join(sorted(kind for kind, spec in SCORERS.items() if spec.references))
    found = problems(
        tmp_path,
        row("a", expected=["4", "four"]),
        row("b", expected=["x", "y"], evaluation_type="custom"),
        row("c", expected=[]),
        row("d", expected=["4", 4]),
        row("e", expected=["4", " "]),
        row("f", expected=["1"], evaluation_type="code_execution", evaluation_config={}),
    )
    where = tmp_path / "b.jsonl"
    assert found == [
        f"{where}:2: field 'expected_output' is a list, but evaluation_type 'custom' takes one expected "
        f"answer: give a string (a list of references suits {accepting})",
        f"{where}:3: field 'expected_output' is an empty list: give the expected answer, or a list of "
        "references",
        f"{where}:4: field 'expected_output': item [1] must be a string, got number",
        f"{where}:5: field 'expected_output': item [1] is empty (each reference must hold text)",
        f"{where}:6: field 'expected_output' is a list, but evaluation_type 'code_execution' takes one "
        f"expected answer: give a string (a list of references suits {accepting})",
    ]
    assert accepting == "bertscore, bleu, char_accuracy, chrf, exact_match, fuzzy, rouge, semantic"


def test_collection_keeps_every_reference_and_the_first_as_expected_output(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(jsonl([row("a", expected=["4", "four"]), row("b", expected=["4"])]))
    several, one = read_benchmark(path).cases
    assert (several.expected_output, several.references, several.expected) == (
        "4",
        ("4", "four"),
        ("4", "four"),
    )
    assert (one.expected_output, one.references, one.expected) == ("4", ("4",), "4")


# ---------------------------------------------------------------------------------------------------------
# a run on saved predictions: results.json, the failure report, the HTML page and the spot check


def test_a_run_records_shows_and_pools_every_reference(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    rows = [
        row("b1", expected=REFERENCES[0], evaluation_type="bleu", evaluation_config={}),
        # Its own threshold: a setting the corpus figures ignore, so b1 and b2 are pooled.
        row("b2", expected=REFERENCES[1][0], evaluation_type="bleu", evaluation_config={"threshold": 0.2}),
        row("r1", expected=REFERENCES[2], evaluation_type="rouge", evaluation_config={}),
        row("e1", expected=["4", "four"]),
        row("e2", expected=["4", "four"]),
        row("e3", expected=["solo"]),
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    outputs = {"b1": HYPOTHESES[0], "b2": HYPOTHESES[1], "r1": HYPOTHESES[2], "e1": "Four.", "e2": "five"}
    outputs["e3"] = "solo"
    (pytester.path / "preds.jsonl").write_text(
        jsonl([{"id": k, "prediction": v} for k, v in outputs.items()])
    )
    result = pytester.runpytest_inprocess(
        "--llmeval-predictions=preds.jsonl", "--llmeval-html=report.html", "-m", "not gate"
    )
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bench.jsonl:5: e2 [[]exact_match, easy] scored 0 < threshold 1 (base)",
            "  reference 1: '4'",
            "  reference 2: 'four'",
            "  output:      'five'",
            "  compared:    'five' vs '4' or 'four'",
        ]
    )
    document = json.loads((pytester.path / "results.json").read_text())
    bench = document["benchmarks"][0]
    by_id = {r["id"]: r for r in bench["rows"]}
    assert by_id["b1"]["references"] == REFERENCES[0] and by_id["b1"]["expected_output"] == REFERENCES[0][0]
    assert by_id["r1"]["references"] == REFERENCES[2]
    assert by_id["e1"]["models"][BASE]["score"]["best_reference"] == 1
    assert "references" not in by_id["b2"] and "references" not in by_id["e3"]
    assert by_id["e3"]["expected_output"] == "solo"
    want = sacrebleu.corpus_bleu(HYPOTHESES[:2], streams(REFERENCES[:2]))
    assert bench["corpus"]["bleu"][BASE]["corpus"] == pytest.approx(want.score / 100, abs=1e-12)
    page = (pytester.path / "report.html").read_text()
    for reference in REFERENCES[2]:
        assert f'<div class="out">{reference}</div>' in page
    markdown = spot_check_markdown(document, n=len(rows))
    assert "**Expected** (3 references)" in markdown and "hi there world" in markdown
