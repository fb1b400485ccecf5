"""A failing row's report, line by line: the generic lines (header, instruction, input, expected, output,
reason, the base's output) and what each scorer with an `explain` adds (exact_match's extracted and
compared forms, code_execution's per-case verdicts, multiple_choice's pick and likelihoods, llm_judge's
runs), and the perplexity row's own report.

Saved predictions (--llmeval-predictions) make the text scorers' reports fast and exact. The measured
types need a model: the tiny random one, with tests/test_judge.py's hand-made judge for llm_judge, and their
expected lines are built from what results.json recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import build_judge_model, jsonl, model_args, row


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def report(result: pytest.RunResult, nodeid: str) -> list[str]:
    """The lines pytest printed under the failure header of `nodeid` (up to the next section)."""
    lines = result.stdout.lines
    header = re.compile(rf"^_+ {re.escape(nodeid)} _+$")
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    assert start is not None, f"no failure report for {nodeid}:\n" + "\n".join(lines)
    block = []
    for line in lines[start + 1 :]:
        if line.startswith(("___", "===", "---")):
            break
        if not (line.startswith("[gw") and " -- Python " in line):  # xdist names the worker first
            block.append(line)
    return block


def assert_report(actual: list[str], expected: list[str]) -> None:
    """Line for line; `*` in an expected line matches anything, every other character is literal."""
    patterns = [re.compile(".*".join(re.escape(part) for part in line.split("*"))) for line in expected]
    ok = len(actual) == len(expected) and all(p.fullmatch(a) for p, a in zip(patterns, actual, strict=True))
    assert ok, "report differs:\n" + "\n".join(actual) + "\n--- expected ---\n" + "\n".join(expected)


def saved(pytester: pytest.Pytester, rows: list[dict[str, Any]], predictions: list[tuple[str, ...]]) -> None:
    """bench.jsonl and preds.txt: (id, prediction) or (id, prediction, base_prediction) per row."""
    pytester.makefile(".jsonl", bench=jsonl(rows))
    lines = [
        {"id": p[0], "prediction": p[1], **({"base_prediction": p[2]} if len(p) > 2 else {})}
        for p in predictions
    ]
    (pytester.path / "preds.txt").write_text(jsonl(lines))


CASES = {
    "language": "python",
    "test_cases": [
        {"input": "1", "expected_output": "2"},
        {"input": "2", "expected_output": "4"},
        {"input": "3", "expected_output": "6"},
    ],
}
# Right for 1, wrong for 2, exits 3 for 3.
CODE = "```python\nn = int(input())\nif n == 3:\n    raise SystemExit(3)\nprint(5 if n == 2 else n * 2)\n```"
CHOICES = {"choices": ["red", "green", "blue"]}

TEXT_ROWS = [
    row(
        "em1",
        instruction="What is 6 x 7?",
        input="6 x 7",
        expected="43",
        evaluation_config={"extract_pattern": r"(\d+)"},
    ),
    row("em2", instruction="Count the days.", expected="7", evaluation_config={"extract_pattern": r"(\d+)"}),
    row(
        "code1",
        instruction="Double it.",
        expected="",
        evaluation_type="code_execution",
        evaluation_config=CASES,
    ),
    row(
        "code2",
        instruction="Double it.",
        expected="",
        evaluation_type="code_execution",
        evaluation_config=CASES,
    ),
    row(
        "mc",
        instruction="Pick one.",
        expected="green",
        evaluation_type="multiple_choice",
        evaluation_config=CHOICES,
    ),
]
TEXT_PREDICTIONS = [
    ("em1", "The answer is 42.", "no idea"),
    ("em2", "seven", "7"),
    ("code1", CODE, "print(2)"),
    ("code2", "def f(:\n  pass", "x"),
    ("mc", "purple", "blue"),
]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_text_scorers_reports_from_saved_predictions(pytester: pytest.Pytester, workers: list[str]) -> None:
    saved(pytester, TEXT_ROWS, TEXT_PREDICTIONS)
    result = pytester.runpytest("--llmeval-predictions=preds.txt", "-m", "not gate", *workers)
    result.assert_outcomes(failed=5)
    result.stdout.no_fnmatch_line("*Traceback*")
    assert_report(
        report(result, "bench.jsonl::em1"),
        [
            "bench.jsonl:1: em1 [exact_match, easy] scored 0 < threshold 1 (adapter)",
            "  instruction: 'What is 6 x 7?'",
            "  input:       '6 x 7'",
            "  expected:    '43'",
            "  output:      'The answer is 42.'",
            "  extracted:   '42'",
            "  compared:    '42' vs '43'",
            "  base output: 'no idea' (score 0.0)",
        ],
    )
    # No match: the extracted answer is None and the reason says why; nothing was compared. No input line.
    assert_report(
        report(result, "bench.jsonl::em2"),
        [
            "bench.jsonl:2: em2 [exact_match, easy] scored 0 < threshold 1 (adapter)",
            "  instruction: 'Count the days.'",
            "  expected:    '7'",
            "  output:      'seven'",
            "  extracted:   None",
            "  reason:      extract_pattern matched nothing",
            "  base output: '7' (score 1.0)",
        ],
    )
    # Each failed case with its verdict, a passed case not at all.
    assert_report(
        report(result, "bench.jsonl::code1"),
        [
            "bench.jsonl:3: code1 [code_execution, easy] scored 0.333 < threshold 1 (adapter)",
            "  instruction: 'Double it.'",
            "  expected:    ''",
            f"  output:      {CODE!r}",
            "  test cases:  1 of 3 passed",
            "    case 1: wrong_output: stdout '5', expected '4'",
            "    case 2: runtime_error: exit 3, signal None, stderr ''",
            "  base output: 'print(2)' (score 0.333*)",
        ],
    )
    # Code that does not compile fails every case alike: reported once.
    assert_report(
        report(result, "bench.jsonl::code2"),
        [
            "bench.jsonl:4: code2 [code_execution, easy] scored 0 < threshold 1 (adapter)",
            "  instruction: 'Double it.'",
            "  expected:    ''",
            "  output:      'def f(:\\n  pass'",
            "  test cases:  0 of 3 passed",
            "    case 0: compile_error: exit 1, signal None, stderr '*SyntaxError: invalid syntax\\n'",
            "  base output: 'x' (score 0.0)",
        ],
    )
    assert_report(
        report(result, "bench.jsonl::mc"),
        [
            "bench.jsonl:5: mc [multiple_choice, easy] scored 0 < threshold 1 (adapter)",
            "  instruction: 'Pick one.'",
            "  expected:    'green'",
            "  output:      'purple'",
            "  predicted:   None",
            "  reason:      the prediction names no choice",
            "  base output: 'blue' (score 0.0)",
        ],
    )


def test_base_only_report_has_no_base_line(pytester: pytest.Pytester) -> None:
    saved(pytester, TEXT_ROWS[:1], [("em1", "It is 42")])
    result = pytester.runpytest("--llmeval-predictions=preds.txt", "-m", "not gate")
    assert_report(
        report(result, "bench.jsonl::em1"),
        [
            "bench.jsonl:1: em1 [exact_match, easy] scored 0 < threshold 1 (base)",
            "  instruction: 'What is 6 x 7?'",
            "  input:       '6 x 7'",
            "  expected:    '43'",
            "  output:      'It is 42'",
            "  extracted:   '42'",
            "  compared:    '42' vs '43'",
        ],
    )


def test_exact_match_without_pattern_reports_no_extraction(pytester: pytest.Pytester) -> None:
    saved(
        pytester, [row("em", instruction="Capital of France?", expected="Paris")], [("em", "paris, France")]
    )
    result = pytester.runpytest("--llmeval-predictions=preds.txt", "-m", "not gate")
    assert_report(
        report(result, "bench.jsonl::em"),
        [
            "bench.jsonl:1: em [exact_match, easy] scored 0 < threshold 1 (base)",
            "  instruction: 'Capital of France?'",
            "  expected:    'Paris'",
            "  output:      'paris, France'",
            "  compared:    'paris, france' vs 'paris'",
        ],
    )


def test_wrong_choice_from_saved_prediction_has_no_empty_reason(pytester: pytest.Pytester) -> None:
    saved(pytester, TEXT_ROWS[4:], [("mc", "red")])
    result = pytester.runpytest("--llmeval-predictions=preds.txt", "-m", "not gate")
    assert_report(
        report(result, "bench.jsonl::mc"),
        [
            "bench.jsonl:1: mc [multiple_choice, easy] scored 0 < threshold 1 (base)",
            "  instruction: 'Pick one.'",
            "  expected:    'green'",
            "  output:      'red'",
            "  predicted:   'red'",
        ],
    )


# --- measured types, on the tiny model ------------------------------------------------------------------


@pytest.fixture(scope="module")
def judge_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_judge_model(tmp_path_factory.mktemp("judge-for-reports"))


def base_line(line: str, value: float, shown: str) -> None:
    """`  base...: <shown> (score <value>)`, the value compared as a number (its format is not the point)."""
    prefix = f"{shown} (score "
    assert line.startswith(prefix) and line.endswith(")"), line
    assert float(line[len(prefix) : -1]) == pytest.approx(value, rel=1e-3), line


def test_measured_types_reports_on_a_tiny_model(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, judge_model: Path
) -> None:
    rows = [
        # One expected answer per choice: the model picks one, so two of these rows fail.
        *(
            row(
                f"mc-{c}",
                instruction="Pick a colour.",
                expected=c,
                evaluation_type="multiple_choice",
                evaluation_config=CHOICES,
            )
            for c in CHOICES["choices"]
        ),
        # The judge says 4, 8 or nothing parseable: never the 10 that threshold 1.0 needs.
        row(
            "judged",
            instruction="Greet the reader.",
            expected="Hello!",
            evaluation_type="llm_judge",
            evaluation_config={
                "rubric": "A friendly greeting scores high.",
                "runs": 4,
                "judge_max_new_tokens": 8,
                "max_new_tokens": 4,
                "threshold": 1.0,
            },
        ),
        row(
            "ppl",
            instruction="Text",
            input="The cat sat on the mat.",
            expected="",
            evaluation_type="perplexity",
            evaluation_config={"threshold": 1},
        ),
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    result = pytester.runpytest(*model_args(tiny_model, tiny_adapter), f"--llmeval-judge-model={judge_model}")
    doc = json.loads((pytester.path / "results.json").read_text())
    by_id = {r["id"]: r for r in doc["benchmarks"][0]["rows"]}
    result.assert_outcomes(failed=4, passed=1)

    failing_mc = [r for r in by_id.values() if r["evaluation_type"] == "multiple_choice" and not r["passed"]]
    assert len(failing_mc) == 2
    for record in failing_mc:
        adapter, base = record["models"]["adapter"]["score"], record["models"]["base"]["score"]
        ranked = ", ".join(
            f"{c['text']!r} {v:.3f}" for c, v in zip(adapter["choices"], adapter["scores"], strict=True)
        )
        block = report(result, record["nodeid"])
        assert_report(
            block[:-1],
            [
                f"bench.jsonl:{record['line']}: {record['id']} [multiple_choice, easy] scored 0 "
                "< threshold 1 (adapter)",
                "  instruction: 'Pick a colour.'",
                f"  expected:    {record['expected_output']!r}",
                # Nothing was generated: no output line; the pick and every choice's log-likelihood instead.
                f"  predicted:   {adapter['predicted']!r} (log-likelihood, sum: {ranked})",
            ],
        )
        base_line(block[-1], base["value"], f"  base:        {base['predicted']!r}")

    judged = by_id["judged"]
    adapter, base = judged["models"]["adapter"], judged["models"]["base"]
    block = report(result, "bench.jsonl::judged")
    assert_report(
        block[:-1],
        [
            f"bench.jsonl:{judged['line']}: judged [llm_judge, easy] "
            f"scored {adapter['score']['value']:.3g} < threshold 1 (adapter)",
            "  instruction: 'Greet the reader.'",
            "  expected:    'Hello!'",
            f"  output:      {adapter['output']!r}",
            *(
                f"  judge run {r['run']} (seed {r['seed']}): {r['score']}: {r['output']!r}"
                for r in adapter["score"]["runs"]
            ),
        ],
    )
    assert [r["seed"] for r in adapter["score"]["runs"]] == [0, 1, 2, 3]
    base_line(block[-1], base["score"]["value"], f"  base output: {base['output']!r}")

    line = by_id["ppl"]["line"]
    ppl = by_id["ppl"]["models"]
    found, base_found = ppl["adapter"]["score"], ppl["base"]["score"]
    assert_report(
        report(result, "bench.jsonl::ppl"),
        [
            f"bench.jsonl:{line}: ppl [perplexity, easy] perplexity {found['perplexity']:.4g} > threshold 1 "
            f"(adapter, {found['n_tokens']} tokens, {found['bits_per_character']:.3f} bits per character)",
            "  text: 'The cat sat on the mat.'",
            f"  base perplexity: {base_found['perplexity']:.4g}",
        ],
    )
