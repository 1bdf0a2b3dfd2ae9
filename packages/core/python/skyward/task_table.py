"""The worker's tasks: intake (``submit``), the wait for the ``cluster`` message, cancel, withdraw,
input streams, timeouts, and the finished results kept for clients that reconnect.

A task is ``queued`` (waiting for the cluster message, or in its executor's queue), ``running``
(a slot took it) or ``done``; its terminal message is sent once, by :meth:`TaskTable.finish`.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from typing import Any, Awaitable, Callable, Dict, List, Set, Tuple

from .connection import Connection
from .context import SubtaskOutcome
from .deadlines import Deadlines
from .detach_keeping import DetachKeeping
from .execution import Outcome, error_outcome
from .lifecycle import Lifetime
from .protocol import Message
from .ref_peers import RefPeers
from .ref_store import HELD_REFS, RefStore
from .task import Executor, Task

RESULT_KEEP_SECONDS = 300.0
RESULT_KEEP_MAX = 50_000


class TaskTable:
    """The tasks of one worker, by id, and the executors that run them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, concurrency: int, make_executor: Callable[[bool], Executor],
                 node: Callable[[], int], refs: RefStore, detach: DetachKeeping, lifetime: Lifetime,
                 log: Callable[[str], None], token: bytes) -> None:
        self._loop = loop
        self._concurrency = concurrency
        self._make_executor = make_executor
        self._node = node
        self._refs = refs
        self._detach = detach
        self._lifetime = lifetime
        self._log = log
        self.tasks: Dict[str, Task] = {}
        #: submitted before the cluster message
        self._waiting: List[Task] = []
        #: the cluster message has been applied: tasks go to their executor as they come
        self.ready = False
        self._finished: "collections.OrderedDict[str, Tuple[float, Message]]" = collections.OrderedDict()
        self.deadlines = Deadlines(loop, self._on_timeout)
        self.executor = make_executor(False)
        self._nested: Executor | None = None
        self._cluster: Dict[str, Any] | None = None
        self._cluster_env: Dict[str, str] = {}
        #: masks the pool's secrets in an error's text (the worker sets it to its secret mask)
        self.mask: Callable[[str], str] = lambda text: text
        #: told each task that ends, however, and how to send its terminal message once what it held
        #: is let go (the worker's collections: its client must not see it end before its locks go)
        self.ended: Callable[[Task, Callable[[], None]], None] = lambda task, then: then()
        #: built-in tasks the worker answers itself, off the executors (by fn): references moved node
        #: to node (``ref_peers.py``; its server starts on the first ``skyward.refs:serve``)
        self._peers = RefPeers(refs, token, lambda: self._cluster, log)
        self.builtins: Dict[str, Callable[[Any], Awaitable[Outcome]]] = self._peers.builtins()
        self._answering: Set["asyncio.Task[None]"] = set()
        #: told each task that ends (the subtasks a task runs on this node end with it)
        self.on_finish: Callable[[Task], None] = lambda task: None

    # -- executors ------------------------------------------------------------------------------

    def executors(self) -> List[Executor]:
        return [self.executor] if self._nested is None else [self.executor, self._nested]

    def executor_for(self, task: Task) -> Executor:
        """The executor running ``task``: nested tasks have their own, started on the first one."""
        if not task.nested:
            return self.executor
        if self._nested is None:
            self._nested = self._make_executor(True)
            if self._cluster is not None:
                self._nested.apply_cluster(self._cluster, self._cluster_env)
        return self._nested

    def apply_cluster(self, cluster: Dict[str, Any], env: Dict[str, str]) -> None:
        """The cluster message (without its env) and its env, for every executor (and a later nested one)."""
        self._cluster = cluster
        self._cluster_env.update(env)
        for executor in self.executors():
            executor.apply_cluster(cluster, env)

    def cluster_ready(self) -> None:
        """The cluster message is applied: the tasks that waited for it go to their executors."""
        self.ready = True
        waiting, self._waiting = self._waiting, []
        for task in waiting:
            if task.state == "queued":
                self.executor_for(task).enqueue(task)

    # -- intake ---------------------------------------------------------------------------------

    def submit(self, connection: Connection, message: Message) -> None:
        task_id = message.get("id")
        if not isinstance(task_id, str):
            self._log(f"ignored a submit without a string id: {task_id!r}")
            return
        if task_id in self.tasks:
            self._log(f"ignored a submit for task {task_id!r}, which is already queued or running")
            return
        args = message.get("args")
        kwargs = message.get("kwargs")
        args = [] if args is None else args
        kwargs = {} if kwargs is None else kwargs
        fn = message.get("fn")
        problem = self._problem(message, fn, args, kwargs)
        if problem is None and message.get("refs") is True:
            try:
                node = self._node()
                args, kwargs = self._refs.resolve(args, node), self._refs.resolve(kwargs, node)
            except LookupError as error:
                problem = ("serialization", "RemoteRefError", str(error.args[0]))
        if problem is None and fn == HELD_REFS:
            # Answered here: the store is this process's, whichever executor runs tasks.
            task = Task(task_id, str(fn), [], {}, None, False, None, connection, False)
            self.tasks[task_id] = task
            self.finish(task, ("result", {**self._refs.held(self._node()), **self._peers.moved()}))
            return
        if problem is None and fn in self.builtins:
            self._answer_builtin(Task(task_id, str(fn), [], {}, None, False, None, connection, False), args)
            return
        task = Task(task_id, str(fn), args if not problem else [], kwargs if not problem else {},
                    message.get("timeout"), bool(message.get("stream")), message.get("worker"), connection,
                    message.get("nested") is True)
        task.default_timeout = message.get("default_timeout") is True
        task.keep = message.get("keep") is True and not task.stream
        self.tasks[task_id] = task
        if problem is not None:
            self.finish(task, error_outcome(*problem))
        elif self.ready:
            self.executor_for(task).enqueue(task)
        else:
            self._waiting.append(task)

    def _answer_builtin(self, task: Task, args: Any) -> None:
        """Runs a built-in task on the event loop; it stays queued (a cancel leaves it be) until answered."""
        self.tasks[task.id] = task
        handler = self.builtins[task.fn]

        async def answer() -> None:
            outcome = await handler(args)
            if task.state != "done":
                self.finish(task, outcome)

        running = self._loop.create_task(answer())
        self._answering.add(running)
        running.add_done_callback(self._answering.discard)

    def _problem(self, message: Message, fn: Any, args: Any, kwargs: Any) -> Tuple[str, str, str] | None:
        """Why a ``submit`` cannot run (kind, type, message of its error), or None."""
        timeout = message.get("timeout")
        pin = message.get("worker")
        if not isinstance(fn, str):
            return ("not_found", "TypeError", f"fn must be a 'module:qualname' string, not {fn!r}")
        if type(args) is not list:
            return ("serialization", "SerializationError", "args must be an array")
        if type(kwargs) is not dict:
            return ("serialization", "SerializationError", "kwargs must be an object")
        if timeout is not None and (type(timeout) not in (int, float) or not timeout > 0 or math.isinf(timeout)):
            return ("exception", "ValueError", f"timeout must be a positive number of seconds or null, not {timeout!r}")
        if pin is not None and (type(pin) is not int or not 0 <= pin < self._concurrency):
            return (
                "exception", "ValueError",
                f"worker {pin!r} does not exist on this node (worker slots 0..{self._concurrency - 1})",
            )
        if self._lifetime.stopping:  # its executor may be closed already (or, for a nested task, never started)
            return ("cancelled", "CancelledError", "the worker is stopping")
        return None

    # -- stopping tasks -------------------------------------------------------------------------

    def cancel_message(self, connection: Connection, message: Message) -> None:
        task = self.tasks.get(message.get("id"))  # type: ignore[arg-type]
        if task is not None:
            self.cancel(task, "the task was cancelled")

    def cancel(self, task: Task, reason: str) -> None:
        if task.state == "queued" and (task in self._waiting or self.executor_for(task).cancel_queued(task)):
            self.finish(task, error_outcome("cancelled", "CancelledError", reason))
        elif task.state == "running":
            self.executor_for(task).stop_task(task)
            self.finish(task, error_outcome("cancelled", "CancelledError", reason))

    def cancel_all(self, reason: str) -> None:
        for task in list(self.tasks.values()):
            self.cancel(task, reason)

    def interrupt_all(self) -> None:
        """The node is going away without its client asking (preempted): every task stops and none
        is answered. A ``cancelled`` answer would end the task for good; unanswered, it is lost with
        the node's connection, and the client runs it again elsewhere as it does a lost node's."""
        for task in list(self.tasks.values()):
            if task in self._waiting:
                self._waiting.remove(task)
            elif task.state == "running":
                self.executor_for(task).stop_task(task)
            elif task.state != "queued" or not self.executor_for(task).cancel_queued(task):
                continue
            task.state = "done"
            task.subtasks = None
            self.deadlines.forget(task)
            del self.tasks[task.id]

    def withdraw(self, connection: Connection, message: Message) -> None:
        """Hands back the listed tasks that have not started (the node is going away): each is dropped
        and answered with ``withdrawn``, so the client runs it elsewhere; started ones carry on."""
        ids = message.get("ids")
        if type(ids) is not list:
            return
        for task_id in ids:
            task = self.tasks.get(task_id) if isinstance(task_id, str) else None
            if task is None or task.state != "queued":
                continue
            if task in self._waiting:
                self._waiting.remove(task)
            elif not self.executor_for(task).cancel_queued(task):
                continue
            task.state = "done"
            del self.tasks[task.id]
            connection.send({"t": "withdrawn", "id": task.id})

    def _on_timeout(self, task: Task) -> None:
        if task.state != "running":
            return
        self.executor_for(task).stop_task(task)
        self.finish(task, error_outcome("timeout", "TimeoutError", f"the task ran past its timeout of {task.timeout} s"))

    # -- running tasks --------------------------------------------------------------------------

    def input(self, connection: Connection, message: Message) -> None:
        """``in``, ``in_end`` or ``in_error`` for a running task's input stream."""
        task = self.tasks.get(message.get("id"))  # type: ignore[arg-type]
        if task is None or task.state != "running":
            return
        kind = message["t"]
        value = message.get("value") if kind == "in" else message.get("message", "the input stream failed")
        stream = message.get("stream")
        if type(stream) is int:
            self.executor_for(task).deliver_input(task, stream, kind, value)

    def running_on(self, connection: Connection) -> List[Task]:
        """The running tasks whose client is ``connection``."""
        return [task for task in self.tasks.values() if task.connection is connection and task.state == "running"]

    def inputs_lost(self, task: Task) -> None:
        """``task``'s client is gone: nobody can feed its input streams any more."""
        executor = self.executor_for(task)
        for index in task.stream_indices:
            executor.deliver_input(task, index, "in_error", "the connection to the client was lost")

    def deliver_subresult(self, task: Task, sub: int, outcome: SubtaskOutcome) -> None:
        self.executor_for(task).deliver_subresult(task, sub, outcome)

    def adopt(self, connection: Connection) -> List[str]:
        """A client said hello: the tasks whose client is gone are its now (their ids)."""
        adopted = []
        for task in self.tasks.values():
            if task.connection is None or not task.connection.alive:
                task.connection = connection
                adopted.append(task.id)
        return adopted

    # -- finishing ------------------------------------------------------------------------------

    def on_done(self, task: Task, outcome: Outcome) -> None:
        if task.state != "running":
            return  # stopped earlier (cancel, timeout): its late outcome is discarded
        self.finish(task, outcome)

    def error_message(self, task_id: str, kind: str, type_name: str, text: str, traceback_text: str = "",
                      slot: int | None = None) -> Message:
        return {
            "t": "error", "id": task_id, "kind": kind, "type": type_name, "message": self.mask(text),
            "traceback": self.mask(traceback_text), "node": self._node(), "worker": slot,
        }

    def finish(self, task: Task, outcome: Outcome) -> None:
        """Ends ``task`` with ``outcome``: its terminal message is kept and sent to its client."""
        task.state = "done"
        self.deadlines.forget(task)
        self.tasks.pop(task.id, None)
        kind = outcome[0]
        if kind == "result":
            message: Message = {"t": "result", "id": task.id, "value": outcome[1]}
        elif kind == "kept":
            message = {"t": "result", "id": task.id, "value": self._refs.keep(outcome[1], self._node())}
        elif kind == "end":
            message = {"t": "end", "id": task.id}
        else:
            message = self.error_message(
                task.id, outcome[1], outcome[2], outcome[3], outcome[4], task.slot if task.slot >= 0 else None
            )
        task.subtasks = None  # the client cancels the nested tasks still running
        self.on_finish(task)
        self._detach.task_ended(task, message)
        connection = task.connection
        # A subtask run on its parent's node answers its parent only: no client collects it.
        if not getattr(connection, "local", False):
            finished = self._finished
            finished[task.id] = (time.monotonic(), message)
            if len(finished) > RESULT_KEEP_MAX:
                finished.popitem(last=False)

        def send() -> None:
            current = task.connection  # read when sent: a client may have attached meanwhile
            if current is not None:
                if current.alive:
                    self._detach.flush_kept(task.id, current)
                current.send(message)

        self.ended(task, send)

    def result_ids(self) -> List[str]:
        """The tasks whose terminal message is kept (told in ``welcome``)."""
        return list(self._finished.keys())

    def collect(self, connection: Connection, message: Message) -> None:
        """``collect``: the kept items, then the kept terminal message, of each listed task."""
        ids = message.get("ids")
        if type(ids) is not list:
            return
        for task_id in ids:
            if not isinstance(task_id, str):
                continue
            # Stream items kept while detached go first (a running task's later ones follow directly).
            self._detach.flush_kept(task_id, connection)
            entry = self._finished.get(task_id)
            if entry is not None:
                connection.send(entry[1])
                if self._detach.keep_results:
                    # Kept for a detached client: handed over once.
                    del self._finished[task_id]

    def prune_results(self) -> None:
        if self._detach.keep_results:
            return  # a detached client's results wait until collected (RESULT_KEEP_MAX still bounds them)
        horizon = time.monotonic() - RESULT_KEEP_SECONDS
        finished = self._finished
        while finished:
            first = next(iter(finished.values()))
            if first[0] >= horizon:
                break
            finished.popitem(last=False)
