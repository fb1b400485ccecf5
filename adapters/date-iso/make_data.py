"""Deterministic data generation for the ``date-iso`` LoRA adapter and its two benchmarks.

Writes (paths relative to the repository root):

* ``benchmarks/dates.jsonl``                  -- in-domain benchmark: human date -> ISO 8601 (60 rows)
* ``benchmarks/sentiment.jsonl``              -- out-of-domain benchmark: review sentiment (60 rows)
* ``adapters/date-iso/data/train.jsonl``      -- ~1200 training rows for the date task
* ``adapters/date-iso/data/replay_prompts.jsonl`` -- ~450 unrelated prompts; their answers are to be the
  base model's own greedy outputs (replay against forgetting): 300 arithmetic, general-knowledge and
  rewriting prompts, then 150 labelling ones (sentiment, topic, yes/no, language, spam, question type) on
  new texts, so the adapter keeps answering a labelling instruction with a label

Pure standard library, seeded ``random.Random`` streams only, no set iteration in output order: running the
script twice gives byte-identical files.  Every benchmark date is re-parsed with ``datetime`` from the
human-written input, and the script refuses to write anything if training or replay rows collide with a
benchmark row (see ``check_*`` below).

The out-of-domain benchmark used to be integer arithmetic; it was retired because the 135M base scores ~2%
on it, so it could not show degradation. Its problems are still drawn (not written): the replay prompts the
shipped adapter was trained on exclude them, and drawing them keeps ``replay_prompts.jsonl`` byte-identical.

Usage: ``python adapters/date-iso/make_data.py``
"""

from __future__ import annotations

import ast
import calendar
import datetime as dt
import json
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from pathlib import Path
from random import Random
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "benchmarks"
DATA_DIR = Path(__file__).resolve().parent / "data"

SEED_DATES_BENCH = 20240229
SEED_ARITH_BENCH = 1729  # the retired arithmetic benchmark; see the module docstring
SEED_SENTIMENT_BENCH = 5151
SEED_TRAIN = 8601
SEED_REPLAY = 4242
SEED_REPLAY_LABEL = 4243

N_BENCH = 60
DIFFICULTY_COUNTS = {"easy": 18, "medium": 30, "hard": 12}
N_TRAIN = 1200
N_REPLAY_ARITH = 100
N_REPLAY_GK = 100
N_REPLAY_REWRITE = 100
N_REPLAY_LABEL = 150  # labelling / classification prompts, appended

DATE_INSTRUCTION = "Convert the date to ISO 8601 format (YYYY-MM-DD). Reply with the date only."
# Training uses the benchmark instruction most of the time, plus a few paraphrases for robustness.
DATE_INSTRUCTION_PARAPHRASES = (
    "Rewrite this date as YYYY-MM-DD. Output only the date.",
    "Normalise the following date to ISO 8601 (YYYY-MM-DD). Answer with the date only.",
    "What is this date in ISO 8601 format? Reply with YYYY-MM-DD only.",
)
ARITH_INSTRUCTION = "Answer with a single number."
GK_INSTRUCTION = "Answer the question in one short sentence."

DATES_EVAL_CONFIG: dict[str, Any] = {"max_new_tokens": 16}
SENTIMENT_INSTRUCTION = "Classify the sentiment of the review as positive or negative. Reply with one word."
# The first label word anywhere in the output: the base often answers "The sentiment is positive." rather
# than the bare word. 12 tokens is room for such a sentence, not for a second opinion after it.
SENTIMENT_EVAL_CONFIG: dict[str, Any] = {
    "extract_pattern": r"(?i)\b(positive|negative)\b",
    "extract_match": "first",
    "max_new_tokens": 12,
}

# --------------------------------------------------------------------------------------------------------
# Number words, ordinals, roman numerals
# --------------------------------------------------------------------------------------------------------

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
ORDINAL_IRREGULAR = {
    1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
    9: "ninth", 10: "tenth", 11: "eleventh", 12: "twelfth",
}  # fmt: skip
ROMAN = ("", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII")
MONTHS = tuple(calendar.month_name)  # index 1..12, C locale: "January"
MONTH_ABBR = tuple(calendar.month_abbr)  # "Jan"
WEEKDAYS = tuple(calendar.day_name)  # index 0 = Monday


def cardinal(n: int) -> str:
    """0..99 in words: 21 -> 'twenty-one'."""
    if not 0 <= n <= 99:
        raise ValueError(n)
    if n < 20:
        return ONES[n]
    tens, ones = divmod(n, 10)
    return TENS[tens] + (f"-{ONES[ones]}" if ones else "")


def ordinal_words(n: int) -> str:
    """1..99 as an ordinal word: 21 -> 'twenty-first', 13 -> 'thirteenth', 30 -> 'thirtieth'."""
    if n in ORDINAL_IRREGULAR:
        return ORDINAL_IRREGULAR[n]
    if n < 20:
        return ONES[n] + "th"
    tens, ones = divmod(n, 10)
    if ones == 0:
        return TENS[tens][:-1] + "ieth"
    return f"{TENS[tens]}-{ORDINAL_IRREGULAR[ones]}"


def ordinal_suffix(n: int) -> str:
    """5 -> '5th', 1 -> '1st', 22 -> '22nd', 11..13 -> 'th'."""
    if 11 <= n % 100 <= 13:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def year_words(y: int, style: str = "thousand") -> str:
    """1900..2099 in words; 2021 -> 'two thousand twenty-one' ('thousand') or 'twenty twenty-one' ('pair')."""
    if 2000 <= y <= 2099:
        rest = y - 2000
        if style == "pair" and rest >= 10:
            return f"twenty {cardinal(rest)}"
        return "two thousand" + (f" {cardinal(rest)}" if rest else "")
    if 1900 <= y <= 1999:
        rest = y - 1900
        if rest == 0:
            return "nineteen hundred"
        if rest < 10:
            return f"nineteen oh {ONES[rest]}"
        return f"nineteen {cardinal(rest)}"
    raise ValueError(f"year out of range for words: {y}")


# Reverse maps for re-parsing (built from the generators, then spot-checked against hand-written values).
WORD_TO_DAY = {ordinal_words(n): n for n in range(1, 32)}
WORD_TO_YEAR = {year_words(y, s): y for y in range(1900, 2100) for s in ("thousand", "pair")}
ROMAN_TO_MONTH = {r: i for i, r in enumerate(ROMAN) if r}
MONTH_TO_NUM = {name.lower(): i for i, name in enumerate(MONTHS) if name}


def _self_test_words() -> None:
    golden: list[tuple[str, str]] = [
        (ordinal_words(1), "first"),
        (ordinal_words(13), "thirteenth"),
        (ordinal_words(20), "twentieth"),
        (ordinal_words(21), "twenty-first"),
        (ordinal_words(30), "thirtieth"),
        (ordinal_words(31), "thirty-first"),
        (ordinal_suffix(1), "1st"),
        (ordinal_suffix(2), "2nd"),
        (ordinal_suffix(3), "3rd"),
        (ordinal_suffix(11), "11th"),
        (ordinal_suffix(12), "12th"),
        (ordinal_suffix(13), "13th"),
        (ordinal_suffix(22), "22nd"),
        (ordinal_suffix(31), "31st"),
        (year_words(2021), "two thousand twenty-one"),
        (year_words(2000), "two thousand"),
        (year_words(2009), "two thousand nine"),
        (year_words(2021, "pair"), "twenty twenty-one"),
        (year_words(1998), "nineteen ninety-eight"),
        (year_words(1905), "nineteen oh five"),
        (year_words(1900), "nineteen hundred"),
        (ROMAN[3], "III"),
        (ROMAN[9], "IX"),
        (ROMAN[12], "XII"),
        (MONTHS[3], "March"),
        (MONTH_ABBR[9], "Sep"),
        (WEEKDAYS[4], "Friday"),
    ]
    for got, want in golden:
        check(got == want, f"word self-test: {got!r} != {want!r}")
    check(len(WORD_TO_YEAR) == 200 + 90, "year words must be unambiguous")  # 'pair' only adds 2010..2099


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise RuntimeError(msg)


# --------------------------------------------------------------------------------------------------------
# Date formats: each renders a date and can parse its own output back (independent check via datetime)
# --------------------------------------------------------------------------------------------------------


def _strptime(fmt: str) -> Callable[[str], dt.date]:
    return lambda s: dt.datetime.strptime(s, fmt).date()


def _strip_suffix(s: str) -> str:
    return re.sub(r"\b(\d{1,2})(?:st|nd|rd|th)\b", r"\1", s)


def _parse_weekday_long(s: str) -> dt.date:
    d = dt.datetime.strptime(s, "%A, %B %d, %Y").date()
    check(s.split(",")[0] == WEEKDAYS[d.weekday()], f"wrong weekday in {s!r}")
    return d


def _parse_roman(s: str) -> dt.date:
    m = re.fullmatch(r"(\d{1,2})-([IVX]+)-(\d{4})", s)
    check(m is not None, f"bad roman date {s!r}")
    assert m is not None
    return dt.date(int(m[3]), ROMAN_TO_MONTH[m[2]], int(m[1]))


def _parse_ordinal_words_of(s: str) -> dt.date:
    m = re.fullmatch(r"([a-z-]+) of ([A-Z][a-z]+), (\d{4})", s)
    check(m is not None, f"bad words date {s!r}")
    assert m is not None
    return dt.date(int(m[3]), MONTH_TO_NUM[m[2].lower()], WORD_TO_DAY[m[1]])


def _parse_all_words(s: str) -> dt.date:
    m = re.fullmatch(r"([A-Z][a-z]+) the ([a-z-]+), ([a-z -]+)", s)
    check(m is not None, f"bad words date {s!r}")
    assert m is not None
    return dt.date(WORD_TO_YEAR[m[3]], MONTH_TO_NUM[m[1].lower()], WORD_TO_DAY[m[2]])


@dataclass(frozen=True)
class DateFormat:
    name: str
    difficulty: str
    render: Callable[[dt.date, Random], str]
    parse: Callable[[str], dt.date]
    two_digit_year: bool = False  # restricts years to 1970..2029 (unambiguous under every common pivot)
    words_year: bool = False  # restricts years to 1900..2099


DATE_FORMATS: tuple[DateFormat, ...] = (
    # easy
    DateFormat(
        "month-day-year", "easy", lambda d, r: f"{MONTHS[d.month]} {d.day}, {d.year}", _strptime("%B %d, %Y")
    ),
    DateFormat(
        "day-month-year", "easy", lambda d, r: f"{d.day} {MONTHS[d.month]} {d.year}", _strptime("%d %B %Y")
    ),
    DateFormat(
        "ymd-slash", "easy", lambda d, r: f"{d.year:04d}/{d.month:02d}/{d.day:02d}", _strptime("%Y/%m/%d")
    ),
    # medium
    DateFormat(
        "abbr-ordinal",
        "medium",
        lambda d, r: f"{MONTH_ABBR[d.month]} {ordinal_suffix(d.day)}, {d.year}",
        lambda s: _strptime("%b %d, %Y")(_strip_suffix(s)),
    ),
    DateFormat(
        "dmy-dot",
        "medium",
        lambda d, r: f"{d.day:02d}.{d.month:02d}.{d.year} (day.month.year)",
        _strptime("%d.%m.%Y (day.month.year)"),
    ),
    DateFormat(
        "weekday-long",
        "medium",
        lambda d, r: f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month]} {d.day}, {d.year}",
        _parse_weekday_long,
    ),
    DateFormat(
        "the-ordinal-of",
        "medium",
        lambda d, r: f"the {ordinal_suffix(d.day)} of {MONTHS[d.month]} {d.year}",
        lambda s: _strptime("the %d of %B %Y")(_strip_suffix(s)),
    ),
    DateFormat(
        "dmy-slash-labelled",
        "medium",
        lambda d, r: f"{d.day:02d}/{d.month:02d}/{d.year} (DD/MM/YYYY)",
        _strptime("%d/%m/%Y (DD/MM/YYYY)"),
    ),
    DateFormat(
        "day-abbr-year",
        "medium",
        lambda d, r: f"{d.day} {MONTH_ABBR[d.month]} {d.year}",
        _strptime("%d %b %Y"),
    ),
    # hard
    DateFormat(
        "us-two-digit-year",
        "hard",
        lambda d, r: f"{d.month:02d}/{d.day:02d}/{d.year % 100:02d} (US format)",
        _strptime("%m/%d/%y (US format)"),
        two_digit_year=True,
    ),
    DateFormat(
        "uk-two-digit-year",
        "hard",
        lambda d, r: f"{d.day:02d}/{d.month:02d}/{d.year % 100:02d} (UK format)",
        _strptime("%d/%m/%y (UK format)"),
        two_digit_year=True,
    ),
    DateFormat("roman-month", "hard", lambda d, r: f"{d.day}-{ROMAN[d.month]}-{d.year}", _parse_roman),
    DateFormat(
        "ordinal-words-of",
        "hard",
        lambda d, r: f"{ordinal_words(d.day)} of {MONTHS[d.month]}, {d.year}",
        _parse_ordinal_words_of,
    ),
    DateFormat(
        "all-words",
        "hard",
        lambda d, r: (
            f"{MONTHS[d.month]} the {ordinal_words(d.day)}, "
            f"{year_words(d.year, r.choice(('thousand', 'thousand', 'pair')))}"
        ),
        _parse_all_words,
        words_year=True,
    ),
)
FORMAT_BY_NAME = {f.name: f for f in DATE_FORMATS}

