"""Task outcomes that must reach the client whatever the task did, on both executors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import Client, WorkerProcess, connect  # noqa: E402


@pytest.fixture(scope="module", params=["thread", "process"])
def client(request: pytest.FixtureRequest) -> Iterator[Client]:
    # One slot: a task that took its slot down with it would leave the next task waiting for ever.
    with WorkerProcess("--executor", request.param, "--concurrency", "1") as worker:
        connected = connect(worker)
        yield connected
        connected.close()


def test_an_exception_whose_str_raises_still_fails_the_task(client: Client) -> None:
    error = client.call("outcome_tasks:unprintable")
    assert (error["t"], error["kind"], error["type"]) == ("error", "exception", "outcome_tasks.UnprintableError")
    assert "str() failed" in error["message"] and "__str__ is broken" in error["message"]
    assert "raise UnprintableError" in error["traceback"]
    # The slot carries on (under the thread executor its thread had died with the task).
    assert client.value("outcome_tasks:add", 2, 3) == 5


def test_output_larger_than_a_frame_reaches_the_client_and_the_task_succeeds(client: Client) -> None:
    mib = 65
    message = client.call("outcome_tasks:print_huge_line", mib, task_id="huge-line")
    assert (message["t"], message.get("value")) == ("result", "done"), {k: v for k, v in message.items() if k != "traceback"}
    chunks = [m["data"] for m in client.by_id["huge-line"] if m["t"] == "out"]
    assert "".join(chunks) == "y" * (mib << 20) + "\n"


def test_a_result_nested_too_deep_to_send_fails_its_task_as_a_serialization_error(client: Client) -> None:
    error = client.call("outcome_tasks:nested", 100_000)
    assert (error["t"], error["kind"], error["type"]) == ("error", "serialization", "SerializationError")
    assert "RecursionError" in error["message"] and error["message"].startswith("result")
    client.submit("deep-items", "outcome_tasks:yield_nested", 100_000, stream=True)
    error = client.terminal("deep-items")
    assert (error["t"], error["kind"]) == ("error", "serialization") and error["message"].startswith("item[1]")
    assert [m["value"] for m in client.by_id["deep-items"] if m["t"] == "item"] == [1]
    assert client.value("outcome_tasks:add", 2, 3) == 5


def test_a_result_whose_pickling_raises_a_base_exception_fails_its_task(client: Client) -> None:
    error = client.call("outcome_tasks:exits_when_pickled")
    assert (error["t"], error["kind"], error["type"]) == ("error", "serialization", "SerializationError")
    assert error["message"].startswith("result") and "SystemExit" in error["message"], error["message"]
    client.submit("exit-items", "outcome_tasks:yield_exits_when_pickled", stream=True)
    error = client.terminal("exit-items")
    assert (error["t"], error["kind"]) == ("error", "serialization") and error["message"].startswith("item[1]")
    # The slot carries on (its thread, or its process, did not die with the value).
    assert client.value("outcome_tasks:add", 2, 3) == 5
