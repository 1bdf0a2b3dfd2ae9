"""Tasks for test_collection_races.py: a task's own operations, in the order it makes them."""

import skyward as sky


def eventual_then_strong(name, n):
    """``n`` eventual increments (sent, not waited for), then a strong read of the same counter: the
    read comes after them in the task's program, so it sees all ``n``."""
    eventual = sky.counter(name, consistency="eventual")
    for _ in range(n):
        eventual.increment()
    return sky.counter(name).value


def increment_twice(name, go, sending):
    """Increments counter ``name``, waits for the file ``go``, says so in the file ``sending`` and
    increments again (on the connection this thread made the first time): what the second got."""
    import os
    import time

    counter = sky.counter(name)
    counter.increment()
    while not os.path.exists(go):
        time.sleep(0.02)
    open(sending, "w").close()
    try:
        return ["value", counter.increment()]
    except Exception as error:  # the head was lost under it: an error is the right answer
        return ["error", type(error).__name__, str(error)]


def acquire_after_cancel(name, ready, out):
    """Says it runs (the file ``ready``), waits to be stopped, catches the interrupt and goes on to
    acquire lock ``name``: what it got goes in the file ``out``."""
    import os
    import time

    lock = sky.lock(name)
    open(ready, "w").close()
    try:
        while True:
            time.sleep(0.02)
    except BaseException:  # the stop's interrupt: this task's thread runs on, its task ended
        pass
    try:
        got = f"acquired {lock.acquire()}"
    except BaseException as error:
        got = f"{type(error).__name__}: {error}"
    with open(f"{out}.part", "w") as file:
        file.write(got)
    os.replace(f"{out}.part", out)  # whole, or not there: the test reads it as soon as it is
