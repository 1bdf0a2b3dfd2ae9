"""Nested dispatch: a running task's subtasks, run on its own node when it has a nested slot free,
else through the client, which answers with ``subresult``/``suberror`` (see docs/protocol.md,
"Nested dispatch").

A subtask run here never crosses the client's link: its parent's node is the one place that knows
its own free slots without asking anyone, so a fan-out keeps this node's nested slots busy at the
cost of no round trip. It is a task of this worker's table (its id ``<parent>/<sub>``, its timeout
its parent's) whose "connection" is a :class:`LocalParent`: its outcome goes straight to the parent,
its output and metrics to the parent's client under the parent's id. It ends with its parent (the
client has nothing to cancel), and goes with the node like its parent, which the client runs again.
Its own subtasks that cannot run here go to the client under an alias number of the root task
(the task the client knows), and their answers come back to it.

Distributed-collection operations never come here: the worker answers them first
(:meth:`~skyward.collection_service.CollectionService.take`).
"""

from __future__ import annotations

import collections
import itertools
import os
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple

from .connection import Connection
from .context import SubtaskOutcome, runtime
from .dispatch import error_fields
from .protocol import Message, decode_frame, pack_frame
from .wire_errors import ProtocolError, SerializationError
from .task import Task
from .task_table import TaskTable

#: nested tasks the client gives a node per slot of its nested pool (``NESTED_PER_SLOT`` there)
_CLIENT_PER_SLOT = 2
#: alias numbers start here, far above any sub number a task's own table hands out
_ALIAS_BASE = 1 << 40

#: a subtask as its task asked for it: (the task, sub, fn, args, kwargs, the node it asks for or None)
_Subtask = Tuple[Task, int, str, List[Any], Dict[str, Any], Optional[int]]


def local_nested_slots(concurrency: int) -> int:
    """``SKYWARD_NESTED_LOCAL_SLOTS``: how many subtasks a worker runs on its own node at once before
    it asks the client (default its concurrency, the size of its nested pool; 0: all through the client)."""
    try:
        return max(0, int(os.environ.get("SKYWARD_NESTED_LOCAL_SLOTS", str(concurrency))))
    except ValueError:
        return concurrency


def _as_received(message: Message) -> Message:
    """A message in wire form as a peer decodes it (tagged values made Python values again): what a
    subtask run here is given and gives back is exactly what it would get through the client."""
    return decode_frame(pack_frame([message]))[0]


def _outcome_of(message: Message) -> SubtaskOutcome:
    """A ``subresult``/``suberror`` (or a nested task's own ``result``/``error``) as its parent takes it."""
    if message["t"] in ("subresult", "result"):
        return ("value", message.get("value"))
    return ("error", {
        "kind": message.get("kind"), "type": message.get("type"), "message": message.get("message"),
        "traceback": message.get("traceback"), "node": message.get("node"),
    })


class LocalParent:
    """Where a subtask run on its parent's node sends what a task sends its client: its terminal
    message becomes its parent's answer; its output and metrics go to the root task's client."""

    #: its results are not kept for a reconnecting client (no client knows this task)
    local = True
    alive = True
    authenticated = True

    def __init__(self, relay: "SubtaskRelay", parent: Task, sub: int) -> None:
        self._relay = relay
        self.parent = parent
        self.sub = sub
        #: the task the client knows, up the chain of local parents
        self.root: Task = parent.connection.root if isinstance(parent.connection, LocalParent) else parent

    def send(self, message: Message) -> None:
        kind = message.get("t")
        if kind == "error":
            self._relay.local_done(self, _outcome_of(message))
        elif kind == "result":
            try:
                outcome = _outcome_of(_as_received(message))
            except (ProtocolError, SerializationError) as error:
                outcome = error_fields("serialization", "SerializationError", f"cannot send the result: {error}",
                                       self._relay.node())
            self._relay.local_done(self, outcome)
        elif kind in ("out", "metric"):
            connection = self.root.connection
            if connection is not None and connection.alive and self.root.state == "running":
                connection.send({**message, "id": self.root.id} if kind == "out" else {**message, "task": self.root.id})


