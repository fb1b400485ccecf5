"""Unit tests and hypothesis properties of gates.py: verdict boundaries, messages, held-out checks."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmeval.benchmark import Case, load_benchmark
from pytest_llmeval.gates import (
    GATES,
    TrainingRow,
    Verdict,
    _NgramIndex,
    better_than_base,
    difficulty_mix,
    edge_cases,
    held_out,
    load_training_data,
    no_degradation,
    no_regression,
    size,
)
from pytest_llmeval.scorers import SCORERS
from pytest_llmeval.stats import PairedComparison, compare_paired

REPO = Path(__file__).resolve().parent.parent
INSTRUCTION = "Convert the date to ISO 8601 format (YYYY-MM-DD). Reply with the date only."
LONG_INPUT = (
    "The committee reviewed the quarterly report and decided to postpone the vote on the new library wing "
    "until the auditors finish checking the accounts of the building fund"
)


def _binary(n: int, adapter_right: int, base_right: int, *, both: int | None = None) -> PairedComparison:
    """A comparison of n binary rows; `both` rows are right for both models (default: as many as possible)."""
    both = min(adapter_right, base_right) if both is None else both
    adapter = [1] * adapter_right + [0] * (n - adapter_right)
    # The base is right on the first `both` rows the adapter got right, then on rows the adapter got wrong.
    base = [1] * both + [0] * (adapter_right - both) + [1] * (base_right - both)
    base += [0] * (n - len(base))
    # Few bootstrap resamples: the gates read the CI, they don't test its precision.
    return compare_paired(adapter, base, n_boot=200)


def _drop(drop: float, *, n: int = 100, base_score: float = 0.6) -> PairedComparison:
    """A continuous comparison whose adapter mean is `drop` below the base mean (up to float rounding)."""
    base = [base_score] * n
    # Alternating +-0.01 keeps the paired differences from being constant (a t-test needs some spread).
    adapter = [base_score - drop + (0.01 if i % 2 else -0.01) for i in range(n)]
    return compare_paired(adapter, base, n_boot=200)


def _case(
    case_id: str = "r1",
    instruction: str = INSTRUCTION,
    inp: str = "",
    *,
    difficulty: str = "easy",
    tags: Sequence[str] = (),
    line: int = 1,
) -> Case:
    return Case(
        id=case_id,
        instruction=instruction,
        input=inp,
        expected_output="x",
        evaluation_type="exact_match",
        difficulty=difficulty,
        line=line,
        tags=tuple(tags),
    )


def _train(*rows: tuple[str, str]) -> list[TrainingRow]:
    return [TrainingRow(instruction=i, input=inp, line=n) for n, (i, inp) in enumerate(rows, start=1)]


# ---------------------------------------------------------------------------------------------------------
# Verdict


def test_verdict_passed_and_json() -> None:
    statuses = {s: Verdict("size", s, "m", {"k": [1]}) for s in ("pass", "warn", "fail", "skip")}
    assert {s: v.passed for s, v in statuses.items()} == {
        "pass": True,
        "warn": True,
        "fail": False,
        "skip": True,
    }
    out = statuses["warn"].to_json()
    assert out == {"gate": "size", "status": "warn", "passed": True, "message": "m", "details": {"k": [1]}}
    json.dumps(out)


def test_verdict_refuses_unknown_gate_and_status() -> None:
    with pytest.raises(ValueError, match="unknown status 'ok'"):
        Verdict("size", "ok", "m")
    with pytest.raises(ValueError, match="unknown gate 'sizes'"):
        Verdict("sizes", "pass", "m")
    assert "held_out" in GATES


# ---------------------------------------------------------------------------------------------------------
# better_than_base


def test_better_than_base_significant_pass_message_has_the_numbers() -> None:
    cmp = _binary(60, adapter_right=53, base_right=4)
    verdict = better_than_base(cmp)
    assert verdict.status == "pass"
    assert verdict.message.startswith("adapter 0.883 vs base 0.067: +0.817 (95% CI ")
    assert f"McNemar exact p={cmp.p_value:.2g} < 0.05" in verdict.message
    assert verdict.details["comparison"] == cmp.to_json()
    json.dumps(verdict.to_json())


def test_better_than_base_not_better_fails() -> None:
    verdict = better_than_base(_binary(60, adapter_right=30, base_right=30))
    assert verdict.status == "fail"
    assert verdict.message.startswith("adapter is not better than base: adapter 0.500 vs base 0.500: +0.000")


def test_better_than_base_not_significant_fails_with_power_note() -> None:
    cmp = _binary(60, adapter_right=36, base_right=30, both=24)  # discordant 12 / 6
    assert cmp.min_detectable_difference is not None and cmp.n_for_10_points is not None
    verdict = better_than_base(cmp)
    assert verdict.status == "fail"
    assert verdict.message.startswith("adapter is better than base but not significantly: adapter 0.600")
    assert f"McNemar exact p={cmp.p_value:.2g} >= 0.05" in verdict.message
    assert verdict.message.endswith(
        f"; this benchmark can only detect differences >= {cmp.min_detectable_difference:.3f} at n=60 "
        f"(about {cmp.n_for_10_points} rows would detect 0.10)"
    )
    # With too few discordant rows no difference is detectable: the note is left out, not made up.
    tiny = _binary(60, adapter_right=31, base_right=30)
    assert tiny.min_detectable_difference is None
    assert "can only detect" not in better_than_base(tiny).message


def test_better_than_base_p_exactly_alpha_is_not_significant() -> None:
    cmp = dataclasses.replace(_binary(60, adapter_right=40, base_right=30), p_value=0.05, alpha=0.05)
    assert better_than_base(cmp).status == "fail"
    assert better_than_base(dataclasses.replace(cmp, p_value=0.0499)).status == "pass"


def test_better_than_base_point_mode() -> None:
    weak = _binary(60, adapter_right=31, base_right=30)
    verdict = better_than_base(weak, mode="point")
    assert verdict.status == "pass"
    assert "better on the point estimate (not significant: McNemar exact p=" in verdict.message
    assert verdict.details["mode"] == "point"
    strong = better_than_base(_binary(60, adapter_right=53, base_right=4), mode="point")
    assert strong.status == "pass" and "< 0.05)" in strong.message
    tie = better_than_base(_binary(60, adapter_right=30, base_right=30), mode="point")
    assert tie.status == "fail"
    assert tie.message.startswith("adapter is not better than base on the point estimate: adapter 0.500")


def test_better_than_base_skip_and_bad_mode() -> None:
    verdict = better_than_base(None)
    assert (verdict.status, verdict.message, verdict.passed) == (
        "skip",
        "no adapter: nothing to compare",
        True,
    )
    with pytest.raises(ValueError, match="mode must be 'significant' or 'point', got 'loose'"):
        better_than_base(None, mode="loose")


# ---------------------------------------------------------------------------------------------------------
# no_degradation: drop = base - adapter; drop <= 0.05 pass, <= 0.10 warn, above fail. A drop within 1e-9 of a
# threshold counts as at it (0.85 - 0.90 is -0.05000000000000004 in floats), and at a threshold the milder
# verdict wins.


@pytest.mark.parametrize(
    ("drop", "status"),
    [(-0.2, "pass"), (0.0, "pass"), (0.05, "pass"), (0.0501, "warn"), (0.10, "warn"), (0.1001, "fail")],
)
def test_no_degradation_boundaries_continuous(drop: float, status: str) -> None:
    verdict = no_degradation(_drop(drop))
    assert verdict.status == status
    if drop > 0:
        # Just past a threshold the message shows enough decimals to be past it: "0.0501 > 0.050".
        assert f"drop {drop:.3f}" in verdict.message or f"drop {drop:.4f}" in verdict.message


@pytest.mark.parametrize(
    ("adapter_right", "status"), [(85, "pass"), (84, "warn"), (80, "warn"), (79, "fail")]
)
def test_no_degradation_boundaries_binary(adapter_right: int, status: str) -> None:
    # 0.85 - 0.90 and 0.80 - 0.90 are not exactly -0.05 and -0.10 in floats: the rule absorbs that.
    assert no_degradation(_binary(100, adapter_right=adapter_right, base_right=90)).status == status


def test_no_degradation_float_representation_at_threshold() -> None:
    cmp = dataclasses.replace(_drop(0.05), difference=0.85 - 0.90)
    assert cmp.difference < -0.05  # the float really is past the threshold...
    assert no_degradation(cmp).status == "pass"  # ...and still counts as at it


def test_no_degradation_messages() -> None:
    warn = no_degradation(_binary(100, adapter_right=83, base_right=90))
    assert warn.status == "warn"
    assert warn.message.startswith("adapter 0.830 vs base 0.900: -0.070 (95% CI ")
    assert "drop 0.070 > warn threshold 0.050 (fails above 0.100)" in warn.message
    fail = no_degradation(_binary(100, adapter_right=70, base_right=90))
    assert "drop 0.200 > fail threshold 0.100" in fail.message
    cmp = _binary(100, adapter_right=88, base_right=90)
    assert f"CI {cmp.ci_low:+.3f} to {cmp.ci_high:+.3f}" in no_degradation(cmp).message
    assert no_degradation(_binary(100, adapter_right=95, base_right=90)).message.endswith(": no drop")
    assert no_degradation(None).status == "skip"


def test_no_degradation_custom_and_invalid_thresholds() -> None:
    assert no_degradation(_drop(0.03), warn_drop=0.02, fail_drop=0.03).status == "warn"
    assert no_degradation(_drop(0.0), warn_drop=0.0, fail_drop=0.0).status == "pass"
    with pytest.raises(ValueError, match="warn_drop <= fail_drop"):
        no_degradation(None, warn_drop=0.1, fail_drop=0.05)
    with pytest.raises(ValueError, match="0 <= warn_drop"):
        no_degradation(None, warn_drop=-0.01)


# ---------------------------------------------------------------------------------------------------------
# no_regression


def test_no_regression_fails_when_significantly_worse() -> None:
    cmp = _binary(60, adapter_right=20, base_right=50)
    verdict = no_regression(cmp, previous_version="0.1.0", comparable=True)
    assert verdict.status == "fail"
    assert verdict.message.startswith(
        "significant regression: current 0.333 vs previous version 0.1.0 0.833: -0.500"
    )
    assert f"p={cmp.p_value:.2g} < 0.05" in verdict.message


def test_no_regression_passes_when_not_significantly_worse_or_better() -> None:
    worse = no_regression(
        _binary(60, adapter_right=29, base_right=30), previous_version=None, comparable=True
    )
    assert worse.status == "pass"
    assert "current 0.483 vs previous results 0.500" in worse.message
    assert "lower but not significantly" in worse.message
    better = no_regression(
        _binary(60, adapter_right=40, base_right=30), previous_version="v2", comparable=True
    )
    assert better.status == "pass" and better.message.endswith("no regression")


def test_no_regression_skips() -> None:
    cmp = _binary(60, adapter_right=20, base_right=50)
    changed = no_regression(cmp, previous_version="0.1.0", comparable=False, reason="benchmark hash changed")
    assert (changed.status, changed.message) == ("skip", "scores are not comparable: benchmark hash changed")
    assert no_regression(cmp, previous_version=None, comparable=False).message.startswith(
        "scores are not comparable: "
    )
    none = no_regression(None, previous_version=None, comparable=True)
    assert (none.status, none.message) == ("skip", "no previous results to compare against")


# ---------------------------------------------------------------------------------------------------------
# size, difficulty_mix, edge_cases


def test_size_boundary() -> None:
    assert size(50).status == "pass"
    low = size(49)
    assert low.status == "fail"
    assert low.message == "benchmark has 49 rows, fewer than the minimum 50"
    assert size(3, minimum=3).status == "pass"
    with pytest.raises(ValueError, match="minimum must be >= 0"):
        size(10, minimum=-1)


def test_difficulty_mix_on_target_and_at_tolerance() -> None:
    assert difficulty_mix({"easy": 30, "medium": 50, "hard": 20}).status == "pass"
    # 0.45 - 0.3 is 0.15000000000000002 in floats: exactly at the tolerance, so still a pass.
    at = difficulty_mix({"easy": 45, "medium": 35, "hard": 20})
    assert at.status == "pass"
    past = difficulty_mix({"easy": 46, "medium": 34, "hard": 20})
    assert past.status == "warn"
    assert past.message == (
        "easy 46% (target 30%), medium 34% (target 50%), hard 20% (target 20%): "
        "easy, medium off target by more than 15 points"
    )
    assert past.details["off_target"] == ["easy", "medium"]


def test_difficulty_mix_shows_decimals_where_rounding_would_hide_the_miss() -> None:
    verdict = difficulty_mix({"easy": 4501, "medium": 3499, "hard": 2000})
    assert verdict.status == "warn"
    assert verdict.message.startswith("easy 45.01% (target 30%), medium 34.99% (target 50%), hard 20% ")


def test_difficulty_mix_unknown_level_and_empty() -> None:
    verdict = difficulty_mix({"easy": 3, "medium": 5, "hard": 1, "expert": 1}, tolerance=0.05)
    assert verdict.status == "warn"
    assert "expert 10% (target 0%)" in verdict.message
    assert difficulty_mix({}).status == "skip"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tolerance": 1.5}, "tolerance must be within"),
        ({"tolerance": -0.1}, "tolerance must be within"),
        ({"target": {"easy": 0.5, "hard": 0.2}}, "sum to 1"),
        ({"target": {"easy": 1.5, "hard": -0.5}}, "within \\[0, 1\\]"),
    ],
)
def test_difficulty_mix_invalid_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        difficulty_mix({"easy": 1}, **kwargs)  # type: ignore[arg-type]


@given(st.dictionaries(st.sampled_from(["easy", "medium", "hard", "other"]), st.integers(0, 10_000)))
@settings(max_examples=100, deadline=None)
def test_difficulty_mix_never_fails(counts: dict[str, int]) -> None:
    verdict = difficulty_mix(counts)
    assert verdict.status in ("pass", "warn", "skip")
    assert verdict.passed


def test_edge_cases_boundary() -> None:
    cases = [_case(f"r{i}", tags=["edge"] if i < 5 else ["dates"]) for i in range(20)]
    verdict = edge_cases(cases)
    assert (verdict.status, verdict.message) == ("pass", "5 of 20 rows tagged 'edge' (minimum 5)")
    short = edge_cases(cases[1:])
    assert (short.status, short.message) == ("fail", "4 of 19 rows tagged 'edge', fewer than the minimum 5")
    assert short.details["ids"] == ["r1", "r2", "r3", "r4"]
    assert edge_cases(cases, tag="dates", minimum=15).status == "pass"


# ---------------------------------------------------------------------------------------------------------
# held_out


def test_held_out_exact_duplicate_despite_case_whitespace_and_punctuation() -> None:
    cases = [_case("d1", inp="August 24, 2003", line=4), _case("d2", inp="2 Jun 2017")]
    training = _train(
        ("Translate to French.", "Good morning"),
        (
            "  convert THE date to ISO 8601 format (YYYY-MM-DD).   reply with the date only  ",
            "  august 24, 2003!",
        ),
    )
    verdict = held_out(cases, training)
    assert verdict.status == "fail"
    assert verdict.message.startswith(
        "1 of 2 benchmark rows against 2 training rows appear in the training data"
    )
    assert "d1 (training line 2)" in verdict.message
    assert verdict.details["exact"] == [
        {"id": "d1", "line": 4, "rules": ["exact"], "matches": 1, "training_lines": [2]}
    ]


def test_held_out_prompt_text_matches_instruction_and_input() -> None:
    # A training file in the "prompt" form holds the same row as one text: instruction, newline, input.
    training = [TrainingRow(instruction=f"{INSTRUCTION}\nAugust 24, 2003", input="", line=7)]
    verdict = held_out([_case("d1", inp="August 24, 2003")], training)
    assert verdict.status == "fail"
    assert verdict.details["exact"][0]["training_lines"] == [7]


def test_held_out_number_masked_near_duplicate() -> None:
    sentence = "The board met on {} to approve the budget for the new library wing and its reading room."
    cases = [_case("m1", "Summarise the minutes.", sentence.format("March 5, 2021"))]
    training = _train(("Summarise the minutes.", sentence.format("March 6, 2020")))
    verdict = held_out(cases, training)
    assert verdict.status == "warn"
    assert verdict.details["near"] == [
        {"id": "m1", "line": 1, "rules": ["numbers masked"], "matches": 1, "training_lines": [1]}
    ]
    assert verdict.message == (
        "1 of 1 benchmark rows against 1 training rows are near duplicates: "
        "m1 (training line 1; numbers masked)"
    )


def test_held_out_does_not_mask_rows_made_of_numbers() -> None:
    # In a bare date the numbers are the row: "March 5, 2021" and "March 6, 2020" are different questions.
    verdict = held_out([_case("d1", inp="March 5, 2021")], _train((INSTRUCTION, "March 6, 2020")))
    assert verdict.status == "pass"
    assert (
        held_out([_case("d1", inp="March 5, 2021")], _train((INSTRUCTION, "March 5, 2021"))).status == "fail"
    )
    # ...unless the numbers are few among the words (an ordinal date differing only in its year).
    near = held_out(
        [_case("d1", inp="fourteenth of March, 1997")], _train((INSTRUCTION, "fourteenth of March, 2018"))
    )
    assert near.status == "warn"


def test_held_out_ngram_near_duplicate_one_word_changed() -> None:
    changed = LONG_INPUT.replace("postpone", "delay")
    cases = [_case("n1", "Summarise this.", LONG_INPUT)]
    verdict = held_out(
        cases, _train(("Write a summary of the text below.", changed), ("Other.", "unrelated"))
    )
    assert verdict.status == "warn"
    assert verdict.details["near"][0]["rules"] == ["3-gram overlap"]
    assert verdict.details["near"][0]["training_lines"] == [1]
    assert "n1 (training line 1; 3-gram overlap)" in verdict.message


def test_held_out_ngram_containment_in_a_longer_training_text() -> None:
    training = [TrainingRow(instruction=f"Notes. {LONG_INPUT}. Then lunch was served.", input="", line=3)]
    verdict = held_out([_case("n1", "Summarise this.", LONG_INPUT)], training)
    assert verdict.status == "warn"
    assert verdict.details["near"][0]["training_lines"] == [3]


def test_held_out_unrelated_text_passes() -> None:
    cases = [_case("u1", "Summarise this.", LONG_INPUT), _case("u2", inp="Jan 5th, 2024")]
    training = _train(
        ("Summarise this.", "A recipe for bread: flour, water, salt and yeast, left to rise overnight."),
        (INSTRUCTION, "the 20th of February 2020"),
        ("Translate to German.", "the committee reviewed"),
    )
    verdict = held_out(cases, training)
    assert verdict.status == "pass"
    assert (
        verdict.message == "none of 2 benchmark rows against 3 training rows is a duplicate or near duplicate"
    )


def test_held_out_skip_without_training_and_invalid_settings() -> None:
    verdict = held_out([_case()], [])
    assert verdict.status == "skip"
    assert verdict.message.startswith("no training data given")
    with pytest.raises(ValueError, match="ngram must be >= 1"):
        held_out([], [], ngram=0)
    with pytest.raises(ValueError, match="max_overlap must be within \\(0, 1\\]"):
        held_out([], [], max_overlap=0)
    with pytest.raises(ValueError, match="max_number_share must be within"):
        held_out([], [], max_number_share=2)


def test_held_out_real_shipped_data() -> None:
    validators = {name: s.validate for name, s in SCORERS.items()}
    cases = load_benchmark(REPO / "benchmarks" / "dates.jsonl", validators).cases
    training = load_training_data(REPO / "adapters" / "date-iso" / "data" / "train.jsonl")
    verdict = held_out(cases, training)
    assert verdict.details["exact"] == []
    assert verdict.status in ("pass", "warn")
    # Benchmark and training share their formats on purpose: masking every date's digits would flag almost
    # every row. Only rows whose numbers are few among their words are compared masked.
    assert len(verdict.details["near"]) < len(cases) // 4
    json.dumps(verdict.to_json())


_WORDS = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
_TEXTS = st.lists(_WORDS, min_size=1, max_size=12).map(" ".join)


@given(st.lists(st.tuples(_TEXTS, _TEXTS), min_size=1, max_size=8))
@settings(max_examples=50, deadline=None)
def test_held_out_never_fails_without_training(rows: list[tuple[str, str]]) -> None:
    cases = [_case(f"r{i}", instruction, inp) for i, (instruction, inp) in enumerate(rows)]
    assert held_out(cases, []).status == "skip"


@given(
    st.lists(st.tuples(_TEXTS, _TEXTS), min_size=1, max_size=8),
    st.lists(st.tuples(_TEXTS, _TEXTS), max_size=8),
    st.data(),
)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_held_out_fails_when_training_holds_a_benchmark_row(
    rows: list[tuple[str, str]], other: list[tuple[str, str]], data: st.DataObject
) -> None:
    cases = [_case(f"r{i}", instruction, inp) for i, (instruction, inp) in enumerate(rows)]
    copied = data.draw(st.sampled_from(cases))
    position = data.draw(st.integers(0, len(other)))
    training_rows = [*other[:position], (copied.instruction, copied.input), *other[position:]]
    verdict = held_out(cases, _train(*training_rows))
    assert verdict.status == "fail"
    assert copied.id in [match["id"] for match in verdict.details["exact"]]


@given(
    st.lists(st.lists(st.sampled_from("abcde"), max_size=8), max_size=6),
    st.lists(st.lists(st.sampled_from("abcde"), max_size=10), max_size=10),
    st.integers(1, 3),
    st.floats(0.05, 1.0),
)
@settings(max_examples=200, deadline=None)
def test_ngram_index_finds_what_a_full_scan_finds(
    rows: list[list[str]], training: list[list[str]], n: int, share: float
) -> None:
    # Containment by brute force: the share of a row's n-grams (a row shorter than n: the whole row as one
    # phrase) that occur as consecutive words of the training text.
    def grams(words: list[str], k: int) -> set[tuple[str, ...]]:
        return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}

    index = _NgramIndex(rows, n)
    for text in training:
        expected = []
        for i, row in enumerate(rows):
            k = min(n, len(row))
            wanted = grams(row, k) if k else set()
            if wanted and len(wanted & grams(text, k)) >= share * len(wanted) - 1e-9:
                expected.append(i)
        assert index.matching(text, share) == expected


# ---------------------------------------------------------------------------------------------------------
# load_training_data


def test_load_training_data_forms_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    lines = [
        json.dumps({"instruction": "Convert.", "input": "Jan 5th, 2024", "output": "2024-01-05"}),
        "",
        "   ",
        json.dumps({"instruction": "Say hi."}),
        json.dumps({"prompt": "Convert.\nJan 6th, 2024", "completion": "2024-01-06"}),
        json.dumps({"text": "### Instruction: Convert"}),
        "",
    ]
    # A BOM and CRLF line ends, as editors on Windows write them.
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode())
    assert load_training_data(path) == [
        TrainingRow(instruction="Convert.", input="Jan 5th, 2024", line=1),
        TrainingRow(instruction="Say hi.", input="", line=4),
        TrainingRow(instruction="Convert.\nJan 6th, 2024", input="", line=5),
        TrainingRow(instruction="### Instruction: Convert", input="", line=6),
    ]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ('{"instruction": "x", ', "invalid JSON: "),
        ("[1, 2]", "expected a JSON object, got array"),
        ('{"output": "x"}', "expected an 'instruction' (with optional 'input'), 'prompt' or 'text' field"),
        ('{"instruction": "x", "input": 3}', "'instruction' and 'input' must be strings"),
        ('{"prompt": null}', "'prompt'/'text' must be a string"),
    ],
)
def test_load_training_data_bad_line_names_path_and_line(tmp_path: Path, bad: str, reason: str) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"instruction": "ok"}) + "\n\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_training_data(path)
    assert str(info.value).startswith(f"{path}:3: {reason}")
