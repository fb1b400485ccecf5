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
# Positions per forward pass when no batch_size is given: on CPU a row slows down past ~1000 positions, and
# the logits of 4096 positions of a 50k vocabulary are ~800 MB in float32.
DEFAULT_TOKEN_BUDGET = 4096
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def worst(self, k: int = 3) -> list[TextPerplexity]:
        """The `k` texts of highest perplexity, highest first."""
        return sorted(self.texts, key=lambda t: (-t.perplexity, t.index))[:k]


@dataclass(frozen=True)
class _Window:
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
) -> PerplexityResult:
    """Token-weighted perplexity of `model` on `texts` with a sliding window (see the module docstring).

    max_length defaults to min(max_position_embeddings, 1024) and stride to max_length // 2. batch_size
    is the number of windows per forward pass; by default batches hold about 4096 positions.
    With a BOS token the text is scored after it (its first token too); without one the first token is
    context only. With stride == max_length the windows are disjoint and the first token of each later
    window has no context inside its window, so it is not scored either.
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
    encoded: list[list[int]] = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    ids: list[list[int]] = []
    windows: list[_Window] = []
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

    window_nll = _score_windows(model, tokenizer, ids, windows, batch_size=batch_size)
    nll = [0.0] * len(texts)
    n_tokens = [0] * len(texts)
    # Sum per text in window order, whatever the batches were: the sum's rounding cannot depend on them.
    for w, window in enumerate(windows):
        nll[window.text] += window_nll[w]
        n_tokens[window.text] += window.length - window.first_scored

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
    )


def _windows(text: int, length: int, max_length: int, stride: int) -> list[_Window]:
    """The guide's loop: each window scores the tokens after the previous window's end (trg_len of them)."""
    out: list[_Window] = []
    prev_end = 0
    for begin in range(0, length, stride):
        end = min(begin + max_length, length)
        trg_len = end - prev_end
        # The first window position has no predecessor in the window: its token cannot be scored there.
        first_scored = max(end - begin - trg_len, 1)
        if first_scored < end - begin:
            out.append(_Window(text=text, begin=begin, end=end, first_scored=first_scored))
        prev_end = end
        if end == length:
            break
    return out


def _score_windows(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    ids: list[list[int]],
    windows: list[_Window],
    *,
    batch_size: int | None,
) -> list[float]:
    """Summed NLL (nats, float64) of each window's scored tokens; windows share forward passes."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    pad_id = int(pad_id) if pad_id is not None else 0  # any id: padded positions are masked and unscored
    device = next(model.parameters()).device
    keep_kwarg = _accepts(model, "logits_to_keep")
    # Longest first: similar lengths share a batch (little padding), and a too-large batch fails at once.
    order = sorted(range(len(windows)), key=lambda w: (-windows[w].length, w))
    result = [0.0] * len(windows)
    start = 0
    while start < len(order):
        width = windows[order[start]].length  # the longest window of the batch sets its width
        rows = batch_size if batch_size is not None else max(1, DEFAULT_TOKEN_BUDGET // width)
        batch = [windows[w] for w in order[start : start + rows]]
        ids_t = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, T)
        mask = torch.zeros((len(batch), width), dtype=torch.long)  # (B, T)
        for r, window in enumerate(batch):
            # Right padding: real tokens keep positions 0..len-1, as they would alone.
            ids_t[r, : window.length] = torch.tensor(ids[window.text][window.begin : window.end])
            mask[r, : window.length] = 1
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
                result[order[start + r]] = _row_nll(logits[r], ids_t[r], window, offset)
        start += len(batch)
    return result


def _row_nll(logits: torch.Tensor, ids: torch.Tensor, window: _Window, offset: int) -> float:
    """Summed NLL of one window's scored tokens; logits (T - offset, V) start at window position `offset`."""
    import torch

    # Token at position j is predicted by the logits at j - 1: only those rows are upcast to float32, so a
    # bfloat16 model never gets a float32 copy of its whole (B, T, V) logits.
    predicting = logits[window.first_scored - 1 - offset : window.length - 1 - offset].float()  # (S, V)
    targets = ids[window.first_scored : window.length].to(logits.device)  # (S,)
    nll = torch.nn.functional.cross_entropy(predicting, targets, reduction="none")  # (S,)
    return float(nll.double().sum().item())


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