class SubtaskRelay:
    """Sends subtasks to their task's client and hands the answers back to the task."""

    def __init__(self, table: TaskTable, node: Callable[[], int], local_slots: int) -> None:
        self._table = table
        self._node = node
        self._local_slots = local_slots
        #: the subtasks running here, by parent id and sub number
        self._children: Dict[str, Dict[int, Task]] = {}
        #: subtasks of subtasks run here, sent to the client under a root task's alias number:
        #: (root id, alias) -> (the task that asked, its sub number)
        self._aliases: Dict[Tuple[str, int], Tuple[Task, int]] = {}
        self._next_alias = itertools.count(_ALIAS_BASE)
        #: subtasks that may run here waiting for a nested slot here or room at the client
        self._queue: Deque[_Subtask] = collections.deque()
        #: those of them out at the client now, as (the task it knows, sub)
        self._out: Set[Tuple[str, int]] = set()
        table.on_finish = self.task_ended

    def send(self, task: Task, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any], node: int | None) -> None:
        """A running task dispatched subtask ``sub`` (``node``: the node it asks for, if any)."""
        if task.state != "running":
            return  # stopped meanwhile: its futures are cancelled already
        subtask = (task, sub, fn, args, kwargs, node)
        if not self._may_run_here(node):
            self._to_client(subtask, False)
        elif self._slot_free():
            self._run_here(*subtask[:5])
        elif self._client_has_room(task):
            self._to_client(subtask, True)
        else:
            self._queue.append(subtask)

    def _to_client(self, subtask: "_Subtask", counted: bool) -> None:
        """Sends a subtask to the client (``counted``: one of those that could run here, out at the client),
        with the node it asked for: one asked for this node runs on it, never on another with a slot free."""
        task, sub, fn, args, kwargs, node = subtask
        if isinstance(task.connection, LocalParent):
            # The client knows the root task only: the subtask goes as one of the root's.
            root, asked, sub = task.connection.root, (task, sub), next(self._next_alias)
            self._aliases[(root.id, sub)] = asked
            task = root
        message: Message = {"t": "subtask", "id": task.id, "sub": sub, "fn": fn, "args": args, "kwargs": kwargs,
                            "node": node}
        connection = task.connection
        if connection is None or not connection.alive:
            self.lose(task, sub)
            return
        if task.subtasks is None:
            task.subtasks = set()
        task.subtasks.add(sub)
        if counted:
            self._out.add((task.id, sub))
        connection.send(message)

    def answer(self, connection: Connection, message: Message) -> None:
        """``subresult`` or ``suberror``: the answer to one of a running task's subtasks."""
        task = self._table.tasks.get(message.get("id"))  # type: ignore[arg-type]
        sub = message.get("sub")
        if task is None or task.subtasks is None or type(sub) is not int or sub not in task.subtasks:
            return  # the parent ended (its futures were cancelled) or this is a repeat
        task.subtasks.discard(sub)
        self._deliver(task, sub, _outcome_of(message))

    # -- subtasks run on this node --------------------------------------------------------------

    def _may_run_here(self, node: int | None) -> bool:
        """Whether a subtask may run on this node: no other node asked for, and this worker runs
        subtasks itself."""
        return self._local_slots > 0 and (node is None or node == self._node())

    def _slot_free(self) -> bool:
        nested = sum(1 for each in self._table.tasks.values() if each.nested)
        return nested < self._local_slots

    def _client_window(self) -> int:
        """How many of the subtasks that could run here may be out at the client at once: as many as
        the client gives the other nodes (two per nested slot: one running, one waiting); the rest
        wait here for this node's own slots, which no round trip keeps waiting."""
        cluster = runtime.cluster
        others = (cluster.total_nodes - 1) if cluster is not None else 0
        return max(0, others) * runtime.concurrency * _CLIENT_PER_SLOT

    def _client_has_room(self, task: Task) -> bool:
        """Whether one more of the subtasks that could run here may go to ``task``'s client now (with
        no client connected, they wait for this node's slots)."""
        root = task.connection.root if isinstance(task.connection, LocalParent) else task
        connection = root.connection
        return connection is not None and connection.alive and len(self._out) < self._client_window()

    def _pump(self) -> None:
        """Starts the waiting subtasks that fit now: here while a nested slot is free, then at the client."""
        while self._queue:
            task = self._queue[0][0]
            if task.state != "running":
                self._queue.popleft()
            elif self._slot_free():
                self._run_here(*self._queue.popleft()[:5])
            elif self._client_has_room(task):
                self._to_client(self._queue.popleft(), True)
            else:
                return

    def node(self) -> int:
        return self._node()

    def _run_here(self, parent: Task, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any]) -> None:
        try:
            given = _as_received({"t": "submit", "args": args, "kwargs": kwargs})
        except (ProtocolError, SerializationError) as error:
            text = f"cannot send the subtask: {error}"
            self._table.deliver_subresult(parent, sub, error_fields("serialization", "SerializationError", text,
                                                                    self._node()))
            return
        child = Task(f"{parent.id}/{sub}", fn, given["args"], given["kwargs"], parent.timeout, False, None,
                     LocalParent(self, parent, sub), nested=True)
        child.default_timeout = parent.default_timeout
        self._children.setdefault(parent.id, {})[sub] = child
        self._table.tasks[child.id] = child
        self._table.executor_for(child).enqueue(child)

    def local_done(self, local: LocalParent, outcome: SubtaskOutcome) -> None:
        """A subtask run here ended: its outcome goes to its parent, if that still runs."""
        children = self._children.get(local.parent.id)
        if children is not None:
            children.pop(local.sub, None)
            if not children:
                del self._children[local.parent.id]
        if local.parent.state == "running":
            self._table.deliver_subresult(local.parent, local.sub, outcome)
        self._pump()

    def task_ended(self, task: Task) -> None:
        """``task`` ended (its table's ``on_finish``): the subtasks it runs here end with it."""
        for child in list(self._children.pop(task.id, {}).values()):
            self._table.cancel(child, "its parent task ended")
        if self._queue:
            self._queue = collections.deque(waiting for waiting in self._queue if waiting[0] is not task)
        if self._out:
            self._out = {key for key in self._out if key[0] != task.id}
        if self._aliases:
            for key in [key for key, (asked, _) in self._aliases.items() if asked is task or key[0] == task.id]:
                del self._aliases[key]

    def _deliver(self, task: Task, sub: int, outcome: SubtaskOutcome) -> None:
        """Hands ``outcome`` to the task that asked for subtask ``sub`` of ``task`` (an alias's own)."""
        counted = (task.id, sub) in self._out
        self._out.discard((task.id, sub))
        asked = self._aliases.pop((task.id, sub), None)
        if asked is not None:
            task, sub = asked
        if task.state == "running":
            self._table.deliver_subresult(task, sub, outcome)
        if counted:
            self._pump()

    def cancel(self, task: Task, sub: int) -> None:
        """``task`` cancelled the future of its subtask ``sub``: it stops wherever it is, waiting here,
        running here (cancelled like a task), or out at the client (told with ``subcancel``)."""
        if any(waiting[0] is task and waiting[1] == sub for waiting in self._queue):
            self._queue = collections.deque(w for w in self._queue if not (w[0] is task and w[1] == sub))
            return
        child = self._children.get(task.id, {}).get(sub)
        if child is not None:
            self._table.cancel(child, "its parent task cancelled it")
            return
        key = (task.id, sub)
        if isinstance(task.connection, LocalParent):
            key = next((alias for alias, asked in self._aliases.items() if asked == (task, sub)), key)
            self._aliases.pop(key, None)
        root = self._table.tasks.get(key[0])
        if root is None or root.subtasks is None or key[1] not in root.subtasks:
            return  # answered meanwhile, or a collection operation (answered here)
        root.subtasks.discard(key[1])
        connection = root.connection
        if connection is not None and connection.alive:
            connection.send({"t": "subcancel", "id": key[0], "sub": key[1]})
        if key in self._out:
            self._out.discard(key)
            self._pump()

    def fail(self, task_id: str, sub: int, text: str) -> None:
        """A subtask could not be sent (its message does not encode): it fails, not its task."""
        task = self._table.tasks.get(task_id)
        if task is not None and task.subtasks is not None and sub in task.subtasks:
            task.subtasks.discard(sub)
            self._deliver(task, sub, error_fields("serialization", "SerializationError", text, self._node()))

    def lose(self, task: Task, sub: int) -> None:
        """Subtask ``sub`` went with its task's client connection."""
        outcome = error_fields("cancelled", "CancelledError", "the connection to the client was lost", self._node())
        self._deliver(task, sub, outcome)

    def connection_lost(self, task: Task) -> None:
        """``task``'s client connection is gone, and with it the subtasks sent on it."""
        if not task.subtasks:
            return
        # A client that reconnects does not know them.
        for sub in sorted(task.subtasks):
            self.lose(task, sub)
        task.subtasks = None
