"""Distributed collections: pool-wide ``dict``, ``set``, ``counter``, ``queue``, ``barrier`` and ``lock`` by name.

    import skyward as sky

    def work(item):
        seen = sky.set("seen")
        if item in seen:
            return None
        seen.add(item)
        sky.counter("processed").increment()
        with sky.lock("checkpoint"):
            save_progress()
        return item

Every collection lives in one place, the worker of the pool's head node (node 0), which applies the
operations one at a time: ``"strong"`` consistency (the default) is linearizable. A task thread
of the worker holding them applies its operation itself; one on another node sends what it waits
for on a connection of its own to the head; otherwise the operation is handed to this process's
worker on the task's subtask channel (a process-executor child's goes through its worker), which
answers it from the store or asks the head over the cluster network (docs/protocol.md,
"Distributed collections") — never the client.
A blocked call only blocks its own thread: nothing else starves. Blocking calls (``queue.get``,
``barrier.wait``, ``lock.acquire``) are answered when they can be, never polled.

``consistency="eventual"`` (``dict``, ``set``, ``counter``) keeps a replica in this process: a read
answers from it while its entry is younger than ``SKYWARD_COLLECTIONS_STALENESS`` seconds (default
0.25), and a write is applied to it and sent without waiting for the answer. Reads may be stale by
design, up to that bound plus one round trip; this process always reads its own writes.

A lock is held by the task that acquired it, and released when that task ends (returns, fails, is
cancelled, or is lost with its node). The collections do not need a client: while the pool is
detached, or after its client was killed, calls are answered as before (docs/sessions.md,
"Collections across detach"). Each method has an ``_async`` variant for ``async def`` tasks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Tuple

from .context import runtime
from .dispatch import SubtaskError, running_task, send_subtask
from .protocol import to_wire

__all__ = ["Barrier", "Counter", "Dict", "Lock", "Queue", "Set", "barrier", "counter", "dict", "lock", "queue", "set"]

REF = "skyward.collections:op"
"""The reserved function name of a collection operation (answered by the workers, never run)."""

_MISSING: Any = object()
_builtin_dict = dict

#: per running task (its context), its eventual writes not answered yet: until they are, its other
#: operations go their way (the worker's, in order), not overtaking them on the thread's own
_unsettled: "_builtin_dict[Any, int]" = {}
_unsettled_lock = threading.Lock()


def _settling(context: Any, change: int) -> bool:
    """Counts ``change`` more unanswered eventual writes of ``context``'s task; whether any is left."""
    with _unsettled_lock:
        count = _unsettled.get(context, 0) + change
        if count > 0:
            _unsettled[context] = count
        else:
            _unsettled.pop(context, None)
        return count > 0


def staleness() -> float:
    """Seconds an eventual replica's entry answers reads before it is fetched again."""
    try:
        return max(0.0, float(os.environ.get("SKYWARD_COLLECTIONS_STALENESS", "0.25")))
    except ValueError:
        return 0.25


def _refused(error: SubtaskError) -> Exception:
    """The exception a task sees for an operation the collections refused."""
    kinds: Mapping[str, type[Exception]] = {"ValueError": ValueError, "TypeError": TypeError, "KeyError": KeyError}
    if error.kind == "exception" and error.type in kinds:
        return kinds[error.type](error.message)
    if error.kind == "exception":
        return RuntimeError(error.message)
    return error


def _send(kind: str, name: str, op: str, *args: Any, direct: bool = False,
          blocking: bool = False) -> concurrent.futures.Future[Any]:
    """Hands one operation to this process's worker (a process child's goes through its worker) on
    the task's subtask channel; the worker answers it from the pool's collections, not the client.
    ``direct``: a task thread of the worker applies it itself, or (``blocking``: the caller waits on
    this thread anyway) sends it to the head on a connection of its own — for what a caller waits
    for; a write not waited for goes the subtask way, answered in the task's context."""
    if runtime.cluster is None:
        raise RuntimeError(
            f"sky.{kind}() is only available inside a task running on a Skyward worker (no active pool)"
        )
    context = running_task()
    if context is None or runtime.subtask_sender is None:
        raise RuntimeError(
            f"sky.{kind}() must be used from a running task (its own thread, or a thread it started "
            "while it is the only task running in this process)"
        )
    request = to_wire([kind, name, op, *args], "args")
    # Behind the task's own eventual writes still under way: the same way as them, in order.
    caller = runtime.collection_caller if direct and not _settling(context, 0) else None
    future = caller(context, request, blocking) if caller is not None else None
    return future if future is not None else send_subtask(context, REF, request, {}, None)


