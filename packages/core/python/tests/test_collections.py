"""Distributed collections on real workers: the head (node 0) holds the store; its tasks reach it in
process, another node's tasks over the cluster network (``authority`` tells that node where), and the
client with ``coll`` messages on its connection to the head (docs/protocol.md, "Distributed
collections"). No operation reaches the client as a ``subtask`` any more. The semantics end to end
(through a pool) are in packages/core/test/collections.test.ts."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import PYTHON_ROOT, Client, WorkerProcess, connect  # noqa: E402

_ids = itertools.count(1)


def op(client: Client, owner: str, *request: Any, timeout: float = 20) -> Dict[str, Any]:
    """The client's own operation on the head (``coll``), and its ``coll_answer``."""
    request_id = next(_ids)
    client.send({"t": "coll", "id": request_id, "owner": owner, "op": list(request)})
    return client.wait_for(lambda m: m["t"] == "coll_answer" and m["id"] == request_id, timeout=timeout)


def value(client: Client, owner: str, *request: Any) -> Any:
    answer = op(client, owner, *request)
    assert answer["ok"] is True, answer
    return answer["value"]


@pytest.fixture(scope="module", params=["thread", "process"])
def worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", request.param, "--concurrency", "2") as running:
        yield running


def run(client: Client, fn: str, *args: Any) -> Any:
    task_id = f"t-{fn}-{next(_ids)}"
    client.submit(task_id, fn, *args)
    message = client.terminal(task_id, timeout=20)
    assert message["t"] == "result", message
    return message["value"]


def no_subtasks(client: Client) -> None:
    assert not [m for m in client.inbox if m["t"] == "subtask"], "a collection operation reached the client"


def test_the_heads_tasks_and_its_client_share_one_store(worker: WorkerProcess) -> None:
    client = connect(worker)
    value(client, "client", "counter", "hits", "reset", 0)
    assert run(client, "collection_wire_tasks:counter_ops") == [3, 2, 7, 7, 7]
    assert value(client, "client", "counter", "hits", "increment", 1) == 8
    assert run(client, "collection_wire_tasks:dict_ops") == {"get": None, "missing": "default", "in": True}
    assert value(client, "client", "dict", "d", "get", "k") == [True, None]
    no_subtasks(client)
    client.close()


def test_a_refusal_raises_the_named_exception(worker: WorkerProcess) -> None:
    client = connect(worker)
    request_id = next(_ids)
    # The client waits at barrier "b" for 3; a task asking for 2 is refused.
    client.send({"t": "coll", "id": request_id, "owner": "client:w", "op": ["barrier", "b", "wait", 3, None]})
    assert run(client, "collection_wire_tasks:refused") == (
        "ValueError: barrier 'b' is waiting for 3 callers; this caller asked for 2"
    )
    client.send({"t": "coll_cancel", "id": request_id, "owner": "client:w"})
    answer = client.wait_for(lambda m: m["t"] == "coll_answer" and m["id"] == request_id)
    assert (answer["ok"], answer["type"]) == (False, "CancelledError")
    client.close()


def test_a_lock_not_acquired_in_time_and_released_when_its_task_ends(worker: WorkerProcess) -> None:
    client = connect(worker)
    assert value(client, "client:a", "lock", "l", "acquire", 0) is True
    got, text = run(client, "collection_wire_tasks:lock_timeout")
    assert got is False and "not acquired within 0.5 s" in text
    value(client, "client:a", "lock", "l", "release")
    # A task that never releases: its end does.
    assert run(client, "collection_wire_tasks:hold_lock", "held") is True
    assert value(client, "client:a", "lock", "held", "acquire", 0) is True
    value(client, "client:a", "lock", "held", "release")
    client.close()


def test_a_blocked_get_waits_without_polling_until_a_put(worker: WorkerProcess) -> None:
    client = connect(worker)
    client.submit("getter", "collection_wire_tasks:queue_get", "q1", None)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        client._receive_once(0.05)
    assert not any(m.get("id") == "getter" and m["t"] in ("result", "error") for m in client.inbox)
    value(client, "client", "queue", "q1", "put", {"item": b"\x00\x01"})
    message = client.terminal("getter", timeout=20)
    assert (message["t"], message["value"]) == ("result", {"item": b"\x00\x01"})
    no_subtasks(client)
    client.close()


