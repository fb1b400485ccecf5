"""The cache campaign (issue 53): whatever a column reads changes, a cached re-run answers as a run without
the cache does. Every identity is taken from content, so no earlier state's outputs, prompts, identities or
model descriptions may ever be served.

A workspace is built once: the base (a tiny random Llama on the embedded tokenizer cut to 4,096 tokens), a
LoRA adapter on it, a full model column `big` (another one) and a folder `alt` to point it at; two benchmarks,
`bench.jsonl` (a sidecar with a system prompt, a template file and one few-shot example from
`bench.fewshot.jsonl`; a row too long for the context) and `chat.jsonl` (no sidecar: the tokenizer's chat
template, the adapter's declared prompt, the command line's). Their rows are short generations, a
multiple-choice row each and a perplexity row: measurements are cached too. One generation cache and one
recall file serve the whole campaign, so every state an earlier example left behind is there to be served
wrongly.

Hypothesis draws one or two changes per example (CHANGES: every file a model column reads, weights rewritten
in place with the old mtime put back; the adapter's weights, config, declared prompt and a chat template of
its own; `big` pointed elsewhere; the benchmark's sidecar, template, few-shot file and rows; the options that
reach a prompt or an output). Each example restores the workspace's bytes and mtimes, runs with the cache
(which must answer as the pristine run without it did), applies the changes, and runs with the cache and with
--llmeval-no-cache: the two results.json must be the same but for what a cached run changes by design (cache
counts, `weights_loaded`, tokens spent, clocks). Runs are in-process (pytester.runpytest): nothing a run
keeps in this process's modules changed an answer (each failure found replayed in a regression test).

In the normal suite a few derandomised examples run, with the two that broke before issue 53's fix pinned;
the long form (`LLMEVAL_CACHE_CAMPAIGN_EXAMPLES=2000`, TESTING.md) runs as many as asked with fresh
randomness, and `LLMEVAL_CACHE_CAMPAIGN_LOG=FILE` appends one JSON line per example.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import build_tiny_adapter, build_tiny_model, jsonl, row, without_clocks
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("LLMEVAL_CACHE_CAMPAIGN_EXAMPLES", "0"))
LOG = os.environ.get("LLMEVAL_CACHE_CAMPAIGN_LOG")  # a JSONL file: each example's changes and outcome
# A log to replay, example by example in its order: a stale entry is left by one example and served in a
# later one, which hypothesis's shrinking (the failing example alone, on a cache that holds everything
# before it) cannot reproduce; the replay of the whole history does.
REPLAY = os.environ.get("LLMEVAL_CACHE_CAMPAIGN_REPLAY")
# The workspace's context (its models' max_position_embeddings): small, so that the row that overflows it
# costs a forward pass over 256 positions, not 1,024 (with the full vocabulary the long row alone took 8 of
# a run's 10 s).
CONTEXT = 256
# The workspace's tokenizer: the embedded SmolLM2's cut to its first 4,096 tokens (small_tokenizer).
VOCABULARY = 4096
CHAT_TEMPLATE_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def bench_rows() -> list[dict[str, Any]]:
    """bench.jsonl: its prompt is the sidecar's template, system prompt and one few-shot example."""
    return [
        row("g1", instruction="Say one.", evaluation_config={"max_new_tokens": 3}),
        row("g2", instruction="Name a colour.", input="sky", evaluation_config={"max_new_tokens": 4}),
        # Longer than CONTEXT: cut by --llmeval-context-overflow (or an error, under `error`).
        row("long", instruction="Say it.", input="word " * 300, evaluation_config={"max_new_tokens": 3}),
        row(
            "c1",
            instruction="Which is a fruit?",
            expected="apple",
            evaluation_type="multiple_choice",
            evaluation_config={"choices": ["apple", "car"]},
        ),
    ]


def chat_rows() -> list[dict[str, Any]]:
    """chat.jsonl: no sidecar, so the chat template and the adapter's and command line's layers decide."""
    return [
        row("h1", instruction="Say hi.", evaluation_config={"max_new_tokens": 3}),
        row("h2", instruction="Say bye.", evaluation_config={}),  # --llmeval-max-new-tokens decides
        row(
            "p1",
            instruction="",
            input="The quick brown fox jumps over the lazy dog.",
            expected="",
            evaluation_type="perplexity",
            evaluation_config={"threshold": 1e9},
        ),
        row(
            "c2",
            instruction="Which is a colour?",
            expected="red",
            evaluation_type="multiple_choice",
            evaluation_config={"choices": ["red", "run"]},
        ),
    ]


