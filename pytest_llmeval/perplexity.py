"""Perplexity of a causal LM on texts: token-weighted NLL over a sliding window, bits per character and byte.

The window follows the transformers guide "Perplexity of fixed-length models": windows of `max_length`
tokens advance by `stride`; each window scores only the tokens the previous window did not reach, so every
token is scored once, with the longest context its window gives. All windows of all texts are sorted by
length and share forward passes; per-token NLL is summed per text in float64, so the batch composition
changes the result by float32 noise at most.

torch is imported inside the functions; shapes are noted as (B, T, V) = (batch, tokens, vocabulary).
"""

from __future__ import annotations

import collections
import inspect
import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# Longer windows cost memory (the logits of a window are T x V floats) and, past ~1000 positions, time
# quadratically in attention; 1024 is also the context of GPT-2, which most published perplexities use.
DEFAULT_MAX_LENGTH = 1024
# Positions per forward pass when no batch_size is given. On CPU, throughput peaks near 512 positions and
# falls past that (measured with bench/perplexity.py on 2 cores: 4096 positions ran 1.7x slower than 512);
# a GPU wants large batches, bounded by the logits (8192 positions x a 50k vocabulary = 1.6 GB in float32).
TOKEN_BUDGET = {"cpu": 512, "cuda": 8192}
# New positions per forward pass of continuation_scores' contexts, which keep one position's logits, not
# (B, T, V): on CPU 1024 ran 5% faster than 512 and 2048 no faster (5-shot ARC-Easy's ~93-token contexts,
# 2 cores, BENCHMARKS.md), as fewer passes pay each layer's fixed cost fewer times.
CONTEXT_BUDGET = {"cpu": 1024, "cuda": 8192}
LN2 = math.log(2.0)


@dataclass(frozen=True)
class TextPerplexity:
    """One text's share of the result."""

    index: int  # position in the `texts` given to perplexity()
    n_tokens: int  # scored tokens
    n_chars: int
    n_bytes: int  # UTF-8
    nll: float  # total, in nats
    perplexity: float
    bits_per_character: float
    bits_per_byte: float
    # With by_script: script -> ScriptShare, the loss of the tokens attributed to that script's characters.
    scripts: dict[str, ScriptShare] | None = None


@dataclass(frozen=True)
class ScriptShare:
    """The loss attributed to one script's characters, how many characters of it there are, and how often
    the model's top-1 next token was the right one on them (the adaptation document's character prediction
    accuracy, §4.2): `hits` of `scored` character shares (each scored token's share spread over its span)."""

    nll: float  # nats
    n_chars: int
    hits: float = 0.0
    scored: float = 0.0

    @property
    def bits_per_character(self) -> float | None:
        return self.nll / LN2 / self.n_chars if self.n_chars else None

    @property
    def top1_accuracy(self) -> float | None:
        return self.hits / self.scored if self.scored else None

    def to_json(self) -> dict[str, Any]:
        return {
            "nll": self.nll,
            "n_chars": self.n_chars,
            "bits_per_character": self.bits_per_character,
            "hits": self.hits,
            "scored": self.scored,
            "top1_accuracy": self.top1_accuracy,
        }


SCRIPTS: tuple[str, ...] = ("hiragana", "katakana", "kanji", "latin", "other")
# (first, last, script) code point ranges; anything else is "other" (digits, punctuation, spaces, symbols).
# The prolonged sound mark ー and the iteration mark 々 go with the script they are written in.
_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x005A, "latin"),
    (0x0061, 0x007A, "latin"),
    (0x00C0, 0x00D6, "latin"),
    (0x00D8, 0x00F6, "latin"),
    (0x00F8, 0x024F, "latin"),  # Latin-1 letters and Latin Extended-A/B
    (0x1E00, 0x1EFF, "latin"),  # Latin Extended Additional (Vietnamese)
    (0x3005, 0x3005, "kanji"),  # 々
    (0x3007, 0x3007, "kanji"),  # 〇
    (0x3041, 0x309F, "hiragana"),
    (0x30A0, 0x30FF, "katakana"),  # with ー (U+30FC)
    (0x31F0, 0x31FF, "katakana"),  # small katakana for Ainu
    (0x3400, 0x4DBF, "kanji"),  # CJK Extension A
    (0x4E00, 0x9FFF, "kanji"),  # CJK Unified Ideographs
    (0xF900, 0xFAFF, "kanji"),  # compatibility ideographs
    (0xFF21, 0xFF3A, "latin"),  # fullwidth A-Z
    (0xFF41, 0xFF5A, "latin"),  # fullwidth a-z
    (0xFF66, 0xFF9F, "katakana"),  # halfwidth katakana
    (0x20000, 0x3134F, "kanji"),  # CJK Extensions B-G
)


def script_of(char: str) -> str:
    """hiragana, katakana, kanji, latin or other (by code point range; see _SCRIPT_RANGES)."""
    code = ord(char)
    for first, last, script in _SCRIPT_RANGES:
        if first <= code <= last:
            return script
    return "other"


