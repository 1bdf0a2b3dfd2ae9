"""A detached worker's TTL is an idle grace period: while the tasks it was detached with still run,
it does not stop (their results are what the client comes back for); it stops once they are done
and no client came within the TTL after that. A real worker subprocess on loopback."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import PYTHON_ROOT, TASKS_DIR, Client, WorkerProcess, connect  # noqa: E402

WRITE_AFTER = '''
import time


def write_after(seconds, path):
    time.sleep(seconds)
    with open(path, "w") as file:
        file.write("done")
    return "done"
'''


def _until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_detached_worker_outlives_its_ttl_while_its_tasks_run_then_keeps_the_ttl(tmp_path: Path) -> None:
    (tmp_path / "ttl_tasks.py").write_text(WRITE_AFTER)
    written = tmp_path / "written"
    marker = tmp_path / "destroyed"
    env = {"PYTHONPATH": os.pathsep.join([str(PYTHON_ROOT), str(TASKS_DIR), str(tmp_path)])}
    with WorkerProcess("--self-destruct", f"touch {marker}", "--workdir", str(tmp_path), env=env) as worker:
        first = connect(worker)
        # A task five times the TTL long, then the client detaches (release with keep) and goes.
        first.submit("long", "ttl_tasks:write_after", 1.5, str(written))
        first.send({"t": "release", "ttl": 0.3, "keep": True}, {"t": "ping", "ts": 1.0})
        first.wait_for(lambda m: m["t"] == "pong")
        first.close()
        # The task runs to its end: the TTL, long past, did not stop the worker under it.
        assert _until(written.exists, 20), "the task was stopped with its worker at the TTL"
        assert not marker.exists()
        # Then the grace period: a client that comes within it collects the result.
        second = Client(worker.port)
        assert second.hello()["results"] == ["long"]
        second.send({"t": "collect", "ids": ["long"]})
        assert second.terminal("long") == {"t": "result", "id": "long", "value": "done"}
        second.send({"t": "release", "ttl": 0.3, "keep": True})
        second.close()
        # Idle now, with nobody attached: it stops at its TTL, self-destructing.
        assert worker.wait(timeout=10) == 0
        assert marker.exists()
