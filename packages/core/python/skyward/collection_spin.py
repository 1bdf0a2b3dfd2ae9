"""Waiting for a message due within microseconds: a short spin, then the blocking wait.

A thread that blocks in ``recv`` (or ``poll``) for a message due in tens of microseconds — the
copy's ack of the head's write, the head's answer to a node's operation, and the next operation
of a task in a loop (for the head's thread serving its connection, and the copy's reader), when
the nodes share a machine or a fast link — sleeps, and the message wakes it: on a machine whose
other CPU was idle, that wake-up (the idle CPU woken, the thread moved back) costs more than the
message took to come.
Measured on the far bench's 2-vCPU test bed: a strong increment on the head went from 43 µs to
80 µs as soon as the copy's process ran on the other CPU, of which the task thread's own CPU went
from 27 µs to 46 µs; looking for the ack without sleeping for up to 30 µs took it back to ~50 µs.
On a slower machine of the same shape (Python 2.7× slower, a wake-up 50–60 µs), 50 µs was too
short to cover the other side's wake-up and every spin missed: a strong increment took 0.22 ms
with a 50 µs budget and 0.09–0.13 ms with 200 µs (docs/benchmarks.md).

So the waiting thread first looks (a read that does not wait) for up to its budget (200 µs by
default, ``SKYWARD_COLLECTIONS_SPIN_US``; 0: never), then blocks as before. The spin adapts: after
:data:`MISSES` spins in a row that ended without the answer (a far link, a long wait such as a
lock held by another task), the next :data:`PAUSE_FIRST` waits block at once, the pause doubling
up to :data:`PAUSE_MOST` while spins keep missing, so a link whose answers take longer than the
budget costs at most a spin every so often, not one per operation.
"""

from __future__ import annotations

import os
import time
from typing import Callable, TypeVar

T = TypeVar("T")

#: spins in a row without the answer after which the spinner pauses
MISSES = 8
#: waits that block at once after the first run of misses; doubled by each run after it
PAUSE_FIRST = 64
#: the longest pause (waits)
PAUSE_MOST = 4096
_DEFAULT_US = 200.0


def spin_budget_ns() -> int:
    """The spin budget in nanoseconds: ``SKYWARD_COLLECTIONS_SPIN_US`` (microseconds, 0: never spin,
    at most 1000), 200 µs when unset or not a number."""
    try:
        micros = float(os.environ.get("SKYWARD_COLLECTIONS_SPIN_US", _DEFAULT_US))
    except ValueError:
        micros = _DEFAULT_US
    if micros != micros:  # NaN
        micros = _DEFAULT_US
    return int(min(max(micros, 0.0), 1000.0) * 1000)


class Spinner:
    """One waiter's spin (a connection's, a channel's reader's): :meth:`look` before blocking.

    Not locked: one thread waits on it at a time (a connection's thread, a channel's reader); a
    count lost to a race between two would only move a pause by one wait."""

    __slots__ = ("_budget", "_misses", "_pause", "_skip", "caught", "missed", "paused")

    def __init__(self, budget_ns: int | None = None) -> None:
        self._budget = spin_budget_ns() if budget_ns is None else max(0, int(budget_ns))
        self._misses = 0
        self._pause = PAUSE_FIRST
        self._skip = 0
        #: answers the spin found, spins that ended without one, waits that blocked at once (paused)
        self.caught = 0
        self.missed = 0
        self.paused = 0

    def look(self, attempt: Callable[[], T | None]) -> T | None:
        """Calls ``attempt`` (which must not wait; None: nothing yet) until it gives something or the
        budget is spent; what it gave, or None — then the caller blocks as it would have."""
        if self._budget <= 0:
            return None
        if self._skip:
            self._skip -= 1
            self.paused += 1
            return None
        clock = time.perf_counter_ns
        deadline = clock() + self._budget
        while True:
            found = attempt()
            if found is not None:
                self.caught += 1
                self._misses = 0
                self._pause = PAUSE_FIRST
                return found
            if clock() >= deadline:
                break
        self.missed += 1
        self._misses += 1
        if self._misses >= MISSES:
            self._misses = 0
            self._skip = self._pause
            self._pause = min(self._pause * 2, PAUSE_MOST)
        return None


__all__ = ["MISSES", "PAUSE_FIRST", "PAUSE_MOST", "Spinner", "spin_budget_ns"]
