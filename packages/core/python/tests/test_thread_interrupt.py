"""Stopping a running task on the thread executor: cancel and timeout interrupt its thread."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import Client, WorkerProcess, connect  # noqa: E402

SLOTS = ["skyward-slot-0", "skyward-slot-1"]


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", "thread", "--concurrency", "2") as process:
        yield process


@pytest.fixture()
def client(worker: WorkerProcess) -> Iterator[Client]:
    connection = connect(worker)
    yield connection
    connection.close()


def progress(client: Client, key: str) -> Dict[str, Any]:
    return client.value("interrupt_tasks:progress", key, worker=1)


def wait_ended(client: Client, key: str, within: float) -> Dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        state = progress(client, key)
        if state.get("ended") or time.monotonic() > deadline:
            return state
        time.sleep(0.02)


def assert_stopped(client: Client, key: str, stopped_at: float) -> None:
    """The loop's ``finally`` ran within 0.5 s of the stop, and it counts no further."""
    state = wait_ended(client, key, 0.5)
    assert state["ended"], f"the task's loop still runs 0.5 s after it was stopped: {state}"
    assert state["ended"] - stopped_at < 0.5
    time.sleep(0.2)
    assert progress(client, key)["count"] == state["count"]


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_a_stopped_python_loop_stops_and_its_slot_serves_on(client: Client, how: str) -> None:
    key = f"spin-{how}"
    if how == "timeout":
        client.submit(key, "interrupt_tasks:spin", key, timeout=0.3, worker=0)
    else:
        client.submit(key, "interrupt_tasks:spin", key, worker=0)
        time.sleep(0.3)
        client.send({"t": "cancel", "id": key})
    terminal = client.terminal(key)
    stopped_at = progress(client, key)["now"]
    expected = "timeout" if how == "timeout" else "cancelled"
    assert terminal["t"] == "error" and terminal["kind"] == expected  # what the client sees is unchanged
    assert_stopped(client, key, stopped_at)
    assert progress(client, key)["cpu"] < 1.0  # it burnt about its 0.3 s, not the 30 s it asked for
    # The same slot serves the next task, and the stopped thread has gone (no thread left behind).
    assert client.value("interrupt_tasks:busy", 0.01, worker=0)["thread"] == "skyward-slot-0"
    assert client.value("interrupt_tasks:slot_threads", worker=0) == SLOTS


def test_except_exception_does_not_swallow_the_interrupt(client: Client) -> None:
    key = "swallow"
    client.submit(key, "interrupt_tasks:swallow_exception", key, timeout=0.3, worker=0)
    assert client.terminal(key)["kind"] == "timeout"
    stopped_at = progress(client, key)["now"]
    assert_stopped(client, key, stopped_at)


def test_a_c_call_runs_until_it_returns_and_the_worker_says_so(worker: WorkerProcess, client: Client) -> None:
    key = "c-call"
    start = time.monotonic()
    client.submit(key, "interrupt_tasks:sleep_then_mark", key, 1.5, timeout=0.2, worker=0)
    assert client.terminal(key)["kind"] == "timeout"
    assert time.monotonic() - start < 1.0  # reported at once all the same
    # The slot is free at once: a fresh thread serves it while the old one sleeps.
    assert client.value("interrupt_tasks:busy", 0.01, worker=0)["thread"] == "skyward-slot-0"
    state = wait_ended(client, key, 3.0)
    assert state["ended"] - start > 1.4  # time.sleep could not be interrupted...
    assert state["count"] == 0  # ...but the code after it never ran
    assert any("inside a call Python cannot interrupt" in line for line in worker.stderr_lines)
    assert client.value("interrupt_tasks:slot_threads", worker=0) == SLOTS


def test_an_interrupt_never_lands_in_the_next_task() -> None:
    # Stops racing the tasks' own ends: a timeout or a cancel arriving as the task returns must
    # never hit the task that runs next in that thread slot.
    with WorkerProcess("--executor", "thread", "--concurrency", "1") as process:
        client = connect(process)
        outcomes = set()
        for round_ in range(60):
            # Some end just before the stop, some well after it (so that a stop late on a loaded
            # machine still lands in some: the race must be seen, not only lost).
            duration = 0.01 + (round_ % 6) * 0.008
            first, second = f"first-{round_}", f"second-{round_}"
            if round_ % 2:
                client.submit(first, "interrupt_tasks:busy", duration, timeout=0.02)
            else:
                client.submit(first, "interrupt_tasks:busy", duration)
            client.submit(second, "interrupt_tasks:busy", 0.005)
            if not round_ % 2:
                time.sleep(0.02)
                client.send({"t": "cancel", "id": first})
            outcome = client.terminal(first)
            outcomes.add(outcome.get("kind", outcome["t"]))
            assert outcome["t"] == "result" or outcome["kind"] in ("timeout", "cancelled"), outcome
            after = client.terminal(second)
            assert after["t"] == "result", after
        assert {"timeout", "cancelled"} <= outcomes  # the stops did race the tasks
        # A stopped task's thread exits once its task has returned: on a loaded machine it may still
        # be on its way out, so look until it is gone (and fail if it lingers).
        threads = client.value("interrupt_tasks:slot_threads")
        deadline = time.monotonic() + 10
        while threads != ["skyward-slot-0"] and time.monotonic() < deadline:
            time.sleep(0.05)
            threads = client.value("interrupt_tasks:slot_threads")
        assert threads == ["skyward-slot-0"]
        assert not any("Traceback" in line for line in process.stderr_lines), process.stderr_lines
        client.close()
