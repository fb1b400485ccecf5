"""The chest X-ray document's workflow: saved reports and their ground truth scored by one external scorer
(--llmeval-predictions with --llmeval-ppl-model), its per-study figures and summary, the scorer's window
options, and --llmeval-fluency's help text against what a run records."""

from __future__ import annotations

import json
import math
import shlex
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import REPO, jsonl, model_args, row

from pytest_llmeval.summaries import chest_xray_confidence, chest_xray_range, qa_band, ratio_label

EXAMPLE = REPO / "examples" / "chest-xray"
STUDY_FIGURES = (
    "perplexity_generated",
    "perplexity_reference",
    "perplexity_ratio",
    "cross_entropy_generated",
    "cross_entropy_reference",
    "cross_entropy_difference",
)


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


@pytest.fixture(scope="module")
def scorer() -> tuple[Any, Any]:
    """The embedded SmolLM2 in float32, loaded with transformers itself (not the plugin's loader)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pytest_llmeval.models import embedded_model_dir

    folder = embedded_model_dir()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(folder)


def hand_nll(scorer: tuple[Any, Any], text: str, max_length: int, stride: int) -> tuple[float, int]:
    """Token-weighted NLL of `text` by the transformers guide's sliding window, one window per forward pass:
    BOS as context (it lets the first token be scored), each window scoring the tokens after the previous
    window's end, every token once. Summed per token with log_softmax; (total NLL, scored tokens)."""
    model, tokenizer = scorer
    ids = [tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]
    total, count, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + max_length, len(ids))
        window = torch.tensor([ids[begin:end]])  # (1, T)
        first = max(prev_end - begin, 1)  # window position of the first new token (>= 1: needs context)
        with torch.no_grad():
            logp = torch.log_softmax(model(window).logits[0].double(), dim=-1)  # (T, V)
        for j in range(first, end - begin):
            total -= float(logp[j - 1, ids[begin + j]])
            count += 1
        prev_end = end
        if end == len(ids):
            break
    return total, count


def readme_command() -> list[str]:
    """The chest X-ray command of README.md, as its arguments (without `.venv/bin/pytest`)."""
    lines = [
        line
        for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
        if "chest-xray/" in line
    ]
    (command,) = [line for line in lines if line.startswith(".venv/bin/pytest ")]
    return shlex.split(command)[1:]


def copy_example(pytester: pytest.Pytester) -> None:
    shutil.copytree(EXAMPLE, pytester.path / "examples" / "chest-xray")


def example_rows() -> dict[str, tuple[str, str]]:
    """Study id -> (generated report, ground truth), read from the example's two files."""
    reports = [json.loads(line) for line in (EXAMPLE / "reports.jsonl").read_text().splitlines()]
    predictions = [json.loads(line) for line in (EXAMPLE / "predictions.jsonl").read_text().splitlines()]
    saved = {p["id"]: p["prediction"] for p in predictions}
    return {r["id"]: (saved[r["id"]], r["expected_output"]) for r in reports}


def check_against_hand(
    rows: list[dict[str, Any]],
    scorer: tuple[Any, Any],
    max_length: int,
    stride: int,
    studies: tuple[str, ...] | None = None,
) -> None:
    """The recorded NLL, tokens and per-study figures of each row (the rows of `studies`; None: of every
    study) equal the hand computation to 1e-4."""
    texts = example_rows()
    assert sorted(r["id"] for r in rows) == sorted(studies or texts)
    for r in rows:
        fluency = r["models"]["base"]["fluency"]
        generated, reference = texts[r["id"]]
        assert r["models"]["base"]["output"] == generated and r["expected_output"] == reference
        hand = {
            key: hand_nll(scorer, text, max_length, stride)
            for key, text in (("output", generated), ("reference", reference))
        }
        for key, (nll, count) in hand.items():
            assert fluency[key]["n_tokens"] == count, (r["id"], key)
            assert fluency[key]["nll"] == pytest.approx(nll, rel=1e-4), (r["id"], key)
        gen, ref = (hand[key][0] / hand[key][1] for key in ("output", "reference"))
        expected = {
            "perplexity_generated": math.exp(gen),
            "perplexity_reference": math.exp(ref),
            "perplexity_ratio": math.exp(gen) / math.exp(ref),
            "cross_entropy_generated": gen,
            "cross_entropy_reference": ref,
            "cross_entropy_difference": gen - ref,
        }
        for key, value in expected.items():
            assert fluency[key] == pytest.approx(value, rel=1e-4, abs=1e-4), (r["id"], key)


