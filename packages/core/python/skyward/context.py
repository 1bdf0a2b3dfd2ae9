"""The worker's own state that task code can see: the cluster it belongs to and the running task.

A worker process (and each process-executor child) sets the cluster once it receives it; each
task runs with its :class:`TaskContext` in the ``current_task`` context variable, which is how
output is routed to the task that wrote it and how ``sky.instance_info()`` knows the worker slot.
"""

from __future__ import annotations

import contextvars
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Protocol, Set, Tuple

from .info import InstanceInfo, set_current_provider

if TYPE_CHECKING:
    import concurrent.futures

SubtaskOutcome = Tuple[str, Any]
"""``("value", value)`` or ``("error", {"kind", "type", "message", "traceback", "node"})``."""

SubtaskSender = Callable[["TaskContext", int, str, List[Any], Dict[str, Any], "int | None"], None]
"""``send(context, sub, fn, args, kwargs, node)``: hands a subtask to the host, which sends it to the client."""

SubtaskCanceller = Callable[["TaskContext", int], None]
"""``cancel(context, sub)``: the task cancelled its subtask ``sub``'s future; the host stops the subtask."""

CollectionCaller = Callable[["TaskContext", Any, bool], "concurrent.futures.Future[Any] | None"]
"""``call(context, request, blocking)``: a collection operation applied by the calling task thread itself
(see ``collections.py``); None when it goes as a subtask."""

MetricSender = Callable[["TaskContext", str, float, "int | None"], None]
"""``send(context, name, value, step)``: hands a value a task reported to the host, which sends it to the client."""


# A TaskContext holds objects that ``output`` and ``dispatch`` make, and both of those modules
# import this one. These protocols describe what the context's users call on those objects, in
# place of their classes, so that the imports go one way (no cycle, not even for type checking).


class TaskChannel(Protocol):
    """One output stream of a task (an ``output.OutputChannel``)."""

    def write(self, text: str) -> None: ...

    def flush(self) -> None: ...


class SubtaskTable(Protocol):
    """A task's pending nested-dispatch futures, numbered from 0 (a ``dispatch.Subtasks``)."""

    def add(self, context: contextvars.Context) -> Tuple[int, concurrent.futures.Future[Any]]: ...

    def resolve(self, sub: int, outcome: SubtaskOutcome) -> None: ...

    def forget(self, sub: int) -> bool: ...

    def close(self) -> None: ...


class _Runtime:
    """Per-process runtime state, set by the worker (or executor child) that hosts the tasks."""

    __slots__ = ("cluster", "lock", "concurrency", "subtask_sender", "subtask_canceller", "collection_caller",
                 "metric_sender", "running", "nested")

    def __init__(self) -> None:
        self.cluster: InstanceInfo | None = None
        self.lock = threading.Lock()
        #: task slots per node (for ``skyward.dispatch.capacity()``)
        self.concurrency = 1
        #: how tasks of this process reach the client with nested dispatch (None: they cannot)
        self.subtask_sender: SubtaskSender | None = None
        #: how a task of this process stops a subtask whose future it cancelled (None: only locally)
        self.subtask_canceller: SubtaskCanceller | None = None
        #: how a task thread of the worker applies a collection operation itself (None in a
        #: process-executor child: its operations go as subtasks through its worker)
        self.collection_caller: CollectionCaller | None = None
        #: how tasks of this process report values (``skyward.report_metric``); None outside a worker
        self.metric_sender: MetricSender | None = None
        #: the tasks running in this process, for code that runs outside any task's context
        self.running: Set[TaskContext] = set()
        #: whether this process is a child of the worker's nested-task executor (it runs subtasks;
        #: with one worker per accelerator it shares the device of a worker, but is no rank of its own)
        self.nested = False


runtime = _Runtime()


class TaskContext:
    """One running task, as seen from inside it."""

    __slots__ = ("key", "slot", "muted", "channels", "abandoned", "subtasks")

    def __init__(self, key: Any, slot: int, channels: tuple[TaskChannel, TaskChannel]) -> None:
        #: what the host uses to find the task again (a task object, or the task id in a child)
        self.key = key
        self.slot = slot
        #: nesting counts of output filters for (stdout, stderr); > 0 means dropped
        self.muted = [0, 0]
        self.channels = channels
        #: set when the task was cancelled or timed out (its thread may run on inside a C call)
        self.abandoned = False
        #: the task's nested-dispatch futures, created by its first ``skyward.dispatch.submit``
        self.subtasks: SubtaskTable | None = None

    def close(self) -> None:
        """Send whatever output is still buffered (before the task's terminal message)."""
        for channel in self.channels:
            channel.flush()


current_task: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar(
    "skyward_current_task", default=None
)


def set_cluster(info: InstanceInfo | None) -> None:
    runtime.cluster = info


def instance_info() -> InstanceInfo:
    """This worker's place in the cluster.

    Raises ``RuntimeError`` outside a Skyward worker (where there is no cluster to describe).
    """
    cluster = runtime.cluster
    if cluster is None:
        raise RuntimeError(
            "sky.instance_info() is only available inside a task running on a Skyward worker "
            "(no cluster information in this process)"
        )
    task = current_task.get()
    if task is None or cluster.workers_per_node <= 1:
        return cluster
    return cluster.for_worker(task.slot % cluster.workers_per_node)


set_current_provider(instance_info)  # InstanceInfo.current()


def in_worker() -> bool:
    return runtime.cluster is not None


Sink = Callable[[Any, str, str], None]
