"""lm-eval tasks as benchmark rows (issue 54): `convert lm-eval`'s options and refusals, the live check that
the recorded lm-eval logs are what lm-eval 0.4.13 does today, the served path, pair encoding, the chance
check and -n 2. Every task's row-by-row parity with lm-eval is tests/test_lm_eval_parity.py (recorded logs);
generate_until's is tests/test_lm_eval_generate.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lm_eval_checks import convert, lm_eval_imported  # noqa: F401 (an autouse fixture)

from pytest_llmeval.cli import main as cli_main
from pytest_llmeval.results_reader import read_results

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "lm_eval"
ARC = [  # arc_easy's splits, for the tests of one task
    f"--data-files=test={DATA / 'arc_easy' / 'test.jsonl'}",
    f"--data-files=train={DATA / 'arc_easy' / 'train.jsonl'}",
]


def data_files(task: str) -> list[str]:
    """--data-files for every split of the task's folder under tests/data/lm_eval/."""
    return [f"--data-files={p.stem}={p}" for p in sorted((DATA / task).glob("*.jsonl"))]


def test_the_recorded_logs_are_what_lm_eval_does_today(pytester: pytest.Pytester) -> None:
    """lm-eval run live on one task (arc_easy, 0-shot) logs what `make lm-eval-logs` recorded: the same
    requests, log-likelihoods (within 1e-6 nats), per-row metrics and aggregates; so the recorded logs the
    parity tests read (tests/test_lm_eval_parity.py) cannot drift from what lm-eval does. The converted rows
    then score as the live run did."""
    from lm_eval_checks import check_aggregates, check_rows, live, recorded, run

    now, results = live("arc_easy", 0)
    then, recorded_results = recorded("arc_easy", 0)
    assert now.keys() == then.keys() and now["arc_easy"].keys() == then["arc_easy"].keys()
    for doc_id, sample in now["arc_easy"].items():
        old = then["arc_easy"][doc_id]
        assert sample["arguments"] == old["arguments"] and sample["metrics"] == old["metrics"], doc_id
        lls = [r[0][0] for r in sample["resps"]]
        assert lls == pytest.approx([r[0][0] for r in old["resps"]], abs=1e-6), doc_id
    for key in ("acc,none", "acc_norm,none", "acc_stderr,none", "acc_norm_stderr,none", "sample_len"):
        assert results["arc_easy"][key] == recorded_results["arc_easy"][key], key
    rows = convert(pytester.path / "bench", "arc_easy", "--num-fewshot=0")
    document = run(pytester, "arc_easy")
    check_aggregates(rows, document, results, check_rows(rows, document, now))


def test_bad_input_is_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    cases = [
        (
            ["convert", "lm-eval", "arc_esay", f"--out={out}"],
            "no task or group named 'arc_esay' (did you mean",
        ),
        (
            ["convert", "lm-eval", "mmlu_social_sciences", *ARC[:1], f"--out={out}"],
            "--data-files is for one task",
        ),
        (
            ["convert", "lm-eval", "mmlu_social_sciences", f"--data-dir={DATA / 'arc_easy'}", f"--out={out}"],
            "no data for lm-eval task mmlu_econometrics",
        ),
        (
            [
                "convert",
                "lm-eval",
                "arc_easy",
                f"--data-files=test={DATA / 'arc_easy' / 'nothing.jsonl'}",
                f"--out={out}",
            ],
            "does not exist",
        ),
    ]
    cases.append((["convert", "lm-eval", "mmlu_humanities", f"--out={out}"], "HF_DATASETS_OFFLINE is set"))
    piqa = ["convert", "lm-eval", "piqa", *data_files("piqa"), "--num-fewshot=7", f"--out={out}"]
    cases.append((piqa, "its few-shot split is too small for 7 examples"))
    # A group of the user's own (--include-path) that lists no task.
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "empty.yaml").write_text("group: my_empty_group\ntask: []\n", encoding="utf-8")
    empty = ["convert", "lm-eval", "my_empty_group", f"--include-path={tmp_path / 'tasks'}", f"--out={out}"]
    cases.append((empty, "lm-eval group my_empty_group has no subtasks"))
    # HF_DATASETS_OFFLINE=1 as a user sets it, before datasets is imported (which reads it then): these
    # machines reach no hub, and a user's refusal must be this line, not a network timeout.
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    for argv, said in cases:
        assert cli_main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("llmeval: ") and said in err[0], err
        assert not out.exists()


