#!/usr/bin/env bash
# The device check of the CUDA path, as run on a lent GPU machine (see BENCHMARKS.md).
#
# Prepare here (the GPU machine cannot download; only config and tokenizer files travel, no weights):
#   mkdir -p .gpu/smol && cp "$(.venv/bin/python -c 'from pytest_llmeval.models import embedded_model_dir as d; print(d())')"/{config.json,generation_config.json,tokenizer.json,tokenizer_config.json,chat_template.jinja} .gpu/smol/
# then run `bash bench/gpu_check.sh` there with `.gpu` carried. Writes into $OUT (default ./gpu-out).
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
W=/tmp/w; mkdir -p $W
python3 -c "import torch, transformers, peft, pytest, xdist; print('versions', torch.__version__, transformers.__version__, peft.__version__, pytest.__version__, xdist.__version__)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 bench/cuda_check.py --config-dir .gpu/smol --work $W 2>&1 | grep -v -E "Loading weights|warn" | tee $OUT/cuda_check.txt
PT="python3 -m pytest -p pytest_llmeval.plugin -p no:cacheprovider --base-model=$W/smol-random --adapter=$W/adapter-random benchmarks/ -q --tb=no -W ignore"
s=$(date +%s); $PT --llmeval-results=$OUT/results_serial.json 2>&1 | tail -6; e=$(date +%s); echo "serial main job wall: $((e - s)) s"
s=$(date +%s); $PT -n 2 --llmeval-no-cache --llmeval-results=$OUT/results_n2.json 2>&1 | tail -4; e=$(date +%s); echo "-n 2 main job wall: $((e - s)) s"
python3 - <<'PY'
import json, os
o = os.environ["OUT"]
a, b = (json.load(open(f"{o}/results_{n}.json")) for n in ("serial", "n2"))
# Timestamps and the cache's counts aside (the -n 2 run generates everything: --llmeval-no-cache).
strip = lambda d: {k: v for k, v in d.items() if k not in ("timestamp", "inference_config")}
print("serial == -n 2 (timestamps and cache counts aside):", strip(a) == strip(b))
print("hardware:", a["hardware"], "dtype:", a["inference_config"]["dtype"])
for bench in a["benchmarks"]:
    print(bench["benchmark_file"], bench["n_examples"], bench["results"]["base_model_score"], bench["results"]["adapter_score"])
print("cache, first serial run:", a["inference_config"]["cache"])
PY
# The generation cache on CUDA (bf16: keys cover the whole chunk): a second serial run is served from it.
s=$(date +%s); $PT --llmeval-results=$OUT/results_warm.json 2>&1 | tail -2; e=$(date +%s); echo "warm serial main job wall: $((e - s)) s"
# Measured types and the judge on CUDA: multiple choice (continuation log-likelihoods), perplexity rows,
# an llm_judge row (sampling with per-prompt CUDA generators), under -n 2 on one GPU (both workers: cuda:0).
mkdir -p $W/mixed && python3 - "$W/mixed/mixed.jsonl" <<'PY'
import json, sys
rows = [{"id": f"mc{i}", "instruction": f"Pick the colour number {i}.", "input": "", "expected_output": "blue",
         "evaluation_type": "multiple_choice", "evaluation_config": {"choices": ["red", "blue", "green"]},
         "difficulty": "easy"} for i in range(8)]
rows += [{"id": f"ppl{i}", "instruction": "", "input": "The quick brown fox jumps over the lazy dog. " * (i + 1),
          "expected_output": "", "evaluation_type": "perplexity", "evaluation_config": {"threshold": 1e9, "max_length": 64, "stride": 32},
          "difficulty": "medium"} for i in range(8)]
rows += [{"id": "judge", "instruction": "Say hello.", "input": "", "expected_output": "Hello!", "evaluation_type": "llm_judge",
          "evaluation_config": {"rubric": "Grade it.", "max_new_tokens": 8, "judge_max_new_tokens": 8}, "difficulty": "hard"}]
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
for n in 0 2; do
  python3 -m pytest -p pytest_llmeval.plugin -p no:cacheprovider --base-model=$W/smol-random --adapter=$W/adapter-random \
    $W/mixed/mixed.jsonl --rootdir=$W/mixed -m "not gate" -q --tb=line -W ignore -n $n --llmeval-results=$OUT/mixed_n$n.json 2>&1 | tail -4
done
python3 - <<'PY'
import json, os
o = os.environ["OUT"]
a, b = (json.load(open(f"{o}/mixed_n{n}.json")) for n in (0, 2))
rows = lambda d: {r["id"]: (r["base"]["score"], r["adapter"]["score"], r["error"]) for r in d["benchmarks"][0]["rows"]}
ra, rb = rows(a), rows(b)
print("mixed rows, serial vs -n 2 equal:", ra == rb, "; devices:", a["hardware"]["device"], b["hardware"]["device"])
print("judge:", ra["judge"][2] or ra["judge"][0])
print("perplexity:", a["benchmarks"][0]["perplexity"]["base"]["perplexity"], a["benchmarks"][0]["perplexity"]["adapter"]["perplexity"])
print("mc picks base/adapter:", [ra[f"mc{i}"][0]["predicted"] for i in range(8)], [ra[f"mc{i}"][1]["predicted"] for i in range(8)])
PY
