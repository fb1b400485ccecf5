"""`pytest-llmeval convert dataset SOURCE`: benchmark rows from a dataset of your own by a field mapping
(issue 54).

Every source is a real file `datasets` itself wrote here (to_parquet, to_json, to_csv, save_to_disk, a
DatasetDict's save_to_disk), converted through the command line's entry point, and the rows it wrote are
read back with the plugin's own benchmark reader: they are rows the collector takes. A hub id is taken only
up to the network (these machines reach none): offline, with an empty cache, it is the one-line refusal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pytest_llmeval import dataset_rows
from pytest_llmeval.benchmark import Benchmark
from pytest_llmeval.cli import main
from pytest_llmeval.scorers import SCORERS, read_benchmark
from pytest_llmeval.scorers.multiple_choice import expected_index

REPO = Path(__file__).resolve().parent.parent
PICK = "--instruction=Pick the right answer."
# Four questions, flat (a CSV holds no lists): the choices as columns A-D, the gold as a position, its
# letter and its text, an id, a subject and a free answer.
RECORDS: list[dict[str, Any]] = [
    {
        "uid": "geo-1",
        "question": "What is the capital of France?",
        "A": "Berlin",
        "B": "Paris",
        "C": "Madrid",
        "D": "Rome",
        "answer": 1,
        "letter": "B",
        "gold": "Paris",
        "subject": "geography",
        "short": "Paris",
    },
    {
        "uid": "math-1",
        "question": "What is 2 + 2?",
        "A": "3",
        "B": "5",
        "C": "4",
        "D": "22",
        "answer": 2,
        "letter": "C",
        "gold": "4",
        "subject": "math",
        "short": "4",
    },
    {
        "uid": "sci-1",
        "question": "Which gas do plants take in?",
        "A": "Carbon dioxide",
        "B": "Oxygen",
        "C": "Helium",
        "D": "Neon",
        "answer": 0,
        "letter": "A",
        "gold": "Carbon dioxide",
        "subject": "science",
        "short": "carbon dioxide",
    },
    {
        "uid": "geo-2",
        "question": "Which river flows through Cairo?",
        "A": "Danube",
        "B": "Amazon",
        "C": "Thames",
        "D": "Nile",
        "answer": 3,
        "letter": "D",
        "gold": "Nile",
        "subject": "geography",
        "short": "the Nile",
    },
]
CHOICES = "--choices=A,B,C,D"
MC = ["--input=question", "--expected=answer", CHOICES, PICK]


@pytest.fixture(autouse=True)
def _own_datasets_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """datasets' builders cache what they read: here, under the test's folder, not the user's cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")


def write(folder: Path, kind: str, records: list[dict[str, Any]] = RECORDS) -> Path:
    """The records as `datasets` writes them in `kind`: the path to give as SOURCE."""
    import datasets

    folder.mkdir(parents=True, exist_ok=True)
    data = datasets.Dataset.from_list(records)
    if kind == "parquet":
        data.to_parquet(str(folder / "quiz.parquet"))
        return folder / "quiz.parquet"
    if kind == "jsonl":
        data.to_json(str(folder / "quiz.jsonl"))  # JSON lines, datasets' default
        return folder / "quiz.jsonl"
    if kind == "json":  # one JSON array
        (folder / "quiz.json").write_text(json.dumps(records), encoding="utf-8")
        return folder / "quiz.json"
    if kind == "csv":
        data.to_csv(str(folder / "quiz.csv"), index=False)
        return folder / "quiz.csv"
    if kind == "split":  # a Dataset's save_to_disk: one split's folder of .arrow files
        data.save_to_disk(str(folder / "quiz"))
        return folder / "quiz"
    if kind == "arrow":  # one .arrow file, as save_to_disk writes it
        data.save_to_disk(str(folder / "saved"))
        shutil.copy(next((folder / "saved").glob("*.arrow")), folder / "quiz.arrow")
        return folder / "quiz.arrow"
    assert kind == "dict"  # a DatasetDict's save_to_disk: a folder per split
    datasets.DatasetDict({"test": data, "train": data.select([0])}).save_to_disk(str(folder / "quiz"))
    return folder / "quiz"


def convert(capsys: pytest.CaptureFixture[str], source: Path | str, *args: str) -> tuple[int, list[str]]:
    """`pytest-llmeval convert dataset SOURCE ARGS`: its exit status and its lines on standard error."""
    capsys.readouterr()
    status = main(["convert", "dataset", str(source), *args])
    return status, capsys.readouterr().err.strip().splitlines()


