"""The held_out gate: a benchmark's rows must not appear in the adapter's training data.

`load_training_data` reads the training file (JSONL rows with instruction/input/output, or text); `held_out`
finds each benchmark row whose input, or input and instruction, appears in it, exactly after normalising
(case, Unicode form, whitespace, punctuation) or as a long shared run of words (an n-gram index), and gives
gates' Verdict. Pure: no pytest, no torch.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_llmeval.benchmark import Case, JsonlDecodeError, jsonl_objects, jsonl_text
from pytest_llmeval.gates import _DETAIL_LINES, _EPS, _MESSAGE_ROWS, Verdict

if TYPE_CHECKING:
    # A type name only: held_out need not import prompts at run time.
    from pytest_llmeval.prompts import Example


@dataclass(frozen=True)
class TrainingRow:
    """One training example, as far as contamination checks need it."""

    instruction: str
    input: str
    line: int  # 1-based line number in the training file


def load_training_data(path: Path) -> list[TrainingRow]:
    """Read a training JSONL: `instruction` (+ optional `input`) per line, or `prompt`/`text` as one text."""
    rows: list[TrainingRow] = []
    try:
        text = jsonl_text(path.read_bytes())
    except JsonlDecodeError as exc:
        raise ValueError(f"{path}:{exc.line}: {exc.reason}") from None
    for lineno, obj, reason in jsonl_objects(text):
        if obj is None:
            raise ValueError(f"{path}:{lineno}: {reason}")
        if "instruction" in obj:
            instruction, inp = obj["instruction"], obj.get("input", "")
            if not isinstance(instruction, str) or not isinstance(inp, str):
                raise ValueError(f"{path}:{lineno}: 'instruction' and 'input' must be strings")
        else:
            texts = [obj[key] for key in ("prompt", "text") if key in obj]
            if not texts:
                raise ValueError(
                    f"{path}:{lineno}: expected an 'instruction' (with optional 'input'), "
                    "'prompt' or 'text' field"
                )
            if not isinstance(texts[0], str):
                raise ValueError(f"{path}:{lineno}: 'prompt'/'text' must be a string")
            instruction, inp = texts[0], ""
        rows.append(TrainingRow(instruction=instruction, input=inp, line=lineno))
    return rows


def held_out(
    cases: Sequence[Case],
    training: Sequence[TrainingRow],
    *,
    examples: Sequence[Example] = (),
    ngram: int = 3,
    max_overlap: float = 0.8,
    max_number_share: float = 1 / 3,
) -> Verdict:
    """Are the benchmark rows, and the few-shot examples their prompts show, absent from the training data?
    Exact duplicates fail, near duplicates warn.

    `examples`: the pool of a separate few-shot file (pass () when the examples are the benchmark's own rows:
    those are checked as rows). An example found in the training data leaks it into every prompt that shows
    it, so examples get the same rules as rows, reported apart (details `fewshot_exact`, `fewshot_near`).

    Near duplicates: the same text once every digit run is masked (only where numbers are at most
    `max_number_share` of the words: in a date or a sum the numbers *are* the row), or at least `max_overlap`
    of the row's word n-grams found in one training row.
    """
    if ngram < 1:
        raise ValueError(f"held_out ngram must be >= 1, got {ngram!r}")
    if not 0 < max_overlap <= 1:
        raise ValueError(f"held_out max_overlap must be within (0, 1], got {max_overlap!r}")
    if not 0 <= max_number_share <= 1:
        raise ValueError(f"held_out max_number_share must be within [0, 1], got {max_number_share!r}")
    gate = "held_out"
    settings: dict[str, Any] = {
        "ngram": ngram,
        "max_overlap": max_overlap,
        "max_number_share": max_number_share,
    }
    if examples:
        settings["fewshot_examples"] = len(examples)
    if not training:
        what = "the benchmark and its few-shot examples are" if examples else "the benchmark is"
        return Verdict(gate, "skip", f"no training data given: cannot check that {what} held out", settings)

    # Rows and examples are indexed together (both are instruction + input) and split afterwards: one pass
    # over the training data, one set of rules.
    found = _duplicates([*cases, *examples], training, ngram, max_overlap, max_number_share)
    exact, near = _split(found[: len(cases)])
    details: dict[str, Any] = {**settings, "training_rows": len(training), "exact": exact, "near": near}
    # (what was checked, its exact and near matches, whether a match is named with its line)
    groups = [(f"{len(cases)} benchmark rows", exact, near, False)]
    if examples:
        fewshot_exact, fewshot_near = _split(found[len(cases) :])
        details.update(fewshot_exact=fewshot_exact, fewshot_near=fewshot_near)
        groups.append((f"{len(examples)} few-shot examples", fewshot_exact, fewshot_near, True))
    against = f"against {len(training)} training rows"
    if not any(found_exact or found_near for _, found_exact, found_near, _ in groups):
        checked = " and ".join(what for what, *_ in groups)
        return Verdict(gate, "pass", f"none of {checked} {against} is a duplicate or near duplicate", details)

    fail = any(found_exact for _, found_exact, _, _ in groups)
    clauses: list[str] = []
    for what, found_exact, found_near, at_line in groups:
        # The training set's size is said once, in the first clause: `N of M rows against T training rows`.
        checked = what if clauses else f"{what} {against}"
        if found_exact:
            listed = _list_matches(found_exact, at_line=at_line)
            also = f"; {len(found_near)} more are near duplicates" if found_near else ""
            clauses.append(f"{len(found_exact)} of {checked} appear in the training data: {listed}{also}")
        elif found_near:
            # Beside an exact copy, near duplicates are counted (the details list them), as within a group.
            listed = "" if fail else f": {_list_matches(found_near, at_line=at_line)}"
            clauses.append(f"{len(found_near)} of {checked} are near duplicates{listed}")
    return Verdict(gate, "fail" if fail else "warn", "; ".join(clauses), details)


class _Checked(Protocol):
    """What held_out reads of a benchmark row (Case) or a few-shot example (prompts.Example)."""

    @property
    def id(self) -> str: ...
    @property
    def instruction(self) -> str: ...
    @property
    def input(self) -> str: ...
    @property
    def line(self) -> int: ...


def _duplicates(
    checked: Sequence[_Checked],
    training: Sequence[TrainingRow],
    ngram: int,
    max_overlap: float,
    max_number_share: float,
) -> list[dict[str, Any] | None]:
    """Per checked item, its match in the training data (rules ["exact"] for an exact copy), or None."""
    # The checked side is indexed and the training rows are streamed past it once: memory grows with the
    # benchmark (tens to thousands of rows), not with a training set of 100k rows.
    keys = [_key(item.instruction, item.input) for item in checked]
    words = [_tokens(_distinct_text(item.instruction, item.input)) for item in checked]
    by_key: dict[str, list[int]] = {}
    by_masked_key: dict[str, list[int]] = {}
    for i, (key, row_words) in enumerate(zip(keys, words, strict=True)):
        by_key.setdefault(key, []).append(i)
        numbers = sum(any(c.isdigit() for c in word) for word in row_words)
        if numbers and numbers <= max_number_share * len(row_words) + _EPS:
            by_masked_key.setdefault(_mask(key), []).append(i)
    grams = _NgramIndex(words, ngram)

    exact_lines: list[list[int]] = [[] for _ in checked]
    near_rules: list[dict[int, list[str]]] = [{} for _ in checked]
    for row in training:
        key = _key(row.instruction, row.input)
        for i in by_key.get(key, ()):
            exact_lines[i].append(row.line)
        for i in by_masked_key.get(_mask(key), ()):
            near_rules[i].setdefault(row.line, []).append("numbers masked")
        for i in grams.matching(_tokens(_distinct_text(row.instruction, row.input)), max_overlap):
            near_rules[i].setdefault(row.line, []).append(f"{ngram}-gram overlap")

    found: list[dict[str, Any] | None] = []
    for item, lines, rules in zip(checked, exact_lines, near_rules, strict=True):
        if lines:
            # An exact copy also matches every near rule: report it once, as what it is.
            found.append(_match(item, lines, ["exact"]))
        elif rules:
            kinds = sorted({rule for matched in rules.values() for rule in matched})
            found.append(_match(item, sorted(rules), kinds))
        else:
            found.append(None)
    return found


def _split(found: Sequence[dict[str, Any] | None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The matches of _duplicates as (exact, near), each in the checked order."""
    matches = [match for match in found if match is not None]
    exact = [match for match in matches if match["rules"] == ["exact"]]
    return exact, [match for match in matches if match["rules"] != ["exact"]]


