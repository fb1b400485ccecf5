"""PEFT against full fine-tuning (SFT) on the date task, trained and evaluated alike: `make peft-vs-sft`.

    python bench/peft_vs_sft.py [--out DIR] [--steps 40] [--batch-size 8] [--skip-train]

Trains the embedded SmolLM2-135M-Instruct twice on adapters/date-iso/data/train.jsonl with the Hugging Face
Trainer and pytest_llmeval's EvaluationCallback (loss, learning rate and gradient norm every step, validation
loss and the memory split every --eval-every steps, the Japanese benchmark's perplexity at the end), the same
rows, prompts (built as the plugin builds them, loss on the answer and its EOS only), steps, batch size and
precision (fp32; --bf16 for autocast), on CPU:

- `lora`: a LoRA adapter shaped like the demo adapter (r 16, alpha 32, every projection of the top 10
  layers), learning rate 1e-3;
- `sft`: every weight of the model, learning rate 3e-5.

Neither run replays unrelated prompts (the demo adapter does): the comparison is of the two methods alone,
so what full fine-tuning costs the out-of-domain benchmark shows. Then one evaluation run
(`pytest --adapter DIR/lora --llmeval-model sft=DIR/sft benchmarks/`) and the comparison with the document's
success criteria (`python -m pytest_llmeval compare`), whose table this prints and whose Markdown report it
writes to DIR/peft_vs_sft.md. Exits with the comparison's status (1 when a primary criterion fails).

Never run it beside another benchmark or the test suite: on 2 cores a contended run misstates the times.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LOG_NAME = "training_log.jsonl"  # the callback's log, in each trained folder, where the plugin finds it


def date_iso_train() -> Any:
    """adapters/date-iso/train.py as a module: its examples and collate are the ones the demo adapter used."""
    spec = importlib.util.spec_from_file_location(
        "date_iso_train", REPO / "adapters" / "date-iso" / "train.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def train(variant: str, out: Path, args: argparse.Namespace) -> float:
    """Train one variant into out/<variant> (adapter or model folder, with the callback's log): wall s."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Trainer, TrainingArguments

    from pytest_llmeval.models import EMBEDDED_ALIAS, ModelSpec, load
    from pytest_llmeval.training_callback import EvaluationCallback

    recipe = date_iso_train()
    torch.set_num_threads(args.threads)
    loaded = load(ModelSpec(device="cpu", dtype="float32"))  # the plugin's loader: the embedded model
    model, tokenizer = loaded.model, loaded.tokenizer
    rows = recipe.read_jsonl(recipe.TRAIN_FILE)
    examples = recipe.build_examples(tokenizer, rows, eos=[True] * len(rows), system=None)
    held = len(examples) // 10  # validation rows for eval_loss, never trained on
    pad_id = int(tokenizer.pad_token_id)
    target = out / variant
    if variant == "lora":
        n_layers = int(model.config.num_hidden_layers)
        lora = LoraConfig(
            r=16,
            lora_alpha=32,
            lora_dropout=0.05,
            target_modules=list(recipe.TARGET_MODULES),
            layers_to_transform=list(range(n_layers - 10, n_layers)),
            layers_pattern="layers",
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    model.train()
    targs = TrainingArguments(
        output_dir=str(target),
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=32,
        learning_rate=1e-3 if variant == "lora" else 3e-5,
        lr_scheduler_type="linear",
        warmup_steps=5,
        max_grad_norm=1.0,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=args.eval_every,
        save_strategy="no",
        include_num_input_tokens_seen=True,
        report_to="none",
        # bf16 autocast only where the CPU computes bf16 natively (AVX512-BF16, AMX): elsewhere (these
        # machines' AMD EPYC) it is emulated and a step took a minute instead of seconds.
        bf16=args.bf16,
        use_cpu=True,
        disable_tqdm=True,
        seed=8601,
        remove_unused_columns=False,
    )
    callback = EvaluationCallback(
        target / LOG_NAME,
        eval_every=args.eval_every,
        measure_every=args.steps,
        benchmark=REPO / "benchmarks" / "japanese_text.jsonl",
    )
    trainer = Trainer(
        model=model,
        args=targs,
        train_dataset=examples[held:],
        eval_dataset=examples[:held],
        processing_class=tokenizer,
        data_collator=lambda batch: recipe.collate(batch, pad_id),
        callbacks=[callback],
    )
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    trainer.save_state()  # trainer_state.json beside the callback's log
    if variant == "lora":
        model.peft_config["default"].base_model_name_or_path = EMBEDDED_ALIAS
        model.save_pretrained(target)
    else:
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
    print(f"{variant}: trained {args.steps} steps in {wall:.0f} s -> {target}", flush=True)
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/llmeval-peft-vs-sft"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (fast only with native CPU bf16)")
    parser.add_argument("--skip-train", action="store_true", help="evaluate and compare what --out holds")
    parser.add_argument(
        "--variant", choices=("lora", "sft"), help=argparse.SUPPRESS
    )  # one training, in-process
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    walls: dict[str, float] = {}
    if args.variant:
        print("WALL", train(args.variant, args.out, args))
        return 0
    if not args.skip_train:
        for variant in ("lora", "sft"):
            # A process per variant: each starts from the untouched embedded weights, its own peak memory.
            command = [sys.executable, __file__, f"--variant={variant}", *sys.argv[1:]]
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
            if done.returncode:
                sys.stderr.write(done.stderr[-3000:])
                print(f"training {variant} failed (exit {done.returncode})", file=sys.stderr)
                return 2
            walls[variant] = float(done.stdout.strip().splitlines()[-1].split()[-1])
            print(f"{variant}: training wall {walls[variant]:.0f} s", flush=True)
    results = args.out / "results.json"
    start = time.perf_counter()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--adapter={args.out / 'lora'}",
            f"--llmeval-model=sft={args.out / 'sft'}",
            f"--llmeval-results={results}",
            "--llmeval-no-history",
            "benchmarks/",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    print(run.stdout[-2500:])
    print(f"evaluation wall {time.perf_counter() - start:.0f} s (exit {run.returncode})", flush=True)
    if not results.exists():
        print(run.stderr[-3000:], file=sys.stderr)
        return 2
    compare = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_llmeval",
            "compare",
            str(results),
            f"--peft-training-log={args.out / 'lora' / LOG_NAME}",
            f"--sft-training-log={args.out / 'sft' / LOG_NAME}",
            f"--markdown={args.out / 'peft_vs_sft.md'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    print(compare.stdout)
    sys.stderr.write(compare.stderr)
    if walls:
        print(json.dumps({"training_wall_s": walls}))
    return compare.returncode


if __name__ == "__main__":
    sys.exit(main())