def test_the_readme_command_scores_the_saved_reports(
    pytester: pytest.Pytester, scorer: tuple[Any, Any]
) -> None:
    """README's chest X-ray command: the document's summary printed, its per-study figures per row in
    results.json equal to a hand computation, and the summary's statistics those of the rows."""
    copy_example(pytester)
    args = readme_command()
    assert "--llmeval-ppl-model=embedded" in args and not any("max-length" in a for a in args)
    result = pytester.runpytest(*args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [
            "llmeval: saved predictions from examples/chest-xray/predictions.jsonl"
            " (fluency scorer embedded), sandbox *",
            "*fluency, perplexity under the scorer embedded (token-weighted): base * [[]QA band *[]]*",
            "*chest X-ray summary, base (8 studies, per study): perplexity generated mean *, median *, std *,"
            " min *, max *; reference mean *",
            "*generated: very fluent *, good *, acceptable *, poor *; cross-entropy high *, moderate *,"
            " low *; ratio to reference (mean *): similar *, more fluent *, less fluent *"
            " (similar: within 10% of 1)",
            "*potential issues (perplexity > 100): *study-07*",
        ]
    )
    (bench,) = json.loads((pytester.path / "results.json").read_text())["benchmarks"]
    rows = bench["rows"]
    assert all(r["models"]["base"]["fluency"]["scorer"] == "embedded" for r in rows)
    assert all(r["models"]["base"]["fluency"]["external"] for r in rows)
    # The default window (the scorer's context capped at 1024, stride half of it) holds each report whole.
    check_against_hand(rows, scorer, 1024, 512)

    # The summary: per study (every row once), the statistics of the rows' own figures.
    entry = bench["fluency"]["base"]
    study = entry["chest_xray"]
    assert study["n_studies"] == len(rows) == 8
    for key in STUDY_FIGURES:
        values = [r["models"]["base"]["fluency"][key] for r in rows]
        spread = study["per_study"][key]
        assert spread["n"] == 8
        assert spread["mean"] == pytest.approx(statistics.mean(values), rel=1e-12)
        assert spread["median"] == pytest.approx(statistics.median(values), rel=1e-12)
        assert spread["std"] == pytest.approx(statistics.stdev(values), rel=1e-12)
        assert (spread["min"], spread["max"]) == (min(values), max(values))
    by_id = {r["id"]: r["models"]["base"]["fluency"] for r in rows}
    generated = {i: f["perplexity_generated"] for i, f in by_id.items()}
    # The document's ranges and its Error Detection's flags, counted and named from the rows' values.
    ranges = study["perplexity_ranges"]["generated"]
    assert ranges["very_fluent"] == sum(1 for p in generated.values() if p < 20)
    assert ranges["good"] == sum(1 for p in generated.values() if 20 <= p <= 50)
    assert ranges["acceptable"] == sum(1 for p in generated.values() if 50 < p <= 100)
    assert ranges["poor"] == sum(1 for p in generated.values() if p > 100)
    assert study["review_recommended"] == sorted(i for i, p in generated.items() if 50 < p <= 100)
    assert study["potential_issues"] == sorted(i for i, p in generated.items() if p > 100)
    assert "study-07" in study["potential_issues"]  # the garbled report
    ce = [f["cross_entropy_generated"] for f in by_id.values()]
    assert study["cross_entropy_ranges"]["generated"] == {
        "high": sum(1 for c in ce if c < 3),
        "moderate": sum(1 for c in ce if 3 <= c <= 4),
        "low": sum(1 for c in ce if c > 4),
    }
    ratios = [f["perplexity_ratio"] for f in by_id.values()]
    assert study["ratio_ranges"] == {
        "similar": sum(1 for q in ratios if 0.9 <= q <= 1.1),
        "more_fluent": sum(1 for q in ratios if q < 0.9),
        "less_fluent": sum(1 for q in ratios if q > 1.1),
    }
    # The token-weighted corpus figures stay beside them, with the QA fine-tuning document's band.
    tokens = sum(f["output"]["n_tokens"] for f in by_id.values())
    corpus = math.exp(math.fsum(f["output"]["nll"] for f in by_id.values()) / tokens)
    assert entry["output"]["perplexity"] == pytest.approx(corpus, rel=1e-12)
    assert entry["output"]["qa_band"] == ("low" if corpus < 100 else "medium" if corpus < 300 else "high")
    # The HTML report says the outputs were scored by one external model and shows the flags.
    from pytest_llmeval.reporting.html import html_report

    page = html_report(json.loads((pytester.path / "results.json").read_text()))
    assert "under one external scorer" in page and "perplexity of its own outputs" not in page
    assert "potential issues (perplexity &gt; 100)</td><td>" + ", ".join(study["potential_issues"]) in page


def test_the_window_options_set_the_scorers_window(
    pytester: pytest.Pytester, scorer: tuple[Any, Any]
) -> None:
    """--llmeval-ppl-max-length and --llmeval-ppl-stride are the window of the hand computation: reports
    of 25 to 40 tokens slide over two or three 24-token windows, in batches of --llmeval-ppl-batch-size."""
    copy_example(pytester)
    window = ["--llmeval-ppl-max-length=24", "--llmeval-ppl-stride=16", "--llmeval-ppl-batch-size=3"]
    # Three studies (a window a forward pass by hand is slow on CPU): the shortest, a long one, the garbled.
    studies = ("study-03", "study-06", "study-07")
    result = pytester.runpytest(*readme_command(), *window, "-k", " or ".join(studies))
    assert result.ret == 0, result.stdout.str()[-3000:]
    (bench,) = json.loads((pytester.path / "results.json").read_text())["benchmarks"]
    check_against_hand(bench["rows"], scorer, 24, 16, studies)
    # Each text really slides (more tokens than the window), and each of its tokens is scored once.
    tokenizer, texts = scorer[1], example_rows()
    for r in bench["rows"]:
        for key, text in zip(("output", "reference"), texts[r["id"]], strict=True):
            tokens = len(tokenizer(text, add_special_tokens=False)["input_ids"])
            assert tokens + 1 > 24 and r["models"]["base"]["fluency"][key]["n_tokens"] == tokens


