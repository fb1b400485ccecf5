"""Log-likelihoods of continuations given contexts, as lm-evaluation-harness computes them, with every
context token computed once: multiple-choice options, lm-eval's loglikelihood requests and its rolling
windows (`rolling_windows`).

`encode_pair` splits a (context, continuation) pair into tokens as lm-eval's `_encode_pair` does;
`continuation_scores` gives each pair's summed NLL and whether the continuation is greedy. Pairs sharing a
context share one pass over it, a batch's contexts share their common prefix, a row's choices are packed
after its context under a 4D attention mask (`_score_shared`), and contexts that differ only near their
end share the prefix they have in common (`_share_prefixes`). Values equal the definition's (float64, one
pair per pass) to float32 noise: tests/test_loglikelihood.py.

torch is imported inside the functions; shapes are noted as (R, T, V) = (rows, tokens, vocabulary).
"""

from __future__ import annotations

import collections
import itertools
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# New positions per forward pass of continuation_scores' contexts, which keep one position's logits, not
# (B, T, V): on CPU 1024 ran 5% faster than 512 and 2048 no faster (5-shot ARC-Easy's ~93-token contexts,
# 2 cores, BENCHMARKS.md), as fewer passes pay each layer's fixed cost fewer times.
CONTEXT_BUDGET = {"cpu": 1024, "cuda": 8192}


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
        if batch_size is not None:
            fits = sum(len(m) for _, m in candidate) <= batch_size
        else:
            shared = shared_prefix_length([c for c, _ in candidate], minimum=0)
            width = max(len(c) for c, _ in candidate) - shared
            tail = max(_packed_width(m, continuations) for _, m in candidate)
            fits = len(candidate) * (width + tail) <= budget
        if current and not fits:
            batches.append(current)
            candidate = [(context, members)]
        current = candidate
    if current:
        batches.append(current)
    return batches


def _packed_width(members: Sequence[int], continuations: Sequence[Sequence[int]]) -> int:
    """Positions a context's choices take packed after it (_score_shared): each choice's tokens but its last,
    which is only predicted."""
    return sum(len(continuations[i]) - 1 for i in members)


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
        return len(item[0]) + _packed_width(item[1], continuations)

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
