"""exact_match: optionally extract an answer with a regex, normalise both sides, compare for equality.

Pure: no pytest, no torch. The collector calls `validate_config` once per row; the evaluator calls `score`.

Several references (a row's expected_output given as a list, such as "4" and "four"): the row matches when
the answer equals any of them. extract_pattern still applies to the output alone, and every reference is
normalised with the row's one set of options (normalize, case_sensitive, percent), as a single one is.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pytest_llmeval.formatting import shown
from pytest_llmeval.scorers.base import Score, as_references
from pytest_llmeval.scorers.config import compile_regex, find, memoised
from pytest_llmeval.scorers.config import describe as _describe
from pytest_llmeval.scorers.config import quote as _quote
from pytest_llmeval.scorers.config import threshold as _threshold

__all__ = ["extract", "normalize", "score", "validate_config"]

_KNOWN_KEYS = (
    "case_sensitive",
    "extract_match",
    "extract_pattern",
    "max_new_tokens",
    "normalize",
    "percent",
    "threshold",
)
_BOOL_KEYS = ("normalize", "case_sensitive", "percent")
_WHICH = ("first", "last")

# Sentence-final punctuation a model tends to append ("The answer is 42."). The whole trailing run goes,
# not just one mark: stripping one would make "Paris.." -> "Paris." -> "Paris", and normalize must be
# idempotent. A number is never damaged: "3." -> "3", "3.5." -> "3.5".
_TRAILING_PUNCT = re.compile(r"[\s.!?…。！？]+$")

# A plain number standing on its own. The guards on both sides are what keep dates (2021-03-05), times
# (10:30), versions (1.2.3), ranges (1-2), fractions (1/2), lists (1,2,3), identifiers (x2, 3rd) and
# bad groupings (1,00) untouched: a digit run glued to one of those characters is not a plain number.
# A "%" right after the match is excluded too, or "5%%" -> "0.05%" -> "0.0005" would break idempotence.
_NUMBER = re.compile(
    r"""
    (?<![\w.,:/+\-])
    (?P<sign>[+-]?)
    (?:
        (?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.(?P<frac>[0-9]+))?
      | \.(?P<bare_frac>[0-9]+)
    )
    (?P<pct>%?)
    (?![\w:/%\-]|[.,][0-9])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Options:
    extract_pattern: str | None = None
    extract_match: str = "first"
    normalize: bool = True
    case_sensitive: bool = False
    percent: bool = False
    threshold: float = 1.0


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _options(config)


def extract(text: str, pattern: str, *, which: str = "first") -> str | None:
    """Return the answer `pattern` finds in `text` (group 1, else the whole match), or None if none.

    The pattern is searched anywhere in `text` (`re.finditer` semantics, no implicit anchors or flags; use
    inline flags such as `(?i)`). `which` picks the first or the last match: "last" suits chain-of-thought
    outputs whose final answer comes after intermediate numbers. When the pattern has capturing groups the
    answer is the first group that took part in the chosen match (group 1 unless it is an unmatched
    alternative); when none took part, the result is None. Without groups it is the whole match.
    """
    if which not in _WHICH:
        raise ValueError(f"which must be 'first' or 'last', not {which!r}")
    match = find(pattern, text, "extract_pattern", last=which == "last")
    if match is None:
        return None
    if not match.re.groups:
        return str(match.group(0))
    return next((str(group) for group in match.groups() if group is not None), None)


def normalize(text: str, *, case_sensitive: bool = False, percent: bool = False) -> str:
    """Return the canonical form of an answer: trimmed, spaces collapsed, case-folded, numbers canonical."""
    # NFC first so that a decomposed "é" (e + U+0301) equals the composed one.
    text = " ".join(unicodedata.normalize("NFC", text).split())  # split() knows CRLF, NBSP, U+3000...
    if not case_sensitive:
        # casefold, not lower: "Straße" must equal "STRASSE". Folding can decompose, so NFC again.
        text = unicodedata.normalize("NFC", text.casefold())
    # Keep an answer that is nothing but punctuation ("?") rather than erase it to "".
    text = _TRAILING_PUNCT.sub("", text) or text
    return _NUMBER.sub(lambda match: _canonical_number(match, percent=percent), text)


def score(prediction: str, expected: str | Sequence[str], config: Mapping[str, Any]) -> Score:
    """Score 1.0 when the (extracted) prediction equals the expected answer (any of several references)
    after normalisation, else 0.0.

    Only the prediction goes through `extract_pattern`; `expected` is already the bare answer. With
    `normalize: false` the strings are compared as they are, case-folded unless `case_sensitive`.
    """
    options = _options(config)
    wants = [_comparable(reference, options) for reference in as_references(expected)]
    # Several references: all of them normalised, and which one matched (the first when none did).
    several: dict[str, Any] = {"normalized_references": wants, "n_references": len(wants)}
    extracted: str | None = None
    answer = prediction
    if options.extract_pattern is not None:
        extracted = extract(prediction, options.extract_pattern, which=options.extract_match)
        if extracted is None:
            return Score(
                value=0.0,
                threshold=options.threshold,
                details={
                    "extracted": None,
                    "unparsed": True,  # no answer found: reported apart from wrong answers
                    "reason": "extract_pattern matched nothing",
                    "normalized_expected": wants[0],
                    **(several if len(wants) > 1 else {}),
                },
            )
        answer = extracted
    got = _comparable(answer, options)
    matched = next((i for i, want in enumerate(wants) if want == got), None)
    return Score(
        value=0.0 if matched is None else 1.0,
        threshold=options.threshold,
        details={
            "extracted": extracted,
            "normalized_prediction": got,
            "normalized_expected": wants[matched or 0],
            **({**several, "best_reference": matched or 0} if len(wants) > 1 else {}),
            # Only a row that extracts can fail to: without a pattern the whole output is the answer.
            **({"unparsed": False} if options.extract_pattern is not None else {}),
        },
    )