def attribute_to_scripts(
    text: str,
    offsets: Sequence[tuple[int, int]],
    token_nll: Sequence[float],
    token_hits: Sequence[float | None] | None = None,
) -> dict[str, ScriptShare]:
    """Spread each token's loss evenly over the characters its offsets cover, then sum per script.

    Byte-level tokenizers split one character over several tokens and give each the character's span, so
    the character gets all their losses. A token with an empty span (rare: added tokens) goes to "other".
    The shares sum to the text's total NLL; n_chars counts every character of the text, scored or not.
    `token_hits`: 1.0 where the model's top-1 prediction of the token was right, 0.0 where wrong, None for
    a token not scored (the first one without BOS); spread the same way, with the share of scored tokens
    beside them, so that per script hits / scored is the character-weighted top-1 accuracy.
    """
    nll = dict.fromkeys(SCRIPTS, 0.0)
    hits = dict.fromkeys(SCRIPTS, 0.0)
    scored = dict.fromkeys(SCRIPTS, 0.0)
    hit_list = token_hits if token_hits is not None else [None] * len(offsets)
    for (start, end), loss, hit in zip(offsets, token_nll, hit_list, strict=True):
        if end <= start:
            nll["other"] += loss
            if hit is not None:
                hits["other"] += hit
                scored["other"] += 1.0
            continue
        span = end - start
        for char in text[start:end]:
            script = script_of(char)
            nll[script] += loss / span
            if hit is not None:
                hits[script] += hit / span
                scored[script] += 1.0 / span
    chars = dict.fromkeys(SCRIPTS, 0)
    for char in text:
        chars[script_of(char)] += 1
    return {s: ScriptShare(nll=nll[s], n_chars=chars[s], hits=hits[s], scored=scored[s]) for s in SCRIPTS}


@dataclass(frozen=True)
class PerplexityResult:
    """Perplexity over all texts, token-weighted, with the per-text values and the window settings."""

    perplexity: float  # exp(total NLL / total scored tokens): token-weighted over all texts
    cross_entropy: float  # mean NLL, nats per token
    bits_per_token: float
    bits_per_character: float  # total NLL / ln 2 / total characters
    bits_per_byte: float  # total NLL / ln 2 / total UTF-8 bytes
    n_tokens: int
    n_chars: int
    n_bytes: int
    total_nll: float  # nats
    # The unweighted mean of per-text perplexities, which is what HF `evaluate` reports: a short text counts
    # as much as a long one, so it is not the corpus perplexity above.
    mean_text_perplexity: float
    texts: tuple[TextPerplexity, ...]
    max_length: int
    stride: int
    first_token: str  # how the first token of a text was handled
    scripts: dict[str, ScriptShare] | None = None  # with by_script: summed over all texts

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.scripts is not None:
            out["scripts"] = {s: share.to_json() for s, share in self.scripts.items()}
        out["texts"] = [
            {
                **asdict(t),
                "scripts": None if t.scripts is None else {s: v.to_json() for s, v in t.scripts.items()},
            }
            for t in self.texts
        ]
        return out

    def worst(self, k: int = 3) -> list[TextPerplexity]:
        """The `k` texts of highest perplexity, highest first."""
        return sorted(self.texts, key=lambda t: (-t.perplexity, t.index))[:k]


@dataclass(frozen=True)
class Window:
    """A stretch of one text's token ids that one forward pass sees, and which of its tokens it scores."""

    text: int  # index of the text
    begin: int  # first token of the window in the text's ids
    end: int  # one past the last token
    first_scored: int  # first window position whose token is scored (>= 1: it needs a predecessor)

    @property
    def length(self) -> int:
        return self.end - self.begin


