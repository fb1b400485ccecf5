"""The plugin's cost per row grows linearly with the rows (issue 40; bench/overhead.py measures the time).

No wall times here: these count the work a run does per row, and check the fast paths say what the slow
ones said.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from helpers import jsonl, row

import pytest_llmeval.backends.saved as saved
from pytest_llmeval.hooks.collection import YOUNG_THRESHOLD, thaw_earlier_session
from pytest_llmeval.results_reader import document_problem

ROWS = 300


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")


def test_saved_predictions_are_matched_in_linear_work(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every row looks up its prediction and the run lists the unmatched ones: with an index by id that is a
    # few `predicts` calls per row; matching each row against the whole file is ROWS * ROWS of them.
    calls = 0
    real = saved.predicts

    def counted(*args: Any) -> bool:
        nonlocal calls
        calls += 1
        return real(*args)

    monkeypatch.setattr(saved, "predicts", counted)
    rows = [row(f"r{i}", expected=f"answer {i % 7}") for i in range(ROWS)]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    preds = [{"id": f"r{i}", "prediction": f"answer {i % 7}" if i % 5 else "wrong"} for i in range(ROWS)]
    (pytester.path / "preds.jsonl").write_text(jsonl(preds))
    result = pytester.runpytest_inprocess(
        "--llmeval-predictions=preds.jsonl",
        "-m",
        "not gate",
        "--llmeval-no-history",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=ROWS - ROWS // 5, failed=ROWS // 5)
    assert calls <= 4 * ROWS, f"{calls} predicts() calls for {ROWS} rows: quadratic matching"


def _document(rows: int) -> dict[str, Any]:
    """A results document of `rows` exact-match rows, in the shape every reader of one relies on."""
    return {
        "benchmarks": [
            {
                "benchmark_file": "bench.jsonl",
                "benchmark_hash": "0" * 64,
                "gates": {"size": {"status": "pass"}},
                "rows": [
                    {
                        "id": f"r{i}",
                        "evaluated": "base",
                        "evaluation_type": "exact_match",
                        "evaluation_config": {},
                        "difficulty": "easy",
                        "models": {"base": {"output": "x", "score": {"value": 1.0, "threshold": 1.0}}},
                    }
                    for i in range(rows)
                ],
            }
        ],
        "models": [{"column": "base", "kind": "base"}],
    }


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (["rows", 1500, "id", 3], "benchmarks[0].rows[1500].id is 3, not a string"),
        (["rows", 1999, "evaluated", None], "benchmarks[0].rows[1999].evaluated is null, not a string"),
        (
            ["rows", 700, "models", "base", "score", "value", 1e300],
            "benchmarks[0].rows[700].models.base.score.value is 1e+300, "
            "out of any range a results.json holds",
        ),
        (
            ["rows", 3, "evaluation_config", [1]],
            "benchmarks[0].rows[3].evaluation_config is [1], not an object",
        ),
    ],
)
def test_a_damaged_field_is_named_by_its_place_among_many_rows(fault: list[Any], message: str) -> None:
    # The check walks every value without spelling its place, and spells only the one at fault: the place
    # must still be the field's, and a sound document of as many rows must pass.
    document = _document(2000)
    assert document_problem(copy.deepcopy(document)) is None
    target: Any = document["benchmarks"][0]
    for key in fault[:-2]:
        target = target[key]
    target[fault[-2]] = fault[-1]
    assert document_problem(json.loads(json.dumps(document))) == message


def test_a_row_without_a_required_field_is_named() -> None:
    document = _document(50)
    del document["benchmarks"][0]["rows"][42]["models"]
    assert document_problem(document) == "benchmarks[0].rows[42] has no models"


@pytest.mark.parametrize(("levels", "leaf"), [(70, []), (61, "x"), (61, 1.5)])
def test_nesting_too_deep_is_found_below_a_sound_document(levels: int, leaf: Any) -> None:
    # `extra` is at depth 3: 61 lists below it put a string or number (which the walk does not stack) at
    # depth 65, one past the limit, and the check must still see it.
    document = _document(10)
    deep: list[Any] = []
    inner = deep
    for _ in range(levels):
        inner.append([])
        inner = inner[0]
    inner.append(leaf)
    document["benchmarks"][0]["extra"] = deep
    assert document_problem(document) == "benchmarks is nested more than 64 levels deep"
    inner.clear()  # one level less: within the limit
    assert document_problem(document) is None or levels == 70


FREEZE_PROBE = """
import gc
from pathlib import Path


def pytest_runtest_call(item):
    if item.name not in ("r0", "test_plain"):
        return  # gc.get_freeze_count() walks every frozen object: once is enough
    with open(Path(__file__).parent / "frozen.txt", "a") as out:
        out.write(f"{item.name} {gc.get_freeze_count()} {gc.get_threshold()[0]}\\n")


