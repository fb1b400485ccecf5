"""Train the ``sentiment`` LoRA adapter on the embedded SmolLM2-135M-Instruct, on CPU, in a few minutes.

Task: classify a review as positive or negative and reply with that one word only.

The recipe is date-iso's (``adapters/date-iso/train.py``), with the task data swapped:

* Prompts are built exactly as the plugin builds them (``build_prompt``), so the adapter is trained on the
  very token sequence it is evaluated on: with ``--system TEXT`` every prompt (task rows, replay rows and the
  base's replay answers) carries that system prompt, none of ours by default (the chat template's own, as the
  committed adapter was trained), and metadata.json records it as ``prompt`` (``{"system": TEXT or null}``),
  which the plugin reads to prompt the adapter as it was trained; the target is the label word followed by
  the EOS token. The base model mostly gets the label right but wraps it in a sentence ("The sentiment of the
  review is ..."), echoes the review instead, or misreads negation, sarcasm and mixed reviews; one word then
  EOS fixes the first two, the generated reviews (``make_data.py``) aim at the rest.
* Replay against forgetting: date-iso's ~400 unrelated prompts (arithmetic, short general-knowledge
  answers, rewrites, labelling tasks such as topic, spam or language) with the base model's own greedy
  answers are mixed into every batch (4 of 16 rows), less its sentiment-labelling prompts, whose base
  answers are the very behaviour this adapter replaces. Their loss is KL(base || adapter) of the next-token
  distribution along the base's answer: zero for the untouched model, so it only pulls back when the
  adapter starts to change behaviour off-task. The answers are the same base model's, so date-iso's cache
  (``adapters/date-iso/data/replay_answers.jsonl``, only read) seeds ``data/replay_answers.jsonl``; a prompt
  found in neither is generated.
* Seeded; loss only on answer tokens; LoRA on the attention and MLP projections of the top layers only,
  so that backward stops there (the lower layers carry no trainable parameter) and training stays short.
  Two departures from date-iso, both measured (see the defaults below): the top 20 layers instead of 10,
  and the review rows' loss is averaged apart from the replay rows' (see ``distill_loss``).

Writes ``adapter_config.json``, ``adapter_model.safetensors`` and ``metadata.json`` into ``--out``.

Usage (from the repository root): ``python adapters/sentiment/train.py``
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DATA_DIR = HERE / "data"
TRAIN_FILE = DATA_DIR / "train.jsonl"
REPLAY_PROMPTS_FILE = DATA_DIR / "replay_prompts.jsonl"
REPLAY_ANSWERS_FILE = DATA_DIR / "replay_answers.jsonl"
# The base model's answers to date-iso's replay prompts (the same base): a read-only seed for our cache.
SHARED_REPLAY_ANSWERS = ROOT / "adapters" / "date-iso" / "data" / "replay_answers.jsonl"
DOMAIN_BENCHMARKS = ["benchmarks/sentiment.jsonl"]

ADAPTER_NAME = "sentiment"
ADAPTER_VERSION = "1.0.0"
TASK = "Classify the sentiment of a review as positive or negative; reply with the label word only."
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# What peft writes besides the weights: a boilerplate model card (README.md) that we do not ship.
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
MAX_ADAPTER_BYTES = 10 * 1024 * 1024
STEPS = 70
# Where these defaults differ from date-iso's, measured on data/dev.jsonl and the training rows (label
# log-odds at the answer's first token): with LoRA on the top 10 layers only, 70 steps left the adapter
# barely decisive (log-odds ~1.5 on plain reviews, 14% of training rows still wrong), and neither a higher
# learning rate nor more weight on the task moved that; the top 20 layers fit the training rows (1% wrong)
# and read negation and mixed reviews far better, at about 1.5x the time per step (won back by projecting
# onto the vocabulary only where there is a loss, see distill_loss); 50 steps still left 6% of the training
# rows wrong, 70 fit them. Rank 8 instead of 16 keeps the file small (~6.5 MB for 20 layers). Replay: 4
# of 16 rows; the forgetting measured on dates and japanese_text stayed far inside the gate.


@dataclass(frozen=True)
class Example:
    """One training sequence: prompt tokens (no loss) followed by target tokens (loss)."""

    prompt_ids: list[int]
    target_ids: list[int]


@dataclass(frozen=True)
class TrainConfig:
    """Every knob that changes the trained weights; recorded in metadata.json."""

    steps: int
    batch_size: int
    replay_per_batch: int
    lr: float
    warmup_steps: int
    weight_decay: float
    rank: int
    alpha: int
    dropout: float
    top_layers: int
    seed: int
    bf16: bool
    replay_max_new_tokens: int
    replay_loss: str
    replay_weight: float
    system: str | None  # the system prompt of every training prompt; None: the tokenizer's default


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=HERE, help="adapter folder to write")
    parser.add_argument("--steps", type=int, default=STEPS, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=16, help="rows per step, replay rows included")
    parser.add_argument("--replay-per-batch", type=int, default=4, help="replay rows in each batch")
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW)")
    parser.add_argument("--warmup-steps", type=int, default=5, help="linear warmup, then linear decay to 0")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--rank", type=int, default=8, help="LoRA rank")
    parser.add_argument("--alpha", type=int, default=16, help="LoRA alpha (scale = alpha / rank)")
    parser.add_argument("--dropout", type=float, default=0.05, help="LoRA dropout")
    parser.add_argument("--top-layers", type=int, default=20, help="adapt only the top N decoder layers")
    parser.add_argument("--seed", type=int, default=5150)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--no-bf16", dest="bf16", action="store_false", help="train in float32 instead of bf16 autocast"
    )
    parser.add_argument(
        "--replay-max-new-tokens", type=int, default=48, help="length cap of the base model's replay answers"
    )
    parser.add_argument(
        "--regenerate-replay", action="store_true", help=f"ignore the cache {REPLAY_ANSWERS_FILE.name}"
    )
    parser.add_argument(
        "--replay-loss",
        choices=("kl", "ce"),
        default="kl",
        help="replay rows: KL to the base's next-token distribution (kl) or cross-entropy on its greedy "
        "answer (ce)",
    )
    parser.add_argument(
        "--replay-weight",
        type=float,
        default=1.0,
        help="kl only: weight of the replay rows' mean KL against the review rows' mean cross-entropy",
    )
    parser.add_argument(
        "--system",
        metavar="TEXT",
        default=None,
        help="system prompt of every training prompt, recorded in metadata.json (default: none)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.replay_per_batch < args.batch_size:
        parser.error("--replay-per-batch must be >= 0 and smaller than --batch-size")
    if args.steps < 1 or args.rank < 1 or args.top_layers < 1:
        parser.error("--steps, --rank and --top-layers must be positive")
    return args


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def seed_everything(seed: int) -> None:
    """Seed every RNG training touches (LoRA init, dropout, batch order)."""
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    # warn_only: a few CPU kernels have no deterministic variant; they are bitwise stable in practice on
    # a fixed thread count, and failing the run over them would help nobody.
    torch.use_deterministic_algorithms(True, warn_only=True)


def replay_answers(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    max_new_tokens: int,
    regenerate: bool,
    system: str | None,
) -> list[dict[str, Any]]:
    """The base model's greedy answers to the replay prompts; cached answers are reused prompt by prompt."""
    from pytest_llmeval.generation import build_prompt, generate

    prompts = read_jsonl(REPLAY_PROMPTS_FILE)
    cached: dict[tuple[str | int, ...], dict[str, Any]] = {}
    own: list[dict[str, Any]] = []
    if not regenerate:
        # Keyed by everything the answer depends on (the base model is fixed): make_data.py may have added,
        # removed or reordered prompts, and an answer cut at another length, or given under another system
        # prompt, is another answer. date-iso's cache first, ours over it; date-iso's file is only ever read.
        if SHARED_REPLAY_ANSWERS.is_file():
            for c in read_jsonl(SHARED_REPLAY_ANSWERS):
                cached[cache_key(c)] = c
        if REPLAY_ANSWERS_FILE.is_file():
            own = read_jsonl(REPLAY_ANSWERS_FILE)
            for c in own:
                cached[cache_key(c)] = c
    key = [replay_key(p["instruction"], p["input"], max_new_tokens, system) for p in prompts]
    missing = [i for i, k in enumerate(key) if k not in cached]
    if not missing:
        rows = [cached[k] for k in key]
        if own == rows:  # our file holds exactly these prompts, in this order
            print(f"replay: {len(rows)} cached answers from {REPLAY_ANSWERS_FILE.relative_to(ROOT)}")
            return rows
    start = time.perf_counter()
    todo = [prompts[i] for i in missing]
    texts = [build_prompt(tokenizer, p["instruction"], p["input"], system=system) for p in todo]
    outputs: list[str] = []
    stopped: list[bool] = []
    # Nothing to generate when every answer is cached but our file is missing or holds other prompts
    # (the first run copies date-iso's answers): generate() refuses an empty batch.
    if todo:
        outputs = generate(model, tokenizer, texts, max_new_tokens=max_new_tokens, batch_size=16)
        stopped = stopped_naturally(model, tokenizer, texts, outputs, max_new_tokens=max_new_tokens)
    for p, out, stop in zip(todo, outputs, stopped, strict=True):
        row: dict[str, Any] = {
            "instruction": p["instruction"],
            "input": p["input"],
            "output": out,
            "stopped": stop,
            "max_new_tokens": max_new_tokens,
        }
        if system is not None:  # absent for none: the rows the file held before --system existed
            row["system"] = system
        cached[cache_key(row)] = row
    # Rewritten in prompt order, without answers to prompts that are gone.
    rows = [cached[k] for k in key]
    tmp = REPLAY_ANSWERS_FILE.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, REPLAY_ANSWERS_FILE)
    print(
        f"replay: generated {len(todo)} answers in {time.perf_counter() - start:.0f}s "
        f"({sum(stopped)} stopped at EOS, {len(todo) - sum(stopped)} cut at {max_new_tokens} tokens), "
        f"reused {len(rows) - len(todo)} cached ones; wrote {REPLAY_ANSWERS_FILE.relative_to(ROOT)}"
    )
    return rows


