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
s=$(date +%s); $PT -n 2 --llmeval-results=$OUT/results_n2.json 2>&1 | tail -4; e=$(date +%s); echo "-n 2 main job wall: $((e - s)) s"
python3 - <<'PY'
import json, os
o = os.environ["OUT"]
a, b = (json.load(open(f"{o}/results_{n}.json")) for n in ("serial", "n2"))
strip = lambda d: {k: v for k, v in d.items() if k != "timestamp"}
print("serial == -n 2 (timestamps aside):", strip(a) == strip(b))
print("hardware:", a["hardware"], "dtype:", a["inference_config"]["dtype"])
for bench in a["benchmarks"]:
    print(bench["benchmark_file"], bench["n_examples"], bench["results"]["base_model_score"], bench["results"]["adapter_score"])
PY
