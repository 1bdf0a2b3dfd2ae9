"""Tasks for the plugin tests."""

from __future__ import annotations

import os
import time


def record(path: str, seconds: float = 0.0, tag: str = "") -> int:
    """Append ``<pid> task task <tag>`` to the hook log, after sleeping a little."""
    time.sleep(seconds)
    with open(path, "a") as log:
        log.write(f"{os.getpid()} task task {tag}\n")
    return os.getpid()


def record_until(path: str, release: str, tag: str = "") -> int:
    """Like :func:`record`, once the file ``release`` exists (the test says when the task ends);
    ``<pid> task started <tag>`` is logged first."""
    with open(path, "a") as log:
        log.write(f"{os.getpid()} task started {tag}\n")
    while not os.path.exists(release):
        time.sleep(0.02)
    return record(path, 0.0, tag)


def total_nodes() -> int:
    """What ``instance_info()`` tells the task of the pool's size."""
    import skyward

    return skyward.instance_info().total_nodes


def subtasks_when_released(path: str, release: str, n: int) -> list:
    """Once the file ``release`` exists, squares ``0..n-1`` in subtasks (``dispatch_tasks:fan_out``);
    ``<pid> task started parent`` is logged first."""
    with open(path, "a") as log:
        log.write(f"{os.getpid()} task started parent\n")
    while not os.path.exists(release):
        time.sleep(0.02)
    import dispatch_tasks

    return dispatch_tasks.fan_out(n)
