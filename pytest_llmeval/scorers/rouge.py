"""rouge: rouge-score's ROUGE F1 (ROUGE-L by default) of the output against the expected text.

Pure: no pytest, no torch. The collector calls `validate_config` once per row; the evaluator calls `score`.

rouge-score's default tokenizer lower-cases and keeps only runs of a-z and 0-9, so Japanese, Chinese or
Korean text has no tokens at all and scores 0. When either text holds a CJK character (kana, kanji, hangul)
both are tokenised by `CjkTokenizer` instead: NFKC first (full-width "２０２３" is "2023", half-width kana
is full-width), each CJK character its own token, everything between CJK characters exactly as
rouge-score's default tokenizer does it. Text without CJK goes through rouge-score untouched, so its
numbers are rouge-score's own.

Several references (a row's expected_output given as a list): rouge-score's `score_multi` rule, the
reference with the highest F1 (the first of equals), its precision and recall with it; the details name
it (`best_reference`, 0-based). One tokenizer for all: the CJK one when any of the texts holds CJK.
"""

from __future__ import annotations

import difflib
import functools
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmeval.scorers.base import Score, as_references
from pytest_llmeval.scorers.config import check_keys as _check_keys
from pytest_llmeval.scorers.config import describe as _describe
from pytest_llmeval.scorers.config import threshold as _threshold

__all__ = ["METRICS", "CjkTokenizer", "has_cjk", "score", "tokenize", "validate_config"]

METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
_KNOWN_KEYS = ("max_new_tokens", "metric", "threshold", "use_stemmer")
_DEFAULT_THRESHOLD = 0.3

# Kana, kanji and hangul (with their half-width and compatibility forms). CJK punctuation (、。「」) is
# left out on purpose: the default tokenizer drops Latin punctuation, and a shared "。" is no evidence of
# overlap either.
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3040, 0x30FF),  # Hiragana, Katakana (with ー)
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31BF),  # Bopomofo extended
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFFDC),  # half-width katakana and hangul
    (0x1B000, 0x1B16F),  # kana supplement and extensions
    (0x20000, 0x3134F),  # CJK extensions B to G, compatibility supplement
)


@dataclass(frozen=True)
class _Options:
    metric: str = "rougeL"
    use_stemmer: bool = False
    threshold: float = _DEFAULT_THRESHOLD


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse(config)


def has_cjk(text: str) -> bool:
    """True when `text` holds a kana, kanji or hangul letter, which rouge-score's default tokenizer drops."""
    return any(_is_cjk(char) for char in text)


class CjkTokenizer:
    """rouge-score tokenizer that makes each CJK character a token and leaves the rest to rouge-score."""

    def __init__(self, use_stemmer: bool = False) -> None:
        from rouge_score import tokenizers  # heavy (nltk): imported only when a row is scored

        self._default = tokenizers.DefaultTokenizer(use_stemmer)

    def tokenize(self, text: str) -> list[str]:
        """Split `text` into tokens: CJK characters one by one, other runs as rouge-score's default does."""
        tokens: list[str] = []
        run: list[str] = []
        for char in unicodedata.normalize("NFKC", text):
            if _is_cjk(char):
                if run:
                    tokens.extend(self._default.tokenize("".join(run)))
                    run = []
                tokens.append(char)
            else:
                run.append(char)
        if run:
            tokens.extend(self._default.tokenize("".join(run)))
        return tokens


def tokenize(text: str, *, cjk: bool, use_stemmer: bool = False) -> list[str]:
    """Return the tokens ROUGE compares: rouge-score's default tokens, or `CjkTokenizer`'s when `cjk`."""
    return list(_tokenizer(cjk, use_stemmer).tokenize(text))


def score(prediction: str, expected: str | Sequence[str], config: Mapping[str, Any]) -> Score:
    """Score the ROUGE F1 of `prediction` against `expected`, or against the best of several references
    (rouge-score's score_multi rule); precision and recall go into the details."""
    options = _parse(config)
    references = as_references(expected)
    cjk = has_cjk(prediction) or any(has_cjk(reference) for reference in references)
    scorer = _scorer(options.metric, options.use_stemmer, cjk)
    # score_multi's own loop, kept here to know which reference won: the highest F1, the first of equals.
    results = [scorer.score(reference, prediction)[options.metric] for reference in references]
    best = max(range(len(results)), key=lambda i: results[i].fmeasure)
    result, reference = results[best], references[best]
    tokenizer = _tokenizer(cjk, options.use_stemmer)
    prediction_tokens, expected_tokens = (
        len(tokenizer.tokenize(prediction)),
        len(tokenizer.tokenize(reference)),
    )
    details: dict[str, Any] = {
        "metric": options.metric,
        "precision": float(result.precision),
        "recall": float(result.recall),
        "fmeasure": float(result.fmeasure),
        "tokenizer": "cjk-characters" if cjk else "rouge-score",
        "use_stemmer": options.use_stemmer,
        "prediction_tokens": prediction_tokens,
        "expected_tokens": expected_tokens,
        **({"best_reference": best, "n_references": len(references)} if len(references) > 1 else {}),
    }
    sides = (("prediction", prediction_tokens), ("expected text", expected_tokens))
    empty = [side for side, count in sides if not count]
    if empty:
        # A Cyrillic or Greek answer scores 0 this way: say so rather than leave a bare 0 to puzzle over.
        kept = "a-z, 0-9 and CJK characters" if cjk else "a-z and 0-9 (rouge-score's default)"
        details["note"] = f"no tokens in the {' or the '.join(empty)}: the tokenizer keeps only {kept}"
    return Score(value=float(result.fmeasure), threshold=options.threshold, details=details)


def _is_cjk(char: str) -> bool:
    code = ord(char)
    # isalnum drops the few punctuation and symbol code points inside the ranges (the Katakana middle dot
    # U+30FB, the half-width corner brackets) and keeps the letter-like marks (ー, 々, 〇).
    return char.isalnum() and any(low <= code <= high for low, high in _CJK_RANGES)


@functools.cache
def _tokenizer(cjk: bool, use_stemmer: bool) -> Any:
    if cjk:
        return CjkTokenizer(use_stemmer)
    from rouge_score import tokenizers

    return tokenizers.DefaultTokenizer(use_stemmer)


@functools.cache
def _scorer(metric: str, use_stemmer: bool, cjk: bool) -> Any:
    from rouge_score import rouge_scorer

    # tokenizer=None keeps rouge-score's own default path, so Latin results are rouge-score's bit for bit.
    return rouge_scorer.RougeScorer(
        [metric], use_stemmer=use_stemmer, tokenizer=_tokenizer(True, use_stemmer) if cjk else None
    )


def _parse(config: Mapping[str, Any]) -> _Options:
    if not isinstance(config, Mapping):
        raise ValueError(f"evaluation_config for rouge must be a mapping, not {type(config).__name__}")
    _check_keys(config, _KNOWN_KEYS, "evaluation_config for rouge")

    metric = config.get("metric", "rougeL")
    if metric not in METRICS:
        close = difflib.get_close_matches(str(metric), METRICS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {_describe(metric)}{hint}")

    use_stemmer = config.get("use_stemmer", False)
    if not isinstance(use_stemmer, bool):
        raise ValueError(f"use_stemmer must be true or false, not {_describe(use_stemmer)}")

    return _Options(metric=metric, use_stemmer=use_stemmer, threshold=_threshold(config, _DEFAULT_THRESHOLD))
