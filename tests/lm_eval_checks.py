"""What the lm-eval tests share: converting a task from tests/data/lm_eval/, lm-eval's own samples (recorded
by `make lm-eval-logs` in tests/data/lm_eval/logs/, or run live), and the row-by-row comparison of a run of
the converted rows with them.

The comparison, per output type: every request the row makes is the one lm-eval sent; each log-likelihood
within 1e-4 nats (a millionth of a long text's: lm-eval adds a window's token log-probabilities in float32);
each per-row metric identical where it is right-or-wrong (acc, acc_norm, greedy), within 1e-4 where it is
computed from log-likelihoods (TruthfulQA MC2's share, LAMBADA's log-likelihood, WikiText's (log-likelihood,
count) items, whose counts are identical); each task's aggregate as lm-eval's, exactly where its rows' values
are, and a group's as lm-eval aggregates it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, load_script

from pytest_llmeval.cli import main as cli_main
from pytest_llmeval.results_reader import read_results

DATA = REPO / "tests" / "data" / "lm_eval"
LOGS = DATA / "logs"
RUN = ("-m", "not gate", "--llmeval-no-history", "-p", "no:randomly")
Samples = dict[str, dict[int, dict[str, Any]]]  # task -> doc_id -> lm-eval's logged sample


@pytest.fixture(scope="session", autouse=True)
def lm_eval_imported() -> None:
    """lm-eval and datasets imported once, before any pytester (a test module imports this fixture to use
    it): pytester drops the modules a test imported when it ends, and datasets cannot be imported twice in a
    process (pyarrow keeps its types)."""
    import datasets  # noqa: F401
    import lm_eval.tasks  # noqa: F401


def convert(out: Path, task: str, *args: str) -> list[dict[str, Any]]:
    """`convert lm-eval TASK ARGS --out=OUT`, the data from --data-dir=tests/data/lm_eval unless ARGS name
    theirs: the rows written (a group's in one file, --group-file)."""
    own = any(a.startswith(("--data-files=", "--data-dir=")) for a in args)
    data = [] if own else [f"--data-dir={DATA}"]
    group = ["--group-file"] if not own and not (DATA / task).is_dir() else []
    assert cli_main(["convert", "lm-eval", task, *data, *group, *args, f"--out={out}"]) == 0
    return [json.loads(line) for line in (out / f"{task}.jsonl").read_text(encoding="utf-8").splitlines()]


def _tool() -> Any:
    return load_script(REPO / "tools" / "lm_eval_logs.py", "lm_eval_logs")


def _by_task(samples: dict[str, list[dict[str, Any]]]) -> Samples:
    return {task: {int(s["doc_id"]): s for s in logged} for task, logged in samples.items()}


def recorded(task: str, shots: int) -> tuple[Samples, dict[str, Any]]:
    """lm-eval's run as `make lm-eval-logs` recorded it: its samples by task and document, and its results
    (each task's with its few-shot count as lm-eval ran it, `n-shot`)."""
    case = _tool().Case(task, shots)
    document = json.loads((LOGS / case.file_name).read_text(encoding="utf-8"))
    results = {
        name: {**found, "n-shot": document["n-shot"].get(name)} for name, found in document["results"].items()
    }
    return _by_task(document["samples"]), results


def live(task: str, shots: int) -> tuple[Samples, dict[str, Any]]:
    """lm-eval run now, as the recording tool runs it, in the recorded files' form."""
    from lm_eval.tasks import TaskManager

    tool = _tool()
    document, _ = tool.record(tool.Case(task, shots), TaskManager(), DATA)
    return _by_task(document["samples"]), document["results"]


def run(pytester: pytest.Pytester, task: str) -> dict[str, Any]:
    """The converted rows run on the embedded model: results.json."""
    result = pytester.runpytest(f"bench/{task}.jsonl", *RUN)
    assert result.ret in (0, 1), result.stdout.str()
    return read_results(pytester.path / "results.json")


def _close(mine: Any, theirs: Any) -> bool:
    return bool(mine == pytest.approx(theirs, abs=1e-4, rel=1e-6))


def check_rows(rows: list[dict[str, Any]], document: dict[str, Any], theirs: Samples) -> dict[str, list[Any]]:
    """Every row's requests, log-likelihoods and per-row metrics against lm-eval's sample of its document;
    the rows' per-metric values by task and metric ("task/metric"), for the aggregates."""
    from pytest_llmeval.scorers.multiple_choice import option_pair

    ours = {r["id"]: r for b in document["benchmarks"] for r in b["rows"]}
    found: dict[str, list[Any]] = {}
    for row in rows:
        config = row["evaluation_config"]
        origin = config["lm_eval"]
        sample = theirs[origin["task"]][origin["doc_id"]]
        score = ours[row["id"]]["models"]["base"]["score"]
        kind = row["evaluation_type"]
        if kind == "multiple_choice":
            sent = [list(option_pair(config, row["input"], c)) for c in config["choices"]]
            lls = [-c["nll"] for c in score["choices"]]
            their_lls = [float(r[0][0]) for r in sample["resps"]]
        elif kind == "loglikelihood":
            sent = [[row["input"], config["continuation"]]]
            lls, their_lls = [-score["nll"]], [float(sample["resps"][0][0][0])]
            assert score["greedy"] == bool(sample["resps"][0][0][1]), row["id"]
        else:  # a rolling perplexity row
            sent = [[row["input"]]]
            lls, their_lls = [-score["nll"]], [float(sample["resps"][0][0])]
        assert [list(a) for a in sample["arguments"]] == sent, row["id"]
        assert all(_close(a, b) for a, b in zip(lls, their_lls, strict=True)), (row["id"], lls, their_lls)
        for metric in origin["metrics"]:
            mine, their = score["lm_eval"][metric], sample["metrics"][metric]
            if isinstance(their, list):  # (log-likelihood, a count)
                assert mine[1] == their[1] and _close(mine[0], their[0]), (row["id"], metric, mine, their)
            elif metric == "perplexity" or config.get("gold_mass"):  # computed from log-likelihoods
                assert _close(mine, their), (row["id"], metric, mine, their)
            else:
                assert mine == their, (row["id"], metric, mine, their)
            found.setdefault(f"{origin['task']}/{metric}", []).append(mine)
    return found


def check_aggregates(
    rows: list[dict[str, Any]], document: dict[str, Any], results: dict[str, Any], found: dict[str, list[Any]]
) -> None:
    """Each task's lm_eval block (a group file's: under `tasks`) as lm-eval's results: exact where every
    row's value is, its standard error too; and each group's as lm-eval's."""
    block = document["benchmarks"][0]["lm_eval"]
    blocks = block["tasks"] if "tasks" in block else {block["task"]: block}
    for key, values in found.items():
        task, metric = key.split("/")
        figures, expected = blocks[task]["base"], results[task]
        assert figures["n"] == len(values) == expected["sample_len"]
        exact = all(v in (0, 1, 0.0, 1.0) for v in values if not isinstance(v, list))
        exact = exact and not any(isinstance(v, list) for v in values) and metric != "perplexity"
        want = expected[f"{metric},none"]
        assert figures[metric] == (want if exact else pytest.approx(want, rel=1e-5)), (key, figures)
        if f"{metric}_stderr" in figures:
            error = expected[f"{metric}_stderr,none"]
            assert figures[f"{metric}_stderr"] == pytest.approx(error, abs=1e-12 if exact else 1e-5), key
    for group, figures in (document.get("lm_eval_groups") or {}).items():
        expected = results[group]
        assert figures["missing"] == []
        assert figures["base"]["acc"] == pytest.approx(expected["acc,none"], abs=1e-12)
        assert figures["base"]["acc_stderr"] == pytest.approx(expected["acc_stderr,none"], abs=1e-12)