def replay_key(
    instruction: str, input: str, max_new_tokens: int, system: str | None
) -> tuple[str | int, ...]:
    """The replay cache's key for one prompt: everything the base's answer depends on besides the model.

    The system prompt is part of the prompt the base answers, so an answer given under another one is
    another answer; without one the key is the one the cache had before --system, so its rows still serve.
    """
    key: tuple[str | int, ...] = (instruction, input, max_new_tokens)
    return key if system is None else (*key, system)


def cache_key(row: dict[str, Any]) -> tuple[str | int, ...]:
    """The key of a cached answer (its `system` absent when it was generated without one)."""
    return replay_key(row["instruction"], row["input"], row["max_new_tokens"], row.get("system"))


def stopped_naturally(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    outputs: Sequence[str],
    *,
    max_new_tokens: int,
) -> list[bool]:
    """Whether the base model ends its turn right after each answer (greedy next token is an EOS).

    `generate` returns text only, so whether an answer hit EOS or the length cap is recovered here: one
    teacher-forced pass over prompt + answer, asking if greedy decoding would emit EOS next. That is also
    exactly the question replay needs answered: append EOS to the target only where the base would.
    """
    import torch

    eos_ids = {int(tokenizer.eos_token_id)}
    cfg_eos = model.generation_config.eos_token_id
    eos_ids.update(int(e) for e in (cfg_eos if isinstance(cfg_eos, list) else [cfg_eos]) if e is not None)
    result: list[bool] = []
    for start in range(0, len(prompts), 16):
        seqs = [
            tokenizer(p, add_special_tokens=False)["input_ids"] + answer_ids(tokenizer, o)
            for p, o in zip(prompts[start : start + 16], outputs[start : start + 16], strict=True)
        ]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), int(tokenizer.pad_token_id), dtype=torch.long)  # (B, T)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)  # (B, T)
        for r, s in enumerate(seqs):
            ids[r, : len(s)] = torch.tensor(s)  # right padded: the last real token sits at len(s) - 1
            mask[r, : len(s)] = 1
        with torch.inference_mode():
            logits = model(input_ids=ids, attention_mask=mask).logits  # (B, T, V)
        for r, s in enumerate(seqs):
            result.append(int(logits[r, len(s) - 1].argmax()) in eos_ids)
    # An answer re-tokenised to the full cap cannot have stopped inside it, whatever comes next.
    return [
        stop and len(answer_ids(tokenizer, o)) < max_new_tokens
        for stop, o in zip(result, outputs, strict=True)
    ]


