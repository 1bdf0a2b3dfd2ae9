"""The processes a task starts end with its worker, however the worker ends.

A task that starts a training script, a data loader or ``torchrun`` with ``subprocess`` left those
processes running when its worker was SIGKILLed (the OOM killer, a healing replacement, a pool's
stop): on the user's own hosts they kept the GPU busy, and on a reused machine they collided with
the next pool. Seen: a ``sleep`` a thread task started, still running (its parent now PID 1) after
the worker's SIGKILL; under the process executor the child died with its worker (``PR_SET_PDEATHSIG``)
but what its task started did not; and at a normal stop (``shutdown``) too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from worker_client import WorkerProcess, connect, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from Linux /proc")

#: seconds a gone worker's processes have to end (generous: the machine may be loaded, and one that
#: ignores SIGTERM gets a grace first)
GONE_WITHIN = 60.0


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Running (an ended process not yet reaped by its new parent is a zombie: not running)."""
    state = _state(pid)
    return state is not None and state not in ("Z", "X")


def _keepers_of(pid: int) -> List[int]:
    """The worker's keeper processes (children of ``pid`` running skyward's keeper)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except (OSError, ValueError):
            continue
        if parent == pid and b"keeper" in command:
            found.append(int(entry))
    return found


class Started:
    """Pids to kill at the end of a test, whatever it found."""

    def __init__(self) -> None:
        self.pids: List[int] = []

    def add(self, *pids: int) -> None:
        self.pids.extend(pids)

    def kill_all(self) -> None:
        for pid in self.pids:
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture()
def started() -> Iterator[Started]:
    record = Started()
    try:
        yield record
    finally:
        record.kill_all()


def _worker(executor: str, started: Started) -> WorkerProcess:
    # In a session of its own, as the Local and SSH launchers start it.
    worker = WorkerProcess("--executor", executor, "--concurrency", "1", new_session=True)
    started.add(worker.process.pid)
    return worker


def _all_gone(pids: Dict[str, int], why: str) -> None:
    for kind, pid in pids.items():
        wait_until(lambda pid=pid: not _alive(pid), f"the task's {kind} process {pid} ended {why}")


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_what_a_task_started_ends_with_its_sigkilled_worker(executor: str, started: Started) -> None:
    worker = _worker(executor, started)
    client = connect(worker)
    pids = client.value("process_tasks:start_processes")
    started.add(*pids.values())
    assert all(_alive(pid) for pid in pids.values()), pids
    # Only the worker, as the OOM killer does (not its process group, as a launcher's stop would).
    os.kill(worker.process.pid, signal.SIGKILL)
    worker.process.wait(timeout=20)
    _all_gone(pids, f"with its SIGKILLed worker ({executor} executor)")
    worker.stop()


def test_what_a_running_task_started_ends_at_a_normal_stop(started: Started, tmp_path: Path) -> None:
    worker = _worker("thread", started)
    client = connect(worker)
    marker = tmp_path / "pid"
    client.submit("busy", "process_tasks:start_then_wait", str(marker))
    wait_until(lambda: marker.exists() and marker.read_text() != "", "the task started its child")
    child = int(marker.read_text())
    started.add(child)
    client.send({"t": "shutdown"})
    worker.process.wait(timeout=30)
    _all_gone({"sleep": child}, "when its worker was shut down")
    worker.stop()


def test_a_process_kept_out_of_the_worker_s_scope_and_unrelated_ones_live_on(started: Started) -> None:
    from skyward.keeper import SCOPE_VARIABLE

    outsider = subprocess.Popen(["sleep", "1000"], start_new_session=True)  # the user's own, same user
    started.add(outsider.pid)
    worker = _worker("thread", started)
    client = connect(worker)
    pids = client.value("process_tasks:start_processes")
    started.add(*pids.values())
    kept_out = client.value("process_tasks:start_outside", SCOPE_VARIABLE)
    started.add(kept_out)
    keepers = _keepers_of(worker.process.pid)
    assert len(keepers) == 1, keepers
    os.kill(worker.process.pid, signal.SIGKILL)
    worker.process.wait(timeout=20)
    _all_gone(pids, "with its SIGKILLed worker")
    wait_until(lambda: not _alive(keepers[0]), "the keeper ended once the worker's processes had")
    assert _alive(kept_out), "a process started without the worker's scope variable, in its own session, was killed"
    assert outsider.poll() is None, "a process the worker never started was killed"
    outsider.kill()
    outsider.wait()
    worker.stop()


def test_what_the_self_destruct_leaves_running_lives_on(started: Started, tmp_path: Path) -> None:
    """A self-destruct may leave its work to a process of its own (a delayed shutdown): it is not the
    tasks', and outlives the worker that ran it."""
    record = tmp_path / "pid"
    worker = WorkerProcess("--self-destruct", f"sleep 1000 >/dev/null 2>&1 & echo $! > {record}", new_session=True)
    started.add(worker.process.pid)
    client = connect(worker)
    pids = client.value("process_tasks:start_processes")
    started.add(*pids.values())
    keepers = _keepers_of(worker.process.pid)
    assert len(keepers) == 1, keepers
    client.send({"t": "release", "ttl": 0})
    client.close()
    assert worker.wait(timeout=30) == 0
    left = int(record.read_text())
    started.add(left)
    _all_gone(pids, "when its worker self-destructed")
    wait_until(lambda: not _alive(keepers[0]), "the keeper ended once the worker's processes had")
    assert _alive(left), "the process the self-destruct command left running was killed"
    worker.stop()


@pytest.mark.parametrize("how", ["cancelled", "timed out", "ended its process"])
def test_what_a_process_task_started_ends_with_its_child(how: str, started: Started, tmp_path: Path) -> None:
    """Under the process executor a task stopped (cancel, timeout) or whose process died takes what it
    started with it, in whatever session, while the worker runs on; its child's process group alone
    left a ``sleep`` in a session of its own running until the worker ended."""
    worker = _worker("process", started)
    client = connect(worker)
    marker = tmp_path / "pid"
    client.submit("busy", "process_tasks:start_own_session_then", str(marker), "exit" if how == "ended its process" else "wait",
                  timeout=3 if how == "timed out" else None)
    wait_until(lambda: marker.exists() and marker.read_text() != "", "the task started its process")
    sleep = int(marker.read_text())
    started.add(sleep)
    if how == "cancelled":
        client.send({"t": "cancel", "id": "busy"})
    answer = client.terminal("busy", timeout=GONE_WITHIN)
    assert answer["t"] == "error", answer
    _all_gone({"sleep": sleep}, f"when its task {how}")
    assert worker.process.poll() is None
    assert client.value("demo_tasks:add", 1, 2) == 3  # the slot serves on
    worker.stop()
