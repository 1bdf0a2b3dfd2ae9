"""Task functions the worker tests run."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import skyward as sky


def add(a, b):
    return a + b


def noop():
    return None


def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


class Model:
    pass


def unsendable():
    return [1, 2, {"model": Model()}]


class TaskFailure(Exception):
    pass


def boom(message="boom"):
    raise ValueError(message)


def custom_boom():
    raise TaskFailure("custom failure")


def sleep(seconds, value=None):
    time.sleep(seconds)
    return value


def pid():
    return os.getpid()


def die(code=1):
    sys.stdout.flush()
    os._exit(code)


def count(n):
    for i in range(n):
        yield i


def count_then_fail(n):
    for i in range(n):
        yield i
    raise RuntimeError("failed mid-stream")


def count_slowly(n, delay):
    for i in range(n):
        time.sleep(delay)
        yield i


def take(items, k):
    """Read k items of an input stream (lazily) and return them."""
    out = []
    for item in items:
        out.append(item)
        if len(out) == k:
            break
    return out


def total(items):
    return sum(items)


def say(text, err=False):
    print(text, file=sys.stderr if err else sys.stdout)
    return "said"


def say_partial(text):
    sys.stdout.write(text)
    time.sleep(0.3)
    return "done"


@sky.stdout(only="head")
def head_says(text):
    print(text)
    print("to stderr", file=sys.stderr)
    return "ok"


@sky.stdout(only=lambda info: info.node == 1)
def node_one_says(text):
    print(text)
    return "ok"


@sky.silent
def quiet(text):
    print(text)
    print(text, file=sys.stderr)
    return "quiet"


@sky.stdout(only="head")
def head_count(n):
    for i in range(n):
        print(f"line {i}")
        yield i


def redirected():
    lines = []
    with sky.redirect_output(lines.append) as (out, err):
        print("captured one")
        print("captured two", file=sys.stderr)
    print("visible")
    return lines


def info():
    i = sky.instance_info()
    return {
        "node": i.node, "worker": i.worker, "total_nodes": i.total_nodes,
        "workers_per_node": i.workers_per_node, "global_worker_index": i.global_worker_index,
        "total_workers": i.total_workers, "is_head": i.is_head, "is_head_fn": sky.is_head(),
        "head_addr": i.head_addr, "head_port": i.head_port, "job_id": i.job_id,
        "peers": [[p.node, p.private_ip, p.public_ip] for p in i.peers],
        "accelerator": None if i.accelerator is None else [i.accelerator.type, i.accelerator.count],
        "hostname": i.hostname,
    }


def env(name):
    return os.environ.get(name)


def my_shard(n, **options):
    return sky.shard(list(range(n)), **options)


async def async_add(a, b):
    await asyncio.sleep(0.01)
    return a + b


def collected(n):
    for i in range(n):
        yield i * i


@sky.function
def decorated(x):
    return x * 2


@sky.function(timeout=600)
def decorated_with_timeout(x):
    return x * 3


class Holder:
    @staticmethod
    def method(x):
        return f"method {x}"


def types():
    return {
        "tuple": (1, 2), "bytes": b"\x00\x01", "bytearray": bytearray(b"ab"), "nan": float("nan"),
        "big": 2**70, "$escaped": True,
    }


def print_from_thread(text):
    import threading

    thread = threading.Thread(target=print, args=(text,))
    thread.start()
    thread.join()
    return "printed"


def slow_then_value(seconds, value):
    time.sleep(seconds)
    print("late output")
    return value


def say_then_value(text, seconds, value):
    print(text, flush=True)
    time.sleep(seconds)
    return value