def _wait(future: concurrent.futures.Future[Any]) -> Any:
    try:
        return future.result()
    except SubtaskError as error:
        raise _refused(error) from None


async def _wait_async(future: concurrent.futures.Future[Any]) -> Any:
    try:
        return await asyncio.wrap_future(future)
    except SubtaskError as error:
        raise _refused(error) from None


def _call(kind: str, name: str, op: str, *args: Any) -> Any:
    return _wait(_send(kind, name, op, *args, direct=True, blocking=True))


async def _call_async(kind: str, name: str, op: str, *args: Any) -> Any:
    return await _wait_async(_send(kind, name, op, *args, direct=True))


def _fire(kind: str, name: str, op: str, *args: Any) -> None:
    """An eventual write: sent, not waited for (a refusal is reported on the task's stderr)."""
    future = _send(kind, name, op, *args)
    context = running_task()  # counted before the task's next operation, uncounted by ``report``
    if context is not None:
        _settling(context, 1)

    def report(done: concurrent.futures.Future[Any]) -> None:
        if context is not None:
            _settling(context, -1)
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            import sys

            print(f"skyward: eventual {kind} {name!r}.{op} failed: {_refused(error) if isinstance(error, SubtaskError) else error}", file=sys.stderr)

    future.add_done_callback(report)


def _check_consistency(consistency: str | None) -> str:
    if consistency is None:
        return "strong"
    if consistency not in ("strong", "eventual"):
        raise ValueError(f'consistency must be "strong", "eventual" or None, not {consistency!r}')
    return consistency


def _key_form(value: Any) -> Any:
    """``value`` with the numbers Python holds equal made one: ``True``, ``1`` and ``1.0`` are all
    ``1`` (as they are one key of a dict), in lists and tuples too; every NaN stays NaN. The pool's
    store (``keyOf``) compares keys the same way."""
    cls = type(value)
    if cls is bool:
        return int(value)
    if cls is float and value.is_integer():
        return int(value)
    if cls is list or cls is tuple:
        return [_key_form(item) for item in value]
    return value


def _canon(value: Any) -> str:
    return repr(to_wire(_key_form(value), "key"))


class _Replica:
    """This process's eventual copies: (kind, name, key) → (value, when fetched).

    Each slot also counts this process's own writes to it: a fetch that was under way while a
    local write happened does not overwrite that write (this process always reads its own writes).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: _builtin_dict[Tuple[str, str, str], Tuple[Any, float]] = {}
        self.writes: _builtin_dict[Tuple[str, str, str], int] = {}

    def fresh(self, slot: Tuple[str, str, str]) -> Tuple[bool, Any]:
        with self.lock:
            entry = self.entries.get(slot)
        if entry is not None and time.monotonic() - entry[1] < staleness():
            return True, entry[0]
        return False, None

    def begin_fetch(self, slot: Tuple[str, str, str]) -> Tuple[int, float]:
        """Before a fetch: the slot's write count and the time (what ``fetched`` needs)."""
        with self.lock:
            return self.writes.get(slot, 0), time.monotonic()

    def fetched(self, slot: Tuple[str, str, str], value: Any, started: Tuple[int, float]) -> None:
        """Stores a fetched value, unless this process wrote the slot meanwhile."""
        with self.lock:
            if self.writes.get(slot, 0) == started[0]:
                self.entries[slot] = (value, started[1])

    def store(self, slot: Tuple[str, str, str], value: Any) -> None:
        """A local write (or a value a strong operation answered)."""
        with self.lock:
            self.writes[slot] = self.writes.get(slot, 0) + 1
            self.entries[slot] = (value, time.monotonic())

    def update(self, slot: Tuple[str, str, str], change: Callable[[Any], Any]) -> None:
        """Applies a local write to a cached entry (keeping its age); an uncached one stays uncached."""
        with self.lock:
            self.writes[slot] = self.writes.get(slot, 0) + 1
            entry = self.entries.get(slot)
            if entry is not None:
                self.entries[slot] = (change(entry[0]), entry[1])