def test_a_lost_client_connection_releases_its_handles_locks(worker: WorkerProcess) -> None:
    first = connect(worker)
    assert value(first, "client:gone", "lock", "lost", "acquire", 0) is True
    first.close()
    second = connect(worker)
    deadline = time.monotonic() + 20
    while not value(second, "client:next", "lock", "lost", "acquire", 0):
        assert time.monotonic() < deadline, "the lost client's lock was never released"
        time.sleep(0.05)
    value(second, "client:next", "lock", "lost", "release")
    second.close()


def test_the_collections_outlive_a_detached_client(tmp_path: Path) -> None:
    with WorkerProcess("--concurrency", "2", "--workdir", str(tmp_path)) as worker:
        first = connect(worker)
        assert value(first, "client", "counter", "kept", "increment", 5) == 5
        first.submit("getter", "collection_wire_tasks:queue_get", "later", None)
        first.submit("holder", "collection_wire_tasks:hold_lock", "task-lock")
        assert first.terminal("holder", timeout=20)["value"] is True
        first.send({"t": "release", "ttl": 60, "keep": True}, {"t": "ping", "ts": 1.0})
        first.wait_for(lambda m: m["t"] == "pong")
        first.close()
        second = Client(worker.port)
        welcome = second.hello()
        assert welcome["running"] == ["getter"]
        assert value(second, "client", "counter", "kept", "value") == 5
        value(second, "client", "queue", "later", "put", "hello")
        assert second.terminal("getter", timeout=20)["value"] == "hello"
        second.close()


def test_another_nodes_tasks_reach_the_head_over_the_cluster_network(tmp_path: Path) -> None:
    with WorkerProcess("--concurrency", "2") as head, WorkerProcess("--concurrency", "2", "--node", "1") as other:
        to_head = Client(head.port)
        assert to_head.hello()["t"] == "welcome"
        ready = to_head.cluster(0, 2)
        authority = ready["collections"]
        assert authority["addr"] == "127.0.0.1" and type(authority["port"]) is int
        to_other = Client(other.port)
        assert to_other.hello()["t"] == "welcome"
        assert "collections" not in to_other.cluster(1, 2)
        # Its first operation waits until the client says where the head's collections are.
        to_other.submit("early", "collection_wire_tasks:increment", "far", 2)
        time.sleep(0.3)
        to_other.send({"t": "authority", **authority})
        assert to_other.terminal("early", timeout=20)["value"] == 2
        assert run(to_other, "collection_wire_tasks:increment", "far", 3) == 5
        assert value(to_head, "client", "counter", "far", "value") == 5
        # Values the wire tags cross the link as they are (not tagged twice).
        assert run(to_other, "collection_wire_tasks:put_odd_values", "odd") == ["big float", 1]
        found, item = value(to_head, "client", "queue", "odd", "get", 0)
        assert found is True and item["$big"] == 2**60 and item["bytes"] == b"\x00\xff"
        assert item["nan"] != item["nan"] and item["list"] == [1, [2, 3]]
        # A barrier across the nodes, and a lock the far task held, released when it ended.
        to_head.submit("near", "collection_wire_tasks:barrier_wait", "meet", 2)
        assert run(to_other, "collection_wire_tasks:barrier_wait", "meet", 2) in (0, 1)
        assert to_head.terminal("near", timeout=20)["t"] == "result"
        # Its end reaches the client only once the head released its lock.
        for attempt in range(20):
            assert run(to_other, "collection_wire_tasks:hold_lock", "far-lock") is True
            assert value(to_head, "client:h", "lock", "far-lock", "locked") is False, attempt
        no_subtasks(to_other)
        to_other.close()
        to_head.close()