SIDECAR = '[prompt]\nsystem = "Answer in one word."\ntemplate_file = "bench.template.jinja"\nfewshot = 1\n'
TEMPLATE = (
    "{% if system %}{{ system }}\n{% endif %}"
    "{% for e in examples %}Q: {{ e.instruction }} {{ e.input }}\nA: {{ e.output }}{{ eos_token }}\n"
    "{% endfor %}Q: {{ instruction }} {{ input }}\nA:"
)
FEWSHOT = [("Say two.", "two"), ("Say red.", "red"), ("Say yes.", "yes")]
CLI_TEMPLATES = ("Task: {{ instruction }} {{ input }}\nReply:", "{{ instruction }}\n{{ input }}\n=>")


@dataclass
class Command:
    """What a run is told on its command line beside the columns: where `big` points, and the options
    (flag -> value; None for a flag that takes none)."""

    big: Path
    options: dict[str, str | None]


@dataclass(repr=False)  # a failure report names the workspace, not its megabytes of pristine bytes
class Workspace:
    """The campaign's folders, their pristine bytes and times, and what a pristine run answers."""

    root: Path
    base: Path
    adapter: Path
    big: Path
    alt: Path
    donor: Path  # another tiny model's folder: weights of the same size to write over a column's
    adapter_donors: tuple[Path, ...]
    bench: Path
    cache: Path
    pristine: dict[Path, tuple[bytes, int, int]] = field(default_factory=dict)  # bytes, atime, mtime
    # (code, change, change...) -> the comparable() document of a run without the cache in that state
    truths: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)
    eos_candidates: dict[str, list[int]] = field(default_factory=dict)  # column -> tokens it generates
    examples: int = 0  # run so far

    def __repr__(self) -> str:
        return f"Workspace({self.root})"

    def command(self) -> Command:
        return Command(
            big=self.big,
            options={"--llmeval-max-new-tokens": "3", "--llmeval-context-overflow": "truncate-left"},
        )

    def snapshot(self) -> None:
        for folder in (self.base, self.adapter, self.big, self.alt, self.donor, self.bench):
            for path in sorted(folder.iterdir()):
                st = path.stat()
                self.pristine[path] = (path.read_bytes(), st.st_atime_ns, st.st_mtime_ns)

    def restore(self) -> None:
        """Every file as it was built, bytes and mtime: a file whose either differs is written back, and a
        file a change added is removed."""
        for folder in {path.parent for path in self.pristine}:
            for path in folder.iterdir():
                if path not in self.pristine:
                    path.unlink()
        for path, (data, atime, mtime) in self.pristine.items():
            if path.stat().st_mtime_ns != mtime or path.read_bytes() != data:
                path.write_bytes(data)
                os.utime(path, ns=(atime, mtime))


def small_tokenizer(folder: Path) -> None:
    """The embedded SmolLM2 tokenizer cut to its first VOCABULARY tokens, written to `folder`: the same
    byte-level BPE (its first merges: merge k makes token 252 + k), special tokens and chat template, and
    any text still encodes, in more pieces. A 4,096-token head is 12 times cheaper than 49,152, and the
    tokenizer loads in milliseconds instead of 0.3 s (loading it was 40% of an example, the head most of
    the rest: 11 s an example beside two other campaigns on 2 cores, 6 hours for the long form)."""
    from transformers import AutoTokenizer

    from pytest_llmeval.models import embedded_model_dir

    AutoTokenizer.from_pretrained(embedded_model_dir()).save_pretrained(folder)
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    vocab = {token: i for token, i in data["model"]["vocab"].items() if i < VOCABULARY}
    data["model"]["vocab"] = vocab
    data["model"]["merges"] = [m for m in data["model"]["merges"] if "".join(m) in vocab]
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def build_model(path: Path, *, seed: int) -> Path:
    """helpers.build_tiny_model's random 2-layer Llama on small_tokenizer, with a context of CONTEXT."""
    small_tokenizer(path)
    return build_tiny_model(path, seed=seed, tokenizer_dir=path, context=CONTEXT)


