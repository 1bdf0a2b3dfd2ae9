"""Tasks for the remote reference tests (test_refs.py)."""

import threading


class Counter:
    """A picklable object with state, to tell the kept object itself from a copy."""

    def __init__(self, payload_size: int = 0) -> None:
        self.hits = 0
        self.payload = b"x" * payload_size


def make_counter(payload_size=0):
    return Counter(payload_size)


def bump(counter):
    counter.hits += 1
    return {"hits": counter.hits, "object": id(counter), "payload": len(counter.payload)}


def unpicklable():
    return threading.Lock()


def describe(value):
    return {"type": type(value).__name__, "value": value if isinstance(value, (int, str, list)) else None}