def test_a_document_missing_a_field_the_task_reads_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "test.jsonl"
    lines = (DATA / "arc_easy" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[3])
    del record["answerKey"]
    broken.write_text("\n".join([*lines[:3], json.dumps(record), *lines[4:]]) + "\n", encoding="utf-8")
    assert (
        cli_main(
            ["convert", "lm-eval", "arc_easy", f"--data-files=test={broken}", f"--out={tmp_path / 'out'}"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lm-eval task arc_easy" in err[0] and "nothing written" in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_served_model_gives_the_in_process_numbers(pytester: pytest.Pytester) -> None:
    """The converted rows over the served log-likelihood path (a vLLM-format server on 127.0.0.1, its
    numbers the embedded model's own, /v1/completions with echo): each choice's log-likelihood as in
    process, within 1e-4 nats, and the same acc and acc_norm."""
    from vllm_format import serve_vllm_format

    from pytest_llmeval.models import embedded_model_dir

    rows = convert(pytester.path / "bench", "arc_easy", *ARC, "--limit=8")
    common = (
        "bench/arc_easy.jsonl",
        "-m",
        "not gate",
        "--llmeval-no-history",
        "--llmeval-no-cache",
        "-p",
        "no:randomly",
    )
    result = pytester.runpytest(*common)
    assert result.ret in (0, 1), result.stdout.str()
    local = {
        r["id"]: r for b in read_results(pytester.path / "results.json")["benchmarks"] for r in b["rows"]
    }
    with serve_vllm_format(embedded_model_dir()) as server:
        result = pytester.runpytest(f"--llmeval-endpoint={server.base_url}", "--base-model=smol", *common)
    assert result.ret in (0, 1), result.stdout.str()
    served = {
        r["id"]: r for b in read_results(pytester.path / "results.json")["benchmarks"] for r in b["rows"]
    }
    assert len(rows) == 8 and set(served) == set(local)
    for row_id, row in served.items():
        ours, theirs = local[row_id]["models"]["base"]["score"], row["models"]["base"]["score"]
        assert row["error"] is None, row["error"]
        assert [c["nll"] for c in theirs["choices"]] == pytest.approx(
            [c["nll"] for c in ours["choices"]], abs=1e-4
        )
        assert theirs["lm_eval"] == ours["lm_eval"], row_id


@pytest.mark.parametrize(
    ("context", "continuation"),
    [
        ("Question: Which star is closest?\nAnswer:", " the Sun"),
        ("The capital of France is ", "Paris"),  # the trailing space moves to the continuation
        ("Fill in: un", "believable"),  # a merge across the boundary
        ("Answer:\n\n", "  two spaces"),
        ("日本の首都は", "東京です"),
    ],
)
def test_pairs_are_encoded_as_lm_eval_encodes_them(context: str, continuation: str) -> None:
    """continuations.encode_pair against lm-eval's own LM._encode_pair, on the embedded tokenizer."""
    from lm_eval.api.model import TemplateLM
    from transformers import AutoTokenizer

    from pytest_llmeval.continuations import encode_pair
    from pytest_llmeval.models import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir())

    class Causal:  # what _encode_pair reads of HFLM for a causal model without add_bos_token
        backend = "causal"

        def tok_encode(self, text: str) -> list[int]:
            return list(tokenizer.encode(text))

    assert encode_pair(tokenizer, context, continuation) == TemplateLM._encode_pair(
        Causal(), context, continuation
    )


def test_a_model_at_chance_is_told_why_and_a_real_one_is_not(
    pytester: pytest.Pytester, tiny_model: Path
) -> None:
    """The chance check: a random tiny model on 24 four-choice rows is not significantly above chance, and
    the run says so with the likely causes; the real model on the same rows is above it: nothing is said."""
    convert(pytester.path / "bench", "arc_easy", *ARC)
    common = ("bench/arc_easy.jsonl", "-m", "not gate", "--llmeval-no-history", "-p", "no:randomly")
    at_chance = pytester.runpytest(f"--base-model={tiny_model}", *common)
    assert at_chance.ret in (0, 1)
    chance = read_results(pytester.path / "results.json")["benchmarks"][0]["chance"]["base"]
    assert chance["n"] == 24 and chance["chance_accuracy"] == 0.25 and chance["above_chance"] is False
    at_chance.stdout.fnmatch_lines(
        ["*NOT ABOVE CHANCE: base * of 24 multiple-choice rows, chance 25.0%*prompt log-probabilities*"]
    )
    real = pytester.runpytest(*common)
    assert real.ret in (0, 1)
    chance = read_results(pytester.path / "results.json")["benchmarks"][0]["chance"]["base"]
    assert chance["above_chance"] is True and chance["p_value"] < 1e-6
    assert "NOT ABOVE CHANCE" not in real.stdout.str()


def test_converted_rows_score_the_same_serially_and_with_xdist(pytester: pytest.Pytester) -> None:
    """Completion-mode multiple-choice rows under -n 2: every row's pick and lm-eval metrics as serially, its
    log-likelihoods too up to the float rounding of other batches (as every multiple-choice row's)."""
    convert(pytester.path / "bench", "arc_easy", *ARC, "--limit=12", "--num-fewshot=2")
    common = ("bench/arc_easy.jsonl", "-m", "not gate", "--llmeval-no-history", "--llmeval-no-cache")
    scores = []
    for workers in ([], ["-n", "2"]):
        result = pytester.runpytest(*common, *workers, "-p", "no:randomly")
        assert result.ret in (0, 1), result.stdout.str()
        rows = read_results(pytester.path / "results.json")["benchmarks"][0]["rows"]
        scores.append({r["id"]: r["models"]["base"]["score"] for r in rows})
    serial, parallel = scores
    assert len(serial) == 12 and serial.keys() == parallel.keys()
    for row_id, score in serial.items():
        other = parallel[row_id]
        assert (score["value"], score["predicted_index"], score["lm_eval"]) == (
            other["value"],
            other["predicted_index"],
            other["lm_eval"],
        ), row_id
        assert [c["nll"] for c in score["choices"]] == pytest.approx(
            [c["nll"] for c in other["choices"]], abs=1e-5
        )


def test_a_save_to_disk_dataset_gives_the_rows_its_files_give(tmp_path: Path) -> None:
    """Data where users keep it: a DatasetDict `save_to_disk` wrote (a folder per split of .arrow files), read
    with --data-dir (DIR/TASK/ the DatasetDict) or --data-files=SPLIT=FOLDER, converts to the very rows the
    JSONL files give; only the data's fingerprint differs (other bytes)."""
    import datasets

    splits = {
        split: datasets.Dataset.from_list(
            [json.loads(line) for line in (DATA / "arc_easy" / f"{split}.jsonl").read_text().splitlines()]
        )
        for split in ("test", "train")
    }
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "saved" / "arc_easy"))
    saved = tmp_path / "saved" / "arc_easy"
    from_jsonl = convert(tmp_path / "a", "arc_easy", *ARC, "--num-fewshot=2")
    from_dir = convert(tmp_path / "b", "arc_easy", f"--data-dir={tmp_path / 'saved'}", "--num-fewshot=2")
    from_folders = convert(
        tmp_path / "c",
        "arc_easy",
        f"--data-files=test={saved / 'test'}",
        f"--data-files=train={saved / 'train'}",
        "--num-fewshot=2",
    )

    def without_hash(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for row in rows:
            assert row["evaluation_config"]["lm_eval"].pop("data_sha256")
        return rows

    assert without_hash(from_dir) == without_hash(from_folders) == without_hash(from_jsonl)


def test_every_column_gets_its_lm_eval_figures(pytester: pytest.Pytester) -> None:
    """Two adapters against one base in one run: each column's lm-eval figures (`models`), each the mean of
    its own rows' lm-eval scores, not only the top level's adapter's."""
    from helpers import REPO

    rows = convert(pytester.path / "bench", "arc_easy", *ARC, "--limit=6")
    adapters = [f"--adapter={REPO / 'adapters' / name}" for name in ("date-iso", "sentiment")]
    result = pytester.runpytest("bench/arc_easy.jsonl", *adapters, "-m", "not gate", "--llmeval-no-history")
    assert result.ret in (0, 1), result.stdout.str()
    document = read_results(pytester.path / "results.json")
    block = document["benchmarks"][0]["lm_eval"]
    by_column: dict[str, list[float]] = {}
    for row in document["benchmarks"][0]["rows"]:
        for column, side in row["models"].items():
            by_column.setdefault(column, []).append(side["score"]["lm_eval"]["acc"])
    assert set(block["models"]) == {"date-iso", "sentiment"} and len(rows) == 6
    for column, figures in block["models"].items():
        assert figures["n"] == 6 and figures["acc"] == sum(by_column[column]) / 6, column
    assert block["base"]["acc"] == sum(by_column["base"]) / 6
