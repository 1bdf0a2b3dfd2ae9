"""Nested dispatch on real workers: the test client plays the TypeScript client's part, running
each ``subtask`` as a nested task (on the same worker or another) and answering with
``subresult``/``suberror``. A worker runs subtasks on its own node while it has nested slots free
(``SKYWARD_NESTED_LOCAL_SLOTS``, default its concurrency); the tests of the client's part set it to 0,
those of the local part (at the end) leave it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import PYTHON_ROOT, Client, NestedRelay, WorkerProcess, connect  # noqa: E402

from skyward import dispatch  # noqa: E402

EXECUTORS = ["thread", "process"]
#: every subtask through the client
VIA_CLIENT = {"SKYWARD_NESTED_LOCAL_SLOTS": "0"}


@pytest.fixture(scope="module", params=EXECUTORS)
def single_slot_worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    """Concurrency 1: a parent waiting on its subtasks holds the only regular slot."""
    with WorkerProcess("--executor", request.param, "--concurrency", "1", env=VIA_CLIENT) as worker:
        yield worker


@pytest.fixture()
def relay(single_slot_worker: WorkerProcess) -> Iterator[NestedRelay]:
    client = connect(single_slot_worker)
    yield NestedRelay([client])
    client.close()


def test_round_trip_on_the_nested_pool(relay: NestedRelay, single_slot_worker: WorkerProcess) -> None:
    client = relay.clients[0]
    assert relay.value(client, "dispatch_tasks:fan_out", 5) == [0, 1, 4, 9, 16]
    assert [(m["id"], m["sub"], m["fn"], m["args"], m["kwargs"], m["node"]) for m in relay.subtasks] == [
        (relay.subtasks[0]["id"], i, "dispatch_tasks:square", [i], {}, None) for i in range(5)
    ]


def test_nested_tasks_do_not_take_the_parents_slots(relay: NestedRelay, single_slot_worker: WorkerProcess) -> None:
    client = relay.clients[0]
    report = relay.value(client, "dispatch_tasks:fan_out_where", 3)
    parent, children = report["parent"], report["children"]
    if client.welcome["executor"] == "thread":  # type: ignore[attr-defined]
        assert parent["thread"] == "skyward-slot-0"
        assert {child["thread"] for child in children} == {"skyward-nested-slot-0"}
        assert {child["pid"] for child in children} == {parent["pid"]}
    else:
        assert len({child["pid"] for child in children}) == 1
        assert children[0]["pid"] not in (parent["pid"], single_slot_worker.process.pid)


def test_subtask_errors_reach_the_parent(relay: NestedRelay) -> None:
    client = relay.clients[0]
    error = relay.value(client, "dispatch_tasks:failing", "demo_tasks:boom", "kaput")
    assert (error["kind"], error["type"], error["message"], error["node"]) == ("exception", "ValueError", "kaput", 0)
    assert "raise ValueError(message)" in error["traceback"]
    assert error["text"] == "ValueError: kaput (node 0)"
    # the nested task ran on the nested pool, whose slots come after the regular one
    assert client.by_id[relay.nested_ids[-1]][-1]["worker"] == 1
    missing = relay.value(client, "dispatch_tasks:failing", "demo_tasks:no_such_function")
    assert (missing["kind"], missing["type"]) == ("not_found", "AttributeError")


def test_submit_from_a_thread_the_task_started(relay: NestedRelay) -> None:
    assert relay.value(relay.clients[0], "dispatch_tasks:from_thread", 3) == [0, 1, 4]


def test_done_callbacks_can_submit_more(relay: NestedRelay) -> None:
    assert relay.value(relay.clients[0], "dispatch_tasks:chained", 4) == [0, 1, 4, 9]


def test_unsendable_argument_fails_in_the_caller(relay: NestedRelay) -> None:
    assert relay.value(relay.clients[0], "dispatch_tasks:unsendable_argument").startswith(
        "args[0]: cannot send a value of type _thread.lock: "
    )
    assert relay.subtasks == []


def test_capacity_is_nodes_times_concurrency() -> None:
    for executor in EXECUTORS:
        with WorkerProcess("--executor", executor, "--concurrency", "3", env=VIA_CLIENT) as worker:
            client = connect(worker, node=1, total_nodes=2)
            assert client.value("dispatch_tasks:pool_capacity") == 6


def test_dispatch_to_another_node() -> None:
    with WorkerProcess("--executor", "thread") as first, WorkerProcess("--executor", "process") as second:
        clients = [connect(first, node=0, total_nodes=2), connect(second, node=1, total_nodes=2)]
        relay = NestedRelay(clients)
        assert relay.value(clients[0], "dispatch_tasks:on_node", 1)["node"] == 1
        assert relay.value(clients[1], "dispatch_tasks:on_node", 0)["node"] == 0
        assert relay.value(clients[0], "dispatch_tasks:on_node", 0)["node"] == 0
        # A subtask for another node goes through the client; one for its own node runs there.
        assert [m["node"] for m in relay.subtasks] == [1, 0]
        refused = clients[0].call("dispatch_tasks:on_node", 2)
        assert refused["type"] == "ValueError" and "node index 0..1" in refused["message"]


def test_cancelling_the_parent_cancels_its_pending_futures(tmp_path: Path) -> None:
    marker = tmp_path / "outcome"
    with WorkerProcess("--executor", "thread", env=VIA_CLIENT) as worker:
        client = connect(worker)
        relay = NestedRelay([client], hold=True)
        client.submit("parent", "dispatch_tasks:wait_for_one", str(marker))
        relay.wait_for(client, lambda m: m["t"] == "subtask")
        client.send({"t": "cancel", "id": "parent"})
        assert relay.terminal(client, "parent")["kind"] == "cancelled"
        # The stopped parent's thread is released, not left waiting on its future: it is
        # interrupted (or, woken by the cancelled future first, it returns) and exits.
        deadline = time.monotonic() + 10
        while client.value("interrupt_tasks:slot_threads") != ["skyward-slot-0"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.1)  # a write begun before the interrupt finishes
        assert not marker.exists() or marker.read_text() in ("", "cancelled")
        # a late answer for the cancelled parent is ignored
        client.send({"t": "subresult", "id": "parent", "sub": 0, "value": 9})
        assert client.value("demo_tasks:add", 1, 1) == 2


@pytest.mark.parametrize("executor", EXECUTORS)
def test_cancelling_a_future_stops_its_subtask_at_the_client(executor: str) -> None:
    with WorkerProcess("--executor", executor, env=VIA_CLIENT) as worker:
        client = connect(worker)
        relay = NestedRelay([client])
        # The 60 s subtask would hold the node's only nested slot, and the next would time out.
        assert relay.value(client, "dispatch_tasks:cancel_then_submit", 60.0) == 9
        assert [(parent, sub) for parent, sub in relay.cancelled] == [(relay.subtasks[0]["id"], 0)]


def test_a_parent_that_ends_cancels_what_it_left_pending() -> None:
    with WorkerProcess("--executor", "thread", env=VIA_CLIENT) as worker:
        client = connect(worker)
        relay = NestedRelay([client], hold=True)
        assert relay.value(client, "dispatch_tasks:leave_pending") == "left"
        assert client.value("dispatch_tasks:left_state") == {"cancelled": True}


@pytest.mark.parametrize("executor", EXECUTORS)
def test_losing_the_connection_fails_pending_subtasks(tmp_path: Path, executor: str) -> None:
    marker = tmp_path / "outcome"
    with WorkerProcess("--executor", executor, env=VIA_CLIENT) as worker:
        client = connect(worker)
        relay = NestedRelay([client], hold=True)
        client.submit("parent", "dispatch_tasks:wait_for_one", str(marker))
        relay.wait_for(client, lambda m: m["t"] == "subtask")
        client.close()
        again = Client(worker.port)
        welcome = again.hello()
        assert "parent" in welcome["running"] + welcome["results"]
        if "parent" in welcome["results"]:
            again.send({"t": "collect", "ids": ["parent"]})
        assert again.terminal("parent")["value"] == "cancelled: the connection to the client was lost"


def test_outside_a_task_submit_and_capacity_refuse() -> None:
    with pytest.raises(RuntimeError, match=r"skyward\.dispatch\.submit\(\)"):
        dispatch.submit("dispatch_tasks:square", args=[2])
    script = (
        "from skyward import dispatch\n"
        "for call in (lambda: dispatch.submit('m:f'), dispatch.capacity):\n"
        "    try:\n        call()\n    except RuntimeError as error:\n        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(PYTHON_ROOT)},
                          capture_output=True, text=True, timeout=20)
    assert done.stdout.splitlines() == [
        "skyward.dispatch.submit() is only available inside a task running on a Skyward worker",
        "skyward.dispatch.capacity() is only available on a Skyward worker",
    ], done.stderr
    error = dispatch.SubtaskError("exception", "ValueError", "bad", "Traceback…", 3)
    assert (str(error), error.kind, error.type, error.message, error.node) == (
        "ValueError: bad (node 3)", "exception", "ValueError", "bad", 3,
    )


# -- subtasks on the parent's own node ----------------------------------------------------------


@pytest.fixture(scope="module", params=EXECUTORS)
def two_slot_worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    """Concurrency 2: two nested slots a parent fills itself before it asks the client."""
    with WorkerProcess("--executor", request.param, "--concurrency", "2") as worker:
        yield worker


def test_subtasks_run_on_the_parents_node_without_the_client(two_slot_worker: WorkerProcess) -> None:
    client = connect(two_slot_worker)
    try:
        # The client answers no subtask: each must run here, on the nested pool.
        relay = NestedRelay([client], hold=True)
        assert relay.value(client, "dispatch_tasks:one_by_one", 4) == [0, 1, 4, 9]
        report = relay.value(client, "dispatch_tasks:fan_out_where", 2)
        if client.welcome["executor"] == "thread":  # type: ignore[attr-defined]
            assert {child["thread"] for child in report["children"]} <= {"skyward-nested-slot-0", "skyward-nested-slot-1"}
        error = relay.value(client, "dispatch_tasks:failing", "demo_tasks:boom", "kaput")
        assert (error["kind"], error["type"], error["message"], error["node"]) == ("exception", "ValueError", "kaput", 0)
        assert "raise ValueError(message)" in error["traceback"]
        assert relay.subtasks == []
        # Objects travel as they would through the client (pickled, then unpickled in the task).
        assert relay.value(client, "dispatch_tasks:fan_out", 2) == [0, 1]
    finally:
        client.close()


def test_with_no_other_node_subtasks_wait_for_the_nodes_own_slots(two_slot_worker: WorkerProcess) -> None:
    client = connect(two_slot_worker)
    try:
        relay = NestedRelay([client], hold=True)
        assert relay.value(client, "dispatch_tasks:slow_first", 5) == [0, 1, 4, 9, 16]
        assert relay.subtasks == []
    finally:
        client.close()


@contextlib.contextmanager
def two_nodes(executor: str, concurrency: int) -> Iterator[NestedRelay]:
    """Two workers as nodes 0 and 1 of a pool, each running subtasks on its own node while it can,
    and the test client relaying the rest (``relay.clients[i]`` is node i's)."""
    with WorkerProcess("--executor", executor, "--concurrency", str(concurrency)) as first, \
            WorkerProcess("--executor", executor, "--concurrency", str(concurrency)) as second:
        clients = [connect(first, node=0, total_nodes=2), connect(second, node=1, total_nodes=2)]
        try:
            yield NestedRelay(clients)
        finally:
            for client in clients:
                client.close()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_subtasks_beyond_the_free_nested_slots_go_through_the_client(executor: str) -> None:
    with two_nodes(executor, 2) as relay:
        clients = relay.clients
        assert relay.value(clients[0], "dispatch_tasks:slow_first", 6, 2) == [0, 1, 4, 9, 16, 25]
        # The two slow ones took node 0's two slots; the next two went to the client (as many as
        # the other node has nested slots); the rest waited for a slot here or there.
        subs = [m["sub"] for m in relay.subtasks]
        assert subs[:2] == [2, 3] and set(subs) <= {2, 3, 4, 5}
        relay.subtasks.clear()
        # Run here, a subtask's own subtasks that do not fit go as the root task's, under aliases.
        assert relay.value(clients[0], "dispatch_tasks:slow_first_nested", 3) == [0, 1, 4]
        assert len(relay.subtasks) == 2 and all(m["sub"] >= 1 << 40 for m in relay.subtasks)
        assert {m["id"] for m in relay.subtasks} == {relay.subtasks[0]["id"]}


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_subtask_for_its_own_node_sent_through_the_client_keeps_its_node(executor: str) -> None:
    # Concurrency 1: the slow subtask fills node 1's one nested slot, so the next, asked for node 1,
    # goes through the client. Before, it went without its node and the client ran it on node 0.
    with two_nodes(executor, 1) as relay:
        assert relay.value(relay.clients[1], "dispatch_tasks:slow_then_own_node") == {"own": 1, "ran_on": 1, "slow": 4}
        assert [m["node"] for m in relay.subtasks] == [1]


def test_a_parent_that_ends_cancels_the_subtasks_it_runs_on_its_node(two_slot_worker: WorkerProcess) -> None:
    client = connect(two_slot_worker)
    try:
        relay = NestedRelay([client], hold=True)
        assert relay.value(client, "dispatch_tasks:leave_running") == "left"
        # Its 60 s subtask was cancelled: both nested slots are free for the next parent, which the
        # client (answering nothing) could not serve otherwise.
        assert relay.value(client, "dispatch_tasks:slow_first", 2) == [0, 1]
        assert relay.subtasks == []
    finally:
        client.close()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_cancelling_a_future_stops_its_subtask_on_the_node(executor: str) -> None:
    with WorkerProcess("--executor", executor) as worker:
        client = connect(worker)
        try:
            relay = NestedRelay([client], hold=True)
            # One nested slot, held by the 60 s subtask until it is cancelled; the client answers nothing.
            assert relay.value(client, "dispatch_tasks:cancel_then_submit", 60.0) == 9
            assert relay.subtasks == [] and relay.cancelled == []
        finally:
            client.close()
