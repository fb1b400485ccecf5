"""Perplexity of a causal LM on texts: token-weighted NLL over a sliding window, bits per character and byte.

The window follows the transformers guide "Perplexity of fixed-length models": windows of `max_length`
tokens advance by `stride`; each window scores only the tokens the previous window did not reach, so every
token is scored once, with the longest context its window gives. All windows of all texts are sorted by
length and share forward passes; per-token NLL is summed per text in float64, so the batch composition
changes the result by float32 noise at most.

torch is imported inside the functions; shapes are noted as (B, T, V) = (batch, tokens, vocabulary).
"""

from __future__ import annotations

import inspect
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
