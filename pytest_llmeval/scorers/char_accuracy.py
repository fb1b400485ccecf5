"""char_accuracy: the share of characters right, per writing system, after aligning output and expected.

Pure: no pytest, no torch. The collector calls `validate_config` once per row; the evaluator calls `score`.

The Japanese adaptation document (§4.1, §4.2) judges Japanese output by character accuracy, overall and for
hiragana, katakana and kanji apart. Characters are compared through an alignment, never position by
position: zipping the two strings would count every character after one inserted character as wrong
("こXんにちは世界" for "こんにちは世界" would score 1/8 instead of 7/8).

The alignment is rapidfuzz's `LCSseq.opcodes` (C++, bit-parallel, O(n/64 * m): about 1 ms for two
unrelated 2,000-character texts): one with the fewest insertions and deletions, which is one with the most
characters aligned to an identical character (a longest common subsequence). Not `Levenshtein.opcodes`: a
cheapest Levenshtein alignment may spend two substitutions where an insertion and a deletion would keep a
correct character, and which of its equally cheap alignments it returns depends on the argument order.
For "日本の首都は東京です。" and the output "日本の首都は京Xです。" (東 dropped, X added) it pairs 東京
with 京X by two substitutions and counts the correct 京 wrong: kanji 4/6, below 0.80, where 5/6 were
right. On sentences with 1 to 6 random edits it gives different counts for (a, b) and (b, a) about one
time in ten. A longest common subsequence has one length whichever way round, and one edit moves it by
at most one character.

    accuracy = aligned / max(len(expected), len(output))   (1.0 for two empty texts)

where `aligned` counts the characters aligned to an identical one. Per script, over the expected text's
characters only: the share of that script's characters aligned to an identical one. Scripts are the
document's code point ranges, exactly: hiragana U+3040-309F, katakana U+30A0-30FF (so ー and ・ count as
katakana), kanji U+4E00-9FAF (so 々, CJK extension A and the ideographs after U+9FAF are "other"), and
"other" for everything else (Latin, digits, punctuation, spaces). A script absent from the expected text is
not judged.

Both texts are NFC-normalised (a decomposed "が" is one character, as it looks) and stripped of leading
and trailing whitespace (a model's trailing newline is not a wrong character). Inner whitespace counts:
in Japanese a space between words is a character the model added. Case counts unless
`case_sensitive: false`.

Several references (a row's expected_output given as a list, such as two accepted spellings): the output
is judged against the best of them, the first that passes (overall and every script) with the highest
accuracy, else the one with the highest accuracy; the details name it (`best_reference`, 0-based) and hold
its counts. Scores are never mixed across references: each script's share is the chosen reference's.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_llmeval.scorers.base import Score, best_reference
from pytest_llmeval.scorers.config import check_keys as _check_keys
from pytest_llmeval.scorers.config import describe as _describe
from pytest_llmeval.scorers.config import threshold as _threshold

__all__ = [
    "DEFAULT_SCRIPT_THRESHOLDS",
    "SCRIPTS",
    "CharAccuracyScore",
    "aligned_mask",
    "explain",
    "normalize",
    "score",
    "script_of",
    "validate_config",
]

_KNOWN_KEYS = ("case_sensitive", "max_new_tokens", "script_thresholds", "threshold")
SCRIPTS = ("hiragana", "katakana", "kanji", "other")
# The document's targets (§4.2). "other" (Latin, digits, punctuation) has none: the document sets none.
DEFAULT_SCRIPT_THRESHOLDS: Mapping[str, float | None] = MappingProxyType(
    {"hiragana": 0.90, "katakana": 0.88, "kanji": 0.80, "other": None}
)
_DEFAULT_THRESHOLD = 0.85
_SCRIPT_VALUE = "a number in [0, 1] or null"


@dataclass(frozen=True)
class _Options:
    case_sensitive: bool = True
    threshold: float = _DEFAULT_THRESHOLD
    script_thresholds: Mapping[str, float | None] = field(
        default_factory=lambda: dict(DEFAULT_SCRIPT_THRESHOLDS)
    )


@dataclass(frozen=True)
class CharAccuracyScore(Score):
    """A Score that also fails when a script of the expected text is below its own threshold."""

    # Score.passed alone compares the overall accuracy; a row whose kanji are half wrong must fail even
    # when the kana around them lift the overall share past its threshold.
    failed_scripts: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.value >= self.threshold and not self.failed_scripts


def validate_config(config: Mapping[str, Any]) -> None:
    """Raise ValueError with a one-line reason naming the offending key when `config` is invalid."""
    _parse(config)


def script_of(char: str) -> str:
    """hiragana, katakana, kanji or other, by the adaptation document's code point ranges."""
    # Not perplexity.script_of: its ranges are wider (extensions, 々, half-width kana, Latin); these are
    # the document's, so the numbers compare with the document's targets.
    code = ord(char)
    if 0x3040 <= code <= 0x309F:
        return "hiragana"
    if 0x30A0 <= code <= 0x30FF:
        return "katakana"
    if 0x4E00 <= code <= 0x9FAF:
        return "kanji"
    return "other"


def normalize(text: str, *, case_sensitive: bool = True) -> str:
    """Return `text` in NFC, stripped at both ends, case-folded unless `case_sensitive`."""
    text = unicodedata.normalize("NFC", text).strip()
    # casefold, not lower ("Straße" = "STRASSE"); folding can decompose, so NFC again.
    return text if case_sensitive else unicodedata.normalize("NFC", text.casefold())