def perplexity(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    *,
    max_length: int | None = None,
    stride: int | None = None,
    batch_size: int | None = None,
    by_script: bool = False,
) -> PerplexityResult:
    """Token-weighted perplexity of `model` on `texts` with a sliding window (see the module docstring).

    max_length defaults to min(max_position_embeddings, 1024) and stride to max_length // 2. batch_size
    is the number of windows per forward pass; by default batches hold about TOKEN_BUDGET positions.
    With a BOS token the text is scored after it (its first token too); without one the first token is
    context only. With stride == max_length the windows are disjoint and the first token of each later
    window has no context inside its window, so it is not scored either. by_script adds bits per
    character per Unicode script (attribute_to_scripts; needs a fast tokenizer's offsets).
    """
    if not texts:
        raise ValueError("perplexity() needs at least one text")
    limit = getattr(model.config, "max_position_embeddings", None)
    if max_length is None:
        max_length = min(limit, DEFAULT_MAX_LENGTH) if isinstance(limit, int) else DEFAULT_MAX_LENGTH
    if max_length < 2:
        raise ValueError(f"max_length must be >= 2 (a token and its context), got {max_length}")
    if isinstance(limit, int) and max_length > limit:
        raise ValueError(f"max_length {max_length} exceeds the model's max_position_embeddings {limit}")
    if stride is None:
        stride = max(1, max_length // 2)
    if not 1 <= stride <= max_length:
        raise ValueError(f"stride must be between 1 and max_length ({max_length}), got {stride}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")

    bos = tokenizer.bos_token_id
    first_token = f"scored after BOS {tokenizer.bos_token}" if bos is not None else "not scored (no BOS)"
    if by_script and not getattr(tokenizer, "is_fast", False):
        raise ValueError("by_script needs a fast tokenizer (character offsets of every token)")
    enc = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=by_script)
    encoded: list[list[int]] = enc["input_ids"]
    ids: list[list[int]] = []
    windows: list[Window] = []
    for index, (text, tokens) in enumerate(zip(texts, encoded, strict=True)):
        if not text:
            raise ValueError(f"text {index} is empty: it has no token to score")
        # BOS is context only: it lets the first real token be scored, as it is in training.
        row = [int(bos), *tokens] if bos is not None else list(tokens)
        own = _windows(index, len(row), max_length, stride)
        if not own:
            raise ValueError(
                f"text {index} has no token to score: {len(tokens)} token(s) and the first token is "
                "context only without a BOS token"
            )
        ids.append(row)
        windows.extend(own)

    window_nll, window_tokens, window_hits = _score_windows(
        model, tokenizer, ids, windows, batch_size=batch_size, per_token=by_script
    )
    nll = [0.0] * len(texts)
    n_tokens = [0] * len(texts)
    # Sum per text in window order, whatever the batches were: the sum's rounding cannot depend on them.
    for w, window in enumerate(windows):
        nll[window.text] += window_nll[w]
        n_tokens[window.text] += window.length - window.first_scored
    scripts: list[dict[str, ScriptShare] | None] = [None] * len(texts)
    if by_script:
        shift = 1 if bos is not None else 0  # ids[t][j] is the text's token j - shift
        token_nll = [[0.0] * (len(row) - shift) for row in ids]
        token_hits: list[list[float | None]] = [[None] * (len(row) - shift) for row in ids]
        for w, window in enumerate(windows):
            start = window.begin + window.first_scored
            for j, (loss, hit) in enumerate(zip(window_tokens[w], window_hits[w], strict=True), start=start):
                token_nll[window.text][j - shift] = loss
                token_hits[window.text][j - shift] = hit
        scripts = [
            attribute_to_scripts(
                text, [tuple(o) for o in enc["offset_mapping"][i]], token_nll[i], token_hits[i]
            )
            for i, text in enumerate(texts)
        ]

    per_text = tuple(
        TextPerplexity(
            index=i,
            n_tokens=n_tokens[i],
            n_chars=len(text),
            n_bytes=len(text.encode("utf-8")),
            nll=nll[i],
            perplexity=_exp(nll[i] / n_tokens[i]),
            bits_per_character=nll[i] / LN2 / len(text),
            bits_per_byte=nll[i] / LN2 / len(text.encode("utf-8")),
            scripts=scripts[i],
        )
        for i, text in enumerate(texts)
    )
    total_nll = math.fsum(t.nll for t in per_text)
    total_tokens = sum(t.n_tokens for t in per_text)
    total_chars = sum(t.n_chars for t in per_text)
    total_bytes = sum(t.n_bytes for t in per_text)
    return PerplexityResult(
        perplexity=_exp(total_nll / total_tokens),
        cross_entropy=total_nll / total_tokens,
        bits_per_token=total_nll / total_tokens / LN2,
        bits_per_character=total_nll / LN2 / total_chars,
        bits_per_byte=total_nll / LN2 / total_bytes,
        n_tokens=total_tokens,
        n_chars=total_chars,
        n_bytes=total_bytes,
        total_nll=total_nll,
        mean_text_perplexity=math.fsum(t.perplexity for t in per_text) / len(per_text),
        texts=per_text,
        max_length=max_length,
        stride=stride,
        first_token=first_token,
        scripts=sum_scripts([t.scripts for t in per_text if t.scripts is not None]) if by_script else None,
    )


def sum_scripts(parts: Sequence[dict[str, ScriptShare]]) -> dict[str, ScriptShare]:
    """Script shares of several texts added up (bits per character is then character-weighted)."""
    return {
        s: ScriptShare(
            nll=math.fsum(p[s].nll for p in parts),
            n_chars=sum(p[s].n_chars for p in parts),
            hits=math.fsum(p[s].hits for p in parts),
            scored=math.fsum(p[s].scored for p in parts),
        )
        for s in SCRIPTS
    }


def _windows(text: int, length: int, max_length: int, stride: int) -> list[Window]:
    """The guide's loop: each window scores the tokens after the previous window's end (trg_len of them)."""
    out: list[Window] = []
    prev_end = 0
    for begin in range(0, length, stride):
        end = min(begin + max_length, length)
        trg_len = end - prev_end
        # The first window position has no predecessor in the window: its token cannot be scored there.
        first_scored = max(end - begin - trg_len, 1)
        if first_scored < end - begin:
            out.append(Window(text=text, begin=begin, end=end, first_scored=first_scored))
        prev_end = end
        if end == length:
            break
    return out


