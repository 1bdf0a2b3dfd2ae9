"""Tasks for test_collection_races.py: a task's own operations, in the order it makes them."""

import skyward as sky


def eventual_then_strong(name, n):
    """``n`` eventual increments (sent, not waited for), then a strong read of the same counter: the
    read comes after them in the task's program, so it sees all ``n``."""
    eventual = sky.counter(name, consistency="eventual")
    for _ in range(n):
        eventual.increment()
    return sky.counter(name).value
