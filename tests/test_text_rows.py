"""rouge, bleu, chrf, fuzzy and custom rows through the plugin: saved predictions (exact numbers against
the reference libraries), custom scripts at collection and at scoring, and the real embedded model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sacrebleu
from helpers import jsonl, row
from rouge_score import rouge_scorer

REPO = Path(__file__).resolve().parent.parent

PAIRS = [
    ("The cat sat on the mat near the door.", "A cat was sitting on the mat by the door."),
    ("Revenue grew by ten percent in the third quarter.", "Revenue rose 10% in Q3."),
    ("Paris is the capital of France.", "Paris is the capital of France."),
    ("猫がマットの上に座っている。", "猫はマットの上に座った。"),
]
CUSTOM = """\
def evaluate(generated, expected):
    return len(set(generated.split()) & set(expected.split())) / max(1, len(set(expected.split())))


def boom(generated, expected):
    if "Paris" in generated:
        raise RuntimeError("no Paris here")
    return 1.0
"""


def typed_rows(kind: str, config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        row(
            f"{kind}{i}",
            instruction="Paraphrase.",
            input=ref,
            expected=ref,
            evaluation_type=kind,
            evaluation_config=config or {},
        )
        for i, (_, ref) in enumerate(PAIRS)
    ]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


@pytest.fixture
def text_bench(pytester: pytest.Pytester) -> None:
    rows = [
        *typed_rows("rouge"),
        *typed_rows("bleu"),
        *typed_rows("chrf"),
        *typed_rows("fuzzy"),
        *typed_rows("semantic"),
        *typed_rows("bertscore"),
        *typed_rows("custom", {"script": "eval/custom_eval.py"}),
        *typed_rows("custom", {"script": "eval/custom_eval.py", "function": "boom"}),
    ]
    for i, r in enumerate(rows):
        r["id"] = f"{r['id']}-{i}"
    pytester.makefile(".jsonl", text=jsonl(rows))
    (pytester.path / "eval").mkdir()
    (pytester.path / "eval" / "custom_eval.py").write_text(CUSTOM)
    preds = [{"id": r["id"], "prediction": PAIRS[int(r["id"].split("-")[0][-1])][0]} for r in rows]
    pytester.makefile(".jsonl", preds=jsonl(preds))


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.usefixtures("text_bench")
def test_text_scorers_give_the_reference_libraries_numbers(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    result = pytester.runpytest("--llmeval-predictions=preds.jsonl", "text.jsonl", "-m", "not gate", *workers)
    # boom raises on the Paris row only: that row fails with the function's error, the others go on.
    result.stdout.fnmatch_lines(
        [
            "*text.jsonl:31: scorer 'custom' raised ValueError: "
            "boom in eval/custom_eval.py raised RuntimeError: no Paris here*"
        ]
    )
    doc = json.loads((pytester.path / "results.json").read_text())
    bench = doc["benchmarks"][0]
    by_id = {
        r["id"].split("-")[0]: r for r in bench["rows"] if r["evaluation_config"].get("function") != "boom"
    }
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    for i, (prediction, reference) in enumerate(PAIRS):
        if i < 3:  # rouge-score itself drops Japanese; ours splits it per character (tests/test_rouge.py)
            expected = scorer.score(reference, prediction)["rougeL"].fmeasure
            assert by_id[f"rouge{i}"]["models"]["base"]["score"]["value"] == pytest.approx(
                expected, abs=1e-12
            )
        assert by_id[f"bleu{i}"]["models"]["base"]["score"]["value"] == pytest.approx(
            min(1.0, sacrebleu.sentence_bleu(prediction, [reference]).score / 100), abs=1e-12
        )
        assert by_id[f"chrf{i}"]["models"]["base"]["score"]["value"] == pytest.approx(
            min(1.0, sacrebleu.sentence_chrf(prediction, [reference]).score / 100), abs=1e-12
        )
    assert by_id["rouge3"]["models"]["base"]["score"]["value"] > 0
    assert by_id["fuzzy2"]["models"]["base"]["score"]["value"] == 1.0
    assert by_id["semantic2"]["models"]["base"]["score"]["value"] == pytest.approx(1.0)
    assert by_id["bertscore2"]["models"]["base"]["score"]["value"] == pytest.approx(1.0)
    # A paraphrase is closer in meaning than in surface form.
    assert (
        by_id["semantic0"]["models"]["base"]["score"]["value"]
        > by_id["bleu0"]["models"]["base"]["score"]["value"]
    )
    assert by_id["custom2"]["models"]["base"]["score"]["value"] == 1.0
    # Corpus BLEU pools n-grams over the rows: sacrebleu's corpus_bleu, not the mean of sentences.
    corpus = bench["corpus"]["bleu"]["base"]
    predictions, references = zip(*PAIRS, strict=True)
    assert corpus["corpus"] == pytest.approx(
        sacrebleu.corpus_bleu(list(predictions), [list(references)]).score / 100
    )
    assert corpus["mean_sentence"] != pytest.approx(corpus["corpus"])
    assert bench["corpus"]["chrf"]["base"]["corpus"] == pytest.approx(
        sacrebleu.corpus_chrf(list(predictions), [list(references)]).score / 100
    )


def test_a_custom_script_that_cannot_load_fails_collection(pytester: pytest.Pytester) -> None:
    rows = [
        row("ok", evaluation_type="exact_match"),
        row("c1", evaluation_type="custom", evaluation_config={"script": "eval/broken.py"}),
        row("c2", evaluation_type="custom", evaluation_config={"script": "eval/fine.py", "function": "nope"}),
    ]
    pytester.makefile(".jsonl", bad=jsonl(rows), other=jsonl([row("x")]))
    (pytester.path / "eval").mkdir()
    (pytester.path / "eval" / "broken.py").write_text("def evaluate(a, b):\n    return (\n")
    (pytester.path / "eval" / "fine.py").write_text("def evaluate(a, b):\n    return 1.0\n")
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "*bad.jsonl:2: cannot import eval/broken.py: SyntaxError*line 2*",
            "*bad.jsonl:3: eval/fine.py has no function 'nope'*",
        ]
    )
    result.stdout.fnmatch_lines(["other.jsonl::x"])  # other files still collect


@pytest.mark.slow
def test_real_model_text_rows(tmp_path: Path) -> None:
    """Each text evaluation type on the embedded model: generated, scored, corpus values, no errors."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "custom_eval.py").write_text(CUSTOM)
    task = {
        "instruction": "Convert the date to ISO 8601 format (YYYY-MM-DD). Reply with the date only.",
        "input": "March 5, 2021",
        "expected": "2021-03-05",
    }
    rows = [
        row(f"{kind}-{i}", **task, evaluation_type=kind, evaluation_config={"max_new_tokens": 16, **extra})
        for kind, extra in [
            ("rouge", {}),
            ("bleu", {}),
            ("chrf", {}),
            ("fuzzy", {}),
            ("custom", {"script": "eval/custom_eval.py"}),
            ("semantic", {}),
            ("bertscore", {}),
        ]
        for i in range(2)
    ]
    (tmp_path / "text.jsonl").write_text(jsonl(rows))
    out = tmp_path / "results.json"
    cmd = [sys.executable, "-m", "pytest", str(tmp_path / "text.jsonl"), "--adapter=adapters/date-iso", "-q"]
    cmd += ["-m", "not gate", "-p", "no:cacheprovider", f"--llmeval-results={out}", f"--rootdir={tmp_path}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    bench = json.loads(out.read_text())["benchmarks"][0]
    for record in bench["rows"]:
        assert record["error"] is None, record["error"]
        # The adapter was trained on exactly this task: it answers 2021-03-05, which every metric rewards.
        assert record["models"]["adapter"]["output"] == "2021-03-05"
        assert record["models"]["adapter"]["score"]["value"] == 1.0, (
            record["id"],
            record["models"]["adapter"]["score"],
        )
    assert bench["corpus"]["bleu"]["adapter"]["corpus"] == pytest.approx(1.0)
