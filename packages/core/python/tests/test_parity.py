"""In-task parity with the Python project on real workers: ``@sky.function`` operators through the
nested dispatch, ``@sky.function(timeout=…)`` honoured, ``InstanceInfo`` returned as a value."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import Client, NestedRelay, WorkerProcess, connect  # noqa: E402
from prerequisites import require_module  # noqa: E402

PEERS = [{"node": 0, "private_ip": "10.1.0.1", "public_ip": None}, {"node": 1, "private_ip": "10.1.0.2", "public_ip": None}]


@pytest.fixture(scope="module", params=["thread", "process"])
def two_nodes(request: pytest.FixtureRequest) -> Iterator[NestedRelay]:
    # Every subtask through the client (none run on its parent's node), which records each.
    via_client = {"SKYWARD_NESTED_LOCAL_SLOTS": "0"}
    with WorkerProcess("--executor", request.param, env=via_client) as first, \
            WorkerProcess("--executor", request.param, env=via_client) as second:
        clients = [connect(first, node=0, total_nodes=2, peers=PEERS), connect(second, node=1, total_nodes=2, peers=PEERS)]
        yield NestedRelay(clients)
        for client in clients:
            client.close()


def test_pending_function_operators_dispatch_through_the_pool(two_nodes: NestedRelay) -> None:
    result = two_nodes.value(two_nodes.clients[0], "parity_tasks:operators", 7)
    assert result == {"one": 49, "every_node": [0, 1], "group": [1, 4, 49], "gathered": [9, 16],
                      "streamed": [25, 36], "future": 100}
    fns = {message["fn"] for message in two_nodes.subtasks}
    assert fns == {"parity_tasks:square", "parity_tasks:where"}  # each ran as a nested task
    assert {message["node"] for message in two_nodes.subtasks if message["fn"] == "parity_tasks:where"} == {0, 1}


def test_pending_function_refuses_a_foreign_target(two_nodes: NestedRelay) -> None:
    message = two_nodes.value(two_nodes.clients[0], "parity_tasks:bad_target")
    assert "pending >> sky" in message and "object" in message


def test_declared_timeout_is_honoured(two_nodes: NestedRelay) -> None:
    client: Client = two_nodes.clients[1]
    client.submit("slow-1", "parity_tasks:declared_timeout", 10)
    error = two_nodes.terminal(client, "slow-1", timeout=8)
    assert (error["t"], error["kind"]) == ("error", "timeout") and "1.0 s" in error["message"]
    # The client's own timeout wins over the declared one.
    client.submit("slow-2", "parity_tasks:declared_timeout", 1.5, timeout=5)
    assert two_nodes.terminal(client, "slow-2", timeout=8)["value"] == "finished"


def test_guide_04_returns_instance_info(two_nodes: NestedRelay) -> None:
    client = two_nodes.clients[1]
    info = two_nodes.value(client, "parity_tasks:get_instance_info")
    assert info["node"] == 1 and info["total_nodes"] == 2 and info["peers"][1]["private_ip"] == "10.1.0.2"
    assert info["is_head"] is False and isinstance(info["hostname"], str)
    both = two_nodes.value(client, "parity_tasks:peers_both_ways")
    assert both["item"] == both["attribute"] == "10.1.0.1"
    assert json.loads(both["json"])["peers"][0]["private_ip"] == "10.1.0.1"


def test_declared_timeout_replaces_the_pools_default(two_nodes: NestedRelay) -> None:
    client: Client = two_nodes.clients[0]
    client.send({"t": "submit", "id": "slow-3", "fn": "parity_tasks:declared_timeout", "args": [10], "kwargs": {},
                 "timeout": 300, "stream": False, "worker": None, "default_timeout": True})
    error = two_nodes.terminal(client, "slow-3", timeout=8)
    assert (error["t"], error["kind"]) == ("error", "timeout") and "1.0 s" in error["message"]


def test_objects_travel_pickled_between_tasks(two_nodes: NestedRelay) -> None:
    first, second = two_nodes.clients
    handle = two_nodes.value(first, "parity_tasks:make_tally", 1)
    assert type(handle).__name__ == "Pickled" and handle.type_name == "parity_tasks.Tally"
    grown = two_nodes.value(second, "parity_tasks:grow_tally", handle, 2)  # passed on as it came
    assert two_nodes.value(first, "parity_tasks:read_tally", grown) == {"type": "Tally", "items": [1, 2]}
    assert two_nodes.value(first, "parity_tasks:nested_tally", 5) == {"type": "Tally", "items": [5]}


def test_arrays_round_trip_on_both_executors(two_nodes: NestedRelay) -> None:
    np = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    back = two_nodes.value(two_nodes.clients[0], "parity_tasks:double_array", matrix)
    assert back.dtype == np.float32 and back.shape == (3, 4) and (back == matrix * 2).all()
    ints = np.array([[2**40, -1]], dtype=np.int64)
    back = two_nodes.value(two_nodes.clients[1], "parity_tasks:double_array", ints)
    assert back.dtype == np.int64 and back.tolist() == [[2**41, -2]]
