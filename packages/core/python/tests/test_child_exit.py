"""A process-executor child ends when its worker does, whatever the child is doing then.

A child left behind keeps its task's memory (GPU memory on a real machine) and CPU until someone
kills it by hand. Seen: a worker SIGKILLed while messages of its child were still unread ends the
child's socket with a reset, not an EOF; the child's reader thread died of the
``ConnectionResetError`` and the child waited for its next task for ever (ppid 1, its main thread
in ``jobs.get()``, the output flusher in its condition).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Iterator, List

import pytest

from worker_client import PYTHON_ROOT, TASKS_DIR, Client, WorkerProcess, connect, stop_process, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from Linux /proc")

#: seconds a gone worker's child has to end (generous: the machine may be loaded)
GONE_WITHIN = 60.0


def _stat(pid: int) -> List[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _children_of(pid: int) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(int(entry))
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except OSError:
            continue
        if fields is not None and int(fields[1]) == pid and b"skyward.child" in command:
            found.append(int(entry))
    return found


def _waits_on_a_futex(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/task/{pid}/wchan") as wchan:
            return "futex" in wchan.read()
    except OSError:
        return False


def _idle(pid: int) -> bool:
    """The child's main thread waits for its next task (``jobs.get()``: a futex), seen twice apart
    (once could be a wait for the interpreter lock)."""
    if not _waits_on_a_futex(pid):
        return False
    time.sleep(0.2)
    return _waits_on_a_futex(pid)


@pytest.fixture()
def worker() -> Iterator[WorkerProcess]:
    process = WorkerProcess("--executor", "process", "--concurrency", "1")
    try:
        yield process
    finally:
        # A child this test failed to see end is killed here, not left to the machine.
        children = _children_of(process.process.pid)
        if process.process.poll() is None:
            os.kill(process.process.pid, signal.SIGCONT)
        process.stop()
        for pid in children + getattr(process, "watched", []):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _the_child(worker: WorkerProcess, client: Client) -> int:
    """The worker's one child, once it has started."""
    pid = client.value("demo_tasks:pid", worker=0)
    children = _children_of(worker.process.pid)
    assert children == [pid], children
    worker.watched = children  # type: ignore[attr-defined]
    return children[0]


def _kill_worker(worker: WorkerProcess) -> None:
    os.kill(worker.process.pid, signal.SIGKILL)
    worker.process.wait(timeout=20)


def _running(worker: WorkerProcess, marker: Path, fn: str, *args: object) -> int:
    """The worker's child, once it runs task ``fn(marker, *args)`` (the task writes the marker)."""
    client = connect(worker)
    child = _the_child(worker, client)
    client.submit("task", fn, str(marker), *args, worker=0)
    wait_until(marker.exists, f"{fn} started")
    return child


def _gone(child: int, state: str) -> None:
    wait_until(lambda: not _alive(child), f"child {child} {state} ended with its killed worker")


def test_an_idle_child_ends_with_its_worker(worker: WorkerProcess) -> None:
    child = _the_child(worker, connect(worker))
    _kill_worker(worker)
    _gone(child, "waiting for a task")


def test_a_running_child_ends_with_its_worker(worker: WorkerProcess, tmp_path: Path) -> None:
    child = _running(worker, tmp_path / "marker", "child_exit_tasks:mark_then_sleep", 600)
    _kill_worker(worker)
    _gone(child, "running a task")


def test_a_child_whose_messages_the_worker_never_read_ends_with_it(worker: WorkerProcess, tmp_path: Path) -> None:
    # The state found: the task ends (its output and ``done`` sent) while the worker reads nothing,
    # the child waits for its next task, then the worker dies with those messages unread.
    marker = tmp_path / "marker"
    child = _running(worker, marker, "child_exit_tasks:mark_then_sleep", 1.0)
    stop_process(worker.process.pid)
    wait_until(lambda: marker.read_text() == "slept", "the task ended")
    wait_until(lambda: _idle(child), f"child {child} sent its task's end and waits for the next")
    _kill_worker(worker)
    _gone(child, "with messages its worker never read")


