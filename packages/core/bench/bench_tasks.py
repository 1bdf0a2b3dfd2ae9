"""Task functions the benchmark dispatches: as cheap as a task can be, so what is measured is the pool."""


def noop():
    return None


def echo(value):
    return value


def pid():
    import os

    return os.getpid()


def nap(seconds):
    import time

    time.sleep(seconds)
    return seconds


def sleep(seconds):
    import time

    time.sleep(seconds)
    return seconds


def collection_ops(kind, consistency, ops):
    """``ops`` collection operations in a loop; returns operations per second inside the task."""
    import time

    import skyward as sky

    if kind == "counter-increment":
        counter = sky.counter("bench-counter", consistency=consistency)
        started = time.perf_counter()
        for _ in range(ops):
            counter.increment()
        elapsed = time.perf_counter() - started
        int(sky.counter("bench-counter"))  # a strong read: every eventual increment has arrived
        return ops / elapsed
    if kind == "dict-read":
        d = sky.dict("bench-dict", consistency=consistency)
        if consistency == "strong":
            d["key"] = "value"
        started = time.perf_counter()
        for _ in range(ops):
            d["key"]
        return ops / (time.perf_counter() - started)
    raise ValueError(kind)
