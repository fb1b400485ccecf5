"""The xdist chunk scheduler, driven directly with fake worker nodes as pytest-xdist's own
testing/test_dsession.py drives its schedulers; and one -n 2 run on an empty generation cache."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, row

BATCH = 3


class MockGateway:
    def __init__(self, gateway_id: str) -> None:
        self.id = gateway_id


class MockNode:
    """What a scheduler touches of an xdist WorkerController: its id, the work sent to it, shutdown."""

    def __init__(self, gateway_id: str) -> None:
        self.gateway = MockGateway(gateway_id)
        self.sent: list[list[int]] = []  # collection indices, one list per send_runtest_some call
        self._shutdown = False
        self.dead = False  # killed: its channel is closed, as execnet reports on a send

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        if self.dead:
            raise OSError("cannot send (already closed?)")  # execnet's gateway_base.Gateway._send
        self.sent.append(list(indices))

    def send_runtest_all(self) -> None:
        raise AssertionError("a load scheduler sends indices, never the whole collection")

    def shutdown(self) -> None:
        self._shutdown = True

    @property
    def shutting_down(self) -> bool:
        return self._shutdown

    def indices(self) -> list[int]:
        return [i for call in self.sent for i in call]


def scheduler(pytester: pytest.Pytester, *extra: str) -> Any:
    """The scheduler xdist's controller would use, made through the real hook on a real config."""
    from xdist.remote import Producer

    # `-n 2` becomes these two in xdist's pytest_cmdline_main, which parseconfigure does not run.
    config = pytester.parseconfigure("--dist=load", "--tx=2*popen", f"--llmeval-batch-size={BATCH}", *extra)
    return config.hook.pytest_xdist_make_scheduler(config=config, log=Producer("test", enabled=False))