def _score_windows(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    ids: list[list[int]],
    windows: list[Window],
    *,
    batch_size: int | None,
    per_token: bool = False,
) -> tuple[list[float], list[list[float]], list[list[float]]]:
    """Summed NLL (nats, float64) of each window's scored tokens; windows share forward passes.

    With per_token, also each window's per-token NLL and whether the top-1 prediction of each token was
    right, 1.0 or 0.0 (else empty lists).
    """
    import torch

    device = next(model.parameters()).device
    keep_kwarg = _accepts(model, "logits_to_keep")
    result = [0.0] * len(windows)
    tokens: list[list[float]] = [[] for _ in windows]
    hits: list[list[float]] = [[] for _ in windows]
    for numbers in plan_batches(windows, batch_size=batch_size, device_type=device.type):
        batch = [windows[w] for w in numbers]
        ids_t, mask = batch_tensors(tokenizer, ids, batch)  # (B, T), (B, T)
        width = ids_t.shape[1]
        # Logits before the earliest predicting position of the batch are never used: do not compute them.
        first_needed = min(window.first_scored for window in batch) - 1
        extra: dict[str, Any] = {"logits_to_keep": width - first_needed} if keep_kwarg else {}
        offset = first_needed if keep_kwarg else 0
        with torch.inference_mode(), warnings.catch_warnings():
            # peft asks transformers a deprecated question on every forward; users cannot act on it.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            logits = model(
                input_ids=ids_t.to(device), attention_mask=mask.to(device), use_cache=False, **extra
            ).logits  # (B, T - offset, V)
            for r, window in enumerate(batch):
                nll, right = _row_scores(logits[r], ids_t[r], window, offset)  # (S,) float64, (S,) bool
                result[numbers[r]] = float(nll.sum().item())
                if per_token:
                    tokens[numbers[r]] = nll.tolist()
                    hits[numbers[r]] = right.double().tolist()
    return result, tokens, hits


