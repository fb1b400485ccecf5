"""Batched deterministic generation: prompts built one way, batches sorted by length, greedy decoding.

torch is imported inside the functions; shapes are noted as (B, T) = (batch, tokens).
"""

from __future__ import annotations

import hashlib
import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from pytest_llmeval.prompts import Example, Template

# Used when the tokenizer has no chat template (base, non-instruct models). Alpaca-style, since that is
# what most instruction-tuned adapters of plain models were trained on.
PLAIN_TEMPLATE = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
# Below this, splitting the prompt into a shared and an own part costs more than it saves.
MIN_SHARED_PREFIX = 8
PLAIN_TEMPLATE_NO_INPUT = "### Instruction:\n{instruction}\n\n### Response:\n"
# peft's name for "no adapter" in a mixed-adapter batch (generate's `adapters`).
BASE_ADAPTER = "__base__"


@dataclass(frozen=True)
class DecodingConfig:
    """Deterministic decoding, enforced: greedy, no sampling knobs, stop at EOS or max_new_tokens."""

    max_new_tokens: int = 512
    do_sample: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    num_beams: int = 1
    stop: str = "eos"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Tokens:
    """The tokens one generate() call read (each prompt's) and generated (each output's, its EOS
    included), in the prompts' order."""

    prompt: list[int] = field(default_factory=list)
    generated: list[int] = field(default_factory=list)


def user_message(instruction: str, input: str = "") -> str:
    """The user turn of a benchmark row: the instruction, then the input after a blank line."""
    return f"{instruction}\n\n{input}" if input.strip() else instruction


def adds_bos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the tokenizer starts every encoding with its BOS token."""
    bos_id = tokenizer.bos_token_id
    return bos_id is not None and tokenizer("x")["input_ids"][:1] == [bos_id]


def raw_prompt(tokenizer: PreTrainedTokenizerBase, text: str) -> str:
    """A completion-style prompt: the text as it is, no template, after the BOS token when the tokenizer
    starts every encoding with one (generate() adds no special tokens: a chat template writes its own)."""
    bos = getattr(tokenizer, "bos_token", None)
    return bos + text if isinstance(bos, str) and adds_bos(tokenizer) else text


def build_prompt(
    tokenizer: PreTrainedTokenizerBase,
    instruction: str,
    input: str = "",
    *,
    system: str | None = None,
    examples: Sequence[Example] = (),
    template: Template | None = None,
) -> str:
    """The prompt of a row (prompts.py decides the system prompt, the examples and the template).

    A template of the run's renders the whole prompt (after the BOS token, as raw_prompt). Else the chat
    template, when the tokenizer has one, over [system] + (user, assistant) per example + the row's user
    turn, with the generation prompt; else PLAIN_TEMPLATE per turn (each example followed by its output),
    after the system prompt, joined by blank lines.
    """
    if template is not None:
        from pytest_llmeval.prompts import render_template

        text = render_template(
            template,
            system=system,
            instruction=instruction,
            input=input,
            examples=examples,
            eos_token=getattr(tokenizer, "eos_token", None),
        )
        return raw_prompt(tokenizer, text)
    if getattr(tokenizer, "chat_template", None):
        messages = chat_messages(instruction, input, system=system, examples=examples)
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert isinstance(rendered, str)
        return rendered
    parts = [] if system is None else [system]
    parts += [_plain_turn(e.instruction, e.input) + e.output for e in examples]
    return "\n\n".join([*parts, _plain_turn(instruction, input)])


def chat_messages(
    instruction: str, input: str = "", *, system: str | None = None, examples: Sequence[Example] = ()
) -> list[dict[str, str]]:
    """A row as chat messages: [system] + (user, assistant) per few-shot example + the row's user turn.
    What the chat template renders in-process, and what a served model is sent."""
    messages = [] if system is None else [{"role": "system", "content": system}]
    for e in examples:
        messages.append({"role": "user", "content": user_message(e.instruction, e.input)})
        messages.append({"role": "assistant", "content": e.output})
    messages.append({"role": "user", "content": user_message(instruction, input)})
    return messages


def _plain_turn(instruction: str, input: str) -> str:
    if input.strip():
        return PLAIN_TEMPLATE.format(instruction=instruction, input=input)
    return PLAIN_TEMPLATE_NO_INPUT.format(instruction=instruction)


# A row joins a batch only if the batch's padded width is at most this many times its own tokens: a long
# document among short questions is generated alone instead of making each of them pay for its length,
# while the ordinary spread of a benchmark's prompt lengths (well under 4x) still batches together.
MAX_PADDING = 4.0
# What to do with a row whose prompt plus max_new_tokens is longer than the model's context.
OVERFLOW_POLICIES = ("error", "truncate-left", "truncate-middle")
# Where truncate-middle cut the input.
ELISION = " [...] "


def context_length(config: Any, tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The model's context in tokens: its config's max_position_embeddings, else the tokenizer's
    model_max_length. (The config, not the model: a cached run fits prompts without loading weights.)"""
    found = getattr(config, "max_position_embeddings", None)
    if isinstance(found, int) and found > 0:
        return found
    # Tokenizers without a limit report a huge sentinel (int(1e30)): that is no context length.
    found = getattr(tokenizer, "model_max_length", None)
    return found if isinstance(found, int) and 0 < found < 10_000_000 else None


