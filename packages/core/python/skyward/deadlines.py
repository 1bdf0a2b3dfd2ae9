"""Task timeouts: one timer, at the earliest deadline, instead of one per task.

The heap holds ``(deadline, seq, task id)``; ``_timed`` maps a timed task's id to its entry's
``seq`` and the task. An entry whose ``seq`` no longer matches (the task finished, or its clock was
restarted) is stale: skipped when due, or swept once stale entries outnumber live ones.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from typing import Callable, Dict, List, Tuple

from .task import Task


class Deadlines:
    """The running tasks' timeouts; ``on_timeout(task)`` is called on the loop when one runs out."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_timeout: Callable[[Task], None]) -> None:
        self._loop = loop
        self._on_timeout = on_timeout
        self._deadlines: List[Tuple[float, int, str]] = []
        self._timed: Dict[str, Tuple[int, Task]] = {}
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._armed_at = math.inf

    def start(self, task: Task) -> None:
        """Times ``task`` out ``task.timeout`` seconds from now (once: a task started again keeps its clock)."""
        if task.id in self._timed:
            return
        deadline = self._loop.time() + task.timeout  # type: ignore[operator]
        self._seq += 1
        self._timed[task.id] = (self._seq, task)
        heapq.heappush(self._deadlines, (deadline, self._seq, task.id))
        if deadline < self._armed_at:
            self._arm(deadline)
        elif len(self._deadlines) > 2 * len(self._timed) + 1024:
            # Mostly entries of tasks that finished in time: keep only the running ones (in place).
            timed, deadlines = self._timed, self._deadlines
            deadlines[:] = [entry for entry in deadlines if timed.get(entry[2], (0,))[0] == entry[1]]
            heapq.heapify(deadlines)

    def restart(self, task: Task) -> None:
        """Times ``task`` out ``task.timeout`` seconds from now, replacing its clock (a declared timeout)."""
        self._timed.pop(task.id, None)  # its old heap entry no longer matches: dropped when due
        if task.state == "running" and task.timeout is not None:
            self.start(task)

    def forget(self, task: Task) -> None:
        """``task`` ended: its clock stops (its heap entry is now stale: skipped or swept later)."""
        entry = self._timed.get(task.id)
        if entry is not None and entry[1] is task:
            del self._timed[task.id]

    def close(self) -> None:
        """No more timeouts (the worker is stopping)."""
        if self._timer is not None:
            self._timer.cancel()

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_at = deadline
        self._timer = self._loop.call_at(deadline, self._due)

    def _due(self) -> None:
        self._timer = None
        self._armed_at = math.inf
        deadlines, timed = self._deadlines, self._timed
        now = self._loop.time()
        while deadlines:
            deadline, seq, task_id = deadlines[0]
            entry = timed.get(task_id)
            if entry is None or entry[0] != seq:
                heapq.heappop(deadlines)  # the task finished in time
            elif deadline <= now:
                heapq.heappop(deadlines)
                self._on_timeout(entry[1])
            else:
                self._arm(deadline)
                return