_replica = _Replica()


class _Collection:
    __slots__ = ("name", "consistency")
    _kind = ""

    def __init__(self, name: str, consistency: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self._kind}'s name must be a non-empty string, not {name!r}")
        self.name = name
        self.consistency = _check_consistency(consistency)

    @property
    def _eventual(self) -> bool:
        return self.consistency == "eventual"

    def __repr__(self) -> str:
        return f"sky.{self._kind}({self.name!r}, consistency={self.consistency!r})"


class Dict(_Collection):
    """A pool-wide dict (``sky.dict(name)``): keys and values are the protocol's values; ``None`` is a value."""

    _kind = "dict"

    def _lookup(self, key: Any) -> Tuple[bool, Any]:
        if self._eventual:
            slot = ("dict", self.name, _canon(key))
            hit, entry = _replica.fresh(slot)
            if hit:
                return entry
            started = _replica.begin_fetch(slot)
            found, value = _call("dict", self.name, "get", key)
            _replica.fetched(slot, (found, value), started)
            return found, value
        found, value = _call("dict", self.name, "get", key)
        return found, value

    async def _lookup_async(self, key: Any) -> Tuple[bool, Any]:
        if self._eventual:
            slot = ("dict", self.name, _canon(key))
            hit, entry = _replica.fresh(slot)
            if hit:
                return entry
            started = _replica.begin_fetch(slot)
            found, value = await _call_async("dict", self.name, "get", key)
            _replica.fetched(slot, (found, value), started)
            return found, value
        found, value = await _call_async("dict", self.name, "get", key)
        return found, value

    def _write(self, op: str, key: Any, *rest: Any) -> Any:
        """An eventual write to the replica, then sent without waiting."""
        value = rest[0] if rest else None
        slot = ("dict", self.name, _canon(key))
        _replica.store(slot, (op == "set", value if op == "set" else None))
        _fire("dict", self.name, op, key, *rest)

    def __getitem__(self, key: Any) -> Any:
        found, value = self._lookup(key)
        if not found:
            raise KeyError(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def set(self, key: Any, value: Any) -> None:
        """``d[key] = value``."""
        if self._eventual:
            self._write("set", key, value)
        else:
            _call("dict", self.name, "set", key, value)

    async def set_async(self, key: Any, value: Any) -> None:
        if self._eventual:
            self._write("set", key, value)
        else:
            await _call_async("dict", self.name, "set", key, value)

    def __delitem__(self, key: Any) -> None:
        if self._eventual:
            self._write("pop", key)
            return
        found, _ = _call("dict", self.name, "pop", key)
        if not found:
            raise KeyError(key)

    async def delete_async(self, key: Any) -> None:
        """``del d[key]``."""
        if self._eventual:
            self._write("pop", key)
            return
        found, _ = await _call_async("dict", self.name, "pop", key)
        if not found:
            raise KeyError(key)

    def __contains__(self, key: Any) -> bool:
        return self._lookup(key)[0]

    async def contains_async(self, key: Any) -> bool:
        """``key in d``."""
        return (await self._lookup_async(key))[0]

    def get(self, key: Any, default: Any = None) -> Any:
        found, value = self._lookup(key)
        return value if found else default

    async def get_async(self, key: Any, default: Any = None) -> Any:
        found, value = await self._lookup_async(key)
        return value if found else default

    async def getitem_async(self, key: Any) -> Any:
        """``d[key]``: raises ``KeyError`` for a missing key."""
        found, value = await self._lookup_async(key)
        if not found:
            raise KeyError(key)
        return value

    @staticmethod
    def _pairs(items: Any, more: Mapping[str, Any]) -> list[list[Any]]:
        pairs: list[list[Any]] = []
        if items is not None:
            source = items.items() if hasattr(items, "items") else items
            for pair in source:
                key, value = pair
                pairs.append([key, value])
        pairs.extend([key, value] for key, value in more.items())
        return pairs

    def update(self, items: Mapping[Any, Any] | Iterable[Tuple[Any, Any]] | None = None, **more: Any) -> None:
        """Stores every entry in one step (no reader sees half of them)."""
        pairs = self._pairs(items, more)
        if self._eventual:
            for key, value in pairs:
                _replica.store(("dict", self.name, _canon(key)), (True, value))
            _fire("dict", self.name, "update", pairs)
        else:
            _call("dict", self.name, "update", pairs)

    async def update_async(self, items: Mapping[Any, Any] | Iterable[Tuple[Any, Any]] | None = None, **more: Any) -> None:
        pairs = self._pairs(items, more)
        if self._eventual:
            self.update(pairs)
        else:
            await _call_async("dict", self.name, "update", pairs)

    def pop(self, key: Any, default: Any = None) -> Any:
        """Removes ``key`` and returns its value, or ``default`` when it is missing (always strong)."""
        found, value = _call("dict", self.name, "pop", key)
        if self._eventual:
            _replica.store(("dict", self.name, _canon(key)), (False, None))
        return value if found else default

    async def pop_async(self, key: Any, default: Any = None) -> Any:
        found, value = await _call_async("dict", self.name, "pop", key)
        if self._eventual:
            _replica.store(("dict", self.name, _canon(key)), (False, None))
        return value if found else default

    def __len__(self) -> int:
        return int(_call("dict", self.name, "len"))

    async def len_async(self) -> int:
        return int(await _call_async("dict", self.name, "len"))

    def __iter__(self) -> Iterator[Any]:
        """Iterates over a snapshot of the keys."""
        return iter(self.keys())

    def items(self) -> list[Tuple[Any, Any]]:
        """A snapshot of the entries."""
        return [(key, value) for key, value in _call("dict", self.name, "items")]

    def keys(self) -> list[Any]:
        return [key for key, _ in self.items()]

    def values(self) -> list[Any]:
        return [value for _, value in self.items()]


class Set(_Collection):
    """A pool-wide set (``sky.set(name)``) of the protocol's values."""

    _kind = "set"

    def add(self, value: Any) -> bool | None:
        """Adds ``value``; returns whether it was new (an atomic test-and-add), ``None`` when eventual."""
        if self._eventual:
            _replica.store(("set", self.name, _canon(value)), True)
            _fire("set", self.name, "add", value)
            return None
        return bool(_call("set", self.name, "add", value))

    async def add_async(self, value: Any) -> bool | None:
        if self._eventual:
            return self.add(value)
        return bool(await _call_async("set", self.name, "add", value))

    def discard(self, value: Any) -> None:
        if self._eventual:
            _replica.store(("set", self.name, _canon(value)), False)
            _fire("set", self.name, "discard", value)
        else:
            _call("set", self.name, "discard", value)

    async def discard_async(self, value: Any) -> None:
        if self._eventual:
            self.discard(value)
        else:
            await _call_async("set", self.name, "discard", value)

    def __contains__(self, value: Any) -> bool:
        if self._eventual:
            slot = ("set", self.name, _canon(value))
            hit, member = _replica.fresh(slot)
            if hit:
                return bool(member)
            started = _replica.begin_fetch(slot)
            member = bool(_call("set", self.name, "has", value))
            _replica.fetched(slot, member, started)
            return member
        return bool(_call("set", self.name, "has", value))

    async def contains_async(self, value: Any) -> bool:
        """``value in s``."""
        if self._eventual:
            slot = ("set", self.name, _canon(value))
            hit, member = _replica.fresh(slot)
            if hit:
                return bool(member)
            started = _replica.begin_fetch(slot)
            member = bool(await _call_async("set", self.name, "has", value))
            _replica.fetched(slot, member, started)
            return member
        return bool(await _call_async("set", self.name, "has", value))

    def __len__(self) -> int:
        return int(_call("set", self.name, "len"))

    async def len_async(self) -> int:
        return int(await _call_async("set", self.name, "len"))


class Counter(_Collection):
    """A pool-wide integer counter (``sky.counter(name)``)."""

    _kind = "counter"

    def _slot(self) -> Tuple[str, str, str]:
        return ("counter", self.name, "")

    @property
    def value(self) -> int:
        if self._eventual:
            hit, value = _replica.fresh(self._slot())
            if hit:
                return value
            started = _replica.begin_fetch(self._slot())
            value = _call("counter", self.name, "value")
            _replica.fetched(self._slot(), value, started)
            return value
        return _call("counter", self.name, "value")

    async def value_async(self) -> int:
        if self._eventual:
            hit, value = _replica.fresh(self._slot())
            if hit:
                return value
            started = _replica.begin_fetch(self._slot())
            value = await _call_async("counter", self.name, "value")
            _replica.fetched(self._slot(), value, started)
            return value
        return await _call_async("counter", self.name, "value")

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)

    def _change(self, op: str, n: int) -> int | None:
        if type(n) is not int:
            raise TypeError(f"n must be an int, not {type(n).__name__}")
        if self._eventual:
            delta = n if op == "increment" else -n
            _replica.update(self._slot(), lambda value: value + delta)
            _fire("counter", self.name, op, n)
            return None
        return _call("counter", self.name, op, n)

    def increment(self, n: int = 1) -> int | None:
        """Adds ``n``; returns the new value (``None`` with eventual consistency, which does not wait)."""
        return self._change("increment", n)

    def decrement(self, n: int = 1) -> int | None:
        """Subtracts ``n``; returns the new value (``None`` with eventual consistency)."""
        return self._change("decrement", n)

    async def increment_async(self, n: int = 1) -> int | None:
        if self._eventual:
            return self._change("increment", n)
        return await _call_async("counter", self.name, "increment", n)

    async def decrement_async(self, n: int = 1) -> int | None:
        if self._eventual:
            return self._change("decrement", n)
        return await _call_async("counter", self.name, "decrement", n)

    def reset(self, value: int = 0) -> int:
        """Sets the counter to ``value`` in one step (always strong: it waits for the answer)."""
        result = _call("counter", self.name, "reset", value)
        if self._eventual:
            _replica.store(self._slot(), result)
        return result

    async def reset_async(self, value: int = 0) -> int:
        result = await _call_async("counter", self.name, "reset", value)
        if self._eventual:
            _replica.store(self._slot(), result)
        return result