def _comparable(text: str, options: _Options) -> str:
    if options.normalize:
        return normalize(text, case_sensitive=options.case_sensitive, percent=options.percent)
    return text if options.case_sensitive else text.casefold()


def _canonical_number(match: re.Match[str], *, percent: bool) -> str:
    # Textual, not float(): "007" keeps its zeros (codes, zero-padded ids), and digits are never rounded.
    sign = match["sign"]
    integer = (match["int"] or "0").replace(",", "")
    fraction = (match["frac"] or match["bare_frac"] or "").rstrip("0")
    suffix = match["pct"]
    if suffix and percent:
        # Decimal built from a tuple moves the exponent exactly: 12.5% -> 0.125, never 0.12500000000000001.
        number = Decimal(f"{integer}.{fraction or '0'}").as_tuple()
        shifted = Decimal((number.sign, number.digits, int(number.exponent) - 2))
        integer, _, fraction = format(shifted, "f").partition(".")
        fraction = fraction.rstrip("0")
        suffix = ""
    if sign == "+" or not (integer.strip("0") or fraction):
        sign = ""  # "+5" is "5", and "-0" / "-0.0" are "0"
    return f"{sign}{integer}{'.' if fraction else ''}{fraction}{suffix}"


# A benchmark's rows mostly share one evaluation_config (most often none): parsed once per distinct one.
_PARSED: dict[Hashable, _Options] = {}


def _options(config: Mapping[str, Any]) -> _Options:
    """_parse(config), memoised by the config's items and their types (`1` is not `true` to _parse, though
    they are equal); a config holding a list or dict is parsed each time."""
    try:
        key = tuple((k, type(v), v) for k, v in config.items()) if isinstance(config, Mapping) else None
        hash(key)
    except TypeError:
        key = None
    return memoised(_PARSED, key, config, _parse)


def _parse(config: Mapping[str, Any]) -> _Options:
    if not isinstance(config, Mapping):
        raise ValueError(f"evaluation_config for exact_match must be a mapping, not {type(config).__name__}")
    for key in config:
        if key not in _KNOWN_KEYS:
            close = difflib.get_close_matches(str(key), _KNOWN_KEYS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(
                f"unknown key {_quote(str(key))} in evaluation_config for exact_match; "
                f"{hint}known: {', '.join(_KNOWN_KEYS)}"
            )

    pattern = config.get("extract_pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise ValueError(f"extract_pattern must be a string, not {_describe(pattern)}")
        if not pattern:
            raise ValueError("extract_pattern must not be empty (it would match the empty string everywhere)")
        try:
            compile_regex(pattern)
        except re.error as error:
            raise ValueError(f"invalid regex in extract_pattern {_quote(pattern)}: {error}") from None

    which = config.get("extract_match", "first")
    if which not in _WHICH:
        raise ValueError(f"extract_match must be 'first' or 'last', not {_describe(which)}")

    for key in _BOOL_KEYS:
        if key in config and not isinstance(config[key], bool):
            raise ValueError(f"{key} must be true or false, not {_describe(config[key])}")
    if config.get("percent", False) and not config.get("normalize", True):
        # percent is a normalisation rule; silently ignoring it would hide a config mistake.
        raise ValueError("percent: true needs normalize: true (percent is part of normalisation)")

    threshold = _threshold(config, 1.0)  # also checks max_new_tokens

    return _Options(
        extract_pattern=pattern,
        extract_match=which,
        normalize=config.get("normalize", True),
        case_sensitive=config.get("case_sensitive", False),
        percent=config.get("percent", False),
        threshold=float(threshold),
    )


def explain(details: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A failing row's report: the extracted answer and the normalised forms compared."""
    lines = []
    # Only a row that extracts has an extracted answer to show; without a pattern "None" would read as a
    # failed extraction.
    if config.get("extract_pattern") is not None:
        extracted = details["extracted"]
        lines.append(f"extracted:   {'None' if extracted is None else shown(str(extracted))}")
    if "normalized_prediction" in details:
        expected = details.get("normalized_expected")
        wanted = " or ".join(shown(str(want)) for want in details.get("normalized_references", ()))
        lines.append(
            f"compared:    {shown(str(details['normalized_prediction']))} vs "
            f"{wanted or ('None' if expected is None else shown(str(expected)))}"
        )
    return lines
