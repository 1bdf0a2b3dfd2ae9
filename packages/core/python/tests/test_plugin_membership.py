"""A ``cluster`` sent again with another membership (a node replaced, added or removed): the
plugins' ``around_app`` hooks are left once no task is inside them and entered again by the next
task with the new topology; the same membership changes nothing. On a real worker."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import PLUGIN_ENV, Client, NestedRelay, WorkerProcess, connect  # noqa: E402

EXECUTORS = ["thread", "process"]


def topology_plugin(log: Path) -> List[Dict[str, Any]]:
    return [{"name": "only", "module": "recording_plugin",
             "config": {"log": str(log), "label": "only", "topology": True}}]


def read_log(log: Path) -> List[List[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def app_events(log: Path) -> List[List[str]]:
    return [line[3:] for line in read_log(log) if line[2] == "around_app"]


def peers(total: int, replaced: int | None = None) -> List[Dict[str, Any]]:
    """``total`` peers on one machine; ``replaced``: that node is on another instance."""
    return [{"node": i, "private_ip": "127.0.0.1", "public_ip": None,
             "instance_id": f"i-{i}-new" if i == replaced else f"i-{i}"} for i in range(total)]


def stop(client: Client, worker: WorkerProcess) -> None:
    client.send({"t": "shutdown"})
    assert worker.wait(timeout=20) == 0


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_changed_membership_reenters_around_app_once_no_task_is_inside(tmp_path: Path, executor: str) -> None:
    log = tmp_path / "hooks.log"
    release = tmp_path / "release"
    with WorkerProcess("--executor", executor, "--concurrency", "2", env=PLUGIN_ENV) as worker:
        client = connect(worker, total_nodes=2, peers=peers(2), plugins=topology_plugin(log))
        client.value("plugin_tasks:record", str(log), tag="first")
        # A task inside the hooks when node 1 is replaced (same address, another instance).
        client.submit("long", "plugin_tasks:record_until", str(log), str(release), tag="long")
        while not any(line[2:4] == ["started", "long"] for line in read_log(log)):
            client._receive_once(0.05)
        client.cluster(0, 2, peers=peers(2, replaced=1), plugins=topology_plugin(log))
        client.submit("next", "plugin_tasks:record", str(log), tag="next")
        release.touch()
        assert client.terminal("long", timeout=20)["t"] == "result"
        assert client.terminal("next", timeout=20)["t"] == "result"
        stop(client, worker)
    lines = read_log(log)
    assert app_events(log) == [
        ["enter", "node=0", "total=2", "peers=127.0.0.1,127.0.0.1"],
        ["exit"],
        ["enter", "node=0", "total=2", "peers=127.0.0.1,127.0.0.1"],
        ["exit"],
    ]
    app = [i for i, line in enumerate(lines) if line[2] == "around_app"]
    done_long = next(i for i, line in enumerate(lines) if line[2:] == ["task", "long"])
    done_next = next(i for i, line in enumerate(lines) if line[2:] == ["task", "next"])
    # left only once the task inside was done; entered again before the next task ran
    assert done_long < app[1] < app[2] < done_next


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_grown_pool_enters_around_app_with_the_new_size_and_tells_the_tasks(tmp_path: Path, executor: str) -> None:
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", executor, env=PLUGIN_ENV) as worker:
        client = connect(worker, total_nodes=1, peers=peers(1), plugins=topology_plugin(log))
        assert client.value("plugin_tasks:total_nodes") == 1
        client.cluster(0, 3, peers=peers(3), plugins=topology_plugin(log))
        assert client.value("plugin_tasks:total_nodes") == 3
        stop(client, worker)
    assert [event[:3] for event in app_events(log)] == [
        ["enter", "node=0", "total=1"], ["exit"], ["enter", "node=0", "total=3"], ["exit"],
    ]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_same_membership_told_again_changes_nothing(tmp_path: Path, executor: str) -> None:
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", executor, env=PLUGIN_ENV) as worker:
        client = connect(worker, total_nodes=2, peers=peers(2), plugins=topology_plugin(log))
        client.value("plugin_tasks:record", str(log), tag="first")
        client.cluster(0, 2, peers=peers(2), plugins=topology_plugin(log))
        client.value("plugin_tasks:record", str(log), tag="second")
        stop(client, worker)
    assert [event[0] for event in app_events(log)] == ["enter", "exit"]


def test_a_membership_told_before_the_first_task_enters_once_with_it(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", "thread", env=PLUGIN_ENV) as worker:
        client = connect(worker, total_nodes=1, peers=peers(1), plugins=topology_plugin(log))
        client.cluster(0, 2, peers=peers(2), plugins=topology_plugin(log))
        client.value("plugin_tasks:record", str(log), tag="first")
        stop(client, worker)
    assert [event[:3] for event in app_events(log)] == [["enter", "node=0", "total=2"], ["exit"]]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_subtasks_of_a_task_inside_stale_hooks_run_under_them_rather_than_wait_for_it(
    tmp_path: Path, executor: str
) -> None:
    # The parent is inside the hooks when they go stale, and waits for its subtasks: a subtask that
    # waited for the parent to leave them would never run.
    log = tmp_path / "hooks.log"
    release = tmp_path / "release"
    env = {**PLUGIN_ENV, "SKYWARD_NESTED_LOCAL_SLOTS": "0"}  # every subtask through the client
    with WorkerProcess("--executor", executor, "--concurrency", "1", env=env) as worker:
        client = connect(worker, total_nodes=2, peers=peers(2), plugins=topology_plugin(log))
        relay = NestedRelay([client])
        client.submit("parent", "plugin_tasks:subtasks_when_released", str(log), str(release), 3)
        while not any(line[2:4] == ["started", "parent"] for line in read_log(log)):
            client._receive_once(0.05)
        client.cluster(0, 2, peers=peers(2, replaced=1), plugins=topology_plugin(log))
        release.touch()
        parent = relay.terminal(client, "parent", timeout=30)
        assert parent["t"] == "result" and parent["value"] == [0, 1, 4]
        assert relay.value(client, "plugin_tasks:total_nodes") == 2
        stop(client, worker)
    # entered again only after the parent (and its subtasks) were done
    assert [event[0] for event in app_events(log)] == ["enter", "exit", "enter", "exit"]


def test_a_cluster_told_while_around_app_is_being_entered_is_answered(tmp_path: Path) -> None:
    # Entering can wait long (a rendezvous with nodes not there yet); the worker's loop, which
    # applies the cluster and answers pings, does not wait for it.
    log = tmp_path / "hooks.log"
    hanging = [{"name": "stuck", "module": "recording_plugin",
                "config": {"log": str(log), "label": "stuck", "fail": "hang"}}]
    with WorkerProcess("--executor", "thread", env=PLUGIN_ENV) as worker:
        client = connect(worker, total_nodes=2, peers=peers(2), plugins=hanging)
        client.submit("first", "demo_tasks:add", 1, 2)
        while not any(line[2:4] == ["around_app", "hang"] for line in read_log(log)):
            client._receive_once(0.05)
        assert client.cluster(0, 2, peers=peers(2, replaced=1), plugins=hanging)["t"] == "ready"


def test_a_broadcast_from_a_task_targets_the_nodes_the_last_cluster_named() -> None:
    # ``f(x) @ sky`` and ``submit(node=…)`` read the pool's node indices from the cluster message:
    # an elastic pool that let node 1 go and kept node 2 has nodes 0 and 2, not 0..1.
    from skyward.dispatch import node_indices
    from skyward.info import instance_info_from_cluster

    def info(total: int, nodes: List[int]) -> Any:
        return instance_info_from_cluster({"node": 0, "total_nodes": total, "peers": [
            {"node": node, "private_ip": "127.0.0.1", "public_ip": None} for node in nodes]})

    assert node_indices(info(2, [0, 2])) == [0, 2]
    assert node_indices(info(3, [0, 1, 2])) == [0, 1, 2]
    assert node_indices(info(2, [])) == [0, 1]  # a cluster message without peers
    assert node_indices(None) == [0]