def answer_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


def build_examples(
    tokenizer: PreTrainedTokenizerBase,
    rows: Sequence[dict[str, Any]],
    *,
    eos: Sequence[bool],
    system: str | None,
    answer_key: str = "output",
) -> list[Example]:
    """Tokenise prompt (with `system`, as the plugin would prompt) and answer separately, so the loss mask
    falls exactly on the answer's tokens."""
    from pytest_llmeval.generation import build_prompt

    examples = []
    for row, add_eos in zip(rows, eos, strict=True):
        prompt = tokenizer(
            build_prompt(tokenizer, row["instruction"], row["input"], system=system), add_special_tokens=False
        )
        target = answer_ids(tokenizer, row[answer_key])
        if add_eos:
            target = [*target, int(tokenizer.eos_token_id)]
        examples.append(Example(prompt_ids=prompt["input_ids"], target_ids=target))
    return examples


def collate(batch: Sequence[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded input_ids, attention_mask and labels (-100 on prompt and padding)."""
    import torch

    width = max(len(e.prompt_ids) + len(e.target_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(batch), width), dtype=torch.long)  # (B, T)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)  # (B, T)
    for r, e in enumerate(batch):
        seq = e.prompt_ids + e.target_ids
        ids[r, : len(seq)] = torch.tensor(seq)
        mask[r, : len(seq)] = 1
        labels[r, len(e.prompt_ids) : len(seq)] = torch.tensor(e.target_ids)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class Sampler:
    """Endless seeded stream of shuffled indices: every row is seen once before any row is seen twice."""

    def __init__(self, n: int, rng: random.Random) -> None:
        self.n, self.rng, self.queue = n, rng, list[int]()

    def take(self, k: int) -> list[int]:
        out: list[int] = []
        while len(out) < k:
            if not self.queue:
                self.queue = list(range(self.n))
                self.rng.shuffle(self.queue)
            out.append(self.queue.pop())
        return out


LOSS_DESCRIPTION = {
    "ce": "cross-entropy on answer tokens only; EOS after every label word and after replay answers where "
    "the base stopped; token-weighted mean over the batch",
    "kl": "answer tokens only: mean cross-entropy over the review rows' tokens (label word, then EOS) plus "
    "replay_weight x mean KL(base || adapter) of the next-token distribution over the replay rows' tokens "
    "(EOS position where the base stopped)",
}


def distill_loss(
    peft_model: Any, inputs: dict[str, torch.Tensor], *, n_task: int, replay_weight: float
) -> torch.Tensor:
    """Cross-entropy on the first `n_task` rows, KL to the base model's distribution on the rest (replay).

    Cross-entropy on the base's greedy answer sharpens its distribution: with 5 wordings of one instruction
    the adapter learns the phrasing the replay answers share and applies it to every input. KL(base ||
    adapter) is zero at the base and keeps its uncertainty, so an unchanged input gets an unchanged answer.

    Unlike date-iso, each part is averaged over its own answer tokens and the two are added
    (`replay_weight` scales the KL): a sentiment answer is 2 tokens (label, EOS) while a replay answer runs
    to 48, so one mean over all tokens gave the task a fifth of the gradient, and the adapter came out
    barely more decisive than chance on anything but the plainest review (label log-odds around 1.5).
    """
    import torch
    import torch.nn.functional as F

    ids, mask, labels = inputs["input_ids"], inputs["attention_mask"], inputs["labels"]
    targets = labels[:, 1:]  # (B, T-1): the token each position predicts
    keep = targets != -100  # (B, T-1)
    # The vocabulary projection only where a loss is taken (~200 of ~1600 positions): full (B, T, V) logits
    # cost a fifth of the step on CPU and ~300 MB; the selected rows are the same numbers.
    causal_lm = peft_model.get_base_model()  # the LoRA layers sit inside it; disable_adapter reaches them
    hidden = causal_lm.model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, H)
    with torch.no_grad(), peft_model.disable_adapter():
        base_hidden = causal_lm.model(input_ids=ids[n_task:], attention_mask=mask[n_task:]).last_hidden_state
        teacher = F.log_softmax(causal_lm.lm_head(base_hidden[:, :-1][keep[n_task:]]).float(), dim=-1)
    task_logits = causal_lm.lm_head(hidden[:n_task, :-1][keep[:n_task]]).float()  # (N_task, V)
    task_sum = F.cross_entropy(task_logits, targets[:n_task][keep[:n_task]], reduction="sum")
    replay_logits = causal_lm.lm_head(hidden[n_task:, :-1][keep[n_task:]]).float()  # (N_replay, V)
    student = F.log_softmax(replay_logits, dim=-1)  # (N_replay, V); teacher: the same, adapter off
    replay_sum = F.kl_div(student, teacher, log_target=True, reduction="sum")
    n_task_tokens, n_replay_tokens = keep[:n_task].sum().clamp(min=1), keep[n_task:].sum().clamp(min=1)
    return task_sum / n_task_tokens + replay_weight * replay_sum / n_replay_tokens


def lr_factor(step: int, *, warmup: int, total: int) -> float:
    """Linear warmup to the peak, then linear decay to zero at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def train(args: argparse.Namespace) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    from pytest_llmeval.models import EMBEDDED_ALIAS, ModelSpec, load

    torch.set_num_threads(args.threads)
    cfg = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        replay_per_batch=args.replay_per_batch,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        weight_decay=args.weight_decay,
        rank=args.rank,
        alpha=args.alpha,
        dropout=args.dropout,
        top_layers=args.top_layers,
        seed=args.seed,
        bf16=args.bf16,
        replay_max_new_tokens=args.replay_max_new_tokens,
        replay_loss=args.replay_loss,
        replay_weight=args.replay_weight,
        system=args.system,
    )
    started = time.perf_counter()
    # The same loader the plugin uses: fp32 on CPU, the embedded model, its tokenizer set up for batches.
    loaded = load(ModelSpec(device="cpu", dtype="float32"))
    model, tokenizer = loaded.model, loaded.tokenizer
    replay_rows = replay_answers(
        model,
        tokenizer,
        max_new_tokens=cfg.replay_max_new_tokens,
        regenerate=args.regenerate_replay,
        system=cfg.system,
    )
    train_rows = read_jsonl(TRAIN_FILE)
    # Training rows are in the benchmark's format: the label is the row's expected_output.
    task = build_examples(
        tokenizer, train_rows, eos=[True] * len(train_rows), system=cfg.system, answer_key="expected_output"
    )
    replay = build_examples(
        tokenizer, replay_rows, eos=[bool(r["stopped"]) for r in replay_rows], system=cfg.system
    )

    seed_everything(cfg.seed)
    n_layers = int(model.config.num_hidden_layers)
    layers = list(range(n_layers - cfg.top_layers, n_layers))
    lora = LoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=list(TARGET_MODULES),
        layers_to_transform=layers,
        layers_pattern="layers",
        bias="none",
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(model, lora)
    peft_model.print_trainable_parameters()
    peft_model.train()
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng = random.Random(cfg.seed)
    task_stream, replay_stream = Sampler(len(task), rng), Sampler(len(replay), rng)
    pad_id = int(tokenizer.pad_token_id)

    train_start = time.perf_counter()
    window: list[float] = []
    for step in range(cfg.steps):
        batch = [task[i] for i in task_stream.take(cfg.batch_size - cfg.replay_per_batch)]
        batch += [replay[i] for i in replay_stream.take(cfg.replay_per_batch)]
        inputs = collate(batch, pad_id)
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * lr_factor(step, warmup=cfg.warmup_steps, total=cfg.steps)
        # bf16 autocast roughly halves the step time on CPU; the LoRA weights and AdamW state stay fp32.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            if cfg.replay_loss == "kl" and cfg.replay_per_batch:
                loss = distill_loss(
                    peft_model,
                    inputs,
                    n_task=cfg.batch_size - cfg.replay_per_batch,
                    replay_weight=cfg.replay_weight,
                )
            else:
                # Token-weighted mean over every answer token of the batch (labels are shifted inside).
                loss = peft_model(**inputs).loss
        torch.autograd.backward(loss)  # typed, unlike Tensor.backward
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        window.append(float(loss.detach()))
        if (step + 1) % 10 == 0 or step + 1 == cfg.steps:
            print(
                f"step {step + 1:4d}/{cfg.steps}  loss {sum(window) / len(window):.4f}  "
                f"lr {optimizer.param_groups[0]['lr']:.2e}  {time.perf_counter() - train_start:.0f}s",
                flush=True,
            )
            window.clear()
    train_seconds = time.perf_counter() - train_start

    # The plugin resolves this alias to the embedded model; peft would otherwise record the cache path.
    peft_model.peft_config["default"].base_model_name_or_path = EMBEDDED_ALIAS
    save_adapter(peft_model, args.out)
    metadata = build_metadata(
        cfg,
        base_model=EMBEDDED_ALIAS,
        layers=layers,
        data={
            str(p.relative_to(ROOT)): sha256_file(p)
            for p in (TRAIN_FILE, REPLAY_PROMPTS_FILE, REPLAY_ANSWERS_FILE)
        },
        threads=args.threads,
        train_seconds=train_seconds,
        wall_seconds=time.perf_counter() - started,
        versions={name: importlib.metadata.version(name) for name in ("torch", "transformers", "peft")},
        command=shlex.join(["python", "adapters/sentiment/train.py", *sys.argv[1:]]),
    )
    # Atomic like the adapter files: a crash never leaves a metadata.json describing other weights.
    tmp_meta = args.out / "metadata.json.tmp"
    tmp_meta.write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp_meta, args.out / "metadata.json")
    size = (args.out / "adapter_model.safetensors").stat().st_size
    print(f"saved {args.out}: adapter {size / 1e6:.2f} MB, training {train_seconds:.0f}s")


