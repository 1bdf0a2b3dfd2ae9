"""The thread executor: where the worker's tasks run under ``executor: "thread"``.

``thread`` runs tasks on ``concurrency`` long-lived threads (one per slot); a cancelled or
timed-out task gets an asynchronous exception in its thread (:meth:`ThreadExecutor.stop_task`).
``process`` (``process_executor.py``) runs each slot's tasks in a child interpreter. Both report
back to the worker (the *host*) on the event loop thread through the :class:`~skyward.task.Host`
methods; the worker drives either through the :class:`~skyward.task.Executor` protocol.

A worker has one executor for its tasks and, once a nested task arrives, a second one of the same
kind for nested tasks (nested dispatch), whose slots are numbered after the first one's
(``first_slot``): so parents waiting on nested tasks never take the slots those need.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from . import deferred_interrupts
from .context import SubtaskOutcome, TaskContext, current_task, runtime
from .dispatch import end_subtasks
from .execution import InputStream, TaskRunner, error_outcome, exception_outcome
from .output import OutputRouter
from .protocol import StreamRef
from .task import Host, Task, apply_declared_timeout, next_queued

#: seconds after an interrupt when a thread still inside its task is reported as stuck in a C call
INTERRUPT_REPORT_DELAY = 1.0


def _with_streams(
    args: List[Any], kwargs: Dict[str, Any], make: Callable[[int], Any]
) -> Tuple[List[Any], Dict[str, Any]]:
    """Replace whole-argument ``StreamRef`` markers with ``make(index)``."""
    return (
        [make(arg.index) if type(arg) is StreamRef else arg for arg in args],
        {key: make(value.index) if type(value) is StreamRef else value for key, value in kwargs.items()},
    )


# ---------------------------------------------------------------------------------------------
# thread
# ---------------------------------------------------------------------------------------------


class TaskInterrupted(deferred_interrupts.Interrupt):
    """Raised in a slot thread whose task was cancelled or timed out (a ``BaseException``, so the
    task's ``except Exception`` blocks let it through; its ``finally`` blocks run). Raised at most
    once: a task that catches it and carries on runs on."""


class ThreadExecutor:
    """``concurrency`` long-lived threads taking tasks from one shared queue (plus one per slot
    for pinned tasks). Threads take their next task themselves, so a busy worker needs no event
    loop round trip between tasks; results reach the loop in batches through ``host.post``.
    """

    name = "thread"

    def __init__(self, concurrency: int, runner: TaskRunner, host: Host, router: OutputRouter,
                 log: Callable[[str], None], first_slot: int = 0, label: str = "slot") -> None:
        self.concurrency = concurrency
        self.first_slot = first_slot
        self._label = label
        self._runner = runner
        runner.on_declared_timeout = self._declared_timeout
        self._host = host
        self._router = router
        self._log = log
        self._condition = threading.Condition()
        #: guards every task's ``thread_id``/``interrupted``: an interrupt is sent only while the
        #: task's own turn in its thread is open (a plain Lock: its ``with`` leaves no bytecode
        #: between acquiring and the block, where an asynchronous exception could strand it)
        self._turns = threading.Lock()
        self._shared: Deque[Task] = collections.deque()
        self._pinned: List[Deque[Task]] = [collections.deque() for _ in range(concurrency)]
        self._threads: List[Optional[threading.Thread]] = [None] * concurrency
        self._closing = False
        for slot in range(concurrency):
            self._start_thread(slot)

    def _start_thread(self, slot: int) -> None:
        thread = threading.Thread(target=self._serve, args=(slot,), name=f"skyward-{self._label}-{slot}", daemon=True)
        self._threads[slot] = thread
        thread.start()

    def apply_cluster(self, cluster: Dict[str, Any], env: Dict[str, str]) -> None:
        pass  # threads share the worker's process state

    def enqueue(self, task: Task) -> None:
        with self._condition:
            if task.pin is None:
                self._shared.append(task)
                self._condition.notify()
            else:
                self._pinned[task.pin].append(task)
                self._condition.notify_all()

    def cancel_queued(self, task: Task) -> bool:
        """Drop a task no thread has taken yet; False if one has."""
        with self._condition:
            if task.state == "queued":
                task.state = "done"
                return True
            return False

    def _take(self, slot: int) -> Optional[Task]:
        me = threading.current_thread()
        with self._condition:
            while True:
                if self._threads[slot] is not me or self._closing:
                    return None
                task = next_queued(self._pinned[slot]) or next_queued(self._shared)
                if task is not None:
                    task.state = "running"
                    task.slot = self.first_slot + slot
                    return task
                self._condition.wait()

    def _prepare(self, task: Task) -> Tuple[List[Any], Dict[str, Any]]:
        task.context = self._router.new_context(task, task.slot)
        if not task.stream_indices:
            return task.args, task.kwargs
        post = self._host.post
        on_pull = self._host.on_pull

        def make(index: int) -> InputStream:
            stream = InputStream(index, lambda n: post(on_pull, task, index, n))
            task.inputs[index] = stream
            return stream

        return _with_streams(task.args, task.kwargs, make)

    def _serve(self, slot: int) -> None:
        runner = self._runner
        host = self._host
        post = host.post
        running = runtime.running
        while True:
            task = self._take(slot)
            if task is None:
                return
            args, kwargs = self._prepare(task)
            context = task.context
            assert context is not None
            if task.timeout is not None:
                post(host.on_started, task)

            def emit(seq: int, value: Any, task: Task = task, context: TaskContext = context) -> None:
                post(host.on_item, task, seq, value)
                connection = task.connection  # (a LocalParent for a subtask run here: no bytes)
                if getattr(connection, "unsent_bytes", 0) > connection.high_water:
                    # Its client takes the items slower than the task makes them: the task waits.
                    connection.wait_drained(lambda: context.abandoned)

            token = current_task.set(context)
            running.add(context)
            try:
                try:
                    self._open_turn(task)
                    try:
                        outcome = runner.run(task.fn, args, kwargs, task.stream, emit, context, task.keep)
                    finally:
                        self._close_turn(task)
                except TaskInterrupted:
                    # Landed outside the task's own code (the runner reports the rest as an error);
                    # the task is finished already, so this outcome is discarded.
                    self._close_turn(task)
                    outcome = error_outcome("cancelled", "TaskInterrupted", "the task was stopped")
                except BaseException as error:  # the runtime's own failure: the task is answered, the slot lives on
                    outcome = exception_outcome(error)
            finally:
                running.discard(context)
                current_task.reset(token)
                end_subtasks(context)
            context.close()
            post(host.on_done, task, outcome)

    def _declared_timeout(self, context: TaskContext, seconds: float) -> None:
        # @sky.function(timeout=…): the task's clock, when the client gave it none.
        self._host.post(apply_declared_timeout, self._host, context.key, seconds)

    def _open_turn(self, task: Task) -> None:
        with self._turns:
            if task.interrupted:
                # Stopped after its thread took it and before its turn opened: it never runs (no
                # interrupt could reach it then, and the slot has a fresh thread already).
                raise TaskInterrupted()
            task.thread_id = threading.get_ident()

    def _close_turn(self, task: Task) -> None:
        """End the time an interrupt may be sent for ``task``; withdraw one sent but not raised yet,
        so it never lands in what the thread runs next."""
        with self._turns:
            task.thread_id = None
            if task.interrupted:
                deferred_interrupts.forget(threading.get_ident())

    def _interrupt(self, task: Task) -> int | None:
        """Raise :class:`TaskInterrupted` in the thread running ``task``; the thread id, or None
        when the task's turn is not open (not yet, or over) or it was interrupted already."""
        with self._turns:
            thread_id = task.thread_id
            if task.interrupted:
                return None
            # Marked even before its turn opens (its thread took it, and prepares it): the turn never
            # opens then (_open_turn).
            task.interrupted = True
            if thread_id is None:
                return None
            # Held while the thread takes a frame of the collections' copy (deferred_interrupts.py).
            return thread_id if deferred_interrupts.send(thread_id, TaskInterrupted) else None

    def stop_task(self, task: Task) -> None:
        """Interrupt the task's thread and give its slot a fresh thread.

        The interrupt stops Python code at its next bytecode; code inside a C call (``time.sleep``,
        a blocking read, a long numpy operation) runs on until the call returns. Either way the old
        thread exits once its task has returned, and the slot serves the next task at once.
        """
        if task.context is not None:
            task.context.abandoned = True
            end_subtasks(task.context)
        for stream in task.inputs.values():
            stream.fail("the task was stopped")
        thread_id = self._interrupt(task)
        with self._condition:
            self._start_thread(task.slot - self.first_slot)
            self._condition.notify_all()
        if thread_id is not None:
            asyncio.get_running_loop().call_later(INTERRUPT_REPORT_DELAY, self._report_stuck, task, thread_id)

    def _report_stuck(self, task: Task, thread_id: int) -> None:
        if task.thread_id == thread_id:
            self._log(
                f"task {task.id} ({task.fn}) was stopped, but its thread is still running it "
                f"{INTERRUPT_REPORT_DELAY:g} s later: it is inside a call Python cannot interrupt (C code "
                "such as time.sleep, a blocking read or a native library; it stops when that returns) "
                'or it caught the interrupt; use executor "process" for code that must stop at once'
            )

    def deliver_input(self, task: Task, stream_index: int, kind: str, value: Any) -> None:
        stream = task.inputs.get(stream_index)
        if stream is None:
            return
        if kind == "in":
            stream.push(value)
        elif kind == "in_end":
            stream.finish()
        else:
            stream.fail(str(value))

    def deliver_subresult(self, task: Task, sub: int, outcome: SubtaskOutcome) -> None:
        subtasks = task.context.subtasks if task.context is not None else None
        if subtasks is not None:
            subtasks.resolve(sub, outcome)

    def apply_env(self, changes: Dict[str, str | None]) -> None:
        pass  # threads share the worker's environment

    def begin_close(self) -> None:
        """Take no more tasks (threads still running user code are left to finish or not)."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()

    async def close(self) -> None:
        self.begin_close()