def converted(capsys: pytest.CaptureFixture[str], source: Path | str, *args: str) -> Benchmark:
    """The rows written, read back by the plugin's own benchmark reader (it raises on any invalid row)."""
    out = Path(str(source) + ".bench.jsonl")
    status, err = convert(capsys, source, *args, f"-o={out}")
    assert status == 0, err
    assert len(err) == 1 and err[0].startswith("llmeval: wrote ") and err[0].endswith(f" to {out}"), err
    return read_benchmark(out)


def rows_of(benchmark: Benchmark) -> list[dict[str, Any]]:
    return [json.loads(line) for line in benchmark.path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "json", "csv", "arrow", "split", "dict"])
def test_every_format_gives_the_same_rows(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path, kind)
    split = ["--split=test"] if kind == "dict" else []
    bench = converted(capsys, source, *MC, "--id=uid", "--tag=subject", *split)
    assert [c.id for c in bench.cases] == ["geo-1", "math-1", "sci-1", "geo-2"]
    assert [expected_index(c.expected_output, c.evaluation_config) for c in bench.cases] == [1, 2, 0, 3]
    first = rows_of(bench)[0]
    origin = {"dict": "quiz/test", "split": "quiz"}.get(kind, source.name)
    assert first == {
        "id": "geo-1",
        "instruction": "Pick the right answer.",
        "input": "What is the capital of France?",
        "expected_output": "Paris",
        "evaluation_type": "multiple_choice",
        "evaluation_config": {"choices": ["Berlin", "Paris", "Madrid", "Rome"], "answer_index": 1},
        "difficulty": "medium",
        "tags": [f"source:{origin}", "subject:geography"],
    }