def test_every_acknowledged_write_survives_a_sigkilled_head() -> None:
    """The head replicates each write to a second node before it answers; when the head's worker is
    killed, the client fences the others at epoch 1 and promotes the node holding the newest copy
    (``$replica``, ``$promote``) and tells the others (``authority``): nothing acknowledged is missing."""
    with WorkerProcess("--concurrency", "2") as head, WorkerProcess("--concurrency", "2", "--node", "1") as one, \
            WorkerProcess("--concurrency", "2", "--node", "2") as two:
        clients = {0: Client(head.port), 1: Client(one.port), 2: Client(two.port)}
        for node, client in clients.items():
            assert client.hello()["t"] == "welcome"
            ready = client.cluster(node, 3)
            if node == 0:
                authority = ready["collections"]
        for node in (1, 2):
            clients[node].send({"t": "authority", **authority})
        assert run(clients[2], "collection_wire_tasks:write_many", "w", 20) == 20
        assert value(clients[0], "client", "counter", "w", "increment", 1) == 21
        assert value(clients[0], "client:c", "lock", "held-by-head-task", "acquire", 0) is True
        assert run(clients[0], "collection_wire_tasks:hold_lock", "task-lock") is True  # released at its end
        clients[0].submit("holder", "collection_wire_tasks:queue_get", "never", None)  # a wait on the head
        time.sleep(0.2)
        head.process.kill()  # SIGKILL: the head's worker and its store are gone
        head.process.wait(timeout=20)
        held = {node: value(clients[node], "client", "$replica", 1) for node in (1, 2)}
        copies = [node for node, copy in held.items() if copy is not None]
        assert len(copies) == 1, held
        promoted = max(copies, key=lambda node: (held[node]["epoch"], held[node]["seq"]))
        try:
            address = value(clients[promoted], "client", "$promote", 0, 1)
        except TimeoutError:
            raise AssertionError("".join((one if promoted == 1 else two).stderr_lines[-30:])) from None
        other = 3 - promoted
        clients[other].send({"t": "authority", **address})
        read = run(clients[other], "collection_wire_tasks:read_back", "w")
        assert read == {"counter": 21, "entries": 20, "v3": "v3", "queued": 20}, read
        assert value(clients[promoted], "client", "lock", "task-lock", "locked") is False
        # The lost node's client handle held a lock: a client handle outlives the head.
        assert value(clients[promoted], "client", "lock", "held-by-head-task", "locked") is True
        assert run(clients[promoted], "collection_wire_tasks:increment", "w", 1) == 22
        for node in (1, 2):
            clients[node].close()


def three_nodes(workers: Dict[int, WorkerProcess]) -> Dict[int, Client]:
    """Clients of a head (0) and two nodes, each told where the head serves the collections."""
    clients = {node: Client(worker.port) for node, worker in workers.items()}
    for node, client in clients.items():
        client.hello()
        ready = client.cluster(node, 3)
        if node == 0:
            authority = ready["collections"]
    for node in (1, 2):
        clients[node].send({"t": "authority", **authority})
    return clients


def copy_holders(clients: Dict[int, Client]) -> List[int]:
    """The nodes holding the head's copy, once one does."""
    deadline = time.monotonic() + 20
    while not (holders := [node for node in (1, 2) if value(clients[node], "client", "$replica") is not None]):
        assert time.monotonic() < deadline, "no node took the copy"
        time.sleep(0.05)
    return holders


def test_a_lost_replica_is_replaced_by_the_next_node_with_everything() -> None:
    with WorkerProcess("--concurrency", "2") as head, WorkerProcess("--concurrency", "2", "--node", "1") as one, \
            WorkerProcess("--concurrency", "2", "--node", "2") as two:
        workers = {0: head, 1: one, 2: two}
        clients = three_nodes(workers)
        assert value(clients[0], "client", "counter", "r", "increment", 10) == 10
        holders = copy_holders(clients)
        assert len(holders) == 1
        replica, other = holders[0], 3 - holders[0]
        workers[replica].process.kill()  # the replica goes: the other node gets everything
        workers[replica].process.wait(timeout=20)
        deadline = time.monotonic() + 20
        while value(clients[other], "client", "$replica") is None:
            assert time.monotonic() < deadline, "no node took the copy over"
            time.sleep(0.05)
        assert value(clients[0], "client", "counter", "r", "increment", 1) == 11
        head.process.kill()
        head.process.wait(timeout=20)
        value(clients[other], "client", "$promote", 0)
        assert value(clients[other], "client", "counter", "r", "value") == 11
        clients[other].close()


