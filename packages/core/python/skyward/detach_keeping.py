"""What a detached worker keeps for the client that comes back (docs/sessions.md).

After a ``release`` with ``keep`` the client is gone but will attach again: finished results wait
until collected (the task table keeps them), and a streaming task's items are kept in order up to a
byte cap. The distributed collections need nothing here: they live on the head node's worker, which
answers tasks with or without a client (:mod:`skyward.collection_service`).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from .connection import Connection
from .protocol import Message, ProtocolError, SerializationError, encode_frame
from .task import Task

#: bytes of stream items kept for a detached client when its `release` names no `keep_items_bytes`
KEPT_ITEMS_BYTES = 64 * 1024 * 1024


class DetachKeeping:
    """The detached state and the kept stream items."""

    def __init__(self) -> None:
        #: set by a `release` with `keep`: the client detached and will come back for its results
        self.detached = False
        #: finished results wait for the detached client until collected (not pruned by age)
        self.keep_results = False
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
        """``task`` ended with the terminal ``message``: it tells how many of its items were dropped."""
        dropped = self._kept_dropped.pop(task.id, 0)
        if dropped:
            message["dropped"] = dropped