# How many benchmark rows each format gets (sums to 18 / 30 / 12).
BENCH_FORMAT_COUNTS = {
    "month-day-year": 6, "day-month-year": 6, "ymd-slash": 6,
    "abbr-ordinal": 5, "dmy-dot": 5, "weekday-long": 5, "the-ordinal-of": 5, "dmy-slash-labelled": 5,
    "day-abbr-year": 5,
    "us-two-digit-year": 3, "uk-two-digit-year": 2, "roman-month": 2, "ordinal-words-of": 2, "all-words": 3,
}  # fmt: skip

# Planted edge cases: (format, date, extra tags).  These dates are never used in training.
DATE_EDGE_CASES: tuple[tuple[str, dt.date, tuple[str, ...]], ...] = (
    ("month-day-year", dt.date(2024, 2, 29), ("leap-day",)),
    ("day-month-year", dt.date(1999, 12, 31), ("year-end", "century-boundary")),
    ("ymd-slash", dt.date(2000, 1, 1), ("year-start", "century-boundary")),
    ("abbr-ordinal", dt.date(2019, 8, 1), ("ordinal-suffix",)),
    ("the-ordinal-of", dt.date(2013, 7, 13), ("ordinal-suffix", "teen-suffix")),
    ("dmy-dot", dt.date(2003, 2, 1), ("leading-zeros",)),
    ("weekday-long", dt.date(2000, 2, 29), ("leap-day", "century-leap-year")),
    ("us-two-digit-year", dt.date(2001, 1, 1), ("leading-zeros", "two-digit-year")),
    ("roman-month", dt.date(2020, 2, 29), ("leap-day",)),
    ("all-words", dt.date(2009, 12, 31), ("year-end", "written-out")),
)


def year_range(fmt: DateFormat, lo: int, hi: int) -> tuple[int, int]:
    if fmt.two_digit_year:
        return max(lo, 1970), min(hi, 2029)
    if fmt.words_year:
        return max(lo, 1900), min(hi, 2099)
    return lo, hi


def random_date(rng: Random, lo: int, hi: int, special_day_p: float = 0.0) -> dt.date:
    year = rng.randint(lo, hi)
    month = rng.randint(1, 12)
    last = calendar.monthrange(year, month)[1]
    if rng.random() < special_day_p:
        day = rng.choice([d for d in (1, 2, 3, 11, 12, 13, 21, 22, 23, 28, 29, 30, 31) if d <= last])
    else:
        day = rng.randint(1, last)
    return dt.date(year, month, day)


def date_tags(fmt: DateFormat, extra: Iterable[str] = ()) -> list[str]:
    return ["dates", f"format:{fmt.name}", *extra]


def bench_row(
    prefix: str,
    i: int,
    instruction: str,
    inp: str,
    expected: str,
    config: dict[str, Any],
    difficulty: str,
    tags: list[str],
) -> dict[str, Any]:
    return {
        "id": f"{prefix}-{i:03d}",
        "instruction": instruction,
        "input": inp,
        "expected_output": expected,
        "evaluation_type": "exact_match",
        "evaluation_config": dict(config),
        "difficulty": difficulty,
        "tags": tags,
    }


@dataclass
class DateItem:
    fmt: DateFormat
    date: dt.date
    text: str
    tags: list[str] = field(default_factory=list)


def make_date_item(fmt: DateFormat, date: dt.date, rng: Random, extra_tags: Iterable[str] = ()) -> DateItem:
    text = fmt.render(date, rng)
    parsed = fmt.parse(text)
    check(parsed == date, f"{fmt.name}: {text!r} parses to {parsed}, expected {date}")
    return DateItem(fmt, date, text, date_tags(fmt, extra_tags))


def build_dates_benchmark() -> list[dict[str, Any]]:
    rng = Random(SEED_DATES_BENCH)
    items: list[DateItem] = []
    used: set[dt.date] = set()
    remaining = dict(BENCH_FORMAT_COUNTS)
    for name, date, extra in DATE_EDGE_CASES:
        items.append(make_date_item(FORMAT_BY_NAME[name], date, rng, ("edge", *extra)))
        used.add(date)
        remaining[name] -= 1
    for name, count in remaining.items():
        fmt = FORMAT_BY_NAME[name]
        lo, hi = year_range(fmt, 1950, 2035)
        for _ in range(count):
            date = random_date(rng, lo, hi)
            while date in used:
                date = random_date(rng, lo, hi)
            used.add(date)
            items.append(make_date_item(fmt, date, rng))
    rng.shuffle(items)
    return [
        bench_row(
            "dates",
            i,
            DATE_INSTRUCTION,
            it.text,
            it.date.isoformat(),
            DATES_EVAL_CONFIG,
            it.fmt.difficulty,
            it.tags,
        )
        for i, it in enumerate(items, start=1)
    ]