def build_workspace(root: Path) -> Workspace:
    base = build_model(root / "base", seed=0)
    big = build_model(root / "big", seed=11)
    alt = build_model(root / "alt", seed=12)
    donor = build_model(root / "donor", seed=13)
    adapter = build_tiny_adapter(base, root / "adapter", seed=1)
    donors = tuple(build_tiny_adapter(base, root / f"adapter-donor-{s}", seed=s) for s in (2, 3))
    bench = root / "bench"
    bench.mkdir()
    (bench / "bench.jsonl").write_text(jsonl(bench_rows()))
    (bench / "bench.llmeval.toml").write_text(SIDECAR)
    (bench / "bench.template.jinja").write_text(TEMPLATE)
    examples = [
        {"id": f"e{i}", "instruction": q, "input": "", "expected_output": a}
        for i, (q, a) in enumerate(FEWSHOT)
    ]
    (bench / "bench.fewshot.jsonl").write_text(jsonl(examples))
    (bench / "chat.jsonl").write_text(jsonl(chat_rows()))
    for i, source in enumerate(CLI_TEMPLATES):
        (root / f"cli-{i}.jinja").write_text(source)
    ws = Workspace(root, base, adapter, big, alt, donor, donors, bench, root / "cache")
    ws.snapshot()
    return ws


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    import torch

    # One torch thread for the in-process runs: the tiny models' matrices are too small to share, and on a
    # busy machine two threads spin-waiting for each other spent more CPU time than the whole example needs.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield build_workspace(tmp_path_factory.mktemp("cache-campaign"))
    finally:
        torch.set_num_threads(threads)


# --- the changes ----------------------------------------------------------------------------------------


def edit_json(path: Path, edit: Callable[[dict[str, Any]], Any]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2))


def replace_text(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new))


def overwrite_in_place(path: Path, data: bytes) -> None:
    """`data` written over `path`, the same size, and its old mtime put back: only its ctime and contents
    say that it changed (as a copy that keeps times, or a careless tool, leaves a file)."""
    st = path.stat()
    assert len(data) == st.st_size, f"{path.name}: {len(data)} bytes for {st.st_size}"
    with open(path, "r+b") as out:  # the same inode, as an edit in place keeps it
        out.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def edit_chat_template(path: Path, v: int) -> None:
    if v == 0:
        replace_text(path, CHAT_TEMPLATE_SYSTEM, "You answer in as few words as possible")
    else:
        replace_text(path, "'<|im_start|>assistant\n'", "'<|im_start|>assistant\nAnswer: '")


def model_changes(column: str) -> dict[str, tuple[int, Callable[[Workspace, Command, int], None]]]:
    """The changes to a model column's own folder (the base's, or the one `big` points at)."""

    def folder(ws: Workspace, cmd: Command) -> Path:
        return ws.base if column == "base" else cmd.big

    def weights(ws: Workspace, cmd: Command, v: int) -> None:
        # Another model's weights: the donor's, or the other column's pristine ones.
        other = ws.donor if v == 0 else (ws.big if column == "base" else ws.base)
        source = other / "model.safetensors"
        overwrite_in_place(folder(ws, cmd) / "model.safetensors", ws.pristine[source][0])

    def config(ws: Workspace, cmd: Command, v: int) -> None:
        def edit(c: dict[str, Any]) -> None:
            if v == 0:
                c["hidden_act"] = "gelu"
            elif v == 1:
                c["max_position_embeddings"] = CONTEXT // 2  # the long row is cut shorter; some no longer fit
            else:
                c["rope_parameters"]["rope_theta"] = 100.0

        edit_json(folder(ws, cmd) / "config.json", edit)

    def generation_config(ws: Workspace, cmd: Command, v: int) -> None:
        # A token this column generated (in the pristine run) now ends its generation.
        candidates = ws.eos_candidates[column]
        stop = candidates[v % len(candidates)]
        edit_json(folder(ws, cmd) / "generation_config.json", lambda c: c.update(eos_token_id=[2, stop]))

    def tokenizer_config(ws: Workspace, cmd: Command, v: int) -> None:
        # EOS: generation stops on another token, and bench.jsonl's template writes another eos_token.
        key = ("eos_token", "pad_token")[v]
        edit_json(folder(ws, cmd) / "tokenizer_config.json", lambda c: c.update({key: "<|endoftext|>"}))

    def tokenizer_json(ws: Workspace, cmd: Command, v: int) -> None:
        # Two tokens of the prompts trade their ids: every prompt is read as other tokens.
        path = folder(ws, cmd) / "tokenizer.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        vocab = data["model"]["vocab"]
        a, b = (("user", "Ġthe"), ("Q", "A"))[v]  # "user": every chat prompt; Q and A: bench.jsonl's
        vocab[a], vocab[b] = vocab[b], vocab[a]
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")

    def chat_template(ws: Workspace, cmd: Command, v: int) -> None:
        edit_chat_template(folder(ws, cmd) / "chat_template.jinja", v)

    return {
        f"{column}:weights": (2, weights),
        f"{column}:config.json": (3, config),
        f"{column}:generation_config.json": (3, generation_config),
        f"{column}:tokenizer_config.json": (2, tokenizer_config),
        f"{column}:tokenizer.json": (2, tokenizer_json),
        f"{column}:chat_template.jinja": (2, chat_template),
    }