class Queue(_Collection):
    """A pool-wide FIFO queue (``sky.queue(name)``): each item is taken by exactly one ``get``."""

    _kind = "queue"

    def __init__(self, name: str) -> None:
        super().__init__(name)

    def put(self, value: Any) -> None:
        _call("queue", self.name, "put", value)

    async def put_async(self, value: Any) -> None:
        await _call_async("queue", self.name, "put", value)

    @staticmethod
    def _timeout(timeout: float | None) -> float | None:
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
            raise ValueError(f"timeout must be None or a non-negative number of seconds, not {timeout!r}")
        return None if timeout is None else float(timeout)

    def get(self, timeout: float | None = None) -> Any:
        """The oldest item, waiting up to ``timeout`` seconds (``None``: as long as it takes); ``None`` on timeout."""
        found, value = _call("queue", self.name, "get", self._timeout(timeout))
        return value if found else None

    async def get_async(self, timeout: float | None = None) -> Any:
        found, value = await _call_async("queue", self.name, "get", self._timeout(timeout))
        return value if found else None

    def empty(self) -> bool:
        return bool(_call("queue", self.name, "empty"))

    async def empty_async(self) -> bool:
        return bool(await _call_async("queue", self.name, "empty"))

    def __len__(self) -> int:
        return int(_call("queue", self.name, "len"))

    async def len_async(self) -> int:
        return int(await _call_async("queue", self.name, "len"))