class _NgramIndex:
    """The checked rows' word n-grams, indexed so one training row is checked against all rows at once."""

    def __init__(self, rows: Sequence[Sequence[str]], n: int) -> None:
        # A row shorter than n words is one shorter gram, so a short input is still compared (as a phrase).
        self.rows = [_ngrams(words, min(n, len(words))) for words in rows]
        self.sizes = sorted({min(n, len(words)) for words in rows if words})
        self.postings: dict[str, list[int]] = {}
        for index, grams in enumerate(self.rows):
            for gram in grams:
                self.postings.setdefault(gram, []).append(index)

    def matching(self, words: Sequence[str], min_share: float) -> list[int]:
        """Indices of the rows at least `min_share` of whose n-grams occur in `words` (containment)."""
        hits: dict[int, int] = {}
        # Only the benchmark rows sharing an n-gram with this text are touched: no scan over all pairs.
        for size in self.sizes:
            for gram in _ngrams(words, size):
                for index in self.postings.get(gram, ()):
                    hits[index] = hits.get(index, 0) + 1
        return sorted(i for i, shared in hits.items() if shared >= min_share * len(self.rows[i]) - _EPS)


def _ngrams(words: Sequence[str], n: int) -> frozenset[str]:
    """The distinct runs of n consecutive words, joined by spaces (none when there are fewer than n words)."""
    if n < 1:
        return frozenset()
    return frozenset(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def _normalise(text: str) -> str:
    """Casefold, strip punctuation at the ends of each line, collapse whitespace."""
    lines = (_strip_punctuation(line.strip()) for line in text.casefold().splitlines())
    return " ".join(" ".join(lines).split())


def _strip_punctuation(text: str) -> str:
    """Drop punctuation at both ends ("Hello!" and "hello" are the same prompt to a contamination check)."""
    start, end = 0, len(text)
    while start < end and (_is_punctuation(text[start]) or text[start].isspace()):
        start += 1
    while end > start and (_is_punctuation(text[end - 1]) or text[end - 1].isspace()):
        end -= 1
    return text[start:end]


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def _key(instruction: str, inp: str) -> str:
    return _normalise(instruction + "\n" + inp)


def _mask(key: str) -> str:
    return re.sub(r"\d+", "0", key)


def _distinct_text(instruction: str, inp: str) -> str:
    """The part that tells rows apart: the input, or the instruction when there is none."""
    return inp if inp.strip() else instruction


def _tokens(text: str) -> list[str]:
    # \w+ ignores punctuation inside the text too: "24, 2003" and "24 2003" are the same words.
    return re.findall(r"\w+", _normalise(text))


def _match(item: _Checked, lines: Sequence[int], rules: list[str]) -> dict[str, Any]:
    return {
        "id": item.id,
        "line": item.line,
        "rules": rules,
        "matches": len(lines),
        "training_lines": list(lines[:_DETAIL_LINES]),
    }


def _list_matches(matches: Sequence[Mapping[str, Any]], *, at_line: bool = False) -> str:
    """`id (training lines 3, 7; rule)` for the first few matches, then a count of the rest; `at_line`:
    `id at line 4 (...)`, for few-shot examples, whose ids may repeat the benchmark's."""
    parts = []
    for match in matches[:_MESSAGE_ROWS]:
        lines: list[int] = match["training_lines"][:3]
        more = f" +{match['matches'] - len(lines)}" if match["matches"] > len(lines) else ""
        word = "line" if match["matches"] == 1 else "lines"
        rules = "" if match["rules"] == ["exact"] else f"; {', '.join(match['rules'])}"
        where = f" at line {match['line']}" if at_line else ""
        parts.append(f"{match['id']}{where} (training {word} {', '.join(map(str, lines))}{more}{rules})")
    if len(matches) > _MESSAGE_ROWS:
        parts.append(f"and {len(matches) - _MESSAGE_ROWS} more")
    return ", ".join(parts)