@pytest.mark.parametrize("gold", ["answer", "letter", "gold"])
def test_the_gold_choice_is_a_position_a_letter_or_a_text(
    gold: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = converted(
        capsys, write(tmp_path, "parquet"), "--input=question", f"--expected={gold}", CHOICES, PICK
    )
    assert [c.evaluation_config["answer_index"] for c in bench.cases] == [1, 2, 0, 3]
    assert [c.expected_output for c in bench.cases] == ["Paris", "4", "Carbon dioxide", "Nile"]
    assert {c.evaluation_type for c in bench.cases} == {"multiple_choice"}


def test_a_list_field_of_choices_and_nested_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MMLU's shape (choices a list, the answer its position) and a nested gold (`meta.answer`)."""
    records = [
        {"question": r["question"], "choices": [r[k] for k in "ABCD"], "meta": {"answer": r["answer"]}}
        for r in RECORDS
    ]
    bench = converted(
        capsys, write(tmp_path, "parquet", records), "--input=question", "--expected=meta.answer",
        "--choices=choices", PICK,
    )  # fmt: skip
    assert [c.evaluation_config["answer_index"] for c in bench.cases] == [1, 2, 0, 3]
    assert bench.cases[0].evaluation_config["choices"] == ["Berlin", "Paris", "Madrid", "Rome"]


def test_text_rows_exact_match_by_default_or_another_text_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQuAD's shape: the references a list in a nested field (answers.text), and a number as the answer."""
    records = [
        {"q": "Name a primary colour.", "answers": {"text": ["red", "blue", "yellow"]}, "n": 1},
        {"q": "How many legs has a spider?", "answers": {"text": ["eight"]}, "n": 8},
    ]
    source = write(tmp_path, "jsonl", records)
    bench = converted(capsys, source, "--input=q", "--expected=answers.text", "--instruction=Answer briefly.")
    assert [c.evaluation_type for c in bench.cases] == ["exact_match", "exact_match"]
    assert [c.references for c in bench.cases] == [("red", "blue", "yellow"), ("eight",)]
    assert rows_of(bench)[1]["expected_output"] == "eight"  # a one-item list is the plain string
    numbers = converted(capsys, source, "--input=q", "--expected=n", "--type=chrf", "--instruction=Count.")
    assert [(c.evaluation_type, c.expected_output) for c in numbers.cases] == [("chrf", "1"), ("chrf", "8")]


@given(
    st.lists(st.text(min_size=1).filter(str.strip), min_size=2, max_size=8, unique_by=str.strip),
    st.data(),
)
def test_a_position_its_letter_and_its_text_name_the_same_choice(
    choices: list[str], data: st.DataObject
) -> None:
    """Whichever way a record gives the gold, the row names the same choice, and the scorer's own checks
    (validate, validate_row) take it."""
    gold = data.draw(st.integers(0, len(choices) - 1))
    letters = dataset_rows.LETTERS[: len(choices)]
    assume(not any(c.strip() in letters for c in choices))  # a text that is a letter is refused as ambiguous
    records = [
        {"q": "Which?", "c": choices, "g": g} for g in (gold, float(gold), letters[gold], choices[gold])
    ]
    source = dataset_rows.Source("s", "s", "s", len(records), [(f"s[{i}]", r) for i, r in enumerate(records)])
    fields = dataset_rows.FieldMap(input="q", expected="g", choices=("c",), instruction="Pick.")
    rows = dataset_rows.dataset_rows(source, fields)
    spec = SCORERS["multiple_choice"]
    for row in rows:
        assert row["evaluation_config"] == {"choices": choices, "answer_index": gold}
        assert row["expected_output"] == choices[gold]
        spec.validate(row["evaluation_config"])
        assert spec.validate_row is not None
        spec.validate_row(row["evaluation_config"], row)


def test_rows_are_numbered_and_limit_keeps_the_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ids `<prefix>-<n>`, n the record's position from 0, zero-padded to the source's size: --limit takes
    the first N records without renaming them, so a row's id is the same in the whole and in a sample."""
    records = [{"q": f"question {i}", "a": f"answer {i}"} for i in range(12)]
    source = write(tmp_path / "My Quiz!", "parquet", records).rename(tmp_path / "my quiz!.parquet")
    args = ["--input=q", "--expected=a", "--instruction=Answer."]
    whole = converted(capsys, source, *args)
    assert [c.id for c in whole.cases] == [f"my-quiz-{i:02d}" for i in range(12)]
    some = converted(capsys, source, *args, "--limit=3", "--id-prefix=quiz", "--difficulty=hard")
    assert [(c.id, c.difficulty) for c in some.cases] == [(f"quiz-{i:02d}", "hard") for i in range(3)]
    with_field = converted(capsys, write(tmp_path, "jsonl"), *MC, "--id=uid", "--id-prefix=q")
    assert [c.id for c in with_field.cases] == ["q-geo-1", "q-math-1", "q-sci-1", "q-geo-2"]


def test_standard_output_when_no_output_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["convert", "dataset", str(write(tmp_path, "csv")), *MC, "--limit=2"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["id"] for line in captured.out.splitlines()] == ["quiz-0", "quiz-1"]
    assert captured.err == f"llmeval: wrote 2 rows from {tmp_path / 'quiz.csv'} to standard output\n"


def _broken(field: str, value: Any) -> list[dict[str, Any]]:
    """RECORDS with the third record's `field` set to `value` (left out for `...`)."""
    third = {k: v for k, v in RECORDS[2].items() if k != field}
    if value is not ...:
        third[field] = value
    return [RECORDS[0], RECORDS[1], third, RECORDS[3]]


# (records, the mapping, what the one line says after the record's place)
BAD: dict[str, tuple[list[dict[str, Any]], list[str], str]] = {
    "missing field": (_broken("question", ...), MC, "missing field 'question' (--input): give --input=FIELD"),
    "null": (_broken("answer", None), MC, "field 'answer' (--expected) is null"),
    "empty input": (_broken("question", "  "), MC, "field 'question' (--input) is empty"),
    "wrong type": (_broken("question", ["a", "b"]), MC, "field 'question' (--input) must be a string or a"),
    "index out of range": (_broken("answer", 4), MC, "field 'answer' (--expected) 4 is out of range for 4"),
    "gold not a choice": (
        _broken("gold", "Nitrogen"),
        ["--input=question", "--expected=gold", CHOICES, PICK],
        "field 'gold' (--expected) 'Nitrogen' is not among the choices",
    ),
    "letter past the choices": (
        _broken("letter", "E"),
        ["--input=question", "--expected=letter", CHOICES, PICK],
        "field 'letter' (--expected) 'E' is not among the choices: give a choice's text, a letter A-D",
    ),
    "a choice twice": (
        _broken("B", "Carbon dioxide"),
        MC,
        "fields 'A' and 'B' (--choices) are the same choice 'Carbon dioxide'",
    ),
    "duplicate ids": (
        _broken("uid", "geo-1"),
        [*MC, "--id=uid"],
        "duplicate uid 'geo-1' (first at {source}:1): leave out --id to number the rows instead",
    ),
    "an id that is no row id": (
        _broken("uid", "sci 1"),
        [*MC, "--id=uid"],
        "field 'uid' 'sci 1' makes the row id 'sci 1', which is not letters",
    ),
    "a tag of no value": (_broken("subject", ""), [*MC, "--tag=subject"], "field 'subject' (--tag) is empty"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_record_is_one_line_naming_it_and_nothing_is_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records, args, said = BAD[case]
    source = tmp_path / "quiz.jsonl"  # JSONL: the record is named by its line
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    status, err = convert(capsys, source, *args, f"-o={out}")
    assert status == 2
    assert len(err) == 1, err
    assert err[0].startswith(f"llmeval: {source}:3: {said.format(source=source)}"), err
    assert err[0].endswith("(nothing written)")
    assert not out.exists()


def test_a_bad_record_of_a_parquet_file_is_named_by_its_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records `datasets` reads are named `file[index]`, the index from 0 (the n of the numbered ids)."""
    source = write(tmp_path, "parquet", _broken("answer", 7))
    status, err = convert(capsys, source, *MC, f"-o={tmp_path / 'out.jsonl'}")
    assert status == 2 and len(err) == 1
    assert err[0].startswith(f"llmeval: {source}[2]: field 'answer' (--expected) 7 is out of range"), err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    ("kind", "args", "said"),
    [
        ("dict", MC, "quiz: holds the splits test, train: give --split=NAME"),
        ("dict", [*MC, "--split=dev"], "quiz: has no split 'dev' (its splits: test, train)"),
        ("parquet", [*MC, "--split=test"], "--split is for a DatasetDict's save_to_disk folder or a hub"),
        ("parquet", [*MC, "--subset=x"], "--subset is for a hub dataset id"),
        ("csv", ["--input=question", "--expected=answer", "--choices=A", PICK], "(--choices) must be a list"),
    ],
)
def test_a_source_that_cannot_give_the_rows_is_one_line(
    kind: str, args: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = convert(capsys, write(tmp_path, kind), *args, f"-o={tmp_path / 'out.jsonl'}")
    assert status == 2 and len(err) == 1 and err[0].startswith("llmeval: ") and said in err[0], err
    assert not (tmp_path / "out.jsonl").exists()


def test_no_such_file_an_unknown_format_and_a_plain_folder_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "quiz.txt").write_text("What is 2 + 2?\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    for source, said in [
        (tmp_path / "nothing.parquet", f"{tmp_path / 'nothing.parquet'}: no such file or folder"),
        (tmp_path / "quiz.txt", "quiz.txt: cannot read a .txt file (.arrow, .csv, .json, .jsonl, .parquet)"),
        (tmp_path / "folder", "folder: is a folder of neither kind save_to_disk writes"),
    ]:
        status, err = convert(capsys, source, *MC)
        assert status == 2 and len(err) == 1 and said in err[0], err


@pytest.mark.parametrize("variable", ["HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"])
def test_a_hub_dataset_offline_and_not_cached_is_refused_in_one_line(variable: str, tmp_path: Path) -> None:
    """As a user runs it, in its own process: datasets reads the variables when it is imported. The cache is
    an empty folder, so nothing can come from it and no request is made (these machines reach no hub: the
    download itself is not tested)."""
    home = tmp_path / "hf"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and k != "TRANSFORMERS_OFFLINE"}
    env.update({variable: "1", "HF_HOME": str(home), "HF_DATASETS_CACHE": str(home / "datasets")})
    env["PYTHONPATH"] = str(REPO)
    argv = ["convert", "dataset", "cais/mmlu", "--subset=abstract_algebra", "--split=test"]
    argv += [
        "--input=question",
        "--expected=answer",
        "--choices=choices",
        PICK,
        f"-o={tmp_path / 'out.jsonl'}",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "llmeval: cais/mmlu: not a local file or folder, and the hub dataset is not in the datasets cache "
        "while HF_DATASETS_OFFLINE (or HF_HUB_OFFLINE) is set: run once with network to cache it, or convert "
        "a local copy (parquet, JSON/JSONL, CSV, arrow, a save_to_disk folder) (nothing written)"
    ]
    assert not (tmp_path / "out.jsonl").exists()


def test_without_datasets_json_still_converts_and_the_rest_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parquet = write(tmp_path, "parquet")
    jsonl = write(tmp_path, "jsonl")
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    status, err = convert(capsys, parquet, *MC)
    assert status == 2
    assert err == [
        f"llmeval: {parquet}: reading a parquet file needs datasets: pip install 'pytest-llmeval[lm-eval]' "
        "(nothing written)"
    ]
    assert len(converted(capsys, jsonl, *MC).cases) == 4


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["dataset", "q.parquet", *MC, "--num-fewshot=0"], "--num-fewshot is for lm-eval"),
        (["dataset", "q.parquet", *MC, "--out=o"], "--out is for lm-eval"),
        (["dataset", "q.parquet", *MC, "--data-files=test=x.jsonl"], "--data-files is for lm-eval"),
        (["dataset", "q.parquet", *MC, "--samples=2"], "--samples is for humaneval and mbpp"),
        (["dataset", "q.parquet", "r.parquet", *MC], "dataset converts one SOURCE"),
        (["dataset", "q.parquet", *MC, "--limit=0"], "--limit must be 1 or more"),
        (["dataset", "q.parquet", "--expected=a", PICK], "dataset needs --input=FIELD"),
        (["dataset", "q.parquet", "--input=q", PICK], "dataset needs --expected=FIELD"),
        (["dataset", "q.parquet", "--input=q", "--expected=a"], "dataset needs --instruction=TEXT"),
        (["dataset", "q.parquet", *MC, "--type=rouge"], "--choices makes multiple_choice rows"),
        (
            ["dataset", "q.parquet", "--input=q", "--expected=a", PICK, "--type=multiple_choice"],
            "needs --choices",
        ),
        (["dataset", "q.parquet", *MC, "--type=code_execution"], "invalid choice: 'code_execution'"),
        (["dataset", "q.parquet", *MC, "--choices=A,,B"], "--choices=A,,B: one list field, or distinct"),
        (["dataset", "q.parquet", *MC, "--id-prefix=a/b"], "--id-prefix=a/b: use letters"),
        (["humaneval", "he.jsonl", "--input=q"], "--input is for dataset"),
        (["mbpp", "m.jsonl", "--limit=3"], "--limit is for lm-eval and dataset"),
        (["lm-eval", "arc_easy", "--out=o", "--choices=c"], "--choices is for dataset"),
        (["lm-eval", "arc_easy", "--out=o", "-o=x.jsonl"], "-o is for humaneval, mbpp and dataset"),
    ],
)
def test_options_of_another_kind_of_conversion_are_refused(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Usage errors, before any file is read: argparse's exit 2 with the option named."""
    with pytest.raises(SystemExit) as exited:
        main(["convert", *argv])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_an_output_that_would_replace_the_source_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path, "jsonl")
    before = source.read_bytes()
    status, err = convert(capsys, source, *MC, f"-o={source}")
    assert status == 2 and len(err) == 1 and "SOURCE" in err[0], err
    assert source.read_bytes() == before


def test_the_converted_file_collects_as_test_items(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makeini("[pytest]\n")
    source = write(pytester.path / "data", "parquet")
    status, err = convert(capsys, source, *MC, "--id=uid", f"-o={pytester.path / 'quiz.jsonl'}")
    assert status == 0, err
    result = pytester.runpytest("--collect-only", "-q", "-m", "not gate", "quiz.jsonl")
    result.stdout.fnmatch_lines(
        ["quiz.jsonl::geo-1", "quiz.jsonl::math-1", "quiz.jsonl::sci-1", "quiz.jsonl::geo-2"]
    )
    assert result.ret == 0


def test_a_hub_dataset_of_several_splits_needs_one_named(tmp_path: Path) -> None:
    """The hub path after the download, offline: `datasets.load_dataset` of a folder laid out as a hub
    repository (a file per split) gives what it gives for a hub id, every split unless one is named."""
    from pytest_llmeval.convert import ConvertError

    repo = tmp_path / "repo"
    repo.mkdir()
    write(tmp_path / "a", "parquet").rename(repo / "test.parquet")
    write(tmp_path / "b", "parquet", RECORDS[:1]).rename(repo / "train.parquet")
    with pytest.raises(ConvertError, match=r"repo: holds the splits (test, train|train, test): give --split"):
        dataset_rows._hub(str(repo), None, None)
    source = dataset_rows._hub(str(repo), None, "test")
    assert (source.label, source.prefix, source.count) == (f"{repo}:test", "repo", 4)
    fields = dataset_rows.FieldMap(
        input="question", expected="letter", instruction="Pick.", choices=tuple("ABCD")
    )
    assert [r["evaluation_config"]["answer_index"] for r in dataset_rows.dataset_rows(source, fields)] == [
        1,
        2,
        0,
        3,
    ]