def build_dates_train(bench_dates: set[str], bench_keys: set[str]) -> list[dict[str, str]]:
    """~N_TRAIN rows; no benchmark date (in any format) and no benchmark (instruction, input) pair."""
    rng = Random(SEED_TRAIN)
    weights = {"easy": 1.0, "medium": 1.2, "hard": 1.6}
    fmts = list(DATE_FORMATS)
    fmt_weights = [weights[f.difficulty] for f in fmts]
    rows: list[dict[str, str]] = []
    seen_inputs: set[str] = set()  # inputs unique across instruction paraphrases too

    def add(fmt: DateFormat, date: dt.date) -> None:
        if date.isoformat() in bench_dates:
            return
        item = make_date_item(fmt, date, rng)
        instruction = DATE_INSTRUCTION if rng.random() < 0.75 else rng.choice(DATE_INSTRUCTION_PARAPHRASES)
        if norm(item.text) in seen_inputs or pair_key(instruction, item.text) in bench_keys:
            return
        seen_inputs.add(norm(item.text))
        rows.append({"instruction": instruction, "input": item.text, "output": date.isoformat()})

    def fmt_for(date: dt.date) -> DateFormat:
        ok = []
        for f in fmts:
            lo, hi = year_range(f, 0, 9999)
            if lo <= date.year <= hi:
                ok.append(f)
        return rng.choice(ok)

    # A deterministic slice of edge-like dates in other years than the benchmark's (leap days, year ends).
    leap_years = [y for y in range(1904, 2100, 4) if calendar.isleap(y)]
    for y in rng.sample(leap_years, 24):
        add(fmt_for(dt.date(y, 2, 29)), dt.date(y, 2, 29))
    for y in rng.sample(range(1970, 2030), 16):
        add(fmt_for(dt.date(y, 12, 31)), dt.date(y, 12, 31))
        add(fmt_for(dt.date(y + 1, 1, 1)), dt.date(y + 1, 1, 1))
    while len(rows) < N_TRAIN:
        fmt = rng.choices(fmts, weights=fmt_weights)[0]
        lo, hi = year_range(fmt, 1900, 2099)
        add(fmt, random_date(rng, lo, hi, special_day_p=0.3))
    rng.shuffle(rows)
    return rows


# --------------------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    question: str
    answer: int
    keys: tuple[str, ...]  # canonical computations; two problems overlap when any key is shared
    difficulty: str
    tags: tuple[str, ...]


def _add_key(*xs: int) -> str:
    return "add(" + ",".join(map(str, sorted(xs))) + ")"


def _mul_key(*xs: int) -> str:
    return "mul(" + ",".join(map(str, sorted(xs))) + ")"


ADD_TEMPLATES = ("What is {a} + {b}?", "Compute {a} + {b}.", "What is {a} plus {b}?", "Add {a} and {b}.")
SUB_TEMPLATES = (
    "What is {a} - {b}?",
    "Compute {a} - {b}.",
    "What is {a} minus {b}?",
    "Subtract {b} from {a}.",
)
DIV_TEMPLATES = (
    "What is {n} / {d}?",
    "Compute {n} / {d}.",
    "What is {n} divided by {d}?",
    "Divide {n} by {d}.",
)
MUL_TEMPLATES = ("What is {a} * {b}?", "Compute {a} * {b}.", "What is {a} times {b}?", "Multiply {a} by {b}.")


def _fmt_n(n: int, sep: bool) -> str:
    return f"{n:,}" if sep else str(n)


def p_add(
    rng: Random, a: int, b: int, difficulty: str, tags: tuple[str, ...] = (), sep: bool = False
) -> Problem:
    q = rng.choice(ADD_TEMPLATES).format(a=_fmt_n(a, sep), b=_fmt_n(b, sep))
    return Problem(q, a + b, (_add_key(a, b),), difficulty, ("op:add", *tags))


def p_sub(
    rng: Random, a: int, b: int, difficulty: str, tags: tuple[str, ...] = (), sep: bool = False
) -> Problem:
    q = rng.choice(SUB_TEMPLATES).format(a=_fmt_n(a, sep), b=_fmt_n(b, sep))
    return Problem(q, a - b, (f"sub({a},{b})",), difficulty, ("op:sub", *tags))


def p_mul(
    rng: Random, a: int, b: int, difficulty: str, tags: tuple[str, ...] = (), sep: bool = False
) -> Problem:
    q = rng.choice(MUL_TEMPLATES).format(a=_fmt_n(a, sep), b=_fmt_n(b, sep))
    return Problem(q, a * b, (_mul_key(a, b),), difficulty, ("op:mul", *tags))


def p_div(rng: Random, quotient: int, divisor: int, difficulty: str, tags: tuple[str, ...] = ()) -> Problem:
    n = quotient * divisor
    q = rng.choice(DIV_TEMPLATES)
    return Problem(
        q.format(n=n, d=divisor), quotient, (f"div({n},{divisor})",), difficulty, ("op:div", *tags)
    )


# ---- generators by difficulty (each returns one random problem) ----


def gen_easy(rng: Random) -> Problem:
    if rng.random() < 0.5:
        return p_add(rng, rng.randint(1, 9), rng.randint(1, 9), "easy")
    a = rng.randint(2, 9)
    return p_sub(rng, a, rng.randint(1, a - 1), "easy")


def gen_easy_zero(rng: Random) -> Problem:
    a = rng.randint(1, 9)
    return p_sub(rng, a, a, "easy", ("edge", "zero"))


def gen_easy_negative(rng: Random) -> Problem:
    a = rng.randint(1, 7)
    return p_sub(rng, a, rng.randint(a + 1, 9), "easy", ("edge", "negative"))


def gen_medium(op: str, rng: Random) -> Problem:
    if op == "add":
        return p_add(rng, rng.randint(10, 99), rng.randint(10, 99), "medium")
    if op == "sub":
        a = rng.randint(11, 99)
        return p_sub(rng, a, rng.randint(10, a - 1), "medium")
    return p_mul(rng, rng.randint(11, 99), rng.choice((2, 3, 4, 5, 6, 7, 8, 9, 11, 12)), "medium")


def gen_medium_zero(rng: Random) -> Problem:
    a = rng.randint(10, 99)
    return p_sub(rng, a, a, "medium", ("edge", "zero"))


def gen_medium_negative(rng: Random) -> Problem:
    a = rng.randint(10, 60)
    return p_sub(rng, a, rng.randint(a + 10, 99), "medium", ("edge", "negative"))


def gen_hard_multistep(rng: Random) -> Problem:
    kind = rng.randrange(4)
    a, b, c = rng.randint(3, 12), rng.randint(3, 12), rng.randint(2, 30)
    if kind == 0:
        c = rng.randint(2, a * b - 1)
        return Problem(
            f"What is {a} * {b} - {c}?", a * b - c, (f"ms0({a},{b},{c})",), "hard", ("multi-step",)
        )
    if kind == 1:
        a, b = rng.randint(5, 40), rng.randint(5, 40)
        return Problem(
            f"Compute ({a} + {b}) * {c % 9 + 2}.",
            (a + b) * (c % 9 + 2),
            (f"ms1({a},{b},{c % 9 + 2})",),
            "hard",
            ("multi-step",),
        )
    if kind == 2:
        a = rng.randint(10, 60)
        return Problem(
            f"What is {a} + {b} * {c % 9 + 2}?",
            a + b * (c % 9 + 2),
            (f"ms2({a},{b},{c % 9 + 2})",),
            "hard",
            ("multi-step", "precedence"),
        )
    a, b, c = rng.randint(40, 99), rng.randint(10, 39), rng.randint(10, 60)
    return Problem(f"What is {a} - {b} + {c}?", a - b + c, (f"ms3({a},{b},{c})",), "hard", ("multi-step",))


def gen_hard_word(rng: Random) -> Problem:
    kind = rng.randrange(6)
    tags = ("word-problem",)
    if kind == 0:
        per, n = rng.choice((6, 10, 12, 24)), rng.randint(3, 9)
        return Problem(
            f"A box holds {per} eggs. How many eggs are in {n} boxes?",
            per * n,
            (f"w0({per},{n})", _mul_key(per, n)),
            "hard",
            tags,
        )
    if kind == 1:
        have, give = rng.randint(30, 90), rng.randint(5, 29)
        return Problem(
            f"Tom has {have} marbles and gives away {give}. How many marbles does he have left?",
            have - give,
            (f"w1({have},{give})", f"sub({have},{give})"),
            "hard",
            tags,
        )
    if kind == 2:
        speed, hours = rng.choice((40, 50, 60, 70, 80, 90)), rng.randint(2, 6)
        return Problem(
            f"A train travels at {speed} km per hour for {hours} hours. How many kilometres does it travel?",
            speed * hours,
            (f"w2({speed},{hours})", _mul_key(speed, hours)),
            "hard",
            tags,
        )
    if kind == 3:
        per_day, days, extra = rng.randint(8, 30), rng.randint(3, 7), rng.randint(5, 25)
        return Problem(
            f"Sam reads {per_day} pages a day for {days} days, then reads {extra} more pages. How "
            "many pages has Sam read in total?",
            per_day * days + extra,
            (f"w3({per_day},{days},{extra})",),
            "hard",
            (*tags, "multi-step"),
        )
    if kind == 4:
        price, qty, paid = rng.randint(2, 9), rng.randint(2, 6), 50
        return Problem(
            f"Pens cost {price} dollars each. Ana buys {qty} pens and pays with a "
            f"{paid}-dollar note. How many dollars of change does she get?",
            paid - price * qty,
            (f"w4({price},{qty},{paid})",),
            "hard",
            (*tags, "multi-step"),
        )
    a, b, c = rng.randint(10, 40), rng.randint(10, 40), rng.randint(10, 40)
    return Problem(
        f"A library has {a} novels, {b} comics and {c} atlases. How many books is that altogether?",
        a + b + c,
        (f"w5({a},{b},{c})", _add_key(a, b, c)),
        "hard",
        tags,
    )


