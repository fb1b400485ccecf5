"""Deterministic data generation for the ``date-iso`` LoRA adapter and its two benchmarks.

Writes (paths relative to the repository root):

* ``benchmarks/dates.jsonl``                  -- in-domain benchmark: human date -> ISO 8601 (60 rows)
* ``benchmarks/arithmetic.jsonl``             -- out-of-domain benchmark: integer arithmetic (60 rows)
* ``adapters/date-iso/data/train.jsonl``      -- ~1200 training rows for the date task
* ``adapters/date-iso/data/replay_prompts.jsonl`` -- ~300 unrelated prompts; their answers are to be the
  base model's own greedy outputs (replay against forgetting)

Pure standard library, seeded ``random.Random`` streams only, no set iteration in output order: running the
script twice gives byte-identical files.  Every benchmark date is re-parsed with ``datetime`` from the
human-written input, and the script refuses to write anything if training or replay rows collide with a
benchmark row (see ``check_*`` below).

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
SEED_ARITH_BENCH = 1729
SEED_TRAIN = 8601
SEED_REPLAY = 4242

N_BENCH = 60
DIFFICULTY_COUNTS = {"easy": 18, "medium": 30, "hard": 12}
N_TRAIN = 1200
N_REPLAY_ARITH = 100
N_REPLAY_GK = 100
N_REPLAY_REWRITE = 100

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
# Deliberately not the looser "-?\d[\d,]*", which also swallows a trailing comma ("42, so" -> "42,").
# This one only accepts well-formed thousands groups ("19,750") and otherwise stops after the digits.
ARITH_EVAL_CONFIG: dict[str, Any] = {
    "extract_pattern": r"-?\d+(?:,\d{3})*",
    "extract_match": "first",
    "max_new_tokens": 24,
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


def build_arith_benchmark() -> tuple[list[dict[str, Any]], list[Problem]]:
    rng = Random(SEED_ARITH_BENCH)
    problems = draw_problems(rng, arithmetic_plan(), set(), set())
    rng.shuffle(problems)
    rows = [
        bench_row(
            "arith",
            i,
            ARITH_INSTRUCTION,
            p.question,
            str(p.answer),
            ARITH_EVAL_CONFIG,
            p.difficulty,
            ["arithmetic", *p.tags],
        )
        for i, p in enumerate(problems, start=1)
    ]
    return rows, problems


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


def build_replay(arith_bench: list[Problem]) -> list[dict[str, str]]:
    rng = Random(SEED_REPLAY)
    forbidden_keys = {k for p in arith_bench for k in p.keys}
    forbidden_q = {norm(p.question) for p in arith_bench}
    # Same mix of difficulties and edge kinds as the benchmark, scaled to N_REPLAY_ARITH (=100 -> 30/50/20).
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
    arith, arith_problems = build_arith_benchmark()
    stats = {"dates": check_benchmark(dates, "dates"), "arith": check_benchmark(arith, "arith")}
    check(len({r["expected_output"] for r in dates}) == N_BENCH, "benchmark dates must be distinct")
    for r in dates:  # the expected output is a real ISO date that round-trips through datetime
        check(dt.date.fromisoformat(r["expected_output"]).isoformat() == r["expected_output"], str(r))

    bench_dates = {r["expected_output"] for r in dates}
    bench_keys = {pair_key(r["instruction"], r["input"]) for r in [*dates, *arith]}
    train = build_dates_train(bench_dates, bench_keys)
    check(len(train) == N_TRAIN, f"train has {len(train)} rows")
    check(not bench_dates & {r["output"] for r in train}, "a benchmark date occurs in training")
    stats["train"] = {"rows": len(train), **check_disjoint("train", train, [dates, arith], "output")}

    replay = build_replay(arith_problems)
    check(len({pair_key(r["instruction"], r["input"]) for r in replay}) == len(replay), "replay duplicates")
    stats["replay"] = {"rows": len(replay), **check_disjoint("replay", replay, [dates, arith], None)}

    outputs = {
        BENCH_DIR / "dates.jsonl": dates,
        BENCH_DIR / "arithmetic.jsonl": arith,
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
