"""``sky.shard`` on a real worker: with several workers per node (one per accelerator: torch's,
jax's or accelerate's ``perAccelerator``, MIG), each worker is a rank of its own and gets a slice of
its own; with one worker per node, each node does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import WorkerProcess, connect  # noqa: E402


@pytest.fixture(scope="module", params=["thread", "process"])
def worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", request.param, "--concurrency", "2") as worker:
        yield worker


def test_each_worker_of_a_node_gets_its_own_slice(worker: WorkerProcess) -> None:
    client = connect(worker, 1, 2, workers_per_node=2)
    try:
        # Node 1 of 2, two workers each: ranks 2 and 3 of 4. Before, both got node 1's slice, so
        # the ranks of one node trained on the same data.
        slices = [client.value("demo_tasks:my_shard", 16, worker=slot) for slot in (0, 1)]
        assert slices == [list(range(2, 16, 4)), list(range(3, 16, 4))]
        blocks = [client.value("demo_tasks:my_shard", 10, drop_last=True, worker=slot) for slot in (0, 1)]
        assert blocks == [[4, 5], [6, 7]]
        # Given explicitly, the node's place is used as given.
        assert client.value("demo_tasks:my_shard", 6, node=1, total_nodes=2, worker=1) == [1, 3, 5]
    finally:
        client.close()


def test_with_one_worker_per_node_each_node_gets_its_slice(worker: WorkerProcess) -> None:
    client = connect(worker, 1, 3)
    try:
        assert [client.value("demo_tasks:my_shard", 10, worker=slot) for slot in (0, 1)] == [[1, 4, 7]] * 2
    finally:
        client.close()
