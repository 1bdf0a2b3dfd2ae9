"""Nested dispatch through the client: a running task's subtasks go out as ``subtask`` messages and
their answers (``subresult``/``suberror``) come back to it (see docs/protocol.md, "Nested dispatch").

While the client is detached, distributed-collection operations are parked for the next client
(:class:`~skyward.detach_keeping.DetachKeeping`) instead of failing.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from .connection import Connection
from .context import SubtaskOutcome
from .detach_keeping import COLLECTION_REF, DetachKeeping
from .dispatch import error_fields
from .protocol import Message
from .task import Task
from .task_table import TaskTable


class SubtaskRelay:
    """Sends subtasks to their task's client and hands the answers back to the task."""

    def __init__(self, table: TaskTable, detach: DetachKeeping, node: Callable[[], int]) -> None:
        self._table = table
        self._detach = detach
        self._node = node

    def send(self, task: Task, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any], node: int | None) -> None:
        """A running task dispatched subtask ``sub`` (``node``: the node it asks for, if any)."""
        if task.state != "running":
            return  # stopped meanwhile: its futures are cancelled already
        message: Message = {"t": "subtask", "id": task.id, "sub": sub, "fn": fn, "args": args, "kwargs": kwargs,
                            "node": node}
        if fn == COLLECTION_REF and self._detach.parking:
            # The client detached: the collections wait in its state file for the next one.
            problem = self._detach.park(task, sub, message)
            if problem is not None:
                self._table.deliver_subresult(task, sub, error_fields("exception", "RuntimeError", problem, self._node()))
            return
        connection = task.connection
        if connection is None or not connection.alive:
            self.lose(task, sub)
            return
        if task.subtasks is None:
            task.subtasks = set()
        task.subtasks.add(sub)
        if fn == COLLECTION_REF:
            if task.ops is None:
                task.ops = {}
            task.ops[sub] = message
        connection.send(message)

    def answer(self, connection: Connection, message: Message) -> None:
        """``subresult`` or ``suberror``: the answer to one of a running task's subtasks."""
        task = self._table.tasks.get(message.get("id"))  # type: ignore[arg-type]
        sub = message.get("sub")
        if task is None or task.subtasks is None or type(sub) is not int or sub not in task.subtasks:
            return  # the parent ended (its futures were cancelled) or this is a repeat
        task.subtasks.discard(sub)
        if task.ops is not None:
            task.ops.pop(sub, None)
        if message["t"] == "subresult":
            outcome: SubtaskOutcome = ("value", message.get("value"))
        else:
            outcome = ("error", {
                "kind": message.get("kind"), "type": message.get("type"), "message": message.get("message"),
                "traceback": message.get("traceback"), "node": message.get("node"),
            })
        self._table.deliver_subresult(task, sub, outcome)

    def fail(self, task_id: str, sub: int, text: str) -> None:
        """A subtask could not be sent (its message does not encode): it fails, not its task."""
        task = self._table.tasks.get(task_id)
        if task is not None and task.subtasks is not None and sub in task.subtasks:
            task.subtasks.discard(sub)
            self._table.deliver_subresult(task, sub, error_fields("serialization", "SerializationError", text, self._node()))

    def lose(self, task: Task, sub: int) -> None:
        """Subtask ``sub`` went with its task's client connection."""
        outcome = error_fields("cancelled", "CancelledError", "the connection to the client was lost", self._node())
        self._table.deliver_subresult(task, sub, outcome)

    def connection_lost(self, task: Task) -> None:
        """``task``'s client connection is gone, and with it the subtasks sent on it."""
        if not task.subtasks:
            return
        # A client that reconnects does not know them. Except a detached client's unanswered
        # collection operations: those were waits (queue get, lock acquire, barrier wait) it dropped
        # without effect, so they are asked again of the next client.
        ops = task.ops or {}
        kept: set[int] = set()
        for sub in sorted(task.subtasks):
            if self._detach.parking and sub in ops:
                self._detach.parked.append((task, ops[sub]))
                kept.add(sub)
            else:
                self.lose(task, sub)
        task.subtasks = kept or None
        task.ops = None

    def hand_over_parked(self, client: Connection) -> None:
        """A client attached: the collection operations parked for it go to it, in order."""
        self._detach.hand_over(client, self.lose)