def adapter_weights(ws: Workspace, cmd: Command, v: int) -> None:
    donor = ws.adapter_donors[v] / "adapter_model.safetensors"
    overwrite_in_place(ws.adapter / "adapter_model.safetensors", donor.read_bytes())


def adapter_config(ws: Workspace, cmd: Command, v: int) -> None:
    change = ({"lora_alpha": 16}, {"lora_alpha": 2}, {"use_rslora": True})[v]
    edit_json(ws.adapter / "adapter_config.json", lambda c: c.update(change))


def adapter_prompt(ws: Workspace, cmd: Command, v: int) -> None:
    """The adapter's declared prompt (metadata.json): in the shared mode, every column's on chat.jsonl."""
    declared = (
        {"system": "You are the adapter."},
        {"template": CLI_TEMPLATES[0]},
        {"system": "Be brief.", "template": CLI_TEMPLATES[1] + " {{ system }}"},
    )[v]
    edit_json(ws.adapter / "metadata.json", lambda m: m.update(prompt=declared))


def adapter_chat_template(ws: Workspace, cmd: Command, v: int) -> None:
    """The adapter ships a chat template of its own (a file added): its column is prompted with it."""
    path = ws.adapter / "chat_template.jinja"
    path.write_bytes(
        ws.pristine[ws.base / "chat_template.jinja"][0]
    )  # the base's as built, whatever else changed
    edit_chat_template(path, v)


def big_elsewhere(ws: Workspace, cmd: Command, v: int) -> None:
    cmd.big = (ws.alt, ws.donor)[v]


def sidecar_system(ws: Workspace, cmd: Command, v: int) -> None:
    new = ('system = "Reply tersely."', 'system = "Answer in two words."', "")[v]
    replace_text(ws.bench / "bench.llmeval.toml", 'system = "Answer in one word."', new)


def sidecar_fewshot(ws: Workspace, cmd: Command, v: int) -> None:
    replace_text(ws.bench / "bench.llmeval.toml", "fewshot = 1", f"fewshot = {(0, 2, 3)[v]}")


def template_file(ws: Workspace, cmd: Command, v: int) -> None:
    old, new = (
        ("Q: {{ instruction }}", "Question: {{ instruction }}"),
        ("\nA:", "\nAnswer:"),
        ("{{ eos_token }}", ""),
    )[v]
    replace_text(ws.bench / "bench.template.jinja", old, new)


def fewshot_file(ws: Workspace, cmd: Command, v: int) -> None:
    path = ws.bench / "bench.fewshot.jsonl"
    examples = [json.loads(line) for line in path.read_text().splitlines()]
    examples[v]["expected_output"] = f"{examples[v]['expected_output']}, surely"
    path.write_text(jsonl(examples))


# (benchmark file, row id, field, new value) of each row edit.
ROW_EDITS: tuple[tuple[str, str, str, Any], ...] = (
    ("bench.jsonl", "g1", "input", "now with an input"),
    ("bench.jsonl", "g2", "input", "grass"),
    ("bench.jsonl", "long", "input", "word " * 250),
    ("bench.jsonl", "c1", "input", "a basket"),
    ("chat.jsonl", "h1", "input", "please"),
    ("chat.jsonl", "h2", "input", "see you"),
    ("chat.jsonl", "p1", "input", "The lazy dog sleeps under the quick brown fox."),
    ("chat.jsonl", "c2", "input", "of the sky"),
    ("bench.jsonl", "c1", "expected_output", "car"),
    ("chat.jsonl", "h1", "expected_output", "hi"),
    ("bench.jsonl", "g1", "instruction", "Say one, again."),
    ("bench.jsonl", "g2", "evaluation_config", {"max_new_tokens": 2}),
    ("chat.jsonl", "h1", "system", "The row's own system prompt."),
    ("chat.jsonl", "c2", "evaluation_config", {"choices": ["red", "rain"]}),
    ("chat.jsonl", "p1", "evaluation_config", {"threshold": 1e9, "max_length": 8, "stride": 4}),
)