def start(sched: Any, collection: list[str], workers: int = 2) -> list[MockNode]:
    """Nodes gw0, gw1, ... that all collected `collection`, and the initial distribution."""
    nodes = [MockNode(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    sched.schedule()
    return nodes


def finish(sched: Any, node: MockNode, done: dict[str, int]) -> None:
    """`node` finishes the next item it was sent; `done` counts each node's finished items."""
    index = node.indices()[done[node.gateway.id]]
    done[node.gateway.id] += 1
    sched.mark_test_complete(node, index)


def run(sched: Any, nodes: list[MockNode], done: dict[str, int]) -> None:
    """The nodes finish their items in turns, one item each per turn, until none has any left."""
    progress = True
    while progress:
        progress = False
        for node in nodes:
            if done[node.gateway.id] < len(node.indices()):
                finish(sched, node, done)
                progress = True


def ran(nodes: list[MockNode], collection: list[str]) -> dict[str, list[list[str]]]:
    """Worker id -> the node ids sent to it, call by call."""
    return {node.gateway.id: [[collection[i] for i in call] for call in node.sent] for node in nodes}


def rows(file: str, ids: str) -> list[str]:
    return [f"{file}::{i}" for i in ids.split()]


# Rows of two files (7 and 4 rows: chunks of 3, 3, 1 and of 3, 1), two plain tests, and the gates (last,
# as hooks/collection.py orders them).
A = rows("a.jsonl", "r0 r1 r2 r3 r4 r5 r6")
B = rows("sub/b.jsonl", "s0 s1 s2 s3")
PLAIN = ["test_x.py::test_one", "test_x.py::test_two"]
GATES = ["a.jsonl::gate::better_than_base", "a.jsonl::gate::size", "sub/b.jsonl::gate::no_degradation"]
COLLECTION = [*A, *B, *PLAIN, *GATES]
CHUNKS = [A[0:3], A[3:6], A[6:], B[0:3], B[3:]]


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    # Without an ini file, pytester's --basetemp argument would make the rootdir the parent folder.
    pytester.makeini("[pytest]\n")


def test_the_hook_replaces_the_load_scheduler_only(pytester: pytest.Pytester) -> None:
    from xdist.scheduler import LoadFileScheduling, LoadScopeScheduling

    sched = scheduler(pytester)
    assert type(sched).__name__ == "ChunkScheduling" and isinstance(sched, LoadScopeScheduling)
    # A --dist the user chose is respected.
    assert type(scheduler(pytester, "--dist=loadfile")) is LoadFileScheduling


def test_the_xdist_internals_the_scheduler_relies_on_are_there() -> None:
    """ChunkScheduling overrides LoadScope's private `_reschedule` and `_assign_work_unit` (and its public
    `remove_node`) and reads its `workqueue`, `assigned_work` and `registered_collections`: pyproject caps
    pytest-xdist below 4 for this, and `make test-xdist-oldest` runs these tests on 3.5, the oldest allowed.
    A release that renamed any of them fails here, by name, rather than scheduling rows wrongly."""
    import inspect

    from xdist.scheduler import LoadScopeScheduling

    for name, parameters in {
        "_split_scope": ["self", "nodeid"],
        "_reschedule": ["self", "node"],
        "_assign_work_unit": ["self", "node"],
        "remove_node": ["self", "node"],
    }.items():
        assert list(inspect.signature(getattr(LoadScopeScheduling, name)).parameters) == parameters, name
    init = inspect.getsource(LoadScopeScheduling.__init__)
    for attribute in ("self.workqueue", "self.assigned_work", "self.registered_collections"):
        assert attribute in init, attribute


def test_a_scope_is_a_chunk_of_one_file_and_anything_else_is_alone(pytester: pytest.Pytester) -> None:
    sched = scheduler(pytester)
    start(sched, COLLECTION)
    scopes: dict[str, list[str]] = {}
    for nodeid in COLLECTION:
        scopes.setdefault(sched._split_scope(nodeid), []).append(nodeid)
    # Batch-size consecutive rows of one file, in collection order; the rest are scopes of their own (not
    # grouped by module, as LoadScope would group test_x.py's tests, nor the gates by file).
    assert list(scopes.values()) == [*CHUNKS, *([n] for n in PLAIN + GATES)]
    assert list(scopes)[:5] == [
        "a.jsonl::chunk-0",
        "a.jsonl::chunk-1",
        "a.jsonl::chunk-2",
        "sub/b.jsonl::chunk-0",
        "sub/b.jsonl::chunk-1",
    ]


def test_which_node_runs_which_rows(pytester: pytest.Pytester) -> None:
    sched = scheduler(pytester)
    nodes = start(sched, COLLECTION)
    # Each worker starts with one whole chunk: 3 rows, above LoadScope's low-water mark of 2 pending items.
    assert ran(nodes, COLLECTION) == {"gw0": [A[0:3]], "gw1": [A[3:6]]}
    done = {"gw0": 0, "gw1": 0}
    run(sched, nodes, done)
    # Then a worker down to 2 pending items gets the next scope. The queue is ordered by scope size
    # (xdist's --loadscopereorder, on by default), so full chunks go first, then the last partial
    # chunks, the plain tests and the gates in collection order: every row is sent before any gate.
    assert ran(nodes, COLLECTION) == {
        "gw0": [A[0:3], B[0:3], [PLAIN[1]], [GATES[1]]],
        "gw1": [A[3:6], A[6:], B[3:], [PLAIN[0]], [GATES[0]], [GATES[2]]],
    }
    sent = sorted(i for node in nodes for i in node.indices())
    assert sent == list(range(len(COLLECTION)))  # every item once
    assert sched.tests_finished  # xdist's DSession then shuts down every worker
    # A node that ends with nothing pending did not crash.
    assert [sched.remove_node(node) for node in nodes] == [None, None]


@pytest.mark.parametrize(
    ("ini", "file"),
    [("", "bench.jsonl"), ("llmeval_files = *.ndjson\n", "bench.ndjson")],
    ids=["jsonl", "ndjson"],
)
def test_rows_are_known_by_the_llmeval_files_rule(pytester: pytest.Pytester, ini: str, file: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}")
    bench = rows(file, "q0 q1 q2 q3 q4 q5 q6 q7")
    collection = [*bench, f"{file}::gate::size"]
    sched = scheduler(pytester)
    nodes = start(sched, collection)
    run(sched, nodes, {"gw0": 0, "gw1": 0})
    assert ran(nodes, collection) == {
        "gw0": [bench[0:3], bench[6:]],
        "gw1": [bench[3:6], [collection[-1]]],
    }


def test_a_file_outside_llmeval_files_is_not_chunked(pytester: pytest.Pytester) -> None:
    # The default ini collects *.jsonl only: `x.ndjson::q0` is not a row, so it is no chunk's member.
    sched = scheduler(pytester)
    start(sched, rows("x.ndjson", "q0 q1 q2"))
    assert [sched._split_scope(n) for n in rows("x.ndjson", "q0 q1 q2")] == rows("x.ndjson", "q0 q1 q2")


def test_a_crashed_node_loses_its_row_and_the_rest_of_its_chunk_runs_elsewhere(
    pytester: pytest.Pytester,
) -> None:
    sched = scheduler(pytester)
    gw0, gw1 = nodes = start(sched, COLLECTION)
    done = {"gw0": 0, "gw1": 0}
    finish(sched, gw0, done)  # r0 done; gw0 is down to 2 pending rows and gets b.jsonl's first chunk
    assert ran(nodes, COLLECTION)["gw0"] == [A[0:3], B[0:3]]
    # gw0 dies running r1: the row it was running is reported as the crashed item ...
    assert sched.remove_node(gw0) == "a.jsonl::r1"
    run(sched, [gw1], done)
    # ... and never sent again, while the rest of its chunk (r2) and the chunk gw0 had not started
    # go to gw1, each in one piece.
    calls = ran(nodes, COLLECTION)["gw1"]
    assert ["a.jsonl::r2"] in calls and B[0:3] in calls
    on_gw1 = [n for call in calls for n in call]
    assert "a.jsonl::r1" not in on_gw1
    # Everything but the row gw0 finished and the row it died on ran on gw1, once.
    assert sorted(["a.jsonl::r0", "a.jsonl::r1", *on_gw1]) == sorted(COLLECTION)
    assert sched.tests_finished


def test_work_sent_to_a_node_that_just_died_goes_to_another(pytester: pytest.Pytester) -> None:
    # The race a worker killed mid-row can win: its report of the row before reaches the controller, which
    # sends it the next chunk before xdist has seen the worker go down. execnet then raises on the send.
    sched = scheduler(pytester)
    gw0, gw1 = nodes = start(sched, COLLECTION)
    done = {"gw0": 0, "gw1": 0}
    gw0.dead = True  # killed running r1, after its report of r0 went out
    finish(sched, gw0, done)  # r0's report: gw0 is down to 2 pending rows and would get a chunk
    assert ran(nodes, COLLECTION)["gw0"] == [A[0:3]] and gw0.shutting_down  # nothing more is sent to it
    assert sched.remove_node(gw0) == "a.jsonl::r1"  # xdist sees it go down: the row it died on
    run(sched, [gw1], done)
    on_gw1 = [n for call in ran(nodes, COLLECTION)["gw1"] for n in call]
    # The chunk that could not be sent, and the rest of gw0's, ran on gw1, once each.
    assert sorted(["a.jsonl::r0", "a.jsonl::r1", *on_gw1]) == sorted(COLLECTION)
    assert sched.tests_finished


def test_after_a_crash_the_rows_left_are_sent_before_any_gate(pytester: pytest.Pytester) -> None:
    sched = scheduler(pytester)
    gw0, gw1 = nodes = start(sched, COLLECTION)
    done = {"gw0": 0, "gw1": 0}
    finish(sched, gw0, done)
    sched.remove_node(gw0)
    run(sched, [gw1], done)
    after_crash = [n for call in ran(nodes, COLLECTION)["gw1"] for n in call]
    # A gate blocks its worker while it waits for its file's rows: none may be queued in front of them.
    assert max(after_crash.index(n) for n in ["a.jsonl::r2", *B[0:3]]) < after_crash.index(GATES[0])


# --- the plugin, under -n 2 ---------------------------------------------------------------------------


def test_under_xdist_every_chunk_is_generated_once(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path, tmp_path: Path
) -> None:
    # Generated twice, a chunk would show as misses above the row count (two workers generating it at
    # once) or as hits in the first run (the second worker finding what the first stored).
    for name in ("one", "two"):
        bench = [row(f"{name}{i}", instruction=f"Question {i} of {name}?" + " more" * i) for i in range(6)]
        pytester.makefile(".jsonl", **{name: jsonl(bench)})
    args = [
        f"--base-model={tiny_model}",
        f"--adapter={tiny_adapter}",
        f"--llmeval-cache-dir={tmp_path / 'cache'}",
        "--llmeval-batch-size=3",
        "-p",
        "no:cacheprovider",
        "-m",
        "not gate",
        "-n",
        "2",
    ]
    first = pytester.runpytest(*args)
    first.assert_outcomes(failed=12)
    cache = results(pytester)["inference_config"]["cache"]
    assert cache["misses"] == {"base": 12, "adapter": 12}
    assert cache["hits"] == {"base": 0, "adapter": 0}
    second = pytester.runpytest(*args)
    second.assert_outcomes(failed=12)
    cache = results(pytester)["inference_config"]["cache"]
    assert cache["misses"] == {"base": 0, "adapter": 0}
    assert cache["hits"] == {"base": 12, "adapter": 12}


def results(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    return data


# More gates than a worker takes at once, so the queue still holds some when a worker dies.
MANY_GATES = [f"{file}::gate::g{i}" for file in ("a.jsonl", "sub/b.jsonl") for i in range(8)]


def crash_once_gw0_holds_a_gate(
    pytester: pytest.Pytester,
) -> tuple[Any, list[str], MockNode, MockNode, dict[str, int]]:
    """A, B and MANY_GATES on gw0 and gw1; gw0 works until it holds a gate, then gw1 dies in its first row
    (the rest of its chunk goes back to the queue). The scheduler, the collection, gw0, gw1, done counts."""
    sched = scheduler(pytester)
    collection = [*A, *B, *MANY_GATES]
    gw0, gw1 = start(sched, collection)
    done = {"gw0": 0, "gw1": 0, "gw2": 0}
    while not any(collection[i] in MANY_GATES for i in gw0.indices()):
        finish(sched, gw0, done)
    assert sched.workqueue and done["gw1"] < len(gw1.indices())
    sched.remove_node(gw1)
    return sched, collection, gw0, gw1, done


def replacement(sched: Any, collection: list[str], name: str = "gw2") -> MockNode:
    """The worker xdist starts in place of a crashed one, once its collection is in."""
    node = MockNode(name)
    sched.add_node(node)
    sched.add_node_collection(node, collection)
    sched.schedule()
    return node


def test_rows_left_by_a_crash_go_to_the_replacement_worker_before_any_gate(pytester: pytest.Pytester) -> None:
    sched, collection, gw0, _gw1, done = crash_once_gw0_holds_a_gate(pytester)
    gw2 = replacement(sched, collection)
    # First the rows (a gate blocks its worker until its rows are in), then gates.
    assert [collection[i] for i in gw2.sent[0]] == ["a.jsonl::r4", "a.jsonl::r5"]
    run(sched, [gw0, gw2], done)
    assert sched.tests_finished


def test_rows_requeued_after_a_crash_never_go_behind_a_gate(pytester: pytest.Pytester) -> None:
    # Seen under load: gw1 died, its rows went back to the queue while gw0 already ran a gate, and gw0 got
    # them behind that gate: the gate waited for rows that waited for the gate (a hang until the stall limit).
    sched, collection, gw0, gw1, done = crash_once_gw0_holds_a_gate(pytester)
    gates = MANY_GATES
    rows_left = [n for n in sched.workqueue if n not in gates]
    assert rows_left  # rows wait in the queue while gw0 holds gates
    while done["gw0"] < len(gw0.indices()):
        sent, before = len(gw0.sent), len(gw0.indices())
        finish(sched, gw0, done)
        # A gate gw0 had been sent and not finished when the scheduler sent it more.
        holds_gate = any(collection[i] in gates for i in gw0.indices()[done["gw0"] : before])
        for call in gw0.sent[sent:]:
            behind_gate = holds_gate and any(collection[i] in [*A, *B] for i in call)
            assert not behind_gate, f"rows {[collection[i] for i in call]} sent behind a gate"
    gw2 = replacement(sched, collection)  # the rows are the replacement's
    run(sched, [gw0, gw2], done)
    assert sched.tests_finished
    ran_somewhere = {collection[i] for node in (gw0, gw1, gw2) for i in node.indices()}
    assert ran_somewhere == set(collection)


def test_a_lone_row_a_gate_waits_for_is_run_not_held(pytester: pytest.Pytester) -> None:
    # An xdist worker runs an item only once the next one (or a shutdown) arrives. A replacement worker
    # given the one row left of a crashed chunk, with the queue empty and gw0 blocked in a gate waiting
    # for that row, must be shut down (which runs the row), not kept idle holding it.
    sched = scheduler(pytester)
    collection = [*A, *GATES]
    gw0, gw1 = start(sched, collection)
    done = {"gw0": 0, "gw1": 0, "gw2": 0}
    while sched.workqueue:
        finish(sched, gw0, done)
    pending_gw1 = [collection[i] for i in gw1.indices()[done["gw1"] :]]
    assert len(pending_gw1) == 3 and all(n in A for n in pending_gw1)  # one chunk of 3 rows
    # gw0 holds gates: the 2 rows requeued after gw1 dies on the first of its 3 go to no one else.
    assert any(collection[i] in GATES for i in gw0.indices()[done["gw0"] :])
    finish(sched, gw1, done)  # gw1 finishes one row, then dies on the next: one row is left
    assert sched.remove_node(gw1) == pending_gw1[1]
    gw2 = replacement(sched, collection)
    assert [collection[i] for i in gw2.indices()] == [pending_gw1[2]]
    assert gw2.shutting_down  # its one row runs now
    assert not gw0.shutting_down


def test_no_worker_is_shut_down_while_another_still_has_work(pytester: pytest.Pytester) -> None:
    sched = scheduler(pytester)
    gw0, gw1 = start(sched, COLLECTION)
    done = {"gw0": 0, "gw1": 0}
    run(sched, [gw1], done)  # gw1 runs out of work; the queue is empty, gw0 still has rows
    assert not sched.workqueue and done["gw0"] < len(gw0.indices())
    assert not gw1.shutting_down  # kept: if gw0 dies, what it held comes back for gw1
    sent = len(gw1.sent)
    sched.remove_node(gw0)
    assert len(gw1.sent) > sent  # gw1 got back what gw0 held
    run(sched, [gw1], done)
    assert sched.tests_finished
    assert sorted(COLLECTION[i] for i in gw1.indices()) == sorted(
        n for n in COLLECTION if n not in [COLLECTION[i] for i in gw0.indices()[: done["gw0"] + 1]]
    )