def gen_hard_edge(kind: str, rng: Random) -> Problem:
    if kind == "thousands-add":
        a, b = rng.randint(4, 60) * 250, rng.randint(4, 60) * 250
        return p_add(rng, a, b, "hard", ("edge", "thousands-separator", "large"), sep=True)
    if kind == "thousands-sub":
        a = rng.choice((1_000, 10_000, 100_000, 1_000_000))
        return p_sub(rng, a, rng.randint(1, 9), "hard", ("edge", "thousands-separator", "large"), sep=True)
    if kind == "div":
        return p_div(rng, rng.randint(6, 19), rng.randint(6, 15), "hard", ("edge", "division"))
    if kind == "word-div":
        per, boxes = rng.choice((6, 8, 12)), rng.randint(5, 15)
        total = per * boxes
        return Problem(
            f"A baker packs {total} muffins into boxes of {per}, filling every box. How many "
            "boxes does she fill?",
            boxes,
            (f"wd({total},{per})", f"div({total},{per})"),
            "hard",
            ("word-problem", "edge", "division"),
        )
    if kind == "word-negative":
        start, drop = rng.randint(2, 9), rng.randint(10, 20)
        return Problem(
            f"The temperature is {start} degrees. It drops by {drop} degrees. What is the temperature now?",
            start - drop,
            (f"wn({start},{drop})", f"sub({start},{drop})"),
            "hard",
            ("word-problem", "edge", "negative"),
        )
    raise ValueError(kind)


HARD_EDGE_KINDS = ("thousands-add", "thousands-sub", "div", "word-div", "word-negative")


def arithmetic_plan() -> list[tuple[str, Callable[[Random], Problem]]]:
    """One (label, generator) per row: 18 easy / 30 medium / 12 hard, 9 of them edge cases."""
    plan: list[tuple[str, Callable[[Random], Problem]]] = []
    plan += [("easy-zero", gen_easy_zero), ("easy-negative", gen_easy_negative)]
    plan += [("easy", gen_easy)] * 16
    plan += [("medium-zero", gen_medium_zero), ("medium-negative", gen_medium_negative)]
    for op, n in (("add", 10), ("sub", 8), ("mul", 10)):
        plan += [(f"medium-{op}", partial(gen_medium, op))] * n
    plan += [(f"hard-{k}", partial(gen_hard_edge, k)) for k in HARD_EDGE_KINDS]
    plan += [("hard-multistep", gen_hard_multistep)] * 3
    plan += [("hard-word", gen_hard_word)] * 4
    return plan


def draw_problems(
    rng: Random,
    plan: Sequence[tuple[str, Callable[[Random], Problem]]],
    forbidden_keys: set[str],
    forbidden_questions: set[str],
) -> list[Problem]:
    out: list[Problem] = []
    used_keys: set[str] = set()
    used_q: set[str] = set()
    for _label, gen in plan:
        for _ in range(1000):
            p = gen(rng)
            keys = set(p.keys)
            qn = norm(p.question)
            if keys & (used_keys | forbidden_keys) or qn in used_q or qn in forbidden_questions:
                continue
            break
        else:
            raise RuntimeError(f"could not draw a fresh problem for {_label}")
        check(eval_check(p), f"answer check failed: {p}")
        used_keys |= keys
        used_q.add(qn)
        out.append(p)
    return out


VERBAL_FORMS = (
    (r"Add (\S+) and (\S+)\.", r"\1 + \2"),
    (r"Subtract (\S+) from (\S+)\.", r"\2 - \1"),
    (r"Multiply (\S+) by (\S+)\.", r"\1 * \2"),
    (r"Divide (\S+) by (\S+)\.", r"\1 / \2"),
    (r"(?:What is|Compute) (.+)[?.]", r"\1"),
)
AST_OPS: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _eval_ast(node: ast.expr) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in AST_OPS:
        return AST_OPS[type(node.op)](_eval_ast(node.left), _eval_ast(node.right))
    raise ValueError(f"unsupported expression node {ast.dump(node)}")


def eval_check(p: Problem) -> bool:
    """Recompute non-word-problem answers from the question text alone (word problems: by construction)."""
    if "word-problem" in p.tags:
        return True
    for pattern, repl in VERBAL_FORMS:
        if re.fullmatch(pattern, p.question):
            expr = re.sub(pattern, repl, p.question)
            break
    else:
        raise RuntimeError(f"unrecognised question {p.question!r}")
    expr = expr.replace(" plus ", " + ").replace(" minus ", " - ").replace(" times ", " * ")
    expr = expr.replace(" divided by ", " / ").replace(",", "")
    return _eval_ast(ast.parse(expr, mode="eval").body) == p.answer


def retired_arith_problems() -> list[Problem]:
    """The 60 problems of the retired arithmetic benchmark: no longer written, still excluded from replay."""
    return draw_problems(Random(SEED_ARITH_BENCH), arithmetic_plan(), set(), set())


# --------------------------------------------------------------------------------------------------------
# Sentiment
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Review:
    domain: str  # film, product, restaurant, hotel
    label: str  # positive / negative: what a careful human reader would say
    difficulty: str
    text: str
    kinds: tuple[str, ...] = ()  # phenomena ("negation", "sarcasm", ...); "edge" marks the planted ones


# Written by hand, labels fixed before any model saw them. easy: unambiguous; medium: milder wording, domain
# vocabulary, mild mixed feelings; hard: negation, sarcasm, understatement, mixed but leaning one way.
# No review contains a label word, so an output that merely echoes the review cannot score.
REVIEWS: tuple[Review, ...] = (
    # ---- easy: 9 positive, 9 negative ----
    Review("film", "positive", "easy",
           "An absolute masterpiece. The acting, the score, the photography: everything about this film is "
           "wonderful."),
    Review("restaurant", "positive", "easy",
           "Best meal I've had in years. Every dish was delicious and the staff were lovely."),
    Review("product", "positive", "easy",
           "Love these headphones! Great sound, comfortable fit, and the battery lasts forever."),
    Review("hotel", "positive", "easy",
           "Fantastic hotel. Spotless room, friendly staff, amazing views. Would definitely stay here "
           "again."),
    Review("product", "positive", "easy", "Perfect.", ("edge", "one-word")),
    Review("film", "positive", "easy", "I loved every minute of it. Funny, moving and beautifully made."),
    Review("restaurant", "positive", "easy",
           "Amazing food and great service. Highly recommend the seafood linguine!"),
    Review("product", "positive", "easy",
           "Excellent blender. Powerful, easy to clean, and it makes the silkiest soups I've ever had."),
    Review("hotel", "positive", "easy",
           "Wonderful stay from start to finish. The bed was incredibly comfortable and breakfast was "
           "superb."),
    Review("film", "negative", "easy",
           "Terrible movie. Boring plot, awful acting, and far too long. I want my two hours back."),
    Review("restaurant", "negative", "easy",
           "The worst restaurant I have ever been to. Cold food, a rude waiter and a dirty table."),
    Review("product", "negative", "easy",
           "Broke after two days. Cheap, flimsy and a complete waste of money."),
    Review("hotel", "negative", "easy",
           "WORST HOTEL EVER. FILTHY ROOM, BROKEN SHOWER AND NOBODY AT RECEPTION CARED. NEVER AGAIN.",
           ("edge", "all-caps")),
    Review("product", "negative", "easy",
           "Awful phone case. It cracked the first time I dropped it and the buttons barely work."),
    Review("film", "negative", "easy",
           "Dull, predictable and painfully slow. One of the worst films I've seen this year."),
    Review("restaurant", "negative", "easy",
           "Disgusting. The chicken was undercooked and I was ill all night."),
    Review("hotel", "negative", "easy",
           "Horrible experience. The room smelled of smoke, the sheets were stained and the staff were "
           "rude."),
    Review("product", "negative", "easy",
           "Useless. It stopped charging after a week and customer support never replied."),
    # ---- medium: 15 positive, 15 negative ----
    Review("film", "positive", "medium",
           "A quiet, thoughtful drama with a strong central performance. It takes its time, but the ending "
           "really lands."),
    Review("restaurant", "positive", "medium",
           "Solid neighbourhood bistro. The steak frites were cooked just right and the wine list is fairly "
           "priced."),
    Review("hotel", "positive", "medium",
           "Good location, a short walk from the old town. The room was small but clean and check-in was "
           "quick."),
    Review("product", "positive", "medium",
           "Does exactly what it says. The kettle boils fast and it's quieter than our old one."),
    Review("product", "positive", "medium",
           "Pleasantly surprised by the build quality for the price. The keyboard feels sturdy and the keys "
           "have a nice click."),
    Review("film", "positive", "medium",
           "The story is a little thin, but the animation is gorgeous and my kids were glued to the screen."),
    Review("restaurant", "positive", "medium",
           "Lovely brunch spot 😍 pancakes were fluffy and the coffee was spot on ☕👍", ("edge", "emoji")),
    Review("hotel", "positive", "medium",
           "Comfortable bed, decent breakfast buffet and the pool was warm. Would stay again if I'm in the "
           "area."),
    Review("product", "positive", "medium",
           "Fits well and the fabric feels nicer than I expected. I've already ordered a second one in "
           "blue."),
    Review("film", "positive", "medium",
           "Clever script and a cast that clearly had fun. Not deep, but a very enjoyable couple of hours."),
    Review("restaurant", "positive", "medium",
           "The dumplings were tasty and came out quickly. Service was a bit brisk, but the prices are fair "
           "and the portions generous."),
    Review("hotel", "positive", "medium",
           "The staff upgraded us to a sea-view room without us asking. Small touch, but it made the trip."),
    Review("product", "positive", "medium",
           "Battery life is a good two days with normal use and the camera handles low light well. Happy "
           "with it."),
    Review("film", "positive", "medium",
           "A well-paced thriller that kept me guessing until the last twenty minutes."),
    Review("restaurant", "positive", "medium",
           "Friendly staff, a cosy dining room and a very good lamb curry. We'll be back."),
    Review("film", "negative", "medium",
           "The first half is promising, but it falls apart in the third act and the twist makes no sense."),
    Review("restaurant", "negative", "medium",
           "Overpriced for what you get. The portions were tiny and the soup was bland."),
    Review("hotel", "negative", "medium",
           "The photos online are misleading. Our room faced a car park and the walls were paper thin."),
    Review("product", "negative", "medium",
           "The vacuum is loud and the suction drops off after ten minutes. Returning it."),
    Review("product", "negative", "medium",
           "Sizing runs very small and the stitching came loose after the first wash."),
    Review("film", "negative", "medium",
           "Beautiful to look at, but the characters are flat and I stopped caring about halfway through."),
    Review("restaurant", "negative", "medium",
           "We waited forty minutes for our mains and the fish arrived lukewarm. Not worth the hype."),
    Review("hotel", "negative", "medium",
           "Check-in took over an hour, the lift was out of order and the Wi-Fi barely worked."),
    Review("product", "negative", "medium",
           "The instructions were missing and two of the screws didn't fit. It took all afternoon to "
           "assemble and it still wobbles."),
    Review("film", "negative", "medium",
           "Too long, too loud, and the dialogue is clumsy. A disappointing sequel."),
    Review("restaurant", "negative", "medium",
           "The pizza base was soggy and the toppings were sparse. I expected much more after all the "
           "good reviews."),
    Review("hotel", "negative", "medium",
           "We booked this hotel for our anniversary weekend after reading several glowing reviews, and I "
           "really wanted to like it. On arrival we were told our room wasn't ready, so we waited in the "
           "lobby for almost two hours with our bags. When we finally got upstairs, the room was much "
           "smaller than in the photos, the air conditioning rattled all night, and there was hair in the "
           "bathroom sink. We asked to move and were told the hotel was full. Breakfast the next morning "
           "was a handful of dry pastries and weak coffee, and when I mentioned the problems at checkout "
           "the manager just shrugged. The location is convenient for the station, but that is about the "
           "only thing I can say for it. We won't be returning, and I wouldn't recommend it to friends.",
           ("edge", "long")),
    Review("product", "negative", "medium",
           "The screen scratches far too easily and the charger gets worryingly hot."),
    Review("film", "negative", "medium",
           "Fell asleep twice 😴 the plot was all over the place 👎", ("edge", "emoji")),
    Review("restaurant", "negative", "medium",
           "Service was polite, but the food was greasy and the dessert tasted like it came out of a "
           "packet."),
    # ---- hard: 6 positive, 6 negative ----
    Review("restaurant", "positive", "hard",
           "Not bad at all. Honestly, I didn't expect much from a place by the motorway, but I'd go back.",
           ("edge", "negation")),
    Review("film", "positive", "hard",
           "I can't say I didn't enjoy it. I haven't laughed that hard in a long time.",
           ("edge", "negation")),
    Review("hotel", "positive", "hard",
           "The decor is dated and the breakfast is nothing special, but the staff could not have been "
           "kinder and the beds are wonderfully comfortable. I'd stay again.",
           ("mixed",)),
    Review("product", "positive", "hard",
           "Three years in and it still hasn't given me a single problem.", ("understatement", "negation")),
    Review("film", "positive", "hard",
           "Didn't think a film about accountants could hold my attention for two and a half hours. It did.",
           ("understatement",)),
    Review("product", "positive", "hard",
           "The app is clunky and setup was a pain, but once it's running the speaker sounds incredible for "
           "its size.",
           ("mixed",)),
    Review("product", "negative", "hard",
           "Oh great, a charger that stops working after a week. Exactly what I wanted for my birthday.",
           ("edge", "sarcasm")),
    Review("hotel", "negative", "hard",
           "Loved being woken at 3am by the nightclub next door. Really makes a holiday.",
           ("edge", "sarcasm")),
    Review("restaurant", "negative", "hard",
           "The food wasn't terrible, but I wouldn't call it good either, and at those prices I won't be "
           "back.",
           ("negation", "mixed")),
    Review("film", "negative", "hard",
           "Great cast, lovely soundtrack, and yet I checked my watch every ten minutes. A waste of real "
           "talent.",
           ("mixed",)),
    Review("product", "negative", "hard",
           "Let's just say the 'waterproof' label was optimistic. My phone did not survive the first rainy "
           "walk.",
           ("understatement",)),
    Review("hotel", "negative", "hard",
           "Nothing about our stay was what we were promised, and no one seemed to care.", ("negation",)),
)  # fmt: skip
SENTIMENT_LABELS = ("positive", "negative")
SENTIMENT_DOMAINS = ("film", "product", "restaurant", "hotel")