def row_edit(ws: Workspace, cmd: Command, v: int) -> None:
    name, row_id, key, value = ROW_EDITS[v]
    path = ws.bench / name
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    next(r for r in rows if r["id"] == row_id)[key] = value
    path.write_text(jsonl(rows))


def option(flag: str, *values: str | None) -> tuple[int, Callable[[Workspace, Command, int], None]]:
    """An option given another value (or given at all)."""

    def change(ws: Workspace, cmd: Command, v: int) -> None:
        cmd.options[flag] = values[v]

    return len(values), change


def bfloat16(ws: Workspace, cmd: Command, v: int) -> None:
    # Each column in batches of its own: in bfloat16 a mixed batch rounds otherwise than a column's own, and
    # the cache never mixes such columns (caching.Cached.mixes), so a run without it would differ by design.
    cmd.options |= {"--llmeval-dtype": "bfloat16", "--llmeval-mixed-batches": "off"}


def cli_template(ws: Workspace, cmd: Command, v: int) -> None:
    cmd.options["--llmeval-prompt-template"] = str(ws.root / f"cli-{v}.jinja")


# kind -> (how many variants, apply(workspace, command, variant)).
CHANGES: dict[str, tuple[int, Callable[[Workspace, Command, int], None]]] = {
    **model_changes("base"),
    **model_changes("big"),
    "big:elsewhere": (2, big_elsewhere),
    "adapter:weights": (2, adapter_weights),
    "adapter:adapter_config.json": (3, adapter_config),
    "adapter:metadata.json prompt": (3, adapter_prompt),
    "adapter:own chat_template.jinja": (2, adapter_chat_template),
    "benchmark:sidecar system": (3, sidecar_system),
    "benchmark:sidecar fewshot": (3, sidecar_fewshot),
    "benchmark:template file": (3, template_file),
    "benchmark:fewshot file": (3, fewshot_file),
    "benchmark:row": (len(ROW_EDITS), row_edit),
    "option:--llmeval-system-prompt": option("--llmeval-system-prompt", "Be kind.", "Say little."),
    "option:--llmeval-fewshot": option("--llmeval-fewshot", "0", "2"),
    "option:--llmeval-max-new-tokens": option("--llmeval-max-new-tokens", "2", "4"),
    "option:--llmeval-context-overflow": option("--llmeval-context-overflow", "truncate-middle", "error"),
    "option:--llmeval-prompt-template": (len(CLI_TEMPLATES), cli_template),
    "option:--llmeval-prompt-per-model": option("--llmeval-prompt-per-model", None),
    "option:--llmeval-device": option("--llmeval-device", "cpu"),
    "option:--llmeval-batch-size": option("--llmeval-batch-size", "1", "3"),
    "option:--llmeval-mixed-batches": option("--llmeval-mixed-batches", "off"),
    "option:--llmeval-dtype": (1, bfloat16),
}


@dataclass(frozen=True)
class Change:
    kind: str
    variant: int

    def __str__(self) -> str:
        return f"{self.kind}#{self.variant}"


def one_change(kind: str) -> st.SearchStrategy[Change]:
    return st.integers(0, CHANGES[kind][0] - 1).map(lambda v: Change(kind, v))


# One or two changes of different kinds, each kind as likely as any other.
CHANGE_SETS = st.lists(
    st.sampled_from(sorted(CHANGES)).flatmap(one_change), min_size=1, max_size=2, unique_by=lambda c: c.kind
)


# --- the runs -------------------------------------------------------------------------------------------


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """results.json less what a cached run changes by design: its cache counts, whether it loaded weights,
    the tokens it spent (none: a stored output spent nothing) and the clocks (tests/test_recall.py)."""
    out = without_clocks(doc)
    out.pop("tokens", None)
    config = dict(out["inference_config"])
    for key in ("cache", "weights_loaded"):
        config.pop(key, None)
    return out | {"inference_config": config}


