"""Tasks for test_collections.py: collection calls the head node's worker answers."""

import time

import skyward as sky


def counter_ops():
    c = sky.counter("hits")
    return [c.increment(3), c.decrement(), c.reset(7), c.value, int(c)]


def dict_ops():
    d = sky.dict("d")
    d["k"] = None
    return {"get": d.get("k", "default"), "missing": d.get("gone", "default"), "in": "k" in d}


def refused():
    try:
        sky.barrier("b", 2).wait()
    except ValueError as error:
        return f"ValueError: {error}"
    return "no error"


def lock_timeout():
    lock = sky.lock("l", timeout=0.5)
    got = lock.acquire()
    try:
        with lock:
            pass
    except TimeoutError as error:
        return [got, str(error)]
    return [got, "entered"]


def eventual_reads(n):
    import os

    previous = os.environ.get("SKYWARD_COLLECTIONS_STALENESS")
    os.environ["SKYWARD_COLLECTIONS_STALENESS"] = "600"  # the replica answers every read after the first
    try:
        d = sky.dict("ev", consistency="eventual")
        return [d.get("k") for _ in range(n)]
    finally:
        if previous is None:
            del os.environ["SKYWARD_COLLECTIONS_STALENESS"]
        else:
            os.environ["SKYWARD_COLLECTIONS_STALENESS"] = previous


def blocking_get():
    return sky.queue("q").get(timeout=None)


def late_increment(delay):
    time.sleep(delay)
    return sky.counter("c").increment()


def late_eventual_write(delay):
    time.sleep(delay)
    sky.counter("ev", consistency="eventual").increment(5)  # sent, not waited for
    return "written"


def hold_lock(name):
    return sky.lock(name).acquire()  # never released: the task's end releases it


def increment(name, n):
    return sky.counter(name).increment(n)


def queue_get(name, timeout):
    return sky.queue(name).get(timeout=timeout)


def barrier_wait(name, n):
    return sky.barrier(name, n).wait(timeout=30)


def put_odd_values(name):
    """Values the wire tags: a big integer, a key starting with $, bytes, a NaN."""
    sky.queue(name).put({"$big": 2**60, "bytes": b"\x00\xff", "nan": float("nan"), "list": [1, (2, 3)]})
    d = sky.dict(name)
    d[2**60] = "big"
    d[2.0**60] = "big float"
    return [d[2**60], len(d)]


def write_many(name, n):
    """``n`` acknowledged writes: a counter, a dict entry and a queue item each."""
    for index in range(n):
        sky.counter(name).increment()
        sky.dict(name)[index] = f"v{index}"
        sky.queue(name).put(index)
    return sky.counter(name).value


def read_back(name):
    d = sky.dict(name)
    q = sky.queue(name)
    return {"counter": sky.counter(name).value, "entries": len(d), "v3": d.get(3), "queued": len(q)}


def add_steadily(name, count, pause, errors_path=None):
    """Adds 0 … count-1 to set ``name`` one at a time: which adds were acknowledged, and the errors
    (each also appended to ``errors_path`` as it happens, when given: a test can wait for one)."""
    acked, errors = [], []
    for index in range(count):
        try:
            sky.set(name).add(index)
            acked.append(index)
        except RuntimeError as error:
            errors.append([index, str(error)])
            if errors_path is not None:
                with open(errors_path, "a") as written:
                    written.write(f"{index}\n")
        time.sleep(pause)
    return {"acked": acked, "errors": errors}


def hold_lock_and_wait(name):
    """Acquires lock ``name`` and waits on queue ``name`` for ever (the task holds the lock while it lives)."""
    sky.lock(name).acquire()
    return sky.queue(name).get()


async def increment_async(name, n):
    """An ``async def`` task's increments (through its worker, not the thread's own connection)."""
    counter = sky.counter(name)
    for _ in range(n - 1):
        await counter.increment_async()
    return await counter.increment_async()
