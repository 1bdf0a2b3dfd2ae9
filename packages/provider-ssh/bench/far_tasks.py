"""Tasks of the far-client benchmark (bench/far-client.ts): each times its own loop inside the task
and returns milliseconds per operation, so the client's link only counts where the operation
itself crosses it."""


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def increments(ops):
    """A strong counter's ``increment()`` ``ops`` times; ms per increment."""
    import time

    import skyward as sky

    counter = sky.counter("far-counter", consistency="strong")
    started = time.perf_counter()
    for _ in range(ops):
        counter.increment()
    return (time.perf_counter() - started) * 1000 / ops


def increment_cpu(ops):
    """The task thread's own CPU (``time.thread_time``, its kernel time included) per strong
    ``increment()``, ms: what a busy machine sways less than the wall clock."""
    import time

    import skyward as sky

    counter = sky.counter("far-counter", consistency="strong")
    started = time.thread_time_ns()
    for _ in range(ops):
        counter.increment()
    return (time.thread_time_ns() - started) / 1e6 / ops


def interpreter():
    """The worker's Python (version, path) and its speed: core's ``bench/reference_loop.py``, shipped
    beside this file, which ``collection_loopback.py`` prints too."""
    from reference_loop import interpreter as describe

    return describe()


def lock_cycles(ops):
    """A lock acquired and released ``ops`` times; ms per acquire + release."""
    import time

    import skyward as sky

    lock = sky.lock("far-lock")
    started = time.perf_counter()
    for _ in range(ops):
        with lock:
            pass
    return (time.perf_counter() - started) * 1000 / ops


def barrier_rounds(rounds):
    """``rounds`` rounds of a 2-caller barrier (run on both nodes at once); ms per round."""
    import time

    import skyward as sky

    barrier = sky.barrier("far-barrier", 2)
    barrier.wait()  # both callers are here: the rounds below are not waiting for a slow start
    started = time.perf_counter()
    for _ in range(rounds):
        barrier.wait()
    return (time.perf_counter() - started) * 1000 / rounds


def start_echo(port):
    """Serves a TCP echo on ``port`` from a thread that outlives the task (the thread executor keeps
    the worker's process): the other end of the floor's round trips."""
    import socket
    import threading

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen()

    def serve():
        while True:
            connection, _ = listener.accept()
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := connection.recv(65536):
                connection.sendall(data)
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    return port


def peer_round_trip(host, port, tries):
    """The floor: one request/response round trip from this node to another's echo, median ms."""
    import socket
    import time

    connection = socket.create_connection((host, port))
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    samples = []
    for _ in range(tries):
        started = time.perf_counter()
        connection.sendall(b"x")
        connection.recv(1)
        samples.append((time.perf_counter() - started) * 1000)
    connection.close()
    return _median(samples)


def blob(mebibytes):
    """``mebibytes`` MiB of bytes (kept on its node with ``withKeep()``)."""
    return bytes(mebibytes * 1024 * 1024)


def size_of(value):
    """The length of what it is given: the kept object, brought to this node."""
    return len(value)


def nap(seconds):
    """One item of the nested fan-out: waits ``seconds`` (I/O-bound work, as in guide 10)."""
    import time

    time.sleep(seconds)


def nested_fan_out(items, seconds):
    """Guide 10's fan-out without joblib: ``items`` nested tasks of ``seconds`` each, submitted at once
    from this task over every slot of the pool (``skyward.dispatch``, the path the joblib backend
    takes, one item per nested task: joblib's batching would send fewer). The ideal wall time is
    ``items × seconds / slots``; efficiency = ideal / measured."""
    import time

    from skyward.dispatch import capacity, submit

    slots = capacity()
    started = time.perf_counter()
    futures = [submit("far_tasks:nap", args=[seconds]) for _ in range(items)]
    for future in futures:
        future.result()
    wall = time.perf_counter() - started
    return {"slots": slots, "wall": wall, "ideal": items * seconds / slots}


def answered_by_copy():
    """How many answers to this node's collection operations its copy of the collections gave
    (skyward/collection_mailbox.py): a task on the node holding the copy has its strong writes
    answered there, one round trip between nodes instead of two. -1: a runtime without that path."""
    from skyward.context import runtime

    service = getattr(runtime.collection_caller, "__self__", None)
    mailbox = getattr(service, "_mailbox", None)
    return -1 if mailbox is None else mailbox.delivered