def pytest_sessionfinish(session):  # after the plugin's own (tryfirst)
    with open(Path(__file__).parent / "frozen.txt", "a") as out:
        out.write(f"end {len(gc.get_objects())}\\n")
"""


def test_collected_rows_are_frozen_for_the_run_and_thawed_by_the_next_session(
    pytester: pytest.Pytester,
) -> None:
    # The cyclic collector walked every collected item again and again while rows ran (about 1 s at 10,000
    # rows, bench/overhead.py): a session with rows freezes what collection built. A process that runs
    # another session (pytester's in-process runs) thaws it when that session starts, so the first one's
    # leftovers do not stay out of the collector's reach.
    import gc

    thaw_earlier_session()  # an earlier in-process run of this process may have left its own freeze
    before = gc.get_threshold()
    pytester.makeconftest(FREEZE_PROBE)
    pytester.makefile(".jsonl", bench=jsonl([row(f"r{i}", expected="a") for i in range(ROWS)]))
    (pytester.path / "preds.jsonl").write_text(
        jsonl([{"id": f"r{i}", "prediction": "a"} for i in range(ROWS)])
    )
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    try:
        first = pytester.runpytest_inprocess(
            "bench.jsonl", "--llmeval-predictions=preds.jsonl", "-m", "not gate", "--llmeval-no-history"
        )
        first.assert_outcomes(passed=ROWS)
        seen = (pytester.path / "frozen.txt").read_text().split()
        assert seen[0] == "r0" and int(seen[1]) > 1000, seen  # everything alive at collection's end
        assert int(seen[2]) == YOUNG_THRESHOLD  # young objects collected less often while rows run
        # What the rows added is frozen at the session's end too: the collector then tracks what was made
        # since (results.json's document: about 1,800 objects here, against 18,000 with the rows' records
        # and reports); left frozen, since thawing it at the end would make the exit walk it all.
        assert seen[-2] == "end" and int(seen[-1]) < 6000, seen[-2:]
        assert gc.get_freeze_count() > 0
        (pytester.path / "frozen.txt").unlink()
        second = pytester.runpytest_inprocess("test_plain.py", "--llmeval-no-history")
        second.assert_outcomes(passed=1)
        assert (pytester.path / "frozen.txt").read_text().split()[:3] == ["test_plain", "0", str(before[0])]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def _damaged_documents() -> Any:
    """A sound document with one value somewhere replaced by another kind of JSON value, or one key gone."""
    from hypothesis import strategies as st

    values = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.floats(-2, 2),
        st.text(max_size=3),
        st.lists(st.integers(0, 2), max_size=2),
        st.dictionaries(st.sampled_from(["value", "x", "nll"]), st.integers(0, 1), max_size=2),
    )
    return st.tuples(st.integers(0, 10**6), values, st.booleans())


def _places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*at, index))
    return found


def test_the_quick_walk_passes_only_what_the_naming_walk_passes() -> None:
    # document_problem first walks a document once without places, and names the fault with the slower
    # walk only when that fails: a damage the quick walk let through would be a damaged baseline read as
    # sound. Every single damage of a document with every kind of field must be judged as the slow walk
    # alone judges it.
    from hypothesis import given, settings

    import pytest_llmeval.results_reader as reader

    sound = _document(3)
    sound["benchmarks"][0]["rows"][1]["evaluation_type"] = "perplexity"
    sound["benchmarks"][0]["rows"][1]["models"]["base"]["score"].update(
        {
            "cross_entropy": 1.0,
            "nll": 2.0,
            "perplexity": 2.7,
            "n_tokens": 3,
            "n_chars": 9,
            "scripts": {"latin": {"nll": 2.0, "n_chars": 9}},
        }
    )
    sound["models"][0]["training"] = {"final_loss": 0.5, "totals": {"steps": 3}}
    sound["models"][0]["parameter_efficiency"] = {"trainable_params": 10}
    sound["criteria"] = {"name": "default", "gates": {"size": {"status": "pass", "message": "ok"}}}
    sound["complete"] = True
    assert document_problem(copy.deepcopy(sound)) is None
    places = _places(sound)[1:]

    def slow(document: Any) -> str | None:
        quick = reader._fields_fit
        reader._fields_fit = lambda value, node: False  # type: ignore[assignment]
        try:
            return document_problem(document)
        finally:
            reader._fields_fit = quick  # type: ignore[assignment]

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(_damaged_documents())
    def check(damage: tuple[int, Any, bool]) -> None:
        which, value, remove = damage
        document = copy.deepcopy(sound)
        place = places[which % len(places)]
        parent = document
        for key in place[:-1]:
            parent = parent[key]
        if remove and isinstance(parent, dict):
            del parent[place[-1]]
        else:
            parent[place[-1]] = value
        assert document_problem(copy.deepcopy(document)) == slow(document)

    check()