def encode_pair(
    tokenizer: PreTrainedTokenizerBase, context: str, continuation: str
) -> tuple[list[int], list[int]]:
    """(context tokens, continuation tokens) as lm-evaluation-harness encodes a pair for a causal model
    (`LM._encode_pair`): the context's trailing whitespace moves to the continuation, the two are encoded
    together, and the continuation is what follows the context's own encoding. A BPE merge across the
    boundary (" Paris" after "Answer:") then gives the tokens the model would have read, not those of the
    continuation encoded alone. No special tokens are added: a raw prompt carries its BOS as text."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole: list[int] = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    head: list[int] = tokenizer(context, add_special_tokens=False)["input_ids"]
    return head, whole[len(head) :]


def rolling_windows(
    tokens: Sequence[int], prefix_token: int, max_length: int
) -> list[tuple[list[int], list[int]]]:
    """(context, continuation) token pairs that score every token of a text once, as lm-eval's
    loglikelihood_rolling does (get_rolling_token_windows with context_len 1, then make_disjoint_window):
    the first window predicts up to `max_length` tokens after `prefix_token` (the model's BOS, else its EOS),
    each later one the next `max_length` after the one token before them, which the model reads with the
    `max_length - 1` before that (continuation_scores cuts a context to the window)."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    ids = list(tokens)
    if not ids:
        return []
    first = min(max_length, len(ids))
    windows = [([int(prefix_token)], ids[:first])]
    done = first
    while done < len(ids):
        end = min(len(ids), done + max_length)
        # The whole window before `done` is context; the model reads what fits (continuation_scores).
        windows.append((ids[max(0, end - max_length - 1) : done], ids[done:end]))
        done = end
    return windows


def continuation_nll(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    batch_size: int | None = None,
) -> list[float]:
    """Summed NLL (nats, float64) of each continuation's tokens given its context, per pair
    (continuation_scores, without whether each is the greedy continuation)."""
    return [nll for nll, _ in continuation_scores(model, tokenizer, pairs, batch_size=batch_size)]


def continuation_scores(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    batch_size: int | None = None,
) -> list[tuple[float, bool]]:
    """Per pair: the summed NLL (nats, float64) of the continuation's tokens given its context, and whether
    every one of them is the model's most likely next token (greedy decoding would write it: lm-eval's
    `is_greedy`, the argmax of the logits, the first of equals).

    The log-likelihood of multiple-choice answers, with every context token computed once: pairs with the
    same context (a row's choices) share one pass over it through a KV cache, and the contexts of a batch
    share the prefix they all start with (the chat template's system turn), computed once for the batch as
    generation does. Per batch: the prefix (1 row), the contexts' own tokens (one row per context, left-padded
    after the prefix so each ends at the last position, whose logits give every choice's first token), then
    each choice's remaining tokens (one row per choice, on a copy of its context's cache). A context longer
    than the model's window loses its oldest tokens, as lm-eval cuts it: the model reads at most its window
    of the context and the continuation but its last token, which is only predicted (the continuation is
    always scored whole). Contexts of one pair each that share a long prefix with another (WinoGrande's
    options, each completing the sentence: `_share_prefixes`) are read as that prefix, computed once, and
    their own tokens run with the continuation, unscored.

    batch_size: choices per batch (a context's choices are never split); by default batches hold about
    CONTEXT_BUDGET new positions per forward pass.
    """
    limit = getattr(model.config, "max_position_embeddings", None)
    contexts: dict[tuple[int, ...], list[int]] = {}  # context -> its pairs, in order
    continuations: list[list[int]] = []
    for index, (context, continuation) in enumerate(pairs):
        if not context or not continuation:
            raise ValueError(f"pair {index}: context and continuation must both have tokens")
        ctx = list(context)
        # The last continuation token is never read: the model sees len(ctx) + len(continuation) - 1.
        if isinstance(limit, int) and len(ctx) + len(continuation) - 1 > limit:
            if len(continuation) > limit:
                raise ValueError(
                    f"pair {index}: a {len(continuation)}-token continuation exceeds the context"
                )
            ctx = ctx[len(ctx) + len(continuation) - 1 - limit :]
        contexts.setdefault(tuple(ctx), []).append(index)
        continuations.append(list(continuation))
    # What runs after a pair's context: its lead (context tokens moved past a shared prefix), then its
    # continuation; only the continuation is scored.
    leads = [0] * len(pairs)
    contexts = _share_prefixes(contexts, continuations, leads)
    device = next(model.parameters()).device
    budget = CONTEXT_BUDGET.get(device.type, CONTEXT_BUDGET["cuda"])
    result: list[tuple[float, bool]] = [(0.0, False)] * len(pairs)
    prefix: dict[tuple[int, ...], Any] = {}  # the last batch's shared prefix and its KV cache (one row)
    for batch in _context_batches(contexts, continuations, batch_size=batch_size, budget=budget):
        for index, scored in _score_shared(model, tokenizer, batch, continuations, leads, prefix).items():
            result[index] = scored
    return result


def _share_prefixes(
    contexts: dict[tuple[int, ...], list[int]], continuations: list[list[int]], leads: list[int]
) -> dict[tuple[int, ...], list[int]]:
    """Contexts of one pair each cut back to the longest prefix they share with a neighbour in token order,
    their own tokens moved to the front of their continuation (`continuations` and `leads`, the number of
    moved tokens, are updated in place), so that pairs whose contexts differ only near the end (WinoGrande's
    two options, each completing the sentence after the same few-shot examples) share one pass over that
    prefix. Only single-pair contexts move, as their own tokens are computed once either way; a context with
    several pairs keeps them after its own pass, and a cut that no other context shares is not made.
    """
    from pytest_llmeval.generation import MIN_SHARED_PREFIX, shared_prefix_length

    ordered = sorted(contexts)
    if len(ordered) < 2:
        return contexts
    common = shared_prefix_length(ordered, minimum=0)  # shared by every context: batches share it already
    near = [0] * len(ordered)  # per context: the most it shares with a neighbour
    for k, (a, b) in enumerate(itertools.pairwise(ordered)):
        together = shared_prefix_length([a, b], minimum=0)
        near[k], near[k + 1] = max(near[k], together), max(near[k + 1], together)
    cut: dict[tuple[int, ...], tuple[int, ...]] = {}
    for context, length in zip(ordered, near, strict=True):
        if len(contexts[context]) == 1 and length >= common + MIN_SHARED_PREFIX:
            cut[context] = context[:length]
    sharing = collections.Counter(cut.values())
    kept = {key for key, count in sharing.items() if count > 1 or key in contexts}
    out: dict[tuple[int, ...], list[int]] = {}
    for context, members in contexts.items():
        key = cut.get(context, context)
        if key not in kept:
            key = context
        elif key != context:
            (index,) = members
            continuations[index] = [*context[len(key) :], *continuations[index]]
            leads[index] = len(context) - len(key)
        out.setdefault(key, []).extend(members)
    return out


def _context_batches(
    contexts: dict[tuple[int, ...], list[int]],
    continuations: Sequence[Sequence[int]],
    *,
    batch_size: int | None,
    budget: int,
) -> list[list[tuple[tuple[int, ...], list[int]]]]:
    """Contexts with their pairs per batch, in token order: contexts sharing the longest prefix share a batch.

    Sorted as token sequences, rows of one instruction (a benchmark file's rows often share all but their
    input) sit side by side, so a batch's shared prefix reaches past the chat template's system turn into
    the instruction, and only each row's own tokens are computed per row. A batch grows while its choices
    fit `batch_size`, or else while its new positions (rows x the widest row: own part and packed choices)
    fit `budget`; a context's choices always stay together.
    """
    from pytest_llmeval.generation import shared_prefix_length

    batches: list[list[tuple[tuple[int, ...], list[int]]]] = []
    current: list[tuple[tuple[int, ...], list[int]]] = []
    for context, members in _prefix_order(contexts, continuations):
        candidate = [*current, (context, members)]
        choices = [i for _, m in candidate for i in m]
        if batch_size is not None:
            fits = len(choices) <= batch_size
        else:
            shared = shared_prefix_length([c for c, _ in candidate], minimum=0)
            width = max(len(c) for c, _ in candidate) - shared
            # A row's choices are packed after its context (_score_shared), all but their last tokens.
            tail = max(sum(len(continuations[i]) - 1 for i in m) for _, m in candidate)
            fits = len(candidate) * (width + tail) <= budget
        if current and not fits:
            batches.append(current)
            candidate = [(context, members)]
        current = candidate
    if current:
        batches.append(current)
    return batches


def _prefix_order(
    contexts: dict[tuple[int, ...], list[int]], continuations: Sequence[Sequence[int]]
) -> list[tuple[tuple[int, ...], list[int]]]:
    """Contexts grouped by the prefix they share beyond the one all share (token order finds them), the
    groups longest first, and longest first within each group, a context's length counting its packed
    choices (_score_shared).

    Token order puts the rows of one instruction side by side; within such a group, and between groups,
    similar lengths side by side keep the padding of a batch small (rows' own parts, their inputs, vary in
    length, and so do their choices).
    """
    from pytest_llmeval.generation import MIN_SHARED_PREFIX, shared_prefix_length

    ordered = sorted(contexts.items())
    if len(ordered) < 2:
        return ordered
    common = shared_prefix_length([c for c, _ in ordered], minimum=0)
    groups: list[list[tuple[tuple[int, ...], list[int]]]] = [[ordered[0]]]
    for previous, item in itertools.pairwise(ordered):
        together = shared_prefix_length([previous[0], item[0]], minimum=0)
        if together >= common + MIN_SHARED_PREFIX:
            groups[-1].append(item)
        else:
            groups.append([item])

    # Groups share no more than the common prefix with one another, so their order costs no sharing: longest
    # first, so that a batch holds contexts of like length (rows with few-shot examples drawn per row share
    # nothing past the common prefix, and token order would pad short contexts to long ones).
    def length(item: tuple[tuple[int, ...], list[int]]) -> int:
        return len(item[0]) + sum(len(continuations[i]) - 1 for i in item[1])

    groups.sort(key=lambda group: -max(length(item) for item in group))
    return [item for group in groups for item in sorted(group, key=lambda it: -length(it))]


def _score_shared(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    batch: Sequence[tuple[tuple[int, ...], list[int]]],
    continuations: Sequence[Sequence[int]],
    leads: Sequence[int],
    prefix: dict[tuple[int, ...], Any],
) -> dict[int, tuple[float, bool]]:
    """NLL of every pair of one batch of contexts, and whether it is greedy (continuation_scores), by pair
    index. A pair's first `leads[index]` continuation tokens are context (read, not scored).

    One forward pass per batch: each row holds its context's own tokens (left-padded, so that every context
    ends in the same column) and then, packed side by side, every choice's tokens but its last, each choice
    seeing its context and itself alone (a 4D attention mask, positions counted from its context's end).
    A model whose attention takes no such mask (flash attention) reads the choices in a second pass, on
    copies of their context's cache. `prefix` carries the shared prefix's KV cache from one batch to the
    next: batches of one group of rows start with the same tokens, which are then computed once for all.
    """
    import copy

    import torch
    from transformers import DynamicCache

    from pytest_llmeval.generation import MIN_SHARED_PREFIX, cache_kwarg, shared_prefix_length

    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    pad_id = int(pad_id) if pad_id is not None else 0  # any id: padded positions are masked and unscored
    ctxs = [list(context) for context, _ in batch]
    shared = shared_prefix_length(ctxs, minimum=MIN_SHARED_PREFIX)  # leaves each context >= 1 own token
    own = max(len(c) for c in ctxs) - shared
    rows = len(ctxs)
    packed = _takes_custom_masks(model)
    # Per pair: its row, and where its inputs (all its tokens but the last) start in the packed region.
    starts: dict[int, int] = {}
    width = 0  # the packed region's width: the longest row of choices
    for _, members in batch:
        used = 0
        for index in members:
            starts[index] = used
            used += len(continuations[index]) - 1
        width = max(width, used)
    width = width if packed else 0
    ids = torch.full((rows, shared + own + width), pad_id, dtype=torch.long)  # (R, P + S + W)
    mask = torch.zeros((rows, shared + own + width), dtype=torch.long)  # (R, P + S + W): real tokens
    segment = torch.zeros((rows, shared + own + width), dtype=torch.long)  # 0 context, k: pair k-1 of a row
    positions = torch.zeros((rows, shared + own + width), dtype=torch.long)  # (R, P + S + W)
    for r, ctx in enumerate(ctxs):
        ids[r, :shared] = torch.tensor(ctx[:shared])
        mask[r, :shared] = 1
        tail = len(ctx) - shared
        ids[r, shared + own - tail : shared + own] = torch.tensor(ctx[shared:])
        mask[r, shared + own - tail : shared + own] = 1
        # Positions count real tokens only, so a padded context sees the positions it would see alone.
        positions[r, : shared + own] = (mask[r, : shared + own].cumsum(-1) - 1).clamp(min=0)
        for k, index in enumerate(batch[r][1]):
            inputs = continuations[index][:-1]  # the last token is only predicted, never an input
            if not inputs or not packed:
                continue
            begin = shared + own + starts[index]
            ids[r, begin : begin + len(inputs)] = torch.tensor(inputs)
            mask[r, begin : begin + len(inputs)] = 1
            segment[r, begin : begin + len(inputs)] = k + 1
            positions[r, begin : begin + len(inputs)] = len(ctx) + torch.arange(len(inputs))
    ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
    result: dict[int, float] = {}
    greedy: dict[int, bool] = {}
    with torch.inference_mode(), warnings.catch_warnings():
        # peft asks transformers a deprecated question on every forward; users cannot act on it.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        cache = DynamicCache(config=model.config)
        if shared:
            key = tuple(ctxs[0][:shared])
            if key not in prefix:
                prefix.clear()  # one prefix kept: the batches of a group come one after the other
                prefix[key] = DynamicCache(config=model.config)
                model(
                    input_ids=ids[:1, :shared],
                    logits_to_keep=1,
                    use_cache=True,
                    **{cache_kwarg(model): prefix[key]},
                )
            cache = copy.deepcopy(prefix[key])
            cache.batch_repeat_interleave(rows)  # (1, ...) -> (R, ...): the same prefix for every context
        kv = {cache_kwarg(model): cache, "use_cache": True}
        attention: Any = mask
        if packed:
            dtype = next(model.parameters()).dtype
            attention = _packed_mask(mask, segment, shared, dtype)  # (R, 1, S + W, P + S + W)
        out = model(
            input_ids=ids[:, shared:],
            attention_mask=attention,
            position_ids=positions[:, shared:],
            logits_to_keep=width + 1,  # the context's last position, then the packed choices
            **kv,
        )
        if cache.get_seq_length() != shared + own + width:
            # A model that ignored the cache would score each choice without its context: refuse, never guess.
            raise RuntimeError(f"{type(model).__name__} did not fill the KV cache; cannot share contexts")
        if not packed:
            return _score_second_pass(
                model, batch, continuations, leads, out.logits[:, -1, :], mask, kv, pad_id
            )
        # Token t of a pair (its lead, then its continuation) is predicted at column 0 (the context's last
        # position) for t = 0, else at the pair's input t - 1; only the tokens after its lead are scored.
        where_r: list[int] = []
        where_c: list[int] = []
        targets: list[int] = []
        owner: list[int] = []
        for r, (_, members) in enumerate(batch):
            for index in members:
                tokens = continuations[index]
                for t in range(leads[index], len(tokens)):
                    where_r.append(r)
                    where_c.append(0 if t == 0 else 1 + starts[index] + t - 1)
                    targets.append(tokens[t])
                    owner.append(index)
        predicting = out.logits[torch.tensor(where_r), torch.tensor(where_c)].float()  # (M, V)
        target = torch.tensor(targets, device=predicting.device)  # (M,)
        nll = torch.nn.functional.cross_entropy(predicting, target, reduction="none").double()  # (M,)
        hit = (predicting.argmax(dim=-1) == target).tolist()  # (M,)
        for m, index in enumerate(owner):
            result[index] = result.get(index, 0.0) + float(nll[m])
            greedy[index] = greedy.get(index, True) and bool(hit[m])
    return {i: (result[i], greedy[i]) for i in result}


def _takes_custom_masks(model: PreTrainedModel) -> bool:
    """Whether the model's attention reads a 4D mask as given (sdpa and eager; flash attention does not)."""
    return getattr(model.config, "_attn_implementation", None) in ("sdpa", "eager")


def _packed_mask(mask: torch.Tensor, segment: torch.Tensor, shared: int, dtype: torch.dtype) -> torch.Tensor:
    """The additive 4D attention mask (R, 1, S + W, P + S + W) of a packed batch: the shared prefix (P) seen
    by all; a context's tokens (segment 0) by its later tokens and its choices'; a choice's (segment k) by
    its own later tokens. A padded position sees itself alone, so that it stays finite (a row of -inf
    would give NaN, and a NaN value times a zero weight is still NaN)."""
    import torch

    length = mask.shape[1]
    query = torch.arange(shared, length, device=mask.device)  # (Q,)
    keys = torch.arange(length, device=mask.device)  # (K,)
    causal = keys[None, :] <= query[:, None]  # (Q, K)
    real = mask.bool()  # (R, K)
    seg_k = segment[:, None, :]  # (R, 1, K)
    seg_q = segment[:, shared:, None]  # (R, Q, 1)
    real_q = real[:, shared:, None]  # (R, Q, 1)
    context_key = real[:, None, :] & (seg_k == 0)  # (R, 1, K): the prefix and the context's own tokens
    same_choice = real[:, None, :] & (seg_k == seg_q) & (seg_q > 0)  # (R, Q, K)
    allow = real_q & causal[None] & (context_key | same_choice)  # (R, Q, K)
    allow |= (keys[None, :] == query[:, None])[None]  # every position sees itself
    out = torch.zeros(allow.shape, dtype=dtype, device=mask.device)
    out.masked_fill_(~allow, torch.finfo(dtype).min)
    return out[:, None]  # (R, 1, Q, K)


def _score_second_pass(
    model: PreTrainedModel,
    batch: Sequence[tuple[tuple[int, ...], list[int]]],
    continuations: Sequence[Sequence[int]],
    leads: Sequence[int],
    last: torch.Tensor,
    mask: torch.Tensor,
    kv: dict[str, Any],
    pad_id: int,
) -> dict[int, tuple[float, bool]]:
    """_score_shared for a model without custom masks: each context's last logits `last` (R, V) score the
    first token of its choices; the rest of each choice runs in one more pass, one row per choice on a copy
    of its context's cache (`kv`, filled to the end of the contexts, whose real tokens are `mask`)."""
    import torch

    device = last.device
    first = torch.log_softmax(last.float(), dim=-1).double()  # (R, V)
    top = last.argmax(dim=-1)  # (R,): the greedy next token after each context
    result: dict[int, float] = {}
    greedy: dict[int, bool] = {}
    longer: list[tuple[int, int]] = []  # (context row, pair) of choices with more than one token
    for r, (_, members) in enumerate(batch):
        for index in members:
            if leads[index]:  # its first scored token follows its lead, in the next pass
                result[index], greedy[index] = 0.0, True
            else:
                result[index] = -float(first[r, continuations[index][0]])
                greedy[index] = int(top[r]) == continuations[index][0]
            if len(continuations[index]) > 1:
                longer.append((r, index))
    if not longer:
        return {i: (result[i], greedy[i]) for i in result}
    select = torch.tensor([r for r, _ in longer], device=device)
    cache = next(iter(kv.values()))
    cache.batch_select_indices(select)  # (R, ...) -> (N, ...)
    width = max(len(continuations[i]) - 1 for _, i in longer)
    tail_ids = torch.full((len(longer), width), pad_id, dtype=torch.long, device=device)  # (N, C)
    tail_mask = torch.zeros((len(longer), width), dtype=torch.long, device=device)  # (N, C)
    for n, (_, index) in enumerate(longer):
        inputs = continuations[index][:-1]  # the last token is only predicted, never an input
        tail_ids[n, : len(inputs)] = torch.tensor(inputs)
        tail_mask[n, : len(inputs)] = 1
    context_mask = mask[select]  # (N, P + S)
    start = context_mask.sum(-1, keepdim=True)  # (N, 1): each context's length, the next position
    with torch.inference_mode():
        logits = model(
            input_ids=tail_ids,
            attention_mask=torch.cat([context_mask, tail_mask], dim=-1),  # (N, P + S + C)
            position_ids=start + torch.arange(width, device=device),  # (N, C)
            **kv,
        ).logits  # (N, C, V)
    for n, (_, index) in enumerate(longer):
        # Logits at position j predict token j + 1; scored are the tokens after the lead.
        scored = max(leads[index], 1)
        targets = torch.tensor(continuations[index][scored:], device=device)  # (S,)
        predicting = logits[n, scored - 1 : scored - 1 + len(targets)].float()  # (S, V)
        nll = torch.nn.functional.cross_entropy(predicting, targets, reduction="none").double()  # (S,)
        result[index] += float(nll.sum())
        greedy[index] = greedy[index] and bool((predicting.argmax(dim=-1) == targets).all())
    return {i: (result[i], greedy[i]) for i in result}


def plan_batches(windows: Sequence[Window], *, batch_size: int | None, device_type: str) -> list[list[int]]:
    """Window numbers per forward pass: longest first, `batch_size` rows or TOKEN_BUDGET positions each.

    Sorted by length, similar windows share a batch (little padding), and a batch too large for memory fails
    at once rather than at the end.
    """
    order = sorted(range(len(windows)), key=lambda w: (-windows[w].length, w))
    budget = TOKEN_BUDGET.get(device_type, TOKEN_BUDGET["cuda"])
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        width = windows[order[start]].length  # the longest window of the batch sets its width
        rows = batch_size if batch_size is not None else max(1, budget // width)
        batches.append(order[start : start + rows])
        start += rows
    return batches


def batch_tensors(
    tokenizer: PreTrainedTokenizerBase, ids: Sequence[Sequence[int]], batch: Sequence[Window]
) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids and attention_mask (B, T) of a batch of windows, right-padded to the longest."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    pad_id = int(pad_id) if pad_id is not None else 0  # any id: padded positions are masked and unscored
    width = max(window.length for window in batch)
    ids_t = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(batch), width), dtype=torch.long)  # (B, T)
    for r, window in enumerate(batch):
        # Right padding: real tokens keep positions 0..len-1, as they would alone.
        ids_t[r, : window.length] = torch.tensor(ids[window.text][window.begin : window.end])
        mask[r, : window.length] = 1
    return ids_t, mask


def _row_scores(
    logits: torch.Tensor, ids: torch.Tensor, window: Window, offset: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """NLL (float64) of one window's scored tokens, and whether each was the model's top-1 prediction;
    logits (T - offset, V) start at position `offset`."""
    import torch

    # Token at position j is predicted by the logits at j - 1: only those rows are upcast to float32, so a
    # bfloat16 model never gets a float32 copy of its whole (B, T, V) logits.
    predicting = logits[window.first_scored - 1 - offset : window.length - 1 - offset].float()  # (S, V)
    targets = ids[window.first_scored : window.length].to(logits.device)  # (S,)
    nll = torch.nn.functional.cross_entropy(predicting, targets, reduction="none").double()  # (S,)
    return nll, predicting.argmax(dim=-1) == targets  # (S,), (S,)


def _accepts(model: PreTrainedModel, name: str) -> bool:
    """Whether the model's forward() takes `name` (peft wraps models: ask the base model)."""
    wrapped: Any = model
    base = wrapped.get_base_model() if hasattr(wrapped, "get_base_model") else wrapped
    return name in inspect.signature(base.forward).parameters


def _exp(x: float) -> float:
    """exp that saturates to inf instead of raising: a random model can have a huge NLL."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf
