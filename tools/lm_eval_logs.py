"""lm-eval's own per-sample logs on the test data, recorded once (`make lm-eval-logs`).

    python tools/lm_eval_logs.py                     # every case, to tests/data/lm_eval/logs/
    python tools/lm_eval_logs.py --only wikitext --only gsm8k --out /tmp/logs

For each case (a task or group and its number of few-shot examples) it runs lm-eval 0.4.13's
`simple_evaluate` as tests/test_lm_eval_tasks.py runs it: the `hf` model on the embedded model's fp32 folder,
on the CPU, batches of 8, lm-eval's default seeds, each task's documents from tests/data/lm_eval/<task>/
<split>.jsonl. It writes what lm-eval logged to OUT/<task>-<shots>shot.json: the version, the case, lm-eval's
`results` entry of the task (a group's: the group's, each subgroup's and each task's), and per sample its
doc_id, arguments, resps, filtered_resps, target, filter and each metric's value. The document itself is left
out (it is in the data file, found by doc_id) and so is everything that changes from run to run but the
seconds lm-eval took (dates, paths, hashes of the environment): a rerun on the same machine rewrites the same
files but for `seconds`, and a diff shows what a new lm-eval, torch or data file changed.

Tasks are loaded with the converter's own loader (pytest_llmeval.lm_eval_tasks), so the logs are of the
very tasks `convert lm-eval` reads, whatever their output type: a group's tasks each read DATA/<task>/. A case
whose data folder is missing is skipped with a line saying so; any other failure stops the run, since a task
lm-eval cannot run on these files is a bug in the files.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "lm_eval"
# simple_evaluate's arguments, as tests/test_lm_eval_tasks.py passes them.
BATCH_SIZE = 8
DEVICE = "cpu"
# What a sample keeps besides its metrics: `doc` is the data file's row, the hashes and `metrics` (the names
# of the metrics, which are the keys kept) say nothing new.
SAMPLE_FIELDS = ("doc_id", "arguments", "resps", "filtered_resps", "target", "filter")


@dataclass(frozen=True)
class Case:
    """One recorded run: a task or group, and its number of few-shot examples."""

    task: str
    shots: int

    @property
    def file_name(self) -> str:
        return f"{self.task}-{self.shots}shot.json"


CASES = (
    Case("arc_easy", 0),
    Case("arc_easy", 2),
    Case("arc_challenge", 5),  # the Open LLM Leaderboard takes 25; the train split here has 6 rows
    Case("hellaswag", 0),
    Case("piqa", 1),
    Case("boolq", 1),
    Case("winogrande", 5),
    Case("lambada_openai", 0),  # loglikelihood: perplexity and acc (is the last word the greedy one)
    Case("truthfulqa_mc2", 0),  # multiple_choice with the task's own process_results
    Case("wikitext", 0),  # loglikelihood_rolling: whole pages
    Case("gsm8k", 5),  # generate_until with two filters (its data: tests/data/lm_eval/gsm8k/)
    Case("mmlu_social_sciences", 5),  # a group: 12 subjects, each its own folder
    Case("mmlu_astronomy", 5),
)


def _jsonable(value: Any) -> Any:
    """lm-eval's values as JSON: tuples as lists, numpy scalars as numbers, NaN and infinities as strings
    (strict JSON has none; lm-eval gives NaN for the stderr of a metric with one sample)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy and torch scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _sample(sample: dict[str, Any]) -> dict[str, Any]:
    kept = {k: sample[k] for k in SAMPLE_FIELDS if k in sample}
    kept["metrics"] = {m: sample[m] for m in sample.get("metrics", [])}
    return kept


def _load(task: str, manager: Any, data: Path) -> list[Any]:
    """The task or group as lm-eval Task/Group objects, each task's documents from data/<task>/ (the
    converter's own loader, `convert lm-eval --data-dir`)."""
    from pytest_llmeval import lm_eval_tasks

    return list(lm_eval_tasks.load_for_lm_eval([task], manager, data_dir=data))


def record(case: Case, manager: Any, data: Path) -> tuple[dict[str, Any], float]:
    """lm-eval's run of one case, as the JSON document written, and the seconds simple_evaluate took."""
    import lm_eval

    from pytest_llmeval.models import embedded_model_dir

    tasks = _load(case.task, manager, data)
    start = time.perf_counter()
    out = lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": str(embedded_model_dir()), "dtype": "float32"},
        tasks=tasks,
        num_fewshot=case.shots,
        device=DEVICE,
        batch_size=BATCH_SIZE,
        log_samples=True,
        task_manager=manager,
    )
    seconds = time.perf_counter() - start
    if out is None:  # simple_evaluate returns None on every rank but the first; there is one here
        raise RuntimeError(f"lm-eval returned no results for {case.task}")
    samples = {
        name: sorted((_sample(s) for s in logged), key=lambda s: (s["doc_id"], str(s.get("filter"))))
        for name, logged in sorted(out["samples"].items())
    }
    document = {
        "lm_eval_version": importlib.metadata.version("lm_eval"),
        "case": {"task": case.task, "num_fewshot": case.shots},
        "run": {
            "model": "hf",
            "pretrained": "embedded (SmolLM2-135M-Instruct, fp32)",
            "device": DEVICE,
            "batch_size": BATCH_SIZE,
        },
        "results": out["results"],
        "n-shot": out.get("n-shot", {}),
        "n-samples": out.get("n-samples", {}),
        "versions": out.get("versions", {}),
        "samples": samples,
        "seconds": round(seconds, 1),
    }
    return _jsonable(document), seconds


def _data_missing(case: Case, manager: Any, data: Path) -> bool:
    from pytest_llmeval import lm_eval_tasks

    entry = manager._entry(case.task)
    return entry is not None and lm_eval_tasks._kind(entry) == "task" and not (data / case.task).is_dir()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    known = sorted({c.task for c in CASES})
    parser.add_argument(
        "--only", action="append", default=[], metavar="TASK", help=f"one of {', '.join(known)}"
    )
    parser.add_argument(
        "--out", type=Path, default=DATA / "logs", help="the folder written (default: %(default)s)"
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the task data folder (default: %(default)s)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - set(known))
    if unknown:
        parser.error(f"--only {unknown[0]}: no such case (one of {', '.join(known)})")
    cases = [c for c in CASES if not args.only or c.task in args.only]

    from pytest_llmeval import lm_eval_tasks

    _, task_manager = lm_eval_tasks._lm_eval()  # lm-eval's notes and datasets' progress bars off
    manager = task_manager()
    args.out.mkdir(parents=True, exist_ok=True)
    begun = time.perf_counter()
    for case in cases:
        label = f"{case.task} {case.shots}-shot"
        if _data_missing(case, manager, args.data):
            print(f"{label}: skipped, no data in {args.data / case.task}", flush=True)
            continue
        document, seconds = record(case, manager, args.data)
        path = args.out / case.file_name
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        count = sum(len(s) for s in document["samples"].values())
        print(f"{label}: {seconds:.1f} s, {count} samples -> {path}", flush=True)
    print(f"total: {time.perf_counter() - begun:.1f} s for {len(cases)} cases", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
