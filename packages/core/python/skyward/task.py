"""A submitted task, and the two protocols between the worker and the executors that run tasks.

:class:`Executor` is what the worker asks of an executor (``executors.py`` has the thread kind,
``process_executor.py`` the process kind); :class:`Host` is what an executor reports back to, on
the event loop thread. :func:`next_queued` and :func:`apply_declared_timeout` serve both kinds.
"""

from __future__ import annotations

from typing import Any, Callable, Deque, Dict, List, Optional, Protocol

from .context import SubtaskOutcome, TaskContext
from .execution import InputStream, Outcome
from .protocol import StreamRef


class Task:
    """A submitted task, as the worker tracks it."""

    __slots__ = (
        "id", "fn", "args", "kwargs", "timeout", "stream", "pin", "connection", "state", "slot",
        "context", "inputs", "stream_indices", "nested", "subtasks", "thread_id", "interrupted", "default_timeout",
        "keep",
    )

    def __init__(
        self,
        task_id: str,
        fn: str,
        args: List[Any],
        kwargs: Dict[str, Any],
        timeout: float | None,
        stream: bool,
        pin: int | None,
        connection: Any,
        nested: bool = False,
    ) -> None:
        self.id = task_id
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.timeout = timeout
        self.stream = stream
        #: the result stays on this node (a remote reference) instead of going back
        self.keep = False
        self.pin = pin
        self.connection = connection
        self.state = "queued"  # → "running" → "done"
        self.slot = -1
        self.context: TaskContext | None = None
        self.inputs: Dict[int, InputStream] = {}
        self.stream_indices = [arg.index for arg in args if type(arg) is StreamRef] + [
            value.index for value in kwargs.values() if type(value) is StreamRef
        ]
        #: run on the worker's nested pool (a subtask of another task)
        self.nested = nested
        #: ``timeout`` is the pool's default: a ``@sky.function(timeout=…)`` replaces it
        self.default_timeout = False
        #: numbers of this task's subtasks sent to the client and not answered yet
        self.subtasks: set[int] | None = None
        #: the thread running the task, while it may be interrupted (thread executor)
        self.thread_id: int | None = None
        #: the task was stopped (thread executor): an interrupt was sent to ``thread_id`` (at most one
        #: per task), or, stopped before its turn opened, it never runs
        self.interrupted = False


class Host(Protocol):
    """What an executor reports to, always on the event loop thread (threads go through post)."""

    def post(self, callback: Callable[..., None], *args: Any) -> None: ...
    def on_started(self, task: Task) -> None: ...
    def on_item(self, task: Task, seq: int, value: Any) -> None: ...
    def on_done(self, task: Task, outcome: Outcome) -> None: ...
    def on_output(self, task: Task | None, slot: int | None, stream: str, data: str) -> None: ...
    def on_pull(self, task: Task, stream_index: int, n: int) -> None: ...
    def restart_clock(self, task: Task) -> None:
        """Times ``task`` out ``task.timeout`` seconds from now (a declared ``@sky.function(timeout=…)``)."""
        ...
    def on_subtask(self, task: Task, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any],
                   node: int | None) -> None: ...
    def on_subcancel(self, task: Task, sub: int) -> None:
        """``task`` cancelled the future of its subtask ``sub``."""
        ...
    def on_metric(self, task: Task, name: str, value: float, step: int | None) -> None:
        """A value ``task`` reported (``skyward.report_metric``)."""
        ...
    def app_gate(self, retry: Callable[[], None], nested: bool = False) -> Outcome | bool:
        """True once the ``around_app`` hooks are entered, the failure outcome if they failed, or
        False while they are being entered (``retry`` is called when that is over) or wait, stale,
        for the children's tasks to end (``nested``: the nested-task executor asks, whose subtasks
        join stale hooks their parents are inside)."""
        ...


class Executor(Protocol):
    """Where tasks run: :class:`~skyward.executors.ThreadExecutor` or
    :class:`~skyward.process_executor.ProcessExecutor`.

    Every method is called on the event loop thread.
    """

    #: ``"thread"`` or ``"process"`` (told to clients in ``welcome``)
    name: str

    def apply_cluster(self, cluster: Dict[str, Any], env: Dict[str, str]) -> None:
        """The ``cluster`` message (without its env) and its env, for the slots' processes."""
        ...

    def apply_env(self, changes: Dict[str, str | None]) -> None:
        """Environment changes made in the worker (``around_app``); None removes a variable."""
        ...

    def enqueue(self, task: Task) -> None:
        """Queue ``task`` (its ``pin``, when set, names the slot that must run it)."""
        ...

    def cancel_queued(self, task: Task) -> bool:
        """Drop a task no slot has taken yet (it becomes ``done``); False if one has."""
        ...

    def stop_task(self, task: Task) -> None:
        """Stop a running task (its outcome, should one still come, is discarded by the host)."""
        ...

    def deliver_input(self, task: Task, stream_index: int, kind: str, value: Any) -> None:
        """An ``in``, ``in_end`` or ``in_error`` for one of a running task's input streams."""
        ...

    def deliver_subresult(self, task: Task, sub: int, outcome: SubtaskOutcome) -> None:
        """The answer to one of a running task's subtasks (nested dispatch)."""
        ...

    def begin_close(self) -> None:
        """Start nothing new: the worker is stopping."""
        ...

    async def close(self) -> None:
        """Stop the slots (what is idle exits cleanly; what is busy is left or killed)."""
        ...


def next_queued(tasks: Deque[Task]) -> Optional[Task]:
    """The first task of ``tasks`` still queued, taken off it (with those before it, no longer queued)."""
    while tasks:
        task = tasks.popleft()
        if task.state == "queued":
            return task
    return None


def apply_declared_timeout(host: Host, task: Task, seconds: float) -> None:
    """A running task's function declares ``@sky.function(timeout=seconds)``: its clock, unless the
    client gave a timeout of its own."""
    if task.state == "running" and (task.timeout is None or task.default_timeout):
        task.timeout = seconds
        task.default_timeout = False
        host.restart_clock(task)
