"""lm-eval tasks, whole process: our run of the converted rows against lm-eval's own run, in one go.

    python bench/lm_eval_tasks.py [--copies 10] [--shots 5] [--repeats 1] [--tasks arc_easy hellaswag ...]

Each task's data is tests/data/lm_eval/TASK/ (the dataset's own schema), its evaluated split held `--copies`
times over, each copy's documents made distinct (a marker in the field the prompt shows first, so that no
two rows share a context and neither tool can reuse one). The same task, data and few-shot count go to:

- ours: `pytest-llmeval convert lm-eval` (not timed), then `pytest FILE -m "not gate" --llmeval-no-cache
  --llmeval-no-history` in a subprocess: the embedded model, its fp32 folder, the default batching;
- lm-eval: `simple_evaluate` in a subprocess with the `hf` model on the same folder (fp32, CPU, batch size
  16, as bench/loglikelihood.py) and the task loaded from the same files.

Wall time from launch to exit (imports, model load and scoring: what a user waits for), best of
`--repeats`, alternating. Printed per task: documents, requests, both times, the ratio, and whether every
document's acc and acc_norm agree (TruthfulQA MC2's acc, a probability share, within 1e-4). Target
(issue 54): ours >= 2x lm-eval on the multiple-choice tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "lm_eval"
# The evaluated split of each task's test data, and the field a copy's marker goes in front of.
SPLITS = {
    "arc_easy": ("test", "question"),
    "hellaswag": ("validation", "ctx_a"),
    "piqa": ("validation", "goal"),
    "boolq": ("validation", "passage"),
    "mmlu_astronomy": ("test", "question"),
    "arc_challenge": ("test", "question"),
    "winogrande": ("validation", "sentence"),  # each choice completes the context (multiple_input)
    "truthfulqa_mc2": ("validation", "question"),  # several true answers, the probability share
}

LM_EVAL = """
import json, logging, sys
logging.disable(logging.WARNING)
import lm_eval
from lm_eval.tasks import TaskManager
from pytest_llmeval import lm_eval_tasks
from pytest_llmeval.models import embedded_model_dir
task, shots, files = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
manager = TaskManager()
tasks = lm_eval_tasks._load([task], lm_eval_tasks.parse_data_files(files), manager)
out = lm_eval.simple_evaluate(model="hf", model_args={"pretrained": str(embedded_model_dir()),
    "dtype": "float32"}, tasks=list(tasks.values()), num_fewshot=shots, device="cpu", batch_size=16,
    log_samples=True, task_manager=manager)
json.dump({str(s["doc_id"]): {"acc": s.get("acc"), "acc_norm": s.get("acc_norm")}
           for s in out["samples"][task]}, open(sys.argv[4], "w"))
"""


def copied_data(task: str, copies: int, folder: Path) -> list[str]:
    """--data-files values: the evaluated split `copies` times over (each document marked), the rest as is."""
    split, field = SPLITS[task]
    out = []
    for path in sorted((DATA / task).glob("*.jsonl")):
        if path.stem != split:
            out.append(f"{path.stem}={path}")
            continue
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        target = folder / task / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as handle:
            for copy in range(copies):
                for record in records:
                    marked = dict(record, **{field: f"({copy + 1}) {record[field]}"})
                    handle.write(json.dumps(marked, ensure_ascii=False) + "\n")
        out.append(f"{split}={target}")
    return out


def timed(argv: list[str], cwd: Path) -> float:
    env = dict(os.environ, TQDM_DISABLE="1")
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"{' '.join(argv[:4])}... exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return seconds


def ours_metrics(results: Path) -> dict[str, dict[str, Any]]:
    document = json.loads(results.read_text(encoding="utf-8"))
    out = {}
    for benchmark in document["benchmarks"]:
        for row in benchmark["rows"]:
            doc_id = str(row["evaluation_config"]["lm_eval"]["doc_id"])
            out[doc_id] = dict(row["models"]["base"]["score"]["lm_eval"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tasks", nargs="+", default=list(SPLITS))
    args = parser.parse_args()
    python = sys.executable
    print(f"{os.cpu_count()} CPUs, embedded SmolLM2-135M fp32, up to {args.shots}-shot, lm-eval hf batch 16")
    head = f"{'task':>16} {'shots':>5} {'docs':>5} {'reqs':>5} {'ours s':>7} {'lm-eval s':>9} {'ratio':>6}"
    print(head + "  agree")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for task in args.tasks:
            files = copied_data(task, args.copies, root / "data")
            out = root / task
            # As many examples as asked, where the task's few-shot split holds enough (lm-eval draws one
            # more than asked from a random sampler, to leave the document itself out).
            for shots in range(args.shots, -1, -1):
                convert = [python, "-m", "pytest_llmeval", "convert", "lm-eval", task, f"--out={out}"]
                convert += [f"--data-files={f}" for f in files] + [f"--num-fewshot={shots}"]
                if subprocess.run(convert, check=False, capture_output=True).returncode == 0:
                    break
            rows = [json.loads(line) for line in (out / f"{task}.jsonl").read_text().splitlines()]
            requests = sum(len(r["evaluation_config"]["choices"]) for r in rows)
            ours_argv = [python, "-m", "pytest", str(out / f"{task}.jsonl"), "-q", "-m", "not gate"]
            ours_argv += [
                "--llmeval-no-cache",
                "--llmeval-no-history",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
            ]
            theirs_json = root / f"{task}-lm-eval.json"
            theirs_argv = [python, "-c", LM_EVAL, task, str(shots), json.dumps(files), str(theirs_json)]
            best_ours = best_theirs = float("inf")
            for _ in range(args.repeats):
                best_ours = min(best_ours, timed(ours_argv, out))
                best_theirs = min(best_theirs, timed(theirs_argv, root))
            ours = ours_metrics(out / "results.json")
            theirs = json.loads(theirs_json.read_text())
            # The metrics the task reports (boolq: acc alone): lm-eval logs None for the others. Right or
            # wrong agree exactly; TruthfulQA MC2's share, computed from log-likelihoods, within 1e-4.
            agree = set(ours) == set(theirs) and all(
                abs(ours[d][k] - v) <= 1e-4 for d in ours for k, v in theirs[d].items() if v is not None
            )
            print(
                f"{task:>16} {shots:>5} {len(rows):>5} {requests:>5} {best_ours:>7.1f} {best_theirs:>9.1f}"
                f" {best_theirs / best_ours:>5.2f}x  {'yes' if agree else 'NO'}"
            )


if __name__ == "__main__":
    main()