def aligned_mask(expected: str, output: str) -> list[bool]:
    """For each character of `expected`: whether the alignment pairs it with an identical output character."""
    # Imported here: the plugin imports every scorer at start-up, and rapidfuzz costs about 20 ms to load.
    from rapidfuzz.distance import LCSseq

    mask = [False] * len(expected)
    for op in LCSseq.opcodes(expected, output):
        if op.tag == "equal":
            mask[op.src_start : op.src_end] = [True] * (op.src_end - op.src_start)
    return mask


def score(prediction: str, expected: str | Sequence[str], config: Mapping[str, Any]) -> CharAccuracyScore:
    """Score the aligned character accuracy of `prediction` against `expected` (the best of several
    references), overall and per script."""
    options = _parse(config)
    return best_reference(lambda reference: _score(prediction, reference, options), expected)


def _score(prediction: str, expected: str, options: _Options) -> CharAccuracyScore:
    got = normalize(prediction, case_sensitive=options.case_sensitive)
    want = normalize(expected, case_sensitive=options.case_sensitive)
    mask = aligned_mask(want, got)
    aligned = sum(mask)
    longest = max(len(want), len(got))
    accuracy = 1.0 if longest == 0 else aligned / longest  # two empty texts are equal

    counts: dict[str, list[int]] = {}  # script -> [chars, correct]
    for char, hit in zip(want, mask, strict=True):
        tally = counts.setdefault(script_of(char), [0, 0])
        tally[0] += 1
        tally[1] += hit
    scripts: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    for name in SCRIPTS:  # a fixed order, so that details and reports read the same on every row
        if name not in counts:
            continue  # absent from the expected text: nothing to judge
        chars, correct = counts[name]
        share = correct / chars
        limit = options.script_thresholds.get(name)
        passed = None if limit is None else share >= limit
        if passed is False:
            failed.append(name)
        scripts[name] = {
            "chars": chars,
            "correct": correct,
            "accuracy": share,
            "threshold": limit,
            "passed": passed,
        }
    return CharAccuracyScore(
        value=accuracy,
        threshold=options.threshold,
        details={
            "accuracy": accuracy,
            "aligned": aligned,
            "expected_chars": len(want),
            "output_chars": len(got),
            "scripts": scripts,
            "failed_scripts": failed,
        },
        failed_scripts=tuple(failed),
    )


def explain(details: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """A failing row's report: overall and per-script accuracy against their thresholds."""
    if "accuracy" not in details:
        return []
    longest = max(details["expected_chars"], details["output_chars"])
    overall = _against(details["accuracy"], config.get("threshold", _DEFAULT_THRESHOLD))
    lines = [f"characters:  {overall} ({details['aligned']} of {longest} aligned)"]
    for name, script in details["scripts"].items():
        limit, share = script["threshold"], script["accuracy"]
        shown = f"{share:.2f} (no threshold)" if limit is None else _against(share, limit)
        lines.append(f"{name + ':':<12} {shown} ({script['correct']} of {script['chars']})")
    return lines


def _against(value: float, limit: float) -> str:
    """'0.75 < 0.80': two decimals, more when two would show a failing 0.7999 as 0.80 < 0.80."""
    for digits in (2, 4, 6):
        shown, bound = f"{value:.{digits}f}", f"{limit:.{digits}f}"
        if shown != bound or value == limit:
            break
    return f"{shown} {'>=' if value >= limit else '<'} {bound}"


def _parse(config: Mapping[str, Any]) -> _Options:
    if not isinstance(config, Mapping):
        raise ValueError(
            f"evaluation_config for char_accuracy must be a mapping, not {type(config).__name__}"
        )
    # Unknown keys first, before any value is read: a misspelt key is the likelier mistake.
    _check_keys(config, _KNOWN_KEYS, "evaluation_config for char_accuracy")
    if "case_sensitive" in config and not isinstance(config["case_sensitive"], bool):
        raise ValueError(f"case_sensitive must be true or false, not {_describe(config['case_sensitive'])}")
    threshold = _threshold(config, _DEFAULT_THRESHOLD)  # also checks max_new_tokens
    scripts = dict(DEFAULT_SCRIPT_THRESHOLDS)
    if "script_thresholds" in config:
        given = config["script_thresholds"]
        if not isinstance(given, Mapping):
            raise ValueError(
                f"script_thresholds must be an object of script names ({', '.join(SCRIPTS)}) to "
                f"{_SCRIPT_VALUE}, not {_describe(given)}"
            )
        _check_keys(given, SCRIPTS, "script_thresholds")
        scripts.update({name: _script_threshold(name, value) for name, value in given.items()})
    return _Options(
        case_sensitive=config.get("case_sensitive", True),
        threshold=threshold,
        script_thresholds=scripts,
    )


def _script_threshold(name: str, value: Any) -> float | None:
    # null switches a script's default threshold off: its accuracy is reported, not judged.
    if value is None:
        return None
    # bool is an int subclass: `kanji: true` is a typo, not 1.0.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"script_thresholds.{name} must be {_SCRIPT_VALUE}, not {_describe(value)}")
    if not 0.0 <= value <= 1.0:  # also false for nan
        raise ValueError(f"script_thresholds.{name} must be {_SCRIPT_VALUE}, not {value!r}")
    return float(value)
