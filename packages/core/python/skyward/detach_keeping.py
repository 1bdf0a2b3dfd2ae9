"""What a detached worker keeps for the client that comes back (docs/sessions.md).

After a ``release`` with ``keep`` the client is gone but will attach again: finished results wait
until collected (the task table keeps them), a streaming task's items are kept in order up to a
byte cap, and distributed-collection operations wait ("parked") for the next client, whose state
holds the collections, instead of failing.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Tuple

from .connection import Connection
from .protocol import Message, ProtocolError, SerializationError, encode_frame
from .task import Task

#: bytes of stream items kept for a detached client when its `release` names no `keep_items_bytes`
KEPT_ITEMS_BYTES = 64 * 1024 * 1024
#: the reserved function name of a distributed-collection operation (skyward/collections.py)
COLLECTION_REF = "skyward.collections:op"


def detached_calls_max() -> int:
    """``SKYWARD_DETACHED_CALLS_MAX``: the collection calls a detached worker keeps (default 100 000)."""
    try:
        return max(1, int(os.environ.get("SKYWARD_DETACHED_CALLS_MAX", "100000")))
    except ValueError:
        return 100_000


def outlives_its_task(message: Message) -> bool:
    """Whether a kept collection operation still goes to the next client once its task has ended: a
    write (dict, set, counter, queue put), applied as it would have been had a client been there; not
    a wait or a lock, whose owner is gone (docs/sessions.md, "Collections across detach")."""
    args = message.get("args") or []
    kind = args[0] if len(args) > 0 else None
    op = args[2] if len(args) > 2 else None
    return kind in ("dict", "set", "counter") or (kind == "queue" and op == "put")


class DetachKeeping:
    """The detached state, the kept stream items and the parked collection operations."""

    def __init__(self) -> None:
        #: set by a `release` with `keep`: the client detached and will come back for its results
        self.detached = False
        #: finished results wait for the detached client until collected (not pruned by age)
        self.keep_results = False
        #: from a `release` with `keep` until the next client's hello: distributed-collection
        #: operations wait here for that client (whose state holds the collections) instead of
        #: failing; the TTL bounds the wait (docs/sessions.md, "Collections across detach")
        self.parking = False
        self.parked: List[Tuple[Task, Message]] = []
        #: how many calls may wait so (an eventual write does not block its task); past it a call fails
        self.parked_max = detached_calls_max()
        #: a detached client's stream items, by task, in order: handed over by `collect` (see item)
        self._kept_items: Dict[str, List[Tuple[Message, int]]] = {}
        #: how many items of a task did not fit under the cap; told in its terminal message (`dropped`)
        self._kept_dropped: Dict[str, int] = {}
        self._kept_bytes = 0
        self._kept_cap = KEPT_ITEMS_BYTES

    def release(self, keep: bool, keep_items_bytes: object) -> None:
        """A ``release``: with ``keep`` the client detaches; ``keep_items_bytes`` caps the kept items."""
        if isinstance(keep_items_bytes, int) and not isinstance(keep_items_bytes, bool) and keep_items_bytes >= 0:
            self._kept_cap = keep_items_bytes
        if keep and not self.detached:
            # A detached client: results wait for it until collected, and the end of the process that
            # started this worker (its stdin) no longer stops it; only the TTL does.
            self.detached = True
            self.keep_results = True
        if keep:
            self.parking = True

    def item(self, task: Task, seq: int, value: object) -> None:
        """A running task's stream item: to its client, or kept while detached with no client."""
        connection = task.connection
        kept = self._kept_items.get(task.id)
        if kept is None and (not self.detached or (connection is not None and connection.alive)):
            if connection is not None:
                connection.send({"t": "item", "id": task.id, "seq": seq, "value": value})
            return
        # Detached with no client (or items already kept, which go first): kept until collected, in
        # order, up to the byte cap; those over it are counted and dropped.
        message: Message = {"t": "item", "id": task.id, "seq": seq, "value": value}
        if kept is None:
            kept = self._kept_items[task.id] = []
        try:
            size = len(encode_frame([message]))
        except (ProtocolError, SerializationError):
            size = -1
        if size < 0 or self._kept_bytes + size > self._kept_cap:
            self._kept_dropped[task.id] = self._kept_dropped.get(task.id, 0) + 1
            return
        self._kept_bytes += size
        kept.append((message, size))

    def flush_kept(self, task_id: str, connection: Connection) -> None:
        """Hands a task's kept stream items over to ``connection``, in order, and forgets them."""
        kept = self._kept_items.pop(task_id, None)
        if not kept:
            return
        for message, size in kept:
            self._kept_bytes -= size
            connection.send(message)

    def task_ended(self, task: Task, message: Message) -> None:
        """``task`` ended with the terminal ``message``: its parked waits go with it (its writes
        still reach the next client), and the message tells how many of its items were dropped."""
        if self.parked:
            self.parked = [entry for entry in self.parked if entry[0] is not task or outlives_its_task(entry[1])]
        dropped = self._kept_dropped.pop(task.id, 0)
        if dropped:
            message["dropped"] = dropped

    def park(self, task: Task, sub: int, message: Message) -> str | None:
        """Parks a collection operation for the next client; the error text when too many wait."""
        if len(self.parked) >= self.parked_max:
            kind, name = (list(message.get("args") or []) + [None, None])[:2]
            return (
                f"{kind} {name!r}: the pool is detached, and {self.parked_max} collection calls already wait on "
                "this worker for a client to attach (SKYWARD_DETACHED_CALLS_MAX)"
            )
        if task.subtasks is None:
            task.subtasks = set()
        task.subtasks.add(sub)
        self.parked.append((task, message))
        return None

    def hand_over(self, client: Connection, lose: Callable[[Task, int], None]) -> None:
        """A client attached: the collection operations that waited for it go to it, in order
        (``lose(task, sub)`` answers one whose task's own connection is gone)."""
        if not self.parking:
            return
        self.parking = False
        parked, self.parked = self.parked, []
        for task, message in parked:
            if task.state != "running":
                client.send(message)  # a write of a task that has ended: applied, its answer ignored
                continue
            if task.subtasks is None or message["sub"] not in task.subtasks:
                continue
            connection = task.connection
            if connection is None or not connection.alive:
                task.subtasks.discard(message["sub"])
                lose(task, message["sub"])
                continue
            if task.ops is None:
                task.ops = {}
            task.ops[message["sub"]] = message
            connection.send(message)