def build_sentiment_benchmark() -> list[dict[str, Any]]:
    """The hand-written reviews, checked and shuffled into a fixed order."""
    for r in REVIEWS:
        check(r.label in SENTIMENT_LABELS and r.domain in SENTIMENT_DOMAINS, f"bad review {r}")
        check(r.difficulty in DIFFICULTY_COUNTS, f"bad difficulty {r}")
        check(re.search(SENTIMENT_EVAL_CONFIG["extract_pattern"], r.text) is None, f"label word in {r}")
        check(r.text == " ".join(r.text.split()), f"stray whitespace in {r}")
    for difficulty, n in DIFFICULTY_COUNTS.items():  # balanced within every difficulty, not just overall
        for label in SENTIMENT_LABELS:
            got = sum(r.difficulty == difficulty and r.label == label for r in REVIEWS)
            check(got == n // 2, f"{difficulty}/{label}: {got} reviews, want {n // 2}")
    reviews = list(REVIEWS)
    Random(SEED_SENTIMENT_BENCH).shuffle(reviews)
    return [
        bench_row(
            "sent",
            i,
            SENTIMENT_INSTRUCTION,
            r.text,
            r.label,
            SENTIMENT_EVAL_CONFIG,
            r.difficulty,
            ["sentiment", f"domain:{r.domain}", *r.kinds],
        )
        for i, r in enumerate(reviews, start=1)
    ]


# --------------------------------------------------------------------------------------------------------
# Replay prompts
# --------------------------------------------------------------------------------------------------------

CAPITALS = (
    "France",
    "Japan",
    "Italy",
    "Canada",
    "Egypt",
    "Kenya",
    "Brazil",
    "Norway",
    "Spain",
    "Germany",
    "India",
    "Mexico",
    "Peru",
    "Portugal",
    "Greece",
    "Sweden",
    "Chile",
    "Thailand",
    "Poland",
    "Ireland",
    "Argentina",
    "Austria",
    "Vietnam",
    "Finland",
    "Turkey",
)
OPPOSITES = (
    "hot",
    "tall",
    "empty",
    "ancient",
    "generous",
    "noisy",
    "fragile",
    "begin",
    "accept",
    "shallow",
    "rough",
    "victory",
    "expand",
    "polite",
    "rare",
)
ELEMENTS = ("gold", "oxygen", "iron", "sodium", "carbon", "silver", "helium", "potassium", "copper", "lead")
ANIMAL_LEGS = ("a spider", "an ant", "a horse", "a chicken", "a crab", "a dog", "a butterfly", "a kangaroo")
GK_QUESTIONS = (
    "What is the largest planet in our solar system?",
    "Which gas do plants absorb from the air to make food?",
    "What is the boiling point of water at sea level in degrees Celsius?",
    "Who wrote the play Romeo and Juliet?",
    "What is the longest river in Africa?",
    "How many continents are there on Earth?",
    "What is the hardest natural substance?",
    "Which organ pumps blood around the human body?",
    "What is the main language spoken in Brazil?",
    "What do bees make from nectar?",
    "Which planet is known as the Red Planet?",
    "What is the freezing point of water in degrees Fahrenheit?",
    "What is the largest ocean on Earth?",
    "Who painted the Mona Lisa?",
    "What is the smallest prime number?",
    "How many sides does a hexagon have?",
    "What is the tallest mountain in the world?",
    "Which instrument has 88 keys?",
    "What is the currency of the United Kingdom?",
    "What force keeps us on the ground?",
    "What is the chemical formula for water?",
    "Which animal is known as the king of the jungle?",
    "What is the largest desert in the world?",
    "How many minutes are in an hour?",
    "What colour do you get by mixing blue and yellow?",
    "Which country is home to the kangaroo?",
    "What is the name of the star at the centre of our solar system?",
    "What is the largest mammal?",
    "In which sport would you perform a slam dunk?",
    "What is the study of living things called?",
    "How many strings does a standard violin have?",
    "Which metal is liquid at room temperature?",
    "What is the opposite of north?",
    "What shape has three sides?",
    "Which part of the plant conducts photosynthesis?",
    "What is frozen water called?",
    "What do caterpillars turn into?",
    "Which vitamin does the skin make in sunlight?",
    "What is the capital city of Australia?",
    "What is the square root of 81?",
    "Which bird is a symbol of peace?",
    "What is the main ingredient in guacamole?",
    "How many players are on a football (soccer) team on the field?",
    "What is the fastest land animal?",
    "Which planet has the most famous rings?",
    "What is the largest country by area?",
    "Who developed the theory of relativity?",
    "What do you call a baby cat?",
    "Which sense is associated with the nose?",
    "What is the primary colour of a ripe banana?",
    "How many hearts does an octopus have?",
    "What is the closest planet to the Sun?",
)
REWRITE_INSTRUCTIONS = (
    "Rewrite the sentence in the past tense.",
    "Rewrite the sentence to sound more formal.",
    "Rewrite the sentence in the passive voice.",
    "Shorten the sentence without changing its meaning.",
    "Rewrite the sentence as a question.",
    "Rewrite the sentence in plain, simple English.",
    "Rewrite the sentence so that it sounds more positive.",
)
REWRITE_SENTENCES = (
    "The committee approves the new budget.",
    "My brother fixes old bicycles in the garage.",
    "The children are building a sandcastle on the beach.",
    "We need to finish the report before the meeting.",
    "The chef prepares fresh bread every morning.",
    "Our team wins the match despite the rain.",
    "The museum displays paintings from many countries.",
    "She writes a letter to her grandmother.",
    "The engineers test the bridge for safety.",
    "I cannot attend the party because I am busy.",
    "The company is hiring new staff for the summer.",
    "The students read three chapters for homework.",
    "The dog chases the ball across the field.",
    "The gardener plants tulips along the fence.",
    "It is very important that everyone arrives on time.",
    "The manager explains the new policy to the staff.",
    "The storm damages several houses near the coast.",
    "They are planning a trip to the mountains.",
    "The teacher grades the exams over the weekend.",
    "This restaurant serves the best soup in town.",
)
GRAMMAR_SENTENCES = (
    "She don't like going to the cinema alone.",
    "Their going to the market tomorow.",
    "Me and him was late for the bus.",
    "The informations in this report is wrong.",
    "He have three cat and two dog.",
    "I seen that film last week.",
    "Everyone need to bring they own lunch.",
    "The weather are very nice today.",
    "We was waiting for hours at the station.",
    "Its a good idea to recieve feedback early.",
)


# ---- Labelling / classification replay ----
# The adapter learnt "transform the input" from the date task and carried it over to labelling prompts (it
# echoed or rewrote a review instead of naming its sentiment). These prompts show it, in the base's own
# words, that a labelling instruction still gets a label. Written by hand up front, not picked by looking at
# benchmark rows; main() checks that none of them equals, contains, is contained in, or paraphrases closely
# (shared 5-word run, or word overlap) a benchmark input.
LABEL_SENTIMENT_INSTRUCTIONS = (
    SENTIMENT_INSTRUCTION,  # the benchmark's wording (on new texts only)
    "Is this review positive or negative?",
    "Classify the sentiment of this text as positive or negative.",
    "What is the sentiment of the following sentence? Answer positive or negative.",
    "Does the writer feel positive or negative? Reply with one word.",
)
LABEL_SENTIMENT_TEXTS: tuple[tuple[str, str], ...] = (
    ("positive", "This novel kept me up until two in the morning. I could not put it down."),
    ("positive", "The new update made the app so much faster. Great job, developers!"),
    ("positive", "Our tour guide was funny and knew everything about the castle."),
    ("positive", "Just finished my first 10k run and I feel amazing! 🏃"),
    (
        "positive",
        "The concert was unforgettable. The band played for three hours and the crowd sang every word.",
    ),
    ("positive", "My online cooking class was clear, well organised and fun."),
    ("positive", "The train left on time, the seats were roomy and the conductor was very helpful."),
    ("positive", "Smart hosts, fascinating guests: my favourite podcast this year."),
    ("positive", "The gym is spotless and the trainers actually take time to help you."),
    ("positive", "Such a beautiful sunny day at the lake with my family."),
    ("positive", "The new dinosaur hall at the museum is incredible. My nephew wants to go back tomorrow."),
    (
        "positive",
        "This board game is easy to learn and every round feels different. The whole family loves it.",
    ),
    ("positive", "The dentist was gentle and explained every step. No pain at all."),
    ("positive", "What a lovely surprise: the bakery slipped free cookies into our bag."),
    ("positive", "The trail was well marked and the view from the summit was breathtaking."),
    ("positive", "I finally passed my driving test! So happy right now."),
    ("positive", "The plumber arrived early, fixed the leak in ten minutes and charged a fair price."),
    ("positive", "This video game has a gripping story and gorgeous music."),
    ("positive", "The librarian helped me track down exactly the book I needed for my essay."),
    ("positive", "Our new puppy has brought so much joy to the house."),
    ("positive", "The yoga retreat was peaceful and restorative. I came home feeling like a new person."),
    ("positive", "These running shoes are light, supportive and comfy straight out of the box."),
    ("positive", "Smooth flight, a decent meal, and we landed twenty minutes early."),
    ("positive", "Brilliant lecture today. I finally understand how vaccines work."),
    ("positive", "The garden centre had a huge choice of plants and the advice was really useful."),
    ("negative", "The book started well, but the last chapters were a confusing mess."),
    ("negative", "The app crashes every time I try to upload a photo."),
    ("negative", "My flight was delayed six hours and nobody told us why."),
    ("negative", "The sound at the concert was muddy and we could barely hear the singer."),
    ("negative", "The course videos are outdated and the quizzes are full of mistakes."),
    ("negative", "The bus never showed up and I missed my job interview."),
    ("negative", "This podcast is just two people talking over each other for an hour."),
    ("negative", "The gym is always crowded and half the machines are out of action."),
    ("negative", "Stuck in traffic for two hours again. I hate this commute."),
    ("negative", "The gallery was packed, the signs were confusing and the café had run out of sandwiches."),
    ("negative", "The board game's rules are confusing and one player always wins."),
    ("negative", "The repair shop kept my laptop for three weeks and it still doesn't turn on."),
    ("negative", "Our package arrived soaked and half the items were missing."),
    ("negative", "The path was muddy, badly signposted and we got lost twice."),
    ("negative", "The latest software update deleted all my saved notes."),
    ("negative", "The landlord ignored our messages about the heating all winter."),
    ("negative", "The video game is full of bugs and the servers are always down."),
    ("negative", "The tour was rushed and the guide spent most of it on his phone."),
    ("negative", "The printer jams on every second page. So frustrating."),
    ("negative", "My internet has dropped out five times today."),
    ("negative", "The courier left our parcel in the rain outside the wrong house."),
    ("negative", "The hairdresser cut off far more than I asked for and didn't apologise."),
    ("negative", "The lecture was dull and the slides were impossible to read."),
    ("negative", "The coffee machine at work has been leaking for a week and nobody fixes it."),
    ("negative", "I was on hold for an hour and then the line went dead."),
)
LABEL_TOPIC_INSTRUCTIONS = (
    "Classify the topic of the text as sports, politics, technology or food. Reply with one word.",
    "Which topic is this headline about: sports, politics, technology or food?",
)
LABEL_TOPIC_TEXTS: tuple[tuple[str, str], ...] = (
    ("sports", "The striker scored twice in the second half to send her team into the cup final."),
    ("sports", "After a rain delay, the tennis match resumed and went to a fifth set."),
    ("sports", "The marathon winner broke the course record by almost a minute."),
    ("sports", "Coach names the starting line-up for Saturday's rugby match."),
    ("sports", "The swimmer won her third gold medal of the championships."),
    ("sports", "Basketball fans queued overnight for play-off tickets."),
    ("politics", "Parliament voted late last night to approve the new housing bill."),
    ("politics", "The prime minister announced a cabinet reshuffle on Monday."),
    ("politics", "Voters head to the polls this weekend in a tight race for mayor."),
    ("politics", "The senator introduced a proposal to lower the voting age."),
    ("politics", "Opposition leaders criticised the government's new tax plan."),
    ("politics", "The two countries signed a trade agreement after months of negotiations."),
    ("technology", "The company unveiled a smartphone with a foldable screen and a faster chip."),
    ("technology", "Researchers released an open-source tool that speeds up database queries."),
    ("technology", "A software bug took the payment website offline for three hours."),
    ("technology", "The new laptop promises twenty hours of battery life."),
    ("technology", "Engineers are testing a robot that sorts recycling automatically."),
    ("technology", "A popular messaging app adds end-to-end encryption for group chats."),
    ("food", "Add the chopped onions to the pan and cook until golden."),
    ("food", "This spicy lentil soup is ready in thirty minutes."),
    ("food", "The farmers' market now sells fresh strawberries every Saturday."),
    ("food", "Sourdough needs a long, slow rise to develop its flavour."),
    ("food", "The new menu features seasonal vegetables and grilled mackerel."),
    ("food", "A simple tomato sauce needs only garlic, olive oil and ripe tomatoes."),
)
LABEL_YES_NO_INSTRUCTIONS = (
    "Read the text and answer the question with yes or no.",
    "Answer yes or no.",
)
LABEL_YES_NO_ITEMS: tuple[tuple[str, str], ...] = (  # (text, question)
    ("Maria took the early train to Lyon and arrived before lunch.", "Did Maria travel by train?"),
    ("The shop closes at six on weekdays and does not open on Sundays.", "Is the shop open on Sundays?"),
    ("Ben has two sisters and no brothers.", "Does Ben have a brother?"),
    ("The bridge was built in 1932 and repainted last spring.", "Was the bridge built before 1950?"),
    ("Our cat sleeps on the sofa all afternoon and only wakes up for dinner.",
     "Is the cat busy in the afternoon?"),
    ("The meeting was moved from Tuesday to Thursday because the manager was ill.",
     "Did the meeting take place on Tuesday?"),
    ("Lena planted tomatoes, beans and carrots in her garden.", "Did Lena plant potatoes?"),
    ("Entry to the museum is free for children under twelve.", "Does a ten-year-old need to pay?"),
    ("It rained all morning, so the picnic was held indoors.", "Was the picnic held outside?"),
    ("Tom finished the marathon in just under four hours.", "Did Tom finish the marathon?"),
    ("The library lends books for three weeks, and each loan can be renewed once.", "Can a loan be renewed?"),
    ("Sara speaks Spanish at home and English at school.", "Does Sara speak two languages?"),
    ("The recipe uses butter, flour, sugar and eggs, but no milk.", "Does the recipe need milk?"),
    ("The bakery opened in 1998 and is still run by the same family.", "Is the bakery still open?"),
    ("The river flooded the lower fields after a week of heavy rain.", "Was there heavy rain?"),
    ("Jack missed the bus, so he walked to work and arrived late.", "Did Jack take the bus to work?"),
    ("The phone comes in black, white and green.", "Is the phone available in red?"),
    ("Every classroom in the school has a whiteboard and a projector.", "Do the classrooms have projectors?"),
    ("The show was cancelled because the singer lost her voice.", "Did the show go ahead?"),
    ("Anna is older than Paul, and Paul is older than Kim.", "Is Anna older than Kim?"),
)  # fmt: skip
LABEL_LANGUAGE_INSTRUCTIONS = (
    "Which language is this sentence written in? Reply with the name of the language only.",
    "Identify the language of the text.",
)
LABEL_LANGUAGE_TEXTS: tuple[tuple[str, str], ...] = (
    ("French", "Je voudrais un café, s'il vous plaît."),
    ("German", "Wo ist der Bahnhof?"),
    ("Spanish", "Me gusta mucho leer por la noche."),
    ("Italian", "Oggi il cielo è molto azzurro."),
    ("Portuguese", "Eu moro perto da praia."),
    ("Dutch", "Ik fiets elke dag naar mijn werk."),
    ("French", "Il pleut depuis ce matin."),
    ("German", "Das Essen war sehr lecker."),
    ("Spanish", "¿Dónde está la biblioteca?"),
    ("Italian", "Mi piace cucinare la pasta con mia nonna."),
    ("Portuguese", "Obrigado pela ajuda de ontem."),
    ("Swedish", "Jag dricker kaffe varje morgon."),
    ("English", "The garden looks lovely in the spring."),
    ("Dutch", "Kun je me helpen met deze vraag?"),
    ("French", "Nous allons au marché samedi."),
    ("German", "Ich lerne seit zwei Jahren Japanisch."),
)
LABEL_SPAM_INSTRUCTIONS = (
    "Is this message spam or not spam? Reply with one word.",
    "Classify the message as spam or not spam.",
)
LABEL_SPAM_TEXTS: tuple[tuple[str, str], ...] = (
    ("spam", "Congratulations! You have won a free cruise. Click the link to claim your prize now!"),
    ("spam", "URGENT: your bank account has been locked. Reply with your password to unlock it."),
    ("spam", "Earn $5,000 a week from home with no experience. Sign up today!"),
    ("spam", "You are our lucky visitor! Claim your free phone before midnight."),
    ("spam", "Designer bags at 90% off. Limited stock, order now!!!"),
    ("spam", "Your parcel could not be delivered. Pay a small fee at this link to reschedule."),
    ("spam", "Lose 10 kg in one week with this miracle pill. Doctors hate it!"),
    ("spam", "Dear friend, I need your help moving ten million dollars. You will receive a share."),
    ("spam", "Final notice: your subscription will expire. Enter your card details here to keep it."),
    ("spam", "Hot singles in your area are waiting to meet you. Click now."),
    ("not spam", "Hi Sam, are we still meeting for lunch on Friday?"),
    ("not spam", "Reminder: your dentist appointment is tomorrow at 9:30."),
    ("not spam", "Mum, I'll be home late tonight, don't wait for me for dinner."),
    ("not spam", "The team meeting has moved to room 4B. See you there."),
    ("not spam", "Thanks for the birthday card, it made my day."),
    ("not spam", "Could you send me the slides from yesterday's presentation?"),
    ("not spam", "Your library book is due back next Monday."),
    ("not spam", "Don't forget to bring your football boots to practice."),
    ("not spam", "I've attached the invoice for last month's work."),
    ("not spam", "Happy anniversary! Dinner is booked for eight."),
)
LABEL_SENTENCE_TYPE_INSTRUCTION = (
    "Is this sentence a question, a command or a statement? Reply with one word."
)
LABEL_SENTENCE_TYPE_TEXTS: tuple[tuple[str, str], ...] = (
    ("command", "Close the window before you leave."),
    ("statement", "The sun rises in the east."),
    ("question", "What time does the show start?"),
    ("command", "Please pass the salt."),
    ("question", "Where did you park the car?"),
    ("statement", "Water boils at one hundred degrees Celsius."),
    ("command", "Turn left at the next traffic light."),
    ("question", "Have you ever been to Scotland?"),
    ("statement", "My sister works at the hospital."),
    ("command", "Bring your umbrella tomorrow."),
)
LABEL_QUESTION_TYPE_INSTRUCTION = (
    "Classify the question by what it asks for: person, place, time or number. Reply with one word."
)
LABEL_QUESTION_TYPE_TEXTS: tuple[tuple[str, str], ...] = (
    ("person", "Who invented the telephone?"),
    ("place", "Where is the Eiffel Tower?"),
    ("time", "When did the Second World War end?"),
    ("number", "How many days are in a leap year?"),
    ("person", "Who is the captain of the national cricket team?"),
    ("place", "In which city was Mozart born?"),
    ("time", "In what year did humans first land on the Moon?"),
    ("number", "How tall is the tallest building in the world?"),
    ("person", "Who wrote the novel Pride and Prejudice?"),
    ("time", "At what time does the sun set in midwinter?"),
)
LABEL_KINDS = ("sentiment", "topic", "yes-no", "language", "spam", "sentence-type", "question-type")


def build_label_replay() -> list[dict[str, str]]:
    """N_REPLAY_LABEL labelling prompts, appended after the original replay rows (which stay unchanged).

    The labels written next to the texts document intent only: replay trains on the base's own answers.
    Each kind cycles through its instruction wordings, so every wording gets an even share.
    """
    groups: list[tuple[Sequence[str], list[str]]] = [
        (LABEL_SENTIMENT_INSTRUCTIONS, [t for _, t in LABEL_SENTIMENT_TEXTS]),
        (LABEL_TOPIC_INSTRUCTIONS, [t for _, t in LABEL_TOPIC_TEXTS]),
        (LABEL_YES_NO_INSTRUCTIONS, [f"Text: {t}\nQuestion: {q}" for t, q in LABEL_YES_NO_ITEMS]),
        (LABEL_LANGUAGE_INSTRUCTIONS, [t for _, t in LABEL_LANGUAGE_TEXTS]),
        (LABEL_SPAM_INSTRUCTIONS, [t for _, t in LABEL_SPAM_TEXTS]),
        ((LABEL_SENTENCE_TYPE_INSTRUCTION,), [t for _, t in LABEL_SENTENCE_TYPE_TEXTS]),
        ((LABEL_QUESTION_TYPE_INSTRUCTION,), [t for _, t in LABEL_QUESTION_TYPE_TEXTS]),
    ]
    labelled = (
        LABEL_SENTIMENT_TEXTS, LABEL_TOPIC_TEXTS, LABEL_LANGUAGE_TEXTS, LABEL_SPAM_TEXTS,
        LABEL_SENTENCE_TYPE_TEXTS, LABEL_QUESTION_TYPE_TEXTS,
    )  # fmt: skip
    for texts in labelled:
        labels = Counter(label for label, _ in texts)
        check(max(labels.values()) - min(labels.values()) <= 2, f"unbalanced labelling texts: {labels}")
    rng = Random(SEED_REPLAY_LABEL)
    rows: list[dict[str, str]] = []
    for instructions, inputs in groups:
        inputs = list(inputs)
        rng.shuffle(inputs)  # which wording meets which text: seeded, not by writing order
        rows += [
            {"instruction": instructions[i % len(instructions)], "input": t} for i, t in enumerate(inputs)
        ]
    check(len(rows) == N_REPLAY_LABEL, f"labelling replay has {len(rows)} rows, want {N_REPLAY_LABEL}")
    for r in rows:
        check(r["input"] == r["input"].strip() and "  " not in r["input"], f"stray whitespace in {r}")
    rng.shuffle(rows)
    return rows


def build_replay(excluded: list[Problem]) -> list[dict[str, str]]:
    """Replay prompts; the arithmetic ones share no computation or question with `excluded`."""
    rng = Random(SEED_REPLAY)
    forbidden_keys = {k for p in excluded for k in p.keys}
    forbidden_q = {norm(p.question) for p in excluded}
    # Same mix of difficulties and edge kinds as the retired arithmetic benchmark, scaled to
    # N_REPLAY_ARITH (=100 -> 30/50/20).
    plan: list[tuple[str, Callable[[Random], Problem]]] = []
    plan += [("easy-zero", gen_easy_zero)] * 2 + [("easy-negative", gen_easy_negative)] * 3
    plan += [("easy", gen_easy)] * 25
    plan += [("medium-zero", gen_medium_zero)] * 2 + [("medium-negative", gen_medium_negative)] * 3
    for op, n in (("add", 15), ("sub", 15), ("mul", 15)):
        plan += [(f"medium-{op}", partial(gen_medium, op))] * n
    plan += [(f"hard-{k}", partial(gen_hard_edge, k)) for k in HARD_EDGE_KINDS]
    plan += [("hard-multistep", gen_hard_multistep)] * 7
    plan += [("hard-word", gen_hard_word)] * 8
    check(len(plan) == N_REPLAY_ARITH, f"replay arithmetic plan has {len(plan)} rows")
    arith = draw_problems(rng, plan, forbidden_keys, forbidden_q)
    rows = [{"instruction": ARITH_INSTRUCTION, "input": p.question} for p in arith]

    gk_pool = list(GK_QUESTIONS)
    gk_pool += [f"What is the capital of {c}?" for c in CAPITALS]
    gk_pool += [f"What is the opposite of the word '{w}'?" for w in OPPOSITES]
    gk_pool += [f"What is the chemical symbol for {e}?" for e in ELEMENTS]
    gk_pool += [f"How many legs does {a} have?" for a in ANIMAL_LEGS]
    check(len(gk_pool) >= N_REPLAY_GK, f"general-knowledge pool too small: {len(gk_pool)}")
    rows += [{"instruction": GK_INSTRUCTION, "input": q} for q in rng.sample(gk_pool, N_REPLAY_GK)]

    rw_pool = [(i, s) for i in REWRITE_INSTRUCTIONS for s in REWRITE_SENTENCES]
    grammar = [("Fix the spelling and grammar in the sentence.", s) for s in GRAMMAR_SENTENCES]
    picked = grammar + rng.sample(rw_pool, N_REPLAY_REWRITE - len(grammar))
    rows += [{"instruction": i, "input": s} for i, s in picked]
    rng.shuffle(rows)
    return rows


# --------------------------------------------------------------------------------------------------------
# Overlap checks
# --------------------------------------------------------------------------------------------------------


def norm(s: str) -> str:
    """Scorer-style normalisation: stripped, lowercased, whitespace collapsed, one trailing period dropped."""
    s = " ".join(s.split()).lower()
    return s[:-1] if s.endswith(".") else s


def pair_key(instruction: str, inp: str) -> str:
    return norm(instruction) + "\n" + norm(inp)


def masked(s: str) -> str:
    return re.sub(r"\d", "#", s)


def check_disjoint(
    name: str,
    rows: Sequence[dict[str, Any]],
    benches: Sequence[Sequence[dict[str, Any]]],
    output_key: str | None,
) -> dict[str, int]:
    """Exact and digit-masked overlap of (instruction, input) with every benchmark; raises on exact overlap.

    Digit-masked collisions are expected (the formats / question templates are shared on purpose) and only
    counted; for each of them the answer must differ from the benchmark's (no same-answer near duplicates).
    """
    bench_rows = [b for bench in benches for b in bench]
    exact = {pair_key(b["instruction"], b["input"]) for b in bench_rows}
    inputs = {norm(b["input"]) for b in bench_rows}
    masked_answers: dict[str, list[str]] = {}
    for b in bench_rows:
        mkey = masked(pair_key(b["instruction"], b["input"]))
        masked_answers.setdefault(mkey, []).append(b["expected_output"])
    bench_input_res = [re.compile(r"(?<!\w)" + re.escape(norm(b["input"])) + r"(?!\w)") for b in bench_rows]
    n_masked = 0
    for r in rows:
        key = pair_key(r["instruction"], r["input"])
        check(key not in exact, f"{name}: exact (instruction, input) overlap with a benchmark: {r}")
        check(norm(r["input"]) not in inputs, f"{name}: benchmark input reused: {r}")
        hit = next((rx.pattern for rx in bench_input_res if rx.search(norm(r["input"]))), None)
        check(hit is None, f"{name}: a benchmark input occurs inside {r} ({hit})")
        answers = masked_answers.get(masked(key))
        if answers is not None:
            n_masked += 1
            if output_key is not None:
                check(r[output_key] not in answers, f"{name}: digit-masked near duplicate, same answer: {r}")
    return {"exact_overlap": 0, "digit_masked_template_matches": n_masked}


def check_not_inside(name: str, rows: Sequence[dict[str, Any]], bench: Sequence[dict[str, Any]]) -> None:
    """The reverse of check_disjoint's containment test: no row's input occurs inside a benchmark input.

    Meant for free-text benchmarks (a replay sentence quoted inside a review would leak it); date inputs
    legitimately contain shorter date strings, so the dates benchmark does not use it.
    """
    row_res = [re.compile(r"(?<!\w)" + re.escape(norm(r["input"])) + r"(?!\w)") for r in rows]
    for b in bench:
        text = norm(b["input"])
        hit = next((rx.pattern for rx in row_res if rx.search(text)), None)
        check(hit is None, f"{name}: an input ({hit}) occurs inside benchmark row {b['id']}")


def words(s: str) -> list[str]:
    """Lowercased word tokens, punctuation and emoji dropped: what a close paraphrase would share."""
    return re.findall(r"[^\W_]+(?:'[^\W_]+)?", s.lower())


def check_no_paraphrase(
    name: str,
    rows: Sequence[dict[str, Any]],
    bench: Sequence[dict[str, Any]],
    *,
    ngram: int = 5,
    max_jaccard: float = 0.5,
) -> None:
    """No row shares a run of `ngram` words, or over `max_jaccard` of its word set, with a benchmark input.

    Exact and containment checks miss a lightly edited copy of a review; this catches one in either
    direction (both measures are symmetric).
    """
    bench_words = [(b["id"], words(b["input"])) for b in bench]
    bench_grams = [(i, {tuple(w[k : k + ngram]) for k in range(len(w) - ngram + 1)}) for i, w in bench_words]
    for r in rows:
        w = words(r["input"])
        grams = {tuple(w[k : k + ngram]) for k in range(len(w) - ngram + 1)}
        for (bid, bw), (_, bg) in zip(bench_words, bench_grams, strict=True):
            if shared := grams & bg:
                raise RuntimeError(f"{name}: {r['input']!r} shares {' '.join(min(shared))!r} with {bid}")
            union = set(w) | set(bw)
            jac = len(set(w) & set(bw)) / len(union) if union else 0.0
            check(jac <= max_jaccard, f"{name}: {r['input']!r} overlaps {bid} ({jac:.2f} of its words)")


def check_benchmark(rows: Sequence[dict[str, Any]], prefix: str) -> dict[str, Any]:
    keys_order = [
        "id",
        "instruction",
        "input",
        "expected_output",
        "evaluation_type",
        "evaluation_config",
        "difficulty",
        "tags",
    ]
    check(len(rows) == N_BENCH, f"{prefix}: {len(rows)} rows")
    check([r["id"] for r in rows] == [f"{prefix}-{i:03d}" for i in range(1, N_BENCH + 1)], f"{prefix}: ids")
    check(all(list(r) == keys_order for r in rows), f"{prefix}: key order")
    diff = Counter(r["difficulty"] for r in rows)
    check(dict(diff) == DIFFICULTY_COUNTS, f"{prefix}: difficulty mix {diff}")
    n_edge = sum("edge" in r["tags"] for r in rows)
    check(n_edge >= 6, f"{prefix}: only {n_edge} edge rows")
    pairs = [pair_key(r["instruction"], r["input"]) for r in rows]
    check(len(set(pairs)) == len(pairs), f"{prefix}: duplicate questions")
    return {"rows": len(rows), "difficulty": {k: diff[k] for k in DIFFICULTY_COUNTS}, "edge": n_edge}


# --------------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8", newline="\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    _self_test_words()
    dates = build_dates_benchmark()
    sentiment = build_sentiment_benchmark()
    stats = {"dates": check_benchmark(dates, "dates"), "sentiment": check_benchmark(sentiment, "sent")}
    labels = Counter(r["expected_output"] for r in sentiment)
    stats["sentiment"]["labels"] = {k: labels[k] for k in SENTIMENT_LABELS}
    check(len({norm(r["input"]) for r in sentiment}) == N_BENCH, "sentiment reviews must be distinct")
    check(len({r["expected_output"] for r in dates}) == N_BENCH, "benchmark dates must be distinct")
    for r in dates:  # the expected output is a real ISO date that round-trips through datetime
        check(dt.date.fromisoformat(r["expected_output"]).isoformat() == r["expected_output"], str(r))

    bench_dates = {r["expected_output"] for r in dates}
    bench_keys = {pair_key(r["instruction"], r["input"]) for r in [*dates, *sentiment]}
    train = build_dates_train(bench_dates, bench_keys)
    check(len(train) == N_TRAIN, f"train has {len(train)} rows")
    check(not bench_dates & {r["output"] for r in train}, "a benchmark date occurs in training")
    stats["train"] = {"rows": len(train), **check_disjoint("train", train, [dates, sentiment], "output")}
    check_not_inside("train", train, sentiment)

    # Labelling rows go after the original 300, whose order (and so the shipped file's prefix) is unchanged.
    label_replay = build_label_replay()
    replay = build_replay(retired_arith_problems()) + label_replay
    check(len({pair_key(r["instruction"], r["input"]) for r in replay}) == len(replay), "replay duplicates")
    check(len({norm(r["input"]) for r in label_replay}) == len(label_replay), "labelling texts repeat")
    stats["replay"] = {"rows": len(replay), **check_disjoint("replay", replay, [dates, sentiment], None)}
    check_not_inside("replay", replay, sentiment)
    # The labelling texts are free text like the reviews: no lightly edited review either.
    check_no_paraphrase("replay", label_replay, sentiment)
    stats["replay"]["labelling"] = len(label_replay)

    outputs = {
        BENCH_DIR / "dates.jsonl": dates,
        BENCH_DIR / "sentiment.jsonl": sentiment,
        DATA_DIR / "train.jsonl": train,
        DATA_DIR / "replay_prompts.jsonl": replay,
    }
    for path, rows in outputs.items():
        write_jsonl(path, rows)
        check(read_jsonl(path) == rows, f"{path} does not read back")
    for path in outputs:
        print(f"wrote {path.relative_to(ROOT)} ({len(outputs[path])} rows)")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
