"""Races between the collections' paths (docs/protocol.md, "Distributed collections"): a task's
operations taking different ways to the head (its thread's own, its worker's), and a node the
client gave up on while its connections stay open. Real workers on loopback, real signals."""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Dict, Iterator, Tuple

import pytest

from test_collection_epochs import answer_of, holder_of_copy, pool_of, send_op, value
from worker_client import Client, WorkerProcess, stop_process

Pool = Tuple[Dict[int, WorkerProcess], Dict[int, Client], Dict[str, Any]]


@pytest.fixture
def two() -> Iterator[Pool]:
    yield from pool_of(2)


@pytest.mark.parametrize("node", [0, 1])
def test_a_strong_read_after_eventual_writes_of_the_same_task_sees_them(two: Pool, node: int) -> None:
    """The eventual increments go the subtask way (the task's worker, then the link), the strong
    read on the task thread's own way (applied on the head's thread, or its own connection): the
    read must still come after the writes the task made before it."""
    _workers, clients, _authority = two
    holder_of_copy(clients, (1,))
    clients[node].submit("ordered", "collection_race_tasks:eventual_then_strong", f"ordered-{node}", 200)
    result = clients[node].terminal("ordered", timeout=60)
    assert result["t"] == "result", result
    assert result["value"] == 200, f"the strong read overtook {200 - result['value']} of the task's own writes"


def test_a_node_the_client_declared_lost_holds_no_lock(two: Pool) -> None:
    """A task on node 1 holds a lock; node 1 stops (SIGSTOP: its connections stay open, as with a
    host cut off or powered off) and the client gives its verdict (``$lost``, as the pool does when
    it loses a node, whose tasks it runs again elsewhere). The lost node's tasks hold nothing any
    more: the lock is free to the next caller, as after a promotion."""
    workers, clients, _authority = two
    holder_of_copy(clients, (1,))
    clients[1].submit("holder", "collection_wire_tasks:hold_lock_and_wait", "l")
    deadline = time.monotonic() + 20
    while not value(clients[0], "lock", "l", "locked"):
        assert time.monotonic() < deadline, "the task on node 1 did not take the lock"
        time.sleep(0.05)
    stop_process(workers[1].process.pid)
    try:
        assert value(clients[0], "$lost", 1) is None
        answer = answer_of(clients[0], send_op(clients[0], "lock", "l", "acquire", 5), timeout=30)
        assert answer["ok"] is True, answer
        assert answer["value"] is True, "the lost node's task still holds the lock"
    finally:
        workers[1].process.send_signal(signal.SIGCONT)


def test_a_task_waiting_on_a_stopped_head_is_answered_once_its_copy_is_promoted(two: Pool, tmp_path: Any) -> None:
    """A task on node 1 waits for the head's answer on its thread's own connection; the head stops
    (SIGSTOP: no FIN, as with a host cut off or powered off) and the client promotes node 1's copy.
    The operation under way fails naming the lost connection (docs/protocol.md) instead of waiting
    on the old head for ever."""
    workers, clients, _authority = two
    holder_of_copy(clients, (1,))
    go, sending = tmp_path / "go", tmp_path / "sending"
    clients[1].submit("waiting", "collection_race_tasks:increment_twice", "c", str(go), str(sending))
    deadline = time.monotonic() + 20
    while value(clients[0], "counter", "c", "value") != 1:
        assert time.monotonic() < deadline, "the task on node 1 did not increment"
        time.sleep(0.05)
    stop_process(workers[0].process.pid)
    try:
        go.touch()
        while not os.path.exists(sending):
            assert time.monotonic() < deadline + 20, "the task did not go on"
            time.sleep(0.02)
        assert value(clients[1], "$replica", 1) is not None
        assert value(clients[1], "$promote", 0, 1)["epoch"] == 1
        # Under the worker's 30 s without word from its client (this one does not answer pings).
        result = clients[1].terminal("waiting", timeout=25)
        assert result["t"] == "result", result
        assert result["value"][0] == "error" and "connection" in result["value"][2], result
    finally:
        workers[0].process.send_signal(signal.SIGCONT)



@pytest.mark.parametrize("node", [0, 1])
def test_a_task_that_ended_takes_no_lock(two: Pool, node: int, tmp_path: Any) -> None:
    """A cancelled task's thread catches the interrupt and acquires a lock after its end was sent
    (its locks let go then): nobody would ever release one it got, so it is refused, on the head's
    thread as on another node's own connection."""
    _workers, clients, _authority = two
    holder_of_copy(clients, (1,))
    ready, out = tmp_path / "ready", tmp_path / "out"
    clients[node].submit("late", "collection_race_tasks:acquire_after_cancel", "l", str(ready), str(out))
    deadline = time.monotonic() + 20
    while not ready.exists():
        assert time.monotonic() < deadline, "the task did not start"
        time.sleep(0.02)
    clients[node].send({"t": "cancel", "id": "late"})
    assert clients[node].terminal("late", timeout=20)["t"] == "error"
    while not out.exists():
        assert time.monotonic() < deadline + 20, "the task's thread did not go on"
        time.sleep(0.02)
    got = out.read_text()
    assert got.startswith("SubtaskError: CancelledError") and f"its task {node}/late ended" in got, got
    assert value(clients[0], "lock", "l", "locked") is False


def test_an_operation_arriving_after_its_task_ended_is_refused() -> None:
    """The end of a task and its thread's last operation come on different connections (the
    worker's link, the thread's own): the head may get the end first. The lock is not taken for a
    task that ended, and another task's is still granted."""
    import asyncio

    from skyward.collection_store import CollectionStore

    store = CollectionStore(asyncio.new_event_loop())
    answers: list = []
    with store.lock:
        store.owner_ended("1/t7")
        store.apply("1/t7", ["lock", "l", "acquire"], answers.append)
        store.apply("1/t8", ["lock", "l", "acquire"], answers.append)
    assert answers[0] == ("error", "CancelledError", "its task 1/t7 ended")
    assert answers[1] == ("value", True)
    assert store.locks["l"].holder == "1/t8"