class Barrier(_Collection):
    """A pool-wide barrier (``sky.barrier(name, n)``) for ``n`` callers, reusable round after round."""

    __slots__ = ("n",)
    _kind = "barrier"

    def __init__(self, name: str, n: int) -> None:
        super().__init__(name)
        if type(n) is not int or n < 1:
            raise ValueError(f"n must be a positive int, not {n!r}")
        self.n = n

    def _answer(self, index: Any, timeout: float | None) -> int:
        if index is None:
            raise TimeoutError(f"barrier {self.name!r}: fewer than {self.n} callers arrived within {timeout} s")
        return int(index)

    def wait(self, timeout: float | None = None) -> int:
        """Waits until ``n`` callers have arrived; returns this caller's arrival index (0 … n-1).

        Raises ``TimeoutError`` when ``timeout`` seconds pass first (this caller then no longer counts).
        """
        return self._answer(_call("barrier", self.name, "wait", self.n, Queue._timeout(timeout)), timeout)

    async def wait_async(self, timeout: float | None = None) -> int:
        return self._answer(await _call_async("barrier", self.name, "wait", self.n, Queue._timeout(timeout)), timeout)


class Lock(_Collection):
    """A pool-wide mutex (``sky.lock(name, timeout=30)``), held by the task that acquired it.

    ``acquire`` waits up to ``timeout`` seconds and returns ``False`` if it did not get the lock;
    ``with lock:`` raises ``TimeoutError`` then. The lock is released when its task ends, however.
    It is not reentrant: a task acquiring a lock it holds waits for itself until the timeout.
    """

    __slots__ = ("timeout",)
    _kind = "lock"

    def __init__(self, name: str, timeout: float | None = 30) -> None:
        super().__init__(name)
        self.timeout = Queue._timeout(timeout)

    def acquire(self, timeout: float | None = _MISSING) -> bool:
        wait = self.timeout if timeout is _MISSING else Queue._timeout(timeout)
        return bool(_call("lock", self.name, "acquire", wait))

    async def acquire_async(self, timeout: float | None = _MISSING) -> bool:
        wait = self.timeout if timeout is _MISSING else Queue._timeout(timeout)
        return bool(await _call_async("lock", self.name, "acquire", wait))

    def release(self) -> None:
        _call("lock", self.name, "release")

    async def release_async(self) -> None:
        await _call_async("lock", self.name, "release")

    def locked(self) -> bool:
        return bool(_call("lock", self.name, "locked"))

    def __enter__(self) -> "Lock":
        if not self.acquire():
            raise TimeoutError(f"lock {self.name!r} was not acquired within {self.timeout} s")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    async def __aenter__(self) -> "Lock":
        if not await self.acquire_async():
            raise TimeoutError(f"lock {self.name!r} was not acquired within {self.timeout} s")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release_async()


def dict(name: str, *, consistency: str | None = None) -> Dict:  # noqa: A001 - the reference's name
    """The pool-wide dict ``name`` (``consistency``: ``"strong"``, the default, or ``"eventual"``)."""
    return Dict(name, consistency)


def set(name: str, *, consistency: str | None = None) -> Set:  # noqa: A001
    """The pool-wide set ``name``."""
    return Set(name, consistency)


def counter(name: str, *, consistency: str | None = None) -> Counter:
    """The pool-wide counter ``name``."""
    return Counter(name, consistency)


def queue(name: str) -> Queue:
    """The pool-wide FIFO queue ``name``."""
    return Queue(name)


def barrier(name: str, n: int) -> Barrier:
    """The pool-wide barrier ``name`` for ``n`` callers."""
    return Barrier(name, n)


def lock(name: str, timeout: float | None = 30) -> Lock:
    """The pool-wide lock ``name``; ``acquire`` waits up to ``timeout`` seconds."""
    return Lock(name, timeout)
