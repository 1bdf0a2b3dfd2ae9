"""Nested dispatch: run functions across the whole pool from inside a running task.

    from skyward.dispatch import submit, capacity

    futures = [submit("mymodule:work", args=[chunk]) for chunk in chunks]
    results = [future.result() for future in futures]

``submit`` sends a ``subtask`` message on the running task's connection (a process-executor child
relays it through its worker); the client runs it as a *nested* task somewhere in the pool and
answers with ``subresult`` or ``suberror`` (docs/protocol.md, "Nested dispatch"). Nested tasks run
on each worker's separate nested pool, so a parent waiting on its children never takes the slots
they need. ``capacity()`` is the pool's number of task slots, what ``n_jobs=-1`` means to joblib.

``future.cancel()`` on a pending future stops its nested task too, wherever it runs or waits (joblib
cancels them when a batch fails). When the parent task ends, is cancelled or times out, its futures
that are still pending are cancelled; when the connection to the client is lost they fail with a
``SubtaskError`` of kind ``cancelled``.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from typing import Any, Callable, Dict, Iterable, List, Mapping, Tuple

from .context import SubtaskOutcome, SubtaskTable, TaskContext, current_task, runtime
from .protocol import to_wire
from .values import restore

__all__ = ["SubtaskError", "capacity", "submit"]


class SubtaskError(Exception):
    """A nested task failed; raised by ``future.result()``.

    ``kind`` is the protocol's error kind (``exception``, ``not_found``, ``serialization``,
    ``timeout``, ``cancelled``, ``worker_died``), ``type`` the remote exception's type name,
    ``traceback`` the remote traceback text and ``node`` the node it ran on (or ``None``).
    """

    def __init__(self, kind: str, type: str, message: str, traceback: str = "", node: int | None = None) -> None:
        where = f" (node {node})" if node is not None else ""
        super().__init__(f"{type}: {message}{where}")
        self.kind = kind
        self.type = type
        self.message = message
        self.traceback = traceback
        self.node = node

    def __reduce__(self) -> Tuple[Any, ...]:
        return (SubtaskError, (self.kind, self.type, self.message, self.traceback, self.node))


class Subtasks:
    """One task's pending subtask futures, numbered from 0.

    Each future is settled in a copy of the submitting context, so its done-callbacks run as part
    of the task (they may submit more, as joblib's do).
    """

    __slots__ = ("_lock", "_next", "_pending", "_closed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._pending: Dict[int, Tuple[concurrent.futures.Future[Any], contextvars.Context]] = {}
        self._closed = False

    def add(self, context: contextvars.Context) -> Tuple[int, concurrent.futures.Future[Any]]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise concurrent.futures.CancelledError("the task has ended: it cannot submit subtasks any more")
            sub = self._next
            self._next += 1
            self._pending[sub] = (future, context)
        return sub, future

    def resolve(self, sub: int, outcome: SubtaskOutcome) -> None:
        with self._lock:
            entry = self._pending.pop(sub, None)
        if entry is not None:
            entry[1].run(_settle, entry[0], outcome)

    def forget(self, sub: int) -> bool:
        """Subtask ``sub``'s future was cancelled: whether it was still pending (not answered, and the
        task still runs: when it ends, the client cancels its nested tasks itself)."""
        with self._lock:
            return not self._closed and self._pending.pop(sub, None) is not None

    def close(self) -> None:
        """The task ended: cancel what is still pending, accept no more."""
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            future.cancel()


def _settle(future: concurrent.futures.Future[Any], outcome: SubtaskOutcome) -> None:
    try:
        if outcome[0] == "value":
            try:
                value = restore(outcome[1])  # objects a nested task returned pickled ($o)
            except BaseException as error:
                future.set_exception(SubtaskError("serialization", "SerializationError", f"cannot unpickle the result: {error!r}"))
                return
            future.set_result(value)
        else:
            fields: Mapping[str, Any] = outcome[1]
            future.set_exception(
                SubtaskError(
                    str(fields.get("kind") or "exception"),
                    str(fields.get("type") or "Exception"),
                    str(fields.get("message") or ""),
                    str(fields.get("traceback") or ""),
                    fields.get("node") if type(fields.get("node")) is int else None,
                )
            )
    except concurrent.futures.InvalidStateError:
        pass  # cancelled by the task meanwhile


def error_fields(kind: str, type_name: str, message: str, node: int | None) -> SubtaskOutcome:
    """A subtask outcome for a failure the worker itself reports (e.g. the connection was lost)."""
    return ("error", {"kind": kind, "type": type_name, "message": message, "traceback": "", "node": node})


def running_task() -> TaskContext | None:
    """The task this thread runs for: its own, or, on a thread a task started itself (which has no
    task context), the only task running in this process; ``None`` when neither."""
    context = current_task.get()
    if context is None and len(runtime.running) == 1:
        context = list(runtime.running)[0]
    return context


def send_subtask(context: TaskContext, ref: str, args: Any, kwargs: Dict[str, Any],
                 node: int | None) -> concurrent.futures.Future[Any]:
    """Hands subtask ``ref`` of ``context``'s task to this process's worker (a process child's goes
    through its worker), numbered in the task's subtask table; the future settles with the answer
    in the task's context. ``args`` and ``kwargs`` are in wire form."""
    sender = runtime.subtask_sender
    assert sender is not None
    subtasks = context.subtasks
    if subtasks is None:
        with runtime.lock:
            subtasks = context.subtasks
            if subtasks is None:
                subtasks = context.subtasks = Subtasks()
    settle_in = contextvars.copy_context()
    settle_in.run(current_task.set, context)
    sub, future = subtasks.add(settle_in)
    table = subtasks  # not None (a name the callback can close over as such)
    future.add_done_callback(lambda done: _withdraw(context, table, sub, done))
    sender(context, sub, ref, args, kwargs, node)
    return future


