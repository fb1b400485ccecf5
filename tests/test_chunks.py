"""Unit tests and hypothesis properties of evaluator.chunk_keys and evaluator.row_predicate (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmeval.planning import chunk_keys, row_predicate

# The default `llmeval_files` patterns.
is_jsonl_row = row_predicate(["*.jsonl"])


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("a.jsonl::q1", True),
        ("benchmarks/a.jsonl::q1", True),
        ("benchmarks/sub.dir/a.jsonl::gsm8k-0001", True),
        ("::q1", True),  # a file outside the rootdir: pytest leaves the file part empty
        ("tests/test_x.py::test_a", False),
        ("tests/test_x.py::TestA::test_a", False),
        ("tests/test_x.py::test_a[a.jsonl::b]", False),
        ("benchmarks/a.jsonl::gate::size", False),
        ("::gate::size", False),
        ("benchmarks/a.jsonl", False),
        ("benchmarks/a.json::q1", False),
        ("benchmarks/a.jsonl.bak::q1", False),
        ("", False),
    ],
)
def test_default_row_predicate(nodeid: str, expected: bool) -> None:
    assert is_jsonl_row(nodeid) is expected


@pytest.mark.parametrize(
    ("patterns", "nodeid", "expected"),
    [
        (["*.ndjson"], "data/a.ndjson::q1", True),
        (["*.ndjson"], "data/a.jsonl::q1", False),  # not a benchmark file under these patterns
        (["*.ndjson"], "::q1", True),
        (["*.ndjson", "*.jsonl"], "data/a.jsonl::q1", True),
        # The pattern matches the file's name, as pytest_collect_file does, not its directories.
        (["bench_*.jsonl"], "x/bench_a.jsonl::q1", True),
        (["bench_*.jsonl"], "bench_x/a.jsonl::q1", False),
        ([], "a.jsonl::q1", False),
    ],
)
def test_row_predicate_follows_the_patterns(patterns: list[str], nodeid: str, expected: bool) -> None:
    assert row_predicate(patterns)(nodeid) is expected


def test_rows_of_a_non_jsonl_pattern_are_grouped_into_chunks() -> None:
    rows = [f"data/a.ndjson::q{i}" for i in range(5)]
    nodeids = [*rows, "data/a.ndjson::gate::size", "tests/test_x.py::test_a"]
    keys = chunk_keys(nodeids, 2, row_predicate(["*.ndjson"]))
    assert [keys[r] for r in rows] == [
        "data/a.ndjson::chunk-0",
        "data/a.ndjson::chunk-0",
        "data/a.ndjson::chunk-1",
        "data/a.ndjson::chunk-1",
        "data/a.ndjson::chunk-2",
    ]
    # Gates and python tests are their own scope.
    assert keys["data/a.ndjson::gate::size"] == "data/a.ndjson::gate::size"
    assert keys["tests/test_x.py::test_a"] == "tests/test_x.py::test_a"


def test_rows_of_a_file_outside_the_rootdir_are_still_rows() -> None:
    nodeids = ["::q0", "::q1", "::gate::size", "::q2"]
    keys = chunk_keys(nodeids, 2, is_jsonl_row)
    assert keys == {
        "::q0": "::chunk-0",
        "::q1": "::chunk-0",
        "::gate::size": "::gate::size",
        "::q2": "::chunk-1",
    }


def test_the_predicate_alone_decides_what_is_a_row() -> None:
    # What collection knew (the evaluator passes `nodeid in its rows`), not the shape of the node id.
    collected = {"x.txt::1", "x.txt::2"}
    keys = chunk_keys(["x.txt::1", "x.txt::2", "a.jsonl::1"], 2, collected.__contains__)
    assert keys == {"x.txt::1": "x.txt::chunk-0", "x.txt::2": "x.txt::chunk-0", "a.jsonl::1": "a.jsonl::1"}


def test_rows_of_one_file_are_grouped_size_at_a_time() -> None:
    rows = [f"a.jsonl::q{i}" for i in range(5)]
    assert chunk_keys(rows, 2, is_jsonl_row) == {
        "a.jsonl::q0": "a.jsonl::chunk-0",
        "a.jsonl::q1": "a.jsonl::chunk-0",
        "a.jsonl::q2": "a.jsonl::chunk-1",
        "a.jsonl::q3": "a.jsonl::chunk-1",
        "a.jsonl::q4": "a.jsonl::chunk-2",
    }


def test_size_one_gives_one_chunk_per_row() -> None:
    rows = [f"a.jsonl::q{i}" for i in range(3)]
    assert [chunk_keys(rows, 1, is_jsonl_row)[r] for r in rows] == [
        "a.jsonl::chunk-0",
        "a.jsonl::chunk-1",
        "a.jsonl::chunk-2",
    ]


def test_size_larger_than_the_file_gives_one_chunk() -> None:
    rows = [f"a.jsonl::q{i}" for i in range(3)]
    assert set(chunk_keys(rows, 16, is_jsonl_row).values()) == {"a.jsonl::chunk-0"}


def test_chunks_follow_collection_order_not_id_order() -> None:
    rows = ["a.jsonl::z", "a.jsonl::a", "a.jsonl::m"]
    keys = chunk_keys(rows, 2, is_jsonl_row)
    assert [keys[r] for r in rows] == ["a.jsonl::chunk-0", "a.jsonl::chunk-0", "a.jsonl::chunk-1"]


def test_interleaved_files_are_counted_independently() -> None:
    nodeids = [
        "a.jsonl::1",
        "b/b.jsonl::1",
        "a.jsonl::2",
        "b/b.jsonl::2",
        "a.jsonl::3",
        "b/b.jsonl::3",
        "a.jsonl::4",
    ]
    keys = chunk_keys(nodeids, 2, is_jsonl_row)
    assert [keys[n] for n in nodeids] == [
        "a.jsonl::chunk-0",
        "b/b.jsonl::chunk-0",
        "a.jsonl::chunk-0",
        "b/b.jsonl::chunk-0",
        "a.jsonl::chunk-1",
        "b/b.jsonl::chunk-1",
        "a.jsonl::chunk-1",
    ]


def test_same_name_in_different_directories_are_different_files() -> None:
    keys = chunk_keys(["x/a.jsonl::1", "y/a.jsonl::1"], 2, is_jsonl_row)
    assert keys == {"x/a.jsonl::1": "x/a.jsonl::chunk-0", "y/a.jsonl::1": "y/a.jsonl::chunk-0"}


def test_non_row_nodeids_map_to_themselves_and_take_no_place() -> None:
    nodeids = [
        "a.jsonl::1",
        "tests/test_x.py::test_a",
        "benchmarks/a.jsonl::gate::size",
        "a.jsonl::2",
        "a.jsonl::3",
    ]
    keys = chunk_keys(nodeids, 2, is_jsonl_row)
    assert keys == {
        "a.jsonl::1": "a.jsonl::chunk-0",
        "tests/test_x.py::test_a": "tests/test_x.py::test_a",
        "benchmarks/a.jsonl::gate::size": "benchmarks/a.jsonl::gate::size",
        "a.jsonl::2": "a.jsonl::chunk-0",
        "a.jsonl::3": "a.jsonl::chunk-1",
    }


def test_no_nodeids() -> None:
    assert chunk_keys([], 4, is_jsonl_row) == {}


# ---------------------------------------------------------------------------------------------------------
# property: chunks are at most `size` rows of one file; concatenated per file they give the file's rows back

_FILES = ["a.jsonl", "b.jsonl", "sub/c.jsonl"]
_NON_ROWS = [
    "tests/test_x.py::test_a",
    "tests/test_x.py::TestA::test_b",
    "a.jsonl::gate::size",
    "b.jsonl::gate::x",
]


@st.composite
def _collections(draw: st.DrawFn) -> list[str]:
    ids = st.builds(str.__add__, st.sampled_from("aZ09"), st.text("aZ09._+-", max_size=5))
    rows = st.builds("{}::{}".format, st.sampled_from(_FILES), ids)
    return draw(st.lists(rows | st.sampled_from(_NON_ROWS), max_size=40, unique=True))


@settings(max_examples=100, deadline=None)
@given(nodeids=_collections(), size=st.integers(1, 6))
def test_property_chunks(nodeids: list[str], size: int) -> None:
    keys = chunk_keys(nodeids, size, is_jsonl_row)
    assert set(keys) == set(nodeids)

    chunks: dict[str, list[str]] = {}
    for n in nodeids:
        if n not in _NON_ROWS:  # drawn as a row: the oracle does not ask the predicate under test
            chunks.setdefault(keys[n], []).append(n)
        else:
            assert keys[n] == n

    for key, members in chunks.items():
        file = key.split("::")[0]
        assert key.split("::")[1].startswith("chunk-")
        assert 1 <= len(members) <= size
        assert all(m.split("::")[0] == file for m in members)

    for file in _FILES:
        file_rows = [n for n in nodeids if n not in _NON_ROWS and n.split("::")[0] == file]
        n_chunks = -(-len(file_rows) // size)  # ceiling division
        in_order = [chunks[f"{file}::chunk-{i}"] for i in range(n_chunks)]
        assert [n for chunk in in_order for n in chunk] == file_rows
        # Every chunk but the last is full.
        assert all(len(chunk) == size for chunk in in_order[:-1])
        assert sum(1 for k in chunks if k.split("::")[0] == file) == n_chunks


@settings(max_examples=50, deadline=None)
@given(nodeids=_collections(), size=st.integers(1, 6))
def test_property_a_files_chunks_do_not_depend_on_other_files(nodeids: list[str], size: int) -> None:
    keys = chunk_keys(nodeids, size, is_jsonl_row)
    for file in _FILES:
        alone = [n for n in nodeids if n.split("::")[0] == file]
        alone_keys = chunk_keys(alone, size, is_jsonl_row)
        assert all(alone_keys[n] == keys[n] for n in alone)