def test_a_child_holding_the_interpreter_ends_with_its_worker(worker: WorkerProcess, tmp_path: Path) -> None:
    # No thread of the child but the task's runs Python: only a guard outside Python ends it.
    child = _running(worker, tmp_path / "marker", "child_exit_tasks:mark_then_hold_the_interpreter")
    _kill_worker(worker)
    _gone(child, "holding the interpreter")


def test_a_child_outlives_its_worker_s_clients(worker: WorkerProcess) -> None:
    """The guard is the worker's death, not its client's: a client that goes takes no child with it."""
    first = connect(worker)
    child = _the_child(worker, first)
    first.close()
    second = connect(worker)
    assert second.value("demo_tasks:pid", worker=0) == child
    assert _alive(child)


# -- the two guards, each alone ---------------------------------------------------------------------

_LENGTH = struct.Struct(">I")


def test_the_reader_ends_the_child_at_a_reset_socket() -> None:
    """A socket ended by a reset (its peer closed with the child's ``ready`` unread) ends the child
    while its parent (this test) lives on, so no guard but the reader's is at work."""
    ours, theirs = socket.socketpair()
    environment = {**os.environ, "PYTHONPATH": str(PYTHON_ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "skyward.child", str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                             env=environment, cwd=str(TASKS_DIR), stdin=subprocess.DEVNULL)
    theirs.close()
    try:
        init = pickle.dumps(("init", {"sys_path": [str(PYTHON_ROOT), *sys.path], "slot": 0, "concurrency": 1,
                                      "cluster": None, "env": {}}))
        ours.sendall(_LENGTH.pack(len(init)) + init)
        ours.settimeout(GONE_WITHIN)
        assert ours.recv(1, socket.MSG_PEEK)  # ``ready`` came, and stays unread
        wait_until(lambda: _idle(child.pid), "the child waits for its first task")
        ours.close()  # with data unread: the child reads a reset, not an EOF
        assert child.wait(timeout=GONE_WITHIN) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_the_watchdog_ends_a_process_whose_parent_died() -> None:
    """Where the kernel cannot watch the parent (not Linux), a thread polls for it."""
    grandchild = (
        "import os, signal, sys\n"
        "from skyward.child import die_with_parent\n"
        "print(die_with_parent(0.05, kernel=False), flush=True)\n"
        "signal.pause()\n"
    )
    parent = ("import subprocess, sys, time\n"
              f"guarded = subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
              "print(guarded.pid, flush=True)\n"
              "time.sleep(600)\n")
    environment = {**os.environ, "PYTHONPATH": str(PYTHON_ROOT)}
    middle = subprocess.Popen([sys.executable, "-c", parent], env=environment, stdout=subprocess.PIPE)
    assert middle.stdout is not None
    guarded = 0
    try:
        # Two lines on one pipe, in either order: the grandchild's pid (from the middle process) and
        # the guard the grandchild set.
        lines = sorted(_lines(middle.stdout, 2))
        guarded = int(lines[0])
        assert lines[1] == b"watchdog"
        assert _alive(guarded)
        middle.kill()
        middle.wait()
        wait_until(lambda: not _alive(guarded), f"process {guarded} whose parent died ended")
    finally:
        if middle.poll() is None:
            middle.kill()
            middle.wait()
        if guarded and _alive(guarded):
            os.kill(guarded, signal.SIGKILL)


def _lines(stream: IO[bytes], count: int) -> List[bytes]:
    """``count`` lines of ``stream`` (read unbuffered), or an AssertionError when they do not come in time."""
    text = b""
    deadline = time.monotonic() + GONE_WITHIN
    while text.count(b"\n") < count:
        ready, _, _ = select.select([stream.fileno()], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(stream.fileno(), 4096) if ready else b""
        if not chunk:
            raise AssertionError(f"{count} lines did not come (got {text!r})")
        text += chunk
    return text.splitlines()[:count]
