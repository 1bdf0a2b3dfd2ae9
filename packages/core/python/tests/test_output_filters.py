"""``sky.stdout(only=…)``, ``sky.stderr(only=…)`` and ``sky.silent`` on ``async def`` tasks and async
generators, on a real worker that is not the head. Before, the filter was left as soon as the
function returned its coroutine (before any of it ran), so nothing was filtered."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import Client, WorkerProcess, connect  # noqa: E402


@pytest.fixture(scope="module", params=["thread", "process"])
def node_one(request: pytest.FixtureRequest) -> Iterator[Client]:
    with WorkerProcess("--node", "1", "--executor", request.param) as worker:
        client = connect(worker, node=1, total_nodes=2)
        yield client
        client.close()


def outputs(client: Client, task_id: str) -> List[Dict[str, Any]]:
    return [(m["stream"], m["data"]) for m in client.by_id[task_id] if m["t"] == "out"]


def test_an_async_task_is_filtered(node_one: Client) -> None:
    assert node_one.value("output_tasks:head_says", "not on node 1", task_id="async-head") == "ok"
    assert outputs(node_one, "async-head") == [("stderr", "to stderr\n")]
    assert node_one.value("output_tasks:quiet", "shh", task_id="async-quiet") == "quiet"
    assert outputs(node_one, "async-quiet") == []


def test_an_async_generator_is_filtered(node_one: Client) -> None:
    node_one.submit("async-count", "output_tasks:head_count", 3, stream=True)
    assert node_one.terminal("async-count")["t"] == "end"
    assert [m["value"] for m in node_one.by_id["async-count"] if m["t"] == "item"] == [0, 1, 2]
    assert outputs(node_one, "async-count") == []


def test_bytes_written_in_pieces_keep_their_characters(node_one: Client) -> None:
    """A character whose UTF-8 bytes two writes to ``sys.stdout.buffer`` split is printed whole."""
    text = "█▌ 50% naïve 日本\n"
    assert node_one.value("output_tasks:bytes_in_pieces", text, 1, task_id="pieces") == "ok"
    assert "".join(data for _, data in outputs(node_one, "pieces")) == text
