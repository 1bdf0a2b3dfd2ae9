"""The authority of a pool's distributed collections, held by the head node's worker.

Every ``dict``, ``set``, ``counter``, ``queue``, ``barrier`` and ``lock`` lives here, and every
operation — a task's on this node, one relayed by another node's worker, the client's own — is
applied on the worker's event loop, one at a time, in arrival order. That single ordering point is
what makes ``"strong"`` linearizable.

Blocking operations are answered when they can be, never polled: a queue ``get`` waits in the
queue's list of takers, a lock ``acquire`` in the lock's list of waiters (its "expiry" is the end
of the holder's task, not a clock), a barrier ``wait`` until its ``n``-th caller arrives. Each wait
has its own timer for its timeout, and is dropped when its owner ends.

The worker's event loop is not the only caller: a task thread on the head applies its own
operations directly (no hand-off to the loop), so every entry point is called with :attr:`lock`
held, and a wait's timer is started and stopped on the loop whichever thread asks.

Values are kept as the wire decoder gives them; keys compare as a Python dict's do (``True``, ``1``
and ``1.0`` are one key), except that every NaN is one key (no identity crosses the wire).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import OrderedDict, deque
from typing import Any, Callable, Deque, Dict, List, Tuple

from .values import Pickled

#: who asks: ``"<node>/<task id>"`` for a task, ``"client:<id>"`` for one of the client's handles
Owner = str
#: an answer: ``("value", v)`` or ``("error", python type name, message)``
Answer = Tuple[Any, ...]
Reply = Callable[[Answer], None]

KINDS = ("dict", "set", "counter", "queue", "barrier", "lock")
#: the ended tasks' owners remembered (their late operations are refused): a few MiB at most
ENDED_KEPT = 65536


class OpError(Exception):
    """An operation was refused; ``type_name`` is the exception type the caller raises."""

    def __init__(self, message: str, type_name: str = "ValueError") -> None:
        super().__init__(message)
        self.type_name = type_name


_NAN = ("$nan",)


def ended(owner: Owner) -> Answer:
    """The refusal of an operation of a task that ended (and the answer its waits get then)."""
    return ("error", "CancelledError", f"its task {owner} ended")


def key_of(value: Any) -> Any:
    """A hashable stand-in for ``value`` that is equal for values a Python dict holds as one key."""
    cls = type(value)
    if cls is float and value != value:
        return _NAN
    if cls is list or cls is tuple:
        return tuple(key_of(item) for item in value)
    if cls is dict:
        return ("$o", frozenset((name, key_of(item)) for name, item in value.items()))
    if cls is Pickled:
        return ("$p", value.type_name, value.data)
    try:
        hash(value)
    except TypeError:
        return ("$x", repr(value))
    return value


def _unknown(kind: str, op: str) -> OpError:
    return OpError(f"a {kind} has no operation {op!r}", "ValueError")


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise OpError(f"{what} must be null or a non-negative number of seconds, not {value!r}", "ValueError")
    return float(value)


def _integer(value: Any, what: str) -> int:
    if type(value) is not int:
        raise OpError(f"counter {what} must be an integer, not {value!r}", "TypeError")
    return value


def on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread runs ``loop`` now."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class _Timer:
    """A wait's timeout on the loop, started and stopped from any thread."""

    __slots__ = ("_loop", "_handle", "_stopped")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float, expire: Callable[[], None]) -> None:
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None
        self._stopped = False

        def start() -> None:
            if not self._stopped:
                self._handle = loop.call_later(seconds, expire)

        if on_loop(loop):
            start()
        else:
            loop.call_soon_threadsafe(start)

    def cancel(self) -> None:
        self._stopped = True
        handle = self._handle
        if handle is None:
            return
        if on_loop(self._loop):
            handle.cancel()
        else:
            self._loop.call_soon_threadsafe(handle.cancel)


class _Waiter:
    __slots__ = ("owner", "key", "reply", "timer", "done", "on_grant")

    def __init__(self, owner: Owner, key: Tuple[Owner, Any], reply: Reply) -> None:
        self.owner = owner
        self.key = key
        self.reply = reply
        self.timer: _Timer | None = None
        self.done = False
        self.on_grant: Callable[[], None] | None = None