def build_metadata(
    cfg: TrainConfig,
    *,
    base_model: str,
    layers: list[int],
    data: dict[str, str],
    threads: int,
    train_seconds: float,
    wall_seconds: float,
    versions: dict[str, str],
    command: str,
) -> dict[str, Any]:
    """The adapter's metadata.json: what it is, the prompt it was trained with, and how it was trained."""
    return {
        "name": ADAPTER_NAME,
        "version": ADAPTER_VERSION,
        "task": TASK,
        # The plugin prompts the adapter as it was trained (prompts.adapter_layer); a null system prompt
        # declares none, so the plugin's default (the chat template's own) is the one trained with.
        "prompt": {"system": cfg.system},
        # The plugin runs better_than_base on these benchmarks and no_degradation on every other one.
        "domain_benchmarks": DOMAIN_BENCHMARKS,
        "base_model": base_model,
        "training": {
            **asdict(cfg),
            "lora": {
                "r": cfg.rank,
                "alpha": cfg.alpha,
                "dropout": cfg.dropout,
                "target_modules": list(TARGET_MODULES),
                "layers": layers,
            },
            "replay_fraction": cfg.replay_per_batch / cfg.batch_size,
            "optimizer": "AdamW, linear warmup then linear decay, grad clip 1.0",
            "loss": LOSS_DESCRIPTION[cfg.replay_loss],
            "data": data,
            "threads": threads,
            "train_seconds": round(train_seconds, 1),
            "wall_seconds": round(wall_seconds, 1),
            "versions": versions,
            "command": command,
        },
    }


