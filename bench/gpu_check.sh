#!/usr/bin/env bash
# The device check of the CUDA path, as run on a lent GPU machine (see BENCHMARKS.md).
#
# Prepare here (the GPU machine cannot download; only config and tokenizer files travel, no weights; the
# image's transformers is older than ours, so ours travels as a wheel):
#   mkdir -p .gpu/smol && cp "$(.venv/bin/python -c 'from pytest_llmeval.models import embedded_model_dir as d; print(d())')"/{config.json,generation_config.json,tokenizer.json,tokenizer_config.json,chat_template.jinja} .gpu/smol/
#   python3 -m pip download --no-deps --only-binary=:all: -d .gpu/whl transformers==5.24.0 peft==0.21.2
# then run `bash bench/gpu_check.sh` there with `.gpu` carried. Writes 8 files into $OUT (default
# ./gpu-out): the device machine brings back no more.
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export OUT PYTHONPATH=$PWD PYTHONUNBUFFERED=1
if ls .gpu/whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD
fi
S=$OUT/summary.txt
# Results go to $R (each run writes spot_check.md beside its results.json too) and the chosen files are
# copied to $OUT at the end.
W=/tmp/w; R=$W/res; mkdir -p $W $R
export R
log() { tee -a "$S"; }
python3 -c "import torch, transformers, peft, pytest, xdist; print('versions', torch.__version__, transformers.__version__, peft.__version__, pytest.__version__, xdist.__version__)" | log
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | log
t0=$(date +%s)
# Each step has a time limit: one that hangs must not take the rest of the check with it.
# Not installed there (PYTHONPATH): load the plugin by name; installed (a dry run here): its entry point does.
P="-p pytest_llmeval.plugin"
python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.name == 'llmeval' for e in m.entry_points(group='pytest11')))" && P=""
timeout 240 python3 bench/cuda_check.py --config-dir .gpu/smol --work $W 2>&1 | grep -v -E "Loading weights|warn|Writing model" | log
PT="timeout 150 python3 -m pytest $P -p no:cacheprovider --base-model=$W/smol-random --adapter=$W/adapter-random benchmarks/ -q --tb=no -W ignore --llmeval-no-history"
s=$(date +%s); $PT --llmeval-results=$R/results_serial.json 2>&1 | tail -3; e=$(date +%s); echo "serial main job wall: $((e - s)) s" | log
s=$(date +%s); $PT -n 2 --llmeval-no-cache --llmeval-results=$R/results_n2.json 2>&1 | tail -3; e=$(date +%s); echo "-n 2 main job wall: $((e - s)) s" | log
python3 - <<'PY' | log
import json, os
o = os.environ["R"]
a, b = (json.load(open(f"{o}/results_{n}.json")) for n in ("serial", "n2"))
# Timings (cost) and the cache's counts aside (the -n 2 run generates everything: --llmeval-no-cache).
drop = {"timestamp", "inference_config", "cost"}
strip = lambda d: {k: strip(v) for k, v in d.items() if k not in drop} if isinstance(d, dict) else [strip(v) for v in d] if isinstance(d, list) else d
print("serial == -n 2 (timestamps, timings and cache counts aside):", strip(a) == strip(b))
print("hardware:", a["hardware"], "dtype:", a["inference_config"]["dtype"])
for bench in a["benchmarks"]:
    print(bench["benchmark_file"], bench["n_examples"], bench["results"]["base_model_score"], bench["results"]["adapter_score"])
print("cache, first serial run:", a["inference_config"]["cache"])
print("cost, serial:", json.dumps({k: a["cost"].get(k) for k in ("total", "memory", "models")})[:900])
PY
# Few-shot prompts on CUDA (5 examples drawn per row from the benchmark itself): long shared prefixes, bf16.
s=$(date +%s); $PT --llmeval-no-cache --llmeval-fewshot=5 --llmeval-results=$R/results_fewshot.json 2>&1 | tail -2; e=$(date +%s); echo "few-shot (K=5) main job wall: $((e - s)) s" | log
# Two adapters on one set of base weights (set_adapter per column), serially.
s=$(date +%s); $PT --adapter=$W/adapter-random2 --llmeval-no-cache --llmeval-results=$R/results_two.json 2>&1 | tail -2; e=$(date +%s); echo "two-adapter main job wall: $((e - s)) s" | log
python3 - <<'PY' | log
import json, os
o = os.environ["R"]
f = json.load(open(f"{o}/results_fewshot.json"))
print("few-shot prompt:", json.dumps(f["inference_config"].get("prompt"))[:300])
for bench in f["benchmarks"]:
    print("few-shot", bench["benchmark_file"], bench["results"]["base_model_score"], bench["results"]["adapter_score"])
t = json.load(open(f"{o}/results_two.json"))
print("two adapters, models:", [m.get("name") or m.get("adapter_name") for m in t.get("models", [])][:6])
for bench in t["benchmarks"][:3]:
    print("two", bench["benchmark_file"], {k: v for k, v in bench["results"].items() if "score" in k})
PY
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
  timeout 120 python3 -m pytest $P -p no:cacheprovider --base-model=$W/smol-random --adapter=$W/adapter-random \
    $W/mixed/mixed.jsonl --rootdir=$W/mixed -m "not gate" -q --tb=line -W ignore --llmeval-no-history -n $n --llmeval-results=$R/mixed_n$n.json 2>&1 | tail -2
done
python3 - <<'PY' | log
import json, os
o = os.environ["R"]
a, b = (json.load(open(f"{o}/mixed_n{n}.json")) for n in (0, 2))
rows = lambda d: {r["id"]: (r["models"]["base"]["score"], r["models"]["adapter"]["score"], r["error"]) for r in d["benchmarks"][0]["rows"]}
ra, rb = rows(a), rows(b)
print("mixed rows, serial vs -n 2 equal:", ra == rb, "; hardware:", a["hardware"], "/", b["hardware"])
print("judge:", ra["judge"][2] or ra["judge"][0])
print("perplexity:", a["benchmarks"][0]["perplexity"]["base"]["perplexity"], a["benchmarks"][0]["perplexity"]["adapter"]["perplexity"])
pick = lambda score: (score or {}).get("predicted", (score or {}).get("value"))
print("mc picks base/adapter:", [pick(ra[f"mc{i}"][0]) for i in range(8)], [pick(ra[f"mc{i}"][1]) for i in range(8)])
PY
# Training evidence on CUDA: LoRA against a full fine-tune with EvaluationCallback (bf16 mixed precision).
timeout 240 python3 bench/cuda_training.py --base $W/smol-random --out $W/train ${TRAIN_ARGS:-} 2>&1 | grep -v -E "^\{'|Loading weights|warn|Writing model" | log
cp $R/results_serial.json $R/results_n2.json $R/results_fewshot.json $R/mixed_n0.json $R/mixed_n2.json $W/train/train_lora.jsonl $W/train/train_full.jsonl $OUT/
echo "total wall: $(( $(date +%s) - t0 )) s" | log