class _Lock:
    __slots__ = ("holder", "waiters")

    def __init__(self) -> None:
        self.holder: Owner | None = None
        self.waiters: Deque[_Waiter] = deque()


class _Barrier:
    __slots__ = ("parties", "arrived")

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived: List[_Waiter] = []


class CollectionStore:
    """Every collection of one pool, and the waits on them (callers hold :attr:`lock`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        #: held by whoever applies an operation (the loop, or a task thread on this node)
        self.lock = threading.RLock()
        self.dicts: Dict[str, Dict[Any, Tuple[Any, Any]]] = {}
        self.sets: Dict[str, Dict[Any, Any]] = {}
        self.counters: Dict[str, int] = {}
        self.queues: Dict[str, Deque[Any]] = {}
        self._takers: Dict[str, Deque[_Waiter]] = {}
        self._barriers: Dict[str, _Barrier] = {}
        self.locks: Dict[str, _Lock] = {}
        self._held: Dict[Owner, set[str]] = {}
        self._waits: Dict[Owner, List[_Waiter]] = {}
        #: per pending wait, by (owner, request id): how to give up on it
        self._pending: Dict[Tuple[Owner, Any], _Waiter] = {}
        #: tasks' owners that ended: an operation of theirs still on its way (a task thread's own
        #: connection is not the one its end came on) must not take a lock nobody would release
        self._ended: OrderedDict[Owner, None] = OrderedDict()

    def apply(self, owner: Owner, request: Any, reply: Reply, request_id: Any = None) -> None:
        """Applies ``request`` (``[kind, name, op, *args]``) for ``owner``; ``reply`` gets the answer,
        at once or — for a blocking operation — when it is satisfied, times out or is cancelled."""
        if owner in self._ended:
            reply(ended(owner))
            return
        try:
            if type(request) is not list or len(request) < 3:
                raise OpError("an operation is [kind, name, op, ...args]", "ValueError")
            kind, name, op, *args = request
            if kind not in KINDS:
                raise OpError(f"unknown collection kind {kind!r}", "ValueError")
            if type(name) is not str or not name:
                raise OpError("a collection's name must be a non-empty string", "ValueError")
            if type(op) is not str:
                raise OpError("missing operation", "ValueError")
            handler = getattr(self, f"_{kind}")
            answer = handler(name, op, args, owner, reply, request_id)
        except OpError as error:
            reply(("error", error.type_name, str(error)))
            return
        if answer is not _WAITING:
            reply(("value", answer))

    def cancel(self, owner: Owner, request_id: Any, reason: str) -> None:
        """Gives up on ``owner``'s pending request ``request_id`` (aborted by its caller)."""
        waiter = self._pending.get((owner, request_id))
        if waiter is not None:
            self._drop(waiter)
            waiter.reply(("error", "CancelledError", reason))

    def owner_ended(self, owner: Owner) -> None:
        """``owner``'s task ended (or its node, or its client, is gone): its waits are dropped, its locks
        released, and a task's later operations refused (a client's handles end with its connection
        only, and an attaching client may use them again)."""
        if "/" in owner:
            self._ended[owner] = None
            if len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)
        for waiter in self._waits.pop(owner, []):
            if not waiter.done:
                self._drop(waiter)
                waiter.reply(ended(owner))
        for name in self._held.pop(owner, set()):
            lock = self.locks.get(name)
            if lock is not None and lock.holder == owner:
                self._hand_over(lock)

    def has_ended(self, owner: Owner) -> bool:
        """Whether ``owner`` is a task that ended (its operations are refused)."""
        return owner in self._ended

    def holders(self) -> List[Owner]:
        """The owners holding a lock now."""
        return [owner for owner, names in self._held.items() if names]

    def owners(self) -> List[Owner]:
        """The owners waiting or holding a lock now."""
        return list(set(self._waits) | set(self._held))

    def held_by(self, owner: Owner) -> set[str]:
        """The locks ``owner`` holds now."""
        return set(self._held.get(owner, ()))

    def set_holder(self, name: str, holder: Owner | None) -> None:
        """Lock ``name`` held by ``holder`` (None: free), as a replica loads it."""
        lock = self.locks.setdefault(name, _Lock())
        if lock.holder is not None:
            self._held.get(lock.holder, set()).discard(name)
        lock.holder = None
        if holder is not None:
            self._take(name, lock, holder)

    # -- immediate collections ------------------------------------------------------------------

    def _dict(self, name: str, op: str, args: List[Any], *_: Any) -> Any:
        entries = self.dicts.setdefault(name, {})
        key = args[0] if args else None
        if op == "get":
            entry = entries.get(key_of(key))
            return [True, entry[1]] if entry else [False, None]
        if op == "set":
            self._dict_set(entries, key, args[1] if len(args) > 1 else None)
            return None
        if op == "has":
            return key_of(key) in entries
        if op == "pop":
            entry = entries.pop(key_of(key), None)
            return [True, entry[1]] if entry else [False, None]
        if op == "update":
            if type(key) is not list or any(type(pair) is not list or len(pair) != 2 for pair in key):
                raise OpError("update expects a list of [key, value] pairs", "TypeError")
            for item_key, value in key:
                self._dict_set(entries, item_key, value)
            return None
        if op == "len":
            return len(entries)
        if op == "items":
            return [[item_key, value] for item_key, value in entries.values()]
        if op == "clear":
            entries.clear()
            return None
        raise _unknown("dict", op)

    @staticmethod
    def _dict_set(entries: Dict[Any, Tuple[Any, Any]], key: Any, value: Any) -> None:
        # An equal key already there stays (as in Python: d[1] = …; d[True] = … keeps 1).
        canonical = key_of(key)
        existing = entries.get(canonical)
        entries[canonical] = (existing[0] if existing else key, value)

    def _set(self, name: str, op: str, args: List[Any], *_: Any) -> Any:
        members = self.sets.setdefault(name, {})
        value = args[0] if args else None
        if op == "add":
            canonical = key_of(value)
            if canonical in members:
                return False
            members[canonical] = value
            return True
        if op == "discard":
            return members.pop(key_of(value), _ABSENT) is not _ABSENT
        if op == "has":
            return key_of(value) in members
        if op == "len":
            return len(members)
        if op == "values":
            return list(members.values())
        raise _unknown("set", op)

    def _counter(self, name: str, op: str, args: List[Any], *_: Any) -> Any:
        current = self.counters.get(name, 0)
        amount = args[0] if args and args[0] is not None else None
        if op == "value":
            return current
        if op == "increment":
            value = current + _integer(1 if amount is None else amount, "n")
        elif op == "decrement":
            value = current - _integer(1 if amount is None else amount, "n")
        elif op == "reset":
            value = _integer(0 if amount is None else amount, "value")
        else:
            raise _unknown("counter", op)
        self.counters[name] = value
        return value

    # -- blocking collections -------------------------------------------------------------------

    def _queue(self, name: str, op: str, args: List[Any], owner: Owner, reply: Reply, request_id: Any) -> Any:
        items = self.queues.setdefault(name, deque())
        takers = self._takers.setdefault(name, deque())
        if op == "put":
            value = args[0] if args else None
            while takers:  # a waiting taker gets it directly, first come first served
                taker = takers.popleft()
                if not taker.done:
                    self._settle(taker, [True, value])
                    return None
            items.append(value)
            return None
        if op == "get":
            if items:
                return [True, items.popleft()]
            timeout = _seconds(args[0] if args else None, "timeout")
            if timeout == 0:
                return [False, None]
            return self._wait(owner, takers, timeout, [False, None], reply, request_id)
        if op == "len":
            return len(items)
        if op == "empty":
            return not items
        raise _unknown("queue", op)

    def _barrier(self, name: str, op: str, args: List[Any], owner: Owner, reply: Reply, request_id: Any) -> Any:
        if op != "wait":
            raise _unknown("barrier", op)
        parties = args[0] if args else None
        if type(parties) is not int or parties < 1:
            raise OpError(f"barrier n must be a positive integer, not {parties!r}", "ValueError")
        barrier = self._barriers.setdefault(name, _Barrier(parties))
        barrier.arrived = [waiter for waiter in barrier.arrived if not waiter.done]
        if not barrier.arrived:
            barrier.parties = parties
        elif barrier.parties != parties:
            raise OpError(
                f"barrier {name!r} is waiting for {barrier.parties} callers; this caller asked for {parties}",
                "ValueError",
            )
        timeout = _seconds(args[1] if len(args) > 1 else None, "timeout")
        if len(barrier.arrived) + 1 >= barrier.parties:
            # The last caller: everyone goes, and the barrier is ready for the next round.
            arrived, barrier.arrived = barrier.arrived, []
            for position, waiter in enumerate(arrived):
                self._settle(waiter, position)
            return len(arrived)
        return self._wait(owner, barrier.arrived, timeout, None, reply, request_id)

    def _lock(self, name: str, op: str, args: List[Any], owner: Owner, reply: Reply, request_id: Any) -> Any:
        lock = self.locks.setdefault(name, _Lock())
        if op == "acquire":
            if lock.holder is None:
                self._take(name, lock, owner)
                return True
            timeout = _seconds(args[0] if args else None, "timeout")
            if timeout == 0:
                return False
            result = self._wait(owner, lock.waiters, timeout, False, reply, request_id)
            self._pending_waiter(owner, request_id).on_grant = lambda: self._take(name, lock, owner)
            return result
        if op == "release":
            if lock.holder != owner:
                raise OpError(
                    f"lock {name!r} is not held: release() without acquire()" if lock.holder is None else
                    f"lock {name!r} is held by another holder (another task, or another pool.lock handle): "
                    "only the task or handle that acquired it can release it",
                    "RuntimeError",
                )
            self._held.get(owner, set()).discard(name)
            self._hand_over(lock)
            return None
        if op == "locked":
            return lock.holder is not None
        raise _unknown("lock", op)

    def _take(self, name: str, lock: _Lock, owner: Owner) -> None:
        lock.holder = owner
        self._held.setdefault(owner, set()).add(name)

    def _hand_over(self, lock: _Lock) -> None:
        """The holder let go: the longest waiter gets the lock, or it is free."""
        lock.holder = None
        while lock.waiters:
            waiter = lock.waiters.popleft()
            if not waiter.done:
                self._settle(waiter, True)
                return

    # -- waits ----------------------------------------------------------------------------------

    def _pending_waiter(self, owner: Owner, request_id: Any) -> _Waiter:
        return self._pending[(owner, request_id)]

    def _wait(self, owner: Owner, queue: Any, timeout: float | None, on_timeout: Any, reply: Reply,
              request_id: Any) -> Any:
        waiter = _Waiter(owner, (owner, request_id), reply)
        queue.append(waiter)
        self._waits.setdefault(owner, []).append(waiter)
        self._pending[waiter.key] = waiter

        def expire() -> None:
            with self.lock:
                if not waiter.done:
                    self._drop(waiter)
                    reply(("value", on_timeout))

        if timeout is not None:
            waiter.timer = _Timer(self._loop, timeout, expire)
        return _WAITING

    def _settle(self, waiter: _Waiter, value: Any) -> None:
        self._drop(waiter)
        if waiter.on_grant is not None:
            waiter.on_grant()
        waiter.reply(("value", value))

    def _drop(self, waiter: _Waiter) -> None:
        if waiter.done:
            return
        waiter.done = True
        if waiter.timer is not None:
            waiter.timer.cancel()
        waits = self._waits.get(waiter.owner)
        if waits is not None:
            try:
                waits.remove(waiter)
            except ValueError:
                pass
            if not waits:
                del self._waits[waiter.owner]
        if self._pending.get(waiter.key) is waiter:
            del self._pending[waiter.key]


_WAITING: Any = object()
_ABSENT: Any = object()

__all__ = ["Answer", "CollectionStore", "OpError", "Owner", "key_of", "on_loop"]