def test_a_far_tasks_own_connection_ends_with_its_node() -> None:
    """A task on another node takes its operations to the head on its thread's own connection; when
    that node's worker is SIGKILLed, the head ends the owners of the connection: the lock its task
    held is free. An ``async def`` task's operations go through its worker and count the same."""
    with WorkerProcess("--concurrency", "2") as head, WorkerProcess("--concurrency", "2", "--node", "1") as one, \
            WorkerProcess("--concurrency", "2", "--node", "2") as two:
        workers = {0: head, 1: one, 2: two}
        clients = three_nodes(workers)
        assert run(clients[1], "collection_wire_tasks:increment_async", "a", 5) == 5
        assert run(clients[2], "collection_wire_tasks:increment", "a", 1) == 6
        holders = copy_holders(clients)
        holder = 3 - holders[0]  # the node that does not hold the copy: losing it loses no copy
        clients[holder].submit("holder", "collection_wire_tasks:hold_lock_and_wait", "gone-with-node")
        deadline = time.monotonic() + 20
        while value(clients[0], "client:h", "lock", "gone-with-node", "locked") is not True:
            assert time.monotonic() < deadline, "the far task never got the lock"
            time.sleep(0.05)
        workers[holder].process.kill()
        workers[holder].process.wait(timeout=20)
        deadline = time.monotonic() + 20
        while value(clients[0], "client:h", "lock", "gone-with-node", "locked") is not False:
            assert time.monotonic() < deadline, "the lost node's task still holds the lock"
            time.sleep(0.05)
        assert value(clients[0], "client:h", "lock", "gone-with-node", "acquire", 0) is True
        for node in (0, 3 - holder):
            clients[node].close()


def test_an_operation_fails_when_no_node_says_where_the_head_serves() -> None:
    with WorkerProcess("--concurrency", "1", "--node", "1", env={"SKYWARD_COLLECTIONS_AUTHORITY_WAIT": "0.5"}) as other:
        client = Client(other.port)
        client.hello()
        client.cluster(1, 2)  # and no ``authority`` after it
        client.submit("orphan", "collection_wire_tasks:increment", "x", 1)
        message = client.terminal("orphan", timeout=20)
        assert message["t"] == "error" and "did not say where it serves the collections within 0.5 s" in message[
            "message"], message
        client.close()


def test_a_peer_with_the_wrong_token_is_refused() -> None:
    with WorkerProcess("--concurrency", "1") as head, WorkerProcess("--concurrency", "1", "--node", "1",
                                                                     token="another-pool") as other:
        to_head = Client(head.port)
        to_head.hello()
        authority = to_head.cluster(0, 2)["collections"]
        to_other = Client(other.port)
        to_other.hello(token="another-pool")
        to_other.cluster(1, 2)
        to_other.send({"t": "authority", **authority})
        to_other.submit("refused", "collection_wire_tasks:increment", "x", 1)
        message = to_other.terminal("refused", timeout=40)
        assert message["t"] == "error" and "lost" in message["message"], message
        assert value(to_head, "client", "counter", "x", "value") == 0
        to_other.close()
        to_head.close()


def test_outside_a_task_collections_refuse() -> None:
    script = (
        "import skyward as sky\n"
        "try:\n    sky.counter('c').increment()\nexcept RuntimeError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(PYTHON_ROOT)},
                          capture_output=True, text=True, timeout=20)
    assert done.stdout.strip() == (
        "sky.counter() is only available inside a task running on a Skyward worker (no active pool)"
    ), done.stderr


def test_the_eventual_replica_makes_keys_python_holds_equal_one_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replica's slots compare keys as a Python dict does (and as the store's ``keyOf`` does)."""
    monkeypatch.syspath_prepend(str(PYTHON_ROOT))
    from skyward.collections import _canon

    assert _canon(True) == _canon(1) == _canon(1.0)
    assert _canon(False) == _canon(0) == _canon(-0.0)
    assert _canon(2**60) == _canon(2.0**60)
    assert _canon(10**300) != _canon(1e300)
    assert _canon((True, 2)) == _canon([1, 2.0])
    assert _canon(float("nan")) == _canon(float("nan"))
    assert len({_canon(key) for key in (1, "1", b"1", 0.5, None, float("inf"))}) == 6


def test_a_client_answer_is_in_wire_form_whatever_the_value() -> None:
    """``coll_answer`` skips :func:`to_wire` for values that are their own wire form: every other
    value (an integer past 2^53, bytes, a dict) still gets its wire form."""
    from skyward.collection_service import client_answer
    from skyward.protocol import to_wire

    for value in [7, "s", None, True, [True, 3], [False, None], 2**60, [True, 2**60], -(2**53), float("nan"),
                  b"\x00", {"$k": 1}, [True, {"a": [2**70]}], 1.5]:
        answer = client_answer(3, ("value", value))
        assert repr(answer) == repr(to_wire({"t": "coll_answer", "id": 3, "ok": True, "value": value})), value
    refused = client_answer(4, ("error", "ValueError", "bad"))
    assert refused == {"t": "coll_answer", "id": 4, "ok": False, "type": "ValueError", "message": "bad"}
