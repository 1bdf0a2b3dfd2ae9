"""This Python and its speed, for the collection benches: ``collection_loopback.py`` here and the
test bed's ``far_tasks.interpreter`` (packages/provider-ssh/bench, shipped to the hosts beside it).

The collections' figures are mostly Python's CPU, and two builds of one version can differ by a
third (a build without profile-guided optimization runs the same code slower): figures taken on
interpreters whose speed differs do not compare. Printed, never asserted.
"""

import sys
import time


def interpreter() -> str:
    """The running Python (version, path) and the thread CPU of a fixed loop of plain Python (1,000
    dict lookups and calls, best of 200), µs."""
    table = {"a": 1}
    best = None
    for _ in range(200):
        started = time.thread_time_ns()
        for _ in range(1000):
            table.get("a")
            len(table)
        spent = time.thread_time_ns() - started
        best = spent if best is None else min(best, spent)
    return f"Python {sys.version.split()[0]} ({sys.executable}): {(best or 0) / 1000:.1f} µs per reference loop"