def _withdraw(context: TaskContext, subtasks: SubtaskTable, sub: int, done: concurrent.futures.Future[Any]) -> None:
    """A subtask's future completed: if the task cancelled it, its nested task is stopped as well
    (it would otherwise run to its end, holding a slot of the pool)."""
    if not done.cancelled() or not subtasks.forget(sub):
        return
    canceller = runtime.subtask_canceller
    if canceller is not None:
        canceller(context, sub)


def _current_context(caller: str) -> TaskContext:
    context = running_task()
    if context is None or runtime.subtask_sender is None:
        if runtime.cluster is None:
            raise RuntimeError(
                f"skyward.dispatch.{caller}() is only available inside a task running on a Skyward worker"
            )
        raise RuntimeError(
            f"skyward.dispatch.{caller}() must be called from a running task "
            "(from its own thread, or a thread it started while it is the only task running in this process)"
        )
    return context


def _function_ref(fn: str | Callable[..., Any]) -> str:
    if isinstance(fn, str):
        module, separator, qualname = fn.partition(":")
        if not separator or not module or not qualname:
            raise ValueError(f"fn {fn!r} is not of the form 'module:qualname'")
        return fn
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not callable(fn) or not isinstance(module, str) or not isinstance(qualname, str):
        raise TypeError(f"fn must be a 'module:qualname' string or a module-level function, not {type(fn).__name__}")
    if module == "__main__" or "<" in qualname:
        raise ValueError(
            f"{module}.{qualname} cannot be found by name on another worker: dispatch a function defined "
            "at the top level of an importable module"
        )
    return f"{module}:{qualname}"


def node_indices(cluster: Any) -> List[int]:
    """The pool's node indices as the last ``cluster`` message told them: its peers' (an elastic
    pool's may have gaps), else ``0..total_nodes - 1``."""
    if cluster is None:
        return [0]
    peers = sorted({peer.node for peer in cluster.peers})
    return peers if len(peers) == cluster.total_nodes else list(range(cluster.total_nodes))


def submit(
    fn: str | Callable[..., Any],
    args: Iterable[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    node: int | None = None,
) -> concurrent.futures.Future[Any]:
    """Run ``fn(*args, **kwargs)`` as a nested task somewhere in the pool (on ``node`` if given).

    ``fn`` is ``"module:qualname"`` or a module-level function. Arguments and the result are wire
    values (JSON-like, bytes for pickled payloads). The future's ``result()`` raises
    :class:`SubtaskError` when the nested task fails.

    Raises ``RuntimeError`` outside a task, ``SerializationError`` for an argument that cannot be
    sent, ``ValueError`` for a node that does not exist.
    """
    context = _current_context("submit")
    ref = _function_ref(fn)
    if node is not None:
        nodes = node_indices(runtime.cluster)
        if type(node) is not int or node not in nodes:
            shown = f"0..{len(nodes) - 1}" if nodes == list(range(len(nodes))) else ", ".join(map(str, nodes))
            raise ValueError(f"node must be null or a node index {shown}, not {node!r}")
    wire_args = to_wire(list(args), "args")
    wire_kwargs = to_wire(dict(kwargs) if kwargs is not None else {}, "kwargs")
    return send_subtask(context, ref, wire_args, wire_kwargs, node)


def capacity() -> int:
    """The pool's task slots: nodes × concurrency (what ``n_jobs=-1`` means)."""
    cluster = runtime.cluster
    if cluster is None:
        raise RuntimeError("skyward.dispatch.capacity() is only available on a Skyward worker")
    return cluster.total_nodes * runtime.concurrency


def end_subtasks(context: TaskContext) -> None:
    """The task ended or was stopped: cancel its pending futures."""
    subtasks = context.subtasks
    if subtasks is not None:
        subtasks.close()
    else:
        # A submit racing with the end must not create a table nobody closes.
        with runtime.lock:
            if context.subtasks is None:
                context.subtasks = _CLOSED
            else:
                context.subtasks.close()


def _closed_table() -> Subtasks:
    table = Subtasks()
    table.close()
    return table


_CLOSED = _closed_table()