def test_bad_scorer_options_get_one_line(pytester: pytest.Pytester) -> None:
    """Each bad value or combination of the fluency scorer's options is one usage error naming it."""
    pytester.makefile(".jsonl", bench=jsonl([row("r1")]))
    (pytester.path / "preds.jsonl").write_text(json.dumps({"id": "r1", "prediction": "hello"}) + "\n")
    cases = [
        (
            ["--llmeval-ppl-model=embedded", "--llmeval-ppl-stride=0"],
            "*--llmeval-ppl-stride: invalid positive*",
        ),
        (
            ["--llmeval-ppl-model=embedded", "--llmeval-ppl-batch-size=x"],
            "*--llmeval-ppl-batch-size: invalid*",
        ),
        (
            ["--llmeval-ppl-model=embedded", "--llmeval-ppl-max-length=1"],
            "*--llmeval-ppl-max-length 1: a window needs at least 2 tokens*",
        ),
        (
            ["--llmeval-fluency", "--llmeval-ppl-max-length=8", "--llmeval-ppl-stride=16"],
            "*--llmeval-ppl-stride 16 exceeds --llmeval-ppl-max-length 8*give a stride of at most the window",
        ),
        (
            ["--llmeval-ppl-batch-size=4"],
            "*--llmeval-ppl-batch-size sets the fluency scorer, and fluency is off: add --llmeval-fluency*",
        ),
        (
            ["--llmeval-predictions=preds.jsonl", "--llmeval-fluency"],
            "*--llmeval-predictions loads none: add --llmeval-ppl-model=NAME_OR_PATH*",
        ),
    ]
    for args, line in cases:
        result = pytester.runpytest(*args, "bench.jsonl")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([line])
        # One line says what is wrong (argparse's usage line before it is pytest's, for every option).
        said = [x for x in result.stderr.lines if x.strip() and not x.startswith("ERROR: usage:")]
        assert len([x for x in said if "--llmeval-ppl" in x or "--llmeval-fluency" in x]) == 1, said


def test_fluency_help_says_what_a_run_records(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    """--llmeval-fluency's help: each model's outputs under that same model, unless --llmeval-ppl-model
    names one external scorer. A run records exactly that as each column's `scorer`."""
    helped = " ".join(pytester.runpytest("--help").stdout.str().split())
    fluency_help = helped.split("--llmeval-fluency ", 1)[1].split(" --llmeval-ppl-model=", 1)[0]
    assert "under that same model" in fluency_help and "an adapter's by the adapter on" in fluency_help
    assert "unless --llmeval-ppl-model names one external scorer" in fluency_help
    assert "adapter off" not in fluency_help  # the old text, which the code never did
    pytester.makefile(".jsonl", bench=jsonl([row("r1"), row("r2", instruction="Say bye.", expected="bye")]))
    args = model_args(tiny_model, tiny_adapter)
    pytester.runpytest(*args, "--llmeval-fluency")
    rows = json.loads((pytester.path / "results.json").read_text())["benchmarks"][0]["rows"]
    for r in rows:
        base, adapter = r["models"]["base"]["fluency"], r["models"]["adapter"]["fluency"]
        assert base["scorer"].endswith("(the base model itself)") and not base["external"]
        assert adapter["scorer"].endswith("(the adapter itself)") and not adapter["external"]


def test_the_documents_labels_at_their_bounds() -> None:
    """The chest X-ray document's ranges (a value on a bound takes the better label, as its Error
    Detection's `> 50` and `> 100` do), its ratio within 10% of 1, and the QA fine-tuning document's bands."""
    assert [chest_xray_range(p) for p in (1, 19.9, 20, 50, 50.1, 100, 100.1)] == [
        "very_fluent",
        "very_fluent",
        "good",
        "good",
        "acceptable",
        "acceptable",
        "poor",
    ]
    assert [chest_xray_confidence(c) for c in (2.9, 3, 4, 4.1)] == ["high", "moderate", "moderate", "low"]
    assert [ratio_label(r) for r in (0.89, 0.9, 1.0, 1.1, 1.11)] == [
        "more_fluent",
        "similar",
        "similar",
        "similar",
        "less_fluent",
    ]
    assert [qa_band(p) for p in (5, 10, 99.9, 100, 299.9, 300, 600)] == [
        "low",
        "low",
        "low",
        "medium",
        "medium",
        "high",
        "high",
    ]