def _count(tokenizer: PreTrainedTokenizerBase, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def fit_text(
    tokenizer: PreTrainedTokenizerBase,
    render: Callable[[str], str],
    input: str,
    *,
    max_new_tokens: int,
    context: int,
    policy: str,
    reserved: str = "max_new_tokens",
) -> tuple[str, dict[str, Any] | None]:
    """`render(input)`, the prompt, fitted to the model's context: (prompt, how it was truncated, or None).

    A prompt whose tokens plus max_new_tokens exceed `context` is an error under policy "error" (ValueError
    with the counts and the ways out); "truncate-left" drops the start of the input, "truncate-middle" its
    middle (marked by ELISION): the instruction and the template are always kept whole, and the end of the
    input, where a question after a long document usually is, survives both. `reserved` names what the
    max_new_tokens after the prompt are for, in messages ("the longest choice" for multiple choice).
    A row's prompt is `render = lambda text: build_prompt(tokenizer, instruction, text)`; a judge's request
    renders the same way, and only the input is ever cut.
    """
    if policy not in OVERFLOW_POLICIES:
        raise ValueError(
            f"context overflow policy must be one of {', '.join(OVERFLOW_POLICIES)}, got {policy!r}"
        )
    prompt = render(input)
    tokens = _count(tokenizer, prompt)
    if tokens + max_new_tokens <= context:
        return prompt, None
    need = f"{tokens} prompt tokens + {reserved} {max_new_tokens} = {tokens + max_new_tokens} tokens"
    if policy == "error":
        lower = " or lower the row's evaluation_config.max_new_tokens" if reserved == "max_new_tokens" else ""
        raise ValueError(
            f"{need}, more than the model's context of {context}: --llmeval-context-overflow "
            f"truncate-left or truncate-middle shortens the input{',' if lower else ''}{lower}"
        )
    ids: list[int] = tokenizer(input, add_special_tokens=False)["input_ids"]
    keep = context - max_new_tokens - (tokens - len(ids))
    while keep > 0:
        if policy == "truncate-left":
            text = str(tokenizer.decode(ids[-keep:]))
        else:
            head, tail = ids[: keep // 2], ids[len(ids) - (keep - keep // 2) :]
            text = str(tokenizer.decode(head)) + ELISION + str(tokenizer.decode(tail))
        fitted = render(text)
        fitted_tokens = _count(tokenizer, fitted)
        over = fitted_tokens + max_new_tokens - context
        if over <= 0:
            return fitted, {
                "policy": policy,
                "prompt_tokens": fitted_tokens,
                "original_prompt_tokens": tokens,
                "input_tokens_kept": keep,
                "input_tokens": len(ids),
                "context": context,
            }
        keep -= over  # tokens merge differently where the text was cut (and around the elision): cut more
    raise ValueError(
        f"{need}, more than the model's context of {context}, and the instruction and template alone leave "
        f"no room for any of the input: shorten the instruction (or what {reserved} needs)"
    )


def template_info(tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """How prompts were built, for results.json: the chat template's hash, or the plain template itself."""
    template = getattr(tokenizer, "chat_template", None)
    if template:
        return {
            "kind": "chat_template",
            "sha256": hashlib.sha256(str(template).encode()).hexdigest(),
            "message": "user: {instruction}\\n\\n{input}",
            "add_generation_prompt": True,
        }
    return {"kind": "plain", "template": PLAIN_TEMPLATE, "template_no_input": PLAIN_TEMPLATE_NO_INPUT}


def tokenizer_provenance(tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """What a model's prompts were tokenized with, for results.json: whether an encoding starts with the
    BOS token (and which), the EOS and pad tokens, the chat template's hash. Two columns that differ here
    were not prompted alike."""
    template = getattr(tokenizer, "chat_template", None)
    return {
        "adds_bos": adds_bos(tokenizer),
        "bos_token": tokenizer.bos_token,
        "eos_token": tokenizer.eos_token,
        "pad_token": tokenizer.pad_token,
        "chat_template_sha256": hashlib.sha256(str(template).encode()).hexdigest() if template else None,
        "vocab_size": len(tokenizer),
    }


def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    *,
    max_new_tokens: int | Sequence[int],
    batch_size: int,
    add_special_tokens: bool = False,
    sampling: Sampling | None = None,
    token_budget: int | None = None,
    max_padding: float = MAX_PADDING,
    strip: bool = True,
    counts: Tokens | None = None,
    adapters: Sequence[str] | None = None,
    stops: Sequence[Sequence[str] | None] | None = None,
) -> list[str]:
    """Greedy completions of `prompts`, in their order, batched by sorted length with left padding.

    A batch holds at most `batch_size` rows and, with `token_budget`, at most that many padded tokens
    (rows x (longest prompt + largest max_new_tokens)); no row is padded beyond MAX_PADDING times its own
    length: one long row is batched alone instead of inflating a batch of short ones to its length.

    `max_new_tokens` may differ per prompt: each row leaves its batch at its own limit or at EOS.
    Chat-templated prompts carry their own special tokens, hence add_special_tokens=False by default.
    With `sampling` (the LLM judge's repeated runs), tokens are sampled instead, each prompt from its own
    seeded generator: a prompt's sample does not depend on what else is in its batch.
    `strip=False` keeps the whitespace around each output: a completion-style row's output continues its
    prompt, and the indentation of its first line is code.
    `counts`, when given, receives each prompt's tokens read and generated (what a run spent).
    `adapters`, on a peft model: each prompt's adapter by its peft name (BASE_ADAPTER for the bare base), so
    that one batch holds rows of several columns of the same weights (peft's mixed-adapter batches); None:
    the model as it is set now.
    `stops`, per prompt: the strings its output ends at (None: EOS and its limit only), as lm-eval's `hf`
    model ends a generate_until request (StopStrings): the tokenizer's EOS text joins them, the row ends once
    one of them is in its last tokens decoded, and its text is cut before them (cut_at_stops).
    """
    import torch

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if sampling is not None and len(sampling.seeds) != len(prompts):
        raise ValueError("sampling needs one seed per prompt")
    limits = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if len(limits) != len(prompts):
        raise ValueError("max_new_tokens must be an int or one limit per prompt")
    if adapters is not None and len(adapters) != len(prompts):
        raise ValueError("adapters must name one adapter per prompt")
    if stops is not None and len(stops) != len(prompts):
        raise ValueError("stops must give one list of stop strings (or None) per prompt")
    ends: list[StopStrings | None] = [None] * len(prompts)
    for i, until in enumerate(stops or ()):
        ends[i] = None if until is None else StopStrings.of(tokenizer, until)
    encoded: list[list[int]] = tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    # Longest first: similar lengths share a batch (little padding), and a too-large batch fails at once.
    order = sorted(range(len(prompts)), key=lambda i: (-len(encoded[i]), i))
    device = next(model.parameters()).device
    outputs: list[str] = [""] * len(prompts)
    generated: list[int] = [0] * len(prompts)
    stopped: set[int] = set()  # prompts whose output ended at a stop string (not at EOS, nor its limit)
    for rows in token_batches(
        order, [len(e) for e in encoded], limits, batch_size, token_budget, max_padding
    ):
        # Rows of a benchmark share the chat template's system turn and usually the instruction: that
        # shared prefix (P tokens) is computed once and its cache copied to every row, instead of B times.
        shared = shared_prefix_length([encoded[i] for i in rows])
        suffixes = [encoded[i][shared:] for i in rows]
        width = max(len(s) for s in suffixes)
        # Layout per row: [shared prefix][padding][own suffix]; the mask hides the padding, and positions
        # come from the mask's cumulative sum, so every row sees the same positions as it would alone.
        ids = torch.full((len(rows), shared + width), pad_id, dtype=torch.long)  # (B, P + S)
        mask = torch.zeros((len(rows), shared + width), dtype=torch.long)  # (B, P + S)
        for r, suffix in enumerate(suffixes):
            ids[r, :shared] = torch.tensor(encoded[rows[0]][:shared], dtype=torch.long)
            mask[r, :shared] = 1
            ids[r, shared + width - len(suffix) :] = torch.tensor(suffix, dtype=torch.long)
            mask[r, shared + width - len(suffix) :] = 1
        with torch.inference_mode(), warnings.catch_warnings():
            # peft asks transformers a deprecated question on every forward; users cannot act on it.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            tokens = _decode(
                model,
                ids.to(device),
                mask.to(device),
                shared=shared,
                limits=[limits[i] for i in rows],
                eos_ids=eos_ids,
                sampler=None
                if sampling is None
                else sampling.sampler([sampling.seeds[i] for i in rows], device),
                adapters=None if adapters is None else [adapters[i] for i in rows],
                ended=None
                if all(ends[i] is None for i in rows)
                else _stop_check(tokenizer, [ends[i] for i in rows], rows, stopped),
            )
        for i, row_tokens in zip(rows, tokens, strict=True):
            text = str(tokenizer.decode(row_tokens, skip_special_tokens=True))
            stop = ends[i]
            if stop is not None:
                text = cut_at_stops(text, stop.strings)
            outputs[i] = text.strip() if strip else text
            # An output that ended at EOS generated it too; one at a stop string or its limit did not.
            generated[i] = len(row_tokens) + (len(row_tokens) < limits[i] and i not in stopped)
    if counts is not None:
        counts.prompt, counts.generated = [len(e) for e in encoded], generated
    return outputs


def cut_at_stops(text: str, stops: Sequence[str]) -> str:
    """`text` cut before each stop string in turn (the part before its first occurrence kept), as lm-eval
    cuts a generated text (postprocess_generated_text): in the stops' order, empty ones skipped."""
    for stop in stops:
        if stop:
            text = text.split(stop, 1)[0]
    return text


@dataclass(frozen=True)
class StopStrings:
    """One output's stop strings as lm-eval's `hf` model applies them: the request's `until` and the
    tokenizer's EOS text after them (handle_stop_sequences), each watched in a window of its own token count
    plus 2 of the newest tokens, decoded with special tokens kept (MultiTokenEOSCriteria: a string the model
    writes in other tokens than its own encoding is still seen)."""

    strings: tuple[str, ...]
    windows: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase, until: Sequence[str]) -> StopStrings:
        strings = list(until)
        eos_id = tokenizer.eos_token_id
        if eos_id is not None:
            eos = str(tokenizer.decode([eos_id], skip_special_tokens=False))
            if eos not in strings:
                strings.append(eos)
        windows = [len(tokenizer.encode(s, add_special_tokens=False)) + 2 for s in strings]
        return cls(tuple(strings), tuple(windows))

    def ended(self, tokenizer: PreTrainedTokenizerBase, tokens: Sequence[int]) -> bool:
        """Whether the newest tokens hold one of the strings (an empty one is in every text: lm-eval's)."""
        return any(
            stop in str(tokenizer.decode(list(tokens[-window:]), skip_special_tokens=False))
            for stop, window in zip(self.strings, self.windows, strict=True)
        )


def _stop_check(
    tokenizer: PreTrainedTokenizerBase,
    ends: Sequence[StopStrings | None],
    prompts: Sequence[int],
    stopped: set[int],
) -> Callable[[int, list[int]], bool]:
    """_decode's `ended` for one batch: (batch row, its tokens so far) -> it ended at a stop string, which
    also puts its prompt's index into `stopped`."""

    def ended(row: int, tokens: list[int]) -> bool:
        stop = ends[row]
        if stop is None or not stop.ended(tokenizer, tokens):
            return False
        stopped.add(prompts[row])
        return True

    return ended


def token_batches(
    order: Sequence[int],
    lengths: Sequence[int],
    limits: Sequence[int],
    batch_size: int,
    token_budget: int | None,
    max_padding: float = MAX_PADDING,
) -> list[list[int]]:
    """`order` (longest prompt first) cut into batches of at most `batch_size` rows and `token_budget`
    padded tokens, in which no row is padded to more than `max_padding` times its own tokens (prompt plus
    max_new_tokens); a row alone over the budget is a batch of its own."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current:
            width = max(lengths[j] for j in current) + max(limits[j] for j in [*current, i])
            too_padded = width > max_padding * (lengths[i] + limits[i])
            over_budget = (
                token_budget is not None
                and (len(current) + 1) * max(width, lengths[i] + limits[i]) > token_budget
            )
            if len(current) >= batch_size or over_budget or too_padded:
                batches.append(current)
                current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class Sampling:
    """Temperature (and nucleus) sampling with one seed per prompt."""

    temperature: float
    seeds: Sequence[int]
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 for sampling, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    def sampler(
        self, seeds: Sequence[int], device: torch.device
    ) -> Callable[[torch.Tensor, list[int]], torch.Tensor]:
        """A step function: (logits (A, V) of the alive rows, their batch rows) -> sampled ids (A,)."""
        import torch

        generators = []
        for seed in seeds:
            generator = torch.Generator(device=device)
            generator.manual_seed(seed)
            generators.append(generator)

        def step(logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
            probs = torch.softmax(logits.float() / self.temperature, dim=-1)  # (A, V)
            if self.top_p < 1.0:
                sorted_probs, order = probs.sort(dim=-1, descending=True)  # (A, V)
                # Keep the smallest set of tokens whose mass reaches top_p (the first token always).
                drop = sorted_probs.cumsum(-1) - sorted_probs > self.top_p  # (A, V)
                sorted_probs[drop] = 0.0
                probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
            picks = [torch.multinomial(probs[k], 1, generator=generators[row]) for k, row in enumerate(rows)]
            return torch.cat(picks)  # (A,)

        return step


def _decode(
    model: PreTrainedModel,
    ids: torch.Tensor,  # (B, P + S): shared prefix, padding, own suffix
    mask: torch.Tensor,  # (B, P + S): 1 for real tokens
    *,
    shared: int,
    limits: list[int],
    eos_ids: list[int],
    sampler: Callable[[torch.Tensor, list[int]], torch.Tensor] | None = None,
    adapters: list[str] | None = None,
    ended: Callable[[int, list[int]], bool] | None = None,
) -> list[list[int]]:
    """Greedy decoding with a KV cache; a row leaves the batch as soon as it ends (EOS, its own limit, or
    `ended(row, its tokens so far)`: a stop string).

    Equivalent to transformers' generate() with do_sample=False and no logits processors (argmax of the
    last position's logits), but finished rows stop costing compute: in a batch where most rows answer in
    a few tokens and one rambles to its limit, the others are not decoded along with it. With a sampler,
    each step's token is drawn from it instead of the argmax. With `adapters` (one peft adapter name per
    row), every forward pass runs each row through its own adapter (peft's `adapter_names`).
    """
    import torch
    from transformers import DynamicCache

    batch = ids.shape[0]
    cache = DynamicCache(config=model.config)
    kv = {cache_kwarg(model): cache, "use_cache": True}

    def names(rows: list[int]) -> dict[str, Any]:
        # peft takes one adapter name per row of the forward's batch, in the cache's batch order.
        return {} if adapters is None else {"adapter_names": [adapters[r] for r in rows]}

    if shared and adapters is None:
        model(input_ids=ids[:1, :shared], logits_to_keep=1, **kv)
        cache.batch_repeat_interleave(batch)  # (1, ...) -> (B, ...): the same prefix for every row
    elif shared and adapters is not None:
        # The prefix's keys and values depend on the adapter: computed once per distinct adapter (K rows),
        # then each row takes its adapter's (batch_select_indices with repeated indices).
        distinct = list(dict.fromkeys(adapters))
        prefix = ids[:1, :shared].expand(len(distinct), shared)  # (K, P): the same tokens for each adapter
        model(input_ids=prefix, logits_to_keep=1, adapter_names=distinct, **kv)
        cache.batch_select_indices(torch.tensor([distinct.index(a) for a in adapters], device=ids.device))
    # Positions count real tokens only, so a padded row sees the positions it would see alone.
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P + S)
    out = model(
        input_ids=ids[:, shared:],
        attention_mask=mask,
        position_ids=positions[:, shared:],
        logits_to_keep=1,
        **names(list(range(batch))),
        **kv,
    )
    if cache.get_seq_length() != ids.shape[1]:
        # A model that ignored the cache would decode every step from one token: refuse, never guess.
        raise RuntimeError(f"{type(model).__name__} did not fill the KV cache; cannot decode incrementally")
    results: list[list[int]] = [[] for _ in range(batch)]
    alive = list(range(batch))  # batch rows still decoding, in the order of the cache's batch dimension
    next_pos = mask.sum(-1)  # (B,) position of each row's next token
    eos = torch.tensor(eos_ids, device=ids.device)
    while True:
        last = out.logits[:, -1, :]  # (A, V)
        step = last.argmax(-1) if sampler is None else sampler(last, alive)  # (A,) next token per alive row
        at_eos = torch.isin(step, eos).tolist()  # (A,)
        keep: list[int] = []
        for k, row in enumerate(alive):
            if at_eos[k]:
                continue
            results[row].append(int(step[k]))
            if len(results[row]) < limits[row] and (ended is None or not ended(row, results[row])):
                keep.append(k)
        if not keep:
            return results
        if len(keep) < len(alive):
            index = torch.tensor(keep, device=ids.device)
            cache.batch_select_indices(index)
            mask, next_pos, step = mask[index], next_pos[index], step[index]
            alive = [alive[k] for k in keep]
        mask = torch.cat([mask, mask.new_ones((len(alive), 1))], dim=-1)  # (A, T + 1)
        out = model(
            input_ids=step[:, None],  # (A, 1)
            attention_mask=mask,
            position_ids=next_pos[:, None],  # (A, 1)
            **names(alive),
            **kv,
        )
        next_pos = next_pos + 1


def cache_kwarg(model: PreTrainedModel) -> str:
    """The forward() argument taking a KV cache: `cache` in recent transformers, else `past_key_values`."""
    wrapped: Any = model
    base = wrapped.get_base_model() if hasattr(wrapped, "get_base_model") else wrapped  # peft wraps models
    parameters = inspect.signature(base.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def shared_prefix_length(sequences: Sequence[Sequence[int]], *, minimum: int = MIN_SHARED_PREFIX) -> int:
    """Tokens every sequence starts with, leaving each at least one token of its own; 0 below `minimum`."""
    if len(sequences) < 2:
        return 0  # nothing to share: one forward pass over the whole prompt
    limit = min(len(s) for s in sequences) - 1  # the last prompt token must go through generate()
    first = sequences[0]
    n = 0
    while n < limit and all(s[n] == first[n] for s in sequences):
        n += 1
    return n if n >= minimum else 0


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Every token that ends a turn: the tokenizer's EOS and the model's generation_config EOS ids."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in cfg_eos if isinstance(cfg_eos, list) else [cfg_eos]:
        if value is not None and int(value) not in ids:
            ids.append(int(value))
    if not ids:
        raise ValueError("the tokenizer has no EOS token: generation could not stop")
    return ids