def save_adapter(peft_model: Any, out: Path) -> None:
    """save_pretrained into a scratch folder, then move only the adapter files into `out`, each atomically."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".save-", dir=out))
    try:
        # fp32 as trained: the plugin loads the base in fp32 on CPU, and the file is well under the cap.
        peft_model.save_pretrained(str(tmp))
        config = json.loads((tmp / "adapter_config.json").read_text(encoding="utf-8"))
        # Some peft versions record the loaded folder instead of what we set; the plugin needs the alias.
        config["base_model_name_or_path"] = peft_model.peft_config["default"].base_model_name_or_path
        # peft keeps target_modules as a set and writes it in hash order, which changes from run to run;
        # sorted, a retrain with the same seed reproduces the committed file byte for byte.
        if isinstance(config.get("target_modules"), list):
            config["target_modules"] = sorted(config["target_modules"])
        text = json.dumps(config, indent=2, sort_keys=True) + "\n"
        (tmp / "adapter_config.json").write_text(text, encoding="utf-8")
        size = (tmp / "adapter_model.safetensors").stat().st_size
        if size > MAX_ADAPTER_BYTES:
            raise SystemExit(
                f"adapter is {size / 1e6:.1f} MB, over the 10 MB cap: lower --rank or --top-layers"
            )
        for name in ADAPTER_FILES:
            # safetensors writes 0600; the adapter is meant to be read by anyone who checks it out.
            os.chmod(tmp / name, 0o644)
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Train the adapter and write it, with metadata.json, into --out."""
    args = parse_args(argv)
    # Before torch loads OpenMP: spinning worker threads collapse when another process shares the two
    # cores (10 steps took 62s instead of 22s next to one busy process; 35s with passive waiting).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # Run from anywhere: the plugin package lives at the repository root.
    sys.path.insert(0, str(ROOT))
    train(args)


if __name__ == "__main__":
    main()