def run(pytester: pytest.Pytester, ws: Workspace, cmd: Command, *, cached: bool) -> dict[str, Any]:
    """One in-process run of both benchmarks on the three columns: its results.json."""
    out = pytester.path / ("cached.json" if cached else "fresh.json")
    out.unlink(missing_ok=True)
    options = [flag if value is None else f"{flag}={value}" for flag, value in sorted(cmd.options.items())]
    result = pytester.runpytest(
        f"--base-model={ws.base}",
        f"--adapter={ws.adapter}",
        f"--llmeval-model=big={cmd.big}",
        f"--llmeval-cache-dir={ws.cache}" if cached else "--llmeval-no-cache",
        *options,
        f"--llmeval-results={out}",
        "--llmeval-no-history",
        "-q",
        "--tb=line",  # what a run prints is echoed into this test's output, 6,000 times in the long form
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-m",
        "not gate",
        str(ws.bench),
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret in (0, 1), text  # 1: rows of random models fail their thresholds
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    release(result)
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def release(result: pytest.RunResult) -> None:
    """Let an in-process run's models go now. pytester keeps each run's hook recorder until the test ends,
    and through it the run's config, whose stash holds the run's evaluator and every model it loaded: three
    runs an example kept 40 MB an example (16 GB at the long form's 2,000)."""
    from pytest_llmeval.items import EVALUATOR_KEY

    recorder = getattr(result, "reprec")  # noqa: B009 (set by runpytest_inprocess, not declared)
    config = recorder.getcall("pytest_unconfigure").config
    if EVALUATOR_KEY in config.stash:
        del config.stash[EVALUATOR_KEY]
    recorder.calls.clear()  # the items and reports it recorded


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """The paths at which two JSON values differ (the first few), for a readable failure."""
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            found += differences(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{where}.{key}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")
        ]
    return [] if a == b else [f"{where}: cached {a!r:.200} != uncached {b!r:.200}"]


def answers(doc: dict[str, Any]) -> dict[str, Any]:
    """Per row, each column's output, score and error: what a change is meant to move."""
    return {
        r["id"]: {c: (m.get("output"), m.get("score"), m.get("error")) for c, m in r["models"].items()}
        | {"error": r["error"]}
        for b in doc["benchmarks"]
        for r in b["rows"]
    }


def eos_candidates(ws: Workspace, truth: dict[str, Any]) -> dict[str, list[int]]:
    """For each model column, the first token of each output it generated in the pristine run: written
    into its generation_config as an EOS, it ends that generation early."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ws.base)
    out: dict[str, list[int]] = {}
    for column in ("base", "big"):
        outputs = [
            r["models"][column]["output"]
            for b in truth["benchmarks"]
            for r in b["rows"]
            if isinstance(r["models"].get(column, {}).get("output"), str) and r["models"][column]["output"]
        ]
        ids = {tokenizer(o, add_special_tokens=False)["input_ids"][0] for o in outputs}
        out[column] = sorted(ids - {0, 1, 2})
        assert out[column], f"{column} generated nothing to stop on"
    return out


def log(entry: dict[str, Any]) -> None:
    if LOG is not None:  # the long form's record (TESTING.md)
        with open(LOG, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def code_digest() -> str:
    """The package's Python source. Other developers edit it while a long campaign runs, and pytester's
    in-process runs import afresh what the plugin imports lazily: a document is compared only with one
    made by the same code."""
    import hashlib

    import pytest_llmeval

    package = Path(pytest_llmeval.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def uncached(
    pytester: pytest.Pytester, ws: Workspace, cmd: Command, state: tuple[str, ...]
) -> dict[str, Any]:
    """The document of a run without the cache in `state` (the code, then the changes made to the pristine
    workspace, in order), made once: such a run reads no generation cache and no recall, so the same code,
    files and options write the same document. The long form meets most single changes many times."""
    if state not in ws.truths:
        document = run(pytester, ws, cmd, cached=False)
        if not ws.eos_candidates:
            ws.eos_candidates = eos_candidates(ws, document)
        ws.truths[state] = comparable(document)
    return ws.truths[state]


def one_example(pytester: pytest.Pytester, ws: Workspace, changes: list[Change], code: str) -> dict[str, Any]:
    """One example: the pristine state (its cached run against its uncached one), then the changes (a cached
    run against an uncached one). The log entry, with what differed."""
    clock = [time.perf_counter()]
    cpu = time.process_time()

    def lap() -> float:
        clock.append(time.perf_counter())
        return round(clock[-1] - clock[-2], 2)

    ws.restore()
    truth = uncached(pytester, ws, ws.command(), (code,))
    # Back to the pristine state after whatever the examples before left in the cache and the recall.
    pristine = differences(comparable(run(pytester, ws, ws.command(), cached=True)), truth)
    laps = [lap()]
    cmd = ws.command()
    for change in changes:
        CHANGES[change.kind][1](ws, cmd, change.variant)
    cached = run(pytester, ws, cmd, cached=True)
    laps.append(lap())
    memoised = (code, *map(str, changes)) in ws.truths
    fresh = uncached(pytester, ws, cmd, (code, *map(str, changes)))
    laps.append(lap())
    cache = cached["inference_config"]["cache"]
    return {
        "changes": [str(c) for c in changes],
        "same": not pristine and not differences(comparable(cached), fresh),
        "document_changed": fresh != truth,  # whether the changes changed results.json at all
        "answers_changed": answers(fresh) != answers(truth),  # and any output, score or error
        "hits": sum(cache["hits"].values()),
        "misses": sum(cache["misses"].values()),
        # The columns whose weights the cached run loaded (the others came from the cache and the recall).
        "loaded": sorted(c for c, m in cached["cost"]["models"].items() if m["load_s"] > 0),
        # The pristine cached run, the cached and the uncached run after the changes (0: made before).
        "seconds": laps,
        "cpu_s": round(time.process_time() - cpu, 2),  # this process's CPU time: the cost without the load
        "uncached": "made before" if memoised else "made",
        "code": code,
        "pristine_differences": pristine[:10],
        "differences": differences(comparable(cached), fresh)[:20],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,  # flat: nothing kept
    }


def campaign(pytester: pytest.Pytester, ws: Workspace, changes: list[Change]) -> None:
    # In-process runs leave their models behind in two ways: pytester's recorders keep each run's config
    # (release() drops its evaluator), and the plugin freezes what a session leaves alive (gc.freeze in
    # hooks/collection.py; the next session thaws it and freezes it again before a full collection can
    # free the earlier session's cycles): 40 MB an example. A full collection every 10 examples (it walks
    # half a million objects, 0.6 s) keeps the campaign's memory flat.
    ws.examples += 1
    if ws.examples % 10 == 0:
        gc.unfreeze()
        gc.collect()
    for _ in range(3):
        code = code_digest()
        entry = one_example(pytester, ws, changes, code)
        if code_digest() == code:
            break
        # Someone saved the package during the example: its runs may have read two versions. Again.
    log(entry)
    assert not entry["pristine_differences"], (
        f"after {entry['changes']}, a cached run of the pristine workspace differs from one without the "
        "cache:\n" + "\n".join(entry["pristine_differences"])
    )
    assert not entry["differences"], (
        f"a cached run after {entry['changes']} differs from one without the cache:\n"
        + "\n".join(entry["differences"])
    )


@settings(
    max_examples=EXAMPLES or 3,
    derandomize=not EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(changes=CHANGE_SETS)
# The two cases issue 53 found served stale: `big` pointed at another folder, and its weights rewritten in
# place with the old mtime put back.
@example(changes=[Change("big:elsewhere", 0)])
@example(changes=[Change("big:weights", 0)])
def test_a_cached_rerun_after_any_change_answers_as_an_uncached_one(
    pytester: pytest.Pytester, workspace: Workspace, changes: list[Change]
) -> None:
    campaign(pytester, workspace, changes)


if REPLAY is not None:  # a tool for a failure found, not a test of the normal suite (no skip there)

    def test_a_logged_campaign_replays(pytester: pytest.Pytester, workspace: Workspace) -> None:
        """Every example of a campaign's log, in its order, on a fresh workspace and cache."""
        assert REPLAY is not None
        for line in Path(REPLAY).read_text(encoding="utf-8").splitlines():
            changes = [
                Change(kind, int(v)) for kind, v in (c.rsplit("#", 1) for c in json.loads(line)["changes"])
            ]
            campaign(pytester, workspace, changes)
