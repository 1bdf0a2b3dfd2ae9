"""A worker told to stop by a signal its client did not ask for: a scheduler preempting or
cancelling the job (Slurm sends SIGTERM, then SIGKILL after its grace time), a spot cloud's
shutdown. Its tasks are interrupted, not cancelled: none is answered, so the pool, which sees the
node lost, runs them again elsewhere; the client hears an interruption of kind ``preempted``."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import TERMINAL, Client, WorkerProcess, connect  # noqa: E402


def _started(client: Client, task_id: str) -> None:
    """Waits for the task's first line: it is running, not queued."""
    client.wait_for(lambda m: m["t"] == "out" and m.get("id") == task_id and "started" in m["data"])


def _rest(client: Client) -> List[Dict[str, Any]]:
    """Everything the worker sends until it closes the connection."""
    client.wait_closed()
    return list(client.inbox)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_sigterm_interrupts_running_and_queued_tasks_without_answering_them(executor: str) -> None:
    with WorkerProcess("--executor", executor) as worker:
        client = connect(worker)
        client.submit("running", "demo_tasks:say_then_value", "started", 30, 1)
        client.submit("queued", "demo_tasks:add", 1, 2)  # one slot: it waits behind the first
        _started(client, "running")
        worker.process.send_signal(signal.SIGTERM)
        notice = client.wait_for(lambda m: m["t"] == "event")
        assert notice["node"] == 0
        assert notice["event"]["type"] == "interruption"
        assert notice["event"]["kind"] == "preempted"
        assert notice["event"]["action"] == "SIGTERM"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", notice["event"]["time"])
        # Neither task is answered: a `cancelled` error would end it for good in the pool.
        assert [m for m in _rest(client) if m["t"] in TERMINAL] == []
        assert worker.wait(timeout=20) == 0
        for drainer in worker._drainers:  # the last lines read
            drainer.join(timeout=10)
        assert any("stopping: preempted (SIGTERM)" in line for line in worker.stderr_lines)


def test_sigterm_to_the_whole_process_group_leaves_the_task_of_an_executor_process_unanswered() -> None:
    # Slurm signals every process of the step: the executor's child dies of the same SIGTERM, and
    # its death must not answer the task (a `worker_died` error is not retried either).
    with WorkerProcess("--executor", "process", new_session=True) as worker:
        client = connect(worker)
        client.submit("running", "demo_tasks:say_then_value", "started", 30, 1)
        _started(client, "running")
        os.killpg(worker.process.pid, signal.SIGTERM)
        assert client.wait_for(lambda m: m["t"] == "event")["event"]["kind"] == "preempted"
        assert [m for m in _rest(client) if m["t"] in TERMINAL] == []
        assert worker.wait(timeout=20) == 0


def test_sigint_is_still_a_stop_that_cancels() -> None:
    with WorkerProcess() as worker:
        client = connect(worker)
        client.submit("running", "demo_tasks:say_then_value", "started", 30, 1)
        _started(client, "running")
        worker.process.send_signal(signal.SIGINT)
        assert client.terminal("running")["kind"] == "cancelled"
        assert [m for m in _rest(client) if m["t"] == "event"] == []
        assert worker.wait(timeout=20) == 0

